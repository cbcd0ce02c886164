//! Every kind of bad task input, through the real binary: a starter task (softmax) copied into a
//! temporary directory with one thing broken. Bad input exits 2 with one line that names the
//! file, the field or function and the problem, and nothing else; a broken environment exits 3
//! and says how it recovers.

mod common;

use common::{fresh_store, ksmith, ksmith_env, root, small_task, stderr, stdout, text};
use std::path::{Path, PathBuf};
use std::process::Output;

/// One small workload: fast to generate, check and (for a reference that runs) compute.
const SMALL: &str = "[[workloads]]\naxes = { M = 64, N = 100 }\n[workloads.inputs]\n";
const NORMAL: &str = "x = { dist = \"normal\", mean = 0.0, std = 1.0 }\n";
const GENERATED: &str = "x = { dist = \"generator\", function = \"gen\" }\n";

/// The softmax reference, for tasks whose breakage is elsewhere (a generator).
const SOFTMAX: &str = "import jax.numpy as jnp
import numpy as np


def reference(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)
";

/// tasks/starter/softmax copied into `tmp` (with its naive solution) and its task.toml edited.
fn broken_toml(tmp: &Path, edit: impl FnOnce(&str) -> String) -> PathBuf {
    let src = root().join("tasks/starter/softmax");
    let dir = tmp.join("softmax");
    std::fs::create_dir_all(dir.join("solutions/naive")).unwrap();
    for f in [
        "task.toml",
        "reference.py",
        "solutions/naive/solution.toml",
        "solutions/naive/kernel.c",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let edited = edit(&toml);
    assert_ne!(edited, toml, "the edit must change task.toml");
    std::fs::write(dir.join("task.toml"), edited).unwrap();
    dir
}

/// Replaces the first occurrence of `from` (which must be there).
fn first(s: &str, from: &str, to: &str) -> String {
    assert!(s.contains(from), "{from:?} not in task.toml");
    s.replacen(from, to, 1)
}

/// The softmax task at one small workload with `x` drawn as `x_dist` and `reference` as its
/// reference.py.
fn small_with(tmp: &Path, x_dist: &str, reference: &str) -> PathBuf {
    let dir = small_task("softmax", tmp, &format!("{SMALL}{x_dist}"));
    std::fs::write(dir.join("reference.py"), reference).unwrap();
    dir
}

fn naive() -> String {
    root()
        .join("tasks/starter/softmax/solutions/naive")
        .display()
        .to_string()
}

/// Lines of the output that report a problem in one of the task's or solution's files.
fn problem_lines(o: &Output) -> Vec<String> {
    text(o)
        .lines()
        .filter(|l| {
            ["task.toml:", "reference.py:", "solution.toml:"]
                .iter()
                .any(|f| l.contains(f))
        })
        .map(str::to_string)
        .collect()
}

/// Exit 2 and exactly one problem line, which contains every one of `wanted`.
#[track_caller]
fn one_problem(o: &Output, wanted: &[&str]) -> String {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let lines = problem_lines(o);
    assert_eq!(lines.len(), 1, "one problem line expected:\n{}", text(o));
    for w in wanted {
        assert!(lines[0].contains(w), "{w:?} missing from {:?}", lines[0]);
    }
    assert!(!text(o).contains("Traceback"), "{}", text(o));
    lines[0].clone()
}

fn validate_static(task: &Path) -> Output {
    let s = std::env::temp_dir().join("ksmith-bad-input-static-store");
    ksmith(&s, &["validate", "--no-run", task.to_str().unwrap()])
}

fn eval(store: &Path, task: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["eval", task.to_str().unwrap()];
    let sol = naive();
    args.push(&sol);
    args.extend_from_slice(&["--no-timing", "--seeds", "3"]);
    args.extend_from_slice(extra);
    ksmith(store, &args)
}

#[test]
fn a_wrong_type_or_unknown_dtype_is_the_only_problem_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str, &[&str]); 4] = [
        (
            "M = { kind = \"var\" }",
            "M = { kind = 1 }",
            "kind",
            &["axes.M.kind", "expected a string, found integer"],
        ),
        (
            "dtype = \"float32\"",
            "dtype = 32",
            "dtype32",
            &["inputs[0].dtype", "expected a string, found integer"],
        ),
        (
            "dtype = \"float32\"",
            "dtype = \"float33\"",
            "float33",
            &["inputs[0].dtype", "unknown dtype `float33`"],
        ),
        (
            "\natol = 1e-6\n",
            "\natol = \"small\"\n",
            "atol",
            &["outputs[0].atol", "expected a number, found string"],
        ),
    ];
    for (from, to, name, wanted) in cases {
        let dir = broken_toml(&tmp.path().join(name), |t| first(t, from, to));
        let mut w = wanted.to_vec();
        w.push("task.toml");
        one_problem(&validate_static(&dir), &w);
        // The same through eval: no "not a declared input" for the workloads that name `x`,
        // no "a task needs at least one output".
        let o = ksmith(
            &tmp.path().join("store"),
            &["eval", dir.to_str().unwrap(), &naive()],
        );
        one_problem(&o, &w);
    }
}

