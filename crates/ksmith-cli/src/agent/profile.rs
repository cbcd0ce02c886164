//! The profile step: the candidate sampled with perf on its largest workload (ksmith-profile),
//! summarized by the profile analyst for the next plan.

use super::brief::{tail_lines, task_brief, timing_text};
use super::iterate::{ask, Judged, State};
use super::review::{review, Verdict};
use super::session::{Halt, Session};
use ksmith_agents::Role;
use serde_json::json;

/// perf sampling + the compiler's vectorization report, summarized by the profile analyst.
pub(super) fn profile(
    s: &mut Session,
    st: &mut State,
    it: u32,
    cand: &Judged,
) -> Result<String, Halt> {
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
        "timing": timing_text(&cand.result), "profile": raw});
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
