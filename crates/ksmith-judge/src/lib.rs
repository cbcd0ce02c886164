//! The judge: the evaluation cascade for one candidate, cheapest first, with early exit:
//! static policy → build (+ symbol policy) → load in the sandbox → quick check on the smallest
//! workload → full check (every workload, several seeds) → timing against the XLA baseline in
//! alternating rounds (+ re-check of timed outputs) → roofline figures.

mod fresh;
mod measure;
mod parallel;
pub mod remote;
mod result;
mod roofline;
pub mod scheduler;
mod slots;
mod timing;
mod together;

pub use result::*;
pub use timing::Race;
pub use together::{Comparison, Relative};

use scheduler::{Access, DeviceScheduler, Lease, SchedulerError, Work};

use ksmith_backend::c::{self, Compiler};
use ksmith_backend::cuda::GpuRoofline;
use ksmith_backend::hw::Hardware;
use ksmith_backend::Diagnostic;
use ksmith_harness::{random_u64, CallError, HarnessError, Peer, PythonEnv};
use ksmith_sandbox::{signal_name, Exit, Limits};
use ksmith_task::{Language, Solution, Task, WorkloadSet};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Version of the checking and timing method: part of every evaluation key, so results measured
/// by an older method are never reused. Bump it when the cascade or the timing changes.
pub const METHOD_VERSION: u32 = 9;

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

/// Failures that are not the candidate's fault (harness, task, machine).
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
        why: String,
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

