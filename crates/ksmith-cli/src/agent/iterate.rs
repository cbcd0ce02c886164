//! The autonomous loop: plan → implement → build/test (+ fix loops) → autotune → profile →
//! snapshot, then roll back to the fastest correct snapshot, re-validate it on fresh seeds and
//! write it out with a report. Every agent call is built from typed state, not a chat log.

use super::review::{review, Verdict};
use super::session::{Halt, Session};
use crate::tune::{self, SearchArgs};
use crate::{env_err, Ctx, Exit};
use anyhow::anyhow;
use ksmith_agents::edit::{self, Change};
use ksmith_agents::{parse_plan, parse_tunables, Limit, Plan, Role, TuneDecision};
use ksmith_judge::{EvalResult, Judge, Status};
use ksmith_store::SnapshotRow;
use ksmith_task::{Language, Solution, Task};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A candidate that has been judged.
#[derive(Clone)]
struct Judged {
    solution: Solution,
    result: EvalResult,
    eval_id: i64,
}

impl Judged {
    fn passed(&self) -> bool {
        self.result.status == Status::Passed && self.result.performance.is_some()
    }
    fn speedup(&self) -> Option<f64> {
        self.passed()
            .then(|| self.result.performance.as_ref().map(|p| p.speedup))
            .flatten()
    }
    fn source(&self) -> &str {
        &self.solution.sources[0].1
    }
}

/// What the planner hears about the last iteration.
struct Last {
    iteration: u32,
    outcome: String,
    timing: String,
    profile: String,
}

/// The loop's typed state.
struct State<'a> {
    task: Task,
    file: String,
    /// Entry point and language of the starting solution (kept by every candidate).
    entry: String,
    language: Language,
    judge: Judge,
    ctx: &'a Ctx,
    best: Option<(u32, Judged)>,
    history: Vec<String>,
    last: Option<Last>,
    guidance: Option<String>,
}

/// Runs (or resumes) a session to its end and records how it ended.
pub(crate) fn drive(ctx: &Ctx, mut s: Session) -> Result<u8, Exit> {
    let outcome = run_loop(ctx, &mut s);
    let (replayed_calls, replayed_events) = s.replayed;
    if replayed_calls + replayed_events > 0 {
        eprintln!("ksmith: replayed {replayed_calls} LLM calls and {replayed_events} decisions from the journal");
    }
    let (status, reason, code) = match outcome {
        Ok((state, None)) => {
            let why = format!("{} iterations done", s.usage.iterations);
            finalize(&mut s, state, "finished", why)?
        }
        Ok((state, Some((limit, msg)))) => {
            let status = if limit == Limit::Iterations {
                "finished"
            } else {
                "stopped"
            };
            let why = if limit == Limit::Iterations {
                msg
            } else {
                format!("budget reached: {limit} ({msg})")
            };
            finalize(&mut s, state, status, why)?
        }
        Err(Halt::Quit) => {
            println!(
                "run {} paused; continue with `ksmith resume {}`",
                s.run.id, s.run.id
            );
            (
                "paused".to_string(),
                Some("quit by the user".to_string()),
                0,
            )
        }
        Err(Halt::Budget(limit, msg)) => {
            // Reached before the starting point was judged: nothing to write.
            (
                "stopped".to_string(),
                Some(format!("budget reached: {limit} ({msg})")),
                0,
            )
        }
        Err(Halt::Failed(e)) => {
            s.run.status = "failed".into();
            s.run.stop_reason = Some(format!("{e:#}"));
            s.save()?;
            return Err(env_err(anyhow!(
                "{e:#}\nrun {} stopped; after fixing the cause continue it with `ksmith resume {}`",
                s.run.id,
                s.run.id
            )));
        }
    };
    s.run.status = status;
    s.run.stop_reason = reason;
    s.save()?;
    Ok(code)
}

type LoopEnd<'a> = (State<'a>, Option<(Limit, String)>);

