//! How a run started by another process (`ksmith mcp`, `ksmith serve`) is told its id and
//! where to write its engine events, and the events file itself (JSON lines). Below the
//! front ends and the run drivers alike: a search or an agent run writes here, the MCP
//! server and the web page read here, and none of them imports another for it.

use ksmith_search::{Event, EventSink};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// Environment variable naming the run id a started `optimize`/`resume` process must use.
pub(crate) const RUN_ID_ENV: &str = "KSMITH_RUN_ID";
/// Environment variable naming the file a search appends its engine events to (JSON lines).
pub(crate) const EVENTS_ENV: &str = "KSMITH_EVENTS";

/// Whether `id` is a run id as ksmith makes them: `run-` then letters, digits, `-` or `_`.
pub(crate) fn valid_run_id(id: &str) -> bool {
    id.len() <= 64
        && id.strip_prefix("run-").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// The run id this process was asked to use by the `ksmith mcp` that started it, when it is a
/// well-formed one (`run-` then letters, digits and dashes).
pub(crate) fn requested_run_id() -> Option<String> {
    let id = std::env::var(RUN_ID_ENV).ok()?;
    valid_run_id(&id).then_some(id)
}

/// One line of a run's event file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct EventLine {
    /// The run.
    pub run: String,
    /// Position in the file, from 0.
    pub seq: u64,
    /// Seconds since the process started writing.
    pub t_s: f64,
    /// The engine's event.
    pub event: Event,
}

/// An event sink that also appends every event to the file named by `KSMITH_EVENTS`.
pub(crate) struct EventFile<S> {
    inner: S,
    run: String,
    file: Option<Mutex<(std::fs::File, u64)>>,
    started: Instant,
}

impl<S: EventSink> EventFile<S> {
    /// `inner`, teeing into the events file when this process was given one.
    pub(crate) fn tee(run: &str, inner: S) -> Self {
        let file = std::env::var_os(EVENTS_ENV).and_then(|p| {
            let path = PathBuf::from(p);
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(f) => Some(Mutex::new((f, 0))),
                Err(e) => {
                    note!("ksmith: events file {}: {e}", path.display());
                    None
                }
            }
        });
        EventFile {
            inner,
            run: run.to_string(),
            file,
            started: Instant::now(),
        }
    }
}

impl<S: EventSink> EventSink for EventFile<S> {
    fn emit(&self, event: Event) {
        if let Some(f) = &self.file {
            if let Ok(mut g) = f.lock() {
                let line = EventLine {
                    run: self.run.clone(),
                    seq: g.1,
                    t_s: self.started.elapsed().as_secs_f64(),
                    event: event.clone(),
                };
                if let Ok(text) = serde_json::to_string(&line) {
                    // One write per line, so a reader never sees half of one from us.
                    let _ = g.0.write_all(format!("{text}\n").as_bytes());
                    g.1 += 1;
                }
            }
        }
        self.inner.emit(event);
    }
}
