//! Triton solutions compiled ahead of time for a named NVIDIA GPU, with no device: the
//! harness's `tritonaot.py` runs in the build sandbox (it executes the candidate's host code),
//! compiles every kernel the entry point launches on stand-in tensors, and reports ptxas's
//! facts or compile errors placed in the source.

use crate::c::{run_sandboxed_scratch, BackendError, BuildFailure, Sandboxing};
use crate::cuda::{parse_ptxas, GpuTarget, PtxasFacts};
use crate::Diagnostic;
use ksmith_task::Solution;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A compile of many kernels (or autotune configs) stops here.
const AOT_TIMEOUT: Duration = Duration::from_secs(300);

/// What the ahead-of-time compile needs.
#[derive(Debug, Clone)]
pub struct AotRequest<'a> {
    /// The harness's Python (it has Triton).
    pub python: &'a Path,
    /// The directory holding `ksmith_harness/` (part of the cache key: a new harness recompiles).
    pub harness_dir: &'a Path,
    /// What the sandboxed Python must read: its installation and the harness.
    pub read: Vec<PathBuf>,
    /// The GPU to compile for.
    pub target: GpuTarget,
    /// The staged module (see [`crate::python::stage`]).
    pub module: &'a Path,
    /// Its entry point.
    pub entry: &'a str,
    /// The workload the entry is called with: `{"inputs": [{"name", "dtype", "shape"}],
    /// "outputs": [...], "axes": [values]}` (its shapes decide Triton's specializations).
    pub workload: serde_json::Value,
}

/// The workload Triton's host code is called with ahead of time: the smallest one judged (its
/// shapes decide the kernels' specializations), as [`AotRequest::workload`] wants it.
pub fn workload_of(task: &ksmith_task::Task) -> serde_json::Value {
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

/// One kernel compiled (one specialization or autotune config).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct AotKernel {
    /// The kernel's symbol.
    pub name: String,
    /// Warps per program.
    pub num_warps: u32,
    /// Software pipeline stages.
    pub num_stages: u32,
    /// Shared memory in bytes.
    pub shared: u32,
    /// Argument types as Triton specialized them (`*fp32`, `i32`, `constexpr`).
    pub signature: std::collections::BTreeMap<String, String>,
}

/// Why the entry point was not compiled although nothing failed to compile (informational:
/// the interpreter's or the device's run judges the candidate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotCompiled {
    /// The host code raised outside any kernel's compile (it may need the device or torch).
    HostError,
    /// The entry point launched no Triton kernel.
    NoLaunch,
    /// The compile process ended without a result.
    Crashed,
}

/// A successful ahead-of-time compile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AotBuilt {
    /// The kernels compiled, in launch order.
    pub kernels: Vec<AotKernel>,
    /// Per kernel: registers and spills from ptxas, shared memory from Triton.
    pub facts: Vec<PtxasFacts>,
    /// ptxas's report.
    pub log: String,
    /// Triton's version.
    pub triton: String,
    /// The command that ran.
    pub command: Vec<String>,
    /// Wall seconds (0 when cached).
    pub seconds: f64,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// What an ahead-of-time compile gave.
#[derive(Debug, Clone)]
pub enum AotOutcome {
    /// Every launched kernel compiled.
    Built(AotBuilt),
    /// A kernel did not compile: `COMPILE_ERROR` with its diagnostics.
    Failed(BuildFailure),
    /// Nothing compiled and nothing failed to: why, and the detail.
    Skipped(NotCompiled, String),
}

/// The script's result file.
#[derive(Debug, Deserialize)]
struct Reply {
    status: String,
    #[serde(default)]
    kernels: Vec<AotKernel>,
    #[serde(default)]
    ptxas_log: String,
    #[serde(default)]
    diagnostics: Vec<Diagnostic>,
    #[serde(default)]
    note: String,
    #[serde(default)]
    triton: String,
}

