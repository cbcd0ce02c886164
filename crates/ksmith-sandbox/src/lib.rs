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
use std::io::{BufRead, BufReader, Read, Write};
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

mod cgroup;
mod child;
mod filter;
mod fsview;
mod stop;

pub use fsview::{kernel_abi as landlock_abi, FsView};
pub use stop::StillRunning;

/// Resource limits, environment and isolation for one untrusted child.
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
    /// RLIMIT_NPROC.
    pub processes: u64,
    /// Environment variables; everything else is removed.
    pub env: Vec<(String, String)>,
    /// Run behind every isolation layer this machine offers (see [`isolation`]); `false` only
    /// for our own trusted processes.
    pub isolate: bool,
    /// With `isolate`: also mount a private /proc for the PID namespace (perf needs one).
    pub own_proc: bool,
    /// With `isolate`: what the child may see besides the system and its private directory.
    pub view: FsView,
    /// With `isolate`: allow `perf_event_open` (the profiler's sampling run).
    pub profiling: bool,
    /// With `isolate`: allow `memfd_create` (GPU runtimes may use it). Memory files count
    /// toward no file system, only each toward the file-size limit.
    pub memory_files: bool,
    /// Allow changing files' modes, owners, times and extended attributes (the compiler: a
    /// linker marks its output executable). Without it seccomp refuses them, within the
    /// view or outside it.
    pub metadata_writes: bool,
    /// Give the child a timing channel: it reads "go" bytes on fd 3 and writes on fd 4.
    pub timing_channel: bool,
    /// Create a `shared` directory next to the private one, whose files the child may only
    /// read and write in place (see [`Sandboxed::shared_dir`]).
    pub shared_dir: bool,
    /// Working directory instead of the private one (it must be in `view.write`).
    pub cwd: Option<PathBuf>,
    /// With `isolate`: what every process of the child may hold together (memory, files in
    /// its in-memory directories, kernel memory charged to it), as a memory cgroup where this
    /// machine gives one ([`Isolation::memory_cgroup`]); over it, the kernel kills one of them.
    pub memory_bytes: Option<u64>,
    /// With `isolate` and a user namespace: the private directory is an in-memory file system
    /// of at most this many bytes (what the child writes there, and what the parent stages
    /// for it), so files cannot fill the disk; `None`: a directory on disk. /dev/shm is always
    /// one of [`SHM_BYTES`] there.
    pub scratch_bytes: Option<u64>,
    /// Scheduling niceness (0: unchanged). The trusted server runs niced: its idle thread
    /// pools must not take cores from a kernel being timed.
    pub nice: i32,
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
            view: FsView::default(),
            profiling: false,
            memory_files: false,
            metadata_writes: false,
            timing_channel: false,
            shared_dir: false,
            cwd: None,
            memory_bytes: None,
            scratch_bytes: None,
            nice: 0,
        }
    }
}

/// The isolation layers this machine offers untrusted code, probed once per process.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Own user namespace (an unprivileged uid, no capabilities after `exec`) with private
    /// network, IPC and PID namespaces.
    pub user_namespace: bool,
    /// Landlock ABI version enforced (0: Landlock unavailable): the filesystem view, TCP and
    /// signal/abstract-socket scoping.
    pub landlock_abi: i32,
    /// The seccomp filter installs.
    pub seccomp: bool,
    /// ksmith runs as root (then the user namespace is what takes the privileges away).
    pub root: bool,
    /// Whether the PID namespace can also get its own /proc (perf needs one).
    pub proc_namespace: bool,
    /// Whether a sandbox gets a memory cgroup (root with cgroup v1's memory controller, or a
    /// delegated cgroup v2 subtree): one limit for all its processes together.
    pub memory_cgroup: bool,
    /// One line per layer: what it is and whether it is active.
    pub note: String,
}

impl Isolation {
    /// Whether untrusted code runs unprivileged, behind a filesystem view and a system-call
    /// filter: the minimum the judge accepts without an explicit unsafe flag.
    pub fn complete(&self) -> bool {
        self.landlock_abi >= 1 && self.seccomp && (self.user_namespace || !self.root)
    }

    /// The layers as (name, active, what it stops), for `ksmith hw` and results.
    pub fn layers(&self) -> Vec<(&'static str, bool, &'static str)> {
        vec![
            (
                "user namespace",
                self.user_namespace,
                "candidate runs as an unmapped uid with no capabilities; own network (none), IPC and PID namespaces; every process dies with it",
            ),
            (
                "unprivileged",
                self.user_namespace || !self.root,
                "no root privileges over the host (no capabilities, cannot raise limits)",
            ),
            (
                "landlock",
                self.landlock_abi >= 1,
                "filesystem view: system read-only, own directory read-write, nothing else (store, caches, references, home, /proc); no TCP; no signals out",
            ),
            (
                "seccomp",
                self.seccomp,
                "refuses namespaces, mounts, ptrace, other processes' memory, bpf, keyrings, io_uring, perf, sockets, leaving the process group, SIGCONT, System V shared memory, memory files (CPU), larger socket buffers",
            ),
            (
                "memory cgroup",
                self.memory_cgroup,
                "one memory limit for all of a candidate's processes together, files in its in-memory directories included (without it, each process has only its own address-space limit)",
            ),
            (
                "rlimits",
                true,
                "CPU time, address space, file size, open files, processes; wall-clock timeout kills the process group",
            ),
        ]
    }
}

