//! Agent runs, `ksmith optimize TASK --model P:M` without `--strategy`: a `loop` search with
//! every stage, driven by the scripted provider on small copies of starter tasks with the real
//! binary, compiler, judge and SQLite. Each scripted reply names the role it answers and text the
//! prompt must contain, so a prompt missing its feedback (diagnostics, mismatch, refusal) fails.

mod common;

use common::{fresh_store, ksmith, root, small_task, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
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
    common::search_run_id(&text(o))
}

fn show(store: &Path, id: &str) -> Value {
    let o = ksmith(store, &["show", id, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A node's status as `show --json` lists it.
fn node_status(v: &Value, node: usize) -> String {
    v["nodes"][node]["status"]
        .as_str()
        .unwrap_or("")
        .to_string()
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

/// `optimize TASK --model MODEL` with short timing; no tuning or profile unless asked for.
fn optimize(store: &Path, task: &str, model: &str, extra: &[&str]) -> Output {
    let mut args = vec!["optimize", task, "--model", model];
    args.extend(FAST_ARGS);
    if !extra.contains(&"--tune-budget") {
        args.extend(["--tune-budget", "0"]);
    }
    if !extra.contains(&"--profile") {
        args.push("--no-profile");
    }
    args.extend(extra.iter().filter(|a| **a != "--profile"));
    ksmith(store, &args)
}

/// A starter task at small sizes with its naive solution (the start): these tests are about
/// what the agents are told and what the run decides, not about long timings.
fn small_with_naive(name: &str, dir: &Path, workloads: &str) -> PathBuf {
    let task = small_task(name, dir, workloads);
    let from = root()
        .join("tasks/starter")
        .join(name)
        .join("solutions/naive");
    let to = task.join("solutions/naive");
    std::fs::create_dir_all(&to).unwrap();
    for f in std::fs::read_dir(&from).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
    }
    task
}

/// Softmax on two small workloads, one with magnitudes that overflow `exp` without the max.
fn small_softmax(dir: &Path) -> PathBuf {
    small_with_naive(
        "softmax",
        dir,
        "[[workloads]]\naxes = { M = 512, N = 600 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 1.0 }\n\n[[workloads]]\naxes = { M = 128, N = 2000 }\n[workloads.inputs]\nx = { dist = \"uniform\", low = -1000.0, high = 1000.0 }\n",
    )
}

fn small_vector_add(dir: &Path) -> PathBuf {
    small_with_naive(
        "vector_add",
        dir,
        "[[workloads]]\naxes = { N = 300000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
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

/// The rows of a report.md section's table (header and rule left out).
fn table_rows<'a>(report: &'a str, section: &str) -> Vec<&'a str> {
    report
        .lines()
        .skip_while(|l| !l.starts_with(section))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| node") && !l.starts_with("| ---"))
        .collect()
}

#[test]
fn a_multi_iteration_run_ends_with_a_faster_correct_kernel_tuned_profiled_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_softmax(dir.path());
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
                    "The parent node, which this node revises (node n0",
                    "node n0 [first_kernel] the starting solution -> PASSED",
                    "Timing per workload of the current best",
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
                    "Scalar expf dominates",
                    "Rows across the cores",
                    "against its parent",
                    "in the same rounds",
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
                &["CHUNK=8", "at most 2 configurations"],
                "```toml\n[[tunables]]\nname = \"CHUNK\"\nvalues = [8, 16]\n```\n",
            ),
            // No profile of node 2: it is the last node, no plan would read it.
        ],
    );
    let out_dir = dir.path().join("out");
    let o = optimize(
        &store,
        path(&task),
        &model,
        &[
            "--iterations",
            "2",
            "--tune-budget",
            "2",
            "--profile",
            "--out",
            path(&out_dir),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    assert!(text(&o).contains(": loop on softmax"), "{}", text(&o));
    let v = show(&store, &id);
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["kind"], "search", "{v}");
    assert_eq!(v["llm"]["calls"], 6, "{v}\n{}", text(&o));
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "the start and two iterations: {v}");
    assert!((0..3).all(|i| node_status(&v, i) == "PASSED"), "{v}");
    // Node 2 grows from node 1 only if node 1 is the best by the keep rules; on a loaded
    // machine the two may be undecided and node 2 grows from the start: both are the loop.
    assert!(nodes[2]["parent"] == 1 || nodes[2]["parent"] == 0, "{v}");
    // The written kernel is the winner of the finalists' side-by-side re-timing, the start
    // unless a finalist was decided faster; the report names the same one.
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let winner = v["final"]["node"].as_u64().expect("a winner") as usize;
    assert!(
        report.contains(&format!("Winner: node n{winner} ")),
        "{report}"
    );
    let winner_row = table_rows(&report, "## Finalists")
        .into_iter()
        .find(|r| r.starts_with(&format!("| n{winner} (winner)")));
    assert!(winner_row.is_some(), "{report}");
    let start = std::fs::read_to_string(task.join("solutions/naive/kernel.c")).unwrap();
    let tuned = fast.replace("#define CHUNK 8", "#define CHUNK 16");
    match winner {
        0 => assert_eq!(written, start),
        1 => assert_eq!(written, SOFTMAX_OMP),
        _ => assert!(written == fast || written == tuned, "{written}"),
    }
    // The finalists (the start and both iterations) all passed again on fresh seeds.
    let rows = table_rows(&report, "## Finalists");
    assert_eq!(rows.len(), 3, "{report}");
    assert!(rows.iter().all(|r| r.contains("| PASSED |")), "{report}");
    assert_eq!(
        table_rows(&report, "## Nodes, each judged alone").len(),
        3,
        "{report}"
    );
    // Per workload, with the roofline: one row per workload of the task.
    let per_workload = report
        .lines()
        .skip_while(|l| !l.starts_with("## The winner per workload"))
        .filter(|l| l.starts_with("| M="))
        .count();
    assert_eq!(per_workload, 2, "{report}");
    assert!(report.contains("LLM calls: 6"), "{report}");
    // The tuner really ran on the declared tunable (evaluations with -DCHUNK=16).
    let tuned_evals: i64 = db(&store)
        .query_row(
            "SELECT count(*) FROM evaluations WHERE solution_json LIKE '%DCHUNK=16%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(tuned_evals >= 1, "no tuned evaluation");
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
    let calls = ksmith(&store, &["calls", &id]);
    assert!(text(&calls).contains("autotune"), "{}", text(&calls));
    let runs = ksmith(&store, &["runs"]);
    assert!(text(&runs).contains(&id));
}

