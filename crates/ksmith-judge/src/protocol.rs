//! The judge's commands to its two Python peers (`harness/ksmith_harness/`): the trusted
//! process (`trusted.py`) and the sandboxed runner (`runner.py`). Each request is a struct with
//! its reply type ([`ksmith_harness::Command`]); replies are read strictly, so a field a reply
//! does not declare, a missing one or one of the wrong type is a protocol error naming it
//! (from the runner: the candidate's `protocol_violation`).

use crate::{Reason, Status};
use ksmith_backend::backend::ProductKind;
use ksmith_harness::{Command, Empty};
use ksmith_task::Language;
use ksmith_task::TensorSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Where the trusted side times the baseline and compiles for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TimingDevice {
    /// The host CPU.
    Cpu,
    /// The accelerator JAX sees.
    Gpu,
}

impl TimingDevice {
    /// The device for an evaluation on (or off) the GPU.
    pub(crate) fn of(on_gpu: bool) -> TimingDevice {
        if on_gpu {
            TimingDevice::Gpu
        } else {
            TimingDevice::Cpu
        }
    }
}

// ---- the trusted process ----

/// The trusted process's reply to `hello`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustedHello {
    /// JAX's default backend (`cpu`, `gpu`, `cuda`, `rocm`).
    pub device: String,
    /// Protocol version (checked by the harness crate).
    #[allow(dead_code)]
    pub protocol: u64,
    /// The harness's declared version.
    pub harness_version: String,
    /// Versions of Python and the libraries results depend on.
    pub versions: BTreeMap<String, String>,
    /// XLA's thread count.
    #[allow(dead_code)]
    pub xla_threads: u64,
    /// The poison pattern of each dtype: (element width, bits).
    pub poison: BTreeMap<String, (usize, u64)>,
}

/// The opening request (sent by the harness crate; its reply is read here).
#[derive(Serialize)]
pub(crate) struct Hello {}
impl Command for Hello {
    const NAME: &'static str = "hello";
    type Reply = TrustedHello;
}

/// Loads a task (its spec, as `task.toml` parsed) into the trusted process.
#[derive(Serialize)]
pub(crate) struct LoadTask<'a> {
    pub task: &'a Value,
}
impl Command for LoadTask<'_> {
    const NAME: &'static str = "load_task";
    type Reply = Empty;
}

/// Compiles the baseline and the float64 reference of `workloads` ahead of use.
#[derive(Serialize)]
pub(crate) struct Warm {
    pub task: String,
    pub workloads: Vec<usize>,
    pub seed: u64,
    pub device: TimingDevice,
    pub evict: bool,
    pub cache_dir: String,
}
/// How many workloads were compiled.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Warmed {
    #[allow(dead_code)]
    pub warmed: u64,
}
impl Command for Warm {
    const NAME: &'static str = "warm";
    type Reply = Warmed;
}

/// Draws the inputs of (workload, seed) as raw files under `prefix`, without a reference.
#[derive(Serialize)]
pub(crate) struct Inputs<'a> {
    pub task: &'a str,
    pub workload: usize,
    pub seed: u64,
    pub prefix: String,
}
/// The raw input files, by input name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InputFiles {
    pub paths: BTreeMap<String, String>,
}
impl Command for Inputs<'_> {
    const NAME: &'static str = "inputs";
    type Reply = InputFiles;
}

/// Makes sure inputs and the float64 reference of (workload, seed) exist in the cache.
#[derive(Serialize)]
pub(crate) struct Prepare<'a> {
    pub task: &'a str,
    pub workload: usize,
    pub seed: u64,
    pub cache_dir: &'a str,
}
/// Where the prepared inputs and reference are.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Prepared {
    pub inputs: String,
    #[allow(dead_code)]
    pub reference: String,
    #[allow(dead_code)]
    pub input_hashes: Value,
    pub cached: bool,
}
impl Command for Prepare<'_> {
    const NAME: &'static str = "prepare";
    type Reply = Prepared;
}

/// Runs `ksmith validate`'s reference checks on one workload.
#[derive(Serialize)]
pub(crate) struct Validate<'a> {
    pub task: &'a str,
    pub cache_dir: &'a str,
    pub workload: usize,
}
/// One problem `validate` found.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Problem {
    pub field: String,
    pub message: String,
}
/// The problems found.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Problems {
    pub problems: Vec<Problem>,
}
impl Command for Validate<'_> {
    const NAME: &'static str = "validate";
    type Reply = Problems;
}

