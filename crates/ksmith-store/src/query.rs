//! Read-only listings over the store: evaluations with filters (`ksmith evals`) and the bench
//! runs with their items (`ksmith compare`).

use crate::{Store, StoreError};
use rusqlite::params;

/// Which evaluations to list; every field narrows the listing (all `None`: everything).
#[derive(Debug, Clone, Default)]
pub struct EvalFilter {
    /// Task name, exactly.
    pub task: Option<String>,
    /// Solution name, exactly.
    pub solution: Option<String>,
    /// Status, as its upper-case name.
    pub status: Option<ksmith_judge::Status>,
    /// Recorded at or after this time (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub since: Option<String>,
    /// Recorded strictly before this time (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub before: Option<String>,
    /// At most this many, newest first (`None`: all).
    pub limit: Option<usize>,
}

/// One bench run as stored.
#[derive(Debug, Clone)]
pub struct BenchRunRow {
    /// Run id (`ksmith compare A B`).
    pub id: i64,
    /// Creation time (UTC, ISO 8601).
    pub created_at: String,
    /// Suite directory (absolute).
    pub suite: String,
    /// Whether every item was evaluated (an unfinished run may still be resumed).
    pub finished: bool,
}

/// One item of a bench run: `task/label#repeat` with its evaluation or its error.
#[derive(Debug, Clone)]
pub struct BenchItemRow {
    /// The item key (`task/label#repeat`).
    pub item: String,
    /// The evaluation id, when it was evaluated.
    pub eval_id: Option<i64>,
    /// Why it could not be evaluated (a task error, not the candidate's).
    pub error: Option<String>,
}

/// A bench run with its counts, for `ksmith benches`.
#[derive(Debug, Clone)]
pub struct BenchRunSummary {
    /// The run as stored.
    pub run: BenchRunRow,
    /// Items recorded (evaluated or failed).
    pub items: usize,
    /// Items with an evaluation.
    pub evaluated: usize,
    /// Items that could not be evaluated (a task error).
    pub errors: usize,
    /// Evaluations that passed.
    pub passed: usize,
    /// Speedups of the passed, timed evaluations.
    pub speedups: Vec<f64>,
    /// Distinct tasks among the items.
    pub tasks: usize,
}

/// What an evaluation was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// An item of a bench run (`ksmith benches`, `compare`): the run and the item key
    /// (`task/variant#repeat`).
    Bench {
        /// Bench run id.
        run: i64,
        /// `task/variant#repeat`.
        item: String,
    },
    /// A snapshot of an agent run.
    Run {
        /// Run id.
        run: String,
        /// Snapshot iteration.
        iteration: i64,
    },
    /// The node of a graph search that first judged this code.
    Search {
        /// Run id.
        run: String,
        /// Node id.
        node: i64,
    },
}

impl Owner {
    /// One short phrase: `bench 3`, `run R iteration 2`, `search R node 5`.
    pub fn label(&self) -> String {
        match self {
            Owner::Bench { run, .. } => format!("bench {run}"),
            Owner::Run { run, iteration } => format!("run {run} iteration {iteration}"),
            Owner::Search { run, node } => format!("search {run} node {node}"),
        }
    }
}

