//! The shared HTTP loop: one POST, retried on transient failures, with every
//! failure mapped to an `LlmError` the user can act on.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::{HttpSetup, RetryPolicy};
use crate::{estimate_usage, LlmError, Reply, Request};

/// How much of an error body to show.
const EXCERPT_CHARS: usize = 300;

/// A blocking JSON-over-HTTP client for one provider.
pub(crate) struct HttpClient {
    agent: ureq::Agent,
    policy: RetryPolicy,
    /// Provider name for messages.
    provider: &'static str,
    /// Appended to key-rejected errors.
    key_hint: String,
}

/// A parsed success body and how many tries it took.
pub(crate) struct JsonReply {
    pub(crate) body: Value,
    pub(crate) attempts: u32,
}

/// What a provider's parser pulls out of a success body.
pub(crate) struct Parsed {
    pub(crate) text: String,
    /// Reported (input, output) tokens, if the body had them.
    pub(crate) usage: Option<(u64, u64)>,
    /// The model that answered, if the body says.
    pub(crate) model: Option<String>,
}

impl Parsed {
    /// The `Reply`, estimating tokens when none were reported.
    pub(crate) fn into_reply(
        self,
        req: &Request,
        spec_model: &str,
        attempts: u32,
        started: Instant,
    ) -> Reply {
        let ((tokens_in, tokens_out), tokens_estimated) = match self.usage {
            Some(u) => (u, false),
            None => (estimate_usage(req, &self.text), true),
        };
        Reply {
            text: self.text,
            tokens_in,
            tokens_out,
            tokens_estimated,
            model: self.model.unwrap_or_else(|| spec_model.to_string()),
            latency: started.elapsed(),
            attempts,
        }
    }
}

/// The kinds of failure worth another try.
#[derive(Debug, Clone, Copy)]
enum Transient {
    RateLimited,
    Server(u16),
    Timeout,
    Transport,
}

/// Result of a single try.
enum Failure {
    Retry {
        kind: Transient,
        detail: String,
        /// What the server asked us to wait, if it said.
        wait: Option<Duration>,
    },
    Fatal(LlmError),
}

impl HttpClient {
    /// A client using the setup's retry policy.
    pub(crate) fn new(provider: &'static str, setup: &HttpSetup) -> HttpClient {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(setup.policy.timeout))
            // We classify statuses ourselves and need the error bodies.
            .http_status_as_error(false)
            .user_agent(concat!("ksmith/", env!("CARGO_PKG_VERSION")))
            .build();
        HttpClient {
            agent: config.into(),
            policy: setup.policy,
            provider,
            key_hint: setup.key_hint.clone(),
        }
    }

    /// POST `body` as JSON and return the parsed JSON reply, retrying per policy.
    pub(crate) fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        model: &str,
    ) -> Result<JsonReply, LlmError> {
        let payload = body.to_string();
        let max = self.policy.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_once(url, headers, &payload, model, attempt) {
                Ok(body) => {
                    return Ok(JsonReply {
                        body,
                        attempts: attempt,
                    })
                }
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry { kind, detail, .. }) if attempt >= max => {
                    return Err(self.give_up(kind, detail, attempt))
                }
                Err(Failure::Retry { wait, .. }) => {
                    let delay = match wait {
                        Some(w) => w.min(self.policy.retry_after_cap),
                        None => self.policy.backoff(attempt),
                    };
                    std::thread::sleep(delay);
                }
            }
        }
    }

    fn give_up(&self, kind: Transient, detail: String, attempts: u32) -> LlmError {
        let provider = self.provider;
        match kind {
            Transient::RateLimited => LlmError::RateLimited {
                provider,
                attempts,
                detail,
            },
            Transient::Server(status) => LlmError::Server {
                provider,
                status,
                attempts,
                detail,
            },
            Transient::Timeout => LlmError::Timeout {
                provider,
                attempts,
                after_s: self.policy.timeout.as_secs_f64(),
            },
            Transient::Transport => LlmError::Transport {
                provider,
                attempts,
                detail,
            },
        }
    }

    fn try_once(
        &self,
        url: &str,
        headers: &[(&str, String)],
        payload: &str,
        model: &str,
        attempt: u32,
    ) -> Result<Value, Failure> {
        let mut request = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let mut response = request
            .send(payload)
            .map_err(|e| self.transport_failure(e, attempt))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.transport_failure(e, attempt))?;
        self.classify(status, retry_after, &text, model)
    }

    /// Map a status and body to a value or a failure.
    fn classify(
        &self,
        status: u16,
        retry_after: Option<Duration>,
        text: &str,
        model: &str,
    ) -> Result<Value, Failure> {
        let provider = self.provider;
        let excerpt = excerpt(text);
        match status {
            200..=299 => serde_json::from_str(text).map_err(|e| {
                Failure::Fatal(LlmError::BadResponse {
                    provider,
                    detail: format!("HTTP {status} body is not JSON ({e}): {excerpt}"),
                })
            }),
            401 | 403 => Err(Failure::Fatal(LlmError::BadKey {
                provider,
                detail: format!("(HTTP {status}): {excerpt}; {}", self.key_hint),
            })),
            404 => Err(Failure::Fatal(LlmError::UnknownModel {
                provider,
                model: model.to_string(),
                detail: format!("HTTP 404: {excerpt}"),
            })),
            400 if mentions_missing_model(text, model) => {
                Err(Failure::Fatal(LlmError::UnknownModel {
                    provider,
                    model: model.to_string(),
                    detail: format!("HTTP 400: {excerpt}"),
                }))
            }
            429 => Err(Failure::Retry {
                kind: Transient::RateLimited,
                wait: retry_after.or_else(|| retry_delay_in_body(text)),
                detail: format!("HTTP 429: {excerpt}"),
            }),
            // 408 is the server giving up on us; 529 is Anthropic's "overloaded".
            408 | 500 | 502 | 503 | 504 | 529 => Err(Failure::Retry {
                kind: Transient::Server(status),
                wait: retry_after,
                detail: excerpt,
            }),
            _ => Err(Failure::Fatal(LlmError::BadResponse {
                provider,
                detail: format!("HTTP {status}: {excerpt}"),
            })),
        }
    }

    fn transport_failure(&self, err: ureq::Error, attempt: u32) -> Failure {
        let retry = |kind, detail: String| Failure::Retry {
            kind,
            detail,
            wait: None,
        };
        match err {
            ureq::Error::Timeout(_) => retry(Transient::Timeout, "timed out".into()),
            ureq::Error::Io(ref io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                retry(Transient::Timeout, err.to_string())
            }
            ureq::Error::Io(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Protocol(_) => retry(Transient::Transport, err.to_string()),
            ureq::Error::BadUri(uri) => Failure::Fatal(LlmError::Config {
                origin: format!("{} base URL", self.provider),
                detail: format!("invalid URL `{uri}`"),
            }),
            // TLS, bad header values (e.g. a key with odd characters), body limits:
            // trying again would fail the same way.
            other => Failure::Fatal(LlmError::Transport {
                provider: self.provider,
                attempts: attempt,
                detail: other.to_string(),
            }),
        }
    }
}

