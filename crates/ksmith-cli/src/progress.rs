//! Progress of long jobs, on stderr (results stay on stdout). On a terminal a bar with the
//! current step; otherwise (a log, CI, a pipe) one plain line per finished step, `[k/N] what:
//! message`, so a job that runs for minutes is never silent. `--quiet` turns both off. Every
//! line goes through `note!` (escaped: step messages carry solution and configuration names).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Set once from `--quiet`: no progress at all.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences every progress display of this process (`--quiet`).
pub(crate) fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// How progress is shown.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Mode {
    /// Nothing (`--quiet`).
    Off,
    /// A bar redrawn in place (stderr is a terminal).
    Bar,
    /// One line per step (stderr is a file or a pipe).
    Lines,
}

struct Inner {
    mode: Mode,
    bar: Option<ProgressBar>,
    what: String,
    pos: AtomicU64,
    total: AtomicU64,
}

/// One job's progress: `total` steps named `what` (e.g. `tune fast`). Cheap to clone; clones
/// share the count (the judge's stage hook holds one).
#[derive(Clone)]
pub(crate) struct Progress(Arc<Inner>);

impl Progress {
    /// A job of `total` steps; `what` prefixes every plain line.
    pub(crate) fn new(what: &str, total: u64) -> Progress {
        let mode = if QUIET.load(Ordering::Relaxed) {
            Mode::Off
        } else if std::io::stderr().is_terminal() {
            Mode::Bar
        } else {
            Mode::Lines
        };
        Progress::with_mode(what, total, mode)
    }

    fn with_mode(what: &str, total: u64, mode: Mode) -> Progress {
        let bar = (mode == Mode::Bar).then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {prefix} {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.set_prefix(ksmith_task::escape::one_line(what).into_owned());
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        Progress(Arc::new(Inner {
            mode,
            bar,
            what: what.to_string(),
            pos: AtomicU64::new(0),
            total: AtomicU64::new(total),
        }))
    }

    /// Changes the number of steps (a search that ends early, a stage skipped).
    pub(crate) fn set_total(&self, total: u64) {
        self.0.total.store(total, Ordering::Relaxed);
        if let Some(b) = &self.0.bar {
            b.set_length(total);
        }
    }

    /// Steps finished so far.
    pub(crate) fn position(&self) -> u64 {
        self.0.pos.load(Ordering::Relaxed)
    }

    /// One more step done: a line `[k/N] what: msg` in a log, the bar advanced on a terminal.
    pub(crate) fn step(&self, msg: &str) {
        let k = self.0.pos.fetch_add(1, Ordering::Relaxed) + 1;
        self.show(k, msg);
    }

    /// Step `k` reached (steps may be skipped: a cascade that stops early).
    pub(crate) fn at(&self, k: u64, msg: &str) {
        self.0.pos.store(k, Ordering::Relaxed);
        self.show(k, msg);
    }

    fn show(&self, k: u64, msg: &str) {
        let n = self.0.total.load(Ordering::Relaxed).max(k);
        match self.0.mode {
            Mode::Off => {}
            Mode::Lines => note!("[{k}/{n}] {}: {msg}", self.0.what),
            Mode::Bar => {
                if let Some(b) = &self.0.bar {
                    b.set_position(k);
                    b.set_message(ksmith_task::escape::one_line(msg).into_owned());
                }
            }
        }
    }

    /// What is running now: the bar's message on a terminal; nothing in a log (the step's line
    /// says it when it ends).
    pub(crate) fn activity(&self, msg: &str) {
        if let Some(b) = &self.0.bar {
            b.set_message(ksmith_task::escape::one_line(msg).into_owned());
        }
    }

    /// A line outside the count (a phase starting, a warning), above the bar on a terminal.
    pub(crate) fn line(&self, msg: &str) {
        match (&self.0.mode, &self.0.bar) {
            (Mode::Off, _) => {}
            (Mode::Bar, Some(b)) => b.suspend(|| note!("{}: {msg}", self.0.what)),
            _ => note!("{}: {msg}", self.0.what),
        }
    }

    /// Removes the bar (results follow on stdout).
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.0.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The judge's stages as progress steps: `(index, of, name)`; None for the instant ones.
pub(crate) fn stage_step(
    stage: ksmith_judge::Stage,
    timing: bool,
) -> Option<(u64, u64, &'static str)> {
    use ksmith_judge::Stage;
    let n = if timing { 5 } else { 4 };
    match stage {
        Stage::Build => Some((1, n, "build")),
        Stage::Load => Some((2, n, "load in the sandbox")),
        Stage::QuickCheck => Some((3, n, "quick check (smallest workload)")),
        Stage::FullCheck => Some((4, n, "full check (every workload and seed)")),
        Stage::Timing => Some((5, n, "timing against XLA")),
        Stage::Policy | Stage::Done => None,
    }
}

/// Shows an evaluation's stages: in a log one line per stage for `eval`
/// (`lines`), on a terminal the bar's message for every job.
pub(crate) fn judge_hook(
    progress: &Progress,
    timing: bool,
    lines: bool,
) -> ksmith_judge::StageHook {
    let p = progress.clone();
    Box::new(move |solution, stage| {
        let Some((k, n, name)) = stage_step(stage, timing) else {
            return;
        };
        if lines {
            p.set_total(n);
            p.at(
                k,
                &format!("{}: {name}", ksmith_task::escape::one_line(solution)),
            );
        } else {
            p.activity(&format!(
                "{}: {name}",
                ksmith_task::escape::one_line(solution)
            ));
        }
    })
}
