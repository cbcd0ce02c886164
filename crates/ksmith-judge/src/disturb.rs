//! What else ran while a side was timed. A busy machine is a bias, not only noise: an OpenMP
//! kernel's join barrier waits for a descheduled thread, while XLA's pool lets any running
//! thread take the work. So every timed turn (the baseline's, the candidate's) is read from
//! /proc before and after: the timed process's threads' run-queue wait (`schedstat`'s second
//! field: time runnable but not running) and involuntary context switches, the machine's steal
//! time and runnable tasks. A round with either side disturbed beyond a threshold is dropped and
//! timed again (at most [`REDO_CAP`] times per workload); the figures stay in the result.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A turn is disturbed when its threads waited for a core longer than this share of its timed
/// time (beyond the wake-up allowance below). A neighbour busy on every core makes it 0.5 to
/// 1.0 (each thread runs half the time); a quiet 2-vCPU VM shows a few percent.
pub const WAIT_SHARE: f64 = 0.10;
/// Run-queue wait every call may have on a quiet machine: a stopped process's threads are
/// woken for each call (SIGCONT, the channel byte, OpenMP's workers) and wait a little for a
/// core each time.
pub const WAKE_ALLOW_NS: u64 = 150_000;
/// A turn is disturbed when the hypervisor took more than this share of the machine's time.
pub const STEAL_SHARE: f64 = 0.10;
/// Most rounds of one workload dropped and timed again; beyond, disturbed rounds are kept and
/// the result says the machine never became quiet enough.
pub const REDO_CAP: usize = 8;
/// Disturbed rounds in a row after which the machine is taken to be busy for now: redoing
/// more would only multiply the time (every timed test of a suite running in parallel paid
/// 8 redos per workload), so later disturbed rounds are kept and said.
pub const BUSY_AFTER: usize = 3;

/// Counters of a set of threads and of the machine at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    wait_ns: u64,
    involuntary: u64,
    steal_ticks: u64,
    at: Instant,
}

