//! The search graph as the engine keeps it: every node with the request that grew it, and the
//! questions strategies ask of it (best correct node, status rank, children).

use crate::features::Features;
use crate::hint::Hint;
use crate::node::{Node, NodeId};
use ksmith_judge::Status;
use serde::{Deserialize, Serialize};

/// How a node was asked for (kept so a resumed search expands a node in flight again with
/// the same request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Parent.
    pub parent: Option<NodeId>,
    /// Hint given.
    pub hint: Hint,
    /// Model given (several models configured).
    pub model: Option<String>,
    /// Inspirations shown.
    pub inspirations: Vec<NodeId>,
    /// Inner iterations.
    pub inner: u32,
    /// Seed for the session.
    pub seed: u64,
    /// Call cap given.
    pub max_calls: Option<u64>,
    /// Bandit arm pulled (None: no bandit choice, e.g. the root).
    pub arm: Option<usize>,
    /// Island (evolve).
    pub island: u32,
}

/// One node with the engine's bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The node.
    pub node: Node,
    /// Its request.
    pub request: Request,
    /// Its expansion has returned (a node in flight has not).
    pub finished: bool,
    /// Merged: the strategy and bandit have seen it.
    pub merged: bool,
    /// Code features (when it produced code).
    pub features: Option<Features>,
}

/// Every node, indexed by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Entries; `entries[i].node.id == NodeId(i)`.
    pub entries: Vec<Entry>,
}

/// Order of statuses for keep rules when nothing (or not enough) is correct: closer to
/// correct ranks higher.
pub fn status_rank(s: Option<Status>) -> u8 {
    match s {
        Some(Status::Passed) => 7,
        Some(Status::IncorrectNumerical) => 6,
        Some(Status::IncorrectShape) | Some(Status::IncorrectDtype) => 5,
        Some(Status::Timeout) => 4,
        Some(Status::RuntimeError) => 3,
        Some(Status::CompileError) => 2,
        Some(Status::PolicyRejected) => 1,
        None => 0,
    }
}

impl Graph {
    /// The entry of a node.
    pub fn get(&self, id: NodeId) -> Option<&Entry> {
        self.entries.get(id.0 as usize)
    }

    /// The node's speedup when it is correct, timed and not a duplicate.
    pub fn speedup(&self, id: NodeId) -> Option<f64> {
        let e = self.get(id)?;
        (e.merged && e.node.outcome.passed() && e.node.duplicate_of.is_none())
            .then_some(e.node.outcome.speedup)
            .flatten()
    }

    /// The best merged correct node (ties: the earlier).
    pub fn best_correct(&self) -> Option<NodeId> {
        self.best_of(self.entries.iter().map(|e| e.node.id))
    }

    /// The best correct node among `ids` (ties: the earlier id).
    pub fn best_of(&self, ids: impl Iterator<Item = NodeId>) -> Option<NodeId> {
        let mut best: Option<(NodeId, f64)> = None;
        for id in ids {
            if let Some(s) = self.speedup(id) {
                if best.is_none_or(|(b, bs)| s > bs || (s == bs && id < b)) {
                    best = Some((id, s));
                }
            }
        }
        best.map(|(id, _)| id)
    }

    /// A correct node's speedup with its 95% interval (its point when none was kept).
    pub fn figures(&self, id: NodeId) -> Option<(f64, (f64, f64))> {
        let s = self.speedup(id)?;
        let iv = self
            .get(id)?
            .node
            .outcome
            .interval
            .filter(|(lo, hi)| *lo > 0.0 && hi >= lo)
            .unwrap_or((s, s));
        Some((s, iv))
    }

    /// The correct node whose interval's lower bound is highest: if any node is decided
    /// faster than another (the decision rule on separate windows: its low over the other's
    /// high), this one is.
    fn surest(&self) -> Option<(f64, (f64, f64))> {
        self.entries
            .iter()
            // A node timed slower than its parent in the same rounds cannot beat anything on
            // its separate window: that window is what the paired timing contradicted.
            .filter(|e| !self.slower_than_correct_parent(e.node.id))
            .filter_map(|e| self.figures(e.node.id))
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
    }

    /// Whether some correct node is decided faster than `id` by the decision rule
    /// (`ksmith_judge::decide`): nodes no other beats are the ones a keep rule may not tell
    /// apart, whatever their point estimates.
    fn beaten(&self, id: NodeId, surest: Option<(f64, (f64, f64))>) -> bool {
        // Paired evidence first: timed in the same rounds, a node decided slower than its
        // correct parent is beaten by it, and a parent a child was decided faster than is
        // beaten by that child, whatever their separate windows said.
        if self.slower_than_correct_parent(id) {
            return true;
        }
        if self.entries.iter().any(|c| {
            c.node.parent == Some(id)
                && self.speedup(c.node.id).is_some()
                && c.node.outcome.faster_than_parent()
        }) {
            return true;
        }
        match (surest, self.figures(id)) {
            (Some(c), Some(i)) => {
                ksmith_judge::decide::decide(ksmith_judge::decide::Evidence::separate(c, i, false))
                    .adopt()
            }
            _ => false,
        }
    }

    /// Whether `id` was timed slower than its correct parent in the same rounds.
    fn slower_than_correct_parent(&self, id: NodeId) -> bool {
        self.get(id).is_some_and(|e| {
            e.node.parent.is_some_and(|p| self.speedup(p).is_some())
                && e.node.outcome.slower_than_parent()
        })
    }

    /// Sort key for keep rules: correct first, then those no node is decided faster than, then
    /// by speedup, then by status rank, then by id.
    fn keep_key(
        &self,
        id: NodeId,
        surest: Option<(f64, (f64, f64))>,
    ) -> (bool, bool, f64, u8, std::cmp::Reverse<NodeId>) {
        let e = self.get(id);
        (
            self.speedup(id).is_some(),
            !self.beaten(id, surest),
            self.speedup(id).unwrap_or(0.0),
            e.map_or(0, |e| status_rank(e.node.outcome.status)),
            std::cmp::Reverse(id),
        )
    }

    /// Whether `id` is correct and no node is decided faster than it: among the nodes a
    /// search cannot tell from its best.
    pub fn among_best(&self, id: NodeId) -> bool {
        self.speedup(id).is_some() && !self.beaten(id, self.surest())
    }

    /// The best correct node by the keep rules ([`rank`]): among those no node is decided
    /// faster than (paired evidence first), the highest figure. What a loop grows from: a
    /// child decided faster than its parent in the same rounds replaces it even when their
    /// separate windows say otherwise, and one decided slower never does.
    pub fn best_ranked(&self) -> Option<NodeId> {
        let mut ids: Vec<NodeId> = self
            .entries
            .iter()
            .map(|e| e.node.id)
            .filter(|&id| self.speedup(id).is_some())
            .collect();
        rank(self, &mut ids);
        ids.first().copied()
    }

    /// Children of a node (in flight included).
    pub fn children(&self, id: NodeId) -> usize {
        self.entries
            .iter()
            .filter(|e| e.request.parent == Some(id))
            .count()
    }

    /// Nodes in flight (launched, not merged).
    pub fn in_flight(&self) -> usize {
        self.entries.iter().filter(|e| !e.merged).count()
    }
}

/// Sorts `ids` best first: correct ones no node is decided faster than, then the other
/// correct ones, each by speedup; then by status rank, then by id.
pub fn rank(g: &Graph, ids: &mut [NodeId]) {
    let surest = g.surest();
    ids.sort_by(|a, b| {
        g.keep_key(*b, surest)
            .partial_cmp(&g.keep_key(*a, surest))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}
