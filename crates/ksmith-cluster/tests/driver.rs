//! The Ray driver (`harness/ksmith_harness/cluster_driver.py`) on a real local Ray cluster,
//! spoken to over protocol `ksmith-cluster/2` exactly as ksmith spawns it. The worker side is
//! a fake `ksmith` written here. Needs Ray: `KSMITH_TEST_RAY_PYTHON`, or the managed Python
//! environment with `harness/requirements-ray.txt` installed into it (a failure says why).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ksmith_cluster::local::{session_members, LocalCluster};
use serde_json::{json, Value};

const FINGERPRINT: &str = "fp-test";
const VERSION: &str = "9.9.9-test";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python that has Ray: `KSMITH_TEST_RAY_PYTHON`, else the managed environment with the
/// pinned Ray installed into it, as `--cluster` does (shared with the CLI's cluster test).
fn ray_python() -> PathBuf {
    if let Some(p) = std::env::var_os("KSMITH_TEST_RAY_PYTHON") {
        return PathBuf::from(p);
    }
    let env = ksmith_harness::PythonEnv::resolve(None, &|m| eprintln!("{m}"))
        .unwrap_or_else(|e| panic!("the managed Python environment: {e}"));
    env.ensure_module("ray", ksmith_cluster::client::RAY_REQUIREMENTS, &|m| eprintln!("{m}"))
        .unwrap_or_else(|e| {
            panic!("cannot install Ray for this test (set KSMITH_TEST_RAY_PYTHON to a Python with ray==2.60.0): {e}")
        });
    env.python
}

/// A fake `ksmith`: identify tells its node's session (to map devices to nodes); judge echoes
/// the request's `tag`, sleeps `sleep_s` (only the first time when `once` names a flag file),
/// and fails like a worker with a problem report when `fail` is set.
fn fake_ksmith(dir: &Path, python: &Path) -> PathBuf {
    let path = dir.join("ksmith");
    let script = format!(
        r#"#!{python}
import json, os, sys, time
args = sys.argv[1:]
store = args[args.index("--store") + 1] if "--store" in args else None
cmd = [a for i, a in enumerate(args) if a != "--store" and (i == 0 or args[i - 1] != "--store")]
if cmd == ["worker", "identify"]:
    print(json.dumps({{"protocol": 2, "ksmith_version": "{VERSION}", "environment": {{"fingerprint": "{FINGERPRINT}"}}, "hardware": {{"sid": os.getsid(0)}}}}))
elif cmd == ["worker", "judge"] and store:
    # One response line per request line, as the real worker serves them.
    for line in sys.stdin:
        req = json.loads(line)
        start = time.time()
        once = req.get("once")
        if once is None or not os.path.exists(once):
            if once is not None:
                open(once, "w").close()
            time.sleep(req.get("sleep_s", 0))
        if req.get("kill_actor"):
            os.kill(os.getppid(), 9)
            time.sleep(30)
        if req.get("fail"):
            print("problem report: " + req["fail"], file=sys.stderr)
            sys.exit(2)
        print(json.dumps({{"protocol": 2, "ok": True, "results": [], "comparison": None, "echo": req.get("tag"), "store": store, "start": start, "end": time.time(), "pid": os.getpid()}}), flush=True)
else:
    sys.exit(64)
"#,
        python = python.display()
    );
    std::fs::write(&path, script).expect("write the fake ksmith");
    let mut perm = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).expect("chmod");
    path
}

/// The driver process, its stdin, and its protocol lines (anything not JSON fails the test).
struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Result<Value, String>>,
    seen: Vec<Value>,
    unclaimed: Vec<Value>,
}