/// Sum over `tids` of run-queue wait (ns) and involuntary switches; threads gone meanwhile
/// count nothing.
fn thread_counters(tids: &[i32]) -> (u64, u64) {
    let (mut wait, mut inv) = (0u64, 0u64);
    for t in tids {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{t}/schedstat")) {
            wait += s
                .split_whitespace()
                .nth(1)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{t}/status")) {
            inv += s
                .lines()
                .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    (wait, inv)
}

/// The machine's steal ticks (the `cpu` line's eighth value) and runnable tasks
/// (`procs_running`) from /proc/stat; zeros where unreadable.
fn machine() -> (u64, u32) {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let steal = s
        .lines()
        .find(|l| l.starts_with("cpu "))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let running = s
        .lines()
        .find_map(|l| l.strip_prefix("procs_running"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (steal, running)
}

impl Probe {
    /// Reads the counters of `tids` and the machine now.
    pub(crate) fn now(tids: &[i32]) -> Probe {
        let (wait_ns, involuntary) = thread_counters(tids);
        let (steal_ticks, _) = machine();
        Probe {
            wait_ns,
            involuntary,
            steal_ticks,
            at: Instant::now(),
        }
    }

    /// The turn from this probe to now for the same threads, `calls` timed calls of `timed_ns`
    /// in all.
    pub(crate) fn turn(&self, tids: &[i32], calls: usize, timed_ns: u64) -> Turn {
        let end = Probe::now(tids);
        let (_, running) = machine();
        let wall_ns = end.at.duration_since(self.at).as_nanos().max(1) as f64;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let tick_ns = 1e9 / clock_ticks() as f64;
        let wait_ns = end.wait_ns.saturating_sub(self.wait_ns);
        Turn {
            wait_ns,
            calls,
            timed_ns,
            involuntary: end.involuntary.saturating_sub(self.involuntary),
            steal_share: end.steal_ticks.saturating_sub(self.steal_ticks) as f64 * tick_ns
                / (wall_ns * cpus),
            // The judge itself is running while it reads.
            runnable: running.saturating_sub(1),
            others_seen: None,
        }
    }
}

/// Runnable tasks on the machine besides the judge's own reading thread, read while the
/// candidate is stopped (every thread of it confirmed stopped between timed calls): other
/// work the candidate cannot have made. Its own threads can make each other wait (a crowd
/// woken on purpose in the rounds it wants dropped: red team 2026-12-06,
/// `disturb_own_slow_rounds.c`), so its wait counts as disturbance only when other work was
/// seen during its turn.
pub(crate) fn others_runnable() -> u32 {
    machine().1.saturating_sub(1)
}

/// `USER_HZ`, the unit of /proc/stat's times.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// What else ran during one side's timed turn.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Turn {
    /// Run-queue wait of the side's threads, summed.
    pub wait_ns: u64,
    /// Timed calls in the turn.
    pub calls: usize,
    /// Their summed time.
    pub timed_ns: u64,
    /// Involuntary context switches of the side's threads.
    pub involuntary: u64,
    /// Share of the machine's time the hypervisor took.
    pub steal_share: f64,
    /// Other runnable tasks at the turn's end.
    pub runnable: u32,
    /// Runnable tasks of others seen around the turn: for the candidate's, while it was
    /// stopped between its calls; for the baseline's, just before it (the candidate stopped,
    /// the trusted process idle). A side's own threads waiting for each other is no
    /// disturbance. None: not sampled (the side's wait counts as it is).
    pub others_seen: Option<u32>,
}

impl Turn {
    /// Run-queue wait over timed time.
    pub(crate) fn wait_share(&self) -> f64 {
        self.wait_ns as f64 / self.timed_ns.max(1) as f64
    }

    /// Whether the turn was disturbed beyond the thresholds.
    pub(crate) fn disturbed(&self) -> bool {
        let allowed =
            WAIT_SHARE * self.timed_ns as f64 + (self.calls as u64 * WAKE_ALLOW_NS) as f64;
        // A candidate's wait with no other work seen is its own threads' doing.
        let by_others = self.others_seen.is_none_or(|n| n > 0);
        (self.wait_ns as f64 > allowed && by_others) || self.steal_share > STEAL_SHARE
    }
}

/// What else ran during one workload's timed rounds (kept in [`crate::WorkloadPerf`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Disturbances {
    /// Rounds dropped as disturbed and timed again.
    pub rounds_dropped: usize,
    /// Disturbed rounds kept because the redo cap was reached: the machine never became quiet
    /// enough, and no decision rests on these figures.
    pub rounds_disturbed_kept: usize,
    /// Median over kept rounds of the candidate's run-queue wait / its timed time.
    pub candidate_wait_share: f64,
    /// The same for the baseline.
    pub baseline_wait_share: f64,
    /// The candidate's involuntary context switches in kept rounds.
    pub candidate_involuntary_switches: u64,
    /// The baseline's involuntary context switches in kept rounds.
    pub baseline_involuntary_switches: u64,
    /// Largest share of the machine's time the hypervisor took in any round (steal).
    pub max_steal_share: f64,
    /// Most other runnable tasks seen at the end of a turn.
    pub max_runnable: u32,
}

/// Per-round records of a workload, summarized into [`Disturbances`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    pub dropped: usize,
    pub kept_disturbed: usize,
    /// Disturbed rounds in a row so far.
    in_a_row: usize,
    cand_wait: Vec<f64>,
    base_wait: Vec<f64>,
    cand_inv: u64,
    base_inv: u64,
    steal: f64,
    runnable: u32,
}

impl Record {
    /// Notes a round; returns whether to keep it (not disturbed, or the redo cap reached).
    pub(crate) fn round(&mut self, base: &Turn, cand: &Turn) -> bool {
        self.steal = self.steal.max(base.steal_share).max(cand.steal_share);
        self.runnable = self.runnable.max(base.runnable).max(cand.runnable);
        let disturbed = base.disturbed() || cand.disturbed();
        self.in_a_row = if disturbed { self.in_a_row + 1 } else { 0 };
        if disturbed && self.dropped < REDO_CAP && self.in_a_row <= BUSY_AFTER {
            self.dropped += 1;
            return false;
        }
        if disturbed {
            self.kept_disturbed += 1;
        }
        self.cand_wait.push(cand.wait_share());
        self.base_wait.push(base.wait_share());
        self.cand_inv += cand.involuntary;
        self.base_inv += base.involuntary;
        true
    }

