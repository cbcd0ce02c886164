//! The evaluator (find a stored evaluation by key, or evaluate and record it) through the real
//! binary: `eval` reuse, `tune` resume after kill -9, `bench` resume, and plain keys shared by
//! every command.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;

const SMALL_VECTOR_ADD: &str = r#"
[[workloads]]
axes = { N = 65537 }
inputs = { a = { dist = "normal", mean = 0.0, std = 1.0 }, b = { dist = "uniform", low = -2.0, high = 2.0 } }

[[workloads]]
axes = { N = 300001 }
inputs = { a = { dist = "normal", mean = 1.0, std = 3.0 }, b = { dist = "normal", mean = 0.0, std = 1.0 } }
"#;

fn fast_vector_add() -> String {
    root()
        .join("tasks/starter/vector_add/solutions/fast")
        .display()
        .to_string()
}

/// ksmith with the store's evaluations reused (the default outside the tests).
fn ksmith_reusing(store: &Path, args: &[&str]) -> std::process::Output {
    ksmith_env(store, args, &[("KSMITH_EVAL_AGAIN", "0")])
}

fn db(store: &Path) -> Option<rusqlite::Connection> {
    store
        .join("ksmith.db")
        .exists()
        .then(|| rusqlite::Connection::open(store.join("ksmith.db")).ok())
        .flatten()
}

/// Rows in the evaluations table (0 before the store exists).
fn evaluations(store: &Path) -> i64 {
    db(store)
        .and_then(|c| {
            c.query_row("SELECT COUNT(*) FROM evaluations", [], |r| r.get(0))
                .ok()
        })
        .unwrap_or(0)
}

fn max_eval_id(store: &Path) -> i64 {
    db(store)
        .and_then(|c| {
            c.query_row("SELECT COALESCE(MAX(id), 0) FROM evaluations", [], |r| {
                r.get(0)
            })
            .ok()
        })
        .unwrap_or(0)
}

/// Bench items with a recorded evaluation, by item id.
fn bench_items(store: &Path) -> Vec<(String, i64)> {
    let Some(c) = db(store) else {
        return Vec::new();
    };
    let Ok(mut stmt) =
        c.prepare("SELECT item, eval_id FROM bench_items WHERE eval_id IS NOT NULL ORDER BY item")
    else {
        return Vec::new();
    };
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .unwrap_or_default()
}

#[test]
fn eval_twice_reuses_the_stored_evaluation_and_again_judges_anew() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let args = [
        "eval",
        task.to_str().unwrap(),
        &fast_vector_add(),
        "--min-time-ms",
        "10",
        "--json",
    ];
    let first = ksmith_reusing(&store, &args);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let a = json(&first);
    assert_eq!(a["status"], "PASSED", "{a}");
    assert_eq!(a["reused"], false, "{a}");
    assert_eq!(evaluations(&store), 1);

    let second = ksmith_reusing(&store, &args);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    let b = json(&second);
    assert_eq!(b["reused"], true, "{b}");
    assert_eq!(b["id"], a["id"], "{b}");
    assert_eq!(b["performance"]["speedup"], a["performance"]["speedup"]);
    assert_eq!(evaluations(&store), 1, "a reused evaluation adds no row");

    // The human form says it was reused.
    let human: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
    let shown = ksmith_reusing(&store, &human);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown));
    assert!(
        stderr(&shown).contains("reused from the store"),
        "{}",
        text(&shown)
    );
    assert_eq!(evaluations(&store), 1);

    // Other judge settings are another key; --again judges anew.
    let mut other = args.to_vec();
    other[4] = "11";
    assert_eq!(json(&ksmith_reusing(&store, &other))["reused"], false);
    assert_eq!(evaluations(&store), 2);
    let mut again = args.to_vec();
    again.push("--again");
    let c = json(&ksmith_reusing(&store, &again));
    assert_eq!(c["reused"], false, "{c}");
    assert_ne!(c["id"], a["id"], "{c}");
    assert_eq!(evaluations(&store), 3);
    // The newest evaluation under the key is the one reused from now on.
    assert_eq!(json(&ksmith_reusing(&store, &args))["id"], c["id"]);
    // KSMITH_EVAL_AGAIN=1 (what the other test files set) is --again.
    let d = json(&ksmith(&store, &args));
    assert_eq!(d["reused"], false, "{d}");
    assert_eq!(evaluations(&store), 4);
}

#[test]
fn tune_killed_and_rerun_reuses_stored_evaluations_and_races() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let out_dir = tmp.path().join("tuned");
    let args = [
        "tune",
        task.to_str().unwrap(),
        &fast_vector_add(),
        "--strategy",
        "exhaustive",
        "--budget",
        "5",
        "--min-time-ms",
        "10",
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ];
    // kill -9 once the untuned solution and the first configuration are stored.
    kill_9_when(&store, &args, || evaluations(&store) >= 2, Duration::ZERO);
    let stored = evaluations(&store);
    assert!(stored >= 2);

    let out = ksmith(&store, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json(&out);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    // The untuned solution and the configuration(s) stored before the kill are reused (the
    // first configuration was raced against the untuned one: its key names that race, and the
    // incumbent read back from the store gives the same key).
    assert_eq!(rows[0]["untuned"], true, "{v}");
    assert_eq!(rows[1]["reused"], true, "{v}");
    // Every configuration stored before the kill (all but the untuned solution, row 0) is
    // reused.
    let reused = rows.iter().filter(|r| r["reused"] == true).count() as i64;
    assert!(
        reused >= stored - 1,
        "{stored} stored, {reused} reused: {v}"
    );

    // A third run judges no configuration again: only the side-by-side re-timing (never
    // reused: it is the point of re-timing) adds rows, one per finalist.
    let before = evaluations(&store);
    let third = ksmith(&store, &args);
    assert_eq!(third.status.code(), Some(0), "{}", text(&third));
    let w = json(&third);
    let rows = w["rows"].as_array().unwrap();
    assert!(
        rows.iter().skip(1).all(|r| r["reused"] == true),
        "every configuration reused: {w}"
    );
    let confirmed = w["confirmed"].as_array().unwrap().len() as i64;
    assert!(confirmed >= 1, "{w}");
    // One re-timing of the finalists together, and up to two more with more rounds when the
    // decision against the untuned solution was left undecided on a wide interval.
    let timings = 1 + ksmith_judge::decide::MORE_ROUNDS as i64;
    let added = evaluations(&store) - before;
    assert!(
        added % confirmed == 0 && (confirmed..=confirmed * timings).contains(&added),
        "{added} evaluations added for {confirmed} finalists: {w}"
    );
    // No evaluation was stored twice under one key, except the re-timings of the same
    // finalists by the two completed runs (a re-timing is never reused).
    let c = db(&store).unwrap();
    let dup: i64 = c
        .query_row(
            "SELECT count(*) - count(DISTINCT eval_key) FROM evaluations",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        dup <= 2 * confirmed * timings,
        "{dup} repeated keys, {confirmed} finalists"
    );
}

