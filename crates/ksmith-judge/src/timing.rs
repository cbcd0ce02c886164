//! How many timed calls per round, and when to stop alternating rounds.

use crate::JudgeConfig;

/// Target duration of one round per side: short enough that ABAB alternation tracks drift.
const ROUND_NS: f64 = 40e6;

/// Plans reps per round from an estimate of one call's duration, refined as samples arrive.
pub(crate) struct RoundPlan {
    est_ns: f64,
    min_total_ns: f64,
    min_rounds: usize,
}

impl RoundPlan {
    pub(crate) fn new(est_ns: u64, cfg: &JudgeConfig) -> RoundPlan {
        RoundPlan {
            est_ns: est_ns.max(1000) as f64,
            min_total_ns: cfg.min_time.as_nanos() as f64,
            min_rounds: cfg.min_rounds,
        }
    }

    fn reps(est: f64) -> usize {
        (ROUND_NS / est).clamp(1.0, 500.0) as usize
    }

    fn median(samples: &[u64]) -> Option<f64> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        Some(s[s.len() / 2] as f64)
    }

    pub(crate) fn candidate_reps(&self, samples: &[u64]) -> usize {
        Self::reps(Self::median(samples).unwrap_or(self.est_ns))
    }

    pub(crate) fn baseline_reps(&self, samples: &[u64]) -> usize {
        Self::reps(Self::median(samples).unwrap_or(self.est_ns))
    }

    pub(crate) fn done(&self, rounds: usize, cand: &[u64], base: &[u64]) -> bool {
        let total = |s: &[u64]| s.iter().sum::<u64>() as f64;
        rounds >= self.min_rounds
            && total(cand) >= self.min_total_ns
            && total(base) >= self.min_total_ns
    }
}
