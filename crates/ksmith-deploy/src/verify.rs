//! `ksmith verify-export`: an exported package re-checked through its own JAX bindings, with
//! the judge's split between what runs a kernel and what decides whether it is right.
//!
//! - Before anything runs, each C kernel's sources are built the judge's way (sandboxed
//!   compiler, default flags, its ABI header, its flags) and the library is held to the judge's
//!   library policy ([`check_c_kernel`]): a kernel that imports what kernels may not, or makes
//!   system calls of its own, is refused, not run.
//! - Each kernel is built (as the package builds it for a user) and called inside `jax.jit` by
//!   a runner in the judge's sandbox (`ksmith_sandbox`, the runner's isolation: own user, PID,
//!   network and IPC namespaces, no host /proc, Landlock, seccomp, rlimits, a memory cgroup, an
//!   in-memory private directory), one fresh runner per kernel, stopped between requests. It
//!   sees the system, the Python environment and the export, read-only, and writes only its
//!   private directory: a kernel that behaves differently outside a sandbox is inside one here
//!   too, and can write no host file while it is verified.
//! - A trusted checker (never loads a kernel) draws the inputs for fresh seeds, computes the
//!   reference in float64 and checks the raw outputs the runner wrote. Timing runs in the
//!   runner (its own clock: shown, never a verdict).

use crate::DeployError;
use ksmith_backend::c::{self, PolicyViolation};
use ksmith_harness::{CallError, HarnessError, PythonEnv};
use ksmith_sandbox::Limits;
use ksmith_task::Solution;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `verify-export` checks and how.
#[derive(Debug, Clone)]
pub struct VerifySettings {
    /// Only these kernels (all when empty).
    pub kernels: Vec<String>,
    /// Fresh seeds per workload.
    pub seeds: u32,
    /// Timing rounds per workload (0: no timing).
    pub rounds: u32,
    /// Minimum time per round and side, in milliseconds.
    pub min_round_ms: f64,
    /// OpenMP threads of the kernel.
    pub threads: usize,
}

/// Builds a C kernel's sources the judge's way (its compiler in the compiler sandbox, the default
/// flags, `header` force-included as `ksmith_abi.h`, the solution's `flags`) into a scratch
/// directory and holds the library to the judge's library policy: imports on the kernel
/// allow-list, only the C runtime's libraries, no system-call instruction of its own.
/// `Err(message)` when the sources do not build.
pub fn check_c_kernel(
    entry_point: &str,
    sources: &[(String, String)],
    flags: &[String],
    header: &str,
) -> Result<Result<Vec<PolicyViolation>, String>, DeployError> {
    let compiler = c::Compiler::detect().map_err(|e| DeployError::Out {
        path: PathBuf::from("."),
        message: e.to_string(),
    })?;
    let mut all: Vec<String> = c::DEFAULT_FLAGS.iter().map(|s| s.to_string()).collect();
    all.extend(["-include".into(), "ksmith_abi.h".into()]);
    all.extend(flags.iter().cloned());
    let tool = c::Toolchain {
        command: compiler.command.clone(),
        version: compiler.version.clone(),
        flags: all,
        header: Some(header.to_string()),
        parse: c::parse_diagnostics,
    };
    let solution = Solution::from_parts(
        "export".into(),
        ksmith_task::Language::C,
        entry_point.into(),
        sources.to_vec(),
        flags.to_vec(),
    );
    let scratch = tempfile::tempdir().map_err(|e| DeployError::Io {
        path: std::env::temp_dir(),
        source: e,
    })?;
    let built = c::build_with(&tool, &solution, scratch.path()).map_err(|e| DeployError::Out {
        path: scratch.path().to_path_buf(),
        message: e.to_string(),
    })?;
    match built {
        Err(f) => {
            let first = f
                .diagnostics
                .iter()
                .find(|d| d.severity.contains("error"))
                .map(|d| d.to_string())
                .unwrap_or_else(|| f.reason.name().to_string());
            Ok(Err(format!("it does not build here: {first}")))
        }
        Ok(b) => Ok(Ok(c::check_library(&b.library).ok_or_else(|| {
            DeployError::Out {
                path: b.library.clone(),
                message: "the built library is not a readable ELF file".into(),
            }
        })?)),
    }
}