#[test]
fn bench_resumes_after_kill_9_and_its_plain_keys_are_evals() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let suite = tmp.path().join("suite");
    for name in ["a_vector_add", "b_vector_add"] {
        let dir = small_task("vector_add", &suite.join("tmp"), SMALL_VECTOR_ADD);
        let toml = std::fs::read_to_string(dir.join("task.toml"))
            .unwrap()
            .replace("name = \"vector_add\"", &format!("name = \"{name}\""));
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        std::fs::rename(&dir, suite.join(name)).unwrap();
    }
    std::fs::remove_dir_all(suite.join("tmp")).unwrap();
    let sols = tmp.path().join("solutions");
    for name in ["a_vector_add", "b_vector_add"] {
        let d = sols.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            root().join("tasks/starter/vector_add/solutions/fast/kernel.c"),
            d.join("kernel.c"),
        )
        .unwrap();
        std::fs::write(
            d.join("solution.toml"),
            "name = \"cand\"\nlanguage = \"c\"\nentry_point = \"vector_add\"\nsources = [\"kernel.c\"]\n",
        )
        .unwrap();
    }
    let args = [
        "bench",
        suite.to_str().unwrap(),
        "--solutions",
        sols.to_str().unwrap(),
        "--min-time-ms",
        "10",
        "--json",
    ];
    kill_9_when(
        &store,
        &args,
        || !bench_items(&store).is_empty(),
        Duration::ZERO,
    );
    let done = bench_items(&store);
    assert!(!done.is_empty());
    let last_id = max_eval_id(&store);

    let out = ksmith(&store, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stderr(&out).contains("resuming bench run"),
        "{}",
        stderr(&out)
    );
    let after = bench_items(&store);
    assert_eq!(after.len(), 2, "{after:?}");
    // Items finished before the kill keep their evaluations; only the rest was judged.
    for (item, id) in &done {
        assert!(after.contains(&(item.clone(), *id)), "{item} {after:?}");
    }
    let new: i64 = db(&store)
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM evaluations WHERE id > ?1",
            [last_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(new, 2 - done.len() as i64, "{after:?}");

    // A bench evaluation is stored under the plain key `eval` looks up: same code, task and
    // settings reuse it.
    let a_task = suite.join("a_vector_add");
    let a_sol = sols.join("a_vector_add");
    let ev = ksmith_reusing(
        &store,
        &[
            "eval",
            a_task.to_str().unwrap(),
            a_sol.to_str().unwrap(),
            "--min-time-ms",
            "10",
            "--json",
        ],
    );
    assert_eq!(ev.status.code(), Some(0), "{}", text(&ev));
    let v = json(&ev);
    assert_eq!(v["reused"], true, "{v}");
    let a_id = after
        .iter()
        .find(|(item, _)| item.starts_with("a_vector_add/"))
        .map(|(_, id)| *id);
    assert_eq!(v["id"].as_i64(), a_id, "{v} {after:?}");
}

/// `tune --strategy exhaustive --json` of `sol`, short timing, no re-timing of the leaders.
fn tune_every_configuration(
    store: &Path,
    task: &Path,
    sol: &Path,
    out: &Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let args = [
        "tune",
        task.to_str().unwrap(),
        sol.to_str().unwrap(),
        "--strategy",
        "exhaustive",
        "--min-time-ms",
        "10",
        "--confirm",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    ksmith_env(store, &args, env)
}

#[test]
fn a_tune_warms_the_trusted_side_once_and_judges_each_configuration_in_a_fresh_runner() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let out = tune_every_configuration(
        &store,
        &task,
        Path::new(&fast_vector_add()),
        &tmp.path().join("tuned"),
        &[("KSMITH_TRACE_CALLS", "1")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows = json(&out)["rows"].as_array().unwrap().len();
    assert_eq!(rows, 3, "the untuned solution and two configurations");
    let calls: Vec<String> = stderr(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("[harness] "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let count = |c: &str| calls.iter().filter(|x| *x == c).count();
    // One warm-up per task and process, answered before the first timed baseline round.
    assert_eq!(count("warm"), 1, "{calls:?}");
    let first = |c: &str| calls.iter().position(|x| x == c).unwrap();
    assert!(first("warm") < first("baseline"), "{calls:?}");
    // Every evaluation in a runner of its own, calibrated before the candidate is loaded.
    assert_eq!(count("calibrate"), 3, "{calls:?}");
    assert_eq!(count("load"), 3, "{calls:?}");
}
