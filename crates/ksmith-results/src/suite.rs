//! A bench suite's metrics (KernelBench's definitions): per solution name, how many tasks were
//! evaluated here, correct, and fast_p (correct and faster than XLA by more than p), their
//! geometric mean, and the A/A spread of repeated items. What `bench` prints and exports
//! (json, csv, markdown) is the CLI's; what it counts is here.

use ksmith_judge::{EvalResult, Status};
use ksmith_task::Task;
use std::collections::BTreeMap;

/// The outcome of one bench item.
#[derive(Debug, Clone)]
pub struct Row {
    /// The task's name.
    pub task: String,
    /// The solution's label in the suite (`fast`, `naive`, ...).
    pub solution: String,
    /// Which repeat of the item (0 first).
    pub repeat: u32,
    /// Its stored evaluation.
    pub eval_id: Option<i64>,
    /// The judge's result; None when the trusted side failed on the task.
    pub result: Option<EvalResult>,
    /// What went wrong outside the candidate.
    pub error: Option<String>,
    /// Why the solution could not run on this machine (no GPU, no nvcc): not a failure.
    pub unavailable: Option<String>,
}

impl Row {
    /// The solution's own name, as stored and listed by `evals` (`softmax_fast`); the variant
    /// label (`fast`) when nothing was evaluated.
    pub fn name(&self) -> &str {
        self.result
            .as_ref()
            .map_or(self.solution.as_str(), |r| r.solution.as_str())
    }
}

/// Rows grouped by (task, solution), in first-seen order.
pub fn group(rows: &[Row]) -> BTreeMap<(String, String), Vec<&Row>> {
    let mut m: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        m.entry((r.task.clone(), r.solution.clone()))
            .or_default()
            .push(r);
    }
    m
}

/// What one bench row says about its solution on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// Could not run here (no GPU, no nvcc): says nothing about the solution.
    Unavailable,
    /// The trusted side failed on the task (reference error): counted as not correct.
    TaskError,
    /// Evaluated and not PASSED.
    Failed,
    /// PASSED, but without a kernel time (an interpreter on a CPU, or `--no-timing`).
    Untimed,
    /// PASSED and timed against the baseline.
    Timed,
}

impl RowState {
    /// The lower-case name used in json and csv.
    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Unavailable => "unavailable",
            RowState::TaskError => "task_error",
            RowState::Failed => "failed",
            RowState::Untimed => "untimed",
            RowState::Timed => "timed",
        }
    }
}

impl Row {
    /// What this row says (see [`RowState`]).
    pub fn state(&self) -> RowState {
        match &self.result {
            _ if self.unavailable.is_some() => RowState::Unavailable,
            None => RowState::TaskError,
            Some(r) if r.status != Status::Passed => RowState::Failed,
            Some(r) if r.performance.is_some() => RowState::Timed,
            Some(_) => RowState::Untimed,
        }
    }
}

/// Suite metrics for one solution name (KernelBench's definitions; see [`metrics`]).
pub struct Metrics {
    /// The solution's label.
    pub solution: String,
    /// Tasks in the suite.
    pub total: usize,
    /// Tasks whose solution could not run here, with the distinct reasons.
    pub unavailable: usize,
    /// The distinct reasons.
    pub unavailable_why: Vec<String>,
    /// Tasks evaluated here (total - unavailable): the denominator of `correct` and fast_0.
    pub evaluated: usize,
    /// Tasks that passed.
    pub correct: usize,
    /// Correct tasks with no kernel time (their speed is unknown).
    pub untimed: usize,
    /// Geometric mean speedup over the correct, timed tasks.
    pub geomean: Option<f64>,
    /// (p, fraction, denominator); the fraction is `None` when nothing was timed.
    pub fast: Vec<(f64, Option<f64>, usize)>,
}

/// The thresholds of fast_p.
pub const FAST_P: [f64; 4] = [0.0, 1.0, 1.5, 2.0];

