//! `ksmith extract FILE.py:FUNCTION`: from a user's jitted JAX function to a suite of tasks.
//!
//! The harness's `extract` module (in the managed Python) traces the function, splits its
//! program into parts as XLA fuses them, times each part re-jitted alone on its traced shapes,
//! and writes a task directory for each of the top ones. Here every written task goes through
//! the real `ksmith validate`; a task that fails is removed and reported. The summary says what
//! share of the program's measured time the written tasks cover (docs/extract.md).

use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_harness::PythonEnv;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Arguments of `ksmith extract`.
#[derive(clap::Args)]
pub(crate) struct ExtractArgs {
    /// The program as FILE.py:FUNCTION; the file also defines `FUNCTION_example()` or
    /// `example_inputs()` returning the argument tuple (or give --example).
    pub target: String,
    /// Sample inputs as dtype[dims] items, e.g. 'f32[512,256],f32[256]' (random normal floats),
    /// instead of the file's example builder.
    #[arg(long)]
    pub example: Option<String>,
    /// How many of the slowest parts to write as tasks.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub top: u32,
    /// Suite directory to write (default ./FUNCTION-tasks); must not hold tasks already.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout (it is also written to OUT/extract.json).
    #[arg(long)]
    pub json: bool,
    /// Instead of extracting: run the function as given and with the kernels of EXPORT (the
    /// directory `ksmith export --format jax` wrote from the suite in --out) substituted for
    /// the parts that became tasks, and report the end-to-end speedup with its interval and
    /// the per-part breakdown.
    #[arg(long, value_name = "EXPORT")]
    pub measure: Option<PathBuf>,
    /// Timing rounds for --measure (program and parts alternate within each round).
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u32).range(5..=1000))]
    pub rounds: u32,
}

/// A median and its interval, in seconds or as a ratio.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Timed {
    pub median_s: f64,
    pub low_s: f64,
    pub high_s: f64,
}

/// One task of the suite in `--measure`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct MeasuredPart {
    pub task: String,
    /// Whether its kernel stood in for the part.
    pub substituted: bool,
    /// Why not (not exported, outside the validated shapes, unavailable...).
    pub why_not: Option<String>,
    /// The part re-jitted alone, plain and through the kernel; speedup per round, paired.
    pub plain: Option<Timed>,
    pub kernel: Option<Timed>,
    pub speedup: Option<Timed>,
}

/// What `--measure` reports.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Measured {
    pub program: ProgramName,
    /// Plain `jax.jit` of the function, and the same with the kernels substituted, timed in
    /// the same rounds; the speedup is the median of the per-round ratios with its interval.
    pub plain: Timed,
    pub substituted: Timed,
    pub speedup: Timed,
    pub rounds: u32,
    /// Largest absolute difference of the substituted program's outputs from the plain one's,
    /// and the plain outputs' RMS (its scale).
    pub max_abs_diff: f64,
    pub output_rms: f64,
    pub parts: Vec<MeasuredPart>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ProgramName {
    pub file: String,
    pub function: String,
}

/// The whole program's time on this machine (plain `jax.jit`, the sample inputs).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ProgramTime {
    pub file: String,
    pub function: String,
    /// Median seconds per call over the rounds.
    pub median_s: f64,
    /// The rounds' interval around the median (2nd and 8th of 9 order statistics).
    pub low_s: f64,
    pub high_s: f64,
}

/// One part of the program (an anchor such as a matmul, or a fusion of the equations between).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PartRow {
    /// The task directory written for it (None: not written; `skipped` says why).
    pub task: Option<String>,
    pub kind: String,
    /// Its non-layout primitives, in program order.
    pub ops: String,
    /// (shape, dtype) of each input and output.
    pub inputs: Vec<(Vec<u64>, String)>,
    pub outputs: Vec<(Vec<u64>, String)>,
    /// Re-jitted alone on the traced values: median seconds per call and its interval.
    pub median_s: Option<f64>,
    pub low_s: Option<f64>,
    pub high_s: Option<f64>,
    /// Why it has no task (layout only, too small, unsupported primitive, failed validation...).
    pub skipped: Option<String>,
}

