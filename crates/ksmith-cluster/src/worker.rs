//! The worker's side (`ksmith worker identify|judge`): a request in, the judge's typed results
//! out. The judge is the node's own (its sandbox, compiler, Python environment and device
//! scheduler); the candidate and the task arrive as text and are checked like local files.

use crate::protocol::{
    Identity, WireSolution, WorkerErrorKind, WorkerRequest, WorkerResponse, KSMITH_VERSION,
    PROTOCOL,
};
use ksmith_judge::remote::RemoteKind;
use ksmith_judge::{Judge, JudgeConfig, JudgeError};
use ksmith_task::{Solution, Task};
use std::path::{Path, PathBuf};

/// Who judges here.
pub fn identity(judge: &mut Judge) -> Result<Identity, JudgeError> {
    let environment = judge.environment()?.clone();
    Ok(Identity {
        protocol: PROTOCOL,
        ksmith_version: KSMITH_VERSION.to_string(),
        environment,
        isolation_complete: ksmith_judge::isolation_complete(),
        hardware: judge.hardware().clone(),
    })
}

/// Makes the worker's judge for a request's settings (the CLI knows how: compiler, Python
/// environment, roofline, scheduler).
pub type JudgeMaker<'a> = dyn FnMut(JudgeConfig) -> Result<Judge, String> + 'a;

/// The worker's judge, kept across requests with the same settings: its trusted process and
/// loaded tasks stay warm.
pub struct Judges<'a> {
    make: Box<JudgeMaker<'a>>,
    cache_dir: PathBuf,
    kept: Option<(String, Judge)>,
}

impl<'a> Judges<'a> {
    /// Judges made by `make`, caching builds and references in `cache_dir`.
    pub fn new(cache_dir: PathBuf, make: Box<JudgeMaker<'a>>) -> Judges<'a> {
        Judges {
            make,
            cache_dir,
            kept: None,
        }
    }

    /// The judge for these settings; Err((kind, message)).
    fn get(
        &mut self,
        wire: &crate::protocol::WireConfig,
    ) -> Result<&mut Judge, (WorkerErrorKind, String)> {
        let config = wire
            .to_config(self.cache_dir.clone())
            .map_err(|e| (WorkerErrorKind::Request, e))?;
        let key = serde_json::to_string(wire).unwrap_or_default();
        if self.kept.as_ref().is_none_or(|(k, _)| *k != key) {
            self.kept = None;
            let judge = (self.make)(config).map_err(|e| (WorkerErrorKind::Environment, e))?;
            self.kept = Some((key, judge));
        }
        Ok(&mut self.kept.as_mut().expect("just set").1)
    }
}

/// Serves one request line; never fails (a failure is a response).
pub fn serve(line: &str, judges: &mut Judges<'_>) -> WorkerResponse {
    let req: WorkerRequest = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return request_err(format!("not a worker request: {e}")),
    };
    if req.protocol != PROTOCOL {
        return request_err(format!(
            "protocol {} requested; this worker (ksmith {KSMITH_VERSION}) speaks {PROTOCOL}",
            req.protocol
        ));
    }
    let dir = match tempfile::Builder::new().prefix("ksmith-task-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            return WorkerResponse::error(
                WorkerErrorKind::Environment,
                None,
                format!("a temporary directory: {e}"),
            )
        }
    };
    let task = match unpack_task(&req, dir.path()) {
        Ok(t) => t,
        Err(e) => return request_err(e),
    };
    let mut solutions = Vec::with_capacity(req.solutions.len());
    for w in &req.solutions {
        match solution(w) {
            Ok(s) => solutions.push(s),
            Err(e) => return request_err(e),
        }
    }
    if solutions.is_empty() {
        return request_err("no candidate in the request".into());
    }
    let judge = match judges.get(&req.config) {
        Ok(j) => j,
        Err((kind, e)) => return WorkerResponse::error(kind, None, e),
    };
    let outcome = match req.job {
        RemoteKind::Evaluate { race } => judge
            .evaluate_raced(&task, &solutions[0], race)
            .map(|r| (vec![r], None)),
        RemoteKind::Compare { light } => {
            let c = if light {
                judge.compare_checked(&task, &solutions)
            } else {
                judge.compare(&task, &solutions)
            };
            c.map(|c| (c.results.clone(), Some(c)))
        }
    };
    match outcome {
        Ok((results, comparison)) => WorkerResponse {
            protocol: PROTOCOL,
            ok: true,
            results,
            comparison,
            error: None,
        },
        Err(e) => judge_error(e),
    }
}

fn request_err(message: String) -> WorkerResponse {
    WorkerResponse::error(WorkerErrorKind::Request, None, message)
}

