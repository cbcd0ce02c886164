//! The profile step: the candidate sampled by the session's profiler (`ksmith_search::agent::
//! stages`, shared with search nodes), summarized by the profile analyst for the next plan.

use super::review::{review, Verdict};
use super::session::{Halt, Session};
use super::step::{ask, roofline_text, task_brief, Judged, State};
use ksmith_agents::Role;
use ksmith_search::agent::brief::{first_lines, timing_text};
use ksmith_search::agent::stages::{AnalystContext, Profiler};

/// perf sampling + the compiler's vectorization report, summarized by the profile analyst.
pub(super) fn profile(
    s: &mut Session,
    st: &mut State,
    it: u32,
    cand: &Judged,
) -> Result<String, Halt> {
    let raw: String = s.event("profile", |s| {
        let dir = s.store.root().join("cache").join("profile");
        let profiler = ksmith_search::agent::stages::PerfProfiler;
        Ok(profiler.profile(&mut st.judge, &dir, &st.task, &cand.solution, &cand.result))
    })?;
    let vars = serde_json::to_value(AnalystContext {
        task: task_brief(st),
        file: st.file.clone(),
        source: cand.source().to_string(),
        timing: timing_text(&st.task, &cand.result),
        profile: raw.clone(),
        machine: roofline_text(st),
        tuning: st.tune_note.clone().unwrap_or_default(),
    })
    .map_err(|e| Halt::Failed(e.into()))?;
    let step = format!("iteration {it} profile");
    let got = ask(s, st, Role::ProfileAnalyst, &step, vars, 0, |r| {
        if r.trim().is_empty() {
            Err("the reply was empty".into())
        } else {
            Ok(r.trim().to_string())
        }
    })?;
    let summary = match got {
        Ok((t, _)) => first_lines(&t, 12),
        Err(_) => first_lines(&raw, 12),
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
