//! `ksmith extract`: the two example programs shipped in examples/programs, end to end through
//! the real binary on the CPU (trace, time, write, validate), and the clear exit 2 for a
//! function that cannot be traced or has no op worth a kernel.

mod common;

use common::{json, ksmith, root, shared_store, text};
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
