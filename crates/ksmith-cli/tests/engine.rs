//! The search engine's real expander (`ksmith_search::agent::AgentExpander`) on a starter task
//! with the scripted provider, the real compiler, judge and SQLite: a hinted node is grown to a
//! passed candidate, a node interrupted after its first LLM call replays that call when it is
//! grown again, and the same code proposed again (in the run, or in a later run on the same
//! machine) is a duplicate that is not judged again, while code that only normalizes equally
//! (other comments; a `// ... \` comment that swallows a line in C) is judged on its own.

mod common;

use common::{fresh_store, root, small_task};
use ksmith_backend::c::Compiler;
use ksmith_backend::hw;
use ksmith_harness::PythonEnv;
use ksmith_judge::{Judge, JudgeConfig, Status};
use ksmith_search::agent::{AgentExpander, ExpanderSettings, JudgeFactory};
use ksmith_search::{
    Event, EventSink, ExpandError, Expanded, Expander, Expansion, Hint, Node, NodeId, NodeState,
};
use ksmith_store::{RunRow, RunStatus, Store};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

const WORKLOADS: &str = "[[workloads]]\naxes = { M = 128, N = 1000 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n";

/// A correct softmax (one reciprocal per row), as the implementer writes it.
const KERNEL: &str = "#include <math.h>\n#include <stdint.h>\n\n/* one reciprocal per row */\nvoid softmax(const float* x, float* y, int64_t M, int64_t N) {\n    for (int64_t i = 0; i < M; i++) {\n        const float* xr = x + i * N;\n        float* yr = y + i * N;\n        float m = xr[0];\n        for (int64_t j = 1; j < N; j++)\n            if (xr[j] > m) m = xr[j];\n        float s = 0.0f;\n        for (int64_t j = 0; j < N; j++) {\n            yr[j] = expf(xr[j] - m);\n            s += yr[j];\n        }\n        const float r = 1.0f / s;\n        for (int64_t j = 0; j < N; j++)\n            yr[j] *= r;\n    }\n}\n";

/// A twin of [`KERNEL`] that normalizes to the same text but is another program: the compiler
/// joins the backslash-newline before removing the comment, so the comment swallows the sum
/// (the row sum stays 0 and every output is inf); a normalizer that drops the comment first
/// keeps the sum.
fn kernel_backslash_twin() -> String {
    let twin = KERNEL.replace(
        "            yr[j] = expf(xr[j] - m);\n            s += yr[j];",
        "            yr[j] = expf(xr[j] - m); // exp \\\n            s += yr[j];",
    );
    assert_ne!(twin, KERNEL);
    twin
}

/// The same program with other comments and layout (CRLF included).
fn kernel_reformatted() -> String {
    KERNEL
        .replace(
            "/* one reciprocal per row */",
            "// same kernel, other comments",
        )
        .replace("    ", "  ")
        .replace('\n', "\r\n")
}

fn reply(role: &str, expect: &[&str], text: &str) -> String {
    assert!(!text.contains("'''"));
    let expect: Vec<String> = expect.iter().map(|e| format!("{e:?}")).collect();
    format!(
        "[[reply]]\nrole = \"{role}\"\nexpect = [{}]\ntext = '''\n{text}'''\n\n",
        expect.join(", ")
    )
}

fn plan(title: &str) -> String {
    format!("## Title\n{title}\n## Strategy\nMultiply by one reciprocal per row.\n## Expected effect\nabout 1.1x faster than the current best\n## Risks\nRounding.\n")
}

fn code(src: &str) -> String {
    format!("kernel.c\n```c\n{src}```\n")
}

fn script(dir: &Path, name: &str, replies: &[String]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, replies.concat()).unwrap();
    format!("scripted:{}", p.display())
}

fn judge_factory(store: PathBuf) -> JudgeFactory {
    Box::new(move || {
        let compiler = Compiler::detect()?;
        let env = PythonEnv::resolve(None, &|_| {})?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (hw, _) = hw::load_or_measure(&store.join("hw.json"), &compiler, threads, false)?;
        let mut config = JudgeConfig::new(store.join("cache"), threads);
        config.min_time = Duration::from_millis(20);
        config.seeds = vec![1, 2];
        Ok(Judge::new(config, env, compiler, hw))
    })
}

