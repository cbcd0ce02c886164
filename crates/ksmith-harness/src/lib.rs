//! The Rust side of the Python harness: creates and maintains the Python environment, writes
//! the embedded harness package, and talks to the trusted server and the untrusted runner over
//! the versioned JSON-lines protocol.

mod env;

pub use env::{cache_root, harness_digest, PythonEnv};

use ksmith_sandbox::{Exit, Limits, Recv, Sandboxed};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::marker::PhantomData;
use std::time::Duration;

/// One command of the JSON-lines protocol: a request struct (its fields are the request's),
/// its `cmd` name and the reply it gets. Replies are read strictly (see [`parse_reply`]).
pub trait Command: Serialize {
    /// The request's `cmd` field.
    const NAME: &'static str;
    /// The reply's fields.
    type Reply: DeserializeOwned;
}

/// A reply with no fields.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// A request sent and not answered yet (see [`Peer::send`]).
#[derive(Debug)]
#[must_use = "a sent request's reply must be read before the next request"]
pub struct Pending<C: Command> {
    id: u64,
    req: Value,
    command: PhantomData<fn() -> C>,
}

/// The request as it goes on the wire: `cmd` and the command's fields.
pub fn request_value<C: Command>(command: &C) -> Result<Value, CallError> {
    let mut v = serde_json::to_value(command)
        .map_err(|e| CallError::Protocol(format!("request `{}`: {e}", C::NAME)))?;
    match &mut v {
        Value::Object(m) => {
            m.insert("cmd".into(), json!(C::NAME));
        }
        Value::Null => v = json!({"cmd": C::NAME}),
        _ => {
            return Err(CallError::Protocol(format!(
                "request `{}` is not an object",
                C::NAME
            )))
        }
    }
    Ok(v)
}

/// Reads a reply to `C` strictly: a field the reply type does not know, a missing one or one
/// of the wrong type is a protocol error that names the field (`ok` and `id` are the
/// transport's and are dropped first).
pub fn parse_reply<C: Command>(mut v: Value) -> Result<C::Reply, CallError> {
    if let Value::Object(m) = &mut v {
        m.remove("ok");
        m.remove("id");
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            CallError::Protocol(format!("reply to `{}`: {inner}", C::NAME))
        } else {
            CallError::Protocol(format!("reply to `{}`: field `{path}`: {inner}", C::NAME))
        }
    })
}

/// Protocol version this crate speaks; must equal `ksmith_harness.PROTOCOL`.
pub const PROTOCOL: u64 = 4;

/// Errors from the harness.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// Setting up Python failed.
    #[error("{0}")]
    Setup(String),
    /// The process could not be started.
    #[error(transparent)]
    Sandbox(#[from] ksmith_sandbox::SandboxError),
    /// A call failed.
    #[error("{0}")]
    Call(#[from] CallError),
}

/// Why a request got no good reply.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No reply within the timeout (the process was killed).
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The process ended before replying.
    #[error("process ended ({exit:?}) before replying")]
    Died {
        /// How it ended.
        exit: Exit,
        /// Its log, truncated.
        log: String,
    },
    /// The reply was not valid protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The process answered with an error.
    #[error("{message}")]
    Remote {
        /// Error message.
        message: String,
        /// Python traceback, if any.
        traceback: Option<String>,
    },
}

/// Bytes of a child's log kept in results.
pub const LOG_LIMIT: usize = 16 * 1024;

/// One JSON-lines peer (trusted server or untrusted runner).
pub struct Peer {
    proc: Sandboxed,
    hello: Value,
    /// Next request id; random start, so a candidate cannot predict ids to forge replies.
    next_id: u64,
    /// Stop every process of the peer between requests (untrusted runners): nothing it
    /// started can run while the baseline is timed or its outputs are checked.
    frozen_between_calls: bool,
    /// Confirmed stopped by [`Peer::stop`] and not resumed since.
    stopped: std::cell::Cell<bool>,
}

/// How long a stopped runner's threads may take to really stop (one inside a system call
/// runs on until it returns): honest ones take microseconds, or a few scheduler ticks on a
/// busy machine.
const STOP_WAIT: Duration = Duration::from_secs(10);

impl Peer {
    fn start(env: &PythonEnv, module: &str, limits: Limits) -> Result<Peer, HarnessError> {
        Peer::spawn(env, module, limits)?.greeted(env)
    }

