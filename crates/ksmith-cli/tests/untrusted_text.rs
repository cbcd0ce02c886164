//! Candidate text shown to a person is escaped (DESIGN.md, the judge's rule 5). A candidate
//! that prints ANSI sequences repainting the screen as a fake `PASSED`, a compiler error
//! quoting hostile bytes from the source, and hostile solution and directory names must never
//! reach the terminal raw: no ESC byte, no C1 CSI, no carriage return, no bidi override in
//! anything `ksmith` writes, in human output or `--json`, and the real status is the one shown.

mod common;

use common::*;
use std::process::Output;

const FAKE_PASS: &str = "crates/ksmith-cli/tests/adversarial/ansi_fake_pass.c";

/// Characters that must never be written raw (the escaped forms are plain text).
const RAW: [(char, &str); 5] = [
    ('\x1b', "ESC"),
    ('\r', "carriage return"),
    ('\u{9b}', "C1 CSI"),
    ('\u{202e}', "right-to-left override"),
    ('\u{7}', "BEL"),
];

/// Both streams of `o` are free of raw control characters and bidi overrides.
fn assert_clean(o: &Output, what: &str) {
    for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        assert!(
            !bytes.contains(&0x1b),
            "{what}: raw ESC byte on {name}:\n{}",
            String::from_utf8_lossy(bytes)
        );
        let text = String::from_utf8_lossy(bytes);
        for (c, cname) in RAW {
            assert!(!text.contains(c), "{what}: raw {cname} on {name}:\n{text}");
        }
    }
}

/// No line of `text` starts with the candidate's fake lines (they may only appear indented
/// after a `| ` marker, as quoted output).
fn assert_no_fake_lines(text: &str, what: &str) {
    for l in text.lines() {
        assert!(
            !l.starts_with("vector_add_fast [") && !l.starts_with("  speedup vs XLA"),
            "{what}: a fake line reached the terminal as a line of its own: {l:?}\n{text}"
        );
    }
}

fn fake_pass_eval(store: &std::path::Path, json: bool) -> Output {
    let mut args = vec![
        "eval",
        "tasks/starter/vector_add",
        FAKE_PASS,
        "--timeout",
        "10",
    ];
    if json {
        args.push("--json");
    }
    ksmith(store, &args)
}

#[test]
fn fake_pass_is_shown_escaped_with_its_real_status() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let out = fake_pass_eval(&store, false);
    let text = text(&out);
    assert_eq!(out.status.code(), Some(1), "exit code:\n{text}");
    assert_clean(&out, "eval");
    assert_no_fake_lines(&text, "eval");
    let status = text
        .lines()
        .find(|l| l.contains(" on task vector_add: ") && !l.starts_with(' '))
        .unwrap_or_else(|| panic!("no status line:\n{text}"));
    assert!(
        status.starts_with("ansi_fake_pass [") && status.contains(": INCORRECT_NUMERICAL"),
        "{status}"
    );
    // The candidate's output is quoted, escaped (ESC as the text `\x1b`).
    assert!(text.contains("candidate output ("), "{text}");
    assert!(
        text.contains(
            "    | \\x1b[2J\\x1b[H\\x1b[1;32mvector_add_fast [00000000] on task vector_add: PASSED"
        ),
        "{text}"
    );
    assert!(text.contains("\\u{9b}2J\\u{202e}00.99x"), "{text}");

    // The stored evaluation, shown again: the same, with its id.
    let id = text
        .split("stored as evaluation ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no evaluation id:\n{text}"))
        .to_string();
    let shown = ksmith(&store, &["show", &id]);
    let stext = common::text(&shown);
    assert!(shown.status.success(), "{stext}");
    assert_clean(&shown, "show");
    assert_no_fake_lines(&stext, "show");
    assert!(stext.contains(": INCORRECT_NUMERICAL"), "{stext}");
    assert!(stext.contains("\\x1b[2J"), "{stext}");
}

