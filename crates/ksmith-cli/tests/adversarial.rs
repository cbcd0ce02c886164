//! The adversarial collection: misbehaving C, Triton and Pallas solutions for the starter
//! tasks, each asserted to get its exact status and reason from the real judge (real compiler,
//! real sandbox, real JAX, real Triton interpreter). Each file's first line says
//! `// task: NAME; expect: STATUS reason [line=N]` (`#` for Python). CUDA cases that need a GPU
//! are built and checked for an honest "not run: no device" on machines without one.

mod common;

use common::*;

fn expectation(file: &str) -> (String, String, Option<String>, Option<u64>) {
    let path = root()
        .join("crates/ksmith-cli/tests/adversarial")
        .join(file);
    let first = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let task = first
        .split("task: ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .trim()
        .to_string();
    let mut exp = first
        .split("expect: ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .split_whitespace();
    let status = exp.next().unwrap().to_string();
    let reason = exp.next().map(str::to_string);
    let line = exp
        .next()
        .and_then(|l| l.strip_prefix("line="))
        .map(|l| l.parse().unwrap());
    (task, status, reason, line)
}

/// Marks a case that must time like itself compiled with `-DKSMITH_HONEST` (the cheat removed).
const SAME_SPEED: &str = "no faster than itself with -DKSMITH_HONEST";

/// A solution directory for `file` with extra compiler flags.
fn solution_dir(dir: &std::path::Path, file: &str, entry: &str, flags: &str) -> String {
    let src = root()
        .join("crates/ksmith-cli/tests/adversarial")
        .join(file);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(src, dir.join("kernel.c")).unwrap();
    std::fs::write(
        dir.join("solution.toml"),
        format!(
            "name = \"adv\"\nlanguage = \"c\"\nentry_point = \"{entry}\"\nsources = [\"kernel.c\"]\nflags = [{flags}]\n"
        ),
    )
    .unwrap();
    dir.display().to_string()
}

/// A cheat that only timing could reward (caching by content, stealing the baseline's cores):
/// timed next to the same code without the cheat, it must not come out faster. The cheats
/// measured 3-10x before the judge's clock and fresh inputs; the margin leaves room for noise.
fn check_same_speed(file: &str, task: &str) {
    let entry = if task == "softmax" { "softmax" } else { task };
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let cheat = solution_dir(&tmp.path().join("cheat"), file, entry, "");
    let honest = solution_dir(
        &tmp.path().join("honest"),
        file,
        entry,
        "\"-DKSMITH_HONEST\"",
    );
    let task_dir = format!("tasks/starter/{task}");
    let speedup = |sol: &str| {
        let out = ksmith(
            &store,
            &["eval", &task_dir, sol, "--json", "--min-time-ms", "50"],
        );
        let v = json(&out);
        assert_eq!(v["status"], "PASSED", "{file}: {v:#}");
        let p = &v["performance"];
        (
            p["speedup"].as_f64().unwrap(),
            p["speedup_interval"][1].as_f64().unwrap(),
        )
    };
    // Interleaved, best of two each: noise on these VMs (a virtual CPU taken away for
    // milliseconds) only ever lowers a speedup, so the best run is the least disturbed one.
    // The cheat's figure is held against the top of the honest run's interval.
    let (mut h, mut c) = ((0.0f64, 0.0f64), 0.0f64);
    for _ in 0..2 {
        let (point, high) = speedup(&honest);
        h = (h.0.max(point), h.1.max(high));
        c = c.max(speedup(&cheat).0);
    }
    assert!(
        c < 1.75 * h.1,
        "{file}: {c:.2}x with the cheat vs {:.2}x (interval up to {:.2}x) without it (best of two each)",
        h.0,
        h.1
    );
}

fn check(file: &str) {
    let (task, status, reason, line) = expectation(file);
    let first = std::fs::read_to_string(
        root()
            .join("crates/ksmith-cli/tests/adversarial")
            .join(file),
    )
    .unwrap();
    if first.lines().next().unwrap_or("").contains(SAME_SPEED) {
        return check_same_speed(file, &task);
    }
    let store = shared_store();
    // CUDA cases the static policy cannot decide need a GPU: elsewhere they are built (nvcc
    // from the managed environment) and the backend says they were not run (exit 3), never
    // passing or failing the candidate.
    if file.ends_with(".cu") && status != "POLICY_REJECTED" && !has_gpu() {
        let out = ksmith(
            &store,
            &[
                "eval",
                &format!("tasks/starter/{task}"),
                &format!("crates/ksmith-cli/tests/adversarial/{file}"),
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(3), "{file}: {}", stderr(&out));
        let v = json(&out);
        assert_eq!(v["not_run"]["reason"], "no_device", "{file}: {v:#}");
        assert_eq!(v["not_run"]["backend"], "cuda", "{file}: {v:#}");
        assert!(v["status"].is_null(), "{file}: no verdict: {v:#}");
        return;
    }
    let task_dir = format!("tasks/starter/{task}");
    let sol = format!("crates/ksmith-cli/tests/adversarial/{file}");
    // Correctness only, except for cheats only timing can expose. A short call limit only where
    // the verdict is a timeout: elsewhere a limit must not decide the verdict, as it would on a
    // loaded machine (an OpenMP case once read TIMEOUT there).
    let limit = if status == "TIMEOUT" { "5" } else { "300" };
    let mut args = vec![
        "eval",
        task_dir.as_str(),
        sol.as_str(),
        "--json",
        "--timeout",
        limit,
    ];
    // Cheats only timing can expose, and attacks on the clock itself, are timed.
    if reason.as_deref() == Some("implausible_speed")
        || first.lines().next().unwrap_or("").contains("; timed")
    {
        args.extend(["--min-time-ms", "20"]);
    } else {
        args.push("--no-timing");
    }
    let out = ksmith(&store, &args);
    let v = json(&out);
    assert_eq!(v["status"], status.as_str(), "{file}: {v:#}");
    if let Some(r) = &reason {
        assert_eq!(v["reason"], r.as_str(), "{file}: {v:#}");
    }
    let expected_code = if status == "PASSED" { 0 } else { 1 };
    assert_eq!(
        out.status.code(),
        Some(expected_code),
        "{file}: exit code; stderr {}",
        stderr(&out)
    );
    if let Some(line) = line {
        let diags = v["build"]["diagnostics"].as_array().unwrap();
        let err = diags
            .iter()
            .find(|d| d["severity"] == "error")
            .expect("an error diagnostic");
        assert_eq!(err["line"].as_u64(), Some(line), "{file}: {err}");
        assert_eq!(err["file"], file);
    }
}

macro_rules! adversarial {
    ($ext:literal: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(concat!(stringify!($name), $ext));
            }
        )*
    };
}

adversarial!(
    ".c":
    segfault,
    infinite_loop,
    exit_midcall,
    unwritten,
    zeros,
    nans,
    mutates_input,
    pointer_cache,
    first_shape_only,
    omp_race,
    alloc_100gb,
    stdout_flood,
    forbidden_call,
    fork_bomb,
    syntax_error,
    good_reverse_sum,
    good_kahan_matmul,
    content_cache,
    forge_reply,
    ansi_fake_pass,
    escape_attempts,
    timer_forge,
    spin_threads,
    hook_reply_window,
    hook_prepare_window,
    hook_log_link,
    hook_marker_fifo,
    hook_truncate_slots,
    include_devzero,
    crash_while_timed,
    fill_scratch,
    syscall_after_stop,
    output_file_ragged,
    forged_inputs_changed,
    huge_library,
    large_library,
    forged_alloc_marker,
    phase_detect,
    dlvsym_fopen,
    inline_syscall,
    forged_interpreted,
    disturb_own_slow_rounds,
);

/// The library policy names what it refused: the dynamic lookup a kernel imported (hidden from
/// the source scan by token pasting) and a system-call instruction of its own, with where it is.
#[test]
fn a_refused_import_or_instruction_is_named() {
    let store = shared_store();
    for (file, name, said) in [
        ("dlvsym_fopen.c", "dlvsym", "looks up code at run time"),
        ("inline_syscall.c", "syscall", "(in .text)"),
    ] {
        let out = ksmith(
            &store,
            &[
                "eval",
                "tasks/starter/vector_add",
                &format!("crates/ksmith-cli/tests/adversarial/{file}"),
                "--json",
                "--no-timing",
            ],
        );
        let v = json(&out);
        assert_eq!(v["status"], "POLICY_REJECTED", "{file}: {v:#}");
        let names: Vec<&str> = v["policy"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&name), "{file}: {names:?}");
        let detail = v["detail"].as_str().unwrap_or("");
        assert!(
            detail.contains(&format!("`{name}`")) && detail.contains(said),
            "{file}: {detail}"
        );
    }
}

