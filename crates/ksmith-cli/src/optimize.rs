//! `ksmith optimize`: the main job. Without an LLM it evaluates the task's seed solution,
//! autotunes it, re-validates the winner on fresh seeds and writes it with a short report.

use crate::run_args::{OptimizeArgs, ResumeArgs};
use crate::tune::{self, latency_ms, tuned_variant, Confirmed, Outcome};
use crate::{env_err, input, load_task, Ctx, Exit};
use anyhow::anyhow;
use ksmith_judge::EvalResult;
use ksmith_search::finalize::{self, Recheck};
use ksmith_search::Evaluator;
use ksmith_task::escape::markdown_cell;
use ksmith_task::{Solution, Task};
use std::path::PathBuf;
use std::time::Instant;

fn start_solution(task: &Task, from: Option<&PathBuf>) -> Result<PathBuf, Exit> {
    if let Some(p) = from {
        return Ok(p.clone());
    }
    ["seed", "fast"]
        .iter()
        .find_map(|n| Solution::find(&task.dir, n))
        .ok_or_else(|| {
            input(anyhow!(
                "{}: no solutions/seed or solutions/fast to start from; pass --from SOLUTION",
                task.dir.display()
            ))
        })
}

struct Line {
    what: String,
    status: String,
    latency: Option<f64>,
    speedup: Option<f64>,
    /// `87%`, `125%!` when a workload beat its floor (`Performance::roofline_cell`).
    roofline: Option<String>,
}

/// A line of the report; `what` may hold a tunable's name from the solution (escaped where
/// shown: `print_report`, `report_markdown`).
fn line(what: &str, r: &EvalResult) -> Line {
    Line {
        what: what.to_string(),
        status: match &r.reason {
            Some(reason) => format!("{} ({reason})", r.status),
            None => r.status.to_string(),
        },
        latency: latency_ms(r),
        speedup: r.performance.as_ref().map(|p| p.speedup),
        roofline: r.performance.as_ref().map(|p| p.roofline_cell()),
    }
}

/// A line for a configuration, with the speedup of both timings when it was re-timed.
fn timed_line(what: &str, config: Option<&ksmith_tune::Config>, o: &Outcome) -> Option<Line> {
    let r = match config {
        None => &o.default_result,
        Some(c) => &o.rows.iter().find(|r| &r.config == c)?.result,
    };
    let mut l = line(what, r);
    if let Some(c) = o.confirmed.iter().find(|k| k.config.as_ref() == config) {
        l.speedup = Confirmed::cost(c).map(|c| 1.0 / c).or(l.speedup);
        l.what.push_str(" (2 timings)");
    }
    Some(l)
}

/// What optimizing one task achieved (for the suite summary).
struct TaskSummary {
    task: String,
    /// Speedup vs XLA of the untuned seed and of the winner (both timings when re-timed).
    untuned: Option<f64>,
    best: Option<f64>,
    /// The winning configuration; None when the untuned seed stayed best.
    config: Option<String>,
    /// Why nothing was written, if so.
    failure: Option<String>,
}

pub(crate) fn run(ctx: &Ctx, args: &OptimizeArgs) -> Result<u8, Exit> {
    if let Some(kind) = crate::search::requested(args)? {
        return crate::search::start(ctx, args, kind);
    }
    if args.agent.interactive || args.agent.review.is_some() {
        return Err(input(anyhow!(
            "--interactive needs --model PROVIDER:MODEL (an agent run)"
        )));
    }
    let dirs = crate::suite_tasks(&args.task)?;
    // The tuner's strategy is checked before anything is judged.
    let tuner = args.tuner()?;
    say!(
        "No --model given: optimizing by autotuning the seed solution only ({} search, budget {}; add --model PROVIDER:MODEL for the LLM agents).",
        tuner.strategy,
        tuner.budget
    );
    if dirs.len() == 1 && args.task.join(ksmith_task::TASK_FILE_NAME).exists() {
        let out = args.out.clone();
        let s = optimize_task(ctx, &dirs[0], args, out)?;
        return Ok(if s.failure.is_some() { 1 } else { 0 });
    }
    // A suite: every task in turn; a task that cannot be tuned is reported, not fatal.
    let started = Instant::now();
    let root = args
        .out
        .clone()
        .unwrap_or_else(|| ctx.store_dir.join("optimized"));
    let mut summaries = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        note!(
            "ksmith: [{}/{}] {}",
            i + 1,
            dirs.len(),
            crate::term::one(&name)
        );
        match optimize_task(ctx, dir, args, Some(root.join(&name))) {
            Ok(s) => summaries.push(s),
            Err(e) if e.0 == crate::EXIT_INPUT => summaries.push(TaskSummary {
                task: name,
                untuned: None,
                best: None,
                config: None,
                failure: Some(crate::error_chain(&e.1)),
            }),
            Err(e) => return Err(e),
        }
    }
    let md = suite_summary(&summaries, started.elapsed().as_secs_f64());
    say!("{md}");
    std::fs::create_dir_all(&root).map_err(env_err)?;
    std::fs::write(root.join("summary.md"), &md).map_err(env_err)?;
    say!("summary written to {}", root.join("summary.md").display());
    Ok(if summaries.iter().any(|s| s.failure.is_some()) {
        1
    } else {
        0
    })
}

