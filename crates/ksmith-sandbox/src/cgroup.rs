//! Memory cgroups: one per sandbox where this process may make them (root with cgroup v1's
//! memory controller, or a cgroup v2 subtree with the memory controller delegated), so that
//! everything a candidate's processes hold together (their memory, files in their in-memory
//! directories, kernel memory charged to them) has one limit. The address-space limit is per
//! process, and a candidate may start many. Where no cgroup can be made, sandboxes run
//! without one and `isolation()` says so.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Which interface the memory controller speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// Where this process may make memory cgroups.
#[derive(Debug)]
struct Parent {
    dir: PathBuf,
    version: Version,
}

/// Prefix of the cgroups we make (with our pid, so a killed ksmith's are swept).
const PREFIX: &str = "ksmith-sbx-";

/// One sandbox's memory cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub(crate) struct MemoryCgroup {
    dir: PathBuf,
    version: Version,
    /// `cgroup.procs`, opened here: the child writes its own pid into it before `exec`.
    procs: File,
}

/// The parent directory for our cgroups, probed once per process.
fn parent() -> Option<&'static Parent> {
    static PARENT: OnceLock<Option<Parent>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let p = find_parent()?;
            sweep(&p.dir);
            // Only if a cgroup can really be made and limited here.
            let probe = MemoryCgroup::make(&p, 64 << 20).ok()?;
            drop(probe);
            Some(p)
        })
        .as_ref()
}

/// Whether sandboxes get a memory cgroup on this machine.
pub(crate) fn available() -> bool {
    parent().is_some()
}

/// Where the first mount in `mountinfo` of `fstype` whose super options satisfy `opts` is.
fn mount_point(mountinfo: &str, fstype: &str, opts: impl Fn(&str) -> bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|m| {
        let (pre, post) = m.split_once(" - ")?;
        let mut post = post.split(' ');
        let (ty, _, super_opts) = (post.next()?, post.next()?, post.next().unwrap_or(""));
        (ty == fstype && opts(super_opts)).then(|| pre.split(' ').nth(4).map(PathBuf::from))?
    })
}

/// Our own cgroup's directory with the memory controller, from /proc/self/cgroup and the
/// mounts in /proc/self/mountinfo.
fn find_parent() -> Option<Parent> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // cgroup v1: "ID:memory[,...]:/path", mounted with the "memory" super option.
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        if ctrl.split(',').any(|c| c == "memory") {
            let mount = mount_point(&mounts, "cgroup", |o| o.split(',').any(|o| o == "memory"))?;
            return Some(Parent {
                dir: mount.join(path.trim_start_matches('/')),
                version: Version::V1,
            });
        }
    }
    // cgroup v2: "0::/path"; usable only where memory is enabled for our children already
    // (enabling it needs an empty cgroup, which ours is not).
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = mount_point(&mounts, "cgroup2", |_| true)?;
    let dir = mount.join(path.trim_start_matches('/'));
    let control = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    control
        .split_whitespace()
        .any(|c| c == "memory")
        .then_some(Parent {
            dir,
            version: Version::V2,
        })
}

/// Removes cgroups of ours whose ksmith is gone (empty ones only: the kernel refuses others).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl MemoryCgroup {
    /// A new cgroup limited to `bytes` (swap included where the kernel accounts it); `None`
    /// where this machine gives us none, an error where it does and making one failed (the
    /// sandbox is then not started: `isolation()` promised the layer).
    pub(crate) fn new(bytes: u64) -> std::io::Result<Option<MemoryCgroup>> {
        parent().map(|p| MemoryCgroup::make(p, bytes)).transpose()
    }

    fn make(p: &Parent, bytes: u64) -> std::io::Result<MemoryCgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = p.dir.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let write = |name: &str, value: &str| std::fs::write(dir.join(name), value);
        let limited = match p.version {
            Version::V1 => write("memory.limit_in_bytes", &bytes.to_string()).map(|()| {
                // Swap beyond the limit is refused too where swap is accounted.
                let _ = write("memory.memsw.limit_in_bytes", &bytes.to_string());
            }),
            Version::V2 => write("memory.max", &bytes.to_string()).map(|()| {
                let _ = write("memory.swap.max", "0");
            }),
        };
        let opened = limited.and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
        });
        match opened {
            Ok(procs) => Ok(MemoryCgroup {
                dir,
                version: p.version,
                procs,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The descriptor the child writes its pid to (between fork and exec: see [`join`]).
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// How the threads of this cgroup's processes are found.
    pub(crate) fn members(&self) -> crate::stop::Members<'_> {
        let file = match self.version {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.threads",
        };
        crate::stop::Members::Cgroup(&self.dir, file)
    }

    /// Whether the kernel killed a process of this cgroup for going over its limit.
    pub(crate) fn oom_killed(&self) -> bool {
        let (file, key) = match self.version {
            Version::V1 => ("memory.oom_control", "oom_kill"),
            Version::V2 => ("memory.events", "oom_kill"),
        };
        let count = std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse::<u64>().ok())?
                })
            });
        // Kernels without the counter: hitting the limit at all (v1's failcnt).
        count.map_or_else(
            || {
                std::fs::read_to_string(self.dir.join("memory.failcnt"))
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
                    .is_some_and(|n| n > 0)
            },
            |n| n > 0,
        )
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The processes were killed; the last ones may still be exiting for a moment.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `fd`.
///
/// # Safety
/// Only system calls, no allocation: runs between `fork` and `exec`.
pub(crate) unsafe fn join(fd: RawFd) -> std::io::Result<()> {
    let mut digits = [0u8; 20];
    let mut pid = libc::getpid() as u64;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    let n = libc::write(fd, digits[at..].as_ptr().cast(), digits.len() - at);
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