impl Driver {
    fn spawn(python: &Path, wait_s: u32) -> Driver {
        let mut child = Command::new(python)
            .args(["-m", "ksmith_harness.cluster_driver"])
            .env("PYTHONPATH", repo().join("harness"))
            .env("KSMITH_CLUSTER_WAIT_S", wait_s.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the driver");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v = serde_json::from_str::<Value>(&line).map_err(|_| line);
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Driver {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
            unclaimed: Vec::new(),
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write to the driver");
        stdin.flush().expect("flush");
    }

    /// The first line not taken yet that matches `pred` (replies come in any order); every
    /// line read is kept in `seen`.
    fn expect(&mut self, what: &str, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.unclaimed.iter().position(&pred) {
            return self.unclaimed.remove(i);
        }
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(Ok(v)) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                    self.unclaimed.push(v);
                }
                Ok(Err(line)) => panic!("the driver wrote a non-protocol line on stdout: {line}"),
                Err(_) => panic!(
                    "no {what} from the driver within {secs} s; lines so far: {:#?}",
                    self.seen
                ),
            }
        }
    }

    fn hello(&mut self, ksmith: &Path, address: &str) -> Vec<Value> {
        self.send(json!({"op": "hello", "protocol": 2, "address": address,
            "ksmith_bin": ksmith, "ksmith_version": VERSION}));
        let h = self.expect("hello", 120, |v| v["op"] == "hello");
        assert_eq!(h["protocol"], 2);
        assert_eq!(h["ray_version"], "2.60.0");
        h["devices"].as_array().expect("devices").clone()
    }

    fn status(&mut self) -> Vec<Value> {
        self.send(json!({"op": "status"}));
        let s = self.expect("status", 10, |v| v["op"] == "status");
        s["devices"].as_array().expect("devices").clone()
    }

    fn wait_exit(&mut self, secs: u64) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return st.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "the driver did not exit within {secs} s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

fn rss_kib(sessions: &[i32]) -> u64 {
    sessions
        .iter()
        .flat_map(|&s| session_members(s))
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|st| {
            st.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

/// User + system clock ticks used so far by the live processes of these sessions.
fn cpu_ticks(sessions: &[i32]) -> u64 {
    sessions
        .iter()
        .flat_map(|&s| session_members(s))
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|st| {
            let rest = st.rsplit_once(')')?.1.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            // After ")": state is field 0, utime 11, stime 12.
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .sum()
}

fn judge(id: u64, label: &str, request: Value) -> Value {
    json!({"op": "judge", "id": id, "fingerprint": FINGERPRINT, "label": label, "request": request})
}

/// Clusters of these tests run one at a time (two cores; timings are asserted).
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// A cluster that is dropped (a test that panics) leaves no process of any node behind.
#[test]
fn a_dropped_cluster_leaves_nothing_running() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let python = ray_python();
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = LocalCluster::start(&python.with_file_name("ray"), 1, tmp.path())
        .expect("start the cluster");
    let sessions = cluster.sessions();
    assert_eq!(sessions.len(), 2);
    assert!(sessions.iter().all(|&s| session_members(s).len() > 1));
    drop(cluster);
    for s in sessions {
        assert!(
            session_members(s).is_empty(),
            "session {s} still has processes"
        );
    }
}

/// A request whose devices keep dying is rescheduled three times, then given up
/// (`rescheduled_too_often`) with the four devices it killed in `attempts`.
#[test]
fn a_request_is_rescheduled_at_most_three_times() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let python = ray_python();
    let tmp = tempfile::tempdir().expect("tempdir");
    let ksmith = fake_ksmith(tmp.path(), &python);
    let cluster = LocalCluster::start(&python.with_file_name("ray"), 5, &tmp.path().join("c"))
        .expect("start the cluster");
    let mut d = Driver::spawn(&python, 30);
    assert_eq!(d.hello(&ksmith, &cluster.address()).len(), 5);
    d.send(judge(1, "deadly", json!({"kill_actor": true})));
    let f = d.expect("failed 1", 120, |v| v["id"] == 1);
    assert_eq!(f["op"], "failed", "{f}");
    assert_eq!(f["error"], "rescheduled_too_often", "{f}");
    let attempts = f["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 4, "{f}");
    let mut killed: Vec<&str> = attempts
        .iter()
        .filter_map(|a| a["device"].as_str())
        .collect();
    killed.sort();
    killed.dedup();
    assert_eq!(killed.len(), 4, "each attempt on another device: {f}");
    let devices = d.status();
    assert_eq!(
        devices.iter().filter(|dev| dev["state"] == "dead").count(),
        4
    );
    assert_eq!(
        devices.iter().filter(|dev| dev["state"] == "idle").count(),
        1
    );
    d.stdin = None;
    assert_eq!(d.wait_exit(30), 0);
    cluster.stop().expect("stop the cluster");
}

/// A hello naming an address where nothing listens: no reply, exit 2, quickly (Ray itself
/// would retry for minutes).
#[test]
fn an_unreachable_cluster_ends_the_driver_with_exit_2() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let python = ray_python();
    let tmp = tempfile::tempdir().expect("tempdir");
    let ksmith = fake_ksmith(tmp.path(), &python);
    let mut d = Driver::spawn(&python, 4);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    d.send(
        json!({"op": "hello", "protocol": 2, "address": format!("127.0.0.1:{port}"),
        "ksmith_bin": ksmith, "ksmith_version": VERSION}),
    );
    assert_eq!(d.wait_exit(30), 2);
    // stdout closes with no line on it.
    let next = d.lines.recv_timeout(Duration::from_secs(10));
    assert!(
        matches!(next, Err(RecvTimeoutError::Disconnected)),
        "no reply expected: {next:?}"
    );
}

/// A `ray` that cannot run is named in the error.
#[test]
fn a_missing_ray_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ray = tmp.path().join("no-such-ray");
    let err = LocalCluster::start(&ray, 1, &tmp.path().join("c")).expect_err("no ray");
    let msg = err.to_string();
    assert!(msg.contains("no-such-ray") && msg.contains("head"), "{msg}");
}

