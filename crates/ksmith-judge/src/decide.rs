//! The one rule every choice between kernels follows: a new best in the agent loop, a tuned
//! configuration, a finalist over the incumbent, a search's best node. A challenger replaces
//! the incumbent only when the interval of its speedup over the incumbent excludes "slower"
//! (its lower bound is above [`ADOPT_ABOVE`]); an interval that straddles 1.00 and is wide gets
//! more rounds (at most [`MORE_ROUNDS`] times), and one still undecided leaves the incumbent in
//! place and says so. Point estimates alone decided before, and on a busy machine they were
//! noise: a tuned configuration was adopted at 1.33x (0.49-5.93), and a kernel faster on
//! every workload was refused at 0.90x (0.57-3.68) as "no measurable difference".

use crate::{Judge, Relative};
use serde::{Deserialize, Serialize};

/// A challenger is better only when its interval's lower bound is above this: it excludes
/// "slower" (and "equal") at the interval's 95%.
pub const ADOPT_ABOVE: f64 = 1.0;
/// A straddling interval at most this wide (high / low, about ±5%) says the two are equal
/// within what the judge can resolve: not better, and no more rounds would change that.
pub const RESOLVED_WIDTH: f64 = 1.10;
/// On a machine that never became quiet (disturbed rounds kept), only a difference no load
/// can hide decides: the interval's lower bound above this (or its upper bound below its
/// inverse). Contention is a bias as well as noise (a kernel whose threads meet at a barrier
/// loses more to a neighbour than one that does not), up to about 2x between two kernels seen
/// here; below that the figures say nothing, and the incumbent stays.
pub const DISTURBED_ADOPT_ABOVE: f64 = 2.0;
/// How many times an undecided comparison is timed again, each with twice the rounds and time
/// of the one before.
pub const MORE_ROUNDS: u32 = 2;

/// What a decision rests on: the challenger's speedup over the incumbent and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Incumbent latency / challenger latency (above 1: the challenger is faster).
    pub speedup: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end of the 95% interval.
    pub high: f64,
    /// Measured in the same rounds (paired); false: from two evaluations' separate windows,
    /// with the interval combined conservatively.
    pub paired: bool,
    /// Some round it rests on was disturbed by other work and kept (the machine never became
    /// quiet enough to redo it).
    #[serde(default)]
    pub disturbed: bool,
}

impl Evidence {
    /// From a same-rounds comparison of the challenger (row) against the incumbent (column).
    pub fn paired(r: &Relative) -> Evidence {
        Evidence {
            speedup: r.speedup,
            low: r.interval.0,
            high: r.interval.1,
            paired: true,
            disturbed: r.disturbed,
        }
    }

    /// From two speedups over the same baseline measured in separate windows, each with its
    /// interval: the ratio, with the widest interval the two allow (challenger's low over the
    /// incumbent's high, and the reverse).
    pub fn separate(
        challenger: (f64, (f64, f64)),
        incumbent: (f64, (f64, f64)),
        disturbed: bool,
    ) -> Evidence {
        let pos = |x: f64| x.max(1e-12);
        // An interval of (0, 0) is a figure stored before intervals were kept: its point.
        let iv = |(s, (lo, hi)): (f64, (f64, f64))| {
            if lo > 0.0 && hi >= lo {
                (lo, hi)
            } else {
                (s, s)
            }
        };
        let (cl, ch) = iv(challenger);
        let (il, ih) = iv(incumbent);
        Evidence {
            speedup: challenger.0 / pos(incumbent.0),
            low: cl / pos(ih),
            high: ch / pos(il),
            paired: false,
            disturbed,
        }
    }

    /// `1.35x (1.20-1.50)`.
    pub fn text(&self) -> String {
        format!("{:.2}x ({:.2}-{:.2})", self.speedup, self.low, self.high)
    }
}

/// Why a challenger is not better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotBetterWhy {
    /// The whole interval is at or below 1.00.
    Slower,
    /// The interval straddles 1.00 and is narrow: equal within what the judge resolves.
    NoDifference,
}

/// Why no decision could be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndecidedWhy {
    /// The interval straddles 1.00 and is wide (more rounds may settle it).
    Wide,
    /// The figures rest on rounds other work disturbed.
    Disturbed,
    /// Not both were timed (one failed, or timing was off).
    Unmeasured,
}

