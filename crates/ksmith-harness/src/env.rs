//! Finding or creating the Python interpreter, and writing the embedded harness package.

use crate::HarnessError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The harness package, embedded so a `ksmith` binary is self-contained.
const FILES: [(&str, &str); 21] = [
    (
        "ksmith_harness/__init__.py",
        include_str!("../../../harness/ksmith_harness/__init__.py"),
    ),
    (
        "ksmith_harness/protocol.py",
        include_str!("../../../harness/ksmith_harness/protocol.py"),
    ),
    (
        "ksmith_harness/tensors.py",
        include_str!("../../../harness/ksmith_harness/tensors.py"),
    ),
    (
        "ksmith_harness/trusted.py",
        include_str!("../../../harness/ksmith_harness/trusted.py"),
    ),
    (
        "ksmith_harness/runner.py",
        include_str!("../../../harness/ksmith_harness/runner.py"),
    ),
    (
        "ksmith_harness/exports.py",
        include_str!("../../../harness/ksmith_harness/exports.py"),
    ),
    (
        "ksmith_harness/pykernels.py",
        include_str!("../../../harness/ksmith_harness/pykernels.py"),
    ),
    (
        "ksmith_harness/hostwork.py",
        include_str!("../../../harness/ksmith_harness/hostwork.py"),
    ),
    (
        "ksmith_harness/gpukernels.py",
        include_str!("../../../harness/ksmith_harness/gpukernels.py"),
    ),
    (
        "ksmith_harness/policy.py",
        include_str!("../../../harness/ksmith_harness/policy.py"),
    ),
    (
        "ksmith_harness/extract.py",
        include_str!("../../../harness/ksmith_harness/extract.py"),
    ),
    (
        "ksmith_harness/sequential.py",
        include_str!("../../../harness/ksmith_harness/sequential.py"),
    ),
    (
        "requirements-triton.txt",
        include_str!("../../../harness/requirements-triton.txt"),
    ),
    (
        "ksmith_harness/allocguard.c",
        include_str!("../../../harness/ksmith_harness/allocguard.c"),
    ),
    (
        "ksmith_harness/evict.c",
        include_str!("../../../harness/ksmith_harness/evict.c"),
    ),
    (
        "ksmith_harness/compare.c",
        include_str!("../../../harness/ksmith_harness/compare.c"),
    ),
    (
        "requirements.txt",
        include_str!("../../../harness/requirements.txt"),
    ),
    (
        "ksmith_harness/cluster_driver.py",
        include_str!("../../../harness/ksmith_harness/cluster_driver.py"),
    ),
    (
        "requirements-ray.txt",
        include_str!("../../../harness/requirements-ray.txt"),
    ),
    (
        "requirements-cuda.txt",
        include_str!("../../../harness/requirements-cuda.txt"),
    ),
    (
        "ksmith_harness/tritonaot.py",
        include_str!("../../../harness/ksmith_harness/tritonaot.py"),
    ),
];

/// Modules the harness imports; an interpreter missing one is rejected with a clear message.
const REQUIRED_MODULES: [&str; 4] = ["numpy", "jax", "safetensors", "ml_dtypes"];

/// A ready Python environment with the harness package on its path.
#[derive(Debug, Clone)]
pub struct PythonEnv {
    /// The interpreter.
    pub python: PathBuf,
    /// Directory holding `ksmith_harness/`.
    pub harness_dir: PathBuf,
    /// The allocation guard preloaded into runners, when a C compiler was available.
    pub allocguard: Option<PathBuf>,
    /// Whether ksmith created and maintains this environment.
    pub managed: bool,
}

/// Root of ksmith's per-user cache: `$KSMITH_CACHE_DIR`, else `$XDG_CACHE_HOME/ksmith`, else `~/.cache/ksmith`.
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("KSMITH_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("ksmith");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("ksmith")
}

fn setup_err(msg: impl Into<String>) -> HarnessError {
    HarnessError::Setup(msg.into())
}

/// Digest of the embedded harness package (16 hex digits): changes with any of its files, so
/// results and references a different harness made are never taken for this one's.
pub fn harness_digest() -> &'static str {
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST.get_or_init(|| {
        let mut all = String::new();
        for (n, t) in FILES {
            all.push_str(n);
            all.push('\0');
            all.push_str(t);
        }
        blake3::hash(all.as_bytes()).to_hex()[..16].to_string()
    })
}

/// Holds an exclusive lock on a file while alive (several ksmith processes may set up at once).
struct Lock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

