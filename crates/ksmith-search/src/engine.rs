//! The graph search engine: assigns node ids, depth and state, keeps the graph, asks the
//! strategy what to expand, gives hints by bandit, runs up to `jobs` expansions at once,
//! persists the whole state after every finished node, and stops on a budget or a target.
//!
//! Determinism: expansions are launched in batches of at most `jobs`; a batch's results are
//! merged (strategy, bandit, archive, best) in node-id order once the whole batch is back, so a
//! seed reproduces a search given the same expander outcomes, whatever order threads finish
//! in. A resumed search re-expands the batch's unfinished nodes with their stored requests and
//! never a finished one.

use crate::archive::Archive;
use crate::bandit::{self, Bandit};
use crate::budget::{Budget, Reserved, StopReason, Totals};
use crate::events::{Event, EventSink};
use crate::features::Features;
use crate::graph::{Entry, Graph, Request};
use crate::hint::Hint;
use crate::node::{
    ExpandError, Expanded, Expander, Expansion, Node, NodeId, NodeOutcome, NodeState, Spend,
};
use crate::persist::{Persist, PersistError};
use crate::strategy::{Next, Strategy, StrategySettings, StrategyState};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Version of the persisted state's layout.
pub const STATE_VERSION: u32 = 1;

/// Everything that shapes a search (stored with the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// The strategy and its parameters.
    pub strategy: StrategySettings,
    /// Expansions in flight at once (default 1).
    pub jobs: u32,
    /// Inner plan → implement → judge rounds per node, K (default 1).
    pub inner: u32,
    /// Most evaluations one inner round can run (1 + fix attempts for agent sessions; 1 in
    /// simulation): what a node reserves from the evaluation budget, so it is never overrun.
    #[serde(default = "one")]
    pub evals_per_round: u32,
    /// Limits and targets.
    pub budget: Budget,
    /// Seed of the search's random state.
    pub seed: u64,
    /// Models the bandit allocates between (empty: the run's one model).
    pub models: Vec<String>,
    /// UCB1 exploration constant (default 0.5: rewards sit in a narrow band around 0.5, so
    /// the textbook sqrt 2 explores almost uniformly for a search's few hundred pulls).
    pub exploration: f64,
    /// Finalists handed to the finalizer (default 3).
    pub finalists: u32,
    /// The directions the bandit chooses among (None: every improving hint); an agent search
    /// leaves out those that do not apply to its operator class (`Hint::for_op_class`).
    #[serde(default)]
    pub hints: Option<Vec<Hint>>,
}

fn one() -> u32 {
    1
}

impl SearchSettings {
    /// Defaults for a strategy.
    pub fn new(strategy: StrategySettings) -> SearchSettings {
        SearchSettings {
            strategy,
            jobs: 1,
            inner: 1,
            evals_per_round: 1,
            budget: Budget::default(),
            seed: 1,
            models: Vec::new(),
            exploration: 0.5,
            finalists: 3,
            hints: None,
        }
    }
}

/// The whole search state: what is persisted after every node and resumed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchState {
    /// Layout version.
    pub version: u32,
    /// The settings.
    pub settings: SearchSettings,
    /// Every node.
    pub graph: Graph,
    /// Sources of nodes that produced code, by code hash (once per distinct program).
    pub sources: BTreeMap<String, String>,
    /// The batch in flight (empty between batches).
    pub batch: Vec<NodeId>,
    /// The strategy's state.
    pub strategy: StrategyState,
    /// The hint bandit.
    pub bandit: Bandit,
    /// MAP-Elites archive over every correct node (all strategies; evolve keeps its own too).
    pub archive: Archive,
    /// The random state.
    pub rng: ChaCha8Rng,
    /// Spend of finished nodes.
    pub totals: Totals,
    /// Best correct node.
    pub best: Option<NodeId>,
    /// Wall seconds over earlier sessions.
    pub elapsed_s: f64,
    /// Engine seconds outside expander calls and persistence.
    pub overhead_s: f64,
    /// Seconds spent persisting.
    pub persist_s: f64,
    /// Why it stopped (None: not stopped, or stopped by a failure it can resume from).
    pub stop: Option<StopReason>,
}

