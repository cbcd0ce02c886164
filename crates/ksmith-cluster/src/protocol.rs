//! Protocol `ksmith-cluster/2` (docs/cluster.md): what travels between the caller, the driver
//! and the workers. Bump [`PROTOCOL`] on any change a peer could misread.

use ksmith_backend::hw::Hardware;
use ksmith_judge::remote::RemoteKind;
use ksmith_judge::{Comparison, Environment, EvalResult, Flush, JudgeConfig};
use ksmith_task::{Language, Solution, Task, Workload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The protocol version every message carries.
pub const PROTOCOL: u32 = 2;

/// This binary's version: a device runs the same `ksmith` or is not used.
pub const KSMITH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `ksmith worker identify` prints: who judges on a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Identity {
    /// Protocol version.
    pub protocol: u32,
    /// The worker's `ksmith` version.
    pub ksmith_version: String,
    /// The worker judge's environment (its fingerprint groups devices).
    pub environment: Environment,
    /// Whether every isolation layer is in force there.
    pub isolation_complete: bool,
    /// The worker's measured roofline.
    pub hardware: Hardware,
}

/// A task as it travels: its files (the worker loads it as the caller did) and the workloads
/// and content hash of the task as judged, which may be derived (a workload set, held-out
/// shapes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireTask {
    /// Task name.
    pub name: String,
    /// `task.toml` and the reference file, by name relative to the task directory.
    pub files: BTreeMap<String, String>,
    /// The workloads judged.
    pub workloads: Vec<Workload>,
    /// The task's other workloads.
    pub other_workloads: Vec<Workload>,
    /// The content hash of the task as judged.
    pub content_hash: String,
}

/// A candidate as it travels; re-checked on the worker as untrusted input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireSolution {
    /// Display name.
    pub name: String,
    /// Language.
    pub language: Language,
    /// Entry point.
    pub entry_point: String,
    /// Sources (relative path, text).
    pub sources: Vec<(String, String)>,
    /// Extra compiler flags.
    pub flags: Vec<String>,
    /// The caller's content hash: the worker's must be the same.
    pub content_hash: String,
}

impl From<&Solution> for WireSolution {
    fn from(s: &Solution) -> WireSolution {
        WireSolution {
            name: s.name.clone(),
            language: s.language,
            entry_point: s.entry_point.clone(),
            sources: s.sources.clone(),
            flags: s.flags.clone(),
            content_hash: s.content_hash.clone(),
        }
    }
}

/// The judge settings that travel. What guards the device (whether to judge without a complete
/// sandbox, the reference's time and memory limits, the cache directory) is the worker's own,
/// from its own command line, and is not in the request: a request cannot lower it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireConfig {
    /// Check seeds (2 to [`MAX_SEEDS`], distinct; the first two are the timing input sets).
    pub seeds: Vec<u64>,
    /// Candidate threads (1 to [`MAX_THREADS`]).
    pub threads: usize,
    /// Per-call limit, ms (100 ms to a day).
    pub call_timeout_ms: u64,
    /// Minimum timed time per side per workload, ms (1 to 600000).
    pub min_time_ms: u64,
    /// Minimum rounds (at least 2).
    pub min_rounds: usize,
    /// Maximum rounds (from `min_rounds` to [`MAX_ROUNDS`]).
    pub max_rounds: usize,
    /// Cache flushing.
    pub flush: Flush,
    /// Whether to time.
    pub timing: bool,
    /// Plausibility margin: a request may tighten it, never loosen it past the judge's default.
    pub plausibility_margin: f64,
}

/// Most seeds a request may ask for.
pub const MAX_SEEDS: usize = 100;
/// Most candidate threads a request may ask for.
pub const MAX_THREADS: usize = 1024;
/// Most timing rounds per workload a request may ask for.
pub const MAX_ROUNDS: usize = 1000;

impl From<&JudgeConfig> for WireConfig {
    fn from(c: &JudgeConfig) -> WireConfig {
        WireConfig {
            seeds: c.seeds.clone(),
            threads: c.threads,
            call_timeout_ms: c.call_timeout.as_millis() as u64,
            min_time_ms: c.min_time.as_millis() as u64,
            min_rounds: c.min_rounds,
            max_rounds: c.max_rounds,
            flush: c.flush,
            timing: c.timing,
            plausibility_margin: c.plausibility_margin,
        }
    }
}

