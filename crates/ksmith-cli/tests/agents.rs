//! End-to-end agent runs with the scripted provider on starter tasks: the real binary, the real
//! compiler and judge, real SQLite. Each scripted reply names the role it answers and text the
//! prompt must contain, so a prompt missing its feedback (diagnostics, mismatch, refusal) fails.

mod common;

use common::{fresh_store, kill_9_when, ksmith, root, small_task, text};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// One scripted reply (TOML literal string: the text must not contain `'''`).
fn reply(role: &str, expect: &[&str], text: &str) -> String {
    assert!(!text.contains("'''"));
    let expect: Vec<String> = expect.iter().map(|e| format!("{e:?}")).collect();
    format!(
        "[[reply]]\nrole = \"{role}\"\nexpect = [{}]\ntext = '''\n{text}'''\n\n",
        expect.join(", ")
    )
}

fn plan(strategy: &str, effect: &str) -> String {
    format!("## Strategy\n{strategy}\n## Expected effect\n{effect}\n## Risks\nTails.\n")
}

fn full_file(src: &str) -> String {
    format!("kernel.c\n```c\n{src}```\n")
}

fn write_scenario(dir: &Path, replies: &[String]) -> String {
    let p = dir.join("scenario.toml");
    std::fs::write(&p, replies.concat()).unwrap();
    format!("scripted:{}", p.display())
}

fn run_id(o: &Output) -> String {
    let t = text(o);
    let at = t.find("ksmith: run run-").expect("run id printed") + "ksmith: run ".len();
    t[at..].split_whitespace().next().unwrap().to_string()
}