/// What a search returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// Why it stopped.
    pub stop: StopReason,
    /// Every node, by id.
    pub nodes: Vec<Node>,
    /// Best correct node.
    pub best: Option<NodeId>,
    /// Its speedup.
    pub best_speedup: Option<f64>,
    /// The top correct nodes, best first (for the finalizer).
    pub finalists: Vec<NodeId>,
    /// Total spend.
    pub totals: Totals,
    /// Engine seconds per finished node outside expander calls and persistence.
    pub overhead_per_node_s: f64,
    /// Persistence seconds per finished node.
    pub persist_per_node_s: f64,
    /// Cells of the MAP-Elites archive filled.
    pub archive_cells: usize,
}

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The settings are invalid (names the parameter).
    #[error("invalid search settings: {0}")]
    Settings(String),
    /// The state could not be saved (the search stopped where the last save left it).
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// The expander says the run cannot go on as given.
    #[error("{0}")]
    Input(#[source] anyhow::Error),
    /// A stored state is not one this engine can resume.
    #[error("cannot resume: {0}")]
    State(String),
}

/// Picks the winner among finalists (the real one re-validates on fresh seeds and on held-out
/// shapes and re-times them side by side, the first finalist being the incumbent; the
/// simulated one is in `sim`).
pub trait Finalizer {
    /// What was decided: the winner (`node`: None when no finalist holds up) and the figures.
    fn decide(&self, finalists: &[Node]) -> Result<crate::finalize::FinalRecord, ExpandError>;
}

/// A search, new or resumed.
pub struct Search {
    /// Its state.
    pub state: SearchState,
    /// Nodes in a row on which the judge itself failed (not persisted: a resumed search
    /// starts counting again).
    judge_failures: u32,
}

/// The judge or the expansion failing outside the candidate on this many nodes in a row is the
/// machine's or the provider's fault, not the candidates': the search stops (resumable)
/// instead of failing every node.
const JUDGE_FAILURES_IN_A_ROW: u32 = 3;

/// Lines on what other nodes tried shown to a node's planner.
const TRIED_SHOWN: usize = 8;

/// One expansion, tried again once when it failed outside the candidate (a killed harness, a
/// provider error after its own retries): the journal replays the calls already paid for.
fn expand_retried(
    expander: &dyn Expander,
    x: &Expansion,
    events: &dyn EventSink,
) -> Result<Expanded, ExpandError> {
    match expander.expand(x, events) {
        Err(ExpandError::Failed(first)) => {
            events.emit(Event::Progress {
                node: Some(x.node),
                message: format!("expansion failed outside the candidate, trying again: {first:#}"),
            });
            expander.expand(x, events)
        }
        r => r,
    }
}

impl Search {
    /// A new search.
    pub fn new(settings: SearchSettings) -> Result<Search, SearchError> {
        settings.strategy.check().map_err(SearchError::Settings)?;
        if settings.jobs == 0 {
            return Err(SearchError::Settings("jobs must be at least 1".into()));
        }
        if settings.inner == 0 {
            return Err(SearchError::Settings(
                "inner iterations must be at least 1".into(),
            ));
        }
        Ok(Search {
            state: SearchState {
                version: STATE_VERSION,
                strategy: settings.strategy.build(),
                bandit: Bandit::with_hints(
                    &settings.models,
                    settings.exploration,
                    settings.hints.as_deref(),
                ),
                rng: ChaCha8Rng::seed_from_u64(settings.seed),
                settings,
                graph: Graph::default(),
                sources: BTreeMap::new(),
                batch: Vec::new(),
                archive: Archive::default(),
                totals: Totals::default(),
                best: None,
                elapsed_s: 0.0,
                overhead_s: 0.0,
                persist_s: 0.0,
                stop: None,
            },
            judge_failures: 0,
        })
    }

