//! What agent runs share besides the search that drives them (`optimize --model` is a graph
//! search, `crate::search`): `ksmith runs`, `show RUN`, `calls RUN` (`commands.rs`, which also
//! read runs stored by the serial loop of earlier versions), the terminal reviewer of an
//! interactive run (`review.rs`), and `ksmith task new` with its journaled session.

pub(crate) mod commands;
mod review;
mod session;
mod task_new;

pub(crate) use commands::{cmd_calls, cmd_runs, cmd_show_run};
pub(crate) use review::TerminalReviewer;
pub(crate) use task_new::{cmd_task_new, TaskNewArgs};

/// A run's stored settings: the engine's type (`runs.options` keeps its JSON format).
pub(crate) use ksmith_search::agent::state::{AgentSettings as RunOptions, FrozenJudge};
