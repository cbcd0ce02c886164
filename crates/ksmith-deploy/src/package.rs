//! Writing the package: pyproject, the runtime, a manifest with each kernel's signature,
//! tolerances, validated workloads and provenance, and per kernel its judged sources, generated
//! FFI handler and the task's reference (the fallback). Written beside the destination and moved
//! into place, so a failed export leaves any earlier one intact.

use crate::handler::{self, Device};
use crate::{python_identifier, Binding, Choice, DeployError};
use ksmith_task::{Axis, Language, OutputSpec, TensorSpec, Workload};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Marks a directory as written by `ksmith export --format jax` (and so replaceable by it).
const MARKER: &str = ".ksmith-export";
/// Manifest format version, checked by the runtime.
const FORMAT: u32 = 1;

const RUNTIME: &str = include_str!("../python/_runtime.py");
const VERIFY: &str = include_str!("../python/verify.py");
const MAIN: &str = include_str!("../python/__main__.py");
const PYPROJECT: &str = include_str!("../templates/pyproject.toml.j2");

/// What was written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The package directory (the one with pyproject.toml).
    pub dir: PathBuf,
    /// The import name.
    pub package: String,
    /// Kernel names, in order.
    pub kernels: Vec<String>,
    /// The kernels of the earlier export this one replaced, if there was one.
    pub replaced: Option<Vec<String>>,
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: u32,
    package: &'a str,
    ksmith_version: &'a str,
    kernels: BTreeMap<&'a str, Entry<'a>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    task: &'a str,
    description: &'a str,
    binding: Binding,
    language: &'a str,
    entry_point: &'a str,
    /// Directory of the kernel's files, relative to the package.
    dir: String,
    sources: Vec<&'a str>,
    flags: &'a [String],
    /// Generated FFI handler (FFI bindings only).
    handler: Option<String>,
    /// Handler symbol in the built library.
    symbol: String,
    /// XLA custom-call target name (unique per package).
    target: String,
    axes: &'a [Axis],
    inputs: &'a [TensorSpec],
    outputs: &'a [OutputSpec],
    reference: Reference<'a>,
    workload_set: &'a str,
    workloads: &'a [Workload],
    /// Per var axis, the smallest and largest value validated; const axes are fixed.
    envelope: BTreeMap<&'a str, [i64; 2]>,
    /// sha256 of every file of the kernel (paths relative to `dir`): the runtime builds and
    /// runs nothing that was changed after the export.
    files: BTreeMap<String, String>,
    provenance: Provenance<'a>,
}

#[derive(Serialize)]
struct Reference<'a> {
    file: String,
    function: &'a str,
}

#[derive(Serialize)]
struct Provenance<'a> {
    evaluation: i64,
    created_at: &'a str,
    solution: &'a str,
    solution_hash: &'a str,
    task_hash: &'a str,
    environment_fingerprint: &'a str,
    cpu: &'a str,
    compiler: &'a str,
    /// Geomean speedup over XLA measured by the judge (absent for untimed evaluations).
    speedup: Option<f64>,
    speedup_interval: Option<(f64, f64)>,
    workload_speedups: Vec<f64>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DeployError + '_ {
    move |source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), DeployError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(path, bytes).map_err(io(path))
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Files Python and pip add to a package directory (caches, build trees): not the user's.
fn generated_by_tools(rel: &Path) -> bool {
    rel.components().any(|c| {
        let c = c.as_os_str().to_string_lossy();
        c == "__pycache__" || c == "build" || c.ends_with(".egg-info") || c.ends_with(".pyc")
    })
}

/// Every file under `root`, relative to it (no links followed).
fn files_under(root: &Path) -> Result<Vec<PathBuf>, DeployError> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let e = e.map_err(io(&dir))?;
            let p = e.path();
            if e.file_type().map_err(io(&p))?.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.to_path_buf());
            }
        }
    }
    Ok(out)
}

/// What an earlier export in `out` wrote: its file list and kernels (from its marker).
#[derive(serde::Deserialize)]
struct Marker {
    #[serde(default)]
    files: Vec<PathBuf>,
    #[serde(default)]
    kernels: Vec<String>,
}

