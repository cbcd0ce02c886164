use super::*;
use crate::node::{NodeOutcome, Spend};
use ksmith_judge::{EvalResult, Status};
use ksmith_store::{NodeRecord, RunRow, RunStatus};
use ksmith_task::{Language, Solution};
use serde_json::json;
use std::path::Path;

fn softmax() -> Task {
    Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/softmax"))
        .expect("starter task loads")
}

/// A stored evaluation carrying the task (op class) and the machine; its status is not read.
fn eval(store: &mut Store, task: &Task, src: &str, fp: &str) -> i64 {
    let sol = Solution::from_source("s", Language::C, "softmax", "kernel.c", src.into(), vec![]);
    let env = ksmith_judge::Environment {
        cpu: "Test CPU".into(),
        fingerprint: fp.into(),
        ..Default::default()
    };
    let r: EvalResult = serde_json::from_value(json!({
        "status": "PASSED", "reason": null, "detail": null, "stage": "build",
        "task": task.name, "task_hash": task.content_hash,
        "solution": sol.name, "solution_hash": sol.content_hash,
        "policy": [], "build": null, "correctness": null, "performance": null, "log": "",
        "environment": env, "elapsed_s": 0.0,
        "time_split": ksmith_judge::TimeSplit::default(),
    }))
    .unwrap();
    store.record("k", task, &sol, &r).unwrap()
}

fn run_row(id: &str, task: &Task) -> RunRow {
    RunRow {
        id: id.into(),
        created_at: String::new(),
        updated_at: String::new(),
        task_dir: "tasks/starter/softmax".into(),
        task: task.name.clone(),
        tests_hash: task.content_hash.clone(),
        model: "scripted:x".into(),
        mode: "autonomous".into(),
        options: "{}".into(),
        status: RunStatus::Finished,
        stop_reason: None,
        active_s: 0.0,
        out_dir: None,
    }
}

fn kernel(body: &str) -> String {
    format!("#include <math.h>\nvoid softmax(const float* x, float* y, long M, long N) {{\n{body}\n}}\n")
}

/// A serial run: iteration 0 passes (1.0x), 1 passes and wins its head-to-head (1.3x),
/// 2 fails, 3 passes but loses its head-to-head, 4 wins (against 1, not timed together).
fn serial_run(store: &mut Store, id: &str, task: &Task) {
    store.create_run(&run_row(id, task)).unwrap();
    let snaps = [
        (0, "PASSED", Some(1.0), "starting solution", "  naive();"),
        (1, "PASSED", Some(1.3), "Vectorize the row loop", "  vec();"),
        (2, "COMPILE_ERROR", None, "Broken idea", "  oops("),
        (3, "PASSED", Some(1.35), "Unroll by 4", "  unroll();"),
        (
            4,
            "PASSED",
            Some(2.0),
            "Parallelize rows with OpenMP",
            "  omp();\n  vec();",
        ),
    ];
    for (it, status, speedup, summary, body) in snaps {
        let src = kernel(body);
        let ev = eval(store, task, &src, "fp-a");
        let h = store.put_artifact(src.as_bytes()).unwrap();
        store
            .record_snapshot(
                id,
                &SnapshotRow {
                    iteration: it,
                    eval_id: Some(ev),
                    status: status.into(),
                    latency_ms: speedup.map(|s| 1.0 / s),
                    speedup,
                    sources: json!({"files": {"kernel.c": h}, "flags": []}).to_string(),
                    summary: summary.into(),
                },
            )
            .unwrap();
    }
    // Iteration 1 vs 0, iteration 3 vs 1 (lost), iteration 4 vs 1 (not timed together).
    let h2h = [
        json!({"versus": [1.28, 1.2, 1.36]}),
        json!({"versus": [0.98, 0.9, 1.05]}),
        json!({"versus": null}),
    ];
    for (seq, p) in h2h.iter().enumerate() {
        store
            .record_event(id, seq as u64, "head_to_head", &p.to_string())
            .unwrap();
    }
}

#[test]
fn harvest_of_a_serial_run_finds_each_new_best_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let task = softmax();
    serial_run(&mut store, "r1", &task);
    let h = harvest(&store, "r1").unwrap();
    assert_eq!(h.improvements, 2);
    let steps: Vec<Step> = h.added.iter().map(|e| e.step).collect();
    assert_eq!(steps, vec![Step::Iteration(1), Step::Iteration(4)]);
    let first = &h.added[0];
    assert_eq!(first.op_class, OpClass::Normalization);
    assert_eq!(first.fingerprint, "fp-a");
    assert_eq!(first.device, "Test CPU");
    assert_eq!(first.headline, "Vectorize the row loop");
    assert_eq!(first.gain.ratio, 1.28);
    assert_eq!(first.gain.interval, Some((1.2, 1.36)));
    assert_eq!(first.excerpt, "-   naive();\n+   vec();");
    // Iteration 4 against iteration 1 (the best then), from the separate figures.
    let second = &h.added[1];
    assert!((second.gain.ratio - 2.0 / 1.3).abs() < 1e-9);
    assert_eq!(second.gain.interval, None);
    assert_eq!(second.excerpt, "+   omp();");
    // Idempotent.
    let again = harvest(&store, "r1").unwrap();
    assert_eq!(again.improvements, 2);
    assert!(again.added.is_empty());
    assert_eq!(entries(&store).unwrap().len(), 2);
    assert!(matches!(
        harvest(&store, "nope"),
        Err(MemoryError::NoRun(_))
    ));
}

