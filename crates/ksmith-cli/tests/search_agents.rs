//! Graph search with a real LLM-agent expander through the real binary: `optimize --strategy S
//! --model command:...` on a starter task and a KSBench task, each node a short agent session
//! judged by the real judge; the root is the starting solution; finalists re-checked on fresh
//! seeds and re-timed together; the winner written; a search killed with SIGKILL resumes
//! without repeating an LLM call or an evaluation.

mod common;

use common::*;
use std::path::{Path, PathBuf};

const WORKLOADS: &str = "[[workloads]]\naxes = { M = 64, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n";

/// A `command:` model: the planner names the call, the implementer returns the start's kernel
/// plus a function named after the call (distinct code per call, so nothing is a duplicate
/// unless `dup_every` makes every such call return the same variant). `delay` seconds of sleep
/// before each reply leave room to kill the search mid-node.
fn model(dir: &Path, start: &Path, delay: u32, dup_every: u32) -> String {
    let sh = format!(
        "prompt=$(cat)\nsleep {delay}\nv=$KSMITH_CALL_SEQ\nif [ {dup_every} -gt 0 ] && [ $((v % {dup_every})) -eq 1 ]; then v=dup; fi\ncase \"$KSMITH_ROLE\" in\n  planner) printf '## Title\\nVariant %s\\n## Strategy\\nKeep the kernel, add a helper.\\n## Expected effect\\nabout 1.0x\\n## Risks\\nNone.\\n' \"$v\" ;;\n  *) printf 'kernel.c\\n```c\\n'; cat '{start}'; printf '\\nint ks_variant_%s(void) {{ return 1; }}\\n```\\n' \"$v\" ;;\nesac\n",
        start = start.display()
    );
    let path = dir.join("model.sh");
    std::fs::write(&path, sh).unwrap();
    format!("command:sh {}", path.display())
}

fn db(store: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(store.join("ksmith.db")).unwrap()
}

fn run_id(out: &str) -> String {
    out.split_whitespace()
        .find(|w| w.starts_with("run-"))
        .map(|w| w.trim_end_matches(':').to_string())
        .unwrap_or_else(|| panic!("no run id in:\n{out}"))
}

fn one(store: &Path, sql: &str, run: &str) -> i64 {
    db(store).query_row(sql, [run], |r| r.get(0)).unwrap()
}

