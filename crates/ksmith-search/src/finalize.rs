//! Before a winner is declared: the finalists judged again on seeds they have never seen
//! (the caller's judge is made with fresh seeds), timed side by side in the same rounds when
//! there is timing, checked on held-out shapes, and the winner chosen from that second
//! judgement only, by the one decision rule (`ksmith_judge::decide`). Shared by `optimize`
//! (the tuner's winner), the agent loop's finish and the graph search's finalizer.

use crate::evaluator::{Evaluator, EvaluatorError, Purpose, Reuse};
use ksmith_judge::decide::{choose_against, Decision, MORE_ROUNDS};
use ksmith_judge::{EvalResult, Judge, Relative, Status};
use ksmith_store::Store;
use ksmith_task::{Solution, Task, Workload};
use serde::{Deserialize, Serialize};

/// How the finalists are judged again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recheck {
    /// Checked and timed side by side in the same rounds ([`ksmith_judge::Judge::compare`]).
    TimedTogether,
    /// Checked for correctness only, each alone (a judge with timing off).
    CorrectnessOnly,
}

/// The finalists judged again.
#[derive(Debug, Clone)]
pub struct Rechecked {
    /// Per finalist, in the order given: its stored evaluation id.
    pub ids: Vec<i64>,
    /// Per finalist: the result of the second judgement.
    pub results: Vec<EvalResult>,
    /// `versus[i][j]`: finalist `i` against `j` in the same rounds (timed together only).
    pub versus: Vec<Vec<Option<Relative>>>,
}

impl Rechecked {
    /// Whether finalist `i` passed again (and was timed, when timing was on).
    pub fn passed(&self, i: usize, recheck: Recheck) -> bool {
        let r = &self.results[i];
        r.status == Status::Passed
            && (recheck == Recheck::CorrectnessOnly || r.performance.is_some())
    }

    /// Finalist `i`'s score for choosing the winner (higher is better): against the
    /// reference in the same rounds when the reference was timed, else its speedup over the
    /// baseline (the same baseline calls for every finalist); 0 without a figure.
    pub fn score(&self, i: usize, reference: usize) -> f64 {
        let timed = |k: usize| self.results[k].performance.as_ref();
        if timed(reference).is_some() {
            if i == reference {
                1.0
            } else {
                self.versus
                    .get(i)
                    .and_then(|row| row.get(reference).copied().flatten())
                    .map_or(0.0, |v| v.speedup)
            }
        } else {
            timed(i).map_or(0.0, |p| p.speedup)
        }
    }
}

/// Judges `finalists` again with the evaluator's judge (the caller makes it with fresh seeds)
/// and records every result.
pub fn recheck(
    ev: &mut Evaluator<'_>,
    task: &Task,
    finalists: &[Solution],
    how: Recheck,
) -> Result<Rechecked, EvaluatorError> {
    match how {
        Recheck::TimedTogether => {
            let (ids, cmp) = ev.compare(task, finalists)?;
            Ok(Rechecked {
                ids,
                results: cmp.results,
                versus: cmp.versus,
            })
        }
        Recheck::CorrectnessOnly => {
            let mut ids = Vec::new();
            let mut results = Vec::new();
            for sol in finalists {
                let e = ev.evaluate(task, sol, &Purpose::Plain)?;
                ids.push(e.id);
                results.push(e.result);
            }
            Ok(Rechecked {
                ids,
                results,
                versus: Vec::new(),
            })
        }
    }
}

/// The winner among the finalists that passed again and that `eligible` accepts (e.g. they
/// also passed held-out shapes). Timed together with the reference passing: the reference (the
/// incumbent) unless a finalist is decided better than it in the same rounds
/// ([`ksmith_judge::decide::choose_against`]); otherwise the highest [`Rechecked::score`], on a
/// tie the earlier one (callers list the reference, or their preferred candidate, first).
pub fn choose_winner(
    rechecked: &Rechecked,
    how: Recheck,
    reference: usize,
    eligible: impl Fn(usize) -> bool,
) -> Option<usize> {
    let ok = |i: usize| rechecked.passed(i, how) && eligible(i);
    if how == Recheck::TimedTogether && reference < rechecked.results.len() && ok(reference) {
        let (w, _) = ksmith_judge::decide::choose_against(
            reference,
            (0..rechecked.results.len()).filter(|&i| ok(i)),
            &rechecked.versus,
        );
        return Some(w);
    }
    let scores: Vec<Option<f64>> = (0..rechecked.results.len())
        .map(|i| (rechecked.passed(i, how) && eligible(i)).then(|| rechecked.score(i, reference)))
        .collect();
    best_score(&scores)
}

