//! Triton and Pallas solutions: Python modules staged for the runner (no native build).
//! Their static policy runs in the trusted harness process on the parsed AST.

use ksmith_task::Solution;
use std::path::{Path, PathBuf};

/// Writes the solution's sources under `cache_dir/py-<hash>/` (once) and returns the path of
/// its first source, the module the runner imports.
pub fn stage(solution: &Solution, cache_dir: &Path) -> std::io::Result<PathBuf> {
    let dir = cache_dir.join(format!(
        "py-{}",
        &solution.content_hash[..16.min(solution.content_hash.len())]
    ));
    for (name, text) in &solution.sources {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, text)?;
    }
    let first = solution
        .sources
        .first()
        .map(|(n, _)| n.as_str())
        .unwrap_or("kernel.py");
    Ok(dir.join(first))
}
