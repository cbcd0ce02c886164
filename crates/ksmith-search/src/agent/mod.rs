//! The agent side of the engine: the expander that grows a search node with one agent session
//! (`ksmith-session`: contexts, journaled provider, stages; re-exported here), the finalizer,
//! and the search's tuner as the session's autotune stage ([`tuner`]).

pub mod expander;
pub mod finalizer;
pub mod tuner;

pub use ksmith_session::{brief, context, journal, stages, state};

pub use expander::{AgentExpander, ExpanderSettings, JudgeFactory};
pub use finalizer::AgentFinalizer;

use ksmith_task::Task;

/// A C kernel with the task's signature and an empty body (it fails its checks: nothing is
/// written): the start of a run on a task with no solution, which the agents replace with a
/// first kernel written from the task and its reference.
pub fn skeleton(task: &Task) -> String {
    let proto = ksmith_backend::c::prototype(task, &task.name);
    format!(
        "/* No solution existed for task `{}`: this skeleton only has the kernel's signature\n * (the judge's C ABI). Write the kernel; every output element must be written. */\n#include <math.h>\n#include <stdint.h>\n\n{} {{\n    /* not written yet */\n}}\n",
        task.name,
        proto.trim_end_matches(';')
    )
}
