//! `ksmith`: the command-line interface. Argument parsing and output live here; the work is
//! done by the pipeline crates (task, backend, harness, judge, store).
//!
//! Everything printed for a person goes through `say!`/`note!` (term.rs), which escape
//! untrusted text; a bare `println!` is refused by clippy.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod term;
mod agent;
mod bench;
mod cache;
mod cluster;
mod deploy;
mod extract;
mod interrupt;
mod mcp;
mod memory;
mod optimize;
pub(crate) mod progress;
mod report;
pub(crate) mod results;
mod run_args;
mod run_events;
pub(crate) mod run_report;
mod search;
mod serve;
pub(crate) mod tune;

use anyhow::{anyhow, Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use ksmith_backend::c::Compiler;
use ksmith_backend::hw;
use ksmith_harness::PythonEnv;
use ksmith_judge::scheduler::{Device, DeviceScheduler, Work};
use ksmith_judge::{Flush, Judge, JudgeConfig, Status};
use ksmith_store::Store;
use ksmith_task::{Solution, Task, WorkloadSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit code: evaluation ran and the candidate failed.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: bad usage or bad input (task, solution, flag).
pub(crate) const EXIT_INPUT: u8 = 2;
/// Exit code: the environment failed (no compiler, Python setup, harness crash).
const EXIT_ENV: u8 = 3;

#[derive(Parser)]
#[command(
    name = "ksmith",
    version,
    about = "KernelSmith: generate, judge and benchmark fast verified kernels"
)]
struct Cli {
    /// Project-local store directory (database, caches, artifacts).
    #[arg(
        long,
        global = true,
        env = "KSMITH_STORE",
        default_value = ".ksmith",
        help_heading = "Global options"
    )]
    store: PathBuf,
    /// Python interpreter with numpy, jax and safetensors (default: a managed virtualenv).
    #[arg(
        long,
        global = true,
        env = "KSMITH_PYTHON",
        help_heading = "Global options"
    )]
    python: Option<PathBuf>,
    /// OpenMP threads for candidates (default: all cores).
    #[arg(long, global = true, value_parser = parse_threads, help_heading = "Global options")]
    threads: Option<usize>,
    /// Judge untrusted code even where an isolation layer is missing (see `ksmith hw`); every
    /// result records it. Without it the judge refuses on such a machine.
    #[arg(
        long,
        global = true,
        env = "KSMITH_UNSAFE_NO_SANDBOX",
        help_heading = "Global options"
    )]
    unsafe_no_sandbox: bool,
    /// Seconds the task's reference (and its generators) may take per request before the
    /// task is rejected (exit 2).
    #[arg(long, global = true, help_heading = "Global options", env = "KSMITH_REFERENCE_TIMEOUT", default_value_t = 300.0, value_parser = parse_timeout)]
    reference_timeout: f64,
    /// GiB of memory the process running the reference may allocate; past it the task is
    /// rejected (exit 2). 0: no limit. Default: this machine's memory (no limit when JAX runs
    /// on an accelerator).
    #[arg(long, global = true, help_heading = "Global options", env = "KSMITH_REFERENCE_MEMORY", value_parser = parse_gib)]
    reference_memory: Option<f64>,
    /// No progress on stderr (bars on a terminal, a line per step in a log); results and
    /// errors are still printed.
    #[arg(long, short = 'q', global = true, help_heading = "Global options")]
    quiet: bool,
    /// Judge on a Ray cluster: HOST:PORT (its head's GCS), auto or ray://HOST:PORT; `local`
    /// judges here (the default; also from RAY_ADDRESS or `[cluster] address` in the config
    /// file).
    #[arg(
        long,
        global = true,
        env = "KSMITH_CLUSTER",
        help_heading = "Global options"
    )]
    cluster: Option<String>,
    /// With a cluster: judge only on devices of this machine fingerprint (default: the
    /// largest group; `ksmith cluster status` lists them).
    #[arg(long, global = true, help_heading = "Global options")]
    cluster_fingerprint: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Options shared by `eval` and `bench`.
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Judge")]
struct JudgeOpts {
    /// Wall-clock limit per candidate call, in seconds (0.1 to 86400).
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout)]
    timeout: f64,
    /// Seeds per workload in the full check (at least 3).
    #[arg(long, default_value_t = 3, value_parser = crate::whole::<u64>(3..=100))]
    seeds: u64,
    /// Draw fresh random seeds instead of the fixed ones.
    #[arg(long)]
    fresh_seeds: bool,
    /// Check correctness only; skip timing.
    #[arg(long)]
    no_timing: bool,
    /// Cache flushing between timed calls.
    #[arg(long, value_enum, default_value_t = FlushArg::Auto)]
    flush: FlushArg,
    /// Minimum timed milliseconds per side (candidate, baseline) per workload.
    #[arg(long, default_value_t = 100, value_parser = crate::whole::<u64>(1..=600_000))]
    min_time_ms: u64,
}

/// `--timeout`: a finite number of seconds, 0.1 to a day (NaN and 0 once became 0.1 s and
/// stored a correct kernel as TIMEOUT).
fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.1..=86_400.0).contains(&v) => Ok(v),
        _ => Err("expected a number of seconds from 0.1 to 86400".into()),
    }
}

