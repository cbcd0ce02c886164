//! The Landlock layer: what an untrusted process may open. It sees the system's libraries and
//! tools and the paths its caller names read-only, its private directory read-write, and
//! nothing else: not the store, the caches, the references, the user's home or the host's
//! `/proc`. TCP is refused, and it can neither signal processes outside its sandbox nor reach
//! abstract Unix sockets outside it.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// The newest Landlock ABI this code knows; the kernel may offer less (see [`kernel_abi`]).
const TARGET_ABI: ABI = ABI::V6;

/// System paths every sandboxed program may read and execute: libraries, compilers,
/// interpreters. `/etc` is not among them (it holds secrets a uid-0 owner could read); only
/// the loader's configuration is.
const SYSTEM_READ: [&str; 12] = [
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/sys/devices/system/cpu",
    "/proc/cpuinfo",
];

/// Endless character devices, only for programs that ask (a compiler told to `#include
/// "/dev/zero"` would read until it runs out of memory).
const ENDLESS_DEVICES: [&str; 3] = ["/dev/zero", "/dev/urandom", "/dev/random"];

/// Paths a sandboxed process may see, beyond the system's (see [`SYSTEM_READ`]).
#[derive(Debug, Clone, Default)]
pub struct FsView {
    /// Read (and execute) only.
    pub read: Vec<PathBuf>,
    /// Read and write (the private directory is always added).
    pub write: Vec<PathBuf>,
    /// Every path readable (the profiler: perf needs the whole tree and a fresh /proc mount
    /// that a rule made before it existed cannot name). Writes stay limited to `write`.
    pub read_everything: bool,
    /// Also `/dev/zero`, `/dev/urandom` and `/dev/random` (`/dev/null` is always there).
    pub endless_devices: bool,
    /// Directories whose existing files may be read and written in place, nothing more: no
    /// truncation, creation, removal or renaming (buffers the judge maps too).
    pub in_place: Vec<PathBuf>,
}

/// The Landlock ABI the running kernel offers (0: none).
pub fn kernel_abi() -> i32 {
    // SAFETY: the version query takes no pointer (NULL, 0) and only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    v.max(0) as i32
}

/// What a child may do beneath a file system mounted after its ruleset was made (its
/// in-memory private directory and /dev/shm): everything the ruleset handles.
pub(crate) fn scratch_access() -> u64 {
    let abi = ABI::from(kernel_abi().min(TARGET_ABI as i32));
    AccessFs::from_all(abi).bits()
}

/// Builds the ruleset in the parent (opening paths allocates); the child only enforces it.
pub(crate) fn ruleset(view: &FsView, private_dir: &Path) -> Result<RulesetCreated, String> {
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
    let abi = TARGET_ABI;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?
        .no_new_privs(true);
    let add = |rs: RulesetCreated,
               path: &Path,
               access: landlock::BitFlags<AccessFs>|
     -> Result<RulesetCreated, String> {
        // A path that does not exist here (e.g. /lib32) simply grants nothing.
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        match PathFd::new(path) {
            Ok(fd) => rs
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| format!("landlock rule for {}: {e}", path.display())),
            Err(_) => Ok(rs),
        }
    };
    if view.read_everything {
        rs = add(rs, Path::new("/"), read)?;
    }
    for p in SYSTEM_READ.iter().map(Path::new) {
        rs = add(rs, p, read)?;
    }
    for p in &view.read {
        rs = add(rs, p, read)?;
    }
    let dev = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    rs = add(rs, Path::new("/dev/null"), dev)?;
    if view.endless_devices {
        for p in ENDLESS_DEVICES.iter().map(Path::new) {
            rs = add(rs, p, AccessFs::ReadFile.into())?;
        }
    }
    for p in &view.in_place {
        rs = add(rs, p, AccessFs::ReadFile | AccessFs::WriteFile)?;
    }
    rs = add(rs, private_dir, all)?;
    for p in &view.write {
        rs = add(rs, p, all)?;
    }
    Ok(rs)
}
