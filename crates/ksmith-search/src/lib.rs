//! The search engine: everything that proposes, judges and chooses candidates without being a
//! front end. The graph search over agent sessions (`node`, `hint`, `engine`, `strategy`), the
//! events a front end renders, the simulator (`sim`), and (as it moves out of the CLI) the
//! evaluator, the tuner's driver and the agent loop. The CLI keeps argument parsing, printing
//! and exit codes.

pub mod agent;
pub mod archive;
pub mod bandit;
pub mod budget;
pub mod dedup;
pub mod engine;
pub mod evaluator;
pub mod events;
pub mod features;
pub mod finalize;
pub mod graph;
pub mod hint;
pub mod memory;
pub mod node;
pub mod persist;
pub mod sim;
pub mod strategy;
pub mod tune;

pub use budget::{Budget, StopReason};
pub use engine::{Finalizer, Search, SearchError, SearchResult, SearchSettings, SearchState};
pub use evaluator::{Decided, Evaluated, Evaluator, EvaluatorError, Purpose, Reuse};
pub use events::{Event, EventSink, NullSink, TrialOutcome};
pub use hint::Hint;
pub use node::{
    ExpandError, Expanded, Expander, Expansion, Feedback, Node, NodeId, NodeOutcome, NodeState,
    Spend,
};
pub use persist::{MemoryPersist, NoPersist, Persist, PersistError, StorePersist};
pub use strategy::{StrategyKind, StrategySettings};

#[cfg(test)]
mod tests;
