//! Untrusted solution files never reach the host: `ksmith eval` and `ksmith validate` refuse,
//! with exit 2 and a `file: field: message` line, compiler flags off the allow-list, source
//! files that are symbolic links or outside the solution directory, and names that are not safe
//! path components. Each refusal happens while loading the solution, before any build or
//! Python, so these tests take milliseconds.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// Loading fails fast; anything slower means the solution got further than it should.
const FAST: Duration = Duration::from_secs(10);

/// A solution directory for vector_add: the naive kernel.c and a solution.toml with `rest`.
fn solution_dir(rest: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("tasks/starter/vector_add/solutions/naive/kernel.c"),
        d.path().join("kernel.c"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("solution.toml"),
        format!("language = \"c\"\nentry_point = \"vector_add\"\n{rest}"),
    )
    .unwrap();
    d
}

/// `ksmith eval tasks/starter/vector_add SOLUTION --json --no-timing` on a store of its own.
fn eval(solution: &Path) -> Output {
    let store = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let o = ksmith(
        store.path(),
        &[
            "eval",
            "tasks/starter/vector_add",
            solution.to_str().unwrap(),
            "--json",
            "--no-timing",
        ],
    );
    assert!(
        start.elapsed() < FAST,
        "loading took {:?}: {}",
        start.elapsed(),
        text(&o)
    );
    o
}

/// Exit code 2 (input error) and every `needles` in stderr.
fn refused(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = stderr(o);
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`:\n{err}");
    }
}

/// A marker path no other test run uses.
fn marker(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!("PWNED_{tag}_{}_{nanos}", std::process::id()))
}

#[test]
fn a_wrapper_flag_is_refused_before_anything_runs() {
    let m = marker("wrapper");
    let d = solution_dir(&format!(
        "sources = [\"kernel.c\"]\nflags = [\"-wrapper\", \"/bin/sh,-c,touch {}\"]\n",
        m.display()
    ));
    let o = eval(d.path());
    refused(
        &o,
        &[
            "solution.toml: flags[0]: flag `-wrapper` is not allowed",
            "another program",
            "solution.toml: flags[1]: flag `/bin/sh,-c,touch",
        ],
    );
    assert!(!m.exists(), "the wrapper ran: {} exists", m.display());
}

#[test]
fn flags_that_read_or_load_host_files_are_refused() {
    for (flag, why) in [
        ("-B/tmp", "own programs"),
        ("-specs=/tmp/x.specs", "specs file"),
        ("-fplugin=/tmp/x.so", "plugin"),
        ("@/tmp/flags.txt", "response file"),
        ("-include", "reads a file"),
        ("-Wl,-rpath,/tmp", "linker"),
        ("-DX=$(id)", "contains `$`"),
    ] {
        let d = solution_dir(&format!("sources = [\"kernel.c\"]\nflags = [\"{flag}\"]\n"));
        refused(
            &eval(d.path()),
            &[&format!("solution.toml: flags[0]: flag `{flag}`"), why],
        );
    }
}

#[cfg(unix)]
#[test]
fn a_kernel_c_linked_to_etc_passwd_is_refused() {
    let d = solution_dir("sources = [\"kernel.c\"]\n");
    std::fs::remove_file(d.path().join("kernel.c")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.path().join("kernel.c")).unwrap();
    let o = eval(d.path());
    refused(
        &o,
        &["solution.toml: sources[0]: kernel.c is a symbolic link"],
    );
    assert!(!text(&o).contains("root:"), "{}", text(&o));

    // A bare source file that is a link, too.
    let bare = tempfile::tempdir().unwrap();
    let link = bare.path().join("kernel.c");
    std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
    let o = eval(&link);
    refused(&o, &["kernel.c: -: kernel.c is a symbolic link"]);
    assert!(!text(&o).contains("root:"), "{}", text(&o));
}

#[test]
fn a_source_outside_the_solution_directory_is_refused() {
    for src in ["../kernel.c", "/etc/passwd"] {
        let d = solution_dir(&format!("sources = [\"{src}\"]\n"));
        refused(
            &eval(d.path()),
            &[
                "solution.toml: sources[0]: ",
                src,
                "inside the solution directory",
            ],
        );
    }
}

#[test]
fn a_name_that_is_not_a_path_component_is_refused() {
    let d = solution_dir("name = \"../../x\"\nsources = [\"kernel.c\"]\n");
    refused(
        &eval(d.path()),
        &["solution.toml: name: `../../x` is not a safe name"],
    );
}

#[test]
fn validate_reports_a_hostile_solution_in_the_task() {
    let m = marker("validate");
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("vector_add");
    std::fs::create_dir_all(task.join("solutions")).unwrap();
    for f in ["task.toml", "reference.py"] {
        std::fs::copy(
            root().join("tasks/starter/vector_add").join(f),
            task.join(f),
        )
        .unwrap();
    }
    let evil = solution_dir(&format!(
        "sources = [\"kernel.c\"]\nflags = [\"-wrapper\", \"/bin/sh,-c,touch {}\"]\n",
        m.display()
    ));
    std::fs::rename(evil.path(), task.join("solutions/evil")).unwrap();
    let store = tempfile::tempdir().unwrap();
    let o = ksmith(
        store.path(),
        &["validate", task.to_str().unwrap(), "--no-run"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = stdout(&o);
    assert!(
        out.contains("solution.toml: flags[0]: flag `-wrapper` is not allowed"),
        "{out}"
    );
    assert!(!m.exists());
}
