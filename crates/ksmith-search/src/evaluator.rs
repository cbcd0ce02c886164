//! Find a stored evaluation by key, or evaluate (raced or not) and record it: the one place that
//! does it for `eval`, `bench`, the tuner and the search's agents.
//!
//! An evaluation is keyed by what it is for ([`Purpose`]) on top of the judge's own key (task,
//! code, environment, judge settings). A plain evaluation keeps the judge's key unchanged, so
//! evaluations stored by earlier versions (bench resume, `eval` reuse) stay valid; every other
//! purpose is hashed with its parameters into a key of its own with length-prefixed fields, so
//! a raced estimate or a re-measurement is never taken for a full first measurement.

use ksmith_judge::{Comparison, EvalResult, Judge, JudgeError, Race};
use ksmith_store::{Store, StoreError};
use ksmith_task::{FieldHasher, Solution, Task};

/// A side-by-side comparison with its decisions ([`Evaluator::compare_decided`]).
#[derive(Debug, Clone)]
pub struct Decided {
    /// The recorded evaluations of the last timing, in the solutions' order.
    pub ids: Vec<i64>,
    /// The last timing.
    pub comparison: Comparison,
    /// The incumbent, unless a solution was decided better than it.
    pub winner: usize,
    /// Every other solution's decision against the incumbent: (index, decision).
    pub decisions: Vec<(usize, ksmith_judge::decide::Decision)>,
    /// Timings run (1 + the re-timings with more rounds).
    pub timings: u32,
}

impl Decided {
    /// Solution `i`'s decision against the incumbent.
    pub fn decision(&self, i: usize) -> Option<ksmith_judge::decide::Decision> {
        self.decisions
            .iter()
            .find(|(j, _)| *j == i)
            .map(|(_, d)| *d)
    }
}

/// What an evaluation is for; part of its key.
#[derive(Debug, Clone)]
pub enum Purpose {
    /// Alone, checked and timed in full. Its key is the judge's own key.
    Plain,
    /// Timing raced against an incumbent (successive elimination): an eliminated candidate's
    /// figure is a rough estimate, only interchangeable with a race against the same incumbent.
    Raced(Race),
    /// Timed side by side with others in the same rounds ([`Judge::compare`]); `group` is the
    /// content hash of every solution in the comparison, in order.
    Together {
        /// Content hashes of the solutions compared, in order.
        group: Vec<String>,
    },
    /// Re-measurement `round` (1 = the first repeat) of code already measured: never the same
    /// key as the first measurement, nor as another round.
    Confirmation {
        /// Which repeat.
        round: u32,
    },
    /// Checked on held-out workloads at the end of a run.
    HeldOut,
}

impl Purpose {
    /// The race to run, if any.
    fn race(&self) -> Option<Race> {
        match self {
            Purpose::Raced(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// The stored key of an evaluation with this purpose whose judge key is `plain`.
    pub fn key(&self, plain: &str) -> String {
        let mut h = FieldHasher::new("ksmith evaluation purpose");
        h.field(plain);
        match self {
            Purpose::Plain => return plain.to_string(),
            Purpose::Raced(race) => {
                // Speedups to 9 significant digits: an incumbent read back from the store
                // (JSON) may differ from the one measured in the last bit, and a resumed
                // search must find the races it ran before.
                let speedups: Vec<String> = race
                    .incumbent_speedup
                    .iter()
                    .map(|s| format!("{s:.8e}"))
                    .collect();
                h.field("raced")
                    .list(&speedups)
                    .field(format!("{:.8e}", race.ratio))
                    .field((race.min_rounds as u64).to_le_bytes());
            }
            Purpose::Together { group } => {
                h.field("together").list(group);
            }
            Purpose::Confirmation { round } => {
                h.field("confirmation").field(round.to_le_bytes());
            }
            Purpose::HeldOut => {
                h.field("held-out");
            }
        }
        h.hex()
    }
}

/// Whether a stored evaluation under the same key may stand in for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Reuse the newest stored evaluation with the same key.
    Stored,
    /// Always evaluate (and record): a repeat measurement, e.g. `bench --repeat`.
    Never,
}

/// An evaluation, found in the store or just made and recorded.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// Its id in the store.
    pub id: i64,
    /// The result.
    pub result: EvalResult,
    /// It came from the store (nothing was judged).
    pub reused: bool,
}

/// Why an evaluation could not be found or made. A candidate that fails is not an error: its
/// result says so.
#[derive(Debug, thiserror::Error)]
pub enum EvaluatorError {
    /// The judge could not compute the key (its environment: harness, compiler versions).
    #[error("evaluation key: {0}")]
    Key(#[source] JudgeError),
    /// The judge failed for a reason that is not the candidate's (see [`JudgeError`]).
    #[error(transparent)]
    Judge(JudgeError),
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Finds or makes evaluations with one judge and one store.
pub struct Evaluator<'a> {
    judge: &'a mut Judge,
    store: &'a mut Store,
    reuse: Reuse,
}

impl<'a> Evaluator<'a> {
    /// An evaluator that reuses stored evaluations.
    pub fn new(judge: &'a mut Judge, store: &'a mut Store) -> Evaluator<'a> {
        Evaluator {
            judge,
            store,
            reuse: Reuse::Stored,
        }
    }

