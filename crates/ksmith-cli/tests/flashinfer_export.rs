//! `ksmith export --format flashinfer-trace` read back by flashinfer-bench's own classes
//! (`Definition`, `Solution`, `Trace`, `TraceSet.from_path`, version 0.1.2 from PyPI, installed
//! without its GPU dependencies into a venv kept under the target directory).

mod common;

use common::{ksmith, root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flashinfer-bench release whose schema the export follows.
const FIB_VERSION: &str = "0.1.2";

/// Runs a setup command; panics with its output when it fails.
fn setup(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {cmd:?} failed ({}). This test installs flashinfer-bench=={FIB_VERSION} from PyPI and needs PyPI to be reachable.\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Python with flashinfer-bench and pydantic, but none of its GPU dependencies (torch,
/// flashinfer, tvm-ffi): a venv made once and reused across runs.
fn fib_python() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flashinfer-bench-{FIB_VERSION}"));
    let python = dir.join("bin/python");
    let done = dir.join(".installed");
    if done.exists() && python.exists() {
        return python;
    }
    let _ = std::fs::remove_dir_all(&dir);
    setup(
        Command::new("python3").arg("-m").arg("venv").arg(&dir),
        "creating the flashinfer-bench venv",
    );
    let pip = |args: &[&str]| {
        let mut c = Command::new(&python);
        c.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(args);
        c
    };
    setup(
        &mut pip(&["--no-deps", &format!("flashinfer-bench=={FIB_VERSION}")]),
        "installing flashinfer-bench without its dependencies",
    );
    // The data classes need only pydantic (torch is only for blob tensors and running kernels).
    setup(&mut pip(&["pydantic>=2,<3"]), "installing pydantic");
    std::fs::write(&done, FIB_VERSION).unwrap();
    python
}

/// `ksmith eval TASK SOLUTIONS... --json ARGS` into `store` (one judge for all: with timing,
/// the passing ones are timed side by side); the results with their ids.
fn eval(store: &Path, task: &str, solutions: &[&Path], args: &[&str]) -> Vec<Value> {
    let mut all = vec!["eval", task, "--json"];
    all.extend(solutions.iter().map(|s| s.to_str().unwrap()));
    all.extend_from_slice(args);
    let out = ksmith(store, &all);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "eval {solutions:?}: no JSON result ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // One solution prints its result; several, {"results": [...], "versus": ...}.
    let results = match v["results"].as_array() {
        Some(all) => all.clone(),
        None => vec![v.clone()],
    };
    assert_eq!(results.len(), solutions.len(), "{v}");
    results
}

/// Our metadata line (`ksmith: {JSON}`) at the head of a log or description.
fn metadata(text: &str) -> Value {
    let first = text.lines().next().unwrap_or("");
    let json = first
        .strip_prefix("ksmith: ")
        .unwrap_or_else(|| panic!("no metadata line in {text:?}"));
    serde_json::from_str(json).unwrap()
}

/// The axis values (N) of vector_add's workloads in `set`, read from its task.toml.
fn vector_add_sizes(set: &str) -> Vec<i64> {
    let text = std::fs::read_to_string(root().join("tasks/starter/vector_add/task.toml")).unwrap();
    let mut sizes = Vec::new();
    let mut current = "cpu".to_string();
    for line in text.lines().map(str::trim) {
        if line == "[[workloads]]" {
            current = "cpu".into();
        } else if let Some(s) = line.strip_prefix("set = ") {
            current = s.trim_matches('"').into();
        } else if let Some(a) = line.strip_prefix("axes = { N = ") {
            if current == set {
                sizes.push(a.trim_end_matches('}').trim().parse().unwrap());
            }
        }
    }
    assert!(!sizes.is_empty(), "no {set} workloads in vector_add");
    sizes
}

#[test]
fn flashinfer_bench_loads_every_exported_record() {
    let python = fib_python();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let task = "tasks/starter/vector_add";
    let sols = root().join(task).join("solutions");
    let k = tmp.path().join("kernels");
    std::fs::create_dir_all(&k).unwrap();
    // Wrong only on the larger workloads: the quick check (smallest) passes, the full check
    // fails on the second workload; a crash and a hang on the third.
    let kernel = |name: &str, body: &str| {
        let p = k.join(name);
        std::fs::write(
            &p,
            format!("#include <stdint.h>\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {{\n{body}\n}}\n"),
        )
        .unwrap();
        p
    };
    let late_wrong = kernel(
        "late_wrong.c",
        "for (int64_t i = 0; i < N; i++) c[i] = N > 4000000 ? a[i] - b[i] : a[i] + b[i];",
    );
    let late_crash = kernel(
        "late_crash.c",
        "if (N > 6000000) *(volatile float*)0 = 1.0f;\nfor (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];",
    );
    let late_hang = kernel(
        "late_hang.c",
        "volatile uint64_t spin = 0;\nwhile (N > 6000000) spin++;\nfor (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];",
    );
    let broken = kernel("broken.c", "this is not C");
    let forbidden = root().join("crates/ksmith-cli/tests/adversarial/forbidden_call.c");

    // Two runs of the judge: timing asked for (C timed; Pallas has no timing in its
    // interpreter), then correctness only.
    let (fast, pallas_fast) = (sols.join("fast"), sols.join("pallas_fast"));
    let [timed, pallas] = eval(
        &store,
        task,
        &[&fast, &pallas_fast],
        &["--min-time-ms", "10"],
    )
    .try_into()
    .unwrap();
    let naive = sols.join("naive");
    let [untimed, wrong, crash, hang, compile, policy] = eval(
        &store,
        task,
        &[
            &naive,
            &late_wrong,
            &late_crash,
            &late_hang,
            &broken,
            &forbidden,
        ],
        &["--no-timing", "--timeout", "5"],
    )
    .try_into()
    .unwrap();
    // A task with a scalar input (a constant per workload): a build failure is enough to
    // export its definition and workloads.
    let swish = "tasks/ksbench/matmul_swish_scaling";
    let [scalar] = eval(&store, swish, &[&broken], &["--no-timing"])
        .try_into()
        .unwrap();
    let expect = [
        (&scalar, "COMPILE_ERROR"),
        (&timed, "PASSED"),
        (&untimed, "PASSED"),
        (&pallas, "PASSED"),
        (&wrong, "INCORRECT_NUMERICAL"),
        (&crash, "RUNTIME_ERROR"),
        (&hang, "TIMEOUT"),
        (&compile, "COMPILE_ERROR"),
        (&policy, "POLICY_REJECTED"),
    ];
    for (r, status) in expect {
        assert_eq!(r["status"], status, "{}: {}", r["solution"], r["detail"]);
    }
    assert!(
        timed["performance"].is_object(),
        "{}",
        timed["timing_unavailable"]
    );
    assert!(pallas["performance"].is_null() && pallas["timing_unavailable"].is_string());

    let out = tmp.path().join("export");
    let exported = ksmith(
        &store,
        &[
            "export",
            "--format",
            "flashinfer-trace",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let said = String::from_utf8_lossy(&exported.stdout).into_owned();

    let loaded = Command::new(&python)
        .arg(root().join("crates/ksmith-cli/tests/flashinfer_export/load_export.py"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "flashinfer-bench's classes rejected the export: {}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    let fib: Value = serde_json::from_slice(&loaded.stdout).unwrap();
    let traces = fib["traces"].as_array().unwrap();
    let ts = &fib["trace_set"];
    assert_eq!(
        ts["definitions"],
        serde_json::json!(["matmul_swish_scaling", "vector_add"])
    );
    assert_eq!(ts["traces"].as_u64().unwrap() as usize, traces.len());
    assert_eq!(ts["solutions"], 9);
    assert_eq!(
        ts["resolved"], true,
        "a trace names a solution that is not there"
    );
    assert!(
        said.contains(&format!(
            "wrote 2 definitions, 9 solutions, {} workloads and {} traces",
            ts["workloads"],
            traces.len()
        )),
        "{said}"
    );
    // FlashInfer-Bench's data set layout: every record under its definition's op_type.
    for f in [
        "definitions/elementwise/vector_add.json",
        "definitions/fused/matmul_swish_scaling.json",
        "workloads/elementwise/vector_add.jsonl",
        "traces/elementwise/vector_add.jsonl",
        "traces/fused/matmul_swish_scaling.jsonl",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(out.join("solutions/elementwise/vector_add").is_dir());
    // Workload ids are RFC 4122 (version 5, name-based): the same workload the same id in
    // every trace, and each workload listed once.
    let workloads = fib["workloads"].as_array().unwrap();
    assert_eq!(ts["workloads"].as_u64().unwrap() as usize, workloads.len());
    let rfc4122 = |u: &str| {
        let b = u.as_bytes();
        u.len() == 36
            && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
            && b[14] == b'5'
            && matches!(b[19], b'8' | b'9' | b'a' | b'b')
            && u.chars()
                .filter(|c| *c != '-')
                .all(|c| c.is_ascii_hexdigit())
    };
    let mut ids: Vec<&str> = workloads
        .iter()
        .map(|w| w["uuid"].as_str().unwrap())
        .collect();
    assert!(ids.iter().all(|u| rfc4122(u)), "{ids:?}");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), workloads.len(), "a workload listed twice");
    for t in traces {
        let u = t["uuid"].as_str().unwrap();
        assert!(
            ids.binary_search(&u).is_ok(),
            "trace workload {u} is not in workloads/"
        );
    }

    let cpu = vector_add_sizes("cpu");
    let hardware = timed["environment"]["cpu"].as_str().unwrap();
    // The traces of one evaluation, by its id.
    let of = |r: &Value| -> Vec<&Value> {
        traces
            .iter()
            .filter(|t| metadata(t["log"].as_str().unwrap())["evaluation"] == r["id"])
            .collect()
    };
    let n_of = |t: &Value| t["axes"]["N"].as_i64().unwrap();
    for t in traces.iter().filter(|t| t["definition"] == "vector_add") {
        assert_eq!(t["hardware"], hardware);
        assert_eq!(
            t["libs"]["ksmith_harness"],
            timed["environment"]["harness_version"]
        );
        assert!(t["libs"]["jax"].is_string(), "{}", t["libs"]);
        let meta = metadata(t["log"].as_str().unwrap());
        // The inputs' distributions survive, as the task declares them.
        assert!(meta["inputs"]["a"]["dist"].is_string(), "{meta}");
        assert_eq!(t["inputs"]["a"], serde_json::json!({"type": "random"}));
    }

    // Timed pass: each workload's own speedup and latencies.
    let ts_timed = of(&timed);
    assert_eq!(ts_timed.iter().map(|t| n_of(t)).collect::<Vec<_>>(), cpu);
    for t in &ts_timed {
        assert_eq!(t["status"], "PASSED");
        let meta = metadata(t["log"].as_str().unwrap());
        let w = meta["workload"].as_u64().unwrap() as usize;
        let mine = &timed["performance"]["workloads"][w];
        let p = &t["performance"];
        assert_eq!(p["speedup_factor"], mine["speedup"], "{t}");
        assert_eq!(p["latency_ms"], mine["candidate"]["median_ms"]);
        assert_eq!(p["reference_latency_ms"], mine["baseline"]["median_ms"]);
        assert!(p["speedup_factor"].as_f64().unwrap() > 0.0);
        assert_eq!(meta["timing"]["candidate"], mine["candidate"]);
        assert_eq!(
            t["correctness"]["max_absolute_error"],
            timed["correctness"]["max_abs_error"]
        );
        assert_eq!(
            t["correctness"]["extra"]["checks"],
            timed["correctness"]["checks"]
        );
        assert_eq!(meta["status"], "PASSED");
        assert!(meta["not_timed"].is_null());
    }

    // Untimed passes: their defaults (0: not measured), and why in our metadata. Pallas lists
    // the interpret set it was judged on, not the stored task's CPU set.
    for (r, sizes, set, why) in [
        (&untimed, cpu.clone(), "cpu", "--no-timing"),
        (
            &pallas,
            vector_add_sizes("interpret"),
            "interpret",
            "interpreter",
        ),
    ] {
        let ts = of(r);
        assert_eq!(
            ts.iter().map(|t| n_of(t)).collect::<Vec<_>>(),
            sizes,
            "{}",
            r["solution"]
        );
        for t in ts {
            assert_eq!(t["status"], "PASSED");
            assert_eq!(t["performance"]["speedup_factor"], 0.0);
            assert!(t["correctness"].is_object());
            let meta = metadata(t["log"].as_str().unwrap());
            assert_eq!(meta["workload_set"], set);
            assert!(meta["not_timed"].as_str().unwrap().contains(why), "{meta}");
        }
    }

    // A failure on one workload is that workload's status only.
    for (r, n, status) in [
        (&wrong, cpu[1], "INCORRECT_NUMERICAL"),
        (&crash, cpu[2], "RUNTIME_ERROR"),
        (&hang, cpu[2], "TIMEOUT"),
    ] {
        let ts = of(r);
        assert_eq!(ts.len(), 1, "{}: {ts:?}", r["solution"]);
        let t = ts[0];
        assert_eq!((n_of(t), t["status"].as_str().unwrap()), (n, status));
        assert_eq!(
            t["correctness"].is_object(),
            status == "INCORRECT_NUMERICAL"
        );
        assert!(t["performance"].is_null());
        let meta = metadata(t["log"].as_str().unwrap());
        assert_eq!(meta["status"], status);
        assert_eq!(meta["failed_workload"], r["failed_workload"]);
        assert_eq!(meta["reason"], r["reason"]);
    }
    let fraction = &of(&wrong)[0]["correctness"]["extra"]["fraction_bad"];
    assert!(fraction.as_f64().unwrap() > 0.5, "{fraction}");

    // A failure before any call is every workload's; POLICY_REJECTED goes as COMPILE_ERROR
    // with ours kept.
    for (r, ours) in [(&compile, "COMPILE_ERROR"), (&policy, "POLICY_REJECTED")] {
        let ts = of(r);
        assert_eq!(ts.iter().map(|t| n_of(t)).collect::<Vec<_>>(), cpu);
        for t in ts {
            assert_eq!(t["status"], "COMPILE_ERROR");
            assert!(t["correctness"].is_null() && t["performance"].is_null());
            assert_eq!(metadata(t["log"].as_str().unwrap())["status"], ours);
            assert!(t["log"]
                .as_str()
                .unwrap()
                .contains(r["detail"].as_str().unwrap()));
        }
    }

    // Solutions: their languages, `file::function` entry points, ours kept.
    let sols = fib["solutions"].as_object().unwrap();
    let sol = |r: &Value| {
        let name = of(r)[0]["solution"].as_str().unwrap().to_string();
        sols[&name].clone()
    };
    let c = sol(&timed);
    assert_eq!(c["language"], "cpp");
    assert_eq!(c["entry_point"], "kernel.c::vector_add");
    assert_eq!(c["entry_source"], true);
    assert_eq!(
        metadata(c["description"].as_str().unwrap())["language"],
        "c"
    );
    let p = sol(&pallas);
    assert_eq!(p["language"], "python");
    assert_eq!(p["destination_passing_style"], false);
    assert_eq!(
        metadata(p["description"].as_str().unwrap())["language"],
        "pallas"
    );

    // The scalar input: no shape in the definition, a `scalar` input in each workload.
    let swish_def = &fib["definitions"]["matmul_swish_scaling"];
    assert_eq!(
        swish_def["inputs"]["scale"]["shape"],
        Value::Null,
        "{swish_def}"
    );
    let swish_traces = of(&scalar);
    assert!(!swish_traces.is_empty());
    for t in swish_traces {
        assert_eq!(
            t["inputs"]["scale"],
            serde_json::json!({"type": "scalar", "value": 2.0})
        );
        assert_eq!(t["inputs"]["x"], serde_json::json!({"type": "random"}));
        assert_eq!(t["status"], "COMPILE_ERROR");
    }

    let def = &fib["definitions"]["vector_add"];
    assert!(
        def["outputs"]["c"]["description"]
            .as_str()
            .unwrap()
            .contains("atol"),
        "{def}"
    );
}