impl Lock {
    fn take(path: &Path) -> Result<Lock, HarnessError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| setup_err(format!("cannot open lock {}: {e}", path.display())))?;
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map(Lock)
            .map_err(|(_, e)| setup_err(format!("cannot lock {}: {e}", path.display())))
    }
}

impl PythonEnv {
    /// Resolves the interpreter: `explicit`, else `$KSMITH_PYTHON`, else the managed environment
    /// (created on first use; `progress` receives one-line status messages).
    pub fn resolve(
        explicit: Option<&Path>,
        progress: &dyn Fn(&str),
    ) -> Result<PythonEnv, HarnessError> {
        let root = cache_root();
        std::fs::create_dir_all(&root).map_err(|e| {
            setup_err(format!(
                "cannot create cache directory {}: {e}",
                root.display()
            ))
        })?;
        let harness_dir = write_harness(&root)?;
        let allocguard = build_allocguard(&harness_dir);
        // The trusted server finds it next to its package; without it the baseline's cold
        // cache falls back to writing a last-level-cache-sized buffer.
        let _ = build_helper(&harness_dir, "evict", &[]);
        // Output checks in one native pass (else numpy's); no fused multiply-add, so each
        // tolerance is rounded as numpy rounds it.
        let _ = build_helper(&harness_dir, "compare", &["-ffp-contract=off"]);
        let from_env = std::env::var_os("KSMITH_PYTHON").map(PathBuf::from);
        if let Some(py) = explicit.map(Path::to_path_buf).or(from_env) {
            check_modules(&py, &harness_dir)?;
            return Ok(PythonEnv {
                python: py,
                harness_dir,
                allocguard,
                managed: false,
            });
        }
        let python = managed_venv(&root, &harness_dir, progress)?;
        Ok(PythonEnv {
            python,
            harness_dir,
            allocguard,
            managed: true,
        })
    }

    /// Makes sure an optional backend's module (e.g. `triton`) is importable: installs its pinned
    /// requirements file into a managed environment on first use, or says how to install it.
    pub fn ensure_module(
        &self,
        module: &str,
        requirements: &str,
        progress: &dyn Fn(&str),
    ) -> Result<(), HarnessError> {
        let has = |python: &Path| {
            Command::new(python)
                .args([
                    "-c",
                    &format!("import importlib.util, sys; sys.exit(importlib.util.find_spec({module:?}) is None)"),
                ])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        self.ensure_installed(module, requirements, &|| has(&self.python), progress)
    }

    /// The prefix of this environment's installation (`.../bin/python` → `...`): where a
    /// package's files land (`lib/python3.X/site-packages`).
    pub fn prefix(&self) -> Option<PathBuf> {
        self.python
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
    }

    /// Makes sure `what` is installed, as `present` tells: installs the pinned `requirements`
    /// file into a managed environment on first use (under its lock, so concurrent ksmith
    /// processes install once), or says how to install it into an unmanaged one.
    pub fn ensure_installed(
        &self,
        what: &str,
        requirements: &str,
        present: &dyn Fn() -> bool,
        progress: &dyn Fn(&str),
    ) -> Result<(), HarnessError> {
        let module = what;
        let has = |_: &Path| present();
        if has(&self.python) {
            return Ok(());
        }
        let reqs = self.harness_dir.join(requirements);
        if !self.managed {
            return Err(setup_err(format!(
                "Python interpreter {} lacks `{module}`, which this backend needs; install it with `{} -m pip install -r {}`",
                self.python.display(),
                self.python.display(),
                reqs.display()
            )));
        }
        let root = cache_root();
        let _lock = Lock::take(&root.join("venv.lock"))?;
        if has(&self.python) {
            return Ok(());
        }
        progress(&format!(
            "installing {module} into the Python environment (first use of this backend)..."
        ));
        let out = Command::new(&self.python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-r",
            ])
            .arg(&reqs)
            .output()
            .map_err(|e| setup_err(format!("pip install {module}: cannot run: {e}")))?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr);
            let tail: String = text
                .chars()
                .rev()
                .take(3000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Err(setup_err(format!(
                "pip install -r {} failed:\n{tail}",
                reqs.display()
            )));
        }
        Ok(())
    }

    /// What a sandboxed runner must be able to read: the interpreter's installation (the
    /// virtualenv and the Python it was made from), the harness package and the allocation
    /// guard. Everything else of the user's stays out of its view.
    pub fn runner_view(&self) -> Vec<PathBuf> {
        let mut v = vec![self.harness_dir.clone()];
        let mut prefix_of = |bin: &Path| {
            // .../bin/python -> ...
            if let Some(prefix) = bin.parent().and_then(Path::parent) {
                v.push(prefix.to_path_buf());
            }
        };
        prefix_of(&self.python);
        if let Ok(real) = std::fs::canonicalize(&self.python) {
            prefix_of(&real);
        }
        // A virtualenv names the Python it was made from in pyvenv.cfg (`home = .../bin`).
        if let Some(cfg) = self
            .python
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join("pyvenv.cfg"))
        {
            for line in std::fs::read_to_string(cfg).unwrap_or_default().lines() {
                if let Some(home) = line.strip_prefix("home").map(|r| r.trim_start()) {
                    if let Some(dir) = home.strip_prefix('=') {
                        prefix_of(&Path::new(dir.trim()).join("python"));
                    }
                }
            }
        }
        v.sort();
        v.dedup();
        v
    }

    /// Why this environment can no longer start a harness process, when its interpreter or
    /// harness files were deleted after it was resolved (a cache cleaned during a bench, say),
    /// with how it recovers: a managed environment is recreated by the next command.
    pub fn gone(&self) -> Option<String> {
        let missing = if !self.python.exists() {
            &self.python
        } else if !self.harness_dir.join("ksmith_harness").is_dir() {
            &self.harness_dir
        } else {
            return None;
        };
        Some(if self.managed {
            let venv = self
                .python
                .parent()
                .and_then(Path::parent)
                .unwrap_or(&self.python);
            format!(
                "the Python environment {} was removed while ksmith ran ({} is gone); the next ksmith command recreates it (about a minute)",
                venv.display(),
                missing.display()
            )
        } else {
            format!(
                "the Python environment was removed while ksmith ran ({} is gone); restore the interpreter given by --python / KSMITH_PYTHON, or drop it to use a managed environment (created on first use); the harness files are rewritten by the next ksmith command",
                missing.display()
            )
        })
    }

    /// Environment for a harness process: PYTHONPATH plus `extra`; nothing else is inherited.
    pub fn process_env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "PYTHONPATH".to_string(),
                self.harness_dir.display().to_string(),
            ),
            ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
            ("TF_CPP_MIN_LOG_LEVEL".to_string(), "2".to_string()),
            // The trusted server and a runner may both use one GPU: neither may take 75% of its
            // memory up front (JAX's default).
            (
                "XLA_PYTHON_CLIENT_PREALLOCATE".to_string(),
                "false".to_string(),
            ),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }
}

