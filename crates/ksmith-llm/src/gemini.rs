//! Google Gemini `generateContent`.

use std::time::Instant;

use serde_json::{json, Value};

use crate::config::Config;
use crate::http::{f32_json, HttpClient, Parsed};
use crate::{LlmError, ModelSpec, Provider, Reply, Request};

/// A Gemini model.
pub(crate) struct Gemini {
    http: HttpClient,
    base_url: String,
    key: String,
    spec: ModelSpec,
}

impl Gemini {
    /// Resolve URL, key and policy; fails on a missing key.
    pub(crate) fn open(spec: &ModelSpec, cfg: &Config) -> Result<Gemini, LlmError> {
        let setup = cfg.http_setup(spec)?;
        Ok(Gemini {
            http: HttpClient::new(spec.label(), &setup),
            key: setup.key.clone().unwrap_or_default(),
            base_url: setup.base_url,
            spec: spec.clone(),
        })
    }
}

/// The request body for one call.
pub(crate) fn body(req: &Request) -> Value {
    let mut generation = json!({ "maxOutputTokens": req.max_tokens });
    if let Some(t) = req.temperature {
        generation["temperature"] = f32_json(t);
    }
    let mut body = json!({
        "contents": [{ "role": "user", "parts": [{ "text": req.prompt }] }],
        "generationConfig": generation,
    });
    // An empty system part is rejected by the API, so leave it out entirely.
    if !req.system.is_empty() {
        body["systemInstruction"] = json!({ "parts": [{ "text": req.system }] });
    }
    body
}

/// Text, tokens (in, out; `None` if absent) and model version from a reply.
pub(crate) fn parse(v: &Value) -> Result<Parsed, String> {
    let candidates = v.get("candidates").and_then(Value::as_array);
    let Some(first) = candidates.and_then(|c| c.first()) else {
        let reason = v
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str);
        return Err(match reason {
            Some(r) => {
                format!("prompt blocked by Gemini (blockReason {r}); no candidates returned")
            }
            None => format!(
                "no candidates in reply: {}",
                crate::http::excerpt(&v.to_string())
            ),
        });
    };
    let finish = first
        .get("finishReason")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let Some(parts) = first.pointer("/content/parts").and_then(Value::as_array) else {
        return Err(format!(
            "candidate has no content (finishReason {finish}); if MAX_TOKENS, raise max_tokens"
        ));
    };
    let mut text = String::new();
    for part in parts {
        // Thought summaries are not the answer.
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
    }
    let usage = v.get("usageMetadata").and_then(|u| {
        let input = u.get("promptTokenCount")?.as_u64()?;
        let out = u
            .get("candidatesTokenCount")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        // Thinking tokens are billed as output.
        let thoughts = u
            .get("thoughtsTokenCount")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Some((input, out + thoughts))
    });
    let model = v
        .get("modelVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Parsed { text, usage, model })
}

impl Provider for Gemini {
    fn describe(&self) -> String {
        format!("{} via {}", self.spec, self.base_url)
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        let model = self.spec.model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{model}:generateContent", self.base_url);
        let headers = [("x-goog-api-key", self.key.clone())];
        let reply = self.http.post_json(&url, &headers, &body(req), model)?;
        let parsed = parse(&reply.body).map_err(|detail| LlmError::BadResponse {
            provider: self.spec.label(),
            detail,
        })?;
        Ok(parsed.into_reply(req, &self.spec.model, reply.attempts, started))
    }
}