/// One cluster, checked phase by phase: a driver that ends with its input; devices and
/// identities; parallel judges and `status`; a worker's problem report; a node killed while
/// judging; the last node killed; the head killed.
#[test]
fn the_driver_on_a_real_local_cluster() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let python = ray_python();
    let ray_bin = python.with_file_name("ray");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ksmith = fake_ksmith(tmp.path(), &python);
    let t = Instant::now();
    let mut cluster =
        LocalCluster::start(&ray_bin, 2, &tmp.path().join("cluster")).expect("start the cluster");
    let sessions = cluster.sessions();
    eprintln!(
        "cluster of a head and 2 workers up in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // The idle cost, measured after the start's own work has settled.
    std::thread::sleep(Duration::from_secs(2));
    let ticks = cpu_ticks(&sessions);
    std::thread::sleep(Duration::from_secs(4));
    let per_s = (cpu_ticks(&sessions) - ticks) as f64 / 4.0;
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    eprintln!(
        "idle cluster: {} MiB resident, {:.0}% of one core",
        rss_kib(&sessions) / 1024,
        100.0 * per_s / hz
    );

    // A driver that reads end of input releases its actors and exits 0; the next driver's
    // actors (which need the same `ksmith_cpu` slots) can then be placed.
    let mut first = Driver::spawn(&python, 4);
    assert_eq!(first.hello(&ksmith, &cluster.address()).len(), 2);
    first.stdin = None;
    assert_eq!(first.wait_exit(30), 0, "end of stdin must exit 0");

    let mut d = Driver::spawn(&python, 4);
    let t = Instant::now();
    let devices = d.hello(&ksmith, &cluster.address());
    eprintln!("hello answered in {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(devices.len(), 2, "{devices:#?}");
    for dev in &devices {
        assert_eq!(dev["kind"], "cpu");
        assert_eq!(dev["state"], "idle", "{dev:#}");
        assert_eq!(dev["identity"]["environment"]["fingerprint"], FINGERPRINT);
        assert_eq!(dev["identity"]["ksmith_version"], VERSION);
        assert_eq!(dev["judged"], 0);
    }
    // Each device's `ksmith` ran on its own worker node.
    let sid_of = |dev: &Value| dev["identity"]["hardware"]["sid"].as_i64().expect("sid") as i32;
    let mut node_sids: Vec<i32> = devices.iter().map(sid_of).collect();
    node_sids.sort();
    let mut worker_sids = sessions[1..].to_vec();
    worker_sids.sort();
    assert_eq!(node_sids, worker_sids);

    // Two judges at once, on two devices; `status` while they run shows what each does.
    d.send(judge(1, "one", json!({"tag": "a", "sleep_s": 3})));
    d.send(judge(2, "two", json!({"tag": "b", "sleep_s": 3})));
    std::thread::sleep(Duration::from_millis(1000));
    let busy = d.status();
    let mut doing: Vec<String> = busy
        .iter()
        .map(|dev| {
            assert_eq!(dev["state"], "busy", "{dev:#}");
            dev["doing"]["since"]
                .as_f64()
                .expect("since is unix seconds");
            dev["doing"]["label"].as_str().expect("label").to_string()
        })
        .collect();
    doing.sort();
    assert_eq!(doing, ["one", "two"]);
    let r1 = d.expect("result 1", 30, |v| v["op"] == "result" && v["id"] == 1);
    let r2 = d.expect("result 2", 30, |v| v["op"] == "result" && v["id"] == 2);
    assert_eq!(r1["response"]["echo"], "a");
    assert_eq!(r2["response"]["echo"], "b");
    assert_eq!(r1["attempts"], json!([]));
    assert_ne!(r1["device"], r2["device"]);
    let (s1, e1) = (
        r1["response"]["start"].as_f64().unwrap(),
        r1["response"]["end"].as_f64().unwrap(),
    );
    let (s2, e2) = (
        r2["response"]["start"].as_f64().unwrap(),
        r2["response"]["end"].as_f64().unwrap(),
    );
    assert!(s1 < e2 && s2 < e1, "the judges did not overlap: {r1} {r2}");
    // The device slot's store of this host and user (shared by the nodes of one host).
    let store = r1["response"]["store"].as_str().unwrap();
    let slot = r1["device"].as_str().unwrap().rsplit('-').next().unwrap();
    let uid = unsafe { libc::getuid() };
    assert!(
        store.ends_with(&format!("ksmith-worker-{uid}/{slot}")),
        "{store}"
    );
    let idle = d.status();
    assert!(
        idle.iter()
            .all(|dev| dev["state"] == "idle" && dev["doing"].is_null() && dev["judged"] == 1),
        "{idle:#?}"
    );

    // A worker that exits non-zero: its problem report comes back as bad_request.
    d.send(judge(3, "bad", json!({"fail": "the task's hash differs"})));
    let f = d.expect("failed 3", 30, |v| v["id"] == 3);
    assert_eq!(f["op"], "failed");
    assert_eq!(f["error"], "bad_request");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("problem report: the task's hash differs"),
        "{f}"
    );
    let still = d.status();
    assert!(
        still.iter().all(|dev| dev["state"] == "idle"),
        "a problem report is not a dead device: {still:#?}"
    );

    // Kill the node that judges a long request: it comes back from the other device.
    let flag = tmp.path().join("long-once");
    d.send(judge(
        4,
        "long",
        json!({"tag": "long", "sleep_s": 60, "once": flag}),
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the long judge never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let victim = d
        .status()
        .into_iter()
        .find(|dev| dev["doing"]["id"] == 4)
        .expect("a device is doing the long judge");
    let victim_idx = worker_sids_index(&sessions, sid_of(&victim));
    let killed_at = now();
    cluster
        .kill_worker(victim_idx)
        .expect("kill the worker node");
    assert!(
        session_members(sessions[1 + victim_idx]).is_empty(),
        "the killed node left processes"
    );
    let lost = d.expect("device_lost", 60, |v| {
        v["op"] == "event" && v["kind"] == "device_lost"
    });
    assert_eq!(lost["device"], victim["id"]);
    let r4 = d.expect("result 4", 60, |v| v["id"] == 4);
    assert_eq!(r4["op"], "result", "{r4}");
    assert_eq!(r4["response"]["echo"], "long");
    assert_ne!(r4["device"], victim["id"]);
    let attempts = r4["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{r4}");
    assert_eq!(attempts[0]["device"], victim["id"]);
    let resched = r4["response"]["start"].as_f64().unwrap() - killed_at;
    eprintln!("kill of a node to its request restarting elsewhere: {resched:.2} s");
    let after = d.status();
    let dead = after
        .iter()
        .find(|dev| dev["id"] == victim["id"])
        .expect("the dead device is listed");
    assert_eq!(dead["state"], "dead");

    // The last worker gone: a request waits KSMITH_CLUSTER_WAIT_S (4 s) for a device, then no_device.
    cluster
        .kill_worker(1 - victim_idx)
        .expect("kill the last worker");
    let t = Instant::now();
    d.send(judge(5, "orphan", json!({"tag": "x"})));
    let f5 = d.expect("failed 5", 60, |v| v["id"] == 5);
    let waited = t.elapsed().as_secs_f64();
    assert_eq!(f5["op"], "failed", "{f5}");
    assert_eq!(f5["error"], "no_device", "{f5}");
    assert!(
        waited >= 3.5,
        "answered no_device after {waited:.1} s, before the wait"
    );
    eprintln!("no_device after {waited:.1} s (wait 4 s)");

    // A node that joins is found, identified and used (the driver polls the node table). The
    // request goes once the device is announced: a new node took more than the 4 s a request
    // waits to start on a loaded 2-core machine (the wait itself is tested just above).
    let idx = cluster.add_worker().expect("add a worker node");
    let new_sid = cluster.sessions()[1 + idx];
    let added = d.expect("device_added", 60, |v| {
        v["op"] == "event" && v["kind"] == "device_added"
    });
    d.send(judge(6, "newcomer", json!({"tag": "new"})));
    let r6 = d.expect("result 6", 30, |v| v["id"] == 6);
    assert_eq!(r6["op"], "result", "{r6}");
    assert_eq!(r6["device"], added["device"]);
    let listed = d.status();
    let new_dev = listed
        .iter()
        .find(|dev| dev["id"] == added["device"])
        .expect("the new device is listed");
    assert_eq!(
        sid_of(new_dev),
        new_sid,
        "the new device runs on the new node"
    );
    assert_eq!(
        listed.iter().filter(|dev| dev["state"] == "dead").count(),
        2,
        "{listed:#?}"
    );

    // The actor's process dies (not its node): the device is dead, the request rescheduled;
    // with no other device it ends as no_device, its attempt listed.
    let t = Instant::now();
    d.send(judge(7, "suicide", json!({"kill_actor": true})));
    let lost = d.expect("device_lost", 30, |v| {
        v["op"] == "event" && v["kind"] == "device_lost" && v["device"] == added["device"]
    });
    eprintln!(
        "an actor's death noticed after {:.2} s: {}",
        t.elapsed().as_secs_f64(),
        lost["message"]
    );
    let f7 = d.expect("failed 7", 30, |v| v["id"] == 7);
    assert_eq!(f7["error"], "no_device", "{f7}");
    assert_eq!(f7["attempts"].as_array().map(Vec::len), Some(1), "{f7}");
    assert_eq!(f7["attempts"][0]["device"], added["device"]);

    // The head gone: what is in flight fails with cluster_lost and the driver exits 3.
    d.send(judge(8, "stranded", json!({"tag": "y"})));
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    cluster.kill_head().expect("kill the head");
    let f8 = d.expect("failed 8", 30, |v| v["id"] == 8);
    assert_eq!(f8["error"], "cluster_lost", "{f8}");
    assert_eq!(d.wait_exit(30), 3);
    eprintln!(
        "cluster_lost {:.1} s after the head died",
        t.elapsed().as_secs_f64()
    );

    let all = cluster.sessions();
    assert_eq!(all.len(), 4);
    cluster.stop().expect("stop the cluster");
    for s in all {
        assert!(
            session_members(s).is_empty(),
            "session {s} still has processes"
        );
    }
}

fn worker_sids_index(sessions: &[i32], sid: i32) -> usize {
    sessions[1..]
        .iter()
        .position(|&s| s == sid)
        .expect("the device's session is one of the workers'")
}
