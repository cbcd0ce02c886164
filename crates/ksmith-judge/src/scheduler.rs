//! One scheduler per device: builds, loads and correctness checks share the device, timing
//! holds it alone. Judges in threads of one process and in other processes on the same machine
//! meet through two lock files in one directory, the machine's ([`machine_lock_dir`]:
//! `KSMITH_LOCK_DIR`, else `/tmp/ksmith-locks`), whatever their store or user: a lock kept in
//! each store let runs with other stores, and a roofline measured by another process, time
//! during a candidate's rounds.
//!
//! - `device-NAME.lock`: the device itself, `flock` shared by builds and checks, exclusive
//!   while timing. Every lease opens its own file description, so the lock works between
//!   threads of one process as between processes.
//! - `device-NAME.gate`: a turnstile, always taken exclusive. `flock` grants a shared request
//!   whenever only shared locks are held, even while an exclusive request waits (the kernel
//!   checks granted locks, not waiters), so a steady stream of builds and checks could keep
//!   timing out forever. A shared acquirer passes the gate (takes and drops it) before the
//!   device lock; an exclusive one holds the gate from before it asks for the device until it
//!   releases it, so once timing waits, no new shared lease gets in, and the holders it waits
//!   for leave.
//!
//! A holder must take one lease at a time: asking for an exclusive lease while holding a
//! shared one (through another file description) waits for itself. The judge drops its lease
//! before it asks for another.

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The device a scheduler guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The CPU cores candidates run and are timed on.
    Cpu,
    /// One GPU, by index.
    Gpu(u32),
}

impl Device {
    /// The device's name in lock file names (`cpu`, `gpu0`).
    pub fn name(self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Gpu(i) => format!("gpu{i}"),
        }
    }
}

/// Whether a lease shares the device or holds it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Others may build and check alongside; nobody times.
    Shared,
    /// Nobody else uses the device.
    Exclusive,
}

impl Access {
    /// `shared` or `exclusive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Shared => "shared",
            Access::Exclusive => "exclusive",
        }
    }
}

/// What a lease is taken for; decides its [`Access`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The trusted side: starting it, inputs, references, task validation.
    Reference,
    /// Static policy and compiling.
    Build,
    /// Starting the sandboxed runner and loading the candidate.
    Load,
    /// Quick and full correctness checks.
    Check,
    /// Measuring the timing channel's own cost (empty calls, timed).
    Calibrate,
    /// Alternating rounds against the baseline, alone or side by side.
    Timing,
    /// Measuring the device's roofline.
    Roofline,
    /// Sampling a candidate with the profiler (its shares are distorted by neighbours too).
    Profile,
}

impl Work {
    /// The access this work needs: anything timed holds the device alone.
    pub fn access(self) -> Access {
        match self {
            Work::Reference | Work::Build | Work::Load | Work::Check => Access::Shared,
            Work::Calibrate | Work::Timing | Work::Roofline | Work::Profile => Access::Exclusive,
        }
    }

    /// Lower-case name (the lease log's second column).
    pub fn as_str(self) -> &'static str {
        match self {
            Work::Reference => "reference",
            Work::Build => "build",
            Work::Load => "load",
            Work::Check => "check",
            Work::Calibrate => "calibrate",
            Work::Timing => "timing",
            Work::Roofline => "roofline",
            Work::Profile => "profile",
        }
    }
}

/// A lease's moments, told to the observer while the lock is held (right after it is granted,
/// right before it is released), so observed intervals lie inside the real ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The lease was granted.
    Acquired,
    /// The lease is about to be released.
    Released,
}

/// What the observer is told.
#[derive(Debug, Clone, Copy)]
pub struct LeaseEvent {
    /// Unique per lease within the process.
    pub lease: u64,
    /// What the lease is for.
    pub work: Work,
    /// Shared or exclusive.
    pub access: Access,
    /// Granted or about to be released.
    pub phase: Phase,
    /// When (this process's monotonic clock).
    pub at: Instant,
}

/// Told of every lease granted and released (tests, diagnostics).
pub type LeaseObserver = Arc<dyn Fn(&LeaseEvent) + Send + Sync>;

/// The machine-wide lock directory when `KSMITH_LOCK_DIR` is not set: in `/tmp`, which every
/// user can reach (a directory under `/run` would need root to create).
pub const DEFAULT_LOCK_DIR: &str = "/tmp/ksmith-locks";

