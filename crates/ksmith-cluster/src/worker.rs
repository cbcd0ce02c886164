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

    fn get(&mut self, wire: &crate::protocol::WireConfig) -> Result<&mut Judge, String> {
        let key = serde_json::to_string(wire).unwrap_or_default();
        if self.kept.as_ref().is_none_or(|(k, _)| *k != key) {
            self.kept = None;
            let judge = (self.make)(wire.to_config(self.cache_dir.clone()))?;
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
        Err(e) => return WorkerResponse::error(WorkerErrorKind::Environment, None, e),
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

/// Writes the task's files under `dir` and loads it as the caller had it.
fn unpack_task(req: &WorkerRequest, dir: &Path) -> Result<Task, String> {
    let wire = &req.task;
    if !wire.files.contains_key(ksmith_task::TASK_FILE_NAME) {
        return Err(format!("the task has no {}", ksmith_task::TASK_FILE_NAME));
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
    let mut task = Task::load(dir).map_err(|p| format!("invalid task {}:\n{p}", wire.name))?;
    if task.name != wire.name {
        return Err(format!(
            "the task's files name it {}, the request {}",
            task.name, wire.name
        ));
    }
    // The task as judged may be derived (workload set, held-out shapes): its workloads and
    // hash are the caller's.
    task.workloads = wire.workloads.clone();
    task.other_workloads = wire.other_workloads.clone();
    task.content_hash = wire.content_hash.clone();
    Ok(task)
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
