//! What a report shows, read from the store: one model for both kinds of runs (a serial agent
//! run's snapshots and a graph search's nodes), so the page and the summary have one source.

use ksmith_search::{Node, NodeState};
use ksmith_store::{RunRow, Store, StoreError};
use std::collections::BTreeMap;

/// Which kind of run the report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// The serial agent loop: one snapshot per iteration, a chain.
    Serial,
    /// A graph search: nodes with parents (`search_nodes`).
    Search,
}

impl RunKind {
    /// How the page and the summary name it.
    pub fn describe(self) -> &'static str {
        match self {
            RunKind::Serial => "serial agent run",
            RunKind::Search => "graph search",
        }
    }
}

/// How a node is coloured: what its outcome means for the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// The winner.
    Best,
    /// Judged correct and timed.
    Passed,
    /// Judged and refused (compile error, wrong results, policy...).
    Failed,
    /// Not judged: no candidate, a duplicate, a session failure.
    Skipped,
    /// Not finished (pending or expanding).
    Open,
}

impl Tone {
    /// CSS class and legend key.
    pub fn class(self) -> &'static str {
        match self {
            Tone::Best => "best",
            Tone::Passed => "passed",
            Tone::Failed => "failed",
            Tone::Skipped => "skipped",
            Tone::Open => "open",
        }
    }

    /// Fill colour in the tree.
    pub fn fill(self) -> &'static str {
        match self {
            Tone::Best => "#1b7f3b",
            Tone::Passed => "#7cc48f",
            Tone::Failed => "#e07a6f",
            Tone::Skipped => "#b9b9b9",
            Tone::Open => "#8fb3e0",
        }
    }
}

/// One node of the tree (a serial run's iteration is a node whose parent is the one before).
#[derive(Debug, Clone)]
pub struct ReportNode {
    /// Node id (serial: the iteration).
    pub id: u64,
    /// Parent id.
    pub parent: Option<u64>,
    /// `n3` for a search node, `iteration 2` for a serial one.
    pub label: String,
    /// Status text (the judge's status, or the node state when nothing was judged).
    pub status: String,
    /// Colour class.
    pub tone: Tone,
    /// The hint pursued (search) or the iteration's one-line summary (serial); untrusted.
    pub hint: String,
    /// The plan (search nodes); untrusted.
    pub plan: String,
    /// Speedup when passed and timed.
    pub speedup: Option<f64>,
    /// Seconds from the run's start to the node's end, when the store says.
    pub at_s: Option<f64>,
    /// LLM calls spent on it.
    pub calls: u64,
    /// Tokens spent on it.
    pub tokens: u64,
    /// Evaluations it ran.
    pub evaluations: u64,
    /// Its evaluation.
    pub eval_id: Option<i64>,
    /// Its sources: (file name, artifact hash).
    pub sources: Vec<(String, String)>,
}

/// One point of the best-so-far curves (after a node ends).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressPoint {
    /// Seconds since the run started.
    pub wall_s: f64,
    /// Evaluations so far.
    pub evaluations: f64,
    /// Tokens so far.
    pub tokens: f64,
    /// Best speedup so far.
    pub best: f64,
}

/// LLM spend of one agent role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleCost {
    /// Role name.
    pub role: String,
    /// Calls.
    pub calls: u64,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Reply tokens.
    pub tokens_out: u64,
    /// USD.
    pub cost: f64,
}

/// One workload of the winner's evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadRow {
    /// Workload index.
    pub index: usize,
    /// Axis values, `M=64 N=1024`.
    pub axes: String,
    /// Speedup on it.
    pub speedup: f64,
    /// Candidate median (ms).
    pub median_ms: f64,
    /// Achieved GFLOP/s.
    pub gflops: f64,
    /// Achieved GB/s.
    pub gbps: f64,
    /// Fraction of the machine's roofline.
    pub roofline: f64,
    /// Set when the kernel beat its floor: the fraction first seen and what the judge made
    /// of it.
    pub beyond: Option<(f64, String)>,
}

