//! Simulation mode: a [`SimExpander`] that draws proposals from a POOL of real candidates
//! with known evaluations, so strategies can be compared offline at no LLM cost, and a
//! [`SimFinalizer`] that re-times finalists by drawing within their measured intervals.
//!
//! The transition model (what a child of a parent with a hint is), documented in
//! docs/search.md:
//! 1. The root (no parent) is the task's `start` candidate when the pool names one (judged,
//!    no LLM call); otherwise a first kernel drawn as in step 2 from nothing.
//! 2. With probability `failure_rate` the session's candidate fails: a failed pool candidate
//!    drawn uniformly (a synthetic COMPILE_ERROR when the pool has none).
//! 3. Otherwise a correct candidate `c` is drawn with weight
//!    `exp(-(dist(P, c) + |log2(s_c / s_P)|) / locality) * affinity(hint, P, c)`:
//!    near the parent in feature space and in speed (a step rarely changes speed by more than
//!    a factor of two or so), more likely in the direction the hint names (see [`affinity`]),
//!    and 5x more likely when the pool recorded `c` as a child of `P` under that hint. The
//!    parent itself gets `duplicate_rate` of the probability (the session rewrote the same
//!    program: a duplicate).
//! 4. `inner` iterations draw in turn, each from the session's best so far; the session keeps
//!    its best. Each iteration costs `calls_per_iteration` calls (capped by the engine's
//!    `max_calls`), `tokens_per_call` tokens each, `cost_per_call` USD each, one evaluation.
//!    `latency_ms` is slept per node (to make a run slow enough to kill in tests).

use crate::engine::{Finalizer, Search, SearchSettings};
use crate::events::{EventSink, NullSink};
use crate::features::Features;
use crate::hint::Hint;
use crate::node::{ExpandError, Expanded, Expander, Expansion, Node, NodeId, NodeOutcome, Spend};
use crate::persist::NoPersist;
use crate::strategy::{StrategyKind, StrategySettings};
use ksmith_judge::Status;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Version of the pool file layout.
pub const POOL_VERSION: u32 = 1;

/// A pool file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Layout version (1).
    pub version: u32,
    /// How it was made (free text).
    #[serde(default)]
    pub description: String,
    /// Simulator settings.
    #[serde(default)]
    pub settings: SimSettings,
    /// Candidates per task.
    pub tasks: Vec<PoolTask>,
}

/// Simulator settings (pool-wide).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimSettings {
    /// LLM calls per inner iteration (default 2: a plan and an implementation).
    pub calls_per_iteration: u64,
    /// Tokens per call (default 4000).
    pub tokens_per_call: u64,
    /// USD per call (default 0).
    pub cost_per_call: f64,
    /// Milliseconds slept per node (default 0).
    pub latency_ms: u64,
    /// Probability a session's candidate fails (None: the pool's own failed fraction, or 0.25
    /// when the pool holds no failure).
    pub failure_rate: Option<f64>,
    /// Locality of steps (default 1; larger: children farther from the parent).
    pub locality: f64,
    /// Probability a correct draw rewrites the parent itself (a duplicate; default 0.1).
    pub duplicate_rate: f64,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            calls_per_iteration: 2,
            tokens_per_call: 4000,
            cost_per_call: 0.0,
            latency_ms: 0,
            failure_rate: None,
            locality: 1.0,
            duplicate_rate: 0.1,
        }
    }
}

/// One task's candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolTask {
    /// Task name.
    pub task: String,
    /// The candidate a run starts from (None: the first node writes a first kernel).
    #[serde(default)]
    pub start: Option<String>,
    /// The candidates.
    pub candidates: Vec<Candidate>,
}

/// One candidate with its evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Unique within the task.
    pub id: String,
    /// Judge status.
    pub status: Status,
    /// Speedup (PASSED).
    #[serde(default)]
    pub speedup: Option<f64>,
    /// Its 95% interval.
    #[serde(default)]
    pub interval: Option<(f64, f64)>,
    /// Roofline fraction.
    #[serde(default)]
    pub roofline_fraction: Option<f64>,
    /// Source (features are computed from it).
    #[serde(default)]
    pub source: Option<String>,
    /// Features, when there is no source.
    #[serde(default)]
    pub features: Option<Features>,
    /// Recorded parent candidate.
    #[serde(default)]
    pub parent: Option<String>,
    /// Recorded hint that led from the parent.
    #[serde(default)]
    pub hint: Option<Hint>,
}

