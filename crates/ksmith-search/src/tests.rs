//! Engine and strategy tests on a tiny deterministic fake expander.

use crate::budget::StopReason;
use crate::engine::{parse_state, Search, SearchSettings};
use crate::events::NullSink;
use crate::graph::rank;
use crate::hint::Hint;
use crate::node::{ExpandError, Expanded, Expander, Expansion, Node, NodeId, NodeOutcome, Spend};
use crate::persist::{MemoryPersist, NoPersist, PersistError};
use crate::strategy::{StrategySettings, StrategyState};
use crate::{EventSink, SearchError};
use ksmith_judge::Status;
use std::sync::Mutex;

/// Outcome depends only on the request: `good` multiplies the parent's speedup by 1.6, other
/// hints by 0.9..1.05 (from the seed); every 5th seed (mod) fails to compile. Sources carry
/// features by hint, so evolve's archive fills.
struct Fake {
    good: Hint,
    calls: u64,
    expanded: Mutex<Vec<NodeId>>,
    sleep_by_id: bool,
    /// Nodes whose judging fails outside the candidate (`ExpandError::Judge`).
    judge_fails: Vec<u64>,
    /// Nodes whose expansion fails outside the candidate (`ExpandError::Failed`, a killed
    /// harness or a provider error) this many times before it succeeds.
    expand_fails: Mutex<std::collections::HashMap<u64, u32>>,
    /// Every request seen, for what a node is told.
    requests: Mutex<Vec<Expansion>>,
    /// Nodes whose reviewer quits (`ExpandError::Paused`).
    pauses: Vec<u64>,
    /// Nodes whose provider refuses the run (`ExpandError::Refused`: a rejected key).
    refusals: Vec<u64>,
}

impl Fake {
    fn new(good: Hint) -> Fake {
        Fake {
            good,
            calls: 2,
            expanded: Mutex::new(Vec::new()),
            sleep_by_id: false,
            judge_fails: Vec::new(),
            expand_fails: Mutex::new(std::collections::HashMap::new()),
            requests: Mutex::new(Vec::new()),
            pauses: Vec::new(),
            refusals: Vec::new(),
        }
    }
}

impl Expander for Fake {
    fn expand(&self, req: &Expansion, _e: &dyn EventSink) -> Result<Expanded, ExpandError> {
        if let Ok(mut v) = self.expanded.lock() {
            v.push(req.node);
        }
        if let Ok(mut v) = self.requests.lock() {
            v.push(req.clone());
        }
        if self.sleep_by_id {
            // Later ids finish first, so merge order must not follow completion order.
            std::thread::sleep(std::time::Duration::from_millis(20 - (req.node.0 % 4) * 5));
        }
        if let Ok(mut left) = self.expand_fails.lock() {
            if let Some(n) = left.get_mut(&req.node.0).filter(|n| **n > 0) {
                *n -= 1;
                return Err(ExpandError::Failed(anyhow::anyhow!(
                    "harness process killed (SIGKILL)"
                )));
            }
        }
        if self.pauses.contains(&req.node.0) {
            return Err(ExpandError::Paused(format!(
                "the reviewer quit at {}",
                req.node
            )));
        }
        if self.refusals.contains(&req.node.0) {
            return Err(ExpandError::Refused(anyhow::anyhow!(
                "planner call failed: gemini: API key rejected (401)"
            )));
        }
        if self.judge_fails.contains(&req.node.0) {
            return Err(ExpandError::Judge(anyhow::anyhow!(
                "cannot copy kernel.so to the sandbox: no space"
            )));
        }
        let calls = req.max_calls.map_or(self.calls, |m| m.min(self.calls));
        let spend = Spend {
            calls,
            tokens: calls * 100,
            cost: 0.0,
            evaluations: 1,
            wall_s: 0.01,
        };
        let parent = req
            .parent
            .as_ref()
            .and_then(|p| p.outcome.speedup)
            .unwrap_or(1.0);
        let fails = req.parent.is_some() && req.seed.is_multiple_of(5);
        let factor = if req.hint == self.good {
            1.6
        } else {
            0.9 + (req.seed % 16) as f64 / 100.0
        };
        let body = match req.hint {
            Hint::Parallelize => "#pragma omp parallel for\n for (;;) {}",
            Hint::Vectorize => "for (;;) { _mm256_add_ps(a, b); }",
            Hint::Tile => "for (;;) { for (;;) { for (;;) {} } }",
            _ => "for (;;) {}",
        };
        let src = format!("// {}\nvoid k() {{\n{body}\n}}\n", req.seed);
        let h = ksmith_task::content_hash(src.as_bytes());
        Ok(Expanded {
            plan: format!(
                "## Title\n{} from {:?}\n## Strategy\n...",
                req.hint,
                req.parent.as_ref().map(|p| p.id)
            ),
            source: Some(src),
            code_hash: Some(h.clone()),
            norm_hash: Some(h),
            duplicate_of: None,
            outcome: if fails {
                NodeOutcome {
                    status: Some(Status::CompileError),
                    ..NodeOutcome::default()
                }
            } else {
                NodeOutcome {
                    status: Some(Status::Passed),
                    speedup: Some(parent * factor),
                    interval: Some((parent * factor * 0.95, parent * factor * 1.05)),
                    roofline_fraction: Some(0.1 * parent * factor),
                    eval_id: None,
                    vs_parent: None,
                }
            },
            spend,
            feedback: crate::node::Feedback {
                tuning: None,
                profile: (!fails)
                    .then(|| format!("profile of {}:\n  the   exp\n dominates", req.node)),
            },
        })
    }
}

