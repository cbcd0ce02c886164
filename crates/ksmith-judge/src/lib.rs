//! The judge: the evaluation cascade for one candidate, cheapest first, with early exit:
//! static policy → build (+ symbol policy) → load in the sandbox → quick check on the smallest
//! workload → full check (every workload, several seeds) → timing against the XLA baseline in
//! alternating rounds (+ re-check of timed outputs) → roofline figures.

mod cascade;
mod checks;
mod config;
pub mod decide;
mod disturb;
mod fresh;
mod gpu;
mod measure;
mod parallel;
mod protocol;
pub mod refcache;
pub mod remote;
mod result;
mod roofline;
pub mod scheduler;
mod slots;
mod timing;
mod together;
mod trusted;
mod verdict;

pub use config::*;
pub use result::*;
pub use timing::Race;
pub use together::{Comparison, Relative};

use cascade::{copy_to_runner, SCRATCH_SLACK};
use checks::axis_values;
use scheduler::{Access, DeviceScheduler, Lease, SchedulerError, Work};
use verdict::*;

use ksmith_backend::c::{self, Compiler};
use ksmith_backend::cuda::GpuRoofline;
use ksmith_backend::hw::Hardware;
use ksmith_backend::Diagnostic;
use ksmith_harness::{random_u64, CallError, HarnessError, Peer, PythonEnv};
use ksmith_sandbox::{signal_name, Exit, Limits};
use ksmith_task::{Solution, Task};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Version of the checking and timing method: part of every evaluation key, so results measured
/// by an older method are never reused. Bump it when the cascade or the timing changes.
pub const METHOD_VERSION: u32 = 11;

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
    /// Reference-cache entries this judge prepared (older ones of its own are fair game for
    /// eviction; another process's recent ones are not).
    own_entries: BTreeSet<PathBuf>,
    /// Those of the evaluation in progress: never evicted.
    current_entries: BTreeSet<PathBuf>,
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
    warming: Option<ksmith_harness::Pending<protocol::Warm>>,
    /// Whether the trusted process found an accelerator (JAX's default backend is not the CPU).
    accelerator: bool,
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
pub(crate) fn output_paths(task: &Task, prefix: &str) -> Files {
    task.outputs
        .iter()
        .map(|o| {
            (
                o.tensor.name.clone(),
                format!("{prefix}.{}.bin", o.tensor.name),
            )
        })
        .collect()
}

/// Files by tensor name.
pub(crate) type Files = std::collections::BTreeMap<String, String>;

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
            own_entries: BTreeSet::new(),
            current_entries: BTreeSet::new(),
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
            accelerator: false,
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
    pub(crate) fn join_teardown(&mut self) {
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
    pub(crate) fn evaluate_inner(
        &mut self,
        task: &Task,
        solution: &Solution,
    ) -> Result<EvalResult, JudgeError> {
        self.device_wait = Duration::ZERO;
        self.current_entries.clear();
        let computed = self.references_computed;
        let r = self.evaluate_leased(task, solution);
        self.release();
        // Its own entries are no longer in use: the cache back to its cap now, not at the next
        // evaluation's first new reference (which may never come).
        self.current_entries.clear();
        if self.references_computed > computed {
            self.evict_references();
        }
        r
    }

    pub(crate) fn evaluate_leased(
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
            // The static policy needs no device: a candidate that breaks it is rejected on any
            // machine, not reported unavailable.
            Err(e @ JudgeError::Unavailable { .. }) => {
                let backend = ksmith_backend::backend::for_language(solution.language);
                let mut r = self.blank_result(task, solution);
                if let ksmith_backend::backend::SourcePolicy::Checked(found) =
                    backend.source_policy(solution)
                {
                    r.policy = found;
                }
                match policy_verdict(&r) {
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
        self.on_gpu = ksmith_backend::backend::for_language(solution.language).device()
            == ksmith_backend::backend::Device::Gpu
            && self.has_gpu()?;
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
    pub(crate) fn blank_result(&self, task: &Task, solution: &Solution) -> EvalResult {
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
            device: None,
        }
    }
}
