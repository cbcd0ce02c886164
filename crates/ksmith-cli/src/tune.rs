//! `ksmith tune`: search a solution's tunable parameters with the judge, resumably.

use crate::term::one;
use crate::{env_err, input, load_task, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_judge::{EvalResult, Performance, Race, Status};
use ksmith_search::{Evaluator, Purpose};
use ksmith_task::{Solution, Task};
use ksmith_tune::{Config, Space, Trial};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Search settings shared by `ksmith tune` and `ksmith optimize`.
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Search")]
pub(crate) struct SearchArgs {
    /// Search strategy: exhaustive, random, hillclimb or genetic.
    #[arg(long, default_value = "hillclimb")]
    pub strategy: String,
    /// Maximum configurations to evaluate (earlier evaluations found in the store are reused for free).
    #[arg(long, default_value_t = 20, value_parser = crate::parse_budget)]
    pub budget: usize,
    /// Stop searching after this many seconds.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=604_800))]
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

/// Geometric mean of the per-workload median latencies of a passed evaluation.
pub(crate) fn latency_ms(r: &EvalResult) -> Option<f64> {
    passed_perf(r).map(|p| p.candidate_ms())
}

/// The tuner's figure of merit (lower is better): time relative to the XLA baseline measured in
/// the same alternating windows (1 / speedup), so machine drift between evaluations cancels.
pub(crate) fn cost(r: &EvalResult) -> Option<f64> {
    passed_perf(r).map(|p| 1.0 / p.speedup.max(1e-12))
}

fn passed_perf(r: &EvalResult) -> Option<&Performance> {
    r.performance
        .as_ref()
        .filter(|_| r.status == Status::Passed)
}

fn eliminated(r: &EvalResult) -> bool {
    r.performance
        .as_ref()
        .is_some_and(|p| p.eliminated.is_some())
}

/// One evaluated configuration.
pub(crate) struct Row {
    pub config: Config,
    pub result: EvalResult,
    pub reused: bool,
    /// Seconds since the search started when this evaluation finished.
    pub elapsed_s: f64,
}

/// A leader timed twice: in the search, then again side by side with the other leaders and the
/// untuned solution (`config` None); the second figure decides.
pub(crate) struct Confirmed {
    pub config: Option<Config>,
    pub first: EvalResult,
    pub second: EvalResult,
    /// Against the untuned solution in the same rounds, when both were re-timed.
    pub vs_untuned: Option<ksmith_judge::Relative>,
}

impl Confirmed {
    /// The cost re-timed together (all leaders against the same baseline calls); None unless
    /// it passed again.
    pub fn cost(&self) -> Option<f64> {
        cost(&self.second)
    }
}

/// What a search found.
pub(crate) struct Outcome {
    /// The untuned solution's evaluation.
    pub default_result: EvalResult,
    /// Every configuration tried, in order.
    pub rows: Vec<Row>,
    /// Leaders re-timed, cheapest first.
    pub confirmed: Vec<Confirmed>,
    /// The winning configuration (None: the untuned solution) and its cost.
    pub best: Option<(Option<Config>, f64)>,
    /// Seconds the whole search took.
    pub elapsed_s: f64,
    /// Valid configurations in the space.
    pub space_size: usize,
    /// The untuned solution's configuration (its `#define` defaults), when known.
    pub default_config: Option<Config>,
    /// Seconds since the start when the untuned solution's evaluation finished.
    pub default_elapsed_s: f64,
}

/// Per-workload speedups of a fully timed evaluation: what later candidates race against.
fn incumbent(r: &EvalResult, workloads: usize) -> Option<Vec<f64>> {
    let p = passed_perf(r).filter(|p| p.eliminated.is_none())?;
    let mut v = vec![0.0; workloads];
    for w in &p.workloads {
        *v.get_mut(w.workload)? = w.speedup;
    }
    Some(v)
}

/// Evaluates the untuned solution, then up to `budget` configurations proposed by the strategy,
/// racing each against the best so far; then re-times the leaders. Evaluations already in the
/// store are reused, so an interrupted search resumes for free.
pub(crate) fn search(
    ctx: &Ctx,
    task: &Task,
    solution: &Solution,
    args: &SearchArgs,
    opts: &JudgeOpts,
) -> Result<Outcome, Exit> {
    let started = Instant::now();
    let deadline = args.time_budget.map(|s| started + Duration::from_secs(s));
    let space = Space::new(task, solution);
    if space.is_empty() {
        return Err(input(anyhow!(
            "solution {}: declares no [[tunables]]; nothing to tune",
            solution.name
        )));
    }
    let mut strategy = ksmith_tune::strategy(&args.strategy, args.seed).ok_or_else(|| {
        input(anyhow!(
            "unknown strategy `{}` (expected one of {})",
            args.strategy,
            ksmith_tune::STRATEGIES.join(", ")
        ))
    })?;
    let space_size = space.enumerate().len();
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(opts)?;
    let steps = args.budget.min(space_size.saturating_sub(1).max(1)) as u64;
    let progress = crate::progress::Progress::new(&format!("tune {}", solution.name), steps);
    judge.set_stage_hook(Some(crate::progress::judge_hook(
        &progress,
        !opts.no_timing,
        false,
    )));
    progress.line(&format!(
        "{} on {}: {} parameters ({}), {space_size} valid configurations, strategy {}{}",
        one(&solution.name),
        one(&task.name),
        space.names().len(),
        one(&space.names().join(", ")),
        strategy.name(),
        if args.no_race {
            ""
        } else {
            ", successive elimination on"
        }
    ));
    // A raced result may be a rough estimate: its key names the race, so it is never reused
    // where a full measurement (or a race against another incumbent) is wanted.
    let mut evaluate = |variant: &Solution, race: Option<Race>| -> Result<(EvalResult, bool), Exit> {
        let purpose = race.map_or(Purpose::Plain, Purpose::Raced);
        let e = Evaluator::new(&mut judge, &mut store)
            .evaluate(task, variant, &purpose)
            .map_err(crate::eval_err)?;
        Ok((e.result, e.reused))
    };
    // The untuned solution (macro defaults) is the reference point and the first incumbent.
    progress.line("judging the untuned solution (the reference point)");
    progress.activity("untuned solution");
    let (default_result, reused) = evaluate(solution, None)?;
    progress.line(&format!(
        "untuned -> {}",
        trial_outcome(&default_result, reused)
    ));
    let default_elapsed_s = started.elapsed().as_secs_f64();
    let nw = task.workloads.len();
    let mut leader = incumbent(&default_result, nw);
    // When the untuned configuration is known, the search starts from it (hill climbing explores
    // its neighbours first) and never proposes it again.
    let default_config = space.default_config(solution);
    let mut history: Vec<Trial> = default_config
        .iter()
        .map(|c| Trial::measured(c.clone(), cost(&default_result)))
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    while rows.len() < args.budget && deadline.is_none_or(|d| Instant::now() < d) {
        let Some(config) = strategy.propose(&space, &history) else {
            break;
        };
        let variant = tuned_variant(solution, &config);
        let race = leader.clone().filter(|_| !args.no_race).map(Race::against);
        let label = one(&ksmith_tune::label(&config)).into_owned();
        progress.activity(&label);
        let (result, reused) = evaluate(&variant, race)?;
        progress.step(&format!("{label} -> {}", trial_outcome(&result, reused)));
        let trial = Trial {
            config: config.clone(),
            cost: cost(&result),
            eliminated: eliminated(&result),
        };
        let improves = trial.cost.is_some()
            && !trial.eliminated
            && ksmith_tune::best(&history)
                .and_then(|b| b.cost)
                .is_none_or(|b| trial.cost < Some(b));
        let beats_default = cost(&default_result).is_none_or(|d| trial.cost < Some(d));
        if improves && beats_default {
            leader = incumbent(&result, nw).or(leader);
        }
        history.push(trial);
        rows.push(Row {
            config,
            result,
            reused,
            elapsed_s: started.elapsed().as_secs_f64(),
        });
    }
    // The search may end before the budget (space exhausted, time budget).
    progress.set_total(progress.position());
    // Spend repetitions on the leaders: re-time the best few and the untuned solution.
    let mut confirmed = Vec::new();
    if args.confirm > 0 {
        // The untuned configuration is re-timed as the untuned solution itself, below.
        let mut leaders: Vec<&Trial> = history
            .iter()
            .filter(|t| t.cost.is_some() && !t.eliminated)
            .filter(|t| Some(&t.config) != default_config.as_ref())
            .collect();
        leaders.sort_by(|a, b| a.cost.total_cmp_opt(&b.cost));
        // The untuned solution first (the reference), then the leaders: timed side by side.
        let mut finalists: Vec<(Option<Config>, EvalResult, Solution)> = Vec::new();
        if default_result.status == Status::Passed {
            finalists.push((None, default_result.clone(), solution.clone()));
        }
        for t in leaders.into_iter().take(args.confirm) {
            let first = rows
                .iter()
                .find(|r| r.config == t.config)
                .map(|r| r.result.clone())
                .unwrap_or_else(|| default_result.clone());
            let variant = tuned_variant(solution, &t.config);
            finalists.push((Some(t.config.clone()), first, variant));
        }
        if !finalists.is_empty() {
            progress.line(&format!(
                "re-timing {} finalists side by side{}",
                finalists.len(),
                if finalists[0].0.is_none() {
                    " (with the untuned solution)"
                } else {
                    ""
                }
            ));
            let sols: Vec<Solution> = finalists.iter().map(|f| f.2.clone()).collect();
            // Its own count: each finalist checked again, then all timed together.
            progress.finish();
            let again = crate::progress::Progress::new(
                &format!("re-time {}", solution.name),
                sols.len() as u64,
            );
            let hook = again.clone();
            let mut timing_said = false;
            judge.set_stage_hook(Some(Box::new(move |name, stage| match stage {
                ksmith_judge::Stage::Load => hook.step(&format!("{}: checked again", one(name))),
                ksmith_judge::Stage::Timing if !timing_said => {
                    timing_said = true;
                    hook.line("timing the finalists side by side, in rounds alternating with XLA");
                }
                _ => {}
            })));
            let compared = crate::compare_recorded(&mut judge, &mut store, task, &sols);
            again.finish();
            let (_, cmp) = compared?;
            let untuned_first = finalists[0].0.is_none();
            for (i, ((config, first, _), second)) in
                finalists.into_iter().zip(cmp.results).enumerate()
            {
                let vs_untuned = (untuned_first && i > 0).then(|| cmp.versus[i][0]).flatten();
                confirmed.push(Confirmed {
                    config,
                    first,
                    second,
                    vs_untuned,
                });
            }
        }
        confirmed.sort_by(|a, b| a.cost().total_cmp_opt(&b.cost()));
    }
    progress.finish();
    let best = match confirmed
        .first()
        .and_then(|c| Some((c.config.clone(), c.cost()?)))
    {
        Some(b) => Some(b),
        None => {
            // No confirmation: the cheaper of the best trial and the untuned solution.
            let tuned =
                ksmith_tune::best(&history).and_then(|b| Some((Some(b.config.clone()), b.cost?)));
            let default = cost(&default_result).map(|c| (None, c));
            match (tuned, default) {
                (Some(t), Some(d)) => Some(if t.1 < d.1 { t } else { d }),
                (t, d) => t.or(d),
            }
        }
    };
    Ok(Outcome {
        default_result,
        rows,
        confirmed,
        best,
        elapsed_s: started.elapsed().as_secs_f64(),
        space_size,
        default_config,
        default_elapsed_s,
    })
}

/// One evaluation's outcome on one line: `1.23x (1.10-1.31)`, `dropped early`, `COMPILE_ERROR
/// (reason)`, with `reused` when it came from the store.
fn trial_outcome(r: &EvalResult, reused: bool) -> String {
    let mut s = match passed_perf(r) {
        Some(p) if p.eliminated.is_some() => format!(
            "dropped early ({} so far)",
            crate::report::ratio(p.speedup, p.speedup_interval)
        ),
        Some(p) => crate::report::ratio(p.speedup, p.speedup_interval),
        None => crate::report::status_text(r),
    };
    if reused {
        s.push_str(", reused from the store");
    }
    s
}

/// Total order on optional costs: missing (failed) last.
trait CostOrd {
    fn total_cmp_opt(&self, other: &Self) -> std::cmp::Ordering;
}

impl CostOrd for Option<f64> {
    fn total_cmp_opt(&self, other: &Self) -> std::cmp::Ordering {
        self.unwrap_or(f64::INFINITY)
            .total_cmp(&other.unwrap_or(f64::INFINITY))
    }
}

/// The solution with a configuration's values fixed as `-D` flags.
pub(crate) fn tuned_variant(solution: &Solution, config: &Config) -> Solution {
    let name = format!("{}[{}]", solution.name, ksmith_tune::label(config));
    solution.variant(&name, &ksmith_tune::defines(config))
}

pub(crate) fn run(ctx: &Ctx, args: &TuneArgs) -> Result<u8, Exit> {
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
    let outcome = search(ctx, &task, &solution, &args.search, &args.opts)?;
    // Only a tuned configuration that beat the untuned solution is written: a copy of the
    // untuned solution under a `-tuned` name would claim a tuning that found nothing.
    if let Some((Some(config), _)) = &outcome.best {
        write_tuned(&solution, Some(config), &out, "tune").map_err(env_err)?;
    }
    if args.json {
        let mut v = outcome_json(&task, &solution, &args.search, &outcome);
        // Where the winner was written; null when the untuned solution won (nothing written).
        v["written"] = match &outcome.best {
            Some((Some(_), _)) => json!(out.display().to_string()),
            _ => serde_json::Value::Null,
        };
        crate::term::json(&v);
    } else {
        print_table(&outcome);
        summarize(&outcome, &out);
    }
    Ok(if outcome.best.is_some() { 0 } else { 1 })
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
    sorted.sort_by(|a, b| cost(a.2).total_cmp_opt(&cost(b.2)));
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
            (Some(reason), _) => format!("{} ({})", result.status, one(reason)),
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

/// Writes a solution as a directory: its sources and a solution.toml (values TOML-escaped),
/// after a `# header` comment when one is given and with `extra` TOML (e.g. `[[tunables]]`)
/// appended.
pub(crate) fn write_solution(
    sol: &Solution,
    out: &Path,
    header: &str,
    extra: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    for (name, text) in &sol.sources {
        let p = out.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), sol.name.clone().into());
    t.insert("language".into(), sol.language.name().into());
    t.insert("entry_point".into(), sol.entry_point.clone().into());
    let sources: Vec<String> = sol.sources.iter().map(|(n, _)| n.clone()).collect();
    t.insert("sources".into(), sources.into());
    t.insert("flags".into(), sol.flags.clone().into());
    // The solution's own tunables, unless the caller declares others in `extra`.
    if extra.trim().is_empty() && !sol.tunables.is_empty() {
        let tunables: Vec<toml::Value> = sol
            .tunables
            .iter()
            .map(|tu| {
                let mut e = toml::Table::new();
                e.insert("name".into(), tu.name.clone().into());
                e.insert("values".into(), tu.values.clone().into());
                let constraints: Vec<String> = tu
                    .constraints
                    .iter()
                    .map(|c| c.text().to_string())
                    .collect();
                e.insert("constraints".into(), constraints.into());
                toml::Value::Table(e)
            })
            .collect();
        t.insert("tunables".into(), tunables.into());
    }
    let header = if header.is_empty() {
        String::new()
    } else {
        format!("# {header}\n")
    };
    let body = toml::to_string(&t).map_err(std::io::Error::other)?;
    std::fs::write(
        out.join(ksmith_task::SOLUTION_FILE),
        format!("{header}{body}\n{extra}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_solutions_load_back_with_flags_and_extra_tunables() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/softmax");
        let task = ksmith_task::Task::load(&root).unwrap();
        let src = "#define CHUNK 8\nvoid softmax(const float* x, float* y, long M, long N) {}\n";
        let sol = Solution::from_source(
            "softmax-tuned.v2",
            ksmith_task::Language::C,
            "softmax",
            "kernel.c",
            src.into(),
            vec!["-fno-math-errno".into()],
        );
        let dir = tempfile::tempdir().unwrap();
        write_solution(
            &sol,
            dir.path(),
            "",
            "[[tunables]]\nname = \"CHUNK\"\nvalues = [4, 8]\n",
        )
        .unwrap();
        let back = Solution::load(dir.path(), &task).unwrap();
        assert_eq!(back.name, sol.name);
        assert_eq!(back.flags, sol.flags);
        assert_eq!(back.sources, sol.sources);
        assert_eq!(back.tunables.len(), 1);
    }

    #[test]
    fn a_solutions_own_tunables_are_written_with_their_constraints() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/softmax");
        let task = ksmith_task::Task::load(&root).unwrap();
        let fast = Solution::load(&root.join("solutions/fast"), &task).unwrap();
        assert!(!fast.tunables.is_empty());
        let dir = tempfile::tempdir().unwrap();
        write_solution(&fast, dir.path(), "", "").unwrap();
        let back = Solution::load(dir.path(), &task).unwrap();
        assert_eq!(back.tunables.len(), fast.tunables.len());
        for (a, b) in back.tunables.iter().zip(&fast.tunables) {
            assert_eq!(a.name, b.name);
            assert_eq!(a.values, b.values);
            let texts = |t: &ksmith_task::Tunable| {
                t.constraints
                    .iter()
                    .map(|c| c.text().to_string())
                    .collect::<Vec<_>>()
            };
            assert_eq!(texts(a), texts(b));
        }
    }
}
