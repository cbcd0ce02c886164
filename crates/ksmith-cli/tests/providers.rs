//! The real binary against a local HTTP server that plays the Gemini API: the whole path from
//! `--model gemini:...` through retries, token accounting, cost and a bad key.

mod common;

use common::{fresh_store, ksmith_env, root, small_task, text};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const EDIT: &str = "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n";

/// Answers generateContent by the role named in the system instruction; the first request with
/// the good key is rate limited, and any key but `good-key` is rejected.
/// Requests the server saw: (URL, JSON body).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn serve() -> (String, Seen) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let base = format!("http://{}", server.server_addr().to_ip().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut limited = false;
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            let key = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("x-goog-api-key"))
                .map(|h| h.value.to_string())
                .unwrap_or_default();
            let v: Value = serde_json::from_str(&body).unwrap_or_default();
            log.lock().unwrap().push((req.url().to_string(), v.clone()));
            let respond = |code: u16, body: Value, extra: Option<(&str, &str)>| {
                let mut r = tiny_http::Response::from_string(body.to_string())
                    .with_status_code(code)
                    .with_header(
                        "content-type: application/json"
                            .parse::<tiny_http::Header>()
                            .unwrap(),
                    );
                if let Some((k, val)) = extra {
                    r = r.with_header(tiny_http::Header::from_bytes(k, val).unwrap());
                }
                r
            };
            if key != "good-key" {
                let _ = req.respond(respond(401, json!({"error": {"code": 401, "message": "API key not valid. Please pass a valid API key."}}), None));
                continue;
            }
            // The first request with a good key is rate limited once.
            if !limited {
                limited = true;
                let _ = req.respond(respond(
                    429,
                    json!({"error": {"code": 429, "message": "Resource exhausted"}}),
                    Some(("Retry-After", "0")),
                ));
                continue;
            }
            let system = v["systemInstruction"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("");
            let text = if system.contains("planner") {
                "## Strategy\nParallelize with OpenMP.\n## Expected effect\n1.5x\n## Risks\nNone.\n"
                    .to_string()
            } else {
                EDIT.to_string()
            };
            let body = json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 200, "totalTokenCount": 1200}
            });
            let _ = req.respond(respond(200, body, None));
        }
    });
    (base, seen)
}

#[test]
fn a_gemini_run_retries_rate_limits_counts_tokens_and_cost_and_names_a_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let (base, seen) = serve();
    // Small workloads: the test is about the provider's path, not about timing large arrays
    // (the starter task's took five minutes of this test on a loaded machine).
    let task = small_task(
        "vector_add",
        dir.path(),
        "[[workloads]]\naxes = { N = 65537 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    let args = [
        "optimize",
        task.to_str().unwrap(),
        "--from",
        naive.to_str().unwrap(),
        "--model",
        "gemini:gemini-3.1-pro",
        "--iterations",
        "1",
        "--no-profile",
        "--tune-budget",
        "0",
        "--min-time-ms",
        "20",
    ];
    // A rejected key: the run fails with a message naming the variable, the failed call is kept.
    let bad = ksmith_env(
        &store,
        &args,
        &[("KSMITH_GEMINI_BASE_URL", &base), ("GEMINI_API_KEY", "bad")],
    );
    assert!(!bad.status.success());
    assert!(text(&bad).contains("GEMINI_API_KEY"), "{}", text(&bad));
    let db = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
    let (id, err): (String, String) = db
        .query_row("SELECT run, error FROM llm_calls", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(err.contains("401"), "{err}");
    // With the key fixed, the same run resumes; the first request is rate limited and retried.
    seen.lock().unwrap().clear();
    let ok = ksmith_env(
        &store,
        &["resume", &id],
        &[
            ("KSMITH_GEMINI_BASE_URL", &base),
            ("GEMINI_API_KEY", "good-key"),
        ],
    );
    assert!(ok.status.success(), "{}", text(&ok));
    let (attempts, tin, tout, cost, est): (u32, i64, i64, f64, bool) = db
        .query_row(
            "SELECT attempts, tokens_in, tokens_out, cost, estimated FROM llm_calls WHERE run = ?1 AND seq = 0",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!((attempts, tin, tout, est), (2, 1000, 200, false));
    // Built-in list price for gemini-3.1-pro: $2 in, $12 out per million tokens.
    assert!(
        (cost - (1000.0 * 2.0 + 200.0 * 12.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    let seen = seen.lock().unwrap();
    assert!(
        seen[0]
            .0
            .ends_with("/v1beta/models/gemini-3.1-pro:generateContent"),
        "{:?}",
        seen[0].0
    );
    assert_eq!(seen[0].1["contents"][0]["role"], "user");
    let status: String = db
        .query_row("SELECT status FROM runs WHERE id = ?1", [&id], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "finished");
}
