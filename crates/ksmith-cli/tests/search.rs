//! Graph search through the real binary with the simulated expander: every strategy end to
//! end, bad parameters, and a search killed with SIGKILL mid-run then resumed.

mod common;

use common::{ksmith, root};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pool() -> PathBuf {
    root().join("crates/ksmith-search/tests/data/starter-pool.json")
}

fn task() -> PathBuf {
    root().join("tasks/starter/matmul")
}

/// `optimize` of the matmul task as a simulated `loop` over the starter pool, with `extra`.
fn simulated_loop(store: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let model = format!("sim:{}", pool().display());
    let t = task();
    let mut args = vec![
        "optimize",
        t.to_str().expect("path"),
        "--strategy",
        "loop",
        "--model",
        &model,
    ];
    args.extend(extra);
    ksmith(store, &args)
}

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// (id, parent, state, hint, speedup) of every stored node of a run, plus its payload.
type NodeRow = (i64, Option<i64>, String, Option<f64>, String);

fn nodes(store: &Path, run: &str) -> Vec<NodeRow> {
    let db = Connection::open(store.join("ksmith.db")).expect("db");
    let mut st = db
        .prepare("SELECT id, parent, state, speedup, payload FROM search_nodes WHERE run = ?1 ORDER BY id")
        .expect("query");
    st.query_map([run], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .expect("rows")
    .collect::<Result<_, _>>()
    .expect("rows")
}

fn run_row(store: &Path, run: &str) -> (String, String, Option<String>) {
    let db = Connection::open(store.join("ksmith.db")).expect("db");
    db.query_row(
        "SELECT mode, status, stop_reason FROM runs WHERE id = ?1",
        [run],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .expect("run row")
}

fn run_id(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("search "))
        .and_then(|l| l.split(':').next())
        .expect("a `search RUN:` line")
        .to_string()
}

/// The node's tree-relevant fields (wall time aside).
fn shape(payload: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(payload).expect("node JSON");
    v["spend"]["wall_s"] = serde_json::Value::Null;
    v
}

#[test]
fn every_strategy_runs_end_to_end_with_the_simulator() {
    let store = tempfile::tempdir().expect("tempdir");
    let model = format!("sim:{}", pool().display());
    for s in ["loop", "best-of-n", "parallel", "beam", "greedy", "evolve"] {
        let t = task();
        let o = ksmith(
            store.path(),
            &[
                "optimize",
                t.to_str().expect("path"),
                "--strategy",
                s,
                "--model",
                &model,
                "--max-calls",
                "12",
                "--jobs",
                "2",
                "--seed",
                "3",
            ],
        );
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{s}: {out}\n{err}");
        assert!(out.contains("stopped: LLM call budget spent"), "{s}: {out}");
        assert!(out.contains("12 LLM calls"), "{s}: {out}");
        let run = run_id(&out);
        let (mode, status, reason) = run_row(store.path(), &run);
        assert_eq!(
            (mode.as_str(), status.as_str()),
            ("search", "finished"),
            "{s}"
        );
        assert_eq!(reason.as_deref(), Some("LLM call budget spent"));
        let ns = nodes(store.path(), &run);
        // The root is judged without a call; 12 calls at 2 a node make at least 6 more (the
        // last calls are shared between the two slots, so nodes may get 1 each).
        assert!(ns.len() >= 7 && ns.len() <= 13, "{s}: {} nodes", ns.len());
        let calls: u64 = ns
            .iter()
            .map(|n| shape(&n.4)["spend"]["calls"].as_u64().expect("calls"))
            .sum();
        assert_eq!(calls, 12, "{s}: the stored nodes' calls");
        assert!(
            ns.iter().all(|n| n.2 != "expanding"),
            "{s}: a node left in flight"
        );
        assert!(
            ns[1..].iter().all(|n| n.1.is_some()),
            "{s}: every child has a parent"
        );
        let printed = out.lines().filter(|l| l.starts_with("node n")).count();
        assert_eq!(printed, ns.len(), "{s}: one line per finished node");
    }
}

#[test]
fn bad_search_parameters_exit_2_naming_the_flag_or_file() {
    let store = tempfile::tempdir().expect("tempdir");
    let t = task();
    let t = t.to_str().expect("path");
    let model = format!("sim:{}", pool().display());
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("other-task-pool.json");
    let text_pool = std::fs::read_to_string(pool()).expect("pool");
    std::fs::write(
        &other,
        text_pool.replace("\"task\": \"matmul\"", "\"task\": \"not_matmul\""),
    )
    .expect("write");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--strategy".into(),
                "beam".into(),
                "--width".into(),
                "0".into(),
                "--model".into(),
                model.clone(),
            ],
            "--width",
        ),
        (
            vec![
                "--strategy".into(),
                "loop".into(),
                "--width".into(),
                "2".into(),
                "--model".into(),
                model.clone(),
            ],
            "--width does not apply",
        ),
        (
            vec![
                "--strategy".into(),
                "sideways".into(),
                "--model".into(),
                model.clone(),
            ],
            "--strategy sideways",
        ),
        (
            vec![
                "--strategy".into(),
                "beam".into(),
                "--model".into(),
                "sim:/nonexistent/pool.json".into(),
            ],
            "/nonexistent/pool.json",
        ),
        (
            vec![
                "--strategy".into(),
                "beam".into(),
                "--model".into(),
                format!("sim:{}", other.display()),
            ],
            "no candidates for task `matmul`",
        ),
        (
            vec![
                "--strategy".into(),
                "greedy".into(),
                "--model".into(),
                "openai:gpt-x".into(),
            ],
            "OPENAI_API_KEY",
        ),
        (
            vec![
                "--strategy".into(),
                "evolve".into(),
                "--islands".into(),
                "0".into(),
                "--model".into(),
                model.clone(),
            ],
            "--islands",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["optimize", t];
        args.extend(extra.iter().map(String::as_str));
        let o = ksmith(store.path(), &args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {out}\n{err}");
        assert!(err.contains(want), "{extra:?}: wanted `{want}` in: {err}");
    }
    // Nothing was started by a refused search.
    let db = store.path().join("ksmith.db");
    if db.exists() {
        let c = Connection::open(db).expect("db");
        let n: i64 = c
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}

#[test]
fn a_killed_search_resumes_without_repeating_a_finished_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The same pool, slowed down so the search can be killed mid-run.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pool()).expect("pool")).expect("json");
    p["settings"]["latency_ms"] = serde_json::json!(250);
    let slow = dir.path().join("slow-pool.json");
    std::fs::write(&slow, p.to_string()).expect("write");
    let model = format!("sim:{}", slow.display());
    let t = task();
    let args = |store: &Path| -> Vec<String> {
        vec![
            "--store".into(),
            store.display().to_string(),
            "optimize".into(),
            t.display().to_string(),
            "--strategy".into(),
            "greedy".into(),
            "--model".into(),
            model.clone(),
            "--max-nodes".into(),
            "14".into(),
            "--jobs".into(),
            "3".into(),
            "--seed".into(),
            "11".into(),
        ]
    };
    let bin = env!("CARGO_BIN_EXE_ksmith");

    // Uninterrupted, for comparison.
    let whole = dir.path().join("whole");
    let o = Command::new(bin).args(args(&whole)).output().expect("run");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let whole_nodes = nodes(&whole, &run_id(&out));
    assert_eq!(whole_nodes.len(), 14);

    // Killed once some nodes have finished, then resumed.
    let store = dir.path().join("killed");
    let mut child = Command::new(bin)
        .args(args(&store))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let db = store.join("ksmith.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (run, before) = loop {
        assert!(Instant::now() < deadline, "the search never got going");
        std::thread::sleep(Duration::from_millis(50));
        let Ok(c) = Connection::open(&db) else {
            continue;
        };
        let Ok(run) = c.query_row("SELECT id FROM runs", [], |r| r.get::<_, String>(0)) else {
            continue;
        };
        let Ok(ns) = std::panic::catch_unwind(|| nodes(&store, &run)) else {
            continue;
        };
        if ns.iter().filter(|n| n.2 != "expanding").count() >= 5 {
            break (run, ns);
        }
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    child.wait().expect("wait");
    // What was stored at the kill (re-read: the process may have committed one more step).
    let at_kill = nodes(&store, &run);
    assert!(at_kill.len() >= before.len());
    let finished: BTreeMap<i64, String> = at_kill
        .iter()
        .filter(|n| n.2 != "expanding")
        .map(|n| (n.0, n.4.clone()))
        .collect();
    assert!(finished.len() < 14, "killed too late: {finished:?}");

    let o = ksmith(&store, &["resume", &run]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("resuming search"), "{out}");
    // No node that had finished was expanded again.
    for line in out.lines().filter_map(|l| l.strip_prefix("start n")) {
        let id: i64 = line
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .expect("node id");
        assert!(
            !finished.contains_key(&id),
            "n{id} expanded again after it finished"
        );
    }
    let after = nodes(&store, &run);
    // The budget holds: 14 nodes, ids 0..13, each once.
    assert_eq!(
        after.iter().map(|n| n.0).collect::<Vec<_>>(),
        (0..14).collect::<Vec<_>>()
    );
    for (id, payload) in &finished {
        let now = &after[*id as usize].4;
        // Merged later, a finished node may only gain its duplicate mark; its result stays.
        let (a, b) = (shape(payload), shape(now));
        assert_eq!(a["outcome"], b["outcome"], "n{id} changed");
        assert_eq!(a["parent"], b["parent"], "n{id} changed");
        assert_eq!(a["hint"], b["hint"], "n{id} changed");
    }
    // The same search as the uninterrupted one.
    for (w, r) in whole_nodes.iter().zip(&after) {
        assert_eq!(
            shape(&w.4),
            shape(&r.4),
            "node {} differs from the uninterrupted run",
            w.0
        );
    }
    let (_, status, _) = run_row(&store, &run);
    assert_eq!(status, "finished");
}

