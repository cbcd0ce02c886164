//! `ksmith serve` through the real binary: the pages of a store holding hostile text (escaped,
//! under a strict Content-Security-Policy), the refusals (foreign host, missing token, a POST
//! that is not this page's JSON), a scripted-provider search started from the page whose event
//! stream is watched growing to its end and whose finished page names the written winner, an
//! interactive agent run whose plan is rejected with guidance from the page in headless
//! Chromium and whose code change is approved through the HTTP endpoint. Chromium is driven over
//! the DevTools protocol on a pipe: it watches the search grow and finds the written winner.

mod common;

use common::*;
use ksmith_judge::Status;
use ksmith_search::{Hint, Node, NodeId, NodeOutcome, NodeState, Spend};
use ksmith_store::{NodeRecord, RunRow, RunStatus, Store};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EVIL: &str = "</script><script>alert(1)</script>";
const EVIL_ESCAPED: &str = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;";
const TOKEN: &str = "a-long-enough-test-token-123";

const SMALL_SOFTMAX: &str = "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n";
const SMALL_VECTOR_ADD: &str = "[[workloads]]\naxes = { N = 200003 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n";

/// A running `ksmith serve`, killed when dropped.
struct Serve {
    child: Child,
    url: String,
}

impl Serve {
    fn start(store: &Path, extra: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
            .arg("--store")
            .arg(store)
            .args(["serve", "--addr"])
            .args(if extra.is_empty() {
                &["127.0.0.1:0"][..]
            } else {
                extra
            })
            .env("KSMITH_DEVICE_LOCK", "0")
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ksmith serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("ksmith serve: ")
            .unwrap_or_else(|| panic!("no address line: {line:?}"))
            .trim_end_matches('/')
            .to_string();
        Serve { child, url }
    }

    fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that reports every status (no error on 4xx/5xx).
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// GET: status, content-security-policy, body.
fn get(url: &str) -> (u16, String, String) {
    let mut r = agent().get(url).call().unwrap();
    let csp = r
        .headers()
        .get("content-security-policy")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        r.status().as_u16(),
        csp,
        r.body_mut().read_to_string().unwrap(),
    )
}

