//! What runs in the forked child between `fork` and `exec`: entering the namespaces, dropping
//! to an unprivileged uid, enforcing the Landlock ruleset and installing the seccomp filters.
//!
//! Everything here is prepared by the parent (strings, rulesets, BPF programs) so that the child
//! makes only system calls: the parent is multithreaded, and after `fork` only async-signal-safe
//! work is allowed.

use landlock::RulesetCreated;
use seccompiler::BpfProgram;
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// Inside uid/gid of sandboxed processes: `nobody`, not root, so `exec` leaves them without
/// capabilities even inside their own user namespace.
pub(crate) const INSIDE_ID: u32 = 65534;

/// Everything the child does before `exec`, computed by the parent.
pub(crate) struct ChildPlan {
    /// Enter new user, mount, network, IPC and PID namespaces.
    pub userns: bool,
    /// Mount a private /proc for the PID namespace.
    pub own_proc: bool,
    /// With `userns`: directories bind-mounted in the child's mount namespace, in order
    /// (source, target).
    pub binds: Vec<(CString, CString)>,
    /// With `userns`: in-memory file systems mounted after the binds (target, mount options),
    /// each made writable in the Landlock ruleset (a rule made before the mount names the
    /// directory underneath, which Landlock then ignores).
    pub tmpfs: Vec<(CString, CString)>,
    /// The working directory again once the file systems are mounted (the one set before
    /// them is the directory underneath).
    pub chdir: Option<CString>,
    /// The ruleset's descriptor for those rules, and the access they grant.
    pub scratch_rule: Option<(std::os::fd::OwnedFd, u64)>,
    /// `/proc/self/uid_map` and `gid_map` contents.
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// The Landlock ruleset to enforce (taken by the child).
    pub ruleset: Option<RulesetCreated>,
    /// seccomp programs to install, last step before `exec`.
    pub filters: Vec<BpfProgram>,
    /// Extra descriptors: (parent's fd, number in the child).
    pub fds: Vec<(RawFd, RawFd)>,
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes `data` to a /proc file.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    check(fd)?;
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    libc::close(fd);
    if n != data.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Adds a Landlock rule granting `access` beneath `dir` to the ruleset `ruleset`.
unsafe fn allow_beneath(
    ruleset: &std::os::fd::OwnedFd,
    dir: &std::ffi::CStr,
    access: u64,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // struct landlock_path_beneath_attr (packed).
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let fd = libc::open(
        dir.as_ptr(),
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
    );
    check(fd)?;
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: fd,
    };
    let r = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset.as_raw_fd(),
        1 as libc::c_int, // LANDLOCK_RULE_PATH_BENEATH
        &attr as *const PathBeneath,
        0u32,
    );
    libc::close(fd);
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The process left outside the PID namespace: waits for the program (the namespace's init)
/// and ends the same way, so the judge sees the program's own exit status or signal. Killing
/// it (the judge kills the whole process group) kills the namespace's init through its
/// parent-death signal, and with it every process in the namespace.
unsafe fn relay(pid: libc::pid_t) -> ! {
    // Hold nothing open: std's spawn waits for its error pipe to close.
    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    let mut status = 0;
    loop {
        let r = libc::waitpid(pid, &mut status, 0);
        if r == pid {
            break;
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(libc::WEXITSTATUS(status))
}

impl ChildPlan {
    /// Runs in the child after `fork`; only system calls, no allocation on the success path.
    ///
    /// # Safety
    /// Must only be called between `fork` and `exec`.
    pub(crate) unsafe fn enter(&mut self) -> io::Result<()> {
        if self.userns {
            check(libc::unshare(
                libc::CLONE_NEWUSER
                    | libc::CLONE_NEWNS
                    | libc::CLONE_NEWNET
                    | libc::CLONE_NEWIPC
                    | libc::CLONE_NEWPID,
            ))?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            // The program becomes the PID namespace's init in a fork; this process relays.
            let pid = libc::fork();
            check(pid)?;
            if pid > 0 {
                relay(pid);
            }
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            // Nothing mounted here propagates back to the host.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (src, dst) in &self.binds {
                check(libc::mount(
                    src.as_ptr(),
                    dst.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
            }
            for (dst, options) in &self.tmpfs {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    dst.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    options.as_ptr().cast(),
                ))?;
                if let Some((ruleset, access)) = &self.scratch_rule {
                    allow_beneath(ruleset, dst, *access)?;
                }
            }
            if let Some(dir) = &self.chdir {
                check(libc::chdir(dir.as_ptr()))?;
            }
            if self.own_proc {
                check(libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ))?;
            }
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        if let Some(rs) = self.ruleset.take() {
            rs.restrict_self()
                .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        // The channel's descriptors are placed last: a number they take (3, 4) may be the one
        // the ruleset or the scratch rule had in this process, and those are done by now.
        for &(src, dst) in &self.fds {
            check(libc::dup2(src, dst))?;
        }
        for f in &self.filters {
            seccompiler::apply_filter(f).map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    }
}
