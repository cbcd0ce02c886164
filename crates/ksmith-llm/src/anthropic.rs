//! Anthropic Messages API.

use std::time::Instant;

use serde_json::{json, Value};

use crate::config::Config;
use crate::http::{f32_json, HttpClient, Parsed};
use crate::{LlmError, ModelSpec, Provider, Reply, Request};

/// The API version header value this mapping was written against.
const API_VERSION: &str = "2023-06-01";

/// An Anthropic model.
pub(crate) struct Anthropic {
    http: HttpClient,
    base_url: String,
    key: String,
    spec: ModelSpec,
}

impl Anthropic {
    /// Resolve URL, key and policy; fails on a missing key.
    pub(crate) fn open(spec: &ModelSpec, cfg: &Config) -> Result<Anthropic, LlmError> {
        let setup = cfg.http_setup(spec)?;
        Ok(Anthropic {
            http: HttpClient::new(spec.label(), &setup),
            key: setup.key.clone().unwrap_or_default(),
            base_url: setup.base_url,
            spec: spec.clone(),
        })
    }
}

/// The request body for one call.
pub(crate) fn body(model: &str, req: &Request) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "messages": [{ "role": "user", "content": req.prompt }],
    });
    if !req.system.is_empty() {
        body["system"] = json!(req.system);
    }
    if let Some(t) = req.temperature {
        body["temperature"] = f32_json(t);
    }
    body
}

/// Text, tokens (in, out; `None` if absent) and model from a reply.
pub(crate) fn parse(v: &Value) -> Result<Parsed, String> {
    let Some(content) = v.get("content").and_then(Value::as_array) else {
        return Err(format!(
            "no content array in reply: {}",
            crate::http::excerpt(&v.to_string())
        ));
    };
    let text: String = content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    let usage = v.get("usage").and_then(|u| {
        Some((
            u.get("input_tokens")?.as_u64()?,
            u.get("output_tokens")?.as_u64()?,
        ))
    });
    let model = v.get("model").and_then(Value::as_str).map(str::to_string);
    Ok(Parsed { text, usage, model })
}

impl Provider for Anthropic {
    fn describe(&self) -> String {
        format!("{} via {}", self.spec, self.base_url)
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        let url = format!("{}/v1/messages", self.base_url);
        let headers = [
            ("x-api-key", self.key.clone()),
            ("anthropic-version", API_VERSION.to_string()),
        ];
        let model = &self.spec.model;
        let reply = self
            .http
            .post_json(&url, &headers, &body(model, req), model)?;
        let parsed = parse(&reply.body).map_err(|detail| LlmError::BadResponse {
            provider: self.spec.label(),
            detail,
        })?;
        Ok(parsed.into_reply(req, &self.spec.model, reply.attempts, started))
    }
}
