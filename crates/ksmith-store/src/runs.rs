//! Agent runs: the run itself, every LLM call, every decision (the journal a resumed run replays)
//! and one snapshot per iteration.

use crate::{Store, StoreError};
use rusqlite::{params, OptionalExtension};

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    task_dir    TEXT NOT NULL,
    task        TEXT NOT NULL,
    tests_hash  TEXT NOT NULL,
    model       TEXT NOT NULL,
    mode        TEXT NOT NULL,
    options     TEXT NOT NULL,
    status      TEXT NOT NULL,
    stop_reason TEXT,
    active_s    REAL NOT NULL DEFAULT 0,
    out_dir     TEXT
);
CREATE TABLE IF NOT EXISTS llm_calls (
    run         TEXT NOT NULL REFERENCES runs(id),
    seq         INTEGER NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    role        TEXT NOT NULL,
    step        TEXT NOT NULL,
    model       TEXT NOT NULL,
    system      TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    reply       TEXT NOT NULL,
    error       TEXT,
    tokens_in   INTEGER NOT NULL,
    tokens_out  INTEGER NOT NULL,
    estimated   INTEGER NOT NULL,
    cost        REAL NOT NULL,
    latency_ms  REAL NOT NULL,
    attempts    INTEGER NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS run_events (
    run         TEXT NOT NULL REFERENCES runs(id),
    seq         INTEGER NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS snapshots (
    run         TEXT NOT NULL REFERENCES runs(id),
    iteration   INTEGER NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    eval_id     INTEGER REFERENCES evaluations(id),
    status      TEXT NOT NULL,
    latency_ms  REAL,
    speedup     REAL,
    sources     TEXT NOT NULL,
    summary     TEXT NOT NULL,
    PRIMARY KEY (run, iteration)
);
"#;

/// Adds what later versions need to tables an older ksmith created: the per-node journal
/// columns of `llm_calls` (a search node's calls are replayed by (run, node, index in node),
/// since nodes run in parallel and their global order is not reproducible).
pub(crate) fn migrate(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info('llm_calls')")?;
    let cols = st
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    for col in ["node", "node_seq"] {
        if !cols.iter().any(|c| c == col) {
            // Several processes may open an old store at once: a column another one just
            // added is not an error.
            match conn.execute_batch(&format!("ALTER TABLE llm_calls ADD COLUMN {col} INTEGER")) {
                Ok(()) => {}
                Err(e) if e.to_string().contains("duplicate column") => {}
                Err(e) => return Err(e),
            }
        }
    }
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS llm_calls_node ON llm_calls(run, node, node_seq)",
    )
}

/// Where an agent run stands, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// A process is driving it (or was, until it died without a word: see [`crate::RunHolder`]).
    Running,
    /// The user quit an interactive run.
    Paused,
    /// Its iterations ran out; the result is written.
    Finished,
    /// A budget stopped it.
    Stopped,
    /// A signal (SIGTERM, SIGINT, SIGHUP) ended the process driving it.
    Interrupted,
    /// A provider or environment failure, or an input that cannot be run.
    Failed,
}

impl RunStatus {
    /// Every status, in the order a run usually meets them.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Finished,
        RunStatus::Stopped,
        RunStatus::Interrupted,
        RunStatus::Failed,
    ];

    /// The stored (and `--json`) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Finished => "finished",
            RunStatus::Stopped => "stopped",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    /// The status a stored spelling names.
    pub fn from_name(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl rusqlite::types::ToSql for RunStatus {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for RunStatus {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let s = v.as_str()?;
        RunStatus::from_name(s).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown run status `{s}`").into())
        })
    }
}

/// One agent run as stored.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// Run id (`ksmith show RUN`).
    pub id: String,
    /// Creation time (UTC, ISO 8601).
    pub created_at: String,
    /// Last update time.
    pub updated_at: String,
    /// Task directory as given.
    pub task_dir: String,
    /// Task name.
    pub task: String,
    /// Hash of the frozen tests (task definition + reference).
    pub tests_hash: String,
    /// `provider:model`.
    pub model: String,
    /// `autonomous` or `interactive`.
    pub mode: String,
    /// The run's options (JSON, owned by the agent loop).
    pub options: String,
    /// Where it stands.
    pub status: RunStatus,
    /// Why it stopped, when it did.
    pub stop_reason: Option<String>,
    /// Seconds spent running, over all sessions.
    pub active_s: f64,
    /// Where the result was written.
    pub out_dir: Option<String>,
}