    /// Continues a persisted search: nodes in flight are expanded again (same ids and
    /// requests); finished nodes never are. A state that ended normally is not resumed.
    pub fn resume(state: SearchState) -> Result<Search, SearchError> {
        if state.version != STATE_VERSION {
            return Err(SearchError::State(format!(
                "state layout {} (this engine reads {STATE_VERSION})",
                state.version
            )));
        }
        let mut state = state;
        // A failure stop is resumable; clear it so the search goes on.
        if state.stop.as_ref().is_some_and(|s| !s.is_normal()) {
            state.stop = None;
        }
        Ok(Search {
            state,
            judge_failures: 0,
        })
    }

    /// Raises or sets limits (a resumed run given new budget flags).
    pub fn set_budget(&mut self, budget: Budget) {
        self.state.settings.budget = budget;
        if self.state.stop.as_ref().is_some_and(|s| s.is_normal()) {
            self.state.stop = None;
        }
    }

    /// Runs until a stop; persists after every finished node.
    pub fn run(
        &mut self,
        expander: &dyn Expander,
        events: &dyn EventSink,
        persist: &mut dyn Persist,
    ) -> Result<SearchResult, SearchError> {
        let started = Instant::now();
        let elapsed_before = self.state.elapsed_s;
        let mut waited = Duration::ZERO;
        let mut persisting = Duration::ZERO;
        let outcome = self.drive(
            expander,
            events,
            persist,
            started,
            elapsed_before,
            &mut waited,
            &mut persisting,
        );
        let total = started.elapsed();
        self.state.elapsed_s = elapsed_before + total.as_secs_f64();
        self.state.persist_s += persisting.as_secs_f64();
        self.state.overhead_s += total.saturating_sub(waited + persisting).as_secs_f64();
        let stop = outcome?;
        self.state.stop = Some(stop.clone());
        // The final save records the stop; a failed save here loses nothing but the reason.
        let t = Instant::now();
        persist.save(&[], &self.state)?;
        self.state.persist_s += t.elapsed().as_secs_f64();
        events.emit(Event::Stopped {
            reason: stop.to_string(),
        });
        Ok(self.result(stop))
    }