/// Misspelt names get the nearest valid one and the list; a negative number reaches the
/// option's own range message; a missing task directory or a suite given as a task says so.
#[test]
fn errors_suggest_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let starter = root().join("tasks/starter");
    let softmax = starter.join("softmax");
    let sol = naive();
    let usage = |args: &[&str], wanted: &[&str]| {
        let o = ksmith(&store, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = stderr(&o);
        for w in wanted {
            assert!(err.contains(w), "{args:?}: wanted {w:?} in:\n{err}");
        }
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    };
    let task = softmax.to_str().unwrap();
    for (flag, value, range) in [
        ("--timeout", "-1", "from 0.1 to 86400"),
        (
            "--seeds",
            "-3",
            "-3 is out of range: expected a whole number from 3 to 100",
        ),
        (
            "--min-time-ms",
            "-5",
            "expected a whole number from 1 to 600000",
        ),
    ] {
        usage(
            &["eval", task, &sol, flag, value],
            &[&format!("invalid value '{value}' for '{flag}"), range],
        );
    }
    usage(
        &["--threads", "-2", "evals"],
        &["expected a whole number of threads from 1 to 1024"],
    );
    // Misspelt names: the nearest valid one, and every valid one.
    usage(
        &["bench", starter.to_str().unwrap(), "--solution", "fastest"],
        &[
            "no solution named `fastest`: did you mean `fast`?",
            "naive",
            "triton_fast",
        ],
    );
    usage(
        &["export", "--format", "jax", "--language", "cdua"],
        &[
            "did you mean `cuda`?",
            "expected one of c, cuda, triton, pallas",
        ],
    );
    usage(
        &["export", "--format", "jax", "--language", "rtl"],
        &["unknown language `rtl` (expected one of c, cuda, triton, pallas)"],
    );
    usage(&["evals", "--status", "pased"], &["did you mean `PASSED`?"]);
    let dir = broken_toml(&tmp.path().join("dtype"), |t| {
        first(t, "dtype = \"float32\"", "dtype = \"flaot32\"")
    });
    one_problem(
        &validate_static(&dir),
        &[
            "inputs[0].dtype",
            "unknown dtype `flaot32`: did you mean `float32`?",
            "bfloat16",
        ],
    );
    let dir = broken_toml(&tmp.path().join("field"), |t| {
        first(t, "\nrtol = ", "\nrtl = ")
    });
    let o = validate_static(&dir);
    assert!(
        text(&o).contains("outputs[0].rtl: unknown field: did you mean `rtol`?"),
        "{}",
        text(&o)
    );
    let dir = broken_solution(&tmp.path().join("lang"), |t| {
        t.replace("language = \"c\"", "language = \"tritn\"")
    });
    let o = ksmith(
        &store,
        &["eval", task, dir.to_str().unwrap(), "--no-timing"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("language: unsupported language `tritn`: did you mean `triton`?"),
        "{}",
        text(&o)
    );
    // A task directory that is not there, or a suite where a task goes.
    let missing = tmp.path().join("no_such_task");
    usage(
        &["eval", missing.to_str().unwrap(), &sol],
        &[&format!("{}: -: no such task directory", missing.display())],
    );
    usage(
        &["eval", starter.to_str().unwrap(), &sol],
        &["task.toml: -: missing; this directory holds tasks (a suite)"],
    );
}

#[test]
fn a_zero_negative_or_enormous_axis_is_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "M = 0, N = 600",
            "zero",
            &[
                "workloads[0].axes.M",
                "expected a positive integer, found 0",
            ],
        ),
        (
            "M = -5, N = 600",
            "negative",
            &["workloads[0].axes.M", "found -5"],
        ),
        (
            "M = 1000000, N = 1000000",
            "huge",
            &[
                "workloads[0].axes",
                "1000000000000 elements",
                "M=1000000 x N=1000000",
                "at most 4294967296",
            ],
        ),
    ];
    for (axes, name, wanted) in cases {
        let dir = broken_toml(&tmp.path().join(name), |t| {
            first(t, "M = 2000, N = 600", axes)
        });
        let o = validate_static(&dir);
        one_problem(&o, wanted);
        assert!(!text(&o).contains("cannot evaluate"), "{}", text(&o));
        assert!(stdout(&o).contains("0 of 1 tasks valid"), "{}", text(&o));
    }
}