/// Markdown table of a suite run: untuned vs tuned per task, the geomean gain, and the tasks
/// where tuning found nothing better than the seed's defaults.
fn suite_summary(summaries: &[TaskSummary], seconds: f64) -> String {
    let mut s = String::from("| task | seed speedup vs XLA | tuned speedup vs XLA | tuned / untuned | winner |\n| --- | --- | --- | --- | --- |\n");
    let mut gains = Vec::new();
    let mut nothing = Vec::new();
    for t in summaries {
        let gain = match (t.untuned, t.best) {
            (Some(u), Some(b)) => Some(b / u),
            _ => None,
        };
        gains.extend(gain);
        if t.failure.is_none() && t.config.is_none() {
            nothing.push(t.task.as_str());
        }
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            markdown_cell(&t.task),
            fmt(t.untuned, |v| format!("{v:.2}x")),
            fmt(t.best, |v| format!("{v:.2}x")),
            fmt(gain, |v| format!("{v:.2}x")),
            match (&t.failure, &t.config) {
                (Some(f), _) => format!(
                    "not written: {}",
                    markdown_cell(f.lines().next().unwrap_or(""))
                ),
                (None, Some(c)) => markdown_cell(c).into_owned(),
                (None, None) => "untuned seed".into(),
            }
        ));
    }
    s.push_str(&format!(
        "\n{} tasks in {:.0} s; geomean tuned / untuned over {} tasks: {:.3}x; tuning found nothing better than the seed's defaults on {}: {}\n",
        summaries.len(),
        seconds,
        gains.len(),
        ksmith_judge::geomean(gains.iter().copied()),
        nothing.len(),
        if nothing.is_empty() { "-".into() } else { markdown_cell(&nothing.join(", ")).into_owned() }
    ));
    s
}

fn optimize_task(
    ctx: &Ctx,
    task_dir: &std::path::Path,
    args: &OptimizeArgs,
    out: Option<PathBuf>,
) -> Result<TaskSummary, Exit> {
    let started = Instant::now();
    let task = load_task(task_dir)?;
    let path = start_solution(&task, args.from.as_ref())?;
    let solution = Solution::load(&path, &task)
        .map_err(|e| input(anyhow!("invalid solution {}:\n{e}", path.display())))?;
    let tuner = args.tuner()?;
    let outcome = tune::search(ctx, &task, &solution, &tuner, &args.opts)?;
    let xla = outcome
        .default_result
        .performance
        .as_ref()
        .map(|p| p.baseline_ms());
    let mut lines: Vec<Line> = timed_line("seed (untuned)", None, &outcome)
        .into_iter()
        .collect();
    let mut summary = TaskSummary {
        task: task.name.clone(),
        untuned: lines.first().and_then(|l| l.speedup),
        best: outcome.best.as_ref().map(|(_, c)| 1.0 / c),
        config: None,
        failure: None,
    };
    // The winner: the best tuned configuration if it beats the untuned seed, else the seed.
    let (best, config) = match &outcome.best {
        Some((Some(c), _)) => {
            let label = format!("tuned [{}]", ksmith_tune::label(c));
            lines.extend(timed_line(&label, Some(c), &outcome));
            summary.config = Some(ksmith_tune::label(c));
            (tuned_variant(&solution, c), Some(c.clone()))
        }
        Some((None, _)) => (solution.clone(), None),
        None => {
            print_report(&lines, xla);
            say!("nothing passed; no solution written");
            summary.failure = Some("nothing passed".into());
            return Ok(summary);
        }
    };
    // Re-validate the winner on seeds it has never seen.
    let progress = crate::progress::Progress::new(&format!("optimize {}", task.name), 0);
    progress.line(&format!(
        "re-validating the winner ({}) on fresh seeds",
        config
            .as_ref()
            .map(|c| crate::term::one(&ksmith_tune::label(c)).into_owned())
            .unwrap_or_else(|| "the untuned seed".into())
    ));
    let mut fresh = args.opts.clone();
    fresh.fresh_seeds = true;
    fresh.no_timing = true;
    let mut judge = ctx.judge(&fresh)?;
    judge.set_stage_hook(Some(crate::progress::judge_hook(&progress, false, false)));
    let mut store = ctx.store()?;
    let again = finalize::recheck(
        &mut Evaluator::new(&mut judge, &mut store),
        &task,
        std::slice::from_ref(&best),
        Recheck::CorrectnessOnly,
    )
    .map_err(crate::eval_err);
    progress.finish();
    let again = again?;
    let check = &again.results[0];
    lines.push(line("winner on fresh seeds (correctness)", check));
    print_report(&lines, xla);
    if finalize::choose_winner(&again, Recheck::CorrectnessOnly, 0, |_| true).is_none() {
        say!(
            "the winner failed on fresh seeds ({}); no solution written",
            check.status
        );
        summary.failure = Some(format!("failed on fresh seeds ({})", check.status));
        return Ok(summary);
    }
    let out = out.unwrap_or_else(|| ctx.store_dir.join("optimized").join(&task.name));
    progress.line(&format!("writing {}", out.display()));
    tune::write_tuned(&solution, config.as_ref(), &out, "optimize").map_err(env_err)?;
    std::fs::write(
        out.join("report.md"),
        report_markdown(&task.name, &lines, xla),
    )
    .map_err(env_err)?;
    say!(
        "best solution and report written to {} ({:.1} s)",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(summary)
}

fn fmt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map(f).unwrap_or_else(|| "-".into())
}

