//! Agent runs that fail early, end honestly and are driven by one process at a time, `--json`
//! on `runs`, `calls` and `validate`, and a store that can only be read: the real binary, real
//! tasks, real SQLite. A `manual:` run (it waits for a reply file) stands in for a run that is
//! busy when it is signalled, locked or killed.

mod common;

use common::{fresh_store, json, ksmith, ksmith_env, root, small_task, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn db(store: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(store.join("ksmith.db")).unwrap()
}

fn count(store: &Path, table: &str) -> i64 {
    if !store.join("ksmith.db").exists() {
        return 0;
    }
    db(store)
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap_or(0)
}

fn plan(strategy: &str) -> String {
    format!("## Strategy\n{strategy}\n## Expected effect\n1.5x\n## Risks\nNone.\n")
}

/// A run of `ksmith` in the background, its stderr in a file.
struct Bg {
    child: Child,
    err: PathBuf,
}

impl Bg {
    fn spawn(store: &Path, args: &[&str], err: PathBuf) -> Bg {
        let child = Command::new(env!("CARGO_BIN_EXE_ksmith"))
            .arg("--store")
            .arg(store)
            .args(args)
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Bg { child, err }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits (at most 300 s) until `ready()`; the process must not end first.
    fn wait_until(&mut self, what: &str, ready: impl Fn() -> bool) {
        let start = Instant::now();
        while !ready() {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "ksmith ended before {what}:\n{}",
                self.stderr()
            );
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "never {what}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `sig` and waits for the exit (at most 60 s: "promptly", on a loaded machine).
    fn signal(mut self, sig: i32) -> (std::process::ExitStatus, String) {
        unsafe { libc::kill(self.child.id() as i32, sig) };
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return (st, self.stderr());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "ksmith did not end after signal {sig}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn runs_json(store: &Path) -> Vec<Value> {
    let o = ksmith(store, &["runs", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    json(&o)["runs"].as_array().unwrap().clone()
}

fn the_run(store: &Path) -> Value {
    let runs = runs_json(store);
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// Waits until the run asks its planner (call 0) through `inbox`.
fn asking(inbox: &Path) -> impl Fn() -> bool + '_ {
    move || inbox.join("0000-planner.prompt.md").exists()
}

#[test]
fn a_run_is_driven_by_one_process_ends_on_signals_as_interrupted_and_resumes_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let inbox = dir.path().join("inbox");
    let model = format!("manual:{}", inbox.display());
    // One small workload: the run's judging is not what this test is about.
    let task = small_task(
        "vector_add",
        dir.path(),
        "[[workloads]]\naxes = { N = 300000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    let start = [
        "optimize",
        task.to_str().unwrap(),
        "--from",
        naive.to_str().unwrap(),
        "--model",
        &model,
        "--iterations",
        "1",
        "--no-profile",
        "--tune-budget",
        "0",
        "--min-time-ms",
        "20",
    ];
    // 1. The run judges its start, then waits for the planner: busy, and locked.
    let mut bg = Bg::spawn(&store, &start, dir.path().join("optimize.err"));
    bg.wait_until("asking the planner", asking(&inbox));
    let pid = bg.child.id();
    let run = the_run(&store);
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["status"], "running", "{run}");
    assert_eq!(run["pid"], pid, "{run}");
    assert_eq!(run["process_gone"], false, "{run}");
    let t = Instant::now();
    let second = ksmith(&store, &["resume", &id]);
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(
        text(&second).contains(&format!("run {id} is in use by ksmith process {pid}")),
        "{}",
        text(&second)
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "refused at once, not after judging"
    );
    assert_eq!(
        count(&store, "llm_calls"),
        0,
        "the refused resume called nobody"
    );

    // 2. SIGKILL: nothing recorded, but `runs` finds the process gone; resume takes over.
    let (st, _) = bg.signal(libc::SIGKILL);
    assert!(!st.success());
    let run = the_run(&store);
    assert_eq!(run["stored_status"], "running", "{run}");
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["process_gone"], true, "{run}");
    let listed = ksmith(&store, &["runs"]);
    assert!(
        text(&listed).contains("interrupted (process gone)"),
        "{}",
        text(&listed)
    );
    std::fs::remove_file(inbox.join("0000-planner.prompt.md")).unwrap();
    let mut bg = Bg::spawn(&store, &["resume", &id], dir.path().join("resume1.err"));
    bg.wait_until("asking the planner again", asking(&inbox));
    assert!(
        bg.stderr().contains("(its process is gone)"),
        "{}",
        bg.stderr()
    );
    // A resume while a resume runs is refused too.
    let third = ksmith(&store, &["resume", &id]);
    assert_eq!(third.status.code(), Some(2), "{}", text(&third));
    assert!(text(&third).contains("is in use by ksmith process"));

    // 3. SIGTERM: recorded as interrupted (an honest end), exit 128 + 15.
    let (st, err) = bg.signal(libc::SIGTERM);
    assert_eq!(st.code(), Some(143), "{err}");
    assert!(
        err.contains(&format!("SIGTERM: run {id} interrupted")),
        "{err}"
    );
    let run = the_run(&store);
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["stored_status"], "interrupted", "{run}");
    assert_eq!(run["process_gone"], false, "{run}");
    assert_eq!(run["stop_reason"], "interrupted by SIGTERM", "{run}");

    // 4. A resume whose provider cannot work is refused before anything changes.
    std::fs::rename(&inbox, dir.path().join("inbox.away")).unwrap();
    std::fs::write(&inbox, "not a directory").unwrap();
    let o = ksmith(&store, &["resume", &id]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot create directory"), "{}", text(&o));
    assert_eq!(the_run(&store)["stored_status"], "interrupted");
    std::fs::remove_file(&inbox).unwrap();
    std::fs::rename(dir.path().join("inbox.away"), &inbox).unwrap();

    // 5. SIGINT (Ctrl-C): the same, exit 128 + 2.
    std::fs::remove_file(inbox.join("0000-planner.prompt.md")).unwrap();
    let mut bg = Bg::spawn(&store, &["resume", &id], dir.path().join("resume2.err"));
    bg.wait_until("asking the planner a third time", asking(&inbox));
    let (st, err) = bg.signal(libc::SIGINT);
    assert_eq!(st.code(), Some(130), "{err}");
    assert_eq!(the_run(&store)["stop_reason"], "interrupted by SIGINT");

    // 6. Answered, the run ends; each call was made once, the start judged once.
    std::fs::write(
        inbox.join("0000-planner.reply.md"),
        plan("Parallelize the loop."),
    )
    .unwrap();
    std::fs::write(
        inbox.join("0001-implementer.reply.md"),
        "kernel.c\n<<<<<<< SEARCH\n    for (int64_t i = 0; i < N; i++)\n=======\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n>>>>>>> REPLACE\n",
    )
    .unwrap();
    let o = ksmith(&store, &["resume", &id]);
    assert!(o.status.success(), "{}", text(&o));
    let run = the_run(&store);
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["calls"], 2, "{run}");
    let dup: i64 = db(&store)
        .query_row(
            "SELECT count(*) - count(DISTINCT eval_key) FROM evaluations",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(dup, 0, "no evaluation repeated across four processes");

    // `calls --json`: stable fields, totals.
    let o = ksmith(&store, &["calls", &id, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["run"], id.as_str());
    let calls = v["calls"].as_array().unwrap();
    let roles: Vec<&str> = calls.iter().map(|c| c["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["planner", "implementer"], "{v}");
    for (i, c) in calls.iter().enumerate() {
        assert_eq!(c["seq"], i, "{c}");
        assert!(c["tokens_in"].as_u64().unwrap() > 0, "{c}");
        assert_eq!(c["estimated"], true, "{c}");
        assert!(c["error"].is_null(), "{c}");
        assert!(c.get("prompt").is_none(), "prompts only with --full: {c}");
    }
    assert_eq!(v["totals"]["calls"], 2);
    let full = json(&ksmith(&store, &["calls", &id, "--json", "--full"]));
    assert!(
        full["calls"][0]["prompt"]
            .as_str()
            .unwrap()
            .contains("vector_add"),
        "{full}"
    );
}

/// Arguments, environment, what the error must say.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn a_provider_that_cannot_work_is_refused_before_any_work_naming_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = "tasks/starter/vector_add";
    let bad_script = dir.path().join("bad.toml");
    std::fs::write(&bad_script, "[[reply]]\nrole = 3\n").unwrap();
    let bad_script = format!("scripted:{}", bad_script.display());
    let a_file = dir.path().join("a-file");
    std::fs::write(&a_file, "x").unwrap();
    let manual_under_file = format!("manual:{}/inbox", a_file.display());
    let no_keys = [
        ("GEMINI_API_KEY", ""),
        ("GOOGLE_API_KEY", ""),
        ("ANTHROPIC_API_KEY", ""),
        ("OPENAI_API_KEY", ""),
        ("KSMITH_OPENAI_COMPAT_BASE_URL", ""),
        ("KSMITH_CONFIG", "/dev/null"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut env = no_keys.to_vec();
        env.extend_from_slice(extra);
        env
    };
    let cases: Vec<Case> = vec![
        (
            vec!["optimize", task, "--model", "gemini:gemini-2.5-pro"],
            with(&[]),
            "set GEMINI_API_KEY or GOOGLE_API_KEY",
        ),
        (
            vec!["optimize", task, "--model", "anthropic:claude-sonnet-4"],
            with(&[]),
            "set ANTHROPIC_API_KEY",
        ),
        (
            vec!["optimize", task, "--model", "openai-compat:qwen"],
            with(&[]),
            "set KSMITH_OPENAI_COMPAT_BASE_URL",
        ),
        (
            vec!["optimize", task, "--model", "openai-compat:qwen"],
            with(&[("KSMITH_OPENAI_COMPAT_BASE_URL", "localhost:8000/v1")]),
            "does not start with http:// or https://",
        ),
        (
            vec!["optimize", task, "--model", "ollama:qwen3"],
            with(&[("KSMITH_OLLAMA_BASE_URL", "http://:11434/v1")]),
            "has no host",
        ),
        (
            vec![
                "optimize",
                task,
                "--model",
                "command:no-such-llm-cli --fast",
            ],
            with(&[]),
            "`no-such-llm-cli` not found on PATH",
        ),
        (
            vec!["optimize", task, "--model", &bad_script],
            with(&[]),
            "role",
        ),
        (
            vec!["optimize", task, "--model", &manual_under_file],
            with(&[]),
            "cannot create directory",
        ),
        (
            vec![
                "optimize",
                task,
                "--model",
                "openai:gpt-unpriced-x",
                "--max-cost",
                "5",
            ],
            with(&[("OPENAI_API_KEY", "sk-test")]),
            "no price is known for openai:gpt-unpriced-x",
        ),
        (
            vec![
                "optimize",
                task,
                "--model",
                "manual:/tmp/x",
                "--max-cost",
                "0",
            ],
            with(&[]),
            "--max-cost",
        ),
        (
            vec![
                "optimize",
                task,
                "--model",
                "manual:/tmp/x",
                "--iterations",
                "1001",
            ],
            with(&[]),
            "--iterations",
        ),
        (
            vec![
                "optimize",
                task,
                "--model",
                "manual:/tmp/x",
                "--max-wall",
                "nan",
            ],
            with(&[]),
            "--max-wall",
        ),
        (
            vec![
                "task",
                "new",
                "tasks/starter/vector_add/reference.py",
                "--model",
                "anthropic:claude-sonnet-4",
                "--out",
                "/tmp/ksmith-agent-runs-never-written",
            ],
            with(&[]),
            "set ANTHROPIC_API_KEY",
        ),
    ];
    for (args, env, needle) in &cases {
        let o = ksmith_env(&store, args, env);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
        assert_eq!(
            text(&o).lines().filter(|l| l.contains("error")).count(),
            1,
            "one error line: {}",
            text(&o)
        );
    }
    // Nothing was judged and no run was stored.
    assert_eq!(count(&store, "runs"), 0);
    assert_eq!(count(&store, "evaluations"), 0);
    assert!(!Path::new("/tmp/ksmith-agent-runs-never-written").exists());
    assert!(runs_json(&store).is_empty());
}

#[test]
fn validate_json_lists_every_task_with_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let suite = dir.path().join("suite");
    for name in ["softmax", "vector_add"] {
        let to = suite.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["task.toml", "reference.py"] {
            std::fs::copy(root().join("tasks/starter").join(name).join(f), to.join(f)).unwrap();
        }
    }
    let toml = suite.join("softmax/task.toml");
    let broken = std::fs::read_to_string(&toml).unwrap().replacen(
        "name = \"softmax\"",
        "name = \"softmax\"\nbogus_field = 1",
        1,
    );
    std::fs::write(&toml, broken).unwrap();
    let o = ksmith(
        &store,
        &["validate", suite.to_str().unwrap(), "--no-run", "--json"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["total"], 2, "{v}");
    assert_eq!(v["valid"], 1, "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    assert!(
        tasks[0]["path"].as_str().unwrap().ends_with("softmax"),
        "{v}"
    );
    assert_eq!(tasks[0]["valid"], false);
    let problems = tasks[0]["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("bogus_field")),
        "{v}"
    );
    assert_eq!(tasks[1]["valid"], true, "{v}");
    assert_eq!(tasks[1]["problems"], serde_json::json!([]));
}

/// Runs ksmith as a user who cannot write `store` (root writes anything, so as nobody).
fn as_reader(store: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksmith"));
    cmd.arg("--store").arg(store).args(args).current_dir(root());
    if unsafe { libc::geteuid() } == 0 {
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.env("HOME", "/nonexistent");
    }
    cmd.output().unwrap()
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_read_only_store_can_be_read_and_refuses_writes_once() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let store = fresh_store(dir.path());
    let task = "tasks/starter/vector_add";
    let o = ksmith(
        &store,
        &[
            "eval",
            task,
            &format!("{task}/solutions/naive"),
            "--no-timing",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let eval_id = json(&o)["id"].as_i64().unwrap();
    // A run that was left `running` by a process long gone (rows as a killed run leaves them).
    db(&store)
        .execute(
            "INSERT INTO runs (id, task_dir, task, tests_hash, model, mode, options, status)
             VALUES ('run-1-abcdef', ?1, 'vector_add', 'h', 'manual:/tmp/x', 'autonomous', '{}', 'running')",
            [task],
        )
        .unwrap();
    db(&store)
        .execute(
            "INSERT INTO llm_calls (run, seq, role, step, model, system, prompt, reply, tokens_in, tokens_out, estimated, cost, latency_ms, attempts)
             VALUES ('run-1-abcdef', 0, 'planner', 'iter 1 plan', 'm', 's', 'p', 'plan', 10, 5, 1, 0.0, 12.0, 1)",
            [],
        )
        .unwrap();
    // Read-only: the directory tree and the database.
    let mut dirs = vec![store.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                chmod(&p, 0o444);
            }
        }
        chmod(&d, 0o555);
    }
    let before = std::fs::read(store.join("ksmith.db")).unwrap();
    let out = dir.path().join("traces");
    std::fs::create_dir_all(&out).unwrap();
    chmod(&out, 0o777);

    let o = as_reader(&store, &["runs", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["runs"][0]["status"], "interrupted", "{v}");
    assert_eq!(v["runs"][0]["process_gone"], true, "{v}");
    assert_eq!(v["runs"][0]["calls"], 1, "{v}");
    let o = as_reader(&store, &["runs"]);
    assert!(
        text(&o).contains("interrupted (process gone)"),
        "{}",
        text(&o)
    );
    let o = as_reader(&store, &["show", &eval_id.to_string(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["status"], "PASSED");
    let o = as_reader(&store, &["show", "run-1-abcdef", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["status"], "interrupted");
    let o = as_reader(&store, &["calls", "run-1-abcdef", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["calls"][0]["role"], "planner");
    let o = as_reader(
        &store,
        &[
            "export",
            "--format",
            "flashinfer-trace",
            "--out",
            out.join("t").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // One trace per workload of the one evaluation.
    assert!(
        text(&o).contains("wrote ") && !text(&o).contains("wrote 0 "),
        "{}",
        text(&o)
    );
    assert!(out.join("t").join("traces").exists(), "{}", text(&o));

    let needle = format!("read-only store: {}", store.display());
    for args in [
        vec!["eval", task, "tasks/starter/vector_add/solutions/naive"],
        vec!["resume", "run-1-abcdef"],
        vec!["optimize", task, "--model", "manual:/tmp/x"],
        vec!["validate", task],
    ] {
        let o = as_reader(&store, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_eq!(
            text(&o).matches(&needle).count(),
            1,
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(std::fs::read(store.join("ksmith.db")).unwrap(), before);
    // The judge's device lock files exist since the first eval (made before the store went
    // read-only); no run lock was taken by the reader.
    assert!(!store.join("locks").join("run-1-abcdef.lock").exists());
    // Writable again, so the temporary directory can be removed.
    let mut dirs = vec![store.clone()];
    while let Some(d) = dirs.pop() {
        chmod(&d, 0o755);
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            }
        }
    }
}

/// Whether `pid` is alive (a zombie, waiting for a reaper, counts as ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

#[test]
fn a_hangup_during_a_command_call_ends_the_command_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_task(
        "vector_add",
        dir.path(),
        "[[workloads]]\naxes = { N = 300000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 0.0, std = 1.0 }\n",
    );
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    // A "model" that takes its time (a paid call in flight): it records its pid and sleeps.
    let pidfile = dir.path().join("llm.pid");
    let script = dir.path().join("llm.sh");
    std::fs::write(
        &script,
        format!(
            "echo $$ > {}.tmp\nmv {}.tmp {}\nexec sleep 600\n",
            pidfile.display(),
            pidfile.display(),
            pidfile.display()
        ),
    )
    .unwrap();
    let model = format!("command:sh {}", script.display());
    let mut bg = Bg::spawn(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--from",
            naive.to_str().unwrap(),
            "--model",
            &model,
            "--iterations",
            "1",
            "--no-profile",
            "--tune-budget",
            "0",
            "--min-time-ms",
            "20",
        ],
        dir.path().join("optimize.err"),
    );
    bg.wait_until("calling the command", || pidfile.exists());
    let llm: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(llm));
    let (st, err) = bg.signal(libc::SIGHUP);
    assert_eq!(st.code(), Some(129), "{err}");
    let run = the_run(&store);
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["stop_reason"], "interrupted by SIGHUP", "{run}");
    let start = Instant::now();
    while alive(llm) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the command's process {llm} outlived the run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
