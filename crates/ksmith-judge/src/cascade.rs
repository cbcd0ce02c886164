//! The cascade's first half over the candidate's `Backend` (static policy, build, the policy on
//! what was built), and the shared load into a sandboxed runner.

use crate::protocol::{self, Product};
use crate::*;
use ksmith_backend::backend::{self, BuildContext, Device, ProductKind, SourcePolicy, Unavailable};

impl Judge {
    /// The task restricted to the workloads the solution's backend runs here (C: the task's
    /// own; Triton and Pallas: the interpret set on a CPU; GPU backends on a GPU: the gpu set),
    /// or why its kernels cannot run on this machine.
    pub(crate) fn task_for(
        &mut self,
        task: &Task,
        solution: &Solution,
    ) -> Result<Task, JudgeError> {
        let backend = backend::for_language(solution.language);
        let unavailable = |why: Unavailable| match why {
            Unavailable::NoWorkloads(message) => JudgeError::Task {
                task: task.name.clone(),
                message,
            },
            Unavailable::Tool(why) => JudgeError::Unavailable {
                backend: solution.language.name(),
                reason: NotRunReason::NoCompiler,
                why,
                built: None,
            },
            Unavailable::NoDevice(why) => JudgeError::Unavailable {
                backend: solution.language.name(),
                reason: NotRunReason::NoDevice,
                why,
                built: None,
            },
        };
        let accelerator = backend.device() == Device::Gpu && self.has_gpu()?;
        backend.workloads(task, accelerator).map_err(unavailable)
    }