/// The runner's log is read through the judge's own descriptor: a link the candidate puts in
/// its place (to a secret, here /etc/shadow) is never followed.
#[test]
fn a_planted_log_link_is_not_followed() {
    let out = ksmith(
        &shared_store(),
        &[
            "eval",
            "tasks/starter/vector_add",
            "crates/ksmith-cli/tests/adversarial/hook_log_link.c",
            "--json",
            "--no-timing",
        ],
    );
    let v = json(&out);
    let log = v["log"].as_str().unwrap_or("");
    assert!(!log.contains("root:"), "the judge followed the link: {log}");
}

// Triton and Pallas run in their interpreters here (correctness only, small workloads).
adversarial!(
    ".py":
    triton_good,
    triton_unwritten,
    triton_cached_output,
    triton_side_stream,
    triton_oob_write,
    triton_infinite_loop,
    pallas_good,
    pallas_unwritten,
    pallas_wrong_shape,
    pallas_wrong_dtype,
    pallas_raises,
    pallas_reference_call,
    pallas_host_math,
    pallas_host_callback,
    pallas_syntax_error,
    pallas_module_escape,
    triton_deep_nesting,
    pallas_host_broadcast_matmul,
    pallas_host_operators,
    triton_host_arithmetic,
    triton_aot_result_fifo,
);

