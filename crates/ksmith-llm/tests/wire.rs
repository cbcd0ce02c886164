//! Wire-format tests: a local HTTP server plays each API and checks exactly
//! what we send; we check how its replies and failures are mapped.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ksmith_llm::{open, Config, LlmError, ModelSpec, ProviderConfig, Request, RetryPolicy};
use serde_json::{json, Value};

/// One canned response.
struct Canned {
    status: u16,
    body: String,
    headers: Vec<(&'static str, &'static str)>,
    delay: Duration,
}

fn ok(body: Value) -> Canned {
    status(200, &body.to_string())
}

fn status(code: u16, body: &str) -> Canned {
    Canned {
        status: code,
        body: body.to_string(),
        headers: Vec::new(),
        delay: Duration::ZERO,
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

struct Mock {
    /// `http://127.0.0.1:PORT`
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Mock {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serve `replies` in order, one per request, then stop.
fn serve(replies: Vec<Canned>) -> Mock {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    thread::spawn(move || {
        for canned in replies {
            let Ok(Some(mut rq)) = server.recv_timeout(Duration::from_secs(10)) else {
                return;
            };
            let mut body = String::new();
            rq.as_reader().read_to_string(&mut body).unwrap();
            log.lock().unwrap().push(Seen {
                method: rq.method().to_string(),
                url: rq.url().to_string(),
                headers: rq
                    .headers()
                    .iter()
                    .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
                    .collect(),
                body,
            });
            let mut resp =
                tiny_http::Response::from_string(canned.body).with_status_code(canned.status);
            resp.add_header(
                tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap(),
            );
            for (k, v) in canned.headers {
                resp.add_header(tiny_http::Header::from_bytes(k, v).unwrap());
            }
            if canned.delay.is_zero() {
                let _ = rq.respond(resp);
            } else {
                // Answer late on another thread so the next request is still served.
                thread::spawn(move || {
                    thread::sleep(canned.delay);
                    let _ = rq.respond(resp);
                });
            }
        }
    });
    Mock {
        base: format!("http://127.0.0.1:{port}"),
        seen,
    }
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        timeout: Duration::from_secs(5),
        retry_after_cap: Duration::from_secs(1),
    }
}

/// A config pointing provider section `name` at `base` with a literal key.
fn config(name: &str, base: &str, key: Option<&str>) -> Config {
    let mut cfg = Config::default().with_provider(
        name,
        ProviderConfig {
            base_url: Some(base.to_string()),
            api_key: key.map(str::to_string),
            ..ProviderConfig::default()
        },
    );
    cfg.retry = fast_retry();
    cfg
}

fn request() -> Request {
    Request {
        role: "planner".into(),
        seq: 0,
        system: "You are a kernel planner.".into(),
        prompt: "Plan vector_add for sm_90.".into(),
        max_tokens: 2048,
        temperature: Some(0.2),
    }
}

fn gemini_ok() -> Value {
    json!({
        "candidates": [{
            "content": {
                "role": "model",
                "parts": [
                    { "text": "thinking about tiles", "thought": true },
                    { "text": "1. Load tiles.\n" },
                    { "text": "2. Add." }
                ]
            },
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 31,
            "candidatesTokenCount": 12,
            "thoughtsTokenCount": 100,
            "totalTokenCount": 143
        },
        "modelVersion": "gemini-2.5-pro-002",
        "responseId": "abc"
    })
}

fn gemini(mock: &Mock) -> Box<dyn ksmith_llm::Provider> {
    let spec = ModelSpec::parse("gemini:gemini-2.5-pro").unwrap();
    open(&spec, &config("gemini", &mock.base, Some("test-key"))).unwrap()
}

#[test]
fn gemini_request_and_reply() {
    let mock = serve(vec![ok(gemini_ok())]);
    let mut p = gemini(&mock);
    assert!(p.describe().contains(&mock.base), "{}", p.describe());
    let reply = p.complete(&request()).unwrap();

    let seen = mock.seen();
    assert_eq!(seen.len(), 1);
    let rq = &seen[0];
    assert_eq!(rq.method, "POST");
    assert_eq!(rq.url, "/v1beta/models/gemini-2.5-pro:generateContent");
    assert_eq!(rq.header("x-goog-api-key"), Some("test-key"));
    assert_eq!(rq.header("content-type"), Some("application/json"));
    assert_eq!(rq.header("authorization"), None);
    assert_eq!(
        rq.json(),
        json!({
            "systemInstruction": { "parts": [{ "text": "You are a kernel planner." }] },
            "contents": [{ "role": "user", "parts": [{ "text": "Plan vector_add for sm_90." }] }],
            "generationConfig": { "maxOutputTokens": 2048, "temperature": 0.2 }
        })
    );

    assert_eq!(reply.text, "1. Load tiles.\n2. Add.");
    assert_eq!((reply.tokens_in, reply.tokens_out), (31, 112));
    assert!(!reply.tokens_estimated);
    assert_eq!(reply.model, "gemini-2.5-pro-002");
    assert_eq!(reply.attempts, 1);
}

#[test]
fn anthropic_request_and_reply() {
    let mock = serve(vec![ok(json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            { "type": "thinking", "thinking": "hmm", "signature": "x" },
            { "type": "text", "text": "Plan: " },
            { "type": "text", "text": "one block per 256 elements." }
        ],
        "stop_reason": "end_turn",
        "usage": { "input_tokens": 40, "output_tokens": 9 }
    }))]);
    let spec = ModelSpec::parse("anthropic:claude-sonnet-4-5").unwrap();
    let mut req = request();
    req.temperature = None;
    let reply = open(&spec, &config("anthropic", &mock.base, Some("sk-ant")))
        .unwrap()
        .complete(&req)
        .unwrap();

    let rq = &mock.seen()[0];
    assert_eq!(rq.method, "POST");
    assert_eq!(rq.url, "/v1/messages");
    assert_eq!(rq.header("x-api-key"), Some("sk-ant"));
    assert_eq!(rq.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(rq.header("content-type"), Some("application/json"));
    assert_eq!(
        rq.json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 2048,
            "system": "You are a kernel planner.",
            "messages": [{ "role": "user", "content": "Plan vector_add for sm_90." }]
        })
    );
    assert_eq!(reply.text, "Plan: one block per 256 elements.");
    assert_eq!((reply.tokens_in, reply.tokens_out), (40, 9));
    assert!(!reply.tokens_estimated);
    assert_eq!(reply.model, "claude-sonnet-4-5-20250929");
}

