//! Cross-run memory: one entry per measured improvement of an earlier run (a parent → child
//! step that stayed correct and got faster), the exposures of entries to planners (which run
//! and node or iteration saw which entries) and whether that step then improved (a win).
//! Pruned entries leave a tombstone, so harvesting their run again does not bring them back.
//! The typed view and the rules (ranking, exclusion, harvest) live in `ksmith_search::memory`.

use crate::{Store, StoreError};
use rusqlite::{params, OptionalExtension};

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS memory_entries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    source_run  TEXT NOT NULL,
    source_step TEXT NOT NULL,
    task        TEXT NOT NULL,
    tests_hash  TEXT NOT NULL,
    op_class    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    device      TEXT NOT NULL,
    hint        TEXT,
    headline    TEXT NOT NULL,
    gain        REAL NOT NULL,
    gain_lo     REAL,
    gain_hi     REAL,
    excerpt     TEXT NOT NULL,
    UNIQUE (source_run, source_step)
);
CREATE TABLE IF NOT EXISTS memory_exposures (
    run         TEXT NOT NULL,
    step        TEXT NOT NULL,
    entry       INTEGER NOT NULL REFERENCES memory_entries(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    won         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run, step, entry)
);
CREATE INDEX IF NOT EXISTS memory_exposures_entry ON memory_exposures(entry);
CREATE TABLE IF NOT EXISTS memory_pruned (
    source_run  TEXT NOT NULL,
    source_step TEXT NOT NULL,
    pruned_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    PRIMARY KEY (source_run, source_step)
);
"#;

/// One memory entry as stored, with its exposure counts.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRow {
    /// Entry id (`ksmith memory show ID`); ignored on insert.
    pub id: i64,
    /// Creation time (UTC, ISO 8601); empty on insert means now.
    pub created_at: String,
    /// The run the improvement was measured in.
    pub source_run: String,
    /// Its step there (`iteration:N` or `node:N`).
    pub source_step: String,
    /// Task name.
    pub task: String,
    /// Hash of the task's frozen tests.
    pub tests_hash: String,
    /// Operator class's stored spelling.
    pub op_class: String,
    /// Environment fingerprint of the evaluation.
    pub fingerprint: String,
    /// The device in words (CPU model).
    pub device: String,
    /// The strategy hint pursued (search nodes), when there was one.
    pub hint: Option<String>,
    /// The plan's headline.
    pub headline: String,
    /// Child over parent speed ratio (> 1).
    pub gain: f64,
    /// Its 95% interval, when the two were timed together.
    pub gain_interval: Option<(f64, f64)>,
    /// A few changed lines, before → after (capped by the caller).
    pub excerpt: String,
    /// Times it was shown to a planner (filled on read).
    pub shown: u64,
    /// Times the step it was shown to then improved (filled on read).
    pub wins: u64,
}

const COLS: &str =
    "e.id, e.created_at, e.source_run, e.source_step, e.task, e.tests_hash, e.op_class,
    e.fingerprint, e.device, e.hint, e.headline, e.gain, e.gain_lo, e.gain_hi, e.excerpt,
    COALESCE(x.shown, 0), COALESCE(x.wins, 0)";

/// Entries with their exposure counts (one pass over the exposures, not one per entry).
const FROM: &str = "memory_entries e LEFT JOIN
    (SELECT entry, COUNT(*) AS shown, SUM(won) AS wins FROM memory_exposures GROUP BY entry) x
    ON x.entry = e.id";

fn memory_row(r: &rusqlite::Row) -> rusqlite::Result<MemoryRow> {
    let lo: Option<f64> = r.get(12)?;
    let hi: Option<f64> = r.get(13)?;
    Ok(MemoryRow {
        id: r.get(0)?,
        created_at: r.get(1)?,
        source_run: r.get(2)?,
        source_step: r.get(3)?,
        task: r.get(4)?,
        tests_hash: r.get(5)?,
        op_class: r.get(6)?,
        fingerprint: r.get(7)?,
        device: r.get(8)?,
        hint: r.get(9)?,
        headline: r.get(10)?,
        gain: r.get(11)?,
        gain_interval: lo.zip(hi),
        excerpt: r.get(14)?,
        shown: r.get::<_, i64>(15)? as u64,
        wins: r.get::<_, i64>(16)? as u64,
    })
}

