//! `ksmith export --format jax` and `ksmith verify-export`: the winners as a Python package
//! callable from JAX (`ksmith-deploy` writes it), and the package re-checked and timed through
//! its own bindings inside `jax.jit`, each kernel in the judge's sandbox (`ksmith_deploy::verify`).

use crate::term::one;
use crate::{default_opts, env_err, input, task_dirs, Ctx, Exit, EXIT_FAILED};
use anyhow::anyhow;
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_deploy::{choose_best, choose_eval, write_package};
use ksmith_harness::PythonEnv;
use ksmith_task::{Language, Task};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `ksmith verify-export` options.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The exported package directory (the one holding pyproject.toml).
    dir: PathBuf,
    /// Only this kernel (repeatable).
    #[arg(long)]
    kernel: Vec<String>,
    /// Fresh seeds per workload.
    #[arg(long, default_value_t = 2, value_parser = crate::whole::<u32>(1..=100))]
    seeds: u32,
    /// Timing rounds per workload (kernel and reference alternating; at least 6, so that the
    /// interval means something).
    #[arg(long, default_value_t = 12, value_parser = crate::whole::<u32>(6..=1000))]
    rounds: u32,
    /// Check only; skip timing.
    #[arg(long)]
    no_timing: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Which kernels `export --format jax` writes.
pub(crate) struct ExportWhat<'a> {
    /// TASK or SUITE directories.
    pub paths: &'a [PathBuf],
    /// Evaluations named with `--eval`.
    pub evals: &'a [i64],
    /// Only solutions in this language.
    pub language: Option<Language>,
    /// Leave out tasks with nothing to export instead of failing.
    pub skip_missing: bool,
}

/// Writes the JAX package for the tasks under `what.paths`: per task the fastest PASSED
/// evaluation on this machine, or the one named with `--eval`.
pub(crate) fn export_jax(
    ctx: &Ctx,
    what: &ExportWhat,
    out: &Path,
    package: &str,
) -> Result<u8, Exit> {
    let (paths, evals, language) = (what.paths, what.evals, what.language);
    if paths.is_empty() {
        return Err(input(anyhow!(
            "export --format jax needs the tasks to export: TASK or SUITE directories"
        )));
    }
    let mut tasks: Vec<Task> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in paths {
        for dir in task_dirs(p)? {
            // The same task named twice (or through two paths) is exported once.
            if seen.insert(std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone())) {
                tasks.push(crate::load_task(&dir)?);
            }
        }
    }
    check_package_name(ctx, package)?;
    let store = ctx.store_read()?;
    // Evaluations named with --eval, matched to their task by name.
    let mut named: Vec<(i64, Option<usize>)> = Vec::new();
    for &id in evals {
        let e = store
            .get(id)
            .map_err(env_err)?
            .ok_or_else(|| input(anyhow!("--eval {id}: no such evaluation")))?;
        let at = tasks.iter().position(|t| t.name == e.result.task);
        if at.is_none() {
            return Err(input(anyhow!(
                "--eval {id}: it is of task `{}`, which is not among the tasks given",
                e.result.task
            )));
        }
        if named.iter().any(|(_, t)| *t == at) {
            return Err(input(anyhow!(
                "--eval {id}: another --eval already names an evaluation of task `{}`",
                e.result.task
            )));
        }
        named.push((id, at));
    }
    let fingerprint = if named.len() < tasks.len() {
        let mut judge = ctx.judge(&default_opts())?;
        judge.environment().map_err(env_err)?.fingerprint.clone()
    } else {
        String::new()
    };
    let mut choices = Vec::new();
    let mut missing = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let chosen = match named.iter().find(|(_, t)| *t == Some(i)) {
            Some((id, _)) => choose_eval(&store, task, *id).map_err(input)?,
            None => match choose_best(&store, task, &fingerprint, language) {
                Ok(c) => c,
                Err(e @ ksmith_deploy::DeployError::NoPassed { .. }) => {
                    missing.push(e.to_string());
                    continue;
                }
                Err(e) => return Err(env_err(e)),
            },
        };
        choices.push(chosen);
    }
    if !missing.is_empty() && (!what.skip_missing || choices.is_empty()) {
        return Err(input(anyhow!("nothing written: {}", missing.join("\n  "))));
    }
    for m in &missing {
        note!("ksmith: left out: {m}");
    }
    // The judge's library policy as it is now, on the sources about to be written: an
    // evaluation stored before a rule existed is not exported past it.
    for c in &choices {
        if let Some(why) = ksmith_deploy::check_choice(c).map_err(env_err)? {
            return Err(input(anyhow!(
                "nothing written: {} (evaluation {}) is refused: {why}",
                c.task.name,
                c.eval.id
            )));
        }
    }
    let written = write_package(out, package, &choices).map_err(|e| match e {
        ksmith_deploy::DeployError::Io { .. } => env_err(e),
        other => input(other),
    })?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "kernel",
        "solution",
        "language",
        "evaluation",
        "judged speedup",
    ]);
    for c in &choices {
        let r = &c.eval.result;
        t.add_row(vec![
            c.task.name.clone(),
            one(&r.solution).into_owned(),
            c.language.name().to_string(),
            c.eval.id.to_string(),
            r.performance
                .as_ref()
                .map(|p| crate::report::ratio(p.speedup, p.speedup_interval))
                .unwrap_or_else(|| "untimed".into()),
        ]);
    }
    say!("{t}");
    for c in &choices {
        match c.eval.result.performance.as_ref() {
            None => note!(
                "ksmith: warning: {} was never timed (evaluation {} ran with --no-timing): whether it beats XLA is unknown; verify-export measures it",
                c.task.name,
                c.eval.id
            ),
            Some(p) if p.speedup_interval.1 < 1.0 => note!(
                "ksmith: warning: {} is slower than XLA on this machine ({:.2}x, interval {:.2}-{:.2}): substituting it makes a graph slower",
                c.task.name,
                p.speedup,
                p.speedup_interval.0,
                p.speedup_interval.1
            ),
            Some(_) => {}
        }
    }
    if let Some(before) = &written.replaced {
        let dropped: Vec<&str> = before
            .iter()
            .filter(|k| !written.kernels.contains(k))
            .map(String::as_str)
            .collect();
        if !dropped.is_empty() {
            note!(
                "ksmith: replaced the earlier export; it also held {}, not exported this time",
                dropped.join(", ")
            );
        }
    }
    say!(
        "wrote package `{}` ({} kernels) to {}",
        written.package,
        written.kernels.len(),
        written.dir.display()
    );
    say!(
        "note: these kernels are machine-written. The judge ran each in its sandbox on fresh inputs \
         and checked the library's imports and instructions; verify-export repeats the checks \
         there. Nothing can check what a native kernel does outside a sandbox: in your program it \
         runs with your program's rights. Read {}/{}/kernels/*/src before you deploy it (its \
         README.md says more).",
        written.dir.display(),
        written.package
    );
    say!(
        "install: pip install {}   check it here: ksmith verify-export {}",
        written.dir.display(),
        written.dir.display()
    );
    Ok(0)
}

