//! `ksmith extract`: the two example programs shipped in examples/programs, end to end through
//! the real binary on the CPU (trace, time, write, validate), and the clear exit 2 for a
//! function that cannot be traced or has no op worth a kernel.

mod common;

use common::{fresh_store, json, ksmith, root, shared_store, text};
use std::path::Path;

/// Extracts `target` into a fresh directory, checks the summary and every written task, and
/// returns the summary.
fn extract_and_check(target: &str, top: &str, dir: &Path) -> serde_json::Value {
    let out = dir.join("suite");
    let program = root().join("examples/programs").join(target);
    let o = ksmith(
        &shared_store(),
        &[
            "extract",
            program.to_str().unwrap(),
            "--top",
            top,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let s = json(&o);
    let parts = s["parts"].as_array().expect("parts");
    let written: Vec<&str> = parts.iter().filter_map(|p| p["task"].as_str()).collect();
    assert!(!written.is_empty(), "{s}");
    assert!(written.len() <= top.parse().unwrap());
    // Ranked by time, slowest first; every written task is a directory with both files.
    let times: Vec<f64> = parts
        .iter()
        .filter_map(|p| p["median_s"].as_f64())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    for t in &written {
        assert!(out.join(t).join("task.toml").is_file(), "{t}");
        assert!(out.join(t).join("reference.py").is_file(), "{t}");
    }
    let covered = s["covered_share"].as_f64().unwrap();
    let of_parts = s["covered_of_parts"].as_f64().unwrap();
    assert!(
        covered > 0.0 && of_parts > 0.3 && of_parts <= 1.0 + 1e-9,
        "{s}"
    );
    let p = &s["program"];
    let (lo, med, hi) = (
        p["low_s"].as_f64().unwrap(),
        p["median_s"].as_f64().unwrap(),
        p["high_s"].as_f64().unwrap(),
    );
    assert!(lo <= med && med <= hi && med > 0.0, "{p}");
    assert!(out.join("extract.json").is_file());
    // The suite as a whole passes the real validation again.
    let v = ksmith(&shared_store(), &["validate", out.to_str().unwrap()]);
    assert!(v.status.success(), "{}", text(&v));
    assert!(
        text(&v).contains(&format!(
            "{} of {} tasks valid",
            written.len(),
            written.len()
        )),
        "{}",
        text(&v)
    );
    s
}

#[test]
fn the_mlp_with_layer_norm_becomes_a_valid_suite() {
    let dir = tempfile::tempdir().unwrap();
    let s = extract_and_check("mlp_layernorm.py:mlp_block", "4", dir.path());
    let kinds: Vec<&str> = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["task"].is_string())
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    // Two matmuls dominate; the layer norm and the GELU are found as their own parts.
    assert_eq!(kinds.iter().filter(|k| **k == "matmul").count(), 2, "{s}");
    let all: Vec<&str> = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(
        all.contains(&"norm") && all.contains(&"elementwise"),
        "{all:?}"
    );
    // The layer norm's reference follows the axes (the mean's divisor is the row length).
    let norm = s["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "norm" && p["task"].is_string());
    if let Some(norm) = norm {
        let src = std::fs::read_to_string(
            dir.path()
                .join("suite")
                .join(norm["task"].as_str().unwrap())
                .join("reference.py"),
        )
        .unwrap();
        assert!(src.contains("float(N)"), "{src}");
    }
}

/// A C kernel for the MLP's bias-add + tanh-GELU part (the task's ABI: x0 = the bias [M],
/// x1 = the matmul's output [N, M], y0 [N, M], then the axes M, N).
const GELU_C: &str = r#"#include <math.h>
#include <stdint.h>

void ENTRY(const float *x0, const float *x1, float *y0, int64_t M, int64_t N) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float t = x1[n * M + m] + x0[m];
            float u = 0.7978845834732056f * (t + 0.044714998453855515f * t * t * t);
            y0[n * M + m] = t * (0.5f * (1.0f + tanhf(u)));
        }
}
"#;

