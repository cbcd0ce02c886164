//! The seccomp layer: a filter, compiled before the fork, that refuses the system calls a kernel
//! never needs and an attacker would use to leave the sandbox or reach other processes.
//!
//! It is a deny filter on purpose: the runner is a full Python interpreter (numpy, JAX, OpenMP),
//! whose system calls change between library versions, so an allow filter would break honest
//! candidates. What it refuses are whole classes of kernel interfaces, each with its reason:
//! namespaces and mounts (escaping the filesystem view), ptrace and cross-process memory access
//! (reaching the judge), bpf, keyrings, io_uring (which bypasses seccomp), perf (unless
//! profiling), creating sockets (the network, and host services on Unix socket files), leaving the process group (so the
//! judge can always stop and kill every process the candidate starts), sending SIGCONT (so
//! only the judge resumes a stopped sandbox), System V shared memory, (unless asked for)
//! memory files and larger socket buffers: memory outside every limit.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;

/// Namespace flags a `clone` may not carry.
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// System calls refused outright (EPERM), by class.
fn refused(limits: &crate::Limits) -> Vec<i64> {
    let mut v = vec![
        // namespaces and mounts
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        // other processes' memory and state
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
        // kernel attack surface
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_name_to_handle_at,
        libc::SYS_open_by_handle_at,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        // sockets of any family: no network, and no Unix socket files of host services (the
        // network namespace does not cover those, nor does Landlock before ABI 9); socketpair
        // stays (unnamed, between the sandbox's own processes)
        libc::SYS_socket,
        // leaving the process group the judge stops and kills
        libc::SYS_setsid,
        libc::SYS_setpgid,
        // asynchronous I/O, which goes on while the sandbox is stopped (a red-team kernel left
        // direct reads in flight into its outputs after "f"; io_uring is refused above)
        libc::SYS_io_setup,
        libc::SYS_io_submit,
        // memory no limit counts: System V segments outlive their mappings (address space)
        // and are no files (the file systems' sizes)
        libc::SYS_shmget,
    ];
    if !limits.profiling {
        v.push(libc::SYS_perf_event_open);
    }
    if !limits.metadata_writes {
        // File modes, owners, times and extended attributes: Landlock has no right for them,
        // and the sandbox's one user is the owner of every file its user owns outside (root's,
        // when ksmith runs as root): a red-team kernel made a file outside its view mode 0777
        // with a 1970 mtime (and could have set the setuid bit on any binary it can name).
        v.extend([
            libc::SYS_chmod,
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            libc::SYS_fchmodat2,
            libc::SYS_chown,
            libc::SYS_fchown,
            libc::SYS_lchown,
            libc::SYS_fchownat,
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_utimensat,
            libc::SYS_futimesat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
        ]);
    }
    if !limits.memory_files {
        // Anonymous memory files: each is file-size limited, but open-file limits times
        // that is far more than the machine has, and they are no part of any file system.
        v.push(libc::SYS_memfd_create);
        v.push(libc::SYS_memfd_secret);
    }
    v
}

/// A condition on a 64-bit argument (flags words).
fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).expect("argument index below 6")
}

/// A condition on an `int` argument: only its low 32 bits, which is all the kernel reads, so
/// junk in the upper half of the register cannot slip past the filter.
fn cond_int(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).expect("argument index below 6")
}

/// The compiled filters, applied in order in the child (the last one installed runs first;
/// the strictest action wins).
pub(crate) fn programs(
    limits: &crate::Limits,
) -> Result<Vec<BpfProgram>, seccompiler::BackendError> {
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)?;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = refused(limits)
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
    // Threads and forks are fine, new namespaces are not.
    deny.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&f| SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(f), f)]))
            .collect::<Result<_, _>>()?,
    );
    // Only the judge resumes a stopped sandbox: no process in it may send SIGCONT (one that
    // escaped a group stop by a few microseconds could otherwise wake the others).
    for (nr, arg) in [
        (libc::SYS_kill, 1u8),
        (libc::SYS_tkill, 1),
        (libc::SYS_tgkill, 2),
        (libc::SYS_rt_sigqueueinfo, 1),
        (libc::SYS_rt_tgsigqueueinfo, 2),
        (libc::SYS_pidfd_send_signal, 1),
    ] {
        deny.insert(
            nr,
            vec![SeccompRule::new(vec![cond_int(
                arg,
                SeccompCmpOp::Eq,
                libc::SIGCONT as u64,
            )])?],
        );
    }
    // Freeing the pages of a file it may only write in place (MADV_REMOVE on a shared mapping
    // punches a hole in a tmpfs file): the judge's next write there would need a new page, and
    // with memory filled by the candidate the judge would die of SIGBUS.
    deny.insert(
        libc::SYS_madvise,
        vec![SeccompRule::new(vec![cond_int(
            2,
            SeccompCmpOp::Eq,
            libc::MADV_REMOVE as u64,
        )])?],
    );
    // Socket buffers beyond the system's defaults: kernel memory that no address-space limit
    // (and no cgroup v1 memory limit) counts; a red-team kernel held 1.5 GiB in 98 socketpairs
    // of 8 MiB each.
    deny.insert(
        libc::SYS_setsockopt,
        [
            libc::SO_SNDBUF,
            libc::SO_RCVBUF,
            libc::SO_SNDBUFFORCE,
            libc::SO_RCVBUFFORCE,
        ]
        .iter()
        .map(|&opt| {
            SeccompRule::new(vec![
                cond_int(1, SeccompCmpOp::Eq, libc::SOL_SOCKET as u64),
                cond_int(2, SeccompCmpOp::Eq, opt as u64),
            ])
        })
        .collect::<Result<_, _>>()?,
    );
    let deny = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    // clone3 passes its flags in memory, where a filter cannot look: make it unavailable, so
    // the C library falls back to clone, whose flags the filter above checks.
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    // fallocate punches holes too (and grows files past what they were given). Unsupported, so
    // the C library's posix_fallocate falls back to plain writes.
    let fallocate = SeccompFilter::new(
        [(libc::SYS_fallocate, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EOPNOTSUPP as u32),
        arch,
    )?;
    Ok(vec![
        deny.try_into()?,
        clone3.try_into()?,
        fallocate.try_into()?,
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_compile_for_this_machine() {
        let plain = crate::Limits::default();
        let p = super::programs(&plain).unwrap();
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|f| !f.is_empty()));
        let profiling = crate::Limits {
            profiling: true,
            ..crate::Limits::default()
        };
        let gpu = crate::Limits {
            memory_files: true,
            ..crate::Limits::default()
        };
        assert!(super::refused(&plain).contains(&libc::SYS_perf_event_open));
        assert!(!super::refused(&profiling).contains(&libc::SYS_perf_event_open));
        assert!(super::refused(&plain).contains(&libc::SYS_memfd_create));
        assert!(!super::refused(&gpu).contains(&libc::SYS_memfd_create));
    }
}
