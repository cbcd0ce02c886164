//! The judge's settings and its own errors.

use crate::*;

/// Whether to flush caches between timed calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flush {
    /// Flush when a workload's data would fit in the last-level cache.
    Auto,
    /// Always flush.
    Always,
    /// Never flush.
    Never,
}

/// Judge settings. Frozen for the judge's lifetime.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// Seeds for the full check (at least 3; the first two are the timing input sets).
    pub seeds: Vec<u64>,
    /// OpenMP threads for candidates.
    pub threads: usize,
    /// Wall-clock limit per candidate request.
    pub call_timeout: Duration,
    /// Minimum total timed time per side per workload.
    pub min_time: Duration,
    /// Minimum alternating rounds per workload.
    pub min_rounds: usize,
    /// Maximum alternating rounds per workload.
    pub max_rounds: usize,
    /// Cache flushing between timed calls.
    pub flush: Flush,
    /// Whether to time at all (correctness only otherwise).
    pub timing: bool,
    /// Candidates faster than roofline floor / this factor are flagged `implausible_speed`.
    pub plausibility_margin: f64,
    /// Where builds and reference outputs are cached.
    pub cache_dir: PathBuf,
    /// Judge untrusted code even where an isolation layer is missing (recorded in every
    /// result); without it the judge refuses.
    pub unsafe_no_sandbox: bool,
    /// Wall-clock limit on each request to the trusted process (the reference, generators,
    /// checks); past it the process is killed and the task blamed.
    pub reference_timeout: Duration,
    /// Memory limit of the trusted process in bytes (`Some(0)`: none; `None`: the machine's
    /// physical memory on the CPU backend, none on an accelerator).
    pub reference_memory: Option<u64>,
}

impl JudgeConfig {
    /// Defaults with the given cache directory.
    pub fn new(cache_dir: PathBuf, threads: usize) -> JudgeConfig {
        JudgeConfig {
            seeds: vec![1, 2, 3],
            threads,
            call_timeout: Duration::from_secs(30),
            min_time: Duration::from_millis(100),
            min_rounds: 4,
            max_rounds: 60,
            flush: Flush::Auto,
            timing: true,
            plausibility_margin: 2.5,
            cache_dir,
            unsafe_no_sandbox: false,
            reference_timeout: DEFAULT_REFERENCE_TIMEOUT,
            reference_memory: None,
        }
    }
}

/// Default of [`JudgeConfig::reference_timeout`].
pub const DEFAULT_REFERENCE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// Python harness problem.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// Backend problem (no compiler, cache I/O).
    #[error(transparent)]
    Backend(#[from] c::BackendError),
    /// The solution's backend cannot run on this machine (e.g. CUDA without nvcc or a GPU).
    #[error("{backend} backend unavailable on this machine: {why}")]
    Unavailable {
        /// Backend name.
        backend: &'static str,
        /// What is missing.
        reason: NotRunReason,
        /// In words.
        why: String,
        /// The build's facts when the candidate built before the missing piece was needed
        /// ("built; not run: no device").
        built: Option<Box<BuildInfo>>,
    },
    /// An isolation layer is missing and the user did not accept judging without it.
    #[error("untrusted code is not judged here: isolation is incomplete ({0}); fix the machine (see `ksmith hw`) or pass --unsafe-no-sandbox to judge anyway (recorded in every result)")]
    Isolation(String),
    /// The device's lock files failed.
    #[error(transparent)]
    Device(#[from] SchedulerError),
    /// The remote devices could not judge (a device lost and no other, the cluster gone): not
    /// the candidate's doing; the run stops and can be resumed.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The trusted side failed on this task (reference error, bad generator...).
    #[error("task {task}: {message}")]
    Task {
        /// Task name.
        task: String,
        /// What went wrong.
        message: String,
    },
}
