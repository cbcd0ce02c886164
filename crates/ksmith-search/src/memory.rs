//! Cross-run memory: what made kernels faster before, shown to later planners.
//!
//! [`harvest`] turns a finished run into entries, one per measured improvement: in a serial
//! agent run, a snapshot that became the new best against the previous best; in a search run,
//! a judged child faster than its judged parent. An entry keeps the task's operator class, the
//! device, the hint or plan headline, the measured gain and a few changed lines (never a whole
//! kernel: [`MAX_EXCERPT_LINES`]). [`for_task`] ranks entries for a task and device and never
//! returns one harvested from the same task; [`record_exposure`] and [`record_outcome`] count
//! how often showing entries was followed by an improvement (their win rate).

use crate::hint::Hint;
use crate::node::{Node, NodeId, NodeState};
use ksmith_store::{MemoryRow, SnapshotRow, Store, StoreError};
use ksmith_task::{OpClass, Task};
use serde::Serialize;
use std::collections::BTreeMap;

/// Most diff lines an entry's excerpt keeps (a hint of the change, never the kernel).
pub const MAX_EXCERPT_LINES: usize = 12;
/// Longest excerpt line kept, in characters.
const MAX_LINE_CHARS: usize = 160;

/// Memory errors.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such run in the store.
    #[error("run {0}: no such run in the store (see `ksmith runs`)")]
    NoRun(String),
    /// A stored row could not be read.
    #[error("run {run}: {what}: {message}")]
    Corrupt {
        /// Run id.
        run: String,
        /// Which row.
        what: String,
        /// The decoder's message.
        message: String,
    },
}

/// Where in its run an improvement was measured, or an entry was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "n", rename_all = "snake_case")]
pub enum Step {
    /// An iteration of the serial agent loop.
    Iteration(u32),
    /// A node of a graph search.
    Node(NodeId),
}

impl Step {
    /// The stored spelling: `iteration:N` or `node:N`.
    pub fn key(self) -> String {
        match self {
            Step::Iteration(i) => format!("iteration:{i}"),
            Step::Node(n) => format!("node:{}", n.0),
        }
    }

    /// The step a stored spelling names.
    pub fn parse(s: &str) -> Option<Step> {
        let (kind, n) = s.split_once(':')?;
        match kind {
            "iteration" => n.parse().ok().map(Step::Iteration),
            "node" => n.parse().ok().map(|n| Step::Node(NodeId(n))),
            _ => None,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Iteration(i) => write!(f, "iteration {i}"),
            Step::Node(n) => write!(f, "node {n}"),
        }
    }
}

/// What memory needs to know of the task at hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// Task name.
    pub name: String,
    /// Hash of its frozen tests (task definition + reference).
    pub tests_hash: String,
    /// Its operator class.
    pub op_class: OpClass,
}

impl TaskInfo {
    /// The memory view of a loaded task.
    pub fn of(task: &Task) -> TaskInfo {
        TaskInfo {
            name: task.name.clone(),
            tests_hash: task.content_hash.clone(),
            op_class: task.op_class,
        }
    }
}

/// A measured speed ratio, child over parent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gain {
    /// The ratio (> 1 is faster).
    pub ratio: f64,
    /// Its 95% interval, when the two were timed together.
    pub interval: Option<(f64, f64)>,
}

impl std::fmt::Display for Gain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2}x", self.ratio)?;
        if let Some((lo, hi)) = self.interval {
            write!(f, " ({lo:.2}-{hi:.2})")?;
        }
        Ok(())
    }
}

/// One remembered improvement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryEntry {
    /// Entry id.
    pub id: i64,
    /// When it was harvested (UTC).
    pub created_at: String,
    /// The run it came from.
    pub run: String,
    /// Its step there.
    pub step: Step,
    /// The task it came from.
    pub task: String,
    /// That task's tests hash.
    pub tests_hash: String,
    /// That task's operator class.
    pub op_class: OpClass,
    /// Environment fingerprint of its evaluation.
    pub fingerprint: String,
    /// The device in words.
    pub device: String,
    /// The hint its node pursued (search runs).
    pub hint: Option<Hint>,
    /// The plan's headline.
    pub headline: String,
    /// The measured gain over its parent.
    pub gain: Gain,
    /// A few changed lines (`-` before, `+` after).
    pub excerpt: String,
    /// Times shown to a planner.
    pub shown: u64,
    /// Times the step it was shown to then improved.
    pub wins: u64,
}

