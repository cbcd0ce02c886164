//! The seccomp layer: a filter, compiled before the fork, that refuses the system calls a kernel
//! never needs and an attacker would use to leave the sandbox or reach other processes.
//!
//! It is a deny filter on purpose: the runner is a full Python interpreter (numpy, JAX, OpenMP),
//! whose system calls change between library versions, so an allow filter would break honest
//! candidates. What it refuses are whole classes of kernel interfaces, each with its reason:
//! namespaces and mounts (escaping the filesystem view), ptrace and cross-process memory access
//! (reaching the judge), bpf, keyrings, io_uring (which bypasses seccomp), perf (unless
//! profiling), sockets other than Unix ones (the network), and leaving the process group (so
//! the judge can always stop and kill every process the candidate starts).

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
fn refused(profiling: bool) -> Vec<i64> {
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
        // leaving the process group the judge stops and kills
        libc::SYS_setsid,
        libc::SYS_setpgid,
    ];
    if !profiling {
        v.push(libc::SYS_perf_event_open);
    }
    v
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).expect("argument index below 6")
}

/// The compiled filters, applied in order in the child (the last one installed runs first;
/// the strictest action wins).
pub(crate) fn programs(profiling: bool) -> Result<Vec<BpfProgram>, seccompiler::BackendError> {
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)?;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = refused(profiling)
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
    // Sockets: Unix ones only (Python's own machinery); no network of any family.
    deny.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![cond(
            0,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )])?],
    );
    // Threads and forks are fine, new namespaces are not.
    deny.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&f| SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(f), f)]))
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
    Ok(vec![deny.try_into()?, clone3.try_into()?])
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_compile_for_this_machine() {
        let p = super::programs(false).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|f| !f.is_empty()));
        assert!(super::refused(false).contains(&libc::SYS_perf_event_open));
        assert!(!super::refused(true).contains(&libc::SYS_perf_event_open));
    }
}