/// A task with no solution at all (as `ksmith task new` writes one): the run starts from a
/// skeleton with the task's C signature, the first node's planner is asked for a first correct
/// kernel, and the agents' kernel is the one written.
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
    // No iteration after the start: the start is the agents' first kernel.
    let o = optimize(
        &store,
        path(&task),
        &model,
        &["--iterations", "0", "--out", path(&out_dir)],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the agents write the first kernel"),
        "{}",
        text(&o)
    );
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(node_status(&v, 0), "PASSED", "{v}");
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    assert_eq!(written, VECTOR_ADD_OMP);
    // Every node can be written out as a solution and judged again.
    let nodes_dir = dir.path().join("nodes");
    let w = ksmith(&store, &["show", &id, "--write", path(&nodes_dir)]);
    assert!(w.status.success(), "{}", text(&w));
    assert_eq!(
        std::fs::read_to_string(nodes_dir.join("node0/kernel.c")).unwrap(),
        VECTOR_ADD_OMP
    );
    let e = ksmith(
        &store,
        &[
            "eval",
            "--no-timing",
            path(&task),
            path(&nodes_dir.join("node0")),
        ],
    );
    assert!(e.status.success(), "{}", text(&e));
    // Nothing is overwritten.
    let again = ksmith(&store, &["show", &id, "--write", path(&nodes_dir)]);
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
    let task = small_softmax(dir.path());
    let specialized = SOFTMAX_OMP.replace(
        "void softmax(const float* x, float* y, int64_t M, int64_t N) {\n",
        "void softmax(const float* x, float* y, int64_t M, int64_t N) {\n    int shown = (M == 512 && N == 600) || (M == 128 && N == 2000);\n    if (!shown) { for (int64_t i = 0; i < M * N; i++) y[i] = 0.0f; return; }\n",
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
        path(&task),
        &model,
        &["--iterations", "1", "--out", path(&out_dir)],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = show(&store, &run_id(&o));
    assert_eq!(node_status(&v, 1), "PASSED", "{v}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let rows = table_rows(&report, "## Finalists");
    let row = |n: &str| {
        rows.iter()
            .find(|l| l.starts_with(&format!("| {n} ")))
            .unwrap_or_else(|| panic!("no finalist row {n}: {report}"))
            .to_string()
    };
    assert!(row("n1").contains("INCORRECT_NUMERICAL"), "{report}");
    assert!(row("n1").contains("not eligible"), "{report}");
    assert!(row("n0 (winner)").contains("| PASSED | PASSED"), "{report}");
    let written = std::fs::read_to_string(out_dir.join("kernel.c")).unwrap();
    let start = std::fs::read_to_string(task.join("solutions/naive/kernel.c")).unwrap();
    assert_eq!(written, start);
}

#[test]
fn a_compile_error_goes_to_the_fixer_with_the_real_compiler_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_vector_add(dir.path());
    let broken = "#include <stdint.h>\n\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n        c[i] = a[i] + b[i]\n}\n";
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Add an OpenMP parallel for.", "1.5x")),
            reply("implementer", &[], &full_file(broken)),
            // gcc's own words and the line of the missing semicolon must reach the fixer.
            reply("fixer", &["compile error", "kernel.c:6", "expected ';'"],
                "kernel.c\n<<<<<<< SEARCH\n        c[i] = a[i] + b[i]\n=======\n        c[i] = a[i] + b[i];\n>>>>>>> REPLACE\n"),
        ],
    );
    let o = optimize(&store, path(&task), &model, &["--iterations", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(node_status(&v, 1), "PASSED", "{v}");
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
    let task = small_softmax(dir.path());
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
    let o = optimize(&store, path(&task), &model, &["--iterations", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = show(&store, &run_id(&o));
    assert_eq!(node_status(&v, 1), "PASSED", "{v}");
}

#[test]
fn garbage_empty_and_unappliable_replies_go_back_to_the_model_until_usable() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_vector_add(dir.path());
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
            // Node 2: a planner that never answers in the format gives no candidate.
            reply("planner", &[], "Just make it faster.\n"),
            reply("planner", &["could not be used"], "Still no sections.\n"),
            reply("planner", &["could not be used"], "## Strategy\nunroll\n"),
        ],
    );
    let o = optimize(&store, path(&task), &model, &["--iterations", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);
    let v = show(&store, &id);
    assert_eq!(node_status(&v, 1), "PASSED", "{v}");
    assert_ne!(node_status(&v, 2), "PASSED", "{v}");
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
    let task = small_vector_add(dir.path());
    let toml_before = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let model = write_scenario(
        dir.path(),
        &[
            reply("planner", &[], &plan("Loosen the tolerance.", "10x")),
            reply("implementer", &[], "task.toml\n<<<<<<< SEARCH\natol = 1e-6\n=======\natol = 1.0\n>>>>>>> REPLACE\n"),
            reply("implementer", &["REFUSED: `task.toml` is frozen"],
                "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n"),
            reply("planner", &[], &plan("Nothing more.", "1x")),
            reply("implementer", &[], &full_file(VECTOR_ADD_OMP)),
        ],
    );
    let o = optimize(
        &store,
        path(&task),
        &model,
        &[
            "--iterations",
            "5",
            "--max-calls",
            "3",
            "--out",
            path(&dir.path().join("out")),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(task.join("task.toml")).unwrap(),
        toml_before
    );
    let id = run_id(&o);
    let v = show(&store, &id);
    assert!(
        v["stop_reason"]
            .as_str()
            .unwrap()
            .contains("LLM call budget"),
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
    let r = ksmith(&store, &["resume", &id, "--max-calls", "5"]);
    assert!(r.status.success(), "{}", text(&r));
    let v = show(&store, &id);
    assert_eq!(v["llm"]["calls"], 5, "no call made twice: {v}");
    // Node 2's kernel is node 1's, byte for byte: a duplicate, not judged again.
    assert_eq!(node_status(&v, 2), "duplicate", "{v}");
    assert_eq!(v["status"], "finished", "{v}");
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
    let task = small_vector_add(dir.path());
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
            reply("planner", &[], &plan("Unroll by 4.", "1.1x")),
            // A whole file: it applies whichever node (0 or 1) timing noise made the best.
            reply("implementer", &[], &full_file(VECTOR_ADD_OMP)),
        ],
    );
    let out = dir.path().join("out");
    let args = [
        "optimize",
        path(&task),
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
        path(&out),
    ];
    let env = [("EDITOR", editor.to_str().unwrap())];
    // Node 1: guidance on its plan, an edit of its change; node 2: a quit at its plan.
    let mut t = Pty::spawn(&store, &args, &env);
    t.wait_for("[a]pprove", 1);
    assert!(t.seen.lock().unwrap().contains("Parallelize."));
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
    assert!(t.seen.lock().unwrap().contains("Unroll by 4."));
    t.type_line("q");
    let (status, seen) = t.finish();
    assert!(status.success(), "{seen}");
    assert!(seen.contains("continue with `ksmith resume"), "{seen}");
    let id: String = db(&store)
        .query_row("SELECT id FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(show(&store, &id)["status"], "paused");
    // The quit is not journaled: the resumed run asks again at the same step, and node 2's
    // planner call is replayed from its journal, not made again.
    let mut t = Pty::spawn(&store, &["resume", &id], &env);
    t.wait_for("[a]pprove", 1);
    t.type_line("a");
    t.wait_for("[a]pprove", 2);
    t.type_line("a");
    let (status, seen) = t.finish();
    assert!(status.success(), "{seen}");
    let v = show(&store, &id);
    assert_eq!(v["status"], "finished", "{v}");
    assert_eq!(v["llm"]["calls"], 4, "no call repeated: {v}");
    let answers: Vec<String> = db(&store)
        .prepare("SELECT payload FROM run_events WHERE run = ?1 AND kind = 'review' ORDER BY seq")
        .unwrap()
        .query_map([&id], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        answers.len(),
        4,
        "guidance, edit, approve, approve: {answers:?}"
    );
    assert!(
        answers[0].contains("use a static schedule") && answers[1].contains("edited by the user"),
        "{answers:?}"
    );
    // The user's edit is node 1's code.
    let payload: String = db(&store)
        .query_row(
            "SELECT payload FROM search_nodes WHERE run = ?1 AND id = 1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    let node: Value = serde_json::from_str(&payload).unwrap();
    let hash = node["code_hash"].as_str().unwrap().to_string();
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
    let task = small_vector_add(dir.path());
    let mut args = vec!["optimize", path(&task)];
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
    assert_eq!(node_status(&v, 1), "PASSED", "{v}");
    assert_eq!(roles(&store, &id), ["planner", "implementer"]);
}

#[test]
fn bad_agent_flags_are_input_errors_that_name_the_problem_and_store_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = "tasks/starter/vector_add";
    let cases: [(&[&str], &str); 7] = [
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
        // Iterations are the loop's nodes: not another strategy's, not beside --max-nodes.
        (
            &[
                "optimize",
                task,
                "--model",
                "scripted:x.toml",
                "--strategy",
                "beam",
                "--iterations",
                "2",
            ],
            "--strategy beam takes --max-nodes",
        ),
        (
            &[
                "optimize",
                task,
                "--model",
                "scripted:x.toml",
                "--iterations",
                "2",
                "--max-nodes",
                "3",
            ],
            "give one",
        ),
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