/// Nodes as (id, parent, state, speedup).
fn nodes(store: &Path, run: &str) -> Vec<(i64, Option<i64>, String, Option<f64>)> {
    let c = db(store);
    let mut st = c
        .prepare("SELECT id, parent, state, speedup FROM search_nodes WHERE run = ?1 ORDER BY id")
        .unwrap();
    st.query_map([run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn softmax_setup(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let store = fresh_store(tmp);
    let task = small_task("softmax", tmp, WORKLOADS);
    let start = root().join("tasks/starter/softmax/solutions/naive");
    (store, task, start)
}

#[test]
fn every_strategy_grows_agent_nodes_judged_for_real_and_writes_a_rechecked_winner() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, task, start) = softmax_setup(tmp.path());
    let m = model(tmp.path(), &start.join("kernel.c"), 0, 0);
    for (strategy, extra) in [
        (
            "beam",
            &["--width", "2", "--branches", "1", "--jobs", "2"][..],
        ),
        ("loop", &[][..]),
        ("best-of-n", &[][..]),
        ("parallel", &["--n", "2"][..]),
        ("greedy", &[][..]),
        ("evolve", &["--islands", "2"][..]),
    ] {
        let out_dir = tmp.path().join(format!("out-{strategy}"));
        let mut args = vec![
            "optimize",
            task.to_str().unwrap(),
            "--strategy",
            strategy,
            "--model",
            &m,
            "--from",
            start.to_str().unwrap(),
            "--max-nodes",
            "3",
            "--min-time-ms",
            "20",
            "--tune-budget",
            "0",
            "--no-profile",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = ksmith(&store, &args);
        let all = text(&o);
        assert!(o.status.success(), "{strategy}:\n{all}");
        let run = run_id(&all);
        let ns = nodes(&store, &run);
        assert_eq!(ns.len(), 3, "{strategy}: {ns:?}\n{all}");
        // The root is the starting solution, judged as given: no call, passed and timed.
        assert_eq!(ns[0].1, None, "{strategy}");
        assert!(ns[0].3.is_some(), "{strategy}: the start passes: {ns:?}");
        let root_calls = one(
            &store,
            "SELECT COUNT(*) FROM llm_calls WHERE run = ?1 AND node = 0",
            &run,
        );
        assert_eq!(root_calls, 0, "{strategy}");
        // Every other node: a planner and an implementer call journaled under its node, its
        // own evaluation, passed (the kernel is the start's plus a helper function).
        for n in &ns[1..] {
            assert!(n.1.is_some(), "{strategy}: {n:?}");
            assert_eq!(n.2, "done", "{strategy}: {n:?}\n{all}");
            assert!(n.3.is_some(), "{strategy}: passed and timed: {n:?}");
        }
        let calls = one(
            &store,
            "SELECT COUNT(*) FROM llm_calls WHERE run = ?1 AND node IS NOT NULL AND error IS NULL",
            &run,
        );
        assert_eq!(calls, 4, "{strategy}: two calls per grown node\n{all}");
        let status: String = db(&store)
            .query_row("SELECT status FROM runs WHERE id = ?1", [&run], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(status, "finished", "{strategy}");
        assert!(
            all.contains("winner (re-checked on fresh seeds"),
            "{strategy}:\n{all}"
        );
        assert!(
            out_dir.join("solution.toml").exists() && out_dir.join("kernel.c").exists(),
            "{strategy}: the winner is written\n{all}"
        );
    }
}

#[test]
fn a_ksbench_task_searched_greedily_from_its_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = root().join("tasks/ksbench/rmsnorm_llm");
    let start = task.join("solutions/seed");
    let m = model(tmp.path(), &start.join("kernel.c"), 0, 0);
    let o = ksmith(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--strategy",
            "greedy",
            "--model",
            &m,
            "--from",
            start.to_str().unwrap(),
            "--max-nodes",
            "2",
            "--min-time-ms",
            "20",
            "--tune-budget",
            "0",
            "--no-profile",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let run = run_id(&all);
    let ns = nodes(&store, &run);
    assert_eq!(ns.len(), 2, "{ns:?}");
    assert!(
        ns.iter().all(|n| n.2 == "done" && n.3.is_some()),
        "{ns:?}\n{all}"
    );
    assert_eq!(ns[1].1, Some(0));
}

#[test]
fn a_killed_agent_search_resumes_without_repeating_calls_or_evaluations() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, task, start) = softmax_setup(tmp.path());
    // Every second implementer call returns the same variant: duplicates are not judged again.
    let m = model(tmp.path(), &start.join("kernel.c"), 1, 4);
    let args = [
        "optimize",
        task.to_str().unwrap(),
        "--strategy",
        "loop",
        "--model",
        &m,
        "--from",
        start.to_str().unwrap(),
        "--max-nodes",
        "5",
        "--min-time-ms",
        "20",
        "--tune-budget",
        "0",
        "--no-profile",
    ];
    // Killed once node 2's first call is stored (node 2 is then in flight).
    let s2 = store.clone();
    kill_9_when(
        &store,
        &args,
        move || {
            db(&s2)
                .query_row("SELECT COUNT(*) FROM llm_calls WHERE node = 2", [], |r| {
                    r.get::<_, i64>(0)
                })
                .is_ok_and(|n| n > 0)
        },
        std::time::Duration::from_millis(200),
    );
    let run: String = db(&store)
        .query_row("SELECT id FROM runs WHERE mode = 'search'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let before = nodes(&store, &run);
    assert!(before.len() >= 2, "{before:?}");
    let evals_before = one(
        &store,
        "SELECT COUNT(*) FROM evaluations WHERE ?1 = ?1",
        &run,
    );
    let o = ksmith(&store, &["resume", &run]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let after = nodes(&store, &run);
    assert_eq!(after.len(), 5, "{after:?}\n{all}");
    // Finished nodes are unchanged.
    for b in before.iter().filter(|b| b.2 != "expanding") {
        assert!(after.contains(b), "{b:?} changed: {after:?}");
    }
    // No call was made twice: one row per (node, index in node), and the in-flight node's
    // stored call was replayed (its planner call is still the only one at index 0).
    let dup_calls = one(
        &store,
        "SELECT COUNT(*) FROM (SELECT node, node_seq FROM llm_calls WHERE run = ?1 AND error IS NULL GROUP BY node, node_seq HAVING COUNT(*) > 1)",
        &run,
    );
    assert_eq!(dup_calls, 0);
    // No evaluation twice: every evaluation key is distinct, and the duplicate variant was
    // judged once.
    let dup_evals = one(
        &store,
        "SELECT COUNT(*) FROM (SELECT eval_key FROM evaluations WHERE ?1 = ?1 GROUP BY eval_key HAVING COUNT(*) > 1)",
        &run,
    );
    assert_eq!(dup_evals, 0);
    let evals_after = one(
        &store,
        "SELECT COUNT(*) FROM evaluations WHERE ?1 = ?1",
        &run,
    );
    assert!(
        evals_after > evals_before,
        "{evals_before} -> {evals_after}"
    );
    let dups: i64 = after.iter().filter(|n| n.2 == "duplicate").count() as i64;
    assert!(
        dups >= 1 || all.contains("duplicate of"),
        "the repeated variant is reported as a duplicate: {after:?}\n{all}"
    );
}

#[test]
fn a_scripted_search_runs_end_to_end_and_its_report_draws_the_real_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, task, start) = softmax_setup(tmp.path());
    let kernel = std::fs::read_to_string(start.join("kernel.c")).unwrap();
    // A scripted model answers by the run's call order: with one expansion at a time that is
    // node 1's planner and implementer, then node 2's.
    let mut script = String::new();
    for v in ["a", "b"] {
        script.push_str(&format!(
            "[[reply]]\nrole = \"planner\"\ntext = '''\n## Title\nVariant {v}\n## Strategy\nKeep the kernel, add a helper.\n## Expected effect\nabout 1.0x\n## Risks\nNone.\n'''\n\n[[reply]]\nrole = \"implementer\"\ntext = '''\nkernel.c\n```c\n{kernel}\nint ks_scripted_{v}(void) {{ return 1; }}\n```\n'''\n\n"
        ));
    }
    let path = tmp.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    let m = format!("scripted:{}", path.display());
    let o = ksmith(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--strategy",
            "loop",
            "--model",
            &m,
            "--from",
            start.to_str().unwrap(),
            "--max-nodes",
            "3",
            "--min-time-ms",
            "20",
            "--tune-budget",
            "0",
            "--no-profile",
        ],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let run = run_id(&all);
    let ns = nodes(&store, &run);
    assert_eq!(ns.len(), 3, "{ns:?}");
    assert!(ns.iter().all(|n| n.2 == "done" && n.3.is_some()), "{ns:?}");
    assert!(
        all.contains("memory: "),
        "the run's end harvests memory:\n{all}"
    );
    // The HTML report of this real search: every node drawn, the charts, no external URL.
    let html = tmp.path().join("r.html");
    let o = ksmith(&store, &["report", &run, "--out", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg"), "charts and tree are inline SVG");
    for n in ["n0", "n1", "n2"] {
        assert!(page.contains(n), "node {n} is in the report");
    }
    assert!(!page.contains("http://") && !page.contains("https://"));
    // The variants only add a helper, so which one wins (the start included: its diff from
    // itself is "(unchanged)") is the timing's noise; its code is shown either way.
    assert!(
        page.contains("ks_scripted_")
            || page.contains("the winner is the start itself")
            || page.contains("(unchanged)"),
        "the winner's code and diff are shown: {}",
        page.split("<section id=\"winner\">")
            .nth(1)
            .unwrap_or("(no winner section)")
    );
    // The final judgement (finalists re-checked on fresh seeds and held-out shapes, timed
    // together, decided against the start) is what the search printed, what `show`, `runs` and
    // the report name, and what it wrote: one winner everywhere.
    assert!(all.contains("decided: "), "{all}");
    assert!(
        all.contains("finalist 0: PASSED"),
        "the start is a finalist:\n{all}"
    );
    assert!(page.contains("id=\"finalists\"") && page.contains("Winning kernel (the one written)"));
    let o = ksmith(&store, &["show", &run, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let shown: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(shown["kind"], "search");
    assert_eq!(shown["nodes"].as_array().map(Vec::len), Some(3), "{shown}");
    let written = shown["final"]["node"]
        .as_u64()
        .expect("a winner was decided");
    assert!(shown["final"]["finalists"]
        .as_array()
        .is_some_and(|f| !f.is_empty()));
    let o = ksmith(&store, &["show", &run]);
    let out = stdout(&o);
    assert!(out.contains(&format!("{written} (winner)")), "{out}");
    assert!(out.contains(&format!("written: node {written}")), "{out}");
    let o = ksmith(&store, &["runs", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let row = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run.as_str())
        .unwrap();
    assert!(row["best_speedup"].as_f64().is_some(), "{row}");
    assert_eq!(row["final"]["node"].as_u64(), Some(written));
    let report = ksmith(&store, &["report", &run, "--out", html.to_str().unwrap()]);
    assert!(
        stdout(&report).contains("winner (written) ")
            && stdout(&report).contains(&format!("at n{written} ")),
        "{}",
        stdout(&report)
    );
    // Every node with code written as a solution directory, to judge again side by side.
    let dir = tmp.path().join("nodes");
    let o = ksmith(&store, &["show", &run, "--write", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    for n in 0..3 {
        assert!(
            dir.join(format!("node{n}/solution.toml")).is_file(),
            "node {n} written"
        );
    }
    let o = ksmith(
        &store,
        &[
            "eval",
            task.to_str().unwrap(),
            dir.join("node1").to_str().unwrap(),
            "--no-timing",
        ],
    );
    assert!(
        o.status.success(),
        "a written node is a solution: {}",
        text(&o)
    );
}

/// One scripted reply with the substrings its prompt must contain.
fn scripted(role: &str, expect: &[&str], text: &str) -> String {
    let expect: Vec<String> = expect.iter().map(|e| format!("{e:?}")).collect();
    format!(
        "[[reply]]\nrole = \"{role}\"\nexpect = [{}]\ntext = '''\n{text}'''\n\n",
        expect.join(", ")
    )
}

#[test]
fn every_search_node_is_autotuned_and_profiled_and_its_child_is_told_what_they_found() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    // From the naive kernel; node 1 writes the fast one (with a tunable constant). One
    // trajectory (`parallel --n 1`): node 2 grows from node 1 whatever the timings say.
    let start = root().join("tasks/starter/softmax/solutions/naive");
    let kernel =
        std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/fast/kernel.c"))
            .unwrap();
    let plan = |title: &str| {
        format!("## Title\n{title}\n## Strategy\nKeep the kernel, add a helper.\n## Expected effect\nabout 1.0x\n## Risks\nNone.\n")
    };
    let code = |v: &str| {
        format!("kernel.c\n```c\n{kernel}\nint ks_stage_{v}(void) {{ return 1; }}\n```\n")
    };
    let script = [
        scripted("planner", &["Task `softmax`"], &plan("First variant")),
        scripted("implementer", &["First variant"], &code("a")),
        // The autotune planner sees the kernel's constants and its budget.
        scripted(
            "autotune",
            &["CHUNK=8", "at most 2 configurations"],
            "```toml\n[[tunables]]\nname = \"CHUNK\"\nvalues = [8, 16]\n```\n",
        ),
        // The analyst sees the perf profile, the judged timing and what tuning found.
        scripted(
            "profile",
            &[
                "Profiled workload",
                "## Autotuning of this kernel",
                "CHUNK=",
            ],
            "Scalar expf dominates; vectorize the exp.\n",
        ),
        // The child's planner hears its parent's profile summary and tuning, and the lineage
        // line carries the tuning too.
        scripted(
            "planner",
            &[
                "Scalar expf dominates",
                "Autotuning: ",
                "First variant -> PASSED",
                "; autotune: ",
                // Node 1 was timed against its parent (the start) in the same rounds.
                "; against its parent: ",
                "in the same rounds",
                "## The parent node, which this node revises (node n1: ",
            ],
            &plan("Second variant"),
        ),
        scripted("implementer", &["Second variant"], &code("b")),
        scripted(
            "autotune",
            &["## Tuning in earlier iterations"],
            "NO TUNING: the chunk was just tuned.\n",
        ),
        // Node 2 is the node budget's last: no child would read its profile, so none is asked.
    ]
    .concat();
    let path = tmp.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    let m = format!("scripted:{}", path.display());
    let o = ksmith(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--strategy",
            "parallel",
            "--n",
            "1",
            "--model",
            &m,
            "--from",
            start.to_str().unwrap(),
            "--max-nodes",
            "3",
            "--min-time-ms",
            "20",
            "--tune-budget",
            "2",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let run = run_id(&all);
    // Every scripted reply was used, none failed or diverged.
    let roles: Vec<(String, Option<String>)> = {
        let c = db(&store);
        let mut st = c
            .prepare("SELECT role, error FROM llm_calls WHERE run = ?1 ORDER BY seq")
            .unwrap();
        st.query_map([&run], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(roles.iter().all(|(_, e)| e.is_none()), "{roles:?}\n{all}");
    let names: Vec<&str> = roles.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "planner",
            "implementer",
            "autotune",
            "profile",
            "planner",
            "implementer",
            "autotune"
        ],
        "{all}"
    );
    assert!(
        all.contains("profile: skipped, no node is grown after this one"),
        "{all}"
    );
    // The tuner really measured the declared value.
    assert!(
        one(
            &store,
            "SELECT count(*) FROM evaluations WHERE solution_json LIKE '%DCHUNK=16%' AND ?1 <> ''",
            &run
        ) >= 1,
        "{all}"
    );
    // Node 1 keeps what its stages found (stored with the node, for resume and reports).
    let payload: String = db(&store)
        .query_row(
            "SELECT payload FROM search_nodes WHERE run = ?1 AND id = 1",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    let n1: serde_json::Value = serde_json::from_str(&payload).unwrap();
    assert!(
        n1["feedback"]["profile"]
            .as_str()
            .is_some_and(|p| p.contains("Scalar expf dominates")),
        "{n1}"
    );
    assert!(
        n1["feedback"]["tuning"]
            .as_str()
            .is_some_and(|t| t.contains("CHUNK")),
        "{n1}"
    );
    // Its paired comparison with the start is kept with it, with the rule's decision.
    assert!(n1["outcome"]["vs_parent"]["decision"].is_string(), "{n1}");
}