impl Candidate {
    fn passed(&self) -> bool {
        self.status == Status::Passed && self.speedup.is_some_and(|s| s > 0.0)
    }
    fn feats(&self) -> Features {
        self.features
            .or_else(|| self.source.as_deref().map(Features::of_source))
            .unwrap_or_default()
    }
    /// The source the node carries: the candidate's own, or a stub naming it (features from
    /// a stub are empty, so pools without sources give evolve one archive cell).
    fn node_source(&self) -> String {
        match &self.source {
            Some(s) => s.clone(),
            None => format!("/* simulated candidate {} */\n", self.id),
        }
    }
}

/// Problems with a pool.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The file could not be read.
    #[error("pool file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a pool.
    #[error("pool file {path}: not a pool (JSON, docs/search.md): {source}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        source: serde_json::Error,
    },
    /// Layout or content problem.
    #[error("pool file {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What.
        message: String,
    },
    /// No candidates for the task.
    #[error("pool file {path} has no candidates for task `{task}` (it has: {have})")]
    NoTask {
        /// The file.
        path: String,
        /// The task.
        task: String,
        /// Tasks it has.
        have: String,
    },
}

impl Pool {
    /// Reads and checks a pool file.
    pub fn load(path: &Path) -> Result<Pool, PoolError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PoolError::Read {
            path: p.clone(),
            source: e,
        })?;
        let pool: Pool = serde_json::from_str(&text).map_err(|e| PoolError::Parse {
            path: p.clone(),
            source: e,
        })?;
        pool.check().map_err(|m| PoolError::Invalid {
            path: p,
            message: m,
        })?;
        Ok(pool)
    }

    /// Checks layout, ids, starts and numbers.
    pub fn check(&self) -> Result<(), String> {
        if self.version != POOL_VERSION {
            return Err(format!(
                "version {} (this ksmith reads {POOL_VERSION})",
                self.version
            ));
        }
        if let Some(f) = self.settings.failure_rate {
            if !(0.0..1.0).contains(&f) {
                return Err(format!("settings.failure_rate {f} is not in [0, 1)"));
            }
        }
        if !(0.0..1.0).contains(&self.settings.duplicate_rate) {
            return Err("settings.duplicate_rate must be in [0, 1)".into());
        }
        if !(self.settings.locality.is_finite() && self.settings.locality > 0.0) {
            return Err("settings.locality must be above 0".into());
        }
        for t in &self.tasks {
            let mut seen = std::collections::HashSet::new();
            for c in &t.candidates {
                if !seen.insert(c.id.as_str()) {
                    return Err(format!("task `{}`: candidate id `{}` twice", t.task, c.id));
                }
                if let Some(s) = c.speedup {
                    if !(s.is_finite() && s > 0.0) {
                        return Err(format!(
                            "task `{}` candidate `{}`: speedup {s} is not a positive number",
                            t.task, c.id
                        ));
                    }
                }
            }
            if let Some(s) = &t.start {
                if !seen.contains(s.as_str()) {
                    return Err(format!("task `{}`: start `{s}` is not a candidate", t.task));
                }
            }
        }
        Ok(())
    }

    /// The task's candidates.
    pub fn task(&self, name: &str, path: &str) -> Result<&PoolTask, PoolError> {
        self.tasks
            .iter()
            .find(|t| t.task == name && t.candidates.iter().any(|c| c.passed()))
            .ok_or_else(|| PoolError::NoTask {
                path: path.to_string(),
                task: name.to_string(),
                have: self
                    .tasks
                    .iter()
                    .filter(|t| t.candidates.iter().any(|c| c.passed()))
                    .map(|t| t.task.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// How likely a hint leads from `p` to `c` (1: neutral).
pub fn affinity(hint: Hint, p: &Features, c: &Features) -> f64 {
    let toward = |cond: bool, w: f64| if cond { w } else { 1.0 };
    match hint {
        Hint::Parallelize => toward(c.threads > p.threads, 3.0),
        Hint::Vectorize => toward(c.vector > p.vector, 3.0),
        Hint::Tile | Hint::Layout => toward(c.nest > p.nest, 3.0),
        Hint::Unroll => toward(c.loops > p.loops, 2.0),
        Hint::Fuse | Hint::Algorithm => toward(c.loops < p.loops, 2.0),
        Hint::Simplify => toward(c.length < p.length, 2.0),
        // Parameter changes keep the program's shape.
        Hint::Autotune => toward(c == p, 3.0),
        Hint::Precision | Hint::FirstKernel | Hint::Own => 1.0,
    }
}

/// The simulated expander for one task of a pool.
pub struct SimExpander {
    task: PoolTask,
    settings: SimSettings,
    failure_rate: f64,
    by_hash: HashMap<String, usize>,
    feats: Vec<Features>,
}

/// The code hash a candidate's node carries.
fn code_hash(c: &Candidate) -> String {
    ksmith_task::content_hash(c.node_source().as_bytes())
}

impl SimExpander {
    /// An expander over `task`'s candidates.
    pub fn new(pool: &Pool, task: &PoolTask) -> SimExpander {
        let failed = task.candidates.iter().filter(|c| !c.passed()).count();
        let failure_rate = pool.settings.failure_rate.unwrap_or(if failed == 0 {
            0.25
        } else {
            failed as f64 / task.candidates.len() as f64
        });
        SimExpander {
            by_hash: task
                .candidates
                .iter()
                .enumerate()
                .map(|(i, c)| (code_hash(c), i))
                .collect(),
            feats: task.candidates.iter().map(Candidate::feats).collect(),
            task: task.clone(),
            settings: pool.settings.clone(),
            failure_rate,
        }
    }

    /// The failure probability in use.
    pub fn failure_rate(&self) -> f64 {
        self.failure_rate
    }

    fn draw(&self, from: Option<usize>, hint: Hint, rng: &mut ChaCha8Rng) -> usize {
        let cands = &self.task.candidates;
        if rng.gen_bool(self.failure_rate) {
            let failed: Vec<usize> = (0..cands.len()).filter(|i| !cands[*i].passed()).collect();
            if !failed.is_empty() {
                return failed[rng.gen_range(0..failed.len())];
            }
            return usize::MAX; // synthetic failure
        }
        let tau = self.settings.locality;
        let weights: Vec<f64> = cands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if !c.passed() {
                    return 0.0;
                }
                let Some(p) = from else { return 1.0 };
                let pc = &cands[p];
                let speed = match (pc.speedup.filter(|_| pc.passed()), c.speedup) {
                    (Some(a), Some(b)) => (b / a).log2().abs(),
                    _ => 0.0,
                };
                let mut w = (-(self.feats[p].distance(&self.feats[i]) + speed) / tau).exp()
                    * affinity(hint, &self.feats[p], &self.feats[i]);
                if c.parent.as_deref() == Some(pc.id.as_str()) && c.hint == Some(hint) {
                    w *= 5.0;
                }
                if i == p {
                    return 0.0;
                }
                w
            })
            .collect();
        let mut weights = weights;
        // The parent itself (a duplicate) gets `duplicate_rate` of the probability mass.
        if let Some(p) = from.filter(|p| cands[*p].passed()) {
            let others: f64 = weights.iter().sum();
            let d = self.settings.duplicate_rate;
            weights[p] = if others > 0.0 {
                others * d / (1.0 - d)
            } else {
                1.0
            };
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return from.unwrap_or(0);
        }
        let mut x = rng.gen_range(0.0..total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.iter().rposition(|w| *w > 0.0).unwrap_or(0)
    }

    fn expanded(&self, i: usize, plan: String, spend: Spend) -> Expanded {
        let Some(c) = self.task.candidates.get(i) else {
            let src = format!("/* simulated compile failure {} */\n", plan.len());
            let h = ksmith_task::content_hash(src.as_bytes());
            return Expanded {
                plan,
                norm_hash: Some(h.clone()),
                code_hash: Some(h),
                source: Some(src),
                outcome: NodeOutcome {
                    status: Some(Status::CompileError),
                    ..NodeOutcome::default()
                },
                spend,
                duplicate_of: None,
                feedback: Default::default(),
            };
        };
        let h = code_hash(c);
        Expanded {
            plan,
            source: Some(c.node_source()),
            norm_hash: Some(h.clone()),
            code_hash: Some(h),
            duplicate_of: None,
            outcome: NodeOutcome {
                status: Some(c.status),
                speedup: c.speedup.filter(|_| c.passed()),
                interval: c.interval,
                roofline_fraction: c.roofline_fraction,
                eval_id: None,
                vs_parent: None,
            },
            spend,
            feedback: Default::default(),
        }
    }
}

impl Expander for SimExpander {
    fn expand(&self, req: &Expansion, _events: &dyn EventSink) -> Result<Expanded, ExpandError> {
        if self.settings.latency_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(self.settings.latency_ms));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(req.seed);
        let s = &self.settings;
        let start = self
            .task
            .start
            .as_ref()
            .and_then(|id| self.task.candidates.iter().position(|c| &c.id == id));
        if req.parent.is_none() {
            if let Some(i) = start {
                let spend = Spend {
                    evaluations: 1,
                    ..Spend::default()
                };
                return Ok(self.expanded(i, "judge the starting solution".into(), spend));
            }
        }
        let from = req
            .parent
            .as_ref()
            .and_then(|p| p.code_hash.as_ref())
            .and_then(|h| self.by_hash.get(h).copied());
        let cpi = s.calls_per_iteration.max(1);
        let iters = match req.max_calls {
            Some(m) => (m / cpi).clamp(1, u64::from(req.inner_iterations.max(1))),
            None => u64::from(req.inner_iterations.max(1)),
        };
        let calls = match req.max_calls {
            Some(m) => (iters * cpi).min(m),
            None => iters * cpi,
        };
        let rank = |i: usize| {
            self.task
                .candidates
                .get(i)
                .and_then(|c| c.speedup.filter(|_| c.passed()))
                .unwrap_or(0.0)
        };
        let mut best: Option<usize> = None;
        // Code judged already (the parent's, or drawn earlier in this session) is reused, as
        // the real expander reuses the same bytes: not an evaluation.
        let mut judged: Vec<usize> = from.into_iter().collect();
        let mut evaluations = 0;
        for _ in 0..iters {
            let cur = best.filter(|b| rank(*b) > 0.0).or(from);
            let i = self.draw(cur, req.hint, &mut rng);
            if i == usize::MAX || !judged.contains(&i) {
                evaluations += 1;
                judged.push(i);
            }
            if best.is_none_or(|b| rank(i) > rank(b)) {
                best = Some(i);
            }
        }
        let spend = Spend {
            calls,
            tokens: calls * s.tokens_per_call,
            cost: calls as f64 * s.cost_per_call,
            evaluations,
            wall_s: 0.0,
        };
        let plan = format!(
            "{} (simulated, {iters} iteration(s))",
            req.hint.instruction()
        );
        let mut x = self.expanded(best.unwrap_or(usize::MAX), plan, spend);
        // The session's best is its parent's code again: a duplicate node, as a real search
        // marks it.
        if best.is_some() && best == from {
            x.duplicate_of = req.parent.as_ref().map(|p| p.id);
        }
        Ok(x)
    }
}

/// Re-times finalists by drawing each one's speedup uniformly within its interval (seeded);
/// the fastest draw wins.
pub struct SimFinalizer {
    /// Seed of the draws.
    pub seed: u64,
}

impl Finalizer for SimFinalizer {
    fn decide(&self, finalists: &[Node]) -> Result<crate::finalize::FinalRecord, ExpandError> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut best: Option<(NodeId, f64)> = None;
        for n in finalists {
            let Some(s) = n.outcome.speedup.filter(|_| n.outcome.passed()) else {
                continue;
            };
            let t = match n.outcome.interval {
                Some((lo, hi)) if hi > lo => rng.gen_range(lo..hi),
                _ => s,
            };
            if best.is_none_or(|(_, b)| t > b) {
                best = Some((n.id, t));
            }
        }
        Ok(crate::finalize::FinalRecord {
            node: best.map(|(id, _)| id.0),
            incumbent: finalists.first().map(|n| n.id.0),
            summary: "simulated: the fastest of draws within each finalist's interval".into(),
            ..Default::default()
        })
    }
}

/// Mean and spread of the best speedup at one call count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stat {
    /// LLM calls.
    pub calls: u64,
    /// Mean best speedup over seeds (0 where a seed had nothing correct yet).
    pub mean: f64,
    /// Sample standard deviation.
    pub sd: f64,
    /// Smallest over seeds.
    pub min: f64,
    /// Largest over seeds.
    pub max: f64,
}

