//! Runs untrusted programs: own process group, scrubbed environment, rlimits, a private
//! working directory, network and PID namespaces where the kernel allows them, line-based
//! messages over pipes with wall-clock timeouts, and a guaranteed kill of everything it started.
//!
//! The child's stdin/stdout are the protocol pipes; its stderr goes to a log file in the
//! working directory (the child is expected to point its own stdout there too, so nothing a
//! candidate prints can be mistaken for a protocol message).

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Errors starting or talking to a sandboxed child.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// Program path.
        program: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// I/O on the sandbox directory or pipes failed.
    #[error("sandbox I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Resource limits and environment for one untrusted child.
#[derive(Debug, Clone)]
pub struct Limits {
    /// RLIMIT_CPU in seconds (all threads together).
    pub cpu_seconds: u64,
    /// RLIMIT_AS in bytes.
    pub address_space: u64,
    /// RLIMIT_FSIZE in bytes (caps logs and any file the child writes).
    pub file_size: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_NPROC (not enforced by Linux for root; the PID namespace contains forks then).
    pub processes: u64,
    /// Environment variables; everything else is removed.
    pub env: Vec<(String, String)>,
    /// Run inside fresh network and PID namespaces when the kernel allows it.
    pub isolate: bool,
    /// With `isolate`: also mount a private /proc for the PID namespace (perf refuses a PID
    /// namespace without one). Only used where [`Isolation::proc_namespace`] holds.
    pub own_proc: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 600,
            address_space: 8 << 30,
            file_size: 1 << 30,
            open_files: 256,
            processes: 256,
            env: Vec::new(),
            isolate: true,
            own_proc: false,
        }
    }
}

/// What isolation this machine allows, probed once per process.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Whether children get a private network namespace (no network).
    pub network_namespace: bool,
    /// Whether children get a private PID namespace (forks die with the child).
    pub pid_namespace: bool,
    /// Whether that PID namespace can also get its own /proc (`unshare --mount-proc`).
    pub proc_namespace: bool,
    /// Human-readable note (why isolation is unavailable, if it is).
    pub note: String,
}

const UNSHARE: &str = "unshare";
const UNSHARE_ARGS: [&str; 5] = ["--net", "--pid", "--fork", "--kill-child", "--"];
const UNSHARE_PROC_ARGS: [&str; 6] = [
    "--net",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--",
];

fn unshare_works(args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new(UNSHARE)
        .args(args)
        .arg("true")
        .stdin(Stdio::null())
        .output()
}

/// Probes (once) whether `unshare --net --pid --fork` works for this user.
pub fn isolation() -> &'static Isolation {
    static ISO: OnceLock<Isolation> = OnceLock::new();
    ISO.get_or_init(|| {
        match unshare_works(&UNSHARE_ARGS) {
            Ok(o) if o.status.success() => Isolation {
                network_namespace: true,
                pid_namespace: true,
                proc_namespace: unshare_works(&UNSHARE_PROC_ARGS).is_ok_and(|o| o.status.success()),
                note: "network and PID namespaces".into(),
            },
            Ok(o) => Isolation {
                network_namespace: false,
                pid_namespace: false,
                proc_namespace: false,
                note: format!(
                    "namespaces unavailable (unshare: {}); candidates keep network access and only their process group is killed",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            },
            Err(e) => Isolation {
                network_namespace: false,
                pid_namespace: false,
                proc_namespace: false,
                note: format!("namespaces unavailable (cannot run `unshare`: {e}); candidates keep network access"),
            },
        }
    })
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Normal exit with a code.
    Code(i32),
    /// Killed by a signal.
    Signal(i32),
    /// Still running after the grace period (then killed by us).
    Running,
}

/// Result of waiting for one message.
#[derive(Debug)]
pub enum Recv {
    /// A line from the child's protocol pipe.
    Line(String),
    /// The pipe closed (the child exited or crashed).
    Eof,
    /// No line within the timeout.
    Timeout,
}

/// Longest protocol line accepted; longer ones are a protocol violation.
const MAX_LINE: usize = 1 << 20;

/// A running untrusted child.
pub struct Sandboxed {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Option<String>>,
    dir: tempfile::TempDir,
    log: PathBuf,
    exit: Option<Exit>,
}

