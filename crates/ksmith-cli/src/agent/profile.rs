//! The profile step: the candidate sampled with perf on its largest workload (ksmith-profile),
//! summarized by the profile analyst for the next plan.

use super::brief::{axes_text, first_lines, roofline_text, task_brief, timing_text};
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
        // The workload furthest below its roofline floor is where a change pays most (the
        // largest one was profiled before, and the weak ones never were); the largest when
        // there are no figures.
        let weakest = cand.result.performance.as_ref().and_then(|p| {
            p.workloads
                .iter()
                .min_by(|a, b| a.roofline_fraction.total_cmp(&b.roofline_fraction))
                .map(|w| (w.workload, w.roofline_fraction, w.speedup))
        });
        let (w, why) = match weakest {
            Some((w, frac, speedup)) => (
                w,
                format!(
                    "the furthest below its roofline floor ({:.0}% of it, {speedup:.2}x vs XLA)",
                    frac * 100.0
                ),
            ),
            None => (
                (0..st.task.workloads.len())
                    .max_by(|a, b| st.task.flops_of(*a).total_cmp(&st.task.flops_of(*b)))
                    .unwrap_or(0),
                "the largest".to_string(),
            ),
        };
        let axes = axes_text(&st.task, &st.task.workloads[w].axes);
        let dir = s.store.root().join("cache").join("profile");
        std::fs::create_dir_all(&dir).map_err(|e| Halt::Failed(e.into()))?;
        let budget = std::time::Duration::from_millis(500);
        // The judge's own inputs for this workload, so generated index tables describe real work.
        let inputs = st.judge.prepared_inputs(&st.task, w).ok();
        // Sampled alone on the device, as candidates are timed: a neighbour's work would
        // distort the shares the analyst reads.
        let lease = st
            .judge
            .device_lease(ksmith_judge::scheduler::Work::Profile)
            .map_err(|e| Halt::Failed(e.into()))?;
        let profiled = ksmith_profile::profile_c(
            &st.task,
            &cand.solution,
            w,
            &[],
            &dir,
            budget,
            inputs.as_deref(),
        );
        drop(lease);
        let header = format!("Profiled workload {w} ({axes}): {why}.\n");
        // The profiler's driver calls the kernel again and again on the same (warm) inputs;
        // the judge times it on fresh inputs evicted from the caches before every call. Said,
        // so the analyst does not read a warm profile as the judged kernel.
        let judged_ms = cand.result.performance.as_ref().and_then(|p| {
            p.workloads
                .iter()
                .find(|x| x.workload == w)
                .map(|x| (x.candidate.median_ms, x.cache_flushed))
        });
        let compared = |p: &ksmith_profile::CpuProfile| match judged_ms {
            Some((judged, flushed)) if p.calls > 0 && p.seconds > 0.0 => {
                let profiled = p.seconds * 1e3 / p.calls as f64;
                format!(
                    "Profiled: {profiled:.3} ms per call over {} calls on the same warm inputs; judged: {judged:.3} ms median on fresh inputs{} for every call ({:.2}x the profiled time).\n",
                    p.calls,
                    if flushed { " evicted from the caches" } else { "" },
                    judged / profiled.max(1e-9)
                )
            }
            _ => String::new(),
        };
        Ok(match profiled {
            Ok(p) => format!("{header}{}{}", compared(&p), p.summary()),
            Err(e) => format!("{header}profiling failed: {e}"),
        })
    })?;
    let vars = json!({"task": task_brief(st), "file": st.file, "source": cand.source(),
        "timing": timing_text(&st.task, &cand.result), "profile": raw,
        "machine": roofline_text(st), "tuning": st.tune_note.clone().unwrap_or_default()});
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
