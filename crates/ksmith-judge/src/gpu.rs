//! What the GPU backends' build stage needs from the judge on any machine: the managed Python
//! environment's tools (a backend's requirement installed on first use: nvcc's wheels,
//! Triton), the GPU target in force (`KSMITH_GPU_TARGET`, else the device's, else sm_90), and
//! the judge's word when nothing here can run what was built.

use crate::result::{EvalResult, NotRunReason};
use crate::JudgeError;
use ksmith_backend::backend::{Backend, PythonTools, Requirement, Unavailable};
use ksmith_backend::cuda::{GpuTarget, TargetSource};
use ksmith_harness::PythonEnv;

/// The GPU target to build for; a setting that does not parse is the user's to fix.
pub(crate) fn target() -> Result<(GpuTarget, TargetSource), JudgeError> {
    GpuTarget::resolve().map_err(|why| JudgeError::Unavailable {
        backend: "gpu",
        reason: NotRunReason::NoCompiler,
        why,
        built: None,
    })
}

/// The environment's tools for `backend`'s build, its requirement installed first (into a
/// managed environment, once; an unmanaged one gets the command to run) and its toolchain
/// found, else the backend is unavailable here.
pub(crate) fn tools(env: &PythonEnv, backend: &dyn Backend) -> Result<PythonTools, JudgeError> {
    let tools = PythonTools {
        python: env.python.clone(),
        harness_dir: env.harness_dir.clone(),
        prefixes: env.prefix().into_iter().collect(),
        read: env.runner_view(),
    };
    let unavailable = |why: String| JudgeError::Unavailable {
        backend: backend.language().name(),
        reason: NotRunReason::NoCompiler,
        why,
        built: None,
    };
    let progress = |m: &str| eprintln!("ksmith: {m}");
    match backend.requirement() {
        Some(Requirement::Module { module, file }) => {
            env.ensure_module(module, file, &progress)?;
        }
        Some(Requirement::Tool {
            what,
            file,
            present,
        }) => {
            env.ensure_installed(what, file, &|| present(&tools.prefixes), &progress)
                .map_err(|e| unavailable(format!("{what} not found and not installed: {e}")))?;
        }
        None => {}
    }
    backend.toolchain(&tools).map_err(|u| match u {
        Unavailable::Tool(why) | Unavailable::NoDevice(why) | Unavailable::NoWorkloads(why) => {
            unavailable(why)
        }
    })?;
    Ok(tools)
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
