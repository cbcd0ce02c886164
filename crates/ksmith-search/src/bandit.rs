//! The hint bandit: UCB1 over arms (model, hint), rewarded by the measured improvement a hint
//! brought. Reward of a finished child (always in [0, 1]):
//! - 0 when it produced nothing correct (any failure, no candidate, a duplicate);
//! - 1 when it is the first correct node on its path (the parent was not correct);
//! - otherwise `0.5 + ln(child / parent) / (2 ln 4)`, clamped to [0, 1]: 0.5 for no change,
//!   1 for a 4x gain, 0 for a 4x loss (log-scaled, so a 2x gain counts the same at any level).
//!
//! Choice: every arm is tried once first (in the documented hint order, models in the order
//! given); then the arm with the highest `mean + c * sqrt(ln N / n)` (c = `exploration`,
//! default sqrt 2). A pull is counted when the hint is given (so a batch of parallel
//! expansions spreads over arms), its reward when the node finishes.

use crate::hint::Hint;
use serde::{Deserialize, Serialize};

/// Statistics of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    /// Model the arm belongs to (None: the only model).
    pub model: Option<String>,
    /// The hint.
    pub hint: Hint,
    /// Times given.
    pub pulls: u64,
    /// Rewards received (finished pulls).
    pub rewarded: u64,
    /// Sum of rewards.
    pub reward_sum: f64,
}

impl Arm {
    /// Mean reward over finished pulls (0 before any).
    pub fn mean(&self) -> f64 {
        if self.rewarded == 0 {
            0.0
        } else {
            self.reward_sum / self.rewarded as f64
        }
    }
}

/// UCB1 over (model, hint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandit {
    /// Exploration constant c.
    pub exploration: f64,
    /// The arms.
    pub arms: Vec<Arm>,
}

impl Bandit {
    /// A bandit over every improving hint for each model (an empty list: one unnamed model).
    pub fn new(models: &[String], exploration: f64) -> Bandit {
        Bandit::with_hints(models, exploration, None)
    }

    /// A bandit over `hints` (None: every improving hint) for each model.
    pub fn with_hints(models: &[String], exploration: f64, hints: Option<&[Hint]>) -> Bandit {
        let models: Vec<Option<String>> = if models.is_empty() {
            vec![None]
        } else {
            models.iter().cloned().map(Some).collect()
        };
        let arms = models
            .iter()
            .flat_map(|m| {
                Hint::improving()
                    .filter(move |h| hints.is_none_or(|only| only.contains(h)))
                    .map(move |h| Arm {
                        model: m.clone(),
                        hint: h,
                        pulls: 0,
                        rewarded: 0,
                        reward_sum: 0.0,
                    })
            })
            .collect();
        Bandit { exploration, arms }
    }

    /// Chooses an arm, counts the pull, and returns its index.
    pub fn choose(&mut self) -> usize {
        let total: u64 = self.arms.iter().map(|a| a.pulls).sum();
        let i = match self.arms.iter().position(|a| a.pulls == 0) {
            Some(i) => i,
            None => {
                let ln = (total.max(1) as f64).ln();
                let score = |a: &Arm| a.mean() + self.exploration * (ln / a.pulls as f64).sqrt();
                let mut best = 0;
                for (i, a) in self.arms.iter().enumerate() {
                    // Strictly greater: ties go to the earlier arm, so choices are reproducible.
                    if score(a) > score(&self.arms[best]) {
                        best = i;
                    }
                }
                best
            }
        };
        self.arms[i].pulls += 1;
        i
    }

    /// Records the reward of a finished pull of arm `i`.
    pub fn reward(&mut self, i: usize, r: f64) {
        if let Some(a) = self.arms.get_mut(i) {
            a.rewarded += 1;
            a.reward_sum += r.clamp(0.0, 1.0);
        }
    }

    /// The index of the arm for (model, hint), if there is one.
    pub fn arm(&self, model: Option<&str>, hint: Hint) -> Option<usize> {
        self.arms
            .iter()
            .position(|a| a.hint == hint && a.model.as_deref() == model)
    }
}

/// The reward of a child given its parent's speedup (see the module docs).
pub fn reward(parent_speedup: Option<f64>, child_speedup: Option<f64>) -> f64 {
    match (parent_speedup, child_speedup) {
        (_, None) => 0.0,
        (None, Some(_)) => 1.0,
        (Some(p), Some(c)) if p > 0.0 && c > 0.0 => {
            (0.5 + (c / p).ln() / (2.0 * 4f64.ln())).clamp(0.0, 1.0)
        }
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewards_are_log_scaled() {
        assert_eq!(reward(Some(2.0), None), 0.0);
        assert_eq!(reward(None, Some(0.5)), 1.0);
        assert!((reward(Some(2.0), Some(2.0)) - 0.5).abs() < 1e-12);
        assert!((reward(Some(1.0), Some(4.0)) - 1.0).abs() < 1e-12);
        assert!((reward(Some(3.0), Some(6.0)) - reward(Some(1.0), Some(2.0))).abs() < 1e-12);
    }

    #[test]
    fn prefers_the_rewarding_hint() {
        let mut b = Bandit::new(&[], 2f64.sqrt());
        let good = b.arm(None, Hint::Tile).expect("tile arm");
        let mut tile = 0;
        for _ in 0..300 {
            let i = b.choose();
            if i == good {
                tile += 1;
            }
            b.reward(i, if i == good { 0.9 } else { 0.2 });
        }
        // Ten arms, uniform would give 30 pulls each.
        assert!(tile > 120, "tile chosen {tile} times of 300");
    }

    #[test]
    fn models_have_their_own_arms() {
        let mut b = Bandit::new(&["a".into(), "b".into()], 1.0);
        assert_eq!(b.arms.len(), 22);
        let good = b.arm(Some("b"), Hint::Fuse).expect("arm");
        for _ in 0..200 {
            let i = b.choose();
            b.reward(i, if i == good { 1.0 } else { 0.0 });
        }
        let best = b.arms.iter().max_by_key(|a| a.pulls).expect("arms");
        assert_eq!((best.model.as_deref(), best.hint), (Some("b"), Hint::Fuse));
    }
}