/// Starts `/bin/sh -c 'exit 0'` behind the given layers; whether that worked.
fn probe_spawn(userns: bool, landlock: bool, seccomp: bool, own_proc: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // The namespace must also allow the bind mounts every sandbox makes (see `spawn`).
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    for d in [&src, &dst] {
        std::fs::create_dir(d).map_err(|e| e.to_string())?;
    }
    let mut plan = plan_for(
        &Limits {
            own_proc,
            ..Limits::default()
        },
        dir.path(),
        &[(src, dst)],
        userns,
        landlock,
        seccomp,
    )?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "exit 0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: `enter` only makes system calls (see child.rs).
    unsafe {
        cmd.pre_exec(move || plan.enter());
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Probes (once) which isolation layers work here.
pub fn isolation() -> &'static Isolation {
    static ISO: OnceLock<Isolation> = OnceLock::new();
    ISO.get_or_init(|| {
        let root = nix::unistd::geteuid().is_root();
        let abi = fsview::kernel_abi();
        let userns = probe_spawn(true, false, false, false);
        let landlock = abi >= 1 && probe_spawn(false, true, false, false).is_ok();
        let seccomp = probe_spawn(false, false, true, false);
        let ns = userns.is_ok();
        let mut iso = Isolation {
            user_namespace: ns,
            landlock_abi: if landlock { abi } else { 0 },
            seccomp: seccomp.is_ok(),
            root,
            proc_namespace: ns && probe_spawn(true, false, false, true).is_ok(),
            memory_cgroup: cgroup::available(),
            note: String::new(),
        };
        let mut parts = Vec::new();
        for (name, on, _) in iso.layers() {
            parts.push(format!("{name} {}", if on { "on" } else { "OFF" }));
        }
        if let Err(e) = &userns {
            parts.push(format!("(user namespace: {e})"));
        }
        if let Err(e) = &seccomp {
            parts.push(format!("(seccomp: {e})"));
        }
        if landlock {
            parts.push(format!("(landlock ABI {abi})"));
        }
        iso.note = parts.join(", ");
        iso
    })
}

/// Prepares, in the parent, what the child will do before `exec`.
fn plan_for(
    limits: &Limits,
    private_dir: &Path,
    binds: &[(PathBuf, PathBuf)],
    userns: bool,
    landlock: bool,
    seccomp: bool,
) -> Result<child::ChildPlan, String> {
    // In-memory file systems (with a user namespace): /dev/shm always, the private
    // directory when asked; the child may write them whole and nothing more.
    let mut tmpfs = Vec::new();
    let mut chdir = None;
    if userns {
        if Path::new(SHM).is_dir() {
            tmpfs.push((c_path(Path::new(SHM))?, tmpfs_options(SHM_BYTES, SHM_FILES)));
        }
        if let Some(bytes) = limits.scratch_bytes {
            tmpfs.push((c_path(private_dir)?, tmpfs_options(bytes, SCRATCH_FILES)));
            chdir = Some(c_path(limits.cwd.as_deref().unwrap_or(private_dir))?);
        }
    }
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let ruleset = if landlock {
        Some(fsview::ruleset(&limits.view, private_dir)?)
    } else {
        None
    };
    // The same ruleset, for the rules the child adds once its file systems are mounted.
    let scratch_rule = match &ruleset {
        Some(rs) if !tmpfs.is_empty() => {
            let fd: Option<std::os::fd::OwnedFd> = rs
                .try_clone()
                .map_err(|e| format!("landlock ruleset: {e}"))?
                .into();
            fd.map(|fd| (fd, fsview::scratch_access()))
        }
        _ => None,
    };
    let filters = if seccomp {
        filter::programs(limits).map_err(|e| format!("seccomp filter: {e}"))?
    } else {
        Vec::new()
    };
    let binds = if userns {
        binds
            .iter()
            .map(|(a, b)| Ok((c_path(a)?, c_path(b)?)))
            .collect::<Result<_, String>>()?
    } else {
        Vec::new()
    };
    Ok(child::ChildPlan {
        userns,
        own_proc: userns && limits.own_proc,
        binds,
        tmpfs,
        chdir,
        scratch_rule,
        uid_map: format!("{} {uid} 1\n", child::INSIDE_ID).into_bytes(),
        gid_map: format!("{} {gid} 1\n", child::INSIDE_ID).into_bytes(),
        ruleset,
        filters,
        fds: Vec::new(),
    })
}

/// Opens `dir` as the child `pid` sees it (its in-memory private directory, in its own mount
/// namespace).
fn open_scratch(pid: u32, dir: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = Path::new(&format!("/proc/{pid}/root")).join(dir.strip_prefix("/").unwrap_or(dir));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(&path)?;
    Ok(f.into())
}

/// A pidfd for `pid` (Linux 5.3 on), readable once the process has exited; None where the
/// kernel has none (the channel then waits for its timeout, as before).
fn pidfd(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor this process now owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Size of a sandbox's /dev/shm (LLVM's OpenMP runtime keeps a small file there).
pub const SHM_BYTES: u64 = 64 << 20;

/// Most files in a sandbox's /dev/shm, and in its in-memory private directory: `size=` counts
/// data pages, not inodes (about 1 KiB of kernel memory each), and the default inode count is
/// half the machine's pages (a red-team kernel made a million empty files: 1 GiB).
const SHM_FILES: u32 = 4096;
const SCRATCH_FILES: u32 = 65536;

/// `mount` options of an in-memory file system of `bytes` and `files` inodes, only for its
/// owner.
fn tmpfs_options(bytes: u64, files: u32) -> std::ffi::CString {
    std::ffi::CString::new(format!(
        "size={},nr_inodes={files},mode=0700",
        bytes.max(1 << 20)
    ))
    .expect("no NUL in a number")
}

/// A path as the C string `mount` takes.
fn c_path(p: &Path) -> Result<std::ffi::CString, String> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("path with a NUL byte: {}", p.display()))
}