/// [`check_c_kernel`] on an export's choice, as `ksmith export` writes it: Ok(None) when the
/// choice is not a C kernel, Ok(Some(why)) when its library is refused or does not build.
pub fn check_choice(c: &crate::Choice) -> Result<Option<String>, DeployError> {
    if c.language != ksmith_task::Language::C {
        return Ok(None);
    }
    let sources: Vec<(String, String)> = c
        .sources
        .iter()
        .map(|(n, b)| (n.clone(), String::from_utf8_lossy(b).into_owned()))
        .collect();
    let header = crate::package::abi_header(c);
    Ok(
        match check_c_kernel(&c.entry_point, &sources, &c.flags, &header)? {
            Ok(v) if v.is_empty() => None,
            Ok(v) => Some(policy_summary(&v)),
            Err(why) => Some(why),
        },
    )
}

/// One line for a refused library: the first violation's message, the other names after it.
pub fn policy_summary(v: &[PolicyViolation]) -> String {
    let mut s = v.first().map(|v| v.message.clone()).unwrap_or_default();
    if v.len() > 1 {
        let rest: Vec<String> = v[1..].iter().map(|o| format!("`{}`", o.name)).collect();
        s.push_str(&format!("; also refused: {}", rest.join(", ")));
    }
    s
}

fn bad(dir: &Path, message: impl Into<String>) -> DeployError {
    DeployError::Out {
        path: dir.to_path_buf(),
        message: message.into(),
    }
}

fn harness(e: HarnessError) -> DeployError {
    DeployError::Out {
        path: PathBuf::from("python"),
        message: e.to_string(),
    }
}

/// Bytes of one element of a manifest dtype.
fn dtype_size(name: &str) -> u64 {
    match name {
        "float64" | "int64" => 8,
        "float32" | "int32" => 4,
        "float16" | "bfloat16" | "int16" => 2,
        _ => 1,
    }
}

