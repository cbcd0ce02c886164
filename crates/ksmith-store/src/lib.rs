//! The store: every evaluation in SQLite (WAL mode, one transaction per evaluation, so killing
//! ksmith loses at most the evaluation in flight), artifacts content-addressed on disk, bench
//! runs for resuming, and export in the FlashInfer Trace schema.

mod lock;
mod memory;
mod query;
mod runs;
mod search;
mod trace;

pub use lock::{RunHolder, RunLock};
pub use memory::MemoryRow;
pub use query::{BenchItemRow, BenchRunRow, BenchRunSummary, EvalFilter, Owner};
pub use runs::{CallRow, RunRow, RunStatus, SnapshotRow};
pub use search::{DedupHit, NodeRecord};

pub use trace::{export_flashinfer, ExportSummary};

use ksmith_judge::{EvalResult, Reason};
use ksmith_task::{Solution, Task};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("store database {path}: {source}")]
    Sql {
        /// Database path.
        path: PathBuf,
        /// Underlying error.
        source: rusqlite::Error,
    },
    /// File I/O failed.
    #[error("store {path}: {source}")]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The store cannot be written (directory or database not writable by this user).
    #[error("read-only store: {}", root.display())]
    ReadOnly {
        /// Store root.
        root: PathBuf,
    },
    /// Another live process drives this agent run.
    #[error("run {run} is in use by {}; wait for it to end or stop it first", match pid { Some(p) => format!("ksmith process {p}"), None => "another ksmith process".to_string() })]
    RunBusy {
        /// Run id.
        run: String,
        /// The holder's pid, when known.
        pid: Option<u32>,
    },
    /// A stored result could not be decoded.
    #[error("evaluation {id}: stored result is unreadable: {message}")]
    Corrupt {
        /// Evaluation id.
        id: i64,
        /// Decoder message.
        message: String,
    },
}

/// An evaluation read back from the store.
#[derive(Debug, Clone)]
pub struct StoredEval {
    /// Row id (`ksmith show ID`).
    pub id: i64,
    /// ISO 8601 UTC time of recording.
    pub created_at: String,
    /// The result.
    pub result: EvalResult,
    /// The task definition as evaluated (JSON).
    pub task: serde_json::Value,
    /// The solution as evaluated (JSON, without sources).
    pub solution: serde_json::Value,
    /// Source files: (name, artifact hash).
    pub sources: Vec<(String, String)>,
}

/// What a bench run recorded for one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchItem {
    /// Evaluated; the evaluation id.
    Evaluated(i64),
    /// Could not be evaluated for a reason that is not the candidate's (task error).
    Failed(String),
}