/// The parent's ends of a child's timing channel.
pub struct TimingChannel {
    go: std::fs::File,
    /// A datagram socket stamped by the kernel on arrival: when the child wrote each byte, not
    /// when the judge woke up to read it (which on a VM can be milliseconds later).
    done: std::os::fd::OwnedFd,
    /// The child's pidfd, readable once it has exited: a datagram socket gives no end-of-file,
    /// so without it a child that died mid-call would be waited for until the timeout.
    exited: Option<std::os::fd::OwnedFd>,
}

/// One byte from the child and when the kernel received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelByte {
    /// The byte (a datagram of any other length is reported as 0).
    pub byte: u8,
    /// Arrival time (CLOCK_REALTIME, from the kernel; the read time if it gave none).
    pub at: std::time::SystemTime,
}

impl TimingChannel {
    /// Sends bytes to the child (fd 3 there) in one write.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.go.write_all(bytes)
    }

    /// Waits up to `timeout` for one byte from the child (fd 4 there); `None` on timeout or
    /// as soon as the child is gone.
    pub fn recv(&mut self, timeout: Duration) -> Option<ChannelByte> {
        use std::os::fd::{AsFd, AsRawFd};
        let mut fds = vec![nix::poll::PollFd::new(
            self.done.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if let Some(p) = &self.exited {
            fds.push(nix::poll::PollFd::new(
                p.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            match nix::poll::poll(
                &mut fds,
                nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::NONE),
            ) {
                Ok(n) if n > 0 => {
                    let ready = |f: &nix::poll::PollFd| f.revents().is_some_and(|r| !r.is_empty());
                    // A byte sent just before exiting is still read.
                    if ready(&fds[0]) {
                        break;
                    }
                    return None;
                }
                Err(nix::errno::Errno::EINTR) if !left.is_zero() => continue,
                _ => return None,
            }
        }
        let mut data = [0u8; 16];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: msghdr points at live buffers of the given sizes for the duration of the call.
        let (n, stamp) = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control);
            let n = libc::recvmsg(self.done.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT);
            let mut stamp = None;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = Some(
                        std::time::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                    );
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            (n, stamp)
        };
        if n <= 0 {
            return None;
        }
        Some(ChannelByte {
            byte: if n == 1 { data[0] } else { 0 },
            at: stamp.unwrap_or_else(std::time::SystemTime::now),
        })
    }
}

/// A datagram socket pair for the channel's child-to-judge direction, the judge's end asking
/// the kernel to stamp arrivals; both ends at descriptors >= 10.
fn stamped_socketpair() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array, which we then own.
    let (a, b) = unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and an int option of the right size.
    let r = unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            a.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((lift_fd(a)?, lift_fd(b)?))
}

/// The same descriptor moved to a number >= 10, close-on-exec.
fn lift_fd(fd: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor that we own.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

fn shared_memory_dir() -> std::io::Result<tempfile::TempDir> {
    memory_tempdir("ksmith-shm-")
}

/// A temporary directory in memory (`/dev/shm`) where there is one, else in the system's
/// temporary directory. For data written while kernels are timed (buffers the judge and the
/// runner map, fresh inputs): files on disk are written back by kernel threads that preempt
/// the timed kernel (measured: 0.5 ms calls took 4-8 ms, two involuntary context switches).
///
/// The name carries the creating process's pid, so that what a killed ksmith left in memory
/// is found and removed by the next one (see [`sweep_stale_memory_dirs`]).
pub fn memory_tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    sweep_once();
    let prefix = format!("{prefix}{}-", std::process::id());
    let shm = Path::new(SHM);
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new().prefix(&prefix).tempdir_in(shm) {
            return Ok(d);
        }
    }
    tempfile::Builder::new().prefix(&prefix).tempdir()
}

const SHM: &str = "/dev/shm";

/// Removes `/dev/shm/ksmith-*-PID-*` directories of ours whose process is gone and that have
/// not changed for ten minutes (a ksmith killed with SIGKILL cannot clean up, and timing
/// buffers and fresh inputs take hundreds of megabytes of memory).
pub fn sweep_stale_memory_dirs() {
    sweep_in(Path::new(SHM), "ksmith-");
    // Sandboxes' private directories (on disk), left by a ksmith that was killed.
    sweep_in(&std::env::temp_dir(), SANDBOX_PREFIX);
}

/// Sweeps what killed processes left, once per process.
fn sweep_once() {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_stale_memory_dirs);
}

/// Prefix of a sandbox's private directory in the system's temporary directory.
const SANDBOX_PREFIX: &str = "ksmith-sbx-";

