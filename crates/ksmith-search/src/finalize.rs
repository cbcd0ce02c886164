//! Before a winner is declared: the finalists judged again on seeds they have never seen
//! (the caller's judge is made with fresh seeds), timed side by side in the same rounds when
//! there is timing, and the winner chosen from that second judgement only. Shared by
//! `optimize` (the tuner's winner) and the agent loop's finish (the fastest snapshots).

use crate::evaluator::{Evaluator, EvaluatorError, Purpose};
use ksmith_judge::{EvalResult, Relative, Status};
use ksmith_task::{Solution, Task};

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
