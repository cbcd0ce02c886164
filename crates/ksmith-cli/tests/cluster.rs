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

/// A request for starter solutions on `task` (a small copy of a starter task).
fn request(task: &std::path::Path, solutions: &[&str], job: RemoteKind) -> WorkerRequest {
    let task = Task::load(task).unwrap();
    let starter = root().join("tasks/starter").join(&task.name);
    let solutions = solutions
        .iter()
        .map(|s| WireSolution::from(&Solution::load(&starter.join(s), &task).unwrap()))
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
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let softmax = small_task(
        "softmax",
        tmp.path(),
        "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
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
        &softmax,
        &["solutions/fast"],
        RemoteKind::Evaluate { race: None },
    );
    let together = request(
        &softmax,
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
        &softmax,
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

/// A softmax that copies its input: wrong, unless the reference is forged to the identity.
const COPY_KERNEL: &str = "#include <stdint.h>\n#include <string.h>\nvoid softmax(const float* x, float* y, int64_t M, int64_t N) { memcpy(y, x, sizeof(float) * (size_t)(M * N)); }\n";

fn copy_solution() -> WireSolution {
    WireSolution::from(&Solution::from_parts(
        "copy".into(),
        ksmith_task::Language::C,
        "softmax".into(),
        vec![("kernel.c".into(), COPY_KERNEL.into())],
        Vec::new(),
    ))
}

#[test]
fn a_worker_computes_every_hash_itself_and_keeps_its_own_guard() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let softmax = small_task(
        "softmax",
        tmp.path(),
        "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
    let task = Task::load(&softmax).unwrap();
    let mut honest = request(
        &softmax,
        &["solutions/fast"],
        RemoteKind::Evaluate { race: None },
    );
    honest.config.timing = false;
    honest.solutions = vec![copy_solution()];
    let identity = "def reference(x):\n    return x + 0.0\n";

    // 1. A forged reference under the task's real hash: refused, nothing cached under it.
    let mut forged = honest.clone();
    forged
        .task
        .files
        .insert("reference.py".into(), identity.into());
    // 2. The same forged reference under its own, correct hash: another task; judged as such
    // (the copy passes it), cached under that other hash.
    let forged_dir = tmp.path().join("forged/softmax");
    std::fs::create_dir_all(&forged_dir).unwrap();
    std::fs::copy(softmax.join("task.toml"), forged_dir.join("task.toml")).unwrap();
    std::fs::write(forged_dir.join("reference.py"), identity).unwrap();
    let mut own_hash = forged.clone();
    own_hash.task.content_hash = Task::load(&forged_dir).unwrap().content_hash;
    assert_ne!(own_hash.task.content_hash, task.content_hash);
    // 3. The honest request afterwards: the copy is wrong.
    // 4. A path as the hash.
    let mut path_hash = honest.clone();
    path_hash.task.content_hash = format!("../../../../{}/escaped", tmp.path().display());
    // 5. The request turning the sandbox off: not a field of the protocol.
    let mut unsafe_req = serde_json::to_value(&honest).unwrap();
    unsafe_req["config"]["unsafe_no_sandbox"] = serde_json::Value::Bool(true);
    // 6. One seed (the judge times on two input sets).
    let mut one_seed = honest.clone();
    one_seed.config.seeds = vec![1];
    // 7. Held-out shapes as the finalizer makes them: accepted, hashed here the same way.
    let held = task.with_workloads(task.held_out_workloads(7)[..1].to_vec(), "held-out");
    let mut held_req = request(
        &softmax,
        &["solutions/fast"],
        RemoteKind::Evaluate { race: None },
    );
    held_req.config.timing = false;
    held_req.task.workloads = held.workloads.clone();
    held_req.task.other_workloads = Vec::new();
    held_req.task.content_hash = held.content_hash.clone();
    // 8. "Held-out" shapes with other input distributions, correctly hashed by the caller:
    // not near the task's own, refused.
    let mut other_inputs = held.workloads.clone();
    other_inputs[0].inputs[0].1 = ksmith_task::Distribution::Uniform {
        low: 0.0,
        high: 0.0,
    };
    let mut held_forged = held_req.clone();
    held_forged.task.content_hash = task
        .with_workloads(other_inputs.clone(), "held-out")
        .content_hash;
    held_forged.task.workloads = other_inputs;

    let lines: Vec<String> = vec![
        serde_json::to_string(&forged).unwrap(),
        serde_json::to_string(&own_hash).unwrap(),
        serde_json::to_string(&honest).unwrap(),
        serde_json::to_string(&path_hash).unwrap(),
        unsafe_req.to_string(),
        serde_json::to_string(&one_seed).unwrap(),
        serde_json::to_string(&held_req).unwrap(),
        serde_json::to_string(&held_forged).unwrap(),
    ];
    let got = worker_judge(&store, &lines);
    assert_eq!(got.len(), lines.len());
    let refused = |i: usize, what: &str| {
        let e = got[i]
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("request {i} was judged"));
        assert!(!got[i].ok);
        assert_eq!(e.kind, WorkerErrorKind::Request, "{i}: {}", e.message);
        assert!(e.message.contains(what), "{i}: {what}: {}", e.message);
    };
    refused(0, "content_hash");
    assert!(got[1].ok, "{:?}", got[1].error);
    assert_eq!(
        got[1].results[0].status,
        Status::Passed,
        "another task, judged as such"
    );
    assert_eq!(got[1].results[0].task_hash, own_hash.task.content_hash);
    assert!(got[2].ok, "{:?}", got[2].error);
    assert_eq!(
        got[2].results[0].status,
        Status::IncorrectNumerical,
        "the forged reference left nothing behind: {:?}",
        got[2].results[0].reason
    );
    refused(3, "not a content hash");
    assert!(!tmp.path().join("escaped").exists());
    refused(4, "unsafe_no_sandbox");
    refused(5, "config.seeds");
    assert!(got[6].ok, "{:?}", got[6].error);
    assert_eq!(got[6].results[0].status, Status::Passed);
    assert_eq!(got[6].results[0].task_hash, held.content_hash);
    refused(7, "input distributions");

    // A local evaluation on the same store: the copy is wrong here too.
    let sol = tmp.path().join("copy");
    std::fs::create_dir_all(&sol).unwrap();
    std::fs::write(sol.join("kernel.c"), COPY_KERNEL).unwrap();
    std::fs::write(
        sol.join("solution.toml"),
        "name = \"copy\"\nlanguage = \"c\"\nentry_point = \"softmax\"\nsources = [\"kernel.c\"]\n",
    )
    .unwrap();
    let out = ksmith(
        &store,
        &[
            "eval",
            &softmax.display().to_string(),
            &sol.display().to_string(),
            "--no-timing",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("INCORRECT_NUMERICAL"), "{}", text(&out));
}

/// A suite of three starter tasks with small workloads, and their `fast` C solutions (as
/// `--solutions DIR`): small shapes keep the cluster test short.
fn small_suite(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let suite = dir.join("suite");
    let sols = dir.join("sols");
    std::fs::create_dir_all(&sols).unwrap();
    let normal = "dist = \"normal\", mean = 0.0, std = 1.0";
    for (t, w) in [
        ("softmax", format!("axes = {{ M = 64, N = 1000 }}\n[workloads.inputs]\nx = {{ {normal} }}\n")),
        ("rmsnorm", format!("axes = {{ M = 64, N = 1000 }}\n[workloads.inputs]\nx = {{ {normal} }}\nw = {{ {normal} }}\n")),
        ("vector_add", format!("axes = {{ N = 100000 }}\n[workloads.inputs]\na = {{ {normal} }}\nb = {{ {normal} }}\n")),
    ] {
        small_task(t, &suite, &format!("[[workloads]]\n{w}"));
        std::os::unix::fs::symlink(
            root().join("tasks/starter").join(t).join("solutions/fast"),
            sols.join(t),
        )
        .unwrap();
    }
    (suite, sols)
}

fn db(store: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(store.join("ksmith.db")).unwrap()
}

/// `(task, status)` of a bench summary on stdout (`--json`).
fn statuses(o: &std::process::Output) -> Vec<(String, String)> {
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)));
    let mut s: Vec<(String, String)> = v["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows: {v}"))
        .iter()
        .map(|r| {
            (
                r["task"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    s.sort();
    s
}

/// Whether a candidate is being judged in the session `sid` (a node's processes): its runner
/// (`python -m ksmith_harness.runner`) lives for one evaluation, while the device's
/// `ksmith worker judge` stays between requests.
fn judging_in(sid: i32) -> bool {
    ksmith_cluster::local::session_members(sid)
        .iter()
        .any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    c.split(|b| *b == 0)
                        .any(|arg| arg == b"ksmith_harness.runner")
                })
                .unwrap_or(false)
        })
}