fn write_harness(root: &Path) -> Result<PathBuf, HarnessError> {
    let dir = root.join(format!("harness-{}", harness_digest()));
    // Every file is compared with the copy embedded in this binary before use: a harness
    // changed on disk (by anything) is rewritten, never trusted.
    let intact = || {
        FILES
            .iter()
            .all(|(name, text)| std::fs::read(dir.join(name)).is_ok_and(|b| b == text.as_bytes()))
    };
    if dir.join(".complete").exists() && intact() {
        return Ok(dir);
    }
    let _lock = Lock::take(&root.join("harness.lock"))?;
    if dir.join(".complete").exists() && intact() {
        return Ok(dir);
    }
    let io =
        |e: std::io::Error| setup_err(format!("cannot write harness to {}: {e}", dir.display()));
    for (name, text) in FILES {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap_or(&dir)).map_err(io)?;
        std::fs::write(&p, text).map_err(io)?;
    }
    std::fs::write(dir.join(".complete"), "").map_err(io)?;
    Ok(dir)
}

fn build_allocguard(harness_dir: &Path) -> Option<PathBuf> {
    build_helper(harness_dir, "allocguard", &["-fopenmp"])
}

/// Builds the harness's C helper `name` (`ksmith_harness/NAME.c` → `NAME.so`) once per harness
/// version; None where no compiler is found (callers fall back).
fn build_helper(harness_dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let out = harness_dir.join(format!("{name}.so"));
    if out.exists() {
        return Some(out);
    }
    let tmp = harness_dir.join(format!("{name}.so.tmp{}", std::process::id()));
    let ok = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC"])
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(harness_dir.join(format!("ksmith_harness/{name}.c")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    (ok && std::fs::rename(&tmp, &out).is_ok()).then_some(out)
}

fn check_modules(python: &Path, harness_dir: &Path) -> Result<(), HarnessError> {
    let script = format!(
        "import importlib.util, sys\nmissing = [m for m in {:?} if importlib.util.find_spec(m) is None]\nprint(' '.join(missing))\nsys.exit(0 if sys.version_info >= (3, 10) else 3)",
        REQUIRED_MODULES
    );
    let out = Command::new(python)
        .args(["-c", &script])
        .output()
        .map_err(|e| {
            setup_err(format!(
                "cannot run Python interpreter {}: {e}",
                python.display()
            ))
        })?;
    if out.status.code() == Some(3) {
        return Err(setup_err(format!(
            "{} is older than Python 3.10, which the harness needs",
            python.display()
        )));
    }
    let missing = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !missing.is_empty() {
        return Err(setup_err(format!(
            "Python interpreter {} lacks modules: {missing}; install them with `{} -m pip install -r {}`",
            python.display(),
            python.display(),
            harness_dir.join("requirements.txt").display()
        )));
    }
    Ok(())
}

fn managed_venv(
    root: &Path,
    harness_dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<PathBuf, HarnessError> {
    let reqs = harness_dir.join("requirements.txt");
    let reqs_text = std::fs::read_to_string(&reqs)
        .map_err(|e| setup_err(format!("{}: {e}", reqs.display())))?;
    let venv = root.join(format!(
        "venv-{}",
        &blake3::hash(reqs_text.as_bytes()).to_hex()[..12]
    ));
    let python = venv.join("bin").join("python");
    let stamp = venv.join(".ksmith-ready");
    if stamp.exists() {
        return Ok(python);
    }
    let _lock = Lock::take(&root.join("venv.lock"))?;
    if stamp.exists() {
        return Ok(python);
    }
    let bootstrap = std::env::var_os("KSMITH_BOOTSTRAP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    progress(&format!(
        "setting up the Python environment in {} (first use only; about a minute)...",
        venv.display()
    ));
    let _ = std::fs::remove_dir_all(&venv);
    let log_path = root.join("venv-setup.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| setup_err(format!("{}: {e}", log_path.display())))?;
    let run = |cmd: &mut Command, what: &str| -> Result<(), HarnessError> {
        let log2 = log.try_clone().map_err(|e| setup_err(e.to_string()))?;
        let log3 = log.try_clone().map_err(|e| setup_err(e.to_string()))?;
        let st = cmd
            .stdout(log2)
            .stderr(log3)
            .status()
            .map_err(|e| setup_err(format!("{what}: cannot run: {e}")))?;
        if st.success() {
            Ok(())
        } else {
            let tail = ksmith_sandbox::read_truncated(&log_path, 4000);
            Err(setup_err(format!(
                "{what} failed ({st}); log {}:\n{tail}",
                log_path.display()
            )))
        }
    };
    run(Command::new(&bootstrap).args(["-m", "venv"]).arg(&venv), &format!(
        "creating a virtual environment with {} (install Python >= 3.10 with the venv module, or set KSMITH_PYTHON to an interpreter that has numpy, jax and safetensors)",
        bootstrap.display()
    ))?;
    progress("installing numpy, jax (CPU) and safetensors with pip...");
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-r",
            ])
            .arg(&reqs),
        "pip install of the harness requirements",
    )?;
    check_modules(&python, harness_dir)?;
    std::fs::write(&stamp, reqs_text)
        .map_err(|e| setup_err(format!("{}: {e}", stamp.display())))?;
    progress("Python environment ready.");
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::{PythonEnv, FILES};

    #[test]
    fn a_deleted_environment_is_named_with_how_it_recovers() {
        let root = std::env::temp_dir().join(format!("ksmith-gone-{}", std::process::id()));
        let harness = root.join("harness");
        std::fs::create_dir_all(harness.join("ksmith_harness")).unwrap();
        let venv = root.join("venv-abc");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        let mut env = PythonEnv {
            python: venv.join("bin/python"),
            harness_dir: harness.clone(),
            allocguard: None,
            managed: true,
        };
        assert_eq!(env.gone(), None);
        std::fs::remove_dir_all(&venv).unwrap();
        let m = env.gone().unwrap();
        assert!(
            m.contains(&format!(
                "the Python environment {} was removed",
                venv.display()
            )) && m.contains("the next ksmith command recreates it"),
            "{m}"
        );
        env.managed = false;
        assert!(env.gone().unwrap().contains("--python / KSMITH_PYTHON"));
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        std::fs::remove_dir_all(harness.join("ksmith_harness")).unwrap();
        assert!(env.gone().unwrap().contains(&harness.display().to_string()));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A module added to the harness but not embedded is missing from every installed harness
    /// (the trusted server then dies at import).
    #[test]
    fn every_harness_module_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../harness/ksmith_harness");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") || name.ends_with(".c") {
                let path = format!("ksmith_harness/{name}");
                assert!(
                    FILES.iter().any(|(p, _)| *p == path),
                    "{path} is not in FILES"
                );
            }
        }
    }
}
