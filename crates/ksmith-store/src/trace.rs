//! Export in the FlashInfer Trace schema, laid out as FlashInfer-Bench's data set:
//! `definitions/<op_type>/<def>.json`, `solutions/<op_type>/<def>/*.json`,
//! `workloads/<op_type>/<def>.jsonl` (each workload once), `traces/<op_type>/<def>.jsonl` (one
//! trace per evaluation and workload), in the form flashinfer-bench
//! 0.1.2's own classes (`Definition`, `Solution`, `Trace`, `TraceSet.from_path`) load.
//!
//! Where their schema has no field for a fact of ours (our exact status, the input
//! distributions, timing spread, the workload set), it goes into a field their classes keep: a
//! first line `ksmith: {JSON}` in `Evaluation.log` and `Solution.description`, and
//! `Correctness.extra`. docs/trace.md has the mapping.
//!
//! Task and solution names come from files a candidate's author may control; every name that
//! becomes a path component here goes through [`ksmith_task::safe_component`], so nothing is
//! written outside the export directory and distinct names never share a file.

use crate::{Store, StoreError, StoredEval};
use ksmith_judge::{EvalResult, Stage, Status};
use ksmith_task::{safe_component, set_content_hash, WorkloadSet};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// What an export wrote, and what it left out (one line each, naming the evaluation or task).
#[derive(Debug, Default)]
pub struct ExportSummary {
    /// Definition files written.
    pub definitions: usize,
    /// Solution files written.
    pub solutions: usize,
    /// Trace lines written.
    pub traces: usize,
    /// Workload lines written (one per distinct workload of a definition).
    pub workloads: usize,
    /// Evaluations not exported, and why.
    pub skipped: Vec<String>,
}

/// FlashInfer-Bench's `EvaluationStatus` (0.1.2): ours less `POLICY_REJECTED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FibStatus {
    Passed,
    IncorrectShape,
    IncorrectNumerical,
    IncorrectDtype,
    RuntimeError,
    CompileError,
    Timeout,
}

impl FibStatus {
    /// Ours mapped to theirs. A policy rejection refuses to build the candidate (so: a build
    /// failure), or, from the timing on (implausible speed), stops a run (a runtime error).
    fn of(status: Status, stage: Stage) -> FibStatus {
        match status {
            Status::Passed => FibStatus::Passed,
            Status::CompileError => FibStatus::CompileError,
            Status::RuntimeError => FibStatus::RuntimeError,
            Status::Timeout => FibStatus::Timeout,
            Status::IncorrectShape => FibStatus::IncorrectShape,
            Status::IncorrectDtype => FibStatus::IncorrectDtype,
            Status::IncorrectNumerical => FibStatus::IncorrectNumerical,
            Status::PolicyRejected => match stage {
                Stage::Policy | Stage::Build => FibStatus::CompileError,
                _ => FibStatus::RuntimeError,
            },
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            FibStatus::Passed => "PASSED",
            FibStatus::IncorrectShape => "INCORRECT_SHAPE",
            FibStatus::IncorrectNumerical => "INCORRECT_NUMERICAL",
            FibStatus::IncorrectDtype => "INCORRECT_DTYPE",
            FibStatus::RuntimeError => "RUNTIME_ERROR",
            FibStatus::CompileError => "COMPILE_ERROR",
            FibStatus::Timeout => "TIMEOUT",
        }
    }

    /// Their validator: correctness with PASSED and INCORRECT_NUMERICAL only.
    fn has_correctness(self) -> bool {
        matches!(self, FibStatus::Passed | FibStatus::IncorrectNumerical)
    }
}

/// FlashInfer-Bench's `SupportedLanguages` (0.1.2) for one of our languages: C goes as `cpp`
/// (their nearest; our exact language stays in the solution's metadata), Pallas as `python`.
fn fib_language(ours: &str) -> Option<&'static str> {
    match ours {
        "c" => Some("cpp"),
        "cuda" => Some("cuda"),
        "triton" => Some("triton"),
        "pallas" => Some("python"),
        _ => None,
    }
}

/// Element types FlashInfer-Bench's `DType` (0.1.2) has; float64 and uint8 are not among them.
const FIB_DTYPES: [&str; 8] = [
    "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "bool",
];

/// The namespace of exported workload identifiers (a fixed, randomly drawn UUID).
const WORKLOAD_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6b73_6d69_7468_4b53_9e1d_0c3a_5f2e_8d41);

