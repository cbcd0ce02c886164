//! The search's tuner as the session's autotune stage: `ksmith tune`'s hill climbing, and its
//! outcome as the report both loops tell the next plans.

use crate::events::NullSink;
use crate::tune::{TuneOutcome, TuneSettings};
use ksmith_judge::{Judge, Status};
use ksmith_session::brief::status_text;
use ksmith_session::stages::{TuneReport, Tuner};
use ksmith_store::Store;
use ksmith_task::{Solution, Task};

/// Configurations whose figures are told to the next autotune plan, at most.
const TUNE_ROWS_SHOWN: usize = 16;

/// The tuner of `ksmith tune`: hill climbing from the current values, each configuration raced
/// against the best so far, the two leaders re-timed side by side with the untuned kernel.
pub struct HillClimbTuner;

impl HillClimbTuner {
    /// Its settings for `budget` configurations (the serial loop runs the same search with
    /// its progress shown).
    pub fn settings(budget: usize) -> TuneSettings {
        TuneSettings {
            strategy: "hillclimb".into(),
            budget,
            time_budget: None,
            seed: 1,
            race: true,
            confirm: 2,
        }
    }
}

impl Tuner for HillClimbTuner {
    fn tune(
        &self,
        judge: &mut Judge,
        store: &mut Store,
        task: &Task,
        sol: &Solution,
        budget: usize,
    ) -> anyhow::Result<(TuneReport, u64)> {
        let settings = HillClimbTuner::settings(budget);
        let o = crate::tune::search(judge, store, task, sol, &settings, &NullSink)?;
        let judged = o.rows.iter().filter(|r| !r.reused).count() as u64;
        Ok((tune_report(&o), judged))
    }
}

/// A tuner's outcome as a [`TuneReport`].
pub fn tune_report(o: &TuneOutcome) -> TuneReport {
    let config = o.best.clone().and_then(|(c, _)| c);
    let chosen = config
        .as_ref()
        .and_then(|c| o.confirmed.iter().find(|k| k.config.as_ref() == Some(c)));
    let versus = chosen.and_then(|k| k.vs_untuned);
    let decision = chosen.and_then(|k| k.decision);
    let mut note = match (&config, versus) {
        (Some(c), Some(v)) => format!(
            "tuned {}, {:.2}x ({:.2}-{:.2}) against the untuned kernel in the same rounds",
            ksmith_tune::label(c),
            v.speedup,
            v.interval.0,
            v.interval.1
        ),
        (None, _) if o.confirmed.iter().any(|k| k.decision.is_some()) => format!(
            "the current values stayed: no configuration was decided better in the same rounds ({}); {} other configuration(s) tried",
            o.confirmed
                .iter()
                .filter_map(|k| Some(format!(
                    "{}: {}",
                    ksmith_tune::label(k.config.as_ref()?),
                    k.decision?.text()
                )))
                .collect::<Vec<_>>()
                .join("; "),
            o.rows.len()
        ),
        (Some(c), None) => format!("tuned {}", ksmith_tune::label(c)),
        (None, _) => format!(
            "the current values stayed best; {} other configuration(s) tried",
            o.rows.len()
        ),
    };
    // Configurations that failed are data for the next plan, not noise to drop.
    let failed: Vec<String> = o
        .rows
        .iter()
        .filter(|r| r.result.status != Status::Passed)
        .map(|r| {
            let why = r
                .result
                .detail
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or("");
            format!(
                "{}: {}{}",
                ksmith_tune::label(&r.config),
                status_text(&r.result),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.chars().take(160).collect::<String>())
                }
            )
        })
        .collect();
    // Every configuration's per-workload figures: the next plan sees which values helped
    // where, not only the winner.
    let measured: Vec<String> = o
        .rows
        .iter()
        .filter_map(|r| {
            let p = r.result.performance.as_ref()?;
            let per = p
                .workloads
                .iter()
                .map(|w| format!("{:.2}x", w.speedup))
                .collect::<Vec<_>>()
                .join("/");
            let (lo, hi) = p.speedup_interval;
            Some(format!(
                "{}: {:.2}x ({lo:.2}-{hi:.2}; per workload {per})",
                ksmith_tune::label(&r.config),
                p.speedup
            ))
        })
        .take(TUNE_ROWS_SHOWN)
        .collect();
    if !measured.is_empty() {
        note.push_str(&format!(
            "; configurations measured (vs XLA: overall with its 95% interval, then per workload; a raced one was stopped once it could not win, so its figures are rough): {}",
            measured.join("; ")
        ));
    }
    if !failed.is_empty() {
        note.push_str(&format!(
            "; {} of {} configurations failed: {}",
            failed.len(),
            o.rows.len(),
            failed.join("; ")
        ));
    }
    TuneReport {
        config,
        note,
        faster: versus.map(|v| v.speedup),
        decision,
    }
}