/// A whole number in `range` as a clap value parser: the message names the range whatever was
/// given (clap's own range parser answers "invalid digit found in string" to `-3`).
pub(crate) fn whole<T>(
    range: impl std::ops::RangeBounds<i128> + Clone + Send + Sync + 'static,
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: TryFrom<i128> + Clone + Send + Sync + 'static,
{
    move |s: &str| -> Result<T, String> {
        use std::ops::Bound;
        let expected = match (range.start_bound(), range.end_bound()) {
            (Bound::Included(a), Bound::Included(b)) => {
                format!("expected a whole number from {a} to {b}")
            }
            (Bound::Included(a), _) => format!("expected a whole number of at least {a}"),
            _ => "expected a whole number".to_string(),
        };
        match s.trim().parse::<i128>() {
            Ok(n) if range.contains(&n) => T::try_from(n).map_err(|_| expected),
            Ok(n) => Err(format!("{n} is out of range: {expected}")),
            Err(_) => Err(expected),
        }
    }
}

/// `--reference-memory`: a finite number of GiB, 0 (no limit) to 2^20.
fn parse_gib(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1_048_576.0).contains(&v) => Ok(v),
        _ => Err("expected a number of GiB from 0 (no limit) to 1048576".into()),
    }
}

/// `--language`: a solution language name.
fn parse_language(s: &str) -> Result<ksmith_task::Language, String> {
    ksmith_task::Language::from_name(s).ok_or_else(|| {
        format!(
            "unknown language {}",
            ksmith_task::suggest::expected(s, &ksmith_task::LANGUAGES)
        )
    })
}

/// `--threads`: 1 to 1024.
/// A whole number in `range`, or a message saying what is expected.
fn count_in(s: &str, range: std::ops::RangeInclusive<usize>, what: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number of {what} from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

/// `--budget`: configurations a search may evaluate.
pub(crate) fn parse_budget(s: &str) -> Result<usize, String> {
    count_in(s, 1..=100_000, "configurations")
}

/// `--confirm`: leaders re-timed together (0: none).
pub(crate) fn parse_confirm(s: &str) -> Result<usize, String> {
    count_in(s, 0..=50, "leaders")
}

/// `--tune-budget`: tuner configurations per agent iteration (0: no autotuning).
pub(crate) fn parse_tune_budget(s: &str) -> Result<usize, String> {
    count_in(s, 0..=10_000, "configurations")
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err("expected a whole number of threads from 1 to 1024".into()),
    }
}

