//! The evaluation result: what `ksmith eval --json` prints and the store keeps.

pub use crate::disturb::Disturbances;
use ksmith_backend::c::PolicyViolation;
use ksmith_backend::Diagnostic;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Outcome of one evaluation (FlashInfer-Bench's seven plus POLICY_REJECTED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Correct on every check (and timed, when timing ran).
    Passed,
    /// The source did not build.
    CompileError,
    /// The candidate crashed, exited, or could not be loaded.
    RuntimeError,
    /// A call ran past its wall-clock or CPU budget.
    Timeout,
    /// An output had the wrong number of elements.
    IncorrectShape,
    /// An output had the wrong element type.
    IncorrectDtype,
    /// Outputs were wrong (or inputs modified, or outputs stale/unwritten).
    IncorrectNumerical,
    /// Static policy or the judge's plausibility rules refused the candidate.
    PolicyRejected,
}

impl Status {
    /// Upper-case name as in DESIGN.md.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::CompileError => "COMPILE_ERROR",
            Status::RuntimeError => "RUNTIME_ERROR",
            Status::Timeout => "TIMEOUT",
            Status::IncorrectShape => "INCORRECT_SHAPE",
            Status::IncorrectDtype => "INCORRECT_DTYPE",
            Status::IncorrectNumerical => "INCORRECT_NUMERICAL",
            Status::PolicyRejected => "POLICY_REJECTED",
        }
    }

    /// Parses the upper-case name.
    pub fn parse(s: &str) -> Option<Status> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an evaluation did not pass: a short machine-readable cause (DESIGN.md's `reason`),
/// written as its snake_case name (`signal_SIGSEGV` for a signal).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// The compiler refused the source.
    CompileError,
    /// The entry point is not exported by the built library.
    MissingEntryPoint,
    /// The built library is over the size cap (or did not fit the sandbox).
    LibraryTooLarge,
    /// A Python candidate does not parse.
    SyntaxError,
    /// The source, the library or the host code uses something kernels may not.
    ForbiddenCall,
    /// Faster than the measured roofline allows by more than the plausibility margin.
    ImplausibleSpeed,
    /// No result within the wall-clock limit.
    WallTimeout,
    /// The CPU-time limit was reached.
    CpuTimeLimit,
    /// The candidate's processes went over their memory limit (the cgroup's OOM events).
    MemoryLimit,
    /// Killed by a signal (its name, e.g. `SIGSEGV`).
    Signal(String),
    /// The process exited during a call.
    EarlyExit,
    /// The candidate broke the harness protocol or the timing channel.
    ProtocolViolation,
    /// The candidate raised an exception.
    Exception,
    /// The candidate could not be loaded.
    LoadFailed,
    /// The candidate filled the sandbox's private directory.
    ScratchFull,
    /// An output file is missing or not a regular file.
    OutputMissing,
    /// An output holds the wrong number of elements.
    OutputSizeMismatch,
    /// An output has the wrong shape.
    OutputShape,
    /// An output has the wrong element type.
    OutputDtype,
    /// An input changed during the call.
    InputMutated,
    /// Output elements were never written (the poison is still there).
    OutputUnwritten,
    /// NaN where the reference has none.
    NanInOutput,
    /// Every output element is the same value where the reference varies.
    DegenerateOutput,
    /// The output equals the result for an earlier input.
    StaleOutput,
    /// Outputs out of tolerance.
    NumericalMismatch,
}