/// The first `EXCERPT_CHARS` characters of an error body on one line; for JSON
/// error bodies, the `error.message` field, which is what a person wants to read.
pub(crate) fn excerpt(text: &str) -> String {
    let message = serde_json::from_str::<Value>(text).ok().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    let source = message.as_deref().unwrap_or(text);
    let flat: String = source
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.is_empty() {
        return "(empty body)".to_string();
    }
    let mut out: String = flat.chars().take(EXCERPT_CHARS).collect();
    if flat.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

/// Whether a 400 body says the model is unknown or unsupported. Requires the
/// model name or a model-not-found code, so a complaint about another parameter
/// "with this model" is not misread.
fn mentions_missing_model(text: &str, model: &str) -> bool {
    let lower = text.to_lowercase();
    if lower.contains("model_not_found") {
        return true;
    }
    let names_model = !model.is_empty() && lower.contains(&model.to_lowercase());
    names_model
        && [
            "not found",
            "not_found",
            "does not exist",
            "not supported",
            "unsupported",
            "unknown model",
            "invalid model",
            "no such model",
        ]
        .iter()
        .any(|p| lower.contains(p))
}

/// `Retry-After` in seconds (HTTP dates are rare from these APIs; ignored).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Gemini puts its wait in the body: `error.details[].retryDelay = "37s"`.
fn retry_delay_in_body(text: &str) -> Option<Duration> {
    let v: Value = serde_json::from_str(text).ok()?;
    v.pointer("/error/details")?
        .as_array()?
        .iter()
        .find_map(|d| d.get("retryDelay")?.as_str()?.strip_suffix('s'))
        .and_then(parse_retry_after)
}

/// A JSON number with the decimal value the user wrote: widening an `f32` like
/// 0.2 directly gives 0.20000000298023224, so go through its shortest text form.
pub(crate) fn f32_json(v: f32) -> Value {
    v.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_prefer_error_message_and_truncate() {
        assert_eq!(
            excerpt(
                r#"{"error":{"code":401,"message":"API key not valid.\nPlease pass a valid API key."}}"#
            ),
            "API key not valid. Please pass a valid API key."
        );
        assert_eq!(excerpt(r#"{"error":"model missing"}"#), "model missing");
        let long = "x".repeat(1000);
        let e = excerpt(&long);
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert_eq!(excerpt("  "), "(empty body)");
    }

    #[test]
    fn model_not_found_heuristic() {
        assert!(mentions_missing_model(
            r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#,
            "gpt-9"
        ));
        assert!(mentions_missing_model(
            "models/gemini-9 is not found for API version v1beta",
            "gemini-9"
        ));
        assert!(!mentions_missing_model(
            "Unsupported value: 'temperature' does not support 0.2 with this model.",
            "gpt-5"
        ));
        assert!(!mentions_missing_model(
            "max_tokens: too large for gpt-5",
            "gpt-5"
        ));
    }

    #[test]
    fn retry_hints() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        let body = r#"{"error":{"code":429,"details":[{"@type":"x"},{"retryDelay":"37s"}]}}"#;
        assert_eq!(retry_delay_in_body(body), Some(Duration::from_secs(37)));
    }

    #[test]
    fn f32_keeps_decimal_value() {
        assert_eq!(f32_json(0.2).to_string(), "0.2");
        assert_eq!(f32_json(1.0).to_string(), "1.0");
    }
}