#[derive(Copy, Clone, ValueEnum)]
enum FlushArg {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Cmd {
    /// Evaluate one solution (a directory with solution.toml, or a bare kernel.c) on a task.
    Eval {
        /// Task directory.
        task: PathBuf,
        /// Solution directory or source file; several are timed side by side (same rounds,
        /// same baseline calls) and compared with the first.
        #[arg(required = true, num_args = 1..)]
        solutions: Vec<PathBuf>,
        /// Print the result object as one JSON document on stdout.
        #[arg(long)]
        json: bool,
        /// Judge again even when an evaluation of the same code, task, machine and settings is
        /// stored (by default it is shown, marked as reused).
        #[arg(long, env = "KSMITH_EVAL_AGAIN", value_parser = clap::builder::BoolishValueParser::new())]
        again: bool,
        #[command(flatten)]
        opts: JudgeOpts,
    },
    /// Evaluate every task of a suite with its solutions; print the table and suite metrics.
    Bench(bench::BenchArgs),
    /// Find a faster kernel: with --model, LLM agents plan, implement, fix, tune and profile; without, the seed is autotuned. The winner is re-validated on fresh seeds.
    Optimize(Box<run_args::OptimizeArgs>),
    /// Search a solution's tunable parameters; writes the winning configuration as a new solution (STORE/tuned/TASK/SOLUTION-tuned; nothing when the untuned solution wins).
    Tune(tune::TuneArgs),
    /// Check a task (or every task of a suite): definition, reference, tolerances, solutions.
    Validate {
        /// Task or suite directory.
        path: PathBuf,
        /// Static checks only (do not run the reference).
        #[arg(long)]
        no_run: bool,
        /// Print {"tasks": [{"path", "valid", "problems": [..]}], "valid", "total"} on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Measure (once, then cached) and show this machine's roofline.
    Hw {
        /// Measure again even if cached.
        #[arg(long)]
        refresh: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also measure the GPU through the harness's JAX (copy bandwidth, bf16/fp32 matmul peaks).
        #[arg(long)]
        gpu: bool,
    },
    /// Show a stored evaluation (a number) or an agent run (a run id).
    Show {
        /// Evaluation id or run id.
        id: String,
        /// Print the stored result as JSON.
        #[arg(long)]
        json: bool,
        /// For a run: write each snapshot's code as a solution directory DIR/iterN (to judge
        /// them again, e.g. side by side with `ksmith eval TASK DIR/iter0 DIR/iter1 ...`).
        #[arg(long, value_name = "DIR")]
        write: Option<PathBuf>,
    },
    /// Continue an agent run that was quit, stopped by a budget, interrupted, failed or killed
    /// (refused, exit 2, while another process drives it).
    Resume(run_args::ResumeArgs),
    /// List agent runs (a run whose process died is shown as "interrupted (process gone)").
    Runs {
        /// Print {"runs": [{"id", "status", "process_gone", "pid", "calls", "best_speedup", ...}]}.
        #[arg(long)]
        json: bool,
    },
    /// List stored evaluations (newest first), with filters, and what each was made for.
    Evals(results::EvalsArgs),
    /// List bench runs (newest first): suite, state, counts, geomean speedup.
    Benches {
        /// Print {"benches": [{"id", "created_at", "suite", "finished", "tasks", "items",
        /// "evaluated", "errors", "passed", "geomean_speedup"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Compare two bench runs or agent runs per task, with the noise; optionally a regression gate.
    Compare(results::CompareArgs),
    /// Write one self-contained HTML report of an agent run or graph search (best speedup over
    /// time, evaluations and tokens; the tree; the winner's diff and roofline; the cost) and
    /// print a summary.
    Report(run_report::ReportArgs),
    /// List the LLM calls of a run: role, tokens, cost, latency.
    Calls {
        /// Run id.
        run: String,
        /// Print every prompt and reply in full.
        #[arg(long)]
        full: bool,
        /// Print {"run", "calls": [{"seq", "role", "tokens_in", "cost", ...}], "totals"} (with
        /// --full, each call also has "system", "prompt" and "reply").
        #[arg(long)]
        json: bool,
    },
    /// Task authoring.
    #[command(subcommand)]
    Task(TaskCmd),
    /// Find the ops of a jitted JAX function worth a kernel (traced, timed, ranked) and write
    /// the top ones as a validated task suite (docs/extract.md).
    Extract(extract::ExtractArgs),
    /// Export stored evaluations: FlashInfer traces, or the winners as a JAX package.
    Export {
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Output directory (default: ksmith-traces, or ksmith-kernels for jax).
        #[arg(long)]
        out: Option<PathBuf>,
        /// jax: the TASK or SUITE directories whose kernels to export.
        paths: Vec<PathBuf>,
        /// jax: export this evaluation for its task instead of the fastest (repeatable).
        #[arg(long = "eval", value_name = "ID", conflicts_with = "best")]
        evals: Vec<i64>,
        /// jax: per task, the fastest PASSED evaluation on this machine (the default).
        #[arg(long)]
        best: bool,
        /// jax: the Python package's import name.
        #[arg(long, default_value = "ksmith_kernels")]
        name: String,
        /// jax: only solutions in this language (c, cuda, triton, pallas).
        #[arg(long, value_parser = parse_language)]
        language: Option<ksmith_task::Language>,
        /// jax: leave out tasks with nothing to export (listed) instead of writing nothing.
        #[arg(long)]
        skip_missing: bool,
    },
    /// Re-check an exported JAX package's kernels on fresh seeds and time them inside jax.jit,
    /// each kernel built and called in the judge's sandbox.
    VerifyExport(deploy::VerifyArgs),
    /// Cross-run memory: what made kernels faster in earlier runs, shown to later planners.
    #[command(subcommand)]
    Memory(memory::MemoryCmd),
    /// Compare search strategies offline on a pool of judged candidates (best speedup against
    /// LLM calls over many seeds); `simulate pool` writes a pool from the store.
    Simulate(search::SimulateArgs),
    /// Serve KernelSmith's judge, tuner, searches and store as MCP tools to a coding agent
    /// (stdio, or streamable HTTP on a loopback port with --http; docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// A web page over the store on a local port: runs and evaluations, a run watched live,
    /// its final judgement and report, reviews of interactive runs (docs/serve.md).
    Serve(serve::ServeArgs),
    /// Ray clusters: the --cluster one's devices (status), one on this machine (local), the
    /// managed Python with Ray (python).
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// What the store holds on disk (du) and the caches brought back to their caps (prune).
    #[command(subcommand)]
    Cache(cache::CacheCmd),
    /// What a cluster's device runs (not for people).
    #[command(subcommand, hide = true)]
    Worker(cluster::WorkerCmd),
}

#[derive(Subcommand)]
enum TaskCmd {
    /// Draft a task from a bare JAX reference with the test designer; written once it validates.
    New(agent::TaskNewArgs),
}

#[derive(Copy, Clone, ValueEnum)]
enum ExportFormat {
    /// FlashInfer Trace schema as flashinfer-bench 0.1.2 loads it (definitions/, solutions/,
    /// traces/*.jsonl: one trace per evaluation and workload; docs/trace.md).
    FlashinferTrace,
    /// An installable Python package calling the best kernels from JAX (docs/deploy.md).
    Jax,
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Exit(u8, anyhow::Error);

pub(crate) fn input(e: impl Into<anyhow::Error>) -> Exit {
    Exit(EXIT_INPUT, e.into())
}

pub(crate) fn env_err(e: impl Into<anyhow::Error>) -> Exit {
    Exit(EXIT_ENV, e.into())
}

/// A judge error with its exit code: the task's own code failing (its reference or a generator
/// raised, returned the wrong shape, never returned, ran out of memory) is bad input.
pub(crate) fn judge_err(e: ksmith_judge::JudgeError) -> Exit {
    match e {
        ksmith_judge::JudgeError::Task { .. } => input(e),
        e => env_err(e),
    }
}

/// Global options that act on some subcommands only: (option, subcommands whose help leaves
/// it out because it changes nothing there). They are still accepted everywhere, so a script
/// that passes them first (`ksmith --threads 4 SUBCOMMAND`) keeps working.
const INERT_GLOBALS: &[(&str, &[&str])] = &[
    ("python", &["show", "runs", "calls", "benches", "cache"]),
    (
        "threads",
        &[
            "show",
            "runs",
            "calls",
            "benches",
            "cache",
            "export",
            "validate",
            "verify-export",
        ],
    ),
];

/// The command line, with the global options hidden where they do nothing.
fn command() -> clap::Command {
    let mut cmd = Cli::command();
    // A subcommand that already has a global option keeps its own copy when the command is
    // built: a hidden copy goes in first. (Hiding the propagated copy after the build broke
    // `ksmith runs --help`: "a value is required for '--threads'".)
    for (arg, subs) in INERT_GLOBALS {
        let Some(global) = cmd.get_arguments().find(|a| a.get_id() == *arg).cloned() else {
            continue;
        };
        for sub in *subs {
            let hidden = global.clone().hide(true);
            cmd = cmd.mut_subcommand(*sub, |sc| sc.arg(hidden));
        }
    }
    cmd.build();
    negative_numbers(cmd)
}

/// Every option that takes a value accepts a negative number as that value, so `--timeout -1`
/// reaches the option's own range message instead of clap's "unexpected argument '-1'" (whose
/// tip, `-- -1`, would make -1 a positional argument).
fn negative_numbers(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.mut_args(|a| {
        if a.get_long().is_some() && a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    });
    for name in names {
        cmd = cmd.mut_subcommand(name, negative_numbers);
    }
    cmd
}

fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    progress::set_quiet(cli.quiet);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(Exit(code, e)) => {
            note!("error: {}", error_chain(&e));
            ExitCode::from(code)
        }
    }
}

/// An error and its causes on one line, `outer: cause: cause`, leaving out a cause whose text
/// the line already holds: a library error that prints its source in its own message (thiserror's
/// `"{path}: {source}"`) would otherwise read `X: io error: io error`.
pub(crate) fn error_chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(cli: Cli) -> Result<u8, Exit> {
    let threads = cli.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // Absolute, because the harness processes run in their own directories.
    let store_dir = std::path::absolute(&cli.store).unwrap_or_else(|_| cli.store.clone());
    // A device judges here, whatever its environment says (Ray sets RAY_ADDRESS in workers).
    let cluster = match cli.cmd {
        Cmd::Worker(_) => None,
        _ => cluster::spec(cli.cluster.clone(), cli.cluster_fingerprint.clone())?,
    };
    let ctx = Ctx {
        store_dir,
        python: cli.python.clone(),
        threads,
        threads_explicit: cli.threads.is_some(),
        cluster,
        connection: Default::default(),
        unsafe_no_sandbox: cli.unsafe_no_sandbox,
        reference_timeout: Duration::from_secs_f64(cli.reference_timeout),
        reference_memory: cli
            .reference_memory
            .map(|g| (g * (1u64 << 30) as f64) as u64),
    };
    // A command that records into a store it cannot write says so once, before any work.
    if writes_store(&cli.cmd, &ctx.store_dir) && !Store::is_writable(&ctx.store_dir) {
        return Err(read_only(&ctx.store_dir));
    }
    let code = run_cmd(&ctx, cli.cmd);
    cluster::say_last_events(&ctx);
    code
}

fn run_cmd(ctx: &Ctx, cmd: Cmd) -> Result<u8, Exit> {
    let ctx = ctx.clone();
    match cmd {
        Cmd::Eval {
            task,
            solutions,
            json,
            again,
            opts,
        } => match solutions.as_slice() {
            [one] => cmd_eval(&ctx, &task, one, json, again, &opts),
            many => cmd_eval_together(&ctx, &task, many, json, &opts),
        },
        Cmd::Bench(args) => bench::run(&ctx, &args),
        Cmd::Tune(args) => tune::run(&ctx, &args),
        Cmd::Optimize(args) => optimize::run(&ctx, &args),
        Cmd::Validate { path, no_run, json } => cmd_validate(&ctx, &path, no_run, json),
        Cmd::Hw { refresh, json, gpu } => cmd_hw(&ctx, refresh, json, gpu),
        Cmd::Show { id, json, write } => match id.parse::<i64>() {
            Ok(_) if write.is_some() => Err(input(anyhow!(
                "--write: only a run's snapshots can be written; {id} is an evaluation"
            ))),
            Ok(n) => cmd_show(&ctx, n, json),
            Err(_) => agent::cmd_show_run(&ctx, &id, json, write.as_deref()),
        },
        Cmd::Resume(args) => optimize::resume(&ctx, &args),
        Cmd::Runs { json } => agent::cmd_runs(&ctx, json),
        Cmd::Evals(args) => results::cmd_evals(&ctx, &args),
        Cmd::Benches { json } => results::cmd_benches(&ctx, json),
        Cmd::Compare(args) => results::cmd_compare(&ctx, &args),
        Cmd::Calls { run, full, json } => agent::cmd_calls(&ctx, &run, full, json),
        Cmd::Report(args) => run_report::cmd_report(&ctx, &args),
        Cmd::Task(TaskCmd::New(args)) => agent::cmd_task_new(&ctx, &args),
        Cmd::Extract(args) => extract::run(&ctx, &args),
        Cmd::Export {
            format: ExportFormat::FlashinferTrace,
            out,
            paths,
            evals,
            ..
        } => {
            if !paths.is_empty() || !evals.is_empty() {
                return Err(input(anyhow!(
                    "export --format flashinfer-trace exports every stored evaluation; it takes no TASK or --eval"
                )));
            }
            let out = out.unwrap_or_else(|| PathBuf::from("ksmith-traces"));
            let store = ctx.store_read()?;
            let s = ksmith_store::export_flashinfer(&store, &out).map_err(env_err)?;
            for why in &s.skipped {
                note!("ksmith: not exported: {}", term::one(why));
            }
            say!(
                "wrote {} definitions, {} solutions, {} workloads and {} traces to {} (FlashInfer-Bench's layout: definitions/OP_TYPE/NAME.json, ...)",
                s.definitions,
                s.solutions,
                s.workloads,
                s.traces,
                out.display()
            );
            Ok(0)
        }
        Cmd::Export {
            format: ExportFormat::Jax,
            out,
            paths,
            evals,
            name,
            language,
            skip_missing,
            ..
        } => {
            let out = out.unwrap_or_else(|| PathBuf::from("ksmith-kernels"));
            let what = deploy::ExportWhat {
                paths: &paths,
                evals: &evals,
                language,
                skip_missing,
            };
            deploy::export_jax(&ctx, &what, &out, &name)
        }
        Cmd::VerifyExport(args) => deploy::verify_export(&ctx, &args),
        Cmd::Memory(cmd) => memory::run(&ctx, &cmd),
        Cmd::Simulate(args) => search::simulate(&ctx, &args),
        Cmd::Cluster(cmd) => cluster::run(&ctx, &cmd),
        Cmd::Mcp(args) => mcp::run(&ctx, &args),
        Cmd::Cache(cmd) => cache::run(&ctx, &cmd),
        Cmd::Serve(args) => serve::run(&ctx, &args),
        Cmd::Worker(cmd) => cluster::run_worker(&ctx, &cmd),
    }
}

/// Whether `cmd` records anything into the store (evaluations, runs, caches, the roofline);
/// the others (`show`, `runs`, `calls`, `export`, `validate --no-run`) work on a read-only one.
fn writes_store(cmd: &Cmd, store_dir: &Path) -> bool {
    match cmd {
        Cmd::Show { .. }
        | Cmd::Runs { .. }
        | Cmd::Calls { .. }
        | Cmd::Report(_)
        | Cmd::Export { .. }
        | Cmd::Evals(_)
        | Cmd::Benches { .. }
        | Cmd::Compare(_)
        | Cmd::VerifyExport(_)
        | Cmd::Simulate(_)
        | Cmd::Cluster(_)
        // Browsing works on a read-only store; starting runs and answering reviews then fail
        // with the store's own error on the page.
        | Cmd::Serve(_) => false,
        Cmd::Validate { no_run, .. } => !no_run,
        Cmd::Memory(m) => m.writes_store(),
        Cmd::Cache(c) => c.writes_store(),
        // A missing roofline, or one of another format, is measured and written.
        Cmd::Hw { refresh, gpu, .. } => {
            *refresh || *gpu || hw::read_cached(&store_dir.join("hw.json")).is_err()
        }
        Cmd::Eval { .. }
        | Cmd::Bench(_)
        | Cmd::Optimize(_)
        | Cmd::Tune(_)
        | Cmd::Resume(_)
        | Cmd::Worker(_)
        | Cmd::Mcp(_)
        | Cmd::Task(_)
        | Cmd::Extract(_) => true,
    }
}

/// The one error for a write into a store this user cannot write (exit 2: the store given
/// is the wrong one for this command).
fn read_only(store_dir: &Path) -> Exit {
    input(anyhow!(
        "{}; this command records into the store: pass --store (or KSMITH_STORE) with a writable directory",
        ksmith_store::StoreError::ReadOnly {
            root: store_dir.to_path_buf()
        }
    ))
}

/// What every command needs to build a judge or open the store.
#[derive(Clone)]
pub(crate) struct Ctx {
    store_dir: PathBuf,
    python: Option<PathBuf>,
    threads: usize,
    /// `--threads` was given (else a cluster's devices use their own core count).
    threads_explicit: bool,
    /// Judge on this cluster instead of here.
    cluster: Option<cluster::ClusterSpec>,
    /// Its connection, made on first use.
    connection: cluster::Connection,
    unsafe_no_sandbox: bool,
    reference_timeout: Duration,
    reference_memory: Option<u64>,
}

impl Ctx {
    fn store(&self) -> Result<Store, Exit> {
        if !Store::is_writable(&self.store_dir) {
            return Err(read_only(&self.store_dir));
        }
        Store::open(&self.store_dir).map_err(env_err)
    }

