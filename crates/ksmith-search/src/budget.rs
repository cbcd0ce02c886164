//! Budgets and stopping: what a search may spend, what it has spent, and the typed reason it
//! stopped.
//!
//! Calls, evaluations and nodes stop exactly: the engine reserves them for nodes in flight and
//! tells each expansion how many calls it may make (`Expansion::max_calls`). Tokens, cost and
//! wall time are checked before each node is launched, so nodes already in flight may overshoot
//! them by their own spend.

use crate::node::Spend;
use serde::{Deserialize, Serialize};

/// Limits on one search (None: no limit).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Most LLM calls.
    pub calls: Option<u64>,
    /// Most tokens, in + out.
    pub tokens: Option<u64>,
    /// Most USD.
    pub cost: Option<f64>,
    /// Most evaluations by the judge.
    pub evaluations: Option<u64>,
    /// Most wall seconds (over every session of the run).
    pub wall_s: Option<f64>,
    /// Most nodes expanded.
    pub nodes: Option<u64>,
    /// Stop once a correct node reaches this speedup.
    pub target_speedup: Option<f64>,
    /// Stop once a correct node reaches this fraction of the roofline.
    pub target_roofline: Option<f64>,
}

/// Why a search stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// The LLM call budget is spent.
    Calls,
    /// The token budget is spent.
    Tokens,
    /// The cost budget is spent.
    Cost,
    /// The evaluation budget is spent.
    Evaluations,
    /// The wall-time budget is spent.
    WallTime,
    /// The node budget is spent.
    Nodes,
    /// A correct node reached the target speedup.
    TargetSpeedup {
        /// The node's speedup.
        speedup: f64,
    },
    /// A correct node reached the target roofline fraction.
    TargetRoofline {
        /// The node's fraction.
        fraction: f64,
    },
    /// The strategy has nothing left to expand (its shape is complete).
    Exhausted,
    /// The expander failed outside the candidate (provider, environment); resumable.
    ExpanderFailed {
        /// What failed.
        message: String,
    },
    /// A reviewer stopped the run (interactive searches); resumable.
    Paused {
        /// Where and by whom.
        by: String,
    },
}

impl StopReason {
    /// Whether the search ended normally (a budget, a target, or its shape complete).
    pub fn is_normal(&self) -> bool {
        !matches!(
            self,
            StopReason::ExpanderFailed { .. } | StopReason::Paused { .. }
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Calls => f.write_str("LLM call budget spent"),
            StopReason::Tokens => f.write_str("token budget spent"),
            StopReason::Cost => f.write_str("cost budget spent"),
            StopReason::Evaluations => f.write_str("evaluation budget spent"),
            StopReason::WallTime => f.write_str("wall-time budget spent"),
            StopReason::Nodes => f.write_str("node budget spent"),
            StopReason::TargetSpeedup { speedup } => {
                write!(f, "target speedup reached ({speedup:.2}x)")
            }
            StopReason::TargetRoofline { fraction } => {
                write!(f, "target roofline fraction reached ({fraction:.2})")
            }
            StopReason::Exhausted => f.write_str("strategy complete (nothing left to expand)"),
            StopReason::ExpanderFailed { message } => write!(f, "expander failed: {message}"),
            StopReason::Paused { by } => write!(f, "paused: {by}"),
        }
    }
}

/// What a search has spent so far (finished nodes only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Summed spend of finished nodes.
    pub spend: Spend,
    /// Nodes finished.
    pub nodes: u64,
}

/// What nodes in flight may still spend (their reservations).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reserved {
    /// Calls promised to nodes in flight.
    pub calls: u64,
    /// Evaluations promised to nodes in flight.
    pub evaluations: u64,
    /// Nodes in flight.
    pub nodes: u64,
}

impl Budget {
    /// The budget that is spent, looking only at finished work and elapsed time.
    pub fn spent(&self, t: &Totals, elapsed_s: f64) -> Option<StopReason> {
        let over = |lim: Option<u64>, v: u64| lim.is_some_and(|l| v >= l);
        if over(self.calls, t.spend.calls) {
            return Some(StopReason::Calls);
        }
        if over(self.tokens, t.spend.tokens) {
            return Some(StopReason::Tokens);
        }
        if self.cost.is_some_and(|c| t.spend.cost >= c) {
            return Some(StopReason::Cost);
        }
        if over(self.evaluations, t.spend.evaluations) {
            return Some(StopReason::Evaluations);
        }
        if self.wall_s.is_some_and(|w| elapsed_s >= w) {
            return Some(StopReason::WallTime);
        }
        if over(self.nodes, t.nodes) {
            return Some(StopReason::Nodes);
        }
        None
    }

    /// Whether one more node with `inner` iterations fits next to the reservations; the calls
    /// it may make (None: unlimited) when it does. `free_slots` shares the remaining calls
    /// fairly among the nodes that could still be launched in this batch.
    pub fn admit(
        &self,
        t: &Totals,
        r: &Reserved,
        inner: u32,
        free_slots: u64,
    ) -> Result<Option<u64>, StopReason> {
        if self.nodes.is_some_and(|l| t.nodes + r.nodes >= l) {
            return Err(StopReason::Nodes);
        }
        if self
            .evaluations
            .is_some_and(|l| t.spend.evaluations + r.evaluations + u64::from(inner) > l)
        {
            return Err(StopReason::Evaluations);
        }
        match self.calls {
            None => Ok(None),
            Some(l) => {
                let left = l.saturating_sub(t.spend.calls + r.calls);
                if left == 0 {
                    return Err(StopReason::Calls);
                }
                Ok(Some((left / free_slots.max(1)).max(1)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spent_names_the_first_limit_reached() {
        let b = Budget {
            calls: Some(10),
            nodes: Some(3),
            ..Budget::default()
        };
        let mut t = Totals::default();
        assert_eq!(b.spent(&t, 0.0), None);
        t.nodes = 3;
        assert_eq!(b.spent(&t, 0.0), Some(StopReason::Nodes));
        t.spend.calls = 10;
        assert_eq!(b.spent(&t, 0.0), Some(StopReason::Calls));
    }

    #[test]
    fn admit_shares_calls_and_reserves_evaluations() {
        let b = Budget {
            calls: Some(10),
            evaluations: Some(4),
            ..Budget::default()
        };
        let t = Totals::default();
        let r = Reserved::default();
        assert_eq!(b.admit(&t, &r, 1, 2), Ok(Some(5)));
        let r = Reserved {
            calls: 9,
            evaluations: 3,
            nodes: 3,
        };
        assert_eq!(b.admit(&t, &r, 1, 1), Ok(Some(1)));
        assert_eq!(b.admit(&t, &r, 2, 1), Err(StopReason::Evaluations));
        let r = Reserved { calls: 10, ..r };
        assert_eq!(b.admit(&t, &r, 1, 1), Err(StopReason::Calls));
    }
}