/// What the harness reports, plus the coverage computed here.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// The --example given to the extraction (reused by --measure).
    #[serde(default)]
    pub example: Option<String>,
    pub program: ProgramTime,
    /// One call of a trivial jitted function: parts below 1.5x this are not worth a kernel.
    pub jit_call_floor_s: f64,
    /// Control-flow primitives left inside parts (scan, while, cond), if any.
    pub control_flow: Vec<String>,
    /// Instruction counts of the compiled program's entry computation by opcode (fusions by
    /// kind): what XLA made of the function, beside the parts found in the jaxpr.
    #[serde(default)]
    pub xla_ops: std::collections::BTreeMap<String, u64>,
    pub parts: Vec<PartRow>,
    /// Sum of the written tasks' part times over the program's median time.
    #[serde(default)]
    pub covered_share: f64,
    /// Sum of every timed part's time over the program's median time (above 1 where XLA fuses
    /// across parts, below where it leaves work outside them).
    #[serde(default)]
    pub parts_share: f64,
    /// Sum of the written tasks' part times over the sum of every timed part's time: the share
    /// of the program's work (as its parts measure it) that the suite covers.
    #[serde(default)]
    pub covered_of_parts: f64,
}

fn split_target(target: &str) -> Result<(PathBuf, String), Exit> {
    let (file, function) = target.rsplit_once(':').ok_or_else(|| {
        input(anyhow!(
            "{target}: expected FILE.py:FUNCTION (e.g. examples/programs/mlp_layernorm.py:mlp_block)"
        ))
    })?;
    let ident = !function.is_empty()
        && !function.starts_with(|c: char| c.is_ascii_digit())
        && function
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(input(anyhow!(
            "{target}: `{function}` is not a Python function name"
        )));
    }
    let file = PathBuf::from(file);
    if !file.is_file() {
        return Err(input(anyhow!("{}: no such file", file.display())));
    }
    Ok((file, function.to_string()))
}

fn has_tasks(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().join(ksmith_task::TASK_FILE_NAME).is_file())
    })
}

/// Runs the harness's extraction; exit 2 of the harness (the user's file, function or
/// example is at fault, or nothing is worth a kernel) is an input error with its message.
fn run_harness<T: serde::de::DeserializeOwned>(
    ctx: &Ctx,
    file: &Path,
    function: &str,
    example: Option<&str>,
    extra: &[std::ffi::OsString],
) -> Result<T, Exit> {
    let env =
        PythonEnv::resolve(ctx.python.as_deref(), &|m| note!("ksmith: {m}")).map_err(env_err)?;
    let mut cmd = std::process::Command::new(&env.python);
    cmd.args(["-s", "-B", "-m", "ksmith_harness.extract", "--file"])
        .arg(file)
        .args(["--function", function])
        .args(extra)
        .current_dir(&env.harness_dir)
        .env("PYTHONPATH", python_path(&env.harness_dir));
    if let Some(e) = example {
        cmd.args(["--example", e]);
    }
    let output = cmd
        .output()
        .map_err(|e| env_err(anyhow!("running {}: {e}", env.python.display())))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(2) => {
            let msg = stderr.trim().lines().last().unwrap_or("extraction failed");
            return Err(input(anyhow!("{msg}")));
        }
        _ => {
            let tail: Vec<&str> = stderr.trim().lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(env_err(anyhow!(
                "{}:{function}: the extraction failed ({}):\n{}",
                file.display(),
                output.status,
                tail.join("\n")
            )));
        }
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.trim().lines().last().unwrap_or("");
    serde_json::from_str(line).map_err(|e| {
        env_err(anyhow!(
            "the extraction's summary is not what ksmith expects: {e}"
        ))
    })
}

/// The harness first, then the user's own `PYTHONPATH` (their program may import from it).
fn python_path(harness: &Path) -> std::ffi::OsString {
    let mut paths = vec![harness.to_path_buf()];
    if let Some(user) = std::env::var_os("PYTHONPATH") {
        paths.extend(std::env::split_paths(&user));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| harness.as_os_str().to_owned())
}

