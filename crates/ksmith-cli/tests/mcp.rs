//! `ksmith mcp` through the real binary: a scripted JSON-RPC session over stdio (initialize,
//! list the tools, judge a starter candidate given as text, clear errors for malformed
//! requests), a short scripted-provider search started and watched through the tools with its
//! progress notifications, and the streamable-HTTP transport reached once.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const SMALL_VECTOR_ADD: &str = r#"
[[workloads]]
axes = { N = 65537 }
inputs = { a = { dist = "normal", mean = 0.0, std = 1.0 }, b = { dist = "uniform", low = -2.0, high = 2.0 } }
"#;

const SMALL_SOFTMAX: &str = "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n";

/// Every tool the server must offer.
const TOOLS: [&str; 12] = [
    "validate",
    "evaluate",
    "compare",
    "tune",
    "optimize_start",
    "run_resume",
    "run_status",
    "run_stop",
    "runs",
    "evals",
    "show",
    "report",
];

/// A client of `ksmith mcp` over stdio, speaking JSON-RPC lines as an MCP client does.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Session {
    /// Starts the server on `store` and initializes the session.
    fn start(store: &Path) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
            .arg("--store")
            .arg(store)
            .arg("mcp")
            .env("KSMITH_DEVICE_LOCK", "0")
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ksmith mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Session {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        let (init, _) = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "ksmith-test", "version": "0"}}),
            Duration::from_secs(30),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "ksmith", "{init}");
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and waits for its answer; returns it with the notifications that came
    /// before it. Every line on stdout must be a JSON-RPC message.
    fn request(&mut self, method: &str, params: Value, limit: Duration) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let start = Instant::now();
        let mut notes = Vec::new();
        loop {
            let left = limit.saturating_sub(start.elapsed());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {limit:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server left during {method}"),
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries a non-JSON line ({e}): {line}"));
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
            if v["id"] == json!(id) {
                return (v, notes);
            }
            notes.push(v);
        }
    }

    /// Calls a tool with a progress token; returns the answer and its progress messages.
    fn call(&mut self, tool: &str, args: Value, limit: Duration) -> (Value, Vec<String>) {
        let token = format!("p{}", self.next_id);
        let (v, notes) = self.request(
            "tools/call",
            json!({"name": tool, "arguments": args, "_meta": {"progressToken": token}}),
            limit,
        );
        let progress = notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .filter(|n| n["params"]["progressToken"] == json!(token))
            .map(|n| n["params"]["message"].as_str().unwrap_or("").to_string())
            .collect();
        (v, progress)
    }

    /// A tool's structured result, which must not be an error.
    fn ok(v: &Value) -> &Value {
        assert!(v["error"].is_null(), "an MCP error: {v}");
        assert_eq!(v["result"]["isError"], false, "a tool error: {v}");
        &v["result"]["structuredContent"]
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closing stdin ends the session; the server exits by itself.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MCP error's code and the field it names.
fn field_error(v: &Value) -> (i64, String) {
    let e = &v["error"];
    assert!(e.is_object(), "expected an MCP error: {v}");
    (
        e["code"].as_i64().unwrap(),
        e["data"]["field"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn a_coding_agent_lists_the_tools_judges_a_starter_kernel_and_gets_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let mut s = Session::start(&store);

    let (list, _) = s.request("tools/list", json!({}), Duration::from_secs(10));
    let tools = list["result"]["tools"].as_array().expect("tools");
    for name in TOOLS {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}: {list}"));
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 20),
            "{name} is described"
        );
        assert_eq!(t["inputSchema"]["type"], "object", "{name}: {t}");
    }
    let eval = tools.iter().find(|t| t["name"] == "evaluate").unwrap();
    assert!(
        eval["inputSchema"]["properties"]["source"]["description"].is_string(),
        "fields are described: {eval}"
    );

    // A starter kernel given as text, judged in full (timing included), with its stages as
    // progress notifications.
    let source =
        std::fs::read_to_string(root().join("tasks/starter/vector_add/solutions/naive/kernel.c"))
            .unwrap();
    let (v, progress) = s.call(
        "evaluate",
        json!({"task": task, "source": source, "judge": {"min_time_ms": 20}}),
        Duration::from_secs(300),
    );
    let r = Session::ok(&v);
    assert_eq!(r["status"], "PASSED", "{r}");
    assert!(r["id"].as_i64().is_some(), "stored with an id: {r}");
    assert_eq!(r["reused"], false);
    assert!(r["performance"]["speedup"].as_f64().is_some(), "{r}");
    assert!(
        progress.iter().any(|m| m.contains("build"))
            && progress.iter().any(|m| m.contains("full check")),
        "the judge's stages arrive as progress: {progress:?}"
    );
    // The same document as `ksmith show ID --json` through `show`, and listed by `evals`.
    let id = r["id"].as_i64().unwrap();
    let (v, _) = s.call(
        "show",
        json!({"id": id.to_string()}),
        Duration::from_secs(10),
    );
    assert_eq!(Session::ok(&v)["status"], "PASSED");
    let (v, _) = s.call(
        "evals",
        json!({"status": "passed"}),
        Duration::from_secs(10),
    );
    assert!(
        Session::ok(&v)["evals"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["id"] == id)),
        "{v}"
    );

    // Validated, and two candidates compared side by side as `eval TASK A B --json` does.
    let (v, _) = s.call("validate", json!({"path": task}), Duration::from_secs(120));
    let r = Session::ok(&v);
    assert_eq!(
        (r["valid"].as_u64(), r["total"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    let sols = root().join("tasks/starter/vector_add/solutions");
    let (v, progress) = s.call(
        "compare",
        json!({"task": task, "candidates": [{"path": sols.join("naive")}, {"path": sols.join("fast")}],
               "judge": {"min_time_ms": 20}}),
        Duration::from_secs(300),
    );
    let r = Session::ok(&v);
    assert_eq!(r["results"].as_array().map(Vec::len), Some(2), "{r}");
    assert!(
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["status"] == "PASSED" && x["id"].is_i64()),
        "{r}"
    );
    assert!(
        r["decisions"].as_array().is_some_and(|d| d.len() == 1),
        "{r}"
    );
    assert!(r["winner"].is_u64(), "{r}");
    assert!(!progress.is_empty(), "stages arrive as progress");

    // A candidate that does not compile is a result, not an error.
    let (v, _) = s.call(
        "evaluate",
        json!({"task": task, "source": "void vector_add(", "judge": {"no_timing": true}}),
        Duration::from_secs(120),
    );
    assert_eq!(Session::ok(&v)["status"], "COMPILE_ERROR", "{v}");

    // Hostile candidates sent as text are judged like any other: the one that shells out is
    // refused by policy; the one that paints a fake pass on stdout is caught wrong, and its
    // printing does not reach the protocol (every line read is checked to be JSON-RPC).
    for (file, status) in [
        ("forbidden_call.c", "POLICY_REJECTED"),
        ("ansi_fake_pass.c", "INCORRECT_NUMERICAL"),
    ] {
        let source = std::fs::read_to_string(
            root()
                .join("crates/ksmith-cli/tests/adversarial")
                .join(file),
        )
        .unwrap();
        let (v, _) = s.call(
            "evaluate",
            json!({"task": task, "source": source, "file_name": file, "judge": {"no_timing": true}}),
            Duration::from_secs(120),
        );
        let r = Session::ok(&v);
        assert_eq!(r["status"], status, "{file}: {r}");
    }

    // Malformed requests: each an invalid-params error naming the field.
    let cases = [
        (
            json!({"task": task, "path": "x", "judge": {"seeds": "three"}}),
            "judge.seeds",
        ),
        (
            json!({"task": task, "path": "x", "judge": {"seeds": 1}}),
            "judge.seeds",
        ),
        (json!({"path": "x"}), "task"),
        (json!({"task": task, "path": "x", "speed": 2}), "speed"),
        (json!({"task": task}), "path"),
        (
            json!({"task": task, "source": "x", "file_name": "../../k.c"}),
            "file_name",
        ),
        (json!({"task": "/no/such/task", "path": "x"}), "task"),
        (json!({"task": task, "path": "/no/such/kernel.c"}), "path"),
    ];
    for (args, field) in cases {
        let (v, _) = s.call("evaluate", args.clone(), Duration::from_secs(30));
        assert_eq!(
            field_error(&v),
            (-32602, field.to_string()),
            "{args} -> {v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "the message names {field}: {v}"
        );
    }
    let (v, _) = s.call(
        "compare",
        json!({"task": task, "candidates": [{"path": "a"}]}),
        Duration::from_secs(10),
    );
    assert_eq!(field_error(&v).1, "candidates");
    let (v, _) = s.call(
        "run_status",
        json!({"run": "../../x"}),
        Duration::from_secs(10),
    );
    assert_eq!(field_error(&v).1, "run");
    // JSON that is no JSON-RPC message is an invalid request (a line that is not JSON at all
    // gets no answer: rmcp drops it rather than risk an error storm); the session goes on.
    writeln!(s.stdin, "{{\"jsonrpc\": \"2.0\", \"speed\": 1}}").unwrap();
    writeln!(s.stdin, "this is not JSON").unwrap();
    s.stdin.flush().unwrap();
    let line = s
        .lines
        .recv_timeout(Duration::from_secs(10))
        .expect("an answer");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    // An unknown tool and an unknown method are errors too, and the session goes on.
    let (v, _) = s.call("no_such_tool", json!({}), Duration::from_secs(10));
    assert!(v["error"].is_object(), "{v}");
    let (v, _) = s.request("no/such/method", json!({}), Duration::from_secs(10));
    assert!(v["error"].is_object(), "{v}");
    let (v, _) = s.call("runs", json!({}), Duration::from_secs(10));
    assert!(Session::ok(&v)["runs"].is_array(), "{v}");
}

#[test]
fn a_scripted_search_started_over_mcp_streams_its_progress_and_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), SMALL_SOFTMAX);
    let start = root().join("tasks/starter/softmax/solutions/naive");
    let kernel = std::fs::read_to_string(start.join("kernel.c")).unwrap();
    // Node 1 and node 2 each plan and implement a variant of the start.
    let mut script = String::new();
    for v in ["a", "b"] {
        script.push_str(&format!(
            "[[reply]]\nrole = \"planner\"\ntext = '''\n## Title\nVariant {v}\n## Strategy\nKeep the kernel, add a helper.\n## Expected effect\nabout 1.0x\n## Risks\nNone.\n'''\n\n[[reply]]\nrole = \"implementer\"\ntext = '''\nkernel.c\n```c\n{kernel}\nint ks_mcp_{v}(void) {{ return 1; }}\n```\n'''\n\n"
        ));
    }
    let script_path = tmp.path().join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let mut s = Session::start(&store);

    // The run's own input errors come back as errors naming the field, not as a started run.
    for (args, field) in [
        (
            json!({"task": task, "model": "nosuch:model", "strategy": "loop"}),
            "model",
        ),
        (
            json!({"task": task, "model": "scripted:/no/such/script", "strategy": "loop"}),
            "model",
        ),
        (
            json!({"task": tmp.path(), "model": "scripted:/x", "strategy": "loop"}),
            "task",
        ),
        (
            json!({"task": task, "model": "scripted:/x", "limits": {"max_nodes": 2}}),
            "limits.max_nodes",
        ),
    ] {
        let (v, _) = s.call("optimize_start", args.clone(), Duration::from_secs(60));
        assert_eq!(
            field_error(&v),
            (-32602, field.to_string()),
            "{args} -> {v}"
        );
    }

    let (v, _) = s.call(
        "optimize_start",
        json!({"task": task, "model": format!("scripted:{}", script_path.display()),
               "strategy": "loop", "from": start, "tune_budget": 0, "profile": false, "limits": {"max_nodes": 3},
               "judge": {"min_time_ms": 20}}),
        Duration::from_secs(120),
    );
    let started = Session::ok(&v).clone();
    let run = started["run"].as_str().expect("a run id").to_string();
    assert!(run.starts_with("run-"), "{started}");
    assert!(started["process"]["pid"].as_u64().is_some(), "{started}");
    assert_eq!(
        started["stored"]["id"],
        json!(run),
        "stored at once: {started}"
    );

    // Watch it to the end: the engine's events arrive as progress notifications.
    let (v, progress) = s.call(
        "run_status",
        json!({"run": run, "wait_s": 300}),
        Duration::from_secs(330),
    );
    let done = Session::ok(&v);
    assert_eq!(done["process"]["running"], false, "{done}");
    assert_eq!(
        done["process"]["exit_code"], 0,
        "{done}\n{}",
        done["log_tail"]
    );
    assert_eq!(done["stored"]["status"], "finished", "{done}");
    for want in ["node n1 started", "node n1 finished", "stopped:"] {
        assert!(
            progress.iter().any(|m| m.contains(want)),
            "progress has `{want}`: {progress:?}"
        );
    }
    let events = done["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .filter(|e| e["event"]["event"] == "node_finished")
            .count()
            >= 3,
        "every node's end is an event: {events:?}"
    );
    assert!(done["next_event"].as_u64().unwrap() as usize >= events.len());

    // Listed, shown, reported.
    let (v, _) = s.call("runs", json!({}), Duration::from_secs(10));
    assert!(
        Session::ok(&v)["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == json!(run)),
        "{v}"
    );
    let (v, _) = s.call("show", json!({"id": run}), Duration::from_secs(10));
    assert_eq!(Session::ok(&v)["mode"], "search", "{v}");
    let html = tmp.path().join("report.html");
    let (v, _) = s.call(
        "report",
        json!({"run": run, "out": html}),
        Duration::from_secs(60),
    );
    let rep = Session::ok(&v);
    assert_eq!(rep["nodes"], 3, "{rep}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg"), "the report was written");

    // A finished run cannot be stopped from a server that did not start it... but this one
    // did: stopping an ended run is harmless and says so.
    let (v, _) = s.call("run_stop", json!({"run": run}), Duration::from_secs(30));
    assert_eq!(Session::ok(&v)["process"]["running"], false, "{v}");
}

