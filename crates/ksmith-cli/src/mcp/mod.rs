//! `ksmith mcp`: KernelSmith's judge, tuner, searches and store as tools of a Model Context
//! Protocol server (docs/mcp.md), on the official Rust SDK (`rmcp`), over stdio (the default)
//! or streamable HTTP on a loopback port (`--http 127.0.0.1:PORT`).
//!
//! The tools call the same functions as the subcommands (`eval`, `eval A B`, `validate`,
//! `tune`, `runs`, `evals`, `show`, `report`) and answer with the documents those print with
//! `--json`. A candidate that arrives as text is staged in a private directory and judged like
//! any other: untrusted. Optimize runs and searches are long: each runs as its own `ksmith
//! optimize` / `ksmith resume` process (so stopping one is the terminal's Ctrl-C, its run lock
//! is its own, and nothing it prints reaches the protocol's stdout), its engine events written
//! as JSON lines that the server turns into progress notifications.

mod input;
pub(crate) mod runs;
mod server;

use crate::{env_err, input as input_err, Ctx, Exit};
use anyhow::{anyhow, Context};
use ksmith_search::{Event, EventSink};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// Arguments of `ksmith mcp`.
#[derive(clap::Args)]
pub(crate) struct McpArgs {
    /// Serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765) instead of stdio.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<SocketAddr>,
}

/// Environment variable naming the run id a started `optimize`/`resume` process must use.
const RUN_ID_ENV: &str = "KSMITH_RUN_ID";
/// Environment variable naming the file a search appends its engine events to (JSON lines).
const EVENTS_ENV: &str = "KSMITH_EVENTS";

/// `ksmith mcp`.
pub(crate) fn run(ctx: &Ctx, args: &McpArgs) -> Result<u8, Exit> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(env_err)?;
    let state = server::Shared::new(ctx.clone());
    match args.http {
        None => {
            // The protocol owns the real stdout; everything else that would print there (a
            // stray line, a child process that inherits descriptor 1) goes to stderr instead.
            let out = protocol_stdout().map_err(env_err)?;
            rt.block_on(server::serve_stdio(state, out))
                .map_err(env_err)?;
        }
        Some(addr) => {
            if !addr.ip().is_loopback() {
                return Err(input_err(anyhow!(
                    "--http {addr}: the server has no authentication; bind a loopback address (127.0.0.1 or [::1])"
                )));
            }
            rt.block_on(server::serve_http(state, addr))
                .map_err(env_err)?;
        }
    }
    // Runs started from here go on (they are resumable processes of their own).
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(0)
}

/// A duplicate of stdout for the protocol, with descriptor 1 then pointed at stderr.
fn protocol_stdout() -> anyhow::Result<tokio::fs::File> {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let dup = stdout
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stdout")?;
    nix::unistd::dup2(2, 1).context("pointing stdout at stderr")?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(dup)))
}

/// The run id this process was asked to use by the `ksmith mcp` that started it, when it is a
/// well-formed one (`run-` then letters, digits and dashes).
pub(crate) fn requested_run_id() -> Option<String> {
    let id = std::env::var(RUN_ID_ENV).ok()?;
    runs::valid_run_id(&id).then_some(id)
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
