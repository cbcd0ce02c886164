//! `ksmith runs`, `ksmith show RUN`, `ksmith calls RUN`.

use crate::term::one;
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_store::{RunHolder, RunRow, RunStatus, Store};
use ksmith_task::{Solution, Task};
use std::path::{Path, PathBuf};

/// Where a run stands as shown: a `running` run whose process is gone (its run lock is free:
/// killed, crashed, machine rebooted) is shown as interrupted, and resumes like one.
struct Shown {
    status: RunStatus,
    /// The pid driving it, when running and known.
    pid: Option<u32>,
    /// Marked running, but no process holds it.
    gone: bool,
}

impl Shown {
    fn of(store: &Store, run: &RunRow) -> Shown {
        if run.status != RunStatus::Running {
            return Shown {
                status: run.status,
                pid: None,
                gone: false,
            };
        }
        match store.run_holder(&run.id) {
            RunHolder::Held(pid) => Shown {
                status: RunStatus::Running,
                pid,
                gone: false,
            },
            RunHolder::Free => Shown {
                status: RunStatus::Interrupted,
                pid: None,
                gone: true,
            },
        }
    }

    fn text(&self) -> String {
        match (self.status, self.pid, self.gone) {
            (_, _, true) => "interrupted (process gone)".to_string(),
            (RunStatus::Running, Some(pid), _) => format!("running (pid {pid})"),
            (s, ..) => s.to_string(),
        }
    }

    fn why(&self, run: &RunRow) -> String {
        if self.gone {
            return "its process ended without a word (killed or crashed); `ksmith resume` continues it".into();
        }
        run.stop_reason.clone().unwrap_or_default()
    }
}

/// Failed LLM calls among `calls`.
fn failed(calls: &[ksmith_store::CallRow]) -> usize {
    calls.iter().filter(|c| c.error.is_some()).count()
}

/// What `runs` shows of a run beyond its row: its kind, steps, best figure and final judgement.
struct RunSummary {
    /// A graph search (else a serial run).
    search: bool,
    /// Snapshots or nodes.
    steps: usize,
    /// The best speedup any step measured.
    best: Option<f64>,
    /// The final judgement, when recorded.
    finals: Option<ksmith_search::finalize::FinalRecord>,
}

impl RunSummary {
    fn of(store: &Store, r: &RunRow) -> Result<RunSummary, Exit> {
        let (search, steps) = steps(store, r)?;
        Ok(RunSummary {
            search,
            steps: steps.len(),
            best: steps
                .iter()
                .filter_map(|s| s.speedup)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
            finals: ksmith_search::finalize::recorded_final(store, &r.id),
        })
    }
}

/// One row of `ksmith runs --json`.
fn run_row_json(
    r: &RunRow,
    shown: &Shown,
    calls: usize,
    failed_calls: usize,
    sum: &RunSummary,
) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "created_at": r.created_at, "updated_at": r.updated_at,
        "task": r.task, "task_dir": r.task_dir, "model": r.model, "mode": r.mode,
        "status": shown.status.as_str(), "stored_status": r.status.as_str(),
        "process_gone": shown.gone, "pid": shown.pid,
        "calls": calls, "failed_calls": failed_calls,
        "best_speedup": sum.best, "stop_reason": r.stop_reason, "active_s": r.active_s,
        "out_dir": r.out_dir, "kind": if sum.search { "search" } else { "serial" },
        "steps": sum.steps, "final": sum.finals,
    })
}

/// Every run as `ksmith runs --json` lists it (`{"runs": [...]}`), newest first.
pub(crate) fn runs_json(store: &Store) -> Result<serde_json::Value, Exit> {
    let mut rows = Vec::new();
    for r in store.runs().map_err(env_err)? {
        let calls = store.calls(&r.id).map_err(env_err)?;
        let sum = RunSummary::of(store, &r)?;
        let shown = Shown::of(store, &r);
        rows.push(run_row_json(&r, &shown, calls.len(), failed(&calls), &sum));
    }
    Ok(serde_json::json!({ "runs": rows }))
}