    /// The store for a command that only reads it (works on a read-only store).
    pub(crate) fn store_read(&self) -> Result<Store, Exit> {
        Store::open_read(&self.store_dir).map_err(env_err)
    }

    /// The roofline, measured (alone on the device: under the scheduler's exclusive lease)
    /// when none is cached for this machine or the cached one is of another format.
    fn hardware(&self, compiler: &Compiler, refresh: bool) -> Result<hw::Hardware, Exit> {
        let path = self.store_dir.join("hw.json");
        // The scheduler only when measuring: a cached roofline needs no lock (nor a writable
        // store).
        let mut quiet = || -> Result<Option<Box<dyn std::any::Any>>, String> {
            note!(
                "ksmith: measuring this machine's roofline (cached in {})...",
                path.display()
            );
            match self.scheduler() {
                Some(s) => s
                    .acquire(Work::Roofline)
                    .map(|l| Some(Box::new(l) as Box<dyn std::any::Any>))
                    .map_err(|e| e.to_string()),
                None => Ok(None),
            }
        };
        let (hw, _) = hw::load_or_measure_quiet(&path, compiler, self.threads, refresh, &mut quiet)
            .map_err(env_err)?;
        Ok(hw)
    }

    /// The CPU's device scheduler, machine-wide (`DeviceScheduler::machine`: the lock files
    /// in `KSMITH_LOCK_DIR` or `/tmp/ksmith-locks`), shared by every judge of this process and
    /// with every other ksmith process on the machine, whatever its store or user; the store's
    /// `locks/` only when the machine's directory cannot be used.
    /// `KSMITH_LEASE_LOG=FILE` appends every lease's interval to FILE (see
    /// `DeviceScheduler::with_log`; tests check processes against each other with it).
    fn scheduler(&self) -> Option<Arc<DeviceScheduler>> {
        // KSMITH_DEVICE_LOCK=0 turns it off (the test suite, whose tests time side by side on
        // purpose; the scheduler has its own tests).
        if std::env::var_os("KSMITH_DEVICE_LOCK").is_some_and(|v| v == "0") {
            return None;
        }
        // Each judge may have its own: leases meet in the lock files, not in memory.
        let opened = DeviceScheduler::machine(Device::Cpu).or_else(|e| {
            note!("ksmith: {e}; timing is kept apart only from ksmith processes on this store");
            DeviceScheduler::open(&self.store_dir.join("locks"), Device::Cpu)
        });
        match opened {
            Ok(s) => Some(Arc::new(match std::env::var_os("KSMITH_LEASE_LOG") {
                Some(log) => s.with_log(PathBuf::from(log)),
                None => s,
            })),
            Err(e) => {
                note!("ksmith: {e}; timing is not kept apart from other ksmith processes");
                None
            }
        }
    }