#[test]
fn every_adversarial_file_has_a_test() {
    let dir = root().join("crates/ksmith-cli/tests/adversarial");
    let src =
        std::fs::read_to_string(root().join("crates/ksmith-cli/tests/adversarial.rs")).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let stem = name
            .trim_end_matches(".cu")
            .trim_end_matches(".c")
            .trim_end_matches(".py");
        assert!(src.contains(&format!("    {stem},")), "{name} has no test");
    }
}

/// Every hostile C case, run one after another into one store, changes nothing that outlives
/// it: the harness files, earlier results, and the verdicts of an honest and a wrong solution
/// judged afterwards in the same store.
#[test]
fn the_collection_changes_no_later_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let honest = |store: &std::path::Path| {
        let v = json(&ksmith(
            store,
            &[
                "eval",
                "tasks/starter/vector_add",
                "tasks/starter/vector_add/solutions/fast",
                "--json",
                "--min-time-ms",
                "20",
            ],
        ));
        assert_eq!(v["status"], "PASSED", "{v:#}");
        v
    };
    let before = honest(&store);
    // A second figure before the collection: a loaded machine once read one evaluation 5x off.
    let before_again = honest(&store);
    let harness = |v: &serde_json::Value| v["environment"]["harness_version"].clone();
    let dir = root().join("crates/ksmith-cli/tests/adversarial");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".c"))
        .collect();
    files.sort();
    for f in &files {
        let (task, _, _, _) = expectation(f);
        let out = ksmith(
            &store,
            &[
                "eval",
                &format!("tasks/starter/{task}"),
                &format!("crates/ksmith-cli/tests/adversarial/{f}"),
                "--json",
                "--no-timing",
                "--timeout",
                "5",
            ],
        );
        assert!(out.status.code().is_some(), "{f}: ksmith itself died");
    }
    assert!(
        !std::path::Path::new("/tmp/ksmith-adversarial-escape").exists(),
        "a candidate created a file outside its directory"
    );
    // The first result reads back as it was stored.
    let shown = json(&ksmith(&store, &["show", "1", "--json"]));
    assert_eq!(shown["status"], "PASSED");
    assert_eq!(
        shown["performance"]["speedup"], before["performance"]["speedup"],
        "a stored result changed"
    );
    let after = honest(&store);
    assert_eq!(harness(&after), harness(&before));
    let figure = |v: &serde_json::Value| {
        let p = &v["performance"];
        let at = |i: usize| p["speedup_interval"][i].as_f64().unwrap();
        (p["speedup"].as_f64().unwrap(), at(0), at(1))
    };
    // Wide bounds: a loaded 2-core machine moves a memory-bound kernel's speedup by up to ~2x
    // between two evaluations (and once 5x); a tampered harness or baseline moved it 10x, and
    // it stays moved. So the figure after must be near one of the two before (or overlap its
    // interval), measured again once if it is not: noise does not repeat, a tamper does.
    let near = |a: &serde_json::Value, b: &serde_json::Value| {
        let ((s0, lo0, hi0), (s1, lo1, hi1)) = (figure(a), figure(b));
        (s1 > s0 / 4.0 && s1 < s0 * 4.0) || (lo1 <= hi0 && lo0 <= hi1)
    };
    let after = if near(&before, &after) || near(&before_again, &after) {
        after
    } else {
        honest(&store)
    };
    let (s0, lo0, hi0) = figure(&before);
    let (s1, lo1, hi1) = figure(&after);
    assert!(
        near(&before, &after) || near(&before_again, &after),
        "the honest solution's speedup moved from {s0:.2}x ({lo0:.2}-{hi0:.2}) to {s1:.2}x ({lo1:.2}-{hi1:.2})"
    );
    let (zeros_task, _, _, _) = expectation("zeros.c");
    let wrong = json(&ksmith(
        &store,
        &[
            "eval",
            &format!("tasks/starter/{zeros_task}"),
            "crates/ksmith-cli/tests/adversarial/zeros.c",
            "--json",
            "--no-timing",
        ],
    ));
    assert_eq!(wrong["status"], "INCORRECT_NUMERICAL", "{wrong:#}");
}

