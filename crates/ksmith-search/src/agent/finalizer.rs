//! The real [`Finalizer`] of a graph search: the finalists' code is judged again by a judge on
//! fresh seeds and on held-out shapes, all of them timed side by side in the same rounds, and
//! the winner chosen by the one decision rule against the first finalist (the start, when it
//! passed): the same final judgement as the serial loop's ([`crate::finalize::judge_finalists`]).

use super::expander::{AgentExpander, JudgeFactory};
use crate::finalize::{judge_finalists, FinalRecord};
use crate::{ExpandError, Finalizer, Node};
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
    /// Seed of the held-out shapes (from the run's id: the same on a resume).
    pub held_out_seed: u64,
}

impl Finalizer for AgentFinalizer {
    fn decide(&self, finalists: &[Node]) -> Result<FinalRecord, ExpandError> {
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
        if kept.is_empty() {
            return Ok(FinalRecord {
                summary: "no finalist passed".into(),
                ..FinalRecord::default()
            });
        }
        let mut judge = (self.fresh_judge)().map_err(failed)?;
        // The first finalist (the start, when it passed) is the incumbent.
        let judged = judge_finalists(
            &mut judge,
            &mut store,
            self.expander.task(),
            &sols,
            0,
            Some(self.held_out_seed),
        )
        .map_err(|e| failed(e.into()))?;
        let ids: Vec<u64> = kept.iter().map(|n| n.0).collect();
        let start = finalists
            .first()
            .filter(|n| n.parent.is_none())
            .map(|n| n.id);
        Ok(judged.record(&ids, |i| {
            if Some(kept[i]) == start {
                "the start".to_string()
            } else {
                format!("node {}", kept[i])
            }
        }))
    }
}
