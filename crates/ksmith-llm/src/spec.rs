//! `provider:model` specs as typed on the command line.

use std::fmt;
use std::str::FromStr;

use crate::LlmError;

/// Which provider a model spec names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Google Gemini API (`generateContent`).
    Gemini,
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions API.
    OpenAi,
    /// Any server speaking the OpenAI Chat Completions format (Ollama, vLLM, ...).
    OpenAiCompat,
    /// A shell command that reads the prompt on stdin and prints the reply.
    Command,
    /// A person answering through files in a directory.
    Manual,
    /// Canned replies from a TOML file, for tests.
    Scripted,
}

impl ProviderKind {
    /// The spelling used before the colon in a model spec.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Gemini => "gemini",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompat => "openai-compat",
            ProviderKind::Command => "command",
            ProviderKind::Manual => "manual",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// True for providers reached over HTTP.
    pub fn is_http(self) -> bool {
        matches!(
            self,
            ProviderKind::Gemini
                | ProviderKind::Anthropic
                | ProviderKind::OpenAi
                | ProviderKind::OpenAiCompat
        )
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A well-known local OpenAI-compatible server, named instead of `openai-compat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompatAlias {
    /// Ollama, default `http://localhost:11434/v1`.
    Ollama,
    /// vLLM, default `http://localhost:8000/v1`.
    Vllm,
    /// llama.cpp server, default `http://localhost:8080/v1`.
    LlamaCpp,
    /// LM Studio, default `http://localhost:1234/v1`.
    LmStudio,
}

impl CompatAlias {
    /// Every alias, in the order shown to users.
    pub const ALL: [CompatAlias; 4] = [
        CompatAlias::Ollama,
        CompatAlias::Vllm,
        CompatAlias::LlamaCpp,
        CompatAlias::LmStudio,
    ];

    /// The spelling used before the colon in a model spec.
    pub fn name(self) -> &'static str {
        match self {
            CompatAlias::Ollama => "ollama",
            CompatAlias::Vllm => "vllm",
            CompatAlias::LlamaCpp => "llamacpp",
            CompatAlias::LmStudio => "lmstudio",
        }
    }

    /// The server's usual local address.
    pub fn default_base_url(self) -> &'static str {
        match self {
            CompatAlias::Ollama => "http://localhost:11434/v1",
            CompatAlias::Vllm => "http://localhost:8000/v1",
            CompatAlias::LlamaCpp => "http://localhost:8080/v1",
            CompatAlias::LmStudio => "http://localhost:1234/v1",
        }
    }
}

/// Every spelling accepted before the colon, for error messages.
pub const VALID_PROVIDERS: &str =
    "gemini, anthropic, openai, openai-compat, ollama, vllm, llamacpp, lmstudio, command, manual, scripted";

/// `provider:model` as given on the command line.
///
/// For `command:`, `manual:` and `scripted:` the "model" is the shell command,
/// directory or file respectively.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    /// The provider.
    pub provider: ProviderKind,
    /// Everything after the first colon.
    pub model: String,
    /// Set when the user wrote `ollama:`, `vllm:`, ... (only with `OpenAiCompat`),
    /// so the spec prints back the way it was typed.
    pub base_alias: Option<CompatAlias>,
}

impl ModelSpec {
    /// A spec without an alias.
    pub fn new(provider: ProviderKind, model: impl Into<String>) -> ModelSpec {
        ModelSpec {
            provider,
            model: model.into(),
            base_alias: None,
        }
    }