/// The outcome of the rule, with what it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// The challenger is faster: adopt it.
    Better {
        /// The figures.
        evidence: Evidence,
    },
    /// The challenger is not faster: the incumbent stays.
    NotBetter {
        /// The figures.
        evidence: Evidence,
        /// Slower, or equal within resolution.
        why: NotBetterWhy,
    },
    /// Neither could be shown: the incumbent stays, and the output says undecided.
    Undecided {
        /// The figures, when there were any.
        evidence: Option<Evidence>,
        /// What kept it open.
        why: UndecidedWhy,
    },
}

/// The rule (see the module documentation).
pub fn decide(e: Evidence) -> Decision {
    if !(e.low.is_finite() && e.high.is_finite() && e.speedup.is_finite()) {
        return Decision::Undecided {
            evidence: Some(e),
            why: UndecidedWhy::Unmeasured,
        };
    }
    if e.disturbed {
        if e.low > DISTURBED_ADOPT_ABOVE {
            return Decision::Better { evidence: e };
        }
        if e.high < 1.0 / DISTURBED_ADOPT_ABOVE {
            return Decision::NotBetter {
                evidence: e,
                why: NotBetterWhy::Slower,
            };
        }
        return Decision::Undecided {
            evidence: Some(e),
            why: UndecidedWhy::Disturbed,
        };
    }
    if e.low > ADOPT_ABOVE {
        return Decision::Better { evidence: e };
    }
    if e.high <= 1.0 {
        return Decision::NotBetter {
            evidence: e,
            why: NotBetterWhy::Slower,
        };
    }
    if e.high / e.low.max(1e-12) <= RESOLVED_WIDTH {
        return Decision::NotBetter {
            evidence: e,
            why: NotBetterWhy::NoDifference,
        };
    }
    Decision::Undecided {
        evidence: Some(e),
        why: UndecidedWhy::Wide,
    }
}

/// The rule on a same-rounds comparison, `None` (not both timed) being undecided.
pub fn decide_paired(r: Option<&Relative>) -> Decision {
    match r {
        Some(r) => decide(Evidence::paired(r)),
        None => Decision::Undecided {
            evidence: None,
            why: UndecidedWhy::Unmeasured,
        },
    }
}

impl Decision {
    /// Whether the challenger replaces the incumbent.
    pub fn adopt(&self) -> bool {
        matches!(self, Decision::Better { .. })
    }

    /// Whether more rounds may settle it (a wide interval across 1.00).
    pub fn wants_more_rounds(&self) -> bool {
        matches!(
            self,
            Decision::Undecided {
                why: UndecidedWhy::Wide,
                ..
            }
        )
    }

    /// What it rests on, when anything was measured.
    pub fn evidence(&self) -> Option<Evidence> {
        match *self {
            Decision::Better { evidence } | Decision::NotBetter { evidence, .. } => Some(evidence),
            Decision::Undecided { evidence, .. } => evidence,
        }
    }

    /// One word: `better`, `not better`, `undecided`.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Better { .. } => "better",
            Decision::NotBetter { .. } => "not better",
            Decision::Undecided { .. } => "undecided",
        }
    }

    /// For people and prompts: `better: 1.35x (1.20-1.50) in the same rounds`,
    /// `undecided: 1.33x (0.49-5.93) in the same rounds, the interval straddles 1.00; the
    /// incumbent stays`.
    pub fn text(&self) -> String {
        let figures = self.evidence().map_or("not measured".to_string(), |e| {
            format!(
                "{}{}{}",
                e.text(),
                if e.paired {
                    " in the same rounds"
                } else {
                    " from separate windows"
                },
                if e.disturbed {
                    " (some disturbed by other work: only a 2x difference decides)"
                } else {
                    ""
                }
            )
        });
        match self {
            Decision::Better { .. } => format!("better: {figures}"),
            Decision::NotBetter { why, .. } => format!(
                "not better: {figures}, {}",
                match why {
                    NotBetterWhy::Slower => "slower",
                    NotBetterWhy::NoDifference => "no measurable difference",
                }
            ),
            Decision::Undecided { why, .. } => format!(
                "undecided: {figures}, {}; the incumbent stays",
                match why {
                    UndecidedWhy::Wide => "the interval straddles 1.00",
                    UndecidedWhy::Disturbed => "rounds disturbed by other work on the machine",
                    UndecidedWhy::Unmeasured => "not both timed",
                }
            ),
        }
    }
}