#[test]
fn fake_pass_json_escapes_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let out = fake_pass_eval(&store, true);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));
    assert!(!out.stdout.contains(&b'\r') && !out.stderr.contains(&b'\r'));
    let v = json(&out);
    assert_eq!(v["status"], "INCORRECT_NUMERICAL", "{v:#}");
    // The candidate's text is kept, for programs, as JSON escapes.
    let log = v["log"].as_str().unwrap();
    assert!(log.contains("\x1b[2J"), "log not captured: {log:?}");
    assert!(log.contains("\u{9b}2J\u{202e}00.99x"), "{log:?}");
    assert_clean(&out, "eval --json");
    assert!(stdout(&out).contains("\\u001b[2J"));
    assert!(stdout(&out).contains("\\u009b2J\\u202e00.99x"));
    let id = v["id"].as_i64().unwrap().to_string();
    let shown = ksmith(&store, &["show", &id, "--json"]);
    assert!(shown.status.success(), "{}", text(&shown));
    assert_clean(&shown, "show --json");
    assert_eq!(json(&shown)["status"], "INCORRECT_NUMERICAL");
}

#[test]
fn compiler_diagnostics_quoting_hostile_source_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let src = dir.path().join("hostile_error.c");
    std::fs::write(
        &src,
        "#include <stdint.h>\n\
         #error \"\x1b[2J\x1b[Hvector_add_fast [00000000] on task vector_add: PASSED\r\u{202e}x\"\n\
         void vector_add(const float* a, const float* b, float* c, int64_t N) {\n\
             for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i] \x1b[31m;\n\
         }\n",
    )
    .unwrap();
    let out = ksmith(
        &store,
        &["eval", "tasks/starter/vector_add", src.to_str().unwrap()],
    );
    let text = text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(": COMPILE_ERROR"), "{text}");
    assert_clean(&out, "compile error");
    assert_no_fake_lines(&text, "compile error");
    assert!(
        text.contains("\\x1b[2J"),
        "the diagnostic is not shown: {text}"
    );
}

#[test]
fn hostile_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    // A solution whose name and source file name carry escapes and a fake status line.
    let sol = dir.path().join("named");
    std::fs::create_dir_all(&sol).unwrap();
    let file = "k\x1b[2J.c";
    std::fs::write(
        sol.join(file),
        "#include <stdint.h>\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {\n    for (int64_t i = 0; i < N; i++) c[i] = a[i] - b[i];\n}\n",
    )
    .unwrap();
    std::fs::write(
        sol.join("solution.toml"),
        "name = \"evil\\u001b[2J\\u001b[H\\nvector_add_fast [00000000] on task vector_add: PASSED\\r\\u202e\"\n\
         language = \"c\"\nentry_point = \"vector_add\"\nsources = [\"k\\u001b[2J.c\"]\n",
    )
    .unwrap();
    let out = ksmith(
        &store,
        &["eval", "tasks/starter/vector_add", sol.to_str().unwrap()],
    );
    let text = text(&out);
    // Refused as input (exit 2) or judged wrong (exit 1): either way, shown escaped.
    assert!(matches!(out.status.code(), Some(1) | Some(2)), "{text}");
    assert_clean(&out, "hostile names");
    assert_no_fake_lines(&text, "hostile names");
    // The bench table and its progress messages: a hostile --solutions directory name.
    let suite = dir.path().join("suite");
    small_task(
        "vector_add",
        &suite,
        "[[workloads]]\naxes = { N = 1000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n",
    );
    let sols = dir.path().join("evil\x1b[31m\u{202e}");
    std::fs::create_dir_all(&sols).unwrap();
    std::fs::copy(root().join(FAKE_PASS), sols.join("vector_add.c")).unwrap();
    let out = ksmith(
        &store,
        &[
            "bench",
            suite.to_str().unwrap(),
            "--solutions",
            sols.to_str().unwrap(),
            "--no-timing",
        ],
    );
    let text = common::text(&out);
    assert_clean(&out, "bench");
    assert!(text.contains("INCORRECT_NUMERICAL"), "{text}");
    assert!(text.contains("evil\\x1b[31m\\u{202e}"), "{text}");
}