/// A node that found its parent's code again is a duplicate: reused, not an evaluation, and the
/// search's total counts only what was judged.
#[test]
fn duplicate_nodes_are_not_counted_as_evaluations() {
    let store = tempfile::tempdir().expect("tempdir");
    let o = simulated_loop(store.path(), &["--max-calls", "60", "--seed", "5"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let ns = nodes(store.path(), &run_id(&out));
    let evals = |n: &NodeRow| {
        shape(&n.4)["spend"]["evaluations"]
            .as_u64()
            .expect("evaluations")
    };
    // Those that came back to their parent's code (the simulator's own duplicates; one that
    // meets another branch's code is found by the engine after the node was judged).
    let dups: Vec<&NodeRow> = ns
        .iter()
        .filter(|n| n.2 == "duplicate" && shape(&n.4)["duplicate_of"].as_i64() == n.1)
        .collect();
    assert!(
        !dups.is_empty(),
        "no duplicate among {} nodes: {out}",
        ns.len()
    );
    assert!(
        dups.iter().all(|n| evals(n) == 0),
        "a duplicate counted as an evaluation"
    );
    let total: u64 = ns.iter().map(evals).sum();
    assert!(
        out.contains(&format!(", {total} evaluations;")),
        "the total is the stored nodes' evaluations ({total}): {out}"
    );
}

#[test]
fn simulate_compares_strategies_and_makes_pools() {
    let store = tempfile::tempdir().expect("tempdir");
    let p = pool();
    let o = ksmith(
        store.path(),
        &[
            "simulate",
            "--pool",
            p.to_str().expect("path"),
            "--strategies",
            "loop,best-of-n,beam",
            "--seeds",
            "5",
            "--calls",
            "20",
            "--format",
            "json",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    // Every task of the pool, none skipped (both have passing candidates).
    let tasks = v["tasks"].as_array().expect("tasks");
    let names: Vec<&str> = tasks
        .iter()
        .map(|t| t["task"].as_str().expect("task"))
        .collect();
    assert_eq!(names, ["matmul", "softmax"], "{v}");
    assert_eq!(v["skipped"], serde_json::json!([]), "{v}");
    for t in tasks {
        assert_eq!(t["rows"].as_array().expect("rows").len(), 3, "{t}");
    }
    let rows = tasks[0]["rows"].as_array().expect("rows");
    for r in rows {
        let at = r["at"].as_array().expect("at");
        assert_eq!(at.last().expect("a checkpoint")["calls"], 20);
        let mean = at.last().expect("checkpoint")["mean"]
            .as_f64()
            .expect("mean");
        // The start (naive, 0.32x) is always reached; the pool's best is 1.12x.
        assert!((0.3..=1.13).contains(&mean), "{r}");
    }
    let o = ksmith(
        store.path(),
        &[
            "simulate",
            "--pool",
            p.to_str().expect("path"),
            "--strategies",
            "sideways",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    // A task with no passing candidate is named as skipped, the others still run.
    let mut pool_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("pool")).expect("pool json");
    for c in pool_json["tasks"][1]["candidates"]
        .as_array_mut()
        .expect("candidates")
    {
        c["status"] = "COMPILE_ERROR".into();
    }
    let broken = store.path().join("broken-pool.json");
    std::fs::write(&broken, pool_json.to_string()).expect("write");
    let o = ksmith(
        store.path(),
        &[
            "simulate",
            "--pool",
            broken.to_str().expect("path"),
            "--strategies",
            "loop",
            "--seeds",
            "2",
            "--calls",
            "8",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("task matmul"), "{out}");
    assert!(
        err.contains("task softmax skipped: no candidate in the pool passed"),
        "{err}"
    );
    // A pool from an empty store is refused; from the shipped pool's store it is made.
    let out_file = store.path().join("pool.json");
    let o = ksmith(
        store.path(),
        &[
            "simulate",
            "pool",
            "--out",
            out_file.to_str().expect("path"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
}

#[test]
fn a_finished_search_resumes_only_with_a_raised_limit() {
    let store = tempfile::tempdir().expect("tempdir");
    let t = task();
    let model = format!("sim:{}", pool().display());
    let o = ksmith(
        store.path(),
        &[
            "optimize",
            t.to_str().expect("path"),
            "--strategy",
            "parallel",
            "--n",
            "2",
            "--model",
            &model,
            "--max-calls",
            "8",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let run = run_id(&out);
    let first = nodes(store.path(), &run);
    let o = ksmith(store.path(), &["resume", &run]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(text(&o).1.contains("already finished"));
    let o = ksmith(store.path(), &["resume", &run, "--max-calls", "16"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let after = nodes(store.path(), &run);
    assert!(after.len() > first.len(), "no new nodes: {out}");
    // The earlier nodes are untouched, and the total stays within the raised limit.
    for (a, b) in first.iter().zip(&after) {
        assert_eq!(a.4, b.4, "n{} changed", a.0);
    }
    let calls: u64 = after
        .iter()
        .map(|n| shape(&n.4)["spend"]["calls"].as_u64().expect("calls"))
        .sum();
    assert_eq!(calls, 16);
    assert_eq!(run_row(store.path(), &run).1, "finished");
}

/// A simulated search has no agents a person could review: `--interactive` is refused, with
/// nothing stored.
#[test]
fn an_interactive_simulated_search_is_refused() {
    let store = tempfile::tempdir().expect("tempdir");
    let o = simulated_loop(store.path(), &["--interactive"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("--interactive") && err.contains("simulated"),
        "{err}"
    );
    let db = store.path().join("ksmith.db");
    let runs: i64 = rusqlite::Connection::open(&db)
        .and_then(|c| c.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)))
        .unwrap_or(0);
    assert_eq!(runs, 0, "no run stored");
}