#[test]
fn a_toml_syntax_error_names_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = broken_toml(tmp.path(), |t| {
        first(t, "\natol = 1e-6\n", "\natol = = 1e-6\n")
    });
    let line = 1 + std::fs::read_to_string(dir.join("task.toml"))
        .unwrap()
        .lines()
        .position(|l| l.starts_with("atol = = "))
        .unwrap();
    let o = validate_static(&dir);
    one_problem(
        &o,
        &[
            "task.toml",
            &format!("line {line}, column 8"),
            "invalid TOML",
        ],
    );
    let o = ksmith(
        &tmp.path().join("store"),
        &["eval", dir.to_str().unwrap(), &naive()],
    );
    one_problem(&o, &["task.toml", &format!("line {line}, column 8")]);
}

#[test]
fn task_code_that_fails_in_eval_is_bad_input_naming_file_and_function() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let gen_ref =
        |body: &str| format!("{SOFTMAX}\n\ndef gen(rng, shape, dtype, axes):\n    {body}\n");
    let cases = [
        (
            "import",
            NORMAL,
            format!("import ksmith_no_such_module  # noqa: F401\n{SOFTMAX}"),
            vec!["importing it", "raised ModuleNotFoundError"],
        ),
        (
            "raises",
            NORMAL,
            "def reference(x):\n    raise ValueError(\"no softmax today\")\n".to_string(),
            // The line in reference.py that raised.
            vec![
                "reference()",
                "raised ValueError: no softmax today (line 2)",
            ],
        ),
        (
            "shape",
            NORMAL,
            "def reference(x):\n    return x[:, :1]\n".to_string(),
            vec![
                "reference()",
                "output y has shape (64, 1), task.toml declares (64, 100)",
            ],
        ),
        (
            "dtype",
            NORMAL,
            "def reference(x):\n    return x > 0\n".to_string(),
            vec![
                "reference()",
                "output y is bool, task.toml declares float32",
            ],
        ),
        (
            "gen_raises",
            GENERATED,
            gen_ref("raise RuntimeError(\"no inputs today\")"),
            vec![
                "generator gen() for input x",
                "raised RuntimeError: no inputs today",
            ],
        ),
        (
            "gen_shape",
            GENERATED,
            gen_ref("return rng.normal(size=(3,)).astype(dtype)"),
            vec![
                "generator gen() for input x",
                "returned shape (3,), expected (64, 100)",
            ],
        ),
        (
            "gen_dtype",
            GENERATED,
            gen_ref("return rng.normal(size=shape)"),
            vec![
                "generator gen() for input x",
                "returned float64, the input is float32",
            ],
        ),
    ];
    for (name, dist, reference, wanted) in cases {
        let dir = small_with(&tmp.path().join(name), dist, &reference);
        let o = eval(&store, &dir, &[]);
        let line = one_problem(&o, &wanted);
        assert!(line.starts_with("error: "), "{line}");
        assert!(
            line.contains(&dir.join("reference.py").display().to_string()),
            "{line}"
        );
    }
}