/// Takes `first`, and while it wants more rounds (at most [`MORE_ROUNDS`] times) the decision
/// `again(k)` returns for the `k`-th re-timing (1, 2, ...; see [`Judge::with_more_rounds`]);
/// the last one stands. `again` returning `None` (the re-timing measured nothing) keeps the
/// decision so far.
pub fn settle<E>(
    first: Decision,
    mut again: impl FnMut(u32) -> Result<Option<Decision>, E>,
) -> Result<Decision, E> {
    let mut d = first;
    let mut k = 0;
    while d.wants_more_rounds() && k < MORE_ROUNDS {
        k += 1;
        match again(k)? {
            Some(next) => d = next,
            None => break,
        }
    }
    Ok(d)
}

/// Among `candidates` (indices into a comparison's `versus`), the winner against `incumbent`:
/// the incumbent unless some candidate is [`Decision::Better`] than it, then the one with the
/// highest speedup over it among those. Returns the winner and each candidate's decision.
pub fn choose_against(
    incumbent: usize,
    candidates: impl IntoIterator<Item = usize>,
    versus: &[Vec<Option<Relative>>],
) -> (usize, Vec<(usize, Decision)>) {
    let mut decided = Vec::new();
    let mut winner: Option<(usize, f64)> = None;
    for i in candidates {
        if i == incumbent {
            continue;
        }
        let rel = versus
            .get(i)
            .and_then(|row| row.get(incumbent))
            .copied()
            .flatten();
        let d = decide_paired(rel.as_ref());
        if let (true, Some(e)) = (d.adopt(), d.evidence()) {
            if winner.is_none_or(|(_, s)| e.speedup > s) {
                winner = Some((i, e.speedup));
            }
        }
        decided.push((i, d));
    }
    (winner.map_or(incumbent, |(i, _)| i), decided)
}

impl Judge {
    /// Runs `f` with `factor` times the minimum rounds and timed time per side (capped at the
    /// maximum rounds), then restores them: how an undecided comparison gets more rounds.
    pub fn with_more_rounds<T>(&mut self, factor: u32, f: impl FnOnce(&mut Judge) -> T) -> T {
        let (rounds, time) = (self.config.min_rounds, self.config.min_time);
        let factor = factor.max(1);
        self.config.min_rounds = (rounds * factor as usize).min(self.config.max_rounds);
        self.config.min_time = time * factor;
        let out = f(self);
        self.config.min_rounds = rounds;
        self.config.min_time = time;
        out
    }