fn settings(s: StrategySettings, nodes: u64, jobs: u32) -> SearchSettings {
    let mut st = SearchSettings::new(s);
    st.budget.nodes = Some(nodes);
    st.jobs = jobs;
    st.seed = 7;
    st
}

fn run(st: SearchSettings, f: &Fake) -> (Search, crate::SearchResult) {
    let mut s = Search::new(st).expect("valid settings");
    let r = s.run(f, &NullSink, &mut NoPersist).expect("search runs");
    (s, r)
}

fn correct(n: &Node) -> Option<f64> {
    n.outcome
        .speedup
        .filter(|_| n.outcome.passed() && n.duplicate_of.is_none())
}

#[test]
fn loop_always_grows_the_best_correct_node() {
    let f = Fake::new(Hint::Tile);
    let (_, r) = run(settings(StrategySettings::Loop, 12, 4), &f);
    assert_eq!(r.nodes.len(), 12);
    assert_eq!(r.stop, StopReason::Nodes);
    for (i, n) in r.nodes.iter().enumerate().skip(1) {
        let best = r.nodes[..i]
            .iter()
            .filter(|m| correct(m).is_some())
            .fold(None, |b: Option<&Node>, m| match b {
                Some(b) if correct(b) >= correct(m) => Some(b),
                _ => Some(m),
            })
            .map(|m| m.id);
        assert_eq!(n.parent, best.or(Some(NodeId(i as u64 - 1))), "node {i}");
    }
}

#[test]
fn best_of_n_is_children_of_the_root() {
    let f = Fake::new(Hint::Tile);
    let (_, r) = run(
        settings(StrategySettings::BestOfN { n: Some(5) }, 100, 3),
        &f,
    );
    assert_eq!(r.stop, StopReason::Exhausted);
    assert_eq!(r.nodes.len(), 6);
    assert!(r.nodes[1..]
        .iter()
        .all(|n| n.depth == 1 && n.parent == Some(NodeId(0))));
}

#[test]
fn parallel_trajectories_have_depth_d() {
    let f = Fake::new(Hint::Tile);
    let (s, r) = run(
        settings(
            StrategySettings::Parallel {
                trajectories: 3,
                depth: Some(4),
            },
            100,
            3,
        ),
        &f,
    );
    assert_eq!(r.stop, StopReason::Exhausted);
    assert_eq!(r.nodes.len(), 1 + 3 * 4);
    let StrategyState::Parallel(p) = &s.state.strategy else {
        panic!("parallel state")
    };
    for t in &p.trajectories {
        assert_eq!(t.nodes.len(), 4);
        // Each trajectory is its own chain from the root: parents are in it or the root.
        for id in &t.nodes {
            let parent = r.nodes[id.0 as usize].parent.expect("has parent");
            assert!(parent == NodeId(0) || t.nodes.contains(&parent));
        }
    }
    assert_eq!(
        r.nodes
            .iter()
            .filter(|n| n.parent == Some(NodeId(0)))
            .count(),
        3
    );
    assert_eq!(r.nodes.iter().map(|n| n.depth).max(), Some(4));
}

