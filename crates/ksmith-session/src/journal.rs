//! The one journaled provider of an agent session: the model opened on first use (a session
//! that replays everything from its journal never opens it), every call turned into the row
//! the journal stores, failures included with their error, so a retry after a crash takes the
//! same place. Where the row goes (a node's journal in a search, a `task new` run's journal) and what a replay may skip is the caller's; what was asked, answered, spent and
//! charged is decided here once.

use ksmith_agents::{Rendered, Role};
use ksmith_llm::{Config, ModelSpec, Price, Provider, Request};
use ksmith_store::CallRow;
use serde_json::Value;
use std::time::Instant;

/// A session's model, and how its calls are priced and journaled.
pub struct JournaledProvider {
    spec: ModelSpec,
    config: Config,
    price: Option<Price>,
    /// The run's `provider:model` spelling, stored with each call.
    model: String,
    provider: Option<Box<dyn Provider>>,
}

/// What a call cost, as budgets count it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallCost {
    /// Tokens in + out.
    pub tokens: u64,
    /// USD (0 without a price).
    pub cost: f64,
}

impl CallCost {
    /// The cost of a journaled call.
    pub fn of(row: &CallRow) -> CallCost {
        CallCost {
            tokens: row.tokens_in + row.tokens_out,
            cost: row.cost,
        }
    }
}

impl JournaledProvider {
    /// The model `spec` with the provider settings and prices of `config`; nothing is opened.
    pub fn new(spec: ModelSpec, config: Config, model: String) -> JournaledProvider {
        let price = config.price(&spec);
        JournaledProvider {
            spec,
            config,
            price,
            model,
            provider: None,
        }
    }

    /// Asks the model for call `seq` of `role` at `step`. The row to journal comes back in
    /// both cases: with the reply, or with the error after the provider's own retries.
    pub fn complete(
        &mut self,
        role: Role,
        step: &str,
        seq: u64,
        prompt: &Rendered,
    ) -> (CallRow, Result<String, CallError>) {
        let req = Request {
            role: role.name().to_string(),
            seq,
            system: prompt.system.clone(),
            prompt: prompt.user.clone(),
            max_tokens: role.max_tokens(),
            temperature: None,
        };
        let started = Instant::now();
        let mut row = CallRow {
            seq,
            created_at: String::new(),
            role: role.name().into(),
            step: step.into(),
            model: self.model.clone(),
            system: req.system.clone(),
            prompt: req.prompt.clone(),
            reply: String::new(),
            error: None,
            tokens_in: 0,
            tokens_out: 0,
            estimated: true,
            cost: 0.0,
            latency_ms: 0.0,
            attempts: 1,
        };
        if self.provider.is_none() {
            match ksmith_llm::open(&self.spec, &self.config) {
                Ok(p) => self.provider = Some(p),
                Err(e) => {
                    let e = CallError::of(&e);
                    row.error = Some(e.message.clone());
                    return (row, Err(e));
                }
            }
        }
        let Some(provider) = self.provider.as_mut() else {
            let e = CallError {
                message: "no provider".into(),
                refusal: true,
            };
            return (row, Err(e));
        };
        let result = provider.complete(&req);
        row.latency_ms = started.elapsed().as_secs_f64() * 1e3;
        match result {
            Ok(r) => {
                row.reply = r.text.clone();
                row.tokens_in = r.tokens_in;
                row.tokens_out = r.tokens_out;
                row.estimated = r.tokens_estimated;
                row.cost = self
                    .price
                    .map(|p| p.cost(r.tokens_in, r.tokens_out))
                    .unwrap_or(0.0);
                row.latency_ms = r.latency.as_secs_f64() * 1e3;
                row.attempts = r.attempts;
                (row, Ok(r.text))
            }
            Err(e) => {
                let e = CallError::of(&e);
                row.error = Some(e.message.clone());
                (row, Err(e))
            }
        }
    }
}

/// A failed call: its message, and whether the provider refused the run as configured (a
/// rejected key, an unknown model: [`ksmith_llm::LlmError::is_refusal`]), which no retry fixes.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// The provider's error, as stored with the call.
    pub message: String,
    /// Retrying cannot help until the user changes something.
    pub refusal: bool,
}

impl CallError {
    fn of(e: &ksmith_llm::LlmError) -> CallError {
        CallError {
            message: e.to_string(),
            refusal: e.is_refusal(),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Where an agent call of a session goes: a search node's journal.
pub trait Asker {
    /// What stops the session (a provider failure, a budget).
    type Error;
    /// The role's prompt from its template and values.
    fn render(&mut self, role: Role, vars: &Value) -> Result<Rendered, Self::Error>;
    /// One journaled call (replayed when the journal has it).
    fn call(&mut self, role: Role, step: &str, prompt: &Rendered) -> Result<String, Self::Error>;
    /// Says that a reply could not be used, and why (its first line).
    fn unusable(&mut self, role: Role, step: &str, why: &str);
}

/// The ask rule of both loops: render with the guidance for this call, call, parse; a reply
/// that cannot be used goes back to the model with the parse error, up to `retries` times.
/// `Ok(Err(why))`: the model never gave a usable answer.
pub fn ask_until_usable<A: Asker, T>(
    asker: &mut A,
    role: Role,
    step: &str,
    mut vars: Value,
    guidance: Option<String>,
    retries: u32,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Result<(T, String), String>, A::Error> {
    if let Some(g) = guidance {
        vars["guidance"] = Value::String(g);
    }
    let mut last_err = String::new();
    for attempt in 0..=retries {
        if attempt > 0 {
            vars["retry"] = Value::String(last_err.clone());
        }
        let prompt = asker.render(role, &vars)?;
        let reply = asker.call(role, step, &prompt)?;
        match parse(&reply) {
            Ok(v) => return Ok(Ok((v, reply))),
            Err(e) => {
                asker.unusable(role, step, e.lines().next().unwrap_or(""));
                last_err = e;
            }
        }
    }
    Ok(Err(last_err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_comes_back_as_its_journal_row_failures_too() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.toml");
        std::fs::write(
            &script,
            "[[reply]]\nrole = \"planner\"\ntext = \"a plan\"\n",
        )
        .unwrap();
        let model = format!("scripted:{}", script.display());
        let spec = ModelSpec::parse(&model).unwrap();
        let mut p = JournaledProvider::new(spec, Config::default(), model.clone());
        let prompt = Rendered {
            system: "sys".into(),
            user: "plan it".into(),
        };
        let (row, got) = p.complete(Role::Planner, "iteration 1 plan", 0, &prompt);
        assert_eq!(got.as_deref(), Ok("a plan"));
        assert_eq!(
            (row.seq, row.role.as_str(), row.model.as_str()),
            (0, "planner", model.as_str())
        );
        assert_eq!(row.reply, "a plan");
        assert!(row.error.is_none());
        assert_eq!(CallCost::of(&row).tokens, row.tokens_in + row.tokens_out);
        // The script has no second reply: the failure is a row with its error.
        let (row, got) = p.complete(Role::Implementer, "iteration 1 implement", 1, &prompt);
        assert!(got.is_err());
        let err = got.as_ref().expect_err("failed");
        assert_eq!(row.error.as_deref(), Some(err.message.as_str()));
        // Running out of script is not the provider refusing the run: retrying may help.
        assert!(!err.refusal);
        assert_eq!(row.reply, "");
    }
}
