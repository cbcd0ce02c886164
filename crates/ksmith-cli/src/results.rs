//! Results beyond the bench table: the bench summary as json / csv / markdown, `ksmith evals`
//! (stored evaluations with filters) and `ksmith compare` (two bench runs or agent runs, per
//! task, with the noise, and a regression gate).

use crate::report::{fit_column, ratio, terminal_width, BenchSummary};
use crate::term::one;
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_judge::{EvalResult, Status};
use ksmith_results::compare::{self, decide_pair, interval, Pair};
use ksmith_store::{EvalFilter, Owner, Store, StoredEval};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Exit code of `compare --fail-if-slower` when a task regressed: the same code as a failed
/// evaluation (what was judged failed); 2 and 3 stay bad input and a broken environment.
pub(crate) const EXIT_REGRESSION: u8 = crate::EXIT_FAILED;

/// A format for the bench summary.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// The table and metric lines, for a person.
    Table,
    /// One JSON document: every row (full status and error text) and the suite metrics.
    Json,
    /// One line per row (a header first); the suite metrics are in json and markdown.
    Csv,
    /// A GitHub table of the rows, then the metrics as a list.
    Markdown,
}

impl Format {
    /// The format a file's extension names (`.json`, `.csv`, `.md`).
    pub(crate) fn of_file(path: &Path) -> Result<Format, Exit> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("json") => Ok(Format::Json),
            Some("csv") => Ok(Format::Csv),
            Some("md" | "markdown") => Ok(Format::Markdown),
            _ => Err(input(anyhow!(
                "--output {}: unknown extension (expected .json, .csv or .md)",
                path.display()
            ))),
        }
    }
}

/// Prints the summary on stdout in `format`.
pub(crate) fn print_summary(s: &BenchSummary, format: Format) {
    match format {
        Format::Table => s.print(),
        Format::Json => crate::term::json(&s.to_json()),
        Format::Csv | Format::Markdown => {
            for line in render(s, format).lines() {
                say!("{line}");
            }
        }
    }
}