/// One strategy's row of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Strategy.
    pub strategy: StrategyKind,
    /// Best speedup at each checkpoint.
    pub at: Vec<Stat>,
    /// Mean nodes per search.
    pub nodes: f64,
    /// Mean engine overhead per node, microseconds.
    pub overhead_us: f64,
}

/// A comparison of strategies on a pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Task.
    pub task: String,
    /// Seeds per strategy.
    pub seeds: u32,
    /// Call budget.
    pub calls: u64,
    /// Failure probability used.
    pub failure_rate: f64,
    /// Rows.
    pub rows: Vec<Row>,
}

/// The best speedup reached within each call count, for one finished search.
pub fn best_by_calls(nodes: &[Node], checkpoints: &[u64]) -> Vec<f64> {
    let mut out = vec![0.0; checkpoints.len()];
    let mut calls = 0u64;
    let mut best = 0.0f64;
    for n in nodes {
        calls += n.spend.calls;
        if n.outcome.passed() && n.duplicate_of.is_none() {
            best = best.max(n.outcome.speedup.unwrap_or(0.0));
        }
        for (i, c) in checkpoints.iter().enumerate() {
            if calls <= *c {
                out[i] = best;
            }
        }
    }
    out
}

/// Runs every strategy `seeds` times on the pool's task with a call budget; strategies with
/// their defaults unless given.
pub fn compare(
    pool: &Pool,
    task: &PoolTask,
    strategies: &[StrategySettings],
    seeds: u32,
    calls: u64,
    jobs: u32,
) -> Result<Comparison, crate::engine::SearchError> {
    let mut pool = pool.clone();
    pool.settings.latency_ms = 0;
    let expander = SimExpander::new(&pool, task);
    let checkpoints: Vec<u64> = [4, 2, 1]
        .iter()
        .map(|d| (calls / d).max(1))
        .chain([calls * 3 / 4])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut rows = Vec::new();
    for st in strategies {
        let mut per_seed: Vec<Vec<f64>> = Vec::new();
        let (mut nodes, mut overhead) = (0.0, 0.0);
        for seed in 1..=u64::from(seeds) {
            let mut settings = SearchSettings::new(st.clone());
            settings.seed = seed;
            settings.jobs = jobs;
            settings.budget.calls = Some(calls);
            let mut search = Search::new(settings)?;
            let r = search.run(&expander, &NullSink, &mut NoPersist)?;
            per_seed.push(best_by_calls(&r.nodes, &checkpoints));
            nodes += r.nodes.len() as f64;
            overhead += r.overhead_per_node_s * 1e6;
        }
        let at = checkpoints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let xs: Vec<f64> = per_seed.iter().map(|v| v[i]).collect();
                let n = xs.len() as f64;
                let mean = xs.iter().sum::<f64>() / n;
                let var = if xs.len() > 1 {
                    xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
                } else {
                    0.0
                };
                Stat {
                    calls: *c,
                    mean,
                    sd: var.sqrt(),
                    min: xs.iter().copied().fold(f64::INFINITY, f64::min),
                    max: xs.iter().copied().fold(0.0, f64::max),
                }
            })
            .collect();
        rows.push(Row {
            strategy: st.kind(),
            at,
            nodes: nodes / f64::from(seeds.max(1)),
            overhead_us: overhead / f64::from(seeds.max(1)),
        });
    }
    Ok(Comparison {
        task: task.task.clone(),
        seeds,
        calls,
        failure_rate: expander.failure_rate(),
        rows,
    })
}