fn run_loop<'a>(ctx: &'a Ctx, s: &mut Session) -> Result<LoopEnd<'a>, Halt> {
    let task = crate::load_task(std::path::Path::new(&s.run.task_dir))?;
    check_frozen(s, &task)?;
    let start = Solution::load(&s.opts.from, &task).map_err(|e| {
        Halt::Failed(anyhow!(
            "invalid starting solution {}:\n{e}",
            s.opts.from.display()
        ))
    })?;
    if start.sources.len() != 1 {
        return Err(Halt::Failed(anyhow!(
            "agent runs edit one source file; {} has {}",
            s.opts.from.display(),
            start.sources.len()
        )));
    }
    let judge = ctx.judge(&s.opts.judge.opts())?;
    let mut st = State {
        file: start.sources[0].0.clone(),
        entry: start.entry_point.clone(),
        language: start.language,
        task,
        judge,
        ctx,
        best: None,
        history: Vec::new(),
        last: None,
        guidance: None,
    };
    eprintln!(
        "ksmith: [iteration 0] judging the starting solution {}",
        s.opts.from.display()
    );
    let first = evaluate(s, &mut st, &start)?;
    if first.result.timing_unavailable.is_some() {
        return Err(Halt::Failed(anyhow!(
            "{} candidates cannot be timed on this machine ({}); an agent run needs timing",
            start.language.name(),
            first.result.timing_unavailable.clone().unwrap_or_default()
        )));
    }
    report_line(0, "starting solution", &first);
    snapshot(s, 0, &first, "starting solution")?;
    st.history.push(format!(
        "iteration 0 (starting solution): {}",
        outcome(&first)
    ));
    if first.passed() {
        st.best = Some((0, first.clone()));
    }
    st.last = Some(Last {
        iteration: 0,
        outcome: outcome(&first),
        timing: timing_text(&st.task, &first.result),
        profile: String::new(),
    });
    loop {
        s.usage.wall_s = s.active_s();
        if let Some(hit) = s.opts.budget.exhausted(&s.usage) {
            return Ok((st, Some(hit)));
        }
        s.usage.iterations += 1;
        let it = s.usage.iterations;
        match iteration(s, &mut st, it) {
            Ok(()) => {}
            Err(Halt::Budget(l, m)) => return Ok((st, Some((l, m)))),
            Err(h) => return Err(h),
        }
        s.save().map_err(Halt::from)?;
    }
}

/// The tests (task definition + reference) must be byte-identical to the run's start.
fn check_frozen(s: &Session, task: &Task) -> Result<(), Halt> {
    if task.content_hash != s.run.tests_hash {
        return Err(Halt::Failed(anyhow!(
            "the tests of task {} changed during run {} (hash {} at start, {} now); a run's tests are frozen at its start: restore them or start a new run",
            task.name,
            s.run.id,
            &s.run.tests_hash[..12.min(s.run.tests_hash.len())],
            &task.content_hash[..12.min(task.content_hash.len())]
        )));
    }
    Ok(())
}

/// Judges a solution, reusing a stored evaluation of identical code and settings.
fn evaluate(s: &mut Session, st: &mut State, sol: &Solution) -> Result<Judged, Halt> {
    let task = crate::load_task(&st.task.dir)?;
    check_frozen(s, &task)?;
    let key = st
        .judge
        .eval_key(&st.task, sol)
        .map_err(|e| Halt::Failed(e.into()))?;
    if let Some(stored) = s.store.find(&key).map_err(|e| Halt::Failed(e.into()))? {
        return Ok(Judged {
            solution: sol.clone(),
            result: stored.result,
            eval_id: stored.id,
        });
    }
    let (eval_id, result) =
        crate::evaluate_recorded_as(&mut st.judge, &mut s.store, &st.task, sol, None, &key)?;
    Ok(Judged {
        solution: sol.clone(),
        result,
        eval_id,
    })
}

fn outcome(j: &Judged) -> String {
    let r = &j.result;
    match (r.status, j.speedup()) {
        (Status::Passed, Some(x)) => format!("passed, {x:.2}x vs XLA"),
        (st, _) => match &r.reason {
            Some(reason) => format!("{st} ({reason})"),
            None => st.to_string(),
        },
    }
}

fn report_line(it: u32, what: &str, j: &Judged) {
    eprintln!(
        "ksmith: [iteration {it}] {what}: {} (evaluation {})",
        outcome(j),
        j.eval_id
    );
}

fn snapshot(s: &mut Session, it: u32, j: &Judged, summary: &str) -> Result<(), Halt> {
    let mut files = BTreeMap::new();
    for (n, src) in &j.solution.sources {
        files.insert(
            n.clone(),
            s.store
                .put_artifact(src.as_bytes())
                .map_err(|e| Halt::Failed(e.into()))?,
        );
    }
    let sources = json!({"files": files, "flags": j.solution.flags}).to_string();
    s.store
        .record_snapshot(
            &s.run.id,
            &SnapshotRow {
                iteration: it,
                eval_id: Some(j.eval_id),
                status: j.result.status.as_str().to_string(),
                latency_ms: crate::tune::latency_ms(&j.result),
                speedup: j.speedup(),
                sources,
                summary: summary.to_string(),
            },
        )
        .map_err(|e| Halt::Failed(e.into()))
}