    /// Starts the process and sends its opening `hello`; [`Starting::greeted`] reads the
    /// reply, so whatever the caller does meanwhile overlaps the interpreter's start.
    fn spawn(env: &PythonEnv, module: &str, limits: Limits) -> Result<Starting, HarnessError> {
        let args = vec![
            "-s".to_string(),
            "-B".into(),
            "-m".into(),
            format!("ksmith_harness.{module}"),
        ];
        let gone = |e: HarnessError| env.gone().map_or(e, HarnessError::Setup);
        let proc = Sandboxed::spawn(&env.python, &args, &limits).map_err(|e| gone(e.into()))?;
        let mut peer = Peer {
            proc,
            hello: Value::Null,
            next_id: random_u64(),
            frozen_between_calls: false,
            stopped: Default::default(),
        };
        let hello = json!({"cmd": "hello"});
        let id = peer.send_request(&hello).map_err(|e| gone(e.into()))?;
        Ok(Starting {
            peer,
            module: module.to_string(),
            hello: (hello, id),
        })
    }

    /// Sends a typed command and reads its typed reply. On timeout or death the process is
    /// killed; a reply that does not parse is a protocol error naming the field.
    pub fn ask<C: Command>(
        &mut self,
        command: &C,
        timeout: Duration,
    ) -> Result<C::Reply, CallError> {
        let pending = self.send(command)?;
        self.receive(pending, timeout)
    }

    /// Sends a typed command; its reply is read by [`Peer::receive`].
    pub fn send<C: Command>(&mut self, command: &C) -> Result<Pending<C>, CallError> {
        let req = request_value(command)?;
        let id = self.send_request(&req)?;
        Ok(Pending {
            id,
            req,
            command: PhantomData,
        })
    }

    /// Reads the typed reply to a command sent with [`Peer::send`].
    pub fn receive<C: Command>(
        &mut self,
        pending: Pending<C>,
        timeout: Duration,
    ) -> Result<C::Reply, CallError> {
        let v = self.recv_reply(&pending.req, pending.id, timeout)?;
        parse_reply::<C>(v)
    }

    /// Sends a request and waits for its reply. On timeout or death the process is killed.
    pub fn call(&mut self, req: &Value, timeout: Duration) -> Result<Value, CallError> {
        let id = self.send_request(req)?;
        self.recv_reply(req, id, timeout)
    }