/// Shapes never shown to the agents nor timed in the run, and each finalist's check on them.
#[derive(Debug, Clone, Default)]
pub struct HeldOut {
    /// The held-out workloads the reference accepts (none: nothing was held out).
    pub shapes: Vec<Workload>,
    /// Per finalist that passed its re-check: its held-out evaluation id and result.
    pub per: Vec<Option<(i64, EvalResult)>>,
}

impl HeldOut {
    /// Whether finalist `i` did not fail the held-out shapes (passed, or was not checked).
    pub fn allows(&self, i: usize) -> bool {
        self.per
            .get(i)
            .and_then(|p| p.as_ref())
            .is_none_or(|(_, r)| r.status == Status::Passed)
    }

    /// `M=1001 N=255; M=667 N=255`, or what was held out when nothing was.
    pub fn shapes_text(&self) -> String {
        if self.shapes.is_empty() {
            return "none the reference accepts".into();
        }
        self.shapes
            .iter()
            .map(Workload::axes_text)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The final judgement of a run's finalists: the one path every mode's winner comes from.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// The finalists judged again on fresh seeds, timed together (the last timing, after any
    /// re-timing with more rounds).
    pub rechecked: Rechecked,
    /// The held-out check.
    pub held_out: HeldOut,
    /// The finalist every other must be decided better than (the start, when it holds).
    pub incumbent: usize,
    /// The finalist to write, if any holds up.
    pub winner: Option<usize>,
    /// Per finalist: its decision against the incumbent (None: the incumbent itself, or not
    /// eligible: failed again, failed the held-out shapes, or no incumbent to compare with).
    pub decisions: Vec<Option<Decision>>,
    /// How many times the comparison was timed again with more rounds (an undecided, wide
    /// interval).
    pub retimed: u32,
    /// Whether the winner came from the decision rule against the incumbent (false: the
    /// incumbent failed again, and the winner is the best score among the others).
    pub by_rule: bool,
}

impl Judgement {
    /// Whether finalist `i` may win: passed again, timed, and not failed on held-out shapes.
    pub fn eligible(&self, i: usize) -> bool {
        self.rechecked.passed(i, Recheck::TimedTogether) && self.held_out.allows(i)
    }

    /// Finalist `i` against the incumbent in the same rounds, when both were timed.
    pub fn versus_incumbent(&self, i: usize) -> Option<Relative> {
        self.rechecked
            .versus
            .get(i)
            .and_then(|row| row.get(self.incumbent).copied().flatten())
    }

    /// One line on how the winner was chosen, for outputs and reports.
    pub fn summary(&self, name: impl Fn(usize) -> String) -> String {
        let retimed = if self.retimed > 0 {
            format!(
                " (timed again {} time(s) with more rounds: the first interval was wide)",
                self.retimed
            )
        } else {
            String::new()
        };
        match self.winner {
            None => "no finalist passed again on fresh seeds and the held-out shapes".into(),
            Some(w) if w == self.incumbent => format!(
                "{} stays: no finalist was decided faster in the same rounds{retimed}",
                name(w)
            ),
            Some(w) if self.by_rule => format!(
                "{}: {} against {}{retimed}",
                name(w),
                self.decisions[w].map_or("-".into(), |d| d.text()),
                name(self.incumbent)
            ),
            Some(w) => format!(
                "{}: {} failed again, so the fastest of the others by its figure",
                name(w),
                name(self.incumbent)
            ),
        }
    }
}

/// A speedup with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The point estimate.
    pub speedup: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

impl Figure {
    /// `1.35x (1.20-1.50)`.
    pub fn text(&self) -> String {
        format!("{:.2}x ({:.2}-{:.2})", self.speedup, self.low, self.high)
    }
}

/// One finalist in a [`FinalRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalistRow {
    /// Its id: a search node, or a serial run's iteration.
    pub node: u64,
    /// Its re-check's stored evaluation.
    pub eval_id: Option<i64>,
    /// The re-check's status (`PASSED`, `INCORRECT_NUMERICAL`, ...).
    pub status: String,
    /// The held-out check's status, when it was checked.
    pub held_out: Option<String>,
    /// Against XLA, timed together with the others.
    pub together: Option<Figure>,
    /// Against the incumbent in the same rounds.
    pub vs_incumbent: Option<Figure>,
    /// Its decision against the incumbent (`better`, `not better`, `undecided`), or why it
    /// had none (`incumbent`, `not eligible`).
    pub decision: String,
}