fn print_report(lines: &[Line], xla: Option<f64>) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "candidate",
        "status",
        "latency ms (geomean)",
        "speedup vs XLA",
        "% roofline",
    ]);
    t.add_row(vec![
        "XLA baseline (jax.jit)".into(),
        "-".into(),
        fmt(xla, |v| format!("{v:.3}")),
        "1.00x".into(),
        "-".into(),
    ]);
    for l in lines {
        t.add_row(vec![
            crate::term::one(&l.what).into_owned(),
            crate::term::one(&l.status).into_owned(),
            fmt(l.latency, |v| format!("{v:.3}")),
            fmt(l.speedup, |v| format!("{v:.2}x")),
            l.roofline.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    say!("{t}");
}

fn report_markdown(task: &str, lines: &[Line], xla: Option<f64>) -> String {
    let mut s = format!("# ksmith optimize: {}\n\n| candidate | status | latency ms (geomean) | speedup vs XLA | % roofline |\n| --- | --- | --- | --- | --- |\n", markdown_cell(task));
    s.push_str(&format!(
        "| XLA baseline (jax.jit) | - | {} | 1.00x | - |\n",
        fmt(xla, |v| format!("{v:.3}"))
    ));
    for l in lines {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            markdown_cell(&l.what),
            markdown_cell(&l.status),
            fmt(l.latency, |v| format!("{v:.3}")),
            fmt(l.speedup, |v| format!("{v:.2}x")),
            l.roofline.clone().unwrap_or_else(|| "-".into())
        ));
    }
    s.push_str("\nLLM-driven rewriting was off (no model configured); the result comes from autotuning the seed.\n");
    s
}

/// `ksmith resume RUN`: every agent run is a graph search (`optimize --model` without
/// `--strategy` is the `loop` strategy); a run stored by the serial loop of an earlier version
/// can be shown and reported, not resumed.
pub(crate) fn resume(ctx: &Ctx, args: &ResumeArgs) -> Result<u8, Exit> {
    if crate::search::is_search_run(ctx, &args.run)? {
        return crate::search::resume(ctx, &args.run, &args.budget, None, args.review);
    }
    let known = ctx.store_read()?.run(&args.run).map_err(env_err)?.is_some();
    Err(input(if known {
        anyhow!(
            "run {} was made by the serial agent loop of an earlier ksmith, which agent runs no longer use; `ksmith show {}` and `ksmith report {}` still read it, and `ksmith optimize TASK --model ... --from DIR` starts again from its written kernel",
            args.run,
            args.run,
            args.run
        )
    } else {
        anyhow!("no run `{}` in {}", args.run, ctx.store_dir.display())
    }))
}