impl Sandboxed {
    /// Starts `program args` in a fresh temp dir with the given limits.
    pub fn spawn(
        program: &Path,
        args: &[String],
        limits: &Limits,
    ) -> Result<Sandboxed, SandboxError> {
        let dir = tempfile::Builder::new().prefix("ksmith-sbx-").tempdir()?;
        let log = dir.path().join("output.log");
        let log_file = std::fs::File::create(&log)?;
        let iso = isolation();
        let mut cmd = if limits.isolate && iso.pid_namespace {
            let mut c = Command::new(UNSHARE);
            if limits.own_proc && iso.proc_namespace {
                c.args(UNSHARE_PROC_ARGS);
            } else {
                c.args(UNSHARE_ARGS);
            }
            c.arg(program).args(args);
            c
        } else {
            let mut c = Command::new(program);
            c.args(args);
            c
        };
        cmd.current_dir(dir.path())
            .env_clear()
            .env("HOME", dir.path())
            .env("TMPDIR", dir.path())
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .envs(limits.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .process_group(0);
        let l = limits.clone();
        // SAFETY: only async-signal-safe calls (prctl, getrlimit, setrlimit) run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Never ask for more than the current hard limit (raising it needs privileges).
                let set = |r, soft: u64, hard: u64| -> std::io::Result<()> {
                    let (_, cur_hard) = getrlimit(r).map_err(std::io::Error::from)?;
                    setrlimit(r, soft.min(cur_hard), hard.min(cur_hard))
                        .map_err(std::io::Error::from)
                };
                // If ksmith dies (even by SIGKILL), the child dies too; with namespaces,
                // unshare's --kill-child then takes the whole namespace down.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                set(Resource::RLIMIT_CORE, 0, 0)?;
                // The soft CPU limit raises SIGXCPU; the hard limit one second later kills.
                set(
                    Resource::RLIMIT_CPU,
                    l.cpu_seconds,
                    l.cpu_seconds.saturating_add(1),
                )?;
                set(Resource::RLIMIT_AS, l.address_space, l.address_space)?;
                set(Resource::RLIMIT_FSIZE, l.file_size, l.file_size)?;
                set(Resource::RLIMIT_NOFILE, l.open_files, l.open_files)?;
                set(Resource::RLIMIT_NPROC, l.processes, l.processes)?;
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| SandboxError::Spawn {
            program: program.display().to_string(),
            source: e,
        })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match (&mut r)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut buf)
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if buf.len() > MAX_LINE => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        if tx.send(Some(line)).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(None);
        });
        Ok(Sandboxed {
            child,
            stdin,
            lines: rx,
            dir,
            log,
            exit: None,
        })
    }

    /// The child's private working directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Sends one protocol line.
    pub fn send(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin closed"))?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()
    }

    /// Waits up to `timeout` for the next protocol line.
    pub fn recv(&mut self, timeout: Duration) -> Recv {
        match self.lines.recv_timeout(timeout) {
            Ok(Some(l)) => Recv::Line(l),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => Recv::Eof,
            Err(RecvTimeoutError::Timeout) => Recv::Timeout,
        }
    }

    /// Waits up to `grace` for the child to exit by itself, then kills the whole group.
    pub fn finish(&mut self, grace: Duration) -> Exit {
        if let Some(e) = self.exit {
            return e;
        }
        self.stdin = None;
        let deadline = Instant::now() + grace;
        let exit = loop {
            match self.child.try_wait() {
                Ok(Some(st)) => break status_to_exit(st),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => break Exit::Running,
            }
        };
        self.kill_group();
        self.exit = Some(exit);
        exit
    }

    /// Kills the child's process group at once.
    pub fn kill(&mut self) {
        self.finish(Duration::ZERO);
    }

    fn kill_group(&mut self) {
        let pgid = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = self.child.wait();
    }

    /// The first and last `max / 2` bytes of the child's log (stdout and stderr).
    pub fn log(&self, max: usize) -> String {
        read_truncated(&self.log, max)
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.kill();
        }
    }
}

fn status_to_exit(st: std::process::ExitStatus) -> Exit {
    match (st.code(), st.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        _ => Exit::Code(-1),
    }
}

/// Reads a possibly huge file keeping only its head and tail.
pub fn read_truncated(path: &Path, max: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0) as usize;
    let mut out = Vec::new();
    if len <= max {
        let _ = f.read_to_end(&mut out);
        return String::from_utf8_lossy(&out).into_owned();
    }
    let half = max / 2;
    let mut head = vec![0; half];
    let _ = f.read_exact(&mut head);
    let mut tail = vec![0; half];
    let _ = f
        .seek(SeekFrom::End(-(half as i64)))
        .and_then(|_| f.read_exact(&mut tail));
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * half,
        String::from_utf8_lossy(&tail)
    )
}

