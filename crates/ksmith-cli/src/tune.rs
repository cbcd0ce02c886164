//! `ksmith tune`: search a solution's tunable parameters with the judge, resumably.

use crate::{env_err, input, load_task, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use ksmith_judge::{EvalResult, Status};
use ksmith_task::{Solution, Task};
use ksmith_tune::{Config, Space, Trial};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `ksmith tune`.
#[derive(clap::Args)]
pub(crate) struct TuneArgs {
    /// Task directory.
    pub task: PathBuf,
    /// Solution directory (its solution.toml declares the tunables).
    pub solution: PathBuf,
    /// Search strategy: exhaustive, random, hillclimb or genetic.
    #[arg(long, default_value = "hillclimb")]
    pub strategy: String,
    /// Maximum configurations to evaluate (earlier evaluations found in the store are reused for free).
    #[arg(long, default_value_t = 20)]
    pub budget: usize,
    /// Stop after this many seconds.
    #[arg(long)]
    pub time_budget: Option<u64>,
    /// Seed for the random strategies.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the tuned solution (default: SOLUTION-tuned next to it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub opts: JudgeOpts,
}

/// Geometric mean of the per-workload median latencies of a passed evaluation.
pub(crate) fn latency_ms(r: &EvalResult) -> Option<f64> {
    r.performance
        .as_ref()
        .filter(|_| r.status == Status::Passed)
        .map(|p| p.candidate_ms())
}

/// One evaluated configuration.
pub(crate) struct Row {
    pub config: Config,
    pub result: EvalResult,
    pub reused: bool,
}

/// What a search found.
pub(crate) struct Outcome {
    /// The untuned solution's evaluation.
    pub default_result: EvalResult,
    /// Every configuration tried, in order.
    pub rows: Vec<Row>,
    /// The fastest passing configuration.
    pub best: Option<Trial>,
}

#[allow(clippy::too_many_arguments)]
/// Evaluates the untuned solution, then up to `budget` configurations proposed by `strategy`,
/// reusing evaluations already in the store (so an interrupted search resumes for free).
pub(crate) fn search(
    ctx: &Ctx,
    task: &Task,
    solution: &Solution,
    strategy_name: &str,
    seed: u64,
    budget: usize,
    deadline: Option<Instant>,
    opts: &JudgeOpts,
) -> Result<Outcome, Exit> {
    let space = Space::new(task, solution);
    if space.is_empty() {
        return Err(input(anyhow!(
            "solution {}: declares no [[tunables]]; nothing to tune",
            solution.name
        )));
    }
    let mut strategy = ksmith_tune::strategy(strategy_name, seed).ok_or_else(|| {
        input(anyhow!(
            "unknown strategy `{strategy_name}` (expected one of {})",
            ksmith_tune::STRATEGIES.join(", ")
        ))
    })?;
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(opts)?;
    eprintln!(
        "ksmith: tuning {} on {}: {} parameters ({}), {} combinations before constraints, strategy {}",
        solution.name,
        task.name,
        space.names().len(),
        space.names().join(", "),
        space.product_size(),
        strategy.name()
    );
    let mut evaluate = |variant: &Solution| -> Result<(EvalResult, bool), Exit> {
        let key = judge.eval_key(task, variant).map_err(env_err)?;
        if let Some(prev) = store.find(&key).map_err(env_err)? {
            return Ok((prev.result, true));
        }
        let (_, r) = crate::evaluate_recorded(&mut judge, &mut store, task, variant)?;
        Ok((r, false))
    };
    // The untuned solution (macro defaults) is the reference point.
    let (default_result, _) = evaluate(solution)?;
    let bar = ProgressBar::new(budget as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut history: Vec<Trial> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    while rows.len() < budget && deadline.is_none_or(|d| Instant::now() < d) {
        let Some(config) = strategy.propose(&space, &history) else {
            break;
        };
        let variant = tuned_variant(solution, &config);
        let (result, reused) = evaluate(&variant)?;
        history.push(Trial {
            config: config.clone(),
            latency_ms: latency_ms(&result),
        });
        if let Some(b) = ksmith_tune::best(&history) {
            bar.set_message(format!(
                "best {:.3} ms [{}]",
                b.latency_ms.unwrap_or(0.0),
                ksmith_tune::label(&b.config)
            ));
        }
        rows.push(Row {
            config,
            result,
            reused,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let best = ksmith_tune::best(&history).cloned();
    Ok(Outcome {
        default_result,
        rows,
        best,
    })
}

/// The solution with a configuration's values fixed as `-D` flags.
pub(crate) fn tuned_variant(solution: &Solution, config: &Config) -> Solution {
    let name = format!("{}[{}]", solution.name, ksmith_tune::label(config));
    solution.variant(&name, &ksmith_tune::defines(config))
}

pub(crate) fn run(ctx: &Ctx, args: &TuneArgs) -> Result<u8, Exit> {
    let started = Instant::now();
    let task = load_task(&args.task)?;
    let solution = Solution::load(&args.solution, &task).map_err(|e| {
        input(anyhow!(
            "invalid solution {}:\n{e}",
            args.solution.display()
        ))
    })?;
    let deadline = args.time_budget.map(|s| started + Duration::from_secs(s));
    let outcome = search(
        ctx,
        &task,
        &solution,
        &args.strategy,
        args.seed,
        args.budget,
        deadline,
        &args.opts,
    )?;
    let default_ms = latency_ms(&outcome.default_result);
    print_table(&outcome.rows, default_ms);
    let Some(best) = outcome.best else {
        println!("no configuration passed; nothing written");
        return Ok(1);
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let mut p = args.solution.clone().into_os_string();
        p.push("-tuned");
        PathBuf::from(p)
    });
    write_tuned(&solution, &best.config, &out).map_err(env_err)?;
    let reused = outcome.rows.iter().filter(|r| r.reused).count();
    println!(
        "best [{}]: {:.3} ms{}; {} configurations evaluated ({} reused from the store) in {:.1} s; written to {}",
        ksmith_tune::label(&best.config),
        best.latency_ms.unwrap_or(0.0),
        default_ms.map(|d| format!(" ({:.2}x vs the untuned solution's {d:.3} ms)", d / best.latency_ms.unwrap_or(d))).unwrap_or_default(),
        outcome.rows.len(),
        reused,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(0)
}

fn print_table(rows: &[Row], default_ms: Option<f64>) {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |r: &Row| latency_ms(&r.result).unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "rank",
        "configuration",
        "status",
        "latency ms (geomean)",
        "vs untuned",
        "speedup vs XLA",
    ]);
    for (i, r) in sorted.iter().take(10).enumerate() {
        let lat = latency_ms(&r.result);
        let status = match &r.result.reason {
            Some(reason) => format!("{} ({reason})", r.result.status),
            None => r.result.status.to_string(),
        };
        t.add_row(vec![
            (i + 1).to_string(),
            ksmith_tune::label(&r.config),
            status,
            lat.map(|l| format!("{l:.3}")).unwrap_or_else(|| "-".into()),
            match (lat, default_ms) {
                (Some(l), Some(d)) => format!("{:.2}x", d / l),
                _ => "-".into(),
            },
            r.result
                .performance
                .as_ref()
                .map(|p| format!("{:.2}x", p.speedup))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    println!("{t}");
}

/// Writes the solution with the chosen values fixed as `-D` flags.
pub(crate) fn write_tuned(solution: &Solution, config: &Config, out: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    for (name, text) in &solution.sources {
        let p = out.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    let mut flags = solution.flags.clone();
    flags.extend(ksmith_tune::defines(config));
    let list = |v: Vec<String>| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let toml = format!(
        "# Written by `ksmith tune`: {} with {}.\nname = {:?}\nlanguage = \"c\"\nentry_point = {:?}\nsources = [{}]\nflags = [{}]\n",
        solution.name,
        ksmith_tune::label(config),
        format!("{}_tuned", solution.name),
        solution.entry_point,
        list(solution.sources.iter().map(|(n, _)| n.clone()).collect()),
        list(flags),
    );
    std::fs::write(out.join(ksmith_task::SOLUTION_FILE), toml)
}