    fn judge(&self, opts: &JudgeOpts) -> Result<Judge, Exit> {
        let mut config = JudgeConfig::new(self.store_dir.join("cache"), self.threads);
        config.call_timeout = Duration::from_secs_f64(opts.timeout);
        config.min_time = Duration::from_millis(opts.min_time_ms);
        config.timing = !opts.no_timing;
        config.flush = match opts.flush {
            FlushArg::Auto => Flush::Auto,
            FlushArg::Always => Flush::Always,
            FlushArg::Never => Flush::Never,
        };
        let base: u64 = if opts.fresh_seeds {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 % 1_000_000_000)
                .unwrap_or(7)
                + 1000
        } else {
            1
        };
        config.seeds = (0..opts.seeds).map(|i| base + i).collect();
        let Some(remote) = self.remote()? else {
            return self.judge_from(config);
        };
        // The devices judge: their roofline, their cores unless --threads says otherwise; no
        // local timing to keep apart.
        let id = remote.identity();
        if !self.threads_explicit {
            config.threads = id.environment.threads;
        }
        config.unsafe_no_sandbox = self.unsafe_no_sandbox;
        config.reference_timeout = self.reference_timeout;
        config.reference_memory = self.reference_memory;
        let compiler = Compiler::detect().map_err(env_err)?;
        let env = PythonEnv::resolve(self.python.as_deref(), &|m| note!("ksmith: {m}"))
            .map_err(env_err)?;
        let mut judge = Judge::new(config, env, compiler, id.hardware.clone());
        judge.set_remote(Some(Arc::new(remote)));
        Ok(judge)
    }