/// Name of a signal number (`SIGSEGV`), for result reasons.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limits: &Limits) -> Sandboxed {
        Sandboxed::spawn(Path::new("/bin/sh"), &["-c".into(), script.into()], limits).unwrap()
    }

    fn alive(pid: i32) -> bool {
        // A zombie is dead for our purposes.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[test]
    fn echoes_lines_and_scrubs_environment() {
        std::env::set_var("KSMITH_SECRET_TEST", "x");
        let mut s = sh(
            "read l; echo \"got $l ${KSMITH_SECRET_TEST:-scrubbed} $FOO\"",
            &Limits {
                env: vec![("FOO".into(), "bar".into())],
                ..Limits::default()
            },
        );
        s.send("hi").unwrap();
        match s.recv(Duration::from_secs(10)) {
            Recv::Line(l) => assert_eq!(l, "got hi scrubbed bar"),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.finish(Duration::from_secs(5)), Exit::Code(0));
    }

    #[test]
    fn timeout_kills_everything_including_detached_grandchildren() {
        let mut s = sh(
            "setsid sleep 1000 & echo $!; sleep 1000",
            &Limits::default(),
        );
        let Recv::Line(pid_in_ns) = s.recv(Duration::from_secs(10)) else {
            panic!("no pid")
        };
        assert!(pid_in_ns.parse::<i32>().is_ok());
        assert!(matches!(s.recv(Duration::from_millis(200)), Recv::Timeout));
        let before: Vec<i32> = sleepers();
        assert!(!before.is_empty());
        assert_eq!(s.finish(Duration::ZERO), Exit::Running);
        if isolation().pid_namespace {
            std::thread::sleep(Duration::from_millis(200));
            for p in before {
                assert!(!alive(p), "process {p} survived the sandbox");
            }
        }
    }

    #[test]
    fn own_proc_shows_only_the_namespace_processes() {
        if !isolation().proc_namespace {
            return; // the kernel refuses a private /proc here; nothing to check
        }
        let count = |own_proc: bool| -> usize {
            let mut s = sh(
                "ls /proc | grep -c '^[0-9]'",
                &Limits {
                    own_proc,
                    ..Limits::default()
                },
            );
            let n = match s.recv(Duration::from_secs(10)) {
                Recv::Line(l) => l.trim().parse().unwrap(),
                other => panic!("{other:?}"),
            };
            s.finish(Duration::from_secs(5));
            n
        };
        assert!(
            count(true) < 5,
            "a private /proc lists the namespace's few processes"
        );
        assert!(
            count(false) > 5,
            "the host's /proc lists the machine's processes"
        );
    }

    fn sleepers() -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .map(|c| c == "sleep\x001000\x00")
                    .unwrap_or(false)
            })
            .filter(|p| alive(*p))
            .collect()
    }

    #[test]
    fn reports_signals_and_caps_logs() {
        let mut s = sh(
            "trap '' XFSZ; yes PASSED | head -c 5000000 >&2; kill -SEGV $$",
            &Limits {
                file_size: 1 << 20,
                isolate: false,
                ..Limits::default()
            },
        );
        assert!(matches!(s.recv(Duration::from_secs(10)), Recv::Eof));
        assert_eq!(s.finish(Duration::from_secs(5)), Exit::Signal(11));
        assert_eq!(signal_name(11), "SIGSEGV");
        let log = s.log(1000);
        assert!(log.len() < 1200 && log.contains("omitted"), "{log}");
        let size = std::fs::metadata(s.dir().join("output.log")).unwrap().len();
        assert!(size <= 1 << 20, "log grew past RLIMIT_FSIZE: {size}");
    }

    #[test]
    fn network_is_unreachable_when_isolated() {
        if !isolation().network_namespace {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        // /proc/net/dev lists the interfaces of the caller's network namespace.
        let mut s = sh(
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '; echo",
            &Limits::default(),
        );
        let Recv::Line(l) = s.recv(Duration::from_secs(10)) else {
            panic!()
        };
        assert_eq!(l.trim(), "lo", "interfaces inside sandbox: {l}");
    }
}
