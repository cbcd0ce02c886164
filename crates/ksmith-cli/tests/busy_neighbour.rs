//! A neighbour busy on every core during an evaluation: the judge sees its candidate's threads
//! wait for a core, drops those rounds (and, past the redo cap, keeps them and says the machine
//! never became quiet). Nothing here asserts on timings: the neighbour guarantees run-queue
//! wait (more busy processes than cores, each call several milliseconds long), so some round is
//! disturbed whatever the machine.

mod common;

use common::*;
use std::process::{Child, Command};

/// One workload whose calls take milliseconds, so a preempted thread waits a whole time slice.
const WORKLOADS: &str = "[[workloads]]\naxes = { N = 4000000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n";

/// Busy loops, killed (by their own ids) when dropped.
struct Neighbour(Vec<Child>);

impl Drop for Neighbour {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn rounds_a_busy_neighbour_disturbed_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), WORKLOADS);
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    let args = [
        "eval",
        task.to_str().unwrap(),
        naive.to_str().unwrap(),
        "--json",
        "--min-time-ms",
        "100",
    ];
    // References first, without the neighbour.
    let warm = ksmith(&store, &["eval", args[1], args[2], "--no-timing"]);
    assert!(warm.status.success(), "{}", text(&warm));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let _busy = Neighbour(
        (0..2 * cores)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("busy loop")
            })
            .collect(),
    );
    let o = ksmith(&store, &args);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["status"], "PASSED", "{v}");
    let perf = &v["performance"];
    let d = &perf["workloads"][0]["disturbance"];
    let dropped = d["rounds_dropped"].as_u64().unwrap();
    let kept = d["rounds_disturbed_kept"].as_u64().unwrap();
    assert!(dropped + kept > 0, "no round seen disturbed: {d}");
    assert!(
        d["candidate_wait_share"].as_f64().unwrap() >= 0.0 && d["max_runnable"].as_u64().is_some(),
        "{d}"
    );
    // Kept disturbed rounds are said at the top level.
    assert_eq!(perf["never_quiet"].as_bool().unwrap(), kept > 0, "{perf}");
}