#[test]
fn beam_keeps_the_best_w_per_level() {
    let f = Fake::new(Hint::Tile);
    let (s, r) = run(
        settings(
            StrategySettings::Beam {
                width: 2,
                branches: 3,
                depth: Some(3),
            },
            100,
            4,
        ),
        &f,
    );
    assert_eq!(r.stop, StopReason::Exhausted);
    let per_depth: Vec<usize> = (0..4)
        .map(|d| r.nodes.iter().filter(|n| n.depth == d).count())
        .collect();
    assert_eq!(per_depth, vec![1, 3, 6, 6]);
    // Level-2 parents are the two best of level 1 by the keep rule.
    let g = &s.state.graph;
    let mut level1: Vec<NodeId> = r
        .nodes
        .iter()
        .filter(|n| n.depth == 1)
        .map(|n| n.id)
        .collect();
    rank(g, &mut level1);
    let mut parents: Vec<NodeId> = r
        .nodes
        .iter()
        .filter(|n| n.depth == 2)
        .filter_map(|n| n.parent)
        .collect();
    parents.sort();
    parents.dedup();
    let mut want = level1[..2].to_vec();
    want.sort();
    assert_eq!(parents, want);
}

#[test]
fn greedy_expands_the_least_grown_of_the_open_nodes_none_is_decided_faster_than() {
    let f = Fake::new(Hint::Tile);
    let (_, r) = run(
        settings(StrategySettings::Greedy { branch_cap: 2 }, 15, 1),
        &f,
    );
    assert_eq!(r.nodes.len(), 15);
    let iv = |m: &Node| m.outcome.interval.unwrap();
    let mut spread = false;
    for i in 1..r.nodes.len() {
        let earlier = &r.nodes[..i];
        let kids = |id: NodeId| earlier.iter().filter(|m| m.parent == Some(id)).count();
        // Decided faster (separate windows): its interval's low end above the other's high end.
        let beaten = |m: &Node| {
            earlier
                .iter()
                .filter(|n| correct(n).is_some())
                .any(|n| iv(n).0 / iv(m).1 > 1.0)
        };
        let mut tied: Vec<&Node> = earlier
            .iter()
            .filter(|m| kids(m.id) < 2 && correct(m).is_some() && !beaten(m))
            .collect();
        tied.sort_by(|a, b| {
            kids(a.id)
                .cmp(&kids(b.id))
                .then(correct(b).unwrap().total_cmp(&correct(a).unwrap()))
                .then(a.id.cmp(&b.id))
        });
        if let Some(b) = tied.first() {
            assert_eq!(r.nodes[i].parent, Some(b.id), "node {i}");
            let top = earlier
                .iter()
                .filter(|m| kids(m.id) < 2 && correct(m).is_some())
                .max_by(|a, b| correct(a).unwrap().total_cmp(&correct(b).unwrap()))
                .unwrap();
            spread |= top.id != b.id;
        }
    }
    assert!(
        spread,
        "some node was grown that was not the top point estimate (overlapping intervals)"
    );
}

#[test]
fn evolve_migrates_and_fills_the_archive() {
    let f = Fake::new(Hint::Tile);
    let (s, r) = run(
        settings(
            StrategySettings::Evolve {
                islands: 2,
                migrate_every: 4,
                elite_prob: 0.5,
                inspirations: 2,
            },
            30,
            2,
        ),
        &f,
    );
    assert_eq!(r.nodes.len(), 30);
    let StrategyState::Evolve(e) = &s.state.strategy else {
        panic!("evolve state")
    };
    assert!(e.migrations >= 6, "migrations {}", e.migrations);
    assert!(e.islands.iter().all(|i| i.archive.len() >= 2));
    assert!(r.archive_cells >= 3, "cells {}", r.archive_cells);
    assert!(s
        .state
        .graph
        .entries
        .iter()
        .any(|e| !e.request.inspirations.is_empty()));
    // Both islands grew.
    assert!(e.islands.iter().all(|i| i.members.len() >= 10));
}