/// A workload's identifier: an RFC 4122 name-based (version 5) UUID of the judged set's task
/// hash and the workload's index, so the same workload has the same id in every evaluation
/// and every export.
pub fn workload_uuid(task_hash: &str, workload: usize) -> String {
    uuid::Uuid::new_v5(
        &WORKLOAD_NAMESPACE,
        format!("{task_hash}:{workload}").as_bytes(),
    )
    .to_string()
}

/// A float as JSON; NaN and infinities as the strings pydantic reads (and writes) for them,
/// since JSON has no literal for them.
fn num(x: f64) -> Value {
    if x.is_nan() {
        json!("NaN")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(x)
    }
}

/// Text that begins with our metadata line: `ksmith: {JSON}` (one line), then `rest`.
fn with_metadata(meta: &Value, rest: &str) -> String {
    let mut s = format!("ksmith: {meta}");
    if !rest.is_empty() {
        s.push('\n');
        s.push_str(rest);
    }
    s
}

/// The reference file as FlashInfer-Bench wants it: Python with a top-level `run` taking the
/// inputs (ours takes them in declared order too); a `run` calling our function is appended
/// when the function has another name. A file that cannot be read any more gets a `run` that
/// says so when called.
fn reference_source(task: &Value) -> String {
    let file = task["reference"]["file"].as_str().unwrap_or("reference.py");
    let function = task["reference"]["function"]
        .as_str()
        .unwrap_or("reference");
    let path = task["dir"].as_str().map(|d| Path::new(d).join(file));
    match path.as_ref().map(std::fs::read_to_string) {
        Some(Ok(text)) if function == "run" => text,
        Some(Ok(text)) => format!(
            "{}\n\n# FlashInfer-Bench calls `run`; the task names `{function}`.\ndef run(*inputs):\n    return {function}(*inputs)\n",
            text.trim_end()
        ),
        _ => format!(
            "def run(*inputs):\n    raise FileNotFoundError({:?})\n",
            format!(
                "the reference {} was not found when ksmith exported this definition",
                path.map(|p| p.display().to_string()).unwrap_or_default()
            )
        ),
    }
}

/// The definition, or why the task cannot be one (a dtype their schema lacks).
fn definition(task: &Value, name: &str) -> Result<Value, String> {
    let axes: Map<String, Value> = task["axes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let mut o = json!({"type": a["kind"]});
            if a["kind"] == "const" {
                o["value"] = a["value"].clone();
            }
            (a["name"].as_str().unwrap_or("").to_string(), o)
        })
        .collect();
    let tensors = |key: &str| -> Result<Map<String, Value>, String> {
        task[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let dtype = t["dtype"].as_str().unwrap_or("");
                let tname = t["name"].as_str().unwrap_or("");
                if !FIB_DTYPES.contains(&dtype) {
                    return Err(format!(
                        "{key} `{}` is {dtype}, which FlashInfer-Bench's schema has no dtype for",
                        tname.escape_debug()
                    ));
                }
                let scalar = t["shape"].as_array().is_none_or(Vec::is_empty);
                let mut spec = json!({
                    "shape": if scalar { Value::Null } else { t["shape"].clone() },
                    "dtype": dtype,
                });
                // Outputs carry their tolerances, which the schema has no field for.
                if let (Some(atol), Some(rtol)) = (t["atol"].as_f64(), t["rtol"].as_f64()) {
                    spec["description"] =
                        json!(format!("ksmith tolerance: atol {atol}, rtol {rtol}"));
                }
                Ok((tname.to_string(), spec))
            })
            .collect()
    };
    Ok(json!({
        "name": name,
        "op_type": task["op_class"],
        "description": task["description"],
        "axes": axes,
        "inputs": tensors("inputs")?,
        "outputs": tensors("outputs")?,
        "reference": reference_source(task),
        "tags": ["ksmith", format!("task_hash:{}", task["content_hash"].as_str().unwrap_or(""))],
    }))
}

/// The workloads an evaluation was judged on, and their set: the result's task hash names the
/// set (a Triton or Pallas candidate judged on a CPU ran the interpret set, not the stored
/// task's CPU set). None when the hash matches no set of the stored task.
fn judged_workloads(task: &Value, r: &EvalResult) -> Option<(String, Vec<Value>)> {
    let stored = task["content_hash"].as_str().unwrap_or("");
    let listed = |key: &str| task[key].as_array().cloned().unwrap_or_default();
    if r.task_hash == stored {
        let w = listed("workloads");
        let set = w
            .first()
            .and_then(|w| w["set"].as_str())
            .unwrap_or("cpu")
            .to_string();
        return Some((set, w));
    }
    [WorkloadSet::Cpu, WorkloadSet::Gpu, WorkloadSet::Interpret]
        .into_iter()
        .find(|&s| set_content_hash(stored, s) == r.task_hash)
        .map(|s| {
            let all = listed("workloads")
                .into_iter()
                .chain(listed("other_workloads"));
            (
                s.name().to_string(),
                all.filter(|w| w["set"] == s.name()).collect(),
            )
        })
}

