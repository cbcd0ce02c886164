//! The real [`Expander`]: one node is a short agent session with a fresh context (plan →
//! implement → judge → fix, `inner_iterations` times, keeping its best candidate), built from
//! the parent's code, the lineage, the hint and any inspirations; never from a growing chat.
//!
//! Safe to call from several threads at once: each expansion opens its own store connection
//! (WAL) and takes a judge from a pool. Every LLM call is journaled by (run, node, index in
//! node), so a node expanded again after `kill -9` replays the calls it already paid for. A
//! candidate whose exact code (same bytes, flags and entry point) was already judged (in this
//! run, or in an earlier run on the same machine and task) is not judged again: its evaluation
//! is reused and the node is marked a duplicate. Sources that only normalize equally
//! (comments, whitespace) are judged each on their own.

use super::brief::{failure, first_lines, roofline_text, task_brief, timing_text};
use super::context::{
    implement_query, key_line, passages, plan_query, values, BestView, FailureView, FixBudget,
    FixerContext, HintView, ImplementerContext, Inspiration, LastView, Mode, PlannerContext,
    SearchBestView,
};
use super::journal::{ask_until_usable, Asker, CallCost, JournaledProvider};
use super::stages::{
    adopt_tuned, check_tunables, defines_list, with_tunables, AnalystContext, AutotuneContext,
    StageSettings, Stages,
};
use super::state::Verdict;
use crate::dedup::{norm_hash, DedupIndex, FirstSeen};
use crate::events::{Event, EventSink};
use crate::hint::Hint;
use crate::node::{
    ExpandError, Expanded, Expander, Expansion, Feedback, NodeId, NodeOutcome, Spend,
};
use anyhow::anyhow;
use ksmith_agents::edit::{self, Change};
use ksmith_agents::{parse_plan, Plan, Prompts, Rendered, Role, TuneDecision};
use ksmith_judge::decide::Decision;
use ksmith_judge::{EvalResult, Judge, Status};
use ksmith_llm::ModelSpec;
use ksmith_store::{CallRow, DedupHit, Store};
use ksmith_task::{Language, Solution, Task};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Makes a judge when the pool has none free (the CLI's builds one from its flags).
pub type JudgeFactory = Box<dyn Fn() -> anyhow::Result<Judge> + Send + Sync>;

/// What every node's session of one run shares.
#[derive(Debug, Clone)]
pub struct ExpanderSettings {
    /// The run (its `runs` row must exist: calls are journaled under it).
    pub run: String,
    /// The store's root directory (`.ksmith`).
    pub store_dir: PathBuf,
    /// The task directory.
    pub task_dir: PathBuf,
    /// `provider:model`.
    pub model: String,
    /// The run's starting solution (None: the first nodes write a kernel from the task alone).
    pub start: Option<PathBuf>,
    /// Fix attempts per candidate in each inner round.
    pub fix_attempts: u32,
    /// Directory of prompt templates overriding the built-in ones.
    pub prompts: Option<PathBuf>,
    /// Extra knowledge directories (the built-in corpus is always there).
    pub knowledge: Vec<PathBuf>,
    /// The session's optional stages (autotune, profile) after each node's kept candidate.
    pub stages: StageSettings,
}

/// The file every candidate edits and what it keeps from the run's start.
#[derive(Debug, Clone)]
struct Base {
    file: String,
    entry: String,
    language: Language,
    flags: Vec<String>,
    source: String,
}

/// Grows nodes with short agent sessions.
pub struct AgentExpander {
    settings: ExpanderSettings,
    task: Task,
    base: Base,
    prompts: Prompts,
    /// The technique corpus (built in, plus the user's directories) retrieved into plans.
    knowledge: ksmith_knowledge::Knowledge,
    spec: ModelSpec,
    config: ksmith_llm::Config,
    judges: Mutex<Vec<Judge>>,
    make_judge: JudgeFactory,
    dedup: Arc<DedupIndex>,
    /// The run's next call seq (calls of parallel nodes interleave; each gets its own).
    next_seq: AtomicU64,
    /// The optional stages run on each node's kept candidate.
    stages: Stages,
    /// Held while a person answers a review (parallel nodes take turns).
    review_turn: Mutex<()>,
    /// The task's content hash when the run started (its stored row): the tests every node
    /// is judged by, whichever process grows it.
    frozen_tests: String,
}

/// A candidate with its judgement.
#[derive(Clone)]
struct Candidate {
    plan: Plan,
    source: String,
    norm_hash: String,
    duplicate_of: Option<NodeId>,
    result: EvalResult,
    eval_id: i64,
}

impl Candidate {
    fn speedup(&self) -> Option<f64> {
        (self.result.status == Status::Passed)
            .then(|| self.result.performance.as_ref().map(|p| p.speedup))
            .flatten()
    }

    /// Whether this candidate replaces `other` as a session's best: it passed, and the one
    /// decision rule (`ksmith_judge::decide`) on the two evaluations' intervals says faster
    /// (a candidate that only reads faster on an undecided pair does not replace it).
    fn decided_faster_than(&self, other: &Candidate) -> bool {
        let (Some(perf), Some(x)) = (self.result.performance.as_ref(), self.speedup()) else {
            return false;
        };
        let (Some(op), Some(y)) = (other.result.performance.as_ref(), other.speedup()) else {
            return true;
        };
        ksmith_judge::decide::decide(ksmith_judge::decide::Evidence::separate(
            (x, perf.speedup_interval),
            (y, op.speedup_interval),
            perf.never_quiet || op.never_quiet,
        ))
        .adopt()
    }

    fn outcome_text(&self) -> String {
        let r = &self.result;
        match (r.status, self.speedup()) {
            (Status::Passed, Some(x)) => format!("passed, {x:.2}x vs XLA"),
            (st, _) => match &r.reason {
                Some(reason) => format!("{st} ({reason})"),
                None => st.to_string(),
            },
        }
    }

    fn outcome(&self) -> NodeOutcome {
        let perf = self.result.performance.as_ref();
        let passed = self.result.status == Status::Passed;
        NodeOutcome {
            status: Some(self.result.status),
            speedup: self.speedup(),
            interval: perf.filter(|_| passed).map(|p| p.speedup_interval),
            roofline_fraction: perf.filter(|_| passed).map(|p| p.roofline_fraction),
            eval_id: Some(self.eval_id),
            vs_parent: None,
        }
    }
}

/// One expansion's working state.
struct NodeCx<'a> {
    req: &'a Expansion,
    events: &'a dyn EventSink,
    store: Store,
    /// This node's journaled calls: (index in node, call).
    journal: Vec<(u64, CallRow)>,
    next_idx: u64,
    provider: Option<JournaledProvider>,
    spend: Spend,
    judge: Judge,
    /// What the session would hand back now: the fastest passing candidate judged so far,
    /// else the last one (kept so that a call budget reached mid-session loses nothing judged).
    kept: Option<Candidate>,
    /// Evaluations counted in this node's spend by this attempt: one this node judged before
    /// a kill counts once when the re-grown node finds it, a repeat within the session not.
    counted: std::collections::HashSet<i64>,
    /// This node's answered reviews, by journal seq (replayed when the node is grown again).
    reviews: std::collections::BTreeMap<u64, Verdict>,
    /// The next review's index in this node.
    next_review: u64,
    /// A reviewer's guidance for the next agent call.
    guidance: Option<String>,
}

