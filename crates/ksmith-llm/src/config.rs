//! Provider settings, retry policy and prices, from an optional TOML file.
//!
//! Precedence for base URLs: built-in default < config file (or a value set in
//! code) < environment variable `KSMITH_<PROVIDER>_BASE_URL`. The environment
//! wins because it is the quickest way to redirect one run without editing a
//! file that may be shared.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Table;

use crate::fields;
use crate::spec::{ModelSpec, ProviderKind};
use crate::LlmError;

/// Settings for one provider section, `[providers.NAME]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderConfig {
    /// Overrides the API base URL (tests point providers at a local server this way).
    pub base_url: Option<String>,
    /// Read the API key from this environment variable instead of the usual one.
    pub api_key_env: Option<String>,
    /// A literal API key; settable from code only (tests), never from a file,
    /// so keys do not end up in committed config files.
    pub api_key: Option<String>,
    /// Per-request timeout in seconds (HTTP), or whole-call timeout (command, manual).
    pub timeout_s: Option<f64>,
    /// Attempts per call before giving up on transient errors (HTTP only).
    pub max_attempts: Option<u32>,
}

/// USD list price of a model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// USD per million input tokens.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// Zero cost (local models, commands, people, scripts).
    pub const FREE: Price = Price {
        input_per_mtok: 0.0,
        output_per_mtok: 0.0,
    };

    /// Cost in USD of one call.
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input_per_mtok + tokens_out as f64 * self.output_per_mtok) / 1e6
    }
}

/// How HTTP providers retry transient failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries per call, including the first (at least 1).
    pub max_attempts: u32,
    /// First backoff delay; doubles each retry, with jitter.
    pub base_delay: Duration,
    /// Upper bound of the exponential backoff.
    pub max_delay: Duration,
    /// Limit for one request, from connecting to the last body byte.
    pub timeout: Duration,
    /// Upper bound on a server's `Retry-After` we are willing to honour.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            timeout: Duration::from_secs(300),
            retry_after_cap: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Backoff before retry number `retry` (1 = first retry): exponential with
    /// "equal jitter" (half fixed, half random) so parallel runs spread out.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let full = exp.min(self.max_delay);
        let half = full / 2;
        half + half.mul_f64(random_unit())
    }
}

/// A number in [0, 1) that differs between calls; std's `RandomState` is
/// randomly keyed, which is plenty for jitter and avoids a `rand` dependency.
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Provider names accepted as `[providers.NAME]`.
const PROVIDER_SECTIONS: &[&str] = &[
    "gemini",
    "anthropic",
    "openai",
    "openai-compat",
    "ollama",
    "vllm",
    "llamacpp",
    "lmstudio",
    "command",
    "manual",
];

/// Default whole-call timeout of `command:` providers.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);
/// Default wait for a person to answer a `manual:` prompt.
const MANUAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Built-in list prices (USD per million tokens) as of 2026; override in config
/// with `[prices."provider:model"]`. Standard tier, prompts up to 200k tokens.
const BUILTIN_PRICES: &[(ProviderKind, &str, f64, f64)] = &[
    (ProviderKind::Gemini, "gemini-3.1-pro-preview", 2.0, 12.0),
    (ProviderKind::Gemini, "gemini-3.1-pro", 2.0, 12.0),
    (ProviderKind::Gemini, "gemini-3-pro-preview", 2.0, 12.0),
    (ProviderKind::Gemini, "gemini-3-flash-preview", 0.5, 3.0),
    (ProviderKind::Gemini, "gemini-2.5-pro", 1.25, 10.0),
    (ProviderKind::Gemini, "gemini-2.5-flash", 0.30, 2.50),
    (ProviderKind::Gemini, "gemini-2.5-flash-lite", 0.10, 0.40),
    (ProviderKind::Anthropic, "claude-opus-4-7", 5.0, 25.0),
    (ProviderKind::Anthropic, "claude-opus-4-6", 5.0, 25.0),
    (ProviderKind::Anthropic, "claude-opus-4-5", 5.0, 25.0),
    (ProviderKind::Anthropic, "claude-opus-4-1", 15.0, 75.0),
    (ProviderKind::Anthropic, "claude-sonnet-4-6", 3.0, 15.0),
    (ProviderKind::Anthropic, "claude-sonnet-4-5", 3.0, 15.0),
    (ProviderKind::Anthropic, "claude-sonnet-4-0", 3.0, 15.0),
    (ProviderKind::Anthropic, "claude-haiku-4-5", 1.0, 5.0),
    (ProviderKind::OpenAi, "gpt-5.4", 2.50, 15.0),
    (ProviderKind::OpenAi, "gpt-5.2", 1.75, 14.0),
    (ProviderKind::OpenAi, "gpt-5.1", 1.25, 10.0),
    (ProviderKind::OpenAi, "gpt-5", 1.25, 10.0),
    (ProviderKind::OpenAi, "gpt-5-mini", 0.25, 2.0),
    (ProviderKind::OpenAi, "gpt-5-nano", 0.05, 0.40),
    (ProviderKind::OpenAi, "gpt-4.1", 2.0, 8.0),
    (ProviderKind::OpenAi, "o3", 2.0, 8.0),
];

