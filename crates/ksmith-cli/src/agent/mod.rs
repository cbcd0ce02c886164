//! Agent runs: `ksmith optimize TASK --model P:M` (autonomous or `--interactive`), `ksmith resume`,
//! `ksmith runs`, `ksmith show RUN`, `ksmith calls RUN`, `ksmith task new`.
//!
//! A run is a deterministic function of its journal: every LLM reply and every decision (a
//! user's review, a profile, a tuning outcome) is stored as it happens, evaluations are stored
//! by content key, so a resumed run replays the journal up to where it stopped and carries on
//! without repeating a completed call or evaluation.

mod autotune;
pub(crate) mod commands;
mod finish;
mod interrupt;
mod iterate;
mod profile;
mod review;
mod session;
mod step;
mod task_new;

pub(crate) use commands::{cmd_calls, cmd_runs, cmd_show_run};
pub(crate) use review::TerminalReviewer;
pub(crate) use task_new::{cmd_task_new, TaskNewArgs};

use crate::run_args::{AgentArgs, BudgetArgs, ResumeArgs};
use crate::{input, Ctx, Exit, JudgeOpts};
use anyhow::anyhow;
use ksmith_agents::Budget;
use std::path::PathBuf;

use ksmith_search::agent::state::RunMode;
/// A run's stored settings: the engine's type (`runs.options` keeps its JSON format).
pub(crate) use ksmith_search::agent::state::{AgentSettings as RunOptions, FrozenJudge};

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

/// `ksmith resume RUN` of a serial agent run (`optimize::resume` sends searches elsewhere).
pub(crate) fn resume(ctx: &Ctx, args: &ResumeArgs) -> Result<u8, Exit> {
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
