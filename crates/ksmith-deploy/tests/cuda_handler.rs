//! The exported package's CUDA handler compiles with a real nvcc against XLA's FFI headers (from
//! jaxlib, `jax.ffi.include_dir()`), with no GPU: nvcc is the machine's or the pinned wheels'
//! in the managed Python environment (installed on first use, as the judge does). The handler
//! and the starter CUDA kernel are linked into one library as the package's `_runtime.py`
//! builds it, and handlers for tasks with bfloat16 tensors and scalars compile to objects.

use ksmith_backend::cuda;
use ksmith_deploy::{handler_source as source, Device};
use ksmith_harness::PythonEnv;
use ksmith_task::Task;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The managed environment's Python and an nvcc (installed into it when the machine has none).
fn toolchain() -> (PythonEnv, cuda::Nvcc) {
    let env =
        PythonEnv::resolve(None, &|m| eprintln!("{m}")).expect("the harness's Python environment");
    let prefixes: Vec<PathBuf> = env.prefix().into_iter().collect();
    if let Some(n) = cuda::find_nvcc(&prefixes) {
        return (env, n);
    }
    env.ensure_installed(
        "nvcc",
        cuda::CUDA_REQUIREMENTS,
        &|| prefixes.iter().any(|p| cuda::wheel_nvcc(p).is_some()),
        &|m| eprintln!("{m}"),
    )
    .unwrap_or_else(|e| panic!("no nvcc here and the CUDA wheels did not install: {e}"));
    let n = cuda::find_nvcc(&prefixes).expect("nvcc from the CUDA wheels");
    (env, n)
}

fn ffi_include(env: &PythonEnv) -> String {
    let out = Command::new(&env.python)
        .args(["-c", "import jax.ffi; print(jax.ffi.include_dir())"])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(Path::new(&dir).join("xla/ffi/api/ffi.h").is_file(), "{dir}");
    dir
}

fn nvcc(n: &cuda::Nvcc, dir: &Path, args: &[&str]) {
    let out = Command::new(&n.path)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run nvcc");
    assert!(
        out.status.success(),
        "nvcc {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_cuda_handler_compiles_with_nvcc_and_links_with_the_kernel_as_the_package_builds_it() {
    let (env, n) = toolchain();
    let include = format!("-I{}", ffi_include(&env));
    let arch = format!("-arch={}", cuda::GpuTarget::DEFAULT.nvcc_arch());
    let dir = tempfile::tempdir().unwrap();

    // vector_add: handler + the starter kernel into one library, _runtime.py's command.
    let task = Task::load(&root().join("tasks/starter/vector_add")).unwrap();
    let src = source(&task, "vector_add", "ksmith_ffi_vector_add", Device::Cuda).unwrap();
    std::fs::write(dir.path().join("ffi_handler.cu"), src).unwrap();
    std::fs::copy(
        root().join("tasks/starter/vector_add/solutions/cuda_fast/kernel.cu"),
        dir.path().join("kernel.cu"),
    )
    .unwrap();
    nvcc(
        &n,
        dir.path(),
        &[
            "-O3",
            "-std=c++17",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            &include,
            &arch,
            "kernel.cu",
            "ffi_handler.cu",
            "-o",
            "lib.so",
        ],
    );
    let lib = std::fs::read(dir.path().join("lib.so")).unwrap();
    let needle = b"ksmith_ffi_vector_add";
    assert!(
        lib.windows(needle.len()).any(|w| w == needle),
        "the handler's symbol is in the library"
    );

    // A bfloat16 task and one with a scalar input: their handlers compile too.
    for (name, entry) in [
        ("rmsnorm_llm_bf16", "rmsnorm_llm_bf16"),
        ("conv2d_scaling_min", "conv2d_scaling_min"),
    ] {
        let task = Task::load(&root().join("tasks/ksbench").join(name)).unwrap();
        let src = source(&task, entry, &format!("ksmith_ffi_{name}"), Device::Cuda).unwrap();
        let file = format!("{name}.cu");
        std::fs::write(dir.path().join(&file), src).unwrap();
        let obj = format!("{name}.o");
        nvcc(
            &n,
            dir.path(),
            &[
                "-std=c++17",
                "-Xcompiler",
                "-fPIC",
                &include,
                &arch,
                "-c",
                &file,
                "-o",
                &obj,
            ],
        );
        assert!(dir.path().join(&obj).is_file());
    }
}