/// `ksmith runs`: every run, newest first.
pub(crate) fn cmd_runs(ctx: &Ctx, json: bool) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    if json {
        let v = runs_json(&store)?;
        crate::term::json(&serde_json::to_string_pretty(&v).map_err(env_err)?);
        return Ok(0);
    }
    let runs = store.runs().map_err(env_err)?;
    if runs.is_empty() {
        say!("no runs yet (start one with `ksmith optimize TASK --model PROVIDER:MODEL`)");
        return Ok(0);
    }
    let mut t = crate::report::table(&[
        "run", "created", "task", "model", "mode", "status", "calls", "best", "winner", "why",
    ]);
    for r in runs {
        let calls = store.calls(&r.id).map_err(env_err)?;
        let sum = RunSummary::of(&store, &r)?;
        let best = sum.best;
        // The kernel the run wrote (its final judgement), which need not be the best first
        // figure.
        let winner = sum.finals.as_ref().map(|f| match f.node {
            Some(n) => step_name(sum.search, n),
            None => "none held up".to_string(),
        });
        let shown = Shown::of(&store, &r);
        t.add_row([
            one(&r.id).into_owned(),
            one(&r.created_at).into_owned(),
            one(&r.task).into_owned(),
            one(&r.model).into_owned(),
            one(&r.mode).into_owned(),
            shown.text(),
            calls.len().to_string(),
            best.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
            winner.unwrap_or("-".into()),
            short(&shown.why(&r), 70),
        ]);
    }
    say!("{t}");
    Ok(0)
}

/// The first line of a message, cut to `n` characters, escaped.
fn short(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() <= n {
        return one(line).into_owned();
    }
    let mut t: String = line.chars().take(n).collect();
    t.push('…');
    one(&t).into_owned()
}

/// One step of a run as listed: a serial run's snapshot or a search's node.
struct Step {
    /// Iteration or node id.
    id: u64,
    /// The node it grew from (searches; a serial run's steps form a chain).
    parent: Option<u64>,
    /// Its status (`PASSED`, a node state such as `duplicate`, ...).
    status: String,
    /// Speedup over XLA when it passed and was timed, with its interval when kept.
    speedup: Option<f64>,
    /// 95% interval of the speedup (searches).
    interval: Option<(f64, f64)>,
    /// Median latency (serial runs).
    latency_ms: Option<f64>,
    /// Its stored evaluation.
    eval_id: Option<i64>,
    /// What it tried: the snapshot's summary or the node's hint and plan title.
    what: String,
}

/// Whether `run` is a graph search, and its steps.
fn steps(store: &Store, run: &RunRow) -> Result<(bool, Vec<Step>), Exit> {
    let nodes = store.search_nodes(&run.id).map_err(env_err)?;
    if nodes.is_empty() {
        let snaps = store.snapshots(&run.id).map_err(env_err)?;
        let mut prev = None;
        let steps = snaps
            .into_iter()
            .map(|s| {
                let it = s.iteration as u64;
                let step = Step {
                    id: it,
                    parent: prev,
                    status: s.status,
                    speedup: s.speedup,
                    interval: None,
                    latency_ms: s.latency_ms,
                    eval_id: s.eval_id,
                    what: s.summary,
                };
                prev = Some(it);
                step
            })
            .collect();
        return Ok((false, steps));
    }
    let steps = nodes
        .into_iter()
        .map(|r| {
            let node: Option<ksmith_search::Node> = serde_json::from_str(&r.payload).ok();
            let (status, interval, eval_id, what) = match &node {
                Some(n) => (
                    match (n.state, n.outcome.status) {
                        (ksmith_search::NodeState::Done, Some(st)) => st.to_string(),
                        (state, _) => state.as_str().to_string(),
                    },
                    n.outcome.interval,
                    n.outcome.eval_id,
                    format!("[{}] {}", n.hint, ksmith_search::node::plan_title(&n.plan)),
                ),
                None => (r.state.clone(), None, None, String::new()),
            };
            Step {
                id: r.id,
                parent: r.parent,
                status,
                speedup: r.speedup,
                interval,
                latency_ms: None,
                eval_id,
                what,
            }
        })
        .collect();
    Ok((true, steps))
}

/// `iteration 2`, `node 4`.
fn step_name(search: bool, id: u64) -> String {
    if search {
        format!("node {id}")
    } else {
        format!("iteration {id}")
    }
}

fn load_run(ctx: &Ctx, id: &str) -> Result<(Store, RunRow), Exit> {
    let store = ctx.store_read()?;
    let run = store.run(id).map_err(env_err)?.ok_or_else(|| {
        input(anyhow!(
            "no run `{id}` in {} (see `ksmith runs`)",
            ctx.store_dir.display()
        ))
    })?;
    Ok((store, run))
}

