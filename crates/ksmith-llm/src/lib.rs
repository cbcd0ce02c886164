//! LLM providers behind one small trait.
//!
//! Every agent call in ksmith is one [`Request`] (system prompt, prompt, token
//! limit) answered by one [`Reply`] (text, token usage, latency, attempts).
//! A [`Provider`] turns the first into the second; [`open`] picks the provider
//! a [`ModelSpec`] such as `gemini:gemini-2.5-pro` or `ollama:qwen3:8b` names,
//! using settings from a [`Config`].
//!
//! Hosted models speak one of three wire formats (Gemini `generateContent`,
//! Anthropic Messages, OpenAI Chat Completions, the last also spoken by Ollama,
//! vLLM, llama.cpp and LM Studio). We map those by hand over a blocking HTTP
//! client rather than use an async multi-provider crate: the formats are small,
//! we need exact control over retries, timeouts, error classification and
//! token accounting (they feed cost reports and resumable runs), and the rest
//! of ksmith is synchronous, so pulling in an async runtime would buy nothing.
//!
//! Besides HTTP models there are `command:` (any program on stdin/stdout),
//! `manual:` (a person answering through files) and `scripted:` (canned,
//! checked replies for tests).

mod anthropic;
mod command;
mod config;
mod error;
mod fields;
mod gemini;
mod http;
mod manual;
mod openai;
mod scripted;
mod spec;

use std::time::Duration;

pub use command::kill_running as kill_running_commands;
pub use config::{ClusterConfig, Config, Price, ProviderConfig, RetryPolicy};
pub use error::LlmError;
pub use spec::{CompatAlias, ModelSpec, ProviderKind, VALID_PROVIDERS};

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// Agent role making the call, e.g. "planner".
    pub role: String,
    /// 0-based index of this call in its run.
    pub seq: u64,
    /// System prompt (may be empty).
    pub system: String,
    /// User prompt.
    pub prompt: String,
    /// Output token limit.
    pub max_tokens: u32,
    /// Sampling temperature; `None` leaves the provider default.
    pub temperature: Option<f32>,
}

/// The model's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The reply text (may be empty).
    pub text: String,
    /// Input tokens billed (or estimated).
    pub tokens_in: u64,
    /// Output tokens billed, including thinking tokens where reported (or estimated).
    pub tokens_out: u64,
    /// True when the counts are estimates (characters / 4), not provider-reported.
    pub tokens_estimated: bool,
    /// The model that answered, as the provider reports it when it does.
    pub model: String,
    /// Wall time of the call, all attempts and waits included.
    pub latency: Duration,
    /// Tries it took (1 unless transient errors were retried).
    pub attempts: u32,
}

/// A model behind one call.
pub trait Provider: Send {
    /// One line saying what this is and where it goes, for logs.
    fn describe(&self) -> String;
    /// Answer one request.
    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError>;
}

/// Open the provider a spec names.
///
/// Fails early on what can be checked without a call: a missing API key, a
/// missing base URL for `openai-compat`, an invalid `scripted:` file.
pub fn open(spec: &ModelSpec, cfg: &Config) -> Result<Box<dyn Provider>, LlmError> {
    Ok(match spec.provider {
        ProviderKind::Gemini => Box::new(gemini::Gemini::open(spec, cfg)?),
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic::open(spec, cfg)?),
        ProviderKind::OpenAi | ProviderKind::OpenAiCompat => {
            Box::new(openai::OpenAi::open(spec, cfg)?)
        }
        ProviderKind::Command => Box::new(command::CommandProvider::open(spec, cfg)),
        ProviderKind::Manual => Box::new(manual::Manual::open(spec, cfg)),
        ProviderKind::Scripted => Box::new(scripted::Scripted::open(spec)?),
    })
}

/// Checks, without calling the model, everything about `spec` that would otherwise fail at
/// its first call: the API key (naming the variable to set), the base URL and its form, a
/// `scripted:` file that must read and parse, a `manual:` directory that must be creatable, a
/// `command:` whose program must exist. Cheap and free: no network.
pub fn preflight(spec: &ModelSpec, cfg: &Config) -> Result<(), LlmError> {
    match spec.provider {
        ProviderKind::Manual => {
            let dir = std::path::Path::new(&spec.model);
            std::fs::create_dir_all(dir).map_err(|e| LlmError::Config {
                origin: format!("model spec `{spec}`"),
                detail: format!("manual: cannot create directory {}: {e}", dir.display()),
            })?;
        }
        ProviderKind::Command => command::check_program(&spec.model)?,
        _ => {}
    }
    open(spec, cfg).map(drop)
}

/// Rough token count: one token per four characters, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Estimated (input, output) tokens of a call that reported none.
pub(crate) fn estimate_usage(req: &Request, reply_text: &str) -> (u64, u64) {
    (
        estimate_tokens(&req.system) + estimate_tokens(&req.prompt),
        estimate_tokens(reply_text),
    )
}
