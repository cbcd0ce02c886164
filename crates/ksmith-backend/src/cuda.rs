//! CUDA solutions: nvcc discovery. Without nvcc the backend is unavailable on the machine,
//! which is reported as such (never as a pass or a compile error).

use std::path::PathBuf;
use std::process::Command;

/// The nvcc to use: `$NVCC`, else `nvcc` on PATH, else `/usr/local/cuda/bin/nvcc`.
pub fn nvcc() -> Option<PathBuf> {
    let candidates = std::env::var_os("NVCC")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            PathBuf::from("nvcc"),
            PathBuf::from("/usr/local/cuda/bin/nvcc"),
        ]);
    candidates.into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}
