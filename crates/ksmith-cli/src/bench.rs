//! `ksmith bench`: every task of a suite, resumable, with the summary table and suite metrics.

use crate::{env_err, input, load_task, report, suite_tasks, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use ksmith_judge::{JudgeError, Status};
use ksmith_results::suite::Row;
use ksmith_search::{Evaluator, EvaluatorError, Purpose, Reuse};
use ksmith_store::BenchItem;
use ksmith_task::{Solution, Task};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `ksmith bench`.
#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Suite directory (subdirectories are tasks).
    pub suite: PathBuf,
    /// Directory of solutions: DIR/<task>/ (with solution.toml) or DIR/<task>.c. Default: each task's solutions/.
    #[arg(long)]
    pub solutions: Option<PathBuf>,
    /// Only solutions with this name (e.g. `fast`).
    #[arg(long)]
    pub solution: Option<String>,
    /// Evaluate everything N times (an A/A repeatability test when N > 1).
    #[arg(long, default_value_t = 1, value_parser = crate::whole::<u32>(1..=20))]
    pub repeat: u32,
    /// Start a new bench run instead of resuming an unfinished one.
    #[arg(long)]
    pub fresh: bool,
    /// Print the summary as JSON on stdout (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Summary format on stdout: table (default), json, csv (one line per row) or markdown.
    #[arg(long, value_enum)]
    pub format: Option<crate::results::Format>,
    /// Also write the summary to FILE, in the format its extension names (.json, .csv, .md);
    /// the terminal still gets the table.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Candidates judged at once (default: 1 here, one per device on a cluster). Here, builds
    /// and checks overlap while timing stays alone on the device.
    #[arg(long, value_parser = crate::whole::<u32>(1..=256))]
    pub jobs: Option<u32>,
    #[command(flatten)]
    pub opts: JudgeOpts,
}