/// Handle on the project-local store (default `.ksmith/`).
pub struct Store {
    conn: Connection,
    root: PathBuf,
    db_path: PathBuf,
    /// Opened by [`Store::open_read`] on a store this user cannot write.
    read_only: bool,
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS evaluations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    eval_key        TEXT NOT NULL,
    task            TEXT NOT NULL,
    task_hash       TEXT NOT NULL,
    solution        TEXT NOT NULL,
    solution_hash   TEXT NOT NULL,
    status          TEXT NOT NULL,
    reason          TEXT,
    speedup         REAL,
    env_fingerprint TEXT NOT NULL,
    result_json     TEXT NOT NULL,
    task_json       TEXT NOT NULL,
    solution_json   TEXT NOT NULL,
    log_artifact    TEXT,
    build_artifact  TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_key ON evaluations(eval_key);
CREATE TABLE IF NOT EXISTS eval_sources (
    eval_id  INTEGER NOT NULL REFERENCES evaluations(id),
    name     TEXT NOT NULL,
    artifact TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bench_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    run_key     TEXT NOT NULL,
    suite       TEXT NOT NULL,
    finished    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS bench_items (
    run_id   INTEGER NOT NULL REFERENCES bench_runs(id),
    item     TEXT NOT NULL,
    eval_id  INTEGER REFERENCES evaluations(id),
    error    TEXT,
    PRIMARY KEY (run_id, item)
);
PRAGMA user_version = 1;
"#;

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl Store {
    /// Opens (creating if needed) the store rooted at `root`.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(root.join("artifacts")).map_err(|e| StoreError::Io {
            path: root.to_path_buf(),
            source: e,
        })?;
        let db_path = root.join("ksmith.db");
        let sql = |e| StoreError::Sql {
            path: db_path.clone(),
            source: e,
        };
        // Several ksmith processes may open a new store at once; switching to WAL can then
        // report SQLITE_BUSY despite the busy timeout, so retry briefly.
        let mut attempt = 0;
        loop {
            match Self::connect(&db_path) {
                Ok(conn) => {
                    return Ok(Store {
                        conn,
                        root: root.to_path_buf(),
                        db_path,
                        read_only: false,
                    })
                }
                Err(e) if attempt < 20 && is_busy(&e) => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50 * attempt));
                }
                Err(e) => return Err(sql(e)),
            }
        }
    }

    /// Whether this user can write the store at `root` (an absent store counts as writable
    /// when it can be created).
    pub fn is_writable(root: &Path) -> bool {
        use nix::unistd::{access, AccessFlags};
        let w = |p: &Path| access(p, AccessFlags::W_OK).is_ok();
        if !root.exists() {
            // The nearest existing ancestor decides whether it can be created.
            return root.ancestors().skip(1).find(|a| a.exists()).is_some_and(w);
        }
        let db = root.join("ksmith.db");
        w(root) && (!db.exists() || w(&db))
    }

    /// Opens the store for reading: as [`Store::open`] when this user can write it, else
    /// read-only (SQLite read-only, without creating anything), so that `show`, `runs`, `calls`
    /// and `export` work on a store shared read-only. Writes then fail with
    /// [`StoreError::ReadOnly`] or SQLite's read-only error.
    pub fn open_read(root: &Path) -> Result<Store, StoreError> {
        if Store::is_writable(root) {
            return Store::open(root);
        }
        let db_path = root.join("ksmith.db");
        let sql = |e| StoreError::Sql {
            path: db_path.clone(),
            source: e,
        };
        let conn = if db_path.exists() {
            Self::connect_read_only(&db_path).map_err(sql)?
        } else {
            // Nothing recorded yet: an empty store, in memory.
            let conn = Connection::open_in_memory().map_err(sql)?;
            conn.execute_batch(SCHEMA).map_err(sql)?;
            conn.execute_batch(runs::SCHEMA).map_err(sql)?;
            runs::migrate(&conn).map_err(sql)?;
            conn.execute_batch(search::SCHEMA).map_err(sql)?;
            conn.execute_batch(memory::SCHEMA).map_err(sql)?;
            conn
        };
        Ok(Store {
            conn,
            root: root.to_path_buf(),
            db_path,
            read_only: true,
        })
    }

    fn connect_read_only(db_path: &Path) -> Result<Connection, rusqlite::Error> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        // A WAL database needs its -shm file, which SQLite cannot create in a directory it
        // cannot write; then read it as immutable (nobody can be writing it either).
        let plain = Connection::open_with_flags(db_path, flags).and_then(|c| {
            c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(c)
        });
        match plain {
            Ok(c) => Ok(c),
            Err(_) => {
                let uri = format!(
                    "file:{}?immutable=1",
                    db_path
                        .display()
                        .to_string()
                        .replace('%', "%25")
                        .replace('?', "%3f")
                        .replace('#', "%23")
                );
                let c = Connection::open_with_flags(uri, flags)?;
                c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
                    r.get::<_, i64>(0)
                })?;
                Ok(c)
            }
        }
    }

    /// True when opened read-only ([`Store::open_read`] on a store this user cannot write).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn connect(db_path: &Path) -> Result<Connection, rusqlite::Error> {
        let conn = Connection::open(db_path)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        // WAL + NORMAL: a killed process never loses a committed transaction nor corrupts the file.
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.pragma_update(None, "journal_mode", "WAL")?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(runs::SCHEMA)?;
        runs::migrate(&conn)?;
        conn.execute_batch(search::SCHEMA)?;
        conn.execute_batch(memory::SCHEMA)?;
        Ok(conn)
    }

    fn sql(&self, e: rusqlite::Error) -> StoreError {
        StoreError::Sql {
            path: self.db_path.clone(),
            source: e,
        }
    }

    /// Root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn artifact_path(&self, hash: &str) -> PathBuf {
        self.root
            .join("artifacts")
            .join(&hash[..2])
            .join(&hash[2..])
    }

    /// Stores bytes content-addressed; returns the blake3 hex hash.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let hash = ksmith_task::content_hash(bytes);
        let path = self.artifact_path(&hash);
        if path.exists() {
            return Ok(hash);
        }
        if self.read_only {
            return Err(StoreError::ReadOnly {
                root: self.root.clone(),
            });
        }
        let io = |e| StoreError::Io {
            path: path.clone(),
            source: e,
        };
        let dir = path.parent().expect("artifact path has a parent");
        std::fs::create_dir_all(dir).map_err(io)?;
        // Write-then-rename: a reader never sees a partial artifact.
        let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), &hash[..8]));
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        Ok(hash)
    }

    /// Reads an artifact back.
    pub fn artifact(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.artifact_path(hash);
        std::fs::read(&path).map_err(|e| StoreError::Io { path, source: e })
    }

    /// Records one evaluation (artifacts first, then one transaction); returns its id.
    pub fn record(
        &mut self,
        key: &str,
        task: &Task,
        solution: &Solution,
        result: &EvalResult,
    ) -> Result<i64, StoreError> {
        let sources: Vec<(String, String)> = solution
            .sources
            .iter()
            .map(|(n, s)| Ok((n.clone(), self.put_artifact(s.as_bytes())?)))
            .collect::<Result<_, StoreError>>()?;
        let log = (!result.log.is_empty())
            .then(|| self.put_artifact(result.log.as_bytes()))
            .transpose()?;
        let build = result
            .build
            .as_ref()
            .filter(|b| !b.log.is_empty())
            .map(|b| self.put_artifact(b.log.as_bytes()))
            .transpose()?;
        let mut sol = serde_json::to_value(solution).unwrap_or_default();
        if let Some(o) = sol.as_object_mut() {
            o.remove("sources");
        }
        let result_json = serde_json::to_string(result).unwrap_or_default();
        let task_json = serde_json::to_string(task).unwrap_or_default();
        let speedup = result.performance.as_ref().map(|p| p.speedup);
        let tx = self.conn.transaction().map_err(|e| StoreError::Sql {
            path: self.db_path.clone(),
            source: e,
        })?;
        tx.execute(
            "INSERT INTO evaluations (eval_key, task, task_hash, solution, solution_hash, status, reason, speedup, env_fingerprint,
                                      result_json, task_json, solution_json, log_artifact, build_artifact)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                key,
                result.task,
                result.task_hash,
                result.solution,
                result.solution_hash,
                result.status.as_str(),
                result.reason.as_ref().map(Reason::name),
                speedup,
                result.environment.fingerprint,
                result_json,
                task_json,
                sol.to_string(),
                log,
                build
            ],
        )
        .map_err(|e| StoreError::Sql { path: self.db_path.clone(), source: e })?;
        let id = tx.last_insert_rowid();
        for (name, art) in &sources {
            tx.execute(
                "INSERT INTO eval_sources (eval_id, name, artifact) VALUES (?1, ?2, ?3)",
                params![id, name, art],
            )
            .map_err(|e| StoreError::Sql {
                path: self.db_path.clone(),
                source: e,
            })?;
        }
        tx.commit().map_err(|e| StoreError::Sql {
            path: self.db_path.clone(),
            source: e,
        })?;
        Ok(id)
    }

    /// One evaluation by id.
    pub fn get(&self, id: i64) -> Result<Option<StoredEval>, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT id, created_at, result_json, task_json, solution_json FROM evaluations WHERE id = ?1",
                params![id],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?, r.get::<_, String>(4)?)),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((id, created_at, result, task, solution)) = row else {
            return Ok(None);
        };
        let corrupt = |m: String| StoreError::Corrupt { id, message: m };
        let result: EvalResult =
            serde_json::from_str(&result).map_err(|e| corrupt(e.to_string()))?;
        let mut stmt = self
            .conn
            .prepare("SELECT name, artifact FROM eval_sources WHERE eval_id = ?1")
            .map_err(|e| self.sql(e))?;
        let sources = stmt
            .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(Some(StoredEval {
            id,
            created_at,
            result,
            task: serde_json::from_str(&task).map_err(|e| corrupt(e.to_string()))?,
            solution: serde_json::from_str(&solution).map_err(|e| corrupt(e.to_string()))?,
            sources,
        }))
    }

    /// The newest evaluation recorded under `key` (same task, code, machine and judge settings).
    pub fn find(&self, key: &str) -> Result<Option<StoredEval>, StoreError> {
        let id: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM evaluations WHERE eval_key = ?1 ORDER BY id DESC LIMIT 1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        match id {
            Some(id) => self.get(id),
            None => Ok(None),
        }
    }

    /// Ids of the PASSED evaluations of `task` whose task hash is one of `task_hashes` (the
    /// task as it is now, one hash per workload set), optionally on one environment
    /// fingerprint, oldest first.
    pub fn passed(
        &self,
        task: &str,
        task_hashes: &[String],
        fingerprint: Option<&str>,
    ) -> Result<Vec<i64>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, task_hash FROM evaluations
                 WHERE task = ?1 AND status = 'PASSED' AND (?2 IS NULL OR env_fingerprint = ?2)
                 ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![task, fingerprint], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .filter(|(_, h)| task_hashes.contains(h))
            .map(|(id, _)| id)
            .collect())
    }

    /// How many PASSED evaluations `task` has, of any version of the task and on any machine.
    pub fn passed_count(&self, task: &str) -> Result<usize, StoreError> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM evaluations WHERE task = ?1 AND status = 'PASSED'",
                params![task],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(|e| self.sql(e))
    }

    /// Ids of all evaluations, oldest first.
    pub fn ids(&self) -> Result<Vec<i64>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM evaluations ORDER BY id")
            .map_err(|e| self.sql(e))?;
        let ids = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect::<Result<Vec<i64>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(ids)
    }

    /// Finds or creates the unfinished bench run with this key; returns (id, resumed).
    pub fn bench_run(
        &self,
        run_key: &str,
        suite: &str,
        fresh: bool,
    ) -> Result<(i64, bool), StoreError> {
        if !fresh {
            let existing: Option<i64> = self
                .conn
                .query_row("SELECT id FROM bench_runs WHERE run_key = ?1 AND finished = 0 ORDER BY id DESC LIMIT 1", params![run_key], |r| r.get(0))
                .optional()
                .map_err(|e| self.sql(e))?;
            if let Some(id) = existing {
                return Ok((id, true));
            }
        }
        self.conn
            .execute(
                "INSERT INTO bench_runs (run_key, suite) VALUES (?1, ?2)",
                params![run_key, suite],
            )
            .map_err(|e| self.sql(e))?;
        Ok((self.conn.last_insert_rowid(), false))
    }

    /// The outcome already recorded for `item` in a bench run, if any.
    pub fn bench_item(&self, run: i64, item: &str) -> Result<Option<BenchItem>, StoreError> {
        let row: Option<(Option<i64>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT eval_id, error FROM bench_items WHERE run_id = ?1 AND item = ?2",
                params![run, item],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(row.map(|(id, err)| match id {
            Some(id) => BenchItem::Evaluated(id),
            None => BenchItem::Failed(err.unwrap_or_default()),
        }))
    }

    /// Records the outcome of one bench item (an evaluation id, or an error that is not the candidate's).
    pub fn set_bench_item(
        &self,
        run: i64,
        item: &str,
        eval_id: Option<i64>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute("INSERT OR REPLACE INTO bench_items (run_id, item, eval_id, error) VALUES (?1, ?2, ?3, ?4)", params![run, item, eval_id, error])
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Marks a bench run finished (a later `bench` starts a new one).
    pub fn finish_bench(&self, run: i64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE bench_runs SET finished = 1 WHERE id = ?1",
                params![run],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }
}