    /// A judge on this machine with `config` (the global options applied over it).
    fn judge_from(&self, mut config: JudgeConfig) -> Result<Judge, Exit> {
        let compiler = Compiler::detect().map_err(env_err)?;
        let env = PythonEnv::resolve(self.python.as_deref(), &|m| note!("ksmith: {m}"))
            .map_err(env_err)?;
        let scheduler = self.scheduler();
        // A first roofline measurement takes its own lease (see `hardware`).
        let hw = self.hardware(&compiler, false)?;
        config.unsafe_no_sandbox = self.unsafe_no_sandbox;
        config.reference_timeout = self.reference_timeout;
        config.reference_memory = self.reference_memory;
        let mut judge =
            Judge::new(config, env, compiler, hw).with_hw_cache(self.store_dir.join("hw.json"));
        judge.set_scheduler(scheduler);
        Ok(judge)
    }
}

/// An evaluator's error with its exit code: the key or the store failing is the environment;
/// the judge's errors map as [`judge_err`] says.
pub(crate) fn eval_err(e: ksmith_search::EvaluatorError) -> Exit {
    match e {
        ksmith_search::EvaluatorError::Judge(e) => judge_err(e),
        e => env_err(e),
    }
}

/// Loads a task, reporting every problem as `file: field: message`.
pub(crate) fn load_task(path: &Path) -> Result<Task, Exit> {
    Task::load(path).map_err(|p| input(anyhow!("invalid task {}:\n{p}", path.display())))
}

fn cmd_eval(
    ctx: &Ctx,
    task_dir: &Path,
    sol: &Path,
    json: bool,
    again: bool,
    opts: &JudgeOpts,
) -> Result<u8, Exit> {
    let task = load_task(task_dir)?;
    if !sol.exists() {
        return Err(input(anyhow!("solution {} does not exist", sol.display())));
    }
    let solution = Solution::load(sol, &task)
        .map_err(|p| input(anyhow!("invalid solution {}:\n{p}", sol.display())))?;
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(opts)?;
    let progress = progress::Progress::new(&format!("eval {}", task.name), 0);
    judge.set_stage_hook(Some(progress::judge_hook(&progress, !opts.no_timing, true)));
    let reuse = if again {
        ksmith_search::Reuse::Never
    } else {
        ksmith_search::Reuse::Stored
    };
    let evaluated = ksmith_search::Evaluator::new(&mut judge, &mut store)
        .with_reuse(reuse)
        .evaluate(&task, &solution, &ksmith_search::Purpose::Plain);
    progress.finish();
    let evaluated = match evaluated {
        // Built, but nothing here runs it: the build's facts, and the environment's exit code.
        Err(ksmith_search::EvaluatorError::Judge(ksmith_judge::JudgeError::Unavailable {
            backend,
            reason,
            why,
            built: Some(build),
        })) => {
            report::print_not_run(&task, &solution, backend, reason, &why, &build, json);
            return Ok(EXIT_ENV);
        }
        e => e.map_err(eval_err),
    };
    let ksmith_search::Evaluated { id, result, reused } = evaluated?;
    if json {
        term::json(&eval_json(id, reused, &result)?);
    } else {
        if reused {
            note!("ksmith: evaluation {id} reused from the store (same code, task, machine and judge settings); --again judges it anew");
        }
        report::print_result(&result, Some(id));
    }
    Ok(if result.status == Status::Passed {
        0
    } else {
        EXIT_FAILED
    })
}

/// One evaluation as `ksmith eval --json` prints it: the result with its store id and whether
/// it was reused from the store.
pub(crate) fn eval_json(
    id: i64,
    reused: bool,
    result: &ksmith_judge::EvalResult,
) -> Result<serde_json::Value, Exit> {
    let mut v = serde_json::to_value(result).map_err(env_err)?;
    v["id"] = serde_json::json!(id);
    v["reused"] = serde_json::json!(reused);
    Ok(v)
}

/// `ksmith eval TASK A B ...`: every solution checked, those that pass timed side by side.
fn cmd_eval_together(
    ctx: &Ctx,
    task_dir: &Path,
    sols: &[PathBuf],
    json: bool,
    opts: &JudgeOpts,
) -> Result<u8, Exit> {
    let task = load_task(task_dir)?;
    let mut solutions = Vec::new();
    for sol in sols {
        if !sol.exists() {
            return Err(input(anyhow!("solution {} does not exist", sol.display())));
        }
        solutions.push(
            Solution::load(sol, &task)
                .map_err(|p| input(anyhow!("invalid solution {}:\n{p}", sol.display())))?,
        );
    }
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(opts)?;
    let progress = progress::Progress::new(&format!("eval {}", task.name), 0);
    judge.set_stage_hook(Some(progress::judge_hook(&progress, !opts.no_timing, true)));
    let compared = compare_decided(&mut judge, &mut store, &task, &solutions);
    progress.finish();
    let (ids, cmp) = compared?;
    if json {
        term::json(&comparison_json(&ids, &cmp));
    } else {
        for (r, id) in cmp.results.iter().zip(&ids) {
            report::print_result(r, Some(*id));
            say!();
        }
        report::print_comparison(&cmp, &ids);
    }
    Ok(if cmp.results.iter().all(|r| r.status == Status::Passed) {
        0
    } else {
        EXIT_FAILED
    })
}

/// Solutions timed side by side and recorded, timed again with more rounds while undecided (a
/// wide interval across 1.00; `Evaluator::compare_decided`, the rule a search node's timing
/// against its parent uses too); the last comparison stands.
pub(crate) fn compare_decided(
    judge: &mut Judge,
    store: &mut Store,
    task: &Task,
    solutions: &[Solution],
) -> Result<(Vec<i64>, ksmith_judge::Comparison), Exit> {
    let d = ksmith_search::Evaluator::new(judge, store)
        .compare_decided(task, solutions, 0, |k| {
            note!(
                "ksmith: undecided (a wide interval across 1.00): timing again with {}x the rounds",
                1 << k
            )
        })
        .map_err(eval_err)?;
    Ok((d.ids, d.comparison))
}

/// A side-by-side comparison as `ksmith eval TASK A B --json` prints it: every result with its
/// id, the ratios, and every solution decided against the first (the incumbent).
pub(crate) fn comparison_json(ids: &[i64], cmp: &ksmith_judge::Comparison) -> serde_json::Value {
    let (winner, decided) =
        ksmith_judge::decide::choose_against(0, 0..cmp.results.len(), &cmp.versus);
    let decisions: Vec<serde_json::Value> = decided
        .iter()
        .map(|(i, d)| serde_json::json!({"solution": cmp.results[*i].solution, "index": i, "decision": d, "text": d.text()}))
        .collect();
    let results: Vec<serde_json::Value> = cmp
        .results
        .iter()
        .zip(ids)
        .map(|(r, id)| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["id"] = serde_json::json!(id);
            v
        })
        .collect();
    serde_json::json!({"results": results, "versus": cmp.versus,
        "decisions": decisions, "winner": winner})
}

