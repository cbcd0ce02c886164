//! One run as the page shows it (`RunState`, read from the store, the run's events file and
//! its pending review): the model both the page (`pages.rs`) and its live stream
//! (`stream.rs`) are made from. Read, not notified: the run is another process (started here,
//! by `ksmith mcp`, or at a terminal), and the store and its events file are what every kind
//! of run leaves.

use super::review::{self, PendingReview};
use super::{App, Failure};
use ksmith_results::run::{self as data, ReportData};
use ksmith_search::finalize::FinalRecord;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Prompts and replies are cut to this many characters on the page (the full text is in
/// `ksmith calls RUN`).
const TEXT_CAP: usize = 20_000;

/// One node as the page lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct NodeView {
    /// Node id (a serial run: its iteration).
    pub id: u64,
    /// Its parent.
    pub parent: Option<u64>,
    /// Depth in the tree (the start is 0).
    pub depth: u32,
    /// `n3` or `iteration 2`.
    pub label: String,
    /// The judge's status, or the node's state when not judged.
    pub status: String,
    /// best, passed, failed, skipped or open (the page's colour).
    pub tone: String,
    /// The hint pursued (untrusted).
    pub hint: String,
    /// Its plan's title (untrusted).
    pub plan: String,
    /// Speedup against XLA when passed and timed.
    pub speedup: Option<f64>,
    /// Its evaluation (linked).
    pub eval_id: Option<i64>,
}

/// An LLM call shown on the page.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct CallView {
    /// Its index in the run.
    pub seq: u64,
    /// The role (planner, implementer, fixer, ...).
    pub role: String,
    /// The loop step or node that made it.
    pub step: String,
    /// The prompt, capped (model-facing text built from untrusted pieces).
    pub prompt: String,
    /// The reply, capped (model text).
    pub reply: String,
    /// The error, when the call failed.
    pub error: Option<String>,
}

/// The node being expanded and its latest call.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Current {
    /// The node (search), when the events say which.
    pub node: Option<u64>,
    /// Its latest call (else the run's latest).
    pub call: Option<CallView>,
}

/// The winner as the page shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct WinnerView {
    /// Its node label.
    pub label: String,
    /// Its speedup (first judgement).
    pub speedup: Option<f64>,
    /// Its files: name and text (candidate text).
    pub files: Vec<(String, String)>,
    /// Chosen by the final judgement (else the fastest so far).
    pub decided: bool,
}

/// One point of the best-so-far curve.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Point {
    /// Seconds since the run started.
    pub wall_s: f64,
    /// Best speedup so far.
    pub best: f64,
}

/// Everything one run's page shows (`/runs/RUN/state`, the `state` event).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct RunState {
    /// The run id.
    pub run: String,
    /// Its task.
    pub task: String,
    /// Its model.
    pub model: String,
    /// autonomous, interactive or search.
    pub mode: String,
    /// serial or search.
    pub kind: String,
    /// Its status as `ksmith runs` shows it (a run whose process is gone: interrupted).
    pub status: String,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// Its process still runs.
    pub running: bool,
    /// LLM calls, tokens and USD so far.
    pub calls: u64,
    /// Tokens in and out.
    pub tokens: u64,
    /// USD.
    pub cost: f64,
    /// Evaluations by the judge.
    pub evaluations: u64,
    /// Its nodes, in tree order.
    pub nodes: Vec<NodeView>,
    /// Best-so-far curve.
    pub progress: Vec<Point>,
    /// The best passed node so far: label and speedup.
    pub best: Option<(String, f64)>,
    /// The node being expanded (while running).
    pub current: Option<Current>,
    /// The judge's or agent's latest stage line (from the engine's events).
    pub stage: Option<String>,
    /// The review the run waits on (interactive runs, `--review web`).
    pub review: Option<PendingReview>,
    /// The final judgement, once recorded.
    pub finals: Option<FinalRecord>,
    /// The written winner (or the fastest so far).
    pub winner: Option<WinnerView>,
    /// The engine's events seen so far (the SSE stream goes on from here).
    pub events: u64,
    /// What could not be read (shown, not fatal).
    pub warnings: Vec<String>,
}

/// The events file of a run: the page's own runs first, then those of `ksmith mcp`.
pub(crate) fn events_file(store: &Path, run: &str) -> PathBuf {
    let serve = review::serve_dir(store, run).join("events.jsonl");
    if serve.exists() {
        return serve;
    }
    crate::mcp::runs::events_path(store, run)
}

/// The end of the log of a run started from the page.
pub(crate) fn serve_log_tail(store: &Path, run: &str) -> String {
    crate::mcp::runs::log_tail(&review::serve_dir(store, run).join("log.txt"), 4000)
        .unwrap_or_default()
}

/// `s` cut to `n` characters, saying so.
fn cap(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        None => s.to_string(),
        Some((at, _)) => format!("{}\n[... cut: {} more bytes]", &s[..at], s.len() - at),
    }
}

impl CallView {
    fn of(c: &ksmith_store::CallRow) -> CallView {
        CallView {
            seq: c.seq,
            role: c.role.clone(),
            step: c.step.clone(),
            prompt: cap(&c.prompt, TEXT_CAP),
            reply: cap(&c.reply, TEXT_CAP),
            error: c.error.clone(),
        }
    }
}