/// The static policy of a Python candidate (parsed there, never imported).
#[derive(Serialize)]
pub(crate) struct Policy<'a> {
    pub backend: &'a str,
    pub sources: &'a [(String, String)],
}
/// A source that does not parse.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SyntaxProblem {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}
/// A use the policy refuses.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyFinding {
    pub file: String,
    pub line: u32,
    pub message: String,
}
/// The policy's findings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyFindings {
    pub syntax_errors: Vec<SyntaxProblem>,
    pub violations: Vec<PolicyFinding>,
}
impl Command for Policy<'_> {
    const NAME: &'static str = "policy";
    type Reply = PolicyFindings;
}

/// Judges one call's outputs: against the cached reference of (workload, seed) with the
/// runner's word on changed inputs and the earlier seeds a stale output may match, or (a
/// timed call) against a reference computed from `given_inputs`.
#[derive(Serialize)]
pub(crate) struct Check<'a> {
    pub task: &'a str,
    pub workload: usize,
    pub seed: u64,
    pub outputs: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs_changed: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_seeds: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_inputs: Option<crate::Files>,
}
/// One output's comparison with the reference.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputCheck {
    pub name: String,
    pub max_abs_error: Option<f64>,
    pub max_rel_error: Option<f64>,
    #[serde(default)]
    pub worst_index: Vec<i64>,
    pub worst_value: Option<f64>,
    pub worst_expected: Option<f64>,
    pub fraction_bad: f64,
}
/// The verdict on the outputs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Checked {
    pub passed: bool,
    pub status: Status,
    pub reason: Option<Reason>,
    #[serde(default)]
    pub detail: Option<String>,
    pub outputs: Vec<OutputCheck>,
}
impl Command for Check<'_> {
    const NAME: &'static str = "check";
    type Reply = Checked;
}

/// Times one round of the jitted reference (the baseline) at the task's dtypes.
#[derive(Serialize)]
pub(crate) struct Baseline<'a> {
    pub task: &'a str,
    pub workload: usize,
    pub seeds: &'a [u64],
    pub reps: usize,
    pub warmup: usize,
    pub flush_bytes: u64,
    pub evict: bool,
    pub device: TimingDevice,
    pub cache_dir: &'a str,
}
/// How the trusted side made the baseline's caches cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Eviction {
    /// Its inputs and last outputs evicted line by line.
    Lines,
    /// A last-level-cache-sized buffer written.
    Buffer,
    /// Nothing.
    None,
}
/// The round's samples.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BaselineRound {
    pub samples_ns: Vec<u64>,
    pub eviction: Eviction,
}
impl Command for Baseline<'_> {
    const NAME: &'static str = "baseline";
    type Reply = BaselineRound;
}

/// Measures the accelerator's roofline (copy bandwidth, matmul peaks).
#[derive(Serialize)]
pub(crate) struct GpuHw {}
impl Command for GpuHw {
    const NAME: &'static str = "gpu_hw";
    type Reply = ksmith_backend::cuda::GpuRoofline;
}

// ---- the sandboxed runner (the candidate's process: everything it says is a claim) ----

/// Empty timed calls before any candidate is loaded: what the timing channel costs.
#[derive(Serialize)]
pub(crate) struct Calibrate {
    pub calls: usize,
}
impl Command for Calibrate {
    const NAME: &'static str = "calibrate";
    type Reply = Empty;
}

/// What the runner loads: a built library or a staged module, for its backend.
#[derive(Debug, Clone)]
pub(crate) struct Product {
    /// The solution's language: the runner's loader for it.
    pub backend: Language,
    /// Library or module.
    pub kind: ProductKind,
    /// Where the runner finds it.
    pub path: String,
}

impl Product {
    /// The runner's view of what `backend` built.
    pub(crate) fn new(backend: Language, built: &ksmith_backend::backend::Product) -> Product {
        Product {
            backend,
            kind: built.kind,
            path: built.path.display().to_string(),
        }
    }
}

impl Serialize for Product {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("backend", self.backend.name())?;
        let field = match self.kind {
            ProductKind::Library => "library",
            ProductKind::Module => "module",
        };
        m.serialize_entry(field, &self.path)?;
        m.end()
    }
}