pub(crate) fn task_dirs(path: &Path) -> Result<Vec<PathBuf>, Exit> {
    if path.join(ksmith_task::TASK_FILE_NAME).exists() {
        return Ok(vec![path.to_path_buf()]);
    }
    let rd = std::fs::read_dir(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(input)?;
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(ksmith_task::TASK_FILE_NAME).exists())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(input(anyhow!(
            "{}: not a task (no task.toml) and no task directories inside",
            path.display()
        )));
    }
    Ok(dirs)
}

pub(crate) use task_dirs as suite_tasks;

/// One task's validation, as `ksmith validate --json` lists it.
#[derive(serde::Serialize)]
pub(crate) struct TaskValidation {
    /// The task directory.
    pub path: String,
    /// No problems.
    pub valid: bool,
    /// Every problem as `file: field: message`.
    pub problems: Vec<String>,
}

/// What `ksmith validate --json` prints.
#[derive(serde::Serialize)]
pub(crate) struct ValidationReport {
    /// Each task checked.
    pub tasks: Vec<TaskValidation>,
    /// How many are valid.
    pub valid: usize,
    /// How many were checked.
    pub total: usize,
}

/// Validates the task at `path` (or every task of a suite); `each` sees every task as it is
/// done (the terminal prints it).
pub(crate) fn validate_path(
    ctx: &Ctx,
    path: &Path,
    no_run: bool,
    each: &mut dyn FnMut(&TaskValidation),
) -> Result<ValidationReport, Exit> {
    let dirs = task_dirs(path)?;
    let mut judge = None;
    let mut tasks = Vec::new();
    for dir in &dirs {
        let problems = validate_dir(ctx, &mut judge, dir, no_run)?;
        let t = TaskValidation {
            path: dir.display().to_string(),
            valid: problems.is_empty(),
            problems,
        };
        each(&t);
        tasks.push(t);
    }
    let valid = tasks.iter().filter(|t| t.valid).count();
    Ok(ValidationReport {
        total: tasks.len(),
        valid,
        tasks,
    })
}

fn cmd_validate(ctx: &Ctx, path: &Path, no_run: bool, json: bool) -> Result<u8, Exit> {
    let mut show = |t: &TaskValidation| {
        if json {
            return;
        }
        if t.valid {
            say!("ok    {}", t.path);
        } else {
            say!("FAIL  {}", t.path);
            for p in &t.problems {
                say!("  {}", term::continued(p, "    "));
            }
        }
    };
    let report = validate_path(ctx, path, no_run, &mut show)?;
    if json {
        term::json(&serde_json::to_string_pretty(&report).map_err(env_err)?);
    } else {
        say!("{} of {} tasks valid", report.valid, report.total);
    }
    Ok(if report.valid < report.total {
        EXIT_INPUT
    } else {
        0
    })
}

