//! The one error type every provider returns.

use std::path::PathBuf;

/// Every way a call can fail.
///
/// `provider` fields hold the provider name as the user typed it in the model
/// spec (`gemini`, `ollama`, ...), so messages point at what they wrote.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A model spec, config file or config value is invalid.
    #[error("{origin}: {detail}")]
    Config {
        /// What was being read: a config file path or a model spec.
        origin: String,
        /// Which field is wrong and why.
        detail: String,
    },

    /// No API key was found in the environment.
    #[error("{provider}: no API key found; set {}", .vars.join(" or "))]
    MissingKey {
        /// Provider name.
        provider: &'static str,
        /// Environment variables that would be read, in order.
        vars: Vec<String>,
    },

    /// The provider rejected the API key (HTTP 401/403).
    #[error("{provider}: API key rejected {detail}")]
    BadKey {
        /// Provider name.
        provider: &'static str,
        /// Status, body excerpt and which key to check.
        detail: String,
    },

    /// The provider does not know or does not serve the model.
    #[error("{provider}: unknown or unavailable model `{model}`: {detail}")]
    UnknownModel {
        /// Provider name.
        provider: &'static str,
        /// Model as given in the spec.
        model: String,
        /// Status and body excerpt.
        detail: String,
    },

    /// Still rate limited (HTTP 429) after all attempts.
    #[error("{provider}: still rate limited after {attempts} attempt(s): {detail}")]
    RateLimited {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// Body excerpt of the last reply.
        detail: String,
    },

    /// Still failing with a server error (HTTP 5xx) after all attempts.
    #[error("{provider}: server error (HTTP {status}) after {attempts} attempt(s): {detail}")]
    Server {
        /// Provider name.
        provider: &'static str,
        /// HTTP status of the last reply.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// Body excerpt of the last reply.
        detail: String,
    },

    /// No complete reply within the request timeout, on every attempt.
    #[error(
        "{provider}: no complete reply within {after_s:.1} s on each of {attempts} attempt(s)"
    )]
    Timeout {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// Per-attempt timeout in seconds.
        after_s: f64,
    },

    /// The connection failed (refused, reset, DNS, TLS, protocol).
    #[error("{provider}: connection failed after {attempts} attempt(s): {detail}")]
    Transport {
        /// Provider name.
        provider: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The underlying error.
        detail: String,
    },

    /// The provider answered, but not with something we can use.
    #[error("{provider}: unexpected response: {detail}")]
    BadResponse {
        /// Provider name.
        provider: &'static str,
        /// What was wrong, with a body excerpt.
        detail: String,
    },

    /// A `command:` provider failed to run, exited non-zero or timed out.
    #[error("command `{command}` failed: {detail}")]
    Command {
        /// The shell command.
        command: String,
        /// Exit status or timeout, with the tail of stderr.
        detail: String,
    },

    /// A `manual:` provider could not write the prompt, read the reply, or timed out.
    #[error("manual reply {}: {detail}", .path.display())]
    Manual {
        /// The file involved.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },

    /// A `scripted:` file is invalid or the run diverged from the script.
    #[error("scripted replies {}{}: {detail}", .file.display(), entry_suffix(*.index))]
    Scripted {
        /// The script file.
        file: PathBuf,
        /// The `[[reply]]` entry (0-based), when one is involved.
        index: Option<usize>,
        /// What went wrong.
        detail: String,
    },
}

fn entry_suffix(index: Option<usize>) -> String {
    index.map(|i| format!(" entry {i}")).unwrap_or_default()
}

impl LlmError {
    /// True when the provider cannot serve this run as configured (an invalid spec or config, a
    /// missing or rejected key, an unknown model): no retry or other call will succeed until the
    /// user fixes it.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LlmError::Config { .. }
                | LlmError::MissingKey { .. }
                | LlmError::BadKey { .. }
                | LlmError::UnknownModel { .. }
        )
    }

    /// True for transient failures (rate limits, server errors, timeouts,
    /// connection problems) that may succeed if the whole call is tried again later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::Timeout { .. }
                | LlmError::Transport { .. }
        )
    }
}