#[test]
fn validate_rejects_a_generator_of_the_wrong_dtype_or_that_is_not_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let cases = [
        (
            "int64",
            "return rng.integers(0, 100, size=shape)",
            "returned int64, the input is float32",
        ),
        // Global numpy state: every call draws other numbers for the same rng.
        (
            "global_state",
            "return np.random.normal(size=shape).astype(dtype)",
            "not deterministic",
        ),
    ];
    for (name, body, wanted) in cases {
        let reference = format!("{SOFTMAX}\n\ndef gen(rng, shape, dtype, axes):\n    {body}\n");
        let dir = small_with(&tmp.path().join(name), GENERATED, &reference);
        let o = ksmith(&store, &["validate", dir.to_str().unwrap()]);
        one_problem(
            &o,
            &[
                "task.toml: workloads[0]",
                "reference.py: generator gen() for input x",
                wanted,
            ],
        );
    }
    // The same generator made deterministic and of the right dtype passes.
    let reference = format!("{SOFTMAX}\n\ndef gen(rng, shape, dtype, axes):\n    return rng.normal(size=shape).astype(dtype)\n");
    let dir = small_with(&tmp.path().join("good"), GENERATED, &reference);
    let o = ksmith(&store, &["validate", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_reference_that_prints_cannot_corrupt_the_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    // print at import and while traced, a write straight to fd 1, and a read of stdin.
    let reference = format!(
        "import os\nimport sys\n\nprint('hello from the import')\nos.write(1, b'{{\"ok\": true}}\\n')\n{SOFTMAX}\n\n_ref = reference\n\n\ndef reference(x):\n    print('tracing', x.shape)\n    print(sys.stdin.read(10))\n    return _ref(x)\n"
    );
    let dir = small_with(tmp.path(), NORMAL, &reference);
    let o = ksmith(&store, &["validate", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = eval(&store, &dir, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(common::json(&o)["status"], "PASSED", "{}", text(&o));
}

#[test]
fn a_reference_that_never_returns_hits_the_reference_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    let dir = small_with(
        tmp.path(),
        NORMAL,
        "import time\n\n\ndef reference(x):\n    time.sleep(100000)\n",
    );
    let start = std::time::Instant::now();
    let o = ksmith(
        &store,
        &[
            "--reference-timeout",
            "3",
            "validate",
            dir.to_str().unwrap(),
        ],
    );
    one_problem(
        &o,
        &[
            "reference.py",
            "reference()",
            "did not finish within 3 s (--reference-timeout)",
        ],
    );
    // Far below the default of 300 s (not a tight bound: the machine may be busy).
    assert!(start.elapsed().as_secs() < 200, "{:?}", start.elapsed());
    // eval too, with the limit from the environment.
    let sol = naive();
    let o = ksmith_env(
        &store,
        &["eval", dir.to_str().unwrap(), &sol, "--no-timing"],
        &[("KSMITH_REFERENCE_TIMEOUT", "3")],
    );
    one_problem(&o, &["reference.py", "did not finish within 3 s"]);
}

#[test]
fn a_reference_that_allocates_without_bound_hits_the_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    // 50 GB in 1 GiB steps; the limit is set to 2 GiB so the test never needs the memory.
    let dir = small_with(
        tmp.path(),
        NORMAL,
        "import numpy as np\n\n\ndef reference(x):\n    hog = [np.ones(2**27) for _ in range(50)]\n    return x + len(hog)\n",
    );
    let o = ksmith(
        &store,
        &["--reference-memory", "2", "validate", dir.to_str().unwrap()],
    );
    one_problem(
        &o,
        &[
            "reference.py: reference()",
            "ran out of memory",
            "limited to 2.0 GiB",
            "--reference-memory",
        ],
    );
    // The judge survived it and said so.
    assert!(stdout(&o).contains("0 of 1 tasks valid"), "{}", text(&o));
    // XLA's own allocation (7 GB), which fails asynchronously inside the computation.
    let dir = small_with(
        &tmp.path().join("xla"),
        NORMAL,
        "import jax.numpy as jnp\n\n\ndef reference(x):\n    c = jnp.cumsum(jnp.broadcast_to(x.reshape(-1), (2**16, x.size)), axis=0)\n    return x + jnp.sort(c, axis=0)[-1].reshape(x.shape)\n",
    );
    let o = eval(&store, &dir, &["--reference-memory", "2"]);
    one_problem(
        &o,
        &[
            "reference.py: reference()",
            "ran out of memory",
            "RESOURCE_EXHAUSTED",
        ],
    );
}

/// The softmax fast solution (it has a tunable) copied with its solution.toml edited.
fn broken_solution(tmp: &Path, edit: impl FnOnce(&str) -> String) -> PathBuf {
    let src = root().join("tasks/starter/softmax/solutions/fast");
    let dir = tmp.join("fast");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(src.join("kernel.c"), dir.join("kernel.c")).unwrap();
    let toml = std::fs::read_to_string(src.join("solution.toml")).unwrap();
    let edited = edit(&toml);
    assert_ne!(edited, toml);
    std::fs::write(dir.join("solution.toml"), edited).unwrap();
    dir
}

#[test]
fn broken_tunables_are_rejected_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let task = root().join("tasks/starter/softmax");
    type Edit = fn(&str) -> String;
    let cases: [(&str, Edit, &[&str]); 3] = [
        (
            "constraint",
            |t| first(t, "\"CHUNK <= M\"", "\"CHUNK <= <= M\""),
            &["tunables[0].constraints[0]"],
        ),
        (
            "name",
            |t| first(t, "name = \"CHUNK\"", "name = \"a b; rm -rf /\""),
            &["tunables[0].name"],
        ),
        (
            "duplicate",
            |t| format!("{t}\n[[tunables]]\nname = \"CHUNK\"\nvalues = [2]\n"),
            &["tunables[1].name", "already"],
        ),
    ];
    for (name, edit, wanted) in cases {
        let sol = broken_solution(&tmp.path().join(name), edit);
        let store = tmp.path().join("store");
        for args in [
            vec!["eval", task.to_str().unwrap(), sol.to_str().unwrap()],
            vec!["tune", task.to_str().unwrap(), sol.to_str().unwrap()],
        ] {
            let o = ksmith(&store, &args);
            let mut w = wanted.to_vec();
            w.push("solution.toml");
            one_problem(&o, &w);
        }
    }
}

/// The managed Python environment (the one `ksmith` made under its cache), if there is one.
fn managed_venv() -> Option<PathBuf> {
    let rootdir = std::env::var_os("KSMITH_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("ksmith")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ksmith")))?;
    std::fs::read_dir(rootdir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("venv-"))
                && p.join(".ksmith-ready").exists()
        })
}

