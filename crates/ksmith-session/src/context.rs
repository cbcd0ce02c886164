//! What each role is told, as typed structs rendered into its template: every search node (in
//! every strategy) fills the same ones with the same builders, so a template variable has one
//! spelling. Also the few rules of the session itself: how fix attempts are counted, how a
//! failure is summarized for the next fix, what knowledge is searched for.

use crate::brief::timing_text;
use ksmith_judge::{EvalResult, Status};
use ksmith_task::{OpClass, Task};
use serde::Serialize;
use serde_json::Value;

/// Geometric mean of the per-workload median latencies of a passed evaluation (the one
/// definition; `ksmith_search::tune::latency_ms` is this).
pub fn latency_ms(r: &EvalResult) -> Option<f64> {
    r.performance
        .as_ref()
        .filter(|_| r.status == Status::Passed)
        .map(|p| p.candidate_ms())
}

/// Passages retrieved per prompt, and their total size.
const PASSAGES: usize = 3;
const PASSAGE_CHARS: usize = 3000;

/// A knowledge passage as templates show it.
#[derive(Debug, Clone, Serialize)]
pub struct Passage {
    /// File and heading it comes from.
    pub source: String,
    /// Its text.
    pub text: String,
}

/// Technique notes for `query`, only from files that apply to the candidate's language and the
/// task's operator class (advice: a failing index gives none).
pub fn passages(
    knowledge: &ksmith_knowledge::Knowledge,
    query: &str,
    language: &str,
    op_class: OpClass,
) -> Vec<Passage> {
    knowledge
        .retrieve_scoped(
            query,
            Some(language),
            Some(op_class.as_str()),
            PASSAGES,
            PASSAGE_CHARS,
        )
        .unwrap_or_default()
        .into_iter()
        .map(|p| Passage {
            source: p.source,
            text: p.text,
        })
        .collect()
}

/// What the planner's knowledge is searched for: the task, the direction being pursued and
/// what the last step showed (its outcome or profile).
pub fn plan_query(task: &Task, direction: &str, last: &str) -> String {
    format!(
        "{} {} {direction} {last}",
        task.name.replace('_', " "),
        task.description
    )
}

/// What the implementer's knowledge is searched for: the task and the plan's strategy.
pub fn implement_query(task: &Task, strategy: &str) -> String {
    format!("{} {strategy}", task.name.replace('_', " "))
}

/// The kernel a plan revises.
#[derive(Debug, Clone, Serialize)]
pub struct BestView {
    /// What it is to the planner: `The parent node, which this node revises`, `This node's best
    /// so far` (set by [`BestView::called`]; `Current best` until then).
    pub what: String,
    /// Where it came from (`node n3`).
    pub iteration: String,
    /// Its file.
    pub file: String,
    /// Its source.
    pub source: String,
    /// `1.52x`, or `not passing`.
    pub speedup: String,
    /// Its latency, or `-`.
    pub latency: String,
    /// Per-workload timing with intervals and the roofline ("" when not timed).
    pub timing: String,
    /// Far above XLA, XLA's noise dominates the ratio: the planner is told to compare
    /// latencies (kernels of one latency scored 20x-54x).
    pub far_ahead: bool,
}

impl BestView {
    /// A passing, timed kernel with its figures.
    pub fn passing(
        label: String,
        file: &str,
        source: &str,
        task: &Task,
        r: &EvalResult,
    ) -> BestView {
        let speedup = r
            .performance
            .as_ref()
            .filter(|_| r.status == Status::Passed)
            .map(|p| p.speedup);
        BestView {
            what: "Current best".into(),
            iteration: label,
            file: file.to_string(),
            source: source.to_string(),
            speedup: speedup.map_or("not passing".into(), |x| format!("{x:.2}x")),
            latency: latency_ms(r).map_or("-".into(), |ms| {
                format!("{ms:.3} ms geometric mean over workloads")
            }),
            timing: timing_text(task, r),
            far_ahead: speedup.is_some_and(|x| x > 10.0),
        }
    }

    /// The same kernel under another heading.
    pub fn called(mut self, what: &str) -> BestView {
        self.what = what.to_string();
        self
    }