/// Long-lived judge: keeps the trusted server (and its loaded tasks) across evaluations.
pub struct Judge {
    config: JudgeConfig,
    env: PythonEnv,
    compiler: Compiler,
    hw: Hardware,
    trusted: Option<Peer>,
    loaded: BTreeSet<String>,
    environment: Environment,
    hw_path: Option<PathBuf>,
    hw_rechecked: bool,
    /// Reference outputs computed (cache misses) so far.
    references_computed: usize,
    /// Where the evaluation in progress spent the judge's own time.
    split: HarnessSplit,
    /// The race of the evaluation in progress, if any.
    race: Option<Race>,
    /// Whether the evaluation in progress runs on the GPU.
    on_gpu: bool,
    /// How the trusted side last made the baseline's caches cold.
    baseline_cold: ColdCache,
    /// The GPU's measured roofline (asked once from the trusted process).
    gpu_roofline: Option<GpuRoofline>,
    /// Poison bit pattern (element width, bits) per dtype name, from the trusted side.
    poison: std::collections::BTreeMap<String, (usize, u64)>,
    /// Last seed handed out for fresh timing inputs (random start).
    fresh_seed: u64,
    /// Trusted scratch for fresh timing inputs and their references.
    fresh_dir: tempfile::TempDir,
    /// Whether checked candidates are kept for timing together instead of timed at once.
    parking: bool,
    /// Set by the checks when parking: the channel's cost and the per-workload call estimates.
    park: Option<(measure::ChannelCost, Vec<u64>)>,
    /// The candidate just checked, kept with its runner for timing together.
    parked: Option<together::Parked>,
    /// One check seed per workload instead of all ([`Judge::compare_checked`]).
    light_checks: bool,
    /// A warm-up request sent to the trusted process and not answered yet (request, id):
    /// answered before anything else is asked of it.
    warming: Option<(Value, u64)>,
    /// Tasks (content hashes) the trusted process now running was asked to warm up for.
    warmed: BTreeSet<String>,
    /// The workload the candidate's current call or check is on (a failure is attributed to
    /// it); None before the first.
    at: Option<usize>,
    /// Told of every stage an evaluation enters (the CLI's progress display).
    stage_hook: Option<StageHook>,
    /// The device's scheduler, when judges share it (None: the device is used unasked).
    scheduler: Option<Arc<DeviceScheduler>>,
    /// The lease held now; at most one, so a judge never waits for itself.
    lease: Option<Lease>,
    /// Time spent waiting for the device in the evaluation in progress.
    device_wait: Duration,
    /// Devices elsewhere that judge instead of this machine (`--cluster`).
    remote: Option<Arc<dyn remote::Remote>>,
    /// Runners' teardowns (killed, reaped, their directories and memory freed) off the
    /// evaluation's path: joined before the device is held alone and when the judge goes.
    teardowns: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Judge {
    fn drop(&mut self) {
        // The teardowns wait for a shared lease: ours goes first.
        self.lease = None;
        self.join_teardown();
    }
}

/// Called with the solution's name and the stage its evaluation enters.
pub type StageHook = Box<dyn FnMut(&str, Stage) + Send>;

/// Where the runner writes each output for a dump `prefix`: the judge names the files itself,
/// never trusting paths the runner reports.
pub(crate) fn output_paths(task: &Task, prefix: &str) -> Value {
    task.outputs
        .iter()
        .map(|o| {
            (
                o.tensor.name.clone(),
                json!(format!("{prefix}.{}.bin", o.tensor.name)),
            )
        })
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

/// Why the cascade stopped early.
struct Verdict {
    status: Status,
    reason: String,
    detail: String,
    /// The workload the failure happened on, when it concerns one.
    workload: Option<usize>,
}

impl Verdict {
    fn new(status: Status, reason: &str, detail: impl Into<String>) -> Verdict {
        Verdict {
            status,
            reason: reason.into(),
            detail: detail.into(),
            workload: None,
        }
    }

    /// Attributes the failure to workload `w` unless it already names one.
    fn at(mut self, w: Option<usize>) -> Verdict {
        self.workload = self.workload.or(w);
        self
    }
}

/// Whether every isolation layer is in force on this machine.
pub fn isolation_complete() -> bool {
    ksmith_sandbox::isolation().complete()
}

/// The environment's `isolation` text: the sandbox's layers, marked UNSAFE when some are
/// missing and the user judges anyway.
pub fn isolation_text(complete: bool, note: &str, unsafe_no_sandbox: bool) -> String {
    if !complete && unsafe_no_sandbox {
        format!("UNSAFE (--unsafe-no-sandbox): {note}")
    } else {
        note.to_string()
    }
}

/// Default of [`JudgeConfig::reference_timeout`].
pub const DEFAULT_REFERENCE_TIMEOUT: Duration = Duration::from_secs(300);

impl Judge {
    /// Creates a judge; the trusted server starts on first use.
    pub fn new(config: JudgeConfig, env: PythonEnv, compiler: Compiler, hw: Hardware) -> Judge {
        let environment = Environment {
            cpu: hw.cpu.clone(),
            cores: hw.cores,
            threads: config.threads,
            compiler: compiler.version.clone(),
            flags: c::DEFAULT_FLAGS.iter().map(|s| s.to_string()).collect(),
            isolation: isolation_text(
                ksmith_sandbox::isolation().complete(),
                &ksmith_sandbox::isolation().note,
                config.unsafe_no_sandbox,
            ),
            ..Environment::default()
        };
        Judge {
            config,
            env,
            compiler,
            hw,
            trusted: None,
            loaded: BTreeSet::new(),
            environment,
            hw_path: None,
            hw_rechecked: false,
            references_computed: 0,
            split: HarnessSplit::default(),
            race: None,
            on_gpu: false,
            baseline_cold: ColdCache::Hot,
            gpu_roofline: None,
            poison: Default::default(),
            // Far from the small seeds tasks and users pick, and unpredictable.
            fresh_seed: random_u64() | (1 << 62),
            fresh_dir: ksmith_sandbox::memory_tempdir("ksmith-fresh-")
                .expect("a temporary directory for fresh timing inputs"),
            parking: false,
            park: None,
            parked: None,
            light_checks: false,
            warming: None,
            warmed: BTreeSet::new(),
            at: None,
            stage_hook: None,
            scheduler: None,
            lease: None,
            device_wait: Duration::ZERO,
            remote: None,
            teardowns: Vec::new(),
        }
    }

    /// Sends every evaluation and comparison to `remote` instead of judging here (None: here).
    /// Task validation and profiling stay on this machine.
    pub fn set_remote(&mut self, remote: Option<Arc<dyn remote::Remote>>) {
        if remote.is_some() {
            // Asked of the remote on first use.
            self.environment.fingerprint.clear();
        }
        self.remote = remote;
    }

    /// Whether candidates are judged elsewhere.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Sets (or clears) the scheduler of the device this judge builds, checks and times on:
    /// builds and checks then share it with other judges, timing holds it alone.
    pub fn set_scheduler(&mut self, scheduler: Option<Arc<DeviceScheduler>>) {
        self.lease = None;
        self.scheduler = scheduler;
    }

    /// Holds a lease for `work` (keeping the one held when its access is the same), counting
    /// the wait; without a scheduler, nothing.
    pub(crate) fn hold(&mut self, work: Work) -> Result<(), JudgeError> {
        let exclusive = work.access() == Access::Exclusive;
        let Some(s) = self.scheduler.clone() else {
            if exclusive {
                self.join_teardown();
            }
            return Ok(());
        };
        if self.lease.as_ref().map(Lease::access) == Some(work.access()) {
            return Ok(());
        }
        // Released before asking: a shared lease held while waiting for an exclusive one
        // would never be granted (nor the teardown's, which waits for ours to go).
        self.lease = None;
        if exclusive {
            self.join_teardown();
        }
        let started = Instant::now();
        self.lease = Some(s.acquire(work)?);
        self.device_wait += started.elapsed();
        Ok(())
    }

    /// Ends a runner on another thread (under a shared lease of the device, so that no
    /// timing elsewhere pays for its memory being freed): a runner is killed, never asked to
    /// exit, and its interpreter's exit took 15-60 ms of every evaluation.
    pub(crate) fn end_runner(&mut self, mut runner: Peer) {
        let scheduler = self.scheduler.clone();
        let ended = std::thread::Builder::new()
            .name("ksmith-teardown".into())
            .spawn(move || {
                let lease = scheduler.map(|s| s.acquire(Work::Load));
                runner.kill();
                drop(runner);
                drop(lease);
            });
        // Without a thread, here and now (the closure, and the runner, dropped on failure).
        self.teardowns.extend(ended.ok());
    }

    /// Waits for the runners' teardowns. Never while holding the device alone: a teardown
    /// waits for a shared lease.
    fn join_teardown(&mut self) {
        for t in self.teardowns.drain(..) {
            let _ = t.join();
        }
    }

    /// Releases the device (the evaluation or the timing is over).
    pub(crate) fn release(&mut self) {
        self.lease = None;
    }

    /// Sets (or clears) the hook told of every stage an evaluation enters.
    pub fn set_stage_hook(&mut self, hook: Option<StageHook>) {
        self.stage_hook = hook;
    }

    /// Moves the evaluation in progress to `stage` and tells the hook.
    pub(crate) fn enter(&mut self, r: &mut EvalResult, stage: Stage) {
        r.stage = stage;
        if let Some(h) = &mut self.stage_hook {
            h(&r.solution, stage);
        }
    }

    /// Where improved roofline measurements are saved (see `recheck_roofline`).
    pub fn with_hw_cache(mut self, path: PathBuf) -> Judge {
        self.hw_path = Some(path);
        self
    }

    /// The settings.
    pub fn config(&self) -> &JudgeConfig {
        &self.config
    }

    /// The measured machine.
    pub fn hardware(&self) -> &Hardware {
        &self.hw
    }

    /// Environment recorded with every result (complete once the trusted server started).
    pub fn environment(&mut self) -> Result<&Environment, JudgeError> {
        if let Some(r) = &self.remote {
            if self.environment.fingerprint.is_empty() {
                self.environment = r.environment(&self.config)?;
            }
            return Ok(&self.environment);
        }
        self.trusted()?;
        Ok(&self.environment)
    }

    fn trusted(&mut self) -> Result<&mut Peer, JudgeError> {
        if self.trusted.is_none() {
            self.warming = None;
            self.warmed.clear();
            // Per CPU: XLA compiles for the host's vector extensions, and a cache directory
            // may travel with a project to another machine.
            let cpu = blake3::hash(ksmith_backend::hw::cpu_identity().as_bytes()).to_hex();
            let xla = self.config.cache_dir.join("xla").join(&cpu[..16]);
            let peer = ksmith_harness::start_trusted(
                &self.env,
                self.config.reference_memory,
                Some(xla.as_path()),
            )?;
            let hello = peer.hello().clone();
            if let Some(p) = hello["poison"].as_object() {
                self.poison = p
                    .iter()
                    .filter_map(|(k, v)| {
                        Some((k.clone(), (v[0].as_u64()? as usize, v[1].as_u64()?)))
                    })
                    .collect();
            }
            // The declared version, and the digest of the files that made this result: a
            // harness changed without a new version number still gets its own results.
            self.environment.harness_version = format!(
                "{}+{}",
                hello["harness_version"].as_str().unwrap_or(""),
                ksmith_harness::harness_digest()
            );
            if let Some(v) = hello["versions"].as_object() {
                self.environment.versions = v
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect();
            }
            self.environment.fingerprint = self.environment.compute_fingerprint();
            self.trusted = Some(peer);
        }
        if let Some((req, id)) = self.warming.take() {
            let timeout = self.config.reference_timeout;
            let peer = self.trusted.as_mut().expect("started above");
            peer.thaw();
            match peer.recv_reply(&req, id, timeout) {
                // A task whose programs cannot be compiled fails its next real request, which
                // says so in its own words.
                Ok(_) | Err(CallError::Remote { .. }) => {}
                Err(e) => {
                    // Killed (past the reference timeout) or gone: a fresh one next time.
                    self.trusted = None;
                    self.loaded.clear();
                    return Err(HarnessError::Setup(format!(
                        "the trusted process failed while compiling the task's reference and baseline: {e}"
                    ))
                    .into());
                }
            }
        }
        let peer = self.trusted.as_mut().expect("just started");
        // Timing stops it for the candidate's turn; a round that ended early (a candidate
        // fault) must not leave it stopped for the next request.
        peer.thaw();
        Ok(peer)
    }

    fn trusted_call(&mut self, task: &Task, req: Value) -> Result<Value, JudgeError> {
        let timeout = self.config.reference_timeout;
        let peer = self.trusted()?;
        match peer.call(&req, timeout) {
            Ok(v) => Ok(v),
            Err(CallError::Remote { message, .. }) => Err(JudgeError::Task {
                task: task.name.clone(),
                message,
            }),
            Err(CallError::Timeout(t)) => {
                // Killed by `call`; the next request starts a fresh one.
                self.trusted = None;
                self.loaded.clear();
                let what = match req["cmd"].as_str() {
                    Some("load_task") => "importing it".to_string(),
                    _ => format!("{}() or an input generator", task.reference.function),
                };
                Err(JudgeError::Task {
                    task: task.name.clone(),
                    message: format!(
                        "{}: {what} did not finish within {} s (--reference-timeout)",
                        task.reference_path().display(),
                        t.as_secs_f64()
                    ),
                })
            }
            Err(e) => {
                // The trusted server is gone or confused; start a fresh one next time.
                self.trusted = None;
                self.loaded.clear();
                Err(HarnessError::from(e).into())
            }
        }
    }

    fn ensure_loaded(&mut self, task: &Task) -> Result<(), JudgeError> {
        if !self.loaded.contains(&task.content_hash) {
            let spec = serde_json::to_value(task).map_err(|e| JudgeError::Task {
                task: task.name.clone(),
                message: e.to_string(),
            })?;
            self.trusted_call(task, json!({"cmd": "load_task", "task": spec}))?;
            self.loaded.insert(task.content_hash.clone());
        }
        Ok(())
    }

    /// Asks the trusted process, once per task and process, to compile the baseline and the
    /// float64 reference of every workload (trusted.py `warm`) while a C candidate is built
    /// and its runner started (its baseline is timed on the CPU); its reply is read before the
    /// next request. Not sent when nothing will be timed.
    fn start_warm(&mut self, task: &Task) -> Result<(), JudgeError> {
        if !self.config.timing || self.warmed.contains(&task.content_hash) {
            return Ok(());
        }
        self.ensure_loaded(task)?;
        let req = json!({
            "cmd": "warm", "task": task.content_hash,
            "workloads": (0..task.workloads.len()).collect::<Vec<_>>(),
            "seed": self.config.seeds[0], "device": "cpu",
            "evict": self.config.flush != Flush::Never, "cache_dir": self.ref_cache(),
        });
        let peer = self.trusted()?;
        // A process that cannot take the request is found gone by the next one.
        if let Ok(id) = peer.send_request(&req) {
            self.warming = Some((req, id));
        }
        self.warmed.insert(task.content_hash.clone());
        Ok(())
    }

    /// Where the trusted side caches inputs and references: per harness digest, since the
    /// harness's code draws and computes them.
    fn ref_cache(&self) -> String {
        self.config
            .cache_dir
            .join("reference")
            .join(ksmith_harness::harness_digest())
            .display()
            .to_string()
    }

    /// A seed no candidate has seen: random per judge, then counting.
    fn next_fresh_seed(&mut self) -> u64 {
        self.fresh_seed = self.fresh_seed.wrapping_add(1);
        self.fresh_seed
    }

    /// Generates the inputs of (workload, seed) on the trusted side, without a reference, as
    /// raw files in the judge's own directory (one per input, in declared order).
    fn fresh_input_files(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        tag: &str,
    ) -> Result<Vec<PathBuf>, JudgeError> {
        let prefix = self.fresh_dir.path().join(format!("w{w}_{tag}"));
        let req = json!({"cmd": "inputs", "task": task.content_hash, "workload": w, "seed": seed,
                         "prefix": prefix.display().to_string()});
        let v = self.trusted_call(task, req)?;
        Ok(task
            .inputs
            .iter()
            .map(|i| PathBuf::from(v["paths"][&i.name].as_str().unwrap_or_default()))
            .collect())
    }

    /// Makes sure inputs and the float64 reference exist for (workload, seed); returns the inputs path.
    fn prepare(&mut self, task: &Task, workload: usize, seed: u64) -> Result<String, JudgeError> {
        self.ensure_loaded(task)?;
        let req = json!({"cmd": "prepare", "task": task.content_hash, "workload": workload, "seed": seed, "cache_dir": self.ref_cache()});
        let v = self.trusted_call(task, req)?;
        if v["cached"].as_bool() != Some(true) {
            self.references_computed += 1;
        }
        Ok(v["inputs"].as_str().unwrap_or_default().to_string())
    }

    /// The judge's own inputs for a workload (first seed), as the safetensors file the trusted
    /// side prepared: what a profiler should run a candidate on.
    pub fn prepared_inputs(&mut self, task: &Task, workload: usize) -> Result<PathBuf, JudgeError> {
        let seed = self.config.seeds.first().copied().unwrap_or(1);
        // The trusted side's work shares the device, like a check.
        self.hold(Work::Reference)?;
        let prepared = self.prepare(task, workload, seed).map(PathBuf::from);
        self.release();
        prepared
    }

    /// Key under which evaluations are interchangeable: same task and code, same environment
    /// (machine, compiler, harness and library versions) and same judge settings.
    pub fn eval_key(&mut self, task: &Task, solution: &Solution) -> Result<String, JudgeError> {
        let fingerprint = self.environment()?.fingerprint.clone();
        let c = &self.config;
        let mut key = ksmith_task::FieldHasher::new("ksmith evaluation");
        key.field(METHOD_VERSION.to_le_bytes())
            .field(&task.content_hash)
            .field(&solution.content_hash)
            .field(&fingerprint)
            .field(format!("{:?}", c.seeds))
            .field(c.threads.to_le_bytes())
            .field(format!("{:?}", c.call_timeout))
            .field(format!("{:?}", c.flush))
            .field(c.timing.to_string())
            .field(c.min_time.as_millis().to_le_bytes());
        Ok(key.hex())
    }

    /// Runs the reference checks of `ksmith validate`; returns `(field, message)` problems.
    pub fn validate_task(&mut self, task: &Task) -> Result<Vec<(String, String)>, JudgeError> {
        self.hold(Work::Reference)?;
        let problems = self.validate_leased(task);
        self.release();
        problems
    }

    fn validate_leased(&mut self, task: &Task) -> Result<Vec<(String, String)>, JudgeError> {
        self.ensure_loaded(task)?;
        let mut problems = Vec::new();
        // One request per workload: the reference timeout bounds each, not the whole task.
        for w in 0..task.workloads.len() {
            let v = self.trusted_call(
                task,
                json!({"cmd": "validate", "task": task.content_hash, "cache_dir": self.ref_cache(), "workload": w}),
            )?;
            problems.extend(v["problems"].as_array().into_iter().flatten().map(|p| {
                (
                    p["field"].as_str().unwrap_or("-").to_string(),
                    p["message"].as_str().unwrap_or("").to_string(),
                )
            }));
        }
        Ok(problems)
    }

    /// Evaluates one candidate. Errors only for problems that are not the candidate's.
    pub fn evaluate(&mut self, task: &Task, solution: &Solution) -> Result<EvalResult, JudgeError> {
        self.evaluate_raced(task, solution, None)
    }

    /// Like [`Judge::evaluate`], but timing stops early (`performance.eliminated`) once the
    /// candidate is clearly slower than the race's incumbent. Correctness is checked in full.
    pub fn evaluate_raced(
        &mut self,
        task: &Task,
        solution: &Solution,
        race: Option<Race>,
    ) -> Result<EvalResult, JudgeError> {
        if let Some(r) = self.remote.clone() {
            return self.judge_remote(&*r, task, solution, race);
        }
        self.race = race;
        let r = self.evaluate_inner(task, solution);
        self.race = None;
        r
    }

    /// One evaluation; the device is released at its end, whatever the outcome.
    fn evaluate_inner(
        &mut self,
        task: &Task,
        solution: &Solution,
    ) -> Result<EvalResult, JudgeError> {
        self.device_wait = Duration::ZERO;
        let r = self.evaluate_leased(task, solution);
        self.release();
        r
    }

    fn evaluate_leased(
        &mut self,
        task: &Task,
        solution: &Solution,
    ) -> Result<EvalResult, JudgeError> {
        let iso = ksmith_sandbox::isolation();
        if !iso.complete() && !self.config.unsafe_no_sandbox {
            return Err(JudgeError::Isolation(iso.note.clone()));
        }
        let start = Instant::now();
        let computed_before = self.references_computed;
        // Starting the trusted process (Python, JAX) is heavy CPU work: never while another
        // judge times.
        self.hold(Work::Reference)?;
        self.trusted()?;
        let task = &match self.task_for(task, solution) {
            Ok(t) => t,
            // The static policy needs no device: a CUDA candidate that breaks it is rejected
            // on any machine, not reported unavailable.
            Err(e @ JudgeError::Unavailable { .. }) if solution.language == Language::Cuda => {
                let mut r = self.blank_result(task, solution);
                match cuda_policy(solution, &mut r) {
                    Some(v) => {
                        apply_verdict(&mut r, Some(v));
                        r.elapsed_s = start.elapsed().as_secs_f64();
                        return Ok(r);
                    }
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        self.on_gpu = solution.language != Language::C && self.has_gpu()?;
        if self.on_gpu && self.gpu_roofline.is_none() {
            self.gpu_roofline = Some(self.measure_gpu()?);
        }
        let mut r = self.blank_result(task, solution);
        self.split = HarnessSplit::default();
        let verdict = self.cascade(task, solution, &mut r)?;
        apply_verdict(&mut r, verdict);
        r.elapsed_s = start.elapsed().as_secs_f64();
        r.references_computed = self.references_computed - computed_before;
        let t = &mut r.time_split;
        t.build_s = r.build.as_ref().map(|b| b.seconds).unwrap_or(0.0);
        t.device_wait_s = self.device_wait.as_secs_f64();
        t.harness_s =
            (r.elapsed_s - t.build_s - t.kernel_s - t.baseline_s - t.device_wait_s).max(0.0);
        t.harness = std::mem::take(&mut self.split);
        let parts: f64 = t.harness.parts().iter().map(|(_, s)| s).sum();
        t.harness.other_s = (t.harness_s - parts).max(0.0);
        Ok(r)
    }

    /// A result that has passed nothing yet.
    fn blank_result(&self, task: &Task, solution: &Solution) -> EvalResult {
        EvalResult {
            status: Status::Passed,
            reason: None,
            detail: None,
            stage: Stage::Policy,
            task: task.name.clone(),
            task_hash: task.content_hash.clone(),
            solution: solution.name.clone(),
            solution_hash: solution.content_hash.clone(),
            policy: Vec::new(),
            build: None,
            correctness: None,
            performance: None,
            log: String::new(),
            environment: self.environment.clone(),
            elapsed_s: 0.0,
            time_split: TimeSplit::default(),
            references_computed: 0,
            timing_unavailable: None,
            device_kernels: None,
            failed_workload: None,
        }
    }

    /// Whether the trusted process found an accelerator (JAX's default backend is not the CPU).
    fn has_gpu(&mut self) -> Result<bool, JudgeError> {
        let device = self.trusted()?.hello()["device"].as_str().unwrap_or("cpu");
        Ok(device == "gpu" || device == "cuda" || device == "rocm")
    }

    /// The task restricted to the workload set the solution's backend runs here: C uses the
    /// CPU set; Triton and Pallas the interpret set on a CPU; GPU backends on a GPU the gpu set
    /// (else the CPU set).
    fn task_for(&mut self, task: &Task, solution: &Solution) -> Result<Task, JudgeError> {
        let lang = solution.language;
        if lang == Language::C {
            return Ok(task.clone());
        }
        let gpu = self.has_gpu()?;
        if lang == Language::Cuda {
            let why = match (ksmith_backend::cuda::nvcc(), gpu) {
                (None, _) => Some("nvcc not found (set NVCC or put nvcc on PATH)"),
                (Some(_), false) => Some("no GPU visible to the harness"),
                _ => None,
            };
            if let Some(why) = why {
                return Err(JudgeError::Unavailable {
                    backend: "cuda",
                    why: why.into(),
                });
            }
        }
        if gpu {
            return Ok(task
                .for_set(WorkloadSet::Gpu)
                .unwrap_or_else(|| task.clone()));
        }
        task.for_set(WorkloadSet::Interpret).ok_or_else(|| JudgeError::Task {
            task: task.name.clone(),
            message: format!(
                "{} candidates run in the interpreter on this CPU, which needs small workloads: add [[workloads]] with set = \"interpret\"",
                lang.name()
            ),
        })
    }

    /// Asks the trusted process to measure the GPU (copy bandwidth, matmul peaks).
    pub fn measure_gpu(&mut self) -> Result<GpuRoofline, JudgeError> {
        // Measured alone on the device; released after (an evaluation takes its own leases).
        self.hold(Work::Roofline)?;
        let reply = self
            .trusted()
            .map(|t| t.call(&json!({"cmd": "gpu_hw"}), Duration::from_secs(600)));
        self.release();
        let v = reply?.map_err(|e| match e {
            CallError::Remote { message, .. } => JudgeError::Unavailable {
                backend: "gpu",
                why: message,
            },
            e => JudgeError::Harness(HarnessError::from(e)),
        })?;
        serde_json::from_value(v).map_err(|e| JudgeError::Task {
            task: "-".into(),
            message: format!("gpu_hw reply: {e}"),
        })
    }

    fn cascade(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, JudgeError> {
        // Policy and build share the device: they are never timed.
        self.hold(Work::Build)?;
        if solution.language.is_python() {
            return self.cascade_python(task, solution, r);
        }
        if solution.language == Language::Cuda {
            return self.cascade_cuda(task, solution, r);
        }
        // 1. Static policy on the source.
        r.policy = solution
            .sources
            .iter()
            .flat_map(|(n, s)| c::check_source(n, s))
            .collect();
        if let Some(v) = policy_verdict(r) {
            return Ok(Some(v));
        }
        // The trusted side compiles what timing will need while the build and the runner's
        // start take their time.
        self.start_warm(task)?;
        // The runner's interpreter starts while the compiler works (neither is timed); it is
        // this candidate's alone, and gets the library in its own directory once built. That
        // directory is an in-memory file system of its own only with a user namespace;
        // without one it is on the host's (perhaps `noexec`) temporary file system, so the
        // runner starts after the build and reads the library where it was built.
        let started = Instant::now();
        let early = if ksmith_sandbox::isolation().user_namespace {
            Some(self.spawn_runner(task, 0, Vec::new())?)
        } else {
            None
        };
        self.split.runner_s += started.elapsed().as_secs_f64();
        // 2. Build, then the policy on the library's imports.
        self.enter(r, Stage::Build);
        let built = match c::build(
            &self.compiler,
            task,
            solution,
            &[],
            &self.config.cache_dir.join("build"),
        )? {
            Ok(b) => b,
            Err(f) => return Ok(Some(compile_failure(f, r))),
        };
        r.build = Some(build_info(&built, Vec::new()));
        if let Some(v) = c::check_library(&built.library) {
            r.policy = v;
            if let Some(v) = r.policy.first() {
                // Every refused name in one line: the first one's reason, the others named.
                let mut detail = v.message.clone();
                let others: Vec<String> = r.policy[1..]
                    .iter()
                    .map(|o| format!("`{}`", o.name))
                    .collect();
                if !others.is_empty() {
                    detail.push_str(&format!("; also refused: {}", others.join(", ")));
                }
                return Ok(Some(Verdict::new(
                    Status::PolicyRejected,
                    "forbidden_call",
                    detail,
                )));
            }
        }
        // 3. Load in the sandbox.
        let load = json!({"backend": "c", "library": built.library.display().to_string()});
        self.load_and_check(task, solution, r, 0, load, early)
    }

    /// Starts a sandboxed runner for `task` (see [`ksmith_harness::spawn_runner`]) that may
    /// read `product` (directories of the candidate's build product) besides the system;
    /// `min_address_space` raises its limit for backends that map large ranges.
    fn spawn_runner(
        &mut self,
        task: &Task,
        min_address_space: u64,
        product: Vec<PathBuf>,
    ) -> Result<ksmith_harness::Starting, JudgeError> {
        let mut limits = self.runner_limits(task);
        limits.address_space = limits.address_space.max(min_address_space);
        // GPU runtimes may keep memory files; a CPU runner has no use for them. Nor has a GPU
        // runtime's host memory been measured under a memory cgroup yet.
        limits.memory_files = self.on_gpu;
        if self.on_gpu {
            limits.memory_bytes = None;
        }
        limits.view.read.extend(product);
        Ok(ksmith_harness::spawn_runner(
            &self.env,
            limits,
            self.config.threads,
        )?)
    }

    /// Stage 3 on: loads the candidate in a fresh sandboxed runner (`load` holds the
    /// backend's fields), then runs the checks and timing; `min_address_space` raises the
    /// runner's limit for backends that map large ranges. A runner started before the build
    /// (`early`) gets the library copied into its own directory; one started here reads the
    /// build product where it is (read-only, nothing else of the caches).
    fn load_and_check(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
        min_address_space: u64,
        mut load: Value,
        early: Option<ksmith_harness::Starting>,
    ) -> Result<Option<Verdict>, JudgeError> {
        self.hold(Work::Load)?;
        self.enter(r, Stage::Load);
        let started = Instant::now();
        let copy_library = early.is_some();
        let starting = match early {
            Some(s) => s,
            None => {
                let product = ["library", "module"]
                    .iter()
                    .filter_map(|k| load[k].as_str().map(Path::new).and_then(Path::parent))
                    .map(Path::to_path_buf)
                    .collect();
                self.spawn_runner(task, min_address_space, product)?
            }
        };
        let mut runner = starting.greeted(&self.env)?;
        if let Some(built) = load["library"].as_str().filter(|_| copy_library) {
            match copy_to_runner(&runner, Path::new(built), "kernel", "so", 0o500) {
                Ok((_, seen)) => load["library"] = json!(seen),
                // The runner's directory is in memory and bounded: a library that does not fit
                // is the candidate's (builds are capped, so this is a backstop).
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {
                    self.end_runner(runner);
                    return Ok(Some(Verdict::new(
                        Status::CompileError,
                        "library_too_large",
                        format!("the library does not fit the sandbox's private directory: {e}"),
                    )));
                }
                Err(source) => {
                    return Err(c::BackendError::Io {
                        path: runner.dir().to_path_buf(),
                        source,
                    }
                    .into())
                }
            }
        }
        self.split.runner_s += started.elapsed().as_secs_f64();
        load["cmd"] = json!("load");
        load["entry"] = json!(solution.entry_point);
        load["inputs"] = json!(task.inputs);
        load["outputs"] = json!(task.outputs.iter().map(|o| &o.tensor).collect::<Vec<_>>());
        load["naxes"] = json!(task.axes.len());
        load["device_gpu"] = json!(self.on_gpu);
        self.at = None;
        let outcome = self.run_checks(task, &mut runner, load, r);
        r.log = runner.log();
        let park = self.park.take();
        let mut verdict = match outcome {
            Ok(v) => v.map(|v| v.at(self.at)),
            Err(Failure::Candidate(e)) => Some(classify(e, &runner).at(self.at)),
            Err(Failure::Judge(e)) => return Err(e),
        };
        if park.is_some() && verdict.is_none() {
            if let Err(e) = runner.stop() {
                verdict = Some(classify(e, &runner).at(self.at));
            }
        }
        match (park, &verdict) {
            (Some((channel, est_ns)), None) => {
                self.parked = Some(together::Parked {
                    runner,
                    channel,
                    est_ns,
                    on_gpu: self.on_gpu,
                });
            }
            _ => self.end_runner(runner),
        }
        Ok(verdict)
    }

    /// Triton and Pallas: AST policy and syntax check in the trusted process, then the module
    /// is staged and imported by the sandboxed runner.
    fn cascade_python(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, JudgeError> {
        let backend = solution.language.name();
        let reply = self.trusted_call(
            task,
            json!({"cmd": "policy", "backend": backend, "sources": solution.sources}),
        )?;
        let diagnostics: Vec<Diagnostic> = reply["syntax_errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| Diagnostic {
                file: e["file"].as_str().unwrap_or("").to_string(),
                line: e["line"].as_u64().unwrap_or(0) as u32,
                column: e["column"].as_u64().unwrap_or(0) as u32,
                severity: "error".into(),
                message: e["message"].as_str().unwrap_or("").to_string(),
            })
            .collect();
        r.policy = reply["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| c::PolicyViolation {
                file: v["file"].as_str().unwrap_or("").to_string(),
                line: v["line"].as_u64().unwrap_or(0) as u32,
                name: String::new(),
                message: v["message"].as_str().unwrap_or("").to_string(),
            })
            .collect();
        if let Some(d) = diagnostics.first() {
            self.enter(r, Stage::Build);
            let detail = d.to_string();
            r.build = Some(BuildInfo {
                cached: false,
                seconds: 0.0,
                command: vec!["python: ast.parse".into()],
                diagnostics,
                log: String::new(),
                ptxas: Vec::new(),
            });
            return Ok(Some(Verdict::new(
                Status::CompileError,
                "syntax_error",
                detail,
            )));
        }
        if let Some(v) = policy_verdict(r) {
            return Ok(Some(v));
        }
        self.enter(r, Stage::Build);
        if solution.language == Language::Triton {
            self.env
                .ensure_module("triton", "requirements-triton.txt", &|m| {
                    eprintln!("ksmith: {m}")
                })?;
        }
        let module = ksmith_backend::python::stage(solution, &self.config.cache_dir.join("build"))
            .map_err(|e| JudgeError::Task {
                task: task.name.clone(),
                message: format!("cannot stage the module: {e}"),
            })?;
        r.build = Some(BuildInfo {
            cached: true,
            seconds: 0.0,
            command: vec![format!("python: import {}", module.display())],
            diagnostics: Vec::new(),
            log: String::new(),
            ptxas: Vec::new(),
        });
        // The interpreters (JAX/XLA, Triton) map far more address space than a C kernel.
        let load = json!({"backend": backend, "module": module.display().to_string()});
        self.load_and_check(task, solution, r, 32 << 30, load, None)
    }

    /// CUDA: source policy, nvcc build (register/smem/spill facts kept), then the host launcher
    /// is called by the GPU runner on device buffers.
    fn cascade_cuda(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, JudgeError> {
        if let Some(v) = cuda_policy(solution, r) {
            return Ok(Some(v));
        }
        self.enter(r, Stage::Build);
        let nvcc = ksmith_backend::cuda::nvcc().ok_or(JudgeError::Unavailable {
            backend: "cuda",
            why: "nvcc not found".into(),
        })?;
        let built = match ksmith_backend::cuda::build(
            &nvcc,
            solution,
            &self.config.cache_dir.join("build"),
        )? {
            Ok(b) => b,
            Err(f) => return Ok(Some(compile_failure(f, r))),
        };
        let ptxas = ksmith_backend::cuda::parse_ptxas(&built.log);
        r.build = Some(build_info(&built, ptxas));
        // CUDA maps huge virtual ranges.
        let load = json!({"backend": "cuda", "library": built.library.display().to_string()});
        self.load_and_check(task, solution, r, 256 << 30, load, None)
    }

    fn runner_limits(&self, task: &Task) -> Limits {
        let max_bytes = (0..task.workloads.len())
            .map(|w| {
                let axes = &task.workloads[w].axes;
                task.inputs
                    .iter()
                    .map(|t| t.numel(axes) as u64 * t.dtype.size() as u64)
                    .sum::<u64>()
                    + task
                        .outputs
                        .iter()
                        .map(|o| o.tensor.numel(axes) as u64 * o.tensor.dtype.size() as u64)
                        .sum::<u64>()
            })
            .max()
            .unwrap_or(0);
        // Two slots of buffers, file staging copies, Python, OpenMP stacks.
        let address_space = (8 * max_bytes + (4 << 30)).min(1 << 40);
        Limits {
            cpu_seconds: 1800,
            address_space,
            // One file is at most one run's outputs; the files the judge makes for timing can
            // grow no further than this either (and a grown one is caught after the call).
            file_size: (max_bytes + (1 << 20)).max(64 << 20),
            // One correctness run's inputs and outputs at a time, and room for the runtime.
            scratch_bytes: Some(max_bytes + SCRATCH_SLACK),
            // All its processes together: as much as one may map (a GPU runner's runtime is
            // not measured under it yet, so it gets none: see `load_and_check`).
            memory_bytes: Some(address_space),
            open_files: 256,
            processes: 512,
            env: Vec::new(),
            ..Limits::default()
        }
    }

    fn run_checks(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        load: Value,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, Failure> {
        let timeout = self.config.call_timeout;
        let started = Instant::now();
        let channel = if self.config.timing {
            // The channel's cost is timed: alone on the device, or a busy machine's figure
            // would be subtracted from every timed call. A warm-up in the trusted process
            // waits, stopped, meanwhile (and while another judge times).
            if let Some(t) = &self.trusted {
                t.freeze();
            }
            self.hold(Work::Calibrate).map_err(Failure::Judge)?;
            let c = self.calibrate_channel(runner);
            let held = self.hold(Work::Check).map_err(Failure::Judge);
            if let Some(t) = &self.trusted {
                t.thaw();
            }
            held?;
            c?
        } else {
            measure::ChannelCost::default()
        };
        let loaded = runner.call(&load, timeout).map_err(Failure::Candidate)?;
        self.split.runner_s += started.elapsed().as_secs_f64();
        let interpreted = loaded["interpreted"].as_bool().unwrap_or(false);
        let seeds = self.config.seeds.clone();
        let mut corr = Correctness {
            seeds: seeds.clone(),
            ..Correctness::default()
        };
        // 4. Quick check on the smallest workload, then 5. the full check.
        self.enter(r, Stage::QuickCheck);
        let smallest = task.smallest_workload();
        let mut order = vec![smallest];
        order.extend((0..task.workloads.len()).filter(|&w| w != smallest));
        let mut elapsed_ns = vec![0u64; task.workloads.len()];
        // Candidates already checked in full under these settings, brought back only to be
        // timed together, get one seed per workload (which also sizes their timing rounds).
        let (quick, check_seeds): (&[(usize, u64)], &[u64]) = if self.light_checks {
            (&[], &seeds[..1])
        } else {
            (&[(smallest, seeds[0])], &seeds)
        };
        // Correctness runs get the same kind of buffers as timed calls: files the judge makes
        // in the slots' directory, which the runner maps shared (page-aligned, its own
        // mapping per file), one set per workload kept across seeds. A kernel that told the
        // phases apart by its buffers (malloc'd here, mapped when timed) once passed every
        // check and misbehaved only when timed.
        let mut check_slot: Option<(usize, slots::Slot)> = None;
        // The quick check's call is the full check's first: the same inputs into the same
        // poisoned buffers again would only cost a run.
        let full = order
            .iter()
            .flat_map(|&w| check_seeds.iter().map(move |&s| (w, s)))
            .filter(|p| !quick.contains(p));
        for (i, (w, seed)) in quick.iter().copied().chain(full).enumerate() {
            if i == 1 {
                self.enter(r, Stage::FullCheck);
            }
            self.at = Some(w);
            let started = Instant::now();
            let cached = self.prepare(task, w, seed).map_err(Failure::Judge)?;
            // A copy in the runner's directory: the cache, with the references next to the
            // inputs, stays out of its view.
            let name = format!("w{w}_s{seed}");
            let (staged, inputs) = match copy_to_runner(
                runner,
                Path::new(&cached),
                &name,
                "inputs.safetensors",
                0o666,
            ) {
                Ok(s) => s,
                // Its in-memory directory holds one run's tensors and some room: the
                // candidate filled it.
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {
                    runner.kill();
                    return Ok(Some(Verdict::new(
                        Status::RuntimeError,
                        "scratch_full",
                        format!(
                            "the sandbox's private directory (in memory, one run's tensors and {} MiB) was full: the candidate wrote files there",
                            SCRATCH_SLACK >> 20
                        ),
                    )));
                }
                Err(e) => {
                    return Err(Failure::Judge(JudgeError::Harness(HarnessError::Setup(
                        format!("cannot copy inputs {cached} to the sandbox: {e}"),
                    ))))
                }
            };
            self.split.inputs_s += started.elapsed().as_secs_f64();
            let started = Instant::now();
            let out = format!("out_w{w}_s{seed}");
            let prefix = runner.dir_in_child().join(&out).display().to_string();
            let host_prefix = runner.dir().join(&out).display().to_string();
            if check_slot.as_ref().is_none_or(|(at, _)| *at != w) {
                let (ins, outs) = self.tensor_specs(task, w);
                match &mut check_slot {
                    // Handed from workload to workload, as timing slots are: the same files
                    // (grown when too small), so the runner's mappings stay few.
                    Some((at, slot)) => {
                        slot.fit(&ins, &outs).map_err(measure::slot_error)?;
                        *at = w;
                    }
                    None => {
                        let (host, seen) = slots::slot_dirs(runner);
                        let dirs = slots::Dirs {
                            host: &host,
                            seen: &seen,
                        };
                        let slot = slots::Slot::create(&dirs, &format!("w{w}s0"), &ins, &outs)
                            .map_err(measure::slot_error)?;
                        check_slot = Some((w, slot));
                    }
                }
            }
            let slot_spec = check_slot.as_ref().map(|(_, s)| s.spec());
            let req = json!({
                "cmd": "run",
                "slot": slot_spec,
                "inputs_path": inputs,
                "axes": axis_values(task, w),
                "in_shapes": task.inputs.iter().map(|t| t.dims(&task.workloads[w].axes)).collect::<Vec<_>>(),
                "out_shapes": task.outputs.iter().map(|o| o.tensor.dims(&task.workloads[w].axes)).collect::<Vec<_>>(),
                "out_prefix": prefix,
                // On a GPU the quick check also records which device kernels ran.
                "profile": self.on_gpu && i == 0,
            });
            let reply = runner.call(&req, timeout).map_err(Failure::Candidate)?;
            // Work the host code did outside the kernels (Triton and Pallas: found by the
            // runner, in the candidate's process, so only an admission is taken from it).
            let Some(host) = host_compute(&reply["host_compute"]) else {
                runner.kill();
                return Err(Failure::Candidate(CallError::Protocol(
                    "the runner's reply names host compute in a form the harness never writes"
                        .into(),
                )));
            };
            if !host.is_empty() {
                let _ = std::fs::remove_file(&staged);
                r.policy = host;
                r.correctness = Some(corr);
                return Ok(policy_verdict(r));
            }
            if let Some(names) = reply["device_kernels"].as_array() {
                r.device_kernels = Some(
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect(),
                );
            }
            elapsed_ns[w] = reply["elapsed_ns"].as_u64().unwrap_or(0);
            r.time_split.kernel_s += elapsed_ns[w] as f64 / 1e9;
            let earlier: Vec<u64> = seeds.iter().copied().take_while(|&s| s != seed).collect();
            // The reply is the candidate's process's: only a list of the task's input names
            // goes on to the trusted side.
            let Some(changed) = changed_inputs(task, &reply["inputs_changed"]) else {
                runner.kill();
                return Err(Failure::Candidate(CallError::Protocol(
                    "the runner's reply names the changed inputs in a form the harness never writes"
                        .into(),
                )));
            };
            let checked = self.check(
                task,
                w,
                seed,
                &output_paths(task, &host_prefix),
                &json!(changed),
                &earlier,
                &mut corr,
            );
            // Checked: the run's files go, so the runner's in-memory directory holds one run.
            let _ = std::fs::remove_file(&staged);
            for o in &task.outputs {
                let _ = std::fs::remove_file(format!("{host_prefix}.{}.bin", o.tensor.name));
            }
            self.split.checks_s +=
                (started.elapsed().as_secs_f64() - elapsed_ns[w] as f64 / 1e9).max(0.0);
            if let Some(v) = checked? {
                r.correctness = Some(corr);
                return Ok(Some(v));
            }
        }
        r.correctness = Some(corr);
        if interpreted && self.config.timing {
            r.timing_unavailable = Some(
                "the candidate ran in its interpreter (no accelerator here); interpreter times are not kernel times".into(),
            );
        }
        if !self.config.timing || interpreted {
            return Ok(None);
        }
        if self.parking {
            // Timed later, side by side with other candidates (`Judge::compare`).
            self.park = Some((channel, elapsed_ns));
            return Ok(None);
        }
        // 6. Timing, 7. roofline: alone on the device until the evaluation ends (a warm-up
        // still running in the trusted process is answered first).
        self.trusted().map_err(Failure::Judge)?;
        self.hold(Work::Timing).map_err(Failure::Judge)?;
        self.enter(r, Stage::Timing);
        let (perf, eliminated) = match self.time_all(task, runner, &elapsed_ns, channel, r)? {
            Ok(timed) => timed,
            Err(v) => return Ok(Some(v)),
        };
        Ok(self.performance(task, perf, eliminated, r))
    }

    /// Step 7: the workloads' figures become the result's performance (the roofline
    /// re-measured once before speed beyond it is called implausible).
    fn performance(
        &mut self,
        task: &Task,
        mut perf: Vec<WorkloadPerf>,
        eliminated: Option<Elimination>,
        r: &mut EvalResult,
    ) -> Option<Verdict> {
        // Beyond the floor: measured again, then flagged, raised or implausible (roofline.rs).
        self.settle_roofline(task, &mut perf, eliminated.is_some(), r);
        let performance = Performance {
            speedup: geomean(perf.iter().map(|p| p.speedup)),
            speedup_interval: (
                geomean(perf.iter().map(|p| p.speedup_interval.0)),
                geomean(perf.iter().map(|p| p.speedup_interval.1)),
            ),
            noisy: perf.iter().any(|p| p.noisy),
            roofline_fraction: geomean(perf.iter().map(|p| p.roofline_fraction)),
            workloads: perf,
            eliminated,
        };
        let implausible = performance
            .workloads
            .iter()
            .find(|p| p.roofline_fraction > self.config.plausibility_margin)
            .cloned();
        r.performance = Some(performance);
        implausible.map(|p| {
            Verdict::new(
                Status::PolicyRejected,
                "implausible_speed",
                format!(
                    "workload {}: {:.4} ms is {:.1}x faster than the measured roofline floor {:.4} ms",
                    p.workload, p.candidate.median_ms, p.roofline_fraction, p.floor_ms
                ),
            )
            .at(Some(p.workload))
        })
    }

    /// Judges one correctness call's outputs against the cached reference (prepared before
    /// the call); `inputs_changed` the runner's word on which inputs the call changed, `earlier`
    /// the seeds a stale output may match.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        outputs: &Value,
        inputs_changed: &Value,
        earlier: &[u64],
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        let req = json!({
            "cmd": "check", "task": task.content_hash, "workload": w, "seed": seed,
            "outputs": outputs, "inputs_changed": inputs_changed, "previous_seeds": earlier,
            "cache_dir": self.ref_cache(),
        });
        self.judge_outputs(task, w, seed, req, corr)
    }

    /// Judges a timed call's outputs against a reference the trusted side computes in memory
    /// from `inputs` (raw files: the call's fresh inputs, which the judge has compared with
    /// what it wrote; they are never used again, so nothing is cached).
    fn check_timed(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        outputs: &Value,
        inputs: &Value,
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        self.ensure_loaded(task)?;
        let req = json!({
            "cmd": "check", "task": task.content_hash, "workload": w, "seed": seed,
            "outputs": outputs, "given_inputs": inputs,
        });
        corr.timed_rechecks += 1;
        self.judge_outputs(task, w, seed, req, corr)
    }

    /// Sends a `check` request; updates the running figures and turns a failure into a verdict.
    fn judge_outputs(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        req: Value,
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        let v = self.trusted_call(task, req).map_err(Failure::Judge)?;
        corr.checks += 1;
        for o in v["outputs"].as_array().into_iter().flatten() {
            let abs = o["max_abs_error"].as_f64().unwrap_or(f64::INFINITY);
            let rel = o["max_rel_error"].as_f64().unwrap_or(f64::INFINITY);
            corr.max_rel_error = corr.max_rel_error.max(rel);
            if abs >= corr.max_abs_error || corr.worst.is_none() {
                corr.max_abs_error = abs;
                corr.worst = Some(WorstElement {
                    workload: w,
                    seed,
                    output: o["name"].as_str().unwrap_or("").to_string(),
                    index: o["worst_index"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default(),
                    got: o["worst_value"].as_f64(),
                    expected: o["worst_expected"].as_f64(),
                });
            }
            if o["fraction_bad"].as_f64().unwrap_or(0.0) > 0.0 {
                corr.fraction_bad = o["fraction_bad"].as_f64().unwrap_or(0.0);
            }
        }
        if v["passed"].as_bool() == Some(true) {
            return Ok(None);
        }
        let status = v["status"]
            .as_str()
            .and_then(Status::parse)
            .unwrap_or(Status::IncorrectNumerical);
        let reason = v["reason"].as_str().unwrap_or("numerical_mismatch");
        let detail = format!(
            "workload {w} seed {seed}: {}",
            v["detail"].as_str().unwrap_or("")
        );
        Ok(Some(Verdict::new(status, reason, detail).at(Some(w))))
    }
}

/// Errors inside the candidate part of the cascade: the candidate's fault, or the judge's.
enum Failure {
    Candidate(CallError),
    Judge(JudgeError),
}

impl From<JudgeError> for Failure {
    fn from(e: JudgeError) -> Self {
        Failure::Judge(e)
    }
}

/// The inputs a runner's reply says its correctness call changed (`inputs_changed`: a list of
/// the task's input names, or nothing); None when the reply holds anything else.
fn changed_inputs(task: &Task, v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Null => Some(Vec::new()),
        Value::Array(names) => names
            .iter()
            .map(|n| {
                n.as_str()
                    .filter(|n| task.inputs.iter().any(|i| i.name == *n))
                    .map(str::to_string)
            })
            .collect(),
        _ => None,
    }
}

/// Findings the runner reports of host code computing outside the kernels (none when the
/// field is absent), as policy violations; `None` for anything the harness never writes.
fn host_compute(v: &Value) -> Option<Vec<c::PolicyViolation>> {
    const MAX: usize = 16;
    let text =
        |v: &Value, limit: usize| v.as_str().filter(|s| s.len() <= limit).map(str::to_string);
    match v {
        Value::Null => Some(Vec::new()),
        Value::Array(found) if found.len() <= MAX => found
            .iter()
            .map(|f| {
                Some(c::PolicyViolation {
                    file: text(&f["file"], 512)?,
                    line: u32::try_from(f["line"].as_u64()?).ok()?,
                    name: String::new(),
                    message: text(&f["message"], 2048)?,
                })
            })
            .collect(),
        _ => None,
    }
}

/// Copies `src` into the runner's private directory as `{name}-{random}.{ext}` with `mode`;
/// returns the copy's path here and where the runner sees it. An unpredictable name, created
/// fresh: the directory is the candidate's, and a link it planted under a name it could guess
/// must not redirect this write.
fn copy_to_runner(
    runner: &Peer,
    src: &Path,
    name: &str,
    ext: &str,
    mode: u32,
) -> std::io::Result<(PathBuf, String)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = format!("{name}-{:016x}.{ext}", random_u64());
    let dest = runner.dir().join(&file);
    let mut from = std::fs::File::open(src)?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&dest)?;
    std::io::copy(&mut from, &mut to)?;
    let seen = runner.dir_in_child().join(&file).display().to_string();
    Ok((dest, seen))
}

fn axis_values(task: &Task, w: usize) -> Vec<i64> {
    task.axes
        .iter()
        .map(|a| task.workloads[w].axes[&a.name])
        .collect()
}

/// What the runner may write in its private directory beyond one correctness run's tensors:
/// Python's, OpenMP's and a GPU compiler's caches.
const SCRATCH_SLACK: u64 = 512 << 20;

/// Maps a failed runner request to a status and reason: from what the judge observed itself
/// (the timeout, the memory cgroup's OOM kills, the exit or signal), never from a file or line
/// the candidate can write.
fn classify(e: CallError, runner: &Peer) -> Verdict {
    let mut v = observed(e, runner);
    // Read safely (no links, no FIFOs, 32 bytes at most): the directory is the candidate's.
    // The allocation guard's marker is written inside the sandbox, so it is the candidate's
    // claim: only a number is taken from it, and it only adds a note to the observed verdict
    // (a candidate that wrote it and crashed was once reported `memory_limit`).
    let claimed = runner
        .read_private(ksmith_harness::ALLOC_FAILED_MARKER, 32)
        .and_then(|s| s.lines().next()?.trim().parse::<u64>().ok());
    if let Some(bytes) = claimed.filter(|_| v.reason != "memory_limit") {
        v.detail.push_str(&format!(
            "; the allocation guard inside the sandbox reported a failed allocation of {bytes} bytes (address-space limit) before it (the runner's own report, not verified)"
        ));
    }
    v
}

fn observed(e: CallError, runner: &Peer) -> Verdict {
    match e {
        CallError::Timeout(t) => Verdict::new(
            Status::Timeout,
            "wall_timeout",
            format!(
                "no result within {:.1} s; the process group was killed",
                t.as_secs_f64()
            ),
        ),
        // The kernel's word (the sandbox's memory cgroup).
        _ if runner.memory_exceeded() => Verdict::new(
            Status::RuntimeError,
            "memory_limit",
            "the candidate's processes together went over their memory limit and the kernel killed one",
        ),
        CallError::Died {
            exit: Exit::Signal(s),
            ..
        } if s == libc_sigxcpu() => Verdict::new(
            Status::Timeout,
            "cpu_time_limit",
            "the CPU-time limit was reached",
        ),
        CallError::Died {
            exit: Exit::Signal(s),
            ..
        } => {
            let name = signal_name(s);
            Verdict::new(
                Status::RuntimeError,
                &format!("signal_{name}"),
                format!("the candidate process was killed by {name}"),
            )
        }
        CallError::Died {
            exit: Exit::Code(c),
            ..
        } => Verdict::new(
            Status::RuntimeError,
            "early_exit",
            format!("the candidate process exited with code {c} during a call"),
        ),
        CallError::Died {
            exit: Exit::Running,
            ..
        } => Verdict::new(
            Status::RuntimeError,
            "protocol_violation",
            "the candidate closed the harness channel",
        ),
        CallError::Protocol(m) => Verdict::new(Status::RuntimeError, "protocol_violation", m),
        CallError::Remote { message, .. } => {
            let (status, reason) = if message.starts_with("shape mismatch")
                || message.starts_with("candidate returned")
            {
                (Status::IncorrectShape, "output_shape")
            } else if message.starts_with("dtype mismatch") {
                (Status::IncorrectDtype, "output_dtype")
            } else if message.starts_with("candidate raised") {
                (Status::RuntimeError, "exception")
            } else {
                (Status::RuntimeError, "load_failed")
            };
            Verdict::new(status, reason, message)
        }
    }
}

/// The CUDA sources' static policy (C rules plus vendor libraries, side streams, device
/// control), recorded in `r`; the first violation as a verdict.
fn cuda_policy(solution: &Solution, r: &mut EvalResult) -> Option<Verdict> {
    r.policy = solution
        .sources
        .iter()
        .flat_map(|(n, s)| {
            c::check_source(n, s)
                .into_iter()
                .chain(ksmith_backend::cuda::check_source(n, s))
        })
        .collect();
    policy_verdict(r)
}

/// Sets the status from the cascade's verdict (none: everything ran).
fn apply_verdict(r: &mut EvalResult, verdict: Option<Verdict>) {
    match verdict {
        Some(v) => {
            r.status = v.status;
            r.reason = Some(v.reason);
            r.detail = Some(v.detail);
            r.failed_workload = v.workload;
        }
        None => r.stage = Stage::Done,
    }
}

/// The first static-policy violation as a verdict.
fn policy_verdict(r: &EvalResult) -> Option<Verdict> {
    r.policy.first().map(|v| {
        Verdict::new(
            Status::PolicyRejected,
            "forbidden_call",
            format!("{}:{}: {}", v.file, v.line, v.message),
        )
    })
}

/// Records a failed build and returns its verdict (the first error diagnostic as detail).
fn compile_failure(f: c::BuildFailure, r: &mut EvalResult) -> Verdict {
    let detail = f
        .diagnostics
        .iter()
        .find(|d| d.severity.contains("error"))
        .map(|d| d.to_string())
        .unwrap_or_else(|| f.log.lines().last().unwrap_or("").to_string());
    r.build = Some(BuildInfo {
        cached: false,
        seconds: 0.0,
        command: f.command,
        diagnostics: f.diagnostics,
        log: f.log,
        ptxas: Vec::new(),
    });
    Verdict::new(Status::CompileError, &f.reason, detail)
}

/// Build facts of a successful build.
fn build_info(built: &c::Built, ptxas: Vec<ksmith_backend::cuda::PtxasFacts>) -> BuildInfo {
    BuildInfo {
        cached: built.cached,
        seconds: built.seconds,
        command: built.command.clone(),
        diagnostics: built.diagnostics.clone(),
        log: built.log.clone(),
        ptxas,
    }
}

fn libc_sigxcpu() -> i32 {
    nix::sys::signal::Signal::SIGXCPU as i32
}

#[cfg(test)]
mod tests {
    use super::host_compute;
    use serde_json::json;

    #[test]
    fn host_compute_findings_are_read_strictly() {
        assert_eq!(host_compute(&json!(null)).map(|v| v.len()), Some(0));
        let found = host_compute(&json!([
            {"file": "kernel.py", "line": 11, "message": "host code computes `mul`"}
        ]))
        .unwrap();
        assert_eq!((found[0].file.as_str(), found[0].line), ("kernel.py", 11));
        for bad in [
            json!("PASSED"),
            json!([{"file": "kernel.py", "line": -1, "message": "m"}]),
            json!([{"file": "kernel.py", "message": "m"}]),
            json!([{"file": 3, "line": 1, "message": "m"}]),
            json!(vec![json!({"file": "k", "line": 1, "message": "m"}); 17]),
        ] {
            assert!(host_compute(&bad).is_none(), "{bad}");
        }
    }
}