impl Reason {
    /// Every reason that carries no value, with its name.
    const NAMED: [(Reason, &'static str); 24] = [
        (Reason::CompileError, "compile_error"),
        (Reason::MissingEntryPoint, "missing_entry_point"),
        (Reason::LibraryTooLarge, "library_too_large"),
        (Reason::SyntaxError, "syntax_error"),
        (Reason::ForbiddenCall, "forbidden_call"),
        (Reason::ImplausibleSpeed, "implausible_speed"),
        (Reason::WallTimeout, "wall_timeout"),
        (Reason::CpuTimeLimit, "cpu_time_limit"),
        (Reason::MemoryLimit, "memory_limit"),
        (Reason::EarlyExit, "early_exit"),
        (Reason::ProtocolViolation, "protocol_violation"),
        (Reason::Exception, "exception"),
        (Reason::LoadFailed, "load_failed"),
        (Reason::ScratchFull, "scratch_full"),
        (Reason::OutputMissing, "output_missing"),
        (Reason::OutputSizeMismatch, "output_size_mismatch"),
        (Reason::OutputShape, "output_shape"),
        (Reason::OutputDtype, "output_dtype"),
        (Reason::InputMutated, "input_mutated"),
        (Reason::OutputUnwritten, "output_unwritten"),
        (Reason::NanInOutput, "nan_in_output"),
        (Reason::DegenerateOutput, "degenerate_output"),
        (Reason::StaleOutput, "stale_output"),
        (Reason::NumericalMismatch, "numerical_mismatch"),
    ];

    /// The machine-readable name.
    pub fn name(&self) -> String {
        match self {
            Reason::Signal(s) => format!("signal_{s}"),
            r => Reason::NAMED
                .iter()
                .find(|(n, _)| n == r)
                .map(|(_, s)| s.to_string())
                .unwrap_or_default(),
        }
    }

    /// Parses a name; None for anything that is not one (a signal's name is upper-case
    /// letters and digits).
    pub fn parse(s: &str) -> Option<Reason> {
        if let Some(sig) = s.strip_prefix("signal_") {
            let ok = !sig.is_empty()
                && sig.len() <= 16
                && sig
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            return ok.then(|| Reason::Signal(sig.to_string()));
        }
        Reason::NAMED
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(r, _)| r.clone())
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let s = String::deserialize(d)?;
        Reason::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("`{s}` is not a reason the judge gives"))
        })
    }
}

/// Why a candidate was not judged on this machine. Not a [`Status`]: it says nothing about the
/// candidate, so nothing is stored and the same candidate is judged where it can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotRunReason {
    /// No compiler for its language here (nvcc) and none could be installed.
    NoCompiler,
    /// Built (its build facts are kept), but no device here runs it: "built; not run".
    NoDevice,
    /// A remote device said its backend is unavailable there (its message says why).
    Remote,
}

impl NotRunReason {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NotRunReason::NoCompiler => "no_compiler",
            NotRunReason::NoDevice => "no_device",
            NotRunReason::Remote => "remote",
        }
    }
}

/// The cascade stage an evaluation reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Static source policy.
    Policy,
    /// Compilation and symbol policy.
    Build,
    /// Loading the library in the sandbox.
    Load,
    /// One call on the smallest workload.
    QuickCheck,
    /// Every workload, several seeds.
    FullCheck,
    /// Timing against the baseline.
    Timing,
    /// Everything ran.
    Done,
}

/// Build facts kept with the result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildInfo {
    /// Came from the build cache.
    pub cached: bool,
    /// Compile wall time.
    pub seconds: f64,
    /// Compiler command line.
    pub command: Vec<String>,
    /// Parsed diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Compiler output, truncated.
    pub log: String,
    /// Per-kernel register, shared-memory and spill figures (CUDA, from `-Xptxas -v`).
    #[serde(default)]
    pub ptxas: Vec<ksmith_backend::cuda::PtxasFacts>,
}

/// Correctness figures over every check that ran (worst case).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Correctness {
    /// Checks run: a quick one on the smallest workload, every workload x seed, and the
    /// re-checks of timed calls (so an untimed re-validation runs fewer than an evaluation).
    pub checks: usize,
    /// How many of `checks` re-checked the outputs of timed calls (fresh inputs).
    #[serde(default)]
    pub timed_rechecks: usize,
    /// Seeds used per workload.
    pub seeds: Vec<u64>,
    /// Largest absolute error seen.
    pub max_abs_error: f64,
    /// Largest relative error seen.
    pub max_rel_error: f64,
    /// Where the failing (or worst) element was: workload, seed, output, index.
    pub worst: Option<WorstElement>,
    /// Fraction of elements out of tolerance in the failing check (0 when passed).
    pub fraction_bad: f64,
}