    /// Stages 1-2 for any backend (static policy, build, the policy on the built product),
    /// then the shared load and checks.
    pub(crate) fn cascade(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, JudgeError> {
        let backend = backend::for_language(solution.language);
        // Policy and build share the device: they are never timed.
        self.hold(Work::Build)?;
        // 1. Static policy on the source (Python: parsed by the trusted process).
        match backend.source_policy(solution) {
            SourcePolicy::Checked(found) => r.policy = found,
            SourcePolicy::Trusted => {
                if let Some(v) = self.trusted_policy(task, solution, r)? {
                    return Ok(Some(v));
                }
            }
        }
        if let Some(v) = policy_verdict(r) {
            return Ok(Some(v));
        }
        // A kernel timed on the CPU: the trusted side compiles what timing will need while the
        // build and the runner's start take their time.
        if backend.device() == Device::Cpu {
            self.start_warm(task)?;
        }
        // The runner's interpreter starts while the compiler works (neither is timed); it is
        // this candidate's alone, and gets the library in its own directory once built. That
        // directory is an in-memory file system of its own only with a user namespace;
        // without one it is on the host's (perhaps `noexec`) temporary file system, so the
        // runner starts after the build and reads the library where it was built.
        let started = Instant::now();
        let early = if backend.runner_starts_early() && ksmith_sandbox::isolation().user_namespace {
            Some(self.spawn_runner(task, backend.runner_address_space(), Vec::new())?)
        } else {
            None
        };
        self.split.runner_s += started.elapsed().as_secs_f64();
        // 2. Build, then the policy on what was built.
        self.enter(r, Stage::Build);
        let tools = gpu::tools(&self.env, backend)?;
        let gpu_target = match backend.device() {
            Device::Gpu => Some(gpu::target()?.0),
            Device::Cpu => None,
        };
        let ctx = BuildContext {
            compiler: &self.compiler,
            cache_dir: &self.config.cache_dir.join("build"),
            python: &tools,
            gpu_target,
        };
        let product = match backend.build(&ctx, task, solution)? {
            Ok(p) => p,
            Err(f) => return Ok(Some(compile_failure(f, r))),
        };
        r.build = Some(build_info(&product));
        // Built for a device this machine does not have, and nothing here can run it.
        if let (Some(target), false) = (gpu_target, self.on_gpu || backend.runs_without_device()) {
            return Err(gpu::not_run(solution.language.name(), target, r));
        }
        let refused = backend.product_policy(&product);
        if let Some(first) = refused.first() {
            // Every refused name in one line: the first one's reason, the others named.
            let mut detail = first.message.clone();
            let others: Vec<String> = refused[1..]
                .iter()
                .map(|o| format!("`{}`", o.name))
                .collect();
            if !others.is_empty() {
                detail.push_str(&format!("; also refused: {}", others.join(", ")));
            }
            r.policy = refused;
            return Ok(Some(Verdict::new(
                Status::PolicyRejected,
                Reason::ForbiddenCall,
                detail,
            )));
        }
        // 3. Load in the sandbox.
        let product = protocol::Product::new(solution.language, &product);
        self.load_and_check(
            task,
            solution,
            r,
            backend.runner_address_space(),
            product,
            early,
        )
    }

    /// Starts a sandboxed runner for `task` (see [`ksmith_harness::spawn_runner`]) that may
    /// read `product` (directories of the candidate's build product) besides the system;
    /// `min_address_space` raises its limit for backends that map large ranges.
    pub(crate) fn spawn_runner(
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

    /// Stage 3 on: loads the candidate (`product`, what its backend built) in a fresh
    /// sandboxed runner, then runs the checks and timing; `min_address_space` raises the
    /// runner's limit for backends that map large ranges. A runner started before the build
    /// (`early`) gets the library copied into its own directory; one started here reads the
    /// build product where it is (read-only, nothing else of the caches).
    pub(crate) fn load_and_check(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
        min_address_space: u64,
        mut product: Product,
        early: Option<ksmith_harness::Starting>,
    ) -> Result<Option<Verdict>, JudgeError> {
        self.hold(Work::Load)?;
        self.enter(r, Stage::Load);
        let started = Instant::now();
        let copy_library = early.is_some();
        let starting = match early {
            Some(s) => s,
            None => {
                let built = Path::new(&product.path).parent().map(Path::to_path_buf);
                self.spawn_runner(task, min_address_space, built.into_iter().collect())?
            }
        };
        let mut runner = starting.greeted(&self.env)?;
        if copy_library && product.kind == ProductKind::Library {
            match copy_to_runner(&runner, Path::new(&product.path), "kernel", "so", 0o500) {
                Ok((_, seen)) => product.path = seen,
                // The runner's directory is in memory and bounded: a library that does not fit
                // is the candidate's (builds are capped, so this is a backstop).
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {
                    self.end_runner(runner);
                    return Ok(Some(Verdict::new(
                        Status::CompileError,
                        Reason::LibraryTooLarge,
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
        let load = protocol::Load {
            product: &product,
            entry: &solution.entry_point,
            inputs: &task.inputs,
            outputs: task.outputs.iter().map(|o| &o.tensor).collect(),
            naxes: task.axes.len(),
            device_gpu: self.on_gpu,
        };
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

    /// A Python candidate's static policy and syntax check, run by the trusted process on the
    /// parsed source (never imported): a syntax error is the build's verdict; violations are
    /// recorded in `r` for the caller.
    fn trusted_policy(
        &mut self,
        task: &Task,
        solution: &Solution,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, JudgeError> {
        let reply = self.trusted_ask(
            task,
            &protocol::Policy {
                backend: solution.language.name(),
                sources: &solution.sources,
            },
        )?;
        let diagnostics: Vec<Diagnostic> = reply
            .syntax_errors
            .into_iter()
            .map(|e| Diagnostic {
                file: e.file,
                line: e.line,
                column: e.column,
                severity: "error".into(),
                message: e.message,
            })
            .collect();
        r.policy = reply
            .violations
            .into_iter()
            .map(|v| c::PolicyViolation {
                file: v.file,
                line: v.line,
                name: String::new(),
                message: v.message,
            })
            .collect();
        let Some(d) = diagnostics.first() else {
            return Ok(None);
        };
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
        Ok(Some(Verdict::new(
            Status::CompileError,
            Reason::SyntaxError,
            detail,
        )))
    }

    pub(crate) fn runner_limits(&self, task: &Task) -> Limits {
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
}

/// Copies `src` into the runner's private directory as `{name}-{random}.{ext}` with `mode`;
/// returns the copy's path here and where the runner sees it. An unpredictable name, created
/// fresh: the directory is the candidate's, and a link it planted under a name it could guess
/// must not redirect this write.
pub(crate) fn copy_to_runner(
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

/// What the runner may write in its private directory beyond one correctness run's tensors:
/// Python's, OpenMP's and a GPU compiler's caches.
pub(crate) const SCRATCH_SLACK: u64 = 512 << 20;