/// A judge error as the caller will rebuild it.
fn judge_error(e: JudgeError) -> WorkerResponse {
    let (kind, backend) = match &e {
        JudgeError::Unavailable { backend, .. } => {
            (WorkerErrorKind::Unavailable, Some(backend.to_string()))
        }
        JudgeError::Task { .. } => (WorkerErrorKind::Task, None),
        JudgeError::Isolation(_) => (WorkerErrorKind::Isolation, None),
        _ => (WorkerErrorKind::Environment, None),
    };
    let message = match e {
        JudgeError::Unavailable { why, .. } => why,
        JudgeError::Task { message, .. } => message,
        JudgeError::Isolation(note) => note,
        e => e.to_string(),
    };
    WorkerResponse::error(kind, backend, message)
}

/// Writes the task's files under `dir` and loads it as the caller had it: the task its files
/// define, restricted to a workload set or given held-out shapes as the caller's was. Every
/// hash is computed here from what arrived (the trusted side keys its reference cache and
/// paths by it), never taken from the request: the request's hash must equal the one
/// computed, or the request is refused.
fn unpack_task(req: &WorkerRequest, dir: &Path) -> Result<Task, String> {
    let wire = &req.task;
    if !wire.files.contains_key(ksmith_task::TASK_FILE_NAME) {
        return Err(format!("the task has no {}", ksmith_task::TASK_FILE_NAME));
    }
    if !is_digest(&wire.content_hash) {
        return Err(format!(
            "task.content_hash `{}` is not a content hash (64 hex digits)",
            wire.content_hash.escape_debug()
        ));
    }
    for (name, text) in &wire.files {
        // The names become paths here: the same rule as solution sources.
        if !ksmith_task::is_safe_source_path(name) {
            return Err(format!(
                "task file name `{}` is not a safe relative path",
                name.escape_debug()
            ));
        }
        let path: PathBuf = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let task = Task::load(dir).map_err(|p| format!("invalid task {}:\n{p}", wire.name))?;
    if task.name != wire.name {
        return Err(format!(
            "the task's files name it {}, the request {}",
            task.name, wire.name
        ));
    }
    judged_task(task, wire)
}

/// The task as judged, derived here the way callers derive it: the task itself or one of its
/// workload sets (the same workloads exactly), or held-out shapes near its own
/// ([`Task::held_out_problem`]) hashed over their shapes and inputs.
fn judged_task(task: Task, wire: &crate::protocol::WireTask) -> Result<Task, String> {
    let mut bases = vec![task.clone()];
    bases.extend(task.sets().into_iter().filter_map(|s| task.for_set(s)));
    for b in &bases {
        if b.workloads == wire.workloads && b.other_workloads == wire.other_workloads {
            return matching(b.clone(), wire);
        }
    }
    if wire.workloads.is_empty() || !wire.other_workloads.is_empty() {
        return Err(
            "task.workloads: neither the task's own workloads nor held-out shapes of it".into(),
        );
    }
    for (i, w) in wire.workloads.iter().enumerate() {
        if let Some(why) = task.held_out_problem(w) {
            return Err(format!("task.workloads[{i}]: {why}"));
        }
    }
    let mut computed = Vec::new();
    for b in &bases {
        let held = b.with_workloads(wire.workloads.clone(), "held-out");
        if held.content_hash == wire.content_hash {
            return Ok(held);
        }
        computed.push(held.content_hash);
    }
    Err(hash_mismatch(wire, &computed.join(" or ")))
}

/// `task` if its hash, computed here, is the request's.
fn matching(task: Task, wire: &crate::protocol::WireTask) -> Result<Task, String> {
    if task.content_hash == wire.content_hash {
        Ok(task)
    } else {
        Err(hash_mismatch(wire, &task.content_hash))
    }
}

/// The refusal of a request whose task hash is not the one computed here.
fn hash_mismatch(wire: &crate::protocol::WireTask, computed: &str) -> String {
    format!(
        "task.content_hash {} is not the hash of the task's files and workloads (computed here: {computed})",
        wire.content_hash
    )
}

/// 64 lowercase hex digits: the shape of every content hash.
fn is_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A candidate from the request, checked like a `solution.toml` and hashed here.
fn solution(w: &WireSolution) -> Result<Solution, String> {
    let s = Solution::from_parts(
        w.name.clone(),
        w.language,
        w.entry_point.clone(),
        w.sources.clone(),
        w.flags.clone(),
    );
    let problems = s.untrusted_problems();
    if !problems.is_empty() {
        return Err(format!(
            "candidate {}: {}",
            w.name.escape_debug(),
            problems.join("; ")
        ));
    }
    if s.content_hash != w.content_hash {
        return Err(format!(
            "candidate {}: content hash {} here, {} at the caller (a different ksmith?)",
            w.name.escape_debug(),
            s.content_hash,
            w.content_hash
        ));
    }
    Ok(s)
}