/// Each snapshot with code as a solution directory `DIR/iterN` (the language and entry point of
/// the run's start), so that they can be judged again, e.g. side by side with
/// `ksmith eval TASK DIR/iter0 DIR/iter1 ...`.
fn write_snapshots(
    store: &Store,
    run: &RunRow,
    snaps: &[ksmith_store::SnapshotRow],
    dir: &Path,
) -> Result<Vec<PathBuf>, Exit> {
    let options: serde_json::Value = serde_json::from_str(&run.options).map_err(env_err)?;
    let from = options["from"]
        .as_str()
        .ok_or_else(|| env_err(anyhow!("run {}: no starting solution recorded", run.id)))?;
    let task = Task::load(Path::new(&run.task_dir)).map_err(|p| {
        input(anyhow!(
            "{}: the run's task cannot be loaded: {}",
            run.task_dir,
            p.0.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })?;
    let start = Solution::load(Path::new(from), &task).map_err(|p| {
        input(anyhow!(
            "{from}: the run's starting solution cannot be loaded: {}",
            p.0.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })?;
    let mut written = Vec::new();
    for sn in snaps {
        let stored: serde_json::Value = serde_json::from_str(&sn.sources).unwrap_or_default();
        let Some(files) = stored["files"].as_object() else {
            continue; // NO_CANDIDATE: nothing was written that iteration
        };
        let mut sources = Vec::new();
        for (name, hash) in files {
            // Names come from the store: never a path outside the solution directory.
            if !ksmith_task::is_safe_source_path(name) {
                return Err(env_err(anyhow!(
                    "snapshot {}: unsafe file name {name:?}",
                    sn.iteration
                )));
            }
            let hash = hash.as_str().unwrap_or_default();
            let bytes = store.artifact(hash).map_err(env_err)?;
            let text = String::from_utf8(bytes)
                .map_err(|_| env_err(anyhow!("snapshot {}: {name} is not UTF-8", sn.iteration)))?;
            sources.push((name.clone(), text));
        }
        let Some((file, text)) = sources.first().cloned() else {
            continue;
        };
        let flags = string_list(&stored["flags"]);
        let mut sol = Solution::from_source(
            &format!("{}-iter{}", task.name, sn.iteration),
            start.language,
            &start.entry_point,
            &file,
            text,
            flags,
        );
        sol.sources = sources;
        written.push(write_new(&sol, dir.join(format!("iter{}", sn.iteration)))?);
    }
    Ok(written)
}

/// The strings of a JSON array (none when it is not one).
fn string_list(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// Writes `sol` as the solution directory `out`, which must not exist (nothing is overwritten).
fn write_new(sol: &Solution, out: PathBuf) -> Result<PathBuf, Exit> {
    if out.exists() {
        return Err(input(anyhow!(
            "{}: already exists; nothing is overwritten (choose another --write directory)",
            out.display()
        )));
    }
    crate::tune::write_solution(sol, &out, "", "")
        .map_err(|e| env_err(anyhow!("{}: {e}", out.display())))?;
    Ok(out)
}

/// Each search node with a stored evaluation as a solution directory `DIR/nodeN`, rebuilt
/// from that evaluation (its language, entry point, flags and sources).
fn write_nodes(store: &Store, steps: &[Step], dir: &Path) -> Result<Vec<PathBuf>, Exit> {
    let mut written = Vec::new();
    for n in steps {
        let Some(stored) = n.eval_id.and_then(|e| store.get(e).ok().flatten()) else {
            continue;
        };
        let language: ksmith_task::Language =
            serde_json::from_value(stored.solution["language"].clone())
                .map_err(|e| env_err(anyhow!("node {}: stored language: {e}", n.id)))?;
        let entry = stored.solution["entry_point"].as_str().unwrap_or_default();
        let flags = string_list(&stored.solution["flags"]);
        let mut sources = Vec::new();
        for (name, hash) in &stored.sources {
            // Names come from the store: never a path outside the solution directory.
            if !ksmith_task::is_safe_source_path(name) {
                return Err(env_err(anyhow!("node {}: unsafe file name {name:?}", n.id)));
            }
            let text = String::from_utf8(store.artifact(hash).map_err(env_err)?)
                .map_err(|_| env_err(anyhow!("node {}: {name} is not UTF-8", n.id)))?;
            sources.push((name.clone(), text));
        }
        let Some((file, text)) = sources.first().cloned() else {
            continue;
        };
        let task = stored.task["name"].as_str().unwrap_or("task");
        let mut sol = Solution::from_source(
            &format!("{task}-node{}", n.id),
            language,
            entry,
            &file,
            text,
            flags,
        );
        sol.sources = sources;
        written.push(write_new(&sol, dir.join(format!("node{}", n.id)))?);
    }
    Ok(written)
}

/// `ksmith show RUN`: the run, its snapshots and its accounting.
pub(crate) fn cmd_show_run(
    ctx: &Ctx,
    id: &str,
    json: bool,
    write: Option<&Path>,
) -> Result<u8, Exit> {
    let (store, run) = load_run(ctx, id)?;
    let snaps = store.snapshots(id).map_err(env_err)?;
    let (search, steps) = steps(&store, &run)?;
    let finals = ksmith_search::finalize::recorded_final(&store, id);
    if let Some(dir) = write {
        let written = if search {
            write_nodes(&store, &steps, dir)?
        } else {
            write_snapshots(&store, &run, &snaps, dir)?
        };
        for p in &written {
            say!("{}", one(&p.display().to_string()));
        }
        note!(
            "ksmith: {} {} written; re-time them side by side with `ksmith eval {} {}`",
            written.len(),
            if search { "nodes" } else { "snapshots" },
            one(&run.task_dir),
            written
                .iter()
                .map(|p| one(&p.display().to_string()).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        return Ok(0);
    }
    let calls = store.calls(id).map_err(env_err)?;
    let (tin, tout, cost) = calls.iter().fold((0u64, 0u64, 0.0f64), |a, c| {
        (a.0 + c.tokens_in, a.1 + c.tokens_out, a.2 + c.cost)
    });
    let shown = Shown::of(&store, &run);
    if json {
        let v = run_json(&store, &run)?;
        crate::term::json(&serde_json::to_string_pretty(&v).map_err(env_err)?);
        return Ok(0);
    }
    say!(
        "run {}  ({} mode, {})",
        one(&run.id),
        one(&run.mode),
        shown.text()
    );
    say!(
        "task {} ({}), tests hash {}",
        one(&run.task),
        one(&run.task_dir),
        one(&run.tests_hash)
    );
    say!(
        "model {}; created {}, updated {}, {:.0} s active",
        one(&run.model),
        run.created_at,
        run.updated_at,
        run.active_s
    );
    if shown.gone {
        say!("ended: {}", shown.why(&run));
    } else if let Some(r) = &run.stop_reason {
        say!("ended: {}", crate::term::continued(r, "  "));
    }
    if let Some(o) = &run.out_dir {
        say!("output: {}", one(o));
    }
    say!(
        "LLM: {} calls, {tin} tokens in, {tout} out, ${cost:.4}",
        calls.len()
    );
    let header: &[&str] = if search {
        &[
            "node",
            "parent",
            "status",
            "speedup",
            "95%",
            "evaluation",
            "what",
        ]
    } else {
        &[
            "iteration",
            "status",
            "speedup",
            "latency ms",
            "evaluation",
            "what",
        ]
    };
    let mut t = crate::report::table(header);
    let winner = finals.as_ref().and_then(|f| f.node);
    for s in &steps {
        let mut row = vec![format!(
            "{}{}",
            s.id,
            if Some(s.id) == winner {
                " (winner)"
            } else {
                ""
            }
        )];
        if search {
            row.push(s.parent.map_or("-".into(), |p| p.to_string()));
        }
        row.push(one(&s.status).into_owned());
        row.push(s.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()));
        row.push(if search {
            s.interval
                .map(|(a, b)| format!("{a:.2}-{b:.2}"))
                .unwrap_or("-".into())
        } else {
            s.latency_ms
                .map(|x| format!("{x:.3}"))
                .unwrap_or("-".into())
        });
        row.push(s.eval_id.map(|x| x.to_string()).unwrap_or("-".into()));
        row.push(short(&s.what, 70));
        t.add_row(row);
    }
    say!("{t}");
    match &finals {
        Some(f) => {
            for row in &f.finalists {
                say!("{}", row.line(f.node));
            }
            say!(
                "decided: {}{}",
                one(&f.summary),
                f.node
                    .map(|n| format!("; written: {}", step_name(search, n)))
                    .unwrap_or_default()
            );
        }
        None if shown.status == RunStatus::Finished => {
            say!("no final judgement recorded (a run from an older version)")
        }
        None => say!("no final judgement yet: the run has not finished"),
    }
    if shown.status != RunStatus::Finished && shown.status != RunStatus::Running {
        say!("continue with `ksmith resume {}`", one(&run.id));
    }
    Ok(0)
}

/// One run as `ksmith show RUN --json` prints it (also the MCP server's `show` of a run).
pub(crate) fn run_json(store: &Store, run: &RunRow) -> Result<serde_json::Value, Exit> {
    let snaps = store.snapshots(&run.id).map_err(env_err)?;
    let calls = store.calls(&run.id).map_err(env_err)?;
    let (tin, tout, cost) = calls.iter().fold((0u64, 0u64, 0.0f64), |a, c| {
        (a.0 + c.tokens_in, a.1 + c.tokens_out, a.2 + c.cost)
    });
    let shown = Shown::of(store, run);
    let (search, steps) = steps(store, run)?;
    let finals = ksmith_search::finalize::recorded_final(store, &run.id);
    Ok(serde_json::json!({
        "id": run.id, "task": run.task, "task_dir": run.task_dir, "tests_hash": run.tests_hash,
        "model": run.model, "mode": run.mode, "status": shown.status.as_str(),
        "stored_status": run.status.as_str(), "process_gone": shown.gone, "pid": shown.pid,
        "stop_reason": run.stop_reason,
        "created_at": run.created_at, "updated_at": run.updated_at, "active_s": run.active_s,
        "out_dir": run.out_dir,
        "options": serde_json::from_str::<serde_json::Value>(&run.options).unwrap_or_default(),
        "llm": {"calls": calls.len(), "failed": calls.iter().filter(|c| c.error.is_some()).count(),
                "tokens_in": tin, "tokens_out": tout, "cost": cost},
        "snapshots": snaps.iter().map(|s| serde_json::json!({
            "iteration": s.iteration, "status": s.status, "speedup": s.speedup,
            "latency_ms": s.latency_ms, "eval_id": s.eval_id, "summary": s.summary})).collect::<Vec<_>>(),
        "kind": if search { "search" } else { "serial" },
        "nodes": if search { steps.iter().map(|n| serde_json::json!({
            "node": n.id, "parent": n.parent, "status": n.status, "speedup": n.speedup,
            "interval": n.interval, "eval_id": n.eval_id, "what": n.what})).collect::<Vec<_>>() } else { Vec::new() },
        "final": finals,
    }))
}

/// `ksmith calls RUN`: every LLM call of a run.
pub(crate) fn cmd_calls(ctx: &Ctx, id: &str, full: bool, json: bool) -> Result<u8, Exit> {
    let (store, _) = load_run(ctx, id)?;
    let calls = store.calls(id).map_err(env_err)?;
    if json {
        let rows: Vec<serde_json::Value> = calls
            .iter()
            .map(|c| {
                let mut v = serde_json::json!({
                    "seq": c.seq, "created_at": c.created_at, "role": c.role, "step": c.step,
                    "model": c.model, "tokens_in": c.tokens_in, "tokens_out": c.tokens_out,
                    "estimated": c.estimated, "cost": c.cost, "latency_ms": c.latency_ms,
                    "attempts": c.attempts, "error": c.error, "reply_chars": c.reply.chars().count(),
                });
                if full {
                    v["system"] = serde_json::json!(c.system);
                    v["prompt"] = serde_json::json!(c.prompt);
                    v["reply"] = serde_json::json!(c.reply);
                }
                v
            })
            .collect();
        let v = serde_json::json!({
            "run": id,
            "calls": rows,
            "totals": {
                "calls": calls.len(),
                "failed": calls.iter().filter(|c| c.error.is_some()).count(),
                "tokens_in": calls.iter().map(|c| c.tokens_in).sum::<u64>(),
                "tokens_out": calls.iter().map(|c| c.tokens_out).sum::<u64>(),
                "cost": calls.iter().map(|c| c.cost).sum::<f64>(),
            },
        });
        crate::term::json(&serde_json::to_string_pretty(&v).map_err(env_err)?);
        return Ok(0);
    }
    if full {
        for c in &calls {
            say!(
                "===== call {} ({}, {}) =====",
                c.seq,
                one(&c.role),
                one(&c.step)
            );
            say!(
                "--- system ---\n{}\n--- prompt ---\n{}\n--- reply ---\n{}",
                c.system,
                c.prompt,
                c.reply
            );
            if let Some(e) = &c.error {
                say!("--- error ---\n{e}");
            }
        }
        return Ok(0);
    }
    let mut t = crate::report::table(&[
        "#",
        "time",
        "role",
        "step",
        "tokens in",
        "tokens out",
        "cost $",
        "latency s",
        "tries",
        "result",
    ]);
    for c in &calls {
        t.add_row([
            c.seq.to_string(),
            c.created_at.clone(),
            one(&c.role).into_owned(),
            one(&c.step).into_owned(),
            format!("{}{}", c.tokens_in, if c.estimated { "~" } else { "" }),
            format!("{}{}", c.tokens_out, if c.estimated { "~" } else { "" }),
            format!("{:.4}", c.cost),
            format!("{:.1}", c.latency_ms / 1e3),
            c.attempts.to_string(),
            c.error
                .as_deref()
                .map(|e| one(e).into_owned())
                .unwrap_or_else(|| format!("{} chars", c.reply.len())),
        ]);
    }
    say!("{t}");
    say!("(~ = estimated by the provider adapter; `--full` prints prompts and replies)");
    Ok(0)
}