fn openai_ok(with_usage: bool) -> Value {
    let mut v = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-5-2025-08-07",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": "Use float4 loads.", "refusal": null },
            "finish_reason": "stop"
        }],
    });
    if with_usage {
        v["usage"] = json!({ "prompt_tokens": 25, "completion_tokens": 300, "total_tokens": 325 });
    }
    v
}

#[test]
fn openai_request_and_reply() {
    let mock = serve(vec![ok(openai_ok(true))]);
    let spec = ModelSpec::parse("openai:gpt-5").unwrap();
    let base = format!("{}/v1", mock.base);
    let reply = open(&spec, &config("openai", &base, Some("sk-test")))
        .unwrap()
        .complete(&request())
        .unwrap();

    let rq = &mock.seen()[0];
    assert_eq!(rq.method, "POST");
    assert_eq!(rq.url, "/v1/chat/completions");
    assert_eq!(rq.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        rq.json(),
        json!({
            "model": "gpt-5",
            "messages": [
                { "role": "system", "content": "You are a kernel planner." },
                { "role": "user", "content": "Plan vector_add for sm_90." }
            ],
            "max_completion_tokens": 2048,
            "temperature": 0.2
        })
    );
    assert_eq!(reply.text, "Use float4 loads.");
    assert_eq!((reply.tokens_in, reply.tokens_out), (25, 300));
    assert!(!reply.tokens_estimated);
    assert_eq!(reply.model, "gpt-5-2025-08-07");
}

