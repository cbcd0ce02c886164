//! The rows of a bench run: what `bench` produces and `report`/`results` summarize (their own
//! module, so the command and its report do not import each other).

use ksmith_judge::EvalResult;
use std::collections::BTreeMap;

/// The outcome of one item.
pub(crate) struct Row {
    pub task: String,
    pub solution: String,
    pub repeat: u32,
    pub eval_id: Option<i64>,
    pub result: Option<EvalResult>,
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
pub(crate) fn group(rows: &[Row]) -> BTreeMap<(String, String), Vec<&Row>> {
    let mut m: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        m.entry((r.task.clone(), r.solution.clone()))
            .or_default()
            .push(r);
    }
    m
}