/// Location of the worst element.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorstElement {
    /// Workload index.
    pub workload: usize,
    /// Seed.
    pub seed: u64,
    /// Output name.
    pub output: String,
    /// Multi-index.
    pub index: Vec<i64>,
    /// Candidate value.
    pub got: Option<f64>,
    /// Reference value.
    pub expected: Option<f64>,
}

/// Summary of timing samples.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// Median latency in ms.
    pub median_ms: f64,
    /// 10th percentile in ms.
    pub p10_ms: f64,
    /// 90th percentile in ms.
    pub p90_ms: f64,
    /// Number of timed calls.
    pub samples: usize,
}

impl Timing {
    /// Summarizes raw nanosecond samples.
    pub fn from_ns(samples: &[u64]) -> Timing {
        let mut s: Vec<f64> = samples.iter().map(|&n| n as f64 / 1e6).collect();
        s.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| {
            if s.is_empty() {
                return 0.0;
            }
            let pos = p * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        Timing {
            median_ms: q(0.5),
            p10_ms: q(0.1),
            p90_ms: q(0.9),
            samples: s.len(),
        }
    }
}

/// Performance on one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadPerf {
    /// Workload index.
    pub workload: usize,
    /// Axis values.
    pub axes: BTreeMap<String, i64>,
    /// The candidate.
    pub candidate: Timing,
    /// The XLA baseline.
    pub baseline: Timing,
    /// The median over rounds of (baseline's median / candidate's median) in the same round:
    /// paired, so a disturbance of the machine that hits one round does not move it.
    pub speedup: f64,
    /// 95% interval of `speedup` (order statistics of the per-round ratios; their range
    /// with fewer than six rounds).
    #[serde(default)]
    pub speedup_interval: (f64, f64),
    /// The interval is wider than ±10%: the machine was too noisy for a precise figure.
    #[serde(default)]
    pub noisy: bool,
    /// Achieved GFLOP/s.
    pub gflops: f64,
    /// Achieved GB/s.
    pub gbps: f64,
    /// Roofline time floor in ms (measured peaks).
    pub floor_ms: f64,
    /// floor / candidate median: 1.0 is the roofline.
    pub roofline_fraction: f64,
    /// Whether the input sets were flushed from cache between calls.
    pub cache_flushed: bool,
    /// How the baseline's caches were made cold before each call (the candidate's buffers are
    /// always evicted line by line).
    #[serde(default)]
    pub baseline_cold: ColdCache,
    /// What else ran during the timed rounds, and the rounds dropped for it.
    #[serde(default)]
    pub disturbance: Disturbances,
    /// Set when the ratio of the two medians falls outside the paired speedup's interval:
    /// which figure disagrees and why.
    #[serde(default)]
    pub disagreement: Option<Disagreement>,
    /// Set when the candidate ran faster than this workload's roofline floor (DESIGN rule 6:
    /// flagged, not celebrated); what the judge made of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond_roofline: Option<BeyondRoofline>,
}

/// The ratio of medians and the paired speedup of one workload disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Baseline median / candidate median, over every kept call.
    pub ratio_of_medians: f64,
    /// The side whose calls spread more (p90 / p10).
    pub wider_side: Side,
    /// That side's p90 / p10.
    pub spread: f64,
    /// Why the two figures differ.
    pub why: DisagreeWhy,
}

/// One side of a timed comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The candidate kernel.
    Candidate,
    /// The XLA baseline.
    Baseline,
}

/// Why the ratio of medians left the paired interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisagreeWhy {
    /// A side's calls spread over more than 2x (two speeds, e.g. a kernel sometimes 10x
    /// slower): pooling every call weighs rounds by their call counts, the paired figure
    /// weighs each round once. The paired figure is the one decisions use.
    Bimodal,
    /// The machine or the kernel drifted between rounds: rounds of different speed, paired
    /// against their own baseline calls, pool into a different median.
    Drift,
}

/// A workload timed faster than its roofline floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeyondRoofline {
    /// floor / candidate median against the floor the timing was first judged by (> 1).
    pub fraction: f64,
    /// The same against the floor measured again by this judge (None: not measured again,
    /// e.g. a GPU's roofline).
    pub remeasured_fraction: Option<f64>,
    /// What the judge concluded.
    pub outcome: BeyondOutcome,
}

