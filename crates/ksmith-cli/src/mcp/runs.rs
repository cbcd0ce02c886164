//! Optimize runs and searches started from the MCP server: each is a `ksmith optimize` or
//! `ksmith resume` process of its own, with the run id chosen here, its output in a log file
//! and its engine events in a JSON-lines file (both under STORE/mcp/RUN/).

pub(crate) use crate::run_events::valid_run_id;
use crate::run_events::{EventLine, EVENTS_ENV, RUN_ID_ENV};
use crate::Ctx;
use anyhow::{anyhow, Context, Result};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A new run id, in the format of `ksmith optimize`'s.
pub(crate) fn new_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let tag = ksmith_task::content_hash(
        format!("mcp-{}-{}", now.as_nanos(), std::process::id()).as_bytes(),
    );
    format!("run-{}-{}", now.as_secs(), &tag[..6])
}

/// A run process started by this server.
struct Proc {
    child: Child,
    /// Its exit status once seen (None: still running).
    exit: Option<i32>,
    /// `run_stop` asked it to stop.
    stopped: bool,
}

/// The run processes this server started, by run id.
#[derive(Clone)]
pub(crate) struct Procs {
    map: Arc<Mutex<HashMap<String, Proc>>>,
    /// The directory under the store that keeps their files (`mcp`, or `serve` for the page).
    area: &'static str,
}

impl Default for Procs {
    fn default() -> Self {
        Procs::in_area("mcp")
    }
}

/// Where a run's process stands, as this server sees it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ProcessState {
    /// Its pid.
    pub pid: u32,
    /// Still running.
    pub running: bool,
    /// Its exit code once ended (128 + N: ended by signal N).
    pub exit_code: Option<i32>,
    /// Stopped by `run_stop`.
    pub stopped: bool,
}

/// Files of a run started here.
pub(crate) fn run_dir(store: &Path, run: &str) -> PathBuf {
    store.join("mcp").join(run)
}

/// The events file of a run.
pub(crate) fn events_path(store: &Path, run: &str) -> PathBuf {
    run_dir(store, run).join("events.jsonl")
}

/// The log (stdout and stderr) of a run's process.
pub(crate) fn log_path(store: &Path, run: &str) -> PathBuf {
    run_dir(store, run).join("log.txt")
}

impl Procs {
    /// No processes yet; their files go under STORE/AREA/RUN/.
    pub(crate) fn in_area(area: &'static str) -> Procs {
        Procs {
            map: Arc::default(),
            area,
        }
    }

