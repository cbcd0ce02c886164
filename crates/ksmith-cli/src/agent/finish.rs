//! The end of a run: the finalists (the fastest correct snapshots and the start) are checked
//! again on fresh seeds and re-timed together, side by side in the same rounds; the one fastest
//! against the start wins, and is written with its solution.toml and the report.

use super::session::Session;
use super::step::State;
use crate::{env_err, Exit};
use ksmith_store::SnapshotRow;
use ksmith_task::escape::{markdown_cell, markdown_code};
use ksmith_task::Solution;

/// Snapshots re-timed at the end besides the start: the fastest few by their own figures.
const FINALISTS: usize = 3;

/// A snapshot's code and flags as a solution (the language and entry point of the best).
fn snapshot_solution(
    s: &Session,
    st: &State,
    base: &Solution,
    sn: &SnapshotRow,
) -> Option<Solution> {
    let stored: serde_json::Value = serde_json::from_str(&sn.sources).ok()?;
    let hash = stored["files"][&st.file].as_str()?;
    let source = String::from_utf8(s.store.artifact(hash).ok()?).ok()?;
    let flags = stored["flags"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    Some(Solution::from_source(
        &format!("{}-{}", st.task.name, sn.iteration),
        base.language,
        &base.entry_point,
        &st.file,
        source,
        flags,
    ))
}

/// Re-times the finalists together on fresh seeds, writes the winner and the report.
pub(super) fn finalize(
    s: &mut Session,
    st: State,
    status: ksmith_store::RunStatus,
    why: String,
) -> Result<(ksmith_store::RunStatus, Option<String>, u8), Exit> {
    let snaps = s.store.snapshots(&s.run.id).map_err(env_err)?;
    let Some((bi, best)) = st.best.as_ref() else {
        say!(
            "run {}: no correct kernel in {} snapshots; nothing written ({})",
            s.run.id,
            snaps.len(),
            crate::term::one(&why)
        );
        return Ok((status, Some(format!("{why}; no correct kernel")), 1));
    };
    let bi = *bi;
    // Finalists: the start (when it passed), then the fastest correct snapshots by the figure
    // each got alone; the same code only once.
    let passed = |sn: &&SnapshotRow| sn.status == "PASSED" && sn.speedup.is_some();
    let mut ranked: Vec<&SnapshotRow> = snaps.iter().filter(passed).collect();
    ranked.sort_by(|a, b| {
        b.speedup
            .unwrap_or(0.0)
            .total_cmp(&a.speedup.unwrap_or(0.0))
    });
    let mut finalists: Vec<(&SnapshotRow, Solution)> = Vec::new();
    let start = snaps.iter().find(|sn| sn.iteration == 0).filter(passed);
    for sn in start.into_iter().chain(ranked.into_iter().take(FINALISTS)) {
        let Some(sol) = (if sn.iteration == bi {
            Some(best.solution.clone())
        } else {
            snapshot_solution(s, &st, &best.solution, sn)
        }) else {
            continue;
        };
        if !finalists
            .iter()
            .any(|(_, f)| f.content_hash == sol.content_hash)
        {
            finalists.push((sn, sol));
        }
    }
    // The run's best (adopted by the decision rule) is a finalist: it is the incumbent.
    if let Some(sn) = snaps.iter().find(|sn| sn.iteration == bi) {
        if !finalists
            .iter()
            .any(|(_, f)| f.content_hash == best.solution.content_hash)
        {
            finalists.push((sn, best.solution.clone()));
        }
    }
    let mut fresh = crate::run_args::judge_opts(&s.opts.judge);
    fresh.fresh_seeds = true;
    let mut judge = st.ctx.judge(&fresh)?;
    let solutions: Vec<Solution> = finalists.iter().map(|(_, f)| f.clone()).collect();
    // The incumbent every finalist must be decided better than: the start when it is a
    // finalist (it passed), else the run's best.
    let reference = if start.is_some() {
        0
    } else {
        finalists
            .iter()
            .position(|(_, f)| f.content_hash == best.solution.content_hash)
            .unwrap_or(0)
    };
    let seed =
        u64::from_str_radix(&ksmith_task::content_hash(s.run.id.as_bytes())[..16], 16).unwrap_or(7);
    note!(
        "ksmith: re-checking {} finalists on fresh seeds and held-out shapes, timed together",
        solutions.len()
    );
    let judged = ksmith_search::finalize::judge_finalists(
        &mut judge,
        &mut s.store,
        &st.task,
        &solutions,
        reference,
        Some(seed),
    )
    .map_err(crate::eval_err)?;
    drop(judge);
    let name = |i: usize| {
        if finalists[i].0.iteration == 0 {
            "the start".to_string()
        } else {
            format!("iteration {}", finalists[i].0.iteration)
        }
    };
    for (i, d) in judged.decisions.iter().enumerate() {
        if let Some(d) = d {
            note!(
                "ksmith: finalist {} against {}: {}",
                name(i),
                name(reference),
                d.text()
            );
        }
    }
    let winner = judged.winner;
    // Stored with the run, so that `show` and the report name the kernel written, with the
    // finalists' figures.
    let iterations: Vec<u64> = finalists
        .iter()
        .map(|(sn, _)| sn.iteration as u64)
        .collect();
    let record = judged.record(&iterations, name);
    ksmith_search::finalize::record_final(&s.store, &s.run.id, &record).map_err(env_err)?;
    let (ids, cmp, held) = (
        &judged.rechecked.ids,
        &judged.rechecked,
        &judged.held_out.per,
    );
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
    let won_iteration = winner.map(|w| finalists[w].0.iteration);
    for sn in &snaps {
        md.push_str(&format!(
            "| {}{} | {} | {} | {} | {} |\n",
            sn.iteration,
            if Some(sn.iteration) == won_iteration {
                " (winner)"
            } else {
                ""
            },
            markdown_cell(&sn.status),
            sn.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
            sn.latency_ms
                .map(|x| format!("{x:.3}"))
                .unwrap_or("-".into()),
            markdown_cell(&sn.summary)
        ));
    }
    let ref_name = name(reference);
    md.push_str(&format!(
        "\n## Finalists, re-checked on fresh seeds and re-timed together\n\nEvery finalist's rounds share the same windows and the same XLA baseline calls, so they are compared with each other directly. Held-out shapes (never shown to the agents nor timed; a finalist failing them cannot win): {}.\n\n| iteration | evaluation | status | held-out | alone: vs XLA | together: vs XLA (95%) | together: vs {ref_name} (95%) | decision |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
        markdown_cell(&judged.held_out.shapes_text())
    ));
    for (i, ((sn, _), r)) in finalists.iter().zip(&cmp.results).enumerate() {
        let together = r
            .performance
            .as_ref()
            .map(|p| crate::report::ratio(p.speedup, p.speedup_interval))
            .unwrap_or("-".into());
        let vs = if i == reference {
            "1.00x".to_string()
        } else {
            cmp.versus[i][reference]
                .map(|v| crate::report::ratio(v.speedup, v.interval))
                .unwrap_or("-".into())
        };
        let held_text = match &held[i] {
            Some((id, h)) => format!("{} (evaluation {id})", crate::report::status_text(h)),
            None => "-".into(),
        };
        let decision = if i == reference {
            "incumbent".to_string()
        } else {
            judged.decisions[i].map_or("not eligible".into(), |d| d.word().to_string())
        };
        md.push_str(&format!(
            "| {}{} | {} | {} | {} | {} | {together} | {vs} | {decision} |\n",
            sn.iteration,
            if Some(i) == winner { " (winner)" } else { "" },
            ids[i],
            markdown_cell(&crate::report::status_text(r)),
            markdown_cell(&held_text),
            sn.speedup.map(|x| format!("{x:.2}x")).unwrap_or("-".into()),
        ));
    }
    let (tin, tout, cost): (u64, u64, f64) = calls.iter().fold((0, 0, 0.0), |a, c| {
        (a.0 + c.tokens_in, a.1 + c.tokens_out, a.2 + c.cost)
    });
    md.push_str(&format!(
        "\nLLM calls: {} ({} tokens in, {} out, ${cost:.4}).\n",
        calls.len(),
        tin,
        tout
    ));
    let Some(w) = winner else {
        say!("{md}\nno finalist passed on fresh seeds and the held-out shapes; nothing written");
        return Ok((
            status,
            Some(format!(
                "{why}; no finalist passed fresh-seed re-validation and the held-out shapes"
            )),
            1,
        ));
    };
    let won = &cmp.results[w];
    md.push_str(&format!(
        "Winner: iteration {} (evaluation {}). {}.\n",
        finalists[w].0.iteration,
        ids[w],
        judged.summary(name)
    ));
    // The winner per workload, from the rounds it was re-timed in.
    if let Some(p) = &won.performance {
        md.push_str("\n## The winner per workload (re-timed together)\n\n| workload | kernel ms | XLA ms | speedup (95%) | GFLOP/s | GB/s | roofline floor ms | % of roofline | caches evicted |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for wp in &p.workloads {
            let axes = st
                .task
                .axes
                .iter()
                .filter_map(|a| wp.axes.get(&a.name).map(|v| format!("{}={v}", a.name)))
                .collect::<Vec<_>>()
                .join(" ");
            md.push_str(&format!(
                "| {axes} | {:.3} | {:.3} | {:.2}x ({:.2}-{:.2}) | {:.1} | {:.1} | {:.3} | {} | {} |\n",
                wp.candidate.median_ms,
                wp.baseline.median_ms,
                wp.speedup,
                wp.speedup_interval.0,
                wp.speedup_interval.1,
                wp.gflops,
                wp.gbps,
                wp.floor_ms,
                wp.roofline_cell(),
                if wp.cache_flushed { "yes" } else { "no" }
            ));
        }
    }
    let out = s.opts.out.clone();
    // The start's tunables stay declared where the winner still has their `#define`s, so the
    // written solution can be tuned again.
    let mut written = finalists[w].1.clone();
    if let Ok(start) = Solution::load(&s.opts.from, &st.task) {
        let defines: Vec<String> = ksmith_tune::source_defines(&written.sources[0].1)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        written.tunables = start
            .tunables
            .into_iter()
            .filter(|t| defines.contains(&t.name))
            .collect();
    }
    crate::tune::write_solution(&written, &out, "", "").map_err(env_err)?;
    std::fs::write(out.join("report.md"), &md).map_err(env_err)?;
    say!("{md}");
    say!(
        "winner (iteration {}, {:.2}x vs XLA re-timed together) and report written to {}",
        finalists[w].0.iteration,
        won.performance.as_ref().map(|p| p.speedup).unwrap_or(0.0),
        out.display()
    );
    s.run.out_dir = Some(out.display().to_string());
    // What this run learned goes to the cross-run memory (advice for other tasks' planners).
    match ksmith_search::memory::harvest_on_finish(&s.store, &s.run.id) {
        Ok(line) => note!("ksmith: {line}"),
        Err(e) => note!("ksmith: warning: memory not harvested: {e}"),
    }
    Ok((status, Some(why), 0))
}
