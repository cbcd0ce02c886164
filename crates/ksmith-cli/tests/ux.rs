//! What a person (or a log) sees: progress on a non-terminal stderr, where `tune` writes,
//! sizes in binary units, error chains without repetition, grouped `--help`, one copy of
//! compile diagnostics. Every test runs the real binary on a copy of a starter task.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The tests time kernels: one at a time, so they do not disturb each other's rounds.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SMALL_VECTOR_ADD: &str = r#"
[[workloads]]
axes = { N = 65537 }
inputs = { a = { dist = "normal", mean = 0.0, std = 1.0 }, b = { dist = "uniform", low = -2.0, high = 2.0 } }

[[workloads]]
axes = { N = 300001 }
inputs = { a = { dist = "normal", mean = 1.0, std = 3.0 }, b = { dist = "normal", mean = 0.0, std = 1.0 } }
"#;

/// A vector_add kernel whose one tunable, SPIN, only adds a busy loop of SPIN thousand
/// iterations per call: SPIN=0 is at least ten times faster than SPIN=20000 on any machine,
/// busy or idle, so which configuration wins is known in advance.
fn spin_solution(dir: &Path, name: &str, default_spin: u32) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("kernel.c"),
        format!(
            "#include <stdint.h>\n#ifndef SPIN\n#define SPIN {default_spin}\n#endif\n\
             void vector_add(const float* restrict a, const float* restrict b, float* restrict c, int64_t N) {{\n\
             \x20   for (volatile int64_t s = 0; s < (int64_t)SPIN * 1000; s++) {{}}\n\
             \x20   for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];\n}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("solution.toml"),
        format!(
            "name = \"{name}\"\nlanguage = \"c\"\nentry_point = \"vector_add\"\nsources = [\"kernel.c\"]\nflags = []\n\n[[tunables]]\nname = \"SPIN\"\nvalues = [0, 20000]\n"
        ),
    )
    .unwrap();
}

/// Every file under `dir` with its contents.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                m.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    m
}

