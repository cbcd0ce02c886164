//! What the engine reports while it works. The terminal, a report and any later front end
//! render the same events; the engine never prints.

use crate::hint::Hint;
use crate::node::{Node, NodeId};
use serde::{Deserialize, Serialize};

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