/// Refuses an `out` that exists and is neither empty nor an earlier export holding only what
/// the export wrote (and what Python and pip add); returns the earlier export's marker.
fn check_out(out: &Path) -> Result<Option<Marker>, DeployError> {
    let refuse = |m: String| DeployError::Out {
        path: out.to_path_buf(),
        message: m,
    };
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(out)(e)),
        Ok(m) if !m.is_dir() => Err(refuse("exists and is not a directory".into())),
        Ok(_) => {
            let mut entries = std::fs::read_dir(out).map_err(io(out))?;
            if entries.next().is_none() {
                return Ok(None);
            }
            let marker = std::fs::read_to_string(out.join(MARKER))
                .ok()
                .and_then(|t| serde_json::from_str::<Marker>(&t).ok())
                .ok_or_else(|| {
                    refuse("exists, is not empty and was not written by ksmith export; choose another --out or remove it".into())
                })?;
            let mut foreign: Vec<String> = files_under(out)?
                .into_iter()
                .filter(|f| {
                    f.as_path() != Path::new(MARKER)
                        && !marker.files.contains(f)
                        && !generated_by_tools(f)
                })
                .map(|f| f.display().to_string())
                .collect();
            if !foreign.is_empty() {
                foreign.sort();
                let n = foreign.len();
                foreign.truncate(5);
                return Err(refuse(format!(
                    "holds {n} file(s) ksmith export did not write ({}{}); replacing the export would delete them: move them away or choose another --out",
                    foreign.join(", "),
                    if n > 5 { ", ..." } else { "" }
                )));
            }
            Ok(Some(marker))
        }
    }
}