fn node(id: u64, parent: Option<u64>, hint: Hint, speedup: Option<f64>, code: &str) -> Node {
    Node {
        id: NodeId(id),
        parent: parent.map(NodeId),
        depth: parent.map_or(0, |_| 1),
        hint,
        state: NodeState::Done,
        plan: format!("Plan {id}\nmore"),
        code_hash: Some(code.into()),
        norm_hash: None,
        duplicate_of: None,
        outcome: NodeOutcome {
            status: Some(if speedup.is_some() {
                Status::Passed
            } else {
                Status::IncorrectNumerical
            }),
            speedup,
            interval: None,
            roofline_fraction: None,
            eval_id: None,
            vs_parent: None,
        },
        spend: Spend::default(),
        feedback: Default::default(),
    }
}

#[test]
fn harvest_of_a_search_run_keeps_faster_children_of_passed_parents() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let task = softmax();
    store.create_run(&run_row("s1", &task)).unwrap();
    let src: Vec<String> = (0..5).map(|i| kernel(&format!("  step{i}();"))).collect();
    let hashes: Vec<String> = src
        .iter()
        .map(|s| store.put_artifact(s.as_bytes()).unwrap())
        .collect();
    let ev = eval(&mut store, &task, &src[1], "fp-b");
    let mut nodes = [
        node(0, None, Hint::FirstKernel, Some(1.0), &hashes[0]),
        node(1, Some(0), Hint::Tile, Some(1.5), &hashes[1]),
        node(2, Some(0), Hint::Unroll, Some(0.9), &hashes[2]),
        node(3, Some(1), Hint::Fuse, None, &hashes[3]),
        node(4, Some(3), Hint::Vectorize, Some(2.0), &hashes[4]),
    ];
    nodes[1].outcome.eval_id = Some(ev);
    let records: Vec<NodeRecord> = nodes
        .iter()
        .map(|n| NodeRecord {
            id: n.id.0,
            parent: n.parent.map(|p| p.0),
            state: n.state.as_str().into(),
            speedup: n.outcome.speedup,
            payload: serde_json::to_string(n).unwrap(),
            created_at: String::new(),
        })
        .collect();
    store.record_search_step("s1", &records, "{}").unwrap();
    let h = harvest(&store, "s1").unwrap();
    // Node 1 beats node 0; node 2 is slower; node 4's parent failed.
    assert_eq!(h.improvements, 1);
    assert_eq!(h.added.len(), 1);
    let e = &h.added[0];
    assert_eq!(e.step, Step::Node(NodeId(1)));
    assert_eq!(e.hint, Some(Hint::Tile));
    assert_eq!(e.headline, "Plan 1");
    assert_eq!(e.fingerprint, "fp-b");
    assert_eq!(e.gain.ratio, 1.5);
    assert_eq!(e.excerpt, "-   step0();\n+   step1();");
}

fn add(store: &Store, run: &str, task: &str, class: OpClass, fp: &str, gain: f64) -> i64 {
    store
        .memory_insert(&MemoryRow {
            id: 0,
            created_at: String::new(),
            source_run: run.into(),
            source_step: "iteration:1".into(),
            task: task.into(),
            tests_hash: format!("hash-{task}"),
            op_class: class.as_str().into(),
            fingerprint: fp.into(),
            device: "cpu".into(),
            hint: None,
            headline: format!("{task} trick"),
            gain,
            gain_interval: None,
            excerpt: "+ x".into(),
            shown: 0,
            wins: 0,
        })
        .unwrap()
        .unwrap()
}

