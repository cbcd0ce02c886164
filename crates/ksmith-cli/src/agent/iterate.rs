//! The autonomous loop: plan → implement → build/test (+ fix loops) → autotune → profile →
//! snapshot, then roll back to the fastest correct snapshot, re-validate it on fresh seeds and
//! write it out with a report. Every agent call is built from typed state, not a chat log.

use super::autotune::autotune;
use super::finish::finalize;
use super::profile::profile;
use super::review::{review, Verdict};
use super::session::{Halt, Session};
use super::step::{
    ask, check_frozen, evaluate, failure, first_line, outcome, report_line, roofline_text,
    task_brief, variant, Judged, Last, State,
};
use crate::{env_err, Ctx, Exit};
use anyhow::anyhow;
use ksmith_agents::{parse_plan, Limit, Plan, Role};
use ksmith_judge::decide::{decide, decide_paired, settle, Decision, Evidence, UndecidedWhy};
use ksmith_judge::{EvalResult, Judge};
use ksmith_search::agent::brief::{first_lines, load_average, timing_text};
use ksmith_search::agent::context::{
    implement_query, key_line, plan_query, values, BestView, FailureView, FixBudget, FixerContext,
    ImplementerContext, LastView, Mode, PlannerContext, SnapshotView,
};
use ksmith_store::{RunStatus, SnapshotRow};
use ksmith_task::{Solution, Task};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Runs (or resumes) a session to its end and records how it ended.
pub(crate) fn drive(ctx: &Ctx, mut s: Session) -> Result<u8, Exit> {
    let outcome = run_loop(ctx, &mut s);
    let (replayed_calls, replayed_events) = s.replayed;
    if replayed_calls + replayed_events > 0 {
        note!("ksmith: replayed {replayed_calls} LLM calls and {replayed_events} decisions from the journal");
    }
    let (status, reason, code) = match outcome {
        // The iteration count is the natural end; any other limit is a budget stop.
        Ok((state, Limit::Iterations, msg)) => finalize(&mut s, state, RunStatus::Finished, msg)?,
        Ok((state, limit, msg)) => {
            let why = format!("budget reached: {limit} ({msg})");
            finalize(&mut s, state, RunStatus::Stopped, why)?
        }
        Err(Halt::Quit) => {
            say!(
                "run {} paused; continue with `ksmith resume {}`",
                s.run.id,
                s.run.id
            );
            (RunStatus::Paused, Some("quit by the user".to_string()), 0)
        }
        Err(Halt::Budget(limit, msg)) => {
            // Reached before the starting point was judged: nothing to write.
            (
                RunStatus::Stopped,
                Some(format!("budget reached: {limit} ({msg})")),
                0,
            )
        }
        Err(Halt::Input(e)) => {
            s.run.status = RunStatus::Failed;
            s.run.stop_reason = Some(crate::error_chain(&e));
            s.save()?;
            return Err(crate::input(e));
        }
        Err(Halt::Failed(e)) => {
            s.run.status = RunStatus::Failed;
            s.run.stop_reason = Some(crate::error_chain(&e));
            s.save()?;
            return Err(env_err(anyhow!(
                "{}\nrun {} stopped; after fixing the cause continue it with `ksmith resume {}`",
                crate::error_chain(&e),
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

/// How the loop ended: its state and the limit that ended it.
pub(super) type LoopEnd<'a> = (State<'a>, Limit, String);

fn run_loop<'a>(ctx: &'a Ctx, s: &mut Session) -> Result<LoopEnd<'a>, Halt> {
    let task = crate::load_task(std::path::Path::new(&s.run.task_dir))?;
    check_frozen(s, &task)?;
    let start = Solution::load(&s.opts.from, &task).map_err(|e| {
        Halt::Input(anyhow!(
            "invalid starting solution {}:\n{e}",
            s.opts.from.display()
        ))
    })?;
    if start.sources.len() != 1 {
        return Err(Halt::Input(anyhow!(
            "agent runs edit one source file; {} has {}",
            s.opts.from.display(),
            start.sources.len()
        )));
    }
    let mut judge = ctx.judge(&crate::run_args::judge_opts(&s.opts.judge))?;
    // Each evaluation's stages (build, load, checks, timing) as they start.
    let progress = crate::progress::Progress::plain("judge");
    let timing = !crate::run_args::judge_opts(&s.opts.judge).no_timing;
    judge.set_stage_hook(Some(crate::progress::judge_hook(&progress, timing, true)));
    // The machine's figures are fixed for the run (journaled, so a resumed run keeps them).
    let hw: ksmith_backend::hw::Hardware = s.event("machine", |_| Ok(judge.hardware().clone()))?;
    if let Some(load) = load_average() {
        if load > hw.cores as f64 {
            note!(
                "ksmith: warning: the machine is loaded (load average {load:.1} on {} cores): timings of this run will be noisy, and a winner is only trusted once re-timed",
                hw.cores
            );
        }
    }
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
        tune_note: None,
        hw: hw.clone(),
        iterations: s.opts.budget.iterations,
    };
    note!(
        "ksmith: [iteration 0] judging the starting solution {}",
        s.opts.from.display()
    );
    let first = evaluate(s, &mut st, &start)?;
    if first.result.timing_unavailable.is_some() {
        return Err(Halt::Input(anyhow!(
            "{} candidates cannot be timed on this machine ({}); an agent run needs timing",
            start.language.name(),
            first.result.timing_unavailable.clone().unwrap_or_default()
        )));
    }
    report_line(&st, 0, "starting solution", &first);
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
        if let Some((limit, msg)) = s.opts.budget.exhausted(&s.usage) {
            return Ok((st, limit, msg));
        }
        s.usage.iterations += 1;
        let it = s.usage.iterations;
        match iteration(s, &mut st, it) {
            Ok(()) => {}
            Err(Halt::Budget(l, m)) => return Ok((st, l, m)),
            Err(h) => return Err(h),
        }
        s.save().map_err(Halt::from)?;
    }
}

/// Cross-run memory for this iteration's planner (entries from other tasks, best first).
fn memory_for(s: &mut Session, st: &mut State, it: u32) -> Vec<Value> {
    use ksmith_search::memory;
    let Ok(env) = st.judge.environment() else {
        return Vec::new();
    };
    let fingerprint = env.fingerprint.clone();
    let (views, err) = memory::for_planner(
        &mut s.store,
        &st.task,
        &fingerprint,
        &s.run.id,
        memory::Step::Iteration(it),
    );
    if let Some(e) = err {
        note!("ksmith:   warning: memory exposure not recorded: {e}");
    }
    views
}

/// New source from a code reply, or the feedback that goes back to the model (the engine's
/// parser; a refused edit of a frozen file is also said on the terminal).
fn code_from_reply(reply: &str, file: &str, base: &str) -> Result<String, String> {
    let got = ksmith_search::agent::expander::code_from_reply(reply, file, base);
    if let Err(e) = &got {
        if let Some(rest) = e.strip_prefix("REFUSED: ") {
            note!(
                "ksmith:   refused: the reply edits {}; the tests are frozen",
                crate::term::one(rest.split(" is frozen").next().unwrap_or(rest))
            );
        }
    }
    got
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

fn unified_diff(old: &str, new: &str, file: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{file}"), &format!("b/{file}"))
        .to_string()
}

/// A code step (implement or fix) with its review: returns the new source or why none came.
pub(super) fn code_step(
    s: &mut Session,
    st: &mut State,
    role: Role,
    step: &str,
    vars: Value,
    base: &str,
    context: &str,
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
        // A fix is reviewed next to what it fixes: the diagnostics or the mismatch.
        let diff = unified_diff(base, &source, &st.file);
        let shown = if context.is_empty() {
            diff
        } else {
            format!("What failed:\n{context}\nProposed change:\n{diff}")
        };
        match review(s, step, "code change", &shown, &source)? {
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

/// The snapshot of an iteration that produced no candidate to judge.
fn no_candidate(s: &mut Session, it: u32, why: &str) -> Result<(), Halt> {
    s.store
        .record_snapshot(
            &s.run.id,
            &SnapshotRow {
                iteration: it,
                eval_id: None,
                status: "NO_CANDIDATE".into(),
                latency_ms: None,
                speedup: None,
                sources: "{}".into(),
                summary: why.to_string(),
            },
        )
        .map_err(|e| Halt::Failed(e.into()))
}

/// Earlier iterations a plan refers to ("iteration 2"), other than the current best (whose code
/// the implementer already sees): their code, from the snapshots.
fn named_snapshots(
    s: &Session,
    plan: &str,
    it: u32,
    best: Option<u32>,
    file: &str,
) -> Vec<SnapshotView> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re =
        RE.get_or_init(|| regex::Regex::new(r"(?i)\biteration[ -]?(\d+)").expect("static regex"));
    let mut wanted: Vec<u32> = re
        .captures_iter(plan)
        .filter_map(|c| c[1].parse().ok())
        .filter(|n| *n < it && Some(*n) != best)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let Ok(snaps) = s.store.snapshots(&s.run.id) else {
        return Vec::new();
    };
    wanted
        .into_iter()
        .filter_map(|n| {
            let sn = snaps.iter().find(|sn| sn.iteration == n)?;
            let stored: Value = serde_json::from_str(&sn.sources).ok()?;
            let hash = stored["files"][file].as_str()?;
            let source = String::from_utf8(s.store.artifact(hash).ok()?).ok()?;
            Some(SnapshotView {
                iteration: n,
                status: sn.status.clone(),
                source,
            })
        })
        .collect()
}

/// A candidate against the best so far, timed together (journaled: a resumed run replays it).
#[derive(serde::Serialize, serde::Deserialize)]
struct HeadToHead {
    /// The candidate's speedup over the best and its 95% interval; None when not both timed.
    versus: Option<(f64, f64, f64)>,
    /// The decision rule's answer (`ksmith_judge::decide`), after more rounds when the first
    /// timing left it undecided; None in journals written before decisions were kept.
    #[serde(default)]
    decision: Option<ksmith_judge::decide::Decision>,
}

fn head_to_head(
    judge: &mut Judge,
    task: &Task,
    best: &Solution,
    cand: &Solution,
) -> Result<HeadToHead, Halt> {
    note!("ksmith:   timing it against the best so far, side by side");
    let pair = [best.clone(), cand.clone()];
    let mut cmp = judge
        .compare_checked(task, &pair)
        .map_err(|e| Halt::Failed(e.into()))?;
    let first = decide_paired(cmp.versus[1][0].as_ref());
    // A wide interval across 1.00 buys more rounds (capped) before the decision.
    let decision = settle(first, |k| {
        note!(
            "ksmith:   undecided: timing the two again with {}x the rounds",
            1 << k
        );
        let again = judge
            .with_more_rounds(1 << k, |j| j.compare_checked(task, &pair))
            .map_err(|e| Halt::Failed(e.into()))?;
        let d = decide_paired(again.versus[1][0].as_ref());
        cmp = again;
        Ok::<_, Halt>(Some(d))
    })?;
    Ok(HeadToHead {
        versus: cmp.versus[1][0].map(|v| (v.speedup, v.interval.0, v.interval.1)),
        decision: Some(decision),
    })
}

/// The candidate's speedup over the best from the figures each got alone (separate windows,
/// intervals combined); None unless both were timed.
fn separate(cand: &EvalResult, best: &EvalResult) -> Option<Evidence> {
    let (c, b) = (cand.performance.as_ref()?, best.performance.as_ref()?);
    Some(Evidence::separate(
        (c.speedup, c.speedup_interval),
        (b.speedup, b.speedup_interval),
        c.never_quiet || b.never_quiet,
    ))
}

fn iteration(s: &mut Session, st: &mut State, it: u32) -> Result<(), Halt> {
    let base = match &st.best {
        Some((_, b)) => b.solution.clone(),
        None => Solution::load(&s.opts.from, &st.task).map_err(|e| Halt::Failed(anyhow!("{e}")))?,
    };
    let base_src = base.sources[0].1.clone();
    let mode = if st.best.as_ref().map(|(i, _)| *i > 0).unwrap_or(false) || it > 1 {
        Mode::Revision
    } else {
        Mode::New
    };
    note!("ksmith: [{}] planner ({})", st.label(it), mode.as_str());
    // Plan.
    let best = match &st.best {
        Some((bi, b)) => BestView::passing(
            format!("iteration {bi}"),
            &st.file,
            b.source(),
            &st.task,
            &b.result,
        ),
        None => BestView::not_passing("iteration 0".into(), &st.file, &base_src),
    };
    let last = st.last.as_ref().map(|l| LastView {
        iteration: l.iteration.to_string(),
        outcome: l.outcome.clone(),
        timing: l.timing.clone(),
        profile: l.profile.clone(),
    });
    let query = plan_query(
        &st.task,
        "",
        st.last.as_ref().map(|l| l.profile.as_str()).unwrap_or(""),
    );
    let vars = values(&PlannerContext {
        task: task_brief(st),
        reference: std::fs::read_to_string(st.task.reference_path()).unwrap_or_default(),
        roofline: roofline_text(st),
        mode,
        history: st.history.clone(),
        iteration: it,
        of: s.opts.budget.iterations,
        not_passing: st.best.is_none(),
        best,
        last,
        hint: None,
        inspirations: Vec::new(),
        memory: memory_for(s, st, it),
        knowledge: s.knowledge_for(&query, st.language.name(), st.task.op_class),
        tried: Vec::new(),
        search_best: None,
    });
    let step = format!("iteration {it} plan");
    let plan: Plan = loop {
        let got = ask(s, st, Role::Planner, &step, vars.clone(), 2, |r| {
            parse_plan(r).map_err(|e| e.0)
        })?;
        let plan = match got {
            Ok((p, _)) => p,
            Err(e) => {
                let why = format!("the planner gave no usable plan ({})", first_line(&e));
                no_candidate(s, it, &why)?;
                st.history.push(format!("iteration {it}: {why}"));
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
                    title: String::new(),
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
    note!(
        "ksmith:   plan: {} (expects {})",
        crate::term::one(&plan.headline()),
        plan.expected_speedup.map_or_else(
            || crate::term::one(plan.expected_effect.lines().next().unwrap_or("")).into_owned(),
            |x| format!("{x:.2}x against the best")
        )
    );
    // Implement: with the code of any earlier iteration the plan names ("take the iteration 2
    // kernel"), which the implementer could not see otherwise.
    let named = named_snapshots(
        s,
        &plan.markdown(),
        it,
        st.best.as_ref().map(|(i, _)| *i),
        &st.file,
    );
    let impl_vars = values(&ImplementerContext {
        task: task_brief(st),
        plan: plan.markdown(),
        file: st.file.clone(),
        source: base_src.clone(),
        machine: roofline_text(st),
        snapshots: named,
        knowledge: s.knowledge_for(
            &implement_query(&st.task, &plan.strategy),
            st.language.name(),
            st.task.op_class,
        ),
    });
    let source = match code_step(
        s,
        st,
        Role::Implementer,
        &format!("iteration {it} implement"),
        impl_vars,
        &base_src,
        "",
    )? {
        Ok(src) => src,
        Err(e) => {
            let why = format!(
                "{} -> the implementer's code could not be applied ({})",
                plan.headline(),
                first_line(&e)
            );
            no_candidate(s, it, &why)?;
            st.history.push(format!("iteration {it}: {why}"));
            return Ok(());
        }
    };
    let mut cand = evaluate(s, st, &variant(st, &base, it, "", source))?;
    report_line(st, it, "candidate", &cand);
    // Fix loops: build-stage and test-stage failures each get their own attempts.
    let mut fixes = FixBudget::new(s.opts.fix_attempts);
    let mut tried: Vec<String> = Vec::new();
    while !cand.passed() {
        let Some(n) = fixes.take(cand.result.status) else {
            break;
        };
        let (kind, detail) = failure(&cand);
        let vars = values(&FixerContext {
            task: task_brief(st),
            file: st.file.clone(),
            source: cand.source().to_string(),
            failure: FailureView {
                kind: kind.to_string(),
                detail: detail.clone(),
            },
            attempts: tried.clone(),
        });
        let step = format!("iteration {it} fix {kind} {n}");
        let src = cand.source().to_string();
        match code_step(s, st, Role::Fixer, &step, vars, &src, &detail)? {
            Ok(fixed) => {
                tried.push(format!("{kind}: {}", key_line(&detail)));
                cand = evaluate(
                    s,
                    st,
                    &variant(st, &base, it, &format!("-fix{}", fixes.taken()), fixed),
                )?;
                report_line(st, it, &format!("after fix {n} ({kind})"), &cand);
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
    // No profile in the last iteration: no plan would read it.
    let last_iteration = s.opts.budget.iterations.is_some_and(|n| it >= n);
    let profile = if cand.passed()
        && !s.opts.no_profile
        && !last_iteration
        && ksmith_search::agent::stages::Profiler::supports(
            &ksmith_search::agent::stages::PerfProfiler,
            st.language,
        ) {
        profile(s, st, it, &cand)?
    } else {
        String::new()
    };
    let summary = plan.headline();
    snapshot(s, it, &cand, &summary)?;
    // Against the best so far: both timed again side by side, in the same rounds, so the
    // decision does not rest on two speedups measured in different windows.
    let (improved, versus) = match (&st.best, cand.speedup()) {
        (_, None) => (false, None),
        (None, Some(_)) => (true, None),
        (Some((bi, b)), Some(_)) => {
            let bi = *bi;
            let h: HeadToHead = s.event("head_to_head", |_| {
                head_to_head(&mut st.judge, &st.task, &b.solution, &cand.solution)
            })?;
            let decision = match (h.decision, h.versus) {
                (Some(d), _) => d,
                (None, Some(v)) => decide(Evidence {
                    speedup: v.0,
                    low: v.1,
                    high: v.2,
                    paired: true,
                    disturbed: false,
                }),
                // Not timed together (one failed its re-check): the figures each got alone,
                // their intervals combined.
                (None, None) => separate(&cand.result, &b.result).map_or(
                    Decision::Undecided {
                        evidence: None,
                        why: UndecidedWhy::Unmeasured,
                    },
                    decide,
                ),
            };
            (decision.adopt(), Some((bi, h.versus, decision)))
        }
    };
    let tuning = st
        .tune_note
        .take()
        .map(|n| format!("; autotune: {n}"))
        .unwrap_or_default();
    let fixes = if tried.is_empty() {
        String::new()
    } else {
        format!(
            "; after {} fix attempt(s): {}",
            tried.len(),
            tried.join("; ")
        )
    };
    let against = expected_vs_measured(
        plan.expected_speedup,
        st.best.as_ref().map(|(bi, b)| (*bi, b.speedup())),
        cand.speedup(),
        versus.and_then(|(_, v, _)| v),
    );
    let decided = match versus {
        Some((_, _, d)) if d.adopt() => format!(", new best ({})", d.text()),
        Some((bi, _, d)) => format!("; iteration {bi} stays best ({})", d.text()),
        None if improved => ", new best".to_string(),
        None => String::new(),
    };
    st.history.push(format!(
        "iteration {it}: {summary} -> {}; {against}{decided}{fixes}{tuning}",
        outcome(&cand),
    ));
    // A failed iteration tells the next plan why (diagnostics, mismatch), not just the status.
    let last_outcome = if cand.passed() {
        outcome(&cand)
    } else {
        format!("{}\n{}", outcome(&cand), first_lines(&failure(&cand).1, 12))
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

/// The plan's expectation and the outcome as the same ratio: against the best so far, measured
/// side by side when both were timed together (else from their separate figures, said so).
fn expected_vs_measured(
    expected: Option<f64>,
    best: Option<(u32, Option<f64>)>,
    got: Option<f64>,
    together: Option<(f64, f64, f64)>,
) -> String {
    let exp = expected.map_or("?".to_string(), |x| format!("{x:.2}x"));
    let Some((bi, best_speedup)) = best else {
        return format!("expected {exp}, nothing passing to compare with");
    };
    let measured = match (together, got, best_speedup) {
        (Some(v), _, _) => format!(
            "measured {:.2}x ({:.2}-{:.2}) in the same rounds",
            v.0, v.1, v.2
        ),
        (None, Some(x), Some(b)) if b > 0.0 => {
            format!("measured {:.2}x from separate windows", x / b)
        }
        _ => "not measured (it did not pass)".to_string(),
    };
    format!("expected {exp} against iteration {bi}, {measured}")
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_fix_is_summarized_by_its_first_diagnostic_not_its_status() {
        let detail = "status COMPILE_ERROR\nkernel.c:3:5: error: unknown type name 'flot'\nkernel.c:9:1: error: x\n";
        assert_eq!(
            key_line(detail),
            "kernel.c:3:5: error: unknown type name 'flot'"
        );
        assert_eq!(key_line("status TIMEOUT\n"), "status TIMEOUT");
    }

    use super::*;

    #[test]
    fn expectation_and_outcome_are_the_same_ratio() {
        let v = (1.35, 1.2, 1.5);
        assert_eq!(
            expected_vs_measured(Some(1.8), Some((2, Some(3.0))), Some(4.0), Some(v)),
            "expected 1.80x against iteration 2, measured 1.35x (1.20-1.50) in the same rounds"
        );
        assert_eq!(
            expected_vs_measured(
                Some(1.8),
                Some((1, Some(0.5))),
                Some(0.7),
                Some((0.73, 0.12, 4.53))
            ),
            "expected 1.80x against iteration 1, measured 0.73x (0.12-4.53) in the same rounds"
        );
        assert_eq!(
            expected_vs_measured(Some(1.8), Some((2, Some(2.0))), Some(3.0), None),
            "expected 1.80x against iteration 2, measured 1.50x from separate windows"
        );
        assert_eq!(
            expected_vs_measured(None, Some((0, Some(2.0))), None, None),
            "expected ? against iteration 0, not measured (it did not pass)"
        );
        assert_eq!(
            expected_vs_measured(Some(1.0), None, Some(1.0), None),
            "expected 1.00x, nothing passing to compare with"
        );
    }

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
}