fn micros(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// `ksmith extract`.
pub(crate) fn run(ctx: &Ctx, args: &ExtractArgs) -> Result<u8, Exit> {
    let (file, function) = split_target(&args.target)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{function}-tasks")));
    if let Some(export) = &args.measure {
        return measure(ctx, args, &file, &function, &out, export);
    }
    if has_tasks(&out) {
        return Err(input(anyhow!(
            "{}: --out already holds tasks; extract into a new directory",
            out.display()
        )));
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| input(anyhow!("{}: cannot create: {e}", out.display())))?;
    let abs_file = std::path::absolute(&file).map_err(env_err)?;
    let abs_out = std::path::absolute(&out).map_err(env_err)?;
    note!(
        "ksmith: tracing {}:{function}, timing its parts...",
        file.display()
    );
    let extra: Vec<std::ffi::OsString> = vec![
        "--out".into(),
        abs_out.clone().into(),
        "--top".into(),
        args.top.to_string().into(),
    ];
    let mut summary: Summary =
        run_harness(ctx, &abs_file, &function, args.example.as_deref(), &extra)?;

    // Every written task through the real validation; what fails is removed and reported.
    let mut judge = None;
    for part in summary.parts.iter_mut() {
        let Some(task) = part.task.clone() else {
            continue;
        };
        let dir = abs_out.join(&task);
        note!("ksmith: validating {task}...");
        let problems = crate::validate_dir(ctx, &mut judge, &dir, false)?;
        if !problems.is_empty() {
            let shown = problems
                .iter()
                .map(|p| p.replace(&dir.display().to_string(), &task))
                .collect::<Vec<_>>()
                .join("; ");
            let _ = std::fs::remove_dir_all(&dir);
            part.task = None;
            part.skipped = Some(format!("failed ksmith validate: {shown}"));
        }
    }
    let total = summary.program.median_s.max(1e-12);
    summary.covered_share = summary
        .parts
        .iter()
        .filter(|p| p.task.is_some())
        .filter_map(|p| p.median_s)
        .sum::<f64>()
        / total;
    summary.parts_share = summary.parts.iter().filter_map(|p| p.median_s).sum::<f64>() / total;
    summary.covered_of_parts = if summary.parts_share > 0.0 {
        summary.covered_share / summary.parts_share
    } else {
        0.0
    };
    let text = serde_json::to_string_pretty(&summary).map_err(env_err)?;
    std::fs::write(abs_out.join("extract.json"), &text)
        .map_err(|e| env_err(anyhow!("{}: {e}", abs_out.join("extract.json").display())))?;
    let written = summary.parts.iter().filter(|p| p.task.is_some()).count();
    if args.json {
        crate::term::json(&text);
    } else {
        print_summary(&summary, &out);
    }
    if written == 0 {
        let reasons: Vec<String> = summary
            .parts
            .iter()
            .filter_map(|p| {
                p.skipped
                    .as_ref()
                    .map(|s| format!("{} ({}): {s}", p.kind, p.ops))
            })
            .take(5)
            .collect();
        let _ = std::fs::remove_file(abs_out.join("extract.json"));
        let _ = std::fs::remove_dir(&abs_out);
        return Err(input(anyhow!(
            "{}:{function}: no op worth a kernel{}",
            file.display(),
            if reasons.is_empty() {
                String::new()
            } else {
                format!(":\n  {}", reasons.join("\n  "))
            }
        )));
    }
    Ok(0)
}

/// `ksmith extract --measure EXPORT`.
fn measure(
    ctx: &Ctx,
    args: &ExtractArgs,
    file: &Path,
    function: &str,
    suite: &Path,
    export: &Path,
) -> Result<u8, Exit> {
    let summary_path = suite.join("extract.json");
    let text = std::fs::read_to_string(&summary_path).map_err(|e| {
        input(anyhow!(
            "{}: cannot read ({e}); --measure needs the suite written by ksmith extract (give it with --out)",
            summary_path.display()
        ))
    })?;
    let summary: Summary = serde_json::from_str(&text)
        .map_err(|e| input(anyhow!("{}: {e}", summary_path.display())))?;
    let export = std::path::absolute(export).map_err(env_err)?;
    let package = crate::deploy::package_in(&export)?;
    let example = args.example.clone().or(summary.example);
    let abs_file = std::path::absolute(file).map_err(env_err)?;
    let extra: Vec<std::ffi::OsString> = vec![
        "--measure".into(),
        "--suite".into(),
        std::path::absolute(suite).map_err(env_err)?.into(),
        "--export".into(),
        export.clone().into(),
        "--package".into(),
        package.into(),
        "--rounds".into(),
        args.rounds.to_string().into(),
    ];
    note!(
        "ksmith: timing {}:{function} as given and with the kernels of {} substituted...",
        file.display(),
        export.display()
    );
    let m: Measured = run_harness(ctx, &abs_file, function, example.as_deref(), &extra)?;
    if args.json {
        crate::term::json(&serde_json::to_string_pretty(&m).map_err(env_err)?);
        return Ok(0);
    }
    let t = |x: &Timed| {
        format!(
            "{} [{} .. {}]",
            micros(x.median_s),
            micros(x.low_s),
            micros(x.high_s)
        )
    };
    let r = |x: &Timed| format!("{:.2}x [{:.2}x .. {:.2}x]", x.median_s, x.low_s, x.high_s);
    say!("{}:{}", m.program.file, m.program.function);
    say!("  plain jax.jit:           {}", t(&m.plain));
    say!("  with kernels substituted: {}", t(&m.substituted));
    say!(
        "  end-to-end speedup:       {} (median of {} paired rounds, ~95% interval)",
        r(&m.speedup),
        m.rounds
    );
    say!(
        "  outputs: max |substituted - plain| = {:.3e} (output RMS {:.3e})",
        m.max_abs_diff,
        m.output_rms
    );
    say!(
        "{:<28} {:>26} {:>26} {:>24}",
        "task",
        "plain",
        "kernel",
        "speedup"
    );
    for p in &m.parts {
        match (&p.plain, &p.kernel, &p.speedup) {
            (Some(a), Some(b), Some(c)) => {
                say!("{:<28} {:>26} {:>26} {:>24}", p.task, t(a), t(b), r(c))
            }
            _ => say!(
                "{:<28} not substituted: {}",
                p.task,
                p.why_not.as_deref().unwrap_or("")
            ),
        }
    }
    Ok(0)
}

fn print_summary(s: &Summary, out: &Path) {
    say!(
        "{}:{}  plain jax.jit: {} per call [{} .. {}]",
        s.program.file,
        s.program.function,
        micros(s.program.median_s),
        micros(s.program.low_s),
        micros(s.program.high_s)
    );
    if !s.xla_ops.is_empty() {
        let ops: Vec<String> = s.xla_ops.iter().map(|(k, n)| format!("{n} {k}")).collect();
        say!(
            "XLA compiled it into {}; the jaxpr splits into {} parts",
            ops.join(", "),
            s.parts.len()
        );
    }
    let total = s.program.median_s.max(1e-12);
    say!(
        "{:<4} {:<26} {:<12} {:>10} {:>21} {:>6}  ops",
        "rank",
        "task",
        "kind",
        "time",
        "interval",
        "share"
    );
    for (i, p) in s.parts.iter().enumerate() {
        let Some(t) = p.median_s else { continue };
        say!(
            "{:<4} {:<26} {:<12} {:>10} {:>21} {:>5.1}%  {}",
            i + 1,
            p.task.as_deref().unwrap_or("-"),
            p.kind,
            micros(t),
            format!(
                "[{} .. {}]",
                micros(p.low_s.unwrap_or(t)),
                micros(p.high_s.unwrap_or(t))
            ),
            100.0 * t / total,
            p.ops
        );
        if let Some(why) = &p.skipped {
            if p.task.is_none() {
                say!("       not written: {why}");
            }
        }
    }
    let untimed: Vec<&PartRow> = s.parts.iter().filter(|p| p.median_s.is_none()).collect();
    if !untimed.is_empty() {
        say!("{} parts not timed:", untimed.len());
        for p in untimed {
            say!(
                "  {} ({}): {}",
                p.kind,
                p.ops,
                p.skipped.as_deref().unwrap_or("")
            );
        }
    }
    let written = s.parts.iter().filter(|p| p.task.is_some()).count();
    if written == 0 {
        return;
    }
    say!(
        "{written} tasks written to {} (each passed ksmith validate)",
        out.display()
    );
    say!(
        "coverage: the written tasks take {:.1}% of the time of all the program's parts (each re-jitted alone); that is {:.1}% of the whole program's median time, which all parts together take {:.1}% of",
        100.0 * s.covered_of_parts,
        100.0 * s.covered_share,
        100.0 * s.parts_share
    );
    if !s.control_flow.is_empty() {
        say!(
            "note: the program has control flow ({}) that no task covers",
            s.control_flow.join(", ")
        );
    }
    say!(
        "next: ksmith optimize {} ...   then ksmith export --format jax",
        out.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_needs_a_file_and_a_function_name() {
        assert!(split_target("nofile.py").is_err());
        assert!(split_target("Cargo.toml:1abc").is_err());
        assert!(split_target("/nonexistent/x.py:f").is_err());
    }
}