#[test]
fn a_run_is_stopped_and_marked_resumable() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), SMALL_SOFTMAX);
    let start = root().join("tasks/starter/softmax/solutions/naive");
    // A `command:` model that takes its time, so the run is stopped mid-node.
    let sh = tmp.path().join("slow.sh");
    std::fs::write(&sh, "cat >/dev/null\nsleep 30\n").unwrap();
    let model = format!("command:sh {}", sh.display());
    let mut s = Session::start(&store);
    let (v, _) = s.call(
        "optimize_start",
        json!({"task": task, "model": model, "strategy": "loop", "from": start, "tune_budget": 0, "profile": false,
               "limits": {"max_nodes": 2}, "judge": {"min_time_ms": 20}}),
        Duration::from_secs(120),
    );
    let run = Session::ok(&v)["run"].as_str().unwrap().to_string();
    let t = Instant::now();
    let (v, _) = s.call("run_stop", json!({"run": run}), Duration::from_secs(60));
    let stopped = Session::ok(&v);
    assert!(t.elapsed() < Duration::from_secs(20), "stopped promptly");
    assert_eq!(stopped["process"]["running"], false, "{stopped}");
    assert_eq!(stopped["process"]["stopped"], true, "{stopped}");
    assert_eq!(stopped["stored"]["status"], "interrupted", "{stopped}");
    // Nothing runs it now, so it resumes.
    let (v, _) = s.call("run_resume", json!({"run": run}), Duration::from_secs(60));
    let resumed = Session::ok(&v);
    assert!(resumed["process"]["pid"].as_u64().is_some(), "{resumed}");
    let (v, _) = s.call("run_stop", json!({"run": run}), Duration::from_secs(60));
    assert_eq!(Session::ok(&v)["process"]["running"], false, "{v}");
}

