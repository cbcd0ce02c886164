//! `ksmith tune`: search a solution's tunable parameters with the judge, resumably.

use crate::progress::Progress;
use crate::term::one;
use crate::{env_err, input, load_task, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_judge::EvalResult;
use ksmith_search::tune::{TuneError, TuneSettings};
use ksmith_search::{Event, EventSink, TrialOutcome};
use ksmith_task::{Solution, Task};
use ksmith_tune::Config;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Search settings shared by `ksmith tune` and `ksmith optimize`.
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Search")]
pub(crate) struct SearchArgs {
    /// `tune`: the tuner's strategy, exhaustive, random, hillclimb or genetic; `optimize`: a
    /// graph search, loop, best-of-n, parallel, beam, greedy, evolve (docs/search.md; the
    /// tuner's strategy is `--tune-strategy` there).
    #[arg(long, default_value = "hillclimb")]
    pub strategy: String,
    /// Maximum configurations to evaluate (earlier evaluations found in the store are reused for free).
    #[arg(long, default_value_t = 20, value_parser = crate::parse_budget)]
    pub budget: usize,
    /// Stop searching after this many seconds.
    #[arg(long, value_parser = crate::whole::<u64>(1..=604_800))]
    pub time_budget: Option<u64>,
    /// Seed for the random strategies.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time every configuration in full (no successive elimination against the best so far).
    #[arg(long)]
    pub no_race: bool,
    /// Re-time this many leading configurations (and the untuned solution) once more and pick
    /// the winner from both measurements.
    #[arg(long, default_value_t = 3, value_parser = crate::parse_confirm)]
    pub confirm: usize,
}

/// Arguments of `ksmith tune`.
#[derive(clap::Args)]
pub(crate) struct TuneArgs {
    /// Task directory.
    pub task: PathBuf,
    /// Solution directory (its solution.toml declares the tunables).
    pub solution: PathBuf,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Where to write the tuned solution (default: STORE/tuned/TASK/SOLUTION-tuned; never the
    /// task's solutions/, where the next `bench` would pick it up). Nothing is written when the
    /// untuned solution stays fastest.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the search (every configuration in order, with timestamps) as one JSON document.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opts: JudgeOpts,
}

pub(crate) use ksmith_search::tune::{
    cost, eliminated, latency_ms, passed_perf, tuned_variant, Confirmed, TuneOutcome as Outcome,
};

impl SearchArgs {
    /// The engine's settings from the flags.
    pub(crate) fn settings(&self) -> TuneSettings {
        TuneSettings {
            strategy: self.strategy.clone(),
            budget: self.budget,
            time_budget: self.time_budget.map(Duration::from_secs),
            seed: self.seed,
            race: !self.no_race,
            confirm: self.confirm,
        }
    }
}

/// Runs the tuner's search ([`ksmith_search::tune::search`]) with a judge and store made from
/// the flags, its events shown as progress.
pub(crate) fn search(
    ctx: &Ctx,
    task: &Task,
    solution: &Solution,
    args: &SearchArgs,
    opts: &JudgeOpts,
) -> Result<Outcome, Exit> {
    search_observed(ctx, task, solution, args, opts, None)
}

/// Sends every event to both sinks.
struct Both<'a>(&'a dyn EventSink, &'a dyn EventSink);

impl EventSink for Both<'_> {
    fn emit(&self, event: Event) {
        self.1.emit(event.clone());
        self.0.emit(event);
    }
}

/// [`search`], its events also sent to `observer` (the MCP server's progress notifications).
pub(crate) fn search_observed(
    ctx: &Ctx,
    task: &Task,
    solution: &Solution,
    args: &SearchArgs,
    opts: &JudgeOpts,
    observer: Option<&dyn EventSink>,
) -> Result<Outcome, Exit> {
    let settings = args.settings();
    // Refused before the judge starts (its Python side takes seconds).
    ksmith_search::tune::check(task, solution, &settings).map_err(tune_err)?;
    with_view(ctx, solution, opts, |judge, store, view| match observer {
        Some(o) => {
            ksmith_search::tune::search(judge, store, task, solution, &settings, &Both(view, o))
        }
        None => ksmith_search::tune::search(judge, store, task, solution, &settings, view),
    })
}

/// Runs a tuner search `f` with a judge and store made from the flags, its events shown as
/// progress (`ksmith tune`).
pub(crate) fn with_view<T>(
    ctx: &Ctx,
    solution: &Solution,
    opts: &JudgeOpts,
    f: impl FnOnce(
        &mut ksmith_judge::Judge,
        &mut ksmith_store::Store,
        &dyn EventSink,
    ) -> Result<T, TuneError>,
) -> Result<T, Exit> {
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(opts)?;
    let view = TuneView::new(&solution.name);
    judge.set_stage_hook(Some(view.judge_hook(!opts.no_timing)));
    let outcome = f(&mut judge, &mut store, &view);
    view.finish();
    outcome.map_err(tune_err)
}

/// A tuner error with its exit code: bad settings are input, evaluations as
/// [`crate::eval_err`] says.
fn tune_err(e: TuneError) -> Exit {
    match e {
        TuneError::Evaluator(e) => crate::eval_err(e),
        e => input(e),
    }
}

/// The tuner's progress on the terminal: one bar for the search, another for the re-timing of
/// the finalists; the judge's stages go to whichever is current.
struct TuneView(Arc<Mutex<ViewState>>);

struct ViewState {
    search: Progress,
    retime: Option<Progress>,
    timing_said: bool,
}

impl TuneView {
    fn new(solution: &str) -> TuneView {
        TuneView(Arc::new(Mutex::new(ViewState {
            search: Progress::new(&format!("tune {solution}"), 0),
            retime: None,
            timing_said: false,
        })))
    }

    fn state(&self) -> MutexGuard<'_, ViewState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The judge's stage hook: the search bar's judge hook, then the re-timing's own lines.
    fn judge_hook(&self, timing: bool) -> ksmith_judge::StageHook {
        let state = self.0.clone();
        let search = self.state().search.clone();
        let mut inner = crate::progress::judge_hook(&search, timing, false);
        Box::new(move |name, stage| {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            let Some(again) = s.retime.clone() else {
                drop(s);
                return inner(name, stage);
            };
            match stage {
                ksmith_judge::Stage::Load => again.step(&format!("{}: checked again", one(name))),
                ksmith_judge::Stage::Timing if !s.timing_said => {
                    s.timing_said = true;
                    again.line("timing the finalists side by side, in rounds alternating with XLA");
                }
                _ => {}
            }
        })
    }

    fn finish(&self) {
        let s = self.state();
        s.search.finish();
        if let Some(r) = &s.retime {
            r.finish();
        }
    }
}

/// A configuration's label for the terminal; None: the untuned solution.
fn config_label(config: Option<&Config>) -> String {
    match config {
        Some(c) => one(&ksmith_tune::label(c)).into_owned(),
        None => "untuned solution".into(),
    }
}

impl EventSink for TuneView {
    fn emit(&self, event: Event) {
        let mut s = self.state();
        match event {
            Event::TuneStarted {
                task,
                solution,
                parameters,
                space_size,
                strategy,
                racing,
                steps,
            } => {
                s.search.set_total(steps);
                s.search.line(&format!(
                    "{} on {}: {} parameters ({}), {space_size} valid configurations, strategy {strategy}{}",
                    one(&solution),
                    one(&task),
                    parameters.len(),
                    one(&parameters.join(", ")),
                    if racing { ", successive elimination on" } else { "" }
                ));
            }
            Event::TuneJudging { config: None } => {
                s.search
                    .line("judging the untuned solution (the reference point)");
                s.search.activity("untuned solution");
            }
            Event::TuneJudging { config } => s.search.activity(&config_label(config.as_ref())),
            Event::TuneJudged {
                config: None,
                outcome,
                reused,
            } => s
                .search
                .line(&format!("untuned -> {}", outcome_text(&outcome, reused))),
            Event::TuneJudged {
                config,
                outcome,
                reused,
            } => s.search.step(&format!(
                "{} -> {}",
                config_label(config.as_ref()),
                outcome_text(&outcome, reused)
            )),
            Event::TuneSearchEnded { .. } => {
                let at = s.search.position();
                s.search.set_total(at);
            }
            Event::TuneRetiming {
                finalists,
                with_untuned,
            } => {
                s.search.line(&format!(
                    "re-timing {finalists} finalists side by side{}",
                    if with_untuned {
                        " (with the untuned solution)"
                    } else {
                        ""
                    }
                ));
                // Its own count: each finalist checked again, then all timed together.
                s.search.finish();
                s.retime = Some(Progress::new("re-time", finalists as u64));
            }
            _ => {}
        }
    }
}

/// One evaluation's outcome on one line: `1.23x (1.10-1.31)`, `dropped early`, `COMPILE_ERROR
/// (reason)`, with `reused` when it came from the store.
fn outcome_text(o: &TrialOutcome, reused: bool) -> String {
    let mut s = match (o.speedup, o.interval) {
        (Some(x), Some(i)) if o.eliminated => {
            format!("dropped early ({} so far)", crate::report::ratio(x, i))
        }
        (Some(x), Some(i)) => crate::report::ratio(x, i),
        _ => match &o.reason {
            Some(reason) => format!("{} ({})", o.status, reason),
            None => o.status.to_string(),
        },
    };
    if reused {
        s.push_str(", reused from the store");
    }
    s
}

pub(crate) fn run(ctx: &Ctx, args: &TuneArgs) -> Result<u8, Exit> {
    let tuned = tune_and_write(ctx, args, None)?;
    if args.json {
        crate::term::json(&tuned.json);
    } else {
        print_table(&tuned.outcome);
        summarize(&tuned.outcome, &tuned.out);
    }
    Ok(if tuned.outcome.best.is_some() { 0 } else { 1 })
}

/// A finished tuning: the search, where a winner goes, and `tune --json`'s document.
pub(crate) struct Tuned {
    /// The search.
    pub outcome: Outcome,
    /// Where the tuned solution is (or would have been) written.
    pub out: PathBuf,
    /// What `ksmith tune --json` prints.
    pub json: serde_json::Value,
}

/// Tunes `args.solution` and writes the winning configuration when it beat the untuned
/// solution (the work of `ksmith tune`, without printing).
pub(crate) fn tune_and_write(
    ctx: &Ctx,
    args: &TuneArgs,
    observer: Option<&dyn EventSink>,
) -> Result<Tuned, Exit> {
    let task = load_task(&args.task)?;
    let solution = Solution::load(&args.solution, &task).map_err(|e| {
        input(anyhow!(
            "invalid solution {}:\n{e}",
            args.solution.display()
        ))
    })?;
    let out = match &args.out {
        Some(o) => o.clone(),
        None => default_out(&ctx.store_dir, &task, &args.solution),
    };
    if same_dir(&out, &args.solution) {
        return Err(input(anyhow!(
            "--out {}: is the solution being tuned; pick another directory",
            out.display()
        )));
    }
    let outcome = search_observed(ctx, &task, &solution, &args.search, &args.opts, observer)?;
    // Only a tuned configuration that beat the untuned solution is written: a copy of the
    // untuned solution under a `-tuned` name would claim a tuning that found nothing.
    if let Some((Some(config), _)) = &outcome.best {
        write_tuned(&solution, Some(config), &out, "tune").map_err(env_err)?;
    }
    let mut v = outcome_json(&task, &solution, &args.search, &outcome);
    // Where the winner was written; null when the untuned solution won (nothing written).
    v["written"] = match &outcome.best {
        Some((Some(_), _)) => json!(out.display().to_string()),
        _ => serde_json::Value::Null,
    };
    Ok(Tuned {
        outcome,
        out,
        json: v,
    })
}

/// Where `tune` writes by default: STORE/tuned/TASK/SOLUTION-tuned.
fn default_out(store: &Path, task: &Task, solution: &Path) -> PathBuf {
    let name = solution
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or("solution");
    store
        .join("tuned")
        .join(&task.name)
        .join(format!("{name}-tuned"))
}

/// Whether two paths name the same directory (both resolved when they exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    }
}