impl Store {
    /// Every bench run, newest first, with its counts.
    pub fn bench_runs(&self) -> Result<Vec<BenchRunSummary>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, created_at, suite, finished FROM bench_runs ORDER BY id DESC")
            .map_err(|e| self.sql(e))?;
        let runs = stmt
            .query_map([], |r| {
                Ok(BenchRunRow {
                    id: r.get(0)?,
                    created_at: r.get(1)?,
                    suite: r.get(2)?,
                    finished: r.get::<_, i64>(3)? != 0,
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.sql(e))?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT i.item, i.eval_id, i.error, e.status, e.speedup
                 FROM bench_items i LEFT JOIN evaluations e ON e.id = i.eval_id
                 WHERE i.run_id = ?1",
            )
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(runs.len());
        for run in runs {
            type Item = (
                String,
                Option<i64>,
                Option<String>,
                Option<String>,
                Option<f64>,
            );
            let items: Vec<Item> = stmt
                .query_map(params![run.id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| self.sql(e))?;
            let mut tasks: Vec<&str> = items
                .iter()
                .map(|(item, ..)| item.split('/').next().unwrap_or(item))
                .collect();
            tasks.sort_unstable();
            tasks.dedup();
            let passed: Vec<&Item> = items
                .iter()
                .filter(|(_, _, _, status, _)| status.as_deref() == Some("PASSED"))
                .collect();
            out.push(BenchRunSummary {
                items: items.len(),
                evaluated: items.iter().filter(|i| i.1.is_some()).count(),
                errors: items.iter().filter(|i| i.2.is_some()).count(),
                passed: passed.len(),
                speedups: passed.iter().filter_map(|i| i.4).collect(),
                tasks: tasks.len(),
                run,
            });
        }
        Ok(out)
    }

    /// What evaluation `id` was made for: bench items, agent-run snapshots and search nodes
    /// (none for a plain `eval`, `tune` or a reuse).
    pub fn owners(&self, id: i64) -> Result<Vec<Owner>, StoreError> {
        let mut out = Vec::new();
        let mut q = |sql: &str, f: &dyn Fn(&rusqlite::Row) -> rusqlite::Result<Owner>| {
            let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sql(e))?;
            let rows = stmt
                .query_map(params![id], |r| f(r))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| self.sql(e))?;
            out.extend(rows);
            Ok::<(), StoreError>(())
        };
        q(
            "SELECT run_id, item FROM bench_items WHERE eval_id = ?1 ORDER BY run_id",
            &|r| {
                Ok(Owner::Bench {
                    run: r.get(0)?,
                    item: r.get(1)?,
                })
            },
        )?;
        // Tables of agent runs and searches exist once a run was stored.
        if self.has_table("snapshots")? {
            q(
                "SELECT run, iteration FROM snapshots WHERE eval_id = ?1 ORDER BY run, iteration",
                &|r| {
                    Ok(Owner::Run {
                        run: r.get(0)?,
                        iteration: r.get(1)?,
                    })
                },
            )?;
        }
        if self.has_table("search_reuse")? {
            q(
                "SELECT run, node FROM search_reuse WHERE eval_id = ?1 ORDER BY run, node",
                &|r| {
                    Ok(Owner::Search {
                        run: r.get(0)?,
                        node: r.get(1)?,
                    })
                },
            )?;
        }
        Ok(out)
    }

    fn has_table(&self, name: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                params![name],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(|e| self.sql(e))
    }

    /// Ids of the evaluations matching `f`, newest first.
    pub fn list_ids(&self, f: &EvalFilter) -> Result<Vec<i64>, StoreError> {
        let limit = f
            .limit
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            .unwrap_or(-1);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id FROM evaluations
                 WHERE (?1 IS NULL OR task = ?1) AND (?2 IS NULL OR solution = ?2)
                   AND (?3 IS NULL OR status = ?3) AND (?4 IS NULL OR created_at >= ?4)
                   AND (?5 IS NULL OR created_at < ?5)
                 ORDER BY id DESC LIMIT ?6",
            )
            .map_err(|e| self.sql(e))?;
        let ids = stmt
            .query_map(
                params![
                    f.task,
                    f.solution,
                    f.status.map(|s| s.as_str()),
                    f.since,
                    f.before,
                    limit
                ],
                |r| r.get(0),
            )
            .and_then(|rows| rows.collect::<Result<Vec<i64>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(ids)
    }

    /// Normalizes a date (`YYYY-MM-DD`) or an RFC 3339 time to UTC `YYYY-MM-DDTHH:MM:SSZ`,
    /// shifted by an SQLite modifier such as `+1 days` (SQLite's date functions; `None` when
    /// SQLite cannot read it).
    pub fn utc_time(&self, text: &str, shift: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', ?1, ?2)",
                params![text, shift],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))
    }

    /// One bench run by id.
    pub fn bench_run_row(&self, id: i64) -> Result<Option<BenchRunRow>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row(
                "SELECT id, created_at, suite, finished FROM bench_runs WHERE id = ?1",
                params![id],
                |r| {
                    Ok(BenchRunRow {
                        id: r.get(0)?,
                        created_at: r.get(1)?,
                        suite: r.get(2)?,
                        finished: r.get::<_, i64>(3)? != 0,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// The recorded items of a bench run, in the order they were recorded.
    pub fn bench_items(&self, run: i64) -> Result<Vec<BenchItemRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT item, eval_id, error FROM bench_items WHERE run_id = ?1 ORDER BY rowid",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![run], |r| {
                Ok(BenchItemRow {
                    item: r.get(0)?,
                    eval_id: r.get(1)?,
                    error: r.get(2)?,
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_normalize_to_utc_and_garbage_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(
            s.utc_time("2026-12-01", "+0 days").unwrap().as_deref(),
            Some("2026-12-01T00:00:00Z")
        );
        assert_eq!(
            s.utc_time("2026-12-31", "+1 days").unwrap().as_deref(),
            Some("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            s.utc_time("2026-12-01T10:30:00+02:00", "+0 days")
                .unwrap()
                .as_deref(),
            Some("2026-12-01T08:30:00Z")
        );
        assert_eq!(s.utc_time("yesterday", "+0 days").unwrap(), None);
        let none = EvalFilter {
            status: Some(ksmith_judge::Status::Passed),
            ..EvalFilter::default()
        };
        assert!(s.list_ids(&none).unwrap().is_empty());
    }
}