/// `ksmith ARGS` on `store` in the background, its output captured.
fn spawn(store: &std::path::Path, args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env("KSMITH_DEVICE_LOCK", "0")
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed().as_secs() < secs,
            "{what}: not within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every evaluation judged on a cluster device (those naming one): its time split adds up to
/// its wall time here (the device's terms, its wait for the device, the cluster's queue and
/// transfer) and its harness parts stay within its harness time. Returns them (id, result).
fn cluster_results_add_up(c: &rusqlite::Connection) -> Vec<(i64, serde_json::Value)> {
    let results: Vec<(i64, serde_json::Value)> = c
        .prepare("SELECT id, result_json FROM evaluations ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (id, j) = r.unwrap();
            (id, serde_json::from_str(&j).unwrap())
        })
        .filter(|(_, r): &(i64, serde_json::Value)| r["device"].is_string())
        .collect();
    for (_, r) in &results {
        let device = r["device"].as_str().unwrap_or_default();
        assert!(device.contains("cpu"), "no device named: {r}");
        let t = &r["time_split"];
        let f = |k: &str| t[k].as_f64().unwrap();
        let sum = f("build_s")
            + f("kernel_s")
            + f("baseline_s")
            + f("harness_s")
            + f("device_wait_s")
            + f("cluster_s");
        let elapsed = r["elapsed_s"].as_f64().unwrap();
        assert!((sum - elapsed).abs() < 0.02, "{sum} != {elapsed}: {t}");
        assert!(f("cluster_s") > 0.0, "{t}");
        let parts: f64 = t["harness"]
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(k, v)| (k != "buffer_parts").then(|| v.as_f64()).flatten())
            .sum();
        assert!(
            parts <= f("harness_s") + 0.02,
            "harness parts {parts} > harness: {t}"
        );
    }
    results
}