/// The directory every KernelSmith process on this machine takes its device leases in:
/// `KSMITH_LOCK_DIR` when set (tests, a site's own choice), else [`DEFAULT_LOCK_DIR`]. Created
/// if missing: the default one sticky and world-writable (mode 1777, like `/tmp`), so that every
/// user can add lock files and none can remove another's; an existing one is used only when it
/// is a real directory (no symlink) owned by us or root: the owner of a directory may remove
/// any file in it, sticky or not, so a directory another user made first would let that user
/// replace a lock file and split the lock (two judges each holding "the" lock). Users who must
/// share one device on one machine use a directory root made (see docs/judge.md).
pub fn machine_lock_dir() -> Result<PathBuf, SchedulerError> {
    match std::env::var_os("KSMITH_LOCK_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).map_err(|source| SchedulerError::Io {
                path: dir.clone(),
                source,
            })?;
            Ok(dir)
        }
        None => {
            let dir = PathBuf::from(DEFAULT_LOCK_DIR);
            shared_dir(&dir)?;
            Ok(dir)
        }
    }
}

/// Makes or checks a directory every user shares (see [`machine_lock_dir`]).
fn shared_dir(dir: &Path) -> Result<(), SchedulerError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let err = |source| SchedulerError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::DirBuilder::new().mode(0o1777).create(dir) {
        Ok(()) => {
            // The umask took bits off: set them on the directory just made, after checking
            // through a descriptor that it is ours (not a name swapped in meanwhile).
            let d = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(dir)
                .map_err(err)?;
            let m = d.metadata().map_err(err)?;
            if m.uid() == me {
                d.set_permissions(std::fs::Permissions::from_mode(0o1777))
                    .map_err(err)?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(err)?;
    if !m.is_dir() || !(m.uid() == me || m.uid() == 0) {
        return Err(err(std::io::Error::other(format!(
            "not a directory of this user's or root's (owner uid {}, mode {:o}): another user could replace its lock files; set KSMITH_LOCK_DIR",
            m.uid(),
            m.mode() & 0o7777
        ))));
    }
    Ok(())
}

/// Opens (creating if missing) a lock file that may belong to another user: read-only (`flock`
/// needs no more, so nothing is ever written through a name someone else controls), never
/// through a symlink (`O_NOFOLLOW`), never blocking on a FIFO planted in its place
/// (`O_NONBLOCK`), only a regular file, and only one owned by us or root: in a sticky
/// directory a file's owner may unlink it, so another user's lock file could be replaced under
/// a judge holding it. A file this process creates (`O_EXCL`) is made readable by all,
/// whatever the umask, so root-run and other processes can lock it too; nobody else's file is
/// ever changed. Opening an existing file without `O_CREAT` also passes `fs.protected_regular`,
/// which refuses `O_CREAT` on another user's file in a sticky directory.
pub(crate) fn open_lock_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let me = nix::unistd::geteuid().as_raw();
    for _ in 0..8 {
        match OpenOptions::new().read(true).custom_flags(flags).open(path) {
            Ok(f) => {
                let m = f.metadata()?;
                if !m.is_file() {
                    return Err(std::io::Error::other("the lock file is not a regular file"));
                }
                if m.uid() != me && m.uid() != 0 {
                    return Err(std::io::Error::other(format!(
                        "the lock file belongs to uid {}, who could replace it while it is held",
                        m.uid()
                    )));
                }
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Created read-write only because the standard library wants write access for
        // `create_new`; the descriptor is dropped and the file opened read-only above.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(flags)
            .mode(0o644)
            .open(path)
        {
            Ok(f) => f.set_permissions(std::fs::Permissions::from_mode(0o644))?,
            // Another process made it first: open theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(
        "the lock file kept appearing and disappearing",
    ))
}

/// Lock file problems.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// A lock file or its directory could not be created or opened.
    #[error("device lock {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `flock` failed (other than an interrupted wait, which is retried).
    #[error("device lock {path}: flock: {errno}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        errno: Errno,
    },
}

/// Leases on one device, shared between the judges of a process (behind an `Arc`) and, through
/// the lock files, with other processes.
pub struct DeviceScheduler {
    device: Device,
    lock_path: PathBuf,
    gate_path: PathBuf,
    observer: Option<LeaseObserver>,
    log: Option<PathBuf>,
    next: AtomicU64,
}

impl std::fmt::Debug for DeviceScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceScheduler")
            .field("device", &self.device)
            .field("lock_path", &self.lock_path)
            .field("log", &self.log)
            .finish()
    }
}

