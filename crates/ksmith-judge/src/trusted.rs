//! The trusted process: started once per judge, loads tasks, warms their programs, draws
//! inputs, computes references, validates tasks and measures the GPU. Never sees candidate code.

use crate::*;

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

    pub(crate) fn trusted_call(&mut self, task: &Task, req: Value) -> Result<Value, JudgeError> {
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

    pub(crate) fn ensure_loaded(&mut self, task: &Task) -> Result<(), JudgeError> {
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
    pub(crate) fn start_warm(&mut self, task: &Task) -> Result<(), JudgeError> {
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
    pub(crate) fn prepare(
        &mut self,
        task: &Task,
        workload: usize,
        seed: u64,
    ) -> Result<String, JudgeError> {
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

    /// Whether the trusted process found an accelerator (JAX's default backend is not the CPU).
    pub(crate) fn has_gpu(&mut self) -> Result<bool, JudgeError> {
        let device = self.trusted()?.hello()["device"].as_str().unwrap_or("cpu");
        Ok(device == "gpu" || device == "cuda" || device == "rocm")
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
}