#[test]
fn flood_is_captured_truncated_and_never_parsed() {
    let store = shared_store();
    let out = ksmith(
        &store,
        &[
            "eval",
            "tasks/starter/rmsnorm",
            "crates/ksmith-cli/tests/adversarial/stdout_flood.c",
            "--json",
            "--no-timing",
        ],
    );
    let v = json(&out);
    let log = v["log"].as_str().unwrap();
    assert!(
        log.contains("PASSED"),
        "the flood should be in the captured log"
    );
    assert!(
        log.len() <= 20_000,
        "log not truncated: {} bytes",
        log.len()
    );
    assert_eq!(v["status"], "INCORRECT_NUMERICAL");
}

/// `ksmith eval ARGS --json` with a private TMPDIR (every sandbox directory of the evaluation
/// lives under it): the result and that directory.
fn eval_in_private_tmp(args: &[&str]) -> (serde_json::Value, tempfile::TempDir) {
    let store = shared_store();
    let tmp = tempfile::tempdir().unwrap();
    let mut all = vec!["eval"];
    all.extend(args);
    all.push("--json");
    let out = ksmith_env(&store, &all, &[("TMPDIR", tmp.path().to_str().unwrap())]);
    (json(&out), tmp)
}

/// No process of a sandbox under `dir` still runs (a sandbox's processes start in its own
/// directory), a moment after the evaluation ended.
fn assert_no_process_under(dir: &std::path::Path) {
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|c| c.starts_with(dir))
                .unwrap_or(false)
        })
        .collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn no_candidate_process_survives_an_evaluation() {
    let (v, tmp) = eval_in_private_tmp(&[
        "tasks/starter/vector_add",
        "crates/ksmith-cli/tests/adversarial/infinite_loop.c",
        "--no-timing",
        "--timeout",
        "2",
    ]);
    assert_eq!(v["status"], "TIMEOUT");
    assert_no_process_under(tmp.path());
}

#[test]
fn a_build_that_fails_leaves_no_runner_behind() {
    // The runner starts while its candidate is compiled: a compile error must stop it and
    // remove its directory.
    let (v, tmp) = eval_in_private_tmp(&[
        "tasks/starter/vector_add",
        "crates/ksmith-cli/tests/adversarial/syntax_error.c",
    ]);
    assert_eq!(v["status"], "COMPILE_ERROR");
    assert_no_process_under(tmp.path());
    let dirs: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert!(dirs.is_empty(), "sandbox directories left: {dirs:?}");
}

// CUDA: the policy cases are judged on any machine; the others on a machine with nvcc and a GPU
// (`scripts/gpu-check.sh` runs them there), and are reported unavailable elsewhere.
adversarial!(
    ".cu":
    cuda_side_stream,
    cuda_vendor_blas,
    cuda_unwritten,
    cuda_cached_output,
    cuda_oob_write,
    cuda_infinite_loop,
);
