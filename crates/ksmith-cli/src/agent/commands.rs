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

/// The best snapshot speedup of a run.
fn best_speedup(store: &Store, id: &str) -> Result<Option<f64>, Exit> {
    Ok(store
        .snapshots(id)
        .map_err(env_err)?
        .iter()
        .filter_map(|s| s.speedup)
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))))
}

/// One row of `ksmith runs --json`.
fn run_row_json(
    r: &RunRow,
    shown: &Shown,
    calls: usize,
    failed_calls: usize,
    best: Option<f64>,
) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "created_at": r.created_at, "updated_at": r.updated_at,
        "task": r.task, "task_dir": r.task_dir, "model": r.model, "mode": r.mode,
        "status": shown.status.as_str(), "stored_status": r.status.as_str(),
        "process_gone": shown.gone, "pid": shown.pid,
        "calls": calls, "failed_calls": failed_calls,
        "best_speedup": best, "stop_reason": r.stop_reason, "active_s": r.active_s,
        "out_dir": r.out_dir,
    })
}

/// Every run as `ksmith runs --json` lists it (`{"runs": [...]}`), newest first.
pub(crate) fn runs_json(store: &Store) -> Result<serde_json::Value, Exit> {
    let mut rows = Vec::new();
    for r in store.runs().map_err(env_err)? {
        let calls = store.calls(&r.id).map_err(env_err)?;
        let best = best_speedup(store, &r.id)?;
        let shown = Shown::of(store, &r);
        rows.push(run_row_json(&r, &shown, calls.len(), failed(&calls), best));
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
        "run", "created", "task", "model", "mode", "status", "calls", "best", "why",
    ]);
    for r in runs {
        let calls = store.calls(&r.id).map_err(env_err)?;
        let best = best_speedup(&store, &r.id)?;
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
        let flags = stored["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();
        let mut sol = Solution::from_source(
            &format!("{}-iter{}", task.name, sn.iteration),
            start.language,
            &start.entry_point,
            &file,
            text,
            flags,
        );
        sol.sources = sources;
        let out = dir.join(format!("iter{}", sn.iteration));
        if out.exists() {
            return Err(input(anyhow!(
                "{}: already exists; nothing is overwritten (choose another --write directory)",
                out.display()
            )));
        }
        crate::tune::write_solution(&sol, &out, "", "")
            .map_err(|e| env_err(anyhow!("{}: {e}", out.display())))?;
        written.push(out);
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
    if let Some(dir) = write {
        let written = write_snapshots(&store, &run, &snaps, dir)?;
        for p in &written {
            say!("{}", one(&p.display().to_string()));
        }
        note!(
            "ksmith: {} snapshots written; re-time them side by side with `ksmith eval {} {}`",
            written.len(),
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
    let mut t = crate::report::table(&[
        "iteration",
        "status",
        "speedup",
        "latency ms",
        "evaluation",
        "what",
    ]);
    for s in &snaps {
        t.add_row([
            s.iteration.to_string(),
            one(&s.status).into_owned(),
            s.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
            s.latency_ms
                .map(|x| format!("{x:.3}"))
                .unwrap_or("-".into()),
            s.eval_id.map(|x| x.to_string()).unwrap_or("-".into()),
            one(&s.summary).into_owned(),
        ]);
    }
    say!("{t}");
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
