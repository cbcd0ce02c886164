//! What every step of the serial loop works with: its typed state, a judged candidate, the
//! journaled ask (render, call, parse, re-ask) and the judge call; and the state rendered by
//! the engine's brief (`ksmith_search::agent::brief`). The steps (iterate, autotune, profile,
//! finish) import this module, never each other.

use super::session::{Halt, Session};
use crate::Ctx;
use anyhow::anyhow;
use ksmith_agents::{Rendered, Role};
use ksmith_judge::{EvalResult, Judge, Status};
use ksmith_search::agent::brief::timing_text;
use ksmith_search::agent::journal::{ask_until_usable, Asker};
use ksmith_task::{Language, Solution, Task};
use serde_json::Value;

/// A candidate that has been judged.
#[derive(Clone)]
pub(super) struct Judged {
    pub(super) solution: Solution,
    pub(super) result: EvalResult,
    pub(super) eval_id: i64,
}

impl Judged {
    pub(super) fn passed(&self) -> bool {
        self.result.status == Status::Passed && self.result.performance.is_some()
    }
    pub(super) fn speedup(&self) -> Option<f64> {
        self.passed()
            .then(|| self.result.performance.as_ref().map(|p| p.speedup))
            .flatten()
    }
    pub(super) fn source(&self) -> &str {
        &self.solution.sources[0].1
    }
}

/// What the planner hears about the last iteration.
pub(super) struct Last {
    pub(super) iteration: u32,
    pub(super) outcome: String,
    pub(super) timing: String,
    pub(super) profile: String,
}

/// The loop's typed state.
pub(super) struct State<'a> {
    pub(super) task: Task,
    pub(super) file: String,
    /// Entry point and language of the starting solution (kept by every candidate).
    pub(super) entry: String,
    pub(super) language: Language,
    pub(super) judge: Judge,
    pub(super) ctx: &'a Ctx,
    pub(super) best: Option<(u32, Judged)>,
    pub(super) history: Vec<String>,
    pub(super) last: Option<Last>,
    pub(super) guidance: Option<String>,
    /// What this iteration's autotuning found (failed configurations included).
    pub(super) tune_note: Option<String>,
    /// The machine's figures as measured when the run started: every prompt of the run uses
    /// them, so floors do not move between iterations when the judge re-measures.
    pub(super) hw: ksmith_backend::hw::Hardware,
    /// The run's iteration budget, when it has one (shown as `iteration i/n`).
    pub(super) iterations: Option<u32>,
}

impl State<'_> {
    /// `iteration i/n` (or `iteration i` when the run has no iteration budget).
    pub(super) fn label(&self, it: u32) -> String {
        match self.iterations {
            Some(n) if it > 0 => format!("iteration {it}/{n}"),
            _ => format!("iteration {it}"),
        }
    }
}

/// The tests (task definition + reference) must be byte-identical to the run's start.
pub(super) fn check_frozen(s: &Session, task: &Task) -> Result<(), Halt> {
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
pub(super) fn evaluate(s: &mut Session, st: &mut State, sol: &Solution) -> Result<Judged, Halt> {
    let task = crate::load_task(&st.task.dir)?;
    check_frozen(s, &task)?;
    let e = crate::evaluate_recorded(&mut st.judge, &mut s.store, &st.task, sol)?;
    Ok(Judged {
        solution: sol.clone(),
        result: e.result,
        eval_id: e.id,
    })
}

pub(super) fn outcome(j: &Judged) -> String {
    let r = &j.result;
    match (r.status, j.speedup()) {
        (Status::Passed, Some(x)) => format!("passed, {x:.2}x vs XLA"),
        (st, _) => match &r.reason {
            Some(reason) => format!("{st} ({reason})"),
            None => st.to_string(),
        },
    }
}

pub(super) fn report_line(st: &State, it: u32, what: &str, j: &Judged) {
    let task = &st.task;
    note!(
        "ksmith: [{}] {}: {} (evaluation {})",
        st.label(it),
        crate::term::one(what),
        crate::term::one(&outcome(j)),
        j.eval_id
    );
    if j.passed() {
        for line in timing_text(task, &j.result).lines() {
            note!("ksmith:     {line}");
        }
    }
}

/// Renders, calls and parses, re-asking with the parse error up to `retries` times (the
/// shared rule, `journal::ask_until_usable`). `Ok(Err(msg))`: never a usable answer.
pub(super) fn ask<T>(
    s: &mut Session,
    st: &mut State,
    role: Role,
    step: &str,
    vars: Value,
    retries: u32,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Result<(T, String), String>, Halt> {
    let guidance = st.guidance.take();
    ask_until_usable(&mut RunAsker(s), role, step, vars, guidance, retries, parse)
}

/// A serial run's calls, as the shared ask rule makes them.
struct RunAsker<'a>(&'a mut Session);

impl Asker for RunAsker<'_> {
    type Error = Halt;

    fn render(&mut self, role: Role, vars: &Value) -> Result<Rendered, Halt> {
        self.0
            .prompts
            .render(role, vars)
            .map_err(|e| Halt::Failed(e.into()))
    }

    fn call(&mut self, role: Role, step: &str, prompt: &Rendered) -> Result<String, Halt> {
        self.0.call(role, step, prompt)
    }

    fn unusable(&mut self, role: Role, step: &str, why: &str) {
        note!(
            "ksmith:   {step}: unusable {} reply: {}",
            role.name(),
            crate::term::one(why)
        );
    }
}

pub(super) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A candidate derived from `base`: new source, same language, entry point and compiler flags.
pub(super) fn variant(st: &State, base: &Solution, it: u32, tag: &str, source: String) -> Solution {
    Solution::from_source(
        &format!("{}-{it}{tag}", st.task.name),
        base.language,
        &base.entry_point,
        &st.file,
        source,
        base.flags.clone(),
    )
}

/// The task as every role is told it.
pub(super) fn task_brief(st: &State) -> Value {
    ksmith_search::agent::brief::task_brief(&st.task, &st.entry, st.language)
}

/// The machine as every role is told it (fixed for the run).
pub(super) fn roofline_text(st: &State) -> String {
    ksmith_search::agent::brief::roofline_text(&st.hw)
}

/// The failure of a judged candidate as the fixer needs it.
pub(super) fn failure(j: &Judged) -> (&'static str, String) {
    ksmith_search::agent::brief::failure(&j.result)
}