/// What a timing beyond the roofline floor meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BeyondOutcome {
    /// The floor measured again sits below the kernel's time: the first floor was stale
    /// (measured under load); the fraction shown is against the new one.
    StaleFloor,
    /// Still faster than the re-measured floor, within the plausibility margin: the floor was
    /// wrong and was raised to this kernel's rate (recorded in `hw.json` with the kernel).
    FloorRaised,
    /// Still faster than the floor, left as it is (the floor is not this judge's to raise:
    /// a GPU's roofline, or a timing cut short by a race).
    Flagged,
    /// Faster than the floor by more than the plausibility margin: `POLICY_REJECTED
    /// implausible_speed`.
    Implausible,
}

impl BeyondOutcome {
    /// A few words for tables and prompts.
    pub fn describe(self) -> &'static str {
        match self {
            BeyondOutcome::StaleFloor => "floor re-measured",
            BeyondOutcome::FloorRaised => "floor raised to this kernel's rate",
            BeyondOutcome::Flagged => "above the floor, flagged",
            BeyondOutcome::Implausible => "implausible",
        }
    }
}

impl WorkloadPerf {
    /// `87%`, or `120%!` when the kernel beat its floor (the fraction first seen, so a
    /// raised floor's 100% does not hide it; a floor that was only stale shows the new one).
    pub fn roofline_cell(&self) -> String {
        match &self.beyond_roofline {
            Some(b) if b.outcome != BeyondOutcome::StaleFloor => {
                format!("{:.0}%!", b.fraction * 100.0)
            }
            _ => format!("{:.0}%", self.roofline_fraction * 100.0),
        }
    }
}

/// How caches were made cold before a timed call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColdCache {
    /// Not flushed: the working set fits the timed loop's caches by design (or `--flush never`).
    #[default]
    Hot,
    /// The call's own inputs and the previous outputs' buffers evicted line by line.
    Lines,
    /// A buffer the size of the last-level cache written (no line flush on this machine; a GPU's L2).
    Buffer,
}

/// Geometric mean of positive values (values are clamped to 1e-12; 0 for an empty list).
pub fn geomean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v.max(1e-12).ln(), n + 1));
    if n == 0 {
        0.0
    } else {
        (sum / n as f64).exp()
    }
}

impl Performance {
    /// The workloads timed faster than their roofline floor (a floor that was only stale aside).
    pub fn beyond_roofline(&self) -> impl Iterator<Item = &WorkloadPerf> {
        self.workloads.iter().filter(|w| {
            w.beyond_roofline
                .as_ref()
                .is_some_and(|b| b.outcome != BeyondOutcome::StaleFloor)
        })
    }

    /// `87%` (geomean), with `!` when some workload beat its floor.
    pub fn roofline_cell(&self) -> String {
        let flag = if self.beyond_roofline().next().is_some() {
            "!"
        } else {
            ""
        };
        format!("{:.0}%{flag}", self.roofline_fraction * 100.0)
    }

    /// Geometric mean over workloads of the candidate's median latency, in ms.
    pub fn candidate_ms(&self) -> f64 {
        geomean(self.workloads.iter().map(|w| w.candidate.median_ms))
    }

    /// Geometric mean over workloads of the baseline's median latency, in ms.
    pub fn baseline_ms(&self) -> f64 {
        geomean(self.workloads.iter().map(|w| w.baseline.median_ms))
    }
}

/// Performance over all workloads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Performance {
    /// Geometric mean of per-workload speedups.
    pub speedup: f64,
    /// Geometric means of the workloads' interval ends.
    #[serde(default)]
    pub speedup_interval: (f64, f64),
    /// Some workload's figure is noisy (see [`WorkloadPerf::noisy`]).
    #[serde(default)]
    pub noisy: bool,
    /// The machine never became quiet enough: some workload kept rounds that other work
    /// disturbed (its redo cap was reached; see [`WorkloadPerf::disturbance`]). No decision
    /// rests on these figures.
    #[serde(default)]
    pub never_quiet: bool,
    /// Geometric mean of roofline fractions.
    pub roofline_fraction: f64,
    /// Per workload.
    pub workloads: Vec<WorkloadPerf>,
    /// Set when timing stopped early because the candidate was clearly slower than a race's
    /// incumbent (see [`crate::Race`]); the figures above are then a rough estimate.
    #[serde(default)]
    pub eliminated: Option<Elimination>,
}