/// True if `model` is `key` or `key` plus a date/version suffix made of digits
/// and dashes (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`), but not a
/// different model sharing a prefix (`gpt-5-mini` is not `gpt-5`).
fn model_matches(key: &str, model: &str) -> bool {
    match model.strip_prefix(key) {
        Some("") => true,
        Some(rest) => rest.starts_with('-') && rest.chars().all(|c| c.is_ascii_digit() || c == '-'),
        None => false,
    }
}

/// All settings this crate reads; `Config::default()` needs no file.
///
/// Base URLs resolve as: built-in default < `base_url` here (from the file or
/// set in code) < environment `KSMITH_<NAME>_BASE_URL` (`KSMITH_GEMINI_BASE_URL`,
/// `KSMITH_OPENAI_COMPAT_BASE_URL`, `KSMITH_OLLAMA_BASE_URL`, ...). API keys come
/// from `api_key` (code only), else the `api_key_env` variable, else the usual
/// variables (`GEMINI_API_KEY`/`GOOGLE_API_KEY`, `ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`; optional `KSMITH_OPENAI_COMPAT_API_KEY` for `openai-compat`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// `[providers.NAME]` sections keyed by provider name (`gemini`, `ollama`, `command`, ...).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[prices."provider:model"]` overrides keyed by the spec as typed.
    pub prices: BTreeMap<String, Price>,
    /// `[retry]`: policy for all HTTP providers before per-provider overrides.
    pub retry: RetryPolicy,
    /// `[cluster]`: where candidates are judged (docs/cluster.md).
    pub cluster: ClusterConfig,
    /// The file this was loaded from, if any.
    pub source: Option<PathBuf>,
}

/// `[cluster]`: a Ray cluster to judge on instead of this machine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterConfig {
    /// `address = "ray://HOST:PORT"` (or `HOST:PORT`, `auto`).
    pub address: Option<String>,
    /// `fingerprint = "..."`: judge on the devices of this machine fingerprint only.
    pub fingerprint: Option<String>,
}

/// What an HTTP provider needs, resolved from config and environment.
#[derive(Debug, Clone)]
pub(crate) struct HttpSetup {
    pub(crate) base_url: String,
    pub(crate) key: Option<String>,
    /// Where to look when the key is rejected, e.g. "check GEMINI_API_KEY".
    pub(crate) key_hint: String,
    pub(crate) policy: RetryPolicy,
}