#[test]
fn for_task_ranks_by_class_device_win_rate_gain_and_never_shows_the_same_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let me = TaskInfo {
        name: "softmax".into(),
        tests_hash: "hash-softmax".into(),
        op_class: OpClass::Normalization,
    };
    let own = add(&store, "a", "softmax", OpClass::Normalization, "fp", 9.0);
    // A copy of the task's tests under another name is the same task too.
    let mut copy = store.memory_entry(own).unwrap().unwrap();
    copy.source_run = "b".into();
    copy.task = "softmax_copy".into();
    let copy = store.memory_insert(&copy).unwrap().unwrap();
    let other_dev = add(&store, "c", "layernorm", OpClass::Normalization, "fp2", 3.0);
    let matmul = add(&store, "d", "matmul", OpClass::Matmul, "fp", 5.0);
    let rms_low = add(&store, "e", "rmsnorm", OpClass::Normalization, "fp", 1.2);
    let rms_high = add(&store, "f", "rmsnorm2", OpClass::Normalization, "fp", 1.5);
    let ids = |v: Vec<MemoryEntry>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    // Same class and device first (by gain while no win rates differ), then other device,
    // then other class; the task's own entries never.
    let got = ids(for_task(&store, &me, "fp", 10).unwrap());
    assert_eq!(got, vec![rms_high, rms_low, other_dev, matmul]);
    assert!(!got.contains(&own) && !got.contains(&copy));
    // A win for the low-gain entry lifts it above the high-gain one: (1+1)/(1+2) > 1/2.
    record_exposure(&mut store, "r9", Step::Iteration(2), &[rms_low, rms_high]).unwrap();
    record_exposure(&mut store, "r9", Step::Iteration(3), &[rms_high]).unwrap();
    assert_eq!(
        record_outcome(&store, "r9", Step::Iteration(2), true).unwrap(),
        2
    );
    assert_eq!(
        record_outcome(&store, "r9", Step::Iteration(3), false).unwrap(),
        0
    );
    let got = for_task(&store, &me, "fp", 2).unwrap();
    assert_eq!(ids(got.clone()), vec![rms_low, rms_high]);
    assert_eq!((got[0].shown, got[0].wins), (1, 1));
    assert_eq!((got[1].shown, got[1].wins), (2, 1));
    assert!((got[0].win_rate() - 2.0 / 3.0).abs() < 1e-9);
    assert!((got[1].win_rate() - 0.5).abs() < 1e-9);
}

#[test]
fn harvest_scores_wins_for_entries_shown_to_improving_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let task = softmax();
    let e = add(
        &store,
        "old",
        "layernorm",
        OpClass::Normalization,
        "fp-a",
        1.4,
    );
    serial_run(&mut store, "r1", &task);
    // Shown before iteration 1 (improved) and iteration 3 (did not).
    record_exposure(&mut store, "r1", Step::Iteration(1), &[e]).unwrap();
    record_exposure(&mut store, "r1", Step::Iteration(3), &[e]).unwrap();
    let h = harvest(&store, "r1").unwrap();
    assert_eq!(h.wins, 1);
    let back = entry(&store, e).unwrap().unwrap();
    assert_eq!((back.shown, back.wins), (2, 1));
    assert_eq!(harvest(&store, "r1").unwrap().wins, 0, "a win counts once");
}

#[test]
fn prune_by_age_and_by_win_rate_with_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let fresh = add(&store, "a", "layernorm", OpClass::Normalization, "fp", 1.4);
    let loser = add(&store, "b", "rmsnorm", OpClass::Normalization, "fp", 1.4);
    let mut old = store.memory_entry(fresh).unwrap().unwrap();
    old.source_run = "c".into();
    old.created_at = "2020-01-01T00:00:00Z".into();
    let old = store.memory_insert(&old).unwrap().unwrap();
    for i in 0..4 {
        record_exposure(&mut store, "r", Step::Iteration(i), &[loser]).unwrap();
    }
    let rule = PruneRule {
        older_than_days: Some(30.0),
        min_win_rate: Some(WinRateFloor {
            rate: 0.3,
            min_shown: 3,
        }),
    };
    let ids = |v: Vec<MemoryEntry>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    // 0 wins of 4 shows: 1/6 < 0.3. The fresh entry, never shown, stays.
    assert_eq!(
        ids(prune(&mut store, &rule, true).unwrap()),
        vec![loser, old]
    );
    assert_eq!(
        entries(&store).unwrap().len(),
        3,
        "a dry run deletes nothing"
    );
    assert_eq!(
        ids(prune(&mut store, &rule, false).unwrap()),
        vec![loser, old]
    );
    assert_eq!(ids(entries(&store).unwrap()), vec![fresh]);
}

#[test]
fn excerpts_are_capped_and_steps_round_trip() {
    let before: String = (0..40).map(|i| format!("a{i}\n")).collect();
    let after: String = (0..40).map(|i| format!("b{i}\n")).collect();
    let x = excerpt(&before, &after, MAX_EXCERPT_LINES);
    assert_eq!(x.lines().count(), MAX_EXCERPT_LINES);
    assert!(x.ends_with("(69 more changed lines)"), "{x}");
    for s in [Step::Iteration(3), Step::Node(NodeId(12))] {
        assert_eq!(Step::parse(&s.key()), Some(s));
    }
    assert_eq!(Step::parse("round:1"), None);
}