impl Store {
    /// Whether this store's database has the memory tables (a read-only store written by an
    /// older ksmith may not: it then has no entries).
    fn has_memory(&self) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'memory_entries'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(|e| self.sql(e))
    }

    /// Adds an entry unless its (run, step) is already stored or was pruned; returns the new id.
    pub fn memory_insert(&self, row: &MemoryRow) -> Result<Option<i64>, StoreError> {
        let pruned: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM memory_pruned WHERE source_run = ?1 AND source_step = ?2",
                params![row.source_run, row.source_step],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        if pruned.is_some() {
            return Ok(None);
        }
        let n = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO memory_entries (created_at, source_run, source_step, task,
                    tests_hash, op_class, fingerprint, device, hint, headline, gain, gain_lo,
                    gain_hi, excerpt)
                 VALUES (COALESCE(NULLIF(?1, ''), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
                    ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    row.created_at,
                    row.source_run,
                    row.source_step,
                    row.task,
                    row.tests_hash,
                    row.op_class,
                    row.fingerprint,
                    row.device,
                    row.hint,
                    row.headline,
                    row.gain,
                    row.gain_interval.map(|i| i.0),
                    row.gain_interval.map(|i| i.1),
                    row.excerpt
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok((n > 0).then(|| self.conn.last_insert_rowid()))
    }

    /// Every entry, oldest first.
    pub fn memory_entries(&self) -> Result<Vec<MemoryRow>, StoreError> {
        if !self.has_memory()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(&format!("SELECT {COLS} FROM {FROM} ORDER BY e.id"))
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map([], memory_row)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// One entry by id.
    pub fn memory_entry(&self, id: i64) -> Result<Option<MemoryRow>, StoreError> {
        if !self.has_memory()? {
            return Ok(None);
        }
        self.conn
            .query_row(
                &format!("SELECT {COLS} FROM {FROM} WHERE e.id = ?1"),
                params![id],
                memory_row,
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// Ids of the entries created more than `days` days ago.
    pub fn memory_older_than(&self, days: f64) -> Result<Vec<i64>, StoreError> {
        if !self.has_memory()? {
            return Ok(Vec::new());
        }
        let mut st = self
            .conn
            .prepare(
                "SELECT id FROM memory_entries
                 WHERE julianday(created_at) < julianday('now') - ?1 ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let ids = st
            .query_map(params![days], |r| r.get(0))
            .and_then(|rows| rows.collect::<Result<Vec<i64>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(ids)
    }

    /// Records that `entries` were shown to the planner of `run`'s `step` (once per triple).
    pub fn memory_record_exposure(
        &mut self,
        run: &str,
        step: &str,
        entries: &[i64],
    ) -> Result<(), StoreError> {
        let path = self.db_path.clone();
        let sql = |e| StoreError::Sql {
            path: path.clone(),
            source: e,
        };
        let tx = self.conn.transaction().map_err(sql)?;
        for id in entries {
            tx.execute(
                "INSERT OR IGNORE INTO memory_exposures (run, step, entry) VALUES (?1, ?2, ?3)",
                params![run, step, id],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)
    }

    /// Marks the exposures of `run`'s `step` as won (that step improved); returns how many.
    pub fn memory_mark_won(&self, run: &str, step: &str) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "UPDATE memory_exposures SET won = 1 WHERE run = ?1 AND step = ?2 AND won = 0",
                params![run, step],
            )
            .map_err(|e| self.sql(e))
    }

    /// Deletes entries (and their exposures), leaving tombstones; returns how many went.
    pub fn memory_delete(&mut self, ids: &[i64]) -> Result<usize, StoreError> {
        let path = self.db_path.clone();
        let sql = |e| StoreError::Sql {
            path: path.clone(),
            source: e,
        };
        let tx = self.conn.transaction().map_err(sql)?;
        let mut n = 0;
        for id in ids {
            tx.execute(
                "INSERT OR IGNORE INTO memory_pruned (source_run, source_step)
                 SELECT source_run, source_step FROM memory_entries WHERE id = ?1",
                params![id],
            )
            .map_err(sql)?;
            tx.execute("DELETE FROM memory_exposures WHERE entry = ?1", params![id])
                .map_err(sql)?;
            n += tx
                .execute("DELETE FROM memory_entries WHERE id = ?1", params![id])
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(run: &str, step: &str) -> MemoryRow {
        MemoryRow {
            id: 0,
            created_at: String::new(),
            source_run: run.into(),
            source_step: step.into(),
            task: "softmax".into(),
            tests_hash: "h1".into(),
            op_class: "normalization".into(),
            fingerprint: "fp".into(),
            device: "cpu".into(),
            hint: Some("vectorize".into()),
            headline: "vectorize rows".into(),
            gain: 1.5,
            gain_interval: Some((1.4, 1.6)),
            excerpt: "- a\n+ b".into(),
            shown: 0,
            wins: 0,
        }
    }

    #[test]
    fn insert_is_idempotent_and_prune_leaves_a_tombstone() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let id = store.memory_insert(&row("r1", "iteration:2")).unwrap();
        assert!(id.is_some());
        assert_eq!(
            store.memory_insert(&row("r1", "iteration:2")).unwrap(),
            None
        );
        let back = store.memory_entry(id.unwrap()).unwrap().unwrap();
        assert_eq!(back.gain_interval, Some((1.4, 1.6)));
        assert_eq!(back.hint.as_deref(), Some("vectorize"));
        store
            .memory_record_exposure("r2", "node:3", &[id.unwrap()])
            .unwrap();
        store
            .memory_record_exposure("r2", "node:3", &[id.unwrap()])
            .unwrap();
        store
            .memory_record_exposure("r2", "node:4", &[id.unwrap()])
            .unwrap();
        assert_eq!(store.memory_mark_won("r2", "node:3").unwrap(), 1);
        let back = store.memory_entry(id.unwrap()).unwrap().unwrap();
        assert_eq!((back.shown, back.wins), (2, 1));
        assert_eq!(store.memory_delete(&[id.unwrap()]).unwrap(), 1);
        assert!(store.memory_entries().unwrap().is_empty());
        assert_eq!(
            store.memory_insert(&row("r1", "iteration:2")).unwrap(),
            None,
            "a pruned entry is not harvested again"
        );
    }

    #[test]
    fn older_than_reads_the_creation_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut old = row("r1", "iteration:1");
        old.created_at = "2020-01-01T00:00:00Z".into();
        let old = store.memory_insert(&old).unwrap().unwrap();
        store.memory_insert(&row("r1", "iteration:2")).unwrap();
        assert_eq!(store.memory_older_than(30.0).unwrap(), vec![old]);
    }
}