#[test]
fn bandit_prefers_the_rewarding_hint_in_a_search() {
    let f = Fake::new(Hint::Fuse);
    let (_, r) = run(
        settings(StrategySettings::Greedy { branch_cap: 3 }, 300, 1),
        &f,
    );
    let count = |h: Hint| r.nodes.iter().filter(|n| n.hint == h).count();
    let fuse = count(Hint::Fuse);
    // Uniform would give each of the ten hints about 30.
    for h in Hint::improving().filter(|h| *h != Hint::Fuse) {
        assert!(2 * fuse > 3 * count(h), "fuse {fuse}, {h} {}", count(h));
    }
}

#[test]
fn budgets_stop_exactly() {
    let f = Fake::new(Hint::Tile);
    let mut st = settings(StrategySettings::Greedy { branch_cap: 3 }, 1000, 3);
    st.budget.nodes = None;
    st.budget.calls = Some(17);
    let (_, r) = run(st, &f);
    assert_eq!(r.totals.spend.calls, 17);
    assert_eq!(r.stop, StopReason::Calls);

    let mut st = settings(
        StrategySettings::Beam {
            width: 3,
            branches: 2,
            depth: None,
        },
        1000,
        4,
    );
    st.budget.nodes = None;
    st.budget.evaluations = Some(11);
    let (_, r) = run(st, &f);
    assert_eq!(r.totals.spend.evaluations, 11);
    assert_eq!(r.stop, StopReason::Evaluations);

    let (_, r) = run(settings(StrategySettings::Loop, 9, 1), &f);
    assert_eq!((r.nodes.len(), r.totals.nodes), (9, 9));

    let mut st = settings(StrategySettings::Loop, 1000, 1);
    st.budget.target_speedup = Some(2.0);
    let (_, r) = run(st, &f);
    assert!(matches!(r.stop, StopReason::TargetSpeedup { speedup } if speedup >= 2.0));
    assert!(r.nodes.len() < 1000);
}

#[test]
fn a_node_the_judge_fails_on_fails_alone_and_the_search_goes_on() {
    use crate::node::NodeState;
    // Node 2's judging fails (the judge's own error, not the candidate's): node 2 fails, the
    // search grows its other nodes to the budget and keeps its best.
    let mut f = Fake::new(Hint::Tile);
    f.judge_fails = vec![2];
    let (_, r) = run(
        settings(StrategySettings::Greedy { branch_cap: 3 }, 8, 2),
        &f,
    );
    assert_eq!(r.stop, StopReason::Nodes, "{:?}", r.stop);
    assert_eq!(r.nodes.len(), 8);
    let n2 = &r.nodes[2];
    assert_eq!(n2.state, NodeState::Failed);
    assert!(n2.plan.contains("no space"), "{}", n2.plan);
    assert!(r.best.is_some_and(|b| b != NodeId(2)));
    assert!(!r.finalists.contains(&NodeId(2)));

    // Three in a row: the machine, not the candidates; the search stops (resumable).
    let mut f = Fake::new(Hint::Tile);
    f.judge_fails = vec![1, 2, 3];
    let (_, r) = run(settings(StrategySettings::Loop, 8, 1), &f);
    assert!(
        matches!(&r.stop, StopReason::ExpanderFailed { message } if message.contains("3 nodes in a row")),
        "{:?}",
        r.stop
    );
}

