//! The search graph's node and the one interface that grows it: an [`Expander`] turns an
//! [`Expansion`] request (parent, hint, inspirations) into an [`Expanded`] child. The real
//! expander runs a short agent session with a fresh context; the simulated one draws from a pool
//! of candidates with known evaluations.

use crate::events::EventSink;
use crate::hint::Hint;
use ksmith_judge::Status;
use serde::{Deserialize, Serialize};

/// A node's id, unique within a search run (0 is the first node expanded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u64);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Where a node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Chosen for expansion, not started.
    Pending,
    /// Its agent session is running (lost on `kill -9`; a resumed search expands it again).
    Expanding,
    /// Expanded and judged.
    Done,
    /// The session produced no candidate (no usable plan or code).
    NoCandidate,
    /// Its code was byte for byte an earlier candidate's: not judged again.
    Duplicate,
    /// The session failed for a reason outside the candidate (provider or environment).
    Failed,
}

impl NodeState {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Expanding => "expanding",
            NodeState::Done => "done",
            NodeState::NoCandidate => "no_candidate",
            NodeState::Duplicate => "duplicate",
            NodeState::Failed => "failed",
        }
    }

    /// The state a stored spelling names.
    pub fn from_name(s: &str) -> Option<NodeState> {
        [
            NodeState::Pending,
            NodeState::Expanding,
            NodeState::Done,
            NodeState::NoCandidate,
            NodeState::Duplicate,
            NodeState::Failed,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// What the judge said of a node's candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    /// The judge's status (None when nothing was judged).
    pub status: Option<Status>,
    /// Speedup over the baseline (geometric mean over workloads) when passed and timed.
    pub speedup: Option<f64>,
    /// Its 95% interval.
    pub interval: Option<(f64, f64)>,
    /// Fraction of the roofline reached (geometric mean over workloads), when known.
    pub roofline_fraction: Option<f64>,
    /// The stored evaluation (None in simulation).
    pub eval_id: Option<i64>,
    /// Timed side by side with its parent in the same rounds (agent searches, when both
    /// passed): the paired figure and the decision rule's answer, which keep rules trust over
    /// the two separate windows.
    #[serde(default)]
    pub vs_parent: Option<ksmith_judge::decide::Decision>,
}

impl NodeOutcome {
    /// Passed and timed.
    pub fn passed(&self) -> bool {
        self.status == Some(Status::Passed) && self.speedup.is_some()
    }

    /// Decided slower than its parent in the same rounds.
    pub fn slower_than_parent(&self) -> bool {
        matches!(
            self.vs_parent,
            Some(ksmith_judge::decide::Decision::NotBetter {
                why: ksmith_judge::decide::NotBetterWhy::Slower,
                ..
            })
        )
    }

    /// Decided faster than its parent in the same rounds.
    pub fn faster_than_parent(&self) -> bool {
        self.vs_parent.is_some_and(|d| d.adopt())
    }
}

/// What growing a node cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// LLM calls.
    pub calls: u64,
    /// Tokens in + out.
    pub tokens: u64,
    /// USD (0 when the model has no price).
    pub cost: f64,
    /// Evaluations run by the judge (stored ones reused are not counted).
    pub evaluations: u64,
    /// Wall seconds of the expansion.
    pub wall_s: f64,
}

impl Spend {
    /// Adds another spend to this one.
    pub fn add(&mut self, o: &Spend) {
        self.calls += o.calls;
        self.tokens += o.tokens;
        self.cost += o.cost;
        self.evaluations += o.evaluations;
        self.wall_s += o.wall_s;
    }
}

/// What a node's optional stages found about its kept candidate, told to its children's
/// planners (and the autotune planner down the lineage).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// What autotuning found (the winner, each configuration's figures, failures), or why the
    /// tuned kernel was discarded.
    #[serde(default)]
    pub tuning: Option<String>,
    /// The profile analyst's summary of the kept candidate.
    #[serde(default)]
    pub profile: Option<String>,
}

/// One node of the search graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Id within the run.
    pub id: NodeId,
    /// The node it was grown from (None for a root).
    pub parent: Option<NodeId>,
    /// Distance from the root.
    pub depth: u32,
    /// The direction it pursued.
    pub hint: Hint,
    /// Where it stands.
    pub state: NodeState,
    /// The plan its session followed (one paragraph).
    pub plan: String,
    /// Content hash of its source (an artifact in the store), when it produced code.
    pub code_hash: Option<String>,
    /// Normalized-source hash (comments and whitespace removed): groups nodes in prompts and
    /// reports, never stands in for a verdict.
    pub norm_hash: Option<String>,
    /// The node whose code it duplicated, when [`NodeState::Duplicate`].
    pub duplicate_of: Option<NodeId>,
    /// What the judge said.
    pub outcome: NodeOutcome,
    /// What it cost.
    pub spend: Spend,
    /// What its stages (autotune, profile) found.
    #[serde(default)]
    pub feedback: Feedback,
}

