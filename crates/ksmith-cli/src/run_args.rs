//! The flags of `ksmith optimize` and `ksmith resume` (agent, budget and search flags) and the
//! judge settings a run freezes: below the modules that run them (every agent run is a graph
//! search, `search`), so none imports `optimize`.

use crate::tune::SearchArgs;
use crate::{input, Exit, JudgeOpts};
use anyhow::anyhow;
use ksmith_search::agent::state::FrozenJudge;
use std::path::PathBuf;

/// Arguments of `ksmith optimize`.
#[derive(clap::Args)]
pub(crate) struct OptimizeArgs {
    /// Task directory, or a suite directory (every task in turn, with a summary).
    pub task: PathBuf,
    /// Solution to start from (default: solutions/seed, else solutions/fast; agent runs: seed, naive, fast).
    #[arg(long, help_heading = "Input and output")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchArgs,
    /// The tuner's strategy (exhaustive, random, hillclimb, genetic; default hillclimb), apart
    /// from `--strategy`, which picks a graph search here.
    #[arg(long, value_name = "STRATEGY", help_heading = "Search")]
    pub tune_strategy: Option<String>,
    /// Where to write the best solution and report (default: STORE/optimized/TASK; for a suite,
    /// the directory that gets one folder per task and summary.md).
    #[arg(long, help_heading = "Input and output")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub opts: JudgeOpts,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub search_flags: SearchFlags,
}

impl OptimizeArgs {
    /// The tuner's settings: `--tune-strategy`, or a tuner strategy given to `--strategy` (as
    /// before the two were apart; said once), else hill climbing.
    pub(crate) fn tuner(&self) -> Result<SearchArgs, Exit> {
        let mut tuner = self.search.clone();
        let given = self.search.strategy.as_str();
        let tuner_name = ksmith_tune::STRATEGIES.contains(&given) && given != "hillclimb";
        tuner.strategy = match (&self.tune_strategy, tuner_name) {
            (Some(t), true) => {
                return Err(input(anyhow!(
                    "--strategy {given} and --tune-strategy {t}: the tuner's strategy is --tune-strategy; --strategy picks a graph search"
                )))
            }
            (Some(t), false) => t.clone(),
            (None, true) => {
                note!(
                    "ksmith: --strategy {given} is the tuner's strategy: say --tune-strategy {given} (--strategy picks a graph search in optimize)"
                );
                given.to_string()
            }
            (None, false) => "hillclimb".to_string(),
        };
        Ok(tuner)
    }
}

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

/// Where an interactive run's review points are answered (stored with an interactive search).
#[derive(
    clap::ValueEnum,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
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
    /// Loop iterations: nodes after the start (an agent run without --strategy: default 3; 0
    /// judges the start only). On resume, the new total.
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

/// Search flags of `optimize` (with a search `--strategy`).
#[derive(clap::Args, Clone, Debug, Default)]
#[command(
    next_help_heading = "Graph search (--strategy loop|best-of-n|parallel|beam|greedy|evolve)"
)]
pub(crate) struct SearchFlags {
    /// beam: nodes kept per level, W (default 4).
    #[arg(long, value_parser = crate::whole::<u32>(1..=64))]
    pub width: Option<u32>,
    /// beam: children per kept node, B (default 2).
    #[arg(long, value_parser = crate::whole::<u32>(1..=64))]
    pub branches: Option<u32>,
    /// beam, parallel: levels (beam) or nodes per trajectory (parallel) (default: until a budget).
    #[arg(long, value_parser = crate::whole::<u32>(1..=1000))]
    pub depth: Option<u32>,
    /// Inner plan → implement → judge rounds per node, K (default 1).
    #[arg(long, value_parser = crate::whole::<u32>(1..=20))]
    pub inner: Option<u32>,
    /// parallel: trajectories, N (default 4); best-of-n: children of the root (default: until
    /// a budget).
    #[arg(long, value_parser = crate::whole::<u32>(1..=1000))]
    pub n: Option<u32>,
    /// greedy: most children per node (default 3).
    #[arg(long, value_parser = crate::whole::<u32>(1..=100))]
    pub branch_cap: Option<u32>,
    /// evolve: islands (default 3).
    #[arg(long, value_parser = crate::whole::<u32>(1..=64))]
    pub islands: Option<u32>,
    /// evolve: finished nodes between migrations, M (default 8).
    #[arg(long, value_parser = crate::whole::<u32>(1..=10_000))]
    pub migrate_every: Option<u32>,
    /// Node expansions in flight at once (default 1).
    #[arg(long, value_parser = crate::whole::<u32>(1..=64))]
    pub jobs: Option<u32>,
    /// Most evaluations by the judge.
    #[arg(long, value_parser = crate::whole::<u64>(1..))]
    pub max_evals: Option<u64>,
    /// Most nodes (default 20 when no other limit is given).
    #[arg(long, value_parser = crate::whole::<u64>(1..=100_000))]
    pub max_nodes: Option<u64>,
    /// Stop once a correct node reaches this speedup.
    #[arg(long, value_parser = positive)]
    pub target_speedup: Option<f64>,
    /// Stop once a correct node reaches this fraction of the roofline (0 to 1].
    #[arg(long, value_parser = fraction)]
    pub target_roofline: Option<f64>,
}

/// A budget in dollars or seconds: a finite number above zero.
fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("expected a number above 0".into()),
    }
}

/// A fraction: above 0, at most 1.
fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("expected a fraction above 0, at most 1".into()),
    }
}

/// The judge flags a run's frozen judge settings stand for.
pub(crate) fn judge_opts(f: &FrozenJudge) -> JudgeOpts {
    let mut o = crate::default_opts();
    o.timeout = f.timeout;
    o.seeds = f.seeds;
    o.min_time_ms = f.min_time_ms;
    o.no_timing = false;
    o
}

/// A `--max-cost` can only hold a model whose spending is counted: one with a price.
pub(crate) fn check_cost_limit(
    spec: &ksmith_llm::ModelSpec,
    config: &ksmith_llm::Config,
    cost: Option<f64>,
) -> Result<(), Exit> {
    match cost {
        Some(cost) if config.price(spec).is_none() => Err(input(anyhow!(
            "--max-cost {cost}: no price is known for {spec}, so spending cannot be counted; add [prices.\"{spec}\"] with input_per_mtok and output_per_mtok to the config file, or drop --max-cost"
        ))),
        _ => Ok(()),
    }
}