/// A pool from a store's evaluations: every C evaluation, grouped by task; a tuned
/// configuration's `-DNAME=VALUE` flags become `#define` lines ahead of its source (so
/// configurations are distinct programs). The start is the task's `naive` solution when one
/// was judged, else its slowest correct candidate. Parents and hints are not known.
pub fn pool_from_store(
    store: &ksmith_store::Store,
    description: &str,
) -> Result<Pool, ksmith_store::StoreError> {
    let mut tasks: Vec<PoolTask> = Vec::new();
    let mut seen: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let mut ids = store.ids()?;
    ids.sort_unstable_by(|a, b| b.cmp(a)); // newest first: a re-judged program keeps its latest
    for id in ids {
        let Some(ev) = store.get(id)? else { continue };
        let r = &ev.result;
        let lang = ev
            .solution
            .get("language")
            .and_then(|v| v.as_str())
            .unwrap_or("c");
        if lang != "c" {
            continue;
        }
        let name = ev
            .solution
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let flags: Vec<String> = ev
            .solution
            .get("flags")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut source = String::new();
        for f in &flags {
            if let Some(d) = f.strip_prefix("-D") {
                let (k, v) = d.split_once('=').unwrap_or((d, "1"));
                source.push_str(&format!("#define {k} {v}\n"));
            }
        }
        for (_, art) in &ev.sources {
            let bytes = store.artifact(art)?;
            source.push_str(&String::from_utf8_lossy(&bytes));
        }
        if !seen.insert((r.task.clone(), source.clone())) {
            continue;
        }
        let perf = r.performance.as_ref();
        let cand = Candidate {
            id: format!("e{id}"),
            status: r.status,
            speedup: perf
                .map(|p| p.speedup)
                .filter(|s| s.is_finite() && *s > 0.0),
            interval: perf.map(|p| p.speedup_interval),
            roofline_fraction: perf.map(|p| p.roofline_fraction),
            source: Some(source),
            features: None,
            parent: None,
            hint: None,
        };
        let t = match tasks.iter_mut().position(|t| t.task == r.task) {
            Some(i) => &mut tasks[i],
            None => {
                tasks.push(PoolTask {
                    task: r.task.clone(),
                    start: None,
                    candidates: Vec::new(),
                });
                tasks.last_mut().expect("just pushed")
            }
        };
        if name.ends_with("_naive") || name == "naive" {
            t.start.get_or_insert(cand.id.clone());
        }
        t.candidates.push(cand);
    }
    for t in &mut tasks {
        t.candidates.sort_by(|a, b| a.id.cmp(&b.id));
        if t.start.is_none() {
            t.start = t
                .candidates
                .iter()
                .filter(|c| c.passed())
                .min_by(|a, b| {
                    a.speedup
                        .partial_cmp(&b.speedup)
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .map(|c| c.id.clone());
        }
    }
    tasks.sort_by(|a, b| a.task.cmp(&b.task));
    Ok(Pool {
        version: POOL_VERSION,
        description: description.to_string(),
        settings: SimSettings::default(),
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::StopReason;
    use crate::engine::{Search, SearchSettings};
    use crate::persist::NoPersist;

    fn cand(id: &str, status: Status, speedup: Option<f64>, src: &str) -> Candidate {
        Candidate {
            id: id.into(),
            status,
            speedup,
            interval: speedup.map(|s| (s * 0.9, s * 1.1)),
            roofline_fraction: None,
            source: Some(src.into()),
            features: None,
            parent: None,
            hint: None,
        }
    }

    fn pool(start: Option<&str>) -> Pool {
        Pool {
            version: POOL_VERSION,
            description: String::new(),
            settings: SimSettings {
                failure_rate: Some(0.2),
                ..SimSettings::default()
            },
            tasks: vec![PoolTask {
                task: "t".into(),
                start: start.map(str::to_string),
                candidates: vec![
                    cand(
                        "naive",
                        Status::Passed,
                        Some(0.5),
                        "void f() { for (;;) {} }",
                    ),
                    cand(
                        "omp",
                        Status::Passed,
                        Some(1.0),
                        "void f() {\n#pragma omp parallel for\n for (;;) {} }",
                    ),
                    cand(
                        "simd",
                        Status::Passed,
                        Some(0.8),
                        "void f() { for (;;) { _mm256_add_ps(a, b); } }",
                    ),
                    cand("bad", Status::CompileError, None, "void f( {"),
                ],
            }],
        }
    }

    fn req(parent: Option<Node>, hint: Hint, seed: u64) -> Expansion {
        Expansion {
            node: NodeId(1),
            parent,
            parent_source: None,
            lineage: Vec::new(),
            tried: Vec::new(),
            search_best: None,
            hint,
            inspirations: Vec::new(),
            inner_iterations: 1,
            seed,
            model: None,
            max_calls: None,
            last: false,
        }
    }

    #[test]
    fn hints_steer_draws_and_failures_follow_the_rate() {
        let p = pool(Some("naive"));
        let x = SimExpander::new(&p, &p.tasks[0]);
        let root = x
            .expand(&req(None, Hint::FirstKernel, 1), &NullSink)
            .expect("root");
        assert_eq!(root.outcome.speedup, Some(0.5));
        assert_eq!(root.spend.calls, 0);
        let parent = Node {
            id: NodeId(0),
            parent: None,
            depth: 0,
            hint: Hint::FirstKernel,
            state: crate::node::NodeState::Done,
            plan: String::new(),
            code_hash: root.code_hash.clone(),
            norm_hash: root.norm_hash.clone(),
            duplicate_of: None,
            outcome: root.outcome.clone(),
            spend: root.spend,
            feedback: Default::default(),
        };
        let count = |hint: Hint, want: f64| {
            (0..400)
                .filter(|s| {
                    x.expand(&req(Some(parent.clone()), hint, *s), &NullSink)
                        .expect("draw")
                        .outcome
                        .speedup
                        == Some(want)
                })
                .count()
        };
        // Parallelize favours the OpenMP program, vectorize the SIMD one.
        assert!(count(Hint::Parallelize, 1.0) > count(Hint::Vectorize, 1.0));
        assert!(count(Hint::Vectorize, 0.8) > count(Hint::Parallelize, 0.8));
        let failed = (0..400)
            .filter(|s| {
                !x.expand(&req(Some(parent.clone()), Hint::Tile, *s), &NullSink)
                    .expect("draw")
                    .outcome
                    .passed()
            })
            .count();
        assert!(
            (50..=110).contains(&failed),
            "{failed} of 400 failed at rate 0.2"
        );
        // Calls follow the cap.
        let mut r = req(Some(parent.clone()), Hint::Tile, 3);
        r.inner_iterations = 3;
        r.max_calls = Some(3);
        let e = x.expand(&r, &NullSink).expect("draw");
        assert_eq!(e.spend.calls, 2);
        // One iteration: one evaluation, none when it drew the parent's code again (a
        // duplicate node, reused as the real expander reuses it).
        assert_eq!(e.spend.evaluations, u64::from(e.duplicate_of.is_none()));
        let (mut dups, mut fresh) = (0, 0);
        for seed in 0..400 {
            let e = x
                .expand(&req(Some(parent.clone()), Hint::Tile, seed), &NullSink)
                .expect("draw");
            match e.duplicate_of {
                Some(_) => {
                    dups += 1;
                    assert_eq!(e.spend.evaluations, 0, "a duplicate is no evaluation");
                }
                None => {
                    fresh += 1;
                    assert_eq!(e.spend.evaluations, 1);
                }
            }
        }
        assert!(dups > 0 && fresh > dups, "{dups} duplicates, {fresh} new");
    }

    #[test]
    fn a_pool_without_start_writes_a_first_kernel_and_searches_reach_the_best() {
        let p = pool(None);
        let x = SimExpander::new(&p, &p.tasks[0]);
        let mut st = SearchSettings::new(StrategySettings::default_for(StrategyKind::Greedy));
        st.budget.calls = Some(60);
        st.budget.target_speedup = Some(1.0);
        let mut s = Search::new(st).expect("settings");
        let r = s.run(&x, &NullSink, &mut NoPersist).expect("runs");
        assert!(r.nodes[0].spend.calls > 0, "the first kernel costs calls");
        assert_eq!(r.stop, StopReason::TargetSpeedup { speedup: 1.0 });
        let c = compare(
            &p,
            &p.tasks[0],
            &[
                StrategySettings::Loop,
                StrategySettings::BestOfN { n: None },
            ],
            4,
            20,
            1,
        )
        .expect("compare");
        assert_eq!(c.rows.len(), 2);
        assert!(c
            .rows
            .iter()
            .all(|r| r.at.last().is_some_and(|s| s.calls == 20 && s.mean > 0.0)));
    }

    #[test]
    fn bad_pools_are_refused_naming_the_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("p.json");
        std::fs::write(&f, "{\"version\": 1, \"tasks\": [").expect("write");
        assert!(Pool::load(&f)
            .expect_err("refused")
            .to_string()
            .contains("not a pool"));
        let mut p = pool(Some("missing"));
        std::fs::write(&f, serde_json::to_string(&p).expect("json")).expect("write");
        assert!(Pool::load(&f)
            .expect_err("refused")
            .to_string()
            .contains("start `missing`"));
        p.tasks[0].start = None;
        p.settings.failure_rate = Some(1.5);
        std::fs::write(&f, serde_json::to_string(&p).expect("json")).expect("write");
        assert!(Pool::load(&f)
            .expect_err("refused")
            .to_string()
            .contains("failure_rate"));
        let p = pool(None);
        let e = p.task("other", "p.json").expect_err("no task");
        assert!(
            e.to_string().contains("no candidates for task `other`"),
            "{e}"
        );
        assert!(Pool::load(&dir.path().join("none.json")).is_err());
    }
}