    /// Whether a kept round was disturbed.
    pub(crate) fn never_quiet(&self) -> bool {
        self.kept_disturbed > 0
    }

    /// The summary for the result.
    pub(crate) fn summary(&self) -> Disturbances {
        let median = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(|a, b| a.total_cmp(b));
            s.get(s.len() / 2).copied().unwrap_or(0.0)
        };
        Disturbances {
            rounds_dropped: self.dropped,
            rounds_disturbed_kept: self.kept_disturbed,
            candidate_wait_share: median(&self.cand_wait),
            baseline_wait_share: median(&self.base_wait),
            candidate_involuntary_switches: self.cand_inv,
            baseline_involuntary_switches: self.base_inv,
            max_steal_share: self.steal,
            max_runnable: self.runnable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(wait_ms: f64, calls: usize, timed_ms: f64) -> Turn {
        Turn {
            wait_ns: (wait_ms * 1e6) as u64,
            calls,
            timed_ns: (timed_ms * 1e6) as u64,
            ..Turn::default()
        }
    }

    #[test]
    fn a_turn_is_disturbed_by_waiting_beyond_wake_ups_or_by_steal() {
        // 60 ms timed in 8 calls: 1.2 ms of wake-ups plus 6 ms allowed.
        assert!(!turn(5.0, 8, 60.0).disturbed());
        assert!(turn(30.0, 8, 60.0).disturbed(), "a neighbour on every core");
        // Tiny calls: their wake-ups are allowed even when they exceed the timed time.
        assert!(!turn(1.0, 10, 0.5).disturbed());
        let mut stolen = turn(0.0, 8, 60.0);
        stolen.steal_share = 0.3;
        assert!(stolen.disturbed());
    }

    #[test]
    fn a_candidates_wait_with_no_other_work_seen_is_its_own() {
        // Its own crowd of threads woken in the rounds it wants dropped: not a disturbance.
        let mut crowd = turn(30.0, 8, 60.0);
        crowd.others_seen = Some(0);
        assert!(!crowd.disturbed());
        // The same wait with another process runnable while it was stopped: disturbed.
        crowd.others_seen = Some(1);
        assert!(crowd.disturbed());
        // Steal is never the candidate's.
        let mut stolen = turn(0.0, 8, 60.0);
        stolen.others_seen = Some(0);
        stolen.steal_share = 0.3;
        assert!(stolen.disturbed());
    }

    #[test]
    fn disturbed_rounds_are_dropped_up_to_the_cap_then_kept_and_said() {
        let (quiet, busy) = (turn(0.1, 4, 40.0), turn(40.0, 4, 40.0));
        let mut r = Record::default();
        assert!(r.round(&quiet, &quiet));
        // Disturbances with quiet rounds between them: dropped up to the cap.
        for _ in 0..REDO_CAP {
            assert!(!r.round(&quiet, &busy), "dropped");
            assert!(r.round(&quiet, &quiet));
        }
        assert!(!r.never_quiet());
        assert!(r.round(&busy, &quiet), "kept past the cap");
        assert!(r.never_quiet());
        let s = r.summary();
        assert_eq!((s.rounds_dropped, s.rounds_disturbed_kept), (REDO_CAP, 1));
        assert!(
            s.baseline_wait_share < 0.5,
            "the median of mostly quiet rounds"
        );
    }

    #[test]
    fn a_machine_busy_round_after_round_is_not_waited_out() {
        let busy = turn(40.0, 4, 40.0);
        let quiet = turn(0.1, 4, 40.0);
        let mut r = Record::default();
        for _ in 0..BUSY_AFTER {
            assert!(!r.round(&quiet, &busy), "dropped");
        }
        // Busy round after round: kept (and said) instead of redone up to the cap.
        assert!(r.round(&quiet, &busy));
        assert!(r.never_quiet());
        assert_eq!(r.summary().rounds_dropped, BUSY_AFTER);
    }

    #[test]
    fn a_busy_thread_waits_for_a_core_in_schedstat() {
        // Our own thread's counters are readable (the figures come from real /proc files).
        let me = nix::unistd::gettid().as_raw();
        let p = Probe::now(&[me]);
        let t = p.turn(&[me], 1, 1_000_000);
        assert_eq!(t.calls, 1);
        assert!(t.steal_share >= 0.0);
    }
}