/// One LLM call as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// 0-based index in its run.
    pub seq: u64,
    /// Time of the call.
    pub created_at: String,
    /// Agent role.
    pub role: String,
    /// Loop step that made it (e.g. `iter 2 implement`).
    pub step: String,
    /// Model that answered.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// User prompt.
    pub prompt: String,
    /// Reply text (empty when the call failed).
    pub reply: String,
    /// The error, when the call failed.
    pub error: Option<String>,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Reply tokens.
    pub tokens_out: u64,
    /// Token counts were estimated (the provider reports none).
    pub estimated: bool,
    /// USD.
    pub cost: f64,
    /// Wall milliseconds, retries included.
    pub latency_ms: f64,
    /// Tries it took.
    pub attempts: u32,
}

/// One iteration's snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotRow {
    /// Iteration number (0 = the starting solution).
    pub iteration: u32,
    /// Evaluation id, when it got that far.
    pub eval_id: Option<i64>,
    /// Final status of the iteration's candidate.
    pub status: String,
    /// Geometric mean over workloads of the median latency (ms), when timed.
    pub latency_ms: Option<f64>,
    /// Speedup vs the baseline, when timed.
    pub speedup: Option<f64>,
    /// Source files: JSON object name -> artifact hash.
    pub sources: String,
    /// One line: what the iteration tried.
    pub summary: String,
}

fn run_row(r: &rusqlite::Row) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        created_at: r.get(1)?,
        updated_at: r.get(2)?,
        task_dir: r.get(3)?,
        task: r.get(4)?,
        tests_hash: r.get(5)?,
        model: r.get(6)?,
        mode: r.get(7)?,
        options: r.get(8)?,
        status: r.get(9)?,
        stop_reason: r.get(10)?,
        active_s: r.get(11)?,
        out_dir: r.get(12)?,
    })
}

const RUN_COLS: &str = "id, created_at, updated_at, task_dir, task, tests_hash, model, mode, options, status, stop_reason, active_s, out_dir";

