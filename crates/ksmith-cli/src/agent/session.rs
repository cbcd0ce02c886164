//! One run's session: the store rows, the provider, the journal replay and the budget.

use super::{BudgetArgs, RunOptions};
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_agents::{Limit, Prompts, Rendered, Role, Usage};
use ksmith_knowledge::Knowledge;
use ksmith_llm::ModelSpec;
use ksmith_search::agent::journal::{CallCost, JournaledProvider};
use ksmith_search::agent::state::RunMode;
use ksmith_store::{CallRow, RunLock, RunRow, RunStatus, Store, StoreError};
use serde::{de::DeserializeOwned, Serialize};
use std::time::Instant;

/// Why the loop stopped before its natural end.
#[derive(Debug)]
pub(crate) enum Halt {
    /// A budget limit was reached.
    Budget(Limit, String),
    /// The user quit an interactive run.
    Quit,
    /// A provider or environment failure; the run can be resumed.
    Failed(anyhow::Error),
    /// The run cannot go on as given (a bad or untimeable starting solution); resuming won't help.
    Input(anyhow::Error),
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
    pub interactive: bool,
    /// Where its reviews are answered (an interactive run only).
    pub review_via: crate::run_args::ReviewVia,
    /// The store directory (a web review's files live under it).
    pub store_dir: std::path::PathBuf,
    pub store: Store,
    pub prompts: Prompts,
    pub knowledge: Knowledge,
    pub usage: Usage,
    /// The model, opened on the first call that is not replayed.
    provider: JournaledProvider,
    calls: Vec<CallRow>,
    next_call: u64,
    events: Vec<(u64, String, String)>,
    next_event: u64,
    started: Instant,
    prior_active: f64,
    /// Replayed calls and events so far (for the resume message).
    pub replayed: (u64, u64),
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
    if let Some(cost) = budget.cost {
        if config.price(&spec).is_none() {
            return Err(input(anyhow!(
                "--max-cost {cost}: no price is known for {spec}, so spending cannot be counted; add [prices.\"{spec}\"] with input_per_mtok and output_per_mtok to the config file, or drop --max-cost"
            )));
        }
    }
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
    fn open(
        run: RunRow,
        opts: RunOptions,
        store: Store,
        store_dir: std::path::PathBuf,
    ) -> Result<Session, Exit> {
        // Flags first (a typo in the model, the prompts or the knowledge directories), then
        // the provider's setup.
        ModelSpec::parse(&run.model).map_err(|e| input(anyhow!("--model: {e}")))?;
        let prompts = Prompts::load(opts.prompts.as_deref()).map_err(input)?;
        let knowledge = Knowledge::open(&opts.knowledge).map_err(input)?;
        let (spec, config) = preflight(&run.model, &opts.budget)?;
        let calls: Vec<CallRow> = store
            .calls(&run.id)
            .map_err(env_err)?
            .into_iter()
            .filter(|c| c.error.is_none())
            .collect();
        let events = store.events(&run.id).map_err(env_err)?;
        let run_model = run.model.clone();
        Ok(Session {
            interactive: RunMode::from_name(&run.mode) == Some(RunMode::Interactive),
            review_via: crate::run_args::ReviewVia::Terminal,
            store_dir,
            prior_active: run.active_s,
            run,
            opts,
            store,
            prompts,
            knowledge,
            usage: Usage::default(),
            provider: JournaledProvider::new(spec, config, run_model),
            calls,
            next_call: 0,
            events,
            next_event: 0,
            started: Instant::now(),
            replayed: (0, 0),
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
        let mut session = Session::open(run.clone(), opts, store, ctx.store_dir.clone())?;
        session.lock = Some(session.store.lock_run(&run.id).map_err(lock_error)?);
        session.store.create_run(&run).map_err(env_err)?;
        super::interrupt::watch(ctx.store_dir.clone(), &run.id, 0.0, session.started);
        note!("ksmith: run {} ({} on {})", run.id, run.model, run.task);
        Ok(session)
    }

    /// Reopens a stored run for `resume`, with budget overrides.
    pub fn reopen(ctx: &Ctx, id: &str, budget: &BudgetArgs) -> Result<Session, Exit> {
        let store = ctx.store()?;
        let mut run = store.run(id).map_err(env_err)?.ok_or_else(|| {
            input(anyhow!(
                "no run `{id}` in {} (see `ksmith runs`)",
                ctx.store_dir.display()
            ))
        })?;
        let mut opts: RunOptions = serde_json::from_str(&run.options)
            .map_err(|e| env_err(anyhow!("run {id}: stored options unreadable: {e}")))?;
        budget.apply(&mut opts.budget);
        run.options = serde_json::to_string(&opts).map_err(env_err)?;
        if run.status == RunStatus::Finished {
            return Err(input(anyhow!(
                "run {id} already finished ({}); start a new run to optimize further",
                run.stop_reason.as_deref().unwrap_or("done")
            )));
        }
        // Before anything else: a second driver of the same run would judge the same
        // candidates and wait for the same paid calls.
        let lock = store.lock_run(id).map_err(lock_error)?;
        let was = run.status;
        run.status = RunStatus::Running;
        run.stop_reason = None;
        let mut session = Session::open(run, opts, store, ctx.store_dir.clone())?;
        session.lock = Some(lock);
        session.store.update_run(&session.run).map_err(env_err)?;
        super::interrupt::watch(
            ctx.store_dir.clone(),
            id,
            session.prior_active,
            session.started,
        );
        let how = if was == RunStatus::Running {
            " (its process is gone)"
        } else {
            ""
        };
        note!(
            "ksmith: resuming run {id}{how} ({} on {})",
            session.run.model,
            session.run.task
        );
        Ok(session)
    }

    /// Wall seconds of this run over all its sessions.
    pub fn active_s(&self) -> f64 {
        self.prior_active + self.started.elapsed().as_secs_f64()
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
        super::interrupt::saving(self.run.status, || self.store.update_run(&self.run))
            .unwrap_or(Ok(()))
            .map_err(env_err)
    }

    /// One LLM call: replayed from the journal when this run already made it, else asked of
    /// the provider and stored (failures too, with their error).
    pub fn call(&mut self, role: Role, step: &str, prompt: &Rendered) -> Result<String, Halt> {
        let seq = self.next_call;
        if let Some(c) = self.calls.iter().find(|c| c.seq == seq) {
            if c.role != role.name() {
                return Err(Halt::Failed(anyhow!(
                    "run {}: journal diverged at call {seq} (stored {}, now {}); it cannot be resumed safely",
                    self.run.id,
                    c.role,
                    role.name()
                )));
            }
            let reply = c.reply.clone();
            self.usage.llm_calls += 1;
            self.usage.tokens += c.tokens_in + c.tokens_out;
            self.usage.cost += c.cost;
            self.next_call += 1;
            self.replayed.0 += 1;
            return Ok(reply);
        }
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

    /// A journaled decision: replayed when the run already took it, else computed and stored.
    pub fn event<T: Serialize + DeserializeOwned>(
        &mut self,
        kind: &str,
        compute: impl FnOnce(&mut Session) -> Result<T, Halt>,
    ) -> Result<T, Halt> {
        if let Some(v) = self.replay(kind)? {
            return Ok(v);
        }
        let v = compute(self)?;
        self.record(kind, &v)?;
        Ok(v)
    }

    /// The next journaled event, when this run already recorded it (it must be of `kind`).
    pub fn replay<T: DeserializeOwned>(&mut self, kind: &str) -> Result<Option<T>, Halt> {
        let seq = self.next_event;
        let Some((_, k, payload)) = self.events.iter().find(|(s, _, _)| *s == seq) else {
            return Ok(None);
        };
        if k != kind {
            return Err(Halt::Failed(anyhow!(
                "run {}: journal diverged at event {seq} (stored {k}, now {kind}); it cannot be resumed safely",
                self.run.id
            )));
        }
        let v = serde_json::from_str(payload).map_err(|e| {
            Halt::Failed(anyhow!("run {}: event {seq} unreadable: {e}", self.run.id))
        })?;
        self.next_event += 1;
        self.replayed.1 += 1;
        Ok(Some(v))
    }

    /// Appends an event to the journal.
    pub fn record<T: Serialize>(&mut self, kind: &str, v: &T) -> Result<(), Halt> {
        let payload = serde_json::to_string(v).map_err(|e| Halt::Failed(e.into()))?;
        self.store
            .record_event(&self.run.id, self.next_event, kind, &payload)
            .map_err(|e| Halt::Failed(e.into()))?;
        self.next_event += 1;
        Ok(())
    }

    /// Knowledge passages for a query, as template values: only those for the candidate's
    /// language and the task's operator class.
    pub fn knowledge_for(
        &self,
        query: &str,
        language: &str,
        op_class: ksmith_task::OpClass,
    ) -> Vec<ksmith_search::agent::context::Passage> {
        ksmith_search::agent::context::passages(&self.knowledge, query, language, op_class)
    }
}