/// One source file of the winner with its start.
#[derive(Debug, Clone, PartialEq)]
pub struct WinnerFile {
    /// File name.
    pub name: String,
    /// The starting text (empty when the run started from nothing).
    pub start: String,
    /// The winner's text.
    pub text: String,
}

/// The best passed node and what the page shows of it.
#[derive(Debug, Clone)]
pub struct Winner {
    /// Index into [`ReportData::nodes`].
    pub node: usize,
    /// Where the diff starts from (`iteration 0`, `n0`, or nothing).
    pub start_label: String,
    /// Its files.
    pub files: Vec<WinnerFile>,
    /// Per-workload performance (empty when its evaluation is not in the store).
    pub workloads: Vec<WorkloadRow>,
    /// Roofline fraction over workloads (geometric mean), when known.
    pub roofline: Option<f64>,
}

/// Everything a report shows.
#[derive(Debug, Clone)]
pub struct ReportData {
    /// The run row.
    pub run: RunRow,
    /// Serial or search.
    pub kind: RunKind,
    /// Nodes in the order they ended.
    pub nodes: Vec<ReportNode>,
    /// Best-so-far after each node that improved or ended.
    pub progress: Vec<ProgressPoint>,
    /// Spend per role, most expensive first (from the call log).
    pub roles: Vec<RoleCost>,
    /// Total calls.
    pub calls: u64,
    /// Total tokens.
    pub tokens: u64,
    /// Total USD.
    pub cost: f64,
    /// Evaluations run.
    pub evaluations: u64,
    /// Wall seconds the run was active.
    pub wall_s: f64,
    /// The winner: the one the final judgement chose and the run wrote; without a recorded
    /// judgement (a run still going, or stopped before its end), the fastest passed node.
    pub winner: Option<Winner>,
    /// The final judgement (finalists re-checked and re-timed together), when recorded.
    pub finals: Option<ksmith_search::finalize::FinalRecord>,
    /// Things the report could not read (shown, not fatal).
    pub warnings: Vec<String>,
}

