//! `greedy`: best-first. After the root, always expand the best correct node that has fewer
//! than `branch_cap` children (in flight included); while nothing is correct, the best node
//! by status rank under the cap (so a failing start gets fixed).

use super::{Next, Proposal, RootGate, Strategy};
use crate::graph::{rank, Graph};
use crate::node::NodeId;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Greedy state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Greedy {
    /// Most children per node.
    pub branch_cap: u32,
    /// The root.
    pub root: RootGate,
}

impl Greedy {
    /// A fresh strategy.
    pub fn new(branch_cap: u32) -> Greedy {
        Greedy {
            branch_cap,
            ..Greedy::default()
        }
    }
}

impl Strategy for Greedy {
    fn next(&mut self, g: &Graph, _rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        let mut open: Vec<NodeId> = g
            .entries
            .iter()
            .filter(|e| e.merged && g.children(e.node.id) < self.branch_cap as usize)
            .map(|e| e.node.id)
            .collect();
        rank(g, &mut open);
        match open.first() {
            Some(p) => Next::Expand(Proposal::child(Some(*p))),
            None if g.in_flight() > 0 => Next::Wait,
            None => Next::Done,
        }
    }
    fn launched(&mut self, id: NodeId, _p: &Proposal) {
        self.root.launched(id);
    }
    fn finished(&mut self, _g: &Graph, id: NodeId) {
        self.root.finished(id);
    }
}