/// Writes the package `package` for `choices` at `out` (replacing an earlier export there).
pub fn write_package(
    out: &Path,
    package: &str,
    choices: &[Choice],
) -> Result<Written, DeployError> {
    python_identifier("package name", package)?;
    for c in choices {
        python_identifier("task name", &c.task.name)?;
    }
    let mut names: Vec<&str> = choices.iter().map(|c| c.task.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(DeployError::Out {
            path: out.to_path_buf(),
            message: format!(
                "two tasks are named `{}`; a package holds one kernel per name",
                w[0]
            ),
        });
    }
    let earlier = check_out(out)?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let unwritable = |e: std::io::Error| DeployError::Out {
        path: out.to_path_buf(),
        message: format!(
            "cannot write in {} ({}); choose another --out",
            parent.display(),
            e.kind()
        ),
    };
    std::fs::create_dir_all(&parent).map_err(unwritable)?;
    let staging = tempfile::Builder::new()
        .prefix(".ksmith-export-")
        .tempdir_in(&parent)
        .map_err(unwritable)?;
    let root = staging.path();
    let pkg = root.join(package);

    let mut kernels = BTreeMap::new();
    for c in choices {
        let name = c.task.name.as_str();
        let dir = format!("kernels/{name}");
        let kdir = pkg.join(&dir);
        for (file, bytes) in &c.sources {
            write(&kdir.join("src").join(file), bytes)?;
        }
        let ref_file = Path::new(&c.task.reference.file)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "reference.py".into());
        write(&kdir.join("ref").join(&ref_file), &c.reference)?;
        let binding = Binding::of(c.language);
        let symbol = format!("ksmith_ffi_{name}");
        let device = match binding {
            Binding::CpuFfi => Some((Device::Cpu, "ffi_cpu.cc")),
            Binding::CudaFfi => Some((Device::Cuda, "ffi_cuda.cu")),
            Binding::Pallas | Binding::Triton => None,
        };
        let handler = match device {
            Some((device, file)) => {
                let src = handler::source(&c.task, &c.entry_point, &symbol, device)?;
                write(&kdir.join(file), src)?;
                Some(file.to_string())
            }
            None => None,
        };
        if c.language == Language::C {
            // The kernel is compiled with its ABI header force-included, as the judge does, so
            // a signature that drifted from the task is a compile error, not a wrong call.
            write(&kdir.join("src").join("ksmith_abi.h"), abi_header(c))?;
        }
        let mut files = BTreeMap::new();
        for rel in files_under(&kdir)? {
            let bytes = std::fs::read(kdir.join(&rel)).map_err(io(&kdir.join(&rel)))?;
            files.insert(rel.display().to_string(), sha256(&bytes));
        }
        let mut envelope = BTreeMap::new();
        for a in &c.task.axes {
            let values = c.task.workloads.iter().filter_map(|w| w.axes.get(&a.name));
            if let (Some(lo), Some(hi)) = (values.clone().min(), values.max()) {
                envelope.insert(a.name.as_str(), [*lo, *hi]);
            }
        }
        let r = &c.eval.result;
        let perf = r.performance.as_ref();
        kernels.insert(
            name,
            Entry {
                task: name,
                description: &c.task.description,
                binding,
                language: c.language.name(),
                entry_point: &c.entry_point,
                dir,
                sources: c.sources.iter().map(|(n, _)| n.as_str()).collect(),
                flags: &c.flags,
                handler,
                symbol,
                target: format!("ksmith_{package}_{name}"),
                axes: &c.task.axes,
                inputs: &c.task.inputs,
                outputs: &c.task.outputs,
                reference: Reference {
                    file: ref_file,
                    function: &c.task.reference.function,
                },
                workload_set: c.set.name(),
                workloads: &c.task.workloads,
                envelope,
                files,
                provenance: Provenance {
                    evaluation: c.eval.id,
                    created_at: &c.eval.created_at,
                    solution: &r.solution,
                    solution_hash: &r.solution_hash,
                    task_hash: &r.task_hash,
                    environment_fingerprint: &r.environment.fingerprint,
                    cpu: &r.environment.cpu,
                    compiler: &r.environment.compiler,
                    speedup: perf.map(|p| p.speedup),
                    speedup_interval: perf.map(|p| p.speedup_interval),
                    workload_speedups: perf
                        .map(|p| p.workloads.iter().map(|w| w.speedup).collect())
                        .unwrap_or_default(),
                },
            },
        );
    }
    let manifest = Manifest {
        format: FORMAT,
        package,
        ksmith_version: env!("CARGO_PKG_VERSION"),
        kernels,
    };
    let manifest_json =
        serde_json::to_string_pretty(&manifest).map_err(|e| DeployError::Template {
            name: "manifest.json",
            message: e.to_string(),
        })?;
    write(&pkg.join("manifest.json"), &manifest_json)?;
    write(&pkg.join("_runtime.py"), RUNTIME)?;
    write(&pkg.join("verify.py"), VERIFY)?;
    write(&pkg.join("__main__.py"), MAIN)?;
    // The distribution's version, also `PACKAGE.__version__`: a new one for every change of
    // what the package holds.
    let version = format!(
        "0.1.0+ks{}",
        &ksmith_task::content_hash(manifest_json.as_bytes())[..12]
    );
    write(&pkg.join("__init__.py"), init_py(&version, &names))?;
    write(&pkg.join("README.md"), readme(package, choices))?;
    write(
        &root.join("pyproject.toml"),
        pyproject(package, &version, &names)?,
    )?;
    let written: Vec<String> = files_under(root)?
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let marker = serde_json::json!({
        "package": package, "format": FORMAT, "kernels": names, "files": written,
    });
    write(&root.join(MARKER), format!("{marker:#}\n"))?;

    // Move into place: the earlier export (if any) aside first, removed only once the new
    // one is there.
    let old = parent.join(format!(".ksmith-export-old-{}", std::process::id()));
    let had_old = out.exists();
    if had_old {
        std::fs::rename(out, &old).map_err(io(out))?;
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, out) {
        if had_old {
            let _ = std::fs::rename(&old, out);
        }
        let _ = std::fs::remove_dir_all(&staged);
        return Err(io(out)(e));
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(Written {
        dir: out.to_path_buf(),
        package: package.to_string(),
        kernels: names.iter().map(|s| s.to_string()).collect(),
        replaced: earlier.map(|m| m.kernels),
    })
}

/// The ABI header a C kernel of the export is compiled with (`-include ksmith_abi.h`).
pub(crate) fn abi_header(c: &Choice) -> String {
    format!(
        "/* Generated by ksmith export: the kernel ABI for task `{}`. */\n#include <stdint.h>\n{}\n",
        c.task.name,
        ksmith_backend::c::prototype(&c.task, &c.entry_point)
    )
}