#[test]
fn an_expansion_killed_from_outside_is_retried_or_fails_alone_and_its_siblings_are_merged() {
    use crate::node::NodeState;
    let fails = |pairs: &[(u64, u32)]| Fake {
        expand_fails: Mutex::new(pairs.iter().copied().collect()),
        ..Fake::new(Hint::Tile)
    };
    // Killed once: tried again, and the node is grown as if nothing happened.
    let once = fails(&[(2, 1)]);
    let (_, whole) = run(
        settings(StrategySettings::Loop, 6, 1),
        &Fake::new(Hint::Tile),
    );
    let (_, r) = run(settings(StrategySettings::Loop, 6, 1), &once);
    assert_eq!(r.stop, StopReason::Nodes, "{:?}", r.stop);
    assert_eq!(r.nodes, whole.nodes);

    // Killed every time, in a batch of two: it fails alone, its sibling (the best so far) is
    // merged, and the search goes on to its budget.
    let always = fails(&[(3, u32::MAX)]);
    let st = settings(
        StrategySettings::Parallel {
            trajectories: 2,
            depth: None,
        },
        10,
        2,
    );
    let (_, r) = run(st, &always);
    assert_eq!(r.stop, StopReason::Nodes, "{:?}", r.stop);
    assert_eq!(r.nodes.len(), 10);
    assert_eq!(r.nodes[3].state, NodeState::Failed);
    assert!(r.nodes[3].plan.contains("killed"), "{}", r.nodes[3].plan);
    assert!(r
        .nodes
        .iter()
        .filter(|n| n.id.0 != 3)
        .all(|n| n.state != NodeState::Failed));
    assert!(!r.finalists.contains(&NodeId(3)));

    // Three in a row (by id, whatever order they ended in): the search stops (resumable), and
    // a sibling that finished in the last batch is merged: it is in the result (and so can be
    // the best and a finalist).
    let st = settings(
        StrategySettings::Parallel {
            trajectories: 4,
            depth: None,
        },
        20,
        4,
    );
    let f = fails(&[(1, u32::MAX), (2, u32::MAX), (3, u32::MAX)]);
    let mut s = Search::new(st).unwrap();
    let r = s.run(&f, &NullSink, &mut NoPersist).unwrap();
    assert!(
        matches!(&r.stop, StopReason::ExpanderFailed { message } if message.contains("in a row")),
        "{:?}",
        r.stop
    );
    let four = &r.nodes[4];
    assert_eq!(four.state, NodeState::Done, "{four:?}");
    assert!(four.outcome.status.is_some(), "{four:?}");
    assert!(s.state.graph.get(NodeId(4)).is_some_and(|e| e.merged));
    assert!((1..=3).all(|i| r.nodes[i].state == NodeState::Failed));
}

#[test]
fn a_node_is_told_its_lineage_by_plan_title_what_siblings_tried_and_the_search_best() {
    let f = Fake::new(Hint::Tile);
    let (_, r) = run(
        settings(StrategySettings::Greedy { branch_cap: 3 }, 8, 1),
        &f,
    );
    let reqs = f.requests.lock().unwrap().clone();
    // Titles, not the markdown heading.
    assert!(reqs
        .iter()
        .flat_map(|q| q.lineage.iter().chain(&q.tried))
        .all(|l| !l.contains("## Title")));
    // A node with an earlier sibling is told what it tried, with its figures.
    let with_sibling = reqs
        .iter()
        .find(|q| {
            let p = q.parent.as_ref().map(|p| p.id);
            r.nodes
                .iter()
                .any(|n| n.id < q.node && n.parent.is_some() && n.parent == p)
        })
        .expect("some node has an earlier sibling");
    assert!(
        with_sibling
            .tried
            .iter()
            .any(|l| l.starts_with("sibling: node ")),
        "{:?}",
        with_sibling.tried
    );
    assert!(
        with_sibling.tried.iter().any(|l| l.contains("vs XLA")),
        "{:?}",
        with_sibling.tried
    );
    // ... and what its profile found, on one line: why a tried idea lost.
    assert!(
        with_sibling.tried.iter().any(|l| l.starts_with("sibling: ")
            && l.contains("; its profile: profile of n")
            && l.contains("the exp dominates")),
        "{:?}",
        with_sibling.tried
    );
    // Grown from a node that is not the search's best: told the best.
    for q in &reqs {
        if let Some(b) = &q.search_best {
            assert_ne!(Some(b.id), q.parent.as_ref().map(|p| p.id));
        }
    }
    assert_eq!(
        crate::node::plan_title("## Title\nBlock rows by 8\n## Strategy\nx"),
        "Block rows by 8"
    );
    assert_eq!(
        crate::node::plan_title("the judge failed"),
        "the judge failed"
    );
}

