//! Helpers for integration tests: run the real `ksmith` binary on real tasks.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A store shared by the tests of one run, so reference outputs and builds are computed once
/// (`KSMITH_TEST_STORE` moves it, e.g. for a second pass as another user).
pub fn shared_store() -> PathBuf {
    let p = std::env::var_os("KSMITH_TEST_STORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target").join("ksmith-test-store"));
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Runs ksmith with `args` against `store`.
pub fn ksmith(store: &Path, args: &[&str]) -> Output {
    ksmith_env(store, args, &[])
}

/// Runs ksmith with `args` and extra environment variables. `eval` judges anew (the tests are
/// about the judge; a verdict stored by an earlier run of the suite must not stand in for it)
/// unless `env` sets `KSMITH_EVAL_AGAIN=0`.
pub fn ksmith_env(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksmith"));
    if store == shared_store() {
        // The suite's shared store holds every task's references for every test; under the
        // default cap one test's evaluation could evict what another is about to reuse
        // (tests/cache.rs tests the cap on stores of its own).
        cmd.env("KSMITH_REFERENCE_CACHE_MB", "65536");
    }
    cmd.arg("--store")
        .arg(store)
        .args(args)
        .env("KSMITH_EVAL_AGAIN", "1")
        // Parallel tests on one store would queue behind each other's timing (the scheduler is
        // tested in tests/scheduler.rs, which turns it back on).
        .env("KSMITH_DEVICE_LOCK", "0")
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .expect("run ksmith")
}

/// Starts ksmith in the background, waits until `ready()` holds (it must not exit first; at
/// most 300 s), waits `settle` more, then kills it with SIGKILL.
pub fn kill_9_when(
    store: &Path,
    args: &[&str],
    ready: impl Fn() -> bool,
    settle: std::time::Duration,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ksmith");
    let start = std::time::Instant::now();
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ksmith {args:?} exited before it was ready to be killed"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(300),
            "ksmith {args:?} never got ready to be killed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(settle);
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

/// `ksmith eval TASK SOLUTION --json --no-timing` against the shared store.
pub fn check_only(task: &str, solution: &str) -> Output {
    ksmith(
        &shared_store(),
        &["eval", task, solution, "--json", "--no-timing"],
    )
}

/// stdout as a string.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as a string.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses stdout as exactly one JSON document.
pub fn json(o: &Output) -> serde_json::Value {
    let s = stdout(o);
    serde_json::from_str(s.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{s}\nstderr:\n{}",
            stderr(o)
        )
    })
}

/// Copies a starter task into `dest` with its workloads replaced by `workloads` (TOML text),
/// so tests can run real tasks at small sizes.
pub fn small_task(name: &str, dest: &Path, workloads: &str) -> PathBuf {
    let src = root().join("tasks/starter").join(name);
    let dir = dest.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let toml = std::fs::read_to_string(src.join("task.toml")).unwrap();
    let head = toml.split("[[workloads]]").next().unwrap();
    std::fs::write(dir.join("task.toml"), format!("{head}{workloads}")).unwrap();
    std::fs::copy(src.join("reference.py"), dir.join("reference.py")).unwrap();
    dir
}

/// A new store under `dir` with the machine's roofline copied from the shared store (measured
/// there once), so a test with its own store does not measure it again.
pub fn fresh_store(dir: &Path) -> PathBuf {
    let shared = shared_store();
    if !shared.join("hw.json").exists() {
        assert!(ksmith(&shared, &["hw"]).status.success());
    }
    let s = dir.join("store");
    std::fs::create_dir_all(&s).unwrap();
    std::fs::copy(shared.join("hw.json"), s.join("hw.json")).unwrap();
    s
}

/// stdout then stderr, as one string (for messages and failure output).
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether this machine has a GPU that runs CUDA (`nvidia-smi -L` lists one). Without one,
/// CUDA candidates are still built (nvcc comes from the managed environment) but not run.
pub fn has_gpu() -> bool {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .map(|o| o.status.success() && !o.stdout.is_empty())
        .unwrap_or(false)
}

/// The id of the run an agent run or search printed (`search run-...: loop on TASK ...`).
pub fn search_run_id(out: &str) -> String {
    let at = out.find("search run-").expect("run id printed") + "search ".len();
    out[at..]
        .split(|c: char| c == ':' || c.is_whitespace())
        .next()
        .unwrap()
        .to_string()
}