    /// A kernel that does not pass (a run's start before anything passes).
    pub fn not_passing(label: String, file: &str, source: &str) -> BestView {
        BestView {
            what: "Current best".into(),
            iteration: label,
            file: file.to_string(),
            source: source.to_string(),
            speedup: "not passing".into(),
            latency: "-".into(),
            timing: String::new(),
            far_ahead: false,
        }
    }
}

/// What the last step showed.
#[derive(Debug, Clone, Serialize)]
pub struct LastView {
    /// Which step (`2`, `node n3`).
    pub iteration: String,
    /// `passed, 1.40x vs XLA`, or the failure.
    pub outcome: String,
    /// Its per-workload timing ("" when not timed).
    pub timing: String,
    /// The profile analyst's summary, and what tuning found ("" when none ran).
    pub profile: String,
}

/// The direction a search node pursues.
#[derive(Debug, Clone, Serialize)]
pub struct HintView {
    /// Its name.
    pub name: String,
    /// What it asks for.
    pub instruction: String,
}

/// Another good program shown to the planner.
#[derive(Debug, Clone, Serialize)]
pub struct Inspiration {
    /// `node 3 (tile, 2.10x vs XLA)`.
    pub label: String,
    /// Its source.
    pub source: String,
}

/// The search's best node when it is not the kernel being revised.
#[derive(Debug, Clone, Serialize)]
pub struct SearchBestView {
    /// Its id.
    pub node: u64,
    /// Its plan's title.
    pub title: String,
    /// Its direction.
    pub hint: String,
    /// Its figures against XLA with the interval.
    pub figures: String,
    /// Its per-workload timing, when stored.
    pub timing: Option<String>,
}

/// What the planner is asked for: a first optimized version or a revision of the best (the
/// template's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Nothing better than the start yet.
    New,
    /// A revision of the current best.
    Revision,
}

impl Mode {
    /// The template's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::New => "new",
            Mode::Revision => "revision",
        }
    }
}

/// What the planner is told.
#[derive(Debug, Clone, Serialize)]
pub struct PlannerContext {
    /// The task brief.
    pub task: Value,
    /// The reference implementation's source.
    pub reference: String,
    /// The machine's roofline.
    pub roofline: String,
    /// New or revision.
    pub mode: Mode,
    /// One line per earlier step (the lineage in a search), root first.
    pub history: Vec<String>,
    /// This step's number (an iteration, or a round inside a node).
    pub iteration: u32,
    /// Of how many, when bounded.
    pub of: Option<u32>,
    /// The kernel revised.
    pub best: BestView,
    /// Nothing passes yet.
    pub not_passing: bool,
    /// What the last step showed.
    pub last: Option<LastView>,
    /// The direction to pursue (searches).
    pub hint: Option<HintView>,
    /// Other good programs (evolutionary search).
    pub inspirations: Vec<Inspiration>,
    /// What earlier runs on other tasks learned.
    pub memory: Vec<Value>,
    /// Technique notes.
    pub knowledge: Vec<Passage>,
    /// What other nodes of the search tried.
    pub tried: Vec<String>,
    /// The search's best node, when it is not the parent.
    pub search_best: Option<SearchBestView>,
}

/// An earlier kernel the plan names, shown to the implementer.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotView {
    /// Its iteration.
    pub iteration: u32,
    /// Its status.
    pub status: String,
    /// Its source.
    pub source: String,
}

/// What the implementer is told.
#[derive(Debug, Clone, Serialize)]
pub struct ImplementerContext {
    /// The task brief.
    pub task: Value,
    /// The plan (markdown).
    pub plan: String,
    /// The file to edit.
    pub file: String,
    /// Its current source.
    pub source: String,
    /// The machine's roofline.
    pub machine: String,
    /// Earlier kernels the plan names.
    pub snapshots: Vec<SnapshotView>,
    /// Technique notes for the plan's strategy.
    pub knowledge: Vec<Passage>,
}

/// A judged candidate's failure as the fixer sees it.
#[derive(Debug, Clone, Serialize)]
pub struct FailureView {
    /// `compile_error`, `incorrect_numerical`, ...
    pub kind: String,
    /// Diagnostics, the worst mismatch, the crash.
    pub detail: String,
}

/// What the fixer is told.
#[derive(Debug, Clone, Serialize)]
pub struct FixerContext {
    /// The task brief.
    pub task: Value,
    /// The file to fix.
    pub file: String,
    /// Its source.
    pub source: String,
    /// What went wrong.
    pub failure: FailureView,
    /// Earlier attempts on this candidate, one line each.
    pub attempts: Vec<String>,
}

