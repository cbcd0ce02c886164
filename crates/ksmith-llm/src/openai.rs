//! OpenAI Chat Completions, and servers that speak the same format.

use std::time::Instant;

use serde_json::{json, Value};

use crate::config::Config;
use crate::http::{f32_json, HttpClient, Parsed};
use crate::{LlmError, ModelSpec, Provider, ProviderKind, Reply, Request};

/// An OpenAI or OpenAI-compatible model.
pub(crate) struct OpenAi {
    http: HttpClient,
    base_url: String,
    /// `None` for compatible servers run without a key.
    key: Option<String>,
    spec: ModelSpec,
}

impl OpenAi {
    /// Resolve URL, key and policy; fails on a missing key (OpenAI only).
    pub(crate) fn open(spec: &ModelSpec, cfg: &Config) -> Result<OpenAi, LlmError> {
        let setup = cfg.http_setup(spec)?;
        Ok(OpenAi {
            http: HttpClient::new(spec.label(), &setup),
            key: setup.key.clone(),
            base_url: setup.base_url,
            spec: spec.clone(),
        })
    }
}

/// The request body for one call; `compat` selects `max_tokens` over
/// `max_completion_tokens`, which OpenAI's reasoning models require but many
/// compatible servers do not understand.
pub(crate) fn body(model: &str, req: &Request, compat: bool) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({ "role": "system", "content": req.system }));
    }
    messages.push(json!({ "role": "user", "content": req.prompt }));
    let mut body = json!({ "model": model, "messages": messages });
    let limit_field = if compat {
        "max_tokens"
    } else {
        "max_completion_tokens"
    };
    body[limit_field] = json!(req.max_tokens);
    if let Some(t) = req.temperature {
        body["temperature"] = f32_json(t);
    }
    body
}

/// Text, tokens (in, out; `None` if absent) and model from a reply.
pub(crate) fn parse(v: &Value) -> Result<Parsed, String> {
    let Some(choice) = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(format!(
            "no choices in reply: {}",
            crate::http::excerpt(&v.to_string())
        ));
    };
    let message = choice.get("message");
    let text = match message.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        _ => {
            if let Some(refusal) = message
                .and_then(|m| m.get("refusal"))
                .and_then(Value::as_str)
            {
                return Err(format!("model refused: {refusal}"));
            }
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            return Err(format!(
                "choice has no text content (finish_reason {finish})"
            ));
        }
    };
    let usage = v.get("usage").and_then(|u| {
        Some((
            u.get("prompt_tokens")?.as_u64()?,
            u.get("completion_tokens")?.as_u64()?,
        ))
    });
    let model = v.get("model").and_then(Value::as_str).map(str::to_string);
    Ok(Parsed { text, usage, model })
}

impl Provider for OpenAi {
    fn describe(&self) -> String {
        format!("{} via {}", self.spec, self.base_url)
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        let url = format!("{}/chat/completions", self.base_url);
        let headers: Vec<(&str, String)> = self
            .key
            .iter()
            .map(|k| ("authorization", format!("Bearer {k}")))
            .collect();
        let compat = self.spec.provider == ProviderKind::OpenAiCompat;
        let model = &self.spec.model;
        let reply = self
            .http
            .post_json(&url, &headers, &body(model, req, compat), model)?;
        let parsed = parse(&reply.body).map_err(|detail| LlmError::BadResponse {
            provider: self.spec.label(),
            detail,
        })?;
        Ok(parsed.into_reply(req, &self.spec.model, reply.attempts, started))
    }
}
