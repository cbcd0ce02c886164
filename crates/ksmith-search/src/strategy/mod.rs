//! Search strategies behind one interface, [`Strategy`]: the engine asks for the next node to
//! expand ([`Next`]) and reports every finished node back, in node-id order. Parameters and
//! defaults are documented on [`StrategySettings`] and in docs/search.md.

mod beam;
mod evolve;
mod greedy;
mod simple;

pub use beam::Beam;
pub use evolve::Evolve;
pub use greedy::Greedy;
pub use simple::{BestOfN, Loop, Parallel};

use crate::graph::Graph;
use crate::node::NodeId;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// What to expand next.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The parent (None: the root, from the run's start or from nothing).
    pub parent: Option<NodeId>,
    /// Other programs to show the planner (evolve).
    pub inspirations: Vec<NodeId>,
    /// Which island the child belongs to (evolve; 0 otherwise).
    pub island: u32,
}

impl Proposal {
    /// A child of `parent` with nothing else.
    pub fn child(parent: Option<NodeId>) -> Proposal {
        Proposal {
            parent,
            inspirations: Vec::new(),
            island: 0,
        }
    }
}

/// A strategy's answer to "what next".
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Expand this.
    Expand(Proposal),
    /// Nothing until a node in flight finishes.
    Wait,
    /// The strategy's shape is complete.
    Done,
}

/// One search strategy.
pub trait Strategy {
    /// The next node to expand; `g` holds every node, finished or in flight.
    fn next(&mut self, g: &Graph, rng: &mut ChaCha8Rng) -> Next;
    /// The engine gave the proposal just returned by `next` this id.
    fn launched(&mut self, id: NodeId, p: &Proposal);
    /// A node finished (called in id order once its batch is complete).
    fn finished(&mut self, g: &Graph, id: NodeId);
}

/// The strategies by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StrategyKind {
    /// One chain: always expand the best correct node so far (today's serial loop).
    Loop,
    /// N independent children of the root (a baseline).
    BestOfN,
    /// N independent trajectories of depth D.
    Parallel,
    /// Beam search: width W, branches B, depth D.
    Beam,
    /// Best-first from the best correct node, with a per-node branch cap.
    Greedy,
    /// Islands with migration and a MAP-Elites archive.
    Evolve,
}

impl StrategyKind {
    /// Every strategy, in the documented order.
    pub const ALL: [StrategyKind; 6] = [
        StrategyKind::Loop,
        StrategyKind::BestOfN,
        StrategyKind::Parallel,
        StrategyKind::Beam,
        StrategyKind::Greedy,
        StrategyKind::Evolve,
    ];

