//! The profile stage: where a C candidate spends its time, for the profile analyst agent.
//!
//! [`profile_c`] takes a candidate that already builds and passes, and answers "which source
//! lines and functions are hot, and did the compiler vectorize the loops there":
//!
//! 1. **Build.** The candidate is built like the judge builds it (`ksmith_backend::c`'s default
//!    flags, the ABI header, the tunable `-D` values, the solution's flags) plus `-g` for line
//!    tables and the compiler's vectorization report (gcc `-fopt-info-vec-all`, clang
//!    `-Rpass*=loop-vectorize`). `-g` does not change gcc's or clang's code generation. The
//!    frame pointer is left as the judge builds it: samples are flat (no call graphs), so the
//!    profiled code is the judged code. The report's `optimized`/`missed` lines for the
//!    candidate's own files become [`VecNote`]s.
//! 2. **Drive.** A generated C driver `dlopen`s the library, allocates every input and output of
//!    the chosen workload (inputs drawn from the workload's declared distributions; inputs the
//!    reference draws with a generator function get U[-1, 1) for floats and 0 for integers —
//!    a valid index — with a note), calls the entry point once to warm up, then repeatedly until
//!    `budget` has elapsed, and reports calls and seconds on a private descriptor (nothing the
//!    kernel prints is read as a result). A watchdog timer inside the driver stops a hanging
//!    kernel after `3 * budget + 2 s` (so its samples still show where it spun), signal handlers
//!    report a crash, and the sandbox kills the whole process group if even that fails.
//! 3. **Sample.** The driver runs under `perf record -e cpu-clock -F 2000` in a sandbox
//!    (rlimits, scrubbed environment, own process group; network and PID namespaces with a
//!    private /proc where the machine allows, because perf refuses a PID namespace without one).
//!    Sampling is enabled through perf's control FIFO right before the warm-up call, so input
//!    generation is not in the profile. These VMs have no hardware counters, so the profile is
//!    **software sampling only**: a timer interrupt records the instruction pointer of each
//!    running thread; shares of samples are shares of CPU time (all threads), not cycles,
//!    cache misses or IPC. Where `perf stat -e cycles,instructions` works, a second run counts
//!    them and [`Counters`] carries the IPC; otherwise a note says they are unavailable.
//! 4. **Attribute.** `perf script` lists each sample's symbol+offset and DSO. Samples in the
//!    candidate's library are turned into library addresses (symbol address from `nm` plus the
//!    offset) and resolved with `addr2line -i`, whose inline chain is walked to the first frame
//!    in the candidate's own sources: a `_mm256_fmadd_ps` inlined from `fmaintrin.h` counts on
//!    the candidate's line that called it (perf's own `--sort srcline` would blame the header).
//!    Per-symbol shares cover every DSO (libgomp barriers and spinning, libc, the OS kernel).
//!
//! All percentages are shares of every sample taken while the kernel calls ran (the warm-up
//! call and the driver's loop included, input generation excluded). A candidate that fails to
//! build, crashes or hangs, and a machine without perf, give `Ok` with notes; only problems that
//! are not the candidate's (bad workload index, no compiler, I/O on `work_dir`) are errors.
//! Artifacts stay under `work_dir`: the library in `builds/` (content-keyed, reused) and, per build
//! and workload, `profile-w<workload>-<key>/` with `driver.c`, `perf.data` and `perf-script.txt`
//! (replaced when the same pair is profiled again).

mod driver;
mod inputs;
mod perf;
mod vecreport;

use ksmith_backend::c::{Compiler, Toolchain, DEFAULT_FLAGS};
use ksmith_sandbox::{Exit, FsView, Limits, Recv, Sandboxed};
use ksmith_task::{Language, Solution, Task};
use perf::Tools;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use vecreport::Flavor;

/// What profiling one C candidate on one workload found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, Default)]
pub struct CpuProfile {
    /// Which workload ran: `workload 1 (M=512, K=512, N=512)`.
    pub workload: String,
    /// cpu-clock samples in the candidate's library.
    pub samples: u64,
    /// Top source lines of the candidate by share of all samples, descending.
    pub hot_lines: Vec<HotLine>,
    /// Top functions over every DSO (`name [dso]`; libgomp, libc, `kernel` for the OS), descending.
    pub hot_symbols: Vec<HotSymbol>,
    /// The compiler's vectorization report for the candidate's files, by file and line.
    pub vectorization: Vec<VecNote>,
    /// Cycles, instructions and IPC when hardware counters exist.
    pub counters: Option<Counters>,
    /// Kernel calls the driver timed.
    pub calls: u64,
    /// Seconds those calls took.
    pub seconds: f64,
    /// What else the analyst should know (perf unavailable, crash, hang, sampling totals).
    pub notes: Vec<String>,
}