impl MemoryEntry {
    /// The win rate with a Beta(1,1) prior: (wins + 1) / (shown + 2), 0.5 when never shown.
    pub fn win_rate(&self) -> f64 {
        (self.wins as f64 + 1.0) / (self.shown as f64 + 2.0)
    }

    /// What the planner template renders (`memory` entries of planner.md).
    pub fn prompt_view(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "op_class": self.op_class.as_str(),
            "task": self.task,
            "hint": self.hint.map(|h| h.as_str()),
            "headline": self.headline,
            "gain": self.gain.to_string(),
            "device": self.device,
            "shown": self.shown,
            "wins": self.wins,
            "excerpt": self.excerpt,
        })
    }

    fn from_row(r: MemoryRow) -> Option<MemoryEntry> {
        Some(MemoryEntry {
            id: r.id,
            created_at: r.created_at,
            run: r.source_run,
            step: Step::parse(&r.source_step)?,
            task: r.task,
            tests_hash: r.tests_hash,
            // A class this version does not know still ranks, as `other`.
            op_class: OpClass::from_name(&r.op_class).unwrap_or(OpClass::Other),
            fingerprint: r.fingerprint,
            device: r.device,
            hint: r.hint.as_deref().and_then(Hint::from_name),
            headline: r.headline,
            gain: Gain {
                ratio: r.gain,
                interval: r.gain_interval,
            },
            excerpt: r.excerpt,
            shown: r.shown,
            wins: r.wins,
        })
    }
}

/// Every stored entry, oldest first.
pub fn entries(store: &Store) -> Result<Vec<MemoryEntry>, MemoryError> {
    Ok(store
        .memory_entries()?
        .into_iter()
        .filter_map(MemoryEntry::from_row)
        .collect())
}

/// One entry by id.
pub fn entry(store: &Store, id: i64) -> Result<Option<MemoryEntry>, MemoryError> {
    Ok(store.memory_entry(id)?.and_then(MemoryEntry::from_row))
}

/// Whether an entry came from the task at hand: same name or same tests (either is enough, so
/// neither a new version of the task nor a renamed copy of its tests sees its own kernels).
pub fn same_task(e: &MemoryEntry, task: &TaskInfo) -> bool {
    e.task == task.name || e.tests_hash == task.tests_hash
}

/// The `n` most relevant entries for a task on a device, best first: same operator class, then
/// same device fingerprint, then win rate (Beta(1,1) prior), then gain. Entries from the task
/// itself are never returned.
pub fn for_task(
    store: &Store,
    task: &TaskInfo,
    fingerprint: &str,
    n: usize,
) -> Result<Vec<MemoryEntry>, MemoryError> {
    let mut all: Vec<MemoryEntry> = entries(store)?
        .into_iter()
        .filter(|e| !same_task(e, task))
        .collect();
    rank(&mut all, task, fingerprint);
    all.truncate(n);
    Ok(all)
}

/// Sorts entries by relevance to a task and device (see [`for_task`]).
pub fn rank(entries: &mut [MemoryEntry], task: &TaskInfo, fingerprint: &str) {
    let key = |e: &MemoryEntry| {
        (
            e.op_class == task.op_class,
            e.fingerprint == fingerprint,
            e.win_rate(),
            e.gain.ratio,
        )
    };
    entries.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.cmp(&ka.0)
            .then(kb.1.cmp(&ka.1))
            .then(kb.2.total_cmp(&ka.2))
            .then(kb.3.total_cmp(&ka.3))
            .then(a.id.cmp(&b.id))
    });
}

/// The entries a planner of `step` in `run` is shown (best first, as template values), with
/// the exposure recorded so win rates are measured. A failure to read gives none; a failure to
/// record the exposure is returned beside the entries (memory is advice, never fatal).
pub fn for_planner(
    store: &mut Store,
    task: &Task,
    fingerprint: &str,
    run: &str,
    step: Step,
) -> (Vec<serde_json::Value>, Option<MemoryError>) {
    let Ok(entries) = for_task(store, &TaskInfo::of(task), fingerprint, 3) else {
        return (Vec::new(), None);
    };
    let ids: Vec<i64> = entries.iter().map(|e| e.id).collect();
    let err = if ids.is_empty() {
        None
    } else {
        record_exposure(store, run, step, &ids).err()
    };
    (entries.iter().map(|e| e.prompt_view()).collect(), err)
}