impl DeviceScheduler {
    /// The machine's scheduler of `device`: lock files in [`machine_lock_dir`], so every
    /// KernelSmith process on the machine (any store, any user) meets every other.
    pub fn machine(device: Device) -> Result<DeviceScheduler, SchedulerError> {
        DeviceScheduler::open(&machine_lock_dir()?, device)
    }

    /// The scheduler of `device` with its lock files in `dir` (created if missing).
    pub fn open(dir: &Path, device: Device) -> Result<DeviceScheduler, SchedulerError> {
        std::fs::create_dir_all(dir).map_err(|source| SchedulerError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let stem = format!("device-{}", device.name());
        let s = DeviceScheduler {
            device,
            lock_path: dir.join(format!("{stem}.lock")),
            gate_path: dir.join(format!("{stem}.gate")),
            observer: None,
            log: None,
            next: AtomicU64::new(1),
        };
        // Fail now, not at the first lease, when the directory is not writable.
        s.open_file(&s.lock_path)?;
        s.open_file(&s.gate_path)?;
        Ok(s)
    }

    /// Tells `observer` of every lease granted and released.
    pub fn with_observer(mut self, observer: LeaseObserver) -> DeviceScheduler {
        self.observer = Some(observer);
        self
    }

    /// Appends one line per lease to `path` when it is released, while still held:
    /// `PID WORK ACCESS START_NS END_NS` (wall clock, nanoseconds since the Unix epoch), so
    /// leases of several processes can be checked against each other.
    pub fn with_log(mut self, path: PathBuf) -> DeviceScheduler {
        self.log = Some(path);
        self
    }

    /// The device this scheduler guards.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device lock file.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    fn open_file(&self, path: &Path) -> Result<File, SchedulerError> {
        open_lock_file(path).map_err(|source| SchedulerError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Locks a fresh file description of `path`, retrying a wait a signal interrupted, and
    /// again when the name no longer leads to the file locked (it was replaced meanwhile: a
    /// lock on the old file would not exclude a judge locking the new one).
    fn lock(&self, path: &Path, arg: FlockArg) -> Result<Flock<File>, SchedulerError> {
        use std::os::unix::fs::MetadataExt;
        let io = |source| SchedulerError::Io {
            path: path.to_path_buf(),
            source,
        };
        for _ in 0..16 {
            let mut file = self.open_file(path)?;
            let locked = loop {
                match Flock::lock(file, arg) {
                    Ok(l) => break l,
                    Err((f, Errno::EINTR)) => file = f,
                    Err((_, errno)) => {
                        return Err(SchedulerError::Lock {
                            path: path.to_path_buf(),
                            errno,
                        })
                    }
                }
            };
            let held = locked.metadata().map_err(io)?;
            match std::fs::symlink_metadata(path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => return Ok(locked),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
        }
        Err(io(std::io::Error::other(
            "the lock file was replaced again and again while being locked",
        )))
    }

    /// Waits for a lease for `work` (see the module documentation for the order).
    pub fn acquire(self: &Arc<Self>, work: Work) -> Result<Lease, SchedulerError> {
        let access = work.access();
        let gate = self.lock(&self.gate_path, FlockArg::LockExclusive)?;
        let (device, gate) = match access {
            Access::Shared => {
                let d = self.lock(&self.lock_path, FlockArg::LockShared)?;
                // Through the turnstile: the next acquirer may come.
                drop(gate);
                (d, None)
            }
            Access::Exclusive => (
                self.lock(&self.lock_path, FlockArg::LockExclusive)?,
                Some(gate),
            ),
        };
        let lease = Lease {
            scheduler: Arc::clone(self),
            id: self.next.fetch_add(1, Ordering::Relaxed),
            work,
            at: Instant::now(),
            wall: SystemTime::now(),
            device: Some(device),
            gate,
        };
        lease.tell(Phase::Acquired, lease.at);
        Ok(lease)
    }
}

/// A granted lease; dropping it releases the device.
pub struct Lease {
    scheduler: Arc<DeviceScheduler>,
    id: u64,
    work: Work,
    at: Instant,
    wall: SystemTime,
    device: Option<Flock<File>>,
    gate: Option<Flock<File>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("work", &self.work)
            .finish()
    }
}

impl Lease {
    /// What the lease was taken for.
    pub fn work(&self) -> Work {
        self.work
    }

    /// Shared or exclusive.
    pub fn access(&self) -> Access {
        self.work.access()
    }

    fn tell(&self, phase: Phase, at: Instant) {
        if let Some(o) = &self.scheduler.observer {
            o(&LeaseEvent {
                lease: self.id,
                work: self.work,
                access: self.access(),
                phase,
                at,
            });
        }
    }

    /// One line in the lease log; a log that cannot be written loses the line, never the lease.
    fn log(&self) {
        let Some(path) = &self.scheduler.log else {
            return;
        };
        let ns = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let line = format!(
            "{} {} {} {} {}\n",
            std::process::id(),
            self.work.as_str(),
            self.access().as_str(),
            ns(self.wall).as_nanos(),
            ns(SystemTime::now()).as_nanos()
        );
        // One write of one short line on an O_APPEND file: lines of several processes do not
        // interleave.
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.tell(Phase::Released, Instant::now());
        self.log();
        // The device first, then the gate: a waiting exclusive acquirer gets the device free.
        drop(self.device.take());
        drop(self.gate.take());
    }
}

impl crate::Judge {
    /// A lease on this judge's device for work done outside the judge (the profiler's
    /// sampling), after dropping any lease the judge still holds (one lease at a time, so it
    /// never waits for itself); `None` without a scheduler.
    pub fn device_lease(&mut self, work: Work) -> Result<Option<Lease>, SchedulerError> {
        self.lease = None;
        self.scheduler.clone().map(|s| s.acquire(work)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    fn scheduler(dir: &Path) -> Arc<DeviceScheduler> {
        Arc::new(DeviceScheduler::open(dir, Device::Cpu).expect("lock files"))
    }

    /// Observed (lease, access, start, end) intervals.
    fn recorded(dir: &Path) -> (Arc<DeviceScheduler>, Arc<Mutex<Vec<LeaseEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let e = Arc::clone(&events);
        let s = DeviceScheduler::open(dir, Device::Cpu)
            .expect("lock files")
            .with_observer(Arc::new(move |ev: &LeaseEvent| {
                e.lock().expect("events").push(*ev)
            }));
        (Arc::new(s), events)
    }

    fn intervals(events: &[LeaseEvent]) -> Vec<(Access, Instant, Instant)> {
        events
            .iter()
            .filter(|e| e.phase == Phase::Acquired)
            .map(|a| {
                let end = events
                    .iter()
                    .find(|e| e.lease == a.lease && e.phase == Phase::Released)
                    .expect("every lease released")
                    .at;
                (a.access, a.at, end)
            })
            .collect()
    }

    #[test]
    fn lock_files_are_named_after_the_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = DeviceScheduler::open(&dir.path().join("locks"), Device::Gpu(1)).expect("open");
        assert!(s.lock_path().ends_with("locks/device-gpu1.lock"));
        assert!(dir.path().join("locks/device-gpu1.gate").exists());
        assert_eq!(Work::Timing.access(), Access::Exclusive);
        assert_eq!(Work::Calibrate.access(), Access::Exclusive);
        assert_eq!(Work::Check.access(), Access::Shared);
    }

    #[test]
    fn lock_files_refuse_symlinks_and_fifos_and_are_readable_by_all() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        // A name planted as a symlink to a file the attacker wants clobbered or locked.
        let target = dir.path().join("victim");
        std::fs::write(&target, b"keep").expect("victim");
        let link = dir.path().join("device-cpu.lock");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(open_lock_file(&link).is_err(), "followed a symlink");
        assert_eq!(std::fs::read(&target).expect("victim"), b"keep");
        // A FIFO: refused at once, never waited on.
        let fifo = dir.path().join("device-gpu0.lock");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666))
            .expect("mkfifo");
        assert!(open_lock_file(&fifo).is_err(), "opened a FIFO");
        // A new file is made readable by everyone whatever the umask (another user locks it).
        let fresh = dir.path().join("device-gpu1.lock");
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let made = open_lock_file(&fresh);
        nix::sys::stat::umask(old);
        made.expect("created");
        let mode = std::fs::metadata(&fresh)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        // An existing file someone else may own is opened read-only, unchanged.
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        open_lock_file(&fresh).expect("read-only open");
        let mode = std::fs::metadata(&fresh)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444, "changed a file it did not create");
    }

    #[test]
    fn lock_files_and_directories_another_user_owns_are_refused() {
        // Their owner could replace them while a judge holds the lock (a split lock). Only
        // root can give a file away; elsewhere there is nothing to test.
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let other = nix::unistd::Uid::from_raw(54_321);
        let dir = tempfile::tempdir().expect("tempdir");
        let theirs = dir.path().join("device-cpu.lock");
        std::fs::write(&theirs, b"").expect("file");
        nix::unistd::chown(&theirs, Some(other), None).expect("chown");
        let e = open_lock_file(&theirs).expect_err("another user's lock file");
        assert!(e.to_string().contains("uid 54321"), "{e}");
        let shared = dir.path().join("ksmith-locks");
        shared_dir(&shared).expect("made");
        nix::unistd::chown(&shared, Some(other), None).expect("chown");
        assert!(shared_dir(&shared).is_err(), "another user's directory");
    }

    #[test]
    fn the_machine_directory_is_shared_and_overridable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = dir.path().join("ksmith-locks");
        shared_dir(&shared).expect("made");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&shared)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o1777, "sticky and world-writable");
        shared_dir(&shared).expect("an existing one is accepted");
        // A symlink in its place is refused.
        let link = dir.path().join("linked");
        std::os::unix::fs::symlink(&shared, &link).expect("symlink");
        assert!(shared_dir(&link).is_err());
    }

    #[test]
    fn shared_leases_coexist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = scheduler(dir.path());
        let a = s.acquire(Work::Build).expect("first");
        // A second shared lease on another thread is granted while the first is held.
        let s2 = Arc::clone(&s);
        let got = std::thread::spawn(move || s2.acquire(Work::Check).map(|l| l.access()))
            .join()
            .expect("thread");
        assert_eq!(got.expect("second"), Access::Shared);
        drop(a);
    }

    #[test]
    fn an_exclusive_lease_excludes_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (s, events) = recorded(dir.path());
        let inside = Arc::new(AtomicU64::new(0));
        let overlap = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (s, inside, overlap) = (Arc::clone(&s), Arc::clone(&inside), overlap.clone());
                std::thread::spawn(move || {
                    for i in 0..15 {
                        let work = if (t + i) % 3 == 0 {
                            Work::Timing
                        } else {
                            Work::Check
                        };
                        let _l = s.acquire(work).expect("lease");
                        // Exclusive holders count 1000, shared ones 1.
                        let me = if work == Work::Timing { 1000 } else { 1 };
                        let before = inside.fetch_add(me, Ordering::SeqCst);
                        if (me == 1000 && before != 0) || (me == 1 && before >= 1000) {
                            overlap.store(true, Ordering::SeqCst);
                        }
                        std::thread::sleep(Duration::from_millis(2));
                        inside.fetch_sub(me, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert!(!overlap.load(Ordering::SeqCst), "a lease overlapped timing");
        // The observer's intervals say the same.
        let iv = intervals(&events.lock().expect("events"));
        assert_eq!(iv.len(), 90);
        for (i, a) in iv.iter().enumerate() {
            for b in &iv[i + 1..] {
                let overlaps = a.1 < b.2 && b.1 < a.2;
                let exclusive = a.0 == Access::Exclusive || b.0 == Access::Exclusive;
                assert!(!(overlaps && exclusive), "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn a_waiting_exclusive_lease_is_not_starved_by_shared_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = scheduler(dir.path());
        let stop = Arc::new(AtomicBool::new(false));
        // Four threads keep the device shared without a gap: each takes its next lease while
        // the others still hold theirs.
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let _l = s.acquire(Work::Check).expect("shared");
                        std::thread::sleep(Duration::from_millis(5));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        // Without the turnstile the stream would keep timing out until it stops: it stops
        // after 3 s at the latest, so such a failure is a slow wait, not a hang.
        let watchdog = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for _ in 0..300 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let asked = Instant::now();
        let lease = s.acquire(Work::Timing).expect("exclusive");
        let waited = asked.elapsed();
        // Held alone: a shared acquirer cannot get in now.
        let s2 = Arc::clone(&s);
        let probe = std::thread::spawn(move || {
            let t = Instant::now();
            drop(s2.acquire(Work::Build).expect("shared after"));
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(lease);
        let probe_waited = probe.join().expect("probe");
        stop.store(true, Ordering::SeqCst);
        let served: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
        watchdog.join().expect("watchdog");
        // Granted once the shared holders of the moment left (each holds 5 ms), not after
        // the stream stopped (it never stops before the exclusive lease is granted).
        assert!(waited < Duration::from_secs(2), "waited {waited:?}");
        assert!(
            probe_waited >= Duration::from_millis(90),
            "{probe_waited:?}"
        );
        assert!(served > 8, "the shared stream ran ({served} leases)");
    }
}