impl NodeCx<'_> {
    /// Records a judged candidate as the session's answer if it is the best so far.
    fn keep(&mut self, c: &Candidate) {
        let replace = match &self.kept {
            None => true,
            Some(k) if k.speedup().is_none() => true,
            Some(k) => c.decided_faster_than(k),
        };
        if replace {
            self.kept = Some(c.clone());
        }
    }

    fn say(&self, message: String) {
        self.events.emit(Event::Progress {
            node: Some(self.req.node),
            message,
        });
    }
}

fn failed(e: impl Into<anyhow::Error>) -> ExpandError {
    ExpandError::Failed(e.into())
}

impl AgentExpander {
    /// The task being optimized.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// A node's code as a candidate: the start's file, entry point, language and flags.
    pub fn candidate(&self, node: NodeId, source: String) -> Solution {
        Solution::from_source(
            &format!("{}-{}", self.task.name, node),
            self.base.language,
            &self.base.entry,
            &self.base.file,
            source,
            self.base.flags.clone(),
        )
    }

    /// Checks the model, task, templates and starting solution; nothing is called or judged.
    pub fn new(
        settings: ExpanderSettings,
        make_judge: JudgeFactory,
    ) -> Result<AgentExpander, ExpandError> {
        let input = |e: anyhow::Error| ExpandError::Input(e);
        let task = Task::load(&settings.task_dir).map_err(|p| {
            input(anyhow!(
                "invalid task {}:\n{p}",
                settings.task_dir.display()
            ))
        })?;
        // The flags first (a typo in the model, the prompts or the knowledge directories),
        // then the provider's own setup (its key, file or program).
        let spec = ModelSpec::parse(&settings.model).map_err(|e| input(anyhow!("--model: {e}")))?;
        let prompts = Prompts::load(settings.prompts.as_deref()).map_err(|e| input(e.into()))?;
        let knowledge =
            ksmith_knowledge::Knowledge::open(&settings.knowledge).map_err(|e| input(e.into()))?;
        let config = ksmith_llm::Config::discover().map_err(|e| input(e.into()))?;
        ksmith_llm::preflight(&spec, &config)
            .map_err(|e| input(anyhow!("model {}: {e}", settings.model)))?;
        let base = match &settings.start {
            Some(path) => {
                let sol = Solution::load(path, &task).map_err(|e| {
                    input(anyhow!(
                        "invalid starting solution {}:\n{e}",
                        path.display()
                    ))
                })?;
                let [(file, source)] = sol.sources.as_slice() else {
                    return Err(input(anyhow!(
                        "agent sessions edit one source file; {} has {}",
                        path.display(),
                        sol.sources.len()
                    )));
                };
                Base {
                    file: file.clone(),
                    entry: sol.entry_point.clone(),
                    language: sol.language,
                    flags: sol.flags.clone(),
                    source: source.clone(),
                }
            }
            None => Base {
                file: "kernel.c".into(),
                entry: task.name.clone(),
                language: Language::C,
                flags: Vec::new(),
                source: super::skeleton(&task),
            },
        };
        let store = Store::open(&settings.store_dir).map_err(failed)?;
        let next = store.next_call_seq(&settings.run).map_err(failed)?;
        let frozen_tests = store
            .run(&settings.run)
            .map_err(failed)?
            .map_or_else(|| task.content_hash.clone(), |r| r.tests_hash);
        let settings_stages = settings.stages;
        Ok(AgentExpander {
            settings,
            task,
            base,
            prompts,
            knowledge,
            spec,
            config,
            judges: Mutex::new(Vec::new()),
            make_judge,
            dedup: Arc::new(DedupIndex::new()),
            next_seq: AtomicU64::new(next),
            stages: Stages::standard(settings_stages, Arc::new(super::tuner::HillClimbTuner)),
            review_turn: Mutex::new(()),
            frozen_tests,
        })
    }

    /// Runs these stages instead of the standard ones its settings name (tests, other
    /// profilers or tuners).
    pub fn with_stages(mut self, stages: Stages) -> AgentExpander {
        self.stages = stages;
        self
    }

    /// Shares an in-run dedup index (the engine's, when it keeps one across expanders).
    pub fn with_dedup(mut self, index: Arc<DedupIndex>) -> AgentExpander {
        self.dedup = index;
        self
    }

    /// The in-run dedup index.
    pub fn dedup(&self) -> &Arc<DedupIndex> {
        &self.dedup
    }

    fn take_judge(&self) -> Result<Judge, ExpandError> {
        let free = self.judges.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match free {
            Some(j) => Ok(j),
            None => (self.make_judge)().map_err(ExpandError::Failed),
        }
    }

    fn put_judge(&self, judge: Judge) {
        self.judges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(judge);
    }

