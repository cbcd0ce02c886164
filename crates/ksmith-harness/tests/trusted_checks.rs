//! The trusted server's output checks, run as Python scripts with the managed environment and
//! the harness this binary writes.

use std::process::Command;

/// Runs `tests/<script>` with the harness on `sys.path`; returns its output, asserting success.
fn run(script: &str) -> String {
    let env = ksmith_harness::PythonEnv::resolve(None, &|_| {}).expect("ksmith's python");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = Command::new(&env.python)
        .arg(&path)
        .env("PYTHONPATH", &env.harness_dir)
        .env("JAX_PLATFORMS", "cpu")
        .output()
        .expect("run python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ok: "), "{text}");
    text
}

#[test]
fn the_native_output_check_agrees_with_numpy_wherever_it_decides() {
    run("compare_check.py");
}

#[test]
fn an_unusable_output_file_is_a_verdict_on_the_candidate() {
    run("output_files_check.py");
}

/// The runner's host-work check (not the trusted server's, but run the same way): Pallas
/// programs walked outside their kernels, Triton's interpreter tensors reporting arithmetic.
#[test]
fn host_compute_outside_the_kernels_is_found_and_layout_work_is_not() {
    run("hostwork_check.py");
}