fn create_run(store: &Path, id: &str, task: &Path) {
    let s = Store::open(store).unwrap();
    s.create_run(&RunRow {
        id: id.into(),
        created_at: String::new(),
        updated_at: String::new(),
        task_dir: task.display().to_string(),
        task: "softmax".into(),
        // The tests the run is frozen to (a node re-reads the task and compares).
        tests_hash: ksmith_task::Task::load(task).unwrap().content_hash,
        model: "scripted".into(),
        mode: "search".into(),
        options: "{}".into(),
        status: RunStatus::Running,
        stop_reason: None,
        active_s: 0.0,
        out_dir: None,
    })
    .unwrap();
}

fn expander(store: &Path, run: &str, task: &Path, model: String) -> AgentExpander {
    let start = root().join("tasks/starter/softmax/solutions/naive");
    expander_from(store, run, task, model, Some(start))
}

fn expander_from(
    store: &Path,
    run: &str,
    task: &Path,
    model: String,
    start: Option<PathBuf>,
) -> AgentExpander {
    let settings = ExpanderSettings {
        run: run.into(),
        store_dir: store.to_path_buf(),
        task_dir: task.to_path_buf(),
        model,
        start,
        fix_attempts: 1,
        prompts: None,
        knowledge: Vec::new(),
        stages: Default::default(),
    };
    match AgentExpander::new(settings, judge_factory(store.to_path_buf())) {
        Ok(x) => x,
        Err(e) => panic!("expander: {e}"),
    }
}

fn request(node: u64, parent: Option<(Node, String)>, hint: Hint) -> Expansion {
    let lineage = parent
        .as_ref()
        .map(|(p, _)| {
            vec![format!(
                "node {} ({}): {:?}",
                p.id, p.hint, p.outcome.speedup
            )]
        })
        .unwrap_or_default();
    Expansion {
        node: NodeId(node),
        parent_source: parent.as_ref().map(|(_, s)| s.clone()),
        parent: parent.map(|(p, _)| p),
        lineage,
        tried: Vec::new(),
        search_best: None,
        hint,
        inspirations: Vec::new(),
        inner_iterations: 1,
        seed: 7,
        model: None,
        max_calls: None,
        last: false,
    }
}

fn node_of(id: u64, hint: Hint, e: &Expanded) -> Node {
    Node {
        id: NodeId(id),
        parent: None,
        depth: 0,
        hint,
        state: NodeState::Done,
        plan: e.plan.clone(),
        code_hash: e.code_hash.clone(),
        norm_hash: e.norm_hash.clone(),
        duplicate_of: e.duplicate_of,
        outcome: e.outcome.clone(),
        spend: e.spend,
        feedback: e.feedback.clone(),
    }
}

/// Collects the progress lines.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl EventSink for Lines {
    fn emit(&self, event: Event) {
        if let Event::Progress { message, .. } = event {
            self.0.lock().unwrap().push(message);
        }
    }
}

fn count(store: &Path, sql: &str, run: &str) -> i64 {
    let c = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
    c.query_row(sql, [run], |r| r.get(0)).unwrap()
}