/// A context as template values (guidance and retry notes are added by the caller).
pub fn values<T: Serialize>(context: &T) -> Value {
    // Plain structs of strings, numbers and vectors: serialization cannot fail.
    serde_json::to_value(context).unwrap_or(Value::Null)
}

/// Fix attempts, counted per stage: a build-stage failure (compile error, policy) and a
/// test-stage failure each get `max` attempts, so fixing the build does not use up the
/// attempts the numerics need.
#[derive(Debug, Clone, Copy)]
pub struct FixBudget {
    max: u32,
    build: u32,
    test: u32,
}

impl FixBudget {
    /// `max` attempts per stage.
    pub fn new(max: u32) -> FixBudget {
        FixBudget {
            max,
            build: 0,
            test: 0,
        }
    }

    /// Takes an attempt for a failure with `status`: its number within its stage, or None
    /// when that stage's attempts are used up.
    pub fn take(&mut self, status: Status) -> Option<u32> {
        let used = if matches!(status, Status::CompileError | Status::PolicyRejected) {
            &mut self.build
        } else {
            &mut self.test
        };
        (*used < self.max).then(|| {
            *used += 1;
            *used
        })
    }

    /// Attempts taken so far, both stages.
    pub fn taken(&self) -> u32 {
        self.build + self.test
    }
}

/// `text` cut to about `max` characters, with `…` when cut: after its last whole clause (`; `)
/// in the second half, else at a word boundary (never in the middle of a word or a figure).
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    let cut = head
        .rfind("; ")
        .filter(|&i| i > max / 2)
        .or_else(|| head.rfind(' ').filter(|&i| i > max / 2))
        .unwrap_or(head.len());
    format!("{}…", head[..cut].trim_end())
}

/// A failure in one line for the next fix attempt: its first diagnostic (the line after the
/// status line), not the status line itself.
pub fn key_line(detail: &str) -> &str {
    detail
        .lines()
        .skip(1)
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_else(|| detail.lines().next().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_attempts_are_counted_per_stage() {
        let mut b = FixBudget::new(2);
        assert_eq!(b.take(Status::CompileError), Some(1));
        assert_eq!(b.take(Status::CompileError), Some(2));
        assert_eq!(b.take(Status::PolicyRejected), None);
        // The numerics still have their own attempts.
        assert_eq!(b.take(Status::IncorrectNumerical), Some(1));
        assert_eq!(b.take(Status::RuntimeError), Some(2));
        assert_eq!(b.take(Status::IncorrectNumerical), None);
        assert_eq!(b.taken(), 4);
        assert_eq!(FixBudget::new(0).take(Status::CompileError), None);
    }

    #[test]
    fn a_failure_is_summarized_by_its_first_diagnostic() {
        let d = "compile error (gcc)\n\n  kernel.c:3:5: error: expected ';'\nmore";
        assert_eq!(key_line(d), "kernel.c:3:5: error: expected ';'");
        assert_eq!(key_line("only a status"), "only a status");
        assert_eq!(key_line(""), "");
    }

    #[test]
    fn clipped_text_ends_at_a_word_with_an_ellipsis() {
        assert_eq!(clip("short", 10), "short");
        let c = clip("every value would therefore run the same parallel path", 30);
        assert_eq!(c, "every value would therefore…");
        assert_eq!(
            clip("tuned A=1: 0.85x (8.10x/1.64x/0.05x); B=2: 0.9x", 24),
            "tuned A=1: 0.85x…"
        );
        // A whole clause when one ends in the second half.
        assert_eq!(
            clip(
                "tuned A=1: 0.85x (8.10x/1.64x); B=2: 0.9x (1.1x/0.8x); C=3",
                50
            ),
            "tuned A=1: 0.85x (8.10x/1.64x)…"
        );
    }

    #[test]
    fn contexts_render_with_the_templates_variable_names() {
        let best = BestView::not_passing("0".into(), "kernel.c", "int a;");
        let v = values(&best);
        assert_eq!(v["speedup"], "not passing");
        assert_eq!(v["far_ahead"], false);
        assert_eq!(values(&Mode::Revision), "revision");
    }
}