#[test]
fn bench_and_search_on_a_real_ray_cluster_survive_a_killed_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let t0 = std::time::Instant::now();
    let phase = |what: &str| eprintln!("[{:6.1} s] {what}", t0.elapsed().as_secs_f64());
    // The managed environment's Ray (installed on first use), as a user starts nodes with it.
    let o = ksmith(&store, &["cluster", "python"]);
    assert!(o.status.success(), "{}", text(&o));
    let python = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let ray = std::path::Path::new(&python).with_file_name("ray");
    let mut cluster =
        ksmith_cluster::local::LocalCluster::start(&ray, 2, &tmp.path().join("ray")).unwrap();
    let addr = cluster.address();
    phase("cluster started");
    let on = |args: &[&str]| {
        let mut a = vec!["--cluster", addr.as_str()];
        a.extend_from_slice(args);
        ksmith(&store, &a)
    };

    // Two devices, one machine fingerprint, nothing judging.
    let o = on(&["cluster", "status", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{v}");
    assert!(
        devices
            .iter()
            .all(|d| d["state"] == "idle" && d["kind"] == "cpu"),
        "{v}"
    );
    let fp = devices[0]["identity"]["environment"]["fingerprint"].clone();
    assert!(fp.is_string() && devices[1]["identity"]["environment"]["fingerprint"] == fp);

    phase("status");
    // A bench over the cluster, two candidates at once; worker node 1 is killed while it
    // judges. Its candidate is judged again on the other device, never counted as failed.
    let (suite, sols) = small_suite(tmp.path());
    let bench = [
        "bench",
        suite.to_str().unwrap(),
        "--solutions",
        sols.to_str().unwrap(),
        "--min-time-ms",
        "20",
        "--repeat",
        "2",
        "--json",
    ];
    let mut args = vec!["--cluster", addr.as_str()];
    args.extend_from_slice(&bench);
    let child = spawn(&store, &args);
    let (worker0, worker1) = (cluster.sessions()[1], cluster.sessions()[2]);
    wait_for("worker node 1 judging", 300, || judging_in(worker1));
    std::thread::sleep(std::time::Duration::from_millis(500));
    cluster.kill_worker(1).unwrap();
    let o = child.wait_with_output().unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let remote = statuses(&o);
    assert_eq!(remote.len(), 6, "{all}");
    assert!(
        remote.iter().all(|(_, s)| s == "PASSED"),
        "{remote:?}\n{all}"
    );
    assert!(
        all.contains("rescheduled") && all.contains("device lost"),
        "the lost device and the rescheduled candidate are said:\n{all}"
    );
    // Judged exactly once each: one stored evaluation per item, with the workers' machine.
    let c = db(&store);
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM evaluations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 6, "{all}");
    let fps: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM evaluations WHERE env_fingerprint = ?1",
            [fp.as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(fps, 6, "stored with the devices' machine fingerprint");
    // Each names the device that judged it, and its time split adds up to its wall time here:
    // the device's terms, its wait for the device, and the cluster's queue and transfer.
    let results = cluster_results_add_up(&c);
    assert_eq!(results.len(), 6);
    let shown = ksmith(&store, &["show", &results[0].0.to_string()]);
    let shown = stdout(&shown);
    assert!(
        shown.contains("judged on: cluster device") && shown.contains("cluster queue and transfer"),
        "{shown}"
    );

    phase("bench with a killed worker");
    // The same statuses as a local run.
    let mut local = vec!["--cluster", "local"];
    local.extend_from_slice(&bench);
    local.push("--no-timing");
    let o = ksmith(&store, &local);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(statuses(&o), remote, "local and cluster statuses agree");

    phase("local bench");
    // Another ksmith process sees the device held by a running eval and what it judges: a
    // candidate that spins about a second per call keeps it busy for many seconds.
    let slow = tmp.path().join("slow.c");
    std::fs::write(
        &slow,
        std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/naive/kernel.c"))
            .unwrap()
            .replacen(
                "int64_t N) {",
                "int64_t N) { for (volatile long spin = 0; spin < 2500000000L; spin++) {} ",
                1,
            ),
    )
    .unwrap();
    let softmax = suite.join("softmax");
    let eval = std::process::Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(&store)
        .args(["--cluster", &addr, "eval"])
        .arg(&softmax)
        .arg(&slow)
        .args(["--no-timing", "--json"])
        .env("KSMITH_DEVICE_LOCK", "0")
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the slow candidate judged", 300, || judging_in(worker0));
    let o = on(&["cluster", "status", "--json"]);
    let status = text(&o);
    let o2 = eval.wait_with_output().unwrap();
    assert!(o.status.success(), "{status}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "one worker node is left: {v}");
    assert_eq!(devices[0]["state"], "elsewhere", "{v}");
    assert!(
        devices[0]["doing"]["label"]
            .as_str()
            .is_some_and(|l| l.starts_with("softmax/")),
        "what it judges is visible: {v}"
    );
    assert!(o2.status.success(), "{}", text(&o2));
    phase("status while another process judges");
    // A small search through the one device left, with a scripted model.
    let start = root().join("tasks/starter/softmax/solutions/naive");
    let kernel = std::fs::read_to_string(start.join("kernel.c")).unwrap();
    let script = tmp.path().join("script.toml");
    std::fs::write(
        &script,
        format!("[[reply]]\nrole = \"planner\"\ntext = '''\n## Title\nSame kernel\n## Strategy\nKeep it.\n## Expected effect\n1.0x\n## Risks\nNone.\n'''\n\n[[reply]]\nrole = \"implementer\"\ntext = '''\nkernel.c\n```c\n{kernel}\nint ks_cluster_variant(void) {{ return 1; }}\n```\n'''\n"),
    )
    .unwrap();
    let task = small_task("softmax", tmp.path(), "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n");
    let model = format!("scripted:{}", script.display());
    let out = tmp.path().join("winner");
    let o = on(&[
        "optimize",
        task.to_str().unwrap(),
        "--strategy",
        "loop",
        "--model",
        &model,
        "--from",
        start.to_str().unwrap(),
        "--max-nodes",
        "2",
        "--min-time-ms",
        "20",
        "--tune-budget",
        "0",
        "--no-profile",
        "--out",
        out.to_str().unwrap(),
    ]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let states: Vec<String> = {
        let mut st = c
            .prepare("SELECT state FROM search_nodes ORDER BY id")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(states, ["done", "done"], "{all}");
    assert!(
        out.join("solution.toml").exists() || out.join("kernel.c").exists(),
        "{all}"
    );

    // The search's evaluations, finalists timed side by side on the device included.
    let judged_there = cluster_results_add_up(&c);
    assert!(
        judged_there.len() > 6,
        "{} judged on the cluster",
        judged_there.len()
    );
    phase("search");
    // The cluster disappears mid-bench: the run stops cleanly (not a candidate's failure)
    // and resumes on this machine.
    let mut args = vec!["--cluster", addr.as_str()];
    args.extend_from_slice(&bench);
    args.push("--fresh");
    let before: i64 = c
        .query_row("SELECT COUNT(*) FROM evaluations", [], |r| r.get(0))
        .unwrap();
    let child = spawn(&store, &args);
    wait_for("worker node 0 judging", 300, || judging_in(worker0));
    cluster.kill_head().unwrap();
    let o = child.wait_with_output().unwrap();
    let all = text(&o);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the environment failed, not a candidate:\n{all}"
    );
    assert!(all.contains("cluster"), "{all}");
    let failed: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM evaluations WHERE id > ?1 AND status != 'PASSED'",
            [before],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(failed, 0, "nothing was recorded as a candidate's failure");
    phase("bench with the head killed");
    let mut resume = vec!["--cluster", "local"];
    resume.extend_from_slice(&bench);
    let o = ksmith(&store, &resume);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(all.contains("resuming bench run"), "{all}");
    assert_eq!(statuses(&o), remote, "{all}");
    phase("resumed locally");
    cluster.stop().unwrap();
}

#[test]
fn bad_cluster_settings_and_an_unreachable_cluster_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let eval = [
        "eval",
        "tasks/starter/softmax",
        "tasks/starter/softmax/solutions/fast",
    ];
    let with = |pre: &[&str], env: &[(&str, &str)]| {
        let mut a: Vec<&str> = pre.to_vec();
        a.extend_from_slice(&eval);
        ksmith_env(&store, &a, env)
    };
    // A malformed address: exit 2 naming where it came from, before anything is installed.
    let o = with(&["--cluster", "ray://"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cluster address `ray://`") && text(&o).contains("--cluster"));
    let o = with(&[], &[("RAY_ADDRESS", "host:99999")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("RAY_ADDRESS"), "{}", text(&o));
    // The config file's [cluster] section: checked like the rest of the file.
    for (toml, says) in [
        ("[cluster]\naddress = \"nowhere\"\n", "the config file"),
        ("[cluster]\naddres = \"127.0.0.1:6379\"\n", "addres"),
        ("[cluster]\naddress = 5\n", "cluster.address"),
    ] {
        let cfg = tmp.path().join("ksmith.toml");
        std::fs::write(&cfg, toml).unwrap();
        let o = with(&[], &[("KSMITH_CONFIG", cfg.to_str().unwrap())]);
        assert_eq!(o.status.code(), Some(2), "{toml}: {}", text(&o));
        assert!(text(&o).contains(says), "{toml}: {}", text(&o));
    }
    // `local` judges here whatever the environment says.
    let mut local = vec!["--cluster", "local"];
    local.extend_from_slice(&eval);
    local.push("--no-timing");
    let o = ksmith_env(&store, &local, &[("RAY_ADDRESS", "127.0.0.1:1")]);
    assert!(o.status.success(), "{}", text(&o));
    // Nothing listening: the environment's failure (exit 3), said, not a candidate's.
    let o = with(&["--cluster", "127.0.0.1:1"], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("nothing answers at 127.0.0.1:1"),
        "{}",
        text(&o)
    );
    // `cluster status` needs a cluster.
    let o = ksmith_env(&store, &["cluster", "status"], &[("RAY_ADDRESS", "")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no cluster"), "{}", text(&o));
}