/// FlashInfer-Bench's workload inputs: a scalar input with a constant value is a `scalar`
/// input, everything else `random` (the distribution itself goes into our metadata).
fn workload_inputs(task: &Value, w: &Value) -> Map<String, Value> {
    let spec = |name: &str| {
        task["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["name"] == name)
    };
    w["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|pair| {
            let name = pair[0].as_str().unwrap_or("").to_string();
            let dist = &pair[1];
            let t = spec(&name);
            let scalar = t.is_some_and(|t| t["shape"].as_array().is_none_or(Vec::is_empty));
            let input = match (scalar, dist["dist"].as_str(), dist["value"].as_f64()) {
                (true, Some("constant"), Some(v)) => {
                    let dtype = t.and_then(|t| t["dtype"].as_str()).unwrap_or("");
                    let value = match dtype {
                        "bool" => json!(v != 0.0),
                        d if d.starts_with("int") || d.starts_with("uint") => json!(v as i64),
                        _ => json!(v),
                    };
                    json!({"type": "scalar", "value": value})
                }
                _ => json!({"type": "random"}),
            };
            (name, input)
        })
        .collect()
}

/// The workloads (indices into the judged set) a result speaks for, each with its own status:
/// a passed evaluation, every workload; a failure before any call (policy, build, load), every
/// workload, since none could run; a failure on one workload, that workload only (the others
/// were not run or not timed, and a rejected candidate has no PASSED traces).
fn workloads_judged(r: &EvalResult, n: usize) -> Vec<usize> {
    if r.status == Status::Passed {
        return (0..n).collect();
    }
    let ran = matches!(
        r.stage,
        Stage::QuickCheck | Stage::FullCheck | Stage::Timing
    );
    // Results stored before `failed_workload` existed: the worst element's workload.
    let at = ran
        .then(|| {
            r.failed_workload
                .or_else(|| Some(r.correctness.as_ref()?.worst.as_ref()?.workload))
        })
        .flatten();
    match at {
        Some(w) if w < n => vec![w],
        _ => (0..n).collect(),
    }
}

/// Export state: one definition per task name, solution names unique across definitions.
#[derive(Default)]
struct Export {
    definitions: BTreeMap<String, Value>,
    /// (definition, file name) -> solution.
    solutions: BTreeMap<(String, String), Value>,
    /// Solution name -> its definition (FlashInfer-Bench wants names unique in a data set).
    owner: BTreeMap<String, String>,
    traces: BTreeMap<String, Vec<Value>>,
    /// Definition -> its workloads by id (a workload trace each: no solution, no evaluation).
    workloads: BTreeMap<String, BTreeMap<String, Value>>,
    skipped: Vec<String>,
}

impl Export {
    fn add(&mut self, store: &Store, ev: &StoredEval) -> Result<(), StoreError> {
        let r = &ev.result;
        let def_name = safe_component(&r.task);
        let definition = match definition(&ev.task, &def_name) {
            Ok(d) => d,
            Err(why) => {
                self.skipped
                    .push(format!("evaluation {} (task {}): {why}", ev.id, r.task));
                return Ok(());
            }
        };
        let Some((set, workloads)) = judged_workloads(&ev.task, r) else {
            self.skipped.push(format!(
                "evaluation {} (task {}): its task hash matches no workload set of the stored task",
                ev.id, r.task
            ));
            return Ok(());
        };
        self.definitions.insert(def_name.clone(), definition);
        let sol_name = self.solution(store, ev, &def_name)?;
        for wi in workloads_judged(r, workloads.len()) {
            let trace = trace(ev, &def_name, &sol_name, &set, wi, &workloads[wi]);
            let workload = trace["workload"].clone();
            if let Some(id) = workload["uuid"].as_str() {
                self.workloads
                    .entry(def_name.clone())
                    .or_default()
                    .entry(id.to_string())
                    .or_insert_with(|| json!({"definition": def_name, "workload": workload}));
            }
            self.traces.entry(def_name.clone()).or_default().push(trace);
        }
        Ok(())
    }