/// Refuses a package name that is already importable in ksmith's Python environment (the
/// standard library, jax, numpy...): installing it would shadow that module.
fn check_package_name(ctx: &Ctx, package: &str) -> Result<(), Exit> {
    ksmith_deploy::python_identifier("package name", package).map_err(input)?;
    let env =
        PythonEnv::resolve(ctx.python.as_deref(), &|m| note!("ksmith: {m}")).map_err(env_err)?;
    let probe = format!(
        "import importlib.util, sys\nspec = importlib.util.find_spec({package:?})\nprint(spec.origin if spec and spec.origin else (list(spec.submodule_search_locations)[0] if spec else ''))"
    );
    let out = std::process::Command::new(&env.python)
        .args(["-I", "-c", &probe])
        .output()
        .map_err(|e| env_err(anyhow!("running {}: {e}", env.python.display())))?;
    let origin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // An earlier ksmith export of the same name (installed) is what a new export replaces.
    let earlier_export = Path::new(&origin)
        .parent()
        .is_some_and(|d| d.join("manifest.json").is_file() && d.join("_runtime.py").is_file());
    if out.status.success() && !origin.is_empty() && !earlier_export {
        return Err(input(anyhow!(
            "--name {package}: a module of that name already exists ({origin}); installing the export would shadow it: choose another name"
        )));
    }
    Ok(())
}

/// The import name of the package exported into `dir` (the subdirectory with a manifest).
pub(crate) fn package_in(dir: &Path) -> Result<String, Exit> {
    if !dir.join("pyproject.toml").is_file() {
        return Err(input(anyhow!(
            "{}: no pyproject.toml; give the directory written by ksmith export --format jax",
            dir.display()
        )));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| input(anyhow!("{}: {e}", dir.display())))?;
    let mut found = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if p.join("manifest.json").is_file() && p.join("__init__.py").is_file() {
            found.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(input(anyhow!(
            "{}: no package with a manifest.json inside; give the directory written by ksmith export --format jax",
            dir.display()
        ))),
        _ => Err(input(anyhow!(
            "{}: several packages ({}); give one export directory",
            dir.display(),
            found.join(", ")
        ))),
    }
}

/// The kernel names in `dir/package/manifest.json`, or an input error naming what is wrong.
fn manifest_kernels(dir: &Path, package: &str) -> Result<Vec<String>, Exit> {
    let path = dir.join(package).join("manifest.json");
    let bad = |m: String| input(anyhow!("{}: {m}; re-export it", path.display()));
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let kernels = v["kernels"]
        .as_object()
        .ok_or_else(|| bad("no `kernels` table".into()))?;
    if kernels.is_empty() {
        return Err(bad("`kernels` is empty".into()));
    }
    Ok(kernels.keys().cloned().collect())
}

