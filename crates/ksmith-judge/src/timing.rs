//! How many timed calls per round, and when to stop alternating rounds.

use crate::JudgeConfig;

/// Target wall duration of one round per side: short enough that ABAB alternation tracks drift.
const ROUND_NS: f64 = 60e6;
/// Enough samples for a stable median and p10/p90, even if the minimum time is not reached.
const ENOUGH_SAMPLES: usize = 100;
/// An interval this narrow (high / low, about ±3%) ends timing early.
const PRECISE: f64 = 1.06;
/// Wider than this (about ±10%), a figure is reported as noisy.
pub(crate) const NOISY: f64 = 1.21;

/// Plans reps per round from an estimate of one call's duration, refined as samples arrive.
pub(crate) struct RoundPlan {
    est_ns: f64,
    /// Untimed work around each call (cache flush, output poisoning).
    per_call_ns: f64,
    min_total_ns: f64,
    min_rounds: usize,
}

impl RoundPlan {
    pub(crate) fn new(est_ns: u64, per_call_ns: f64, cfg: &JudgeConfig) -> RoundPlan {
        RoundPlan {
            est_ns: est_ns.max(1000) as f64,
            per_call_ns,
            min_total_ns: cfg.min_time.as_nanos() as f64,
            min_rounds: cfg.min_rounds,
        }
    }

    pub(crate) fn median(samples: &[u64]) -> Option<f64> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        Some(s[s.len() / 2] as f64)
    }

    /// Calls for the next round of a side that has collected `samples` so far.
    pub(crate) fn reps(&self, samples: &[u64]) -> usize {
        let call = Self::median(samples).unwrap_or(self.est_ns) + self.per_call_ns;
        (ROUND_NS / call).clamp(1.0, 500.0) as usize
    }

    /// Calls for the baseline's next round, given the candidate's calls this round: about as
    /// much timed time as the candidate's turn (a turn that fills the same window tracks the
    /// same drift), and at least enough to reach the minimum time in the minimum rounds. Sized
    /// like the candidate's turn, a baseline several times slower than a candidate limited by
    /// its input sets ran several times the candidate's timed time, for nothing.
    pub(crate) fn base_reps(&self, cand: &[u64], base: &[u64], cand_reps: usize) -> usize {
        let full = self.reps(base);
        let (Some(c), Some(b)) = (Self::median(cand), Self::median(base)) else {
            // Round 0: no baseline time known yet; as many calls as the candidate.
            return full.min(cand_reps).max(1);
        };
        let turn_ns = (cand_reps as f64 * c).max(self.min_total_ns / self.min_rounds.max(1) as f64);
        ((turn_ns / b.max(1.0)).ceil() as usize).clamp(1, full)
    }

    /// Whether to stop: after the minimum rounds, once the paired speedup's interval is
    /// within ±3% or both sides have enough timed time (or samples). A noisy machine does not
    /// buy more rounds: on these VMs that made every evaluation three times as long and the
    /// interval hardly narrower; the result says `noisy` instead.
    pub(crate) fn done(
        &self,
        rounds: usize,
        cand: &[u64],
        base: &[u64],
        paired: Option<Paired>,
    ) -> bool {
        let enough = |s: &[u64]| {
            s.iter().sum::<u64>() as f64 >= self.min_total_ns || s.len() >= ENOUGH_SAMPLES
        };
        let width = paired.map_or(f64::INFINITY, |p| p.width());
        rounds >= self.min_rounds && (width <= PRECISE || (enough(cand) && enough(base)))
    }
}

/// A speedup from paired rounds: the median of per-round ratios and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Paired {
    pub speedup: f64,
    pub low: f64,
    pub high: f64,
}

impl Paired {
    /// From per-round ratios (baseline / candidate, each the round's median); `None` if empty.
    pub(crate) fn from_ratios(ratios: &[f64]) -> Option<Paired> {
        let mut s: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let speedup = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        // Distribution-free interval for a median: the order statistics k and n-1-k with
        // k = (n - 1.96 sqrt(n)) / 2 (normal approximation of the binomial).
        let k = if n < 6 {
            0
        } else {
            ((n as f64 - 1.96 * (n as f64).sqrt()) / 2.0)
                .floor()
                .max(0.0) as usize
        };
        Some(Paired {
            speedup,
            low: s[k],
            high: s[n - 1 - k],
        })
    }

    /// Relative width of the interval (high / low; 1 is exact).
    pub(crate) fn width(&self) -> f64 {
        self.high / self.low.max(1e-12)
    }
}

/// Successive elimination for tuning: stop timing a candidate that is clearly slower than the
/// best configuration found so far (the incumbent), so repetitions go to the contenders.
///
/// The comparison uses speedups over the XLA baseline, which are measured in the same
/// alternating windows, so slow drift of the machine cancels out of it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Race {
    /// The incumbent's speedup on each workload.
    pub incumbent_speedup: Vec<f64>,
    /// Drop a candidate whose speedup is below the incumbent's by more than this factor.
    pub ratio: f64,
    /// Rounds to time before judging (each round is ~60 ms per side).
    pub min_rounds: usize,
}

impl Race {
    /// A race against an incumbent with the given per-workload speedups; default margins
    /// (20%, well above the ~6-8% median A/A spread measured on these machines).
    pub fn against(incumbent_speedup: Vec<f64>) -> Race {
        Race {
            incumbent_speedup,
            ratio: 1.2,
            min_rounds: 2,
        }
    }

