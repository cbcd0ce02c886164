//! Where the whole search state goes after every finished node: the [`Persist`] trait, the
//! store's implementation (node JSON and state JSON in one transaction) and an in-memory one
//! for tests (it can simulate a crash).

use crate::engine::SearchState;
use crate::node::Node;
use ksmith_store::NodeRecord;
use ksmith_store::Store;

/// Why a state could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The store refused the write.
    #[error("saving the search state: {0}")]
    Store(#[from] ksmith_store::StoreError),
    /// The state did not serialize.
    #[error("serializing the search state: {0}")]
    Json(#[from] serde_json::Error),
    /// A simulated crash (tests).
    #[error("simulated crash after {0} saves")]
    Crash(usize),
}

/// Receives the changed nodes and the whole state, after every finished node.
pub trait Persist {
    /// Saves `nodes` (changed since the last save) and `state`, atomically.
    fn save(&mut self, nodes: &[Node], state: &SearchState) -> Result<(), PersistError>;
}

/// Saves nothing.
pub struct NoPersist;

impl Persist for NoPersist {
    fn save(&mut self, _nodes: &[Node], _state: &SearchState) -> Result<(), PersistError> {
        Ok(())
    }
}

/// Keeps every saved state as JSON; with `crash_after`, fails the save after that many.
#[derive(Debug, Default)]
pub struct MemoryPersist {
    /// Saved states, oldest first.
    pub states: Vec<String>,
    /// Fail once this many saves have succeeded.
    pub crash_after: Option<usize>,
}

impl Persist for MemoryPersist {
    fn save(&mut self, _nodes: &[Node], state: &SearchState) -> Result<(), PersistError> {
        if self.crash_after.is_some_and(|n| self.states.len() >= n) {
            return Err(PersistError::Crash(self.states.len()));
        }
        self.states.push(serde_json::to_string(state)?);
        Ok(())
    }
}

/// Writes into a store's search tables for one run.
pub struct StorePersist<'a> {
    /// The store.
    pub store: &'a mut Store,
    /// The run id.
    pub run: String,
}

/// A node as the store keeps it.
pub fn node_record(n: &Node) -> Result<NodeRecord, serde_json::Error> {
    Ok(NodeRecord {
        id: n.id.0,
        parent: n.parent.map(|p| p.0),
        state: n.state.as_str().to_string(),
        speedup: n.outcome.speedup.filter(|_| n.outcome.passed()),
        payload: serde_json::to_string(n)?,
        created_at: String::new(),
    })
}

impl Persist for StorePersist<'_> {
    fn save(&mut self, nodes: &[Node], state: &SearchState) -> Result<(), PersistError> {
        let records = nodes
            .iter()
            .map(node_record)
            .collect::<Result<Vec<_>, _>>()?;
        let json = serde_json::to_string(state)?;
        self.store.record_search_step(&self.run, &records, &json)?;
        Ok(())
    }
}