    /// Runs `f` with timing off (correctness only), then restores it: checks such as the
    /// held-out shapes, which decide nothing by speed.
    pub fn without_timing<T>(&mut self, f: impl FnOnce(&mut Judge) -> T) -> T {
        let timing = self.config.timing;
        self.config.timing = false;
        let out = f(self);
        self.config.timing = timing;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(speedup: f64, low: f64, high: f64) -> Evidence {
        Evidence {
            speedup,
            low,
            high,
            paired: true,
            disturbed: false,
        }
    }

    #[test]
    fn better_only_when_the_interval_excludes_slower() {
        assert!(decide(e(1.35, 1.2, 1.5)).adopt());
        // The cases: a point estimate above 1 inside a wide interval is undecided.
        let d = decide(e(1.33, 0.49, 5.93));
        assert!(!d.adopt() && d.wants_more_rounds(), "{d:?}");
        assert!(
            d.text().starts_with("undecided: 1.33x (0.49-5.93)"),
            "{}",
            d.text()
        );
        assert!(d.text().ends_with("the incumbent stays"), "{}", d.text());
        let d = decide(e(0.90, 0.57, 3.68));
        assert!(
            d.wants_more_rounds(),
            "not 'no measurable difference': {d:?}"
        );
        // Clearly slower; equal within resolution.
        assert_eq!(
            decide(e(0.8, 0.7, 0.95)),
            Decision::NotBetter {
                evidence: e(0.8, 0.7, 0.95),
                why: NotBetterWhy::Slower
            }
        );
        let d = decide(e(1.01, 0.98, 1.04));
        assert!(matches!(
            d,
            Decision::NotBetter {
                why: NotBetterWhy::NoDifference,
                ..
            }
        ));
        assert!(!d.wants_more_rounds());
        // A lower bound of exactly 1.00 does not exclude "equal".
        assert!(!decide(e(1.2, 1.0, 1.4)).adopt());
    }

    #[test]
    fn disturbed_figures_decide_only_a_difference_no_load_can_hide() {
        let mut busy = e(1.8, 1.4, 2.3);
        busy.disturbed = true;
        let d = decide(busy);
        assert!(!d.adopt() && !d.wants_more_rounds());
        assert!(d.text().contains("disturbed"), "{}", d.text());
        let mut clear = e(5.0, 3.1, 7.0);
        clear.disturbed = true;
        assert!(decide(clear).adopt());
        assert!(decide(clear).text().contains("disturbed"));
        let mut slower = e(0.2, 0.1, 0.4);
        slower.disturbed = true;
        assert_eq!(decide(slower).word(), "not better");
        assert!(!decide(e(f64::NAN, 1.0, 2.0)).adopt());
        assert_eq!(decide_paired(None).word(), "undecided");
    }

    #[test]
    fn undecided_gets_more_rounds_then_stands() {
        // Settled by the second re-timing.
        let mut asked = Vec::new();
        let d = settle(decide(e(1.3, 0.8, 2.0)), |k| {
            asked.push(k);
            Ok::<_, ()>(Some(decide(if k == 1 {
                e(1.3, 0.9, 1.8)
            } else {
                e(1.3, 1.1, 1.5)
            })))
        })
        .unwrap();
        assert_eq!(asked, vec![1, 2]);
        assert!(d.adopt());
        // Capped: still undecided after MORE_ROUNDS re-timings.
        let mut n = 0;
        let d = settle(decide(e(1.3, 0.8, 2.0)), |_| {
            n += 1;
            Ok::<_, ()>(Some(decide(e(1.3, 0.8, 2.0))))
        })
        .unwrap();
        assert_eq!(n, MORE_ROUNDS);
        assert!(d.wants_more_rounds() && !d.adopt());
        // A clear first decision asks for nothing.
        let d = settle(decide(e(2.0, 1.5, 2.5)), |_| -> Result<_, ()> {
            panic!("asked for more rounds")
        })
        .unwrap();
        assert!(d.adopt());
    }

    #[test]
    fn separate_windows_combine_intervals_conservatively() {
        let s = Evidence::separate((2.2, (2.0, 2.4)), (1.0, (0.9, 1.1)), false);
        assert!((s.speedup - 2.2).abs() < 1e-12);
        assert!((s.low - 2.0 / 1.1).abs() < 1e-12 && (s.high - 2.4 / 0.9).abs() < 1e-12);
        assert!(decide(s).adopt());
        // The greedy case: 1.82x against 2.19x with overlapping intervals.
        let g = Evidence::separate((2.19, (1.7, 2.6)), (1.82, (1.5, 2.3)), false);
        assert!(!decide(g).adopt());
        // Stored figures without intervals: points.
        let p = Evidence::separate((2.0, (0.0, 0.0)), (1.0, (0.0, 0.0)), false);
        assert_eq!((p.low, p.high), (2.0, 2.0));
    }

    #[test]
    fn the_incumbent_stays_unless_a_finalist_is_better() {
        let rel = |s: f64, lo: f64, hi: f64| {
            Some(Relative {
                speedup: s,
                interval: (lo, hi),
                noisy: false,
                disturbed: false,
            })
        };
        // Finalist 1: faster by point only; 2: clearly faster; 3: clearly faster, more so.
        let versus = vec![
            vec![None, None, None, None],
            vec![rel(1.4, 0.7, 2.5), None, None, None],
            vec![rel(1.3, 1.1, 1.5), None, None, None],
            vec![rel(1.6, 1.2, 2.0), None, None, None],
        ];
        let (w, ds) = choose_against(0, 0..4, &versus);
        assert_eq!(w, 3);
        assert_eq!(ds.len(), 3);
        assert_eq!(ds[0].1.word(), "undecided");
        let (w, _) = choose_against(0, 0..2, &versus);
        assert_eq!(w, 0, "undecided: the incumbent stays");
    }
}
