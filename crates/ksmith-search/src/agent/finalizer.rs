//! The real [`Finalizer`] of a graph search: the finalists' code is judged again by a judge on
//! fresh seeds, all of them timed side by side in the same rounds, and the winner is the one
//! fastest against the engine's own best in those rounds (a failed re-check cannot win).

use super::expander::{AgentExpander, JudgeFactory};
use crate::finalize::{choose_winner, recheck, Recheck};
use crate::{Evaluator, ExpandError, Finalizer, Node, NodeId};
use anyhow::anyhow;
use ksmith_store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// Re-validates and re-times a search's finalists together.
pub struct AgentFinalizer {
    /// Builds candidates from node code the way the expander did.
    pub expander: Arc<AgentExpander>,
    /// A judge on fresh seeds (not the seeds the search was judged on).
    pub fresh_judge: JudgeFactory,
    /// The store holding the finalists' code.
    pub store_dir: PathBuf,
}

impl Finalizer for AgentFinalizer {
    fn decide(&self, finalists: &[Node]) -> Result<Option<NodeId>, ExpandError> {
        let failed = |e: anyhow::Error| ExpandError::Failed(e);
        let mut store = Store::open(&self.store_dir).map_err(|e| failed(e.into()))?;
        let mut kept = Vec::new();
        let mut sols = Vec::new();
        for n in finalists.iter().filter(|n| n.outcome.passed()) {
            let Some(hash) = &n.code_hash else { continue };
            let bytes = store.artifact(hash).map_err(|e| failed(e.into()))?;
            let source = String::from_utf8(bytes)
                .map_err(|_| failed(anyhow!("node {}: stored code is not UTF-8", n.id)))?;
            sols.push(self.expander.candidate(n.id, source));
            kept.push(n.id);
        }
        match kept.len() {
            0 => return Ok(None),
            1 => {
                // Alone: its fresh-seed check still has to pass.
                let mut judge = (self.fresh_judge)().map_err(failed)?;
                let r = recheck(
                    &mut Evaluator::new(&mut judge, &mut store),
                    self.expander.task(),
                    &sols,
                    Recheck::TimedTogether,
                )
                .map_err(|e| failed(e.into()))?;
                return Ok(r.passed(0, Recheck::TimedTogether).then_some(kept[0]));
            }
            _ => {}
        }
        let mut judge = (self.fresh_judge)().map_err(failed)?;
        let r = recheck(
            &mut Evaluator::new(&mut judge, &mut store),
            self.expander.task(),
            &sols,
            Recheck::TimedTogether,
        )
        .map_err(|e| failed(e.into()))?;
        // The engine's best (the first finalist) is the reference every other is scored against.
        Ok(choose_winner(&r, Recheck::TimedTogether, 0, |_| true).map(|i| kept[i]))
    }
}
