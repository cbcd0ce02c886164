//! A MAP-Elites archive: one elite (the fastest correct program) per cell of the feature
//! grid ([`Features`]). Kept as a sorted list so it serializes plainly and iterates in a
//! reproducible order.

use crate::features::Features;
use crate::node::NodeId;
use serde::{Deserialize, Serialize};

/// One cell's elite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elite {
    /// The cell.
    pub cell: Features,
    /// The node holding it.
    pub node: NodeId,
    /// Its speedup.
    pub speedup: f64,
}

/// The archive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Archive {
    /// Elites sorted by cell.
    pub elites: Vec<Elite>,
}

impl Archive {
    /// Offers a correct program; true when it became its cell's elite.
    pub fn offer(&mut self, cell: Features, node: NodeId, speedup: f64) -> bool {
        match self.elites.binary_search_by(|e| e.cell.cmp(&cell)) {
            Ok(i) => {
                let e = &mut self.elites[i];
                if speedup > e.speedup || (speedup == e.speedup && node < e.node) {
                    e.node = node;
                    e.speedup = speedup;
                    true
                } else {
                    false
                }
            }
            Err(i) => {
                self.elites.insert(
                    i,
                    Elite {
                        cell,
                        node,
                        speedup,
                    },
                );
                true
            }
        }
    }

    /// Cells filled.
    pub fn len(&self) -> usize {
        self.elites.len()
    }

    /// No elite yet.
    pub fn is_empty(&self) -> bool {
        self.elites.is_empty()
    }

    /// The fastest elite.
    pub fn best(&self) -> Option<&Elite> {
        self.elites
            .iter()
            .fold(None, |b: Option<&Elite>, e| match b {
                Some(b) if b.speedup >= e.speedup => Some(b),
                _ => Some(e),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_elite_per_cell() {
        let mut a = Archive::default();
        let c1 = Features::default();
        let c2 = Features { threads: 1, ..c1 };
        assert!(a.offer(c1, NodeId(1), 1.0));
        assert!(!a.offer(c1, NodeId(2), 0.5));
        assert!(a.offer(c1, NodeId(3), 2.0));
        assert!(a.offer(c2, NodeId(4), 1.5));
        assert_eq!(a.len(), 2);
        assert_eq!(a.best().map(|e| e.node), Some(NodeId(3)));
    }
}
