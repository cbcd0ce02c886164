//! `evolve`: islands, each with its own MAP-Elites archive over code features. A parent is
//! the island's best elite with probability `elite_prob`, else a uniformly drawn elite of the
//! island (a different region of feature space: diversity); while an island has no elite, its
//! best node by status rank (the root at first). Up to `inspirations` other elites of the
//! island are shown to the planner. Islands take turns. Every `migrate_every` finished nodes,
//! each island's best elite is offered to the next island's archive (a ring).

use super::{Next, Proposal, RootGate, Strategy};
use crate::archive::Archive;
use crate::graph::{rank, Graph};
use crate::node::NodeId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One island.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Island {
    /// Its archive.
    pub archive: Archive,
    /// Its nodes.
    pub members: Vec<NodeId>,
}

/// Evolve state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evolve {
    /// Finished nodes between migrations.
    pub migrate_every: u32,
    /// Probability of the best elite as parent.
    pub elite_prob: f64,
    /// Inspirations per node.
    pub inspirations: u32,
    /// The root.
    pub root: RootGate,
    /// The islands.
    pub islands: Vec<Island>,
    /// The island whose turn it is.
    pub turn: u32,
    /// Finished since the last migration.
    pub since_migration: u32,
    /// Migrations done.
    pub migrations: u32,
    /// Elites that moved island in a migration.
    pub migrants: u32,
}

impl Evolve {
    /// A fresh strategy.
    pub fn new(islands: u32, migrate_every: u32, elite_prob: f64, inspirations: u32) -> Evolve {
        Evolve {
            migrate_every,
            elite_prob,
            inspirations,
            islands: vec![Island::default(); islands as usize],
            ..Evolve::default()
        }
    }

    fn offer(&mut self, g: &Graph, island: usize, id: NodeId) {
        let (Some(s), Some(e)) = (g.speedup(id), g.get(id)) else {
            return;
        };
        let cell = e.features.unwrap_or_default();
        if let Some(i) = self.islands.get_mut(island) {
            i.archive.offer(cell, id, s);
        }
    }

    fn migrate(&mut self) {
        let n = self.islands.len();
        if n < 2 {
            return;
        }
        let bests: Vec<_> = self
            .islands
            .iter()
            .map(|i| i.archive.best().cloned())
            .collect();
        for (i, b) in bests.into_iter().enumerate() {
            if let Some(b) = b {
                if self.islands[(i + 1) % n]
                    .archive
                    .offer(b.cell, b.node, b.speedup)
                {
                    self.migrants += 1;
                }
            }
        }
        self.migrations += 1;
    }
}

impl Strategy for Evolve {
    fn next(&mut self, g: &Graph, rng: &mut ChaCha8Rng) -> Next {
        if let Some(n) = self.root.gate() {
            return n;
        }
        let n = self.islands.len().max(1);
        let island = (self.turn as usize) % n;
        let Some(isl) = self.islands.get(island) else {
            return Next::Done;
        };
        let elites = &isl.archive.elites;
        let parent = if elites.is_empty() {
            let mut ids: Vec<NodeId> = isl
                .members
                .iter()
                .copied()
                .filter(|id| g.get(*id).is_some_and(|e| e.merged))
                .collect();
            rank(g, &mut ids);
            ids.first().copied().or(self.root.root)
        } else if rng.gen_bool(self.elite_prob) {
            isl.archive.best().map(|e| e.node)
        } else {
            Some(elites[rng.gen_range(0..elites.len())].node)
        };
        let mut others: Vec<NodeId> = elites
            .iter()
            .map(|e| e.node)
            .filter(|id| Some(*id) != parent)
            .collect();
        rank(g, &mut others);
        others.truncate(self.inspirations as usize);
        Next::Expand(Proposal {
            parent,
            inspirations: others,
            island: island as u32,
        })
    }
    fn launched(&mut self, id: NodeId, p: &Proposal) {
        if self.root.launched(id) {
            return;
        }
        if let Some(i) = self.islands.get_mut(p.island as usize) {
            i.members.push(id);
        }
        self.turn = (p.island + 1) % self.islands.len().max(1) as u32;
    }
    fn finished(&mut self, g: &Graph, id: NodeId) {
        if self.root.finished(id) {
            for i in 0..self.islands.len() {
                self.offer(g, i, id);
            }
            return;
        }
        let island = g.get(id).map_or(0, |e| e.request.island as usize);
        self.offer(g, island, id);
        self.since_migration += 1;
        if self.since_migration >= self.migrate_every {
            self.since_migration = 0;
            self.migrate();
        }
    }
}