    /// Adds the evaluation's solution; returns its name.
    fn solution(
        &mut self,
        store: &Store,
        ev: &StoredEval,
        def_name: &str,
    ) -> Result<String, StoreError> {
        let r = &ev.result;
        let short_hash: String = r
            .solution_hash
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(8)
            .collect();
        let mut sol_name = safe_component(&format!("{}_{short_hash}", r.solution));
        // The same code judged on another task is another solution of theirs.
        if self.owner.get(&sol_name).is_some_and(|d| d != def_name) {
            sol_name = safe_component(&format!("{sol_name}_{def_name}"));
        }
        self.owner.insert(sol_name.clone(), def_name.to_string());
        let mut empty = Vec::new();
        let sources: Vec<Value> = ev
            .sources
            .iter()
            .map(|(n, h)| {
                let text = String::from_utf8_lossy(&store.artifact(h)?).into_owned();
                // Their schema wants non-empty contents.
                let content = if text.is_empty() {
                    empty.push(n.clone());
                    "\n".to_string()
                } else {
                    text
                };
                Ok(json!({"path": n, "content": content}))
            })
            .collect::<Result<_, StoreError>>()?;
        let language = ev.solution["language"].as_str().unwrap_or("c");
        let entry_file = ev.sources.first().map(|(n, _)| n.as_str()).unwrap_or("");
        let entry = ev.solution["entry_point"].as_str().unwrap_or("");
        let meta = json!({
            "language": language,
            "name": r.solution,
            "solution_hash": r.solution_hash,
            "entry_point": entry,
            "flags": ev.solution["flags"],
            "tunables": ev.solution["tunables"],
            "emptied_sources": empty,
        });
        let target = match language {
            "c" => vec!["cpu"],
            "pallas" => vec!["gpu", "tpu"],
            _ => vec!["cuda"],
        };
        let solution = json!({
            "name": sol_name,
            "definition": def_name,
            "author": "ksmith",
            "spec": {
                "language": fib_language(language).unwrap_or("cpp"),
                "target_hardware": target,
                "entry_point": format!("{entry_file}::{entry}"),
                "dependencies": [],
                // Pallas entry functions return their outputs; the others write them.
                "destination_passing_style": language != "pallas",
            },
            "sources": sources,
            "description": with_metadata(
                &meta,
                &format!("KernelSmith solution {} ({language})", r.solution),
            ),
        });
        let file = format!("{sol_name}.json");
        self.solutions
            .insert((def_name.to_string(), file), solution);
        Ok(sol_name)
    }

    /// Writes everything under `out`.
    fn write(self, out: &Path) -> Result<ExportSummary, StoreError> {
        let io = |p: &Path, e| StoreError::Io {
            path: p.to_path_buf(),
            source: e,
        };
        for d in ["definitions", "solutions", "workloads", "traces"] {
            std::fs::create_dir_all(out.join(d)).map_err(|e| io(out, e))?;
        }
        let mut summary = ExportSummary {
            skipped: self.skipped,
            ..ExportSummary::default()
        };
        // FlashInfer-Bench's data set layout: every kind of record under its definition's
        // op_type (`definitions/<op_type>/<name>.json`, ...), so theirs and ours mix.
        let op_type = |def: &str| -> String {
            self.definitions
                .get(def)
                .and_then(|d| d["op_type"].as_str())
                .map_or_else(|| "other".to_string(), safe_component)
        };
        let mkdir = |dir: &Path| std::fs::create_dir_all(dir).map_err(|e| io(dir, e));
        for (name, d) in &self.definitions {
            let dir = out.join("definitions").join(op_type(name));
            mkdir(&dir)?;
            let p = dir.join(format!("{name}.json"));
            std::fs::write(&p, serde_json::to_vec_pretty(d).unwrap_or_default())
                .map_err(|e| io(&p, e))?;
            summary.definitions += 1;
        }
        for ((def, file), s) in &self.solutions {
            let dir = out.join("solutions").join(op_type(def)).join(def);
            mkdir(&dir)?;
            let p = dir.join(file);
            std::fs::write(&p, serde_json::to_vec_pretty(s).unwrap_or_default())
                .map_err(|e| io(&p, e))?;
            summary.solutions += 1;
        }
        let jsonl = |kind: &str, def: &str, lines: &mut dyn Iterator<Item = &Value>| {
            let dir = out.join(kind).join(op_type(def));
            mkdir(&dir)?;
            let p = dir.join(format!("{def}.jsonl"));
            let mut f = std::fs::File::create(&p).map_err(|e| io(&p, e))?;
            let mut n = 0;
            for t in lines {
                writeln!(f, "{t}").map_err(|e| io(&p, e))?;
                n += 1;
            }
            Ok::<usize, StoreError>(n)
        };
        for (def, list) in &self.workloads {
            summary.workloads += jsonl("workloads", def, &mut list.values())?;
        }
        for (def, list) in &self.traces {
            summary.traces += jsonl("traces", def, &mut list.iter())?;
        }
        Ok(summary)
    }
}