#[test]
fn the_streamable_http_transport_answers_on_a_loopback_port() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(&store)
        .args(["mcp", "--http", "127.0.0.1:0"])
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the server exited");
        if let Some(rest) = line.trim().strip_prefix("ksmith mcp: listening on ") {
            break rest.to_string();
        }
    };
    // Drain stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in err.lines() {});

    let post = |body: Value, session: Option<&str>| {
        let mut req = ureq::post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s);
        }
        let mut resp = req.send(body.to_string()).expect("POST");
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        // The answer, as JSON or as the data of a server-sent event.
        let msg = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| d.starts_with('{'))
            .map(str::to_string)
            .unwrap_or(text);
        (session, msg)
    };
    let (session, init) = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "ksmith-test", "version": "0"}}}),
        None,
    );
    let init: Value = serde_json::from_str(&init).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "ksmith", "{init}");
    let session = session.expect("a session id");
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    );
    let (_, list) = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        Some(&session),
    );
    let list: Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in TOOLS {
        assert!(names.contains(&t), "{t} over HTTP: {names:?}");
    }
    let (_, runs) = post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "runs", "arguments": {}}}),
        Some(&session),
    );
    let runs: Value = serde_json::from_str(&runs).unwrap();
    assert!(
        runs["result"]["structuredContent"]["runs"].is_array(),
        "{runs}"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "SIGTERM ends the server cleanly: {status}"
    );
}