/// Compiles the solution's kernels for `req.target`, reusing an identical earlier compile
/// (same sources, workload, target and harness) from `cache_dir`.
pub fn compile(
    req: &AotRequest,
    solution: &Solution,
    cache_dir: &Path,
) -> Result<AotOutcome, BackendError> {
    let io = |path: &Path, source| BackendError::Io {
        path: path.to_path_buf(),
        source,
    };
    let request = serde_json::json!({
        "module": req.module.display().to_string(),
        "entry": req.entry,
        "capability": req.target.capability,
        "inputs": req.workload["inputs"],
        "outputs": req.workload["outputs"],
        "axes": req.workload["axes"],
    });
    let mut keyed = ksmith_task::FieldHasher::new("ksmith triton aot v1");
    keyed
        .field(req.python.display().to_string())
        .field(req.harness_dir.display().to_string())
        .field(request.to_string())
        .field((solution.sources.len() as u64).to_le_bytes());
    for (n, s) in &solution.sources {
        keyed.field(n).field(s);
    }
    let key = keyed.hex()[..32].to_string();
    let dir = cache_dir.join(format!("triton-{key}"));
    let command = vec![
        req.python.display().to_string(),
        "-m".into(),
        "ksmith_harness.tritonaot".into(),
        "-".into(),
        "result.json".into(),
    ];
    if let Some(reply) = ksmith_sandbox::read_untrusted(&dir.join("result.json"), MAX_RESULT)
        .and_then(|b| serde_json::from_slice::<Reply>(&b).ok())
    {
        crate::c::evict::touch(&dir);
        return Ok(outcome(reply, command, 0.0, true));
    }
    std::fs::create_dir_all(cache_dir).map_err(|e| io(cache_dir, e))?;
    let mut read = req.read.clone();
    if let Some(d) = req.module.parent() {
        read.push(d.to_path_buf());
    }
    let extra = Sandboxing {
        read,
        env: vec![
            ("PYTHONPATH".into(), req.harness_dir.display().to_string()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            // In its private directory (the working directory).
            ("TRITON_CACHE_DIR".into(), "triton-cache".into()),
        ],
        // LLVM and Python map far more than they touch.
        address_space: 32 << 30,
    };
    let start = Instant::now();
    // The host code runs in an in-memory directory of bounded size: whatever it writes fills
    // no disk (red team 2026-12-06: on the cache's file system it could write gigabytes for
    // up to 300 s). Its result is read like any file a sandbox made (no link followed, no FIFO
    // waited on, bounded: a FIFO named `result.json` once held the judge forever), and
    // nothing else of the directory is kept.
    let (ok, log, bytes) = run_sandboxed_scratch(
        &command,
        &extra,
        AOT_TIMEOUT,
        AOT_SCRATCH_BYTES,
        &request.to_string(),
        ("result.json", MAX_RESULT),
    )
    .map_err(|e| io(cache_dir, e))?;
    let seconds = start.elapsed().as_secs_f64();
    let reply = bytes
        .as_deref()
        .and_then(|b| serde_json::from_slice::<Reply>(b).ok());
    let Some(reply) = reply.filter(|_| ok) else {
        let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
        return Ok(AotOutcome::Skipped(
            NotCompiled::Crashed,
            format!("the ahead-of-time compile ended without a result:\n{tail}"),
        ));
    };
    if reply.status != "compile_error" {
        // Only what compiled (or could not be tried) is reused; a failure is compiled again,
        // as a C build's is. The cache entry is made by the judge and holds the result alone:
        // links, FIFOs or bulk the host code left in its directory never enter the cache.
        if let Some(bytes) = &bytes {
            keep_result(cache_dir, &dir, bytes);
        }
    }
    Ok(outcome(reply, command, seconds, false))
}

/// The in-memory directory of the ahead-of-time step: Triton's own cache of the kernels it
/// compiles (kilobytes to a few MiB each) and LLVM's temporary files.
const AOT_SCRATCH_BYTES: u64 = 512 << 20;

/// Most bytes of a compile's result read (kernels' facts and diagnostics: kilobytes).
const MAX_RESULT: usize = 4 << 20;

/// Stores `bytes` as `dir/result.json`, made whole under a fresh name and renamed into place.
fn keep_result(cache_dir: &Path, dir: &Path, bytes: &[u8]) {
    let Ok(staged) = tempfile::Builder::new()
        .prefix(".aot-")
        .tempdir_in(cache_dir)
    else {
        return;
    };
    if std::fs::write(staged.path().join("result.json"), bytes).is_ok() {
        let staged = staged.keep();
        if std::fs::rename(&staged, dir).is_err() {
            let _ = std::fs::remove_dir_all(&staged);
        }
    }
}

fn outcome(reply: Reply, command: Vec<String>, seconds: f64, cached: bool) -> AotOutcome {
    match reply.status.as_str() {
        "compiled" => {
            let facts = facts(&reply.kernels, &reply.ptxas_log);
            AotOutcome::Built(AotBuilt {
                kernels: reply.kernels,
                facts,
                log: reply.ptxas_log,
                triton: reply.triton,
                command,
                seconds,
                cached,
            })
        }
        "compile_error" => AotOutcome::Failed(BuildFailure {
            reason: crate::c::BuildFailureKind::CompileError,
            log: reply
                .diagnostics
                .iter()
                .map(|d| format!("{d}\n"))
                .collect::<String>(),
            diagnostics: reply.diagnostics,
            command,
        }),
        "no_launch" => AotOutcome::Skipped(NotCompiled::NoLaunch, reply.note),
        _ => AotOutcome::Skipped(NotCompiled::HostError, reply.note),
    }
}

/// ptxas's figures per kernel (in compile order) with Triton's shared memory added.
fn facts(kernels: &[AotKernel], ptxas_log: &str) -> Vec<PtxasFacts> {
    let mut from_ptxas = parse_ptxas(ptxas_log);
    if from_ptxas.len() == kernels.len() {
        for (f, k) in from_ptxas.iter_mut().zip(kernels) {
            f.smem_bytes = f.smem_bytes.max(k.shared);
        }
        return from_ptxas;
    }
    // A kernel compiled twice by name only once in ptxas's log (or the reverse): by name.
    kernels
        .iter()
        .map(|k| {
            let mut f = from_ptxas
                .iter()
                .find(|f| f.kernel == k.name)
                .cloned()
                .unwrap_or_default();
            f.kernel = k.name.clone();
            f.smem_bytes = f.smem_bytes.max(k.shared);
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_become_outcomes_with_facts() {
        let reply: Reply = serde_json::from_str(r#"{"status": "compiled", "triton": "3.9.0",
            "kernels": [{"name": "_add", "num_warps": 8, "num_stages": 3, "shared": 1024, "signature": {"a": "*fp32"}}],
            "ptxas_log": "ptxas-blackwell info    : Compiling entry function '_add' for 'sm_90a'\n    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\nptxas-blackwell info    : Used 54 registers, used 0 barriers"}"#).unwrap();
        let AotOutcome::Built(b) = outcome(reply, vec![], 1.0, false) else {
            panic!("not built")
        };
        assert_eq!(
            b.facts,
            [PtxasFacts {
                kernel: "_add".into(),
                registers: 54,
                smem_bytes: 1024,
                spill_bytes: 16
            }]
        );
        let reply: Reply = serde_json::from_str(r#"{"status": "compile_error", "diagnostics": [{"file": "kernel.py", "line": 9, "column": 9, "severity": "error", "message": "bad"}]}"#).unwrap();
        let AotOutcome::Failed(f) = outcome(reply, vec![], 1.0, false) else {
            panic!("not failed")
        };
        assert_eq!(
            (f.diagnostics[0].line, f.reason.name()),
            (9, "compile_error")
        );
        assert_eq!(f.log, "kernel.py:9:9: error: bad\n");
        let reply: Reply =
            serde_json::from_str(r#"{"status": "host_error", "note": "torch"}"#).unwrap();
        assert!(matches!(
            outcome(reply, vec![], 1.0, false),
            AotOutcome::Skipped(NotCompiled::HostError, _)
        ));
    }
}
