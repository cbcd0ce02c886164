//! `greedy`: best-first. After the root, always expand a best correct node that has fewer
//! than `branch_cap` children (in flight included): among those no node is decided faster
//! than (the decision rule), the one with the fewest children; while nothing is correct, the
//! best node by status rank under the cap (so a failing start gets fixed).

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
        // Among the nodes the search cannot tell from its best (none decided faster: their
        // intervals overlap), the one grown least: a node at 1.82x beside one at 2.19x with
        // overlapping intervals is not dropped on a point estimate.
        let pick = open
            .iter()
            .take_while(|id| g.among_best(**id))
            .min_by_key(|id| g.children(**id))
            .or(open.first());
        match pick {
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