impl Config {
    /// Load a TOML config file; errors name the file, the field and the problem.
    pub fn load(path: &Path) -> Result<Config, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|e| LlmError::Config {
            origin: path.display().to_string(),
            detail: format!("cannot read config file: {e}"),
        })?;
        let mut cfg = Config::parse(&text, &path.display().to_string())?;
        cfg.source = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Parse config TOML; `origin` names the text in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Config, LlmError> {
        let bad = |detail: String| LlmError::Config {
            origin: origin.to_string(),
            detail,
        };
        let root: Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(format!("invalid TOML: {}", e.to_string().trim())))?;
        parse_root(&root).map_err(bad)
    }

    /// Load `$KSMITH_CONFIG`, else `./ksmith.toml`, else the user config
    /// (`$XDG_CONFIG_HOME/ksmith/config.toml`, `~/.config/ksmith/config.toml`),
    /// else the defaults.
    pub fn discover() -> Result<Config, LlmError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        match discover_path(&|k| std::env::var_os(k), &cwd) {
            Some(path) => Config::load(&path),
            None => Ok(Config::default()),
        }
    }

    /// Set a provider section, for building configs in code.
    pub fn with_provider(mut self, name: &str, settings: ProviderConfig) -> Config {
        self.providers.insert(name.to_string(), settings);
        self
    }

    /// The `[providers.NAME]` section, if present.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.get(name)
    }

    /// Price of a model: config override, else built-in list price; free for
    /// OpenAI-compatible servers (assumed local) and command/manual/scripted;
    /// `None` for a hosted model we have no price for.
    pub fn price(&self, spec: &ModelSpec) -> Option<Price> {
        if let Some(exact) = self.prices.get(&spec.to_string()) {
            return Some(*exact);
        }
        let label = spec.label();
        let configured = self.prices.iter().find_map(|(key, price)| {
            let (l, m) = key.split_once(':')?;
            (l == label && model_matches(m, &spec.model)).then_some(*price)
        });
        if configured.is_some() {
            return configured;
        }
        match spec.provider {
            ProviderKind::OpenAiCompat
            | ProviderKind::Command
            | ProviderKind::Manual
            | ProviderKind::Scripted => Some(Price::FREE),
            kind => BUILTIN_PRICES
                .iter()
                .filter(|(k, ..)| *k == kind)
                .find(|(_, m, ..)| model_matches(m, &spec.model))
                .map(|&(_, _, input, output)| Price {
                    input_per_mtok: input,
                    output_per_mtok: output,
                }),
        }
    }

    /// The retry policy for one provider: `[retry]`, then that provider's
    /// `timeout_s` and `max_attempts`.
    pub fn retry_for(&self, name: &str) -> RetryPolicy {
        let mut policy = self.retry;
        if let Some(p) = self.provider(name) {
            if let Some(t) = p.timeout_s.filter(|t| t.is_finite() && *t > 0.0) {
                policy.timeout = Duration::from_secs_f64(t);
            }
            if let Some(n) = p.max_attempts {
                policy.max_attempts = n;
            }
        }
        policy.max_attempts = policy.max_attempts.max(1);
        policy
    }

    /// Whole-call timeout of `command:` or `manual:` providers.
    pub(crate) fn call_timeout(&self, kind: ProviderKind) -> Duration {
        let default = match kind {
            ProviderKind::Manual => MANUAL_TIMEOUT,
            _ => COMMAND_TIMEOUT,
        };
        self.provider(kind.name())
            .and_then(|p| p.timeout_s)
            .filter(|t| t.is_finite() && *t > 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(default)
    }

    /// Base URL, key and retry policy for an HTTP provider.
    pub(crate) fn http_setup(&self, spec: &ModelSpec) -> Result<HttpSetup, LlmError> {
        self.http_setup_with(spec, &|k| std::env::var_os(k))
    }

    fn http_setup_with(
        &self,
        spec: &ModelSpec,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<HttpSetup, LlmError> {
        let name = spec.label();
        let section = self.provider(name);
        let env_str = |k: &str| {
            env(k)
                .and_then(|v| v.into_string().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };

        let base_var = format!("KSMITH_{}_BASE_URL", name.to_uppercase().replace('-', "_"));
        let default_base = match (spec.provider, spec.base_alias) {
            (ProviderKind::Gemini, _) => Some("https://generativelanguage.googleapis.com"),
            (ProviderKind::Anthropic, _) => Some("https://api.anthropic.com"),
            (ProviderKind::OpenAi, _) => Some("https://api.openai.com/v1"),
            (ProviderKind::OpenAiCompat, Some(alias)) => Some(alias.default_base_url()),
            _ => None,
        };
        let (base_url, base_origin) = env_str(&base_var)
            .map(|u| (u, base_var.clone()))
            .or_else(|| {
                section
                    .and_then(|s| s.base_url.clone())
                    .map(|u| (u, format!("base_url in [providers.{name}]")))
            })
            .or_else(|| default_base.map(|u| (u.to_string(), "the default".to_string())))
            .ok_or_else(|| LlmError::Config {
                origin: format!("model spec `{spec}`"),
                detail: format!(
                    "{name} needs a base URL: set {base_var} or base_url in [providers.{name}] \
                     of the config file (e.g. http://localhost:8000/v1)"
                ),
            })?;
        let base_url = base_url.trim_end_matches('/').to_string();
        if let Err(why) = check_base_url(&base_url) {
            return Err(LlmError::Config {
                origin: format!("model spec `{spec}`"),
                detail: format!(
                    "{name} base URL `{base_url}` (from {base_origin}) {why}; set {base_var} \
                     to e.g. http://localhost:8000/v1"
                ),
            });
        }

        // Hosted APIs always need a key; OpenAI-compatible servers only when the
        // user says so. We deliberately do not forward OPENAI_API_KEY to
        // arbitrary compatible servers, which may belong to a third party.
        let (vars, required): (Vec<String>, bool) =
            match section.and_then(|s| s.api_key_env.clone()) {
                Some(var) => (vec![var], true),
                None => match (spec.provider, spec.base_alias) {
                    (ProviderKind::Gemini, _) => {
                        (vec!["GEMINI_API_KEY".into(), "GOOGLE_API_KEY".into()], true)
                    }
                    (ProviderKind::Anthropic, _) => (vec!["ANTHROPIC_API_KEY".into()], true),
                    (ProviderKind::OpenAi, _) => (vec!["OPENAI_API_KEY".into()], true),
                    (ProviderKind::OpenAiCompat, None) => {
                        (vec!["KSMITH_OPENAI_COMPAT_API_KEY".into()], false)
                    }
                    _ => (Vec::new(), false),
                },
            };
        let (key, key_hint) = if let Some(literal) = section.and_then(|s| s.api_key.clone()) {
            (
                Some(literal.trim().to_string()),
                format!("check the api_key set for [providers.{name}]"),
            )
        } else if let Some((var, value)) = vars.iter().find_map(|v| env_str(v).map(|x| (v, x))) {
            (Some(value), format!("check {var}"))
        } else if required {
            return Err(LlmError::MissingKey {
                provider: name,
                vars,
            });
        } else {
            let hint = match vars.first() {
                Some(var) => format!(
                    "this server may need a key: set {var} or api_key_env in [providers.{name}]"
                ),
                None => {
                    format!("this server may need a key: set api_key_env in [providers.{name}]")
                }
            };
            (None, hint)
        };

        Ok(HttpSetup {
            base_url,
            key,
            key_hint,
            policy: self.retry_for(name),
        })
    }
}

/// Why `url` is not an `http://` or `https://` URL with a host, if it is not.
fn check_base_url(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("does not start with http:// or https://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_only = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host_only.is_empty() || host_only.starts_with(':') {
        return Err("has no host");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains spaces or control characters");
    }
    if let Some((_, port)) = host_only
        .rsplit_once(':')
        .filter(|_| !host_only.ends_with(']'))
    {
        if port.is_empty() || port.parse::<u16>().is_err() {
            return Err("has an invalid port");
        }
    }
    Ok(())
}

/// The config file `discover` would load, if any.
fn discover_path(env: &dyn Fn(&str) -> Option<OsString>, cwd: &Path) -> Option<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(explicit) = set("KSMITH_CONFIG") {
        // Explicitly named: return it even if missing, so `load` reports it.
        return Some(PathBuf::from(explicit));
    }
    let local = cwd.join("ksmith.toml");
    let mut candidates = vec![local];
    if let Some(xdg) = set("XDG_CONFIG_HOME") {
        candidates.push(PathBuf::from(xdg).join("ksmith/config.toml"));
    }
    if let Some(home) = set("HOME") {
        candidates.push(PathBuf::from(home).join(".config/ksmith/config.toml"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn parse_root(root: &Table) -> Result<Config, String> {
    fields::check_keys(root, &["providers", "prices", "retry", "cluster"], "")?;
    let mut cfg = Config::default();

    if let Some(cluster) = fields::table(root, "cluster", "")? {
        fields::check_keys(cluster, &["address", "fingerprint"], "cluster")?;
        cfg.cluster.address = fields::get::<String>(cluster, "address", "cluster")?;
        cfg.cluster.fingerprint = fields::get::<String>(cluster, "fingerprint", "cluster")?;
    }

    if let Some(retry) = fields::table(root, "retry", "")? {
        let path = "retry";
        fields::check_keys(
            retry,
            &[
                "max_attempts",
                "base_delay_s",
                "max_delay_s",
                "timeout_s",
                "retry_after_cap_s",
            ],
            path,
        )?;
        if let Some(n) = fields::get::<u32>(retry, "max_attempts", path)? {
            cfg.retry.max_attempts = at_least_one(n, path)?;
        }
        let secs = |key: &str, zero_ok: bool| {
            fields::number(retry, key, path, zero_ok).map(|v| v.map(Duration::from_secs_f64))
        };
        if let Some(d) = secs("base_delay_s", true)? {
            cfg.retry.base_delay = d;
        }
        if let Some(d) = secs("max_delay_s", true)? {
            cfg.retry.max_delay = d;
        }
        if let Some(d) = secs("timeout_s", false)? {
            cfg.retry.timeout = d;
        }
        if let Some(d) = secs("retry_after_cap_s", true)? {
            cfg.retry.retry_after_cap = d;
        }
    }

    if let Some(providers) = fields::table(root, "providers", "")? {
        for (name, value) in providers {
            let path = format!("providers.{name}");
            if !PROVIDER_SECTIONS.contains(&name.as_str()) {
                return Err(format!(
                    "{path}: unknown provider; expected one of: {}",
                    PROVIDER_SECTIONS.join(", ")
                ));
            }
            let toml::Value::Table(t) = value else {
                return Err(format!(
                    "{path}: expected a table, found {}",
                    value.type_str()
                ));
            };
            if t.contains_key("api_key") {
                return Err(format!(
                    "{path}.api_key: keys do not belong in config files; put the key in an \
                     environment variable and name it with api_key_env"
                ));
            }
            let http = !matches!(name.as_str(), "command" | "manual");
            let allowed: &[&str] = if http {
                &["base_url", "api_key_env", "timeout_s", "max_attempts"]
            } else {
                &["timeout_s"]
            };
            fields::check_keys(t, allowed, &path)?;
            let base_url = fields::get::<String>(t, "base_url", &path)?;
            if let Some(url) = &base_url {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "{path}.base_url: must start with http:// or https://, got `{url}`"
                    ));
                }
            }
            let api_key_env = fields::get::<String>(t, "api_key_env", &path)?;
            if api_key_env.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(format!(
                    "{path}.api_key_env: must name an environment variable"
                ));
            }
            let max_attempts = match fields::get::<u32>(t, "max_attempts", &path)? {
                Some(n) => Some(at_least_one(n, &path)?),
                None => None,
            };
            cfg.providers.insert(
                name.clone(),
                ProviderConfig {
                    base_url,
                    api_key_env,
                    api_key: None,
                    timeout_s: fields::number(t, "timeout_s", &path, false)?,
                    max_attempts,
                },
            );
        }
    }

    if let Some(prices) = fields::table(root, "prices", "")? {
        for (spec, value) in prices {
            let path = format!("prices.\"{spec}\"");
            if let Err(e) = ModelSpec::parse(spec) {
                return Err(format!("{path}: not a provider:model spec ({e})"));
            }
            let toml::Value::Table(t) = value else {
                return Err(format!(
                    "{path}: expected a table, found {}",
                    value.type_str()
                ));
            };
            fields::check_keys(t, &["input_per_mtok", "output_per_mtok"], &path)?;
            let get = |key: &str| {
                fields::number(t, key, &path, true)?.ok_or_else(|| {
                    format!(
                        "{}: missing (USD per million tokens)",
                        fields::join(&path, key)
                    )
                })
            };
            cfg.prices.insert(
                spec.clone(),
                Price {
                    input_per_mtok: get("input_per_mtok")?,
                    output_per_mtok: get("output_per_mtok")?,
                },
            );
        }
    }
    Ok(cfg)
}

fn at_least_one(n: u32, path: &str) -> Result<u32, String> {
    if n == 0 {
        Err(format!("{path}.max_attempts: must be at least 1"))
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn spec(s: &str) -> ModelSpec {
        ModelSpec::parse(s).unwrap()
    }

    #[test]
    fn full_file_loads() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(
            f,
            r#"
[retry]
max_attempts = 3
base_delay_s = 0.5
max_delay_s = 4
timeout_s = 60

[providers.gemini]
base_url = "http://127.0.0.1:9999"
api_key_env = "MY_KEY_VAR"
timeout_s = 300
max_attempts = 5

[providers.command]
timeout_s = 2.5

[prices."gemini:gemini-3.1-pro"]
input_per_mtok = 2.0
output_per_mtok = 12.0
"#
        )
        .unwrap();
        let cfg = Config::load(f.path()).unwrap();
        assert_eq!(cfg.source.as_deref(), Some(f.path()));
        let g = cfg.provider("gemini").unwrap();
        assert_eq!(g.base_url.as_deref(), Some("http://127.0.0.1:9999"));
        assert_eq!(g.api_key_env.as_deref(), Some("MY_KEY_VAR"));
        assert_eq!(cfg.retry.max_attempts, 3);
        assert_eq!(cfg.retry.base_delay, Duration::from_millis(500));
        let policy = cfg.retry_for("gemini");
        assert_eq!(policy.max_attempts, 5);
        assert_eq!(policy.timeout, Duration::from_secs(300));
        assert_eq!(cfg.retry_for("anthropic").timeout, Duration::from_secs(60));
        assert_eq!(
            cfg.call_timeout(ProviderKind::Command),
            Duration::from_millis(2500)
        );
        assert_eq!(cfg.call_timeout(ProviderKind::Manual), MANUAL_TIMEOUT);
        let price = cfg.price(&spec("gemini:gemini-3.1-pro")).unwrap();
        assert_eq!(price.output_per_mtok, 12.0);
    }

    fn parse_err(text: &str) -> String {
        let err = Config::parse(text, "/etc/ksmith.toml").unwrap_err();
        assert!(matches!(err, LlmError::Config { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("/etc/ksmith.toml: "), "{msg}");
        msg
    }

    #[test]
    fn errors_name_file_field_and_problem() {
        let msg = parse_err("[providers.gemini\nbase_url = 1");
        assert!(msg.contains("invalid TOML"), "{msg}");
        assert!(msg.contains("line 1"), "{msg}");

        let msg = parse_err("[providers.gemini]\ntimeout_s = \"soon\"");
        assert!(msg.contains("providers.gemini.timeout_s"), "{msg}");
        assert!(msg.contains("invalid type"), "{msg}");

        let msg = parse_err("[providers.openai]\nmax_attempts = -2");
        assert!(msg.contains("providers.openai.max_attempts"), "{msg}");

        let msg = parse_err("[providers.openai]\nmax_attempts = 0");
        assert!(msg.contains("at least 1"), "{msg}");

        let msg = parse_err("[providers.gemeni]\nbase_url = \"http://x\"");
        assert!(msg.contains("providers.gemeni: unknown provider"), "{msg}");

        let msg = parse_err("[providers.gemini]\nbaseurl = \"http://x\"");
        assert!(
            msg.contains("providers.gemini.baseurl: unknown field"),
            "{msg}"
        );
        assert!(msg.contains("base_url"), "{msg}");

        let msg = parse_err("[providers.gemini]\nbase_url = \"localhost:1\"");
        assert!(
            msg.contains("providers.gemini.base_url: must start with http"),
            "{msg}"
        );

        let msg = parse_err("[providers.gemini]\napi_key = \"sk-123\"");
        assert!(msg.contains("api_key_env"), "{msg}");

        let msg = parse_err("[providers.command]\nbase_url = \"http://x\"");
        assert!(
            msg.contains("providers.command.base_url: unknown field"),
            "{msg}"
        );

        let msg = parse_err("[providers.command]\ntimeout_s = -1");
        assert!(
            msg.contains("providers.command.timeout_s: must be more than zero"),
            "{msg}"
        );

        let msg = parse_err("[prices.\"gemini:x\"]\ninput_per_mtok = 1.0");
        assert!(
            msg.contains("prices.\"gemini:x\".output_per_mtok: missing"),
            "{msg}"
        );

        let msg = parse_err("[prices.\"gpt4\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0");
        assert!(msg.contains("not a provider:model spec"), "{msg}");

        let msg = parse_err("providers = 3");
        assert!(msg.contains("providers: expected a table"), "{msg}");

        let msg = parse_err("[retry]\ntimeout_s = 0");
        assert!(msg.contains("retry.timeout_s"), "{msg}");

        let msg = parse_err("[other]");
        assert!(msg.contains("other: unknown field"), "{msg}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = Config::load(Path::new("/nonexistent/ksmith.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/ksmith.toml"), "{msg}");
        assert!(msg.contains("cannot read"), "{msg}");
    }

    #[test]
    fn prices() {
        let cfg = Config::default();
        let p = cfg.price(&spec("gemini:gemini-2.5-pro")).unwrap();
        assert!((p.cost(1_000_000, 1_000_000) - 11.25).abs() < 1e-9);
        assert!((p.cost(2_000, 500) - (2_000.0 * 1.25 + 500.0 * 10.0) / 1e6).abs() < 1e-12);
        // Dated snapshots use the base model's price; other models sharing a prefix do not.
        let dated = cfg
            .price(&spec("anthropic:claude-sonnet-4-5-20250929"))
            .unwrap();
        assert_eq!(dated.input_per_mtok, 3.0);
        let mini = cfg.price(&spec("openai:gpt-5-mini")).unwrap();
        assert_eq!(mini.input_per_mtok, 0.25);
        assert_eq!(
            cfg.price(&spec("openai:gpt-5-2025-08-07"))
                .unwrap()
                .input_per_mtok,
            1.25
        );
        assert_eq!(cfg.price(&spec("openai:gpt-9-ultra")), None);
        for free in [
            "ollama:llama3",
            "openai-compat:x",
            "command:cat",
            "manual:d",
            "scripted:f",
        ] {
            let p = cfg.price(&spec(free)).unwrap();
            assert_eq!(p.cost(10_000, 10_000), 0.0, "{free}");
        }
        let cfg = Config::parse(
            "[prices.\"ollama:llama3\"]\ninput_per_mtok = 0.1\noutput_per_mtok = 0.2\n\
             [prices.\"openai:gpt-5\"]\ninput_per_mtok = 9\noutput_per_mtok = 9",
            "t",
        )
        .unwrap();
        assert_eq!(
            cfg.price(&spec("ollama:llama3")).unwrap().output_per_mtok,
            0.2
        );
        assert_eq!(
            cfg.price(&spec("openai:gpt-5")).unwrap().input_per_mtok,
            9.0
        );
        assert_eq!(
            cfg.price(&spec("openai:gpt-5-2025-08-07"))
                .unwrap()
                .input_per_mtok,
            9.0
        );
        assert_eq!(
            cfg.price(&spec("openai:gpt-5-mini"))
                .unwrap()
                .input_per_mtok,
            0.25
        );
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            ..RetryPolicy::default()
        };
        for _ in 0..20 {
            let d1 = p.backoff(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = p.backoff(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            let d9 = p.backoff(40);
            assert!(d9 >= Duration::from_millis(250) && d9 <= Duration::from_millis(500));
        }
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn keys_and_base_urls() {
        let cfg = Config::default();
        let env = env_of(&[("GOOGLE_API_KEY", " g-key\n")]);
        let s = cfg.http_setup_with(&spec("gemini:m"), &env).unwrap();
        assert_eq!(s.base_url, "https://generativelanguage.googleapis.com");
        assert_eq!(s.key.as_deref(), Some("g-key"));
        assert_eq!(s.key_hint, "check GOOGLE_API_KEY");

        let env = env_of(&[("GEMINI_API_KEY", "a"), ("GOOGLE_API_KEY", "b")]);
        let s = cfg.http_setup_with(&spec("gemini:m"), &env).unwrap();
        assert_eq!(s.key.as_deref(), Some("a"));

        let err = cfg
            .http_setup_with(&spec("gemini:m"), &env_of(&[("GEMINI_API_KEY", "  ")]))
            .unwrap_err();
        assert!(matches!(err, LlmError::MissingKey { .. }));
        assert_eq!(
            err.to_string(),
            "gemini: no API key found; set GEMINI_API_KEY or GOOGLE_API_KEY"
        );
        let err = cfg
            .http_setup_with(&spec("anthropic:m"), &env_of(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"));

        // Configured variable replaces the usual ones; env base URL beats the file.
        let cfg = Config::default().with_provider(
            "openai",
            ProviderConfig {
                base_url: Some("http://file/v1/".into()),
                api_key_env: Some("MY_KEY_VAR".into()),
                ..ProviderConfig::default()
            },
        );
        let err = cfg
            .http_setup_with(&spec("openai:m"), &env_of(&[("OPENAI_API_KEY", "x")]))
            .unwrap_err();
        assert!(err.to_string().contains("set MY_KEY_VAR"), "{err}");
        let s = cfg
            .http_setup_with(&spec("openai:m"), &env_of(&[("MY_KEY_VAR", "k")]))
            .unwrap();
        assert_eq!(s.base_url, "http://file/v1");
        let s = cfg
            .http_setup_with(
                &spec("openai:m"),
                &env_of(&[
                    ("MY_KEY_VAR", "k"),
                    ("KSMITH_OPENAI_BASE_URL", "http://env/v1"),
                ]),
            )
            .unwrap();
        assert_eq!(s.base_url, "http://env/v1");

        // Compatible servers: key optional, base URL from alias or required.
        let s = cfg
            .http_setup_with(&spec("ollama:llama3"), &env_of(&[("OPENAI_API_KEY", "x")]))
            .unwrap();
        assert_eq!(s.base_url, "http://localhost:11434/v1");
        assert_eq!(s.key, None);
        let err = cfg
            .http_setup_with(&spec("openai-compat:m"), &env_of(&[]))
            .unwrap_err();
        assert!(
            err.to_string().contains("KSMITH_OPENAI_COMPAT_BASE_URL"),
            "{err}"
        );
        let s = cfg
            .http_setup_with(
                &spec("openai-compat:m"),
                &env_of(&[("KSMITH_OPENAI_COMPAT_BASE_URL", "http://h:1/v1")]),
            )
            .unwrap();
        assert_eq!(s.base_url, "http://h:1/v1");
        let s = cfg
            .http_setup_with(
                &spec("vllm:m"),
                &env_of(&[("KSMITH_VLLM_BASE_URL", "http://gpu:8000/v1")]),
            )
            .unwrap();
        assert_eq!(s.base_url, "http://gpu:8000/v1");

        // A literal key set in code wins over the environment.
        let cfg = Config::default().with_provider(
            "anthropic",
            ProviderConfig {
                api_key: Some("lit".into()),
                ..ProviderConfig::default()
            },
        );
        let s = cfg
            .http_setup_with(
                &spec("anthropic:m"),
                &env_of(&[("ANTHROPIC_API_KEY", "env")]),
            )
            .unwrap();
        assert_eq!(s.key.as_deref(), Some("lit"));
    }

    #[test]
    fn malformed_base_urls_are_refused_naming_their_origin() {
        let cfg = Config::default();
        for (url, why) in [
            ("localhost:8000/v1", "does not start with http"),
            ("http:///v1", "has no host"),
            ("http://h:port/v1", "invalid port"),
            ("http://h /v1", "spaces"),
        ] {
            let err = cfg
                .http_setup_with(
                    &spec("openai-compat:m"),
                    &env_of(&[("KSMITH_OPENAI_COMPAT_BASE_URL", url)]),
                )
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{url}: {err}");
            assert!(err.contains("from KSMITH_OPENAI_COMPAT_BASE_URL"), "{err}");
        }
        for ok in [
            "http://localhost:8000/v1",
            "https://[::1]:1/v1",
            "http://u@h",
        ] {
            assert_eq!(check_base_url(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn discovery_order() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("proj");
        let xdg = dir.path().join("xdg");
        let home = dir.path().join("home");
        for d in [&cwd, &xdg.join("ksmith"), &home.join(".config/ksmith")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let xdg_s = xdg.to_str().unwrap().to_string();
        let home_s = home.to_str().unwrap().to_string();
        let env = env_of(&[("XDG_CONFIG_HOME", &xdg_s), ("HOME", &home_s)]);

        assert_eq!(discover_path(&env, &cwd), None);
        let home_cfg = home.join(".config/ksmith/config.toml");
        std::fs::write(&home_cfg, "").unwrap();
        assert_eq!(discover_path(&env, &cwd), Some(home_cfg));
        let xdg_cfg = xdg.join("ksmith/config.toml");
        std::fs::write(&xdg_cfg, "").unwrap();
        assert_eq!(discover_path(&env, &cwd), Some(xdg_cfg));
        let local = cwd.join("ksmith.toml");
        std::fs::write(&local, "").unwrap();
        assert_eq!(discover_path(&env, &cwd), Some(local));
        let env = env_of(&[("KSMITH_CONFIG", "/elsewhere.toml"), ("HOME", &home_s)]);
        assert_eq!(
            discover_path(&env, &cwd),
            Some(PathBuf::from("/elsewhere.toml"))
        );
    }
}