/// Judges `kernel_c` (with ENTRY named after the task) on `task`, exports the suite with it,
/// runs `extract --measure` and checks the end-to-end figure and the per-part rows.
fn measure_with_kernel(
    store: &Path,
    dir: &Path,
    task: &Path,
    kernel_c: &str,
    program: &str,
    suite: &Path,
) -> serde_json::Value {
    let name = task.file_name().unwrap().to_str().unwrap().to_string();
    let suite_s = suite.to_str().unwrap();
    let kernel = dir.join("kernel.c");
    std::fs::write(&kernel, kernel_c.replace("ENTRY", &name)).unwrap();
    let e = ksmith(
        store,
        &[
            "eval",
            task.to_str().unwrap(),
            kernel.to_str().unwrap(),
            "--no-timing",
        ],
    );
    assert!(e.status.success(), "{}", text(&e));
    let export = dir.join("export");
    let x = ksmith(
        store,
        &[
            "export",
            "--format",
            "jax",
            "--out",
            export.to_str().unwrap(),
            suite_s,
            "--skip-missing",
        ],
    );
    assert!(x.status.success(), "{}", text(&x));
    let m = ksmith(
        store,
        &[
            "extract",
            program,
            "--out",
            suite_s,
            "--measure",
            export.to_str().unwrap(),
            "--rounds",
            "9",
            "--json",
        ],
    );
    assert!(m.status.success(), "{}", text(&m));
    let m = json(&m);
    let sp = &m["speedup"];
    let (lo, med, hi) = (
        sp["low_s"].as_f64().unwrap(),
        sp["median_s"].as_f64().unwrap(),
        sp["high_s"].as_f64().unwrap(),
    );
    assert!(lo <= med && med <= hi && med > 0.0, "{m}");
    // The substituted program computes what the plain one does.
    assert!(
        m["max_abs_diff"].as_f64().unwrap() <= 1e-4 * m["output_rms"].as_f64().unwrap(),
        "{m}"
    );
    let parts = m["parts"].as_array().unwrap();
    let mine = parts.iter().find(|p| p["task"] == name.as_str()).unwrap();
    assert_eq!(mine["substituted"], true, "{m}");
    assert!(mine["speedup"]["median_s"].as_f64().unwrap() > 0.0, "{m}");
    assert!(
        parts
            .iter()
            .filter(|p| p["task"] != name.as_str())
            .all(|p| p["substituted"] == false
                && p["why_not"].as_str().unwrap().contains("not in the export")),
        "{m}"
    );
    m
}

/// The task of `suite` whose reference contains `marker`.
fn task_with(suite: &Path, marker: &str) -> std::path::PathBuf {
    std::fs::read_dir(suite)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read_to_string(p.join("reference.py")).is_ok_and(|r| r.contains(marker)))
        .unwrap_or_else(|| {
            panic!(
                "no task of {} has `{marker}` in its reference",
                suite.display()
            )
        })
}

/// A C kernel for the attention's scaled, causally masked softmax (x0 [M heads, N, N]).
const SOFTMAX_C: &str = r#"#include <math.h>
#include <stdint.h>

void ENTRY(const float *x0, float *y0, int64_t M, int64_t N) {
    for (int64_t r = 0; r < M * N; r++) {
        int64_t q = r % N;
        const float *x = x0 + r * N;
        float *y = y0 + r * N;
        float m = -INFINITY;
        for (int64_t k = 0; k < N; k++) {
            float v = k <= q ? x[k] / 8.0f : -1e9f;
            y[k] = v;
            m = v > m ? v : m;
        }
        float s = 0.0f;
        for (int64_t k = 0; k < N; k++) {
            y[k] = expf(y[k] - m);
            s += y[k];
        }
        for (int64_t k = 0; k < N; k++)
            y[k] = y[k] / s;
    }
}
"#;