    /// One LLM call: replayed from the node's journal when it was already made, else asked of
    /// the provider and journaled (failures too, so a retry takes the same run seq).
    fn call(
        &self,
        cx: &mut NodeCx,
        role: Role,
        step: &str,
        prompt: &Rendered,
    ) -> Result<String, ExpandError> {
        let mut idx = cx.next_idx;
        let mut stored = cx
            .journal
            .iter()
            .find(|(i, _)| *i == idx)
            .map(|(_, c)| c.clone());
        if let Some(c) = stored.clone().filter(|c| c.role != role.name()) {
            // The session took another path than the journaled one (a verdict came out
            // differently): the stored calls from here are kept (they were paid) but not
            // replayed; the node goes on with new calls after them.
            let after = cx.journal.iter().map(|(i, _)| i + 1).max().unwrap_or(idx);
            cx.say(format!(
                "{step}: the journal diverged at call {idx} (stored {}, now {}); new calls from {after}",
                c.role,
                role.name()
            ));
            cx.journal.clear();
            cx.next_idx = after;
            idx = after;
            stored = None;
        }
        if let Some(c) = stored.as_ref().filter(|c| c.error.is_none()) {
            cx.next_idx += 1;
            cx.spend.calls += 1;
            cx.spend.tokens += c.tokens_in + c.tokens_out;
            cx.spend.cost += c.cost;
            cx.say(format!(
                "{step}: {} reply replayed from the journal",
                role.name()
            ));
            return Ok(c.reply.clone());
        }
        // The engine gave this node its share of the run's call budget.
        if let Some(max) = cx.req.max_calls {
            if cx.spend.calls >= max {
                return Err(ExpandError::Budget(format!(
                    "{} LLM calls, this node's share of the call budget",
                    cx.spend.calls
                )));
            }
        }
        let seq = stored
            .map(|c| c.seq)
            .unwrap_or_else(|| self.next_seq.fetch_add(1, Ordering::SeqCst));
        let provider = cx.provider.get_or_insert_with(|| {
            JournaledProvider::new(
                self.spec.clone(),
                self.config.clone(),
                self.settings.model.clone(),
            )
        });
        cx.events.emit(Event::Progress {
            node: Some(cx.req.node),
            message: format!(
                "{step}: asking the {} ({})",
                role.name(),
                self.settings.model
            ),
        });
        let (row, reply) = provider.complete(role, step, seq, prompt);
        cx.store
            .record_node_call(&self.settings.run, cx.req.node.0, idx, &row)
            .map_err(failed)?;
        match reply {
            Ok(text) => {
                let c = CallCost::of(&row);
                cx.next_idx += 1;
                cx.spend.calls += 1;
                cx.spend.tokens += c.tokens;
                cx.spend.cost += c.cost;
                Ok(text)
            }
            Err(e) if e.refusal => Err(ExpandError::Refused(anyhow!(
                "{step}: {} call failed: {e}",
                role.name()
            ))),
            Err(e) => Err(failed(anyhow!("{step}: {} call failed: {e}", role.name()))),
        }
    }