    /// The same with another reuse rule.
    pub fn with_reuse(mut self, reuse: Reuse) -> Evaluator<'a> {
        self.reuse = reuse;
        self
    }

    /// Solutions timed side by side and each decided against `incumbent` by the decision rule
    /// ([`ksmith_judge::decide::choose_against`]): while a decision wants more rounds (a wide
    /// interval across 1.00), all are timed together again with 2x, 4x, ... the rounds (at most
    /// [`ksmith_judge::decide::MORE_ROUNDS`] times), the last timing standing. `on_retime(k)` is
    /// told before the `k`-th re-timing. What `eval A B`, the MCP `compare` tool and a search
    /// node's timing against its parent decide with.
    pub fn compare_decided(
        &mut self,
        task: &Task,
        solutions: &[Solution],
        incumbent: usize,
        mut on_retime: impl FnMut(u32),
    ) -> Result<Decided, EvaluatorError> {
        let decide = |cmp: &Comparison| {
            ksmith_judge::decide::choose_against(incumbent, 0..cmp.results.len(), &cmp.versus)
        };
        let (mut ids, mut comparison) = self.compare(task, solutions)?;
        let (mut winner, mut decisions) = decide(&comparison);
        let mut timings = 1;
        for k in 1..=ksmith_judge::decide::MORE_ROUNDS {
            if !decisions.iter().any(|(_, d)| d.wants_more_rounds()) {
                break;
            }
            on_retime(k);
            (ids, comparison) = self.compare_with_more_rounds(task, solutions, 1 << k)?;
            (winner, decisions) = decide(&comparison);
            timings += 1;
        }
        Ok(Decided {
            ids,
            comparison,
            winner,
            decisions,
            timings,
        })
    }

    /// [`compare`](Self::compare) with `factor` times the rounds and timed time (an undecided
    /// comparison timed again: [`Judge::with_more_rounds`]).
    pub fn compare_with_more_rounds(
        &mut self,
        task: &Task,
        solutions: &[Solution],
        factor: u32,
    ) -> Result<(Vec<i64>, Comparison), EvaluatorError> {
        let (store, reuse) = (&mut *self.store, self.reuse);
        self.judge.with_more_rounds(factor, |judge| {
            Evaluator {
                judge,
                store,
                reuse,
            }
            .compare(task, solutions)
        })
    }

    /// The judge (e.g. to set its stage hook).
    pub fn judge(&mut self) -> &mut Judge {
        self.judge
    }

    /// The store.
    pub fn store(&mut self) -> &mut Store {
        self.store
    }

    /// The stored key of `solution` on `task` for `purpose`.
    pub fn key(
        &mut self,
        task: &Task,
        solution: &Solution,
        purpose: &Purpose,
    ) -> Result<String, EvaluatorError> {
        let plain = self
            .judge
            .eval_key(task, solution)
            .map_err(EvaluatorError::Key)?;
        Ok(purpose.key(&plain))
    }

