//! The end of a run: roll back to the fastest correct snapshot, re-validate it on fresh seeds,
//! write the kernel, its solution.toml and the report.

use super::iterate::State;
use super::session::Session;
use crate::{env_err, Exit};
use ksmith_judge::Status;
use ksmith_task::escape::{markdown_cell, markdown_code};

/// Rolls back to the fastest correct snapshot, re-validates it on fresh seeds, writes it out.
pub(super) fn finalize(
    s: &mut Session,
    st: State,
    status: &str,
    why: String,
) -> Result<(String, Option<String>, u8), Exit> {
    let snaps = s.store.snapshots(&s.run.id).map_err(env_err)?;
    let Some((bi, best)) = st.best else {
        say!(
            "run {}: no correct kernel in {} snapshots; nothing written ({})",
            s.run.id,
            snaps.len(),
            crate::term::one(&why)
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
    // Names, the reason and the snapshots' summaries (a model's words) are untrusted: escaped
    // for the markdown table and for the terminal it is also printed on.
    let mut md = format!(
        "# ksmith run {}\n\ntask {}, model {}, {} mode; {status}: {}\n\n| iteration | status | speedup vs XLA | latency (ms) | what |\n| --- | --- | --- | --- | --- |\n",
        s.run.id,
        markdown_code(&st.task.name),
        markdown_code(&s.run.model),
        s.run.mode,
        markdown_cell(&why)
    );
    for sn in &snaps {
        md.push_str(&format!(
            "| {}{} | {} | {} | {} | {} |\n",
            sn.iteration,
            if sn.iteration == bi { " (best)" } else { "" },
            markdown_cell(&sn.status),
            sn.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
            sn.latency_ms
                .map(|x| format!("{x:.3}"))
                .unwrap_or("-".into()),
            markdown_cell(&sn.summary)
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
        say!(
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
    crate::tune::write_solution(&best.solution, &out, "", "").map_err(env_err)?;
    std::fs::write(out.join("report.md"), &md).map_err(env_err)?;
    say!("{md}");
    say!(
        "best kernel (iteration {bi}, {:.2}x vs XLA) and report written to {}",
        best.speedup().unwrap_or(0.0),
        out.display()
    );
    s.run.out_dir = Some(out.display().to_string());
    Ok((status.to_string(), Some(why), 0))
}