/// A one-task suite whose reference deletes `link` when it first runs, that is while the bench
/// runs (the trusted server has started; the second solution's runner has not).
fn suite_deleting(tmp: &Path, link: &Path) -> PathBuf {
    let suite = tmp.join("suite");
    let dir = small_with(
        &suite,
        NORMAL,
        &format!(
            "import os\n\nif os.path.islink({link:?}):\n    os.unlink({link:?})\n{SOFTMAX}",
            link = link.display().to_string()
        ),
    );
    for (i, name) in ["naive", "naive2"].iter().enumerate() {
        let d = dir.join("solutions").join(name);
        std::fs::create_dir_all(&d).unwrap();
        let src = root().join("tasks/starter/softmax/solutions/naive");
        std::fs::copy(src.join("kernel.c"), d.join("kernel.c")).unwrap();
        let toml = std::fs::read_to_string(src.join("solution.toml")).unwrap();
        std::fs::write(
            d.join("solution.toml"),
            toml.replace("softmax_naive", &format!("softmax_naive{i}")),
        )
        .unwrap();
    }
    suite
}

#[test]
fn a_managed_environment_deleted_during_a_bench_is_named_with_how_it_recovers() {
    let Some(venv) = managed_venv() else {
        // KSMITH_PYTHON points elsewhere and no managed environment exists: the explicit
        // interpreter case below covers this machine.
        eprintln!("no managed Python environment on this machine; skipped");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    // A cache of its own whose environment is a link to the real one: deleting the link
    // deletes the environment as ksmith sees it, and nothing real.
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let link = cache.join(venv.file_name().unwrap());
    std::os::unix::fs::symlink(&venv, &link).unwrap();
    let suite = suite_deleting(tmp.path(), &link);
    let cache_s = cache.display().to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ksmith"))
        .args([
            "--store",
            store.to_str().unwrap(),
            "bench",
            suite.to_str().unwrap(),
            "--no-timing",
        ])
        .env("KSMITH_CACHE_DIR", &cache_s)
        .env_remove("KSMITH_PYTHON")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(!link.exists(), "the reference did not run");
    assert!(
        venv.join(".ksmith-ready").exists(),
        "the real environment must be untouched"
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!(
            "the Python environment {} was removed",
            link.display()
        )) && line.contains("the next ksmith command recreates it"),
        "{err}"
    );
    assert!(!err.contains("Code(127)"), "{err}");
}

#[test]
fn an_explicit_interpreter_deleted_during_a_bench_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let store = fresh_store(tmp.path());
    // The interpreter the tests use, reached through a link to its installation's prefix.
    let python = std::env::var_os("KSMITH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| managed_venv().map(|v| v.join("bin/python")))
        .expect("KSMITH_PYTHON or a managed environment");
    let prefix = python
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let link = tmp.path().join("env");
    std::os::unix::fs::symlink(&prefix, &link).unwrap();
    let linked = link.join("bin").join(python.file_name().unwrap());
    let suite = suite_deleting(tmp.path(), &link);
    let o = ksmith(
        &store,
        &[
            "--python",
            linked.to_str().unwrap(),
            "bench",
            suite.to_str().unwrap(),
            "--no-timing",
        ],
    );
    assert!(!link.exists(), "the reference did not run");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("({} is gone)", linked.display()))
            && err.contains("--python / KSMITH_PYTHON"),
        "{err}"
    );
}
