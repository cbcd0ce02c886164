//! The autotune step: the autotune planner declares tunables over the kernel's `#define`
//! constants, the deterministic tuner searches them, the winning values are written into the
//! source.

use super::review::{review, Verdict};
use super::session::{Halt, Session};
use super::step::{ask, evaluate, first_line, report_line, task_brief, variant, Judged, State};
use ksmith_agents::{Role, TuneDecision};
use ksmith_search::agent::brief::timing_text;
use ksmith_search::agent::stages::{
    adopt_tuned, check_tunables, defines_list, with_tunables, AutotuneContext, TuneReport,
};
use ksmith_search::agent::tuner::{tune_report, HillClimbTuner};

/// The autotune planner declares tunables; the deterministic tuner searches them.
pub(super) fn autotune(
    s: &mut Session,
    st: &mut State,
    it: u32,
    cand: Judged,
) -> Result<Judged, Halt> {
    let defs = ksmith_tune::source_defines(cand.source());
    if defs.is_empty() || s.opts.tune_budget == 0 {
        return Ok(cand);
    }
    // What tuning found in earlier iterations (failed configurations included).
    let earlier: Vec<String> = st
        .history
        .iter()
        .filter(|h| h.contains("; autotune: "))
        .cloned()
        .collect();
    let vars = serde_json::to_value(AutotuneContext {
        task: task_brief(st),
        file: st.file.clone(),
        source: cand.source().to_string(),
        defines: defines_list(&defs),
        earlier,
        budget: s.opts.tune_budget,
        timing: timing_text(&st.task, &cand.result),
    })
    .map_err(|e| Halt::Failed(e.into()))?;
    let step = format!("iteration {it} autotune");
    let names: Vec<String> = defs.iter().map(|(k, _)| k.clone()).collect();
    let check = |r: &str| check_tunables(r, &names);
    let toml_text = loop {
        let got = ask(s, st, Role::AutotunePlanner, &step, vars.clone(), 1, check)?;
        let toml_text = match got {
            Ok((TuneDecision::Tunables(t), _)) => t,
            Ok((TuneDecision::None(why), _)) => {
                note!(
                    "ksmith:   autotune planner: no tuning ({})",
                    crate::term::one(&why)
                );
                return Ok(cand);
            }
            Err(e) => {
                note!(
                    "ksmith:   autotune planner gave no usable tunables ({})",
                    crate::term::one(first_line(&e))
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
            Verdict::Edited(t) => match check(&format!("```toml\n{t}\n```")) {
                Ok(TuneDecision::Tunables(t)) => break t,
                _ => {
                    note!("ksmith:   the edited tunables are not usable; no tuning this iteration");
                    return Ok(cand);
                }
            },
            Verdict::Rerun => continue,
            Verdict::Quit => return Err(Halt::Quit),
        }
    };
    let tuned: TuneReport = s.event("tune", |s| {
        let sol = match with_tunables(&st.task, &cand.solution, &toml_text) {
            Ok(sol) => sol,
            Err(e) => {
                return Ok(TuneReport {
                    config: None,
                    note: e,
                    faster: None,
                    decision: None,
                })
            }
        };
        let o = crate::tune::with_view(
            st.ctx,
            &sol,
            &crate::run_args::judge_opts(&s.opts.judge),
            |judge, store, view| {
                let settings = HillClimbTuner::settings(s.opts.tune_budget);
                ksmith_search::tune::search(judge, store, &st.task, &sol, &settings, view)
            },
        )?;
        Ok(tune_report(&o))
    })?;
    note!("ksmith:   autotune: {}", crate::term::one(&tuned.note));
    st.tune_note = Some(tuned.note.clone());
    let Some(config) = tuned.config.clone() else {
        return Ok(cand);
    };
    // The values are written into the source, so later iterations edit the tuned kernel.
    let baked = ksmith_tune::bake_defines(cand.source(), &config);
    let sol = variant(st, &cand.solution, it, "-tuned", baked);
    let j = evaluate(s, st, &sol)?;
    report_line(
        st,
        it,
        &format!("tuned [{}]", ksmith_tune::label(&config)),
        &j,
    );
    if let Err(why) = adopt_tuned(&tuned, &j.result, &cand.result) {
        let discarded = format!("{}; the tuned kernel was discarded: {why}", tuned.note);
        note!("ksmith:   autotune: {}", crate::term::one(&discarded));
        st.tune_note = Some(discarded);
        return Ok(cand);
    }
    Ok(j)
}