/// Re-checks and times every kernel of an exported package through its own bindings: the
/// library policy first, then each kernel built and called in a sandboxed runner, its outputs
/// checked by a trusted checker.
pub(crate) fn verify_export(ctx: &Ctx, args: &VerifyArgs) -> Result<u8, Exit> {
    let dir = std::path::absolute(&args.dir).unwrap_or_else(|_| args.dir.clone());
    let package = package_in(&dir)?;
    let names = manifest_kernels(&dir, &package)?;
    if let Some(k) = args.kernel.iter().find(|k| !names.contains(k)) {
        return Err(input(anyhow!(
            "--kernel {k}: the export has no such kernel (it has {})",
            names.join(", ")
        )));
    }
    let iso = ksmith_sandbox::isolation();
    if !iso.complete() && !ctx.unsafe_no_sandbox {
        return Err(env_err(anyhow!(
            "verify-export runs each kernel in the judge's sandbox, which this machine cannot fully provide:\n{}",
            iso.note
        )));
    }
    let env =
        PythonEnv::resolve(ctx.python.as_deref(), &|m| note!("ksmith: {m}")).map_err(env_err)?;
    let manifest: Value = std::fs::read_to_string(dir.join(&package).join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    note!(
        "ksmith: {} {package} inside jax.jit, each kernel in the judge's sandbox...",
        if args.no_timing {
            "checking"
        } else {
            "checking and timing"
        }
    );
    let settings = ksmith_deploy::VerifySettings {
        kernels: args.kernel.clone(),
        seeds: args.seeds,
        rounds: if args.no_timing { 0 } else { args.rounds },
        min_round_ms: 20.0,
        threads: ctx.threads,
    };
    let report = ksmith_deploy::verify_package(&env, &dir, &package, &manifest, &settings, &|m| {
        note!("ksmith: {}", one(m))
    })
    .map_err(|e| match e {
        ksmith_deploy::DeployError::Out { .. } => input(e),
        other => env_err(other),
    })?;
    if args.json {
        crate::term::json(&report);
    } else {
        print_report(&report);
    }
    let kernels = report["kernels"].as_array().cloned().unwrap_or_default();
    let ok = !kernels.is_empty() && kernels.iter().all(|k| k["status"] == "ok");
    Ok(if ok { 0 } else { EXIT_FAILED })
}

fn print_report(report: &Value) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "kernel",
        "workload",
        "checks",
        "kernel ms",
        "XLA ms",
        "speedup in jax.jit (95%)",
        "judged",
    ]);
    let num = |v: &Value, d: usize| v.as_f64().map(|x| format!("{x:.d$}")).unwrap_or_default();
    let mut details = Vec::new();
    for k in report["kernels"].as_array().into_iter().flatten() {
        let name = one(k["name"].as_str().unwrap_or("?")).into_owned();
        if k["status"] == "unavailable" || k["status"] == "refused" {
            let detail = k["detail"].as_str().unwrap_or("");
            let first = detail.lines().next().unwrap_or("");
            let first = if k["status"] == "refused" {
                format!("REFUSED: {first}")
            } else {
                first.to_string()
            };
            t.add_row(vec![name.clone(), one(&first).into_owned()]);
            if detail.lines().nth(1).is_some() {
                details.push(format!("{name}: {detail}"));
            }
            continue;
        }
        for w in k["workloads"].as_array().into_iter().flatten() {
            let axes = w["axes"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(a, v)| format!("{a}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let checks = if w["correct"] == true {
                format!("{} ok", w["checks"])
            } else {
                format!(
                    "FAILED {}",
                    one(w["detail"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| format!(
                            "{} out of tolerance, max abs error {}",
                            w["fraction_bad"], w["max_abs_error"]
                        ))
                        .as_str())
                )
            };
            let speed = match (w["speedup"].as_f64(), w["speedup_interval"].as_array()) {
                (Some(s), Some(i)) if i.len() == 2 => {
                    format!("{s:.2}x ({}-{})", num(&i[0], 2), num(&i[1], 2))
                }
                _ => String::new(),
            };
            t.add_row(vec![
                name.clone(),
                axes,
                checks,
                num(&w["kernel_ms"], 3),
                num(&w["reference_ms"], 3),
                speed,
                String::new(),
            ]);
        }
        t.add_row(vec![
            name,
            "geomean".into(),
            k["status"].as_str().unwrap_or("").to_string(),
            String::new(),
            String::new(),
            k["speedup"]
                .as_f64()
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_default(),
            k["judged_speedup"]
                .as_f64()
                .map(|s| format!("{s:.2}x"))
                .unwrap_or_else(|| "untimed".into()),
        ]);
    }
    say!("{t}");
    for d in details {
        say!("{}", crate::term::continued(&d, "  "));
    }
    if report["sandboxed"] == true {
        say!(
            "each kernel was built and called in the judge's sandbox and checked by a process that never loaded it; its timings are the sandboxed process's own clock (shown, not a verdict)"
        );
    }
}