/// One hot source line.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, Default)]
pub struct HotLine {
    /// Source file, relative to the solution.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// Share of all samples, in percent.
    pub percent: f64,
    /// The source line, trimmed.
    pub text: String,
}

/// One hot function.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, Default)]
pub struct HotSymbol {
    /// `name [dso]`.
    pub symbol: String,
    /// Share of all samples, in percent.
    pub percent: f64,
}

/// One line of the compiler's vectorization report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, Default)]
pub struct VecNote {
    /// Source file, relative to the solution.
    pub file: String,
    /// 1-based line of the loop or statement.
    pub line: u32,
    /// `true` for "optimized"/"vectorized", `false` for "missed".
    pub vectorized: bool,
    /// The compiler's message.
    pub message: String,
}

/// Hardware counter totals over the timed calls.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, Default)]
pub struct Counters {
    /// CPU cycles (all threads).
    pub cycles: u64,
    /// Instructions retired (all threads).
    pub instructions: u64,
    /// Instructions per cycle.
    pub ipc: f64,
}

/// Problems that are not the candidate's fault.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The workload index is out of range.
    #[error("task `{task}` has {count} workloads; there is no workload {index}")]
    NoWorkload {
        /// Task name.
        task: String,
        /// Index asked for.
        index: usize,
        /// Workloads the task has.
        count: usize,
    },
    /// The solution is not C.
    #[error("solution `{name}` is {language}, but the CPU profiler needs a C solution")]
    NotC {
        /// Solution name.
        name: String,
        /// Its language.
        language: String,
    },
    /// No compiler, or the build cache failed.
    #[error("profile build: {0}")]
    Backend(#[from] ksmith_backend::c::BackendError),
    /// I/O in the work directory.
    #[error("profile work directory {path}: {source}")]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The sandbox could not start the profiled run.
    #[error("profile run: {0}")]
    Sandbox(#[from] ksmith_sandbox::SandboxError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |source| ProfileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Profiles a C solution (already known to build and pass) on one workload of the task.
///
/// `defines` are the tunable values (`-DNAME=VALUE`), `work_dir` receives the build and the run's
/// artifacts, `budget` is how long the driver keeps calling the kernel (at least one call).
/// `inputs`, when given, is a safetensors file with one tensor `in.NAME` per input of the
/// workload (what the trusted harness's `prepare` writes): inputs a reference draws with a
/// generator function (index tables, lengths, group sizes) then describe real work; without it
/// they are drawn, and integer ones filled with 0. Inputs missing from the file, or of another
/// dtype or shape, are drawn instead, with a note.
pub fn profile_c(
    task: &Task,
    solution: &Solution,
    workload: usize,
    defines: &[(String, i64)],
    work_dir: &Path,
    budget: Duration,
    inputs: Option<&Path>,
) -> Result<CpuProfile, ProfileError> {
    profile_with(
        task,
        solution,
        workload,
        defines,
        work_dir,
        budget,
        inputs,
        &Tools::detect(),
    )
}

/// Output of the driver's report channel.
#[derive(Debug, Default)]
struct Outcome {
    any: bool,
    ready: bool,
    done: Option<(u64, f64)>,
    timeout: Option<u64>,
    signal: Option<(i32, u64)>,
    messages: Vec<String>,
    exit: Option<Exit>,
    killed: bool,
    log: String,
}

impl Outcome {
    fn take(&mut self, line: &str) {
        self.any = true;
        let mut it = line.split_whitespace();
        match it.next() {
            Some("ready") => self.ready = true,
            Some("done") if self.done.is_none() => {
                let calls = it.next().and_then(|s| s.parse().ok());
                let secs = it.next().and_then(|s| s.parse().ok());
                if let (Some(c), Some(s)) = (calls, secs) {
                    self.done = Some((c, s));
                }
            }
            Some("timeout") => self.timeout = it.next().and_then(|s| s.parse().ok()).or(Some(0)),
            Some("signal") => {
                let sig = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                let calls = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                self.signal = Some((sig, calls));
            }
            Some("error") | Some("note") if self.messages.len() < 8 => {
                let msg: String = line.chars().take(300).collect();
                self.messages.push(msg);
            }
            _ => {}
        }
    }
}

/// One sandboxed run of `program args`, reading the driver's report lines until `wall`; then
/// `collect` is copied from the run's private (in-memory) directory into `into`.
fn run_sandboxed(
    program: &Path,
    args: &[String],
    limits: &Limits,
    wall: Duration,
    collect: Option<(&str, &Path)>,
) -> Result<Outcome, ProfileError> {
    let mut proc = Sandboxed::spawn(program, args, limits)?;
    let mut out = Outcome::default();
    let deadline = Instant::now() + wall;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            out.killed = true;
            break;
        }
        match proc.recv(left) {
            Recv::Line(l) => out.take(&l),
            Recv::Eof => break,
            Recv::Timeout => {
                out.killed = true;
                break;
            }
        }
    }
    out.exit = Some(if out.killed {
        proc.kill();
        Exit::Running
    } else {
        proc.finish(Duration::from_secs(10))
    });
    out.log = proc.log(2048);
    if let Some((name, into)) = collect {
        copy_out(&proc.dir().join(name), &into.join(name));
    }
    Ok(out)
}