#[test]
fn batches_merge_in_id_order_whatever_finishes_first() {
    let mut f = Fake::new(Hint::Tile);
    f.sleep_by_id = true;
    let st = settings(
        StrategySettings::Beam {
            width: 2,
            branches: 2,
            depth: Some(3),
        },
        100,
        4,
    );
    let (a, _) = run(st.clone(), &f);
    let (b, _) = run(st, &f);
    assert_eq!(a.state.graph, b.state.graph);
    assert_eq!(a.state.bandit, b.state.bandit);
}

/// Runs a 6-node loop with `stopping`, which stops the search at node `at`: that node is left
/// unfinished in the saved state, and a resume with a plain expander grows it first and ends
/// with the tree of an uninterrupted run. Returns how the first run stopped.
fn stops_at_then_resumes_as_if_never_stopped(stopping: &Fake, at: u64) -> StopReason {
    let st = settings(StrategySettings::Loop, 6, 1);
    let (whole, _) = run(st.clone(), &Fake::new(Hint::Tile));
    let mut mem = MemoryPersist::default();
    let mut s = Search::new(st).unwrap();
    let r = s.run(stopping, &NullSink, &mut mem).unwrap();
    let saved = parse_state(mem.states.last().expect("a save")).expect("parses");
    assert!(saved.graph.get(NodeId(at)).is_some_and(|e| !e.finished));
    assert!(saved.batch.contains(&NodeId(at)));
    let f2 = Fake::new(Hint::Tile);
    let mut resumed = Search::resume(saved).expect("resumes");
    let r2 = resumed
        .run(&f2, &NullSink, &mut MemoryPersist::default())
        .expect("resumed run");
    assert_eq!(r2.stop, StopReason::Nodes);
    assert_eq!(f2.expanded.lock().unwrap().first(), Some(&NodeId(at)));
    assert_eq!(resumed.state.graph, whole.state.graph);
    r.stop
}

#[test]
fn a_reviewers_quit_pauses_the_search_and_a_resume_grows_that_node_and_ends_as_if_never_paused() {
    let paused = Fake {
        pauses: vec![3],
        ..Fake::new(Hint::Tile)
    };
    let stop = stops_at_then_resumes_as_if_never_stopped(&paused, 3);
    assert!(
        matches!(&stop, StopReason::Paused { by } if by.contains("n3")),
        "{stop:?}"
    );
    assert!(!stop.is_normal());
}

#[test]
fn a_provider_refusal_stops_the_search_at_once_and_a_resume_grows_that_node() {
    let refused = Fake {
        refusals: vec![2],
        ..Fake::new(Hint::Tile)
    };
    let stop = stops_at_then_resumes_as_if_never_stopped(&refused, 2);
    assert!(
        matches!(&stop, StopReason::ExpanderFailed { message } if message.contains("n2") && message.contains("rejected")),
        "{stop:?}"
    );
    // Not retried, no node after it: a rejected key does not fix itself.
    assert_eq!(
        refused.expanded.lock().unwrap().as_slice(),
        &[NodeId(0), NodeId(1), NodeId(2)]
    );
}

/// Node 1 reads slower than the start alone but was decided faster in the same rounds; node
/// 2 reads fastest alone but was decided slower than node 1 in the same rounds.
struct Paired;

impl Expander for Paired {
    fn expand(&self, req: &Expansion, _e: &dyn EventSink) -> Result<Expanded, ExpandError> {
        use ksmith_judge::decide::{Decision, Evidence, NotBetterWhy};
        let evidence = |speedup: f64| Evidence {
            speedup,
            low: speedup * 0.9,
            high: speedup * 1.1,
            paired: true,
            disturbed: false,
        };
        let (alone, vs_parent) = match req.node.0 {
            0 => (1.2, None),
            1 => (
                1.0,
                Some(Decision::Better {
                    evidence: evidence(1.5),
                }),
            ),
            2 => (
                2.0,
                Some(Decision::NotBetter {
                    evidence: evidence(0.6),
                    why: NotBetterWhy::Slower,
                }),
            ),
            _ => (1.1, None),
        };
        let src = format!("// node {}\n", req.node.0);
        let h = ksmith_task::content_hash(src.as_bytes());
        Ok(Expanded {
            plan: format!("## Title\nnode {}", req.node.0),
            source: Some(src),
            code_hash: Some(h.clone()),
            norm_hash: Some(h),
            duplicate_of: None,
            outcome: NodeOutcome {
                status: Some(Status::Passed),
                speedup: Some(alone),
                interval: Some((alone * 0.9, alone * 1.1)),
                roofline_fraction: None,
                eval_id: None,
                vs_parent,
            },
            spend: Spend {
                calls: 1,
                evaluations: 1,
                ..Spend::default()
            },
            feedback: Default::default(),
        })
    }
}

