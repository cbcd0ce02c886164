//! What the engine reports while it works. The terminal, a report and any later front end
//! render the same events; the engine never prints.

use crate::hint::Hint;
use crate::node::{Node, NodeId};
use ksmith_judge::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A free-form progress line from a stage (judge stage, agent role being waited for).
    Progress {
        /// The node it concerns, if any.
        node: Option<NodeId>,
        /// What is happening.
        message: String,
    },
    /// A node's expansion started.
    NodeStarted {
        /// The node.
        node: NodeId,
        /// Its parent.
        parent: Option<NodeId>,
        /// Its hint.
        hint: Hint,
    },
    /// A node finished (any state).
    NodeFinished {
        /// The node as it ended.
        node: Box<Node>,
    },
    /// A new best correct node.
    NewBest {
        /// The node.
        node: NodeId,
        /// Its speedup.
        speedup: f64,
    },
    /// The search stopped.
    Stopped {
        /// Why (budget, target reached, frontier empty).
        reason: String,
    },
    /// The tuner started on a solution's parameter space.
    TuneStarted {
        /// Task name (from a file: escape before showing).
        task: String,
        /// Solution name (from a file: escape before showing).
        solution: String,
        /// The tunable parameters.
        parameters: Vec<String>,
        /// Valid configurations in the space.
        space_size: usize,
        /// The strategy.
        strategy: String,
        /// Successive elimination against the best so far is on.
        racing: bool,
        /// Configurations the search expects to judge (the budget, or fewer in a small space).
        steps: u64,
    },
    /// The tuner is judging (or looking up) a configuration; None: the untuned solution.
    TuneJudging {
        /// The configuration.
        config: Option<BTreeMap<String, i64>>,
    },
    /// A configuration was judged (or found in the store); None: the untuned solution.
    TuneJudged {
        /// The configuration.
        config: Option<BTreeMap<String, i64>>,
        /// How it did.
        outcome: TrialOutcome,
        /// It came from the store.
        reused: bool,
    },
    /// The tuner stopped proposing configurations.
    TuneSearchEnded {
        /// Configurations judged (the untuned solution not counted).
        evaluated: usize,
    },
    /// The tuner's leaders are being checked again and re-timed side by side.
    TuneRetiming {
        /// How many.
        finalists: usize,
        /// The untuned solution is the first of them.
        with_untuned: bool,
    },
}

/// One evaluation as events report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialOutcome {
    /// The verdict.
    pub status: Status,
    /// Why it did not pass (machine-readable; from the judge).
    pub reason: Option<ksmith_judge::Reason>,
    /// Speedup over the baseline, when it passed.
    pub speedup: Option<f64>,
    /// The speedup's interval, when it passed.
    pub interval: Option<(f64, f64)>,
    /// Timing stopped early against the incumbent (the speedup is an estimate).
    pub eliminated: bool,
}

/// Receives events. Shared by concurrent expansions.
pub trait EventSink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: Event);
}

/// Drops every event.
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuner_events_round_trip_through_json() {
        // A report or a later front end reads the events back.
        let e = Event::TuneJudged {
            config: Some(BTreeMap::from([("BLOCK".to_string(), 4096)])),
            outcome: TrialOutcome {
                status: Status::Passed,
                reason: None,
                speedup: Some(1.25),
                interval: Some((1.1, 1.4)),
                eliminated: true,
            },
            reused: true,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"event\":\"tune_judged\""), "{text}");
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);
    }
}