/// Writes the summary to `path` in `format` (json, csv or markdown).
pub(crate) fn write_summary(s: &BenchSummary, format: Format, path: &Path) -> Result<(), Exit> {
    let text = match format {
        Format::Json => {
            ksmith_task::escape::json_text(&s.to_json().to_string()).into_owned() + "\n"
        }
        f => render(s, f),
    };
    std::fs::write(path, text)
        .map_err(|e| input(anyhow!("--output {}: cannot write: {e}", path.display())))
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A markdown table cell: one line, pipes escaped.
fn md_cell(s: &str) -> String {
    one(s).replace('|', "\\|")
}

/// The csv or markdown text of a summary (every row with its full status).
fn render(s: &BenchSummary, format: Format) -> String {
    let v = s.to_json();
    let empty = Vec::new();
    let rows = v["rows"].as_array().unwrap_or(&empty);
    let text = |x: &serde_json::Value| match x {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => one(s).into_owned(),
        x => x.to_string(),
    };
    let mut out = String::new();
    if format == Format::Csv {
        out.push_str("task,solution,repeat,eval_id,state,status,reason,speedup,speedup_lo,speedup_hi,noisy,roofline_fraction,candidate_ms,baseline_ms,detail\n");
        for r in rows {
            let detail = [&r["unavailable"], &r["error"], &r["timing_unavailable"]]
                .into_iter()
                .find(|x| !x.is_null())
                .map(text)
                .unwrap_or_default();
            let fields = [
                text(&r["task"]),
                text(&r["solution"]),
                text(&r["repeat"]),
                text(&r["eval_id"]),
                text(&r["state"]),
                text(&r["status"]),
                text(&r["reason"]),
                text(&r["speedup"]),
                text(&r["speedup_interval"][0]),
                text(&r["speedup_interval"][1]),
                text(&r["noisy"]),
                text(&r["roofline_fraction"]),
                text(&r["candidate_ms"]),
                text(&r["baseline_ms"]),
                detail,
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        return out;
    }
    out.push_str(&format!("## bench run {}\n\n", s.run_id));
    out.push_str("| task | solution | status | speedup vs XLA (95%) | % roofline | candidate ms | XLA ms | eval |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    let repeats = s.rows.iter().any(|r| r.repeat > 0);
    for (r, j) in s.rows.iter().zip(rows) {
        let perf = r.result.as_ref().and_then(|x| x.performance.as_ref());
        let cells = [
            md_cell(&r.task),
            if repeats {
                md_cell(&format!("{}#{}", r.solution, r.repeat))
            } else {
                md_cell(&r.solution)
            },
            md_cell(&crate::report::status_full(r)),
            perf.map(|p| crate::report::speedup_cell(p.speedup, p.speedup_interval, p.noisy))
                .unwrap_or_else(|| "-".into()),
            perf.map(|p| p.roofline_cell())
                .unwrap_or_else(|| "-".into()),
            j["candidate_ms"]
                .as_f64()
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
            j["baseline_ms"]
                .as_f64()
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.eval_id.map(|i| i.to_string()).unwrap_or_default(),
        ];
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push('\n');
    for line in s.metric_lines() {
        let mut lines = line.lines();
        if let Some(first) = lines.next() {
            out.push_str(&format!("- {}\n", first.replace('|', "\\|")));
        }
        for l in lines {
            out.push_str(&format!("  - {}\n", l.trim().replace('|', "\\|")));
        }
    }
    out
}

/// `--status`: a status name, any case.
pub(crate) fn parse_status(s: &str) -> Result<Status, String> {
    const NAMES: [&str; 8] = [
        "PASSED",
        "COMPILE_ERROR",
        "RUNTIME_ERROR",
        "TIMEOUT",
        "INCORRECT_SHAPE",
        "INCORRECT_DTYPE",
        "INCORRECT_NUMERICAL",
        "POLICY_REJECTED",
    ];
    Status::parse(&s.trim().to_ascii_uppercase()).ok_or_else(|| {
        format!(
            "unknown status {}",
            ksmith_task::suggest::expected(s.trim(), &NAMES)
        )
    })
}

/// Arguments of `ksmith evals`.
#[derive(clap::Args)]
pub(crate) struct EvalsArgs {
    /// Only evaluations of this task (its name).
    #[arg(long)]
    pub(crate) task: Option<String>,
    /// Only evaluations of this solution (its name).
    #[arg(long)]
    pub(crate) solution: Option<String>,
    /// Only this status (PASSED, COMPILE_ERROR, ..., any case).
    #[arg(long, value_parser = parse_status)]
    pub(crate) status: Option<Status>,
    /// Recorded on or after DATE (YYYY-MM-DD, UTC) or an RFC 3339 time.
    #[arg(long, value_name = "DATE")]
    pub(crate) since: Option<String>,
    /// Recorded on or before DATE (YYYY-MM-DD: that whole day, UTC) or an RFC 3339 time.
    #[arg(long, value_name = "DATE")]
    pub(crate) until: Option<String>,
    /// At most N, newest first (0: all).
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
    /// Print {"evals": [{"id", "created_at", "task", "solution", "belongs_to": [{"kind", "run", ...}], "language", "status", ...}]} instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A `--since`/`--until` value as UTC `YYYY-MM-DDTHH:MM:SSZ`; `end` makes it the first second
/// after the day or time given (an exclusive bound).
fn parse_when(store: &Store, flag: &str, text: &str, end: bool) -> Result<String, Exit> {
    let bad = || {
        input(anyhow!(
            "{flag} {}: expected a date YYYY-MM-DD or an RFC 3339 time (2026-12-01T10:00:00Z)",
            one(text)
        ))
    };
    let date = regex::Regex::new(r"^\d{4}-\d{2}-\d{2}$").map_err(env_err)?;
    let time = regex::Regex::new(
        r"^(\d{4}-\d{2}-\d{2})[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$",
    )
    .map_err(env_err)?;
    let is_date = date.is_match(text);
    if !is_date && !time.is_match(text) {
        return Err(bad());
    }
    // SQLite rolls 2026-02-30 over to March: a day that does not exist is refused here.
    let day = &text[..10];
    if store.utc_time(day, "+0 days").map_err(env_err)?.as_deref()
        != Some(&format!("{day}T00:00:00Z"))
    {
        return Err(bad());
    }
    let shift = match (end, is_date) {
        (false, _) => "+0 days",
        (true, true) => "+1 days",
        (true, false) => "+1 seconds",
    };
    store
        .utc_time(&text.replace(['t', ' '], "T").replace('z', "Z"), shift)
        .map_err(env_err)?
        .ok_or_else(bad)
}

/// The speedup with its interval (`-` when untimed).
fn speed_text(r: &EvalResult) -> String {
    match &r.performance {
        Some(p) => {
            crate::report::speedup_cell(p.speedup, interval(p.speedup, p.speedup_interval), p.noisy)
        }
        None => "-".into(),
    }
}

/// The solution's language as stored.
fn language(e: &StoredEval) -> String {
    e.solution["language"].as_str().unwrap_or("-").to_string()
}

/// A table of `cells` under `header`, wrapped to `width` columns.
fn fitted_table<H: Into<comfy_table::Row>>(
    header: H,
    cells: Vec<Vec<String>>,
    width: usize,
) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
    t.set_width(u16::try_from(width).unwrap_or(u16::MAX));
    t.set_header(header);
    for c in cells {
        t.add_row(c);
    }
    t
}

/// `ksmith evals`: one line per stored evaluation, newest first.
/// The stored evaluations `a`'s filters select, newest first.
fn select_evals(store: &Store, a: &EvalsArgs) -> Result<Vec<ksmith_store::StoredEval>, Exit> {
    let filter = EvalFilter {
        task: a.task.clone(),
        solution: a.solution.clone(),
        status: a.status,
        since: a
            .since
            .as_deref()
            .map(|s| parse_when(store, "--since", s, false))
            .transpose()?,
        before: a
            .until
            .as_deref()
            .map(|s| parse_when(store, "--until", s, true))
            .transpose()?,
        limit: (a.limit > 0).then_some(a.limit),
    };
    let mut evals = Vec::new();
    for id in store.list_ids(&filter).map_err(env_err)? {
        evals.extend(store.get(id).map_err(env_err)?);
    }
    Ok(evals)
}

/// The evaluations `a` selects as `ksmith evals --json` prints them: `{"evals": [...]}`, each
/// with what it belongs to (bench item, agent-run snapshot, search node).
pub(crate) fn evals_json(store: &Store, a: &EvalsArgs) -> Result<serde_json::Value, Exit> {
    let evals = select_evals(store, a)?;
    let owners: Vec<Vec<Owner>> = evals
        .iter()
        .map(|e| store.owners(e.id))
        .collect::<Result<_, _>>()
        .map_err(env_err)?;
    let list: Vec<serde_json::Value> = evals
        .iter()
        .zip(&owners)
        .map(|(e, owners)| {
            let r = &e.result;
            let p = r.performance.as_ref();
            json!({
                "id": e.id, "created_at": e.created_at, "task": r.task, "solution": r.solution,
                "belongs_to": owners.iter().map(owner_json).collect::<Vec<_>>(),
                "language": language(e), "status": r.status, "reason": r.reason,
                "speedup": p.map(|p| p.speedup),
                "speedup_interval": p.map(|p| { let (lo, hi) = interval(p.speedup, p.speedup_interval); [lo, hi] }),
                "noisy": p.map(|p| p.noisy),
                "timing_unavailable": r.timing_unavailable,
                "fingerprint": r.environment.fingerprint,
            })
        })
        .collect();
    Ok(json!({ "evals": list }))
}

pub(crate) fn cmd_evals(ctx: &Ctx, a: &EvalsArgs) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    if a.json {
        crate::term::json(&evals_json(&store, a)?);
        return Ok(0);
    }
    let evals = select_evals(&store, a)?;
    if evals.is_empty() {
        say!("no stored evaluations match in {}", ctx.store_dir.display());
        return Ok(0);
    }
    let owners: Vec<Vec<Owner>> = evals
        .iter()
        .map(|e| store.owners(e.id))
        .collect::<Result<_, _>>()
        .map_err(env_err)?;
    let header = [
        "id",
        "recorded (UTC)",
        "task",
        "solution",
        "language",
        "status",
        "speedup vs XLA (95%)",
        "for",
    ];
    let mut cells: Vec<Vec<String>> = evals
        .iter()
        .zip(&owners)
        .map(|(e, owners)| {
            let of = match owners.as_slice() {
                [] => "-".to_string(),
                all => all
                    .iter()
                    .map(|o| one(&o.label()).into_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            vec![
                e.id.to_string(),
                one(&e.created_at).into_owned(),
                one(&e.result.task).into_owned(),
                one(&e.result.solution).into_owned(),
                one(&language(e)).into_owned(),
                crate::report::status_text(&e.result),
                speed_text(&e.result),
                of,
            ]
        })
        .collect();
    let width = terminal_width();
    fit_column(&header, &mut cells, 5, width);
    say!("{}", fitted_table(header, cells, width));
    let shown = evals.len();
    if a.limit > 0 && shown == a.limit {
        say!("the newest {shown} shown (--limit 0 for all); `ksmith show ID` shows one in full");
    } else {
        say!("{shown} shown; `ksmith show ID` shows one in full");
    }
    Ok(0)
}

/// One owner in JSON: `{"kind": "bench", "run": 3, "item": "softmax/fast#0"}`,
/// `{"kind": "run", "run": ID, "iteration": 2}` or `{"kind": "search", "run": ID, "node": 5}`.
fn owner_json(o: &Owner) -> serde_json::Value {
    match o {
        Owner::Bench { run, item } => json!({"kind": "bench", "run": run, "item": item}),
        Owner::Run { run, iteration } => json!({"kind": "run", "run": run, "iteration": iteration}),
        Owner::Search { run, node } => json!({"kind": "search", "run": run, "node": node}),
    }
}

/// `ksmith benches`: every bench run, newest first.
pub(crate) fn cmd_benches(ctx: &Ctx, json_out: bool) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    let runs = store.bench_runs().map_err(env_err)?;
    let geomean = |s: &[f64]| {
        (!s.is_empty()).then(|| (s.iter().map(|x| x.ln()).sum::<f64>() / s.len() as f64).exp())
    };
    if json_out {
        let list: Vec<serde_json::Value> = runs
            .iter()
            .map(|b| {
                json!({
                    "id": b.run.id, "created_at": b.run.created_at, "suite": b.run.suite,
                    "finished": b.run.finished, "tasks": b.tasks, "items": b.items,
                    "evaluated": b.evaluated, "errors": b.errors, "passed": b.passed,
                    "geomean_speedup": geomean(&b.speedups),
                })
            })
            .collect();
        crate::term::json(&json!({ "benches": list }));
        return Ok(0);
    }
    if runs.is_empty() {
        say!("no bench runs yet (start one with `ksmith bench SUITE`)");
        return Ok(0);
    }
    let mut t = crate::report::table(&[
        "bench",
        "created (UTC)",
        "suite",
        "state",
        "tasks",
        "evaluated",
        "passed",
        "geomean speedup (passed, timed)",
    ]);
    for b in &runs {
        t.add_row([
            b.run.id.to_string(),
            one(&b.run.created_at).into_owned(),
            one(&b.run.suite).into_owned(),
            if b.run.finished {
                "finished"
            } else {
                "unfinished (resumable)"
            }
            .to_string(),
            b.tasks.to_string(),
            if b.errors > 0 {
                format!("{} ({} errors)", b.evaluated, b.errors)
            } else {
                b.evaluated.to_string()
            },
            b.passed.to_string(),
            geomean(&b.speedups).map_or("-".into(), |g| format!("{g:.2}x")),
        ]);
    }
    say!("{t}");
    say!("`ksmith compare A B` compares two of them; `ksmith evals` lists their evaluations");
    Ok(0)
}

/// `--fail-if-slower`: a percentage, 0 to 1000.
fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err("expected a percentage from 0 to 1000".into()),
    }
}

/// Arguments of `ksmith compare`.
#[derive(clap::Args)]
pub(crate) struct CompareArgs {
    /// The reference: a bench run id (printed by `ksmith bench`) or an agent run id (`ksmith runs`).
    a: String,
    /// The one compared with it: a bench run id or an agent run id.
    b: String,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Regression gate: exit 1 when a task is slower in B than in A by more than PCT percent
    /// beyond the noise (the whole 95% interval of B/A below 1/(1+PCT/100)), or passed in A and
    /// fails in B; exit 2 when A and B ran on different machines or settings (no verdict).
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    fail_if_slower: Option<f64>,
    /// Call differences between results from different machines or judge settings anyway
    /// (their environment fingerprints differ); without it they are not compared.
    #[arg(long)]
    allow_different_machines: bool,
}

/// One task's result on one side.
struct Entry {
    task: String,
    solution: String,
    eval: Option<StoredEval>,
    error: Option<String>,
}

/// One side of a comparison.
struct Side {
    what: String,
    entries: Vec<Entry>,
}

impl Side {
    fn fingerprints(&self) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter_map(|e| Some(e.eval.as_ref()?.result.environment.fingerprint.clone()))
            .collect()
    }

    /// A one-line description of the machines its results came from.
    fn machines(&self) -> String {
        let mut seen: Vec<String> = self
            .entries
            .iter()
            .filter_map(|e| {
                let env = &e.eval.as_ref()?.result.environment;
                Some(format!(
                    "{} ({} threads, {}, harness {})",
                    env.cpu, env.threads, env.compiler, env.harness_version
                ))
            })
            .collect();
        seen.sort();
        seen.dedup();
        one(&seen.join("; ")).into_owned()
    }
}

/// Loads a bench run (a number) or an agent run.
fn load_side(store: &Store, id: &str) -> Result<Side, Exit> {
    if let Ok(n) = id.parse::<i64>() {
        let run = store
            .bench_run_row(n)
            .map_err(env_err)?
            .ok_or_else(|| input(anyhow!("no bench run {n} in the store (bench runs are numbered; `ksmith bench` prints its number)")))?;
        let mut by_key: BTreeMap<(String, String), Vec<Entry>> = BTreeMap::new();
        let mut order = Vec::new();
        for it in store.bench_items(n).map_err(env_err)? {
            // `task/label#repeat`; labels are directory names (no `/`).
            let head = it
                .item
                .rsplit_once('#')
                .map_or(it.item.as_str(), |(h, _)| h);
            let (task, label) = head.rsplit_once('/').unwrap_or((head, ""));
            let key = (task.to_string(), label.to_string());
            let eval = match it.eval_id {
                Some(e) => store.get(e).map_err(env_err)?,
                None => None,
            };
            if !by_key.contains_key(&key) {
                order.push(key.clone());
            }
            by_key.entry(key.clone()).or_default().push(Entry {
                task: key.0,
                solution: key.1,
                eval,
                error: it.error,
            });
        }
        // Repeats of one item: the first that passed stands for it.
        let entries = order
            .iter()
            .filter_map(|k| {
                let mut list = by_key.remove(k)?;
                let pick = list
                    .iter()
                    .position(|e| {
                        e.eval
                            .as_ref()
                            .is_some_and(|v| v.result.status == Status::Passed)
                    })
                    .unwrap_or(0);
                Some(list.swap_remove(pick))
            })
            .collect();
        let what = format!(
            "bench run {n} ({}, {}{})",
            one(&run.suite),
            run.created_at,
            if run.finished { "" } else { ", unfinished" }
        );
        return Ok(Side { what, entries });
    }
    let run = store.run(id).map_err(env_err)?.ok_or_else(|| {
        input(anyhow!(
            "{}: neither a bench run (a number) nor an agent run in the store",
            one(id)
        ))
    })?;
    // An agent run's result is the kernel it wrote: the winner of its final judgement, as
    // re-checked and timed together with the other finalists. A run without one (stopped
    // before it, or stored before final judgements were kept) stands by its fastest passing
    // step (else its last evaluated one).
    let search = run.mode == "search";
    let step = |n: u64| {
        if search {
            format!("node {n}")
        } else {
            format!("iteration {n}")
        }
    };
    let written = ksmith_search::finalize::recorded_final(store, id).and_then(|rec| {
        let w = rec.node?;
        let eval = rec.finalists.iter().find(|f| f.node == w)?.eval_id?;
        Some((w, eval))
    });
    let mut best: Option<(String, StoredEval)> = None;
    if let Some((w, eid)) = written {
        if let Some(ev) = store.get(eid).map_err(env_err)? {
            best = Some((format!("{} (written)", step(w)), ev));
        }
    }
    if best.is_none() {
        // (step, evaluation id) of every evaluated step.
        let steps: Vec<(u64, i64)> = if search {
            store
                .search_nodes(id)
                .map_err(env_err)?
                .iter()
                .filter_map(|r| {
                    let n: ksmith_search::Node = serde_json::from_str(&r.payload).ok()?;
                    Some((n.id.0, n.outcome.eval_id?))
                })
                .collect()
        } else {
            store
                .snapshots(id)
                .map_err(env_err)?
                .iter()
                .filter_map(|s| Some((u64::from(s.iteration), s.eval_id?)))
                .collect()
        };
        let speed = |e: &StoredEval| {
            (e.result.status == Status::Passed)
                .then(|| e.result.performance.as_ref().map(|p| p.speedup))
        };
        for (n, eid) in steps {
            let Some(ev) = store.get(eid).map_err(env_err)? else {
                continue;
            };
            let better = match &best {
                None => true,
                Some((_, b)) => match (speed(&ev), speed(b)) {
                    (Some(x), Some(y)) => x.unwrap_or(0.0) > y.unwrap_or(0.0),
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => true,
                },
            };
            if better {
                best = Some((step(n), ev));
            }
        }
    }
    let entry = match best {
        Some((solution, ev)) => Entry {
            task: run.task.clone(),
            solution,
            eval: Some(ev),
            error: None,
        },
        None => Entry {
            task: run.task.clone(),
            solution: "-".into(),
            eval: None,
            error: Some("no evaluated step".into()),
        },
    };
    Ok(Side {
        what: format!(
            "agent run {} ({}, {})",
            one(id),
            one(&run.task),
            run.created_at
        ),
        entries: vec![entry],
    })
}

/// One task compared.
struct Line<'a> {
    task: String,
    a: Option<&'a Entry>,
    b: Option<&'a Entry>,
    ratio: Option<compare::Figure>,
    verdict: compare::Verdict,
    regression: bool,
}

fn passed(e: Option<&Entry>) -> Option<&EvalResult> {
    e?.eval
        .as_ref()
        .map(|v| &v.result)
        .filter(|r| r.status == Status::Passed)
}

/// A side's result for the compare rule.
fn result_side(e: Option<&Entry>) -> compare::Side<'_> {
    match (e, passed(e)) {
        (None, _) => compare::Side::Missing,
        (Some(_), None) => compare::Side::Failed,
        (Some(_), Some(r)) => compare::Side::Passed {
            timing: r
                .performance
                .as_ref()
                .map(|p| (p.speedup, p.speedup_interval)),
            task_hash: &r.task_hash,
        },
    }
}