#[test]
fn a_loop_grows_from_what_the_same_rounds_decided_not_from_separate_figures() {
    let mut s = Search::new(settings(StrategySettings::Loop, 4, 1)).unwrap();
    let r = s.run(&Paired, &NullSink, &mut NoPersist).unwrap();
    let parents: Vec<Option<NodeId>> = r.nodes.iter().map(|n| n.parent).collect();
    // Node 2 grows from node 1 (decided faster than the start), node 3 from node 1 again
    // (node 2 was decided slower than it, whatever its 2.0x alone).
    assert_eq!(
        parents,
        [None, Some(NodeId(0)), Some(NodeId(1)), Some(NodeId(1))]
    );
    assert_eq!(r.best, Some(NodeId(1)));
}

/// Crash after every possible save; resuming from the last saved state gives the same final
/// tree as an uninterrupted run, and never expands a node that had finished.
#[test]
fn resume_after_a_crash_mid_node_gives_the_same_tree() {
    for strategy in [
        StrategySettings::Beam {
            width: 2,
            branches: 2,
            depth: None,
        },
        StrategySettings::Evolve {
            islands: 2,
            migrate_every: 3,
            elite_prob: 0.6,
            inspirations: 1,
        },
        StrategySettings::Parallel {
            trajectories: 3,
            depth: None,
        },
    ] {
        let st = settings(strategy, 14, 3);
        let f = Fake::new(Hint::Tile);
        let (whole, _) = run(st.clone(), &f);
        let mut crashes = 0;
        for k in 1..40 {
            let f = Fake::new(Hint::Tile);
            let mut mem = MemoryPersist {
                crash_after: Some(k),
                ..MemoryPersist::default()
            };
            let mut s = Search::new(st.clone()).expect("settings");
            match s.run(&f, &NullSink, &mut mem) {
                Err(SearchError::Persist(PersistError::Crash(_))) => crashes += 1,
                Ok(_) => break,
                Err(e) => panic!("{e}"),
            }
            let saved = parse_state(mem.states.last().expect("a save")).expect("parses");
            let finished: Vec<NodeId> = saved
                .graph
                .entries
                .iter()
                .filter(|e| e.finished)
                .map(|e| e.node.id)
                .collect();
            let f2 = Fake::new(Hint::Tile);
            let mut resumed = Search::resume(saved).expect("resumes");
            resumed
                .run(&f2, &NullSink, &mut MemoryPersist::default())
                .expect("resumed run");
            let again = f2.expanded.lock().expect("lock").clone();
            assert!(
                again.iter().all(|id| !finished.contains(id)),
                "crash after {k}: re-expanded a finished node"
            );
            assert_eq!(resumed.state.graph, whole.state.graph, "crash after {k}");
            assert_eq!(resumed.state.bandit, whole.state.bandit);
            assert_eq!(resumed.state.rng, whole.state.rng);
        }
        assert!(crashes > 10);
    }
}

#[test]
fn bad_settings_name_the_parameter() {
    let e = Search::new(SearchSettings::new(StrategySettings::Beam {
        width: 0,
        branches: 2,
        depth: None,
    }))
    .err()
    .expect("refused");
    assert!(e.to_string().contains("width"), "{e}");
    let mut st = SearchSettings::new(StrategySettings::Loop);
    st.jobs = 0;
    assert!(Search::new(st)
        .err()
        .expect("refused")
        .to_string()
        .contains("jobs"));
}

#[test]
fn overhead_is_measured() {
    let f = Fake::new(Hint::Tile);
    let (_, r) = run(
        settings(StrategySettings::Greedy { branch_cap: 3 }, 50, 1),
        &f,
    );
    assert!(r.overhead_per_node_s > 0.0 && r.overhead_per_node_s < 0.05);
}
