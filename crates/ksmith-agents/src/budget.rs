//! Run budgets: the run stops cleanly at the first limit reached and says which.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Limits of one run (`None` = unlimited).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Optimization iterations.
    pub iterations: Option<u32>,
    /// LLM calls.
    pub llm_calls: Option<u64>,
    /// Tokens in + out.
    pub tokens: Option<u64>,
    /// USD.
    pub cost: Option<f64>,
    /// Wall seconds of running (over all sessions of the run).
    pub wall_s: Option<f64>,
}

/// What a run has used so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Iterations started.
    pub iterations: u32,
    /// LLM calls made (replayed ones included).
    pub llm_calls: u64,
    /// Tokens in + out.
    pub tokens: u64,
    /// USD.
    pub cost: f64,
    /// Wall seconds.
    pub wall_s: f64,
}

/// The limit that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `--iterations`.
    Iterations,
    /// `--max-calls`.
    LlmCalls,
    /// `--max-tokens`.
    Tokens,
    /// `--max-cost`.
    Cost,
    /// `--max-wall`.
    WallTime,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Iterations => "iterations",
            Limit::LlmCalls => "llm calls",
            Limit::Tokens => "tokens",
            Limit::Cost => "cost",
            Limit::WallTime => "wall time",
        })
    }
}

impl Budget {
    /// The first limit `usage` has reached, with a message; `None` while within budget.
    /// Iterations are checked before starting one, so `iterations` counts those done.
    pub fn exhausted(&self, u: &Usage) -> Option<(Limit, String)> {
        if let Some(n) = self.iterations.filter(|n| u.iterations >= *n) {
            return Some((
                Limit::Iterations,
                format!("{} of {n} iterations done", u.iterations),
            ));
        }
        if let Some(n) = self.llm_calls.filter(|n| u.llm_calls >= *n) {
            return Some((
                Limit::LlmCalls,
                format!("{} of {n} LLM calls made", u.llm_calls),
            ));
        }
        if let Some(n) = self.tokens.filter(|n| u.tokens >= *n) {
            return Some((Limit::Tokens, format!("{} of {n} tokens used", u.tokens)));
        }
        if let Some(c) = self.cost.filter(|c| u.cost >= *c) {
            return Some((Limit::Cost, format!("${:.4} of ${c:.4} spent", u.cost)));
        }
        if let Some(w) = self.wall_s.filter(|w| u.wall_s >= *w) {
            return Some((Limit::WallTime, format!("{:.0} of {w:.0} s used", u.wall_s)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_limit_reached_is_named() {
        let b = Budget {
            iterations: Some(3),
            llm_calls: Some(10),
            tokens: Some(1000),
            cost: Some(0.5),
            wall_s: None,
        };
        let mut u = Usage::default();
        assert_eq!(b.exhausted(&u), None);
        u.tokens = 1000;
        assert_eq!(b.exhausted(&u).unwrap().0, Limit::Tokens);
        u.llm_calls = 10;
        let (l, msg) = b.exhausted(&u).unwrap();
        assert_eq!(
            (l, msg.as_str()),
            (Limit::LlmCalls, "10 of 10 LLM calls made")
        );
        assert_eq!(Budget::default().exhausted(&u), None);
    }
}