/// POST JSON: status and the JSON answer.
fn post(url: &str, body: &Value) -> (u16, Value) {
    let mut r = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .unwrap();
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// One raw request (for headers a client library sets itself, like Host): the status line.
fn raw_status(addr: &str, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_string()
}

fn state(s: &Serve, run: &str) -> Value {
    let (code, _, body) = get(&format!("{}/runs/{run}/state", s.url));
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Waits until the run's state satisfies `done` (at most `limit`).
fn wait_state(s: &Serve, run: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let v = state(s, run);
        if done(&v) {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "run {run} did not get there in {limit:?}: {v}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The CSP every page must carry: only this server's own script and style.
fn assert_strict_csp(csp: &str) {
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert!(!csp.contains("http:") && !csp.contains("https:"), "{csp}");
}

/// No raw hostile markup, and no tag of the page loads anything from elsewhere.
fn assert_inert(page: &str) {
    assert!(!page.contains("<script>alert"), "raw hostile script");
    assert!(!page.contains("<b onmouseover"), "raw hostile tag");
    assert!(!page.contains("<img src=x"), "raw hostile image");
    let lower = page.to_ascii_lowercase();
    assert!(
        !lower.contains("http://") && !lower.contains("https://"),
        "external reference"
    );
    assert!(!lower.contains(" style="), "inline style");
    for tag in page.split("<script").skip(1) {
        let tag = tag.split('>').next().unwrap();
        assert!(
            tag.contains("src=\"/static/app.js\""),
            "a script that is not ours: {tag}"
        );
    }
}

/// The HTML sections a `state` event carries hold no raw hostile markup.
fn assert_sections_inert(sections: &Value) {
    let map = sections.as_object().expect("sections");
    assert!(
        map.contains_key("nodes") && map.contains_key("finals"),
        "{sections}"
    );
    for (k, v) in map {
        let h = v.as_str().unwrap();
        assert!(
            !h.contains("<script") && !h.contains("<img") && !h.contains("<b "),
            "section {k}: {h}"
        );
    }
}

fn node(
    id: u64,
    parent: Option<u64>,
    status: Option<Status>,
    speedup: Option<f64>,
    code: &str,
) -> Node {
    Node {
        id: NodeId(id),
        parent: parent.map(NodeId),
        depth: 0,
        hint: Hint::Tile,
        state: NodeState::Done,
        plan: format!("plan of n{id} {EVIL} <b onmouseover=alert(3)>bold</b>"),
        code_hash: Some(code.to_string()),
        norm_hash: None,
        duplicate_of: None,
        outcome: NodeOutcome {
            status,
            speedup,
            interval: speedup.map(|s| (s * 0.95, s * 1.05)),
            roofline_fraction: None,
            eval_id: None,
            vs_parent: None,
        },
        spend: Spend {
            calls: 2,
            tokens: 1000,
            cost: 0.01,
            evaluations: 1,
            wall_s: 3.0,
        },
        feedback: Default::default(),
    }
}

/// A finished search with hostile text in its model, plans and winning kernel, written
/// through the store API (no judging: the page is what is tested).
fn hostile_store(dir: &Path) -> (PathBuf, &'static str) {
    let store_dir = dir.join("store");
    let mut store = Store::open(&store_dir).unwrap();
    let id = "run-hostile-1";
    store
        .create_run(&RunRow {
            id: id.into(),
            created_at: String::new(),
            updated_at: String::new(),
            task_dir: "tasks/starter/softmax".into(),
            task: "softmax".into(),
            tests_hash: "t".into(),
            model: "scripted:<img src=x onerror=alert(4)>".into(),
            mode: "autonomous".into(),
            options: "{}".into(),
            status: RunStatus::Finished,
            stop_reason: Some(format!("budget {EVIL}")),
            active_s: 12.0,
            out_dir: None,
        })
        .unwrap();
    let start = store.put_artifact(b"void softmax(void) {}\n").unwrap();
    let better = store
        .put_artifact(
            format!(
                "void softmax(void) {{\n    /* tiled {EVIL} <img src=x onerror=alert(2)> */\n}}\n"
            )
            .as_bytes(),
        )
        .unwrap();
    for n in [
        node(0, None, Some(Status::Passed), Some(1.0), &start),
        node(1, Some(0), Some(Status::Passed), Some(1.6), &better),
        node(2, Some(0), Some(Status::CompileError), None, &start),
    ] {
        let rec = NodeRecord {
            id: n.id.0,
            parent: n.parent.map(|p| p.0),
            state: n.state.as_str().into(),
            speedup: n.outcome.speedup,
            payload: serde_json::to_string(&n).unwrap(),
            created_at: String::new(),
        };
        store.record_search_step(id, &[rec], "{}").unwrap();
    }
    let finals = json!({
        "node": 1, "incumbent": 0,
        "summary": format!("node 1: better {EVIL}"),
        "held_out": "M=1001 N=255", "retimed": 0,
        "finalists": [
            {"node": 0, "eval_id": null, "status": "PASSED", "held_out": "PASSED",
             "together": {"speedup": 1.0, "low": 0.9, "high": 1.1}, "vs_incumbent": null,
             "decision": "incumbent"},
            {"node": 1, "eval_id": null, "status": "PASSED", "held_out": "PASSED",
             "together": {"speedup": 1.5, "low": 1.3, "high": 1.7},
             "vs_incumbent": {"speedup": 1.5, "low": 1.3, "high": 1.7}, "decision": "better"}
        ]
    });
    store
        .record_event(id, 0, "winner", &finals.to_string())
        .unwrap();
    (store_dir, id)
}

#[test]
fn pages_escape_hostile_text_under_a_strict_csp_and_refuse_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = hostile_store(dir.path());
    let s = Serve::start(&store, &[]);

    let (code, csp, page) = get(&format!("{}/", s.url));
    assert_eq!(code, 200, "{page}");
    assert_strict_csp(&csp);
    assert!(page.contains(run), "the run is listed");
    assert!(
        page.contains("&lt;img src=x onerror=alert(4)&gt;"),
        "{page}"
    );
    assert_inert(&page);

    let (code, csp, page) = get(&format!("{}/runs/{run}", s.url));
    assert_eq!(code, 200, "{page}");
    assert_strict_csp(&csp);
    assert_inert(&page);
    assert!(
        page.matches(EVIL_ESCAPED).count() >= 3,
        "plans, summary, kernel: {page}"
    );
    assert!(page.contains("&lt;b onmouseover=alert(3)&gt;"));
    assert!(
        page.contains("Winner written") && page.contains("winner: <strong>n1</strong> 1.60x"),
        "{page}"
    );
    assert!(
        page.contains("id=\"finalists\"") && page.contains("better"),
        "{page}"
    );
    assert!(page.contains("href=\"/runs/run-hostile-1/report\""));

    // The state document carries the raw text (JSON, for the script), never as markup.
    let v = state(&s, run);
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["finals"]["node"], 1, "{v}");
    assert_eq!(v["winner"]["label"], "n1", "{v}");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(
        v["nodes"][1]["depth"], 1,
        "children below their parent: {v}"
    );

    // The stream of a finished run: its state (with the sections rendered escaped), then end.
    let mut r = agent()
        .get(&format!("{}/runs/{run}/events", s.url))
        .call()
        .unwrap();
    assert_eq!(
        r.headers().get("content-type").unwrap().to_str().unwrap(),
        "text/event-stream"
    );
    let body = r.body_mut().read_to_string().unwrap();
    assert!(
        body.contains("event: state") && body.contains("event: end"),
        "{body}"
    );
    // The document carries the raw text as JSON strings (the script shows them as text); the
    // HTML it swaps in is the server's, escaped.
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: {\"state\""))
        .map(|rest| format!("{{\"state\"{rest}"))
        .expect("a state event");
    let doc: Value = serde_json::from_str(&data).unwrap();
    assert_sections_inert(&doc["sections"]);
    assert!(doc["sections"]["finals"]
        .as_str()
        .unwrap()
        .contains(EVIL_ESCAPED));

    // The report: written now, no script at all.
    let (code, csp, page) = get(&format!("{}/runs/{run}/report", s.url));
    assert_eq!(code, 200, "{page}");
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("script-src"),
        "{csp}"
    );
    assert!(page.contains(EVIL_ESCAPED) && !page.contains("<script>alert"));

    // The script and style are ours, with their types.
    let mut r = agent()
        .get(&format!("{}/static/app.js", s.url))
        .call()
        .unwrap();
    assert!(r
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(r
        .body_mut()
        .read_to_string()
        .unwrap()
        .contains("EventSource"));

    // Unknown and malformed ids.
    assert_eq!(get(&format!("{}/runs/run-nope", s.url)).0, 404);
    assert_eq!(get(&format!("{}/runs/..%2Fx", s.url)).0, 400);
    assert_eq!(get(&format!("{}/evals/xyz", s.url)).0, 400);
    assert_eq!(get(&format!("{}/evals", s.url)).0, 200);

    // A foreign Host (DNS rebinding), a form POST (cross-site), a POST from another origin.
    let foreign = raw_status(
        &s.addr(),
        "GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert!(foreign.contains(" 403 "), "{foreign}");
    let form = raw_status(
        &s.addr(),
        &format!("POST /runs HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 6\r\nConnection: close\r\n\r\ntask=x", s.addr()),
    );
    assert!(form.contains(" 403 "), "{form}");
    let body = r#"{"task":"x","model":"m"}"#;
    let cross = raw_status(
        &s.addr(),
        &format!("POST /runs HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", s.addr(), body.len()),
    );
    assert!(cross.contains(" 403 "), "{cross}");
    // A review answer for a run that waits on none is refused, naming why.
    let (code, v) = post(
        &format!("{}/runs/{run}/review", s.url),
        &json!({"id": "x", "action": "approve"}),
    );
    assert_eq!(code, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("waits on no review"),
        "{v}"
    );
    let (code, v) = post(
        &format!("{}/runs/{run}/review", s.url),
        &json!({"id": "x", "action": "explode"}),
    );
    assert_eq!(code, 400, "{v}");
    drop(s);

    // A search takes --review too (every node's stages are reviewed); this one stops at its
    // model, which does not exist. A run of the serial loop of earlier versions (this one,
    // stored by hand) is shown, never resumed.
    let o = ksmith(
        &store,
        &[
            "optimize",
            "tasks/starter/softmax",
            "--model",
            "scripted:/x",
            "--strategy",
            "loop",
            "--review",
            "web",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("/x"), "{}", text(&o));
    let o = ksmith(&store, &["resume", run, "--review", "web"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("serial agent loop of an earlier ksmith"),
        "{}",
        text(&o)
    );

    // Beyond loopback only with a token; with one, every request needs it.
    let o = ksmith(&store, &["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("--token"), "{}", text(&o));
    let s = Serve::start(&store, &["127.0.0.1:0", "--token", TOKEN]);
    assert_eq!(get(&format!("{}/", s.url)).0, 401);
    assert_eq!(
        get(&format!("{}/?token=wrong-token-of-some-length", s.url)).0,
        401
    );
    let r = agent()
        .get(&format!("{}/?token={TOKEN}", s.url))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let r = agent()
        .get(&format!("{}/runs/{run}", s.url))
        .header("Cookie", cookie.split(';').next().unwrap())
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = agent()
        .get(&format!("{}/runs/{run}/state", s.url))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

/// Reads an SSE stream on a thread: (arrival, event name, data) per event.
fn sse(url: String) -> std::sync::mpsc::Receiver<(Instant, String, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(None)
            .build()
            .into();
        let r = agent.get(&url).call().unwrap();
        let mut lines = BufReader::new(r.into_body().into_reader()).lines();
        let (mut name, mut data) = (String::new(), String::new());
        while let Some(Ok(line)) = lines.next() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else if line.is_empty()
                && !name.is_empty()
                && tx
                    .send((
                        Instant::now(),
                        std::mem::take(&mut name),
                        std::mem::take(&mut data),
                    ))
                    .is_err()
            {
                break;
            }
        }
    });
    rx
}

#[test]
fn a_scripted_search_started_from_the_page_streams_live_and_ends_with_its_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), SMALL_SOFTMAX);
    let start = root().join("tasks/starter/softmax/solutions/naive");
    let kernel = std::fs::read_to_string(start.join("kernel.c")).unwrap();
    let mut script = String::new();
    for v in ["a", "b"] {
        script.push_str(&format!(
            "[[reply]]\nrole = \"planner\"\ntext = '''\n## Title\nVariant {v} {EVIL}\n## Strategy\nKeep the kernel, add a helper.\n## Expected effect\nabout 1.0x\n## Risks\nNone.\n'''\n\n[[reply]]\nrole = \"implementer\"\ntext = '''\nkernel.c\n```c\n{kernel}\nint ks_serve_{v}(void) {{ return 1; }}\n```\n'''\n\n"
        ));
    }
    let script_path = tmp.path().join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let s = Serve::start(&store, &[]);

    // The run's own input error comes back as the start's error.
    let (code, v) = post(
        &format!("{}/runs", s.url),
        &json!({"task": task, "model": "nosuch:model", "strategy": "loop"}),
    );
    assert_eq!(code, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("model"), "{v}");
    let (code, v) = post(
        &format!("{}/runs", s.url),
        &json!({"task": task, "model": "scripted:/x", "strategy": "loop", "interactive": true}),
    );
    // An interactive search is started like any run; this one's model does not exist.
    assert_eq!(code, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("/x"), "{v}");

    let (code, v) = post(
        &format!("{}/runs", s.url),
        &json!({"task": task, "model": format!("scripted:{}", script_path.display()),
               "strategy": "loop", "from": start, "max_nodes": 3, "min_time_ms": 20}),
    );
    assert_eq!(code, 200, "{v}");
    let run = v["run"].as_str().unwrap().to_string();
    // A person watching: the page open in a browser while the search runs.
    let mut browser = Browser::open(&format!("{}/runs/{run}", s.url), tmp.path());
    let events = sse(format!("{}/runs/{run}/events", s.url));
    let mut got: Vec<(Instant, String, String)> = Vec::new();
    let mut seen_in_browser: Vec<Value> = Vec::new();
    let start_t = Instant::now();
    loop {
        match events.recv_timeout(Duration::from_secs(5)) {
            Ok(e) => {
                let end = e.1 == "end";
                if e.1 == "engine" {
                    seen_in_browser
                        .push(browser.eval("document.querySelectorAll('#events li').length"));
                }
                got.push(e);
                if end {
                    break;
                }
            }
            Err(_) => assert!(
                start_t.elapsed() < Duration::from_secs(400),
                "no end in 400 s: {:?}",
                got.iter().map(|e| &e.1).collect::<Vec<_>>()
            ),
        }
    }
    let engine: Vec<&(Instant, String, String)> = got.iter().filter(|e| e.1 == "engine").collect();
    let finished = engine
        .iter()
        .filter(|e| e.2.contains("\"node_finished\""))
        .count();
    assert!(finished >= 3, "every node's end streamed: {got:?}");
    assert!(
        engine.iter().any(|e| e.2.contains("node n1 started")),
        "events carry their line: {engine:?}"
    );
    // It grew while the search ran, not in one burst at the end.
    let spread = engine.last().unwrap().0 - engine.first().unwrap().0;
    assert!(
        spread > Duration::from_secs(1),
        "all events at once ({spread:?})"
    );
    let states = got.iter().filter(|e| e.1 == "state").count();
    assert!(
        states >= 3,
        "the state was re-sent as it changed ({states})"
    );
    let docs: Vec<Value> = got
        .iter()
        .filter(|e| e.1 == "state")
        .map(|e| serde_json::from_str(&e.2).unwrap())
        .collect();
    for d in &docs {
        assert_sections_inert(&d["sections"]);
    }
    // While it ran, the page showed a node being expanded with its latest prompt and reply.
    assert!(
        docs.iter().any(|d| d["state"]["running"] == true
            && d["state"]["current"]["call"]["prompt"]
                .as_str()
                .is_some_and(|p| !p.is_empty())
            && d["sections"]["current"]
                .as_str()
                .is_some_and(|h| h.contains("<h3>prompt</h3>"))),
        "no state showed the node being expanded"
    );
    assert_eq!(got.last().unwrap().2, "finished", "{:?}", got.last());

    // The finished page: the final judgement and the winner written, the report linked.
    let v = state(&s, &run);
    assert_eq!(v["status"], "finished", "{v}");
    assert!(v["finals"].is_object(), "the winner event is read: {v}");
    let (code, _, page) = get(&format!("{}/runs/{run}", s.url));
    assert_eq!(code, 200);
    assert_inert(&page);
    assert!(page.contains("Final judgement"), "{page}");
    assert!(
        page.contains("Winner written") || page.contains("no candidate held up"),
        "{page}"
    );
    assert!(page.contains(&format!("href=\"/runs/{run}/report\"")));
    let (code, _, report) = get(&format!("{}/runs/{run}/report", s.url));
    assert_eq!(code, 200);
    assert!(report.contains("<svg"), "the report was written");
    assert!(store.join("reports").join(format!("{run}.html")).exists());
    // The page's runs are processes with their files under STORE/serve/RUN/.
    assert!(store.join("serve").join(&run).join("events.jsonl").exists());

    // The browser followed the same stream: its event list grew to the end, the script ran
    // under the CSP (the only script is ours), and the written winner is on the page it has.
    browser.wait_for(
        "document.body.getAttribute('data-ended') === 'true'",
        Duration::from_secs(60),
    );
    let mut grew = seen_in_browser.clone();
    grew.dedup();
    assert!(
        grew.len() >= 3,
        "the page's event list grew while the search ran: {seen_in_browser:?}"
    );
    let shown = browser.eval("document.querySelectorAll('#events li').length");
    assert!(
        shown.as_u64().unwrap() as usize >= engine.len(),
        "{shown} of {}",
        engine.len()
    );
    assert_eq!(browser.eval("document.scripts.length"), json!(1));
    assert_eq!(
        browser.eval("document.getElementById('status').textContent"),
        json!("finished")
    );
    let finals = browser.eval("document.getElementById('finals').innerText");
    assert!(
        finals.as_str().unwrap().contains("Final judgement"),
        "{finals}"
    );
    assert!(
        browser.eval("!!document.getElementById('winner')") == json!(true),
        "the winner's line is on the page: {finals}"
    );
}

/// The headless Chromium binary, or a failure saying what to install (as tests/report_html.rs).
fn chromium() -> PathBuf {
    let names = [
        "chromium-headless-shell",
        "chromium",
        "chromium-browser",
        "google-chrome",
    ];
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/lib/chromium")])
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
        .expect(
            "headless Chromium is needed to drive the page: install it \
             (Debian: `apt-get install -y chromium-headless-shell`; .ci/run does)",
        )
}

/// Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
/// NUL-separated JSON messages, the browser reading descriptor 3 and writing 4), one page
/// attached: the test reads the live DOM and clicks as a person would.
struct Browser {
    child: Child,
    to: std::fs::File,
    from: BufReader<std::fs::File>,
    next: u64,
    session: String,
}

/// A pipe whose ends close on exec: (read, write).
fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

impl Browser {
    /// Chromium on `url`, its profile under `dir`.
    fn open(url: &str, dir: &Path) -> Browser {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let (their_in, our_out) = pipe();
        let (our_in, their_out) = pipe();
        let (r, w) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        let mut cmd = Command::new(chromium());
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-pipe",
            "--window-size=1280,2000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium-profile").display()
        ))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first, so placing one end cannot close the other.
                let (r2, w2) = (
                    libc::fcntl(r, libc::F_DUPFD, 10),
                    libc::fcntl(w, libc::F_DUPFD, 10),
                );
                if r2 < 0 || w2 < 0 || libc::dup2(r2, 3) < 0 || libc::dup2(w2, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        drop((their_in, their_out));
        let mut b = Browser {
            child,
            to: std::fs::File::from(our_out),
            from: BufReader::new(std::fs::File::from(our_in)),
            next: 1,
            session: String::new(),
        };
        let targets = b.call("Target.getTargets", json!({}), false);
        let page = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target")["targetId"]
            .clone();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": page, "flatten": true}),
            false,
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b.call("Page.navigate", json!({"url": url}), true);
        b
    }

    /// One protocol call; its result (events before the answer are skipped).
    fn call(&mut self, method: &str, params: Value, on_page: bool) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if on_page {
            msg["sessionId"] = json!(self.session);
        }
        self.to.write_all(msg.to_string().as_bytes()).unwrap();
        self.to.write_all(b"\0").unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the protocol pipe during {method}");
            buf.pop();
            let v: Value = serde_json::from_slice(&buf).unwrap();
            if v["id"] == json!(id) {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true}),
            true,
        );
        assert!(r["exceptionDetails"].is_null(), "{js}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (at most `limit`) until `js` evaluates to true in the page.
    fn wait_for(&mut self, js: &str, limit: Duration) {
        let start = Instant::now();
        while self.eval(js) != json!(true) {
            assert!(
                start.elapsed() < limit,
                "the page never got `{js}`: {}",
                self.eval("document.body ? document.body.innerText : ''")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_interactive_run_started_from_the_page_waits_for_its_plan_to_be_approved_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    let kernel = "#include <stdint.h>\n\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n        c[i] = a[i] + b[i];\n}\n";
    let scenario = tmp.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        format!(
            "[[reply]]\nrole = \"planner\"\nexpect = []\ntext = '''\n## Strategy\nParallelize with OpenMP. {EVIL}\n## Expected effect\n1.5x\n## Risks\nNone.\n'''\n\n[[reply]]\nrole = \"implementer\"\nexpect = [\"use a static schedule\"]\ntext = '''\nkernel.c\n```c\n{kernel}```\n'''\n\n"
        ),
    )
    .unwrap();
    let s = Serve::start(&store, &[]);
    let (code, v) = post(
        &format!("{}/runs", s.url),
        &json!({"task": task, "from": naive, "model": format!("scripted:{}", scenario.display()),
               "interactive": true, "iterations": 1, "no_profile": true, "tune_budget": 0,
               "min_time_ms": 20}),
    );
    assert_eq!(code, 200, "{v}");
    let run = v["run"].as_str().unwrap().to_string();
    let mut browser = Browser::open(&format!("{}/runs/{run}", s.url), tmp.path());

    // The run waits on its plan: shown on the page, escaped, with the answers it takes.
    let v = wait_state(&s, &run, Duration::from_secs(300), |v| {
        v["review"].is_object()
    });
    assert_eq!(v["kind"], "search", "{v}");
    assert_eq!(v["review"]["what"], "plan", "{v}");
    assert_eq!(v["review"]["step"], "node n1 round 1 plan", "{v}");
    assert!(v["review"]["shown"].as_str().unwrap().contains(EVIL), "{v}");
    let plan_id = v["review"]["id"].as_str().unwrap().to_string();
    let (_, csp, page) = get(&format!("{}/runs/{run}", s.url));
    assert_strict_csp(&csp);
    assert_inert(&page);
    assert!(
        page.contains(&format!("data-review=\"{plan_id}\"")),
        "{page}"
    );
    assert!(
        page.contains("data-action=\"approve\"") && page.contains(EVIL_ESCAPED),
        "{page}"
    );
    assert!(store
        .join("serve")
        .join(&run)
        .join("review-pending.json")
        .exists());

    // An empty guidance is refused; then the plan is rejected with guidance, which the
    // implementer's scripted reply expects to see in its prompt.
    let url = format!("{}/runs/{run}/review", s.url);
    let (code, e) = post(
        &url,
        &json!({"id": plan_id, "action": "guidance", "text": " "}),
    );
    assert_eq!(code, 400, "{e}");
    // The page open since the start got the question over its stream (no reload): the plan
    // shown as text, the box holding it. A person replaces it with guidance and rejects.
    browser.wait_for(
        &format!("!!document.getElementById('review-form') && document.getElementById('review-form').getAttribute('data-review') === '{plan_id}'"),
        Duration::from_secs(60),
    );
    let shown = browser.eval("document.querySelector('#review pre').textContent");
    assert!(
        shown.as_str().unwrap().contains(EVIL),
        "the plan shown as text: {shown}"
    );
    assert_eq!(
        browser.eval("document.scripts.length"),
        json!(1),
        "no script but ours"
    );
    browser.eval(
        "document.getElementById('review-form').elements.text.value = 'use a static schedule'; \
         document.querySelector('[data-action=guidance]').click(); true",
    );
    // The page says the answer was sent, unless the run was quicker and the page already
    // shows its next review point (on a loaded machine the message was replaced before it
    // was read); the journal and the implementer's prompt are checked below either way.
    browser.wait_for(
        "(document.getElementById('review-result') || {textContent: ''}).textContent.indexOf('sent: guidance') === 0 \
         || document.body.innerText.indexOf('Review: code change') >= 0",
        Duration::from_secs(30),
    );
    // A second answer to the same question is refused (it is no longer pending, or a newer
    // one is).
    let v = wait_state(&s, &run, Duration::from_secs(300), |v| {
        v["review"]["id"].as_str().is_some_and(|id| id != plan_id)
    });
    let (code, _) = post(&url, &json!({"id": plan_id, "action": "approve"}));
    assert_eq!(code, 409);
    assert_eq!(v["review"]["what"], "code change", "{v}");
    assert!(
        v["review"]["shown"]
            .as_str()
            .unwrap()
            .contains("+    #pragma omp parallel for"),
        "the diff is shown: {v}"
    );
    let diff_id = v["review"]["id"].as_str().unwrap().to_string();
    let (code, e) = post(&url, &json!({"id": diff_id, "action": "approve"}));
    assert_eq!(code, 200, "{e}");

    let v = wait_state(&s, &run, Duration::from_secs(400), |v| {
        v["running"] == false
    });
    // The page, never reloaded, ends on the winner the run wrote.
    browser.wait_for(
        "document.body.getAttribute('data-ended') === 'true' && !!document.getElementById('winner')",
        Duration::from_secs(60),
    );
    let winner = browser.eval("document.getElementById('winner').textContent");
    assert!(winner.as_str().unwrap().contains("winner: n"), "{winner}");
    assert_eq!(
        v["status"],
        "finished",
        "{v}\n{}",
        std::fs::read_to_string(store.join("serve").join(&run).join("log.txt")).unwrap_or_default()
    );
    // The page's answers went through the run's journal as the terminal's verdicts do.
    let db = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
    let reviews: Vec<String> = db
        .prepare("SELECT payload FROM run_events WHERE run = ?1 AND kind = 'review' ORDER BY seq")
        .unwrap()
        .query_map([&run], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(reviews.len(), 2, "{reviews:?}");
    assert!(
        reviews[0].contains("guidance") && reviews[0].contains("use a static schedule"),
        "{reviews:?}"
    );
    assert_eq!(reviews[1], "\"approve\"", "{reviews:?}");
    assert!(!store
        .join("serve")
        .join(&run)
        .join("review-pending.json")
        .exists());
}