/// Why a raced evaluation stopped timing early.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Elimination {
    /// Incumbent speedup / candidate speedup, geometric mean over workloads (> the race's ratio).
    pub slowdown: f64,
    /// Alternating rounds timed on each workload before dropping it.
    pub rounds: usize,
}

/// Where and with what an evaluation ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Environment {
    /// CPU model.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// OpenMP threads given to the candidate (fixed).
    pub threads: usize,
    /// Compiler version.
    pub compiler: String,
    /// Default build flags.
    pub flags: Vec<String>,
    /// Harness version.
    pub harness_version: String,
    /// Python, numpy, jax, jaxlib versions.
    pub versions: BTreeMap<String, String>,
    /// Sandbox isolation in force.
    pub isolation: String,
    /// Hash of everything above.
    pub fingerprint: String,
}

impl Environment {
    /// The hash of everything else in the environment (what `fingerprint` holds once set).
    pub fn compute_fingerprint(&self) -> String {
        let mut e = self.clone();
        e.fingerprint.clear();
        let all = serde_json::to_string(&e).unwrap_or_default();
        ksmith_task::content_hash(all.as_bytes())[..16].to_string()
    }
}

/// The result of one evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalResult {
    /// Outcome.
    pub status: Status,
    /// Machine-readable cause when not passed.
    pub reason: Option<Reason>,
    /// Human-readable detail.
    pub detail: Option<String>,
    /// Stage reached.
    pub stage: Stage,
    /// Task name.
    pub task: String,
    /// Task content hash (definition + reference).
    pub task_hash: String,
    /// Solution name.
    pub solution: String,
    /// Solution content hash.
    pub solution_hash: String,
    /// Policy violations found.
    pub policy: Vec<PolicyViolation>,
    /// Build facts.
    pub build: Option<BuildInfo>,
    /// Correctness figures.
    pub correctness: Option<Correctness>,
    /// Timing and roofline.
    pub performance: Option<Performance>,
    /// The candidate process's output (truncated; never parsed).
    pub log: String,
    /// Environment.
    pub environment: Environment,
    /// Wall seconds for the whole evaluation.
    pub elapsed_s: f64,
    /// Where those seconds went.
    pub time_split: TimeSplit,
    /// Reference outputs this evaluation had to compute (0 when all came from the cache).
    #[serde(default)]
    pub references_computed: usize,
    /// Why there is no timing although it was asked for (e.g. an interpreter on a CPU).
    #[serde(default)]
    pub timing_unavailable: Option<String>,
    /// Device kernels seen by the profiler during the quick check (GPU, Triton and CUDA).
    #[serde(default)]
    pub device_kernels: Option<Vec<String>>,
    /// The workload (index in the judged set) a failure happened on; None when passed or when
    /// the failure concerns no single workload (policy, build, load).
    #[serde(default)]
    pub failed_workload: Option<usize>,
    /// The cluster device that judged it (`node/cpu0`), as the cluster's driver named it;
    /// None when judged on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// Breakdown of an evaluation's wall time; `harness_s` is what the judge itself costs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TimeSplit {
    /// Compiling.
    pub build_s: f64,
    /// Inside the candidate's entry function (checked and timed calls).
    pub kernel_s: f64,
    /// Inside the XLA baseline (timed calls).
    pub baseline_s: f64,
    /// Everything else: processes, inputs, references, checks, I/O.
    pub harness_s: f64,
    /// Waiting for the device while other judges built, checked or timed on it (0 without a
    /// device scheduler); not part of `harness_s`.
    #[serde(default)]
    pub device_wait_s: f64,
    /// Judged on a cluster: this machine's wall time beyond the device's own (waiting in the
    /// cluster's queue for a device, moving the job and its answer); 0 when judged here.
    #[serde(default)]
    pub cluster_s: f64,
    /// Where `harness_s` went.
    #[serde(default)]
    pub harness: HarnessSplit,
}

