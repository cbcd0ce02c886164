//! The agent loop's shared types: its settings (stored with a run, so a resumed run keeps them),
//! the run mode and the review interface. They live here, not in the loop's
//! modules, so iterate, autotune, brief, finish and profile depend on this module instead of on
//! each other.

use ksmith_agents::Budget;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a run needs to be resumed, stored with it as JSON (the `runs.options` column;
/// field names are the stored format).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentSettings {
    /// Starting solution.
    pub from: PathBuf,
    /// Limits.
    pub budget: Budget,
    /// Fix attempts per stage.
    pub fix_attempts: u32,
    /// Extra knowledge directories.
    pub knowledge: Vec<PathBuf>,
    /// Prompt overrides.
    pub prompts: Option<PathBuf>,
    /// Tuner configurations per iteration.
    pub tune_budget: usize,
    /// Profile stage off.
    pub no_profile: bool,
    /// Judge settings (seeds policy, timing) frozen with the tests.
    pub judge: FrozenJudge,
    /// Output directory.
    pub out: PathBuf,
}

/// The judge settings a run keeps for its whole life.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FrozenJudge {
    /// Per-call timeout (s).
    pub timeout: f64,
    /// Seeds per workload.
    pub seeds: u64,
    /// Minimum timed milliseconds per side.
    pub min_time_ms: u64,
}

/// How a run is driven (the `runs.mode` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunMode {
    /// The loop decides every step.
    Autonomous,
    /// A person reviews every step.
    Interactive,
    /// `task new`: the test designer drafts a task.
    TaskNew,
    /// A graph search over agent sessions.
    Search,
}

impl RunMode {
    /// Every mode.
    pub const ALL: [RunMode; 4] = [
        RunMode::Autonomous,
        RunMode::Interactive,
        RunMode::TaskNew,
        RunMode::Search,
    ];

    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Autonomous => "autonomous",
            RunMode::Interactive => "interactive",
            RunMode::TaskNew => "task_new",
            RunMode::Search => "search",
        }
    }

    /// The mode a stored spelling names.
    pub fn from_name(s: &str) -> Option<RunMode> {
        RunMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl std::fmt::Display for RunMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a reviewer decided about an artifact (journaled: a resumed run replays it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Use it as is.
    Approve,
    /// Use the reviewer's edited text instead.
    Edited(String),
    /// Use it, and pass this guidance to the next agent call.
    Guidance(String),
    /// Ask the agent again.
    Rerun,
    /// Stop here; the run can be resumed.
    Quit,
}

/// Reviews an agent's artifact (a plan, a diff) in an interactive run. The terminal front end
/// implements it; the engine never reads a terminal.
pub trait Reviewer {
    /// Shows `shown` for `step` (`what` names the artifact) and returns the decision; an edit
    /// starts from `editable`.
    fn review(
        &self,
        step: &str,
        what: &str,
        shown: &str,
        editable: &str,
    ) -> anyhow::Result<Verdict>;
}

/// Approves everything (autonomous runs).
pub struct AutoApprove;

impl Reviewer for AutoApprove {
    fn review(&self, _: &str, _: &str, _: &str, _: &str) -> anyhow::Result<Verdict> {
        Ok(Verdict::Approve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_settings_keep_their_stored_format() {
        for m in RunMode::ALL {
            assert_eq!(RunMode::from_name(m.as_str()), Some(m));
        }
        assert_eq!(RunMode::from_name("nope"), None);
        // A run stored by an older ksmith (RunOptions JSON) still loads.
        let stored = r#"{"from":"/t/s","budget":{"iterations":3,"llm_calls":null,"tokens":null,"cost":null,"wall_s":null},"fix_attempts":3,"knowledge":[],"prompts":null,"tune_budget":8,"no_profile":false,"judge":{"timeout":30.0,"seeds":3,"min_time_ms":100},"out":"/o"}"#;
        let s: AgentSettings = serde_json::from_str(stored).unwrap();
        assert_eq!(s.budget.iterations, Some(3));
        assert_eq!(s.judge.min_time_ms, 100);
        assert_eq!(serde_json::to_string(&s).unwrap(), stored);
        assert_eq!(
            AutoApprove.review("s", "plan", "x", "x").unwrap(),
            Verdict::Approve
        );
    }
}