#[test]
fn the_transformer_block_runs_with_an_exported_softmax_substituted() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let suite = dir.path().join("suite");
    let program = root().join("examples/programs/transformer_block.py:block");
    let program = program.to_str().unwrap();
    let o = ksmith(
        &store,
        &[
            "extract",
            program,
            "--top",
            "7",
            "--out",
            suite.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let task = task_with(&suite, "jnp.exp");
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    assert!(toml.contains("shape = [\"M\", \"N\", \"N\"]"), "{toml}");
    measure_with_kernel(&store, dir.path(), &task, SOFTMAX_C, program, &suite);
}

#[test]
fn the_mlp_program_runs_with_an_exported_kernel_substituted() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let suite = dir.path().join("suite");
    let program = root().join("examples/programs/mlp_layernorm.py:mlp_block");
    let program = program.to_str().unwrap();
    let suite_s = suite.to_str().unwrap();
    let o = ksmith(
        &store,
        &["extract", program, "--top", "4", "--out", suite_s],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("coverage:"), "{}", text(&o));
    let task = task_with(&suite, "jnp.tanh");
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    assert!(
        toml.contains("shape = [\"M\"]") && toml.contains("shape = [\"N\", \"M\"]"),
        "{toml}"
    );
    measure_with_kernel(&store, dir.path(), &task, GELU_C, program, &suite);
    // Without an export, a clear input error.
    let bad = ksmith(
        &store,
        &[
            "extract",
            program,
            "--out",
            suite_s,
            "--measure",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

#[test]
fn the_transformer_block_becomes_a_valid_suite() {
    let dir = tempfile::tempdir().unwrap();
    let s = extract_and_check("transformer_block.py:block", "3", dir.path());
    assert!(
        s["parts"].as_array().unwrap().len() >= 8,
        "attention, MLP, norms: {s}"
    );
}

fn run_on(dir: &Path, source: &str, target_fn: &str, extra: &[&str]) -> std::process::Output {
    let file = dir.join("prog.py");
    std::fs::write(&file, source).unwrap();
    let out = dir.join("out");
    let target = format!("{}:{target_fn}", file.display());
    let mut args = vec!["extract", target.as_str(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    ksmith(&shared_store(), &args)
}

#[test]
fn pytree_arguments_bfloat16_and_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"import jax
import jax.numpy as jnp


def f(params, x):
    h = jax.nn.relu(x @ params["w"] + params["b"])
    c, _ = jax.lax.scan(lambda c, r: (c + r.sum(), c), 0.0, h)
    return jax.nn.softmax(h, axis=-1) * c


def f_example():
    k = jax.random.PRNGKey(0)
    w = jax.random.normal(k, (128, 256), jnp.bfloat16)
    return ({"w": w, "b": jnp.zeros(256, jnp.bfloat16)}, jax.random.normal(k, (192, 128), jnp.bfloat16))
"#;
    let o = run_on(dir.path(), src, "f", &["--top", "2", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = json(&o);
    let parts = s["parts"].as_array().unwrap();
    assert_eq!(s["control_flow"][0], "scan", "{s}");
    let scan = parts
        .iter()
        .find(|p| p["kind"] == "control")
        .expect("the scan");
    assert!(scan["skipped"].as_str().unwrap().contains("scan"), "{s}");
    let written: Vec<&serde_json::Value> = parts.iter().filter(|p| p["task"].is_string()).collect();
    assert_eq!(written.len(), 2, "{s}");
    for p in written {
        let toml = std::fs::read_to_string(
            dir.path()
                .join("out")
                .join(p["task"].as_str().unwrap())
                .join("task.toml"),
        )
        .unwrap();
        assert!(toml.contains("dtype = \"bfloat16\""), "{toml}");
    }
}

#[test]
fn a_function_that_cannot_be_traced_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let src = "import jax.numpy as jnp\n\n\ndef f(x):\n    return x * float(x.sum())\n\n\ndef example_inputs():\n    return (jnp.ones((64, 64)),)\n";
    let o = run_on(dir.path(), src, "f", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot be traced"), "{}", text(&o));
}

#[test]
fn a_function_with_no_op_worth_a_kernel_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let src = "def f(x):\n    return x.reshape(-1).T\n";
    let o = run_on(dir.path(), src, "f", &["--example", "f32[64,64]"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no op worth a kernel"), "{}", text(&o));
    assert!(!dir.path().join("out").join("extract.json").exists());
}

#[test]
fn missing_inputs_and_bad_targets_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_on(dir.path(), "def f(x):\n    return x + 1\n", "f", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("f_example()"), "{}", text(&o));
    let o = run_on(dir.path(), "def f(x):\n    return x + 1\n", "g", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no function `g`"), "{}", text(&o));
    let o = run_on(
        dir.path(),
        "def f(x):\n    return x + 1\n",
        "f",
        &["--example", "q9[3]"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--example"), "{}", text(&o));
    let o = ksmith(&shared_store(), &["extract", "nofile.py"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("FILE.py:FUNCTION"), "{}", text(&o));
}