/// Per solution name, over the suite's tasks (first repeat): a task whose solution could not
/// run here is left out of every count (and named); `correct` and fast_0 (= the fraction
/// correct) are over the tasks evaluated here; fast_p for p > 0 (correct AND speedup > p) is
/// over the tasks whose answer is known, i.e. without the correct ones that have no kernel
/// time. A task missing from the rows counts as evaluated and not correct (a missing task is
/// not fast).
pub fn metrics(tasks: &[Task], rows: &[Row]) -> Vec<Metrics> {
    let mut names: Vec<String> = rows.iter().map(|r| r.solution.clone()).collect();
    names.sort();
    names.dedup();
    let metrics = names
        .into_iter()
        .map(|name| {
            let firsts: Vec<Option<&Row>> = tasks
                .iter()
                .map(|t| {
                    rows.iter()
                        .find(|r| r.task == t.name && r.solution == name && r.repeat == 0)
                })
                .collect();
            let state = |r: &Option<&Row>| r.map(|r| r.state());
            let count = |s: RowState| firsts.iter().filter(|r| state(r) == Some(s)).count();
            let unavailable = count(RowState::Unavailable);
            let untimed = count(RowState::Untimed);
            let mut unavailable_why: Vec<String> = firsts
                .iter()
                .flatten()
                .filter_map(|r| r.unavailable.clone())
                .collect();
            unavailable_why.sort();
            unavailable_why.dedup();
            let ok: Vec<f64> = firsts
                .iter()
                .flatten()
                .filter(|r| r.state() == RowState::Timed)
                .filter_map(|r| r.result.as_ref()?.performance.as_ref().map(|p| p.speedup))
                .collect();
            let correct = ok.len() + untimed;
            let evaluated = tasks.len() - unavailable;
            let geomean = (!ok.is_empty())
                .then(|| (ok.iter().map(|s| s.ln()).sum::<f64>() / ok.len() as f64).exp());
            let fast = FAST_P
                .iter()
                .map(|&p| {
                    if p == 0.0 {
                        let f = (evaluated > 0).then(|| correct as f64 / evaluated as f64);
                        return (p, f, evaluated);
                    }
                    let known = evaluated - untimed;
                    let n = ok.iter().filter(|&&s| s > p).count();
                    let f = (known > 0 && !ok.is_empty()).then(|| n as f64 / known as f64);
                    (p, f, known)
                })
                .collect();
            Metrics {
                solution: name,
                total: tasks.len(),
                unavailable,
                unavailable_why,
                evaluated,
                correct,
                untimed,
                geomean,
                fast,
            }
        })
        .collect();
    metrics
}