    /// The candidate's slowdown against the incumbent (geometric mean over workloads of
    /// incumbent speedup / candidate speedup) if it is large enough to drop the candidate.
    pub(crate) fn slowdown(&self, speedups: &[f64]) -> Option<f64> {
        if speedups.len() != self.incumbent_speedup.len() || speedups.is_empty() {
            return None;
        }
        let ratios = self
            .incumbent_speedup
            .iter()
            .zip(speedups)
            .map(|(i, s)| i / s.max(1e-12));
        let slowdown = crate::geomean(ratios);
        (slowdown > self.ratio).then_some(slowdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn plan(per_call_ns: f64) -> RoundPlan {
        let mut cfg = JudgeConfig::new(PathBuf::from("/tmp"), 1);
        cfg.min_time = Duration::from_millis(100);
        RoundPlan::new(1_000_000, per_call_ns, &cfg)
    }

    #[test]
    fn rounds_are_sized_by_wall_time_including_untimed_work() {
        assert_eq!(plan(0.0).reps(&[]), 60);
        assert_eq!(plan(1e6).reps(&[]), 30);
        assert_eq!(plan(0.0).reps(&[10_000_000; 5]), 6);
        assert_eq!(plan(0.0).reps(&[1_000_000_000]), 1);
    }

    #[test]
    fn the_baseline_turn_matches_the_candidates_timed_time() {
        let p = plan(0.0);
        let ms = |x: f64, n: usize| vec![(x * 1e6) as u64; n];
        // Round 0: as many calls as the candidate.
        assert_eq!(p.base_reps(&[], &[], 8), 8);
        // A baseline 4x slower than a candidate limited to 8 sets of 2 ms: 16 ms of candidate
        // time, but 25 ms (100 ms over 4 rounds) at least: 4 calls of 8 ms, not 8.
        assert_eq!(p.base_reps(&ms(2.0, 8), &ms(8.0, 8), 8), 4);
        // A slow candidate: the baseline's turn is as long, within one round's cap.
        assert_eq!(p.base_reps(&ms(20.0, 3), &ms(5.0, 12), 3), 12);
        assert_eq!(p.base_reps(&ms(50.0, 3), &ms(1.0, 60), 3), 60);
        // Never fewer than one call.
        assert_eq!(p.base_reps(&ms(0.01, 8), &ms(1000.0, 1), 8), 1);
    }

    #[test]
    fn stops_after_min_rounds_and_min_time_or_enough_samples() {
        let p = plan(0.0);
        let ms = |n: usize| vec![1_000_000u64; n];
        let tight = Paired::from_ratios(&[1.0, 1.01, 0.99, 1.0, 1.0, 1.02]);
        let wide = Paired::from_ratios(&[0.5, 1.0, 2.0, 1.0, 0.6, 1.8]);
        assert!(!p.done(3, &ms(200), &ms(200), tight), "too few rounds");
        assert!(
            !p.done(4, &ms(50), &ms(200), wide),
            "candidate below min time"
        );
        assert!(p.done(4, &ms(50), &ms(20), tight), "precise early");
        assert!(p.done(4, &ms(100), &ms(100), tight));
        assert!(
            p.done(4, &vec![1000u64; 100], &vec![1000u64; 100], tight),
            "enough samples"
        );
        assert!(p.done(4, &ms(100), &ms(100), wide), "noise buys no rounds");
    }

    #[test]
    fn paired_speedup_is_the_median_ratio_with_an_order_statistic_interval() {
        assert_eq!(Paired::from_ratios(&[]), None);
        let p = Paired::from_ratios(&[2.0, 1.0, 3.0]).unwrap();
        assert_eq!((p.speedup, p.low, p.high), (2.0, 1.0, 3.0));
        // A burst that hits two rounds of twelve moves neither the figure nor the interval
        // much: 1.5x with outliers at 0.2x.
        let mut r = vec![1.5, 1.52, 1.48, 1.51, 1.49, 1.5, 1.53, 1.47, 1.5, 1.5];
        r.extend([0.2, 0.21]);
        let p = Paired::from_ratios(&r).unwrap();
        assert!((p.speedup - 1.5).abs() < 0.01, "{p:?}");
        assert!(p.low >= 1.4 && p.high <= 1.53, "{p:?}");
        let k = Paired::from_ratios(&[1.0; 30]).unwrap();
        assert_eq!(k.width(), 1.0);
    }

    #[test]
    fn a_race_drops_only_candidates_clearly_slower_over_all_workloads() {
        let race = Race::against(vec![2.0, 1.0]);
        // As fast as the incumbent, or 10% slower: kept.
        assert_eq!(race.slowdown(&[2.0, 1.0]), None);
        assert_eq!(race.slowdown(&[1.8, 0.91]), None);
        // Much slower on one workload but faster on the other: judged overall, kept.
        assert_eq!(race.slowdown(&[1.2, 1.5]), None);
        // 1.6x slower on both: dropped.
        let s = race.slowdown(&[1.25, 0.625]).unwrap();
        assert!((s - 1.6).abs() < 1e-9, "{s}");
        // A different workload count (no comparable incumbent): never dropped.
        assert_eq!(race.slowdown(&[0.1]), None);
    }
}
