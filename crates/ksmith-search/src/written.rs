//! `report.md`, written beside a run's winner: every node as it was judged alone, the
//! finalists as they were re-checked and re-timed together, the winner written (the one the
//! final judgement chose, never another) with its figures per workload, and what the run spent.

use crate::finalize::FinalRecord;
use crate::node::{plan_title, Node, NodeState};
use ksmith_judge::EvalResult;
use ksmith_task::escape::{markdown_cell, markdown_code};
use ksmith_task::Task;

/// What the report is made from.
pub struct RunReport<'a> {
    /// The run's id.
    pub run: &'a str,
    /// The task (its axes name the workloads).
    pub task: &'a Task,
    /// The model spelling.
    pub model: &'a str,
    /// The strategy's name.
    pub strategy: &'a str,
    /// Why the search stopped.
    pub stop: &'a str,
    /// Every node, in id order.
    pub nodes: &'a [Node],
    /// The final judgement (the winner written is its `node`).
    pub record: &'a FinalRecord,
    /// The winner's re-check, timed together with the other finalists.
    pub winner: Option<&'a EvalResult>,
    /// LLM calls, tokens in and out, cost.
    pub calls: (usize, u64, u64, f64),
}

/// A node's name in the report: the start is node 0 when it was given.
fn name(n: &Node) -> String {
    if n.parent.is_none() {
        format!("{} (start)", n.id)
    } else {
        n.id.to_string()
    }
}

fn node_status(n: &Node) -> String {
    match (n.state, n.outcome.status) {
        (NodeState::Duplicate, _) => format!(
            "duplicate of {}",
            n.duplicate_of.map_or("?".into(), |d| d.to_string())
        ),
        (_, Some(s)) => s.to_string(),
        (st, None) => st.as_str().to_string(),
    }
}

impl RunReport<'_> {
    /// The markdown; every model-written text (plan titles) and name escaped for a table cell.
    pub fn markdown(&self) -> String {
        let r = self.record;
        let mut md = format!(
            "# ksmith run {}\n\ntask {}, model {}, strategy {}; stopped: {}\n\n",
            self.run,
            markdown_code(&self.task.name),
            markdown_code(self.model),
            self.strategy,
            markdown_cell(self.stop)
        );
        md.push_str("## Nodes, each judged alone\n\n| node | parent | status | speedup vs XLA (95%) | vs its parent, same rounds | plan |\n| --- | --- | --- | --- | --- | --- |\n");
        for n in self.nodes {
            let alone = match (n.outcome.speedup, n.outcome.interval) {
                (Some(x), Some((lo, hi))) if n.outcome.passed() => {
                    format!("{x:.2}x ({lo:.2}-{hi:.2})")
                }
                (Some(x), None) if n.outcome.passed() => format!("{x:.2}x"),
                _ => "-".into(),
            };
            let vs = n.outcome.vs_parent.map_or("-".into(), |d| d.text());
            md.push_str(&format!(
                "| {}{} | {} | {} | {alone} | {} | {} |\n",
                name(n),
                if r.node == Some(n.id.0) {
                    " (winner)"
                } else {
                    ""
                },
                n.parent.map_or("-".into(), |p| p.to_string()),
                markdown_cell(&node_status(n)),
                markdown_cell(&vs),
                markdown_cell(&plan_title(&n.plan)),
            ));
        }
        let incumbent = r
            .incumbent
            .map_or("the incumbent".to_string(), |i| format!("node {i}"));
        md.push_str(&format!(
            "\n## Finalists, re-checked on fresh seeds and re-timed together\n\nEvery finalist's rounds share the same windows and the same XLA baseline calls, so they are compared with each other directly. Held-out shapes (never shown to the agents nor timed; a finalist failing them cannot win): {}.\n\n| node | evaluation | status | held-out | together: vs XLA (95%) | together: vs {incumbent} (95%) | decision |\n| --- | --- | --- | --- | --- | --- | --- |\n",
            markdown_cell(if r.held_out.is_empty() { "none" } else { &r.held_out })
        ));
        for f in &r.finalists {
            md.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} |\n",
                f.node,
                if r.node == Some(f.node) {
                    " (winner)"
                } else {
                    ""
                },
                f.eval_id.map_or("-".into(), |e| e.to_string()),
                markdown_cell(&f.status),
                markdown_cell(f.held_out.as_deref().unwrap_or("-")),
                f.together.map_or("-".into(), |x| x.text()),
                if Some(f.node) == r.incumbent {
                    "1.00x".to_string()
                } else {
                    f.vs_incumbent.map_or("-".into(), |x| x.text())
                },
                markdown_cell(&f.decision),
            ));
        }
        let (n, tin, tout, cost) = self.calls;
        md.push_str(&format!(
            "\nLLM calls: {n} ({tin} tokens in, {tout} out, ${cost:.4}).\n"
        ));
        let Some(w) = r.node else {
            md.push_str(&format!(
                "No winner: no finalist passed on fresh seeds and the held-out shapes; nothing written. {}\n",
                markdown_cell(&r.summary)
            ));
            return md;
        };
        let eval = r
            .finalists
            .iter()
            .find(|f| f.node == w)
            .and_then(|f| f.eval_id)
            .map_or(String::new(), |e| format!(" (evaluation {e})"));
        md.push_str(&format!(
            "Winner: node {w}{eval}. {}.\n",
            markdown_cell(&r.summary)
        ));
        if let Some(p) = self.winner.and_then(|e| e.performance.as_ref()) {
            md.push_str("\n## The winner per workload (re-timed together)\n\n| workload | kernel ms | XLA ms | speedup (95%) | GFLOP/s | GB/s | roofline floor ms | % of roofline | caches evicted |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
            for wp in &p.workloads {
                let axes = self
                    .task
                    .axes
                    .iter()
                    .filter_map(|a| wp.axes.get(&a.name).map(|v| format!("{}={v}", a.name)))
                    .collect::<Vec<_>>()
                    .join(" ");
                md.push_str(&format!(
                    "| {axes} | {:.3} | {:.3} | {:.2}x ({:.2}-{:.2}) | {:.1} | {:.1} | {:.3} | {} | {} |\n",
                    wp.candidate.median_ms,
                    wp.baseline.median_ms,
                    wp.speedup,
                    wp.speedup_interval.0,
                    wp.speedup_interval.1,
                    wp.gflops,
                    wp.gbps,
                    wp.floor_ms,
                    wp.roofline_cell(),
                    if wp.cache_flushed { "yes" } else { "no" }
                ));
            }
        }
        md
    }
}