fn cell(e: Option<&Entry>) -> String {
    match e {
        None => "-".into(),
        Some(e) => match (&e.eval, &e.error) {
            (Some(v), _) if v.result.status == Status::Passed => {
                let s = speed_text(&v.result);
                if s == "-" {
                    "PASSED (untimed)".into()
                } else {
                    s
                }
            }
            (Some(v), _) => crate::report::status_text(&v.result),
            (None, Some(err)) => format!("ERROR: {}", one(err)),
            (None, None) => "-".into(),
        },
    }
}

/// `ksmith compare A B`: per task, A's and B's speedup vs XLA, B/A with its interval and a verdict.
pub(crate) fn cmd_compare(ctx: &Ctx, args: &CompareArgs) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    let a = load_side(&store, &args.a)?;
    let b = load_side(&store, &args.b)?;
    let (fa, fb) = (a.fingerprints(), b.fingerprints());
    let same_machine = fa.is_empty() || fb.is_empty() || (fa == fb && fa.len() == 1);
    let call = same_machine || args.allow_different_machines;
    // Match by task when each side has one solution per task (fast vs naive runs), else by
    // task and solution label.
    let unique = |s: &Side| {
        let tasks: BTreeSet<&str> = s.entries.iter().map(|e| e.task.as_str()).collect();
        tasks.len() == s.entries.len()
    };
    let by_task = unique(&a) && unique(&b);
    let key = |e: &Entry| {
        if by_task {
            e.task.clone()
        } else {
            format!("{} [{}]", e.task, e.solution)
        }
    };
    let mut keys: Vec<String> = Vec::new();
    for e in a.entries.iter().chain(&b.entries) {
        if !keys.contains(&key(e)) {
            keys.push(key(e));
        }
    }
    let lines: Vec<Line> = keys
        .into_iter()
        .map(|k| {
            let ea = a.entries.iter().find(|e| key(e) == k);
            let eb = b.entries.iter().find(|e| key(e) == k);
            let Pair {
                ratio,
                verdict,
                regression,
            } = decide_pair(result_side(ea), result_side(eb), call, args.fail_if_slower);
            Line {
                task: k,
                a: ea,
                b: eb,
                ratio,
                verdict,
                regression,
            }
        })
        .collect();
    let timed: Vec<f64> = lines
        .iter()
        .filter(|l| l.verdict.compared())
        .filter_map(|l| l.ratio.map(|r| r.0))
        .collect();
    let geomean = (!timed.is_empty()).then(|| ksmith_judge::geomean(timed.iter().copied()));
    let regressions: Vec<&Line> = lines.iter().filter(|l| l.regression).collect();
    if args.json {
        let side = |s: &Side, f: &BTreeSet<String>| json!({"what": s.what, "fingerprints": f});
        let entry = |e: Option<&Entry>| {
            e.map(|e| {
                let r = e.eval.as_ref().map(|v| &v.result);
                let p = r.and_then(|r| r.performance.as_ref());
                json!({
                    "solution": e.solution,
                    "eval_id": e.eval.as_ref().map(|v| v.id),
                    "status": r.map(|r| r.status),
                    "reason": r.and_then(|r| r.reason.clone()),
                    "error": e.error,
                    "speedup": p.map(|p| p.speedup),
                    "speedup_interval": p.map(|p| { let (lo, hi) = interval(p.speedup, p.speedup_interval); [lo, hi] }),
                    "noisy": p.map(|p| p.noisy),
                })
            })
        };
        let v = json!({
            "a": side(&a, &fa),
            "b": side(&b, &fb),
            "same_machine": same_machine,
            "tasks": lines.iter().map(|l| json!({
                "task": l.task,
                "a": entry(l.a),
                "b": entry(l.b),
                "ratio": l.ratio.map(|r| r.0),
                "ratio_interval": l.ratio.map(|(_, (lo, hi))| [lo, hi]),
                "verdict": l.verdict.as_str(),
                "regression": l.regression,
            })).collect::<Vec<_>>(),
            "geomean_ratio": geomean,
            "gate": args.fail_if_slower.map(|pct| json!({
                "fail_if_slower_pct": pct,
                "regressions": regressions.iter().map(|l| l.task.clone()).collect::<Vec<_>>(),
                "passed": regressions.is_empty() && call,
            })),
        });
        crate::term::json(&v);
    } else {
        say!("A: {}", a.what);
        say!("B: {}", b.what);
        let header = [
            "task",
            "A: speedup vs XLA (95%)",
            "B: speedup vs XLA (95%)",
            "B/A (95%)",
            "verdict",
        ];
        let mut cells: Vec<Vec<String>> = lines
            .iter()
            .map(|l| {
                vec![
                    one(&l.task).into_owned(),
                    cell(l.a),
                    cell(l.b),
                    l.ratio
                        .map(|(r, i)| ratio(r, i))
                        .unwrap_or_else(|| "-".into()),
                    format!(
                        "{}{}",
                        l.verdict.as_str(),
                        if l.regression { "  REGRESSION" } else { "" }
                    ),
                ]
            })
            .collect();
        let width = terminal_width();
        fit_column(&header, &mut cells, 2, width);
        fit_column(&header, &mut cells, 1, width);
        say!("{}", fitted_table(header, cells, width));
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for l in &lines {
            *counts.entry(l.verdict.as_str()).or_default() += 1;
        }
        let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        say!(
            "{}; geomean B/A over tasks timed on both sides: {}",
            counts.join(", "),
            geomean
                .map(|g| format!("{g:.2}x"))
                .unwrap_or_else(|| "-".into())
        );
        say!("B/A > 1: B is faster; the interval combines both sides' 95% intervals; a verdict is called only when it excludes 1");
        if let Some(pct) = args.fail_if_slower {
            if regressions.is_empty() && call {
                say!("gate: passed (no task slower than in A by more than {pct}% beyond the noise, none broke)");
            } else if !regressions.is_empty() {
                let names: Vec<String> = regressions
                    .iter()
                    .map(|l| one(&l.task).into_owned())
                    .collect();
                say!(
                    "gate: FAILED: {} slower than in A by more than {pct}% beyond the noise, or broke: {}",
                    names.len(),
                    names.join(", ")
                );
            }
        }
    }
    if !same_machine {
        note!(
            "ksmith: WARNING: A and B ran on different machines or judge settings (environment fingerprints differ); {}\n  A: {}\n  B: {}",
            if call {
                "differences were called anyway (--allow-different-machines) and may be the machines'"
            } else {
                "their speeds are not compared (--allow-different-machines compares them anyway)"
            },
            a.machines(),
            b.machines()
        );
        if args.fail_if_slower.is_some() && !call {
            return Err(input(anyhow!(
                "--fail-if-slower: A and B ran on different machines or judge settings; no verdict (pass --allow-different-machines to gate anyway)"
            )));
        }
    }
    Ok(if regressions.is_empty() {
        0
    } else {
        EXIT_REGRESSION
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_cells_are_cut_to_the_width() {
        let header = ["a", "status"];
        let mut cells = vec![vec!["x".to_string(), "E".repeat(200)]];
        fit_column(&header, &mut cells, 1, 80);
        let n = cells[0][1].chars().count();
        // `│ x │ ... │`: 8 columns of borders, padding and the first cell.
        assert_eq!(n, 80 - 8);
        assert!(cells[0][1].ends_with('…'));
        let mut short = vec![vec!["x".to_string(), "PASSED".to_string()]];
        fit_column(&header, &mut short, 1, 80);
        assert_eq!(short[0][1], "PASSED");
    }

    #[test]
    fn output_files_need_a_known_extension() {
        assert_eq!(Format::of_file(Path::new("a.CSV")).unwrap(), Format::Csv);
        assert_eq!(
            Format::of_file(Path::new("a.md")).unwrap(),
            Format::Markdown
        );
        assert!(Format::of_file(Path::new("a.txt")).is_err());
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }
}