/// Nodes in tree order (each after its parent, siblings by id), with depths.
fn tree_order(d: &ReportData) -> Vec<NodeView> {
    let mut children: HashMap<Option<u64>, Vec<usize>> = HashMap::new();
    let ids: std::collections::HashSet<u64> = d.nodes.iter().map(|n| n.id).collect();
    for (i, n) in d.nodes.iter().enumerate() {
        // A parent not in the list (not stored yet) makes the node a root, not an orphan.
        let p = n.parent.filter(|p| ids.contains(p));
        children.entry(p).or_default().push(i);
    }
    for v in children.values_mut() {
        v.sort_by_key(|&i| d.nodes[i].id);
    }
    let mut out = Vec::with_capacity(d.nodes.len());
    let mut stack: Vec<(usize, u32)> = children
        .get(&None)
        .map(|v| v.iter().rev().map(|&i| (i, 0)).collect())
        .unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    while let Some((i, depth)) = stack.pop() {
        let n = &d.nodes[i];
        if !seen.insert(n.id) {
            continue;
        }
        out.push(NodeView {
            id: n.id,
            parent: n.parent,
            depth,
            label: n.label.clone(),
            status: n.status.clone(),
            tone: n.tone.class().to_string(),
            hint: n.hint.clone(),
            plan: ksmith_search::node::plan_title(&n.plan),
            speedup: n.speedup,
            eval_id: n.eval_id,
        });
        if let Some(kids) = children.get(&Some(n.id)) {
            stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
        }
    }
    out
}

impl RunState {
    /// The run as it stands; None when the store has no such run.
    pub(crate) fn read(app: &App, run: &str) -> Result<Option<RunState>, Failure> {
        let store = app.ctx.store_read().map_err(Failure::exit)?;
        let Some(row) = store.run(run).map_err(Failure::server)? else {
            return Ok(None);
        };
        let shown = crate::agent::commands::run_json(&store, &row).map_err(Failure::exit)?;
        let d = match data::load(&store, run) {
            Ok(d) => d,
            Err(data::LoadError::UnknownRun(_)) => return Ok(None),
            Err(e) => return Err(Failure::server(e)),
        };
        let status = shown["status"].as_str().unwrap_or("unknown").to_string();
        let running = match app.procs.state(run) {
            Some(p) => p.running,
            None => status == "running",
        };
        let events_path = events_file(&app.ctx.store_dir, run);
        let events = crate::mcp::runs::read_events(&events_path, 0).unwrap_or_default();
        let stage = events.iter().rev().find_map(|e| match &e.event {
            ksmith_search::Event::Progress { node, message } => Some(match node {
                Some(n) => format!("{n}: {message}"),
                None => message.clone(),
            }),
            _ => None,
        });
        // The node being expanded: the last started one that has not finished.
        let mut open: Vec<u64> = Vec::new();
        for e in &events {
            match &e.event {
                ksmith_search::Event::NodeStarted { node, .. } => open.push(node.0),
                ksmith_search::Event::NodeFinished { node } => open.retain(|n| *n != node.id.0),
                _ => {}
            }
        }
        let current = if running {
            let node = open.last().copied();
            let call = match node {
                Some(n) => store
                    .node_calls(run, n)
                    .map_err(Failure::server)?
                    .last()
                    .map(|(_, c)| CallView::of(c)),
                None => None,
            };
            let call = match call {
                Some(c) => Some(c),
                None => store
                    .calls(run)
                    .map_err(Failure::server)?
                    .last()
                    .map(CallView::of),
            };
            Some(Current { node, call })
        } else {
            None
        };
        let review = if running {
            review::pending(&app.ctx.store_dir, run).map_err(Failure::server)?
        } else {
            None
        };
        let best = d
            .nodes
            .iter()
            .filter(|n| matches!(n.tone, data::Tone::Passed | data::Tone::Best))
            .filter_map(|n| n.speedup.map(|s| (n.label.clone(), s)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let winner = d.winner.as_ref().map(|w| WinnerView {
            label: d.nodes[w.node].label.clone(),
            speedup: d.nodes[w.node].speedup,
            files: w
                .files
                .iter()
                .map(|f| (f.name.clone(), cap(&f.text, TEXT_CAP)))
                .collect(),
            decided: d.finals.is_some(),
        });
        Ok(Some(RunState {
            run: row.id.clone(),
            task: row.task.clone(),
            model: row.model.clone(),
            mode: row.mode.clone(),
            kind: match d.kind {
                data::RunKind::Serial => "serial",
                data::RunKind::Search => "search",
            }
            .into(),
            status,
            stop_reason: row.stop_reason.clone(),
            running,
            calls: d.calls,
            tokens: d.tokens,
            cost: d.cost,
            evaluations: d.evaluations,
            nodes: tree_order(&d),
            progress: d
                .progress
                .iter()
                .map(|p| Point {
                    wall_s: p.wall_s,
                    best: p.best,
                })
                .collect(),
            best,
            current,
            stage,
            review,
            finals: d.finals.clone(),
            winner,
            events: events.len() as u64,
            warnings: d.warnings.clone(),
        }))
    }
}
