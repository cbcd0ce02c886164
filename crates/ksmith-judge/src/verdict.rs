//! Why the cascade stopped: verdicts from what the judge observed, and how they become a result.

use crate::*;

/// Why the cascade stopped early.
pub(crate) struct Verdict {
    pub(crate) status: Status,
    pub(crate) reason: Reason,
    pub(crate) detail: String,
    /// The workload the failure happened on, when it concerns one.
    pub(crate) workload: Option<usize>,
}

impl Verdict {
    pub(crate) fn new(status: Status, reason: Reason, detail: impl Into<String>) -> Verdict {
        Verdict {
            status,
            reason,
            detail: detail.into(),
            workload: None,
        }
    }

    /// Attributes the failure to workload `w` unless it already names one.
    pub(crate) fn at(mut self, w: Option<usize>) -> Verdict {
        self.workload = self.workload.or(w);
        self
    }
}

/// Errors inside the candidate part of the cascade: the candidate's fault, or the judge's.
pub(crate) enum Failure {
    Candidate(CallError),
    Judge(JudgeError),
}

impl From<JudgeError> for Failure {
    fn from(e: JudgeError) -> Self {
        Failure::Judge(e)
    }
}

/// Maps a failed runner request to a status and reason: from what the judge observed itself
/// (the timeout, the memory cgroup's OOM kills, the exit or signal), never from a file or line
/// the candidate can write.
pub(crate) fn classify(e: CallError, runner: &Peer) -> Verdict {
    let mut v = observed(e, runner);
    // Read safely (no links, no FIFOs, 32 bytes at most): the directory is the candidate's.
    // The allocation guard's marker is written inside the sandbox, so it is the candidate's
    // claim: only a number is taken from it, and it only adds a note to the observed verdict
    // (a candidate that wrote it and crashed was once reported `memory_limit`).
    let claimed = runner
        .read_private(ksmith_harness::ALLOC_FAILED_MARKER, 32)
        .and_then(|s| s.lines().next()?.trim().parse::<u64>().ok());
    if let Some(bytes) = claimed.filter(|_| v.reason != Reason::MemoryLimit) {
        v.detail.push_str(&format!(
            "; the allocation guard inside the sandbox reported a failed allocation of {bytes} bytes (address-space limit) before it (the runner's own report, not verified)"
        ));
    }
    v
}

pub(crate) fn observed(e: CallError, runner: &Peer) -> Verdict {
    match e {
        CallError::Timeout(t) => Verdict::new(
            Status::Timeout,
            Reason::WallTimeout,
            format!(
                "no result within {:.1} s; the process group was killed",
                t.as_secs_f64()
            ),
        ),
        // The kernel's word (the sandbox's memory cgroup).
        _ if runner.memory_exceeded() => Verdict::new(
            Status::RuntimeError,
            Reason::MemoryLimit,
            "the candidate's processes together went over their memory limit and the kernel killed one",
        ),
        CallError::Died {
            exit: Exit::Signal(s),
            ..
        } if s == libc_sigxcpu() => Verdict::new(
            Status::Timeout,
            Reason::CpuTimeLimit,
            "the CPU-time limit was reached",
        ),
        CallError::Died {
            exit: Exit::Signal(s),
            ..
        } => {
            let name = signal_name(s);
            Verdict::new(
                Status::RuntimeError,
                Reason::Signal(name.to_string()),
                format!("the candidate process was killed by {name}"),
            )
        }
        CallError::Died {
            exit: Exit::Code(c),
            ..
        } => Verdict::new(
            Status::RuntimeError,
            Reason::EarlyExit,
            format!("the candidate process exited with code {c} during a call"),
        ),
        CallError::Died {
            exit: Exit::Running,
            ..
        } => Verdict::new(
            Status::RuntimeError,
            Reason::ProtocolViolation,
            "the candidate closed the harness channel",
        ),
        CallError::Protocol(m) => Verdict::new(Status::RuntimeError, Reason::ProtocolViolation, m),
        CallError::Remote { message, .. } => {
            let (status, reason) = if message.starts_with("shape mismatch")
                || message.starts_with("candidate returned")
            {
                (Status::IncorrectShape, Reason::OutputShape)
            } else if message.starts_with("dtype mismatch") {
                (Status::IncorrectDtype, Reason::OutputDtype)
            } else if message.starts_with("candidate raised") {
                (Status::RuntimeError, Reason::Exception)
            } else {
                (Status::RuntimeError, Reason::LoadFailed)
            };
            Verdict::new(status, reason, message)
        }
    }
}

/// Sets the status from the cascade's verdict (none: everything ran).
pub(crate) fn apply_verdict(r: &mut EvalResult, verdict: Option<Verdict>) {
    match verdict {
        Some(v) => {
            r.status = v.status;
            r.reason = Some(v.reason);
            r.detail = Some(v.detail);
            r.failed_workload = v.workload;
        }
        None => r.stage = Stage::Done,
    }
}

/// The first static-policy violation as a verdict.
pub(crate) fn policy_verdict(r: &EvalResult) -> Option<Verdict> {
    r.policy.first().map(|v| {
        Verdict::new(
            Status::PolicyRejected,
            Reason::ForbiddenCall,
            format!("{}:{}: {}", v.file, v.line, v.message),
        )
    })
}

/// Records a failed build and returns its verdict (the first error diagnostic as detail).
pub(crate) fn compile_failure(f: c::BuildFailure, r: &mut EvalResult) -> Verdict {
    let detail = f
        .diagnostics
        .iter()
        .find(|d| d.severity.contains("error"))
        .map(|d| d.to_string())
        .unwrap_or_else(|| f.log.lines().last().unwrap_or("").to_string());
    r.build = Some(BuildInfo {
        cached: false,
        seconds: 0.0,
        command: f.command,
        diagnostics: f.diagnostics,
        log: f.log,
        ptxas: Vec::new(),
    });
    let reason = match f.reason {
        c::BuildFailureKind::CompileError => Reason::CompileError,
        c::BuildFailureKind::MissingEntryPoint => Reason::MissingEntryPoint,
        c::BuildFailureKind::LibraryTooLarge => Reason::LibraryTooLarge,
    };
    Verdict::new(Status::CompileError, reason, detail)
}

/// Build facts of a successful build.
pub(crate) fn build_info(built: &ksmith_backend::backend::Product) -> BuildInfo {
    BuildInfo {
        cached: built.cached,
        seconds: built.seconds,
        command: built.command.clone(),
        diagnostics: built.diagnostics.clone(),
        log: built.log.clone(),
        ptxas: built.ptxas.clone(),
    }
}

pub(crate) fn libc_sigxcpu() -> i32 {
    nix::sys::signal::Signal::SIGXCPU as i32
}