/// Speedup spread between repeats of the same solution, over workloads whose kernel takes >= 1 ms:
/// (max, median, count) of max/min - 1.
pub fn aa_spread(rows: &[Row]) -> Option<(f64, f64, usize)> {
    let mut spreads = Vec::new();
    for list in group(rows).values() {
        let perfs: Vec<_> = list
            .iter()
            .filter_map(|r| r.result.as_ref()?.performance.as_ref())
            .collect();
        if perfs.len() < 2 {
            continue;
        }
        for w in &perfs[0].workloads {
            let s: Vec<f64> = perfs
                .iter()
                .filter_map(|p| p.workloads.iter().find(|x| x.workload == w.workload))
                .map(|x| x.speedup)
                .collect();
            if w.candidate.median_ms >= 1.0 && s.len() == perfs.len() {
                let (lo, hi) = s
                    .iter()
                    .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                spreads.push(hi / lo - 1.0);
            }
        }
    }
    if spreads.is_empty() {
        return None;
    }
    spreads.sort_by(|a, b| a.total_cmp(b));
    Some((
        *spreads.last().unwrap_or(&0.0),
        spreads[spreads.len() / 2],
        spreads.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result as the judge stores it: `status`, timed at `speedup` when given.
    fn result(task: &str, status: &str, speedup: Option<f64>) -> EvalResult {
        let performance = speedup.map(|s| {
            serde_json::json!({"speedup": s, "speedup_interval": [s * 0.9, s * 1.1],
                "roofline_fraction": 0.1, "workloads": []})
        });
        serde_json::from_value(serde_json::json!({
            "status": status, "reason": null, "detail": null, "stage": "done", "task": task,
            "task_hash": "t", "solution": "s", "solution_hash": "h", "policy": [], "build": null,
            "correctness": null, "performance": performance, "log": "",
            "environment": serde_json::to_value(ksmith_judge::Environment::default()).unwrap(),
            "elapsed_s": 1.0,
            "time_split": serde_json::to_value(ksmith_judge::TimeSplit::default()).unwrap()
        }))
        .expect("a stored result parses")
    }

    fn row(task: &str, result: Option<EvalResult>, unavailable: Option<&str>) -> Row {
        Row {
            task: task.into(),
            solution: "fast".into(),
            repeat: 0,
            eval_id: None,
            result,
            error: None,
            unavailable: unavailable.map(str::to_string),
        }
    }

    fn tasks(names: &[&str]) -> Vec<Task> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter");
        let mut out = Vec::new();
        for n in names {
            let mut t = Task::load(&dir.join("vector_add")).expect("starter task");
            t.name = n.to_string();
            out.push(t);
        }
        out
    }

    #[test]
    fn fast_p_counts_correct_and_faster_over_the_tasks_whose_answer_is_known() {
        let ts = tasks(&["a", "b", "c", "d", "e", "f"]);
        let rows = vec![
            row("a", Some(result("a", "PASSED", Some(3.0))), None),
            row("b", Some(result("b", "PASSED", Some(1.2))), None),
            row("c", Some(result("c", "PASSED", Some(0.5))), None),
            // Correct but untimed (an interpreter): correct, out of fast_p's denominator.
            row("d", Some(result("d", "PASSED", None)), None),
            row("e", Some(result("e", "INCORRECT_NUMERICAL", None)), None),
            // Could not run here: out of every count.
            row("f", None, Some("no GPU")),
        ];
        let m = &metrics(&ts, &rows)[0];
        assert_eq!((m.total, m.unavailable, m.evaluated), (6, 1, 5));
        assert_eq!((m.correct, m.untimed), (4, 1));
        assert_eq!(m.unavailable_why, ["no GPU"]);
        let fast = |p: f64| m.fast.iter().find(|f| f.0 == p).map(|f| (f.1, f.2));
        // fast_0 is the fraction correct, over the evaluated tasks.
        assert_eq!(fast(0.0), Some((Some(0.8), 5)));
        // fast_1: a and b of the 4 tasks whose speed is known.
        assert_eq!(fast(1.0), Some((Some(0.5), 4)));
        assert_eq!(fast(2.0), Some((Some(0.25), 4)));
        let g = m.geomean.expect("timed tasks");
        assert!(
            (g - (3.0f64 * 1.2 * 0.5).powf(1.0 / 3.0)).abs() < 1e-12,
            "{g}"
        );
    }

    #[test]
    fn a_task_missing_from_the_rows_is_evaluated_and_not_correct() {
        let ts = tasks(&["a", "b"]);
        let rows = vec![row("a", Some(result("a", "PASSED", Some(2.0))), None)];
        let m = &metrics(&ts, &rows)[0];
        assert_eq!((m.evaluated, m.correct), (2, 1));
        assert_eq!(m.fast[0], (0.0, Some(0.5), 2));
    }

    #[test]
    fn a_row_says_what_it_knows() {
        assert_eq!(
            row("a", None, Some("no GPU")).state(),
            RowState::Unavailable
        );
        assert_eq!(row("a", None, None).state(), RowState::TaskError);
        let r = row("a", Some(result("a", "PASSED", None)), None);
        assert_eq!(r.state(), RowState::Untimed);
        assert_eq!(r.name(), "s");
        assert_eq!(
            row("a", Some(result("a", "PASSED", Some(1.0))), None).state(),
            RowState::Timed
        );
        assert!(aa_spread(&[row("a", None, None)]).is_none());
    }
}
