//! Two `ksmith eval` processes never time at the same time, on one store or on two: each
//! process's judge takes its device leases through the machine's lock files (here in a
//! private `KSMITH_LOCK_DIR`, so the test waits for no other ksmith on the machine), and
//! `KSMITH_LEASE_LOG` makes every lease append its interval (pid, work, access, wall-clock
//! start and end in ns, written while the lease is still held) to one file.

mod common;

use common::*;
use std::process::{Command, Stdio};

const WORKLOADS: &str = "[[workloads]]\naxes = { N = 200000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n\n[[workloads]]\naxes = { N = 100003 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 1.0, std = 1.0 }\n";

/// One lease from the log.
#[derive(Debug)]
struct Logged {
    pid: u32,
    work: String,
    exclusive: bool,
    start: u128,
    end: u128,
}

fn parse(log: &str) -> Vec<Logged> {
    log.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 5, "lease log line {l:?}");
            Logged {
                pid: f[0].parse().unwrap(),
                work: f[1].to_string(),
                exclusive: match f[2] {
                    "exclusive" => true,
                    "shared" => false,
                    other => panic!("access {other:?} in {l:?}"),
                },
                start: f[3].parse().unwrap(),
                end: f[4].parse().unwrap(),
            }
        })
        .collect()
}

#[test]
fn two_eval_processes_on_one_store_never_time_at_once() {
    two_processes_never_time_at_once(false);
}

/// The lock is the machine's, not the store's: processes with different stores (two users'
/// runs, a helper beside a run) keep apart too.
#[test]
fn two_eval_processes_on_two_stores_never_time_at_once() {
    two_processes_never_time_at_once(true);
}

fn two_processes_never_time_at_once(two_stores: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let store_a = fresh_store(tmp.path());
    let store_b = if two_stores {
        let other = tmp.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        fresh_store(&other)
    } else {
        store_a.clone()
    };
    assert_eq!(two_stores, store_a != store_b);
    let locks = tmp.path().join("machine-locks");
    let task = small_task("vector_add", tmp.path(), WORKLOADS);
    let log = tmp.path().join("leases.log");
    let fast = root().join("tasks/starter/vector_add/solutions/fast");
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    // References computed once first, so the two racing processes spend their time on the
    // device rather than in the reference.
    for store in [&store_a, &store_b] {
        let warm = ksmith(
            store,
            &[
                "eval",
                task.to_str().unwrap(),
                fast.to_str().unwrap(),
                "--no-timing",
            ],
        );
        assert!(warm.status.success(), "{}", text(&warm));
    }
    let spawn = |solution: &std::path::Path, store: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_ksmith"))
            .arg("--store")
            .arg(store)
            .args([
                "eval",
                task.to_str().unwrap(),
                solution.to_str().unwrap(),
                "--json",
                "--min-time-ms",
                "30",
            ])
            .env("KSMITH_LEASE_LOG", &log)
            .env("KSMITH_LOCK_DIR", &locks)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ksmith")
    };
    let (a, b) = (spawn(&fast, &store_a), spawn(&naive, &store_b));
    let pids = [a.id(), b.id()];
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let v = json(&o);
        assert_eq!(v["status"], "PASSED", "{v}");
        assert!(v["performance"]["speedup"].as_f64().unwrap() > 0.0, "{v}");
        let wait = v["time_split"]["device_wait_s"].as_f64().unwrap();
        assert!(wait >= 0.0);
        eprintln!(
            "waited {wait:.3} s for the device, {:.1} s in all",
            v["elapsed_s"]
        );
    }
    let leases = parse(&std::fs::read_to_string(&log).unwrap());
    // The leases were the machine directory's, not the stores'.
    assert!(locks.join("device-cpu.lock").exists());
    assert!(!store_a.join("locks/device-cpu.lock").exists());
    for pid in pids {
        let mine: Vec<&Logged> = leases.iter().filter(|l| l.pid == pid).collect();
        assert!(
            mine.iter().any(|l| l.work == "timing" && l.exclusive),
            "process {pid} timed under no exclusive lease: {leases:?}"
        );
        // Starting the trusted side, building and checking share the device: one lease, named
        // after the first work it was taken for (the trusted side's start).
        assert!(
            mine.iter().any(|l| l.work == "reference" && !l.exclusive),
            "process {pid} shared the device under no lease: {leases:?}"
        );
    }
    assert!(leases
        .iter()
        .all(|l| pids.contains(&l.pid) && l.start <= l.end));
    // Nothing of one process overlaps what the other held alone.
    for x in leases.iter().filter(|l| l.exclusive) {
        for y in leases.iter().filter(|l| l.pid != x.pid) {
            assert!(x.end <= y.start || y.end <= x.start, "{x:?} overlaps {y:?}");
        }
    }
}
