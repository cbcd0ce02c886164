//! `ksmith eval TASK A B ...`: candidates checked one by one, then timed side by side in the same
//! rounds against the same baseline calls, and compared with each other directly.

mod common;

use common::*;

/// The tests time kernels: one at a time, so they do not disturb each other's rounds.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

const WORKLOADS: &str = "[[workloads]]\naxes = { M = 256, N = 2000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n\n[[workloads]]\naxes = { M = 64, N = 5000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 2.0 }\n";

#[test]
fn candidates_are_timed_together_and_compared_directly() {
    let _one = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let sols = root().join("tasks/starter/softmax/solutions");
    let o = ksmith(
        &store,
        &[
            "eval",
            task.to_str().unwrap(),
            sols.join("naive").to_str().unwrap(),
            sols.join("fast").to_str().unwrap(),
            "--json",
            "--min-time-ms",
            "30",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["status"], "PASSED", "{r}");
        assert!(r["performance"]["speedup"].as_f64().unwrap() > 0.0);
        assert!(r["id"].as_i64().unwrap() > 0);
    }
    // Same rounds, same baseline calls: the fast kernel against the naive one directly (the
    // vectorized, threaded kernel is about 10x faster here), and the two directions agree. On a
    // disturbed machine the intervals widen (a run under load measured 2.9x, 0.48-14.8), so
    // the bounds are loose: the direction is what a loop relies on.
    let fast_vs_naive = v["versus"][1][0]["speedup"].as_f64().unwrap();
    let naive_vs_fast = v["versus"][0][1]["speedup"].as_f64().unwrap();
    assert!(fast_vs_naive > 1.5, "{}", v["versus"]);
    assert!(naive_vs_fast < 1.0, "{}", v["versus"]);
    let (lo, hi) = (
        v["versus"][1][0]["interval"][0].as_f64().unwrap(),
        v["versus"][1][0]["interval"][1].as_f64().unwrap(),
    );
    assert!(lo <= fast_vs_naive && fast_vs_naive <= hi);
    assert!(v["versus"][0][0].is_null());
    // Both used the same baseline rounds: their baseline sample counts match per workload,
    // unless a round one of them was disturbed in was dropped for it (its baseline calls go
    // with it), which a loaded machine makes likely.
    let base = |r: &serde_json::Value, w: usize| {
        r["performance"]["workloads"][w]["baseline"]["samples"]
            .as_u64()
            .unwrap()
    };
    let dropped = |r: &serde_json::Value, w: usize| {
        r["performance"]["workloads"][w]["disturbance"]["rounds_dropped"]
            .as_u64()
            .unwrap_or(0)
    };
    for w in 0..2 {
        let (a, b) = (base(&results[0], w), base(&results[1], w));
        assert!(a > 0 && b > 0);
        if dropped(&results[0], w) == 0 && dropped(&results[1], w) == 0 {
            assert_eq!(
                a, b,
                "workload {w}: no round dropped, so the same baseline calls"
            );
        } else {
            assert!(a.abs_diff(b) < a.max(b), "workload {w}: {a} vs {b}");
        }
    }
}

#[test]
fn a_candidate_failing_in_the_checks_or_during_timing_leaves_the_others_timed() {
    let _one = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let fast = root().join("tasks/starter/softmax/solutions/fast");
    let broken = tmp.path().join("broken.c");
    std::fs::write(
        &broken,
        "void softmax(const float* x, float* y, int64_t M, int64_t N) { syntax error }\n",
    )
    .unwrap();
    // Correct in the checks (a dozen calls), then a crash once timing is under way.
    let late = tmp.path().join("late_crash.c");
    let naive = std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/naive/kernel.c"))
        .unwrap()
        .replace(
            "void softmax(const float* x, float* y, int64_t M, int64_t N) {",
            "static int calls;\nvoid softmax(const float* x, float* y, int64_t M, int64_t N) {\n    if (++calls > 30) *(volatile int*)0 = 0;",
        );
    std::fs::write(&late, naive).unwrap();
    let o = ksmith(
        &store,
        &[
            "eval",
            task.to_str().unwrap(),
            broken.to_str().unwrap(),
            late.to_str().unwrap(),
            fast.to_str().unwrap(),
            "--json",
            "--min-time-ms",
            "30",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = json(&o);
    let r = v["results"].as_array().unwrap();
    assert_eq!(r[0]["status"], "COMPILE_ERROR", "{}", r[0]);
    assert_eq!(r[1]["status"], "RUNTIME_ERROR", "{}", r[1]);
    assert_eq!(r[1]["stage"], "timing", "{}", r[1]);
    assert_eq!(r[2]["status"], "PASSED", "{}", r[2]);
    assert!(r[2]["performance"]["speedup"].as_f64().unwrap() > 0.0);
    for i in 0..3 {
        for j in 0..3 {
            assert!(v["versus"][i][j].is_null(), "{}", v["versus"]);
        }
    }
}