/// Solution paths for a task: from `dir` (DIR/<task>/ or DIR/<task>.c) or the task's `solutions/`.
pub(crate) fn task_solutions(task: &Task, dir: Option<&Path>, only: Option<&str>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = match dir {
        Some(d) => {
            // By task directory name first (unique in a suite), then by task name.
            let dir_name = task
                .dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(&task.name)
                .to_string();
            let mut names = vec![dir_name];
            if names[0] != task.name {
                names.push(task.name.clone());
            }
            let candidates = names
                .iter()
                .flat_map(|n| [d.join(n), d.join(format!("{n}.c"))]);
            candidates.filter(|p| p.exists()).take(1).collect()
        }
        None => std::fs::read_dir(task.dir.join("solutions"))
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.join(ksmith_task::SOLUTION_FILE).exists()
                            || p.extension().is_some_and(|x| x == "c")
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    found.sort();
    if let Some(name) = only {
        found.retain(|p| p.file_stem().and_then(|s| s.to_str()) == Some(name));
    }
    found
}

/// One unit of bench work.
struct Item {
    id: String,
    task: usize,
    solution: Solution,
    label: String,
    repeat: u32,
}

pub(crate) fn run(ctx: &Ctx, args: &BenchArgs) -> Result<u8, Exit> {
    let started = Instant::now();
    let tasks: Vec<Task> = suite_tasks(&args.suite)?
        .iter()
        .map(|d| load_task(d))
        .collect::<Result<_, _>>()?;
    let mut items = Vec::new();
    for (ti, task) in tasks.iter().enumerate() {
        let paths = task_solutions(task, args.solutions.as_deref(), args.solution.as_deref());
        for p in paths {
            let sol = Solution::load(&p, task)
                .map_err(|e| input(anyhow!("invalid solution {}:\n{e}", p.display())))?;
            // Suite metrics group solutions by this label: the variant (`fast`, `naive`) for a
            // task's own solutions/, the directory name for --solutions DIR.
            let label = match &args.solutions {
                Some(d) => d
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("solutions")
                    .to_string(),
                None => p
                    .file_stem()
                    .and_then(|n| n.to_str())
                    .unwrap_or(&sol.name)
                    .to_string(),
            };
            for repeat in 0..args.repeat {
                items.push(Item {
                    id: format!("{}/{label}#{repeat}", task.name),
                    task: ti,
                    solution: sol.clone(),
                    label: label.clone(),
                    repeat,
                });
            }
        }
    }
    if items.is_empty() {
        // A name that matched nothing: the names there are, and the nearest.
        if let Some(name) = &args.solution {
            let mut names: Vec<String> = tasks
                .iter()
                .flat_map(|t| task_solutions(t, args.solutions.as_deref(), None))
                .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
                .collect();
            names.sort();
            names.dedup();
            if !names.is_empty() {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                return Err(input(anyhow!(
                    "--solution: no solution named {} in {}",
                    ksmith_task::suggest::expected(name, &names),
                    args.suite.display()
                )));
            }
        }
        return Err(input(anyhow!(
            "no solutions found for the tasks in {}",
            args.suite.display()
        )));
    }
    // Checked before any work, so a typo does not cost a whole bench.
    let output = args
        .output
        .as_deref()
        .map(crate::results::Format::of_file)
        .transpose()?;
    let mut store = ctx.store()?;
    let mut judge = ctx.judge(&args.opts)?;
    let suite_abs = std::fs::canonicalize(&args.suite).unwrap_or_else(|_| args.suite.clone());
    // Each item's evaluation key already covers the environment fingerprint and judge settings.
    let mut run_key = ksmith_task::FieldHasher::new("ksmith bench run");
    run_key.field(suite_abs.display().to_string());
    for it in &items {
        run_key.field(&it.id).field(
            judge
                .eval_key(&tasks[it.task], &it.solution)
                .map_err(env_err)?,
        );
    }
    let run_key = run_key.hex();
    let (run_id, resumed) = store
        .bench_run(&run_key, &suite_abs.display().to_string(), args.fresh)
        .map_err(env_err)?;
    if resumed {
        note!("ksmith: resuming bench run {run_id} (use --fresh to start over)");
    }
    let progress = crate::progress::Progress::new("bench", items.len() as u64);
    judge.set_stage_hook(Some(crate::progress::judge_hook(
        &progress,
        !args.opts.no_timing,
        false,
    )));
    let jobs = match (args.jobs, ctx.remote()?) {
        (Some(n), _) => n as usize,
        (None, Some(r)) => r.devices(),
        (None, None) => 1,
    }
    .clamp(1, items.len());
    let mut rows: Vec<Option<Row>> = (0..items.len()).map(|_| None).collect();
    let mut best: Option<(f64, String)> = None;
    let mut record = |i: usize, row: Row, rows: &mut Vec<Option<Row>>| {
        let it = &items[i];
        if let Some(r) = row.result.as_ref().filter(|r| r.status == Status::Passed) {
            if let Some(p) = &r.performance {
                if best.as_ref().is_none_or(|(s, _)| p.speedup > *s) {
                    best = Some((p.speedup, it.id.clone()));
                }
            }
        }
        progress.step(&format!(
            "{} -> {}",
            crate::term::one(&it.id),
            row_outcome(&row)
        ));
        progress.activity(
            &best
                .as_ref()
                .map(|(s, n)| format!("best so far {s:.2}x {}", crate::term::one(n)))
                .unwrap_or_default(),
        );
        rows[i] = Some(row);
    };
    if jobs == 1 {
        for (i, it) in items.iter().enumerate() {
            progress.activity(&crate::term::one(&it.id));
            let row = judge_item(&mut judge, &mut store, run_id, &tasks[it.task], it);
            match row {
                Ok(row) => record(i, row, &mut rows),
                Err(e) => {
                    progress.finish();
                    return Err(e);
                }
            }
        }
    } else {
        // Each worker thread has its own judge and store connection; items are handed out in
        // order and their rows kept in that order.
        drop(judge);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Row, Exit>)>();
        let failed = std::sync::atomic::AtomicBool::new(false);
        let outcome = std::thread::scope(|scope| {
            for _ in 0..jobs {
                let tx = tx.clone();
                let (next, failed, items, tasks) = (&next, &failed, &items, &tasks);
                let hook_progress = &progress;
                scope.spawn(move || {
                    let made = ctx.judge(&args.opts).and_then(|j| Ok((j, ctx.store()?)));
                    let (mut judge, mut store) = match made {
                        Ok(x) => x,
                        Err(e) => {
                            let _ = tx.send((usize::MAX, Err(e)));
                            return;
                        }
                    };
                    judge.set_stage_hook(Some(crate::progress::judge_hook(
                        hook_progress,
                        !args.opts.no_timing,
                        false,
                    )));
                    loop {
                        if failed.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(it) = items.get(i) else { return };
                        let row = judge_item(&mut judge, &mut store, run_id, &tasks[it.task], it);
                        if tx.send((i, row)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);
            for (i, row) in rx {
                match row {
                    Ok(row) => record(i, row, &mut rows),
                    Err(e) => {
                        // Work in flight finishes; nothing new starts; the run resumes later.
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = outcome {
            progress.finish();
            return Err(e);
        }
    }
    let rows: Vec<Row> = rows.into_iter().flatten().collect();
    progress.finish();
    store.finish_bench(run_id).map_err(env_err)?;
    let summary = report::BenchSummary::new(&tasks, &rows, started.elapsed().as_secs_f64(), run_id);
    if let (Some(path), Some(format)) = (&args.output, output) {
        crate::results::write_summary(&summary, format, path)?;
    }
    let format = match (args.json, args.format) {
        (true, _) => crate::results::Format::Json,
        (false, f) => f.unwrap_or(crate::results::Format::Table),
    };
    crate::results::print_summary(&summary, format);
    if let Some(path) = &args.output {
        note!("ksmith: wrote the summary to {}", path.display());
    }
    Ok(0)
}

/// One bench item: its stored outcome when this run already has it, else judged (every item
/// is judged anew: a repeat is a new measurement; resume goes by the run's items, not by
/// evaluation keys) and recorded.
fn judge_item(
    judge: &mut ksmith_judge::Judge,
    store: &mut ksmith_store::Store,
    run_id: i64,
    task: &Task,
    it: &Item,
) -> Result<Row, Exit> {
    let mut row = Row {
        task: task.name.clone(),
        solution: it.label.clone(),
        repeat: it.repeat,
        eval_id: None,
        result: None,
        error: None,
        unavailable: None,
    };
    match store.bench_item(run_id, &it.id).map_err(env_err)? {
        Some(BenchItem::Evaluated(id)) => {
            row.eval_id = Some(id);
            row.result = store.get(id).map_err(env_err)?.map(|e| e.result);
        }
        Some(BenchItem::Failed(err)) => row.error = Some(err),
        _ => match Evaluator::new(judge, store)
            .with_reuse(Reuse::Never)
            .evaluate(task, &it.solution, &Purpose::Plain)
        {
            Ok(e) => {
                store
                    .set_bench_item(run_id, &it.id, Some(e.id), None)
                    .map_err(env_err)?;
                row.eval_id = Some(e.id);
                row.result = Some(e.result);
            }
            Err(EvaluatorError::Judge(JudgeError::Unavailable { backend, why, .. })) => {
                // Not recorded: the same run on a machine with the backend evaluates it.
                row.unavailable = Some(format!("{backend}: {why}"));
            }
            Err(EvaluatorError::Judge(JudgeError::Task { message, .. })) => {
                store
                    .set_bench_item(run_id, &it.id, None, Some(&message))
                    .map_err(env_err)?;
                row.error = Some(message);
            }
            Err(e) => return Err(crate::eval_err(e)),
        },
    }
    Ok(row)
}

/// One row's outcome on one line: `PASSED 1.23x (1.10-1.31)`, `COMPILE_ERROR (reason)`, `error: ...`.
fn row_outcome(row: &Row) -> String {
    match (&row.result, &row.error) {
        (Some(r), _) => {
            let mut s = report::status_text(r);
            if let Some(p) = r
                .performance
                .as_ref()
                .filter(|_| r.status == Status::Passed)
            {
                s.push_str(&format!(
                    " {}",
                    report::ratio(p.speedup, p.speedup_interval)
                ));
            }
            s
        }
        (None, Some(e)) => format!(
            "error: {}",
            crate::term::one(e.lines().next().unwrap_or(""))
        ),
        (None, None) => "-".into(),
    }
}