fn init_py(version: &str, names: &[&str]) -> String {
    let mut s = format!(
        "\"\"\"Kernels judged by KernelSmith, callable from JAX: {}.\n\nGenerated by `ksmith export --format jax`; see README.md in this directory.\n\"\"\"\n\nfrom ._runtime import FallbackWarning\nfrom ._runtime import Package as _Package\n\n__version__ = \"{version}\"\n_package = _Package(__name__, __file__)\napply = _package.apply\nkernel = _package.kernel\nkernels = _package.kernels\nbuild = _package.build\nstatus = _package.status\n\n",
        names.join(", ")
    );
    for n in names {
        s.push_str(&format!("{n} = _package.kernel(\"{n}\")\n"));
    }
    let mut all: Vec<String> = [
        "__version__",
        "FallbackWarning",
        "apply",
        "kernel",
        "kernels",
        "build",
        "status",
    ]
    .iter()
    .map(|s| format!("\"{s}\""))
    .collect();
    all.extend(names.iter().map(|n| format!("\"{n}\"")));
    s.push_str(&format!("\n__all__ = [{}]\n", all.join(", ")));
    s
}

fn readme(package: &str, choices: &[Choice]) -> String {
    let mut s = format!(
        "# {package}\n\nKernels exported by `ksmith export --format jax`. Each one is a solution that the\nKernelSmith judge passed for its task (the fastest judged, unless named), with its figures below.\n\n```python\nimport {package}\ny = {package}.{first}(x)                 # the kernel inside the validated shapes, else the reference\n\n@{package}.apply(\"{first}\")              # your own function, swapped for the kernel when it fits\ndef my_fn(x): ...\n```\n\n`KSMITH_KERNELS_DISABLE=1` turns every substitution off. `python -m {package} status` says\nwhich kernels are built; `python -m {package}.verify` re-checks and times them inside `jax.jit`.\n\n## Machine-written code: what was checked, and what cannot be\n\nThese kernels were written by a program (an LLM agent or an autotuner), not reviewed by a person.\nWhat KernelSmith checked, for each kernel, on the machine that exported it:\n\n- the judge built it and ran it in a sandbox (no privileges, no network, no host files, no\n  `/proc` of the host) on fresh random inputs of every validated workload, into poisoned output\n  buffers, against the task's reference computed in float64 by a separate process;\n- for C kernels, the built library: every symbol it imports is on an allow-list (libm, the OpenMP\n  runtime, memory allocation, a few memory and string functions, what compilers emit), it needs\n  no library beyond the C runtime's, and its own code holds no system-call instruction; the export\n  was refused otherwise;\n- `ksmith verify-export` repeats the checks with each kernel built and called inside that\n  sandbox, the checks made by a process that never loads it.\n\nWhat cannot be checked: a native kernel (C, CUDA) runs with the rights of the process that calls\nit. The sandbox is easy to tell from a normal process, so a kernel can behave one way when judged\nand another in your program (return other results, touch files); the library checks are name\nchecks that code determined to get past them can evade. `python -m {package}.verify` runs the\nkernels in your own process, unsandboxed. Read the sources in `kernels/*/src/` before you deploy\nthem, and run them with no more rights than they need.\n\n| kernel | binding | solution | evaluation | judged speedup | validated shapes |\n| --- | --- | --- | --- | --- | --- |\n",
        first = choices.first().map(|c| c.task.name.as_str()).unwrap_or("kernel")
    );
    for c in choices {
        let r = &c.eval.result;
        let speed = r
            .performance
            .as_ref()
            .map(|p| format!("{:.2}x", p.speedup))
            .unwrap_or_else(|| "untimed".into());
        let shapes: Vec<String> = c
            .task
            .workloads
            .iter()
            .map(ksmith_task::Workload::axes_text)
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} ({}) | {} | {} |\n",
            c.task.name,
            Binding::of(c.language).name(),
            r.solution,
            c.eval.id,
            c.eval.created_at,
            speed,
            shapes.join("; ")
        ));
    }
    s
}

fn pyproject(package: &str, version: &str, names: &[&str]) -> Result<String, DeployError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    let err = |e: minijinja::Error| DeployError::Template {
        name: "pyproject.toml",
        message: format!("{e:#}"),
    };
    env.add_template("pyproject", PYPROJECT).map_err(err)?;
    env.get_template("pyproject")
        .and_then(|t| {
            t.render(minijinja::context! {
                package => package,
                dist_name => package.replace('_', "-"),
                version => version,
                kernel_names => names.join(", "),
            })
        })
        .map_err(err)
}