impl Store {
    /// Creates a run.
    pub fn create_run(&self, run: &RunRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO runs (id, task_dir, task, tests_hash, model, mode, options, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    run.id,
                    run.task_dir,
                    run.task,
                    run.tests_hash,
                    run.model,
                    run.mode,
                    run.options,
                    run.status
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// One run by id.
    pub fn run(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        self.conn
            .query_row(
                &format!("SELECT {RUN_COLS} FROM runs WHERE id = ?1"),
                params![id],
                run_row,
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// Every run, newest first.
    pub fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT {RUN_COLS} FROM runs ORDER BY created_at DESC, rowid DESC"
            ))
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map([], run_row)
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// Updates a run's status (and stop reason, options, active seconds, output).
    pub fn update_run(&self, run: &RunRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE runs SET status = ?2, stop_reason = ?3, options = ?4, active_s = ?5, out_dir = ?6,
                        updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1",
                params![
                    run.id,
                    run.status,
                    run.stop_reason,
                    run.options,
                    run.active_s,
                    run.out_dir
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records an LLM call (replacing a failed attempt at the same seq).
    pub fn record_call(&self, run: &str, c: &CallRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO llm_calls (run, seq, role, step, model, system, prompt, reply, error,
                     tokens_in, tokens_out, estimated, cost, latency_ms, attempts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                params![
                    run,
                    c.seq as i64,
                    c.role,
                    c.step,
                    c.model,
                    c.system,
                    c.prompt,
                    c.reply,
                    c.error,
                    c.tokens_in as i64,
                    c.tokens_out as i64,
                    c.estimated,
                    c.cost,
                    c.latency_ms,
                    c.attempts
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Every call of a run, in order.
    pub fn calls(&self, run: &str) -> Result<Vec<CallRow>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT seq, created_at, role, step, model, system, prompt, reply, error, tokens_in, tokens_out,
                        estimated, cost, latency_ms, attempts FROM llm_calls WHERE run = ?1 ORDER BY seq",
            )
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map(params![run], |r| {
                Ok(CallRow {
                    seq: r.get::<_, i64>(0)? as u64,
                    created_at: r.get(1)?,
                    role: r.get(2)?,
                    step: r.get(3)?,
                    model: r.get(4)?,
                    system: r.get(5)?,
                    prompt: r.get(6)?,
                    reply: r.get(7)?,
                    error: r.get(8)?,
                    tokens_in: r.get::<_, i64>(9)? as u64,
                    tokens_out: r.get::<_, i64>(10)? as u64,
                    estimated: r.get(11)?,
                    cost: r.get(12)?,
                    latency_ms: r.get(13)?,
                    attempts: r.get(14)?,
                })
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// The run's next free call seq (one past the highest recorded).
    pub fn next_call_seq(&self, run: &str) -> Result<u64, StoreError> {
        self.conn
            .query_row(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM llm_calls WHERE run = ?1",
                params![run],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(|e| self.sql(e))
    }

    /// Records a search node's call `node_seq` (its index within the node) at run seq
    /// `c.seq`, replacing a failed attempt at the same place.
    pub fn record_node_call(
        &self,
        run: &str,
        node: u64,
        node_seq: u64,
        c: &CallRow,
    ) -> Result<(), StoreError> {
        // One transaction: a call stored without its node would not be replayed (and paid again).
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sql(e))?;
        self.record_call(run, c)?;
        tx.execute(
            "UPDATE llm_calls SET node = ?3, node_seq = ?4 WHERE run = ?1 AND seq = ?2",
            params![run, c.seq as i64, node as i64, node_seq as i64],
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))
    }

    /// A search node's calls by their index within the node (failed attempts included).
    pub fn node_calls(&self, run: &str, node: u64) -> Result<Vec<(u64, CallRow)>, StoreError> {
        let seqs: Vec<(i64, i64)> = {
            let mut st = self
                .conn
                .prepare(
                    "SELECT node_seq, seq FROM llm_calls WHERE run = ?1 AND node = ?2 ORDER BY node_seq",
                )
                .map_err(|e| self.sql(e))?;
            let rows = st
                .query_map(params![run, node as i64], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| self.sql(e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.sql(e))?;
            rows
        };
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let all = self.calls(run)?;
        Ok(seqs
            .into_iter()
            .filter_map(|(ns, seq)| {
                all.iter()
                    .find(|c| c.seq == seq as u64)
                    .map(|c| (ns as u64, c.clone()))
            })
            .collect())
    }

    /// Appends a journal event (a decision a resumed run must replay).
    pub fn record_event(
        &self,
        run: &str,
        seq: u64,
        kind: &str,
        payload: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO run_events (run, seq, kind, payload) VALUES (?1, ?2, ?3, ?4)",
                params![run, seq as i64, kind, payload],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// A run's journal events: (seq, kind, payload), in order.
    pub fn events(&self, run: &str) -> Result<Vec<(u64, String, String)>, StoreError> {
        let mut st = self
            .conn
            .prepare("SELECT seq, kind, payload FROM run_events WHERE run = ?1 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map(params![run], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?))
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// Records (or replaces) an iteration's snapshot.
    pub fn record_snapshot(&self, run: &str, s: &SnapshotRow) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO snapshots (run, iteration, eval_id, status, latency_ms, speedup, sources, summary)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    run,
                    s.iteration,
                    s.eval_id,
                    s.status,
                    s.latency_ms,
                    s.speedup,
                    s.sources,
                    s.summary
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// A run's snapshots by iteration.
    pub fn snapshots(&self, run: &str) -> Result<Vec<SnapshotRow>, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT iteration, eval_id, status, latency_ms, speedup, sources, summary
                 FROM snapshots WHERE run = ?1 ORDER BY iteration",
            )
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map(params![run], |r| {
                Ok(SnapshotRow {
                    iteration: r.get(0)?,
                    eval_id: r.get(1)?,
                    status: r.get(2)?,
                    latency_ms: r.get(3)?,
                    speedup: r.get(4)?,
                    sources: r.get(5)?,
                    summary: r.get(6)?,
                })
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str) -> RunRow {
        RunRow {
            id: id.into(),
            created_at: String::new(),
            updated_at: String::new(),
            task_dir: "tasks/starter/softmax".into(),
            task: "softmax".into(),
            tests_hash: "abc".into(),
            model: "scripted:x.toml".into(),
            mode: "autonomous".into(),
            options: "{}".into(),
            status: RunStatus::Running,
            stop_reason: None,
            active_s: 0.0,
            out_dir: None,
        }
    }

    #[test]
    fn old_call_tables_gain_node_columns_and_node_calls_replay() {
        let dir = tempfile::tempdir().unwrap();
        // A store as an older ksmith left it: llm_calls without the node columns.
        {
            let c = rusqlite::Connection::open(dir.path().join("ksmith.db")).unwrap();
            c.execute_batch(SCHEMA).unwrap();
            c.execute_batch(
                "INSERT INTO runs (id, task_dir, task, tests_hash, model, mode, options, status)
                 VALUES ('old', 'd', 't', 'h', 'm', 'autonomous', '{}', 'finished');
                 INSERT INTO llm_calls (run, seq, role, step, model, system, prompt, reply, tokens_in,
                     tokens_out, estimated, cost, latency_ms, attempts)
                 VALUES ('old', 0, 'planner', 's', 'm', 'sys', 'p', 'r', 1, 1, 1, 0, 1, 1);",
            )
            .unwrap();
            let cols: Vec<String> = c
                .prepare("SELECT name FROM pragma_table_info('llm_calls')")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert!(!cols.contains(&"node".to_string()));
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.calls("old").unwrap().len(), 1, "old calls survive");
        assert_eq!(store.next_call_seq("old").unwrap(), 1);
        store.create_run(&run("r2")).unwrap();
        assert_eq!(store.next_call_seq("r2").unwrap(), 0);
        let mut c = store.calls("old").unwrap()[0].clone();
        c.seq = 0;
        store.record_node_call("r2", 7, 0, &c).unwrap();
        c.seq = 1;
        c.role = "implementer".into();
        store.record_node_call("r2", 3, 0, &c).unwrap();
        c.seq = 2;
        store.record_node_call("r2", 7, 1, &c).unwrap();
        let n7 = store.node_calls("r2", 7).unwrap();
        assert_eq!(
            n7.iter().map(|(i, c)| (*i, c.seq)).collect::<Vec<_>>(),
            vec![(0, 0), (1, 2)]
        );
        assert_eq!(n7[0].1.role, "planner");
        assert_eq!(store.next_call_seq("r2").unwrap(), 3);
        // Opening again (migration already done) is fine.
        drop(store);
        Store::open(dir.path()).unwrap();
    }

    #[test]
    fn runs_calls_events_and_snapshots_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_run(&run("r1")).unwrap();
        let mut r = store.run("r1").unwrap().unwrap();
        assert_eq!(r.status, RunStatus::Running);
        r.status = RunStatus::Stopped;
        r.stop_reason = Some("budget: llm calls (4)".into());
        r.active_s = 12.5;
        store.update_run(&r).unwrap();
        let back = store.run("r1").unwrap().unwrap();
        assert_eq!(back.stop_reason.as_deref(), Some("budget: llm calls (4)"));
        assert_eq!(back.active_s, 12.5);
        let mut c = CallRow {
            seq: 0,
            created_at: String::new(),
            role: "planner".into(),
            step: "iter 1 plan".into(),
            model: "m".into(),
            system: "s".into(),
            prompt: "p".into(),
            reply: String::new(),
            error: Some("timeout".into()),
            tokens_in: 0,
            tokens_out: 0,
            estimated: true,
            cost: 0.0,
            latency_ms: 5.0,
            attempts: 3,
        };
        store.record_call("r1", &c).unwrap();
        c.reply = "plan".into();
        c.error = None;
        store.record_call("r1", &c).unwrap();
        let calls = store.calls("r1").unwrap();
        assert_eq!(calls.len(), 1, "a retried seq replaces the failed attempt");
        assert_eq!(calls[0].reply, "plan");
        store
            .record_event("r1", 0, "decision", "{\"approve\":true}")
            .unwrap();
        assert_eq!(store.events("r1").unwrap()[0].1, "decision");
        store
            .record_snapshot(
                "r1",
                &SnapshotRow {
                    iteration: 1,
                    eval_id: None,
                    status: "compile_error".into(),
                    latency_ms: None,
                    speedup: None,
                    sources: "{}".into(),
                    summary: "tiling".into(),
                },
            )
            .unwrap();
        assert_eq!(store.snapshots("r1").unwrap()[0].status, "compile_error");
        assert!(store.run("nope").unwrap().is_none());
        assert_eq!(store.runs().unwrap().len(), 1);
        for st in RunStatus::ALL {
            assert_eq!(RunStatus::from_name(st.as_str()), Some(st));
        }
    }
}