fn show(store: &Path, id: &str) -> Value {
    let o = ksmith(store, &["show", id, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn db(store: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(store.join("ksmith.db")).unwrap()
}

fn roles(store: &Path, id: &str) -> Vec<String> {
    let c = db(store);
    let mut st = c
        .prepare("SELECT role FROM llm_calls WHERE run = ?1 AND error IS NULL ORDER BY seq")
        .unwrap();
    st.query_map([id], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn prompt_of(store: &Path, id: &str, seq: i64) -> String {
    db(store)
        .query_row(
            "SELECT prompt FROM llm_calls WHERE run = ?1 AND seq = ?2",
            rusqlite::params![id, seq],
            |r| r.get(0),
        )
        .unwrap()
}

const FAST_ARGS: [&str; 2] = ["--min-time-ms", "20"];

fn optimize(store: &Path, task: &str, model: &str, extra: &[&str]) -> Output {
    let mut args = vec!["optimize", task, "--model", model];
    args.extend(FAST_ARGS);
    if !extra.contains(&"--tune-budget") {
        args.extend(["--tune-budget", "0"]);
    }
    args.extend(extra);
    ksmith(store, &args)
}

const VECTOR_ADD_OMP: &str = "#include <stdint.h>\n\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n        c[i] = a[i] + b[i];\n}\n";

const SOFTMAX_OMP: &str = r#"#include <math.h>
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    #pragma omp parallel for
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[0];
        for (int64_t j = 1; j < N; j++)
            if (xr[j] > m) m = xr[j];
        float s = 0.0f;
        for (int64_t j = 0; j < N; j++) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        for (int64_t j = 0; j < N; j++)
            yr[j] = yr[j] / s;
    }
}
"#;

#[test]
fn a_multi_iteration_run_ends_with_a_faster_correct_kernel_tuned_profiled_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let fast =
        std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/fast/kernel.c"))
            .unwrap();
    let model = write_scenario(
        dir.path(),
        &[
            reply(
                "planner",
                &[
                    "Task `softmax`",
                    "Plan the first optimized version",
                    "iteration 0 (starting solution): passed",
                ],
                // A one-line title, which the history then uses instead of the strategy.
                &format!(
                    "## Title\nRows across the cores\n{}",
                    plan(
                        "Parallelize the rows with OpenMP.",
                        "About 1.8x faster on 2 cores.",
                    )
                ),
            ),
            reply(
                "implementer",
                &[
                    "Parallelize the rows",
                    "## Current `kernel.c`",
                    "## Machine",
                ],
                &full_file(SOFTMAX_OMP),
            ),
            reply(
                "profile",
                &[
                    "## Profile",
                    "Vectorization report",
                    "Profiled workload",
                    "the furthest below its roofline floor",
                    "## Machine",
                ],
                "Scalar expf dominates; vectorize the exp.\n",
            ),
            reply(
                "planner",
                &[
                    "Plan a revision",
                    "Last iteration (1): passed",
                    "Scalar expf dominates",
                    "iteration 1: Rows across the cores -> passed",
                    "expected 1.80x against iteration 0, measured",
                    "Timing per workload of the current best",
                ],
                &plan(
                    "Vectorize exp with a polynomial and fuse the passes.",
                    "about 3x",
                ),
            ),
            reply(
                "implementer",
                &["Vectorize exp", "## Current `kernel.c`"],
                &full_file(&fast),
            ),
            reply(
                "autotune",
                &["CHUNK=8"],
                "```toml\n[[tunables]]\nname = \"CHUNK\"\nvalues = [8, 16]\n```\n",
            ),
            // No profile in the last iteration: no plan would read it.
        ],
    );
    let out_dir = dir.path().join("out");
    let o = optimize(
        &store,
        "tasks/starter/softmax",
        &model,
        &[
            "--iterations",
            "2",
            "--tune-budget",
            "2",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["llm"]["calls"], 6);
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 3);
    let sp: Vec<f64> = snaps
        .iter()
        .map(|s| s["speedup"].as_f64().unwrap())
        .collect();
    // Snapshots are timed minutes apart, so their figures only say each was timed; which is
    // faster is decided by the finalists' side-by-side re-timing below (on a loaded machine
    // the vectorized kernel's snapshot once read only 1.8x the naive one's).
    assert!(sp.iter().all(|&x| x > 0.0), "{sp:?}");
    // The written kernel is the fastest finalist's, re-checked on fresh seeds and re-timed
    // together with the others: the vectorized one (iteration 2, asserted below).
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    let best: &str = &fast;
    // (with the tuner's CHUNK written in when it won)
    let tuned = best.replace("#define CHUNK 8", "#define CHUNK 16");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    // The vectorized kernel is 4-10x the naive one; on a machine loaded by the suite's other
    // tests its side-by-side interval against the start once read 4.27x (1.04-9.69) on
    // disturbed rounds, where only a 2x difference decides (docs/judge.md): then the start stays
    // and the report says so. Either way the report names the kernel that was written.
    let undecided = report.contains("Winner: iteration 0")
        && report.contains("the start stays: no finalist was decided faster");
    assert!(
        written == best || written == tuned || undecided,
        "{written}\n{report}\n{}",
        text(&o)
    );
    assert!(
        report.contains("## Finalists, re-checked on fresh seeds and re-timed together"),
        "{report}"
    );
    // Three finalists (the start and both iterations), the winner against the start.
    let rows: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("## Finalists"))
        .take_while(|l| !l.starts_with("## The winner per workload"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| iteration") && !l.starts_with("| ---"))
        .collect();
    assert_eq!(rows.len(), 3, "{report}");
    assert!(rows.iter().all(|r| r.contains("PASSED")), "{report}");
    assert!(
        report.contains("Winner: iteration 2") || undecided,
        "{report}"
    );
    // Per workload, with the roofline: one row per CPU workload of the task.
    let per_workload = report
        .lines()
        .skip_while(|l| !l.starts_with("## The winner per workload"))
        .filter(|l| l.starts_with("| M="))
        .count();
    assert_eq!(per_workload, 4, "{report}");
    assert!(report.contains("LLM calls: 6"), "{report}");
    // The tuner really ran on the declared tunable (evaluations with -DCHUNK=16).
    let tuned: i64 = db(&store)
        .query_row(
            "SELECT count(*) FROM evaluations WHERE solution_json LIKE '%DCHUNK=16%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(tuned >= 1, "no tuned evaluation");
    assert_eq!(
        roles(&store, &id),
        [
            "planner",
            "implementer",
            "profile",
            "planner",
            "implementer",
            "autotune"
        ]
    );
    // The planner sees the roofline and knowledge passages; the implementer sees the plan.
    let first = prompt_of(&store, &id, 0);
    assert!(
        first.contains("GFLOP/s fp32") && first.contains("## Notes from the knowledge base"),
        "{first}"
    );
    assert!(prompt_of(&store, &id, 1).contains("## Plan to implement"));
    // The revision's planner hears how iteration 1 did against the start in the same rounds,
    // and what the rule decided. Rows across 2 cores are at most 2x the naive kernel: on a
    // machine loaded by the suite's other tests that is undecided (only a 2x difference decides
    // on disturbed rounds), on a quiet one a new best; both are right.
    let revision = prompt_of(&store, &id, 3);
    assert!(
        revision.contains("against iteration 0, measured")
            && revision.contains("in the same rounds")
            && (revision.contains(", new best") || revision.contains("undecided")),
        "{revision}"
    );
    let calls = ksmith(&store, &["calls", &id]);
    assert!(text(&calls).contains("autotune"), "{}", text(&calls));
    let runs = ksmith(&store, &["runs"]);
    assert!(text(&runs).contains(&id));
}

/// A task with no solution at all (as `ksmith task new` writes one): the run starts from a
/// skeleton with the task's C signature, the planner is asked for a first correct kernel, and
/// the agents' kernel is the winner.
#[test]
fn a_task_with_no_solution_is_started_from_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_task(
        "vector_add",
        dir.path(),
        "[[workloads]]\naxes = { N = 300000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
    assert!(!task.join("solutions").exists());
    let model = write_scenario(
        dir.path(),
        &[
            reply(
                "planner",
                &[
                    "plan a first correct kernel",
                    "void vector_add(const float* a, const float* b, float* c, int64_t N)",
                ],
                &plan("Add the vectors with an OpenMP parallel for.", "1x"),
            ),
            reply("implementer", &[], &full_file(VECTOR_ADD_OMP)),
        ],
    );
    let out_dir = dir.path().join("out");
    let o = optimize(
        &store,
        task.to_str().unwrap(),
        &model,
        &[
            "--iterations",
            "1",
            "--no-profile",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the agents write the first kernel"),
        "{}",
        text(&o)
    );
    let v = show(&store, &run_id(&o));
    let snaps = v["snapshots"].as_array().unwrap();
    assert_ne!(
        snaps[0]["status"], "PASSED",
        "the skeleton writes nothing: {v}"
    );
    assert_eq!(snaps[1]["status"], "PASSED", "{v}");
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    assert_eq!(written, VECTOR_ADD_OMP);
    // Every snapshot can be written out as a solution and judged again.
    let snaps_dir = dir.path().join("snaps");
    let w = ksmith(
        &store,
        &["show", &run_id(&o), "--write", snaps_dir.to_str().unwrap()],
    );
    assert!(w.status.success(), "{}", text(&w));
    assert_eq!(
        std::fs::read_to_string(snaps_dir.join("iter1/kernel.c")).unwrap(),
        VECTOR_ADD_OMP
    );
    assert!(snaps_dir.join("iter0/solution.toml").exists());
    let e = ksmith(
        &store,
        &[
            "eval",
            "--no-timing",
            task.to_str().unwrap(),
            snaps_dir.join("iter1").to_str().unwrap(),
        ],
    );
    assert!(e.status.success(), "{}", text(&e));
    // Nothing is overwritten.
    let again = ksmith(
        &store,
        &["show", &run_id(&o), "--write", snaps_dir.to_str().unwrap()],
    );
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
}

/// A kernel that is right only on the task's own shapes (zeros elsewhere) and fast there: it
/// passes every check the run makes, but the held-out shapes at the end catch it, and it cannot
/// win: the start is written instead.
#[test]
fn a_kernel_specialized_to_the_shown_shapes_fails_the_held_out_ones_and_cannot_win() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let specialized = SOFTMAX_OMP.replace(
        "void softmax(const float* x, float* y, int64_t M, int64_t N) {\n",
        "void softmax(const float* x, float* y, int64_t M, int64_t N) {\n    int shown = (M == 2000 && N == 600) || (M == 64 && N == 32000) || (M == 1536 && N == 2000) || (M == 4096 && N == 777);\n    if (!shown) { for (int64_t i = 0; i < M * N; i++) y[i] = 0.0f; return; }\n",
    );
    assert_ne!(specialized, SOFTMAX_OMP);
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Parallelize the rows.", "1.8x")),
            reply("implementer", &[], &full_file(&specialized)),
        ],
    );
    let out_dir = dir.path().join("out");
    let o = optimize(
        &store,
        "tasks/starter/softmax",
        &model,
        &[
            "--iterations",
            "1",
            "--no-profile",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = show(&store, &run_id(&o));
    assert_eq!(v["snapshots"][1]["status"], "PASSED", "{v}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let row = |it: &str| {
        report
            .lines()
            .skip_while(|l| !l.starts_with("## Finalists"))
            .find(|l| l.starts_with(&format!("| {it}")))
            .unwrap_or_else(|| panic!("no finalist row {it}: {report}"))
            .to_string()
    };
    assert!(row("1").contains("INCORRECT_NUMERICAL"), "{report}");
    assert!(row("0 (winner)").contains("| PASSED | PASSED"), "{report}");
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    let start =
        std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/naive/kernel.c"))
            .unwrap();
    assert_eq!(written, start);
}

#[test]
fn a_compile_error_goes_to_the_fixer_with_the_real_compiler_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let broken = "#include <stdint.h>\n\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n        c[i] = a[i] + b[i]\n}\n";
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Add an OpenMP parallel for.", "1.5x")),
            reply("implementer", &[], &full_file(broken)),
            // gcc's own words and the line of the missing semicolon must reach the fixer.
            reply("fixer", &["compile error", "kernel.c:6", "expected ';'"],
                "kernel.c\n<<<<<<< SEARCH\n        c[i] = a[i] + b[i]\n=======\n        c[i] = a[i] + b[i];\n>>>>>>> REPLACE\n"),
            // The next plan hears that the iteration needed a fix, and which.
            reply(
                "planner",
                &["after 1 fix attempt(s): compile error", "This is iteration 2 of 2."],
                &plan("Keep the loop.", "1x"),
            ),
            reply("implementer", &[], &full_file(&broken.replace("b[i]\n}", "b[i];\n}"))),
        ],
    );
    let o = optimize(
        &store,
        "tasks/starter/vector_add",
        &model,
        &["--iterations", "2", "--no-profile"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    let v = show(&store, &id);
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps[1]["status"], "PASSED", "{v}");
    // Each diagnostic once (the detail is the first diagnostic: not repeated above the list).
    let fixer = prompt_of(&store, &id, 2);
    assert_eq!(fixer.matches("expected ';'").count(), 1, "{fixer}");
    let statuses: Vec<String> = db(&store)
        .prepare("SELECT status FROM evaluations ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(
        statuses.contains(&"COMPILE_ERROR".to_string()),
        "{statuses:?}"
    );
}

#[test]
fn wrong_results_go_to_the_fixer_with_the_worst_element_and_error_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    // No max subtraction: exp overflows on the task's large-magnitude workload.
    let unstable = SOFTMAX_OMP
        .replace("float m = xr[0];", "float m = 0.0f;")
        .replace("if (xr[j] > m) m = xr[j];", "(void)0;");
    let model = write_scenario(
        dir.path(),
        &[
            reply(
                "planner",
                &[],
                &plan("Parallel rows, skip the max pass.", "2x"),
            ),
            reply("implementer", &[], &full_file(&unstable)),
            reply(
                "fixer",
                &[
                    "wrong results",
                    "INCORRECT_NUMERICAL",
                    "worst element",
                    "max abs error",
                ],
                &format!(
                    "The max subtraction is needed for large inputs.\n\n{}",
                    full_file(SOFTMAX_OMP)
                ),
            ),
        ],
    );
    let o = optimize(
        &store,
        "tasks/starter/softmax",
        &model,
        &["--iterations", "1", "--no-profile"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = show(&store, &run_id(&o));
    assert_eq!(v["snapshots"][1]["status"], "PASSED", "{v}");
}

#[test]
fn garbage_empty_and_unappliable_replies_go_back_to_the_model_until_usable() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], "I would probably make it faster somehow.\n"),
            reply("planner", &["could not be used", "## Strategy"], &plan("Parallelize the loop.", "1.5x")),
            reply("implementer", &[], ""),
            reply("implementer", &["could not be used", "empty"],
                "kernel.c\n<<<<<<< SEARCH\n    for (int64_t j = 0; j < N; j++)\n        c[j] = a[j] + b[j];\n=======\n    #pragma omp parallel for\n    for (int64_t j = 0; j < N; j++)\n        c[j] = a[j] + b[j];\n>>>>>>> REPLACE\n"),
            // The nearest text and its line number come back with the failure.
            reply("implementer", &["did not apply", "lines 4-5", "for (int64_t i = 0; i < N; i++)"],
                "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n"),
            // Iteration 2: a planner that never answers in the format gives no candidate.
            reply("planner", &["Plan a revision"], "Just make it faster.\n"),
            reply("planner", &["could not be used"], "Still no sections.\n"),
            reply("planner", &["could not be used"], "## Strategy\nunroll\n"),
        ],
    );
    let o = optimize(
        &store,
        "tasks/starter/vector_add",
        &model,
        &["--iterations", "2", "--no-profile"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(v["snapshots"][1]["status"], "PASSED");
    assert_eq!(v["snapshots"][2]["status"], "NO_CANDIDATE", "{v}");
    assert!(
        v["snapshots"][2]["summary"]
            .as_str()
            .unwrap()
            .contains("no usable plan"),
        "{v}"
    );
    assert_eq!(
        roles(&store, &id),
        [
            "planner",
            "planner",
            "implementer",
            "implementer",
            "implementer",
            "planner",
            "planner",
            "planner"
        ]
    );
}

#[test]
fn agents_cannot_change_the_tests_and_a_budget_stop_is_clean_and_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = dir.path().join("vector_add");
    let copy = std::process::Command::new("cp")
        .args([
            "-r",
            root().join("tasks/starter/vector_add").to_str().unwrap(),
            task.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(copy.success());
    let toml_before = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Loosen the tolerance.", "10x")),
            reply("implementer", &[], "task.toml\n<<<<<<< SEARCH\natol = 1e-6\n=======\natol = 1.0\n>>>>>>> REPLACE\n"),
            reply("implementer", &["REFUSED: `task.toml` is frozen"],
                "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n"),
            reply("planner", &["Plan a revision"], &plan("Nothing more.", "1x")),
        ],
    );
    let o = optimize(
        &store,
        task.to_str().unwrap(),
        &model,
        &[
            "--iterations",
            "5",
            "--max-calls",
            "3",
            "--no-profile",
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("refused"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(task.join("task.toml")).unwrap(),
        toml_before
    );
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(v["status"], "stopped", "{v}");
    assert!(
        v["stop_reason"]
            .as_str()
            .unwrap()
            .contains("budget reached: llm calls"),
        "{v}"
    );
    assert_eq!(v["llm"]["calls"], 3);
    // The best so far was still re-validated and written.
    assert!(dir.path().join("out/kernel.c").exists());
    // Someone changes the tests between sessions: the run refuses to go on.
    std::fs::write(
        task.join("task.toml"),
        toml_before.replace("atol = 1e-6", "atol = 1e-5"),
    )
    .unwrap();
    let r = ksmith(&store, &["resume", &id, "--max-calls", "10"]);
    assert!(!r.status.success());
    assert!(text(&r).contains("changed during run"), "{}", text(&r));
    std::fs::write(task.join("task.toml"), &toml_before).unwrap();
    let r = ksmith(
        &store,
        &["resume", &id, "--max-calls", "4", "--iterations", "2"],
    );
    assert!(text(&r).contains("replayed 3 LLM calls"), "{}", text(&r));
    assert_eq!(show(&store, &id)["llm"]["calls"], 4);
}

#[test]
fn a_run_killed_mid_evaluation_resumes_without_repeating_calls_or_evaluations() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let model = write_scenario(
        dir.path(),
        &[
            reply(
                "planner",
                &[],
                &plan("Parallelize the rows with OpenMP.", "1.8x"),
            ),
            reply("implementer", &[], &full_file(SOFTMAX_OMP)),
            reply(
                "planner",
                &["Last iteration (1)"],
                &plan("Keep it.", "1.0x"),
            ),
            reply(
                "implementer",
                &[],
                &full_file(&SOFTMAX_OMP.replace(
                    "#pragma omp parallel for",
                    "#pragma omp parallel for schedule(static)",
                )),
            ),
        ],
    );
    let calls = || -> i64 {
        rusqlite::Connection::open(store.join("ksmith.db"))
            .and_then(|c| c.query_row("SELECT count(*) FROM llm_calls", [], |r| r.get(0)))
            .unwrap_or(0)
    };
    let mut args = vec![
        "optimize",
        "tasks/starter/softmax",
        "--model",
        &model,
        "--iterations",
        "2",
        "--no-profile",
    ];
    args.extend(FAST_ARGS);
    // Killed while the first candidate is being judged (its two calls are stored).
    kill_9_when(
        &store,
        &args,
        || calls() >= 2,
        std::time::Duration::from_millis(300),
    );
    let id: String = db(&store)
        .query_row("SELECT id FROM runs", [], |r| r.get(0))
        .unwrap();
    let r = ksmith(&store, &["resume", &id]);
    assert!(r.status.success(), "{}", text(&r));
    assert!(text(&r).contains("replayed 2 LLM calls"), "{}", text(&r));
    assert_eq!(calls(), 4, "each call made once");
    let dup: i64 = db(&store)
        .query_row(
            "SELECT count(*) - count(DISTINCT eval_key) FROM evaluations",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(dup, 0, "no evaluation repeated");
    assert_eq!(show(&store, &id)["status"], "finished");
}

/// A child on a pseudo-terminal: its output is collected, answers are typed into it.
struct Pty {
    child: std::process::Child,
    master: std::fs::File,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Pty {
    fn spawn(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Pty {
        use std::os::fd::OwnedFd;
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave: OwnedFd = pty.slave;
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_ksmith"))
            .arg("--store")
            .arg(store)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(root())
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Pty {
            child,
            master,
            seen,
        }
    }

    /// Waits until `needle` has appeared `n` times in the output.
    fn wait_for(&mut self, needle: &str, n: usize) {
        let start = std::time::Instant::now();
        while self.seen.lock().unwrap().matches(needle).count() < n {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "ksmith exited ({status}) before `{needle}` #{n}:\n{}",
                    self.seen.lock().unwrap()
                );
            }
            assert!(
                start.elapsed().as_secs() < 240,
                "no `{needle}` #{n}:\n{}",
                self.seen.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, line: &str) {
        use std::io::Write;
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = self.seen.lock().unwrap().clone();
        (status, out)
    }
}

#[test]
fn an_interactive_run_takes_guidance_edits_and_quits_then_resumes_through_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let editor = dir.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nprintf '/* edited by the user */\\n' >> \"$1\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    let edit = "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n";
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Parallelize.", "1.5x")),
            reply(
                "implementer",
                &["## Guidance from the user", "use a static schedule"],
                edit,
            ),
            reply(
                "planner",
                &["Plan a revision"],
                &plan("Unroll by 4.", "1.1x"),
            ),
            // A whole file: it applies whichever snapshot (0 or 1) timing noise made the best.
            reply("implementer", &[], &full_file(VECTOR_ADD_OMP)),
        ],
    );
    let out = dir.path().join("out");
    let args = [
        "optimize",
        "tasks/starter/vector_add",
        "--model",
        &model,
        "--interactive",
        "--iterations",
        "2",
        "--no-profile",
        "--tune-budget",
        "0",
        "--min-time-ms",
        "20",
        "--out",
        out.to_str().unwrap(),
    ];
    let env = [("EDITOR", editor.to_str().unwrap())];
    let mut t = Pty::spawn(&store, &args, &env);
    t.wait_for("[a]pprove", 1);
    assert!(
        t.seen.lock().unwrap().contains("## Strategy\nParallelize.")
            || t.seen.lock().unwrap().contains("Parallelize.")
    );
    t.type_line("g");
    t.wait_for("guidance (one line): ", 1);
    t.type_line("use a static schedule");
    t.wait_for("[a]pprove", 2);
    assert!(
        t.seen
            .lock()
            .unwrap()
            .contains("+    #pragma omp parallel for"),
        "the diff is shown"
    );
    t.type_line("e");
    t.wait_for("[a]pprove", 3);
    t.type_line("q");
    let (status, seen) = t.finish();
    assert!(status.success(), "{seen}");
    assert!(
        seen.contains("paused; continue with `ksmith resume"),
        "{seen}"
    );
    let id: String = db(&store)
        .query_row("SELECT id FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(show(&store, &id)["status"], "paused");
    // The quit is not journaled: the resumed run asks again at the same step.
    let mut t = Pty::spawn(&store, &["resume", &id], &env);
    t.wait_for("[a]pprove", 1);
    t.type_line("a");
    t.wait_for("[a]pprove", 2);
    t.type_line("a");
    let (status, seen) = t.finish();
    assert!(status.success(), "{seen}");
    let v = show(&store, &id);
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["llm"]["calls"], 4, "no call repeated");
    let kernels: Vec<String> = db(&store)
        .prepare("SELECT payload FROM run_events WHERE run = ?1 AND kind = 'review' ORDER BY seq")
        .unwrap()
        .query_map([&id], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        kernels.len(),
        4,
        "guidance, edit, approve, approve: {kernels:?}"
    );
    assert!(
        kernels[0].contains("use a static schedule") && kernels[1].contains("edited by the user"),
        "{kernels:?}"
    );
    // The user's edit is in the snapshot of iteration 1.
    let snap: String = db(&store)
        .query_row(
            "SELECT sources FROM snapshots WHERE run = ?1 AND iteration = 1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let hash = serde_json::from_str::<Value>(&snap).unwrap()["files"]["kernel.c"]
        .as_str()
        .unwrap()
        .to_string();
    let src =
        std::fs::read_to_string(store.join("artifacts").join(&hash[..2]).join(&hash[2..])).unwrap();
    assert!(src.contains("/* edited by the user */"), "{src}");
}

const GOOD_DRAFT: &str = r#"```toml
name = "scaled_tanh"
description = "y = 2 tanh(x), elementwise."
op_class = "elementwise"
flops = "2 * M * N"
bytes = "8 * M * N"

[reference]
file = "scaled_tanh.py"

[axes]
M = { kind = "var" }
N = { kind = "var" }

[[inputs]]
name = "x"
shape = ["M", "N"]
dtype = "float32"

[[outputs]]
name = "y"
shape = ["M", "N"]
dtype = "float32"
# float32 tanh is accurate to a few ulp; |y| <= 2, so 1e-5 absolute and relative is ~40 ulp.
atol = 1e-5
rtol = 1e-5

[[workloads]]
axes = { M = 300, N = 333 }
[workloads.inputs]
x = { dist = "normal", mean = 0.0, std = 1.0 }

[[workloads]]
# saturation and a single column
axes = { M = 7, N = 1 }
[workloads.inputs]
x = { dist = "uniform", low = -20.0, high = 20.0 }
```
"#;

#[test]
fn task_new_writes_a_drafted_task_only_once_validate_accepts_it_with_a_command_provider() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let reference = dir.path().join("scaled_tanh.py");
    std::fs::write(&reference, "import jax.numpy as jnp\n\n\n# x: float32 (M, N)\ndef reference(x):\n    return 2.0 * jnp.tanh(x)\n").unwrap();
    // Draft 0 claims a tolerance float32 cannot meet; draft 1 is sound. The fake model checks
    // that the validator's complaint came back to it.
    let bad = GOOD_DRAFT.replace("atol = 1e-5\nrtol = 1e-5", "atol = 0.0\nrtol = 1e-12");
    std::fs::write(dir.path().join("reply-0.md"), &bad).unwrap();
    std::fs::write(dir.path().join("reply-1.md"), GOOD_DRAFT).unwrap();
    let script = dir.path().join("fake-llm.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprompt=$(cat)\ncase \"$KSMITH_ROLE\" in test_designer) ;; *) exit 9 ;; esac\nif [ \"$KSMITH_CALL_SEQ\" = 1 ]; then echo \"$prompt\" | grep -q 'previous draft was rejected' || exit 7; fi\ncat {}/reply-$KSMITH_CALL_SEQ.md\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let model = format!("command:sh {}", script.display());
    let out = dir.path().join("tasks/scaled_tanh");
    let (r, o) = (reference.to_str().unwrap(), out.to_str().unwrap());
    // One attempt: the bad draft is rejected and nothing is written.
    let first = ksmith(
        &store,
        &[
            "task",
            "new",
            r,
            "--model",
            &model,
            "--out",
            o,
            "--attempts",
            "1",
        ],
    );
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(
        text(&first).contains("failed validation"),
        "{}",
        text(&first)
    );
    assert!(!out.exists());
    // Two attempts: the validator's problems go back, the second draft is written.
    let second = ksmith(
        &store,
        &[
            "task",
            "new",
            r,
            "--model",
            &model,
            "--out",
            o,
            "--attempts",
            "2",
        ],
    );
    assert!(second.status.success(), "{}", text(&second));
    assert!(out.join("task.toml").exists() && out.join("scaled_tanh.py").exists());
    let v = ksmith(&store, &["validate", o]);
    assert!(v.status.success(), "{}", text(&v));
    // Frozen: a second `task new` will not overwrite it.
    let again = ksmith(&store, &["task", "new", r, "--model", &model, "--out", o]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("frozen"), "{}", text(&again));
    let calls: i64 = db(&store)
        .query_row(
            "SELECT count(*) FROM llm_calls WHERE role = 'test_designer'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(calls, 3);
}

#[test]
fn a_manual_run_is_answered_by_whoever_writes_the_reply_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let inbox = dir.path().join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let mut args = vec!["optimize", "tasks/starter/vector_add"];
    let model = format!("manual:{}", inbox.display());
    args.extend([
        "--model",
        &model,
        "--iterations",
        "1",
        "--no-profile",
        "--tune-budget",
        "0",
        "--min-time-ms",
        "20",
    ]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(&store)
        .args(&args)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The "person": answers each prompt file as it appears (written whole, then renamed).
    let answers = [
        ("0000-planner", plan("Parallelize the loop.", "1.5x")),
        ("0001-implementer", "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n".to_string()),
    ];
    for (stem, answer) in answers {
        let start = std::time::Instant::now();
        while !inbox.join(format!("{stem}.prompt.md")).exists() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "ksmith exited before asking {stem}"
            );
            // Generous: on a machine loaded by the suite's other tests the start's judging
            // before the first prompt took minutes (the test is not about speed).
            assert!(start.elapsed().as_secs() < 600, "no prompt {stem}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let prompt = std::fs::read_to_string(inbox.join(format!("{stem}.prompt.md"))).unwrap();
        assert!(prompt.contains("vector_add"), "{prompt}");
        let tmp = inbox.join(format!(".{stem}.tmp"));
        std::fs::write(&tmp, answer).unwrap();
        std::fs::rename(&tmp, inbox.join(format!("{stem}.reply.md"))).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let id = run_id(&out);
    let v = show(&store, &id);
    assert_eq!(v["snapshots"][1]["status"], "PASSED", "{v}");
    assert_eq!(roles(&store, &id), ["planner", "implementer"]);
}

#[test]
fn bad_agent_flags_are_input_errors_that_name_the_problem_and_store_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = "tasks/starter/vector_add";
    let cases: [(&[&str], &str); 5] = [
        (
            &["optimize", task, "--model", "nope:model"],
            "unknown provider",
        ),
        (&["optimize", task, "--model", "gemini:"], "--model"),
        (
            &[
                "optimize",
                task,
                "--model",
                "scripted:x.toml",
                "--prompts",
                "/nonexistent/prompts",
            ],
            "/nonexistent/prompts",
        ),
        (
            &[
                "optimize",
                task,
                "--model",
                "scripted:x.toml",
                "--knowledge",
                "/nonexistent/notes",
            ],
            "/nonexistent/notes",
        ),
        (&["resume", "run-123-abcdef"], "no run `run-123-abcdef`"),
    ];
    for (args, needle) in cases {
        let o = ksmith(&store, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
    let runs: i64 = db(&store)
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap_or(0);
    assert_eq!(runs, 0);
}

#[test]
fn an_agent_run_from_a_kernel_that_cannot_be_timed_here_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let model = write_scenario(dir.path(), &[]);
    let o = optimize(
        &store,
        "tasks/starter/softmax",
        &model,
        &["--from", "tasks/starter/softmax/solutions/triton_naive"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("triton candidates cannot be timed on this machine"),
        "{}",
        text(&o)
    );
    assert!(
        !text(&o).contains("ksmith resume"),
        "resuming cannot help: {}",
        text(&o)
    );
}