/// Every problem of one task directory as `file: field: message` (empty when valid); the
/// judge is made on first need and reused.
pub(crate) fn validate_dir(
    ctx: &Ctx,
    judge: &mut Option<Judge>,
    dir: &Path,
    no_run: bool,
) -> Result<Vec<String>, Exit> {
    let mut problems: Vec<String> = Vec::new();
    let task = match Task::load(dir) {
        Err(p) => return Ok(p.0.iter().map(|p| p.to_string()).collect()),
        Ok(task) => task,
    };
    for sol in bench::task_solutions(&task, None, None) {
        if let Err(p) = Solution::load(&sol, &task) {
            problems.extend(p.0.iter().map(|p| p.to_string()));
        }
    }
    if no_run {
        return Ok(problems);
    }
    if judge.is_none() {
        *judge = Some(ctx.judge(&default_opts())?);
    }
    let j = judge.as_mut().expect("just set");
    // The gpu set is checked statically only: its shapes are sized for a GPU
    // and a float64 reference of them on this CPU would take minutes.
    for set in [WorkloadSet::Cpu, WorkloadSet::Interpret] {
        let Some(t) = task.for_set(set) else { continue };
        let tag = match set {
            WorkloadSet::Cpu => String::new(),
            s => format!(" (set {})", s.name()),
        };
        match j.validate_task(&t) {
            Ok(list) => {
                let file = dir.join(ksmith_task::TASK_FILE_NAME);
                problems.extend(
                    list.into_iter()
                        .map(|(f, m)| format!("{}: {f}{tag}: {m}", file.display())),
                )
            }
            // The harness's messages about task code name the file themselves.
            // The harness's messages about task code name the file themselves. The task's
            // code failed as a whole (import, timeout): the next set would only repeat it.
            Err(ksmith_judge::JudgeError::Task { message, .. })
                if message.starts_with(&task.reference_path().display().to_string()) =>
            {
                problems.push(format!("{message}{tag}"));
                break;
            }
            Err(ksmith_judge::JudgeError::Task { message, .. }) => {
                problems.push(format!(
                    "{}: -{tag}: {message}",
                    task.reference_path().display()
                ));
                break;
            }
            Err(e) => return Err(env_err(e)),
        }
    }
    Ok(problems)
}

pub(crate) fn default_opts() -> JudgeOpts {
    JudgeOpts {
        timeout: 30.0,
        seeds: 3,
        fresh_seeds: false,
        no_timing: true,
        flush: FlushArg::Auto,
        min_time_ms: 100,
    }
}

fn cmd_hw(ctx: &Ctx, refresh: bool, json: bool, gpu: bool) -> Result<u8, Exit> {
    let compiler = Compiler::detect().map_err(env_err)?;
    let hw = ctx.hardware(&compiler, refresh)?;
    let gpu = if gpu {
        Some(ctx.judge(&default_opts())?.measure_gpu().map_err(env_err)?)
    } else {
        None
    };
    if json {
        let mut v = serde_json::to_value(&hw).map_err(env_err)?;
        if let Some(g) = &gpu {
            v["gpu"] = serde_json::to_value(g).map_err(env_err)?;
        }
        let iso = ksmith_sandbox::isolation();
        v["isolation"] = serde_json::json!({
            "complete": iso.complete(),
            "landlock_abi": iso.landlock_abi,
            "layers": iso.layers().iter().map(|(n, on, what)| serde_json::json!({"layer": n, "active": on, "stops": what})).collect::<Vec<_>>(),
        });
        term::json(&serde_json::to_string_pretty(&v).map_err(env_err)?);
    } else {
        report::print_hw(&hw);
        if let Some(g) = gpu {
            say!(
                "GPU {}: copy {:.0} GB/s, matmul bf16 {:.0} TFLOP/s, fp32 {:.0} TFLOP/s (measured with XLA)",
                g.device, g.copy_gbps, g.matmul_bf16_tflops, g.matmul_fp32_tflops
            );
        }
    }
    Ok(0)
}

/// A stored evaluation as `ksmith show ID --json` prints it.
pub(crate) fn stored_eval_json(ev: &ksmith_store::StoredEval) -> Result<serde_json::Value, Exit> {
    let mut v = serde_json::to_value(&ev.result).map_err(env_err)?;
    v["id"] = serde_json::json!(ev.id);
    v["created_at"] = serde_json::json!(ev.created_at);
    Ok(v)
}

fn cmd_show(ctx: &Ctx, id: i64, json: bool) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    let ev = store.get(id).map_err(env_err)?.ok_or_else(|| {
        input(anyhow!(
            "no evaluation with id {id} in {}",
            ctx.store_dir.display()
        ))
    })?;
    if json {
        term::json(&stored_eval_json(&ev)?);
    } else {
        say!("evaluation {} recorded {}", ev.id, ev.created_at);
        // What it was made for, as `evals` lists it.
        let owners = store.owners(ev.id).map_err(env_err)?;
        if !owners.is_empty() {
            let of: Vec<String> = owners
                .iter()
                .map(|o| match o {
                    ksmith_store::Owner::Bench { item, .. } => {
                        format!("{} (item {})", o.label(), term::one(item))
                    }
                    _ => term::one(&o.label()).into_owned(),
                })
                .collect();
            say!("  made for: {}", of.join(", "));
        }
        report::print_result(&ev.result, None);
        for (name, hash) in &ev.sources {
            say!(
                "  source {}: artifact {}",
                term::one(name),
                &hash[..hash.len().min(16)]
            );
        }
    }
    Ok(0)
}