fn summarize(outcome: &Outcome, out: &Path) {
    let Some((config, best_cost)) = &outcome.best else {
        say!("no configuration passed; nothing written");
        return;
    };
    let reused = outcome.rows.iter().filter(|r| r.reused).count();
    let dropped = outcome
        .rows
        .iter()
        .filter(|r| eliminated(&r.result))
        .count();
    let label = config
        .as_ref()
        .map(|c| one(&ksmith_tune::label(c)).into_owned())
        .unwrap_or_else(|| "untuned solution".into());
    let vs_default = config
        .as_ref()
        .and_then(|_| {
            outcome
                .confirmed
                .iter()
                .find(|c| c.config.is_none())
                .and_then(Confirmed::cost)
                .or_else(|| cost(&outcome.default_result))
        })
        .map(|d| format!(", {:.2}x vs the untuned solution", d / best_cost))
        .unwrap_or_default();
    let written = match config {
        Some(_) => format!("written to {}", out.display()),
        None => "no configuration beat the untuned solution; nothing written".into(),
    };
    say!(
        "best [{label}]: {:.2}x vs XLA{vs_default}; {} configurations evaluated ({reused} reused from the store, {dropped} dropped early by successive elimination), {} re-timed, in {:.1} s; {written}",
        1.0 / best_cost,
        outcome.rows.len(),
        outcome.confirmed.len(),
        outcome.elapsed_s,
    );
}

