//! The trusted server's native output check agrees with its numpy check (`compare_check.py`,
//! run with the managed Python environment and the harness this binary writes).

use std::process::Command;

#[test]
fn the_native_output_check_agrees_with_numpy_wherever_it_decides() {
    let env = ksmith_harness::PythonEnv::resolve(None, &|_| {}).expect("ksmith's python");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compare_check.py");
    let out = Command::new(&env.python)
        .arg(&script)
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
}