#[test]
fn openai_compatible_without_key_or_usage() {
    let mock = serve(vec![ok(openai_ok(false))]);
    let spec = ModelSpec::parse("openai-compat:qwen3:8b").unwrap();
    let base = format!("{}/v1/", mock.base);
    let req = request();
    let reply = open(&spec, &config("openai-compat", &base, None))
        .unwrap()
        .complete(&req)
        .unwrap();

    let rq = &mock.seen()[0];
    assert_eq!(rq.url, "/v1/chat/completions");
    assert_eq!(rq.header("authorization"), None);
    assert_eq!(
        rq.json(),
        json!({
            "model": "qwen3:8b",
            "messages": [
                { "role": "system", "content": "You are a kernel planner." },
                { "role": "user", "content": "Plan vector_add for sm_90." }
            ],
            "max_tokens": 2048,
            "temperature": 0.2
        })
    );
    assert_eq!(reply.text, "Use float4 loads.");
    assert!(reply.tokens_estimated);
    assert_eq!(reply.tokens_in, 7 + 7); // 25 and 26 characters
    assert_eq!(reply.tokens_out, 5); // 17 characters
}

#[test]
fn ollama_alias_uses_its_own_section_and_optional_key() {
    let mock = serve(vec![ok(openai_ok(true))]);
    let spec = ModelSpec::parse("ollama:qwen2.5-coder:7b").unwrap();
    let base = format!("{}/v1", mock.base);
    let mut p = open(&spec, &config("ollama", &base, Some("local-secret"))).unwrap();
    assert!(p.describe().starts_with("ollama:qwen2.5-coder:7b"));
    p.complete(&request()).unwrap();
    let rq = &mock.seen()[0];
    assert_eq!(rq.header("authorization"), Some("Bearer local-secret"));
    assert_eq!(rq.json()["model"], "qwen2.5-coder:7b");
    assert_eq!(rq.json()["max_tokens"], 2048);
}

#[test]
fn rate_limit_honours_retry_after() {
    let mut limited = status(
        429,
        r#"{"error":{"code":429,"message":"Resource exhausted"}}"#,
    );
    limited.headers.push(("Retry-After", "0"));
    let mock = serve(vec![limited, ok(gemini_ok())]);
    let reply = gemini(&mock).complete(&request()).unwrap();
    assert_eq!(reply.attempts, 2);
    assert_eq!(mock.seen().len(), 2);
    assert_eq!(reply.text, "1. Load tiles.\n2. Add.");
}

