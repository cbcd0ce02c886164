//! Every agent run from the command line: `ksmith optimize TASK --model P:M [--strategy loop|
//! best-of-n|parallel|beam|greedy|evolve]` (without `--strategy`, the loop with every stage;
//! `--model sim:POOL.json` simulates), `ksmith resume RUN`, and `ksmith simulate` (strategies
//! compared on a pool; `simulate pool` makes a pool from a store). The engine is
//! `ksmith_search`; this module turns flags into settings, picks the expander and finalizer,
//! prints the engine's events and writes the winner with its report.

use crate::run_args::{judge_opts, BudgetArgs, OptimizeArgs, ReviewVia, SearchFlags};
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_search::agent::stages::{StageSettings, Stages};
use ksmith_search::agent::state::FrozenJudge;
use ksmith_search::agent::state::Reviewer;
use ksmith_search::agent::{AgentExpander, AgentFinalizer, ExpanderSettings, JudgeFactory};
use ksmith_search::engine::{parse_state, SearchState};
use ksmith_search::sim::{self, Pool, SimExpander, SimFinalizer};
use ksmith_search::{
    Budget, Event, EventSink, ExpandError, Expander, Finalizer, Node, NodeState, Search,
    SearchSettings, StopReason, StorePersist, StrategyKind, StrategySettings,
};
use ksmith_store::{RunRow, RunStatus, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a search run stores as its options (enough to resume it).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SearchRunOptions {
    /// The engine's settings.
    settings: SearchSettings,
    /// The model spelling (`sim:POOL` today).
    model: String,
    /// The task's name (the pool's task).
    task: String,
    /// The starting solution of an agent search (None: the first node writes a kernel).
    #[serde(default)]
    start: Option<PathBuf>,
    /// Fix attempts per candidate in a node's session.
    #[serde(default = "default_fix_attempts")]
    fix_attempts: u32,
    /// Prompt template overrides.
    #[serde(default)]
    prompts: Option<PathBuf>,
    /// Judge settings frozen with the run (None: a simulated search).
    #[serde(default)]
    judge: Option<FrozenJudge>,
    /// Where the winner is written (default STORE/optimized/TASK).
    #[serde(default)]
    out: Option<PathBuf>,
    /// Extra knowledge directories retrieved into the planners' prompts.
    #[serde(default)]
    knowledge: Vec<PathBuf>,
    /// The sessions' optional stages (autotune, profile); off in runs stored before them.
    #[serde(default)]
    stages: StageSettings,
    /// Where an interactive search's reviews are answered (None: autonomous).
    #[serde(default)]
    review: Option<ReviewVia>,
}

fn default_fix_attempts() -> u32 {
    3
}

/// The search strategy an `optimize` asks for, if it asks for a search: a search strategy
/// name, or a model (every agent run is a search; without `--strategy`, the loop).
pub(crate) fn requested(args: &OptimizeArgs) -> Result<Option<StrategyKind>, Exit> {
    if let Some(k) = StrategyKind::from_name(&args.search.strategy) {
        return Ok(Some(k));
    }
    if args.agent.model.is_some() {
        // `hillclimb` is the shared flag's default: no strategy was asked for.
        if args.search.strategy == "hillclimb" {
            return Ok(Some(StrategyKind::Loop));
        }
        return Err(input(anyhow!(
            "--strategy {}: an agent run is a graph search; expected one of {} (the autotuner inside it climbs hills)",
            args.search.strategy,
            names()
        )));
    }
    let f = &args.search_flags;
    let given = [
        ("--width", f.width.is_some()),
        ("--branches", f.branches.is_some()),
        ("--depth", f.depth.is_some()),
        ("--inner", f.inner.is_some()),
        ("--n", f.n.is_some()),
        ("--branch-cap", f.branch_cap.is_some()),
        ("--islands", f.islands.is_some()),
        ("--migrate-every", f.migrate_every.is_some()),
        ("--jobs", f.jobs.is_some()),
        ("--max-evals", f.max_evals.is_some()),
        ("--max-nodes", f.max_nodes.is_some()),
        ("--target-speedup", f.target_speedup.is_some()),
        ("--target-roofline", f.target_roofline.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
        return Err(input(anyhow!(
            "{flag} is a graph-search flag; add --strategy {}",
            names().replace(", ", "|")
        )));
    }
    Ok(None)
}

fn names() -> String {
    StrategyKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The strategy with the flags that apply to it; a flag for another strategy is refused.
fn strategy_settings(kind: StrategyKind, f: &SearchFlags) -> Result<StrategySettings, Exit> {
    let mut s = StrategySettings::default_for(kind);
    let mut used = Vec::new();
    match &mut s {
        StrategySettings::Loop => {}
        StrategySettings::BestOfN { n } => {
            if f.n.is_some() {
                *n = f.n;
                used.push("n");
            }
        }
        StrategySettings::Parallel {
            trajectories,
            depth,
        } => {
            if let Some(v) = f.n {
                *trajectories = v;
                used.push("n");
            }
            if f.depth.is_some() {
                *depth = f.depth;
                used.push("depth");
            }
        }
        StrategySettings::Beam {
            width,
            branches,
            depth,
        } => {
            if let Some(v) = f.width {
                *width = v;
                used.push("width");
            }
            if let Some(v) = f.branches {
                *branches = v;
                used.push("branches");
            }
            if f.depth.is_some() {
                *depth = f.depth;
                used.push("depth");
            }
        }
        StrategySettings::Greedy { branch_cap } => {
            if let Some(v) = f.branch_cap {
                *branch_cap = v;
                used.push("branch-cap");
            }
        }
        StrategySettings::Evolve {
            islands,
            migrate_every,
            ..
        } => {
            if let Some(v) = f.islands {
                *islands = v;
                used.push("islands");
            }
            if let Some(v) = f.migrate_every {
                *migrate_every = v;
                used.push("migrate-every");
            }
        }
    }
    let given = [
        ("width", f.width.is_some()),
        ("branches", f.branches.is_some()),
        ("depth", f.depth.is_some()),
        ("n", f.n.is_some()),
        ("branch-cap", f.branch_cap.is_some()),
        ("islands", f.islands.is_some()),
        ("migrate-every", f.migrate_every.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(n, g)| *g && !used.contains(n)) {
        return Err(input(anyhow!(
            "--{flag} does not apply to --strategy {kind} (see docs/search.md for each strategy's parameters)"
        )));
    }
    s.check()
        .map_err(|e| input(anyhow!("--strategy {kind}: {e}")))?;
    Ok(s)
}

/// The expander and finalizer a model spelling stands for.
struct Chosen {
    expander: Arc<dyn Expander>,
    finalizer: Box<dyn Finalizer>,
    /// The agent expander, to write the winner with (None in simulation).
    agent: Option<Arc<AgentExpander>>,
}

/// A judge factory for the expander's threads: the CLI's judge with the run's frozen settings.
fn judge_factory(ctx: &Ctx, opts: crate::JudgeOpts) -> JudgeFactory {
    let ctx = ctx.clone();
    Box::new(move || ctx.judge(&opts).map_err(|e| e.1))
}

/// THE place an expander is chosen from a model spelling: `sim:POOL.json` is the simulator;
/// every other model is an LLM agent growing each node with a short session.
fn expander_for(
    ctx: &Ctx,
    opts: &SearchRunOptions,
    run: &str,
    task_dir: &Path,
) -> Result<Chosen, Exit> {
    let model = opts.model.as_str();
    if let Some(path) = model.strip_prefix("sim:") {
        let p = Path::new(path);
        let pool = Pool::load(p).map_err(input)?;
        let t = pool
            .task(&opts.task, &p.display().to_string())
            .map_err(input)?
            .clone();
        return Ok(Chosen {
            expander: Arc::new(SimExpander::new(&pool, &t)),
            finalizer: Box::new(SimFinalizer { seed: 0 }),
            agent: None,
        });
    }
    let frozen = opts.judge.ok_or_else(|| {
        env_err(anyhow!(
            "run {run}: an agent search without stored judge settings"
        ))
    })?;
    let judged = judge_opts(&frozen);
    let settings = ExpanderSettings {
        run: run.to_string(),
        store_dir: ctx.store_dir.clone(),
        task_dir: task_dir.to_path_buf(),
        model: opts.model.clone(),
        start: opts.start.clone(),
        fix_attempts: opts.fix_attempts,
        prompts: opts.prompts.clone(),
        knowledge: opts.knowledge.clone(),
        stages: opts.stages,
    };
    let mut agent =
        AgentExpander::new(settings, judge_factory(ctx, judged.clone())).map_err(expand_err)?;
    if let Some(via) = opts.review {
        // Every stage of every node is reviewed by the person running it.
        let reviewer: Arc<dyn Reviewer + Send + Sync> = match via {
            ReviewVia::Terminal => Arc::new(crate::agent::TerminalReviewer),
            ReviewVia::Web => Arc::new(crate::serve::review::WebReviewer {
                store: ctx.store_dir.clone(),
                run: run.to_string(),
            }),
        };
        agent = agent.with_stages(Stages {
            reviewer: Some(reviewer),
            ..Stages::standard(
                opts.stages,
                Arc::new(ksmith_search::agent::tuner::HillClimbTuner),
            )
        });
    }
    let agent = Arc::new(agent);
    let mut fresh = judged;
    fresh.fresh_seeds = true;
    Ok(Chosen {
        expander: agent.clone(),
        finalizer: Box::new(AgentFinalizer {
            expander: agent.clone(),
            fresh_judge: judge_factory(ctx, fresh),
            store_dir: ctx.store_dir.clone(),
            held_out_seed: u64::from_str_radix(
                &ksmith_task::content_hash(run.as_bytes())[..16],
                16,
            )
            .unwrap_or(7),
        }),
        agent: Some(agent),
    })
}

fn expand_err(e: ExpandError) -> Exit {
    match e {
        ExpandError::Input(e) => input(e),
        e => env_err(e),
    }
}

/// Iterations of an agent run without `--strategy` when none are asked for.
const DEFAULT_ITERATIONS: u32 = 3;

/// Budget from the flags. In a loop, `--iterations N` is N nodes after the start (N + 1 in
/// all); an agent run without `--strategy` gets 3 iterations unless a node limit is given, and
/// any other search without a limit 20 nodes.
fn budget(
    b: &BudgetArgs,
    f: &SearchFlags,
    kind: StrategyKind,
    implicit: bool,
) -> Result<Budget, Exit> {
    let iterations = match (b.iterations, kind, f.max_nodes) {
        (Some(_), StrategyKind::Loop, Some(_)) => {
            return Err(input(anyhow!(
                "--iterations and --max-nodes both limit the loop's nodes (iterations + 1 with the start); give one"
            )))
        }
        (Some(n), StrategyKind::Loop, None) => Some(n),
        (Some(_), k, _) => {
            return Err(input(anyhow!(
                "--iterations counts the loop's nodes after the start; --strategy {k} takes --max-nodes, --max-calls, --max-evals, --max-tokens, --max-cost or --max-wall"
            )))
        }
        (None, _, None) if implicit => Some(DEFAULT_ITERATIONS),
        (None, _, _) => None,
    };
    let mut out = Budget {
        calls: b.max_calls,
        tokens: b.max_tokens,
        cost: b.max_cost,
        evaluations: f.max_evals,
        wall_s: b.max_wall,
        nodes: iterations.map(|n| u64::from(n) + 1).or(f.max_nodes),
        target_speedup: f.target_speedup,
        target_roofline: f.target_roofline,
    };
    if out.calls.is_none()
        && out.tokens.is_none()
        && out.cost.is_none()
        && out.evaluations.is_none()
        && out.wall_s.is_none()
        && out.nodes.is_none()
    {
        out.nodes = Some(20);
    }
    Ok(out)
}

fn run_error(e: StoreError) -> Exit {
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
    let tag = ksmith_task::content_hash(
        format!("search-{}-{}", now.as_nanos(), std::process::id()).as_bytes(),
    );
    format!("run-{}-{}", now.as_secs(), &tag[..6])
}

/// `ksmith optimize TASK --strategy S --model sim:POOL`: a new search run.
pub(crate) fn start(ctx: &Ctx, args: &OptimizeArgs, kind: StrategyKind) -> Result<u8, Exit> {
    let flags = &args.search_flags;
    let strategy = strategy_settings(kind, flags)?;
    // `optimize --model` without `--strategy`: the loop with every stage on.
    let implicit = StrategyKind::from_name(&args.search.strategy).is_none();
    let model = args.agent.model.clone().ok_or_else(|| {
        input(anyhow!(
            "--strategy {kind}: a graph search needs --model PROVIDER:MODEL (or sim:POOL.json to simulate one)"
        ))
    })?;
    if !args.task.join(ksmith_task::TASK_FILE_NAME).exists() {
        return Err(input(anyhow!(
            "{}: a search optimizes one task directory (with task.toml), not a suite",
            args.task.display()
        )));
    }
    let task = crate::load_task(&args.task)?;
    let mut settings = SearchSettings::new(strategy);
    settings.budget = budget(&args.agent.budget, flags, kind, implicit)?;
    settings.jobs = flags.jobs.unwrap_or(1);
    settings.inner = flags.inner.unwrap_or(1);
    settings.seed = args.search.seed;
    // The expander is built (and its input checked) before anything is stored.
    let model = match model.strip_prefix("sim:") {
        Some(p) => format!(
            "sim:{}",
            std::path::absolute(p)
                .unwrap_or_else(|_| PathBuf::from(p))
                .display()
        ),
        None => model,
    };
    let agent_search = !model.starts_with("sim:");
    if agent_search {
        // What a node may judge, reserved from an evaluation budget so it is never overrun:
        // its candidate and each fix (build and test stages apart), the tuner's
        // configurations with their confirmation and the tuned kernel, and the timings
        // against its parent (two candidates, once and again for each more-rounds step). Counted per inner round, so
        // more rounds per node only reserve more.
        let tuning = match args.agent.tune_budget {
            0 => 0,
            n => n as u32 + 5,
        };
        let versus_parent = 2 * (1 + ksmith_judge::decide::MORE_ROUNDS);
        settings.evals_per_round = 1 + 2 * args.agent.fix_attempts + tuning + versus_parent;
        // Directions that apply to this kernel's operator class only.
        settings.hints = Some(ksmith_search::Hint::for_op_class(task.op_class));
    }
    let start_from = match (&args.from, agent_search) {
        (Some(p), _) => Some(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        (None, true) => {
            let found = ["seed", "naive", "fast"]
                .iter()
                .find_map(|n| ksmith_task::Solution::find(&task.dir, n));
            if found.is_none() {
                note!(
                    "ksmith: {} has no solution to start from (solutions/seed, naive or fast); the agents write the first kernel, starting from a skeleton with its C signature",
                    task.dir.display()
                );
            }
            found
        }
        (None, false) => None,
    };
    let options = SearchRunOptions {
        settings: settings.clone(),
        model: model.clone(),
        task: task.name.clone(),
        start: start_from,
        fix_attempts: args.agent.fix_attempts,
        prompts: args.agent.prompts.clone(),
        judge: agent_search.then_some(FrozenJudge {
            timeout: args.opts.timeout,
            seeds: args.opts.seeds,
            min_time_ms: args.opts.min_time_ms,
        }),
        out: args.out.clone(),
        knowledge: args.agent.knowledge.clone(),
        // Every node's kept candidate is tuned and profiled unless the flags turn them off.
        stages: StageSettings {
            tune_budget: if agent_search {
                args.agent.tune_budget
            } else {
                0
            },
            profile: agent_search && !args.agent.no_profile,
        },
        review: (args.agent.interactive || args.agent.review.is_some())
            .then(|| args.agent.review.unwrap_or_default()),
    };
    if options.review.is_some() && !agent_search {
        return Err(input(anyhow!(
            "--interactive: a simulated search has no agents to review"
        )));
    }
    if agent_search && settings.budget.cost.is_some() {
        let spec =
            ksmith_llm::ModelSpec::parse(&model).map_err(|e| input(anyhow!("--model: {e}")))?;
        let config = ksmith_llm::Config::discover().map_err(input)?;
        crate::run_args::check_cost_limit(&spec, &config, settings.budget.cost)?;
    }
    let run_id = new_run_id();
    let chosen = expander_for(ctx, &options, &run_id, &task.dir)?;
    let search = Search::new(settings.clone()).map_err(input)?;
    let mut store = ctx.store()?;
    let mut run = RunRow {
        id: run_id,
        created_at: String::new(),
        updated_at: String::new(),
        task_dir: std::path::absolute(&task.dir)
            .unwrap_or_else(|_| task.dir.clone())
            .display()
            .to_string(),
        task: task.name.clone(),
        tests_hash: task.content_hash.clone(),
        model,
        mode: "search".into(),
        options: serde_json::to_string(&options).map_err(env_err)?,
        status: RunStatus::Running,
        stop_reason: None,
        active_s: 0.0,
        out_dir: None,
    };
    store.create_run(&run).map_err(env_err)?;
    let _lock = store.lock_run(&run.id).map_err(run_error)?;
    say!(
        "search {}: {} on {} with {}",
        run.id,
        kind,
        task.name,
        run.model
    );
    drive(ctx, &mut store, &mut run, search, &chosen)
}

/// Whether a stored run is a search run (an unknown id is left to the agent's resume).
pub(crate) fn is_search_run(ctx: &Ctx, id: &str) -> Result<bool, Exit> {
    let store = ctx.store_read()?;
    Ok(store
        .run(id)
        .map_err(env_err)?
        .is_some_and(|r| r.mode == "search"))
}

/// `ksmith resume RUN` of a search run: the same search, from its last saved state.
pub(crate) fn resume(
    ctx: &Ctx,
    id: &str,
    b: &BudgetArgs,
    extra: Option<&SearchFlags>,
    review: Option<ReviewVia>,
) -> Result<u8, Exit> {
    let mut store = ctx.store()?;
    let mut run = store
        .run(id)
        .map_err(env_err)?
        .ok_or_else(|| input(anyhow!("no run `{id}` in {}", ctx.store_dir.display())))?;
    let _lock = store.lock_run(id).map_err(run_error)?;
    let mut opts: SearchRunOptions = serde_json::from_str(&run.options)
        .map_err(|e| env_err(anyhow!("run {id}: stored search options unreadable: {e}")))?;
    match (review, opts.review) {
        (Some(_), None) => {
            return Err(input(anyhow!(
                "--review: search {id} is autonomous; it has no review points"
            )))
        }
        // Answered elsewhere from now on (this process only; the run stays interactive).
        (Some(via), Some(_)) => opts.review = Some(via),
        _ => {}
    }
    let state: SearchState = match store.search_state(id).map_err(env_err)? {
        Some(json) => parse_state(&json).map_err(env_err)?,
        None => Search::new(opts.settings.clone()).map_err(input)?.state,
    };
    let mut search = Search::resume(state).map_err(env_err)?;
    let given = b.max_calls.is_some()
        || b.max_tokens.is_some()
        || b.max_cost.is_some()
        || b.max_wall.is_some()
        || b.iterations.is_some()
        || extra.is_some_and(|f| f.max_evals.is_some() || f.max_nodes.is_some());
    if given {
        let mut nb = search.state.settings.budget.clone();
        if let Some(n) = b.iterations {
            if search.state.settings.strategy.kind() != StrategyKind::Loop {
                return Err(input(anyhow!(
                    "--iterations counts a loop's nodes after the start; search {id} is not a loop: use --max-nodes or --max-calls"
                )));
            }
            // In all, counting the start.
            nb.nodes = Some(u64::from(n) + 1);
        }
        nb.calls = b.max_calls.or(nb.calls);
        nb.tokens = b.max_tokens.or(nb.tokens);
        nb.cost = b.max_cost.or(nb.cost);
        nb.wall_s = b.max_wall.or(nb.wall_s);
        if let Some(f) = extra {
            nb.evaluations = f.max_evals.or(nb.evaluations);
            nb.nodes = f.max_nodes.or(nb.nodes);
        }
        search.set_budget(nb);
    } else if run.status == RunStatus::Finished {
        return Err(input(anyhow!(
            "run {id} already finished ({}); raise a limit (--max-calls, ...) to search further",
            run.stop_reason.as_deref().unwrap_or("done")
        )));
    }
    let chosen = expander_for(ctx, &opts, id, Path::new(&run.task_dir))?;
    let in_flight = search
        .state
        .batch
        .iter()
        .filter(|n| search.state.graph.get(**n).is_some_and(|e| !e.finished))
        .count();
    if run.status == RunStatus::Running {
        // Stored as running, yet its lock was free: the process that drove it is gone.
        note!("ksmith: resuming run {id} (its process is gone)");
    }
    say!(
        "resuming search {id}: {} nodes finished, {in_flight} in flight (expanded again)",
        search.state.totals.nodes
    );
    run.status = RunStatus::Running;
    run.stop_reason = None;
    store.update_run(&run).map_err(env_err)?;
    drive(ctx, &mut store, &mut run, search, &chosen)
}

/// Saves the run's row, never over a signal's `interrupted` mark.
fn save_run(store: &Store, run: &RunRow) -> Result<(), Exit> {
    crate::interrupt::saving(run.status, || store.update_run(run))
        .unwrap_or(Ok(()))
        .map_err(env_err)
}

/// Prints the engine's events.
struct TermSink;

impl EventSink for TermSink {
    fn emit(&self, event: Event) {
        match event {
            Event::NodeStarted { node, parent, hint } => {
                let from = parent.map_or("start".to_string(), |p| p.to_string());
                say!("start {node} from {from} [{hint}]");
            }
            Event::NodeFinished { node } => say!("{}", node_line(&node)),
            Event::NewBest { node, speedup } => say!("  new best: {node} {speedup:.2}x"),
            Event::Progress { node, message } => match node {
                Some(n) => note!("  {n}: {}", crate::term::one(&message)),
                None => note!("  {}", crate::term::one(&message)),
            },
            // Tuning inside a node and the stop itself are summarised elsewhere.
            _ => {}
        }
    }
}

fn node_line(n: &Node) -> String {
    let parent = n.parent.map_or("-".to_string(), |p| p.to_string());
    let what = match (n.state, n.outcome.status, n.outcome.speedup) {
        (NodeState::Duplicate, _, _) => format!(
            "duplicate of {}",
            n.duplicate_of.map_or("?".into(), |d| d.to_string())
        ),
        (_, Some(s), Some(x)) if n.outcome.passed() => format!("{s} {x:.2}x"),
        (_, Some(s), _) => s.to_string(),
        (st, None, _) => st.as_str().to_string(),
    };
    format!(
        "node {} <- {parent} depth {} [{}] {what} (calls {}, evals {})",
        n.id, n.depth, n.hint, n.spend.calls, n.spend.evaluations
    )
}

fn drive(
    ctx: &Ctx,
    store: &mut Store,
    run: &mut RunRow,
    mut search: Search,
    chosen: &Chosen,
) -> Result<u8, Exit> {
    let (expander, finalizer) = (&*chosen.expander, &*chosen.finalizer);
    let id = run.id.clone();
    let started = std::time::Instant::now();
    // SIGTERM, SIGINT or SIGHUP from now on marks the run interrupted (resumable) and ends
    // the process, whatever a node is doing.
    crate::interrupt::watch(ctx.store_dir.clone(), &id, run.active_s, started);
    let result = {
        let mut persist = StorePersist {
            store: &mut *store,
            run: id.clone(),
        };
        let sink = crate::run_events::EventFile::tee(&id, TermSink);
        search.run(expander, &sink, &mut persist)
    };
    run.active_s += started.elapsed().as_secs_f64();
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            run.status = RunStatus::Failed;
            run.stop_reason = Some(e.to_string());
            let _ = save_run(store, run);
            return Err(match e {
                ksmith_search::SearchError::Input(_) | ksmith_search::SearchError::Settings(_) => {
                    input(e)
                }
                e => env_err(e),
            });
        }
    };
    let mut finalists: Vec<Node> = r
        .finalists
        .iter()
        .filter_map(|f| r.nodes.get(f.0 as usize).cloned())
        .collect();
    // The start (the root, when it passed) is always a finalist and comes first: it is the
    // reference the others are re-timed against, and it stays the winner unless beaten then.
    if let Some(root) = r
        .nodes
        .first()
        .filter(|n| n.parent.is_none() && n.outcome.passed())
    {
        finalists.retain(|n| n.id != root.id);
        finalists.insert(0, root.clone());
    }
    let record = if finalists.is_empty() {
        ksmith_search::finalize::FinalRecord::default()
    } else {
        finalizer.decide(&finalists).map_err(env_err)?
    };
    let winner = record.node.map(ksmith_search::NodeId);
    if !finalists.is_empty() {
        // Stored, so that `show` and the report show the kernel that was chosen and written.
        ksmith_search::finalize::record_final(store, &id, &record).map_err(env_err)?;
    }
    if let StopReason::Paused { by } = &r.stop {
        run.status = RunStatus::Paused;
        run.stop_reason = Some(format!("paused: {by}"));
        save_run(store, run)?;
        say!("search {id} paused ({by}); continue with `ksmith resume {id}`");
        return Ok(0);
    }
    run.status = if r.stop.is_normal() {
        RunStatus::Finished
    } else {
        RunStatus::Failed
    };
    run.stop_reason = Some(r.stop.to_string());
    save_run(store, run)?;
    say!("stopped: {}", r.stop);
    if let StopReason::ExpanderFailed { .. } = &r.stop {
        say!("fix what stopped it, then continue with `ksmith resume {id}`");
    }
    let t = &r.totals;
    say!(
        "{} nodes, {} LLM calls, {} tokens, ${:.4}, {} evaluations; engine overhead {:.1} µs per node (+ {:.1} µs persisting)",
        t.nodes,
        t.spend.calls,
        t.spend.tokens,
        t.spend.cost,
        t.spend.evaluations,
        r.overhead_per_node_s * 1e6,
        r.persist_per_node_s * 1e6
    );
    match (r.best, r.best_speedup) {
        (Some(b), Some(s)) => say!(
            "best: {b} {s:.2}x; finalists: {}",
            r.finalists
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => say!("best: no correct node"),
    }
    for f in &record.finalists {
        say!("{}", f.line(record.node));
    }
    if !record.summary.is_empty() {
        say!("decided: {}", record.summary);
    }
    if let Some(w) = winner {
        say!("winner (re-checked on fresh seeds and held-out shapes, re-timed among the finalists): {w}");
        if let Some(agent) = &chosen.agent {
            let opts: SearchRunOptions = serde_json::from_str(&run.options).map_err(env_err)?;
            let out = write_winner(ctx, store, run, &opts, agent, &r.nodes, w)?;
            let report = written_report(store, run, &opts, agent, &r.nodes, &record, &r.stop)?;
            std::fs::write(out.join("report.md"), report).map_err(|e| {
                env_err(anyhow!("writing {}: {e}", out.join("report.md").display()))
            })?;
            say!("wrote {} (the winner) and its report.md", out.display());
        }
    } else if chosen.agent.is_some() {
        say!("no finalist held up on fresh seeds and the held-out shapes; nothing written");
    }
    if chosen.agent.is_some() {
        match ksmith_search::memory::harvest_on_finish(store, &id) {
            Ok(line) => note!("ksmith: {line}"),
            Err(e) => note!("ksmith: warning: memory not harvested: {e}"),
        }
    }
    Ok(match r.stop {
        StopReason::ExpanderFailed { .. } => crate::EXIT_FAILED,
        // An agent run that wrote no kernel did not do its job.
        _ if chosen.agent.is_some() && winner.is_none() => crate::EXIT_FAILED,
        _ => 0,
    })
}

/// The run's `report.md`, from what was stored: the nodes, the final judgement and the calls.
fn written_report(
    store: &Store,
    run: &RunRow,
    opts: &SearchRunOptions,
    agent: &AgentExpander,
    nodes: &[Node],
    record: &ksmith_search::finalize::FinalRecord,
    stop: &StopReason,
) -> Result<String, Exit> {
    let winner_eval = record
        .finalists
        .iter()
        .find(|f| Some(f.node) == record.node)
        .and_then(|f| f.eval_id);
    let winner = match winner_eval {
        Some(id) => store.get(id).map_err(env_err)?.map(|e| e.result),
        None => None,
    };
    let calls = store.calls(&run.id).map_err(env_err)?;
    let (tin, tout, cost) = calls.iter().fold((0, 0, 0.0), |a, c| {
        (a.0 + c.tokens_in, a.1 + c.tokens_out, a.2 + c.cost)
    });
    Ok(ksmith_results::written::RunReport {
        run: &run.id,
        task: agent.task(),
        model: &run.model,
        strategy: opts.settings.strategy.kind().as_str(),
        stop: &stop.to_string(),
        nodes,
        record,
        winner: winner.as_ref(),
        calls: (calls.len(), tin, tout, cost),
    }
    .markdown())
}

/// Writes the winning node as a solution directory (solution.toml + source).
fn write_winner(
    ctx: &Ctx,
    store: &mut Store,
    run: &mut RunRow,
    opts: &SearchRunOptions,
    agent: &AgentExpander,
    nodes: &[Node],
    w: ksmith_search::NodeId,
) -> Result<PathBuf, Exit> {
    let Some(hash) = nodes.get(w.0 as usize).and_then(|n| n.code_hash.clone()) else {
        return Err(env_err(anyhow!("node {w}: the winner has no stored code")));
    };
    let source = String::from_utf8(store.artifact(&hash).map_err(env_err)?)
        .map_err(|_| env_err(anyhow!("node {w}: stored code is not UTF-8")))?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| ctx.store_dir.join("optimized").join(&run.task));
    let mut sol = agent.candidate(w, source);
    // The start's tunables stay declared where the winner still has their `#define`s, so the
    // written solution can be tuned again.
    if let Some(start) = opts
        .start
        .as_ref()
        .and_then(|p| ksmith_task::Solution::load(p, agent.task()).ok())
    {
        let defines: Vec<String> = ksmith_tune::source_defines(&sol.sources[0].1)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        sol.tunables = start
            .tunables
            .into_iter()
            .filter(|t| defines.contains(&t.name))
            .collect();
    }
    crate::tune::write_solution(&sol, &out, "", "")
        .map_err(|e| env_err(anyhow!("writing {}: {e}", out.display())))?;
    run.out_dir = Some(out.display().to_string());
    save_run(store, run)?;
    Ok(out)
}

/// Arguments of `ksmith simulate`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct SimulateArgs {
    #[command(subcommand)]
    pub cmd: Option<SimulateCmd>,
    /// The pool file (docs/search.md).
    #[arg(long)]
    pub pool: Option<PathBuf>,
    /// Only this task of the pool (default: every task; one the simulator cannot search is named as skipped).
    #[arg(long)]
    pub task: Option<String>,
    /// Strategies to compare, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "loop,best-of-n,parallel,beam,greedy,evolve"
    )]
    pub strategies: Vec<String>,
    /// Seeds per strategy.
    #[arg(long, default_value_t = 20, value_parser = crate::whole::<u32>(1..=10_000))]
    pub seeds: u32,
    /// LLM-call budget per search.
    #[arg(long, default_value_t = 40, value_parser = crate::whole::<u64>(1..=1_000_000))]
    pub calls: u64,
    /// Expansions in flight (results do not depend on it beyond batch order).
    #[arg(long, default_value_t = 1, value_parser = crate::whole::<u32>(1..=64))]
    pub jobs: u32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `simulate` subcommands.
#[derive(clap::Subcommand)]
pub(crate) enum SimulateCmd {
    /// Write a pool from the store's evaluations (global --store).
    Pool {
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Output format of `simulate`.
#[derive(Copy, Clone, clap::ValueEnum)]
pub(crate) enum Format {
    /// A table.
    Table,
    /// One JSON document.
    Json,
}

/// `ksmith simulate`.
pub(crate) fn simulate(ctx: &Ctx, args: &SimulateArgs) -> Result<u8, Exit> {
    if let Some(SimulateCmd::Pool { out }) = &args.cmd {
        let store = ctx.store_read()?;
        let pool = sim::pool_from_store(
            &store,
            &format!(
                "made by `ksmith simulate pool` from {}",
                ctx.store_dir.display()
            ),
        )
        .map_err(env_err)?;
        if pool.tasks.is_empty() {
            return Err(input(anyhow!(
                "{}: no C evaluations to make a pool from",
                ctx.store_dir.display()
            )));
        }
        let text = serde_json::to_string_pretty(&pool).map_err(env_err)?;
        std::fs::write(out, text + "\n")
            .map_err(|e| env_err(anyhow!("--out {}: {e}", out.display())))?;
        let n: usize = pool.tasks.iter().map(|t| t.candidates.len()).sum();
        say!(
            "wrote {} ({} tasks, {n} candidates)",
            out.display(),
            pool.tasks.len()
        );
        return Ok(0);
    }
    let path = args.pool.as_ref().ok_or_else(|| {
        input(anyhow!(
            "--pool FILE is required (or `simulate pool --out FILE`)"
        ))
    })?;
    let pool = Pool::load(path).map_err(input)?;
    if pool.tasks.is_empty() {
        return Err(input(anyhow!("pool file {}: no tasks", path.display())));
    }
    // One task when named; else every task of the pool, a task the simulator cannot search
    // (no candidate that passed) named as skipped, never silently left out.
    let mut tasks = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    match &args.task {
        Some(t) => tasks.push(pool.task(t, &path.display().to_string()).map_err(input)?),
        None => {
            for t in &pool.tasks {
                match pool.task(&t.task, &path.display().to_string()) {
                    Ok(found) if !tasks.iter().any(|x: &&sim::PoolTask| x.task == t.task) => {
                        tasks.push(found)
                    }
                    Ok(_) => {}
                    Err(_) => skipped.push((
                        t.task.clone(),
                        "no candidate in the pool passed: nothing to search for".into(),
                    )),
                }
            }
        }
    }
    if tasks.is_empty() {
        return Err(input(anyhow!(
            "pool file {}: no task has a candidate that passed ({})",
            path.display(),
            skipped
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let strategies = args
        .strategies
        .iter()
        .map(|s| {
            StrategyKind::from_name(s.trim())
                .map(StrategySettings::default_for)
                .ok_or_else(|| {
                    let all: Vec<&str> = StrategyKind::ALL.iter().map(|k| k.as_str()).collect();
                    input(anyhow!(
                        "--strategies: unknown strategy {}",
                        ksmith_task::suggest::expected(s.trim(), &all)
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut compared = Vec::new();
    for task in tasks {
        compared.push(
            sim::compare(&pool, task, &strategies, args.seeds, args.calls, args.jobs)
                .map_err(env_err)?,
        );
    }
    if let Format::Json = args.format {
        let v = if args.task.is_some() {
            serde_json::to_value(&compared[0]).map_err(env_err)?
        } else {
            serde_json::json!({
                "tasks": compared,
                "skipped": skipped.iter().map(|(t, why)| serde_json::json!({"task": t, "why": why})).collect::<Vec<_>>(),
            })
        };
        crate::term::json(&serde_json::to_string_pretty(&v).map_err(env_err)?);
        return Ok(0);
    }
    for (t, why) in &skipped {
        note!(
            "ksmith: simulate: task {} skipped: {why}",
            crate::term::one(t)
        );
    }
    // The table, one per task (JSON was printed above).
    for c in &compared {
        say!(
            "task {}: best speedup reached (mean ± sd over {} seeds, [min-max]) against LLM calls; failure rate {:.2}",
            c.task,
            c.seeds,
            c.failure_rate
        );
        let mut head = format!("{:<10}", "strategy");
        for s in c.rows.first().map(|r| r.at.as_slice()).unwrap_or(&[]) {
            head.push_str(&format!(" | {:>22}", format!("{} calls", s.calls)));
        }
        head.push_str(&format!(" | {:>6} | {:>9}", "nodes", "µs/node"));
        say!("{head}");
        for r in &c.rows {
            let mut line = format!("{:<10}", r.strategy.as_str());
            for s in &r.at {
                line.push_str(&format!(
                    " | {:>22}",
                    format!("{:.2} ± {:.2} [{:.2}-{:.2}]", s.mean, s.sd, s.min, s.max)
                ));
            }
            line.push_str(&format!(" | {:>6.1} | {:>9.1}", r.nodes, r.overhead_us));
            say!("{line}");
        }
    }
    Ok(0)
}