/// Removes `dir/PREFIX...-PID-*` directories of ours whose process is gone and that have not
/// changed for 10 minutes.
fn sweep_in(dir: &Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(prefix) {
            continue;
        }
        let Some(pid) = name.rsplit('-').nth(1).and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        let gone = matches!(
            nix::sys::signal::kill(Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if meta.is_dir() && meta.uid() == me && old && gone && pid > 0 {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Creates a pipe whose ends sit at descriptors >= 10 (so moving them to 3 and 4 in the
/// child cannot overwrite one another), close-on-exec in the parent.
fn high_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((lift_fd(r)?, lift_fd(w)?))
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
    /// Holds the private directory; removed with everything in it on drop.
    _base: tempfile::TempDir,
    /// The private directory, as this process (and the trusted one it starts) reaches it.
    work: PathBuf,
    /// Where the child sees it.
    work_in_child: PathBuf,
    /// With `Limits::scratch_bytes`: the child's in-memory private directory, held open (it
    /// lives in the child's mount namespace, so `work` names it through this descriptor, and
    /// it stays readable after the child is gone).
    _scratch: Option<std::os::fd::OwnedFd>,
    /// With `Limits::memory_bytes`, where the machine allows: the child's memory cgroup
    /// (dropped after the child, as fields drop after `Drop::drop` killed it).
    memory: Option<cgroup::MemoryCgroup>,
    /// The shared directory and the path the child sees it at.
    shared: Option<(tempfile::TempDir, PathBuf)>,
    log_reader: std::fs::File,
    exit: Option<Exit>,
    channel: Option<TimingChannel>,
    /// Files kept open to confirm stops (see [`Sandboxed::freeze_confirmed`]).
    watch: stop::Watch,
}

impl Sandboxed {
    /// Starts `program args` in a fresh temp dir with the given limits.
    pub fn spawn(
        program: &Path,
        args: &[String],
        limits: &Limits,
    ) -> Result<Sandboxed, SandboxError> {
        // base/work: the child's private directory (everything allowed); base/shared: files
        // the judge creates and maps, which the child may only read and write in place.
        // Named with our pid, so that a killed ksmith's directory is swept by the next one.
        sweep_once();
        hold_channel_numbers();
        let base = tempfile::Builder::new()
            .prefix(&format!("{SANDBOX_PREFIX}{}-", std::process::id()))
            .tempdir()?;
        let mut work = base.path().join("work");
        std::fs::create_dir(&work)?;
        let mut limits = limits.clone();
        let userns = limits.isolate && isolation().user_namespace;
        let mut binds = Vec::new();
        let shared = if limits.shared_dir {
            let dir = shared_memory_dir()?;
            limits.view.in_place.push(dir.path().to_path_buf());
            // In its own mount namespace the child sees the directory at base/shared, away
            // from the /dev/shm it may write (Landlock rights are inherited down the tree:
            // under a writable /dev/shm the judge's buffers could be truncated).
            let seen = if userns {
                let seen = base.path().join("shared");
                std::fs::create_dir(&seen)?;
                binds.push((dir.path().to_path_buf(), seen.clone()));
                seen
            } else {
                dir.path().to_path_buf()
            };
            Some((dir, seen))
        } else {
            None
        };
        // A private /dev/shm (an in-memory file system of its own, see `plan_for`): POSIX
        // shared memory works (LLVM's OpenMP runtime registers itself there and aborts
        // otherwise) without a channel to other sandboxes.
        let limits = &limits;
        let plan_scratch = userns && limits.scratch_bytes.is_some();
        let memory = match limits.memory_bytes.filter(|_| limits.isolate) {
            Some(bytes) => cgroup::MemoryCgroup::new(bytes)?,
            None => None,
        };
        let memory_procs = memory.as_ref().map(cgroup::MemoryCgroup::procs_fd);
        let log = work.join("output.log");
        // Readable too: the judge keeps a second descriptor of it to read the log.
        let log_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log)?;
        // The judge reads the log through this descriptor, never by path: the child can put
        // anything at that path (a link to a secret, a FIFO, /dev/zero).
        let log_reader = log_file.try_clone()?;
        let mut plan = if limits.isolate {
            let iso = isolation();
            Some(
                plan_for(
                    limits,
                    &work,
                    &binds,
                    iso.user_namespace,
                    iso.landlock_abi >= 1,
                    iso.seccomp,
                )
                .map_err(|e| SandboxError::Spawn {
                    program: program.display().to_string(),
                    source: std::io::Error::other(e),
                })?,
            )
        } else {
            None
        };
        let mut channel = None;
        let mut child_ends = Vec::new();
        if limits.timing_channel {
            use std::os::fd::AsRawFd;
            let (go_r, go_w) = high_pipe()?;
            let (done_r, done_w) = stamped_socketpair()?;
            let fds = vec![(go_r.as_raw_fd(), 3), (done_w.as_raw_fd(), 4)];
            match plan.as_mut() {
                Some(p) => p.fds = fds.clone(),
                None => {
                    plan = Some(child::ChildPlan {
                        userns: false,
                        own_proc: false,
                        binds: Vec::new(),
                        tmpfs: Vec::new(),
                        chdir: None,
                        scratch_rule: None,
                        uid_map: Vec::new(),
                        gid_map: Vec::new(),
                        ruleset: None,
                        filters: Vec::new(),
                        fds,
                    })
                }
            }
            channel = Some(TimingChannel {
                go: go_w.into(),
                done: done_r,
                exited: None,
            });
            child_ends = vec![go_r, done_w];
        }
        let mut cmd = Command::new(program);
        cmd.args(args);
        cmd.current_dir(limits.cwd.as_deref().unwrap_or(&work))
            .env_clear()
            .env("HOME", &work)
            .env("TMPDIR", &work)
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .envs(limits.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .process_group(0);
        let l = limits.clone();
        // The child inherits this process's descriptors until exec closes them (close-on-exec),
        // and its setup opens more after the limit is set: a limit below the highest number in
        // use here made that setup fail with EMFILE in a busy judge (many runners at once), a
        // judge error instead of a verdict. So the limit is at least that number plus room.
        let open_files = l.open_files.max(highest_open_fd().saturating_add(64));
        // SAFETY: only system calls (prctl, getrlimit, setrlimit, and the isolation steps in
        // child.rs, all prepared before the fork) run between fork and exec.
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
                set(Resource::RLIMIT_NOFILE, open_files, open_files)?;
                set(Resource::RLIMIT_NPROC, l.processes, l.processes)?;
                if l.nice != 0 && libc::setpriority(libc::PRIO_PROCESS, 0, l.nice) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Into its memory cgroup before anything else starts: every process it makes
                // is born there.
                if let Some(fd) = memory_procs {
                    cgroup::join(fd)?;
                }
                match plan.as_mut() {
                    Some(p) => p.enter(),
                    None => Ok(()),
                }
            });
        }
        let mut child = cmd.spawn().map_err(|e| SandboxError::Spawn {
            program: program.display().to_string(),
            source: e,
        })?;
        drop(child_ends);
        if let Some(ch) = channel.as_mut() {
            ch.exited = pidfd(child.id());
        }
        let work_in_child = work.clone();
        // spawn returns once the program is past exec (its error pipe closes then), so the
        // child's file systems are mounted.
        let scratch = if plan_scratch {
            let fd = open_scratch(child.id(), &work).map_err(|e| {
                let _ = child.kill();
                let _ = child.wait();
                SandboxError::Spawn {
                    program: program.display().to_string(),
                    source: e,
                }
            })?;
            use std::os::fd::AsRawFd;
            work = PathBuf::from(format!(
                "/proc/{}/fd/{}",
                std::process::id(),
                fd.as_raw_fd()
            ));
            Some(fd)
        } else {
            None
        };
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
            _base: base,
            work,
            work_in_child,
            _scratch: scratch,
            memory,
            shared,
            log_reader,
            exit: None,
            channel,
            watch: Default::default(),
        })
    }

    /// Whether the child has ended (without waiting).
    pub fn has_exited(&mut self) -> bool {
        self.exit.is_some() || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The timing channel, when the child was given one.
    pub fn channel(&mut self) -> Option<&mut TimingChannel> {
        self.channel.as_mut()
    }

    /// Stops every process of the child (SIGSTOP to its process group): nothing it started
    /// runs while the judge times the baseline or checks its outputs.
    pub fn freeze(&self) {
        if self.exit.is_none() {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGSTOP);
        }
    }

    /// Stops every process of the child and waits until the kernel reports each of its
    /// threads stopped: a thread inside a long system call runs on after the signal (see
    /// `stop.rs`). Returns when a thread was last seen still running (none: all were at rest
    /// at the first look). Gives up after `within`, killing everything the child started, and
    /// names a thread that was still running.
    pub fn freeze_confirmed(
        &mut self,
        within: Duration,
    ) -> Result<Option<std::time::SystemTime>, StillRunning> {
        if self.exit.is_some() {
            return Ok(None);
        }
        self.freeze();
        let pgid = self.child.id() as i32;
        let members = match &self.memory {
            Some(m) => m.members(),
            None => stop::Members::Group(pgid),
        };
        let waited = self.watch.wait_stopped(&members, within).unwrap_or(
            // /proc or the cgroup unreadable: nothing confirms the stop, so nothing is trusted.
            stop::Waited::Running(StillRunning {
                tid: pgid,
                state: '?',
            }),
        );
        match waited {
            stop::Waited::Stopped(seen) => Ok(seen),
            stop::Waited::Running(r) => {
                self.kill();
                Err(r)
            }
        }
    }

    /// Every thread id (host namespace) of the child's processes now; empty when they cannot
    /// be read. The judge reads their scheduler counters around timed turns.
    pub fn thread_ids(&mut self) -> Vec<i32> {
        if self.exit.is_some() {
            return Vec::new();
        }
        let pgid = self.child.id() as i32;
        let members = match &self.memory {
            Some(m) => m.members(),
            None => stop::Members::Group(pgid),
        };
        self.watch.threads(&members).unwrap_or_default()
    }

    /// Lets the child's processes run again.
    pub fn thaw(&self) {
        if self.exit.is_none() {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGCONT);
        }
    }

    /// The child's private working directory, as this process reaches it.
    pub fn dir(&self) -> &Path {
        &self.work
    }

    /// Where the child sees its private directory (paths sent to it must use this).
    pub fn dir_in_child(&self) -> &Path {
        &self.work_in_child
    }

    /// Whether the kernel killed one of the child's processes for going over
    /// `Limits::memory_bytes` (false where no memory cgroup was made).
    pub fn memory_exceeded(&self) -> bool {
        self.memory
            .as_ref()
            .is_some_and(cgroup::MemoryCgroup::oom_killed)
    }

    /// The directory of files the judge creates and the child may only read and write in
    /// place (with `Limits::shared_dir`).
    pub fn shared_dir(&self) -> Option<&Path> {
        self.shared.as_ref().map(|(d, _)| d.path())
    }

    /// Where the child sees [`Sandboxed::shared_dir`] (paths sent to it must use this).
    pub fn shared_dir_in_child(&self) -> Option<&Path> {
        self.shared.as_ref().map(|(_, seen)| seen.as_path())
    }

    /// Reads at most `max` bytes of a file the child may have written in its directory, safely:
    /// never through a link, never blocking on a FIFO, only a regular file.
    pub fn read_private(&self, name: &str, max: usize) -> Option<String> {
        read_untrusted(&self.work.join(name), max)
            .map(|buf| String::from_utf8_lossy(&buf).into_owned())
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
        self.thaw();
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
        read_truncated_file(&self.log_reader, max)
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

/// Reads at most `max` bytes of a file a sandboxed process may have made (its name, its type
/// and its size are the candidate's): never through a link, never blocking on a FIFO, only a
/// regular file; `None` otherwise.
pub fn read_untrusted(path: &Path, max: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(max as u64).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// Reads a possibly huge file keeping only its head and tail.
pub fn read_truncated(path: &Path, max: usize) -> String {
    match std::fs::File::open(path) {
        Ok(f) => read_truncated_file(&f, max),
        Err(_) => String::new(),
    }
}

/// [`read_truncated`] on an open file (read by position; at most `max` bytes).
pub fn read_truncated_file(f: &std::fs::File, max: usize) -> String {
    use std::os::unix::fs::FileExt;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0) as usize;
    let read_at = |off: usize, n: usize| {
        let mut buf = vec![0; n];
        let got = f.read_at(&mut buf, off as u64).unwrap_or(0);
        buf.truncate(got);
        buf
    };
    if len <= max {
        return String::from_utf8_lossy(&read_at(0, len)).into_owned();
    }
    let half = max / 2;
    let head = read_at(0, half);
    let tail = read_at(len - half, half);
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * half,
        String::from_utf8_lossy(&tail)
    )
}