    /// The stored evaluation for `purpose` when reuse allows and one exists; else the
    /// candidate judged (raced when the purpose says so) and recorded.
    pub fn evaluate(
        &mut self,
        task: &Task,
        solution: &Solution,
        purpose: &Purpose,
    ) -> Result<Evaluated, EvaluatorError> {
        let key = self.key(task, solution, purpose)?;
        if self.reuse == Reuse::Stored {
            if let Some(prev) = self.store.find(&key)? {
                return Ok(Evaluated {
                    id: prev.id,
                    result: prev.result,
                    reused: true,
                });
            }
        }
        let result = self
            .judge
            .evaluate_raced(task, solution, purpose.race())
            .map_err(EvaluatorError::Judge)?;
        let id = self.store.record(&key, task, solution, &result)?;
        Ok(Evaluated {
            id,
            result,
            reused: false,
        })
    }

    /// `solutions` timed side by side ([`Judge::compare`]), every result recorded under a
    /// [`Purpose::Together`] key; never reused (the comparison between them is the point).
    pub fn compare(
        &mut self,
        task: &Task,
        solutions: &[Solution],
    ) -> Result<(Vec<i64>, Comparison), EvaluatorError> {
        let cmp = self
            .judge
            .compare(task, solutions)
            .map_err(EvaluatorError::Judge)?;
        let purpose = Purpose::Together {
            group: solutions.iter().map(|s| s.content_hash.clone()).collect(),
        };
        let mut ids = Vec::with_capacity(solutions.len());
        for (s, r) in solutions.iter().zip(&cmp.results) {
            let key = self.key(task, s, &purpose)?;
            ids.push(self.store.record(&key, task, s, r)?);
        }
        Ok((ids, cmp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "5f1c0a";

    fn all() -> Vec<Purpose> {
        vec![
            Purpose::Plain,
            Purpose::Raced(Race::against(vec![1.5, 2.0])),
            Purpose::Raced(Race::against(vec![1.5, 2.5])),
            Purpose::Raced(Race {
                ratio: 1.3,
                ..Race::against(vec![1.5, 2.0])
            }),
            Purpose::Raced(Race {
                min_rounds: 3,
                ..Race::against(vec![1.5, 2.0])
            }),
            Purpose::Together {
                group: vec!["a".into(), "b".into()],
            },
            Purpose::Together {
                group: vec!["b".into(), "a".into()],
            },
            Purpose::Confirmation { round: 1 },
            Purpose::Confirmation { round: 2 },
            Purpose::HeldOut,
        ]
    }

    #[test]
    fn a_plain_key_is_the_judges_own_key() {
        // Bench resume and `eval` reuse find evaluations stored under the judge's key.
        assert_eq!(Purpose::Plain.key(PLAIN), PLAIN);
    }

    #[test]
    fn different_purposes_never_share_a_key() {
        let keys: Vec<String> = all().iter().map(|p| p.key(PLAIN)).collect();
        for (i, a) in keys.iter().enumerate() {
            for (j, b) in keys.iter().enumerate() {
                if i != j {
                    assert_ne!(a, b, "{:?} and {:?}", all()[i], all()[j]);
                }
            }
        }
        // Nor with the same purpose of other code.
        for p in all().iter().skip(1) {
            assert_ne!(p.key(PLAIN), p.key("5f1c0b"), "{p:?}");
        }
    }

    #[test]
    fn field_boundaries_matter() {
        // One group of two hashes is not another group whose hashes join to the same text.
        let ab = Purpose::Together {
            group: vec!["ab".into(), "c".into()],
        };
        let a_bc = Purpose::Together {
            group: vec!["a".into(), "bc".into()],
        };
        let abc = Purpose::Together {
            group: vec!["abc".into()],
        };
        assert_ne!(ab.key(PLAIN), a_bc.key(PLAIN));
        assert_ne!(ab.key(PLAIN), abc.key(PLAIN));
        // Two incumbent workloads are not one.
        let two = Purpose::Raced(Race::against(vec![1.0, 1.0]));
        let one = Purpose::Raced(Race::against(vec![1.0]));
        assert_ne!(two.key(PLAIN), one.key(PLAIN));
    }

    #[test]
    fn a_race_read_back_from_json_keeps_its_key() {
        // The incumbent of a resumed search comes from the store's JSON.
        let s = 1.234_567_890_123_456_7_f64;
        let back: f64 = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let a = Purpose::Raced(Race::against(vec![s])).key(PLAIN);
        let b = Purpose::Raced(Race::against(vec![back])).key(PLAIN);
        assert_eq!(a, b);
    }
}
