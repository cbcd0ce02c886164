//! The search engine: everything that proposes, judges and chooses candidates without being a
//! front end. The graph search over agent sessions (`node`, `hint`, strategies), the events a
//! front end renders, and (as it moves out of the CLI) the evaluator, the tuner's driver and the
//! agent loop. The CLI keeps argument parsing, printing and exit codes.

pub mod agent;
pub mod dedup;
pub mod events;
pub mod hint;
pub mod node;

pub use events::{Event, EventSink, NullSink};
pub use hint::Hint;
pub use node::{
    ExpandError, Expanded, Expander, Expansion, Node, NodeId, NodeOutcome, NodeState, Spend,
};