/// Records that `entries` were shown to the planner of `step` in `run`.
pub fn record_exposure(
    store: &mut Store,
    run: &str,
    step: Step,
    entries: &[i64],
) -> Result<(), MemoryError> {
    Ok(store.memory_record_exposure(run, &step.key(), entries)?)
}

/// Records how `step` of `run` ended: when it improved, the entries shown to it score a win.
/// Returns how many exposures won. ([`harvest`] does the same for every improvement it finds.)
pub fn record_outcome(
    store: &Store,
    run: &str,
    step: Step,
    improved: bool,
) -> Result<usize, MemoryError> {
    if !improved {
        return Ok(0);
    }
    Ok(store.memory_mark_won(run, &step.key())?)
}

/// What harvesting a run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Harvest {
    /// Improvements found in the run.
    pub improvements: usize,
    /// Entries added now (an entry already stored or pruned is not added again).
    pub added: Vec<MemoryEntry>,
    /// Exposures in the run that scored a win.
    pub wins: usize,
    /// Improvements left out: (step, why).
    pub skipped: Vec<(Step, String)>,
}

/// One improvement before it is stored.
struct Improvement {
    step: Step,
    eval_id: Option<i64>,
    hint: Option<Hint>,
    headline: String,
    gain: Gain,
    before: BTreeMap<String, String>,
    after: BTreeMap<String, String>,
}

/// Turns a finished run (serial agent run or graph search) into memory entries, and scores the
/// wins of entries shown during it. Idempotent: harvesting twice adds nothing.
pub fn harvest(store: &Store, run: &str) -> Result<Harvest, MemoryError> {
    let row = store
        .run(run)?
        .ok_or_else(|| MemoryError::NoRun(run.to_string()))?;
    let nodes = store.search_nodes(run)?;
    let found = if nodes.is_empty() {
        serial_improvements(store, run)?
    } else {
        search_improvements(store, run, &nodes)?
    };
    let mut out = Harvest {
        improvements: found.len(),
        ..Harvest::default()
    };
    for imp in found {
        out.wins += store.memory_mark_won(run, &imp.step.key())?;
        let Some(eval_id) = imp.eval_id else {
            out.skipped
                .push((imp.step, "no stored evaluation (simulated)".into()));
            continue;
        };
        let Some(ev) = store.get(eval_id)? else {
            out.skipped.push((
                imp.step,
                format!("evaluation {eval_id} is not in the store"),
            ));
            continue;
        };
        let op_class = ev
            .task
            .get("op_class")
            .and_then(|v| v.as_str())
            .and_then(OpClass::from_name)
            .unwrap_or(OpClass::Other);
        let mem = MemoryRow {
            id: 0,
            created_at: String::new(),
            source_run: run.to_string(),
            source_step: imp.step.key(),
            task: row.task.clone(),
            tests_hash: row.tests_hash.clone(),
            op_class: op_class.as_str().to_string(),
            fingerprint: ev.result.environment.fingerprint.clone(),
            device: ev.result.environment.cpu.clone(),
            hint: imp.hint.map(|h| h.as_str().to_string()),
            headline: imp.headline.clone(),
            gain: imp.gain.ratio,
            gain_interval: imp.gain.interval,
            excerpt: excerpt_files(&imp.before, &imp.after, MAX_EXCERPT_LINES),
            shown: 0,
            wins: 0,
        };
        if let Some(id) = store.memory_insert(&mem)? {
            if let Some(e) = entry(store, id)? {
                out.added.push(e);
            }
        }
    }
    Ok(out)
}

/// The hook a run's finish calls: harvests it, and says in one line what was added.
pub fn harvest_on_finish(store: &Store, run: &str) -> Result<String, MemoryError> {
    let h = harvest(store, run)?;
    Ok(format!(
        "memory: {} improvement(s) in run {run}, {} new entr{}",
        h.improvements,
        h.added.len(),
        if h.added.len() == 1 { "y" } else { "ies" }
    ))
}

