//! The library policy (imports on the kernel allow-list, only the C runtime's libraries, no
//! system-call instruction of its own) against every honest C kernel of the repository, built
//! the judge's way (default flags, the task's ABI header, the solution's flags) with each of
//! gcc and clang that is installed: the allow-list must admit all of them.

use ksmith_backend::c::{build, check_library, Compiler};
use ksmith_task::{Language, Solution, Task};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (task dir, solution path) of every honest C kernel: the starter and KSBench solutions and
/// the adversarial collection's `good_*` cases.
fn good_kernels() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for suite in ["tasks/starter", "tasks/ksbench"] {
        let mut tasks: Vec<PathBuf> = std::fs::read_dir(root().join(suite))
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.join("task.toml").is_file())
            .collect();
        tasks.sort();
        for t in tasks {
            let mut sols: Vec<PathBuf> = std::fs::read_dir(t.join("solutions"))
                .unwrap()
                .filter_map(|e| Some(e.ok()?.path()))
                .collect();
            sols.sort();
            out.extend(sols.into_iter().map(|s| (t.clone(), s)));
        }
    }
    let adv = root().join("crates/ksmith-cli/tests/adversarial");
    for e in std::fs::read_dir(&adv).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("good_") && name.ends_with(".c") {
            let first = std::fs::read_to_string(&p).unwrap();
            let task = first
                .split("task: ")
                .nth(1)
                .and_then(|s| s.split(';').next())
                .unwrap()
                .trim()
                .to_string();
            out.push((root().join("tasks/starter").join(task), p));
        }
    }
    out
}

fn compilers() -> Vec<Compiler> {
    ["gcc", "clang"]
        .iter()
        .filter_map(|cc| {
            let o = std::process::Command::new(cc)
                .arg("--version")
                .output()
                .ok()?;
            o.status.success().then(|| Compiler {
                command: cc.to_string(),
                version: String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string(),
            })
        })
        .collect()
}

#[test]
fn every_good_kernel_passes_the_library_policy_with_gcc_and_clang() {
    let compilers = compilers();
    if compilers.is_empty() {
        eprintln!("skipping: neither gcc nor clang");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut problems = Vec::new();
    for (task_dir, sol) in good_kernels() {
        let task = Task::load(&task_dir).unwrap();
        let solution = Solution::load(&sol, &task).unwrap();
        if solution.language != Language::C {
            continue;
        }
        for cc in &compilers {
            let built = build(cc, &task, &solution, &[], cache.path())
                .unwrap()
                .unwrap_or_else(|f| panic!("{} with {}: {}", sol.display(), cc.command, f.log));
            let v = check_library(&built.library).expect("an ELF library");
            if !v.is_empty() {
                problems.push(format!(
                    "{} with {}: {:?}",
                    sol.display(),
                    cc.command,
                    v.iter().map(|v| &v.message).collect::<Vec<_>>()
                ));
            }
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 50, "only {checked} builds checked");
    eprintln!(
        "{checked} builds ({} compilers) pass the library policy",
        compilers.len()
    );
}