/// Copies a file the sandbox wrote (a regular file, never through a link or a FIFO: the
/// directory is the candidate's) to `to`; nothing if there is none.
fn copy_out(from: &Path, to: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut src) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(from)
    else {
        return;
    };
    if !src.metadata().is_ok_and(|m| m.is_file()) {
        return;
    }
    if let Ok(mut dst) = std::fs::File::create(to) {
        let _ = std::io::copy(&mut src, &mut dst);
    }
}

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let from = v.len().saturating_sub(lines);
    let s = v[from..].join(" | ");
    if s.chars().count() > 400 {
        let cut: String = s.chars().take(400).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn describe_workload(task: &Task, w: usize) -> String {
    let axes = &task.workloads[w].axes;
    let vals: Vec<String> = task
        .axes
        .iter()
        .map(|a| format!("{}={}", a.name, axes.get(&a.name).copied().unwrap_or(0)))
        .collect();
    format!("workload {w} ({})", vals.join(", "))
}

fn threads() -> usize {
    std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

#[allow(clippy::too_many_arguments)]
fn profile_with(
    task: &Task,
    solution: &Solution,
    workload: usize,
    defines: &[(String, i64)],
    work_dir: &Path,
    budget: Duration,
    inputs_file: Option<&Path>,
    tools: &Tools,
) -> Result<CpuProfile, ProfileError> {
    if workload >= task.workloads.len() {
        return Err(ProfileError::NoWorkload {
            task: task.name.clone(),
            index: workload,
            count: task.workloads.len(),
        });
    }
    if solution.language != Language::C {
        return Err(ProfileError::NotC {
            name: solution.name.clone(),
            language: solution.language.name().into(),
        });
    }
    std::fs::create_dir_all(work_dir).map_err(io_err(work_dir))?;
    let work_dir = &std::fs::canonicalize(work_dir).map_err(io_err(work_dir))?;
    let mut p = CpuProfile {
        workload: describe_workload(task, workload),
        ..CpuProfile::default()
    };

    // 1. Build with line tables and the vectorization report.
    let compiler = Compiler::detect()?;
    let flavor = Flavor::of(&compiler.version);
    let mut flags: Vec<String> = DEFAULT_FLAGS.iter().map(|s| s.to_string()).collect();
    flags.extend(["-include".into(), "ksmith_abi.h".into()]);
    flags.extend(defines.iter().map(|(k, v)| format!("-D{k}={v}")));
    flags.extend(solution.flags.iter().cloned());
    flags.push("-g".into());
    flags.extend(flavor.flags());
    let tool = Toolchain {
        command: compiler.command.clone(),
        version: compiler.version.clone(),
        flags,
        header: Some(format!(
            "/* Generated by ksmith: the kernel ABI for task `{}`. */\n#include <stdint.h>\n{}\n",
            task.name,
            ksmith_backend::c::prototype(task, &solution.entry_point)
        )),
        parse: ksmith_backend::c::parse_diagnostics,
    };
    let built = match ksmith_backend::c::build_with(&tool, solution, &work_dir.join("builds"))? {
        Ok(b) => b,
        Err(f) => {
            // The log is mostly the vectorization report: show the errors.
            let errors: Vec<String> = f
                .diagnostics
                .iter()
                .filter(|d| d.severity.contains("error"))
                .take(3)
                .map(|d| format!("{}:{}: {}", d.file, d.line, d.message))
                .collect();
            let why = if errors.is_empty() {
                tail(&f.log, 6)
            } else {
                errors.join(" | ")
            };
            p.notes.push(format!(
                "the candidate did not build for profiling ({}): {why}",
                f.reason.name()
            ));
            return Ok(p);
        }
    };
    let files: Vec<String> = solution.sources.iter().map(|(n, _)| n.clone()).collect();
    p.vectorization = vecreport::parse(&built.log, flavor, &files);
    let library = std::fs::canonicalize(&built.library).map_err(io_err(&built.library))?;

    // 2. The driver.
    // One directory per (build, workload), replaced by the next profile of the same pair, so a
    // long search does not pile up artifacts; a fresh one if the old cannot be removed.
    let run = work_dir.join(format!(
        "profile-w{workload}-{}",
        &built.key[..16.min(built.key.len())]
    ));
    let run = if (!run.exists() || std::fs::remove_dir_all(&run).is_ok())
        && std::fs::create_dir(&run).is_ok()
    {
        run
    } else {
        tempfile::Builder::new()
            .prefix(&format!("profile-w{workload}-"))
            .tempdir_in(work_dir)
            .map_err(io_err(work_dir))?
            .keep()
    };
    let (loaded, inputs_file) = match inputs_file {
        Some(f) => match std::fs::canonicalize(f)
            .map_err(|e| e.to_string())
            .and_then(|f| inputs::read(&f, task, workload).map(|r| (r, f)))
        {
            Ok(((loaded, notes), f)) => {
                p.notes.extend(notes);
                (loaded, Some(f))
            }
            Err(e) => {
                p.notes.push(format!(
                    "inputs file {} unusable ({e}); every input is drawn",
                    f.display()
                ));
                (Default::default(), None)
            }
        },
        None => (Default::default(), None),
    };
    let drv = driver::generate(task, workload, &solution.entry_point, &loaded);
    p.notes.extend(drv.notes.iter().cloned());
    std::fs::write(run.join("driver.c"), &drv.source).map_err(io_err(&run))?;
    let driver_bin = run.join("driver");
    let (ok, out, err) = perf::run_capture(
        Command::new(&compiler.command)
            .args(["-O2", "-g", "-std=gnu11", "-o"])
            .arg(&driver_bin)
            .arg(run.join("driver.c"))
            // libm in the global scope, as in the harness's Python process: kernels that
            // call expf are not linked against libm themselves.
            .args(["-Wl,--no-as-needed", "-lm", "-ldl", "-Wl,--as-needed"])
            .current_dir(&run),
        None,
        Duration::from_secs(120),
    )
    .map_err(io_err(&run))?;
    if !ok {
        p.notes.push(format!(
            "the profile driver did not compile (a ksmith bug): {}",
            tail(&format!("{out}\n{err}"), 6)
        ));
        return Ok(p);
    }

    // 3. Run it, under perf when possible.
    let budget_s = budget.as_secs_f64().max(0.001);
    let watchdog = 3.0 * budget_s + 2.0;
    let setup = 2.0 + drv.bytes as f64 / 200e6;
    let runs = Runs {
        run: run.clone(),
        driver: driver_bin,
        library: library.clone(),
        budget_s,
        watchdog,
        wall: Duration::from_secs_f64(setup + watchdog + 15.0),
        bytes: drv.bytes,
        threads: threads(),
        inputs: inputs_file.filter(|_| !loaded.is_empty()),
    };
    let perf_data = run.join("perf.data");
    let mut outcome = None;
    match &tools.perf {
        Some(perf) => {
            let record: Vec<String> = vec![
                "record".into(),
                "-e".into(),
                "cpu-clock".into(),
                "-F".into(),
                perf::FREQUENCY.to_string(),
                "-N".into(),
                "-q".into(),
                "-o".into(),
                "perf.data".into(),
            ];
            let o = runs.under_perf(perf, record, "perf.data", "ctl.fifo", &mut p.notes)?;
            if !o.any && !o.killed {
                p.notes.push(format!(
                    "perf unavailable: perf record failed ({:?}): {}; timing only",
                    o.exit.unwrap_or(Exit::Running),
                    tail(&o.log, 4)
                ));
            } else {
                outcome = Some(o);
            }
        }
        None => p
            .notes
            .push("perf unavailable: no `perf` in PATH; timing only".into()),
    }
    let sampled = outcome.is_some();
    let outcome = match outcome {
        Some(o) => o,
        None => runs.plain()?,
    };

    // What the run says about the kernel.
    if let Some((calls, secs)) = outcome.done {
        p.calls = calls;
        p.seconds = secs;
    }
    for m in &outcome.messages {
        let m = m.strip_prefix("note ").unwrap_or(m);
        let m = m.strip_prefix("error ").unwrap_or(m);
        p.notes.push(format!("driver: {m}"));
    }
    if let Some(calls) = outcome.timeout {
        p.notes.push(format!(
            "the kernel did not return within {watchdog:.1} s (a hang or far too slow for the {budget_s:.2} s budget): the driver stopped after {calls} completed calls; the samples show where it was running"
        ));
    } else if let Some((sig, calls)) = outcome.signal {
        p.notes.push(format!(
            "the kernel crashed with {} in call {} (after {calls} completed calls)",
            ksmith_sandbox::signal_name(sig),
            calls + 1
        ));
    } else if outcome.killed {
        p.notes.push(format!(
            "the profiled run did not finish within {:.1} s and was killed (the kernel blocked the driver's watchdog)",
            runs.wall.as_secs_f64()
        ));
    } else if outcome.done.is_none() && outcome.messages.is_empty() {
        p.notes.push(format!(
            "the driver ended without a result ({:?}): {}",
            outcome.exit.unwrap_or(Exit::Running),
            tail(&outcome.log, 4)
        ));
    }

    // 4. Attribute the samples.
    if !sampled {
        return Ok(p);
    }
    if perf_data.exists() {
        let a = analyze_run(tools, &perf_data, &library, &files, solution, &run);
        p.samples = a.in_library;
        p.hot_lines = a.hot_lines;
        p.hot_symbols = a.hot_symbols;
        let unreadable = a.notes.iter().any(|n| n.starts_with("perf script"));
        p.notes.extend(a.notes);
        if a.total > 0 {
            p.notes.insert(
                0,
                format!(
                    "software sampling (cpu-clock, {} Hz): {} samples during the calls, {:.1}% in the candidate's library; percentages are shares of all of them",
                    perf::FREQUENCY,
                    a.total,
                    100.0 * a.in_library as f64 / a.total as f64
                ),
            );
        } else if !unreadable {
            p.notes
                .push("perf recorded no samples during the calls".into());
        }
    } else {
        p.notes.push("perf wrote no perf.data".into());
    }
    // Hardware counters, in a second run where they exist.
    if let Some(perf) = &tools.perf {
        match perf::hardware_counters(perf) {
            Err(e) => p.notes.push(format!(
                "hardware counters unavailable in this VM ({e}); cycles, IPC and cache misses are not measured"
            )),
            Ok(()) if outcome.done.is_some() => p.counters = runs.count(perf, &mut p.notes)?,
            Ok(()) => {}
        }
    }
    Ok(p)
}

/// Bytes a profiled run may write (perf's samples of a few seconds take a few MiB).
const PROFILE_SCRATCH: u64 = 1 << 30;

/// How the driver runs: paths, time limits and rlimits shared by every run.
struct Runs {
    run: PathBuf,
    driver: PathBuf,
    library: PathBuf,
    budget_s: f64,
    watchdog: f64,
    wall: Duration,
    bytes: u64,
    threads: usize,
    inputs: Option<PathBuf>,
}

impl Runs {
    fn limits(&self, isolate: bool) -> Limits {
        let memory = (4 * self.bytes).saturating_add(4 << 30).min(1 << 40);
        Limits {
            cpu_seconds: (self.wall.as_secs_f64() * self.threads as f64).ceil() as u64 + 10,
            address_space: memory,
            // Its processes together, where a memory cgroup can be made.
            memory_bytes: Some(memory),
            file_size: 1 << 30,
            open_files: 4096,
            processes: 4096,
            env: vec![
                ("OMP_NUM_THREADS".into(), self.threads.to_string()),
                ("OMP_PROC_BIND".into(), "false".into()),
                ("OPENBLAS_NUM_THREADS".into(), "1".into()),
                ("MKL_NUM_THREADS".into(), "1".into()),
            ],
            isolate,
            // The driver reads its library, the judge's inputs and its run directory.
            view: FsView {
                read: self
                    .inputs
                    .iter()
                    .cloned()
                    .chain(self.library.parent().map(Path::to_path_buf))
                    .chain(self.driver.parent().map(Path::to_path_buf))
                    .collect(),
                ..FsView::default()
            },
            // Everything it writes (perf's output) goes to an in-memory private directory of
            // this size: a candidate writing files fills that, not the disk.
            scratch_bytes: Some(PROFILE_SCRATCH),
            ..Limits::default()
        }
    }

    fn driver_args(&self, ctl: Option<&Path>) -> Vec<String> {
        let mut v = vec![
            self.library.display().to_string(),
            format!("{:.6}", self.budget_s),
            format!("{:.3}", self.watchdog),
            ctl.map(|c| c.display().to_string())
                .unwrap_or_else(|| "-".into()),
        ];
        v.extend(self.inputs.iter().map(|p| p.display().to_string()));
        v
    }

    /// The driver alone, in the sandbox's own namespaces.
    fn plain(&self) -> Result<Outcome, ProfileError> {
        run_sandboxed(
            &self.driver,
            &self.driver_args(None),
            &self.limits(true),
            self.wall,
            None,
        )
    }

    /// `perf ARGS [-D -1 --control fifo:CTL] -- driver ...`, in our own namespaces with a
    /// private /proc (perf refuses a PID namespace without one) or, failing those, bare.
    /// perf writes `output` in its private directory (ARGS name it relatively); it is copied
    /// into the run directory afterwards.
    fn under_perf(
        &self,
        perf: &Path,
        mut perf_args: Vec<String>,
        output: &str,
        fifo: &str,
        notes: &mut Vec<String>,
    ) -> Result<Outcome, ProfileError> {
        let ctl = self.run.join(fifo);
        let ctl_ok = perf::perf_has_control(perf)
            && nix::unistd::mkfifo(&ctl, nix::sys::stat::Mode::S_IRWXU).is_ok();
        if ctl_ok {
            perf_args.extend([
                "-D".into(),
                "-1".into(),
                "--control".into(),
                format!("fifo:{}", ctl.display()),
            ]);
        } else {
            push_once(
                notes,
                "perf cannot start sampling on request here: input generation is in the profile too",
            );
        }
        perf_args.push("--".into());
        perf_args.push(self.driver.display().to_string());
        perf_args.extend(self.driver_args(ctl_ok.then_some(ctl.as_path())));
        // perf refuses a PID namespace without its own /proc: the sandbox mounts one where the
        // kernel allows.
        let iso = ksmith_sandbox::isolation();
        if iso.user_namespace && !iso.proc_namespace {
            push_once(
                notes,
                "no private /proc for the profiled run here: perf may refuse to sample",
            );
        }
        let mut limits = self.limits(true);
        // perf needs the whole tree (its own /proc mount, debug info, kallsyms) and its
        // system call; writes stay in its own in-memory directory (and the control FIFO). No
        // verdict comes from here.
        limits.own_proc = iso.proc_namespace;
        limits.profiling = true;
        limits.view.read_everything = true;
        if ctl_ok {
            // The driver writes "enable" into it, and writes nothing else outside its own
            // in-memory directory.
            limits.view.in_place.push(ctl);
        }
        run_sandboxed(
            perf,
            &perf_args,
            &limits,
            self.wall,
            Some((output, &self.run)),
        )
    }

    /// A second run under `perf stat -e cycles,instructions`.
    fn count(
        &self,
        perf: &Path,
        notes: &mut Vec<String>,
    ) -> Result<Option<Counters>, ProfileError> {
        let stat = self.run.join("stat.csv");
        let args: Vec<String> = vec![
            "stat".into(),
            "-x".into(),
            ",".into(),
            "-o".into(),
            "stat.csv".into(),
            "-e".into(),
            "cycles,instructions".into(),
        ];
        let o = self.under_perf(perf, args, "stat.csv", "ctl-stat.fifo", notes)?;
        let text = std::fs::read_to_string(&stat).unwrap_or_default();
        let c = perf::parse_stat(&text);
        if c.is_none() {
            notes.push(format!(
                "perf stat counted no cycles/instructions ({:?}): {}",
                o.exit.unwrap_or(Exit::Running),
                tail(&text, 3)
            ));
        }
        Ok(c)
    }
}

fn push_once(notes: &mut Vec<String>, note: &str) {
    if !notes.iter().any(|n| n == note) {
        notes.push(note.to_string());
    }
}

/// Reads perf.data: samples, symbols, source lines.
fn analyze_run(
    tools: &Tools,
    perf_data: &Path,
    library: &Path,
    files: &[String],
    solution: &Solution,
    run: &Path,
) -> perf::Analysis {
    let mut notes = Vec::new();
    let Some(perf) = &tools.perf else {
        return perf::Analysis::default();
    };
    let script = perf::run_capture(
        Command::new(perf)
            .args(["script", "-f", "-i"])
            .arg(perf_data)
            .args(["-F", "ip,sym,symoff,dso"])
            .current_dir(run),
        None,
        Duration::from_secs(180),
    );
    let text = match script {
        Ok((true, out, _)) => out,
        Ok((false, out, err)) if !out.is_empty() => {
            notes.push(format!("perf script reported: {}", tail(&err, 2)));
            out
        }
        Ok((false, _, err)) => {
            return perf::Analysis {
                notes: vec![format!("perf script failed: {}", tail(&err, 4))],
                ..Default::default()
            }
        }
        Err(e) => {
            return perf::Analysis {
                notes: vec![format!("perf script could not run: {e}")],
                ..Default::default()
            }
        }
    };
    let _ = std::fs::write(run.join("perf-script.txt"), &text);
    let samples: Vec<perf::Sample> = text.lines().filter_map(perf::parse_sample).collect();
    let symbols = match &tools.nm {
        Some(nm) => match perf::run_capture(
            Command::new(nm).arg("--defined-only").arg(library),
            None,
            Duration::from_secs(60),
        ) {
            Ok((true, out, _)) => perf::parse_nm(&out),
            Ok((false, _, err)) => {
                notes.push(format!("nm failed: {}", tail(&err, 2)));
                Default::default()
            }
            Err(e) => {
                notes.push(format!("nm could not run: {e}"));
                Default::default()
            }
        },
        None => {
            notes.push("no `nm` in PATH: no source lines".into());
            Default::default()
        }
    };
    let addr2line = tools.addr2line.clone();
    let lines = move |addrs: &[u64]| {
        let Some(a2l) = &addr2line else {
            return Err("no `addr2line` in PATH".to_string());
        };
        let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
        match perf::run_capture(
            Command::new(a2l).arg("-e").arg(library).args(["-i", "-a"]),
            Some(input),
            Duration::from_secs(120),
        ) {
            Ok((true, out, _)) => Ok(perf::parse_addr2line(&out)),
            Ok((false, _, err)) => Err(format!("addr2line failed: {}", tail(&err, 2))),
            Err(e) => Err(format!("addr2line could not run: {e}")),
        }
    };
    let mut a = perf::analyze(
        &samples,
        library,
        &symbols,
        &lines,
        files,
        &solution.sources,
    );
    notes.append(&mut a.notes);
    a.notes = notes;
    a
}

impl CpuProfile {
    /// A compact plain-text rendering for a prompt (at most about 60 lines): hot lines with
    /// their text, hot symbols, vectorization notes for loops at or just above hot lines
    /// first, counters and notes.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "CPU profile of {}", self.workload);
        if self.calls > 0 {
            let per = self.seconds / self.calls as f64;
            let _ = write!(
                s,
                ": {} calls in {:.3} s ({} per call under the profiler: back-to-back calls on the same inputs, with sampling overhead, so not the judge's figure)",
                self.calls,
                self.seconds,
                fmt_time(per)
            );
        }
        let _ = writeln!(s, "; {} samples in the kernel library.", self.samples);
        if !self.hot_lines.is_empty() {
            let _ = writeln!(s, "Hot source lines (share of all samples):");
            for h in self.hot_lines.iter().take(10) {
                let _ = writeln!(s, "  {:5.1}%  {}:{}  {}", h.percent, h.file, h.line, h.text);
            }
        }
        if !self.hot_symbols.is_empty() {
            let _ = writeln!(s, "Hot functions:");
            for h in self.hot_symbols.iter().take(8) {
                let _ = writeln!(s, "  {:5.1}%  {}", h.percent, h.symbol);
            }
        }
        if !self.vectorization.is_empty() {
            // Notes on a hot line or the few lines above it (the loop header) first.
            let hot: Vec<&HotLine> = self.hot_lines.iter().take(5).collect();
            let near = |n: &VecNote| {
                hot.iter()
                    .position(|h| h.file == n.file && n.line <= h.line && n.line + 4 >= h.line)
            };
            let mut notes: Vec<(usize, &VecNote)> = self
                .vectorization
                .iter()
                .map(|n| (near(n).unwrap_or(usize::MAX), n))
                .collect();
            notes.sort_by_key(|(rank, n)| (*rank, n.vectorized, n.file.clone(), n.line));
            let shown = notes.len().min(12);
            // The auto-vectorizer reports loops of hand-written vector code as missed, and models
            // took that for a defect to fix.
            let intrinsics = self
                .hot_lines
                .iter()
                .any(|h| h.text.contains("_mm") || h.text.contains("__m"));
            let _ = writeln!(
                s,
                "Vectorization report (loops at hot lines first{}{}):",
                if notes.len() > shown {
                    format!(", {shown} of {}", notes.len())
                } else {
                    String::new()
                },
                if intrinsics {
                    "; the hot code uses vector intrinsics, and a loop already written with them shows as `missed`: that is expected, not a defect"
                } else {
                    ""
                }
            );
            for (rank, n) in notes.iter().take(shown) {
                let _ = writeln!(
                    s,
                    "  {}:{}{} {}: {}",
                    n.file,
                    n.line,
                    if *rank != usize::MAX { " [hot]" } else { "" },
                    if n.vectorized { "vectorized" } else { "missed" },
                    n.message
                );
            }
        }
        if let Some(c) = &self.counters {
            let _ = writeln!(
                s,
                "Counters: {} cycles, {} instructions, IPC {:.2}",
                c.cycles, c.instructions, c.ipc
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(s, "Notes:");
            for n in self.notes.iter().take(8) {
                let n: String = if n.chars().count() > 240 {
                    let cut: String = n.chars().take(237).collect();
                    format!("{cut}...")
                } else {
                    n.clone()
                };
                let _ = writeln!(s, "  - {n}");
            }
        }
        s
    }
}

fn fmt_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} us", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_perf_the_driver_still_times_the_kernel() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/vector_add");
        let task = Task::load(&root).unwrap();
        let solution = Solution::load(&root.join("solutions/naive"), &task).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let tools = Tools {
            perf: None,
            ..Tools::detect()
        };
        let p = profile_with(
            &task,
            &solution,
            0,
            &[],
            dir.path(),
            Duration::from_millis(100),
            None,
            &tools,
        )
        .unwrap();
        assert!(p.calls >= 1 && p.seconds > 0.0, "{p:?}");
        assert_eq!(p.samples, 0);
        assert!(p.notes.iter().any(|n| n.starts_with("perf unavailable")));
        assert!(!p.notes.iter().any(|n| n.contains("hardware counters")));
        assert!(p.summary().contains("calls in"));
    }

    #[test]
    fn outcome_parses_report_lines() {
        let mut o = Outcome::default();
        for l in ["ready", "warm 0.01", "done 12 0.3", "done 1 1", "note x"] {
            o.take(l);
        }
        assert!(o.ready && o.any);
        assert_eq!(o.done, Some((12, 0.3)));
        assert_eq!(o.messages, vec!["note x".to_string()]);
        let mut o = Outcome::default();
        o.take("signal 11 3");
        o.take("timeout 2");
        assert_eq!((o.signal, o.timeout), (Some((11, 3)), Some(2)));
    }

    #[test]
    fn summary_is_compact_and_puts_hot_vectorization_first() {
        let p = CpuProfile {
            workload: "workload 0 (N=4)".into(),
            samples: 90,
            hot_lines: (0..20)
                .map(|i| HotLine {
                    file: "kernel.c".into(),
                    line: 13 + i,
                    percent: 50.0 - i as f64,
                    text: format!("x{i}"),
                })
                .collect(),
            hot_symbols: (0..20)
                .map(|i| HotSymbol {
                    symbol: format!("f{i} [kernel.so]"),
                    percent: 1.0,
                })
                .collect(),
            vectorization: (0..40)
                .map(|i| VecNote {
                    file: "kernel.c".into(),
                    line: 100 - i,
                    vectorized: false,
                    message: "m".into(),
                })
                .chain(std::iter::once(VecNote {
                    file: "kernel.c".into(),
                    line: 12,
                    vectorized: true,
                    message: "loop vectorized using 32 byte vectors".into(),
                }))
                .collect(),
            counters: Some(Counters {
                cycles: 10,
                instructions: 20,
                ipc: 2.0,
            }),
            calls: 10,
            seconds: 0.5,
            notes: (0..20).map(|i| format!("note {i}")).collect(),
        };
        let s = p.summary();
        assert!(s.lines().count() <= 60, "{s}");
        assert!(s.contains("kernel.c:13  x0"));
        assert!(s.contains("50.000 ms per call"));
        let vec_first = s
            .lines()
            .skip_while(|l| !l.starts_with("Vectorization"))
            .nth(1)
            .unwrap();
        assert!(vec_first.contains("kernel.c:12 [hot] vectorized"), "{s}");
        assert!(s.contains("IPC 2.00"));
        assert!(!s.contains("intrinsics"), "{s}");
        let json = serde_json::to_string(&p).unwrap();
        let back: CpuProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back.hot_lines, p.hot_lines);
        // Hand-written vector code: its loops' `missed` lines are explained.
        let mut v = p.clone();
        v.hot_lines[0].text = "acc = _mm512_fmadd_ps(a, b, acc);".into();
        assert!(v
            .summary()
            .contains("a loop already written with them shows as `missed`"));
    }
}
