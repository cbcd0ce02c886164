//! Confirming that a sandbox really stopped. SIGSTOP acts on a thread only when it next
//! returns to user mode: one inside a long system call (populating a large mapping, copying a
//! file, zeroing pages) keeps running, taking cores and memory bandwidth from whatever the
//! judge does next, such as timing the baseline. So the judge waits until the kernel reports
//! every thread of the sandbox as stopped.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// The most processes on the machine whose `stat` files a watch keeps open.
const MAX_KEPT_PROCS: usize = 512;

/// How a sandbox's threads are found.
pub(crate) enum Members<'a> {
    /// The sandbox's own cgroup lists them all (its processes cannot leave it).
    Cgroup(&'a Path, &'static str),
    /// No cgroup: every process of the sandbox keeps its process group (`setpgid` and
    /// `setsid` are refused inside), so the group's processes, found in /proc.
    Group(i32),
}

/// A thread of the sandbox that had not stopped when the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StillRunning {
    /// Its thread id (host namespace).
    pub tid: i32,
    /// Its state letter from /proc (`R` running, `D` uninterruptible, ...).
    pub state: char,
}

/// The state letter and process group from the text of `/proc/ID/stat` (the command name, in
/// parentheses, may itself hold spaces and parentheses, so fields are counted from the last
/// closing one).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether a thread in this state runs no more: stopped (`T`), stopped by a tracer (`t`), or
/// gone (`Z`, `X`, `x`).
fn at_rest(state: char) -> bool {
    matches!(state, 'T' | 't' | 'Z' | 'X' | 'x')
}

/// What waits for a stop keep open between them: every thread's `stat` file (read again from
/// the start, one system call instead of three: the judge waits after every timed call).
#[derive(Default)]
pub(crate) struct Watch {
    stats: HashMap<i32, File>,
    /// Without a cgroup: every process's `stat` file, for its process group.
    procs: HashMap<i32, File>,
}

impl Watch {
    /// The state of thread `tid`; `None` once it is gone.
    fn state_of(&mut self, tid: i32) -> Option<char> {
        Self::stat(&mut self.stats, tid).map(|(s, _)| s)
    }

    /// State and process group of `id` from its `stat` file, kept open in `files`. A kept
    /// file whose task ended reads nothing (its id may have gone to a new task): then the
    /// file is opened anew once.
    fn stat(files: &mut HashMap<i32, File>, id: i32) -> Option<(char, i32)> {
        for fresh in [false, true] {
            if fresh || !files.contains_key(&id) {
                let f = File::open(format!("/proc/{id}/stat")).ok()?;
                files.insert(id, f);
            }
            let f = files.get(&id)?;
            let mut line = [0u8; 512];
            if let Ok(n @ 1..) = f.read_at(&mut line, 0) {
                return parse_stat(&String::from_utf8_lossy(&line[..n]));
            }
            files.remove(&id);
        }
        None
    }

    /// Every thread id of the sandbox right now.
    pub(crate) fn threads(&mut self, members: &Members) -> io::Result<Vec<i32>> {
        match members {
            Members::Cgroup(dir, file) => {
                // Opened anew each time: cgroup v1 keeps the list an open file first read.
                let mut list = String::new();
                File::open(dir.join(file))?.read_to_string(&mut list)?;
                Ok(list.lines().filter_map(|l| l.trim().parse().ok()).collect())
            }
            Members::Group(pgid) => {
                let pids: HashSet<i32> = std::fs::read_dir("/proc")?
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                // Every process's file is kept open too (the whole machine's: which ones are
                // in the group is what is being asked), unless the machine runs so many that
                // the judge's descriptors would run short; those of ended processes are closed.
                self.procs.retain(|p, _| pids.contains(p));
                let keep = pids.len() <= MAX_KEPT_PROCS;
                let mut tids = Vec::new();
                for pid in pids {
                    let in_group =
                        Self::stat(&mut self.procs, pid).is_some_and(|(_, g)| g == *pgid);
                    if !keep {
                        self.procs.remove(&pid);
                    }
                    if !in_group {
                        continue;
                    }
                    // A process that ended meanwhile has no threads left to wait for.
                    if let Ok(ts) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                        tids.extend(
                            ts.flatten()
                                .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()),
                        );
                    }
                }
                Ok(tids)
            }
        }
    }

    /// The first thread of the sandbox not at rest, if any. The list is read anew each time:
    /// a thread created before the stop reached its creator is in it (and, created in a
    /// stopping group, stops before running any code of its own); a fork racing the stop is
    /// restarted by the kernel.
    fn first_running(&mut self, members: &Members) -> io::Result<Option<StillRunning>> {
        let tids = self.threads(members)?;
        // Files of threads that are gone are closed.
        let live: HashSet<i32> = tids.iter().copied().collect();
        self.stats.retain(|t, _| live.contains(t));
        Ok(tids.into_iter().find_map(|tid| {
            let state = self.state_of(tid)?;
            (!at_rest(state)).then_some(StillRunning { tid, state })
        }))
    }

    /// Waits until every thread of the sandbox is at rest, for at most `within`.
    pub(crate) fn wait_stopped(
        &mut self,
        members: &Members,
        within: Duration,
    ) -> io::Result<Waited> {
        let start = Instant::now();
        let mut seen = None;
        let mut pause = Duration::from_micros(20);
        loop {
            let Some(r) = self.first_running(members)? else {
                return Ok(Waited::Stopped(seen));
            };
            // Right after reading that thread's state: a lower bound on when it stopped,
            // which is what the judge charges to the call that left it running.
            seen = Some(SystemTime::now());
            let waited = start.elapsed();
            if waited >= within {
                return Ok(Waited::Running(r));
            }
            // Sleeping, not spinning: a runnable thread stops only once it gets a core, and on
            // a 2-core machine a judge spinning with `yield` delayed honest stops (median 0.19
            // ms after "f" instead of 0.16-0.18 ms).
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}

/// How a wait for a sandbox to stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// Every thread at rest; when one was last seen still running, if any was.
    Stopped(Option<SystemTime>),
    /// A thread was still running when the wait gave up.
    Running(StillRunning),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn stat_fields_survive_odd_command_names() {
        assert_eq!(parse_stat("42 (a) b) c) T 1 77 77 0"), Some(('T', 77)));
        assert_eq!(parse_stat("42 (x) R 1 5 5"), Some(('R', 5)));
        assert_eq!(parse_stat("42 (x"), None);
        assert!(at_rest('T') && at_rest('Z') && !at_rest('R') && !at_rest('D') && !at_rest('S'));
    }

    #[test]
    fn a_running_process_is_reported_until_it_is_stopped() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pgid = child.id() as i32;
        let members = Members::Group(pgid);
        let running = Watch::default()
            .wait_stopped(&members, Duration::ZERO)
            .expect("proc");
        assert!(
            matches!(running, Waited::Running(r) if r.tid == pgid),
            "a busy loop is running: {running:?}"
        );
        let sent = SystemTime::now();
        unsafe { libc::killpg(pgid, libc::SIGSTOP) };
        let waited = Watch::default()
            .wait_stopped(&members, Duration::from_secs(5))
            .expect("proc");
        let Waited::Stopped(seen) = waited else {
            panic!("not stopped within 5 s: {waited:?}");
        };
        assert!(seen.is_none_or(|t| t >= sent), "{seen:?} before the signal");
        let _ = child.kill();
        let _ = child.wait();
    }
}