/// Parts of the judge's own time (seconds); what they leave of `harness_s` is `other_s`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HarnessSplit {
    /// Starting the sandboxed runner, calibrating its channel and loading the candidate.
    pub runner_s: f64,
    /// Inputs and references for the correctness seeds (trusted `prepare`), staged for the
    /// runner.
    pub inputs_s: f64,
    /// Correctness calls beyond the kernel's own time, and checking their outputs.
    pub checks_s: f64,
    /// Baseline requests beyond the baseline's timed calls (its cache flushes, transfers).
    pub baseline_s: f64,
    /// Filling, poisoning, evicting and hashing the timing buffers, the runner stopped.
    pub buffers_s: f64,
    /// Where `buffers_s` went.
    #[serde(default)]
    pub buffer_parts: BufferSplit,
    /// Timed calls beyond what was charged to the kernel (waking up, the channel).
    pub calls_s: f64,
    /// Re-checking timed calls: snapshots, references for their fresh inputs, checks.
    pub rechecks_s: f64,
    /// The rest (builds' cache lookups, sandbox teardown, bookkeeping).
    pub other_s: f64,
}

/// Parts of the judge's buffer work per timed call (seconds, summed over calls).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BufferSplit {
    /// Creating the slots and the trusted inputs they start from.
    pub setup_s: f64,
    /// Drawing fresh inputs into the slots.
    pub draw_s: f64,
    /// Writing the outputs' poison.
    pub poison_s: f64,
    /// Evicting the slot from the caches.
    pub evict_s: f64,
    /// Hashing a call's outputs right after it.
    pub hash_s: f64,
}

impl BufferSplit {
    /// The parts as (name, seconds), in the order a call does them.
    pub fn parts(&self) -> [(&'static str, f64); 5] {
        [
            ("setup", self.setup_s),
            ("draw", self.draw_s),
            ("poison", self.poison_s),
            ("evict", self.evict_s),
            ("hash", self.hash_s),
        ]
    }
}

impl HarnessSplit {
    /// The parts as (name, seconds), in pipeline order.
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("runner", self.runner_s),
            ("inputs", self.inputs_s),
            ("checks", self.checks_s),
            ("baseline", self.baseline_s),
            ("buffers", self.buffers_s),
            ("calls", self.calls_s),
            ("rechecks", self.rechecks_s),
            ("other", self.other_s),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_summary_uses_interpolated_quantiles() {
        let t = Timing::from_ns(&[5_000_000, 1_000_000, 3_000_000, 2_000_000, 4_000_000]);
        assert_eq!(t.samples, 5);
        assert!((t.median_ms - 3.0).abs() < 1e-12);
        assert!((t.p10_ms - 1.4).abs() < 1e-12);
        assert!((t.p90_ms - 4.6).abs() < 1e-12);
    }

    #[test]
    fn statuses_use_the_design_names() {
        for s in [
            Status::Passed,
            Status::CompileError,
            Status::RuntimeError,
            Status::Timeout,
            Status::IncorrectShape,
            Status::IncorrectDtype,
            Status::IncorrectNumerical,
            Status::PolicyRejected,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("INCORRECT"), None);
    }

    #[test]
    fn reasons_round_trip_by_name_and_nothing_else_parses() {
        for (r, name) in Reason::NAMED.iter() {
            assert_eq!(&r.name(), name);
            assert_eq!(Reason::parse(name).as_ref(), Some(r));
            assert_eq!(serde_json::to_value(r).unwrap(), *name);
        }
        let sig = Reason::Signal("SIGSEGV".into());
        assert_eq!(sig.name(), "signal_SIGSEGV");
        assert_eq!(
            serde_json::from_value::<Reason>(serde_json::json!("signal_SIGSEGV")).unwrap(),
            sig
        );
        for bad in [
            "",
            "signal_",
            "signal_sigsegv",
            "signal_SIG\u{1b}[2J",
            "numerical mismatch",
            "PASSED",
        ] {
            assert_eq!(Reason::parse(bad), None, "{bad}");
        }
        assert!(serde_json::from_value::<Reason>(serde_json::json!("looks_fine")).is_err());
    }
}