/// The largest workload's inputs and outputs, in bytes.
fn max_bytes(spec: &Value) -> u64 {
    let tensors: Vec<&Value> = ["inputs", "outputs"]
        .iter()
        .flat_map(|g| spec[*g].as_array().into_iter().flatten())
        .collect();
    spec["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            tensors
                .iter()
                .map(|t| {
                    let n: u64 = t["shape"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| a.as_str().and_then(|a| w["axes"][a].as_u64()).unwrap_or(1))
                        .product();
                    n.saturating_mul(dtype_size(t["dtype"].as_str().unwrap_or("")))
                })
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// The runner's limits: the judge's runner's, sized for JAX and a build of the kernel and its
/// FFI handler (the linker marks its output executable: metadata writes allowed).
fn runner_limits(spec: &Value, package_dir: &Path) -> Limits {
    let max = max_bytes(spec);
    let memory = (8 * max + (6 << 30)).min(1 << 40);
    let mut limits = Limits {
        cpu_seconds: 3600,
        // JAX maps far more address space than it uses (the judge's JAX runners get 32 GiB).
        address_space: memory.max(32 << 30),
        file_size: (max + (1 << 20)).max(256 << 20),
        open_files: 1024,
        processes: 512,
        metadata_writes: true,
        memory_bytes: Some(memory),
        scratch_bytes: Some(2 * max + (1 << 30)),
        ..Limits::default()
    };
    // A GPU binding's runtime, as for the judge's GPU runner: memory files allowed, huge
    // virtual ranges, its host memory not measured under a memory cgroup yet.
    if spec["binding"] != "cpu_ffi" {
        limits.memory_files = true;
        limits.memory_bytes = None;
        limits.address_space = limits.address_space.max(256 << 30);
    }
    limits.view.read.push(package_dir.to_path_buf());
    limits
}

/// A failed call's detail: the kernel's own error, or how its process ended.
fn call_detail(e: &CallError) -> String {
    match e {
        CallError::Remote { message, .. } => message.clone(),
        CallError::Died { exit, log } => {
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!(
                "the sandboxed process running the kernel ended ({exit:?}){}",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", tail.join(" / "))
                }
            )
        }
        other => other.to_string(),
    }
}

/// Checks (and, with `rounds > 0`, times) every kernel of the export at `dir` (package
/// `package`, its manifest `manifest`); returns the report (`package`, `backend`, `kernels`
/// with per-workload rows), in the shape `python -m PACKAGE.verify --json` prints.
pub fn verify_package(
    env: &PythonEnv,
    dir: &Path,
    package: &str,
    manifest: &Value,
    settings: &VerifySettings,
    progress: &dyn Fn(&str),
) -> Result<Value, DeployError> {
    let kernels = manifest["kernels"]
        .as_object()
        .ok_or_else(|| bad(dir, "manifest.json has no `kernels` table"))?;
    let names: Vec<&String> = kernels
        .keys()
        .filter(|n| settings.kernels.is_empty() || settings.kernels.contains(n))
        .collect();
    let mut checker = ksmith_harness::start_export_checker(env).map_err(harness)?;
    let open = checker
        .call(
            &json!({"cmd": "open", "dir": dir, "package": package}),
            Duration::from_secs(600),
        )
        .map_err(|e| {
            bad(
                dir,
                format!("the export cannot be read: {}", call_detail(&e)),
            )
        })?;
    let mut results = Vec::new();
    for name in names {
        let spec = &kernels[name.as_str()];
        let info = &open["kernels"][name.as_str()];
        let mut result = Map::new();
        result.insert("name".into(), json!(name));
        for k in ["binding", "evaluation", "judged_speedup"] {
            result.insert(k.into(), info[k].clone());
        }
        result.insert("workloads".into(), json!([]));
        result.insert("sandboxed".into(), json!(true));
        if spec["language"] == "c" {
            progress(&format!(
                "{name}: building it the judge's way and checking the library"
            ));
            match check_native(dir, package, name, spec)? {
                Ok(v) if v.is_empty() => {}
                Ok(v) => {
                    result.insert("status".into(), json!("refused"));
                    result.insert("detail".into(), json!(policy_summary(&v)));
                    results.push(Value::Object(result));
                    continue;
                }
                Err(why) => {
                    result.insert("status".into(), json!("refused"));
                    result.insert("detail".into(), json!(why));
                    results.push(Value::Object(result));
                    continue;
                }
            }
        }
        progress(&format!("{name}: building and calling it in the sandbox"));
        let limits = runner_limits(spec, dir);
        let mut runner =
            ksmith_harness::start_export_runner(env, limits, settings.threads).map_err(harness)?;
        let base = json!({"dir": dir, "package": package, "kernel": name});
        let with = |extra: Value| {
            let mut v = base.clone();
            for (k, x) in extra.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            v
        };
        let status = runner
            .call(&with(json!({"cmd": "load"})), Duration::from_secs(1200))
            .map(|r| r["status"].as_str().unwrap_or("").to_string())
            .unwrap_or_else(|e| format!("unavailable: {}", call_detail(&e)));
        if status != "ready" {
            result.insert("status".into(), json!("unavailable"));
            result.insert("detail".into(), json!(status));
            results.push(Value::Object(result));
            runner.shutdown();
            continue;
        }
        let mut rows = Vec::new();
        let mut all_ok = true;
        let workloads = info["workloads"].as_array().cloned().unwrap_or_default();
        for (wi, axes) in workloads.iter().enumerate() {
            let mut row = json!({"workload": wi, "axes": axes, "checks": 0});
            let mut last_seed = 0;
            for s in 0..settings.seeds {
                let seed = ksmith_harness::random_u64() >> 1;
                last_seed = seed;
                let prefix = runner.dir_in_child().join(format!("out{wi}_{s}"));
                let ran = runner.call(
                    &with(json!({"cmd": "run", "workload": wi, "seed": seed, "prefix": prefix})),
                    Duration::from_secs(600),
                );
                match ran {
                    Ok(_) => {}
                    Err(e) => {
                        row["correct"] = json!(false);
                        row["detail"] = json!(call_detail(&e));
                        break;
                    }
                }
                // The files are named here; whatever the runner answered, only these are read.
                let mut paths = Map::new();
                for o in spec["outputs"].as_array().into_iter().flatten() {
                    let n = o["name"].as_str().unwrap_or("");
                    let file = format!("out{wi}_{s}.{n}.bin");
                    paths.insert(n.into(), json!(runner.dir().join(&file)));
                }
                let checked = checker.call(
                    &with(json!({"cmd": "check", "workload": wi, "seed": seed, "outputs": paths})),
                    Duration::from_secs(600),
                );
                for p in paths.values().filter_map(Value::as_str) {
                    let _ = std::fs::remove_file(p);
                }
                row["checks"] = json!(s + 1);
                match checked {
                    Ok(c) if c["correct"] == true => {}
                    Ok(c) => {
                        row["correct"] = json!(false);
                        row["seed"] = json!(seed);
                        for k in ["max_abs_error", "fraction_bad", "output", "detail"] {
                            if !c[k].is_null() {
                                row[k] = c[k].clone();
                            }
                        }
                        break;
                    }
                    Err(e) => {
                        return Err(bad(
                            dir,
                            format!("the checker failed on {name}: {}", call_detail(&e)),
                        ))
                    }
                }
            }
            if row.get("correct").is_none() {
                row["correct"] = json!(true);
            }
            if row["correct"] == true && settings.rounds > 0 {
                let t = runner.call(
                    &with(json!({"cmd": "time", "workload": wi, "seed": last_seed,
                        "rounds": settings.rounds, "min_round_ms": settings.min_round_ms})),
                    Duration::from_secs(1800),
                );
                match t {
                    Ok(t) => {
                        for k in [
                            "kernel_ms",
                            "reference_ms",
                            "speedup",
                            "speedup_interval",
                            "rounds",
                            "calls_per_round",
                        ] {
                            row[k] = t[k].clone();
                        }
                    }
                    Err(e) => {
                        row["correct"] = json!(false);
                        row["detail"] = json!(format!("while timed: {}", call_detail(&e)));
                    }
                }
            }
            all_ok &= row["correct"] == true;
            let died = row["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("the sandboxed process"));
            rows.push(row);
            if died {
                break;
            }
        }
        runner.shutdown();
        let speedups: Vec<f64> = rows.iter().filter_map(|r| r["speedup"].as_f64()).collect();
        if !speedups.is_empty() && speedups.len() == workloads.len() {
            let g = (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp();
            result.insert("speedup".into(), json!(g));
        }
        result.insert(
            "status".into(),
            json!(if all_ok && rows.len() == workloads.len() {
                "ok"
            } else {
                "incorrect"
            }),
        );
        result.insert("workloads".into(), Value::Array(rows));
        results.push(Value::Object(result));
    }
    checker.shutdown();
    Ok(json!({
        "package": package,
        "backend": open["backend"],
        "sandboxed": true,
        "kernels": results,
    }))
}

/// [`check_c_kernel`] on the kernel `name` of the export at `dir`, as its files are now.
fn check_native(
    dir: &Path,
    package: &str,
    name: &str,
    spec: &Value,
) -> Result<Result<Vec<PolicyViolation>, String>, DeployError> {
    let kdir = dir
        .join(package)
        .join(spec["dir"].as_str().unwrap_or_default());
    let read =
        |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| bad(&p, format!("{e}; re-export")));
    let header = read(kdir.join("src").join("ksmith_abi.h"))?;
    let mut sources = Vec::new();
    for s in spec["sources"].as_array().into_iter().flatten() {
        let file = s.as_str().unwrap_or_default();
        if file.contains("..") || file.starts_with('/') {
            return Err(bad(
                &kdir,
                format!("kernel {name}: source `{file}` is not a file of the export"),
            ));
        }
        sources.push((file.to_string(), read(kdir.join("src").join(file))?));
    }
    let flags: Vec<String> = spec["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    check_c_kernel(
        spec["entry_point"].as_str().unwrap_or_default(),
        &sources,
        &flags,
        &header,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#include <stdint.h>\nvoid k(const float* a, float* c, int64_t N);\n";

    fn check(src: &str) -> Result<Vec<PolicyViolation>, String> {
        check_c_kernel("k", &[("k.c".into(), src.into())], &[], HEADER).unwrap()
    }

    #[test]
    fn the_export_path_holds_c_kernels_to_the_library_policy() {
        if c::Compiler::detect().is_err() {
            eprintln!("skipping: no C compiler");
            return;
        }
        let good = "#include <math.h>\nvoid k(const float* a, float* c, int64_t N) {\n#pragma omp parallel for\n for (int64_t i = 0; i < N; i++) c[i] = expf(a[i]);\n}\n";
        assert_eq!(check(good), Ok(vec![]));
        // Hidden from the source scan by token pasting; refused by the library's imports.
        let lookup = "#define P(a, b) a##b\nextern void* P(dlv, sym)(void*, const char*, const char*);\n\
                      void k(const float* a, float* c, int64_t N) { void* f = P(dlv, sym)((void*)-1l, \"fopen\", \"GLIBC_2.2.5\"); for (int64_t i = 0; i < N; i++) c[i] = a[i] + (f != 0); }\n";
        let v = check(lookup).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(policy_summary(&v).contains("`dlvsym`"), "{v:?}");
        let broken = check("void k(const float* a, float* c, int64_t N) { oops }\n");
        assert!(broken.unwrap_err().contains("does not build"));
    }
}