fn evaluations(store: &Path) -> i64 {
    let c = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
    c.query_row("SELECT COUNT(*) FROM evaluations", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_hinted_node_replays_its_journal_and_a_duplicate_is_not_judged_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-1";
    create_run(&store, run, &task);
    let hint = Hint::Vectorize;
    let planner = reply(
        "planner",
        &[hint.instruction()],
        &plan("Reciprocal per row"),
    );

    // 1. Node 0 is interrupted after its first LLM call: the script has no reply for the second.
    let cut = script(tmp.path(), "cut.toml", std::slice::from_ref(&planner));
    let x = expander(&store, run, &task, cut);
    let lines = Lines::default();
    match x.expand(&request(0, None, hint), &lines) {
        Err(ExpandError::Failed(e)) => assert!(format!("{e:#}").contains("implementer"), "{e:#}"),
        other => panic!("expected a provider failure, got {other:?}"),
    }
    let ok_calls = "SELECT COUNT(*) FROM llm_calls WHERE run = ?1 AND error IS NULL";
    assert_eq!(
        count(&store, ok_calls, run),
        1,
        "the planner call is journaled"
    );
    let planner_prompt: String = rusqlite::Connection::open(store.join("ksmith.db"))
        .unwrap()
        .query_row(
            "SELECT prompt FROM llm_calls WHERE run = ?1 AND node = 0 AND node_seq = 0",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        planner_prompt.contains(hint.instruction()),
        "the hint is in the stored planner prompt:\n{planner_prompt}"
    );
    assert_eq!(evaluations(&store), 0, "nothing was judged");
    drop(x);

    // 2. Grown again (a new process): the planner call is replayed, not asked again. The
    // script's entry 0 would answer a repeated planner call; entry 1 answers the implementer.
    let full = script(
        tmp.path(),
        "full.toml",
        &[
            planner.clone(),
            reply("implementer", &["Reciprocal per row"], &code(KERNEL)),
            reply(
                "planner",
                &[Hint::Unroll.instruction()],
                &plan("Unroll by four"),
            ),
            reply(
                "implementer",
                &["Unroll by four"],
                &code(&kernel_reformatted()),
            ),
            reply(
                "planner",
                &[Hint::Simplify.instruction()],
                &plan("Back to the first"),
            ),
            reply("implementer", &["Back to the first"], &code(KERNEL)),
        ],
    );
    let x = expander(&store, run, &task, full);
    let lines = Lines::default();
    let n0 = match x.expand(&request(0, None, hint), &lines) {
        Ok(e) => e,
        Err(e) => panic!("node 0: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    assert!(
        said.contains("planner reply replayed from the journal"),
        "{said}"
    );
    assert_eq!(n0.outcome.status, Some(Status::Passed), "{said}");
    assert!(n0.outcome.passed() && n0.outcome.speedup.unwrap() > 0.0);
    assert!(n0.outcome.interval.is_some() && n0.outcome.roofline_fraction.is_some());
    assert!(n0.outcome.eval_id.is_some() && n0.duplicate_of.is_none());
    assert_eq!(n0.source.as_deref(), Some(KERNEL));
    assert!(n0.plan.contains("Reciprocal per row"));
    assert_eq!(n0.spend.calls, 2, "the replayed call counts for the node");
    assert_eq!(n0.spend.evaluations, 1);
    assert!(n0.spend.tokens > 0 && n0.spend.wall_s > 0.0);
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM llm_calls WHERE run = ?1 AND role = 'planner'",
            run
        ),
        1,
        "the planner was not asked twice"
    );
    assert_eq!(count(&store, ok_calls, run), 2);
    let evals = evaluations(&store);
    assert_eq!(evals, 1);

    // 3. Node 1 proposes the same program in other text (other comments, layout, CRLF): the
    // same normalized code, but other bytes, so it is judged on its own.
    let parent = node_of(0, hint, &n0);
    let lines = Lines::default();
    let n1 = match x.expand(
        &request(1, Some((parent.clone(), KERNEL.to_string())), Hint::Unroll),
        &lines,
    ) {
        Ok(e) => e,
        Err(e) => panic!("node 1: {e}"),
    };
    assert_eq!(n1.duplicate_of, None);
    assert_eq!(n1.norm_hash, n0.norm_hash, "grouped with node 0 in reports");
    assert_ne!(n1.code_hash, n0.code_hash);
    assert_ne!(
        n1.outcome.eval_id, n0.outcome.eval_id,
        "judged, not inherited"
    );
    assert_eq!(n1.outcome.status, Some(Status::Passed));
    // Judged once, then timed against its parent in the same rounds (two evaluations per
    // side-by-side timing, more rounds when it was undecided on a wide interval).
    assert!(n1.outcome.vs_parent.is_some(), "{:?}", n1.outcome);
    let timed = n1.spend.evaluations - 1;
    assert!(timed >= 2 && timed % 2 == 0, "{}", n1.spend.evaluations);
    let evals = evaluations(&store);
    assert_eq!(evals, 2 + timed as i64);

    // 4. Node 2 proposes node 0's code byte for byte: a duplicate, its evaluation reused.
    let lines = Lines::default();
    let n2 = match x.expand(
        &request(2, Some((parent, KERNEL.to_string())), Hint::Simplify),
        &lines,
    ) {
        Ok(e) => e,
        Err(e) => panic!("node 2: {e}"),
    };
    assert_eq!(n2.duplicate_of, Some(NodeId(0)));
    assert_eq!(n2.outcome.eval_id, n0.outcome.eval_id);
    assert_eq!(n2.spend.evaluations, 0);
    assert_eq!(evaluations(&store), evals, "no evaluation row was added");
    let said = lines.0.lock().unwrap().join("\n");
    assert!(said.contains("same code as node n0"), "{said}");
    drop(x);

    // 5. A later run on the same machine and task. Its first node is the backslash twin of
    // node 0: the same normalized code, a different program. It gets its own verdict (it
    // fails), never node 0's PASSED. Its second node is node 0's code: the store's index
    // finds the earlier verdict, nothing is judged.
    let run2 = "run-engine-2";
    create_run(&store, run2, &task);
    let again = script(
        tmp.path(),
        "again.toml",
        &[
            reply(
                "planner",
                &[Hint::Simplify.instruction()],
                &plan("Reciprocal per row"),
            ),
            reply("implementer", &[], &code(&kernel_backslash_twin())),
            // The fixer answers with the twin again, under another comment: it fails too.
            reply(
                "fixer",
                &[],
                &code(&kernel_backslash_twin().replace("// exp", "// exponent")),
            ),
            reply("planner", &[Hint::Unroll.instruction()], &plan("Again")),
            reply("implementer", &[], &code(KERNEL)),
        ],
    );
    let x = expander(&store, run2, &task, again);
    let lines = Lines::default();
    let twin = match x.expand(&request(0, None, Hint::Simplify), &lines) {
        Ok(e) => e,
        Err(e) => panic!("run 2 node 0: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    assert_eq!(twin.norm_hash, n0.norm_hash, "the twin normalizes equally");
    assert_ne!(twin.outcome.eval_id, n0.outcome.eval_id, "{said}");
    assert!(
        !twin.outcome.passed(),
        "the twin writes inf, whatever its twin's verdict: {:?}\n{said}",
        twin.outcome
    );
    assert!(!said.contains("reused"), "{said}");
    assert_eq!(
        twin.spend.evaluations, 2,
        "the twin and the fixer's version"
    );
    let evals = evaluations(&store);
    let lines = Lines::default();
    let m1 = match x.expand(&request(1, None, Hint::Unroll), &lines) {
        Ok(e) => e,
        Err(e) => panic!("run 2 node 1: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    // New to this run (not a duplicate node), but not judged again: the earlier verdict.
    assert_eq!(m1.duplicate_of, None, "{said}");
    assert!(said.contains(&format!("of run {run}")), "{said}");
    assert_eq!(m1.spend.evaluations, 0);
    assert_eq!(m1.outcome.eval_id, n0.outcome.eval_id);
    assert_eq!(evaluations(&store), evals);
}

#[test]
fn with_no_starting_solution_the_first_node_writes_a_kernel_from_the_task() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-first";
    create_run(&store, run, &task);
    let hint = Hint::FirstKernel;
    // The planner sees the skeleton (signature, no body) and is asked for a first correct
    // kernel; the implementer's fix loop then gets the failure of a wrong first try.
    let wrong = KERNEL.replace("yr[j] *= r;", "yr[j] *= 2.0f * r;");
    let model = script(
        tmp.path(),
        "first.toml",
        &[
            reply(
                "planner",
                &[hint.instruction(), "not written yet", "Nothing passes yet"],
                &plan("A first correct softmax"),
            ),
            reply("implementer", &["A first correct softmax"], &code(&wrong)),
            reply("fixer", &["wrong results", "2.0f * r"], &code(KERNEL)),
        ],
    );
    let x = expander_from(&store, run, &task, model, None);
    let lines = Lines::default();
    let n0 = match x.expand(&request(0, None, hint), &lines) {
        Ok(e) => e,
        Err(e) => panic!("node 0: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    assert_eq!(n0.outcome.status, Some(Status::Passed), "{said}");
    assert!(
        said.contains("after fix 1 (wrong results): passed"),
        "{said}"
    );
    assert_eq!(n0.source.as_deref(), Some(KERNEL));
    assert_eq!((n0.spend.calls, n0.spend.evaluations), (3, 2));
    assert_eq!(evaluations(&store), 2);
}

#[test]
fn two_nodes_expand_at_once_from_one_expander() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-jobs";
    create_run(&store, run, &task);
    // A `command:` model (the scripted one answers by global call order, which parallel
    // nodes do not fix): per hint a plan, and per plan a different correct kernel.
    let other = KERNEL.replace("yr[j] *= r;", "yr[j] = yr[j] * r;");
    std::fs::write(tmp.path().join("a.c"), KERNEL).unwrap();
    std::fs::write(tmp.path().join("b.c"), &other).unwrap();
    std::fs::write(tmp.path().join("plan-a.md"), plan("Reciprocal per row")).unwrap();
    std::fs::write(tmp.path().join("plan-b.md"), plan("Unroll by four")).unwrap();
    let model_sh = format!(
        "prompt=$(cat)\ncase \"$KSMITH_ROLE\" in\n  planner) case \"$prompt\" in *'(unroll)'*) cat {d}/plan-b.md ;; *) cat {d}/plan-a.md ;; esac ;;\n  *) printf 'kernel.c\\n```c\\n'; case \"$prompt\" in *'Unroll by four'*) cat {d}/b.c ;; *) cat {d}/a.c ;; esac; printf '```\\n' ;;\nesac\n",
        d = tmp.path().display()
    );
    std::fs::write(tmp.path().join("model.sh"), model_sh).unwrap();
    let model = format!("command:sh {}", tmp.path().join("model.sh").display());
    let x = expander(&store, run, &task, model);
    let lines = Lines::default();
    let hints = [Hint::Vectorize, Hint::Unroll];
    let out: Vec<Result<Expanded, ExpandError>> = std::thread::scope(|sc| {
        let handles: Vec<_> = hints
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let (x, lines) = (&x, &lines);
                sc.spawn(move || x.expand(&request(i as u64, None, *h), lines))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let said = lines.0.lock().unwrap().join("\n");
    let got: Vec<Expanded> = out
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}\n{said}")))
        .collect();
    assert_eq!(got[0].source.as_deref(), Some(KERNEL));
    assert_eq!(got[1].source.as_deref(), Some(other.as_str()));
    for g in &got {
        assert!(g.outcome.passed(), "{:?}\n{said}", g.outcome);
        assert_eq!((g.spend.calls, g.spend.evaluations), (2, 1));
        assert!(g.duplicate_of.is_none());
    }
    assert_ne!(got[0].outcome.eval_id, got[1].outcome.eval_id);
    // Each node's calls are journaled under it, in order; the run's seqs are all distinct.
    let c = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
    let rows: Vec<(i64, i64, i64, String)> = c
        .prepare("SELECT node, node_seq, seq, role FROM llm_calls WHERE run = ?1 ORDER BY node, node_seq")
        .unwrap()
        .query_map([run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let shape: Vec<(i64, i64, &str)> = rows.iter().map(|r| (r.0, r.1, r.3.as_str())).collect();
    assert_eq!(
        shape,
        vec![
            (0, 0, "planner"),
            (0, 1, "implementer"),
            (1, 0, "planner"),
            (1, 1, "implementer")
        ]
    );
    let mut seqs: Vec<i64> = rows.iter().map(|r| r.2).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    assert_eq!(evaluations(&store), 2);
}

#[test]
fn a_node_whose_journal_diverged_goes_on_with_new_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-diverged";
    create_run(&store, run, &task);
    let planner = reply("planner", &[], &plan("Reciprocal per row"));
    // 1. Interrupted after its planner call.
    let cut = script(tmp.path(), "cut.toml", std::slice::from_ref(&planner));
    let x = expander(&store, run, &task, cut);
    assert!(x
        .expand(&request(0, None, Hint::Vectorize), &Lines::default())
        .is_err());
    drop(x);
    // The journal now says the session went another way at call 0 (as when a verdict comes
    // out differently on the way back).
    rusqlite::Connection::open(store.join("ksmith.db"))
        .unwrap()
        .execute(
            "UPDATE llm_calls SET role = 'fixer' WHERE run = ?1 AND node = 0 AND node_seq = 0",
            [run],
        )
        .unwrap();
    // 2. Grown again: not a failure on every resume, but new calls after the stored ones
    // (the scripted model answers by run seq: 0 and 1 were taken by the first attempt).
    let implementer = reply("implementer", &[], &code(KERNEL));
    let full = script(
        tmp.path(),
        "full.toml",
        &[planner.clone(), implementer.clone(), planner, implementer],
    );
    let x = expander(&store, run, &task, full);
    let lines = Lines::default();
    let n0 = match x.expand(&request(0, None, Hint::Vectorize), &lines) {
        Ok(e) => e,
        Err(e) => panic!("node 0 after a diverged journal: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    assert!(said.contains("journal diverged at call 0"), "{said}");
    assert_eq!(n0.outcome.status, Some(Status::Passed), "{said}");
    let seqs: Vec<(i64, String)> = {
        let c = rusqlite::Connection::open(store.join("ksmith.db")).unwrap();
        let mut st = c
            .prepare("SELECT node_seq, role FROM llm_calls WHERE run = ?1 AND node = 0 AND error IS NULL ORDER BY node_seq")
            .unwrap();
        st.query_map([run], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        seqs,
        vec![
            (0, "fixer".to_string()),
            (2, "planner".to_string()),
            (3, "implementer".to_string())
        ],
        "the paid call is kept, the new ones follow the stored ones"
    );
}

#[test]
fn a_node_grown_again_counts_the_evaluation_it_paid_for_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-regrown";
    create_run(&store, run, &task);
    let replies = [
        reply("planner", &[], &plan("Reciprocal per row")),
        reply("implementer", &[], &code(KERNEL)),
    ];
    let full = script(tmp.path(), "full.toml", &replies);
    let first = expander(&store, run, &task, full.clone())
        .expand(&request(0, None, Hint::Vectorize), &Lines::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.spend.evaluations, 1);
    assert_eq!(evaluations(&store), 1);
    // Killed before the engine recorded the node: it is grown again from its journal. The
    // evaluation it paid for is found, not judged again, and still counts once.
    let again = expander(&store, run, &task, full)
        .expand(&request(0, None, Hint::Vectorize), &Lines::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.outcome.eval_id, first.outcome.eval_id);
    assert_eq!(evaluations(&store), 1, "nothing judged again");
    assert_eq!(again.spend.evaluations, 1, "the paid evaluation counts");
    assert_eq!(again.spend.calls, 2, "the replayed calls count");
}

#[test]
fn a_kernel_with_a_huge_library_fails_its_build_and_the_node_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    let run = "run-engine-huge";
    create_run(&store, run, &task);
    let hint = Hint::Simplify;
    // A 768 MiB initialized table: once it filled the runner's directory and stopped the
    // whole search ("expander failed"); now its build is a verdict the fixer hears about.
    let huge = KERNEL.replace(
        "/* one reciprocal per row */",
        "static const float table[192u << 20] = {1.0f, [100000000] = 2.0f};\nfloat ksmith_table(int64_t i) { return table[i]; }",
    );
    let model = script(
        tmp.path(),
        "huge.toml",
        &[
            reply("planner", &[hint.instruction()], &plan("A table")),
            reply("implementer", &["A table"], &code(&huge)),
            reply("fixer", &["library_too_large"], &code(KERNEL)),
        ],
    );
    let x = expander(&store, run, &task, model);
    let lines = Lines::default();
    let n0 = match x.expand(&request(0, None, hint), &lines) {
        Ok(e) => e,
        Err(e) => panic!("node 0: {e}"),
    };
    let said = lines.0.lock().unwrap().join("\n");
    assert_eq!(n0.outcome.status, Some(Status::Passed), "{said}");
    assert_eq!((n0.spend.calls, n0.spend.evaluations), (3, 2), "{said}");
    // Nothing of the huge build stays in the build cache.
    let big = walk_sizes(&store.join("cache/build"))
        .into_iter()
        .filter(|s| *s > 64 << 20)
        .count();
    assert_eq!(big, 0, "a file over 64 MiB stayed in the build cache");
}

fn walk_sizes(dir: &Path) -> Vec<u64> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_sizes(&p));
        } else if let Ok(m) = e.metadata() {
            out.push(m.len());
        }
    }
    out
}

/// A reviewer answering from a list, recording what it was shown.
struct ListReviewer {
    answers: Mutex<Vec<ksmith_search::agent::state::Verdict>>,
    shown: Mutex<Vec<(String, String)>>,
}

impl ksmith_search::agent::state::Reviewer for ListReviewer {
    fn review(
        &self,
        step: &str,
        what: &str,
        _shown: &str,
        _editable: &str,
    ) -> anyhow::Result<ksmith_search::agent::state::Verdict> {
        self.shown
            .lock()
            .unwrap()
            .push((step.to_string(), what.to_string()));
        let mut a = self.answers.lock().unwrap();
        Ok(if a.is_empty() {
            ksmith_search::agent::state::Verdict::Approve
        } else {
            a.remove(0)
        })
    }
}

#[test]
fn a_reviewed_node_takes_guidance_and_edits_pauses_on_quit_and_replays_its_answers() {
    use ksmith_search::agent::stages::Stages;
    use ksmith_search::agent::state::Verdict;
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("softmax", tmp.path(), WORKLOADS);
    create_run(&store, "run-review", &task);
    let m = script(
        tmp.path(),
        "review",
        &[
            reply(
                "planner",
                &["Task `softmax`"],
                &plan("One reciprocal per row"),
            ),
            // The reviewer's guidance on the plan reaches the implementer.
            reply("implementer", &["Keep the loop order"], &code(KERNEL)),
        ],
    );
    let reviewer = Arc::new(ListReviewer {
        answers: Mutex::new(vec![
            Verdict::Guidance("Keep the loop order.".into()),
            // The change is edited by the person: the edited source is what is judged.
            Verdict::Edited(kernel_reformatted()),
        ]),
        shown: Mutex::new(Vec::new()),
    });
    let grown = |r: Arc<ListReviewer>| {
        expander(&store, "run-review", &task, m.clone()).with_stages(Stages {
            reviewer: Some(r),
            ..Stages::default()
        })
    };
    let x = grown(reviewer.clone());
    // The root is the run's start, judged as given (no call, no review); node 1 grows from it.
    let root = x
        .expand(&request(0, None, Hint::FirstKernel), &Lines::default())
        .unwrap();
    let parent = (
        node_of(0, Hint::FirstKernel, &root),
        root.source.clone().unwrap(),
    );
    let req = request(1, Some(parent.clone()), Hint::Vectorize);
    // Two review points with the stages off: the plan (guidance) and the change (edited).
    let out = x.expand(&req, &Lines::default()).unwrap();
    assert_eq!(out.outcome.status, Some(Status::Passed), "{out:?}");
    assert_eq!(
        out.source.as_deref(),
        Some(kernel_reformatted().as_str()),
        "the edited source is the node's"
    );
    let shown: Vec<String> = reviewer
        .shown
        .lock()
        .unwrap()
        .iter()
        .map(|(s, w)| format!("{s} / {w}"))
        .collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].ends_with("/ plan") && shown[1].ends_with("/ code change"),
        "{shown:?}"
    );
    // Grown again (as after a kill): the answers are replayed, the reviewer is not asked.
    let again = Arc::new(ListReviewer {
        answers: Mutex::new(vec![Verdict::Quit]),
        shown: Mutex::new(Vec::new()),
    });
    let out2 = grown(again.clone())
        .expand(&req, &Lines::default())
        .unwrap();
    assert_eq!(out2.source, out.source);
    assert!(again.shown.lock().unwrap().is_empty());
    // A node whose reviewer quits pauses the run (resumable), nothing is judged for it.
    let quitter = Arc::new(ListReviewer {
        answers: Mutex::new(vec![Verdict::Quit]),
        shown: Mutex::new(Vec::new()),
    });
    let m2 = script(
        tmp.path(),
        "review2",
        // The run's calls so far took seqs 0 and 1: this expander's first call is seq 2.
        &[
            reply("planner", &[], &plan("unused")),
            reply("planner", &[], &plan("unused")),
            reply("planner", &["Task `softmax`"], &plan("Another")),
        ],
    );
    let x2 = expander(&store, "run-review", &task, m2).with_stages(Stages {
        reviewer: Some(quitter),
        ..Stages::default()
    });
    match x2.expand(&request(2, Some(parent), Hint::Tile), &Lines::default()) {
        Err(ExpandError::Paused(why)) => assert!(why.contains("node n2"), "{why}"),
        other => panic!("expected a pause, got {other:?}"),
    }
}
