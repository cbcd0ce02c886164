//! `beam`: level by level. Each kept node gets `branches` children; when a level is complete,
//! the keep rule picks the next beam from that level's children: the best `width` by speedup
//! among correct ones, then (ties, or too few correct) by status rank, then by id.

use super::{Next, Proposal, RootGate, Strategy};
use crate::graph::{rank, Graph};
use crate::node::NodeId;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Beam search state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Beam {
    /// W.
    pub width: u32,
    /// B.
    pub branches: u32,
    /// D (None: until a budget).
    pub depth: Option<u32>,
    /// The root.
    pub root: RootGate,
    /// Current level (1 = the root's children).
    pub level: u32,
    /// Parents still to get a child at this level (one entry per child).
    pub queue: Vec<NodeId>,
    /// This level's children launched.
    pub children: Vec<NodeId>,
    /// This level's children finished.
    pub finished: u32,
    /// The beam each level kept (level 0: the root).
    pub kept: Vec<Vec<NodeId>>,
    /// All levels done.
    pub done: bool,
}

impl Beam {
    /// A fresh beam.
    pub fn new(width: u32, branches: u32, depth: Option<u32>) -> Beam {
        Beam {
            width,
            branches,
            depth,
            ..Beam::default()
        }
    }

    fn start_level(&mut self, beam: Vec<NodeId>) {
        if self.depth.is_some_and(|d| self.level >= d) {
            self.done = true;
            self.kept.push(beam);
            return;
        }
        self.level += 1;
        self.queue = beam
            .iter()
            .flat_map(|p| std::iter::repeat_n(*p, self.branches as usize))
            .rev() // popped from the back: first parent first
            .collect();
        self.kept.push(beam);
        self.children.clear();
        self.finished = 0;
    }
}

impl Strategy for Beam {
    fn next(&mut self, _g: &Graph, _rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        if self.done {
            return Next::Done;
        }
        match self.queue.pop() {
            Some(p) => {
                // Put it back until `launched` confirms (the engine may not launch it).
                self.queue.push(p);
                Next::Expand(Proposal::child(Some(p)))
            }
            None => Next::Wait,
        }
    }
    fn launched(&mut self, id: NodeId, _p: &Proposal) {
        if self.root.launched(id) {
            return;
        }
        self.queue.pop();
        self.children.push(id);
    }
    fn finished(&mut self, g: &Graph, id: NodeId) {
        if self.root.finished(id) {
            self.start_level(vec![id]);
            return;
        }
        if !self.children.contains(&id) {
            return;
        }
        self.finished += 1;
        if self.queue.is_empty() && self.finished as usize == self.children.len() {
            let mut level = self.children.clone();
            rank(g, &mut level);
            level.truncate(self.width as usize);
            self.start_level(level);
        }
    }
}