/// A snapshot's files: name → source, read from the store's artifacts.
fn snapshot_files(
    store: &Store,
    run: &str,
    s: &SnapshotRow,
) -> Result<BTreeMap<String, String>, MemoryError> {
    let corrupt = |m: String| MemoryError::Corrupt {
        run: run.to_string(),
        what: format!("snapshot {}", s.iteration),
        message: m,
    };
    let v: serde_json::Value =
        serde_json::from_str(&s.sources).map_err(|e| corrupt(e.to_string()))?;
    let mut out = BTreeMap::new();
    if let Some(files) = v.get("files").and_then(|f| f.as_object()) {
        for (name, hash) in files {
            let Some(hash) = hash.as_str() else {
                return Err(corrupt(format!("file {name}: hash is not a string")));
            };
            let bytes = store.artifact(hash)?;
            out.insert(name.clone(), String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    Ok(out)
}

/// A serial run's improvements, decided as the loop decided them: a passed candidate becomes
/// the best when its side-by-side figure against the best (the journaled `head_to_head`) is
/// above 1, or, when the two were not timed together, when its own speedup is higher.
fn serial_improvements(store: &Store, run: &str) -> Result<Vec<Improvement>, MemoryError> {
    let snaps = store.snapshots(run)?;
    // One head-to-head per passed candidate judged while a best existed, in iteration order.
    let mut versus = store
        .events(run)?
        .into_iter()
        .filter(|(_, k, _)| k == "head_to_head")
        .map(|(_, _, p)| {
            serde_json::from_str::<serde_json::Value>(&p)
                .ok()
                .and_then(|v| {
                    let a = v.get("versus")?.as_array()?;
                    Some((
                        a.first()?.as_f64()?,
                        a.get(1)?.as_f64()?,
                        a.get(2)?.as_f64()?,
                    ))
                })
        });
    let passed = |s: &SnapshotRow| s.status == "PASSED" && s.speedup.is_some();
    let mut best: Option<&SnapshotRow> = None;
    let mut out = Vec::new();
    for s in &snaps {
        if !passed(s) {
            continue;
        }
        let Some(b) = best else {
            best = Some(s);
            continue;
        };
        let (x, bx) = (s.speedup.unwrap_or(0.0), b.speedup.unwrap_or(0.0));
        let (improved, gain) = match versus.next().flatten() {
            Some((v, lo, hi)) => (
                v > 1.0,
                Gain {
                    ratio: v,
                    interval: Some((lo, hi)),
                },
            ),
            None => (
                x > bx,
                Gain {
                    ratio: if bx > 0.0 { x / bx } else { 0.0 },
                    interval: None,
                },
            ),
        };
        if improved {
            out.push(Improvement {
                step: Step::Iteration(s.iteration),
                eval_id: s.eval_id,
                hint: None,
                headline: s.summary.clone(),
                gain,
                before: snapshot_files(store, run, b)?,
                after: snapshot_files(store, run, s)?,
            });
            best = Some(s);
        }
    }
    Ok(out)
}

/// A search run's improvements: a judged child faster than its judged parent.
fn search_improvements(
    store: &Store,
    run: &str,
    records: &[ksmith_store::NodeRecord],
) -> Result<Vec<Improvement>, MemoryError> {
    let mut nodes = BTreeMap::new();
    for r in records {
        let n: Node = serde_json::from_str(&r.payload).map_err(|e| MemoryError::Corrupt {
            run: run.to_string(),
            what: format!("node {}", r.id),
            message: e.to_string(),
        })?;
        nodes.insert(n.id, n);
    }
    let source = |n: &Node| -> Result<Option<String>, MemoryError> {
        match &n.code_hash {
            Some(h) => Ok(Some(
                String::from_utf8_lossy(&store.artifact(h)?).into_owned(),
            )),
            None => Ok(None),
        }
    };
    let mut out = Vec::new();
    for child in nodes.values() {
        let Some(parent) = child.parent.and_then(|p| nodes.get(&p)) else {
            continue;
        };
        let judged = |n: &Node| n.state == NodeState::Done && n.outcome.passed();
        if !judged(child) || !judged(parent) {
            continue;
        }
        let (x, px) = (
            child.outcome.speedup.unwrap_or(0.0),
            parent.outcome.speedup.unwrap_or(0.0),
        );
        // Remembered only when decided faster than its parent: by their timing side by side
        // in the same rounds when the node has one, else by the decision rule on the two
        // separate intervals. A gain inside the noise taught later planners nothing.
        let decided = match child.outcome.vs_parent {
            Some(paired) => paired,
            None => {
                if px <= 0.0 || x <= px {
                    continue;
                }
                let figures = |n: &Node, s: f64| (s, n.outcome.interval.unwrap_or((s, s)));
                ksmith_judge::decide::decide(ksmith_judge::decide::Evidence::separate(
                    figures(child, x),
                    figures(parent, px),
                    false,
                ))
            }
        };
        if !decided.adopt() {
            continue;
        }
        let (Some(before), Some(after)) = (source(parent)?, source(child)?) else {
            continue;
        };
        out.push(Improvement {
            step: Step::Node(child.id),
            eval_id: child.outcome.eval_id,
            hint: Some(child.hint),
            headline: cut(&crate::node::plan_title(&child.plan), 120),
            gain: Gain {
                ratio: decided.evidence().map_or(x / px, |e| e.speedup),
                // An interval only for a ratio timed together ("timed together" is shown).
                interval: child
                    .outcome
                    .vs_parent
                    .and_then(|d| d.evidence())
                    .map(|e| (e.low, e.high)),
            },
            before: BTreeMap::from([("kernel".to_string(), before)]),
            after: BTreeMap::from([("kernel".to_string(), after)]),
        });
    }
    Ok(out)
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// The changed lines between two sets of files, `-`/`+` prefixed, at most `max_lines` lines.
pub fn excerpt_files(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    max_lines: usize,
) -> String {
    let mut lines = Vec::new();
    for (name, new) in after {
        let old = before.get(name).map(String::as_str).unwrap_or("");
        if after.len() > 1 {
            lines.push(format!("@@ {name}"));
        }
        lines.extend(changed_lines(old, new));
    }
    cap(lines, max_lines)
}

/// The changed lines between two sources, `-`/`+` prefixed, at most `max_lines` lines.
pub fn excerpt(before: &str, after: &str, max_lines: usize) -> String {
    cap(changed_lines(before, after), max_lines)
}

fn changed_lines(before: &str, after: &str) -> Vec<String> {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(before, after);
    diff.iter_all_changes()
        .filter_map(|c| {
            let sign = match c.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => return None,
            };
            let text = c.value().trim_end();
            // Blank changed lines say nothing about the change.
            (!text.trim().is_empty()).then(|| format!("{sign} {}", cut(text, MAX_LINE_CHARS)))
        })
        .collect()
}

fn cap(mut lines: Vec<String>, max_lines: usize) -> String {
    if lines.len() > max_lines {
        let more = lines.len() - max_lines + 1;
        lines.truncate(max_lines.saturating_sub(1));
        lines.push(format!("… ({more} more changed lines)"));
    }
    lines.join("\n")
}

/// Which entries a prune removes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PruneRule {
    /// Entries harvested more than this many days ago.
    pub older_than_days: Option<f64>,
    /// Entries shown at least `min_shown` times whose win rate (Beta(1,1) prior) is below
    /// `rate`.
    pub min_win_rate: Option<WinRateFloor>,
}

/// A win-rate floor that applies once an entry was shown enough times to judge it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WinRateFloor {
    /// The lowest win rate kept.
    pub rate: f64,
    /// Shown fewer times than this, an entry is kept whatever its rate.
    pub min_shown: u64,
}

/// Removes the entries `rule` selects (none when `dry_run`); returns them.
pub fn prune(
    store: &mut Store,
    rule: &PruneRule,
    dry_run: bool,
) -> Result<Vec<MemoryEntry>, MemoryError> {
    let old: Vec<i64> = match rule.older_than_days {
        Some(d) => store.memory_older_than(d)?,
        None => Vec::new(),
    };
    let chosen: Vec<MemoryEntry> = entries(store)?
        .into_iter()
        .filter(|e| {
            old.contains(&e.id)
                || rule
                    .min_win_rate
                    .is_some_and(|f| e.shown >= f.min_shown && e.win_rate() < f.rate)
        })
        .collect();
    if !dry_run {
        let ids: Vec<i64> = chosen.iter().map(|e| e.id).collect();
        store.memory_delete(&ids)?;
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests;
