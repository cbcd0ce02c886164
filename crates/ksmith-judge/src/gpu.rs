//! The GPU backends' build stage, on any machine: nvcc (the machine's, or the pinned wheels
//! installed into the managed Python environment on first use) and Triton's ahead-of-time
//! compile, both for the GPU target in force (`KSMITH_GPU_TARGET`, else the device's, else
//! sm_90). Where no device can run what was built, the judge says so with the build's facts.

use crate::result::{BuildInfo, EvalResult, NotRunReason};
use crate::JudgeError;
use ksmith_backend::cuda::{self, GpuTarget, Nvcc, TargetSource};
use ksmith_backend::triton::{self, AotOutcome};
use ksmith_harness::PythonEnv;
use ksmith_task::{Solution, Task};
use std::path::Path;

/// The GPU target to build for; a setting that does not parse is the user's to fix.
pub(crate) fn target() -> Result<(GpuTarget, TargetSource), JudgeError> {
    GpuTarget::resolve().map_err(|why| JudgeError::Unavailable {
        backend: "gpu",
        reason: NotRunReason::NoCompiler,
        why,
        built: None,
    })
}

/// nvcc for CUDA builds: found on the machine or in the harness's environment, else installed
/// there from `requirements-cuda.txt` (managed environment only), else unavailable.
pub(crate) fn nvcc(env: &PythonEnv) -> Result<Nvcc, JudgeError> {
    let prefixes: Vec<_> = env.prefix().into_iter().collect();
    if let Some(n) = cuda::find_nvcc(&prefixes) {
        return Ok(n);
    }
    let installed = env.ensure_installed(
        "nvcc (the CUDA toolchain wheels)",
        cuda::CUDA_REQUIREMENTS,
        &|| prefixes.iter().any(|p| cuda::wheel_nvcc(p).is_some()),
        &|m| eprintln!("ksmith: {m}"),
    );
    let unavailable = |why: String| JudgeError::Unavailable {
        backend: "cuda",
        reason: NotRunReason::NoCompiler,
        why,
        built: None,
    };
    installed.map_err(|e| unavailable(format!("nvcc not found and not installed: {e}")))?;
    cuda::find_nvcc(&prefixes).ok_or_else(|| {
        unavailable(format!(
            "nvcc not found (set NVCC or CUDA_HOME, put nvcc on PATH, or install {} into the harness's Python)",
            cuda::CUDA_REQUIREMENTS
        ))
    })
}

/// The workload Triton's host code is called with ahead of time: the smallest one judged
/// (its shapes decide the kernels' specializations).
fn workload_json(task: &Task) -> serde_json::Value {
    let axes = task
        .workloads
        .get(task.smallest_workload())
        .map(|w| w.axes.clone())
        .unwrap_or_default();
    let spec = |t: &ksmith_task::TensorSpec| serde_json::json!({"name": t.name, "dtype": t.dtype.name(), "shape": t.dims(&axes)});
    serde_json::json!({
        "inputs": task.inputs.iter().map(spec).collect::<Vec<_>>(),
        "outputs": task.outputs.iter().map(|o| spec(&o.tensor)).collect::<Vec<_>>(),
        "axes": task.axes.iter().map(|a| axes.get(&a.name).copied().unwrap_or(0)).collect::<Vec<_>>(),
    })
}

/// Compiles a Triton solution's kernels ahead of time for the target in force, in the build
/// sandbox, and records the build in `r`. A kernel that does not compile is the returned
/// failure (`COMPILE_ERROR`); a host function that cannot be run ahead of time (it needs
/// torch or a device) is noted in the build log and the interpreter's or device's run judges.
pub(crate) fn triton_build(
    env: &PythonEnv,
    task: &Task,
    solution: &Solution,
    module: &Path,
    cache_dir: &Path,
    r: &mut EvalResult,
) -> Result<Option<ksmith_backend::c::BuildFailure>, JudgeError> {
    let (target, _) = target()?;
    let req = triton::AotRequest {
        python: &env.python,
        harness_dir: &env.harness_dir,
        read: env.runner_view(),
        target,
        module,
        entry: &solution.entry_point,
        workload: workload_json(task),
    };
    let what = format!("triton: compile for {target} ahead of time");
    Ok(match triton::compile(&req, solution, cache_dir)? {
        AotOutcome::Built(b) => {
            r.build = Some(BuildInfo {
                cached: b.cached,
                seconds: b.seconds,
                command: vec![what],
                diagnostics: Vec::new(),
                log: format!("triton {}\n{}", b.triton, b.log),
                ptxas: b.facts,
            });
            None
        }
        AotOutcome::Failed(mut f) => {
            f.command = vec![what];
            Some(f)
        }
        AotOutcome::Skipped(why, detail) => {
            r.build = Some(BuildInfo {
                cached: false,
                seconds: 0.0,
                command: vec![what],
                diagnostics: Vec::new(),
                log: format!("not compiled ahead of time ({why:?}): {detail}\n"),
                ptxas: Vec::new(),
            });
            None
        }
    })
}

/// The judge's word on a candidate that built but has no device to run on here: unavailable,
/// with the build's facts (registers, spills, shared memory) kept for the caller.
pub(crate) fn not_run(backend: &'static str, target: GpuTarget, r: &EvalResult) -> JudgeError {
    let kernels = r.build.as_ref().map(|b| b.ptxas.len()).unwrap_or(0);
    JudgeError::Unavailable {
        backend,
        reason: NotRunReason::NoDevice,
        why: format!(
            "built for {target} ({kernels} kernel{}); not run: no device (no GPU visible to the harness)",
            if kernels == 1 { "" } else { "s" }
        ),
        built: r.build.clone().map(Box::new),
    }
}
