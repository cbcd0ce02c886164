//! The session of a `ksmith task new` run: its store row and lock, the journaled provider and
//! the budget.

use super::RunOptions;
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_agents::{Limit, Prompts, Rendered, Role, Usage};
use ksmith_llm::ModelSpec;
use ksmith_search::agent::journal::{CallCost, JournaledProvider};
use ksmith_search::agent::state::RunMode;
use ksmith_store::{RunLock, RunRow, RunStatus, Store, StoreError};
use std::time::Instant;

/// Why a session stopped before its natural end.
#[derive(Debug)]
pub(crate) enum Halt {
    /// A budget limit was reached.
    Budget(Limit, String),
    /// A provider or environment failure.
    Failed(anyhow::Error),
}

impl From<Exit> for Halt {
    fn from(e: Exit) -> Self {
        Halt::Failed(e.1)
    }
}

/// An open run.
pub(crate) struct Session {
    pub run: RunRow,
    pub opts: RunOptions,
    pub store: Store,
    pub prompts: Prompts,
    pub usage: Usage,
    /// The model, opened on the first call that is not replayed.
    provider: JournaledProvider,
    next_call: u64,
    started: Instant,
    /// This process's lock on the run (released when the process ends, however it ends).
    lock: Option<RunLock>,
}

/// Checks the model before anything is stored or judged: a known provider, its key and base
/// URL, its file, directory or program, and a cost budget it can be held to. Nothing here
/// calls the model.
fn preflight(
    model: &str,
    budget: &ksmith_agents::Budget,
) -> Result<(ModelSpec, ksmith_llm::Config), Exit> {
    let spec = ModelSpec::parse(model).map_err(|e| input(anyhow!("--model: {e}")))?;
    let config = ksmith_llm::Config::discover().map_err(input)?;
    ksmith_llm::preflight(&spec, &config)
        .map_err(|e| input(anyhow!("model {model}: {e}; nothing was started")))?;
    crate::run_args::check_cost_limit(&spec, &config, budget.cost)?;
    Ok((spec, config))
}

/// A run lock refused: another process drives the run (exit 2, naming it), else the store.
fn lock_error(e: StoreError) -> Exit {
    match e {
        StoreError::RunBusy { .. } | StoreError::ReadOnly { .. } => input(e),
        e => env_err(e),
    }
}

fn new_run_id() -> String {
    // Chosen by `ksmith mcp`, which starts this process and answers with the id at once.
    if let Some(id) = crate::run_events::requested_run_id() {
        return id;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let tag =
        ksmith_task::content_hash(format!("{}-{}", now.as_nanos(), std::process::id()).as_bytes());
    format!("run-{}-{}", now.as_secs(), &tag[..6])
}

impl Session {
    fn open(run: RunRow, opts: RunOptions, store: Store) -> Result<Session, Exit> {
        // Flags first (a typo in the model or the prompts), then the provider's setup.
        ModelSpec::parse(&run.model).map_err(|e| input(anyhow!("--model: {e}")))?;
        let prompts = Prompts::load(opts.prompts.as_deref()).map_err(input)?;
        let (spec, config) = preflight(&run.model, &opts.budget)?;
        let run_model = run.model.clone();
        Ok(Session {
            run,
            opts,
            store,
            prompts,
            usage: Usage::default(),
            provider: JournaledProvider::new(spec, config, run_model),
            next_call: 0,
            started: Instant::now(),
            lock: None,
        })
    }

    /// Creates and opens a new run on a task directory whose tests hash is `tests_hash`.
    pub fn create(
        ctx: &Ctx,
        task_dir: &std::path::Path,
        task_name: &str,
        tests_hash: &str,
        model: &str,
        mode: RunMode,
        opts: RunOptions,
    ) -> Result<Session, Exit> {
        // The model is checked (in `open`) before anything is stored: a typo or a missing key
        // is an input error, not a failed run.
        ModelSpec::parse(model).map_err(|e| input(anyhow!("--model: {e}")))?;
        let store = ctx.store()?;
        let run = RunRow {
            id: new_run_id(),
            created_at: String::new(),
            updated_at: String::new(),
            task_dir: task_dir.display().to_string(),
            task: task_name.to_string(),
            tests_hash: tests_hash.to_string(),
            model: model.to_string(),
            mode: mode.as_str().to_string(),
            options: serde_json::to_string(&opts).map_err(env_err)?,
            status: RunStatus::Running,
            stop_reason: None,
            active_s: 0.0,
            out_dir: None,
        };
        let mut session = Session::open(run.clone(), opts, store)?;
        session.lock = Some(session.store.lock_run(&run.id).map_err(lock_error)?);
        session.store.create_run(&run).map_err(env_err)?;
        crate::interrupt::watch(ctx.store_dir.clone(), &run.id, 0.0, session.started);
        note!("ksmith: run {} ({} on {})", run.id, run.model, run.task);
        Ok(session)
    }

    /// Wall seconds of this run over all its sessions.
    pub fn active_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Stops with the first exhausted limit other than iterations.
    pub fn check_budget(&mut self) -> Result<(), Halt> {
        self.usage.wall_s = self.active_s();
        let mut b = self.opts.budget.clone();
        b.iterations = None;
        match b.exhausted(&self.usage) {
            Some((l, m)) => Err(Halt::Budget(l, m)),
            None => Ok(()),
        }
    }

    /// Saves status and accounting.
    pub fn save(&mut self) -> Result<(), Exit> {
        self.run.active_s = self.active_s();
        // Never over a signal's `interrupted` mark (the process is ending then anyway).
        crate::interrupt::saving(self.run.status, || self.store.update_run(&self.run))
            .unwrap_or(Ok(()))
            .map_err(env_err)
    }

    /// One LLM call, asked of the provider and stored (failures too, with their error).
    pub fn call(&mut self, role: Role, step: &str, prompt: &Rendered) -> Result<String, Halt> {
        let seq = self.next_call;
        self.check_budget()?;
        // A model can take minutes: say who is being asked, and for what.
        note!(
            "ksmith:   {}: asking the {} ({})",
            crate::term::one(step),
            role.name(),
            crate::term::one(&self.run.model)
        );
        let (row, reply) = self.provider.complete(role, step, seq, prompt);
        self.store
            .record_call(&self.run.id, &row)
            .map_err(|e| Halt::Failed(e.into()))?;
        match reply {
            Ok(text) => {
                let c = CallCost::of(&row);
                self.usage.llm_calls += 1;
                self.usage.tokens += c.tokens;
                self.usage.cost += c.cost;
                self.next_call += 1;
                note!(
                    "ksmith:   {step}: {} replied ({} -> {} tokens{}, {:.1} s)",
                    role.name(),
                    row.tokens_in,
                    row.tokens_out,
                    if row.estimated { ", estimated" } else { "" },
                    row.latency_ms / 1e3
                );
                Ok(text)
            }
            Err(e) => Err(Halt::Failed(anyhow!(
                "{step}: {} call failed: {e}",
                role.name()
            ))),
        }
    }
}