impl FinalistRow {
    /// `finalist 3: PASSED, held-out PASSED, 2.10x (1.90-2.30) vs XLA, 1.40x (1.20-1.60) vs
    /// the incumbent: better (winner)`.
    pub fn line(&self, winner: Option<u64>) -> String {
        format!(
            "finalist {}: {}{}, {} vs XLA, {} vs the incumbent: {}{}",
            self.node,
            self.status,
            self.held_out
                .as_ref()
                .map_or(String::new(), |h| format!(", held-out {h}")),
            self.together.map_or("-".into(), |x| x.text()),
            self.vs_incumbent.map_or("-".into(), |x| x.text()),
            self.decision,
            if winner == Some(self.node) {
                " (winner)"
            } else {
                ""
            }
        )
    }
}

/// What the final judgement decided, as stored with the run (the `winner` event) and shown by
/// `show`, `report` and the outputs: the winner written is this one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalRecord {
    /// The winner's id (a search node, or a serial run's iteration); None: none held up.
    pub node: Option<u64>,
    /// The incumbent's id (the start, when it held).
    #[serde(default)]
    pub incumbent: Option<u64>,
    /// How the winner was chosen, one line.
    #[serde(default)]
    pub summary: String,
    /// The held-out shapes.
    #[serde(default)]
    pub held_out: String,
    /// Times the comparison was timed again with more rounds.
    #[serde(default)]
    pub retimed: u32,
    /// Every finalist re-judged.
    #[serde(default)]
    pub finalists: Vec<FinalistRow>,
}

impl Judgement {
    /// The record of this judgement, the finalists named by `ids` and `name`.
    pub fn record(&self, ids: &[u64], name: impl Fn(usize) -> String) -> FinalRecord {
        let fig = |s: f64, (low, high): (f64, f64)| Figure {
            speedup: s,
            low,
            high,
        };
        let rows = (0..ids.len().min(self.rechecked.results.len()))
            .map(|i| {
                let r = &self.rechecked.results[i];
                FinalistRow {
                    node: ids[i],
                    eval_id: self.rechecked.ids.get(i).copied(),
                    status: r.status.to_string(),
                    held_out: self
                        .held_out
                        .per
                        .get(i)
                        .and_then(|p| p.as_ref())
                        .map(|(_, h)| h.status.to_string()),
                    together: r
                        .performance
                        .as_ref()
                        .map(|p| fig(p.speedup, p.speedup_interval)),
                    vs_incumbent: if i == self.incumbent {
                        None
                    } else {
                        self.versus_incumbent(i).map(|v| fig(v.speedup, v.interval))
                    },
                    decision: if i == self.incumbent {
                        "incumbent".into()
                    } else {
                        self.decisions[i].map_or("not eligible".into(), |d| d.word().to_string())
                    },
                }
            })
            .collect();
        FinalRecord {
            node: self.winner.and_then(|w| ids.get(w).copied()),
            incumbent: ids.get(self.incumbent).copied(),
            summary: self.summary(name),
            held_out: self.held_out.shapes_text(),
            retimed: self.retimed,
            finalists: rows,
        }
    }
}

/// The journal position a run's final judgement is stored at: far past any journal a run
/// replays (a serial run replays its events by position on resume, so a record among them
/// made the resumed run's journal diverge), and one place, so a later judgement replaces it.
pub const FINAL_RECORD_SEQ: u64 = 1 << 40;

/// Stores `record` as `run`'s final judgement (the `winner` event).
pub fn record_final(
    store: &Store,
    run: &str,
    record: &FinalRecord,
) -> Result<(), ksmith_store::StoreError> {
    let payload = serde_json::to_string(record).unwrap_or_default();
    store.record_event(run, FINAL_RECORD_SEQ, "winner", &payload)
}

/// `run`'s final judgement, when one was recorded (an older record's position included).
pub fn recorded_final(store: &Store, run: &str) -> Option<FinalRecord> {
    store
        .events(run)
        .ok()?
        .into_iter()
        .rev()
        .find(|(_, k, _)| k == "winner")
        .and_then(|(_, _, p)| serde_json::from_str(&p).ok())
}