    /// The result as it stands.
    pub fn result(&self, stop: StopReason) -> SearchResult {
        let s = &self.state;
        let n = s.totals.nodes.max(1) as f64;
        let mut correct: Vec<NodeId> = s
            .graph
            .entries
            .iter()
            .filter(|e| s.graph.speedup(e.node.id).is_some())
            .map(|e| e.node.id)
            .collect();
        crate::graph::rank(&s.graph, &mut correct);
        // The search's best is always a finalist (it was decided better than the best before
        // it, which a point-estimate ranking may still place lower).
        if let Some(b) = s.best.filter(|b| correct.contains(b)) {
            correct.retain(|&n| n != b);
            correct.insert(0, b);
        }
        correct.truncate(s.settings.finalists as usize);
        SearchResult {
            stop,
            nodes: s.graph.entries.iter().map(|e| e.node.clone()).collect(),
            best: s.best,
            best_speedup: s.best.and_then(|b| s.graph.speedup(b)),
            finalists: correct,
            totals: s.totals,
            overhead_per_node_s: s.overhead_s / n,
            persist_per_node_s: s.persist_s / n,
            archive_cells: s.archive.len(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn drive(
        &mut self,
        expander: &dyn Expander,
        events: &dyn EventSink,
        persist: &mut dyn Persist,
        started: Instant,
        elapsed_before: f64,
        waited: &mut Duration,
        persisting: &mut Duration,
    ) -> Result<StopReason, SearchError> {
        if let Some(s) = self.state.stop.clone() {
            return Ok(s);
        }
        loop {
            if self.state.batch.is_empty() {
                let elapsed = elapsed_before + started.elapsed().as_secs_f64();
                if let Some(r) = self
                    .state
                    .settings
                    .budget
                    .spent(&self.state.totals, elapsed)
                {
                    return Ok(r);
                }
                if let Some(r) = self.target_reached() {
                    return Ok(r);
                }
                match self.propose_batch() {
                    Ok(()) => {}
                    Err(stop) => return Ok(stop),
                }
                let launched: Vec<Node> = self
                    .state
                    .batch
                    .iter()
                    .filter_map(|id| self.state.graph.get(*id).map(|e| e.node.clone()))
                    .collect();
                let t = Instant::now();
                persist.save(&launched, &self.state)?;
                *persisting += t.elapsed();
            }
            // Expand what of the batch is unfinished (all of it, or the rest after a resume).
            let todo: Vec<(NodeId, Expansion)> = self
                .state
                .batch
                .iter()
                .filter(|id| self.state.graph.get(**id).is_some_and(|e| !e.finished))
                .map(|id| (*id, self.expansion(*id)))
                .collect();
            for (id, x) in &todo {
                events.emit(Event::NodeStarted {
                    node: *id,
                    parent: x.parent.as_ref().map(|p| p.id),
                    hint: x.hint,
                });
            }
            let mut save_error: Option<PersistError> = None;
            // Nodes of this batch that failed outside their candidates, with why.
            let mut outside: Vec<(NodeId, String)> = Vec::new();
            // A reviewer's quit: the node stays unfinished (grown again on resume).
            let mut paused: Option<String> = None;
            // The provider refused the run (a rejected key, an unknown model).
            let mut refused: Option<String> = None;
            let mut handle = |this: &mut Search,
                              id: NodeId,
                              r: Result<Expanded, ExpandError>,
                              wall: f64|
             -> Result<(), SearchError> {
                let failed_outside = match r {
                    Ok(x) => {
                        this.record(id, x, wall);
                        None
                    }
                    Err(ExpandError::Judge(e)) => Some((
                        format!("the judge failed on this node's candidate: {e:#}"),
                        format!("the judge failed: {e:#}"),
                    )),
                    Err(ExpandError::Budget(m)) => {
                        this.record(
                            id,
                            Expanded {
                                plan: format!("stopped by a budget: {m}"),
                                ..Expanded::default()
                            },
                            wall,
                        );
                        None
                    }
                    // Tried twice already (`expand_retried`): the provider or the environment,
                    // not the candidate.
                    Err(ExpandError::Failed(e)) => Some((
                        format!("the expansion failed outside the candidate (tried twice): {e:#}"),
                        format!("{e:#}"),
                    )),
                    Err(ExpandError::Input(e)) => return Err(SearchError::Input(e)),
                    Err(ExpandError::Paused(by)) => {
                        paused.get_or_insert(by);
                        None
                    }
                    // Left unfinished like a pause: grown again on resume, after the fix.
                    Err(ExpandError::Refused(e)) => {
                        refused.get_or_insert(format!("{id}: {e:#}"));
                        None
                    }
                };
                if let Some((plan, why)) = failed_outside {
                    // The node fails alone; the search stops only when this keeps happening.
                    this.record(
                        id,
                        Expanded {
                            plan,
                            ..Expanded::default()
                        },
                        wall,
                    );
                    if let Some(n) = this.state.graph.entries.get_mut(id.0 as usize) {
                        n.node.state = NodeState::Failed;
                    }
                    outside.push((id, why));
                }
                if save_error.is_none() {
                    let node = this.state.graph.get(id).map(|e| e.node.clone());
                    let t = Instant::now();
                    if let Err(e) = persist.save(node.as_slice(), &this.state) {
                        save_error = Some(e);
                    }
                    *persisting += t.elapsed();
                }
                Ok(())
            };
            if todo.len() == 1 {
                let (id, x) = &todo[0];
                let t = Instant::now();
                let r = expand_retried(expander, x, events);
                let d = t.elapsed();
                *waited += d;
                handle(self, *id, r, d.as_secs_f64())?;
            } else if !todo.is_empty() {
                let (tx, rx) = std::sync::mpsc::channel();
                let mut input_error = None;
                std::thread::scope(|scope| {
                    for (id, x) in &todo {
                        let tx = tx.clone();
                        scope.spawn(move || {
                            let t = Instant::now();
                            let r = expand_retried(expander, x, events);
                            // The receiver outlives every sender in this scope.
                            let _ = tx.send((*id, r, t.elapsed().as_secs_f64()));
                        });
                    }
                    drop(tx);
                    loop {
                        let t = Instant::now();
                        let Ok((id, r, wall)) = rx.recv() else { break };
                        *waited += t.elapsed();
                        if let Err(e) = handle(self, id, r, wall) {
                            input_error.get_or_insert(e);
                        }
                    }
                });
                if let Some(e) = input_error {
                    return Err(e);
                }
            }
            if let Some(e) = save_error {
                return Err(e.into());
            }
            // Merge in id order: every finished node, also when the search stops here (a
            // sibling that finished beside a failed expansion is part of the result).
            let batch = std::mem::take(&mut self.state.batch);
            let (done, open): (Vec<NodeId>, Vec<NodeId>) = batch
                .iter()
                .partition(|id| self.state.graph.get(**id).is_some_and(|e| e.finished));
            for id in &done {
                self.merge(*id, events);
            }
            // Unfinished ones stay in the batch, for a resume to grow.
            self.state.batch = open;
            // Failures outside the candidates in a row, in id order (not the order expansions
            // happened to end in): the machine's or the provider's fault, so the search stops.
            let mut failure: Option<StopReason> = None;
            for id in &done {
                match outside.iter().find(|(o, _)| o == id) {
                    Some((_, why)) => {
                        self.judge_failures += 1;
                        if self.judge_failures >= JUDGE_FAILURES_IN_A_ROW {
                            failure.get_or_insert(StopReason::ExpanderFailed {
                                message: format!(
                                    "{id}: {} nodes in a row failed outside their candidates (the machine or the provider, not the candidates?); last: {why}",
                                    self.judge_failures
                                ),
                            });
                        }
                    }
                    None => self.judge_failures = 0,
                }
            }
            let batch = done;
            let nodes: Vec<Node> = batch
                .iter()
                .filter_map(|id| self.state.graph.get(*id).map(|e| e.node.clone()))
                .collect();
            for n in &nodes {
                events.emit(Event::NodeFinished {
                    node: Box::new(n.clone()),
                });
            }
            let t = Instant::now();
            persist.save(&nodes, &self.state)?;
            *persisting += t.elapsed();
            if let Some(f) = failure {
                return Ok(f);
            }
            if let Some(message) = refused {
                return Ok(StopReason::ExpanderFailed { message });
            }
            if let Some(by) = paused {
                return Ok(StopReason::Paused { by });
            }
        }
    }

    fn target_reached(&self) -> Option<StopReason> {
        let b = &self.state.settings.budget;
        let best = self.state.best?;
        let e = self.state.graph.get(best)?;
        let s = self.state.graph.speedup(best)?;
        if b.target_speedup.is_some_and(|t| s >= t) {
            return Some(StopReason::TargetSpeedup { speedup: s });
        }
        // The roofline target looks at every correct node, not only the fastest.
        let _ = e;
        if let Some(t) = b.target_roofline {
            let top = self
                .state
                .graph
                .entries
                .iter()
                .filter(|e| self.state.graph.speedup(e.node.id).is_some())
                .filter_map(|e| e.node.outcome.roofline_fraction)
                .fold(None, |m: Option<f64>, f| Some(m.map_or(f, |m| m.max(f))));
            if let Some(f) = top.filter(|f| *f >= t) {
                return Some(StopReason::TargetRoofline { fraction: f });
            }
        }
        None
    }

    /// Fills a batch from the strategy within the budget; Err when nothing can be launched.
    fn propose_batch(&mut self) -> Result<(), StopReason> {
        let jobs = u64::from(self.state.settings.jobs);
        let inner = self.state.settings.inner;
        let evals = inner.saturating_mul(self.state.settings.evals_per_round.max(1));
        let mut refused: Option<StopReason> = None;
        while (self.state.batch.len() as u64) < jobs {
            let reserved = self.reserved();
            // Each node of the batch holds one call while it fills; the calls left are
            // shared out once the batch is known (below).
            let cap = match self
                .state
                .settings
                .budget
                .admit(&self.state.totals, &reserved, evals, 1)
                .map(|c| c.map(|_| 1))
            {
                Ok(c) => c,
                Err(r) => {
                    refused = Some(r);
                    break;
                }
            };
            let s = &mut self.state;
            match s.strategy.next(&s.graph, &mut s.rng) {
                Next::Expand(p) => {
                    let id = NodeId(s.graph.entries.len() as u64);
                    let parent = p.parent.and_then(|pid| s.graph.get(pid));
                    let depth = parent.map_or(0, |e| e.node.depth + 1);
                    // A parent with code gets a bandit hint; the root writes or judges the
                    // start.
                    let (hint, model, arm) = if p.parent.is_some() {
                        let i = s.bandit.choose();
                        let a = &s.bandit.arms[i];
                        (a.hint, a.model.clone(), Some(i))
                    } else {
                        (Hint::FirstKernel, s.settings.models.first().cloned(), None)
                    };
                    let seed: u64 = s.rng.gen();
                    let node = Node {
                        id,
                        parent: p.parent,
                        depth,
                        hint,
                        state: NodeState::Expanding,
                        plan: String::new(),
                        code_hash: None,
                        norm_hash: None,
                        duplicate_of: None,
                        outcome: NodeOutcome::default(),
                        spend: Spend::default(),
                        feedback: Default::default(),
                    };
                    s.graph.entries.push(Entry {
                        node,
                        request: Request {
                            parent: p.parent,
                            hint,
                            model,
                            inspirations: p.inspirations.clone(),
                            inner,
                            seed,
                            max_calls: cap,
                            arm,
                            island: p.island,
                        },
                        finished: false,
                        merged: false,
                        features: None,
                    });
                    s.strategy.launched(id, &p);
                    s.batch.push(id);
                }
                Next::Wait => break,
                Next::Done => {
                    refused.get_or_insert(StopReason::Exhausted);
                    break;
                }
            }
        }
        if self.state.batch.is_empty() {
            return Err(refused.unwrap_or(StopReason::Exhausted));
        }
        // The calls left, shared among the batch's nodes (the first get the remainder), so
        // a lone node (loop) may use them all and a full batch cannot overshoot.
        if let Some(limit) = self.state.settings.budget.calls {
            let left = limit.saturating_sub(self.state.totals.spend.calls);
            let n = self.state.batch.len() as u64;
            for (i, id) in self.state.batch.clone().into_iter().enumerate() {
                let cap = left / n + u64::from((i as u64) < left % n);
                if let Some(e) = self.state.graph.entries.get_mut(id.0 as usize) {
                    e.request.max_calls = Some(cap.max(1));
                }
            }
        }
        Ok(())
    }

    fn reserved(&self) -> Reserved {
        let mut r = Reserved::default();
        for id in &self.state.batch {
            if let Some(e) = self.state.graph.get(*id) {
                r.nodes += 1;
                r.calls += e.request.max_calls.unwrap_or(0);
                r.evaluations += u64::from(e.request.inner)
                    * u64::from(self.state.settings.evals_per_round.max(1));
            }
        }
        r
    }

    /// The request sent to the expander for a node.
    fn expansion(&self, id: NodeId) -> Expansion {
        let s = &self.state;
        let e = &s.graph.entries[id.0 as usize];
        let parent = e.request.parent.and_then(|p| s.graph.get(p));
        let line = |n: &Node| {
            let outcome = match (n.outcome.status, n.outcome.speedup, n.outcome.interval) {
                (Some(st), Some(sp), Some((lo, hi))) => {
                    format!("{st} {sp:.2}x ({lo:.2}-{hi:.2}) vs XLA")
                }
                (Some(st), Some(sp), None) => format!("{st} {sp:.2}x vs XLA"),
                (Some(st), None, _) => st.to_string(),
                _ => n.state.as_str().to_string(),
            };
            // Against its parent in the same rounds, when the two were timed together.
            let paired = n.outcome.vs_parent.map_or(String::new(), |d| {
                format!("; against its parent: {}", d.text())
            });
            // What its autotune stage found, so a later plan does not tune the same values
            // again (cut: the full note goes to the node's own children).
            let tuning = n.feedback.tuning.as_deref().map_or(String::new(), |t| {
                format!("; autotune: {}", crate::agent::context::clip(t, 400))
            });
            format!(
                "node {} [{}] {} -> {outcome}{paired}{tuning}",
                n.id,
                n.hint,
                crate::node::plan_title(&n.plan)
            )
        };
        // A relative's line also says what its profile found: the lesson of a tried idea (why
        // it was no faster, where it lost) is there, not in its figure.
        let kin_line = |n: &Node| match n.feedback.profile.as_deref() {
            Some(p) => format!(
                "{}; its profile: {}",
                line(n),
                crate::agent::context::clip(
                    &p.split_whitespace().collect::<Vec<_>>().join(" "),
                    300
                )
            ),
            None => line(n),
        };
        let mut lineage = Vec::new();
        let mut ancestors = Vec::new();
        let mut at = parent;
        while let Some(a) = at {
            lineage.push(line(&a.node));
            ancestors.push(a.node.id);
            at = a.node.parent.and_then(|p| s.graph.get(p));
        }
        lineage.reverse();
        // Other finished nodes: siblings (same parent), then cousins (same grandparent), then
        // the most recent others.
        let grand = parent.and_then(|p| p.node.parent);
        let kin = |n: &Node| {
            if n.parent.is_some() && n.parent == e.request.parent {
                0
            } else if grand.is_some()
                && n.parent
                    .and_then(|p| s.graph.get(p))
                    .and_then(|p| p.node.parent)
                    == grand
            {
                1
            } else {
                2
            }
        };
        let mut others: Vec<&Node> = s
            .graph
            .entries
            .iter()
            .filter(|o| o.merged && o.node.id != id && !ancestors.contains(&o.node.id))
            .filter(|o| o.node.state != NodeState::Duplicate)
            .map(|o| &o.node)
            .collect();
        others.sort_by_key(|n| (kin(n), std::cmp::Reverse(n.id)));
        let tried = others
            .iter()
            .take(TRIED_SHOWN)
            .map(|n| {
                let rel = ["sibling", "cousin", "elsewhere"][kin(n)];
                if kin(n) < 2 {
                    format!("{rel}: {}", kin_line(n))
                } else {
                    format!("{rel}: {}", line(n))
                }
            })
            .collect();
        let search_best = s
            .best
            .filter(|b| Some(*b) != e.request.parent)
            .and_then(|b| s.graph.get(b))
            .map(|b| b.node.clone());
        Expansion {
            node: id,
            parent: parent.map(|p| p.node.clone()),
            parent_source: parent
                .and_then(|p| p.node.code_hash.as_ref())
                .and_then(|h| s.sources.get(h).cloned()),
            lineage,
            tried,
            search_best,
            hint: e.request.hint,
            inspirations: e
                .request
                .inspirations
                .iter()
                .filter_map(|i| {
                    let n = s.graph.get(*i)?;
                    let src = s.sources.get(n.node.code_hash.as_ref()?)?;
                    Some((n.node.clone(), src.clone()))
                })
                .collect(),
            inner_iterations: e.request.inner,
            seed: e.request.seed,
            model: e.request.model.clone(),
            max_calls: e.request.max_calls,
            // Ids are handed out in order, so under a node budget of N, node N-1 is the last.
            last: s.settings.budget.nodes.is_some_and(|n| id.0 + 1 >= n),
        }
    }

    /// Records an expansion's result (before the batch is merged).
    fn record(&mut self, id: NodeId, x: Expanded, wall: f64) {
        let s = &mut self.state;
        let Some(e) = s.graph.entries.get_mut(id.0 as usize) else {
            return;
        };
        let mut spend = x.spend;
        if spend.wall_s == 0.0 {
            spend.wall_s = wall;
        }
        e.node.plan = x.plan;
        e.node.code_hash = x.code_hash;
        e.node.norm_hash = x.norm_hash;
        e.node.duplicate_of = x.duplicate_of;
        e.node.outcome = x.outcome;
        e.node.spend = spend;
        e.node.feedback = x.feedback;
        e.node.state = if x.source.is_none() && e.node.duplicate_of.is_none() {
            NodeState::NoCandidate
        } else if e.node.duplicate_of.is_some() {
            NodeState::Duplicate
        } else {
            NodeState::Done
        };
        if let Some(src) = x.source {
            let hash = e
                .node
                .code_hash
                .get_or_insert_with(|| ksmith_task::content_hash(src.as_bytes()))
                .clone();
            let hash = Some(hash);
            // The same code (by hash) has the same features: computed once.
            let known = hash.as_ref().and_then(|h| {
                s.graph.entries.iter().find_map(|o| {
                    (o.node.code_hash.as_ref() == Some(h) && o.finished)
                        .then_some(o.features)
                        .flatten()
                })
            });
            let e = &mut s.graph.entries[id.0 as usize];
            e.features = Some(known.unwrap_or_else(|| Features::of_source(&src)));
            if let Some(h) = hash {
                s.sources.entry(h).or_insert(src);
            }
        }
        s.graph.entries[id.0 as usize].finished = true;
        s.totals.spend.add(&spend);
        s.totals.nodes += 1;
    }

    /// Merges a finished node: in-run duplicates, strategy, bandit, archive, best.
    fn merge(&mut self, id: NodeId, events: &dyn EventSink) {
        let s = &mut self.state;
        let idx = id.0 as usize;
        // A candidate whose exact code an earlier node had is a duplicate (the expander may
        // have judged it again; the search does not count it as new). Code that only
        // normalizes equally is its own node with its own verdict.
        if s.graph.entries[idx].node.duplicate_of.is_none() {
            if let Some(h) = s.graph.entries[idx].node.code_hash.clone() {
                let earlier = s.graph.entries[..idx]
                    .iter()
                    .find(|e| {
                        // The original is a merged node that is not itself a duplicate (two
                        // nodes judged at once may each have waited on the other's claim).
                        e.merged
                            && e.node.duplicate_of.is_none()
                            && e.node.code_hash.as_deref() == Some(h.as_str())
                    })
                    .map(|e| e.node.id);
                if let Some(d) = earlier {
                    let n = &mut s.graph.entries[idx].node;
                    n.duplicate_of = Some(d);
                    n.state = NodeState::Duplicate;
                }
            }
        }
        s.graph.entries[idx].merged = true;
        let parent_speedup = s.graph.entries[idx]
            .request
            .parent
            .and_then(|p| s.graph.speedup(p));
        let speedup = s.graph.speedup(id);
        if let Some(arm) = s.graph.entries[idx].request.arm {
            s.bandit
                .reward(arm, bandit::reward(parent_speedup, speedup));
        }
        if let Some(sp) = speedup {
            let cell = s.graph.entries[idx].features.unwrap_or_default();
            s.archive.offer(cell, id, sp);
            // A new best only when decided better than the best so far: by the same-rounds
            // timing against its parent when the best is its parent, else from the two
            // separate windows, their intervals combined (`decide::Evidence::separate`); an
            // undecided node leaves the best in place (finalists are re-timed side by side at
            // the end anyway).
            let beats = |b: NodeId| {
                // Timed in the same rounds as the best (its parent): that decision.
                let node = &s.graph.entries[idx].node;
                if node.parent == Some(b) && node.outcome.vs_parent.is_some() {
                    return node.outcome.faster_than_parent();
                }
                let figures = |n: NodeId| {
                    let o = &s.graph.get(n)?.node.outcome;
                    Some((o.speedup?, o.interval.unwrap_or((0.0, 0.0))))
                };
                match (figures(id), figures(b)) {
                    (Some(c), Some(i)) => ksmith_judge::decide::decide(
                        ksmith_judge::decide::Evidence::separate(c, i, false),
                    )
                    .adopt(),
                    _ => false,
                }
            };
            if s.best
                .filter(|&b| s.graph.speedup(b).is_some())
                .is_none_or(beats)
            {
                s.best = Some(id);
                events.emit(Event::NewBest {
                    node: id,
                    speedup: sp,
                });
            }
        }
        s.strategy.finished(&s.graph, id);
    }
}

/// The state a store holds for a run, parsed.
pub fn parse_state(json: &str) -> Result<SearchState, SearchError> {
    serde_json::from_str(json)
        .map_err(|e| SearchError::State(format!("stored state does not parse: {e}")))
}