/// Seconds since the Unix epoch of a stored UTC time (`2026-01-02T03:04:05Z`, fraction
/// optional).
pub fn parse_utc(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let h: i64 = t.next()?.parse().ok()?;
    let min: i64 = t.next()?.parse().ok()?;
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from civil (proleptic Gregorian), shifted so the year starts in March.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No run with that id in the store.
    #[error("no run `{0}` in this store (`ksmith runs` lists them)")]
    UnknownRun(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads a run from the store.
pub fn load(store: &Store, id: &str) -> Result<ReportData, LoadError> {
    let run = store
        .run(id)?
        .ok_or_else(|| LoadError::UnknownRun(id.to_string()))?;
    let start = parse_utc(&run.created_at);
    let calls = store.calls(id)?;
    let records = store.search_nodes(id)?;
    let mut warnings = Vec::new();
    let (kind, mut nodes) = if records.is_empty() {
        (RunKind::Serial, serial_nodes(store, id, start, &calls)?)
    } else {
        let mut nodes = Vec::with_capacity(records.len());
        for r in &records {
            let at = parse_utc(&r.created_at).zip(start).map(|(t, s)| t - s);
            match serde_json::from_str::<Node>(&r.payload) {
                Ok(n) => nodes.push(search_node(store, &n, at, &mut warnings)),
                Err(e) => {
                    // A payload from another engine version: keep the columns, say so.
                    warnings.push(format!("node {}: payload not readable ({e})", r.id));
                    nodes.push(ReportNode {
                        id: r.id,
                        parent: r.parent,
                        label: format!("n{}", r.id),
                        status: r.state.clone(),
                        tone: if r.speedup.is_some() {
                            Tone::Passed
                        } else {
                            Tone::Skipped
                        },
                        hint: String::new(),
                        plan: String::new(),
                        speedup: r.speedup,
                        at_s: at,
                        calls: 0,
                        tokens: 0,
                        evaluations: 0,
                        eval_id: None,
                        sources: Vec::new(),
                    });
                }
            }
        }
        // The order nodes ended in (parallel expansions finish out of id order).
        nodes.sort_by(|a, b| {
            a.at_s
                .unwrap_or(f64::MAX)
                .total_cmp(&b.at_s.unwrap_or(f64::MAX))
                .then(a.id.cmp(&b.id))
        });
        (RunKind::Search, nodes)
    };

    // The winner the search's finalizer chose (re-checked and re-timed together), when it
    // recorded one; else the fastest by first measurement.
    let finals = ksmith_search::finalize::recorded_final(store, id);
    let winner_ix = match &finals {
        // The final judgement decided: its winner, or none.
        Some(f) => f.node.and_then(|w| nodes.iter().position(|n| n.id == w)),
        None => None,
    }
    .or_else(|| {
        finals.is_none().then_some(())?;
        nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.speedup.map(|s| (i, s)))
            .filter(|(i, _)| nodes[*i].tone == Tone::Passed)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    });
    if let Some(i) = winner_ix {
        nodes[i].tone = Tone::Best;
    }
    let progress = progress(&nodes);
    let roles = roles(&calls);
    let (mut n_calls, mut tokens, mut cost) = (
        calls.len() as u64,
        calls
            .iter()
            .map(|c| c.tokens_in + c.tokens_out)
            .sum::<u64>(),
        calls.iter().map(|c| c.cost).sum::<f64>(),
    );
    if calls.is_empty() {
        // A search whose engine keeps spend on its nodes only.
        n_calls = nodes.iter().map(|n| n.calls).sum();
        tokens = nodes.iter().map(|n| n.tokens).sum();
        cost = 0.0;
    }
    let evaluations = nodes.iter().map(|n| n.evaluations).sum();
    let last_at = nodes.iter().filter_map(|n| n.at_s).fold(0.0, f64::max);
    let wall_s = if run.active_s > 0.0 {
        run.active_s
    } else {
        last_at
    };
    let winner = winner_ix.map(|i| winner(store, kind, &nodes, i, &mut warnings));
    Ok(ReportData {
        run,
        kind,
        nodes,
        progress,
        roles,
        calls: n_calls,
        tokens,
        cost,
        evaluations,
        wall_s,
        winner,
        finals,
        warnings,
    })
}

fn passed(status: &str) -> bool {
    status.eq_ignore_ascii_case("passed")
}

/// The iteration a call belongs to, from its step (`iteration 2 implement`).
fn call_iteration(step: &str) -> Option<u64> {
    step.strip_prefix("iteration ")?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn serial_nodes(
    store: &Store,
    id: &str,
    start: Option<f64>,
    calls: &[ksmith_store::CallRow],
) -> Result<Vec<ReportNode>, StoreError> {
    let snaps = store.snapshots(id)?;
    let mut per_iter: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut last_call: BTreeMap<u64, f64> = BTreeMap::new();
    for c in calls {
        // Calls outside an iteration (a final summary) count toward the last one.
        let it = call_iteration(&c.step)
            .or_else(|| snaps.last().map(|s| s.iteration as u64))
            .unwrap_or(0);
        let e = per_iter.entry(it).or_default();
        e.0 += 1;
        e.1 += c.tokens_in + c.tokens_out;
        if let Some(t) = parse_utc(&c.created_at) {
            last_call.insert(it, t);
        }
    }
    let mut prev: Option<u64> = None;
    let mut out = Vec::with_capacity(snaps.len());
    for s in snaps {
        let it = s.iteration as u64;
        let ok = passed(&s.status) && s.speedup.is_some();
        let (calls, tokens) = per_iter.get(&it).copied().unwrap_or_default();
        let sources = snapshot_sources(&s.sources);
        // When the iteration ended: its evaluation's record (a reused one predates the run:
        // clamped to the start), else its last call.
        let ended = s
            .eval_id
            .and_then(|e| store.get(e).ok().flatten())
            .and_then(|ev| parse_utc(&ev.created_at))
            .or_else(|| last_call.get(&it).copied());
        let at = ended.zip(start).map(|(t, s)| (t - s).max(0.0));
        out.push(ReportNode {
            id: it,
            parent: prev,
            label: format!("iteration {it}"),
            status: s.status.clone(),
            tone: if ok {
                Tone::Passed
            } else if s.eval_id.is_some() {
                Tone::Failed
            } else {
                Tone::Skipped
            },
            hint: s.summary.clone(),
            plan: String::new(),
            speedup: if ok { s.speedup } else { None },
            at_s: at,
            calls,
            tokens,
            evaluations: u64::from(s.eval_id.is_some()),
            eval_id: s.eval_id,
            sources,
        });
        prev = Some(it);
    }
    Ok(out)
}

/// A snapshot's files: `{"files": {name: hash}, "flags": [...]}` (or a bare `{name: hash}`).
fn snapshot_sources(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let files = v.get("files").unwrap_or(&v);
    files
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, h)| Some((k.clone(), h.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn search_node(store: &Store, n: &Node, at: Option<f64>, warnings: &mut Vec<String>) -> ReportNode {
    let judged = n.outcome.status;
    let tone = match n.state {
        NodeState::Pending | NodeState::Expanding => Tone::Open,
        NodeState::NoCandidate | NodeState::Duplicate | NodeState::Failed => Tone::Skipped,
        NodeState::Done if n.outcome.passed() => Tone::Passed,
        NodeState::Done => Tone::Failed,
    };
    let status = match (n.state, judged) {
        (NodeState::Done, Some(s)) => s.as_str().to_string(),
        (NodeState::Duplicate, _) => match n.duplicate_of {
            Some(d) => format!("duplicate of {d}"),
            None => "duplicate".to_string(),
        },
        (s, _) => s.as_str().to_string(),
    };
    // The evaluation names the files; without it the code hash is the one file.
    let mut sources = Vec::new();
    if let Some(e) = n.outcome.eval_id {
        match store.get(e) {
            Ok(Some(ev)) => sources = ev.sources,
            Ok(None) => warnings.push(format!("{}: evaluation {e} is not in the store", n.id)),
            Err(err) => warnings.push(format!("{}: evaluation {e}: {err}", n.id)),
        }
    }
    if sources.is_empty() {
        if let Some(h) = &n.code_hash {
            sources.push(("kernel".to_string(), h.clone()));
        }
    }
    ReportNode {
        id: n.id.0,
        parent: n.parent.map(|p| p.0),
        label: n.id.to_string(),
        status,
        tone,
        hint: n.hint.as_str().to_string(),
        plan: n.plan.clone(),
        speedup: if tone == Tone::Passed {
            n.outcome.speedup
        } else {
            None
        },
        at_s: at,
        calls: n.spend.calls,
        tokens: n.spend.tokens,
        evaluations: n.spend.evaluations,
        eval_id: n.outcome.eval_id,
        sources,
    }
}

/// Best speedup so far after each node, with the spend so far.
fn progress(nodes: &[ReportNode]) -> Vec<ProgressPoint> {
    let (mut evals, mut tokens, mut best) = (0u64, 0u64, None::<f64>);
    let mut wall = 0.0f64;
    let mut out = Vec::new();
    for n in nodes {
        evals += n.evaluations;
        tokens += n.tokens;
        wall = n.at_s.map_or(wall, |t| wall.max(t));
        if let Some(s) = n.speedup {
            best = Some(best.map_or(s, |b: f64| b.max(s)));
        }
        if let Some(b) = best {
            out.push(ProgressPoint {
                wall_s: wall,
                evaluations: evals as f64,
                tokens: tokens as f64,
                best: b,
            });
        }
    }
    out
}

fn roles(calls: &[ksmith_store::CallRow]) -> Vec<RoleCost> {
    let mut by: BTreeMap<&str, RoleCost> = BTreeMap::new();
    for c in calls {
        let r = by.entry(c.role.as_str()).or_insert_with(|| RoleCost {
            role: c.role.clone(),
            ..RoleCost::default()
        });
        r.calls += 1;
        r.tokens_in += c.tokens_in;
        r.tokens_out += c.tokens_out;
        r.cost += c.cost;
    }
    let mut v: Vec<RoleCost> = by.into_values().collect();
    v.sort_by(|a, b| {
        b.cost
            .total_cmp(&a.cost)
            .then((b.tokens_in + b.tokens_out).cmp(&(a.tokens_in + a.tokens_out)))
    });
    v
}

fn text_of(store: &Store, hash: &str, warnings: &mut Vec<String>) -> String {
    match store.artifact(hash) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            warnings.push(format!("artifact {hash}: {e}"));
            String::new()
        }
    }
}

fn winner(
    store: &Store,
    kind: RunKind,
    nodes: &[ReportNode],
    i: usize,
    warnings: &mut Vec<String>,
) -> Winner {
    let w = &nodes[i];
    // The start: a serial run's iteration 0; a search node's oldest ancestor with code.
    let start_ix = match kind {
        RunKind::Serial => nodes.iter().position(|n| n.id == 0),
        RunKind::Search => {
            let mut at = i;
            // A root with code is the `--from` start: a winner that is that root is the start.
            let mut root = (nodes[i].parent.is_none() && !nodes[i].sources.is_empty()).then_some(i);
            let mut hops = 0;
            while let Some(p) = nodes[at].parent {
                let Some(pi) = nodes.iter().position(|n| n.id == p) else {
                    break;
                };
                if !nodes[pi].sources.is_empty() {
                    root = Some(pi);
                }
                at = pi;
                hops += 1;
                if hops > nodes.len() {
                    warnings.push(format!("{}: its ancestry has a cycle", w.label));
                    break;
                }
            }
            root
        }
    };
    let is_start = start_ix == Some(i);
    let start_ix = start_ix.filter(|s| *s != i);
    let start_sources: BTreeMap<String, String> = start_ix
        .map(|s| nodes[s].sources.iter().cloned().collect())
        .unwrap_or_default();
    let single_start = (start_sources.len() == 1 && w.sources.len() == 1)
        .then(|| start_sources.values().next().cloned())
        .flatten();
    let files = w
        .sources
        .iter()
        .map(|(name, hash)| {
            // One file on each side is the same file even when the names differ.
            let start_hash = if is_start {
                Some(hash.clone())
            } else {
                start_sources.get(name).cloned().or(single_start.clone())
            };
            WinnerFile {
                name: name.clone(),
                start: start_hash
                    .map(|h| text_of(store, &h, warnings))
                    .unwrap_or_default(),
                text: text_of(store, hash, warnings),
            }
        })
        .collect();
    let mut workloads = Vec::new();
    let mut roofline = None;
    if let Some(e) = w.eval_id {
        match store.get(e) {
            Ok(Some(ev)) => {
                if let Some(p) = ev.result.performance {
                    roofline = Some(p.roofline_fraction);
                    workloads = p
                        .workloads
                        .iter()
                        .map(|wl| WorkloadRow {
                            index: wl.workload,
                            axes: wl
                                .axes
                                .iter()
                                .map(|(k, v)| format!("{k}={v}"))
                                .collect::<Vec<_>>()
                                .join(" "),
                            speedup: wl.speedup,
                            median_ms: wl.candidate.median_ms,
                            gflops: wl.gflops,
                            gbps: wl.gbps,
                            roofline: wl.roofline_fraction,
                            beyond: p
                                .beyond_roofline()
                                .find(|b| b.workload == wl.workload)
                                .and_then(|b| b.beyond_roofline.as_ref())
                                .map(|b| (b.fraction, b.outcome.describe().to_string())),
                        })
                        .collect();
                }
            }
            Ok(None) => warnings.push(format!("evaluation {e} is not in the store")),
            Err(err) => warnings.push(format!("evaluation {e}: {err}")),
        }
    }
    Winner {
        node: i,
        start_label: match start_ix {
            Some(s) => nodes[s].label.clone(),
            None if is_start => format!("{} (the winner is the start itself)", w.label),
            None => "nothing (the run started from the task alone)".to_string(),
        },
        files,
        workloads,
        roofline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_times_parse_to_epoch_seconds() {
        assert_eq!(parse_utc("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_utc("2000-03-01T00:00:01Z"), Some(951_868_801.0));
        let a = parse_utc("2026-12-02T11:34:35Z").unwrap();
        let b = parse_utc("2026-12-02T11:35:00.500Z").unwrap();
        assert!((b - a - 25.5).abs() < 1e-9);
        assert_eq!(parse_utc("yesterday"), None);
        assert_eq!(parse_utc("2026-13-02T11:34:35Z"), None);
    }

    #[test]
    fn snapshot_sources_are_read_in_both_shapes() {
        let want = vec![("kernel.c".to_string(), "ab".to_string())];
        assert_eq!(
            snapshot_sources(r#"{"files":{"kernel.c":"ab"},"flags":[]}"#),
            want
        );
        assert_eq!(snapshot_sources(r#"{"kernel.c":"ab"}"#), want);
        assert!(snapshot_sources("not json").is_empty());
    }

    fn node(id: u64, parent: Option<u64>, source: Option<&str>) -> ReportNode {
        ReportNode {
            id,
            parent,
            label: format!("n{id}"),
            status: "PASSED".into(),
            tone: Tone::Open,
            hint: String::new(),
            plan: String::new(),
            speedup: None,
            at_s: None,
            calls: 0,
            tokens: 0,
            evaluations: 0,
            eval_id: None,
            sources: source
                .map(|h| vec![("kernel.c".to_string(), h.to_string())])
                .unwrap_or_default(),
        }
    }

    #[test]
    fn a_search_winner_diffs_from_its_start_or_is_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = store.put_artifact(b"int a;\n").unwrap();
        let b = store.put_artifact(b"int b;\n").unwrap();
        let mut warnings = Vec::new();
        // Started `--from` code: n0 holds it.
        let from = [node(0, None, Some(&a)), node(1, Some(0), Some(&b))];
        let w = winner(&store, RunKind::Search, &from, 0, &mut warnings);
        assert_eq!(w.start_label, "n0 (the winner is the start itself)");
        assert_eq!(w.files[0].start, w.files[0].text);
        let w = winner(&store, RunKind::Search, &from, 1, &mut warnings);
        assert_eq!(w.start_label, "n0");
        assert_eq!(
            (w.files[0].start.as_str(), w.files[0].text.as_str()),
            ("int a;\n", "int b;\n")
        );
        // Started from the task alone: the root has no code, a generated winner is not a start.
        let bare = [node(0, None, None), node(1, Some(0), Some(&b))];
        let w = winner(&store, RunKind::Search, &bare, 1, &mut warnings);
        assert_eq!(
            w.start_label,
            "nothing (the run started from the task alone)"
        );
        assert!(w.files[0].start.is_empty());
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn calls_are_attributed_to_their_iteration() {
        assert_eq!(call_iteration("iteration 2 implement"), Some(2));
        assert_eq!(call_iteration("iteration 12 fix compile 1"), Some(12));
        assert_eq!(call_iteration("finish"), None);
    }
}
