//! Export in the FlashInfer Trace schema: `definitions/*.json`, `solutions/<def>/*.json`,
//! `traces/<def>.jsonl` (one trace per evaluation and workload).
//!
//! Task and solution names come from files a candidate's author may control; every name that
//! becomes a path component here goes through [`ksmith_task::safe_component`], so nothing is
//! written outside the export directory and distinct names never share a file.

use crate::{Store, StoreError};
use ksmith_task::safe_component;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

fn uuid_like(seed: &str) -> String {
    let h = ksmith_task::content_hash(seed.as_bytes());
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn definition(task: &Value, name: &str, reference: &str) -> Value {
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
    let tensors = |key: &str| -> Map<String, Value> {
        task[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["name"].as_str().unwrap_or("").to_string(),
                    json!({"shape": t["shape"], "dtype": t["dtype"]}),
                )
            })
            .collect()
    };
    json!({
        "name": name,
        "op_type": task["op_class"],
        "description": task["description"],
        "axes": axes,
        "inputs": tensors("inputs"),
        "outputs": tensors("outputs"),
        "reference": reference,
        "tags": ["ksmith", format!("task_hash:{}", task["content_hash"].as_str().unwrap_or(""))],
    })
}

/// Writes every stored evaluation under `out`; returns the number of traces written.
pub fn export_flashinfer(store: &Store, out: &Path) -> Result<usize, StoreError> {
    let io = |p: &Path, e| StoreError::Io {
        path: p.to_path_buf(),
        source: e,
    };
    for d in ["definitions", "solutions", "traces"] {
        std::fs::create_dir_all(out.join(d)).map_err(|e| io(out, e))?;
    }
    let mut traces: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for id in store.ids()? {
        let Some(ev) = store.get(id)? else { continue };
        let r = &ev.result;
        let def_name = safe_component(&r.task);
        let reference = ev.task["dir"]
            .as_str()
            .map(|d| {
                Path::new(d).join(
                    ev.task["reference"]["file"]
                        .as_str()
                        .unwrap_or("reference.py"),
                )
            })
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let def_path = out.join("definitions").join(format!("{def_name}.json"));
        std::fs::write(
            &def_path,
            serde_json::to_vec_pretty(&definition(&ev.task, &def_name, &reference))
                .unwrap_or_default(),
        )
        .map_err(|e| io(&def_path, e))?;
        let short_hash: String = r
            .solution_hash
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(8)
            .collect();
        let sol_name = safe_component(&format!("{}_{short_hash}", r.solution));
        let sources: Vec<Value> = ev
            .sources
            .iter()
            .map(|(n, h)| {
                Ok(json!({"path": n, "content": String::from_utf8_lossy(&store.artifact(h)?)}))
            })
            .collect::<Result<_, StoreError>>()?;
        let sol_dir = out.join("solutions").join(&def_name);
        std::fs::create_dir_all(&sol_dir).map_err(|e| io(&sol_dir, e))?;
        let solution = json!({
            "name": sol_name,
            "definition": def_name,
            "author": "ksmith",
            "spec": {"language": ev.solution["language"], "target_hardware": ["cpu"], "entry_point": ev.solution["entry_point"],
                     "dependencies": [], "build_flags": ev.solution["flags"]},
            "sources": sources,
            "description": format!("solution hash {}", r.solution_hash),
        });
        let sol_path = sol_dir.join(format!("{sol_name}.json"));
        std::fs::write(
            &sol_path,
            serde_json::to_vec_pretty(&solution).unwrap_or_default(),
        )
        .map_err(|e| io(&sol_path, e))?;
        let mut libs: Map<String, Value> = r
            .environment
            .versions
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        libs.insert("compiler".into(), json!(r.environment.compiler));
        libs.insert(
            "ksmith_harness".into(),
            json!(r.environment.harness_version),
        );
        let environment =
            json!({"device": r.environment.cpu, "libs": libs, "threads": r.environment.threads});
        let corr = r.correctness.as_ref();
        let correctness = json!({
            "max_relative_error": corr.map(|c| c.max_rel_error).unwrap_or(0.0),
            "max_absolute_error": corr.map(|c| c.max_abs_error).unwrap_or(0.0),
        });
        let workloads: Vec<Value> = ev.task["workloads"].as_array().cloned().unwrap_or_default();
        for (wi, w) in workloads.iter().enumerate() {
            let perf = r
                .performance
                .as_ref()
                .and_then(|p| p.workloads.iter().find(|x| x.workload == wi));
            let inputs: Map<String, Value> = w["inputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|pair| {
                    (
                        pair[0].as_str().unwrap_or("").to_string(),
                        json!({"type": "random", "distribution": pair[1]}),
                    )
                })
                .collect();
            traces.entry(def_name.clone()).or_default().push(json!({
                "definition": def_name,
                "solution": sol_name,
                "workload": {"uuid": uuid_like(&format!("{}:{wi}", r.task_hash)), "axes": w["axes"], "inputs": inputs},
                "evaluation": {
                    "status": r.status.as_str(),
                    "reason": r.reason,
                    "log_file": format!("ksmith://evaluations/{}", ev.id),
                    "correctness": correctness,
                    "performance": perf.map(|p| json!({
                        "latency_ms": p.candidate.median_ms,
                        "reference_latency_ms": p.baseline.median_ms,
                        "speedup_factor": p.speedup,
                    })),
                    "environment": environment,
                    "timestamp": ev.created_at,
                },
            }));
        }
    }
    let mut n = 0;
    for (def, list) in traces {
        let p = out.join("traces").join(format!("{def}.jsonl"));
        let mut f = std::fs::File::create(&p).map_err(|e| io(&p, e))?;
        for t in list {
            writeln!(f, "{t}").map_err(|e| io(&p, e))?;
            n += 1;
        }
    }
    Ok(n)
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
        assert!(n > 0);
        let written = files(tmp.path());
        for f in &written {
            assert!(
                f.starts_with("store") || f.starts_with("a/b/export"),
                "written outside --out: {}",
                f.display()
            );
        }
        let sols: Vec<String> = std::fs::read_dir(out.join("solutions/vector_add"))
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
                &std::fs::read(out.join("solutions/vector_add").join(s)).unwrap(),
            )
            .unwrap();
            assert_eq!(format!("{}.json", v["name"].as_str().unwrap()), *s);
        }
    }
}
