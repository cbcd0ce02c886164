//! Agents: the role prompts (templates rendered from typed state), the parsers for their
//! structured replies, code edits, and run budgets. The loop that drives them against the judge
//! lives in `ksmith-cli` (`agent/`), which owns the store, the judge and the tuner.

pub mod budget;
pub mod edit;
pub mod parse;
pub mod roles;

pub use budget::{Budget, Limit, Usage};
pub use parse::{parse_plan, parse_task_draft, parse_tunables, Plan, ReplyError, TuneDecision};
pub use roles::{PromptError, Prompts, Rendered, Role};