    /// Starts `ksmith SUBCOMMAND ARGS` for `run`, with the server's global options.
    pub(crate) fn spawn(&self, ctx: &Ctx, run: &str, args: &[String]) -> Result<u32> {
        let dir = ctx.store_dir.join(self.area).join(run);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Appended: a resumed run's log follows its first part.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("log.txt"))
            .with_context(|| format!("creating the log in {}", dir.display()))?;
        let exe = std::env::current_exe().context("finding the ksmith binary")?;
        let mut cmd = Command::new(exe);
        cmd.arg("--store").arg(&ctx.store_dir);
        if let Some(p) = &ctx.python {
            cmd.arg("--python").arg(p);
        }
        if ctx.threads_explicit {
            cmd.arg("--threads").arg(ctx.threads.to_string());
        }
        if ctx.unsafe_no_sandbox {
            cmd.arg("--unsafe-no-sandbox");
        }
        cmd.arg("--reference-timeout")
            .arg(ctx.reference_timeout.as_secs_f64().to_string());
        if let Some(bytes) = ctx.reference_memory {
            cmd.arg("--reference-memory")
                .arg((bytes as f64 / (1u64 << 30) as f64).to_string());
        }
        // The server's cluster, if it judges on one, is the run's too.
        if let Some(c) = &ctx.cluster {
            cmd.arg("--cluster").arg(&c.address);
            if let Some(f) = &c.fingerprint {
                cmd.arg("--cluster-fingerprint").arg(f);
            }
        }
        cmd.args(args)
            .env(RUN_ID_ENV, run)
            .env(EVENTS_ENV, dir.join("events.jsonl"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("sharing the log")?)
            .stderr(log);
        let child = cmd.spawn().context("starting ksmith")?;
        let pid = child.id();
        self.lock().insert(
            run.to_string(),
            Proc {
                child,
                exit: None,
                stopped: false,
            },
        );
        Ok(pid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Proc>> {
        // A panic while holding it leaves the map usable: it holds plain data.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the process of `run` stands; None when this server did not start it.
    pub(crate) fn state(&self, run: &str) -> Option<ProcessState> {
        let mut map = self.lock();
        let p = map.get_mut(run)?;
        if p.exit.is_none() {
            if let Ok(Some(status)) = p.child.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                p.exit = Some(
                    status
                        .code()
                        .or_else(|| status.signal().map(|s| 128 + s))
                        .unwrap_or(-1),
                );
            }
        }
        Some(ProcessState {
            pid: p.child.id(),
            running: p.exit.is_none(),
            exit_code: p.exit,
            stopped: p.stopped,
        })
    }

    /// Sends SIGTERM to the process of `run` (as Ctrl-C would: an agent run records itself
    /// interrupted) and waits up to `grace` for it to end, then SIGKILL.
    pub(crate) fn stop(&self, run: &str, grace: Duration) -> Result<ProcessState> {
        let pid = {
            let mut map = self.lock();
            let p = map
                .get_mut(run)
                .ok_or_else(|| anyhow!("run {run} was not started by this server"))?;
            p.stopped = true;
            p.child.id()
        };
        let target = nix::unistd::Pid::from_raw(pid as i32);
        if self.state(run).is_some_and(|s| s.running) {
            // Only our own child, by its pid, which stays ours until we reap it.
            let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM);
        }
        let start = Instant::now();
        while self.state(run).is_some_and(|s| s.running) {
            if start.elapsed() > grace {
                let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.state(run)
            .ok_or_else(|| anyhow!("run {run}: its process is no longer tracked"))
    }
}

/// Reads a run's events from the `since`-th on; only whole lines count.
pub(crate) fn read_events(path: &Path, since: u64) -> Result<Vec<EventLine>> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut text = String::new();
    f.read_to_string(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    let complete = text.rfind('\n').map_or("", |i| &text[..i]);
    let mut out = Vec::new();
    for (i, line) in complete.lines().enumerate() {
        if (i as u64) < since || line.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(line)
                .with_context(|| format!("{}: line {}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

/// The last `max` bytes of a run's log (the process's own output, capped).
pub(crate) fn log_tail(path: &Path, max: u64) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// One line for a person about an event (progress notifications carry it).
pub(crate) fn event_text(e: &ksmith_search::Event) -> String {
    use ksmith_search::Event::*;
    let one = |s: &str| ksmith_task::escape::one_line(s).into_owned();
    match e {
        Progress { node, message } => match node {
            Some(n) => format!("{n}: {}", one(message)),
            None => one(message),
        },
        NodeStarted { node, parent, hint } => format!(
            "node {node} started from {} [{hint}]",
            parent.map_or("start".to_string(), |p| p.to_string())
        ),
        NodeFinished { node } => {
            let what = match (node.outcome.status, node.outcome.speedup) {
                (Some(s), Some(x)) if node.outcome.passed() => format!("{s} {x:.2}x"),
                (Some(s), _) => s.to_string(),
                (None, _) => node.state.as_str().to_string(),
            };
            format!("node {} finished: {what}", node.id)
        }
        NewBest { node, speedup } => format!("new best: {node} {speedup:.2}x"),
        Stopped { reason } => format!("stopped: {}", one(reason)),
        TuneStarted {
            space_size, steps, ..
        } => format!("tuning: {space_size} configurations, about {steps} to judge"),
        TuneJudging { .. } => "tuning: judging a configuration".into(),
        TuneJudged { outcome, .. } => format!("tuning: judged {}", outcome.status),
        TuneSearchEnded { evaluated } => format!("tuning: {evaluated} configurations judged"),
        TuneRetiming { finalists, .. } => format!("tuning: re-timing {finalists} leaders"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_checked() {
        assert!(valid_run_id("run-1765000000-ab12cd"));
        assert!(valid_run_id(&new_run_id()));
        for bad in ["", "run-", "x-1", "run-../x", "run-a b", "run-a/b"] {
            assert!(!valid_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_half_written_event_line_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("e.jsonl");
        let line = EventLine {
            run: "run-1".into(),
            seq: 0,
            t_s: 0.5,
            event: ksmith_search::Event::Stopped {
                reason: "budget".into(),
            },
        };
        let text = serde_json::to_string(&line).unwrap();
        std::fs::write(&p, format!("{text}\n{}", &text[..10])).unwrap();
        let got = read_events(&p, 0).unwrap();
        assert_eq!(got.len(), 1);
        assert!(read_events(&p, 1).unwrap().is_empty());
    }
}