#[test]
fn server_errors_are_retried() {
    let mock = serve(vec![
        status(503, r#"{"error":{"message":"overloaded"}}"#),
        status(503, "Service Unavailable"),
        ok(gemini_ok()),
    ]);
    let reply = gemini(&mock).complete(&request()).unwrap();
    assert_eq!(reply.attempts, 3);
    assert_eq!(mock.seen().len(), 3);
}

#[test]
fn persistent_errors_give_up_with_attempt_count() {
    let mock = serve(vec![
        status(429, "slow down"),
        status(429, "slow down"),
        status(429, "slow down"),
    ]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(
        matches!(err, LlmError::RateLimited { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(err.to_string().contains("slow down"), "{err}");

    let mock = serve(vec![
        status(529, "overloaded"),
        status(500, "boom"),
        status(502, "bad gateway"),
    ]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Server {
                status: 502,
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("bad gateway"), "{err}");
}

#[test]
fn bad_key_is_not_retried() {
    let body = r#"{"error":{"code":401,"message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}"#;
    let mock = serve(vec![status(401, body), ok(gemini_ok())]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::BadKey { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert_eq!(mock.seen().len(), 1);
    let msg = err.to_string();
    assert!(
        msg.starts_with("gemini: API key rejected (HTTP 401): API key not valid."),
        "{msg}"
    );
    assert!(msg.contains("check the api_key"), "{msg}");
}

#[test]
fn unknown_model() {
    let mock = serve(vec![
        status(
            404,
            r#"{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta"}}"#,
        ),
        ok(gemini_ok()),
    ]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(
        matches!(&err, LlmError::UnknownModel { model, .. } if model == "gemini-2.5-pro"),
        "{err:?}"
    );
    assert_eq!(mock.seen().len(), 1);

    // OpenAI-style 400 naming the model.
    let mock = serve(vec![status(
        400,
        r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}"#,
    )]);
    let spec = ModelSpec::parse("openai:gpt-9").unwrap();
    let err = open(&spec, &config("openai", &mock.base, Some("k")))
        .unwrap()
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::UnknownModel { .. }), "{err:?}");
    assert!(err.to_string().contains("`gpt-9`"), "{err}");
}

#[test]
fn other_client_errors_are_bad_responses() {
    let mock = serve(vec![status(
        400,
        r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this model."}}"#,
    )]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("HTTP 400"), "{msg}");
    assert!(msg.contains("temperature"), "{msg}");
    assert_eq!(mock.seen().len(), 1);
}

#[test]
fn slow_server_times_out_after_max_attempts() {
    let slow = || Canned {
        delay: Duration::from_secs(2),
        ..ok(gemini_ok())
    };
    let mock = serve(vec![slow(), slow()]);
    let mut cfg = config("gemini", &mock.base, Some("k"));
    cfg.retry.timeout = Duration::from_millis(300);
    cfg.retry.max_attempts = 2;
    let spec = ModelSpec::parse("gemini:gemini-2.5-pro").unwrap();
    let started = Instant::now();
    let err = open(&spec, &cfg).unwrap().complete(&request()).unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, LlmError::Timeout { attempts: 2, .. }),
        "{err:?}"
    );
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_millis(1900), "{took:?}");
    assert_eq!(mock.seen().len(), 2);
    assert!(err.to_string().contains("0.3 s"), "{err}");
}

#[test]
fn per_provider_settings_override_retry_section() {
    let mock = serve(vec![status(503, "x"), ok(gemini_ok())]);
    let mut cfg = config("gemini", &mock.base, Some("k"));
    if let Some(p) = cfg.providers.get_mut("gemini") {
        p.max_attempts = Some(1);
    }
    let spec = ModelSpec::parse("gemini:gemini-2.5-pro").unwrap();
    let err = open(&spec, &cfg).unwrap().complete(&request()).unwrap_err();
    assert!(
        matches!(err, LlmError::Server { attempts: 1, .. }),
        "{err:?}"
    );
}

#[test]
fn malformed_and_misshapen_bodies() {
    let mock = serve(vec![
        status(200, "{\"candidates\": [ oops"),
        ok(gemini_ok()),
    ]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(mock.seen().len(), 1);

    let mock = serve(vec![ok(json!({ "object": "list", "data": [] }))]);
    let spec = ModelSpec::parse("openai:gpt-5").unwrap();
    let err = open(&spec, &config("openai", &mock.base, Some("k")))
        .unwrap()
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("no choices"), "{err}");

    let mock = serve(vec![ok(json!({ "type": "message", "content": "text?" }))]);
    let spec = ModelSpec::parse("anthropic:claude-haiku-4-5").unwrap();
    let err = open(&spec, &config("anthropic", &mock.base, Some("k")))
        .unwrap()
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
}

#[test]
fn gemini_blocked_prompt() {
    let mock = serve(vec![ok(json!({
        "promptFeedback": { "blockReason": "SAFETY", "safetyRatings": [] },
        "usageMetadata": { "promptTokenCount": 10, "totalTokenCount": 10 }
    }))]);
    let err = gemini(&mock).complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("blockReason SAFETY"), "{err}");
}

#[test]
fn connection_refused_is_transport_after_retries() {
    // Bind then drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let spec = ModelSpec::parse("anthropic:claude-haiku-4-5").unwrap();
    let err = open(&spec, &config("anthropic", &base, Some("k")))
        .unwrap()
        .complete(&request())
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Transport { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[test]
fn missing_key_fails_at_open() {
    let mut cfg = Config::default();
    cfg.providers.insert(
        "anthropic".into(),
        ProviderConfig {
            api_key_env: Some("KSMITH_TEST_SURELY_UNSET_KEY_VAR".into()),
            ..ProviderConfig::default()
        },
    );
    let spec = ModelSpec::parse("anthropic:claude-haiku-4-5").unwrap();
    let err = open(&spec, &cfg).err().unwrap();
    assert!(matches!(err, LlmError::MissingKey { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "anthropic: no API key found; set KSMITH_TEST_SURELY_UNSET_KEY_VAR"
    );
}
