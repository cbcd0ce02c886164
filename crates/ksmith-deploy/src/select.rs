//! Which evaluation each task exports: the fastest PASSED one on this machine for the task as it
//! is now (its workload sets' hashes), or one the user names.

use crate::DeployError;
use ksmith_store::{Store, StoredEval};
use ksmith_task::{Language, Task, WorkloadSet};

/// A task and the evaluation chosen for it, with everything the package needs.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The task restricted to the workload set the evaluation was judged on.
    pub task: Task,
    /// That workload set.
    pub set: WorkloadSet,
    /// The reference module's source.
    pub reference: String,
    /// The evaluation.
    pub eval: StoredEval,
    /// The solution's language.
    pub language: Language,
    /// Its entry point.
    pub entry_point: String,
    /// Its extra build flags (tunable values included, as `-DNAME=VALUE`).
    pub flags: Vec<String>,
    /// The exact sources that were judged: (file name, bytes).
    pub sources: Vec<(String, Vec<u8>)>,
}

/// The task's workload sets with their content hashes (a result records the set's hash).
fn set_hashes(task: &Task) -> Vec<(WorkloadSet, Task)> {
    [WorkloadSet::Cpu, WorkloadSet::Interpret, WorkloadSet::Gpu]
        .into_iter()
        .filter_map(|s| task.for_set(s).map(|t| (s, t)))
        .collect()
}

/// Ranking: timed results by speedup, above untimed ones; newer first among equals.
fn score(e: &StoredEval) -> (bool, f64, i64) {
    match &e.result.performance {
        Some(p) if p.speedup.is_finite() => (true, p.speedup, e.id),
        _ => (false, 0.0, e.id),
    }
}

/// The fastest PASSED evaluation of `task` (as it is on disk now) on `fingerprint`, of
/// solutions in `language` when one is given.
pub fn choose_best(
    store: &Store,
    task: &Task,
    fingerprint: &str,
    language: Option<Language>,
) -> Result<Choice, DeployError> {
    let sets = set_hashes(task);
    let hashes: Vec<String> = sets.iter().map(|(_, t)| t.content_hash.clone()).collect();
    let ids = store.passed(&task.name, &hashes, Some(fingerprint))?;
    let mut best: Option<StoredEval> = None;
    for id in ids {
        let Some(e) = store.get(id)? else { continue };
        let lang = e.solution.get("language").and_then(|v| v.as_str());
        if language.is_some_and(|l| lang != Some(l.name())) {
            continue;
        }
        if best.as_ref().is_none_or(|b| score(&e) > score(b)) {
            best = Some(e);
        }
    }
    match best {
        Some(e) => complete(store, task, e),
        None => {
            let elsewhere = store.passed(&task.name, &hashes, None)?.len();
            let other_versions = store.passed_count(&task.name)? - elsewhere;
            let hint = if let Some(l) = language {
                format!(" in language {}", l.name())
            } else if other_versions > 0 {
                format!(
                    "; {other_versions} passed on an earlier version of the task (its task.toml or reference has changed since, comments included): re-evaluate"
                )
            } else if elsewhere > 0 {
                format!(
                    "; {elsewhere} passed under another environment (another machine, compiler or ksmith version): re-evaluate here, or name one with --eval ID"
                )
            } else {
                format!(
                    "; evaluate a solution first (ksmith eval {} SOLUTION, or ksmith optimize)",
                    task.dir.display()
                )
            };
            Err(DeployError::NoPassed {
                task: task.name.clone(),
                fingerprint: fingerprint.to_string(),
                hint,
            })
        }
    }
}

/// Evaluation `id`, which must be a PASSED evaluation of `task` as it is now.
pub fn choose_eval(store: &Store, task: &Task, id: i64) -> Result<Choice, DeployError> {
    let bad = |m: String| DeployError::Eval { id, message: m };
    let e = store
        .get(id)?
        .ok_or_else(|| bad("no such evaluation (ksmith show lists none with this id)".into()))?;
    if e.result.task != task.name {
        return Err(bad(format!(
            "is of task `{}`, not `{}`",
            e.result.task, task.name
        )));
    }
    if e.result.status.as_str() != "PASSED" {
        return Err(bad(format!(
            "ended {}, only PASSED evaluations are exported",
            e.result.status.as_str()
        )));
    }
    complete(store, task, e)
}

fn complete(store: &Store, task: &Task, e: StoredEval) -> Result<Choice, DeployError> {
    let id = e.id;
    let bad = |m: String| DeployError::Eval { id, message: m };
    let (set, judged) = set_hashes(task)
        .into_iter()
        .find(|(_, t)| t.content_hash == e.result.task_hash)
        .ok_or_else(|| {
            bad(format!(
                "was judged on another version of task `{}` (its task.toml or reference changed since); re-evaluate the solution",
                task.name
            ))
        })?;
    let field = |k: &str| e.solution.get(k);
    let language = field("language")
        .and_then(|v| v.as_str())
        .and_then(Language::from_name)
        .ok_or_else(|| bad("stored solution has no known language".into()))?;
    let entry_point = field("entry_point")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("stored solution has no entry point".into()))?
        .to_string();
    let flags = field("flags")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut sources = Vec::new();
    for (name, hash) in &e.sources {
        // Names were checked as safe path components when the solution was loaded; check again,
        // because they become file names in the package.
        if !ksmith_task::is_safe_component(name) {
            return Err(bad(format!(
                "source file name `{name}` is not a plain file name"
            )));
        }
        sources.push((name.clone(), store.artifact(hash)?));
    }
    if sources.is_empty() {
        return Err(bad("has no stored sources".into()));
    }
    let ref_path = task.dir.join(&task.reference.file);
    let reference = std::fs::read_to_string(&ref_path).map_err(|source| DeployError::Io {
        path: ref_path,
        source,
    })?;
    Ok(Choice {
        task: judged,
        set,
        reference,
        eval: e,
        language,
        entry_point,
        flags,
        sources,
    })
}