    /// Parse `provider:model`; the model is everything after the first colon.
    pub fn parse(s: &str) -> Result<ModelSpec, LlmError> {
        let bad = |detail: String| LlmError::Config {
            origin: format!("model spec `{s}`"),
            detail,
        };
        let Some((prefix, model)) = s.split_once(':') else {
            return Err(bad(format!(
                "expected PROVIDER:MODEL, e.g. gemini:gemini-2.5-pro; providers: {VALID_PROVIDERS}"
            )));
        };
        let (provider, base_alias) = match prefix {
            "gemini" => (ProviderKind::Gemini, None),
            "anthropic" => (ProviderKind::Anthropic, None),
            "openai" => (ProviderKind::OpenAi, None),
            "openai-compat" => (ProviderKind::OpenAiCompat, None),
            "command" => (ProviderKind::Command, None),
            "manual" => (ProviderKind::Manual, None),
            "scripted" => (ProviderKind::Scripted, None),
            other => match CompatAlias::ALL.iter().find(|a| a.name() == other) {
                Some(&alias) => (ProviderKind::OpenAiCompat, Some(alias)),
                None => {
                    return Err(bad(format!(
                        "unknown provider `{other}`; valid providers: {VALID_PROVIDERS}"
                    )))
                }
            },
        };
        if model.trim().is_empty() {
            let what = match provider {
                ProviderKind::Command => "a shell command",
                ProviderKind::Manual => "a directory",
                ProviderKind::Scripted => "a file",
                _ => "a model name",
            };
            return Err(bad(format!(
                "`{prefix}:` needs {what} after the colon; valid providers: {VALID_PROVIDERS}"
            )));
        }
        Ok(ModelSpec {
            provider,
            model: model.to_string(),
            base_alias,
        })
    }

    /// The prefix this spec prints with: the alias if any, else the provider name.
    pub fn label(&self) -> &'static str {
        match (self.provider, self.base_alias) {
            (ProviderKind::OpenAiCompat, Some(alias)) => alias.name(),
            (kind, _) => kind.name(),
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.label(), self.model)
    }
}

impl FromStr for ModelSpec {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<ModelSpec, LlmError> {
        ModelSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_provider_and_round_trips() {
        let cases = [
            ("gemini:gemini-2.5-pro", ProviderKind::Gemini, None),
            ("anthropic:claude-sonnet-4-5", ProviderKind::Anthropic, None),
            ("openai:gpt-5", ProviderKind::OpenAi, None),
            ("openai-compat:qwen3:32b", ProviderKind::OpenAiCompat, None),
            (
                "ollama:qwen2.5-coder:7b",
                ProviderKind::OpenAiCompat,
                Some(CompatAlias::Ollama),
            ),
            (
                "vllm:Qwen/Qwen3-8B",
                ProviderKind::OpenAiCompat,
                Some(CompatAlias::Vllm),
            ),
            (
                "llamacpp:any",
                ProviderKind::OpenAiCompat,
                Some(CompatAlias::LlamaCpp),
            ),
            (
                "lmstudio:m",
                ProviderKind::OpenAiCompat,
                Some(CompatAlias::LmStudio),
            ),
            (
                "command:python3 agent.py --x=1:2",
                ProviderKind::Command,
                None,
            ),
            ("manual:/tmp/replies", ProviderKind::Manual, None),
            ("scripted:tests/s.toml", ProviderKind::Scripted, None),
        ];
        for (text, kind, alias) in cases {
            let spec = ModelSpec::parse(text).unwrap();
            assert_eq!(spec.provider, kind, "{text}");
            assert_eq!(spec.base_alias, alias, "{text}");
            assert_eq!(spec.to_string(), text);
            assert_eq!(text.parse::<ModelSpec>().unwrap(), spec);
        }
        let spec = ModelSpec::parse("ollama:qwen2.5-coder:7b").unwrap();
        assert_eq!(spec.model, "qwen2.5-coder:7b");
        let spec = ModelSpec::parse("command:python3 agent.py --x=1:2").unwrap();
        assert_eq!(spec.model, "python3 agent.py --x=1:2");
    }

    #[test]
    fn rejects_unknown_provider_and_empty_model() {
        for bad in [
            "gpt:4",
            "Gemini:x",
            "gemini",
            "gemini:",
            "command:   ",
            ":x",
        ] {
            let err = ModelSpec::parse(bad).unwrap_err();
            assert!(matches!(err, LlmError::Config { .. }), "{bad}: {err:?}");
            let msg = err.to_string();
            assert!(msg.contains(bad), "{msg}");
            assert!(msg.contains(VALID_PROVIDERS), "{msg}");
        }
    }

    #[test]
    fn new_has_no_alias() {
        let spec = ModelSpec::new(ProviderKind::OpenAi, "gpt-5");
        assert_eq!(spec.to_string(), "openai:gpt-5");
    }
}
