//! Agent runs: `ksmith optimize TASK --model P:M` (autonomous or `--interactive`), `ksmith resume`,
//! `ksmith runs`, `ksmith show RUN`, `ksmith calls RUN`, `ksmith task new`.
//!
//! A run is a deterministic function of its journal: every LLM reply and every decision (a
//! user's review, a profile, a tuning outcome) is stored as it happens, evaluations are stored
//! by content key, so a resumed run replays the journal up to where it stopped and carries on
//! without repeating a completed call or evaluation.

mod autotune;
mod brief;
pub(crate) mod commands;
mod finish;
mod interrupt;
mod iterate;
mod profile;
mod review;
mod session;
mod task_new;

pub(crate) use commands::{cmd_calls, cmd_runs, cmd_show_run};
pub(crate) use task_new::{cmd_task_new, TaskNewArgs};

use crate::{input, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use ksmith_agents::Budget;
use std::path::PathBuf;

/// Options of `optimize --model` that make it an agent run.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Agent (with --model)")]
pub(crate) struct AgentArgs {
    /// Model as `provider:model`: gemini:, anthropic:, openai:, openai-compat:, ollama:, vllm:,
    /// llamacpp:, lmstudio:, command:SHELL-COMMAND, manual:DIR, scripted:FILE.
    #[arg(long)]
    pub model: Option<String>,
    /// Stop after each agent step to approve, edit, add guidance, rerun or quit.
    #[arg(long)]
    pub interactive: bool,
    /// Where an interactive run's reviews are answered: the terminal, or the web page of
    /// `ksmith serve` (implies --interactive; docs/serve.md).
    #[arg(long, value_enum)]
    pub review: Option<ReviewVia>,
    /// Fix attempts per failing stage (build, test) in one iteration.
    #[arg(long, default_value_t = 3, value_parser = crate::whole::<u32>(0..=20))]
    pub fix_attempts: u32,
    /// Extra knowledge directories (markdown/text) retrieved into prompts; repeatable.
    #[arg(long = "knowledge")]
    pub knowledge: Vec<PathBuf>,
    /// Directory of prompt templates overriding the built-in ones (same file names).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Configurations the autotuner may try per iteration.
    #[arg(long, default_value_t = 8, value_parser = crate::parse_tune_budget)]
    pub tune_budget: usize,
    /// Skip the profile stage.
    #[arg(long)]
    pub no_profile: bool,
    // Last: the budget flags have their own help heading.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// Where an interactive run's review points are answered.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ReviewVia {
    /// At the terminal (stdin, `$EDITOR` for edits).
    #[default]
    Terminal,
    /// On the page of `ksmith serve`, through files under STORE/serve/RUN/.
    Web,
}

/// Budget flags (shared by `optimize` and `resume`).
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Agent budget")]
pub(crate) struct BudgetArgs {
    /// Optimization iterations (default 3 for a new run; 0 judges the starting solution only).
    #[arg(long, value_parser = crate::whole::<u32>(0..=1000))]
    pub iterations: Option<u32>,
    /// Most LLM calls (at least 1).
    #[arg(long, value_parser = crate::whole::<u64>(1..))]
    pub max_calls: Option<u64>,
    /// Most tokens, in + out (at least 1).
    #[arg(long, value_parser = crate::whole::<u64>(1..))]
    pub max_tokens: Option<u64>,
    /// Most USD spent (from the price table; the model must have a price).
    #[arg(long, value_parser = positive)]
    pub max_cost: Option<f64>,
    /// Most wall seconds of running.
    #[arg(long, value_parser = positive)]
    pub max_wall: Option<f64>,
}

/// A budget in dollars or seconds: a finite number above zero.
fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("expected a number above 0".into()),
    }
}