fn row_json(config: Option<&Config>, r: &EvalResult) -> serde_json::Value {
    json!({
        "config": config,
        "status": r.status,
        "reason": r.reason,
        "cost": cost(r),
        "latency_ms": latency_ms(r),
        "speedup": passed_perf(r).map(|p| p.speedup),
        "eliminated": eliminated(r),
    })
}

/// The whole search as one JSON document (for scripts such as benches/tuner_compare.py).
fn outcome_json(
    task: &Task,
    solution: &Solution,
    args: &SearchArgs,
    o: &Outcome,
) -> serde_json::Value {
    // The untuned solution is the first evaluated configuration when its values are known.
    let untuned = o.default_config.as_ref().map(|c| {
        let mut v = row_json(Some(c), &o.default_result);
        v["untuned"] = json!(true);
        v["elapsed_s"] = json!(o.default_elapsed_s);
        v
    });
    let rows: Vec<_> = untuned
        .into_iter()
        .chain(o.rows.iter().map(|r| {
            let mut v = row_json(Some(&r.config), &r.result);
            v["reused"] = json!(r.reused);
            v["elapsed_s"] = json!(r.elapsed_s);
            v
        }))
        .collect();
    let confirmed: Vec<_> = o
        .confirmed
        .iter()
        .map(|c| json!({"config": c.config, "cost": c.cost(), "costs": [cost(&c.first), cost(&c.second)], "vs_untuned": c.vs_untuned}))
        .collect();
    json!({
        "task": task.name,
        "solution": solution.name,
        "strategy": args.strategy,
        "seed": args.seed,
        "race": !args.no_race,
        "space_size": o.space_size,
        "elapsed_s": o.elapsed_s,
        "default": row_json(None, &o.default_result),
        "rows": rows,
        "confirmed": confirmed,
        "best": o.best.as_ref().map(|(c, cost)| json!({"config": c, "cost": cost})),
    })
}

