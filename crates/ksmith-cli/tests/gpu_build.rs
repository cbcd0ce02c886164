//! The GPU backends' build stage through the real binary, on any machine: CUDA built with nvcc
//! (installed into the managed environment on first use where the machine has none) and
//! Triton compiled ahead of time, both for sm_90 unless `KSMITH_GPU_TARGET` says otherwise.
//! Without a GPU a CUDA candidate that builds is "built; not run: no device" with its ptxas
//! facts; compile errors are `COMPILE_ERROR` with their place in the source either way.

mod common;

use common::*;

/// `eval --json` of `solution` on the starter vector_add with extra environment variables.
fn eval(solution: &str, env: &[(&str, &str)]) -> (Option<i32>, serde_json::Value) {
    let out = ksmith_env(
        &shared_store(),
        &["eval", "tasks/starter/vector_add", solution, "--json"],
        env,
    );
    (out.status.code(), json(&out))
}

#[test]
fn cuda_starter_solutions_are_built_for_the_target_and_not_run_without_a_device() {
    if has_gpu() {
        return; // a machine with a GPU runs them (scripts/gpu-check.sh)
    }
    for (sol, target, arch) in [
        ("cuda_fast", None, "-arch=sm_90a"),
        ("cuda_naive", Some("sm_80"), "-arch=sm_80"),
    ] {
        let env: Vec<(&str, &str)> = target
            .map(|t| ("KSMITH_GPU_TARGET", t))
            .into_iter()
            .collect();
        let (code, v) = eval(&format!("tasks/starter/vector_add/solutions/{sol}"), &env);
        assert_eq!(code, Some(3), "{sol}: {v:#}");
        assert!(
            v["status"].is_null(),
            "{sol}: no verdict without a run: {v:#}"
        );
        assert_eq!(v["not_run"]["backend"], "cuda", "{sol}: {v:#}");
        assert_eq!(v["not_run"]["reason"], "no_device", "{sol}: {v:#}");
        let why = v["not_run"]["why"].as_str().unwrap_or("");
        assert!(why.contains("not run: no device"), "{sol}: {why}");
        let command = v["build"]["command"].as_array().unwrap();
        assert!(command.iter().any(|c| c == arch), "{sol}: {command:?}");
        // ptxas's facts for every kernel of the file (cuda_fast has two).
        let kernels = v["build"]["ptxas"].as_array().unwrap();
        assert_eq!(
            kernels.len(),
            if sol == "cuda_fast" { 2 } else { 1 },
            "{sol}: {v:#}"
        );
        for k in kernels {
            assert!(k["registers"].as_u64().unwrap_or(0) > 0, "{sol}: {k}");
            assert_eq!(k["spill_bytes"], 0, "{sol}: {k}");
        }
    }
}

#[test]
fn a_cuda_syntax_error_is_a_compile_error_at_its_line_and_column() {
    let (code, v) = eval("crates/ksmith-cli/tests/gpu/cuda_missing_semicolon.cu", &[]);
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(
        (&v["status"], &v["reason"]),
        (&"COMPILE_ERROR".into(), &"compile_error".into()),
        "{v:#}"
    );
    let d = &v["build"]["diagnostics"][0];
    assert_eq!(d["file"], "cuda_missing_semicolon.cu", "{v:#}");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(8), Some(1)),
        "{v:#}"
    );
    assert_eq!(
        (&d["severity"], &d["message"]),
        (&"error".into(), &"expected a \";\"".into())
    );
    // The fixer reads the detail and the diagnostics: the place is in both.
    assert_eq!(
        v["detail"],
        "cuda_missing_semicolon.cu:8:1: error: expected a \";\""
    );
}

#[test]
fn triton_starter_solutions_are_compiled_ahead_of_time_before_their_interpreter_run() {
    if has_gpu() {
        return;
    }
    let (code, v) = eval("tasks/starter/vector_add/solutions/triton_fast", &[]);
    assert_eq!((code, &v["status"]), (Some(0), &"PASSED".into()), "{v:#}");
    let build = &v["build"];
    assert!(
        build["command"][0]
            .as_str()
            .is_some_and(|c| c.contains("compile for sm_90 ahead of time")),
        "{build:#}"
    );
    // The interpret workloads are smaller than one full block: only the tail kernel launches.
    let kernels = build["ptxas"].as_array().unwrap();
    assert_eq!(kernels.len(), 1, "{build:#}");
    assert_eq!(kernels[0]["kernel"], "_add_tail_kernel");
    assert!(
        kernels[0]["registers"].as_u64().unwrap_or(0) > 0,
        "{build:#}"
    );
    // Still not timed: the interpreter ran it.
    assert!(v["timing_unavailable"].is_string(), "{v:#}");
}

#[test]
fn a_triton_kernel_that_does_not_compile_is_a_compile_error_at_its_line_and_column() {
    let (code, v) = eval("crates/ksmith-cli/tests/gpu/triton_undefined_name.py", &[]);
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(v["status"], "COMPILE_ERROR", "{v:#}");
    let d = &v["build"]["diagnostics"][0];
    assert_eq!(d["file"], "triton_undefined_name.py", "{v:#}");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(12), Some(17)),
        "{v:#}"
    );
    assert!(
        d["message"]
            .as_str()
            .unwrap_or("")
            .contains("bb is not defined"),
        "{v:#}"
    );
}