impl WireConfig {
    /// The judge settings on the worker: the request's, each checked to be well formed, with
    /// the worker's own cache directory; the guard fields keep the worker's defaults (its
    /// command line sets them over these). Err names the field.
    pub fn to_config(&self, cache_dir: PathBuf) -> Result<JudgeConfig, String> {
        let mut seen = std::collections::BTreeSet::new();
        if !(2..=MAX_SEEDS).contains(&self.seeds.len())
            || !self.seeds.iter().all(|s| seen.insert(*s))
        {
            return Err(format!(
                "config.seeds: {} seeds; expected 2 to {MAX_SEEDS} distinct ones",
                self.seeds.len()
            ));
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(format!(
                "config.threads: {}; expected 1 to {MAX_THREADS}",
                self.threads
            ));
        }
        if !(100..=86_400_000).contains(&self.call_timeout_ms) {
            return Err(format!(
                "config.call_timeout_ms: {}; expected 100 to 86400000",
                self.call_timeout_ms
            ));
        }
        if !(1..=600_000).contains(&self.min_time_ms) {
            return Err(format!(
                "config.min_time_ms: {}; expected 1 to 600000",
                self.min_time_ms
            ));
        }
        if self.min_rounds < 2 || self.min_rounds > self.max_rounds || self.max_rounds > MAX_ROUNDS
        {
            return Err(format!(
                "config.min_rounds/max_rounds: {}/{}; expected 2 <= min <= max <= {MAX_ROUNDS}",
                self.min_rounds, self.max_rounds
            ));
        }
        let mut c = JudgeConfig::new(cache_dir, self.threads);
        if !(self.plausibility_margin.is_finite() && self.plausibility_margin > 0.0) {
            return Err(format!(
                "config.plausibility_margin: {}; expected a positive number",
                self.plausibility_margin
            ));
        }
        // A larger margin lets faster-than-the-floor results through: only a tighter one counts.
        c.plausibility_margin = self.plausibility_margin.min(c.plausibility_margin);
        c.seeds = self.seeds.clone();
        c.call_timeout = Duration::from_millis(self.call_timeout_ms);
        c.min_time = Duration::from_millis(self.min_time_ms);
        c.min_rounds = self.min_rounds;
        c.max_rounds = self.max_rounds;
        c.flush = self.flush;
        c.timing = self.timing;
        Ok(c)
    }
}

/// One job for a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    /// Protocol version.
    pub protocol: u32,
    /// Evaluate (raced or not) or compare.
    #[serde(flatten)]
    pub job: RemoteKind,
    /// The task.
    pub task: WireTask,
    /// The candidates (one for an evaluation).
    pub solutions: Vec<WireSolution>,
    /// Judge settings.
    pub config: WireConfig,
}

/// Why a worker could not judge (a candidate that fails is a result, not this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerErrorKind {
    /// The backend cannot run on that device.
    Unavailable,
    /// The task's reference or generators failed.
    Task,
    /// The device's sandbox is incomplete and the caller did not accept it.
    Isolation,
    /// The device's own environment failed (harness, compiler, disk).
    Environment,
    /// The request was malformed or refused (protocol, hashes, unsafe names).
    Request,
}

/// A worker's error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerError {
    /// What kind.
    pub kind: WorkerErrorKind,
    /// The backend, for [`WorkerErrorKind::Unavailable`].
    #[serde(default)]
    pub backend: Option<String>,
    /// What went wrong.
    pub message: String,
}

/// A worker's answer to one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerResponse {
    /// Protocol version.
    pub protocol: u32,
    /// Whether the job ran.
    pub ok: bool,
    /// Per candidate (an evaluation: one).
    #[serde(default)]
    pub results: Vec<EvalResult>,
    /// For a comparison.
    #[serde(default)]
    pub comparison: Option<Comparison>,
    /// When not ok.
    #[serde(default)]
    pub error: Option<WorkerError>,
}

impl WorkerResponse {
    /// A failed answer.
    pub fn error(
        kind: WorkerErrorKind,
        backend: Option<String>,
        message: String,
    ) -> WorkerResponse {
        WorkerResponse {
            protocol: PROTOCOL,
            ok: false,
            results: Vec::new(),
            comparison: None,
            error: Some(WorkerError {
                kind,
                backend,
                message,
            }),
        }
    }
}

/// The task as it travels: the files of its directory that define it, and its workloads.
pub fn wire_task(task: &Task) -> Result<WireTask, String> {
    let mut files = BTreeMap::new();
    for name in [ksmith_task::TASK_FILE_NAME, task.reference.file.as_str()] {
        let path = task.dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        files.insert(name.to_string(), text);
    }
    Ok(WireTask {
        name: task.name.clone(),
        files,
        workloads: task.workloads.clone(),
        other_workloads: task.other_workloads.clone(),
        content_hash: task.content_hash.clone(),
    })
}