/// One trace: evaluation `ev` on workload `wi` of its judged set `set`.
fn trace(
    ev: &StoredEval,
    def_name: &str,
    sol_name: &str,
    set: &str,
    wi: usize,
    w: &Value,
) -> Value {
    let r = &ev.result;
    let status = FibStatus::of(r.status, r.stage);
    let perf = r
        .performance
        .as_ref()
        .and_then(|p| p.workloads.iter().find(|x| x.workload == wi));
    let correctness = status.has_correctness().then(|| {
        let c = r.correctness.as_ref();
        json!({
            // Worst over every check of the evaluation; NaN when no figure was kept.
            "max_relative_error": num(c.map_or(f64::NAN, |c| c.max_rel_error)),
            "max_absolute_error": num(c.map_or(f64::NAN, |c| c.max_abs_error)),
            "extra": c.map(|c| json!({
                "checks": c.checks,
                "timed_rechecks": c.timed_rechecks,
                "seeds": c.seeds,
                "fraction_bad": num(c.fraction_bad),
                "worst": c.worst,
            })),
        })
    });
    // PASSED needs a performance; an untimed pass (--no-timing, an interpreter) gets their
    // defaults (all 0: not measured) and says so in our metadata.
    let performance = (status == FibStatus::Passed).then(|| match perf {
        Some(p) => json!({
            "latency_ms": p.candidate.median_ms,
            "reference_latency_ms": p.baseline.median_ms,
            "speedup_factor": p.speedup,
        }),
        None => json!({}),
    });
    let env = &r.environment;
    let mut libs: Map<String, Value> = env
        .versions
        .iter()
        .filter(|(_, v)| v.as_str() != "-")
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    libs.insert("compiler".into(), json!(env.compiler));
    libs.insert("ksmith_harness".into(), json!(env.harness_version));
    let hardware = if env.cpu.trim().is_empty() {
        "unknown CPU"
    } else {
        env.cpu.as_str()
    };
    let inputs: Map<String, Value> = w["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|pair| (pair[0].as_str().unwrap_or("").to_string(), pair[1].clone()))
        .collect();
    let not_timed = match (r.status, perf) {
        (Status::Passed, None) => Some(
            r.timing_unavailable
                .clone()
                .unwrap_or_else(|| "timing was not run (--no-timing)".into()),
        ),
        _ => None,
    };
    let meta = json!({
        "evaluation": ev.id,
        "status": r.status.as_str(),
        "reason": r.reason,
        "stage": r.stage,
        "task_hash": r.task_hash,
        "solution_hash": r.solution_hash,
        "workload_set": set,
        "workload": wi,
        "failed_workload": r.failed_workload,
        "inputs": inputs,
        "not_timed": not_timed,
        "timing": perf.map(|p| json!({
            "candidate": p.candidate,
            "baseline": p.baseline,
            "speedup_interval": [num(p.speedup_interval.0), num(p.speedup_interval.1)],
            "noisy": p.noisy,
            "gflops": num(p.gflops),
            "gbps": num(p.gbps),
            "floor_ms": num(p.floor_ms),
            "roofline_fraction": num(p.roofline_fraction),
            "cache_flushed": p.cache_flushed,
        })),
        "eliminated": r.performance.as_ref().and_then(|p| p.eliminated.as_ref()).map(|e| json!({
            "slowdown": num(e.slowdown), "rounds": e.rounds,
        })),
        "environment": {
            "cores": env.cores, "threads": env.threads, "flags": env.flags,
            "isolation": env.isolation, "fingerprint": env.fingerprint,
        },
    });
    let mut rest = String::new();
    if let Some(d) = &r.detail {
        rest.push_str(d);
    }
    if !r.log.is_empty() {
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str(&r.log);
    }
    json!({
        "definition": def_name,
        "solution": sol_name,
        "workload": {
            "uuid": workload_uuid(&r.task_hash, wi),
            "axes": w["axes"],
            "inputs": workload_inputs(&ev.task, w),
        },
        "evaluation": {
            "status": status.as_str(),
            "log": with_metadata(&meta, &rest),
            "correctness": correctness,
            "performance": performance,
            "environment": {"hardware": hardware, "libs": libs},
            "timestamp": ev.created_at,
        },
    })
}

/// Writes every stored evaluation under `out` (see the module documentation).
pub fn export_flashinfer(store: &Store, out: &Path) -> Result<ExportSummary, StoreError> {
    let mut export = Export::default();
    for id in store.ids()? {
        let Some(ev) = store.get(id)? else { continue };
        export.add(store, &ev)?;
    }
    export.write(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_judge::EvalResult;
    use ksmith_task::{Language, Solution, Task};

    fn task() -> Task {
        Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/vector_add"))
            .unwrap()
    }

    /// A minimal stored result (a compile error: no correctness or timing to fill in).
    fn result(task: &Task, sol: &Solution) -> EvalResult {
        serde_json::from_value(json!({
            "status": "COMPILE_ERROR", "reason": "compile_error", "detail": null, "stage": "build",
            "task": task.name, "task_hash": task.content_hash,
            "solution": sol.name, "solution_hash": sol.content_hash,
            "policy": [], "build": null, "correctness": null, "performance": null, "log": "",
            "environment": ksmith_judge::Environment::default(), "elapsed_s": 0.0,
            "time_split": ksmith_judge::TimeSplit::default(),
        }))
        .unwrap()
    }

    /// Every file under `dir`, relative to it.
    fn files(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(
                    files(&p)
                        .into_iter()
                        .map(|f| Path::new(&e.file_name()).join(f)),
                );
            } else {
                out.push(e.file_name().into());
            }
        }
        out
    }

    #[test]
    fn hostile_names_stay_inside_the_export_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        let task = task();
        let names = [
            "../../../../tmp/x",
            "../../../x",
            "..",
            "a/b",
            "a_b",
            "ok-name",
        ];
        for name in names {
            let sol = Solution::from_source(
                name,
                Language::C,
                "vector_add",
                "kernel.c",
                format!("// {name}\n"),
                Vec::new(),
            );
            store
                .record(&format!("k{name}"), &task, &sol, &result(&task, &sol))
                .unwrap();
        }
        // The export sits two levels down, so `..` twice would still be inside `tmp`.
        let out = tmp.path().join("a/b/export");
        let n = export_flashinfer(&store, &out).unwrap();
        assert!(n.traces > 0);
        let written = files(tmp.path());
        for f in &written {
            assert!(
                f.starts_with("store") || f.starts_with("a/b/export"),
                "written outside --out: {}",
                f.display()
            );
        }
        let sols: Vec<String> = std::fs::read_dir(out.join("solutions/elementwise/vector_add"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(sols.len(), names.len(), "{sols:?}");
        assert!(sols.iter().any(|s| s.starts_with("ok-name_")), "{sols:?}");
        for s in &sols {
            assert!(
                ksmith_task::is_safe_component(s.trim_end_matches(".json")),
                "{s}"
            );
            let v: Value = serde_json::from_slice(
                &std::fs::read(out.join("solutions/elementwise/vector_add").join(s)).unwrap(),
            )
            .unwrap();
            assert_eq!(format!("{}.json", v["name"].as_str().unwrap()), *s);
        }
    }

    fn starter(name: &str) -> Task {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        Task::load(&root.join("tasks").join(name)).unwrap()
    }

    fn c_solution(name: &str, task: &str, body: &str) -> Solution {
        Solution::from_source(
            name,
            Language::C,
            task,
            "kernel.c",
            body.to_string(),
            Vec::new(),
        )
    }

    /// Records `changes` merged into a minimal result; returns the export's traces.
    fn export_one(task: &Task, sol: &Solution, changes: Value) -> (ExportSummary, Vec<Value>) {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        let mut r = serde_json::to_value(result(task, sol)).unwrap();
        for (k, v) in changes.as_object().unwrap() {
            r[k] = v.clone();
        }
        let r: EvalResult = serde_json::from_value(r).unwrap();
        store.record("k", task, sol, &r).unwrap();
        let out = tmp.path().join("out");
        let summary = export_flashinfer(&store, &out).unwrap();
        let traces = std::fs::read_dir(out.join("traces"))
            .unwrap()
            .flat_map(|op| std::fs::read_dir(op.unwrap().path()).unwrap())
            .flat_map(|e| {
                let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .collect::<Vec<_>>()
            })
            .collect();
        (summary, traces)
    }

    fn meta(trace: &Value) -> Value {
        let log = trace["evaluation"]["log"].as_str().unwrap();
        let first = log.lines().next().unwrap();
        serde_json::from_str(first.strip_prefix("ksmith: ").unwrap()).unwrap()
    }

    fn correctness() -> Value {
        json!({"checks": 4, "seeds": [1, 2, 3], "max_abs_error": 0.5, "max_rel_error": 2.0,
               "worst": null, "fraction_bad": 0.25})
    }

    #[test]
    fn every_status_maps_to_theirs_with_what_their_validator_demands() {
        let task = task();
        let sol = c_solution("s", "vector_add", "// s\n");
        let cases = [
            ("COMPILE_ERROR", "build", "COMPILE_ERROR"),
            ("RUNTIME_ERROR", "load", "RUNTIME_ERROR"),
            ("TIMEOUT", "full_check", "TIMEOUT"),
            ("INCORRECT_SHAPE", "quick_check", "INCORRECT_SHAPE"),
            ("INCORRECT_DTYPE", "full_check", "INCORRECT_DTYPE"),
            ("INCORRECT_NUMERICAL", "full_check", "INCORRECT_NUMERICAL"),
            ("POLICY_REJECTED", "policy", "COMPILE_ERROR"),
            ("POLICY_REJECTED", "build", "COMPILE_ERROR"),
            ("POLICY_REJECTED", "timing", "RUNTIME_ERROR"),
        ];
        for (ours, stage, theirs) in cases {
            let with_corr = ours == "INCORRECT_NUMERICAL" || ours == "INCORRECT_SHAPE";
            let (_, traces) = export_one(
                &task,
                &sol,
                json!({"status": ours, "stage": stage, "failed_workload": 1,
                       "correctness": if with_corr { correctness() } else { Value::Null }}),
            );
            let ran = matches!(stage, "quick_check" | "full_check" | "timing");
            // A failure on a workload is that workload's only; one before any call, every one's.
            assert_eq!(traces.len(), if ran { 1 } else { 3 }, "{ours} at {stage}");
            for t in &traces {
                let e = &t["evaluation"];
                assert_eq!(e["status"], theirs, "{ours} at {stage}");
                assert_eq!(meta(t)["status"], ours);
                assert_eq!(
                    e["correctness"].is_object(),
                    theirs == "INCORRECT_NUMERICAL"
                );
                assert!(e["performance"].is_null());
                assert!(e["environment"]["hardware"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty()));
                if ran {
                    assert_eq!(meta(t)["workload"], 1);
                    assert_eq!(
                        t["workload"]["axes"],
                        json!({"N": task.workloads[1].axes["N"]})
                    );
                }
            }
        }
    }

    #[test]
    fn incorrect_numerical_without_figures_says_nan_not_zero() {
        let task = task();
        let sol = c_solution("s", "vector_add", "// s\n");
        let (_, traces) = export_one(
            &task,
            &sol,
            json!({"status": "INCORRECT_NUMERICAL", "stage": "full_check", "failed_workload": 2,
                   "reason": "input_mutated"}),
        );
        let c = &traces[0]["evaluation"]["correctness"];
        assert_eq!(c["max_absolute_error"], "NaN");
        assert_eq!(c["max_relative_error"], "NaN");
    }

    #[test]
    fn a_pass_is_every_workload_and_an_untimed_one_says_why() {
        let task = task();
        let sol = c_solution("s", "vector_add", "// s\n");
        let (_, traces) = export_one(
            &task,
            &sol,
            json!({"status": "PASSED", "reason": null, "stage": "done", "correctness": correctness()}),
        );
        assert_eq!(traces.len(), task.workloads.len());
        for (i, t) in traces.iter().enumerate() {
            let e = &t["evaluation"];
            assert_eq!(e["status"], "PASSED");
            assert_eq!(e["performance"], json!({}));
            assert_eq!(e["correctness"]["max_absolute_error"], 0.5);
            assert_eq!(e["correctness"]["extra"]["checks"], 4);
            let m = meta(t);
            assert_eq!(m["workload"], i);
            assert!(m["not_timed"].as_str().unwrap().contains("--no-timing"));
            // Each workload's own distributions, as declared.
            assert_eq!(
                m["inputs"]["a"],
                serde_json::to_value(&task.workloads[i].inputs[0].1).unwrap()
            );
        }
    }

    #[test]
    fn an_interpreted_evaluation_lists_the_interpret_set() {
        let task = task();
        let interpret = task.for_set(WorkloadSet::Interpret).unwrap();
        let sol = c_solution("s", "vector_add", "// s\n");
        let (_, traces) = export_one(
            &task,
            &sol,
            json!({"status": "PASSED", "reason": null, "stage": "done", "correctness": correctness(),
                   "task_hash": interpret.content_hash,
                   "timing_unavailable": "the candidate ran in its interpreter"}),
        );
        let axes: Vec<&Value> = traces.iter().map(|t| &t["workload"]["axes"]).collect();
        let want: Vec<Value> = interpret.workloads.iter().map(|w| json!(w.axes)).collect();
        assert_eq!(axes, want.iter().collect::<Vec<_>>());
        assert_eq!(meta(&traces[0])["workload_set"], "interpret");
        assert!(meta(&traces[0])["not_timed"]
            .as_str()
            .unwrap()
            .contains("interpreter"));
        // Workload ids are per set: none is shared with the CPU set's.
        let cpu_uuid = workload_uuid(&task.content_hash, 0);
        assert!(traces.iter().all(|t| t["workload"]["uuid"] != cpu_uuid));
    }

    #[test]
    fn scalar_constants_are_scalar_inputs_and_the_reference_gets_a_run() {
        let task = starter("ksbench/matmul_swish_scaling");
        let sol = c_solution("s", &task.name, "// s\n");
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        store
            .record("k", &task, &sol, &result(&task, &sol))
            .unwrap();
        let out = tmp.path().join("out");
        export_flashinfer(&store, &out).unwrap();
        let def: Value = serde_json::from_slice(
            &std::fs::read(out.join("definitions/fused/matmul_swish_scaling.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(def["inputs"]["scale"]["shape"], Value::Null);
        let reference = def["reference"].as_str().unwrap();
        assert!(
            reference.contains("def run(*inputs):\n    return reference(*inputs)"),
            "{reference}"
        );
        let line =
            std::fs::read_to_string(out.join("traces/fused/matmul_swish_scaling.jsonl")).unwrap();
        let t: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(
            t["workload"]["inputs"]["scale"],
            json!({"type": "scalar", "value": 2.0})
        );
        assert_eq!(t["workload"]["inputs"]["x"], json!({"type": "random"}));
    }

    #[test]
    fn a_reference_gone_since_still_makes_a_loadable_definition() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vector_add");
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/vector_add");
        for f in ["task.toml", "reference.py"] {
            std::fs::copy(src.join(f), dir.join(f)).unwrap();
        }
        let task = Task::load(&dir).unwrap();
        std::fs::remove_file(dir.join("reference.py")).unwrap();
        let sol = c_solution("s", "vector_add", "// s\n");
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        store
            .record("k", &task, &sol, &result(&task, &sol))
            .unwrap();
        export_flashinfer(&store, &tmp.path().join("out")).unwrap();
        let def: Value = serde_json::from_slice(
            &std::fs::read(
                tmp.path()
                    .join("out/definitions/elementwise/vector_add.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let reference = def["reference"].as_str().unwrap();
        assert!(
            reference.starts_with("def run(*inputs):\n    raise FileNotFoundError("),
            "{reference}"
        );
    }

    #[test]
    fn a_dtype_their_schema_lacks_is_reported_not_exported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vector_add");
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/vector_add");
        let toml = std::fs::read_to_string(src.join("task.toml")).unwrap();
        std::fs::write(dir.join("task.toml"), toml.replace("float32", "float64")).unwrap();
        std::fs::copy(src.join("reference.py"), dir.join("reference.py")).unwrap();
        let task = Task::load(&dir).unwrap();
        let sol = c_solution("s", "vector_add", "// s\n");
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        store
            .record("k", &task, &sol, &result(&task, &sol))
            .unwrap();
        let s = export_flashinfer(&store, &tmp.path().join("out")).unwrap();
        assert_eq!((s.definitions, s.solutions, s.traces), (0, 0, 0));
        assert_eq!(s.skipped.len(), 1);
        assert!(s.skipped[0].contains("float64"), "{:?}", s.skipped);
    }

    #[test]
    fn workload_ids_are_rfc_4122_and_stable() {
        let a = uuid::Uuid::parse_str(&workload_uuid(&"ab".repeat(32), 0)).unwrap();
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(a.get_version(), Some(uuid::Version::Sha1));
        assert_eq!(workload_uuid(&"ab".repeat(32), 0), a.to_string());
        assert_ne!(workload_uuid(&"ab".repeat(32), 1), a.to_string());
    }

    #[test]
    fn one_solution_on_two_tasks_gets_two_names() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store")).unwrap();
        let (a, b) = (task(), starter("starter/softmax"));
        // Identical code (and so hash), judged on two tasks.
        let sol = c_solution("same", "vector_add", "// same\n");
        store.record("k1", &a, &sol, &result(&a, &sol)).unwrap();
        store.record("k2", &b, &sol, &result(&b, &sol)).unwrap();
        let s = export_flashinfer(&store, &tmp.path().join("out")).unwrap();
        assert_eq!(s.solutions, 2);
        let names: Vec<String> = ["elementwise/vector_add", "normalization/softmax"]
            .iter()
            .flat_map(|d| std::fs::read_dir(tmp.path().join("out/solutions").join(d)).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2);
        assert_ne!(names[0], names[1]);
    }
}