    /// The command-line spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyKind::Loop => "loop",
            StrategyKind::BestOfN => "best-of-n",
            StrategyKind::Parallel => "parallel",
            StrategyKind::Beam => "beam",
            StrategyKind::Greedy => "greedy",
            StrategyKind::Evolve => "evolve",
        }
    }

    /// The strategy a spelling names.
    pub fn from_name(s: &str) -> Option<StrategyKind> {
        StrategyKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy with its parameters (defaults in [`StrategySettings::default_for`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "kebab-case")]
pub enum StrategySettings {
    /// One chain; no parameters.
    Loop,
    /// `n` children of the root (None: until a budget stops it).
    BestOfN {
        /// Children of the root (default: until a budget).
        n: Option<u32>,
    },
    /// `trajectories` independent chains from the root, each `depth` nodes long.
    Parallel {
        /// Trajectories (default 4).
        trajectories: u32,
        /// Nodes per trajectory (default: until a budget, trajectories grown in turn).
        depth: Option<u32>,
    },
    /// Beam search.
    Beam {
        /// Nodes kept per level, W (default 4).
        width: u32,
        /// Children per kept node, B (default 2).
        branches: u32,
        /// Levels below the root, D (default: until a budget).
        depth: Option<u32>,
    },
    /// Best-first.
    Greedy {
        /// Most children per node (default 3).
        branch_cap: u32,
    },
    /// Islands and MAP-Elites.
    Evolve {
        /// Islands (default 3).
        islands: u32,
        /// Finished nodes between migrations, M (default 8).
        migrate_every: u32,
        /// Probability a parent is its island's best elite rather than a random elite
        /// (default 0.7).
        elite_prob: f64,
        /// Other elites shown as inspirations (default 2).
        inspirations: u32,
    },
}

impl StrategySettings {
    /// The strategy with its documented defaults.
    pub fn default_for(kind: StrategyKind) -> StrategySettings {
        match kind {
            StrategyKind::Loop => StrategySettings::Loop,
            StrategyKind::BestOfN => StrategySettings::BestOfN { n: None },
            StrategyKind::Parallel => StrategySettings::Parallel {
                trajectories: 4,
                depth: None,
            },
            StrategyKind::Beam => StrategySettings::Beam {
                width: 4,
                branches: 2,
                depth: None,
            },
            StrategyKind::Greedy => StrategySettings::Greedy { branch_cap: 3 },
            StrategyKind::Evolve => StrategySettings::Evolve {
                islands: 3,
                migrate_every: 8,
                elite_prob: 0.7,
                inspirations: 2,
            },
        }
    }

    /// Which strategy.
    pub fn kind(&self) -> StrategyKind {
        match self {
            StrategySettings::Loop => StrategyKind::Loop,
            StrategySettings::BestOfN { .. } => StrategyKind::BestOfN,
            StrategySettings::Parallel { .. } => StrategyKind::Parallel,
            StrategySettings::Beam { .. } => StrategyKind::Beam,
            StrategySettings::Greedy { .. } => StrategyKind::Greedy,
            StrategySettings::Evolve { .. } => StrategyKind::Evolve,
        }
    }

    /// Checks the parameters; the error names the parameter.
    pub fn check(&self) -> Result<(), String> {
        let at_least_1 = |name: &str, v: u32| {
            if v == 0 {
                Err(format!("{name} must be at least 1"))
            } else {
                Ok(())
            }
        };
        match self {
            StrategySettings::Loop => Ok(()),
            StrategySettings::BestOfN { n } => n.map_or(Ok(()), |n| at_least_1("n", n)),
            StrategySettings::Parallel {
                trajectories,
                depth,
            } => {
                at_least_1("trajectories", *trajectories)?;
                depth.map_or(Ok(()), |d| at_least_1("depth", d))
            }
            StrategySettings::Beam {
                width,
                branches,
                depth,
            } => {
                at_least_1("width", *width)?;
                at_least_1("branches", *branches)?;
                depth.map_or(Ok(()), |d| at_least_1("depth", d))
            }
            StrategySettings::Greedy { branch_cap } => at_least_1("branch cap", *branch_cap),
            StrategySettings::Evolve {
                islands,
                migrate_every,
                elite_prob,
                inspirations: _,
            } => {
                at_least_1("islands", *islands)?;
                at_least_1("migrate-every", *migrate_every)?;
                if !(0.0..=1.0).contains(elite_prob) {
                    return Err("elite probability must be between 0 and 1".into());
                }
                Ok(())
            }
        }
    }

    /// A fresh strategy.
    pub fn build(&self) -> StrategyState {
        match self.clone() {
            StrategySettings::Loop => StrategyState::Loop(Loop::default()),
            StrategySettings::BestOfN { n } => StrategyState::BestOfN(BestOfN::new(n)),
            StrategySettings::Parallel {
                trajectories,
                depth,
            } => StrategyState::Parallel(Parallel::new(trajectories, depth)),
            StrategySettings::Beam {
                width,
                branches,
                depth,
            } => StrategyState::Beam(Beam::new(width, branches, depth)),
            StrategySettings::Greedy { branch_cap } => {
                StrategyState::Greedy(Greedy::new(branch_cap))
            }
            StrategySettings::Evolve {
                islands,
                migrate_every,
                elite_prob,
                inspirations,
            } => StrategyState::Evolve(Evolve::new(
                islands,
                migrate_every,
                elite_prob,
                inspirations,
            )),
        }
    }
}

/// A running strategy with its state (what the engine persists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "kebab-case")]
pub enum StrategyState {
    /// See [`Loop`].
    Loop(Loop),
    /// See [`BestOfN`].
    BestOfN(BestOfN),
    /// See [`Parallel`].
    Parallel(Parallel),
    /// See [`Beam`].
    Beam(Beam),
    /// See [`Greedy`].
    Greedy(Greedy),
    /// See [`Evolve`].
    Evolve(Evolve),
}

impl StrategyState {
    fn inner(&mut self) -> &mut dyn Strategy {
        match self {
            StrategyState::Loop(s) => s,
            StrategyState::BestOfN(s) => s,
            StrategyState::Parallel(s) => s,
            StrategyState::Beam(s) => s,
            StrategyState::Greedy(s) => s,
            StrategyState::Evolve(s) => s,
        }
    }
}

impl Strategy for StrategyState {
    fn next(&mut self, g: &Graph, rng: &mut ChaCha8Rng) -> Next {
        self.inner().next(g, rng)
    }
    fn launched(&mut self, id: NodeId, p: &Proposal) {
        self.inner().launched(id, p)
    }
    fn finished(&mut self, g: &Graph, id: NodeId) {
        self.inner().finished(g, id)
    }
}

/// Shared rule for strategies that start from one root: the root first, then wait for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RootGate {
    /// The root's id once launched.
    pub root: Option<NodeId>,
    /// The root finished.
    pub done: bool,
}

impl RootGate {
    /// `Some(next)` while the root is not finished.
    pub fn gate(&self) -> Option<Next> {
        match (self.root, self.done) {
            (None, _) => Some(Next::Expand(Proposal::child(None))),
            (Some(_), false) => Some(Next::Wait),
            (Some(_), true) => None,
        }
    }

    /// Records the root's launch (the first launch).
    pub fn launched(&mut self, id: NodeId) -> bool {
        if self.root.is_none() {
            self.root = Some(id);
            return true;
        }
        false
    }

    /// Records the root's end.
    pub fn finished(&mut self, id: NodeId) -> bool {
        if self.root == Some(id) {
            self.done = true;
            return true;
        }
        false
    }
}