    /// Renders, calls and parses, re-asking with the parse error up to `retries` times
    /// (`journal::ask_until_usable`, the serial loop's rule). `Ok(Err(msg))`: the model never
    /// gave a usable answer.
    fn ask<T>(
        &self,
        cx: &mut NodeCx,
        role: Role,
        step: &str,
        vars: Value,
        retries: u32,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Result<T, String>, ExpandError> {
        let guidance = cx.guidance.take();
        let mut asker = NodeAsker { x: self, cx };
        let got = ask_until_usable(&mut asker, role, step, vars, guidance, retries, parse)?;
        Ok(got.map(|(v, _)| v))
    }

    /// A review point: the reviewer's verdict on `shown` (always Approve without a reviewer),
    /// journaled in the run's events so a node grown again replays it; a guidance is kept for
    /// the next agent call; a quit pauses the run (not journaled: asked again on resume).
    fn review(
        &self,
        cx: &mut NodeCx,
        step: &str,
        what: &str,
        shown: &str,
        editable: &str,
    ) -> Result<Verdict, ExpandError> {
        let Some(reviewer) = self.stages.reviewer.clone() else {
            return Ok(Verdict::Approve);
        };
        let seq = review_seq(cx.req.node, cx.next_review.min(REVIEWS_PER_NODE - 1));
        cx.next_review += 1;
        let v = match cx.reviews.get(&seq) {
            Some(v) => v.clone(),
            None => {
                // One person answers: parallel nodes take turns.
                let _turn = self.review_turn.lock().unwrap_or_else(|p| p.into_inner());
                // `step` names the node already (`node n1 round 1 plan`).
                let v = reviewer
                    .review(step, what, shown, editable)
                    .map_err(failed)?;
                if v != Verdict::Quit {
                    let payload = serde_json::to_string(&v).map_err(failed)?;
                    cx.store
                        .record_event(&self.settings.run, seq, "review", &payload)
                        .map_err(failed)?;
                }
                v
            }
        };
        match v {
            Verdict::Quit => Err(ExpandError::Paused(format!(
                "the reviewer quit at node {} ({step}, {what})",
                cx.req.node
            ))),
            Verdict::Guidance(g) => {
                cx.guidance = Some(g.clone());
                Ok(Verdict::Guidance(g))
            }
            v => Ok(v),
        }
    }

    /// A code step (implement or fix) and its review as a diff: the new source, or why none
    /// came. An edit replaces the source; a rerun asks again.
    fn reviewed_code(
        &self,
        cx: &mut NodeCx,
        role: Role,
        step: &str,
        vars: Value,
        base: &str,
        parse: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Result<String, String>, ExpandError> {
        loop {
            let got = self.ask(
                cx,
                role,
                step,
                vars.clone(),
                self.settings.fix_attempts,
                &parse,
            )?;
            let Ok(source) = got else {
                return Ok(got);
            };
            let diff = similar::TextDiff::from_lines(base, &source)
                .unified_diff()
                .context_radius(2)
                .header(
                    &format!("a/{}", self.base.file),
                    &format!("b/{}", self.base.file),
                )
                .to_string();
            match self.review(cx, step, "code change", &diff, &source)? {
                Verdict::Rerun => continue,
                Verdict::Edited(text) => return Ok(Ok(text)),
                _ => return Ok(Ok(source)),
            }
        }
    }

    /// What earlier runs on other tasks learned (cross-run memory), as planner values; memory
    /// is advice, never a reason to fail a node.
    fn memory_for(&self, cx: &mut NodeCx) -> Vec<Value> {
        let Ok(env) = cx.judge.environment() else {
            return Vec::new();
        };
        let fingerprint = env.fingerprint.clone();
        let step = crate::memory::Step::Node(cx.req.node);
        let (views, err) = crate::memory::for_planner(
            &mut cx.store,
            &self.task,
            &fingerprint,
            &self.settings.run,
            step,
        );
        if let Some(e) = err {
            cx.say(format!("memory exposure not recorded: {e}"));
        }
        views
    }

    /// Judges a candidate unless the same bytes were judged before (then reuses that
    /// evaluation and names the node that first had it).
    fn judge_candidate(
        &self,
        cx: &mut NodeCx,
        plan: &Plan,
        source: String,
    ) -> Result<Candidate, ExpandError> {
        let norm = norm_hash(&source, self.base.language);
        // The reuse key is the judge's own key of these exact bytes: flags, entry point, judge
        // settings, machine and task included, so a verdict is only reused where the judge
        // would be asked the same question about the same program. Never the normalized
        // text: normalization is ours, not the compiler's (a `// ... \` comment continues onto
        // the next line in C, so two texts that normalize equally can compile differently);
        // it only groups nodes for prompts and reports (`norm_hash`).
        let canonical = Solution::from_source(
            "dedup",
            self.base.language,
            &self.base.entry,
            &self.base.file,
            source.clone(),
            self.base.flags.clone(),
        );
        let key = cx.judge.eval_key(&self.task, &canonical).map_err(failed)?;
        let fingerprint = cx.judge.environment().map_err(failed)?.fingerprint.clone();
        let task_hash = self.task.content_hash.clone();
        // Waits while another node of this run judges the same code.
        let claimed = self.dedup.claim(&key, cx.req.node);
        // Whatever happens from here (an error, a panicking judge), a claim of ours is given
        // up unless a verdict was recorded: nodes waiting on it must not wait forever.
        let _claim = claimed
            .is_none()
            .then(|| self.dedup.hold(&key, cx.req.node));
        let earlier = match claimed {
            Some(f) => Some((self.settings.run.clone(), f.node, Some(f.eval_id))),
            None => cx
                .store
                .dedup_lookup(&fingerprint, &task_hash, &key)
                .map_err(failed)?
                .map(|h| (h.run, NodeId(h.node), h.eval_id)),
        };
        if let Some((run, node, Some(eval_id))) = earlier {
            let stored = cx.store.get(eval_id).map_err(failed);
            if claimed.is_none() {
                // Found in the store, not judged here: nodes waiting on this claim look there.
                self.dedup.release(&key, cx.req.node);
            }
            if let Some(stored) = stored? {
                // The same node judging its own code again (a re-expansion after a kill, or a
                // fix that came back to an earlier version) is a reuse, not a duplicate.
                let own = run == self.settings.run && node == cx.req.node;
                if own && cx.counted.insert(eval_id) {
                    // Judged by this node before it was interrupted: paid, so counted.
                    cx.spend.evaluations += 1;
                }
                if !own {
                    let whose = if run == self.settings.run {
                        format!("node {node}")
                    } else {
                        format!("node {node} of run {run}")
                    };
                    cx.say(format!(
                        "same code as {whose} (byte for byte): evaluation {eval_id} reused, not judged again"
                    ));
                }
                let cand = Candidate {
                    plan: plan.clone(),
                    source,
                    norm_hash: norm,
                    // Only a repeat within this run is a duplicate node (it cannot add to the
                    // search); code first judged in an earlier run is new here and keeps its
                    // verdict, reused without judging again.
                    duplicate_of: (!own && run == self.settings.run).then_some(node),
                    result: stored.result,
                    eval_id,
                };
                cx.keep(&cand);
                return Ok(cand);
            }
        }
        let sol = self.candidate(cx.req.node, source.clone());
        let (eval_id, result, fresh) = evaluate(&mut cx.judge, &mut cx.store, &self.task, &sol)?;
        if fresh && cx.counted.insert(eval_id) {
            cx.spend.evaluations += 1;
        }
        self.dedup.insert(
            &key,
            FirstSeen {
                node: cx.req.node,
                eval_id,
            },
        );
        cx.store
            .dedup_insert(
                &fingerprint,
                &task_hash,
                &key,
                &DedupHit {
                    run: self.settings.run.clone(),
                    node: cx.req.node.0,
                    eval_id: Some(eval_id),
                },
            )
            .map_err(failed)?;
        let cand = Candidate {
            plan: plan.clone(),
            source,
            norm_hash: norm,
            duplicate_of: None,
            result,
            eval_id,
        };
        cx.keep(&cand);
        Ok(cand)
    }

    /// The session: `inner_iterations` rounds of plan → implement → judge → fix.
    fn session(&self, cx: &mut NodeCx) -> Result<Expanded, ExpandError> {
        let req = cx.req;
        let task_now = Task::load(&self.task.dir).map_err(|p| {
            ExpandError::Input(anyhow!("invalid task {}:\n{p}", self.task.dir.display()))
        })?;
        if task_now.content_hash != self.frozen_tests {
            return Err(ExpandError::Input(anyhow!(
                "the tests of task {} changed during run {}; a run's tests are frozen at its start",
                self.task.name,
                self.settings.run
            )));
        }
        // The engine's root (a first kernel asked for) in a run that has a starting solution is
        // that solution, judged as it is: the search grows from its measured figures (no call).
        if req.parent.is_none() && req.hint == Hint::FirstKernel && self.settings.start.is_some() {
            let plan = Plan {
                title: "the starting solution".into(),
                strategy: "judged as given".into(),
                expected_effect: String::new(),
                expected_speedup: None,
                risks: String::new(),
            };
            let cand = self.judge_candidate(cx, &plan, self.base.source.clone())?;
            // A search decides by timing: a start this machine cannot time (a GPU kernel
            // checked in an interpreter) gives it nothing to decide on, and resuming won't help.
            if let Some(why) = &cand.result.timing_unavailable {
                return Err(ExpandError::Input(anyhow!(
                    "{} candidates cannot be timed on this machine ({why}); an agent run needs timing",
                    self.base.language.name()
                )));
            }
            let code_hash = cx
                .store
                .put_artifact(cand.source.as_bytes())
                .map_err(failed)?;
            return Ok(Expanded {
                plan: plan.markdown(),
                outcome: cand.outcome(),
                source: Some(cand.source),
                code_hash: Some(code_hash),
                norm_hash: Some(cand.norm_hash),
                duplicate_of: cand.duplicate_of,
                spend: Spend::default(),
                feedback: Feedback::default(),
            });
        }
        let parent_source = req
            .parent_source
            .clone()
            .unwrap_or_else(|| self.base.source.clone());
        let parent_passed = req.parent.as_ref().is_some_and(|p| p.outcome.passed());
        let brief = task_brief(&self.task, &self.base.entry, self.base.language);
        let reference = std::fs::read_to_string(self.task.reference_path()).unwrap_or_default();
        // (It says when the machine is busier than its cores: timings are noisier then.)
        let machine = roofline_text(cx.judge.hardware());
        let inspirations: Vec<Inspiration> = req
            .inspirations
            .iter()
            .map(|(n, src)| {
                let perf = n
                    .outcome
                    .speedup
                    .map_or_else(|| "not timed".to_string(), |x| format!("{x:.2}x vs XLA"));
                Inspiration {
                    label: format!("node {} ({}, {perf})", n.id, n.hint),
                    source: src.clone(),
                }
            })
            .collect();
        let memory = self.memory_for(cx);
        // The parent's per-workload figures (timing, bandwidth, roofline) from its stored
        // evaluation, so the planner can tell a memory-bound kernel from a compute-bound one.
        let stored = |cx: &mut NodeCx, n: &crate::Node| -> Option<EvalResult> {
            let id = n.outcome.eval_id?;
            Some(cx.store.get(id).ok().flatten()?.result)
        };
        let parent_result = req.parent.as_ref().and_then(|p| stored(cx, p));
        let search_best = req.search_best.as_ref().map(|b| {
            let figures = match (b.outcome.speedup, b.outcome.interval) {
                (Some(x), Some((lo, hi))) => format!("{x:.2}x ({lo:.2}-{hi:.2}) vs XLA"),
                (Some(x), None) => format!("{x:.2}x vs XLA"),
                _ => "not timed".into(),
            };
            SearchBestView {
                node: b.id.0,
                title: crate::node::plan_title(&b.plan),
                hint: b.hint.as_str().to_string(),
                figures,
                timing: stored(cx, b)
                    .map(|r| timing_text(&self.task, &r))
                    .filter(|t| !t.is_empty()),
            }
        });
        // The parent's stages: its profile summary and what tuning found.
        let parent_last = req
            .parent
            .as_ref()
            .filter(|p| p.outcome.passed())
            .and_then(|p| {
                let profile = [
                    p.feedback.profile.clone(),
                    p.feedback
                        .tuning
                        .as_ref()
                        .map(|t| format!("Autotuning: {t}")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n");
                (!profile.is_empty()).then(|| LastView {
                    iteration: format!("node {}", p.id),
                    outcome: format!(
                        "passed, {:.2}x vs XLA",
                        p.outcome.speedup.unwrap_or_default()
                    ),
                    // Shown with it as the kernel to revise: not repeated here.
                    timing: String::new(),
                    profile,
                })
            });
        let parent_label = req
            .parent
            .as_ref()
            .map_or("the start".to_string(), |p| format!("node {}", p.id));
        let mut history: Vec<String> = req.lineage.clone();
        let mut best: Option<Candidate> = None;
        let mut last: Option<Candidate> = None;
        let mut plan_md = String::new();
        let rounds = req.inner_iterations.max(1);
        for round in 1..=rounds {
            let current = best.as_ref().map_or(parent_source.as_str(), |b| &b.source);
            let passing = best.is_some() || parent_passed;
            let best_view = match (&best, &parent_result) {
                (Some(b), _) => BestView::passing(
                    format!("node {}'s best round so far", req.node),
                    &self.base.file,
                    current,
                    &self.task,
                    &b.result,
                )
                .called("This node's best so far"),
                (None, Some(r)) if parent_passed => BestView::passing(
                    parent_label.clone(),
                    &self.base.file,
                    current,
                    &self.task,
                    r,
                )
                .called("The parent node, which this node revises"),
                _ => BestView::not_passing(parent_label.clone(), &self.base.file, current)
                    .called("The parent node, which this node revises"),
            };
            let last_view = match &last {
                Some(l) => Some(LastView {
                    iteration: format!("round {} of node {}", round - 1, req.node),
                    outcome: l.outcome_text(),
                    timing: timing_text(&self.task, &l.result),
                    profile: String::new(),
                }),
                None => parent_last.clone(),
            };
            // Technique notes for this task's language and operator class, steered by the
            // direction and what the last round showed.
            let query = plan_query(
                &self.task,
                req.hint.instruction(),
                &last_view
                    .as_ref()
                    .map(|l| format!("{} {}", l.outcome, l.profile))
                    .unwrap_or_default(),
            );
            let vars = values(&PlannerContext {
                task: brief.clone(),
                reference: reference.clone(),
                roofline: machine.clone(),
                mode: if passing { Mode::Revision } else { Mode::New },
                history: history.clone(),
                // "Round r of K" only means something with several rounds in a node.
                iteration: if rounds > 1 { round } else { 0 },
                of: (rounds > 1).then_some(rounds),
                best: best_view,
                not_passing: !passing,
                last: last_view,
                hint: Some(HintView {
                    name: req.hint.as_str().to_string(),
                    instruction: req.hint.instruction().to_string(),
                }),
                inspirations: inspirations.clone(),
                memory: memory.clone(),
                knowledge: passages(
                    &self.knowledge,
                    &query,
                    self.base.language.name(),
                    self.task.op_class,
                ),
                tried: req.tried.clone(),
                search_best: search_best.clone(),
            });
            let step = format!("node {} round {round} plan", req.node);
            let plan = loop {
                let plan = match self.ask(cx, Role::Planner, &step, vars.clone(), 2, |r| {
                    parse_plan(r).map_err(|e| e.0)
                })? {
                    Ok(p) => p,
                    Err(e) => break Err(e),
                };
                let md = plan.markdown();
                match self.review(cx, &step, "plan", &md, &md)? {
                    Verdict::Rerun => continue,
                    Verdict::Edited(text) => break Ok(edited_plan(&text)),
                    _ => break Ok(plan),
                }
            };
            let plan = match plan {
                Ok(p) => p,
                Err(e) => {
                    history.push(format!(
                        "node {} round {round}: the planner gave no usable plan ({})",
                        req.node,
                        e.lines().next().unwrap_or("")
                    ));
                    continue;
                }
            };
            plan_md = plan.markdown();
            cx.say(format!("plan: {}", plan.headline()));
            let impl_vars = values(&ImplementerContext {
                task: brief.clone(),
                plan: plan_md.clone(),
                file: self.base.file.clone(),
                source: current.to_string(),
                machine: machine.clone(),
                snapshots: Vec::new(),
                knowledge: passages(
                    &self.knowledge,
                    &implement_query(&self.task, &plan.strategy),
                    self.base.language.name(),
                    self.task.op_class,
                ),
            });
            let step = format!("node {} round {round} implement", req.node);
            let file = self.base.file.clone();
            let base_src = current.to_string();
            let source = match self.reviewed_code(
                cx,
                Role::Implementer,
                &step,
                impl_vars,
                &base_src,
                |r| code_from_reply(r, &file, &base_src),
            )? {
                Ok(s) => s,
                Err(e) => {
                    history.push(format!(
                        "node {} round {round}: {} -> the implementer's code could not be applied ({})",
                        req.node,
                        plan.headline(),
                        e.lines().next().unwrap_or("")
                    ));
                    continue;
                }
            };
            let mut cand = self.judge_candidate(cx, &plan, source)?;
            cx.say(format!(
                "candidate: {} (evaluation {})",
                cand.outcome_text(),
                cand.eval_id
            ));
            let mut tried: Vec<String> = Vec::new();
            let mut fixes = FixBudget::new(self.settings.fix_attempts);
            while cand.speedup().is_none() {
                let Some(n) = fixes.take(cand.result.status) else {
                    break;
                };
                let (kind, detail) = failure(&cand.result);
                let vars = values(&FixerContext {
                    task: brief.clone(),
                    file: self.base.file.clone(),
                    source: cand.source.clone(),
                    failure: FailureView {
                        kind: kind.to_string(),
                        detail: detail.clone(),
                    },
                    attempts: tried.clone(),
                });
                let step = format!("node {} round {round} fix {kind} {n}", req.node);
                let file = self.base.file.clone();
                let src = cand.source.clone();
                match self.reviewed_code(cx, Role::Fixer, &step, vars, &src, |r| {
                    code_from_reply(r, &file, &src)
                })? {
                    Ok(fixed) => {
                        tried.push(format!("{kind}: {}", key_line(&detail)));
                        cand = self.judge_candidate(cx, &plan, fixed)?;
                        cx.say(format!(
                            "after fix {n} ({kind}): {} (evaluation {})",
                            cand.outcome_text(),
                            cand.eval_id
                        ));
                    }
                    Err(e) => tried.push(format!(
                        "{kind}: the fix could not be applied ({})",
                        first_lines(&e, 1)
                    )),
                }
            }
            let dup = cand
                .duplicate_of
                .map(|n| format!(" (duplicate of node {n})"))
                .unwrap_or_default();
            history.push(format!(
                "node {} round {round} ({}): {} -> {}{dup}",
                req.node,
                req.hint,
                plan.headline(),
                first_lines(&cand.outcome_text(), 1)
            ));
            let better = match &best {
                Some(b) => cand.decided_faster_than(b),
                None => cand.speedup().is_some(),
            };
            if better {
                best = Some(cand.clone());
            }
            last = Some(cand);
        }
        let chosen = best.or(last);
        let mut feedback = Feedback::default();
        let chosen = match chosen {
            Some(c) if c.speedup().is_some() => {
                Some(self.run_stages(cx, c, &brief, &machine, &mut feedback)?)
            }
            other => other,
        };
        // The node's code against its parent's, timed together: the paired evidence keep
        // rules trust over two separate windows (the serial loop's head-to-head).
        let vs_parent = match (&chosen, req.parent.as_ref()) {
            (Some(c), Some(p))
                if c.speedup().is_some()
                    && p.outcome.passed()
                    && c.duplicate_of.is_none()
                    && c.source != parent_source =>
            {
                self.versus_parent(cx, c, p.id, &parent_source)
            }
            _ => None,
        };
        let mut out = conclude(cx, chosen, plan_md)?;
        out.feedback = feedback;
        out.outcome.vs_parent = vs_parent;
        Ok(out)
    }

    /// The kept candidate and its parent timed side by side, with more rounds while the rule
    /// says undecided on a wide interval; None when the comparison could not be made (said).
    fn versus_parent(
        &self,
        cx: &mut NodeCx,
        kept: &Candidate,
        parent: NodeId,
        parent_source: &str,
    ) -> Option<Decision> {
        let pair = [
            self.candidate(parent, parent_source.to_string()),
            self.candidate(cx.req.node, kept.source.clone()),
        ];
        cx.say(format!(
            "timing it against its parent {parent}, side by side"
        ));
        let decided = crate::Evaluator::new(&mut cx.judge, &mut cx.store).compare_decided(
            &self.task,
            &pair,
            0,
            |_| {},
        );
        match decided {
            Ok(d) => {
                // Two evaluations per timing, paid for whatever was decided.
                cx.spend.evaluations += 2 * u64::from(d.timings);
                let decision = d.decision(1)?;
                cx.say(format!("against its parent: {}", decision.text()));
                Some(decision)
            }
            Err(e) => {
                cx.say(format!(
                    "the side-by-side timing against its parent failed: {e}"
                ));
                None
            }
        }
    }

    /// The optional stages on the session's kept, passing candidate: autotune (the tuned
    /// kernel replaces it only when the rule decides it faster), then profile. What they
    /// found goes into `feedback` for the node's children.
    fn run_stages(
        &self,
        cx: &mut NodeCx,
        kept: Candidate,
        brief: &Value,
        machine: &str,
        feedback: &mut Feedback,
    ) -> Result<Candidate, ExpandError> {
        let mut kept = kept;
        if self.stages.tuner.is_some() && self.stages.settings.tune_budget > 0 {
            // A stage is advice on a candidate already judged: a provider failure in it is
            // noted and the node keeps its candidate (a budget or the judge still stop it).
            let (tuned, note) = match self.autotune(cx, &kept, brief) {
                Err(ExpandError::Failed(e)) => {
                    (None, Some(format!("the autotune stage failed: {e}")))
                }
                other => other?,
            };
            if let Some(n) = &note {
                cx.say(format!("autotune: {}", first_lines(n, 1)));
            }
            feedback.tuning = note;
            if let Some(t) = tuned {
                kept = t;
            }
        }
        let profiler = self
            .stages
            .profiler
            .clone()
            .filter(|p| self.stages.settings.profile && p.supports(self.base.language));
        if profiler.is_some() && cx.req.last {
            cx.say("profile: skipped, no node is grown after this one to read it".into());
        }
        if let Some(profiler) = profiler.filter(|_| !cx.req.last) {
            let dir = self.settings.store_dir.join("cache").join("profile");
            let sol = self.candidate(cx.req.node, kept.source.clone());
            cx.say("profile: sampling the kept candidate".into());
            let raw = profiler.profile(&mut cx.judge, &dir, &self.task, &sol, &kept.result);
            let vars = serde_json::to_value(AnalystContext {
                task: brief.clone(),
                file: self.base.file.clone(),
                source: kept.source.clone(),
                timing: timing_text(&self.task, &kept.result),
                profile: raw.clone(),
                machine: machine.to_string(),
                tuning: feedback.tuning.clone().unwrap_or_default(),
            })
            .map_err(failed)?;
            let step = format!("node {} profile", cx.req.node);
            let got = match self.ask(cx, Role::ProfileAnalyst, &step, vars, 0, |r| {
                Some(r.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| "the reply was empty".to_string())
            }) {
                Err(ExpandError::Failed(e)) => {
                    cx.say(format!(
                        "profile analyst failed: {e}; the raw profile is kept"
                    ));
                    Err(e.to_string())
                }
                other => other?,
            };
            // Without the analyst's summary the raw profile's head stands in.
            let summary = match got {
                Ok(t) => first_lines(&t, 12),
                Err(_) => first_lines(&raw, 12),
            };
            feedback.profile = Some(
                match self.review(cx, &step, "profile summary", &summary, &summary)? {
                    Verdict::Edited(t) => t,
                    _ => summary,
                },
            );
        }
        Ok(kept)
    }

    /// The autotune stage: the planner declares tunables over the kernel's `#define`
    /// constants, the tuner measures them, the winning values are written into the source and
    /// judged again. Returns the tuned candidate when it is adopted, and the note for the
    /// next plans (None when nothing was tried).
    fn autotune(
        &self,
        cx: &mut NodeCx,
        cand: &Candidate,
        brief: &Value,
    ) -> Result<(Option<Candidate>, Option<String>), ExpandError> {
        let Some(tuner) = self.stages.tuner.clone() else {
            return Ok((None, None));
        };
        let defs = ksmith_tune::source_defines(&cand.source);
        if defs.is_empty() {
            return Ok((None, None));
        }
        let budget = self.stages.settings.tune_budget;
        // What tuning found up the lineage (the parent's note in full; older ones are in the
        // lineage lines the engine writes).
        let earlier: Vec<String> = cx
            .req
            .parent
            .iter()
            .filter_map(|p| Some(format!("node {}: {}", p.id, p.feedback.tuning.as_ref()?)))
            .collect();
        let vars = serde_json::to_value(AutotuneContext {
            task: brief.clone(),
            file: self.base.file.clone(),
            source: cand.source.clone(),
            defines: defines_list(&defs),
            earlier,
            budget,
            timing: timing_text(&self.task, &cand.result),
        })
        .map_err(failed)?;
        let names: Vec<String> = defs.iter().map(|(k, _)| k.clone()).collect();
        let step = format!("node {} autotune", cx.req.node);
        let tunables = match self.ask(cx, Role::AutotunePlanner, &step, vars, 1, |r| {
            check_tunables(r, &names)
        })? {
            Ok(TuneDecision::Tunables(t)) => t,
            Ok(TuneDecision::None(why)) => {
                let why = super::context::clip(why.trim_start_matches([':', ' ', '-']), 300);
                return Ok((None, Some(format!("no tuning: {why}"))));
            }
            Err(e) => {
                let e = first_lines(&e, 1);
                return Ok((
                    None,
                    Some(format!("the planner gave no usable tunables ({e})")),
                ));
            }
        };
        let tunables = match self.review(cx, &step, "tunables", &tunables, &tunables)? {
            Verdict::Edited(t) => match check_tunables(&format!("```toml\n{t}\n```"), &names) {
                Ok(TuneDecision::Tunables(t)) => t,
                _ => return Ok((None, Some("the edited tunables were not usable".into()))),
            },
            Verdict::Rerun => {
                return Ok((None, Some("the reviewer asked for no tuning here".into())))
            }
            _ => tunables,
        };
        let sol = self.candidate(cx.req.node, cand.source.clone());
        let sol = match with_tunables(&self.task, &sol, &tunables) {
            Ok(s) => s,
            Err(e) => return Ok((None, Some(format!("the tunables were not usable: {e}")))),
        };
        cx.say(format!(
            "autotune: measuring at most {budget} configuration(s)"
        ));
        let (report, judged) = tuner
            .tune(&mut cx.judge, &mut cx.store, &self.task, &sol, budget)
            .map_err(|e| match e.downcast::<crate::tune::TuneError>() {
                // The judge's machinery failing fails the node, as for its candidate.
                Ok(crate::tune::TuneError::Evaluator(e)) => judge_failed(e),
                Ok(other) => failed(other),
                Err(e) => failed(e),
            })?;
        cx.spend.evaluations += judged;
        let Some(config) = report.config.clone() else {
            return Ok((None, Some(report.note)));
        };
        let baked = ksmith_tune::bake_defines(&cand.source, &config);
        let tuned = self.judge_candidate(cx, &cand.plan, baked)?;
        match adopt_tuned(&report, &tuned.result, &cand.result) {
            Ok(()) => Ok((Some(tuned), Some(report.note))),
            Err(why) => Ok((
                None,
                Some(format!(
                    "{}; the tuned kernel was discarded: {why}",
                    report.note
                )),
            )),
        }
    }
}

/// A node's calls, as the shared ask rule makes them.
struct NodeAsker<'a, 'b> {
    x: &'a AgentExpander,
    cx: &'a mut NodeCx<'b>,
}

impl Asker for NodeAsker<'_, '_> {
    type Error = ExpandError;

    fn render(&mut self, role: Role, vars: &Value) -> Result<Rendered, ExpandError> {
        self.x.prompts.render(role, vars).map_err(failed)
    }

    fn call(&mut self, role: Role, step: &str, prompt: &Rendered) -> Result<String, ExpandError> {
        self.x.call(self.cx, role, step, prompt)
    }

    fn unusable(&mut self, role: Role, step: &str, why: &str) {
        self.cx
            .say(format!("{step}: unusable {} reply: {why}", role.name()));
    }
}

/// The session's answer: its chosen candidate stored as an artifact (or no candidate).
fn conclude(
    cx: &mut NodeCx,
    chosen: Option<Candidate>,
    plan_md: String,
) -> Result<Expanded, ExpandError> {
    let Some(chosen) = chosen else {
        return Ok(Expanded {
            plan: plan_md,
            ..Expanded::default()
        });
    };
    let code_hash = cx
        .store
        .put_artifact(chosen.source.as_bytes())
        .map_err(failed)?;
    Ok(Expanded {
        plan: chosen.plan.markdown(),
        outcome: chosen.outcome(),
        source: Some(chosen.source),
        code_hash: Some(code_hash),
        norm_hash: Some(chosen.norm_hash),
        duplicate_of: chosen.duplicate_of,
        spend: Spend::default(),
        feedback: Feedback::default(),
    })
}

impl Expander for AgentExpander {
    fn expand(&self, req: &Expansion, events: &dyn EventSink) -> Result<Expanded, ExpandError> {
        let started = Instant::now();
        let store = Store::open(&self.settings.store_dir).map_err(failed)?;
        let journal = store
            .node_calls(&self.settings.run, req.node.0)
            .map_err(failed)?;
        // This node's answered reviews (an interactive search grown again after a pause).
        let reviews = if self.stages.reviewer.is_some() {
            let range = review_seq(req.node, 0)..review_seq(req.node, REVIEWS_PER_NODE);
            store
                .events(&self.settings.run)
                .map_err(failed)?
                .into_iter()
                .filter(|(seq, kind, _)| range.contains(seq) && kind == "review")
                .filter_map(|(seq, _, v)| Some((seq, serde_json::from_str(&v).ok()?)))
                .collect()
        } else {
            Default::default()
        };
        let judge = self.take_judge()?;
        let mut cx = NodeCx {
            req,
            events,
            store,
            journal,
            next_idx: 0,
            provider: None,
            spend: Spend::default(),
            judge,
            kept: None,
            counted: Default::default(),
            reviews,
            next_review: 0,
            guidance: None,
        };
        let out = match self.session(&mut cx) {
            // Out of calls mid-session: the node ends with what it judged so far.
            Err(ExpandError::Budget(why)) => {
                cx.say(format!("stopped: {why}"));
                let kept = cx.kept.take();
                conclude(&mut cx, kept, format!("stopped by the call budget ({why})"))
            }
            other => other,
        };
        let NodeCx {
            judge, mut spend, ..
        } = cx;
        self.put_judge(judge);
        let mut out = out?;
        spend.wall_s = started.elapsed().as_secs_f64();
        out.spend = spend;
        Ok(out)
    }
}

/// Finds a stored evaluation of identical code and settings, else judges and records one;
/// the bool says whether it was judged now.
fn evaluate(
    judge: &mut Judge,
    store: &mut Store,
    task: &Task,
    sol: &Solution,
) -> Result<(i64, EvalResult, bool), ExpandError> {
    let e = crate::Evaluator::new(judge, store)
        .evaluate(task, sol, &crate::Purpose::Plain)
        .map_err(judge_failed)?;
    Ok((e.id, e.result, !e.reused))
}

/// An evaluator's failure as the node's error.
fn judge_failed(e: crate::EvaluatorError) -> ExpandError {
    match e {
        // The judge's own machinery failed on this candidate: this node fails, not the
        // search (a cluster gone, a task that breaks or a missing backend still stop it).
        crate::EvaluatorError::Judge(
            j @ (ksmith_judge::JudgeError::Harness(_) | ksmith_judge::JudgeError::Backend(_)),
        ) => ExpandError::Judge(j.into()),
        other => failed(other),
    }
}

/// Reviews journaled per node, at most (a node asks far fewer).
const REVIEWS_PER_NODE: u64 = 4096;
/// Where a node's reviews are journaled among the run's events: above the serial loop's
/// sequence numbers and below the final record's.
const NODE_REVIEWS_BASE: u64 = 1 << 36;

/// The journal position of review `k` of `node`.
fn review_seq(node: NodeId, k: u64) -> u64 {
    NODE_REVIEWS_BASE + node.0 * REVIEWS_PER_NODE + k
}

/// A plan as the reviewer edited it (their text as the strategy when it is not a plan).
fn edited_plan(text: &str) -> Plan {
    parse_plan(text).unwrap_or(Plan {
        title: String::new(),
        strategy: text.to_string(),
        expected_effect: "(edited by the reviewer)".into(),
        expected_speedup: None,
        risks: String::new(),
    })
}

/// New source from a code reply, or the feedback that goes back to the model (only `file`
/// may change: the tests are frozen). Shared with the CLI's serial loop.
pub fn code_from_reply(reply: &str, file: &str, base: &str) -> Result<String, String> {
    let change = edit::parse_change(reply).map_err(|e| match e {
        edit::ParseError::Empty => "the reply was empty".to_string(),
        edit::ParseError::NoCode => format!("the reply had neither SEARCH/REPLACE blocks nor a fenced code block with the complete `{file}`"),
        other => format!("the reply could not be parsed: {other}"),
    })?;
    for f in change.files().into_iter().flatten() {
        let name = std::path::Path::new(f.trim())
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if name != file {
            return Err(format!(
                "REFUSED: `{f}` is frozen. The task definition, tolerances, workloads, reference and tests cannot be changed by any agent; only `{file}` may be edited. Nothing was applied."
            ));
        }
    }
    match change {
        Change::Full { text, .. } => Ok(text),
        Change::Edits(edits) => edit::apply_edits(base, &edits).map_err(|e| e.feedback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn the_expander_can_be_shared_by_threads() {
        assert_send_sync::<AgentExpander>();
    }

    #[test]
    fn only_the_kernel_file_may_change() {
        let e = code_from_reply(
            "task.toml\n<<<<<<< SEARCH\natol = 1e-6\n=======\natol = 1.0\n>>>>>>> REPLACE\n",
            "kernel.c",
            "int a;\n",
        )
        .unwrap_err();
        assert!(e.starts_with("REFUSED: `task.toml` is frozen"), "{e}");
        let ok = code_from_reply("kernel.c\n```c\nint b;\n```\n", "kernel.c", "int a;\n").unwrap();
        assert_eq!(ok, "int b;\n");
    }
}