#[test]
fn http_refuses_an_address_beyond_loopback() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ksmith(tmp.path(), &["mcp", "--http", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("loopback"), "{}", text(&o));
}

#[test]
fn tune_over_mcp_answers_as_tune_json_with_its_events_as_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task(
        "rmsnorm",
        tmp.path(),
        "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\nw = { dist = \"normal\", mean = 1.0, std = 0.5 }\n",
    );
    let solution = root().join("tasks/starter/rmsnorm/solutions/fast");
    let out = tmp.path().join("tuned");
    let mut s = Session::start(&store);
    let (v, progress) = s.call(
        "tune",
        json!({"task": task, "solution": solution, "strategy": "exhaustive", "budget": 2,
               "confirm": 0, "out": out, "judge": {"min_time_ms": 10}}),
        Duration::from_secs(300),
    );
    let r = Session::ok(&v);
    assert_eq!(r["solution"], "rmsnorm_fast", "{r}");
    assert_eq!(r["strategy"], "exhaustive", "{r}");
    assert!(r["rows"].as_array().is_some_and(|a| a.len() >= 2), "{r}");
    assert!(
        r.get("written").is_some(),
        "says where (or that nothing) was written: {r}"
    );
    assert!(
        progress.iter().any(|m| m.starts_with("tuning: judged")),
        "the tuner's events arrive as progress: {progress:?}"
    );
    // A strategy the tuner does not have is refused by the schema's enum, naming the field.
    let (v, _) = s.call(
        "tune",
        json!({"task": task, "solution": solution, "strategy": "beam"}),
        Duration::from_secs(10),
    );
    assert_eq!(field_error(&v).1, "strategy", "{v}");
}