impl BudgetArgs {
    /// Applies the given flags over `b`.
    fn apply(&self, b: &mut Budget) {
        if let Some(n) = self.iterations {
            b.iterations = Some(n);
        }
        if let Some(n) = self.max_calls {
            b.llm_calls = Some(n);
        }
        if let Some(n) = self.max_tokens {
            b.tokens = Some(n);
        }
        if let Some(c) = self.max_cost {
            b.cost = Some(c);
        }
        if let Some(w) = self.max_wall {
            b.wall_s = Some(w);
        }
    }
}

use ksmith_search::agent::state::RunMode;
/// A run's stored settings: the engine's type (`runs.options` keeps its JSON format).
pub(crate) use ksmith_search::agent::state::{AgentSettings as RunOptions, FrozenJudge};

/// The judge flags a run's frozen judge settings stand for.
pub(crate) fn judge_opts(f: &FrozenJudge) -> JudgeOpts {
    let mut o = crate::default_opts();
    o.timeout = f.timeout;
    o.seeds = f.seeds;
    o.min_time_ms = f.min_time_ms;
    o.no_timing = false;
    o
}

/// `ksmith optimize TASK --model P:M`: a new agent run.
pub(crate) fn start(
    ctx: &Ctx,
    task_dir: &std::path::Path,
    from: PathBuf,
    out: Option<PathBuf>,
    args: &AgentArgs,
    opts: &JudgeOpts,
) -> Result<u8, Exit> {
    let model = args
        .model
        .clone()
        .ok_or_else(|| input(anyhow!("--interactive needs --model PROVIDER:MODEL")))?;
    let mut budget = Budget {
        iterations: Some(3),
        ..Budget::default()
    };
    args.budget.apply(&mut budget);
    let task = crate::load_task(task_dir)?;
    let options = RunOptions {
        from: std::path::absolute(&from).unwrap_or(from),
        budget,
        fix_attempts: args.fix_attempts,
        knowledge: args.knowledge.clone(),
        prompts: args.prompts.clone(),
        tune_budget: args.tune_budget,
        no_profile: args.no_profile,
        judge: FrozenJudge {
            timeout: opts.timeout,
            seeds: opts.seeds,
            min_time_ms: opts.min_time_ms,
        },
        out: out.unwrap_or_else(|| ctx.store_dir.join("optimized").join(&task.name)),
    };
    let mode = if args.interactive || args.review.is_some() {
        RunMode::Interactive
    } else {
        RunMode::Autonomous
    };
    let mut session = session::Session::create(
        ctx,
        &task.dir,
        &task.name,
        &task.content_hash,
        &model,
        mode,
        options,
    )?;
    session.review_via = args.review.unwrap_or_default();
    iterate::drive(ctx, session)
}

/// Arguments of `ksmith resume`.
#[derive(clap::Args)]
pub(crate) struct ResumeArgs {
    /// Run id (see `ksmith runs`).
    pub run: String,
    /// Where an interactive run's reviews are answered from now on (default: the terminal).
    #[arg(long, value_enum)]
    pub review: Option<ReviewVia>,
    /// Raise or set limits for the rest of the run.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// `ksmith resume RUN`.
pub(crate) fn resume(ctx: &Ctx, args: &ResumeArgs) -> Result<u8, Exit> {
    // A graph-search run resumes through the search engine.
    if crate::search::is_search_run(ctx, &args.run)? {
        if args.review.is_some() {
            return Err(input(anyhow!(
                "--review: a graph search has no review points; resume it without --review"
            )));
        }
        return crate::search::resume(ctx, &args.run, &args.budget, None);
    }
    if args.review.is_some() {
        // Checked before the run is reopened (which marks it running).
        let mode = ctx
            .store_read()?
            .run(&args.run)
            .map_err(crate::env_err)?
            .map(|r| r.mode);
        if mode.as_deref().and_then(RunMode::from_name) == Some(RunMode::Autonomous) {
            return Err(input(anyhow!(
                "--review: run {} is autonomous; it has no review points",
                args.run
            )));
        }
    }
    let mut session = session::Session::reopen(ctx, &args.run, &args.budget)?;
    session.review_via = args.review.unwrap_or_default();
    iterate::drive(ctx, session)
}