/// Takes descriptor numbers 3 and 4 (where the timing channel lands in the child) for the
/// life of the process whenever they are free, so that nothing a child still needs before
/// `exec` (its ruleset, its scratch rule, std's error pipe) gets those numbers in the parent
/// and is replaced there: with descriptors opened and closed on other threads (a cluster
/// worker's other judges), a child's ruleset landed at 3 and its start failed (EBADFD, EPERM).
fn hold_channel_numbers() {
    // SAFETY: F_GETFD only asks whether a number is open.
    let free = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0;
    if !free(3) && !free(4) {
        return;
    }
    while let Ok(f) = std::fs::File::open("/dev/null") {
        use std::os::fd::{AsRawFd, IntoRawFd};
        // A number above 4 is closed again; 3 and 4 stay taken for good.
        if f.as_raw_fd() > 4 {
            break;
        }
        let _ = f.into_raw_fd();
    }
}

/// The highest descriptor number open in this process (0 when unreadable).
fn highest_open_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
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

    /// What a sandbox leaves under a name the judge reads: a link (to an endless device) or
    /// a FIFO is refused without blocking, a regular file read up to the bound.
    #[test]
    fn files_a_sandbox_made_are_read_without_links_fifos_or_bulk() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::os::unix::fs::symlink("/dev/zero", p("link")).unwrap();
        nix::unistd::mkfifo(&p("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::write(p("big"), vec![b'x'; 100]).unwrap();
        assert_eq!(read_untrusted(&p("link"), 10), None);
        assert_eq!(read_untrusted(&p("fifo"), 10), None);
        assert_eq!(read_untrusted(dir.path(), 10), None);
        assert_eq!(read_untrusted(&p("big"), 10), Some(vec![b'x'; 10]));
    }

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

    /// CPU ticks (user and system) of all the sandbox's threads together.
    fn cpu_ticks(s: &Sandboxed) -> u64 {
        let tids = stop::Watch::default()
            .threads(&stop::Members::Group(s.child.id() as i32))
            .unwrap();
        tids.iter()
            .filter_map(|t| std::fs::read_to_string(format!("/proc/{t}/stat")).ok())
            .map(|st| {
                let f: Vec<&str> = st[st.rfind(')').unwrap() + 1..]
                    .split_whitespace()
                    .collect();
                // utime and stime: fields 14 and 15, counted from the state (field 3).
                f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
            })
            .sum()
    }

    /// A Python program whose two threads populate large mappings in a loop: each system call
    /// runs on for a while after SIGSTOP (it acts on the return to user mode), burning CPU and
    /// memory bandwidth. The threads start only after a first confirmed stop, so threads the
    /// judge did not see before must be found too.
    const HOG: &str = "import mmap, sys, threading, time\n\
                       def hog():\n    \
                           while True:\n        \
                               m = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)\n        \
                               m.close()\n\
                       print('ready', flush=True)\n\
                       sys.stdin.readline()\n\
                       for _ in range(2):\n    \
                           threading.Thread(target=hog, daemon=True).start()\n\
                       print('go', flush=True)\n\
                       time.sleep(60)\n";

    /// [`HOG`] started, its threads running.
    fn started_hog(limits: &Limits) -> Sandboxed {
        let mut s = Sandboxed::spawn(
            Path::new("/usr/bin/python3"),
            &["-c".into(), HOG.into()],
            limits,
        )
        .unwrap();
        for (say, expect) in [(None, "ready"), (Some("start"), "go")] {
            if let Some(line) = say {
                s.freeze_confirmed(Duration::from_secs(10)).unwrap();
                s.thaw();
                s.send(line).unwrap();
            }
            let heard = s.recv(Duration::from_secs(20));
            assert!(
                matches!(&heard, Recv::Line(l) if l == expect),
                "{}",
                s.log(2000)
            );
        }
        s
    }

    #[test]
    fn a_confirmed_freeze_leaves_no_thread_running_in_a_system_call() {
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        // Threads found through the process group, and (where there is one) the cgroup.
        let in_cgroup = Limits {
            memory_bytes: Some(4 << 30),
            ..Limits::default()
        };
        for limits in [Limits::default(), in_cgroup] {
            let mut s = started_hog(&limits);
            for _ in 0..4 {
                s.thaw();
                std::thread::sleep(Duration::from_millis(40));
                s.freeze_confirmed(Duration::from_secs(10)).unwrap();
                let before = cpu_ticks(&s);
                std::thread::sleep(Duration::from_millis(200));
                assert_eq!(
                    cpu_ticks(&s),
                    before,
                    "a thread ran while the sandbox was stopped"
                );
            }
        }
    }

    #[test]
    fn a_stop_that_does_not_come_in_time_kills_the_sandbox() {
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        let mut s = started_hog(&Limits::default());
        // With 1 ms to stop, a thread inside its 512 MiB system call is still running (or
        // waiting for a core: not stopped either); the gap between two calls is short, so a
        // few tries are plenty.
        for _ in 0..20 {
            s.thaw();
            std::thread::sleep(Duration::from_millis(30));
            if let Err(r) = s.freeze_confirmed(Duration::from_millis(1)) {
                assert!(matches!(r.state, 'R' | 'D'), "{r:?}");
                assert!(s.has_exited(), "the sandbox was not killed");
                return;
            }
        }
        panic!("every stop came within 1 ms");
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
        if isolation().user_namespace {
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
        let l = one_line(
            "ls /proc | grep -c '^[0-9]'",
            &Limits {
                own_proc: true,
                view: FsView {
                    read_everything: true,
                    ..FsView::default()
                },
                ..Limits::default()
            },
        );
        let n: usize = l.trim().parse().unwrap();
        assert!(n < 5, "a private /proc lists the namespace's few processes");
    }

    fn one_line(script: &str, limits: &Limits) -> String {
        let mut s = sh(script, limits);
        let l = match s.recv(Duration::from_secs(10)) {
            Recv::Line(l) => l,
            other => panic!("{other:?}: {}", s.log(2000)),
        };
        s.finish(Duration::from_secs(5));
        l
    }

    #[test]
    fn sees_only_the_system_and_its_own_directory() {
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "reference").unwrap();
        let readable = tempfile::tempdir().unwrap();
        std::fs::write(readable.path().join("lib"), "ok").unwrap();
        let script = format!(
            "cat {s} 2>/dev/null || printf noread; echo x 2>/dev/null > {s} || printf ' nowrite '; \
             cat {r}/lib; echo x 2>/dev/null > {r}/lib || printf ' rdonly'; \
             ls /proc/1 >/dev/null 2>&1 || printf ' noproc'; ls /root >/dev/null 2>&1 || printf ' nohome'; \
             echo hi > own && cat own",
            s = secret.display(),
            r = readable.path().display()
        );
        let l = one_line(
            &script,
            &Limits {
                view: FsView {
                    read: vec![readable.path().to_path_buf()],
                    ..FsView::default()
                },
                ..Limits::default()
            },
        );
        assert_eq!(l, "noread nowrite ok rdonly noproc nohomehi");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "reference");
    }

    #[test]
    fn memory_dirs_of_killed_processes_are_swept_live_and_recent_ones_kept() {
        if !Path::new(SHM).is_dir() {
            return;
        }
        let mut done = std::process::Command::new("true").spawn().unwrap();
        let dead = done.id();
        done.wait().unwrap();
        let ten_min_ago = std::time::SystemTime::now() - Duration::from_secs(700);
        let make = |pid: u32, age: Option<std::time::SystemTime>| {
            let d = Path::new(SHM).join(format!("ksmith-sweeptest-{pid}-{:x}", rand_tag()));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("buf"), b"x").unwrap();
            if let Some(t) = age {
                std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
            }
            d
        };
        let stale = make(dead, Some(ten_min_ago));
        let recent = make(dead, None);
        let live = make(std::process::id(), Some(ten_min_ago));
        sweep_stale_memory_dirs();
        assert!(
            !stale.exists(),
            "a killed process's old directory is removed"
        );
        assert!(recent.exists() && live.exists());
        for d in [recent, live] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    fn rand_tag() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    #[test]
    fn files_the_child_writes_fill_its_own_memory_and_no_more() {
        if !isolation().complete() || !isolation().user_namespace {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        // 8 MiB of private directory: a 32 MiB write stops there, /dev/shm stops at its own
        // size, and nothing lands on the disk underneath.
        let mut s = sh(
            "read x; echo kept > small; \
             head -c 33554432 /dev/zero > big 2>/dev/null || printf 'full '; wc -c < big | tr -d '\\n'; \
             head -c 100000000 /dev/zero > /dev/shm/big 2>/dev/null || printf ' shmfull'; \
             cd /dev/shm && rm big && i=0; while [ $i -lt 5000 ] && true 2>/dev/null > f$i; do i=$((i+1)); done; \
             printf ' files %s' $i; echo",
            &Limits {
                scratch_bytes: Some(8 << 20),
                view: FsView {
                    endless_devices: true,
                    ..FsView::default()
                },
                ..Limits::default()
            },
        );
        s.send("go").unwrap();
        let l = match s.recv(Duration::from_secs(10)) {
            Recv::Line(l) => l,
            other => panic!("{other:?}: {}", s.log(2000)),
        };
        let written: u64 = l
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{l}"));
        assert!(l.starts_with("full ") && l.contains(" shmfull"), "{l}");
        // At most SHM_FILES inodes, the directory itself among them.
        assert!(l.ends_with(&format!(" files {}", SHM_FILES - 1)), "{l}");
        assert!((4 << 20..=8 << 20).contains(&written), "{l}");
        // The judge reads the directory where the child wrote it, also once it has exited;
        // the directory on disk under it stayed empty but for the log.
        s.finish(Duration::from_secs(5));
        assert_eq!(
            std::fs::read_to_string(s.dir().join("small")).unwrap(),
            "kept\n"
        );
        assert_ne!(s.dir(), s.dir_in_child());
        let under: Vec<_> = std::fs::read_dir(s.dir_in_child())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(under, vec![std::ffi::OsString::from("output.log")]);
    }

    #[test]
    fn a_memory_cgroup_bounds_every_process_together() {
        if !isolation().complete() || !isolation().memory_cgroup {
            eprintln!("skipping: no memory cgroup here ({})", isolation().note);
            return;
        }
        // Two processes of 80 MiB each, each well under its own address-space limit, against
        // 128 MiB for the sandbox: the kernel kills one; a single one alone fits (with room
        // for the interpreter).
        let hog = "python3 -c 'import time; x = b\"x\" * (80 << 20); time.sleep(2)'";
        let limits = Limits {
            memory_bytes: Some(128 << 20),
            ..Limits::default()
        };
        let mut two = sh(&format!("{hog} & {hog}; wait"), &limits);
        two.finish(Duration::from_secs(20));
        assert!(two.memory_exceeded(), "{}", two.log(2000));
        let mut one = sh(hog, &limits);
        assert_eq!(one.finish(Duration::from_secs(20)), Exit::Code(0));
        assert!(!one.memory_exceeded());
    }

    #[test]
    fn shared_memory_is_private_and_the_judges_buffers_only_writable_in_place() {
        if !isolation().complete() || !isolation().user_namespace {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        let mut s = sh(
            "read d; echo hi > /dev/shm/reg && tr -d '\\n' < /dev/shm/reg; \
             printf ' %s' \"$(ls /dev/shm | tr '\\n' ,)\"; printf AB 1<> \"$d/buf\"; \
             true 2>/dev/null > \"$d/buf\" || printf ' notrunc'; \
             echo x 2>/dev/null > \"$d/new\" || printf ' nocreate'; \
             rm \"$d/buf\" 2>/dev/null || printf ' norm'; \
             mv \"$d/buf\" \"$d/b2\" 2>/dev/null || printf ' nomove'; \
             fallocate --punch-hole --offset 0 --length 4096 \"$d/buf\" 2>/dev/null || printf ' nopunch'; \
             python3 -c \"import mmap,sys; f=open(sys.argv[1],'r+b'); m=mmap.mmap(f.fileno(),0); m.madvise(mmap.MADV_REMOVE)\" \"$d/buf\" 2>/dev/null || printf ' noremove'; \
             echo",
            &Limits {
                shared_dir: true,
                ..Limits::default()
            },
        );
        let host = s.shared_dir().unwrap().to_path_buf();
        std::fs::write(host.join("buf"), "0123").unwrap();
        let seen = s.shared_dir_in_child().unwrap().display().to_string();
        s.send(&seen).unwrap();
        let l = match s.recv(Duration::from_secs(10)) {
            Recv::Line(l) => l,
            other => panic!("{other:?}: {}", s.log(2000)),
        };
        s.finish(Duration::from_secs(5));
        // Its own /dev/shm (nothing of the host's, nor of other sandboxes); the buffer
        // written in place and nothing else: no holes punched in it either (the judge's
        // mapping would need new pages, which a candidate that filled memory could deny).
        assert_eq!(l, "hi reg, notrunc nocreate norm nomove nopunch noremove");
        assert_eq!(std::fs::read_to_string(host.join("buf")).unwrap(), "AB23");
        assert!(!Path::new("/dev/shm/reg").exists());
    }

    #[test]
    fn runs_unprivileged_and_cannot_leave_its_namespaces() {
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        let l = one_line(
            &format!(
                "printf \"$(id -u) \"; unshare -U true 2>/dev/null || printf no-unshare; \
                 setsid true 2>/dev/null || printf ' no-setsid'; \
                 kill -CONT $$ 2>/dev/null || printf ' no-sigcont'; \
                 python3 -c 'import ctypes; exit(ctypes.CDLL(None).shmget(0, 1 << 20, 0o1600) < 0)' \
                 || printf ' no-shmget'; \
                 python3 -c 'import os; os.memfd_create(\"m\")' 2>/dev/null || printf ' no-memfd'; \
                 python3 -c 'import socket as s; a, b = s.socketpair(); a.setsockopt(s.SOL_SOCKET, s.SO_SNDBUF, 1 << 22)' \
                 2>/dev/null || printf ' no-sndbuf'; \
                 python3 -c 'import ctypes; c = ctypes.c_ulong(0); exit(ctypes.CDLL(None).syscall({}, 8, ctypes.byref(c)) < 0)' \
                 || printf ' no-aio'; echo",
                libc::SYS_io_setup
            ),
            &Limits::default(),
        );
        if isolation().user_namespace {
            assert!(l.starts_with("65534 "), "{l}");
        } else {
            assert!(!l.starts_with("0 "), "{l}");
        }
        assert!(
            l.ends_with("no-unshare no-setsid no-sigcont no-shmget no-memfd no-sndbuf no-aio"),
            "{l}"
        );
    }

    #[test]
    fn files_outside_the_view_keep_their_mode_times_and_attributes() {
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // Owned by this process's user, which the sandbox's one user maps to: an owner may
        // change these without any capability, and Landlock has no right for them.
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = std::fs::metadata(&victim).unwrap();
        let script = |p: &Path| {
            format!(
                "chmod 4777 {p} 2>/dev/null || printf no-chmod; \
                 touch -d @0 {p} 2>/dev/null || printf ' no-touch'; \
                 python3 -c 'import os; os.setxattr(\"{p}\", \"user.k\", b\"v\")' 2>/dev/null \
                 || printf ' no-xattr'; echo",
                p = p.display()
            )
        };
        let l = one_line(&script(&victim), &Limits::default());
        assert_eq!(l, "no-chmod no-touch no-xattr", "{l}");
        let after = std::fs::metadata(&victim).unwrap();
        assert_eq!(after.mode() & 0o7777, 0o600);
        assert_eq!(after.mtime(), before.mtime());
        // The compiler's sandbox may (its linker marks its output executable): the rule above
        // is what stops the others.
        let l = one_line(
            &format!("chmod 700 {} && echo changed", victim.display()),
            &Limits {
                metadata_writes: true,
                ..Limits::default()
            },
        );
        assert_eq!(l, "changed");
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
    fn an_isolated_childs_stderr_is_in_the_log_even_if_it_replaces_the_file() {
        let mut s = sh(
            "echo visible >&2; rm -f output.log; ln -s /etc/hostname output.log; echo done",
            &Limits::default(),
        );
        assert!(matches!(s.recv(Duration::from_secs(10)), Recv::Line(_)));
        s.finish(Duration::from_secs(5));
        assert_eq!(s.log(1000).trim(), "visible");
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
        if !isolation().complete() {
            eprintln!("skipping: {}", isolation().note);
            return;
        }
        // A listener on the host's loopback, as in the red team's attack.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let l = one_line(
            &format!(
                "/bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo connected || echo refused"
            ),
            &Limits::default(),
        );
        assert_eq!(l, "refused");
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "nothing reached the listener");
    }
}