fn print_table(outcome: &Outcome) {
    // The untuned solution has a row like every configuration: the summary names it when it
    // wins, and every "vs untuned" figure refers to it.
    let untuned_label = match &outcome.default_config {
        Some(c) => format!("{} (untuned)", one(&ksmith_tune::label(c))),
        None => "untuned".into(),
    };
    let mut sorted: Vec<(String, Option<&Config>, &EvalResult)> =
        vec![(untuned_label, None, &outcome.default_result)];
    sorted.extend(outcome.rows.iter().map(|r| {
        (
            one(&ksmith_tune::label(&r.config)).into_owned(),
            Some(&r.config),
            &r.result,
        )
    }));
    sorted.sort_by(|a, b| ksmith_search::tune::cmp_cost(cost(a.2), cost(b.2)));
    let default_cost = cost(&outcome.default_result);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "rank",
        "configuration",
        "status",
        "latency ms (geomean)",
        "speedup vs XLA",
        "vs untuned",
        "re-timed",
    ]);
    let shown = 10;
    for (i, (label, config, result)) in sorted.iter().enumerate() {
        // The top rows, and the untuned solution wherever it ranks.
        if i >= shown && config.is_some() {
            continue;
        }
        let status = match (&result.reason, eliminated(result)) {
            (Some(reason), _) => format!("{} ({})", result.status, reason),
            (None, true) => format!("{} (dropped early)", result.status),
            (None, false) => result.status.to_string(),
        };
        let c = cost(result);
        let again = outcome
            .confirmed
            .iter()
            .find(|k| k.config.as_ref() == *config)
            .and_then(|k| cost(&k.second));
        t.add_row(vec![
            (i + 1).to_string(),
            label.clone(),
            status,
            latency_ms(result)
                .map(|l| format!("{l:.3}"))
                .unwrap_or_else(|| "-".into()),
            c.map(|c| format!("{:.2}x", 1.0 / c))
                .unwrap_or_else(|| "-".into()),
            match (c, default_cost) {
                (Some(c), Some(d)) => format!("{:.2}x", d / c),
                _ => "-".into(),
            },
            again
                .map(|a| format!("{:.2}x", 1.0 / a))
                .unwrap_or_default(),
        ]);
    }
    say!("{t}");
    if sorted.len() > shown {
        say!(
            "({} more configurations not shown; --json lists all)",
            sorted.len() - shown
        );
    }
}

