//! Signals during an agent run. SIGTERM, SIGINT and SIGHUP record the run as
//! [`RunStatus::Interrupted`] (so `ksmith resume RUN` continues it), end any `command:`
//! provider still running, and exit at once with 128 + the signal, whatever the loop is doing
//! (waiting for a model, judging a candidate). The handler only writes the signal number to a
//! pipe; a watcher thread does the work, since almost nothing is safe inside a handler.
//! A run killed with SIGKILL cannot say anything: `ksmith runs` finds it by its free run lock.

use ksmith_store::{RunStatus, Store};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Instant;

/// The run this process drives, as the watcher needs it.
struct Watched {
    store_dir: PathBuf,
    run: String,
    prior_active: f64,
    started: Instant,
    /// Saved with a final status (or already marked interrupted): leave the row alone.
    ended: bool,
    /// Marked interrupted by the watcher.
    interrupted: bool,
}

static WATCHED: Mutex<Option<Watched>> = Mutex::new(None);
/// Write end of the self-pipe (-1 until installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);
static INSTALL: Once = Once::new();

const SIGNALS: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

extern "C" fn on_signal(sig: nix::libc::c_int) {
    let fd = PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: the write end stays open for the life of the process; write(2) is
        // async-signal-safe.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = nix::unistd::write(fd, &[sig as u8]);
    }
}

fn watched() -> MutexGuard<'static, Option<Watched>> {
    WATCHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// From now on, a terminating signal marks `run` interrupted and ends the process.
pub(crate) fn watch(store_dir: PathBuf, run: &str, prior_active: f64, started: Instant) {
    *watched() = Some(Watched {
        store_dir,
        run: run.to_string(),
        prior_active,
        started,
        ended: false,
        interrupted: false,
    });
    INSTALL.call_once(|| {
        let Ok((read, write)) = nix::unistd::pipe() else {
            note!("ksmith: warning: cannot watch for signals (no pipe); a killed run stays `running` until `ksmith runs` finds it gone");
            return;
        };
        PIPE.store(write.into_raw_fd(), Ordering::Relaxed);
        std::thread::spawn(move || wait_for_signal(read));
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        for sig in SIGNALS {
            // SAFETY: the handler only does an async-signal-safe write.
            if let Err(e) = unsafe { sigaction(sig, &action) } {
                note!("ksmith: warning: cannot handle {sig}: {e}");
            }
        }
    });
}

/// Runs `save` (a write of the run's row with `status`) unless the run was already marked
/// interrupted (then `None`); a final status tells the watcher to leave the row alone from
/// then on.
pub(crate) fn saving<T>(status: RunStatus, save: impl FnOnce() -> T) -> Option<T> {
    let mut g = watched();
    if g.as_ref().is_some_and(|w| w.ended && w.interrupted) {
        return None;
    }
    let out = save();
    if let Some(w) = g.as_mut() {
        w.ended = status != RunStatus::Running;
    }
    Some(out)
}

fn wait_for_signal(read: OwnedFd) {
    let mut b = [0u8; 1];
    loop {
        match nix::unistd::read(read.as_raw_fd(), &mut b) {
            Ok(1) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return, // the pipe is gone: nothing more to watch
        }
    }
    let sig = i32::from(b[0]);
    let name = Signal::try_from(sig).map_or("signal", |s| s.as_str());
    let mut g = watched();
    ksmith_llm::kill_running_commands();
    if let Some(w) = g.as_mut().filter(|w| !w.ended) {
        w.ended = true;
        w.interrupted = true;
        match mark(w, name) {
            Ok(()) => note!(
                "ksmith: {name}: run {} interrupted; continue it with `ksmith resume {}`",
                w.run,
                w.run
            ),
            Err(e) => note!(
                "ksmith: {name}: run {} could not be marked interrupted ({}); `ksmith runs` shows it as gone and `ksmith resume {}` continues it",
                w.run,
                crate::error_chain(&e),
                w.run
            ),
        }
    }
    // Exit while holding the lock on WATCHED: the loop can no longer save over our mark.
    std::process::exit(128 + sig);
}

fn mark(w: &Watched, name: &str) -> anyhow::Result<()> {
    let store = Store::open(&w.store_dir)?;
    let mut run = store
        .run(&w.run)?
        .ok_or_else(|| anyhow::anyhow!("no such run"))?;
    run.status = RunStatus::Interrupted;
    run.stop_reason = Some(format!("interrupted by {name}"));
    run.active_s = w.prior_active + w.started.elapsed().as_secs_f64();
    store.update_run(&run)?;
    Ok(())
}
