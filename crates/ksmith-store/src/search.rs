//! Graph-search runs: every node as it ends (its JSON, with the columns reports sort by), the
//! whole search state after every node (one transaction with the node, so a killed search
//! resumes from a consistent state), and the index that keeps the same program (same bytes,
//! flags and entry point: the judge's evaluation key) from being judged twice on one machine.

use crate::{Store, StoreError};
use rusqlite::{params, OptionalExtension};

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS search_nodes (
    run         TEXT NOT NULL REFERENCES runs(id),
    id          INTEGER NOT NULL,
    parent      INTEGER,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    state       TEXT NOT NULL,
    speedup     REAL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (run, id)
);
CREATE TABLE IF NOT EXISTS search_state (
    run         TEXT PRIMARY KEY REFERENCES runs(id),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    payload     TEXT NOT NULL
);
-- The index of earlier versions was keyed by normalized code, which is not what the compiler
-- sees (a `// ... \` comment continues onto the next line): its verdicts are not reused.
DROP TABLE IF EXISTS search_dedup;
CREATE TABLE IF NOT EXISTS search_reuse (
    fingerprint TEXT NOT NULL,
    task_hash   TEXT NOT NULL,
    eval_key    TEXT NOT NULL,
    run         TEXT NOT NULL,
    node        INTEGER NOT NULL,
    eval_id     INTEGER REFERENCES evaluations(id),
    PRIMARY KEY (fingerprint, task_hash, eval_key)
);
"#;

/// One stored node: the engine's JSON plus the columns listings sort and filter by.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    /// Node id within the run.
    pub id: u64,
    /// Parent node id.
    pub parent: Option<u64>,
    /// Node state's stored spelling.
    pub state: String,
    /// Speedup when passed and timed.
    pub speedup: Option<f64>,
    /// The node as JSON (the engine's type).
    pub payload: String,
    /// When it was stored (filled on read).
    pub created_at: String,
}

/// An earlier candidate with the same code (evaluation key), task and machine.
#[derive(Debug, Clone, PartialEq)]
pub struct DedupHit {
    /// The run it was seen in.
    pub run: String,
    /// Its node there.
    pub node: u64,
    /// Its evaluation, when it was judged.
    pub eval_id: Option<i64>,
}

impl Store {
    /// Stores finished nodes and the search state after them, in one transaction.
    pub fn record_search_step(
        &mut self,
        run: &str,
        nodes: &[NodeRecord],
        state: &str,
    ) -> Result<(), StoreError> {
        let path = self.db_path.clone();
        let sql = |e| StoreError::Sql {
            path: path.clone(),
            source: e,
        };
        let tx = self.conn.transaction().map_err(sql)?;
        for n in nodes {
            tx.execute(
                "INSERT OR REPLACE INTO search_nodes (run, id, parent, state, speedup, payload)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run,
                    n.id as i64,
                    n.parent.map(|p| p as i64),
                    n.state,
                    n.speedup,
                    n.payload
                ],
            )
            .map_err(sql)?;
        }
        tx.execute(
            "INSERT INTO search_state (run, payload) VALUES (?1, ?2)
             ON CONFLICT(run) DO UPDATE SET payload = excluded.payload,
                updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            params![run, state],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// A run's nodes by id.
    pub fn search_nodes(&self, run: &str) -> Result<Vec<NodeRecord>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, parent, state, speedup, payload, created_at
                 FROM search_nodes WHERE run = ?1 ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map(params![run], |r| {
                Ok(NodeRecord {
                    id: r.get::<_, i64>(0)? as u64,
                    parent: r.get::<_, Option<i64>>(1)?.map(|p| p as u64),
                    state: r.get(2)?,
                    speedup: r.get(3)?,
                    payload: r.get(4)?,
                    created_at: r.get(5)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    /// A run's last persisted search state.
    pub fn search_state(&self, run: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT payload FROM search_state WHERE run = ?1",
                params![run],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// The earlier candidate with this evaluation key (the judge's key of the exact code) for
    /// this task on this machine.
    pub fn dedup_lookup(
        &self,
        fingerprint: &str,
        task_hash: &str,
        eval_key: &str,
    ) -> Result<Option<DedupHit>, StoreError> {
        self.conn
            .query_row(
                "SELECT run, node, eval_id FROM search_reuse
                 WHERE fingerprint = ?1 AND task_hash = ?2 AND eval_key = ?3",
                params![fingerprint, task_hash, eval_key],
                |r| {
                    Ok(DedupHit {
                        run: r.get(0)?,
                        node: r.get::<_, i64>(1)? as u64,
                        eval_id: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// Records where a code (its evaluation key) was first judged (the first record wins).
    pub fn dedup_insert(
        &self,
        fingerprint: &str,
        task_hash: &str,
        eval_key: &str,
        hit: &DedupHit,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO search_reuse (fingerprint, task_hash, eval_key, run, node, eval_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![fingerprint, task_hash, eval_key, hit.run, hit.node as i64, hit.eval_id],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }
}