/// A request to grow one node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expansion {
    /// The id the new node will have.
    pub node: NodeId,
    /// The parent node (None: write a first kernel, or start from the run's starting solution).
    pub parent: Option<Node>,
    /// The parent's source, when it has one.
    pub parent_source: Option<String>,
    /// One line per ancestor, root first: hint, plan title and outcome (the lineage).
    pub lineage: Vec<String>,
    /// What other nodes of the search tried and how they did (siblings and cousins first,
    /// then the most recent), one line each: so a planner does not propose again an idea a
    /// sibling already measured.
    #[serde(default)]
    pub tried: Vec<String>,
    /// The search's best node so far, when it is not the parent.
    #[serde(default)]
    pub search_best: Option<Node>,
    /// The direction to pursue.
    pub hint: Hint,
    /// Other good programs shown to the planner (evolutionary search): node and source.
    pub inspirations: Vec<(Node, String)>,
    /// Plan → implement → judge rounds inside the session (the session keeps its best).
    pub inner_iterations: u32,
    /// Seed for anything random inside the session (simulation draws).
    pub seed: u64,
    /// The model to use when several are configured (None: the run's model).
    #[serde(default)]
    pub model: Option<String>,
    /// Most LLM calls the session may make (None: no limit); the engine's share of the call
    /// budget, so a search stops at its call budget exactly.
    #[serde(default)]
    pub max_calls: Option<u64>,
    /// No node will be grown after this one (the node budget's last): what only a child would
    /// read (the profile) is not worth its call.
    #[serde(default)]
    pub last: bool,
}

/// A grown node, as the expander reports it (the engine assigns state and bookkeeping).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Expanded {
    /// The plan followed.
    pub plan: String,
    /// The candidate's source (None: the session produced no candidate).
    pub source: Option<String>,
    /// Content hash of the source as stored.
    pub code_hash: Option<String>,
    /// Normalized-source hash.
    pub norm_hash: Option<String>,
    /// Set when the candidate duplicated an earlier one and was not judged again.
    pub duplicate_of: Option<NodeId>,
    /// What the judge said.
    pub outcome: NodeOutcome,
    /// What it cost.
    pub spend: Spend,
    /// What its stages (autotune, profile) found.
    pub feedback: Feedback,
}

/// Why an expansion failed outside the candidate's control.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    /// A budget ran out during the expansion.
    #[error("budget reached: {0}")]
    Budget(String),
    /// The provider or the environment failed; the search can be resumed.
    #[error("{0}")]
    Failed(#[source] anyhow::Error),
    /// Judging this node's candidate failed for a reason outside the candidate (the harness,
    /// the compiler, the disk): the node fails, the search goes on (it stops only when the
    /// judge fails on several nodes in a row).
    #[error("the judge failed: {0}")]
    Judge(#[source] anyhow::Error),
    /// The run cannot go on as given.
    #[error("{0}")]
    Input(#[source] anyhow::Error),
    /// The provider refused the run as configured (a rejected key, an unknown model): no
    /// retry or other node can succeed, so the search stops at once, this node left to be
    /// grown again when the run is resumed after the fix.
    #[error("{0}")]
    Refused(#[source] anyhow::Error),
    /// A person reviewing the session stopped the run there: the node is grown again, its
    /// paid calls and answered reviews replayed, when the run is resumed.
    #[error("paused: {0}")]
    Paused(String),
}

/// Grows nodes. Called from several threads at once when expansions run in parallel.
pub trait Expander: Send + Sync {
    /// Runs one node's session and reports its child.
    fn expand(&self, req: &Expansion, events: &dyn EventSink) -> Result<Expanded, ExpandError>;
}

/// A plan's title: the line under its `## Title` heading, else its first line that is not a
/// heading (plans are stored as the planner's markdown).
pub fn plan_title(plan: &str) -> String {
    let mut lines = plan.lines().map(str::trim);
    let title = plan
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.eq_ignore_ascii_case("## title"))
        .skip(1)
        .find(|l| !l.is_empty())
        .filter(|l| !l.starts_with('#'));
    title
        .or_else(|| lines.find(|l| !l.is_empty() && !l.starts_with('#')))
        .unwrap_or("")
        .chars()
        .take(100)
        .collect()
}
