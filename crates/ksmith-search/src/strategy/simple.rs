//! The chain-shaped strategies: `loop`, `best-of-n`, `parallel`.

use super::{Next, Proposal, RootGate, Strategy};
use crate::graph::Graph;
use crate::node::NodeId;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// `loop`: one chain. After the root, each node's parent is the best correct node so far by
/// the keep rules (`Graph::best_ranked`: a node decided slower than its parent is rolled back
/// from), or the latest node while none is correct, so a failing start gets fixed; one node at
/// a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    /// The root.
    pub root: RootGate,
    /// A node is in flight.
    pub busy: bool,
    /// The latest node.
    pub last: Option<NodeId>,
}

impl Strategy for Loop {
    fn next(&mut self, g: &Graph, _rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        if self.busy {
            return Next::Wait;
        }
        Next::Expand(Proposal::child(g.best_ranked().or(self.last)))
    }
    fn launched(&mut self, id: NodeId, _p: &Proposal) {
        self.root.launched(id);
        self.busy = true;
    }
    fn finished(&mut self, _g: &Graph, id: NodeId) {
        self.root.finished(id);
        self.busy = false;
        self.last = Some(id);
    }
}

/// `best-of-n`: the root, then `n` independent children of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BestOfN {
    /// Children wanted (None: until a budget).
    pub n: Option<u32>,
    /// The root.
    pub root: RootGate,
    /// Children launched.
    pub launched: u32,
}

impl BestOfN {
    /// A fresh strategy.
    pub fn new(n: Option<u32>) -> BestOfN {
        BestOfN {
            n,
            ..BestOfN::default()
        }
    }
}

impl Strategy for BestOfN {
    fn next(&mut self, _g: &Graph, _rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        if self.n.is_some_and(|n| self.launched >= n) {
            return Next::Done;
        }
        Next::Expand(Proposal::child(self.root.root))
    }
    fn launched(&mut self, id: NodeId, _p: &Proposal) {
        if !self.root.launched(id) {
            self.launched += 1;
        }
    }
    fn finished(&mut self, _g: &Graph, id: NodeId) {
        self.root.finished(id);
    }
}

/// One trajectory of `parallel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Its nodes, in order.
    pub nodes: Vec<NodeId>,
    /// A node of it is in flight.
    pub busy: bool,
}

/// `parallel`: after the root, `trajectories` independent chains, each a `loop` over its own
/// nodes (parent: the trajectory's best correct node, else its latest, else the root), at most
/// one node in flight per trajectory; the shortest idle trajectory grows next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Parallel {
    /// Depth per trajectory (None: until a budget).
    pub depth: Option<u32>,
    /// The root.
    pub root: RootGate,
    /// The trajectories.
    pub trajectories: Vec<Trajectory>,
    /// The trajectory of the proposal being launched.
    pub pending: Option<usize>,
}

impl Parallel {
    /// A fresh strategy.
    pub fn new(n: u32, depth: Option<u32>) -> Parallel {
        Parallel {
            depth,
            trajectories: vec![Trajectory::default(); n as usize],
            ..Parallel::default()
        }
    }
}

impl Strategy for Parallel {
    fn next(&mut self, g: &Graph, _rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        let full = |t: &Trajectory| self.depth.is_some_and(|d| t.nodes.len() >= d as usize);
        let pick = self
            .trajectories
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.busy && !full(t))
            .min_by_key(|(i, t)| (t.nodes.len(), *i))
            .map(|(i, _)| i);
        match pick {
            Some(i) => {
                let t = &self.trajectories[i];
                let parent = g
                    .best_of(t.nodes.iter().copied())
                    .or(t.nodes.last().copied())
                    .or(self.root.root);
                self.pending = Some(i);
                Next::Expand(Proposal::child(parent))
            }
            None if self.trajectories.iter().any(|t| t.busy) => Next::Wait,
            None => Next::Done,
        }
    }
    fn launched(&mut self, id: NodeId, _p: &Proposal) {
        if self.root.launched(id) {
            return;
        }
        if let Some(t) = self
            .pending
            .take()
            .and_then(|i| self.trajectories.get_mut(i))
        {
            t.nodes.push(id);
            t.busy = true;
        }
    }
    fn finished(&mut self, _g: &Graph, id: NodeId) {
        if self.root.finished(id) {
            return;
        }
        for t in &mut self.trajectories {
            if t.nodes.last() == Some(&id) {
                t.busy = false;
            }
        }
    }
}
