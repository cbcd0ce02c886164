//! The trusted process: started once per judge, loads tasks, warms their programs, draws
//! inputs, computes references, validates tasks and measures the GPU. Never sees candidate code.

use crate::*;
use ksmith_harness::Command;

impl Judge {
    pub(crate) fn trusted(&mut self) -> Result<&mut Peer, JudgeError> {
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
            let hello: protocol::TrustedHello =
                ksmith_harness::parse_reply::<protocol::Hello>(peer.hello().clone())
                    .map_err(HarnessError::from)?;
            self.poison = hello.poison;
            // The declared version, and the digest of the files that made this result: a
            // harness changed without a new version number still gets its own results.
            self.environment.harness_version = format!(
                "{}+{}",
                hello.harness_version,
                ksmith_harness::harness_digest()
            );
            self.environment.versions = hello.versions.into_iter().collect();
            self.accelerator = matches!(hello.device.as_str(), "gpu" | "cuda" | "rocm");
            self.environment.fingerprint = self.environment.compute_fingerprint();
            self.trusted = Some(peer);
        }
        if let Some(pending) = self.warming.take() {
            let timeout = self.config.reference_timeout;
            let peer = self.trusted.as_mut().expect("started above");
            peer.thaw();
            match peer.receive(pending, timeout) {
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

    /// Sends `command` to the trusted process and reads its typed reply; a reference error
    /// or a timeout is the task's, anything else restarts the process next time.
    pub(crate) fn trusted_ask<C: Command>(
        &mut self,
        task: &Task,
        command: &C,
    ) -> Result<C::Reply, JudgeError> {
        let timeout = self.config.reference_timeout;
        let peer = self.trusted()?;
        match peer.ask(command, timeout) {
            Ok(v) => Ok(v),
            Err(CallError::Remote { message, .. }) => Err(JudgeError::Task {
                task: task.name.clone(),
                message,
            }),
            Err(CallError::Timeout(t)) => {
                // Killed by `ask`; the next request starts a fresh one.
                self.trusted = None;
                self.loaded.clear();
                let what = match C::NAME {
                    "load_task" => "importing it".to_string(),
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

    pub(crate) fn ensure_loaded(&mut self, task: &Task) -> Result<(), JudgeError> {
        if !self.loaded.contains(&task.content_hash) {
            let spec = serde_json::to_value(task).map_err(|e| JudgeError::Task {
                task: task.name.clone(),
                message: e.to_string(),
            })?;
            self.trusted_ask(task, &protocol::LoadTask { task: &spec })?;
            self.loaded.insert(task.content_hash.clone());
        }
        Ok(())
    }

    /// Asks the trusted process, once per task and process, to compile the baseline and the
    /// float64 reference of every workload (trusted.py `warm`) while a C candidate is built
    /// and its runner started (its baseline is timed on the CPU); its reply is read before the
    /// next request. Not sent when nothing will be timed.
    pub(crate) fn start_warm(&mut self, task: &Task) -> Result<(), JudgeError> {
        if !self.config.timing || self.warmed.contains(&task.content_hash) {
            return Ok(());
        }
        self.ensure_loaded(task)?;
        let req = protocol::Warm {
            task: task.content_hash.clone(),
            workloads: (0..task.workloads.len()).collect(),
            seed: self.config.seeds[0],
            device: protocol::TimingDevice::Cpu,
            evict: self.config.flush != Flush::Never,
            cache_dir: self.ref_cache(),
        };
        let peer = self.trusted()?;
        // A process that cannot take the request is found gone by the next one.
        if let Ok(pending) = peer.send(&req) {
            self.warming = Some(pending);
        }
        self.warmed.insert(task.content_hash.clone());
        Ok(())
    }

    /// Where the trusted side caches inputs and references: per harness digest, since the
    /// harness's code draws and computes them.
    pub(crate) fn ref_cache(&self) -> String {
        self.config
            .cache_dir
            .join("reference")
            .join(ksmith_harness::harness_digest())
            .display()
            .to_string()
    }

    /// A seed no candidate has seen: random per judge, then counting.
    pub(crate) fn next_fresh_seed(&mut self) -> u64 {
        self.fresh_seed = self.fresh_seed.wrapping_add(1);
        self.fresh_seed
    }

    /// Generates the inputs of (workload, seed) on the trusted side, without a reference, as
    /// raw files in the judge's own directory (one per input, in declared order).
    pub(crate) fn fresh_input_files(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        tag: &str,
    ) -> Result<Vec<PathBuf>, JudgeError> {
        let prefix = self.fresh_dir.path().join(format!("w{w}_{tag}"));
        let req = protocol::Inputs {
            task: &task.content_hash,
            workload: w,
            seed,
            prefix: prefix.display().to_string(),
        };
        let mut v = self.trusted_ask(task, &req)?;
        task.inputs
            .iter()
            .map(|i| {
                v.paths.remove(&i.name).map(PathBuf::from).ok_or_else(|| {
                    JudgeError::Harness(HarnessError::Call(CallError::Protocol(format!(
                        "reply to `inputs`: field `paths` has no `{}`",
                        i.name
                    ))))
                })
            })
            .collect()
    }

    /// Makes sure inputs and the float64 reference exist for (workload, seed); returns the inputs path.
    pub(crate) fn prepare(
        &mut self,
        task: &Task,
        workload: usize,
        seed: u64,
    ) -> Result<String, JudgeError> {
        self.ensure_loaded(task)?;
        let cache_dir = self.ref_cache();
        let req = protocol::Prepare {
            task: &task.content_hash,
            workload,
            seed,
            cache_dir: &cache_dir,
        };
        let v = self.trusted_ask(task, &req)?;
        let entry = refcache::entry_of(Path::new(&v.inputs));
        self.own_entries.insert(entry.clone());
        self.current_entries.insert(entry);
        if !v.cached {
            self.references_computed += 1;
            // The cache grew: kept to its cap, least recently used first.
            self.evict_references();
        }
        Ok(v.inputs)
    }

    /// Keeps the reference cache to its cap (`KSMITH_REFERENCE_CACHE_MB`): never the entries of
    /// the evaluation in progress, nor those another process used in the last minute.
    pub(crate) fn evict_references(&self) {
        let root = self.config.cache_dir.join("reference");
        let protect = |entry: &Path, used: std::time::SystemTime| {
            self.current_entries.contains(entry)
                || (!self.own_entries.contains(entry) && refcache::recently_used(used))
        };
        refcache::evict(&root, refcache::cap_bytes(), &protect);
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

    /// Runs the reference checks of `ksmith validate`; returns `(field, message)` problems.
    pub fn validate_task(&mut self, task: &Task) -> Result<Vec<(String, String)>, JudgeError> {
        self.hold(Work::Reference)?;
        let problems = self.validate_leased(task);
        self.release();
        problems
    }

    pub(crate) fn validate_leased(
        &mut self,
        task: &Task,
    ) -> Result<Vec<(String, String)>, JudgeError> {
        self.ensure_loaded(task)?;
        let mut problems = Vec::new();
        // One request per workload: the reference timeout bounds each, not the whole task.
        for w in 0..task.workloads.len() {
            let cache_dir = self.ref_cache();
            let req = protocol::Validate {
                task: &task.content_hash,
                cache_dir: &cache_dir,
                workload: w,
            };
            let v = self.trusted_ask(task, &req)?;
            problems.extend(v.problems.into_iter().map(|p| (p.field, p.message)));
        }
        // Validation computes references too (seed 0 of every workload).
        self.evict_references();
        Ok(problems)
    }

    /// Whether the trusted process found an accelerator (JAX's default backend is not the CPU).
    pub(crate) fn has_gpu(&mut self) -> Result<bool, JudgeError> {
        self.trusted()?;
        Ok(self.accelerator)
    }

    /// Asks the trusted process to measure the GPU (copy bandwidth, matmul peaks).
    pub fn measure_gpu(&mut self) -> Result<GpuRoofline, JudgeError> {
        // Measured alone on the device; released after (an evaluation takes its own leases).
        self.hold(Work::Roofline)?;
        let reply = self
            .trusted()
            .map(|t| t.ask(&protocol::GpuHw {}, Duration::from_secs(600)));
        self.release();
        reply?.map_err(|e| match e {
            CallError::Remote { message, .. } => JudgeError::Unavailable {
                backend: "gpu",
                reason: NotRunReason::NoDevice,
                why: message,
                built: None,
            },
            e => JudgeError::Harness(HarnessError::from(e)),
        })
    }
}