/// The finalists judged again with `judge` (made with fresh seeds, timing on): timed together,
/// checked (untimed) on held-out shapes derived from `held_out_seed` that the reference accepts,
/// and the winner chosen against `incumbent` by the decision rule; a comparison left undecided
/// on a wide interval is timed again with more rounds (at most [`MORE_ROUNDS`] times). When
/// the incumbent fails again, the winner is the eligible finalist with the best score.
pub fn judge_finalists(
    judge: &mut Judge,
    store: &mut Store,
    task: &Task,
    finalists: &[Solution],
    incumbent: usize,
    held_out_seed: Option<u64>,
) -> Result<Judgement, EvaluatorError> {
    let mut rechecked = recheck(
        &mut Evaluator::new(judge, store),
        task,
        finalists,
        Recheck::TimedTogether,
    )?;
    let held_out = match held_out_seed {
        Some(seed) => held_out_check(judge, store, task, finalists, &rechecked, seed)?,
        None => HeldOut::default(),
    };
    let mut j = Judgement {
        rechecked,
        held_out,
        incumbent,
        winner: None,
        decisions: vec![None; finalists.len()],
        retimed: 0,
        by_rule: false,
    };
    j.choose();
    while j.retimed < MORE_ROUNDS
        && j.winner == Some(incumbent)
        && j.decisions
            .iter()
            .flatten()
            .any(Decision::wants_more_rounds)
    {
        j.retimed += 1;
        let factor = 1 << j.retimed;
        rechecked = judge.with_more_rounds(factor, |jd| {
            recheck(
                &mut Evaluator::new(jd, store),
                task,
                finalists,
                Recheck::TimedTogether,
            )
        })?;
        j.rechecked = rechecked;
        j.choose();
    }
    Ok(j)
}

impl Judgement {
    /// Applies the rule to the current figures.
    fn choose(&mut self) {
        let n = self.rechecked.results.len();
        self.decisions = vec![None; n];
        let ok: Vec<bool> = (0..n).map(|i| self.eligible(i)).collect();
        if self.incumbent < n && ok[self.incumbent] {
            let (w, decided) = choose_against(
                self.incumbent,
                (0..n).filter(|&i| ok[i]),
                &self.rechecked.versus,
            );
            for (i, d) in decided {
                self.decisions[i] = Some(d);
            }
            self.winner = Some(w);
            self.by_rule = true;
        } else {
            let scores: Vec<Option<f64>> = (0..n)
                .map(|i| ok[i].then(|| self.rechecked.score(i, self.incumbent)))
                .collect();
            self.winner = best_score(&scores);
            self.by_rule = false;
        }
    }
}

/// The held-out check (see [`HeldOut`]): untimed, on fresh seeds, never reused from the store.
fn held_out_check(
    judge: &mut Judge,
    store: &mut Store,
    task: &Task,
    finalists: &[Solution],
    rechecked: &Rechecked,
    seed: u64,
) -> Result<HeldOut, EvaluatorError> {
    judge.without_timing(|judge| {
        let mut shapes = Vec::new();
        for w in task.held_out_workloads(seed) {
            let one = task.with_workloads(vec![w.clone()], "held-out");
            // A shape the reference rejects (or that makes its output degenerate) is not valid
            // for the task: left out, not held against a kernel.
            if judge.validate_task(&one).is_ok_and(|p| p.is_empty()) {
                shapes.push(w);
            }
        }
        let mut per = vec![None; finalists.len()];
        if shapes.is_empty() {
            return Ok(HeldOut { shapes, per });
        }
        let held = task.with_workloads(shapes.clone(), "held-out");
        for (i, sol) in finalists.iter().enumerate() {
            if rechecked.results[i].status != Status::Passed {
                continue;
            }
            let e = Evaluator::new(judge, store)
                .with_reuse(Reuse::Never)
                .evaluate(&held, sol, &Purpose::HeldOut)?;
            per[i] = Some((e.id, e.result));
        }
        Ok(HeldOut { shapes, per })
    })
}

/// The index of the highest score (the first of equals); None when none has one.
fn best_score(scores: &[Option<f64>]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, s) in scores.iter().enumerate() {
        if let Some(s) = *s {
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((i, s));
            }
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_score_wins_and_ties_go_to_the_first() {
        assert_eq!(best_score(&[Some(1.0), Some(1.2), Some(1.1)]), Some(1));
        assert_eq!(best_score(&[Some(1.0), Some(1.0)]), Some(0));
        assert_eq!(best_score(&[None, Some(0.5)]), Some(1));
        assert_eq!(best_score(&[None, None]), None);
        assert_eq!(best_score(&[]), None);
    }

    #[test]
    fn a_finalist_that_fails_again_never_wins() {
        let empty = Rechecked {
            ids: vec![],
            results: vec![],
            versus: vec![],
        };
        assert_eq!(
            choose_winner(&empty, Recheck::TimedTogether, 0, |_| true),
            None
        );
    }
}
