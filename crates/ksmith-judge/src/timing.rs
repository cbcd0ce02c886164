//! How many timed calls per round, and when to stop alternating rounds.

use crate::JudgeConfig;

/// Target wall duration of one round per side: short enough that ABAB alternation tracks drift.
const ROUND_NS: f64 = 60e6;
/// Enough samples for a stable median and p10/p90, even if the minimum time is not reached.
const ENOUGH_SAMPLES: usize = 100;

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

    fn median(samples: &[u64]) -> Option<f64> {
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

    /// Whether both sides have enough rounds and enough timed time (or samples).
    pub(crate) fn done(&self, rounds: usize, cand: &[u64], base: &[u64]) -> bool {
        let enough = |s: &[u64]| {
            s.iter().sum::<u64>() as f64 >= self.min_total_ns || s.len() >= ENOUGH_SAMPLES
        };
        rounds >= self.min_rounds && enough(cand) && enough(base)
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
    fn stops_after_min_rounds_and_min_time_or_enough_samples() {
        let p = plan(0.0);
        let ms = |n: usize| vec![1_000_000u64; n];
        assert!(!p.done(3, &ms(200), &ms(200)), "too few rounds");
        assert!(!p.done(4, &ms(50), &ms(200)), "candidate below min time");
        assert!(p.done(4, &ms(100), &ms(100)));
        assert!(
            p.done(4, &vec![1000u64; 100], &vec![1000u64; 100]),
            "enough samples"
        );
    }
}