    /// Sends a request (thawing the peer first); the reply is read by [`Peer::recv_reply`].
    pub fn send_request(&mut self, req: &Value) -> Result<u64, CallError> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut req = req.clone();
        req["id"] = json!(id);
        self.thaw();
        if self.proc.send(&req.to_string()).is_err() {
            return Err(self.died());
        }
        Ok(id)
    }

    /// Waits for the reply to request `id` (sent as `req`); freezes the peer afterwards when
    /// it is an untrusted runner.
    pub fn recv_reply(
        &mut self,
        req: &Value,
        id: u64,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let start = std::time::Instant::now();
        self.thaw();
        let mut reply = self.recv_inner(id, timeout);
        if self.frozen_between_calls {
            if let Err(e) = self.stop() {
                reply = Err(e);
            }
        }
        if std::env::var_os("KSMITH_TRACE_CALLS").is_some() {
            eprintln!(
                "[harness] {} {:.1} ms",
                req["cmd"].as_str().unwrap_or("?"),
                start.elapsed().as_secs_f64() * 1e3
            );
        }
        reply
    }

    fn recv_inner(&mut self, id: u64, timeout: Duration) -> Result<Value, CallError> {
        match self.proc.recv(timeout) {
            Recv::Line(l) => {
                let v: Value = serde_json::from_str(&l).map_err(|e| {
                    self.proc.kill();
                    CallError::Protocol(format!("unparseable reply ({e}): {}", truncate(&l, 200)))
                })?;
                if v.get("id").and_then(Value::as_u64) != Some(id) {
                    self.proc.kill();
                    return Err(CallError::Protocol(format!(
                        "reply does not answer request {id} (a line on the harness channel that the harness did not write): {}",
                        truncate(&l, 200)
                    )));
                }
                if v.get("ok").and_then(Value::as_bool) == Some(true) {
                    Ok(v)
                } else {
                    Err(CallError::Remote {
                        message: v
                            .get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown error")
                            .to_string(),
                        traceback: v
                            .get("traceback")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    })
                }
            }
            Recv::Eof => Err(self.died()),
            Recv::Timeout => {
                self.proc.kill();
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// Why the process ended, when it has (else None): for waits that see no end-of-file.
    pub fn ended(&mut self) -> Option<CallError> {
        self.proc.has_exited().then(|| self.died())
    }

    fn died(&mut self) -> CallError {
        let exit = self.proc.finish(Duration::from_secs(5));
        CallError::Died {
            exit,
            log: self.proc.log(LOG_LIMIT),
        }
    }

    /// The timing channel of an untrusted runner (the judge's clock for each timed call).
    pub fn channel(&mut self) -> Option<&mut ksmith_sandbox::TimingChannel> {
        self.proc.channel()
    }

    /// The directory of files the judge maps with the peer (untrusted runners).
    pub fn shared_dir(&self) -> Option<&std::path::Path> {
        self.proc.shared_dir()
    }

    /// Where the peer sees [`Peer::shared_dir`].
    pub fn shared_dir_in_child(&self) -> Option<&std::path::Path> {
        self.proc.shared_dir_in_child()
    }

    /// At most `max` bytes of a file the peer wrote in its directory, read safely.
    pub fn read_private(&self, name: &str, max: usize) -> Option<String> {
        self.proc.read_private(name, max)
    }

    /// Stops every process of the peer (SIGSTOP to its process group) without waiting for
    /// them: for trusted peers, whose threads are only kept off the cores.
    pub fn freeze(&self) {
        self.proc.freeze();
    }

    /// Stops every process of an untrusted peer and waits until each of its threads has
    /// stopped, so that nothing of the candidate runs while the judge times the baseline or
    /// reads its outputs. Returns when a thread was last seen still running, if one was (the
    /// judge's call trace shows it). A thread still running after [`STOP_WAIT`]
    /// (inside some endless system call) gets the peer killed and is a protocol violation.
    pub fn stop(&mut self) -> Result<Option<std::time::SystemTime>, CallError> {
        if self.stopped.get() {
            return Ok(None);
        }
        match self.proc.freeze_confirmed(STOP_WAIT) {
            Ok(seen) => {
                self.stopped.set(true);
                Ok(seen)
            }
            Err(r) => Err(CallError::Protocol(format!(
                "thread {} of the candidate was still running (state {}) {} s after the judge stopped it: a candidate must not work while the judge does",
                r.tid,
                r.state,
                STOP_WAIT.as_secs()
            ))),
        }
    }

    /// Every thread id of the peer's processes (host namespace), for its scheduler counters.
    pub fn thread_ids(&mut self) -> Vec<i32> {
        self.proc.thread_ids()
    }

    /// Lets the peer's processes run again.
    pub fn thaw(&self) {
        self.stopped.set(false);
        self.proc.thaw();
    }

    /// Kills the process (after a timing-channel violation, say).
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// The process's reply to the opening `hello` (versions, protocol).
    pub fn hello(&self) -> &Value {
        &self.hello
    }

    /// The process's private directory, as the judge reaches it.
    pub fn dir(&self) -> &std::path::Path {
        self.proc.dir()
    }

    /// Whether the kernel killed a process of this sandbox for going over its memory limit.
    pub fn memory_exceeded(&self) -> bool {
        self.proc.memory_exceeded()
    }

    /// The process's private directory, where it sees it (paths sent to it use this).
    pub fn dir_in_child(&self) -> &std::path::Path {
        self.proc.dir_in_child()
    }

    /// The process's log (stdout and stderr), truncated.
    pub fn log(&self) -> String {
        self.proc.log(LOG_LIMIT)
    }

    /// Asks the process to exit, then kills whatever is left.
    pub fn shutdown(mut self) {
        let _ = self.proc.send(&json!({"cmd": "shutdown"}).to_string());
        self.proc.finish(Duration::from_secs(2));
    }
}

/// 64 random bits from the OS (falls back to time and pid).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ ((std::process::id() as u64) << 32)
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// glibc malloc settings for the trusted server. XLA allocates each output afresh: with glibc's
/// adaptive defaults the same jitted call flips between reusing a freed buffer (0 page faults)
/// and fresh pages (one fault per 4 KiB: 3.5x slower for a 29 MB output) depending on allocator
/// history. One arena, no mmap'd chunks (a large array freed and allocated again would otherwise
/// be fresh, zeroed pages every time: most of the trusted side's kernel time in re-checks of
/// memory-bound tasks) and no trimming keep it in the steady state a long-running program sees,
/// where the candidate also writes into an existing buffer.
pub const STEADY_MALLOC: &str =
    "glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736";

/// Starts the trusted server (reference, checks, baseline). Not sandboxed: it runs our code
/// and the task's reference only. `memory`: its memory limit in bytes (`Some(0)`: none; `None`:
/// physical memory on the CPU backend), which it sets on itself (see `trusted._limit_memory`).
/// `xla_cache`: where it keeps compiled programs across processes (a directory no candidate
/// can write: a planted executable would be the reference).
pub fn start_trusted(
    env: &PythonEnv,
    memory: Option<u64>,
    xla_cache: Option<&std::path::Path>,
) -> Result<Peer, HarnessError> {
    let memory = memory.map_or("auto".to_string(), |b| b.to_string());
    let cache = xla_cache.map(|p| p.display().to_string());
    let mut extra = vec![
        ("GLIBC_TUNABLES", STEADY_MALLOC),
        ("KSMITH_TRUSTED_MEMORY_BYTES", memory.as_str()),
    ];
    if let Some(c) = &cache {
        extra.push(("KSMITH_XLA_CACHE_DIR", c.as_str()));
    }
    let limits = Limits {
        cpu_seconds: 1 << 30,
        address_space: u64::MAX,
        file_size: u64::MAX,
        open_files: 4096,
        processes: u64::MAX,
        env: env.process_env(&extra),
        isolate: false,
        nice: 10,
        ..Limits::default()
    };
    Peer::start(env, "trusted", limits)
}

/// Starts an untrusted runner with the given limits; `threads` fixes the kernel's OpenMP threads.
pub fn start_runner(env: &PythonEnv, limits: Limits, threads: usize) -> Result<Peer, HarnessError> {
    spawn_runner(env, limits, threads)?.greeted(env)
}

/// A peer whose process is started and greeted, its reply not read yet.
pub struct Starting {
    peer: Peer,
    module: String,
    hello: (Value, u64),
}

impl Starting {
    /// Waits for the reply to `hello` and checks the protocol; an untrusted runner is
    /// stopped afterwards until its first request.
    pub fn greeted(mut self, env: &PythonEnv) -> Result<Peer, HarnessError> {
        let gone = |e: HarnessError| env.gone().map_or(e, HarnessError::Setup);
        let (req, id) = &self.hello;
        let hello = self
            .peer
            .recv_reply(req, *id, Duration::from_secs(120))
            .map_err(|e| gone(e.into()))?;
        let proto = hello.get("protocol").and_then(Value::as_u64);
        if proto != Some(PROTOCOL) {
            return Err(HarnessError::Setup(format!(
                "harness protocol mismatch: ksmith speaks {PROTOCOL}, {} answered {proto:?}",
                self.module
            )));
        }
        self.peer.hello = hello;
        Ok(self.peer)
    }

    /// The process's private directory, as the judge reaches it (see [`Peer::dir`]).
    pub fn dir(&self) -> &std::path::Path {
        self.peer.dir()
    }

    /// Where the process sees [`Starting::dir`].
    pub fn dir_in_child(&self) -> &std::path::Path {
        self.peer.dir_in_child()
    }
}

/// Starts the sandboxed runner without waiting for it to answer (see [`start_runner`]): the
/// caller builds the candidate meanwhile.
pub fn spawn_runner(
    env: &PythonEnv,
    mut limits: Limits,
    threads: usize,
) -> Result<Starting, HarnessError> {
    let t = threads.to_string();
    let mut extra = vec![
        ("OMP_NUM_THREADS", t.as_str()),
        ("OMP_PROC_BIND", "false"),
        ("OPENBLAS_NUM_THREADS", "1"),
        ("MKL_NUM_THREADS", "1"),
    ];
    let guard = env.allocguard.as_ref().map(|p| p.display().to_string());
    if let Some(g) = &guard {
        extra.push(("LD_PRELOAD", g.as_str()));
    }
    limits.env = env.process_env(&extra);
    limits.view.read.extend(env.runner_view());
    limits.view.endless_devices = true;
    limits.timing_channel = true;
    limits.shared_dir = true;
    let mut starting = Peer::spawn(env, "runner", limits)?;
    // Frozen from its reply to `hello` on: nothing it starts runs unasked.
    starting.peer.frozen_between_calls = true;
    Ok(starting)
}

/// Starts the trusted side of `ksmith verify-export` (`exports.py`, role `checker`): it draws
/// inputs, computes references and checks outputs, and never builds or loads a kernel. Not
/// sandboxed, like the trusted server.
pub fn start_export_checker(env: &PythonEnv) -> Result<Peer, HarnessError> {
    let limits = Limits {
        cpu_seconds: 1 << 30,
        address_space: u64::MAX,
        file_size: u64::MAX,
        open_files: 4096,
        processes: u64::MAX,
        env: env.process_env(&[("KSMITH_EXPORT_ROLE", "checker")]),
        isolate: false,
        ..Limits::default()
    };
    Peer::start(env, "exports", limits)
}

/// Starts the untrusted side of `ksmith verify-export` (`exports.py`, role `runner`) in the
/// judge's sandbox with the given limits (the caller adds the export to its view): it builds
/// one exported kernel the way the package does, calls it, and writes raw outputs in its
/// private directory. Stopped between requests, like the judge's runner.
pub fn start_export_runner(
    env: &PythonEnv,
    mut limits: Limits,
    threads: usize,
) -> Result<Peer, HarnessError> {
    let t = threads.to_string();
    limits.env = env.process_env(&[
        ("KSMITH_EXPORT_ROLE", "runner"),
        ("OMP_NUM_THREADS", t.as_str()),
        ("OMP_PROC_BIND", "false"),
        ("OPENBLAS_NUM_THREADS", "1"),
        ("MKL_NUM_THREADS", "1"),
    ]);
    limits.isolate = true;
    limits.view.read.extend(env.runner_view());
    limits.view.endless_devices = true;
    let mut starting = Peer::spawn(env, "exports", limits)?;
    starting.peer.frozen_between_calls = true;
    starting.greeted(env)
}

/// Name of the marker file the allocation guard writes in the runner's directory.
pub const ALLOC_FAILED_MARKER: &str = "ksmith-alloc-failed";

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn peer(script: &str, first_id: u64) -> Peer {
        let limits = Limits {
            isolate: false,
            ..Limits::default()
        };
        let proc =
            Sandboxed::spawn(Path::new("/bin/sh"), &["-c".into(), script.into()], &limits).unwrap();
        Peer {
            proc,
            hello: Value::Null,
            next_id: first_id,
            frozen_between_calls: false,
            stopped: Default::default(),
        }
    }

    #[test]
    fn a_reply_must_carry_the_request_id() {
        let mut p = peer("read l; echo '{\"ok\": true, \"id\": 42, \"x\": 1}'", 42);
        assert_eq!(
            p.call(&json!({"cmd": "x"}), Duration::from_secs(10))
                .unwrap()["x"],
            1
        );
    }

    #[test]
    fn a_forged_line_with_another_id_is_a_protocol_violation() {
        // What a candidate writing a fake "success" onto the channel would produce.
        let mut p = peer(
            "read l; echo '{\"ok\": true, \"id\": 7, \"samples_ns\": [1]}'; sleep 5",
            42,
        );
        match p.call(&json!({"cmd": "time"}), Duration::from_secs(10)) {
            Err(CallError::Protocol(m)) => assert!(m.contains("does not answer request 42"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn remote_errors_and_garbage_are_reported() {
        let mut p = peer("read l; echo '{\"ok\": false, \"id\": 5, \"error\": \"boom\"}'; read l; echo 'PASSED 100x'", 5);
        assert!(
            matches!(p.call(&json!({"cmd": "a"}), Duration::from_secs(10)), Err(CallError::Remote { message, .. }) if message == "boom")
        );
        assert!(matches!(
            p.call(&json!({"cmd": "b"}), Duration::from_secs(10)),
            Err(CallError::Protocol(_))
        ));
    }
}
