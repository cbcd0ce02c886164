//! Scale-out (docs/cluster.md): the worker a cluster's device runs, on real requests; and the
//! whole path through a real local Ray cluster (a head and two worker nodes).

mod common;

use common::*;
use ksmith_cluster::protocol::{
    wire_task, Identity, WireConfig, WireSolution, WorkerErrorKind, WorkerRequest, WorkerResponse,
    PROTOCOL,
};
use ksmith_judge::remote::RemoteKind;
use ksmith_judge::{JudgeConfig, Status};
use ksmith_task::{Solution, Task};
use std::io::Write;
use std::process::{Command, Stdio};

fn request(task: &str, solutions: &[&str], job: RemoteKind) -> WorkerRequest {
    let task = Task::load(&root().join(task)).unwrap();
    let solutions = solutions
        .iter()
        .map(|s| WireSolution::from(&Solution::load(&task.dir.join(s), &task).unwrap()))
        .collect();
    let mut config = JudgeConfig::new("/nonexistent".into(), 2);
    config.min_time = std::time::Duration::from_millis(20);
    WorkerRequest {
        protocol: PROTOCOL,
        job,
        task: wire_task(&task).unwrap(),
        solutions,
        config: WireConfig::from(&config),
    }
}

/// Feeds request lines to one `ksmith worker judge` and reads one response per line.
fn worker_judge(store: &std::path::Path, lines: &[String]) -> Vec<WorkerResponse> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(store)
        .args(["worker", "judge"])
        .env("KSMITH_DEVICE_LOCK", "0")
        // A device judges where it is, whatever its environment says.
        .env("RAY_ADDRESS", "127.0.0.1:1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "worker judge exited {}", out.status);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_worker_judges_requests_and_refuses_bad_ones() {
    let store = shared_store();
    let id = ksmith_env(
        &store,
        &["worker", "identify"],
        &[("RAY_ADDRESS", "127.0.0.1:1")],
    );
    assert!(
        id.status.success(),
        "{}",
        String::from_utf8_lossy(&id.stderr)
    );
    let id: Identity = serde_json::from_slice(&id.stdout).unwrap();
    assert_eq!(id.protocol, PROTOCOL);
    assert!(!id.environment.fingerprint.is_empty());

    let good = request(
        "tasks/starter/softmax",
        &["solutions/fast"],
        RemoteKind::Evaluate { race: None },
    );
    let together = request(
        "tasks/starter/softmax",
        &["solutions/fast", "solutions/naive"],
        RemoteKind::Compare { light: true },
    );
    // Untrusted parts are checked as a solution.toml would be.
    let mut escape = good.clone();
    escape.solutions[0].sources[0].0 = "../escape.c".into();
    let mut lying = good.clone();
    lying.solutions[0].sources[0]
        .1
        .push_str("\n// changed after hashing\n");
    let mut bad_flag = good.clone();
    bad_flag.solutions[0]
        .flags
        .push("-fplugin=/tmp/x.so".into());
    let mut bad_task = good.clone();
    bad_task
        .task
        .files
        .insert("../task.toml".into(), "x".into());
    let mut cuda = request(
        "tasks/starter/softmax",
        &["solutions/cuda_fast"],
        RemoteKind::Evaluate { race: None },
    );
    cuda.config.timing = false;
    let lines: Vec<String> = [
        &good, &together, &escape, &lying, &bad_flag, &bad_task, &cuda,
    ]
    .iter()
    .map(|r| serde_json::to_string(r).unwrap())
    .chain(["{not json".to_string()])
    .collect();
    let got = worker_judge(&store, &lines);
    assert_eq!(got.len(), lines.len(), "one response per request line");

    // The evaluation: the judge's own result, with the environment the identity predicts
    // for these settings (threads 2).
    let r = &got[0];
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(r.results.len(), 1);
    assert_eq!(
        r.results[0].status,
        Status::Passed,
        "{:?}",
        r.results[0].reason
    );
    assert_eq!(r.results[0].solution_hash, good.solutions[0].content_hash);
    assert!(r.results[0].performance.is_some());
    let mut predicted = id.environment.clone();
    predicted.threads = 2;
    predicted.fingerprint = predicted.compute_fingerprint();
    assert_eq!(r.results[0].environment.fingerprint, predicted.fingerprint);

    // Side by side on one device: two results and the pairwise figures.
    let c = &got[1];
    assert!(c.ok, "{:?}", c.error);
    let cmp = c.comparison.as_ref().expect("a comparison");
    assert_eq!(cmp.results.len(), 2);
    assert!(cmp.versus[0][1].is_some(), "fast vs naive timed together");

    for (i, what) in [(2, "sources[0]"), (3, "content hash"), (4, "flags[")] {
        let e = got[i].error.as_ref().expect("refused");
        assert!(!got[i].ok);
        assert_eq!(e.kind, WorkerErrorKind::Request, "{}", e.message);
        assert!(e.message.contains(what), "{what}: {}", e.message);
    }
    let e = got[5].error.as_ref().expect("refused");
    assert_eq!(e.kind, WorkerErrorKind::Request);
    assert!(
        e.message.contains("not a safe relative path"),
        "{}",
        e.message
    );
    let e = got[6].error.as_ref().expect("no nvcc here");
    assert_eq!(e.kind, WorkerErrorKind::Unavailable, "{}", e.message);
    assert_eq!(e.backend.as_deref(), Some("cuda"));
    assert_eq!(
        got[7].error.as_ref().unwrap().kind,
        WorkerErrorKind::Request
    );
}