/// Loads the candidate.
#[derive(Serialize)]
pub(crate) struct Load<'a> {
    #[serde(flatten)]
    pub product: &'a Product,
    pub entry: &'a str,
    pub inputs: &'a [TensorSpec],
    pub outputs: Vec<&'a TensorSpec>,
    pub naxes: usize,
    pub device_gpu: bool,
}
/// Whether the candidate runs in an interpreter (no accelerator here).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Loaded {
    pub interpreted: bool,
}
impl Command for Load<'_> {
    const NAME: &'static str = "load";
    type Reply = Loaded;
}

/// A judge-made slot's files as the runner sees them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SlotSpec {
    pub ins: Vec<String>,
    pub outs: Vec<String>,
}

/// One correctness call: inputs from a file into the slot's poisoned buffers, the outputs
/// written under `out_prefix`.
#[derive(Serialize)]
pub(crate) struct Run<'a> {
    pub slot: SlotSpec,
    pub inputs_path: &'a str,
    pub axes: Vec<i64>,
    pub in_shapes: Vec<Vec<i64>>,
    pub out_shapes: Vec<Vec<i64>>,
    pub out_prefix: String,
    pub profile: bool,
}
/// One finding of host code computing outside the kernels.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostFinding {
    pub file: String,
    pub line: u32,
    pub message: String,
}
/// The call's outcome: its figures, or host work found instead.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Ran {
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub outputs: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub inputs_changed: Option<Vec<String>>,
    #[serde(default)]
    pub device_kernels: Option<Vec<String>>,
    #[serde(default)]
    pub host_compute: Option<Vec<HostFinding>>,
}
impl Command for Run<'_> {
    const NAME: &'static str = "run";
    type Reply = Ran;
}

/// Timed calls driven over the timing channel, on slots the judge fills.
#[derive(Serialize)]
pub(crate) struct Time {
    pub axes: Vec<i64>,
    pub in_shapes: Vec<Vec<i64>>,
    pub out_shapes: Vec<Vec<i64>>,
    pub slots: Vec<SlotSpec>,
    pub calls: usize,
}
/// The runner's own figures: information for diagnosis, never used as a result.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimedCalls {
    pub inproc_ns: Vec<u64>,
}
impl Command for Time {
    const NAME: &'static str = "time";
    type Reply = TimedCalls;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_harness::{parse_reply, request_value, CallError};
    use serde_json::json;

    #[test]
    fn a_reply_with_a_field_it_does_not_declare_is_a_protocol_error_naming_it() {
        let e = parse_reply::<Load>(
            json!({"ok": true, "id": 3, "interpreted": false, "status": "PASSED"}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Protocol(m) if m.contains("`status`") && m.contains("`load`")),
            "{e}"
        );
        let e = parse_reply::<Run>(json!({"elapsed_ns": "fast"})).unwrap_err();
        assert!(
            matches!(&e, CallError::Protocol(m) if m.contains("elapsed_ns")),
            "{e}"
        );
        let e = parse_reply::<Run>(
            json!({"host_compute": [{"file": "k.py", "line": -1, "message": "m"}]}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Protocol(m) if m.contains("host_compute[0].line")),
            "{e}"
        );
        let e = parse_reply::<Check>(json!({"passed": false, "status": "INCORRECT_NUMERICAL",
            "reason": "looks_fine", "outputs": []}))
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Protocol(m) if m.contains("reason")),
            "{e}"
        );
        let ok = parse_reply::<Check>(json!({"passed": false, "status": "INCORRECT_NUMERICAL",
            "reason": "stale_output", "detail": "d", "outputs": []}))
        .unwrap();
        assert_eq!(ok.reason, Some(Reason::StaleOutput));
    }

    #[test]
    fn requests_carry_their_command_and_fields() {
        let product = Product {
            backend: Language::C,
            kind: ProductKind::Library,
            path: "/x/kernel.so".into(),
        };
        let v = request_value(&Load {
            product: &product,
            entry: "k",
            inputs: &[],
            outputs: vec![],
            naxes: 2,
            device_gpu: false,
        })
        .unwrap();
        assert_eq!(v["cmd"], "load");
        assert_eq!(v["backend"], "c");
        assert_eq!(v["library"], "/x/kernel.so");
        assert_eq!(request_value(&GpuHw {}).unwrap(), json!({"cmd": "gpu_hw"}));
    }
}