fn task_brief(st: &State) -> Value {
    let t = &st.task;
    let workloads: Vec<String> = t
        .workloads
        .iter()
        .map(|w| {
            w.axes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let tolerance = t
        .outputs
        .iter()
        .map(|o| format!("{}: atol {:e}, rtol {:e}", o.tensor.name, o.atol, o.rtol))
        .collect::<Vec<_>>()
        .join("; ");
    let proto = ksmith_backend::c::prototype(t, &st.entry);
    let (language, device, fence, signature) = match st.language {
        Language::C => ("C", "CPU", "c", proto),
        Language::Cuda => (
            "CUDA C++",
            "GPU",
            "cuda",
            format!("extern \"C\" {proto}  // device pointers"),
        ),
        Language::Triton | Language::Pallas => {
            let args: Vec<&str> = t
                .inputs
                .iter()
                .map(|i| i.name.as_str())
                .chain(t.outputs.iter().map(|o| o.tensor.name.as_str()))
                .chain(t.axes.iter().map(|a| a.name.as_str()))
                .collect();
            let sig = format!(
                "def {}({}): ...  # inputs, then preallocated outputs, then axes",
                st.entry,
                args.join(", ")
            );
            (
                st.language.name(),
                "GPU (interpreter on a CPU)",
                "python",
                sig,
            )
        }
    };
    json!({
        "name": t.name, "description": t.description, "language": language, "device": device,
        "signature": signature, "workloads": workloads, "tolerance": tolerance, "fence": fence,
    })
}

fn roofline_text(st: &State) -> String {
    let hw = st.judge.hardware();
    format!(
        "{} ({} cores, {}-bit SIMD: {}); measured peak {:.0} GFLOP/s fp32, memory bandwidth {:.1} GB/s (cache-resident {:.1} GB/s). Flags: -O3 -march=native -fopenmp.",
        hw.cpu,
        hw.cores,
        hw.vector_bits,
        hw.simd.join(" "),
        hw.peak_fp32_flops / 1e9,
        hw.dram_bandwidth / 1e9,
        hw.cache_bandwidth / 1e9
    )
}

fn timing_text(task: &Task, r: &EvalResult) -> String {
    let Some(p) = &r.performance else {
        return String::new();
    };
    p.workloads
        .iter()
        .map(|w| {
            let axes = w.axes.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            format!(
                "- {axes}: {:.3} ms (XLA {:.3} ms, {:.2}x), {:.1} GFLOP/s, {:.1} GB/s, {:.0}% of roofline (floor {:.3} ms)",
                w.candidate.median_ms,
                w.baseline.median_ms,
                w.speedup,
                w.gflops,
                w.gbps,
                w.roofline_fraction * 100.0,
                w.floor_ms
            )
        })
        .chain(std::iter::once(format!(
            "- overall: {:.2}x vs XLA (geometric mean over {} workloads)",
            p.speedup,
            task.workloads.len()
        )))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The failure of a judged candidate as the fixer needs it.
fn failure(j: &Judged) -> (&'static str, String) {
    let r = &j.result;
    let mut d = format!("status {}", r.status);
    if let Some(reason) = &r.reason {
        d.push_str(&format!(" ({reason})"));
    }
    if let Some(detail) = &r.detail {
        d.push_str(&format!(": {detail}"));
    }
    d.push('\n');
    let kind = match r.status {
        Status::CompileError => "compile error",
        Status::PolicyRejected => "policy violation",
        Status::RuntimeError | Status::Timeout => "runtime failure",
        _ => "wrong results",
    };
    for v in &r.policy {
        d.push_str(&format!(
            "{}:{}: `{}`: {}\n",
            v.file, v.line, v.name, v.message
        ));
    }
    if let Some(b) = &r.build {
        let errors: Vec<String> = b
            .diagnostics
            .iter()
            .filter(|x| x.severity.contains("error"))
            .take(20)
            .map(|x| x.to_string())
            .collect();
        if errors.is_empty() && r.status == Status::CompileError {
            d.push_str(&tail(&b.log, 3000));
        }
        for e in errors {
            d.push_str(&e);
            d.push('\n');
        }
    }
    if let Some(c) = &r.correctness {
        d.push_str(&format!(
            "max abs error {:.3e}, max rel error {:.3e}, {:.2}% of elements out of tolerance\n",
            c.max_abs_error,
            c.max_rel_error,
            c.fraction_bad * 100.0
        ));
        if let Some(w) = &c.worst {
            d.push_str(&format!(
                "worst element: output `{}` index {:?} on workload {} (seed {}): got {}, expected {}\n",
                w.output,
                w.index,
                w.workload,
                w.seed,
                w.got.map(|g| format!("{g:e}")).unwrap_or("-".into()),
                w.expected.map(|g| format!("{g:e}")).unwrap_or("-".into())
            ));
        }
    }
    if matches!(r.status, Status::RuntimeError | Status::Timeout) && !r.log.is_empty() {
        d.push_str(&format!(
            "candidate output (tail):\n{}\n",
            tail(&r.log, 1500)
        ));
    }
    (kind, d)
}

fn tail(s: &str, n: usize) -> String {
    let start = s.char_indices().rev().nth(n).map(|(i, _)| i).unwrap_or(0);
    s[start..].to_string()
}

/// New source from a code reply, or the feedback that goes back to the model.
fn code_from_reply(reply: &str, file: &str, base: &str) -> Result<String, String> {
    let change = edit::parse_change(reply).map_err(|e| match e {
        edit::ParseError::Empty => "the reply was empty".to_string(),
        edit::ParseError::NoCode => format!("the reply had neither SEARCH/REPLACE blocks nor a fenced code block with the complete `{file}`"),
        other => format!("the reply could not be parsed: {other}"),
    })?;
    for f in change.files().into_iter().flatten() {
        let name = std::path::Path::new(f.trim())
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if name != file {
            eprintln!("ksmith:   refused: the reply edits `{f}`; the tests are frozen");
            return Err(format!(
                "REFUSED: `{f}` is frozen. The task definition, tolerances, workloads, reference and tests cannot be changed by any agent; only `{file}` may be edited. Nothing was applied."
            ));
        }
    }
    match change {
        Change::Full { text, .. } => Ok(text),
        Change::Edits(edits) => edit::apply_edits(base, &edits).map_err(|e| e.feedback()),
    }
}

/// Renders, calls and parses, re-asking with the parse error up to `retries` times.
/// `Ok(Err(msg))` means the model never gave a usable answer.
fn ask<T>(
    s: &mut Session,
    st: &mut State,
    role: Role,
    step: &str,
    mut vars: Value,
    retries: u32,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Result<(T, String), String>, Halt> {
    if let Some(g) = st.guidance.take() {
        vars["guidance"] = Value::String(g);
    }
    let mut last_err = String::new();
    for attempt in 0..=retries {
        if attempt > 0 {
            vars["retry"] = Value::String(last_err.clone());
        }
        let prompt = s
            .prompts
            .render(role, &vars)
            .map_err(|e| Halt::Failed(e.into()))?;
        let reply = s.call(role, step, &prompt)?;
        match parse(&reply) {
            Ok(v) => return Ok(Ok((v, reply))),
            Err(e) => {
                eprintln!(
                    "ksmith:   {step}: unusable {} reply: {}",
                    role.name(),
                    first_line(&e)
                );
                last_err = e;
            }
        }
    }
    Ok(Err(last_err))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn unified_diff(old: &str, new: &str, file: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{file}"), &format!("b/{file}"))
        .to_string()
}

/// A code step (implement or fix) with its review: returns the new source or why none came.
fn code_step(
    s: &mut Session,
    st: &mut State,
    role: Role,
    step: &str,
    vars: Value,
    base: &str,
) -> Result<Result<String, String>, Halt> {
    loop {
        let file = st.file.clone();
        let got = ask(s, st, role, step, vars.clone(), s.opts.fix_attempts, |r| {
            code_from_reply(r, &file, base)
        })?;
        let (source, _) = match got {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        let diff = unified_diff(base, &source, &st.file);
        match review(s, step, "code change", &diff, &source)? {
            Verdict::Approve => return Ok(Ok(source)),
            Verdict::Guidance(g) => {
                st.guidance = Some(g);
                return Ok(Ok(source));
            }
            Verdict::Edited(text) => return Ok(Ok(text)),
            Verdict::Rerun => continue,
            Verdict::Quit => return Err(Halt::Quit),
        }
    }
}

fn variant(st: &State, base: &Solution, it: u32, tag: &str, source: String) -> Solution {
    Solution::from_source(
        &format!("{}-{it}{tag}", st.task.name),
        base.language,
        &base.entry_point,
        &st.file,
        source,
        Vec::new(),
    )
}

fn iteration(s: &mut Session, st: &mut State, it: u32) -> Result<(), Halt> {
    let base = match &st.best {
        Some((_, b)) => b.solution.clone(),
        None => Solution::load(&s.opts.from, &st.task).map_err(|e| Halt::Failed(anyhow!("{e}")))?,
    };
    let base_src = base.sources[0].1.clone();
    let mode = if st.best.as_ref().map(|(i, _)| *i > 0).unwrap_or(false) || it > 1 {
        "revision"
    } else {
        "new"
    };
    eprintln!("ksmith: [iteration {it}] planner ({mode})");
    // Plan.
    let mut vars = json!({
        "task": task_brief(st), "mode": mode,
        "reference": std::fs::read_to_string(st.task.reference_path()).unwrap_or_default(),
        "roofline": roofline_text(st), "history": st.history,
    });
    if let Some((bi, b)) = &st.best {
        vars["best"] = json!({"iteration": bi, "file": st.file, "source": b.source(),
            "speedup": format!("{:.2}x", b.speedup().unwrap_or(0.0)),
            "latency": format!("{:.3} ms", crate::tune::latency_ms(&b.result).unwrap_or(0.0))});
    } else {
        vars["best"] = json!({"iteration": 0, "file": st.file, "source": base_src, "speedup": "not passing", "latency": "-"});
    }
    if let Some(l) = &st.last {
        vars["last"] = json!({"iteration": l.iteration, "outcome": l.outcome, "timing": l.timing, "profile": l.profile});
    }
    let query = format!(
        "{} {} {}",
        st.task.name.replace('_', " "),
        st.task.description,
        st.last.as_ref().map(|l| l.profile.as_str()).unwrap_or("")
    );
    vars["knowledge"] = Value::Array(s.knowledge_for(&query));
    let step = format!("iteration {it} plan");
    let plan: Plan = loop {
        let got = ask(s, st, Role::Planner, &step, vars.clone(), 2, |r| {
            parse_plan(r).map_err(|e| e.0)
        })?;
        let plan = match got {
            Ok((p, _)) => p,
            Err(e) => {
                let j_summary = format!(
                    "iteration {it}: the planner gave no usable plan ({})",
                    first_line(&e)
                );
                st.history.push(j_summary);
                return Ok(());
            }
        };
        match review(s, &step, "plan", &plan.markdown(), &plan.markdown())? {
            Verdict::Approve => break plan,
            Verdict::Guidance(g) => {
                st.guidance = Some(g);
                break plan;
            }
            Verdict::Edited(text) => {
                break parse_plan(&text).unwrap_or(Plan {
                    strategy: text,
                    expected_effect: "(edited by the user)".into(),
                    expected_speedup: None,
                    risks: String::new(),
                })
            }
            Verdict::Rerun => continue,
            Verdict::Quit => return Err(Halt::Quit),
        }
    };
    eprintln!(
        "ksmith:   plan: {} (expects {})",
        plan.headline(),
        plan.expected_effect.lines().next().unwrap_or("")
    );
    // Implement.
    let impl_vars = json!({
        "task": task_brief(st), "plan": plan.markdown(), "file": st.file, "source": base_src,
        "knowledge": s.knowledge_for(&format!("{} {}", st.task.name.replace('_', " "), plan.strategy)),
    });
    let source = match code_step(
        s,
        st,
        Role::Implementer,
        &format!("iteration {it} implement"),
        impl_vars,
        &base_src,
    )? {
        Ok(src) => src,
        Err(e) => {
            st.history.push(format!(
                "iteration {it}: {} -> the implementer's code could not be applied ({})",
                plan.headline(),
                first_line(&e)
            ));
            return Ok(());
        }
    };
    let mut cand = evaluate(s, st, &variant(st, &base, it, "", source))?;
    report_line(it, "candidate", &cand);
    // Fix loops: build-stage and test-stage failures each get their own attempts.
    let (mut build_fixes, mut test_fixes) = (0u32, 0u32);
    let mut tried: Vec<String> = Vec::new();
    while !cand.passed() {
        let (kind, detail) = failure(&cand);
        let build_stage = matches!(
            cand.result.status,
            Status::CompileError | Status::PolicyRejected
        );
        let used = if build_stage {
            &mut build_fixes
        } else {
            &mut test_fixes
        };
        if *used >= s.opts.fix_attempts {
            break;
        }
        *used += 1;
        let n = *used;
        let vars = json!({
            "task": task_brief(st), "file": st.file, "source": cand.source(),
            "failure": {"kind": kind, "detail": detail}, "attempts": tried,
        });
        let step = format!("iteration {it} fix {kind} {n}");
        let src = cand.source().to_string();
        match code_step(s, st, Role::Fixer, &step, vars, &src)? {
            Ok(fixed) => {
                tried.push(format!("{kind}: {}", first_line(&detail)));
                cand = evaluate(
                    s,
                    st,
                    &variant(
                        st,
                        &base,
                        it,
                        &format!("-fix{}", build_fixes + test_fixes),
                        fixed,
                    ),
                )?;
                report_line(it, &format!("after fix {n} ({kind})"), &cand);
            }
            Err(e) => {
                tried.push(format!(
                    "{kind}: the fix could not be applied ({})",
                    first_line(&e)
                ));
            }
        }
    }
    if cand.passed() {
        cand = autotune(s, st, it, cand)?;
    }
    let profile = if cand.passed() && !s.opts.no_profile {
        profile(s, st, it, &cand)?
    } else {
        String::new()
    };
    let summary = plan.headline();
    snapshot(s, it, &cand, &summary)?;
    let improved = match (&st.best, cand.speedup()) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some((_, b)), Some(x)) => x > b.speedup().unwrap_or(0.0),
    };
    st.history.push(format!(
        "iteration {it}: {summary} (expected {}) -> {}{}",
        plan.expected_speedup
            .map(|x| format!("{x:.2}x"))
            .unwrap_or("?".into()),
        outcome(&cand),
        if improved { ", new best" } else { "" }
    ));
    // A failed iteration tells the next plan why (diagnostics, mismatch), not just the status.
    let last_outcome = if cand.passed() {
        outcome(&cand)
    } else {
        format!("{}\n{}", outcome(&cand), tail_lines(&failure(&cand).1, 12))
    };
    st.last = Some(Last {
        iteration: it,
        outcome: last_outcome,
        timing: timing_text(&st.task, &cand.result),
        profile,
    });
    if improved {
        st.best = Some((it, cand));
    }
    Ok(())
}

fn defines(source: &str) -> Vec<(String, i64)> {
    let re = regex::Regex::new(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+\(?(-?\d+)\)?[ \t]*(?://.*|/\*.*\*/)?[ \t]*$").expect("regex");
    re.captures_iter(source)
        .filter_map(|c| Some((c[1].to_string(), c[2].parse().ok()?)))
        .collect()
}

/// The source with each tuned `#define NAME VALUE` set to the configuration's value.
fn bake_defines(source: &str, config: &BTreeMap<String, i64>) -> String {
    let re =
        regex::Regex::new(r"(?m)^([ \t]*#[ \t]*define[ \t]+)([A-Z_][A-Z0-9_]*)([ \t]+\(?)(-?\d+)")
            .expect("regex");
    re.replace_all(source, |c: &regex::Captures| match config.get(&c[2]) {
        Some(v) => format!("{}{}{}{v}", &c[1], &c[2], &c[3]),
        None => c[0].to_string(),
    })
    .into_owned()
}

#[derive(Serialize, Deserialize)]
struct TuneOutcome {
    config: Option<BTreeMap<String, i64>>,
    note: String,
}

/// The autotune planner declares tunables; the deterministic tuner searches them.
fn autotune(s: &mut Session, st: &mut State, it: u32, cand: Judged) -> Result<Judged, Halt> {
    let defs = defines(cand.source());
    if defs.is_empty() || s.opts.tune_budget == 0 {
        return Ok(cand);
    }
    let list = defs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let vars =
        json!({"task": task_brief(st), "file": st.file, "source": cand.source(), "defines": list});
    let step = format!("iteration {it} autotune");
    let names: Vec<String> = defs.iter().map(|(k, _)| k.clone()).collect();
    let check = |r: &str| -> Result<TuneDecision, String> {
        let d = parse_tunables(r).map_err(|e| e.0)?;
        if let TuneDecision::Tunables(t) = &d {
            let parsed: toml::Table = t.parse().map_err(|e: toml::de::Error| {
                format!("the toml block is invalid: {}", e.message())
            })?;
            let entries = parsed
                .get("tunables")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            for e in &entries {
                let name = e.get("name").and_then(|n| n.as_str()).unwrap_or("");
                if !names.iter().any(|n| n == name) {
                    return Err(format!(
                        "tunable `{name}` is not one of the kernel's #define constants ({})",
                        names.join(", ")
                    ));
                }
            }
        }
        Ok(d)
    };
    let toml_text = loop {
        let got = ask(s, st, Role::AutotunePlanner, &step, vars.clone(), 1, check)?;
        let toml_text = match got {
            Ok((TuneDecision::Tunables(t), _)) => t,
            Ok((TuneDecision::None(why), _)) => {
                eprintln!("ksmith:   autotune planner: no tuning ({why})");
                return Ok(cand);
            }
            Err(e) => {
                eprintln!(
                    "ksmith:   autotune planner gave no usable tunables ({})",
                    first_line(&e)
                );
                return Ok(cand);
            }
        };
        match review(s, &step, "tunables", &toml_text, &toml_text)? {
            Verdict::Approve => break toml_text,
            Verdict::Guidance(g) => {
                st.guidance = Some(g);
                break toml_text;
            }
            Verdict::Edited(t) => {
                match check(&format!("```toml\n{t}\n```")) {
                    Ok(TuneDecision::Tunables(t)) => break t,
                    _ => {
                        eprintln!("ksmith:   the edited tunables are not usable; no tuning this iteration");
                        return Ok(cand);
                    }
                }
            }
            Verdict::Rerun => continue,
            Verdict::Quit => return Err(Halt::Quit),
        }
    };
    let tuned: TuneOutcome = s.event("tune", |s| {
        let sol = match solution_with_tunables(st, &cand.solution, &toml_text) {
            Ok(sol) => sol,
            Err(e) => {
                return Ok(TuneOutcome {
                    config: None,
                    note: e,
                })
            }
        };
        let args = SearchArgs {
            strategy: "hillclimb".into(),
            budget: s.opts.tune_budget,
            time_budget: None,
            seed: 1,
            no_race: false,
            confirm: 2,
        };
        let o = tune::search(st.ctx, &st.task, &sol, &args, &s.opts.judge.opts())
            .map_err(Halt::from)?;
        let config = o.best.and_then(|(c, _)| c);
        let note = match &config {
            Some(c) => format!("tuned {}", ksmith_tune::label(c)),
            None => "the defaults stayed best".into(),
        };
        Ok(TuneOutcome { config, note })
    })?;
    eprintln!("ksmith:   autotune: {}", tuned.note);
    let Some(config) = tuned.config else {
        return Ok(cand);
    };
    // The values are written into the source, so later iterations edit the tuned kernel.
    let baked = bake_defines(cand.source(), &config);
    let sol = variant(st, &cand.solution, it, "-tuned", baked);
    let j = evaluate(s, st, &sol)?;
    report_line(it, &format!("tuned [{}]", ksmith_tune::label(&config)), &j);
    Ok(
        if j.speedup().unwrap_or(0.0) > cand.speedup().unwrap_or(0.0) {
            j
        } else {
            cand
        },
    )
}

/// The candidate with the planner's `[[tunables]]`, validated by the solution parser.
fn solution_with_tunables(st: &State, sol: &Solution, tunables: &str) -> Result<Solution, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let toml = format!(
        "name = {:?}\nlanguage = {:?}\nentry_point = {:?}\nsources = [{:?}]\nflags = []\n\n{tunables}\n",
        sol.name,
        sol.language.name(),
        sol.entry_point,
        st.file
    );
    std::fs::write(dir.path().join(ksmith_task::SOLUTION_FILE), toml).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join(&st.file), &sol.sources[0].1).map_err(|e| e.to_string())?;
    Solution::load(dir.path(), &st.task).map_err(|e| e.to_string())
}

/// perf sampling + the compiler's vectorization report, summarized by the profile analyst.
fn profile(s: &mut Session, st: &mut State, it: u32, cand: &Judged) -> Result<String, Halt> {
    let raw: String = s.event("profile", |s| {
        let w = (0..st.task.workloads.len())
            .max_by(|a, b| st.task.flops_of(*a).total_cmp(&st.task.flops_of(*b)))
            .unwrap_or(0);
        let dir = s.store.root().join("cache").join("profile");
        std::fs::create_dir_all(&dir).map_err(|e| Halt::Failed(e.into()))?;
        let budget = std::time::Duration::from_millis(500);
        // The judge's own inputs for this workload, so generated index tables describe real work.
        let prefix = format!("w{w}_s");
        let inputs = std::fs::read_dir(
            s.store
                .root()
                .join("cache")
                .join("reference")
                .join(&st.task.content_hash[..24.min(st.task.content_hash.len())]),
        )
        .ok()
        .and_then(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.file_name().unwrap_or_default().to_string_lossy();
                    n.starts_with(&prefix) && n.ends_with(".inputs.safetensors")
                })
                .min()
        });
        let profiled = match &inputs {
            Some(f) => ksmith_profile::profile_c_with_inputs(
                &st.task,
                &cand.solution,
                w,
                &[],
                &dir,
                budget,
                f,
            ),
            None => ksmith_profile::profile_c(&st.task, &cand.solution, w, &[], &dir, budget),
        };
        Ok(match profiled {
            Ok(p) => p.summary(),
            Err(e) => format!("profiling failed: {e}"),
        })
    })?;
    let vars = json!({"task": task_brief(st), "file": st.file, "source": cand.source(),
        "timing": timing_text(&st.task, &cand.result), "profile": raw});
    let step = format!("iteration {it} profile");
    let got = ask(s, st, Role::ProfileAnalyst, &step, vars, 0, |r| {
        if r.trim().is_empty() {
            Err("the reply was empty".into())
        } else {
            Ok(r.trim().to_string())
        }
    })?;
    let summary = match got {
        Ok((t, _)) => tail_lines(&t, 12),
        Err(_) => raw.lines().take(12).collect::<Vec<_>>().join("\n"),
    };
    match review(s, &step, "profile summary", &summary, &summary)? {
        Verdict::Approve | Verdict::Rerun => Ok(summary),
        Verdict::Guidance(g) => {
            st.guidance = Some(g);
            Ok(summary)
        }
        Verdict::Edited(t) => Ok(t),
        Verdict::Quit => Err(Halt::Quit),
    }
}

fn tail_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Rolls back to the fastest correct snapshot, re-validates it on fresh seeds, writes it out.
fn finalize(
    s: &mut Session,
    st: State,
    status: &str,
    why: String,
) -> Result<(String, Option<String>, u8), Exit> {
    let snaps = s.store.snapshots(&s.run.id).map_err(env_err)?;
    let Some((bi, best)) = st.best else {
        println!(
            "run {}: no correct kernel in {} snapshots; nothing written ({why})",
            s.run.id,
            snaps.len()
        );
        return Ok((
            status.to_string(),
            Some(format!("{why}; no correct kernel")),
            1,
        ));
    };
    let mut fresh = s.opts.judge.opts();
    fresh.fresh_seeds = true;
    fresh.no_timing = true;
    let mut judge = st.ctx.judge(&fresh)?;
    let (check_id, check) =
        crate::evaluate_recorded(&mut judge, &mut s.store, &st.task, &best.solution)?;
    let calls = s.store.calls(&s.run.id).map_err(env_err)?;
    let mut md = format!(
        "# ksmith run {}\n\ntask `{}`, model `{}`, {} mode; {status}: {why}\n\n| iteration | status | speedup vs XLA | latency (ms) | what |\n| --- | --- | --- | --- | --- |\n",
        s.run.id, st.task.name, s.run.model, s.run.mode
    );
    for sn in &snaps {
        md.push_str(&format!(
            "| {}{} | {} | {} | {} | {} |\n",
            sn.iteration,
            if sn.iteration == bi { " (best)" } else { "" },
            sn.status,
            sn.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
            sn.latency_ms
                .map(|x| format!("{x:.3}"))
                .unwrap_or("-".into()),
            sn.summary.replace('|', "/")
        ));
    }
    let (tin, tout, cost): (u64, u64, f64) = calls.iter().fold((0, 0, 0.0), |a, c| {
        (a.0 + c.tokens_in, a.1 + c.tokens_out, a.2 + c.cost)
    });
    md.push_str(&format!(
        "\nLLM calls: {} ({} tokens in, {} out, ${cost:.4}). Best: iteration {bi}, evaluation {}; fresh-seed re-validation: {} (evaluation {check_id}).\n",
        calls.len(), tin, tout, best.eval_id, check.status
    ));
    if check.status != Status::Passed {
        println!(
            "{md}\nthe best snapshot failed on fresh seeds ({}); nothing written",
            check.status
        );
        return Ok((
            status.to_string(),
            Some(format!("{why}; best failed fresh-seed re-validation")),
            1,
        ));
    }
    let out = s.opts.out.clone();
    write_solution(&best.solution, &out).map_err(env_err)?;
    std::fs::write(out.join("report.md"), &md).map_err(env_err)?;
    println!("{md}");
    println!(
        "best kernel (iteration {bi}, {:.2}x vs XLA) and report written to {}",
        best.speedup().unwrap_or(0.0),
        out.display()
    );
    s.run.out_dir = Some(out.display().to_string());
    Ok((status.to_string(), Some(why), 0))
}

fn write_solution(sol: &Solution, out: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let (file, src) = &sol.sources[0];
    std::fs::write(out.join(file), src)?;
    let toml = format!(
        "name = {:?}\nlanguage = {:?}\nentry_point = {:?}\nsources = [{:?}]\nflags = {:?}\n",
        sol.name,
        sol.language.name(),
        sol.entry_point,
        file,
        sol.flags
    );
    std::fs::write(out.join(ksmith_task::SOLUTION_FILE), toml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_files_are_refused_and_edits_apply() {
        let base = "int a = 1;\nint b = 2;\n";
        let e = code_from_reply(
            "task.toml\n<<<<<<< SEARCH\natol = 1e-6\n=======\natol = 1.0\n>>>>>>> REPLACE\n",
            "kernel.c",
            base,
        )
        .unwrap_err();
        assert!(e.starts_with("REFUSED: `task.toml` is frozen"), "{e}");
        let ok = code_from_reply(
            "kernel.c\n<<<<<<< SEARCH\nint b = 2;\n=======\nint b = 3;\n>>>>>>> REPLACE\n",
            "kernel.c",
            base,
        )
        .unwrap();
        assert_eq!(ok, "int a = 1;\nint b = 3;\n");
        assert!(code_from_reply("", "kernel.c", base)
            .unwrap_err()
            .contains("empty"));
        let nf = code_from_reply(
            "<<<<<<< SEARCH\nint c = 9;\n=======\nint c = 1;\n>>>>>>> REPLACE\n",
            "kernel.c",
            base,
        )
        .unwrap_err();
        assert!(nf.contains("int"), "{nf}");
    }

    #[test]
    fn tuned_values_are_baked_into_the_source() {
        let c: BTreeMap<String, i64> = [("BM".to_string(), 32)].into();
        let src = "#ifndef BM\n#define BM 64 /* rows */\n#endif\n#define BN 8\n";
        assert_eq!(
            bake_defines(src, &c),
            "#ifndef BM\n#define BM 32 /* rows */\n#endif\n#define BN 8\n"
        );
    }

    #[test]
    fn defines_are_found() {
        let d = defines("#ifndef BM\n#define BM 64\n#endif\n#define NAME_2 (8) /* rows */\n#define F 1.5\n#define C 3 // x\n");
        assert_eq!(
            d,
            vec![
                ("BM".to_string(), 64),
                ("NAME_2".to_string(), 8),
                ("C".to_string(), 3)
            ]
        );
    }
}