/// Writes the solution with the chosen values fixed as `-D` flags; with no configuration (the
/// untuned solution won) the solution as it is, under its own name and saying so. `by` names
/// the command in the header.
pub(crate) fn write_tuned(
    solution: &Solution,
    config: Option<&Config>,
    out: &Path,
    by: &str,
) -> std::io::Result<()> {
    // A comment line in solution.toml: a newline in the name must not end it.
    let Some(config) = config.filter(|c| !c.is_empty()) else {
        let header = format!(
            "Written by `ksmith {by}`: {} unchanged (no configuration beat its own defaults).",
            one(&solution.name)
        );
        return write_solution(solution, out, &header, "");
    };
    let mut tuned = solution.variant(
        &format!("{}_tuned", solution.name),
        &ksmith_tune::defines(config),
    );
    // Values fixed by the flags are no longer free to tune.
    tuned.tunables.retain(|t| !config.contains_key(&t.name));
    let header = format!(
        "Written by `ksmith {by}`: {} with {}.",
        one(&solution.name),
        one(&ksmith_tune::label(config))
    );
    write_solution(&tuned, out, &header, "")
}

/// Writes a solution as a directory ([`Solution::write_dir`]).
pub(crate) fn write_solution(
    sol: &Solution,
    out: &Path,
    header: &str,
    extra: &str,
) -> std::io::Result<()> {
    sol.write_dir(out, header, extra)
}