/// Lines of `text` that start with `[k/N] what:`, as (k, N).
fn steps(text: &str, what: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('[')?;
            let (counts, tail) = rest.split_once("] ")?;
            tail.starts_with(&format!("{what}:")).then_some(())?;
            let (k, n) = counts.split_once('/')?;
            Some((k.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

#[test]
fn eval_and_bench_show_a_line_per_step_in_a_log_and_quiet_silences_them() {
    let _one = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let suite = tmp.path().join("suite");
    let task = small_task("vector_add", &suite, SMALL_VECTOR_ADD);
    for s in ["fast", "naive"] {
        let src = root().join("tasks/starter/vector_add/solutions").join(s);
        let dst = task.join("solutions").join(s);
        std::fs::create_dir_all(&dst).unwrap();
        for f in ["kernel.c", "solution.toml"] {
            std::fs::copy(src.join(f), dst.join(f)).unwrap();
        }
    }
    let fast = task.join("solutions/fast");
    // stderr is a pipe here: one plain line per stage, numbered, in order.
    let out = ksmith(
        &store,
        &[
            "eval",
            task.to_str().unwrap(),
            fast.to_str().unwrap(),
            "--min-time-ms",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = stderr(&out);
    assert_eq!(
        steps(&err, "eval vector_add"),
        [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)],
        "{err}"
    );
    assert!(err.contains("vector_add_fast: build"), "{err}");
    assert!(err.contains("timing against XLA"), "{err}");
    // Progress is not a result: none of it on stdout.
    assert!(!stdout(&out).contains("[1/5]"), "{}", stdout(&out));

    let quiet = ksmith(
        &store,
        &[
            "-q",
            "eval",
            task.to_str().unwrap(),
            fast.to_str().unwrap(),
            "--no-timing",
        ],
    );
    assert_eq!(quiet.status.code(), Some(0), "{}", text(&quiet));
    assert!(
        steps(&stderr(&quiet), "eval vector_add").is_empty(),
        "{}",
        stderr(&quiet)
    );
    assert!(stdout(&quiet).contains("PASSED"), "{}", stdout(&quiet));

    // bench: one line per solution, k of N, with its outcome.
    let out = ksmith(
        &store,
        &["bench", suite.to_str().unwrap(), "--min-time-ms", "10"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = stderr(&out);
    assert_eq!(steps(&err, "bench"), [(1, 2), (2, 2)], "{err}");
    for s in [
        "vector_add/fast#0 -> PASSED",
        "vector_add/naive#0 -> PASSED",
    ] {
        assert!(err.contains(s), "{s}: {err}");
    }
}

#[test]
fn tune_writes_into_the_store_never_the_task_and_nothing_when_the_untuned_solution_wins() {
    let _one = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    // Untuned SPIN=20000: the tuned SPIN=0 wins.
    spin_solution(&task.join("solutions/slow"), "slow", 20000);
    // Untuned SPIN=0: the only other configuration is slower; the untuned solution wins.
    spin_solution(&task.join("solutions/quick"), "quick", 0);
    let before = snapshot(&task);
    let tune = |sol: &str| {
        ksmith(
            &store,
            &[
                "tune",
                task.to_str().unwrap(),
                task.join("solutions").join(sol).to_str().unwrap(),
                "--min-time-ms",
                "10",
            ],
        )
    };

    let out = tune("slow");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = stderr(&out);
    // The untuned solution, then the one other configuration, as `[1/1]` with its speedup.
    assert!(err.contains("tune slow: untuned -> "), "{err}");
    assert_eq!(steps(&err, "tune slow"), [(1, 1)], "{err}");
    assert!(err.contains("tune slow: SPIN=0 -> "), "{err}");
    let written = store.join("tuned/vector_add/slow-tuned");
    let s = stdout(&out);
    assert!(
        s.contains(&format!("written to {}", written.display())),
        "{s}"
    );
    // The table has a row for the untuned solution.
    assert!(s.contains("SPIN=20000 (untuned)"), "{s}");
    let toml = std::fs::read_to_string(written.join("solution.toml")).unwrap();
    assert!(toml.contains("with SPIN=0"), "{toml}");
    let ev = check_only(task.to_str().unwrap(), written.to_str().unwrap());
    assert_eq!(json(&ev)["status"], "PASSED", "{}", text(&ev));

    let out = tune("quick");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = stdout(&out);
    assert!(s.contains("SPIN=0 (untuned)"), "{s}");
    assert!(s.contains("best [untuned solution]"), "{s}");
    assert!(
        s.contains("no configuration beat the untuned solution; nothing written"),
        "{s}"
    );
    assert!(!store.join("tuned/vector_add/quick-tuned").exists());

    // Nothing was added to or changed in the task: the next bench sees what it saw before.
    assert_eq!(snapshot(&task), before);

    // The solution itself is never the output.
    let slow = task.join("solutions/slow");
    let out = ksmith(
        &store,
        &[
            "tune",
            task.to_str().unwrap(),
            slow.to_str().unwrap(),
            "--out",
            slow.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("is the solution being tuned"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&task), before);
}

#[test]
fn hw_shows_cache_sizes_in_binary_units() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let v = json(&ksmith(&store, &["hw", "--json"]));
    let out = ksmith(&store, &["hw"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = stdout(&out);
    let lines: Vec<&str> = s.lines().filter(|l| l.starts_with("cache L")).collect();
    let caches = v["caches"].as_array().unwrap();
    assert_eq!(lines.len(), caches.len(), "{s}");
    for (line, c) in lines.iter().zip(caches) {
        let bytes = c["bytes"].as_u64().unwrap();
        // The sizes the machine reports are marked so (the measured levels are shown apart).
        let size = line.trim_end().trim_end_matches("(reported)");
        let mut words = size.split_whitespace().rev();
        let unit = words.next().unwrap();
        let number: f64 = words.next().unwrap().parse().unwrap();
        // The largest unit that keeps the number under 1024: never `307200 KiB`.
        assert!(number < 1024.0, "{line}");
        let factor = match unit {
            "B" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            u => panic!("unit {u} in {line}"),
        };
        let shown = number * factor;
        assert!(
            (shown - bytes as f64).abs() <= 0.01 * bytes as f64,
            "{line}: {bytes} bytes"
        );
        if bytes >= 1 << 20 {
            assert!(unit == "MiB" || unit == "GiB", "{line}");
        }
    }
}

#[test]
fn an_error_chain_does_not_repeat_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    // A store under a regular file: the I/O error's text was printed twice ("X: E: E").
    let out = ksmith(&file.join("store"), &["runs"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = stderr(&out);
    assert!(err.starts_with("error: store "), "{err}");
    assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn compile_diagnostics_are_printed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let task = small_task("vector_add", tmp.path(), SMALL_VECTOR_ADD);
    let bad = tmp.path().join("bad.c");
    std::fs::write(
        &bad,
        "#include <stdint.h>\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) { c[0] = a[0] + undefined_x; }\n",
    )
    .unwrap();
    let out = ksmith(
        &shared_store(),
        &["eval", task.to_str().unwrap(), bad.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let s = stdout(&out);
    assert!(s.contains("COMPILE_ERROR"), "{s}");
    assert_eq!(s.matches("'undefined_x' undeclared").count(), 1, "{s}");
}

#[test]
fn help_groups_optimize_options_and_leaves_out_global_options_that_do_nothing() {
    let store = shared_store();
    let help = stdout(&ksmith(&store, &["optimize", "--help"]));
    let headings = [
        "Input and output:",
        "Search:",
        "Judge:",
        "Agent (with --model):",
        "Agent budget:",
        "Global options:",
    ];
    let mut at = 0;
    for h in headings {
        let i = help
            .lines()
            .position(|l| l == h)
            .unwrap_or_else(|| panic!("{h} missing:\n{help}"));
        assert!(i > at, "{h} out of order:\n{help}");
        at = i;
    }
    // Each option under its heading.
    // A section runs to the next heading (a line at column 0 ending in `:`), whether clap
    // prints options one per line or, with long descriptions, one paragraph each.
    let section = |h: &str| -> String {
        help.split(&format!("\n{h}\n"))
            .nth(1)
            .unwrap()
            .lines()
            .take_while(|l| l.starts_with(' ') || l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(section("Search:").contains("--strategy"), "{help}");
    assert!(section("Judge:").contains("--min-time-ms"), "{help}");
    assert!(
        section("Agent (with --model):").contains("--model"),
        "{help}"
    );
    assert!(
        section("Agent (with --model):").contains("--no-profile"),
        "{help}"
    );
    assert!(section("Agent budget:").contains("--max-cost"), "{help}");
    assert!(section("Input and output:").contains("--out"), "{help}");

    for sub in ["runs", "show", "calls", "benches"] {
        // The help itself, not an error with an empty stdout (which hid nothing and once
        // passed this check: `runs --help` failed with "a value is required for '--threads'").
        let o = ksmith(&store, &[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{sub} --help: {}", text(&o));
        let h = stdout(&o);
        assert!(h.contains(&format!("Usage: ksmith {sub}")), "{sub}:\n{h}");
        assert!(
            !h.contains("--python") && !h.contains("--threads"),
            "{sub}:\n{h}"
        );
    }
    let h = stdout(&ksmith(&store, &["eval", "--help"]));
    assert!(h.contains("--python") && h.contains("--threads"), "{h}");
    // Still accepted before any subcommand (scripts pass them first).
    let out = ksmith(
        &store,
        &["--threads", "2", "--python", "/bin/false", "runs"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
