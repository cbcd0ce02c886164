//! `report.md`, written beside a run's winner: every node as it was judged alone, the
//! finalists as they were re-checked and re-timed together, the winner written (the one the
//! final judgement chose, never another) with its figures per workload, and what the run spent.

use ksmith_judge::EvalResult;
use ksmith_search::finalize::FinalRecord;
use ksmith_search::node::{plan_title, Node, NodeId, NodeState};
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
        let incumbent = r.incumbent.map_or("the incumbent".to_string(), |i| {
            format!("node {}", NodeId(i))
        });
        md.push_str(&format!(
            "\n## Finalists, re-checked on fresh seeds and re-timed together\n\nEvery finalist's rounds share the same windows and the same XLA baseline calls, so they are compared with each other directly. Held-out shapes (never shown to the agents nor timed; a finalist failing them cannot win): {}.\n\n| node | evaluation | status | held-out | together: vs XLA (95%) | together: vs {incumbent} (95%) | decision |\n| --- | --- | --- | --- | --- | --- | --- |\n",
            markdown_cell(if r.held_out.is_empty() { "none" } else { &r.held_out })
        ));
        for f in &r.finalists {
            md.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} |\n",
                NodeId(f.node),
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
            "Winner: node {}{eval}. {}.\n",
            NodeId(w),
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

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_judge::decide::{Decision, Evidence};
    use ksmith_judge::Status;
    use ksmith_search::finalize::{Figure, FinalistRow};
    use ksmith_search::node::NodeOutcome;
    use ksmith_search::Hint;

    fn node(id: u64, parent: Option<u64>, plan: &str, speedup: f64) -> Node {
        Node {
            id: NodeId(id),
            parent: parent.map(NodeId),
            depth: u32::from(parent.is_some()),
            hint: Hint::Own,
            state: NodeState::Done,
            plan: plan.into(),
            code_hash: None,
            norm_hash: None,
            duplicate_of: None,
            outcome: NodeOutcome {
                status: Some(Status::Passed),
                speedup: Some(speedup),
                interval: Some((speedup * 0.9, speedup * 1.1)),
                ..NodeOutcome::default()
            },
            spend: Default::default(),
            feedback: Default::default(),
        }
    }

    fn row(node: u64, decision: &str, vs: Option<f64>) -> FinalistRow {
        FinalistRow {
            node,
            eval_id: Some(10 + node as i64),
            status: "PASSED".into(),
            held_out: Some("PASSED".into()),
            together: Some(Figure {
                speedup: 1.0,
                low: 0.9,
                high: 1.1,
            }),
            vs_incumbent: vs.map(|v| Figure {
                speedup: v,
                low: v * 0.9,
                high: v * 1.1,
            }),
            decision: decision.into(),
        }
    }

    #[test]
    fn the_report_names_the_winner_written_and_escapes_the_model_s_text() {
        let task = Task::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tasks/starter/vector_add"),
        )
        .unwrap();
        let mut child = node(
            1,
            Some(0),
            "## Title\nSplit | the loop\n## Strategy\nx",
            2.0,
        );
        child.outcome.vs_parent = Some(Decision::Better {
            evidence: Evidence {
                speedup: 1.8,
                low: 1.5,
                high: 2.1,
                paired: true,
                disturbed: false,
            },
        });
        // Node 2 reads fastest alone, yet the final judgement chose node 1: the report says 1.
        let nodes = [
            node(0, None, "the starting solution", 1.0),
            child,
            node(2, Some(1), "## Title\nUnroll", 2.5),
        ];
        let record = FinalRecord {
            node: Some(1),
            incumbent: Some(0),
            summary: "node n1: better".into(),
            held_out: "N=1001".into(),
            retimed: 0,
            finalists: vec![
                row(0, "incumbent", None),
                row(1, "better", Some(1.8)),
                row(2, "undecided", Some(1.9)),
            ],
        };
        let md = RunReport {
            run: "run-1",
            task: &task,
            model: "scripted:x",
            strategy: "loop",
            stop: "node budget spent",
            nodes: &nodes,
            record: &record,
            winner: None,
            calls: (4, 1000, 200, 0.0),
        }
        .markdown();
        assert!(
            md.contains("Winner: node n1 (evaluation 11). node n1: better."),
            "{md}"
        );
        assert!(md.contains("| n1 (winner) | n0 | PASSED |"), "{md}");
        assert!(!md.contains("| n2 (winner)"), "{md}");
        assert!(
            md.contains("| n1 (winner) | 11 | PASSED | PASSED |"),
            "{md}"
        );
        // The plan title's pipe cannot break the table.
        assert!(md.contains("Split \\| the loop"), "{md}");
        assert!(md.contains("better: 1.80x (1.50-2.10)"), "{md}");
        assert!(md.contains("LLM calls: 4 (1000 tokens in, 200 out"), "{md}");
        // No winner: said, nothing claimed.
        let none = FinalRecord {
            node: None,
            ..record.clone()
        };
        let md = RunReport {
            record: &none,
            run: "run-1",
            task: &task,
            model: "m",
            strategy: "loop",
            stop: "s",
            nodes: &nodes,
            winner: None,
            calls: (0, 0, 0, 0.0),
        }
        .markdown();
        assert!(md.contains("No winner"), "{md}");
        assert!(!md.contains("(winner)"), "{md}");
    }
}
