//! CUDA solutions: nvcc discovery (the system's, or the one a Python wheel installs into the
//! managed environment), builds for a named GPU target with no device needed, ptxas facts,
//! nvcc's diagnostics and the CUDA source policy. Without nvcc the backend is unavailable on
//! the machine, which is reported as such (never as a pass or a compile error).

use crate::c::{
    build_sandboxed, BackendError, BuildFailure, Built, PolicyViolation, Sandboxing, Toolchain,
};
use crate::Diagnostic;
use ksmith_task::Solution;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned CUDA toolchain wheels (nvcc, ptxas, the runtime's headers and static library),
/// installed into the managed Python environment on first use of a CUDA solution.
pub const CUDA_REQUIREMENTS: &str = "requirements-cuda.txt";

/// Environment variable naming the GPU target to build for when no device says it (`sm_90`,
/// `90`, `sm_100a`...).
pub const TARGET_ENV: &str = "KSMITH_GPU_TARGET";

/// The GPU a build is for: an NVIDIA compute capability (`90` is sm_90).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuTarget {
    /// Compute capability as major * 10 + minor.
    pub capability: u32,
}

/// Where a [`GpuTarget`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetSource {
    /// `$KSMITH_GPU_TARGET`.
    Env,
    /// The first GPU, from `nvidia-smi`.
    Device,
    /// Neither: Hopper (sm_90), the default.
    Default,
}

impl GpuTarget {
    /// The default with no device and no setting: Hopper.
    pub const DEFAULT: GpuTarget = GpuTarget { capability: 90 };

    /// Parses `sm_90`, `sm_90a`, `compute_90`, `90` or `9.0`.
    pub fn parse(s: &str) -> Option<GpuTarget> {
        let t = s.trim().to_ascii_lowercase();
        let t = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("compute_"))
            .unwrap_or(&t);
        let t = t.trim_end_matches(['a', 'f']).replace('.', "");
        let capability: u32 = t.parse().ok()?;
        (10..=1000)
            .contains(&capability)
            .then_some(GpuTarget { capability })
    }

    /// `$KSMITH_GPU_TARGET`, else the first GPU's (`nvidia-smi`), else sm_90. A setting that
    /// does not parse is an error, not a silent default.
    pub fn resolve() -> Result<(GpuTarget, TargetSource), String> {
        if let Some(v) = std::env::var_os(TARGET_ENV) {
            let v = v.to_string_lossy();
            return GpuTarget::parse(&v)
                .map(|t| (t, TargetSource::Env))
                .ok_or_else(|| format!("{TARGET_ENV}={v}: expected a GPU target such as sm_90"));
        }
        Ok(match device_capability() {
            Some(t) => (t, TargetSource::Device),
            None => (GpuTarget::DEFAULT, TargetSource::Default),
        })
    }

    /// nvcc's `-arch`: `sm_90a` on Hopper (its `a` features, wgmma and setmaxnreg, need it),
    /// `sm_NN` elsewhere.
    pub fn nvcc_arch(&self) -> String {
        if self.capability == 90 {
            "sm_90a".into()
        } else {
            format!("sm_{}", self.capability)
        }
    }
}

impl std::fmt::Display for GpuTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{}", self.capability)
    }
}

/// The first GPU's compute capability from `nvidia-smi`, if there is one.
fn device_capability() -> Option<GpuTarget> {
    Command::new("nvidia-smi")
        .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(GpuTarget::parse)
        })
}

/// `-arch` for the target in force (see [`GpuTarget::resolve`]); sm_90a when the setting is
/// invalid (the judge reports that error itself).
pub fn arch() -> String {
    GpuTarget::resolve()
        .map(|(t, _)| t)
        .unwrap_or(GpuTarget::DEFAULT)
        .nvcc_arch()
}

/// Where the nvcc in use was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvccSource {
    /// `$NVCC`.
    Env,
    /// `$CUDA_HOME/bin/nvcc` (or `$CUDA_PATH`).
    CudaHome,
    /// `nvcc` on PATH.
    Path,
    /// `/usr/local/cuda/bin/nvcc`.
    System,
    /// The `nvidia-cuda-nvcc` wheel in a Python environment (the managed one: installed from
    /// `requirements-cuda.txt` on first use).
    PythonWheel,
}

/// A working nvcc.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Nvcc {
    /// The executable.
    pub path: PathBuf,
    /// Its release line (`Cuda compilation tools, release 13.0, V13.0.88`).
    pub version: String,
    /// Where it was found.
    pub source: NvccSource,
}

impl Nvcc {
    /// The toolkit directory (`bin/..`): headers, `nvvm/`, libraries. The sandboxed compiler
    /// may read it.
    pub fn root(&self) -> PathBuf {
        let real = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        real.parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or(real)
    }
}

/// The release line of `nvcc --version`, when it runs.
fn probe(path: &Path) -> Option<String> {
    let o = Command::new(path).arg("--version").output().ok()?;
    if !o.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&o.stdout);
    Some(
        text.lines()
            .find(|l| l.contains("release"))
            .or_else(|| text.lines().last())
            .unwrap_or("")
            .trim()
            .to_string(),
    )
}

/// nvcc installed by a wheel under a Python prefix (a virtualenv): CUDA 13's
/// `nvidia/cu13/bin/nvcc` or CUDA 12's `nvidia/cuda_nvcc/bin/nvcc` in its site-packages.
pub fn wheel_nvcc(prefix: &Path) -> Option<PathBuf> {
    let lib = std::fs::read_dir(prefix.join("lib")).ok()?;
    let mut sites: Vec<PathBuf> = lib
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .collect();
    sites.sort();
    sites.into_iter().find_map(|site| {
        ["nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"]
            .iter()
            .map(|rel| site.join(rel))
            .find(|p| p.is_file())
    })
}

/// Finds nvcc: `$NVCC`, `$CUDA_HOME/bin/nvcc` (or `$CUDA_PATH`), `nvcc` on PATH,
/// `/usr/local/cuda/bin/nvcc`, then a wheel's under each of `python_prefixes`. Each is run
/// (`--version`) before it is taken.
pub fn find_nvcc(python_prefixes: &[PathBuf]) -> Option<Nvcc> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let mut candidates: Vec<(PathBuf, NvccSource)> = Vec::new();
    if let Some(p) = env("NVCC") {
        candidates.push((p, NvccSource::Env));
    }
    for home in [env("CUDA_HOME"), env("CUDA_PATH")].into_iter().flatten() {
        candidates.push((home.join("bin").join("nvcc"), NvccSource::CudaHome));
    }
    candidates.push((PathBuf::from("nvcc"), NvccSource::Path));
    candidates.push((
        PathBuf::from("/usr/local/cuda/bin/nvcc"),
        NvccSource::System,
    ));
    candidates.extend(
        python_prefixes
            .iter()
            .filter_map(|p| wheel_nvcc(p))
            .map(|p| (p, NvccSource::PythonWheel)),
    );
    candidates.into_iter().find_map(|(path, source)| {
        let version = probe(&path)?;
        Some(Nvcc {
            path,
            version,
            source,
        })
    })
}

/// The nvcc to use, ignoring Python environments (see [`find_nvcc`]).
pub fn nvcc() -> Option<PathBuf> {
    find_nvcc(&[]).map(|n| n.path)
}

/// Builds a CUDA solution with nvcc for `target` into a shared library (`-Xptxas -v` for the
/// build facts). No device is needed. The diagnostics' columns are placed in the solution's
/// own lines (nvcc counts them in its preprocessed text).
pub fn build(
    nvcc: &Nvcc,
    target: GpuTarget,
    solution: &Solution,
    cache_dir: &Path,
) -> Result<Result<Built, BuildFailure>, BackendError> {
    let mut flags: Vec<String> = ["-O3", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    flags.push(format!("-arch={}", target.nvcc_arch()));
    flags.extend(solution.flags.iter().cloned());
    let tool = Toolchain {
        command: nvcc.path.display().to_string(),
        version: nvcc.version.clone(),
        flags,
        header: None,
        parse: parse_diagnostics,
    };
    let extra = Sandboxing {
        read: vec![nvcc.root()],
        env: Vec::new(),
        // nvcc's tools map large ranges up front.
        address_space: 16 << 30,
    };
    let place =
        |d: &mut Vec<Diagnostic>, log: &str| *d = parse_with_sources(log, &solution.sources);
    Ok(match build_sandboxed(&tool, &extra, solution, cache_dir)? {
        Ok(mut b) => {
            place(&mut b.diagnostics, &b.log);
            Ok(b)
        }
        Err(mut f) => {
            place(&mut f.diagnostics, &f.log);
            Err(f)
        }
    })
}

/// CUDA-specific policy on top of the C source scan: no vendor libraries doing the work, no
/// side streams or graphs that could run past the timer's synchronization, no device resets.
pub fn check_source(file: &str, src: &str) -> Vec<PolicyViolation> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cusparse\w*|cufft\w*|curand\w*|cutlass|thrust|cudaStreamCreate\w*|cudaGraph\w*|cudaLaunchHostFunc|cudaDeviceReset|cudaSetDevice|cudaDeviceSetLimit)\b")
            .expect("static regex")
    });
    src.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .flat_map(|(i, l)| {
            re.find_iter(l).map(move |m| PolicyViolation {
                file: file.into(),
                line: i as u32 + 1,
                name: m.as_str().into(),
                message: format!(
                    "`{}` is not allowed in a CUDA kernel (vendor libraries must not do the work; side streams, graphs and device control escape the judge)",
                    m.as_str()
                ),
            })
        })
        .collect()
}

/// Measured device roofline (from the harness's `gpu_hw`: XLA copy and matmul on the device).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GpuRoofline {
    /// Device kind as JAX reports it.
    pub device: String,
    /// Device-memory copy bandwidth (read + write), GB/s.
    pub copy_gbps: f64,
    /// bf16 matmul peak, TFLOP/s.
    pub matmul_bf16_tflops: f64,
    /// fp32 matmul peak, TFLOP/s.
    pub matmul_fp32_tflops: f64,
}

impl GpuRoofline {
    /// Time floor in seconds: max(FLOPs / matrix peak at the task's precision, bytes / copy bandwidth).
    pub fn floor_seconds(&self, flops: f64, bytes: f64, low_precision: bool) -> f64 {
        let peak = if low_precision {
            self.matmul_bf16_tflops
        } else {
            self.matmul_fp32_tflops
        };
        (flops / (peak * 1e12).max(1.0)).max(bytes / (self.copy_gbps * 1e9).max(1.0))
    }
}

/// Register, shared-memory and spill figures of one kernel from `-Xptxas -v`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PtxasFacts {
    /// Kernel (mangled) name.
    pub kernel: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory bytes.
    pub smem_bytes: u32,
    /// Spill stores + loads in bytes.
    pub spill_bytes: u32,
}

/// Parses ptxas `-v` output: a `Compiling entry function 'NAME'` line, then
/// `N bytes spill stores, M bytes spill loads` and `Used R registers, ... S bytes smem`.
pub fn parse_ptxas(log: &str) -> Vec<PtxasFacts> {
    let mut out: Vec<PtxasFacts> = Vec::new();
    let num_before = |line: &str, unit: &str| -> u32 {
        line.split(',')
            .find(|p| p.contains(unit))
            .and_then(|p| p.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or(0)
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            out.push(PtxasFacts {
                kernel: rest.split('\'').next().unwrap_or("").to_string(),
                ..PtxasFacts::default()
            });
        } else if let Some(k) = out.last_mut() {
            if line.contains("spill stores") {
                k.spill_bytes = num_before(line, "spill stores") + num_before(line, "spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                let used = line.split("Used").nth(1).unwrap_or("");
                k.registers = used
                    .split_whitespace()
                    .find_map(|w| w.parse().ok())
                    .unwrap_or(0);
                k.smem_bytes = num_before(line, "smem");
            }
        }
    }
    out
}

/// nvcc's diagnostics, columns as nvcc counts them (see [`parse_with_sources`]).
pub fn parse_diagnostics(log: &str) -> Vec<Diagnostic> {
    parse_with_sources(log, &[])
}

/// Every diagnostic in nvcc's output: the CUDA front end's `kernel.cu(12): error: ...` (its
/// column from the caret under the echoed line), the host compiler's `kernel.cu:12:5: error:
/// ...`, and the tools' own lines (`ptxas error   : ...`, `nvcc fatal   : ...`, no place).
/// The front end echoes its preprocessed text (`__global__` spelled out), so a caret's column
/// is moved onto the source line in `sources` that ends the same way; without one it stays.
pub fn parse_with_sources(log: &str, sources: &[(String, String)]) -> Vec<Diagnostic> {
    use regex::Regex;
    use std::sync::OnceLock;
    static FRONT: OnceLock<Regex> = OnceLock::new();
    static TOOL: OnceLock<Regex> = OnceLock::new();
    let front = FRONT.get_or_init(|| {
        Regex::new(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)(?: #[\w-]+)?: (?P<msg>.*)$")
            .expect("static regex")
    });
    let tool = TOOL.get_or_init(|| {
        Regex::new(r"^(?P<tool>ptxas|nvcc|nvlink|fatbinary|cicc)\S*\s+(?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")
            .expect("static regex")
    });
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(c) = front.captures(l) {
            let file = c["file"].trim().to_string();
            let line: u32 = c["line"].parse().unwrap_or(0);
            let column = caret_column(&lines[i + 1..])
                .map(|(echo, caret)| place_column(&echo, caret, source_line(sources, &file, line)))
                .unwrap_or(0);
            out.push(Diagnostic {
                file,
                line,
                column,
                severity: c["sev"].to_string(),
                message: c["msg"].trim().to_string(),
            });
        } else if let Some(c) = tool.captures(l) {
            out.push(Diagnostic {
                file: c["tool"].to_string(),
                line: 0,
                column: 0,
                severity: match &c["sev"] {
                    "fatal" => "fatal error".to_string(),
                    s => s.to_string(),
                },
                message: c["msg"].trim().to_string(),
            });
        } else {
            out.extend(crate::c::parse_diagnostics(l));
        }
    }
    out
}

/// The echoed line and the caret's 0-based offset in it, when the lines after a front-end
/// diagnostic are `  <echo>` then `  <spaces>^`.
fn caret_column(next: &[&str]) -> Option<(String, usize)> {
    let echo = next.first()?.strip_prefix("  ")?;
    let caret = next.get(1)?.strip_prefix("  ")?;
    let at = caret.find('^')?;
    (caret[..at].trim().is_empty() && caret[at + 1..].trim().is_empty())
        .then(|| (echo.to_string(), at))
}

/// Line `line` (1-based) of the source named `file`.
fn source_line<'a>(sources: &'a [(String, String)], file: &str, line: u32) -> Option<&'a str> {
    let name = Path::new(file).file_name()?.to_str()?;
    sources
        .iter()
        .find(|(n, _)| n == file || Path::new(n).file_name().and_then(|f| f.to_str()) == Some(name))
        .and_then(|(_, text)| text.lines().nth(line.checked_sub(1)? as usize))
}

/// 1-based column in the source line of the caret at `caret` in `echo`: the part of the echo
/// from the caret on ends the source line too (macros before it change only what precedes).
fn place_column(echo: &str, caret: usize, source: Option<&str>) -> u32 {
    let chars = |s: &str| s.chars().count();
    let Some(tail) = echo.get(caret..) else {
        return 0;
    };
    match source {
        Some(src) if src.trim_end().ends_with(tail.trim_end()) => {
            (chars(src.trim_end()) - chars(tail.trim_end()) + 1) as u32
        }
        Some(_) => 0,
        None => (chars(&echo[..caret]) + 1) as u32,
    }
}

/// The CUDA backend: an `extern "C"` host launcher built with nvcc into a shared library.
pub struct CudaBackend;

impl crate::backend::Backend for CudaBackend {
    fn language(&self) -> ksmith_task::Language {
        ksmith_task::Language::Cuda
    }

    fn device(&self) -> crate::backend::Device {
        crate::backend::Device::Gpu
    }

    fn source_policy(&self, solution: &Solution) -> crate::backend::SourcePolicy {
        crate::backend::SourcePolicy::Checked(
            solution
                .sources
                .iter()
                .flat_map(|(n, s)| {
                    crate::c::check_source(n, s)
                        .into_iter()
                        .chain(check_source(n, s))
                })
                .collect(),
        )
    }

    fn requirement(&self) -> Option<crate::backend::Requirement> {
        Some(crate::backend::Requirement::Tool {
            what: "nvcc (the CUDA toolchain wheels)",
            file: CUDA_REQUIREMENTS,
            present: |prefixes| find_nvcc(prefixes).is_some(),
        })
    }

    fn toolchain(
        &self,
        python: &crate::backend::PythonTools,
    ) -> Result<(), crate::backend::Unavailable> {
        find_nvcc(&python.prefixes).map(|_| ()).ok_or_else(|| {
            crate::backend::Unavailable::Tool(format!(
                "nvcc not found (set NVCC or CUDA_HOME, put nvcc on PATH, or install {CUDA_REQUIREMENTS} into the harness's Python)"
            ))
        })
    }

    fn runs_without_device(&self) -> bool {
        false
    }

    fn workloads(
        &self,
        task: &ksmith_task::Task,
        accelerator: bool,
    ) -> Result<ksmith_task::Task, crate::backend::Unavailable> {
        // Without a GPU it is still checked and built ("built; not run: no device").
        if !accelerator {
            return Ok(task.clone());
        }
        Ok(task
            .for_set(ksmith_task::WorkloadSet::Gpu)
            .unwrap_or_else(|| task.clone()))
    }

    fn build(
        &self,
        ctx: &crate::backend::BuildContext<'_>,
        _task: &ksmith_task::Task,
        solution: &Solution,
    ) -> Result<Result<crate::backend::Product, BuildFailure>, BackendError> {
        let nvcc = find_nvcc(&ctx.python.prefixes).ok_or_else(|| BackendError::NoCompiler {
            command: "nvcc".into(),
            detail: "not found".into(),
        })?;
        let target = ctx.gpu_target.unwrap_or(GpuTarget::DEFAULT);
        Ok(build(&nvcc, target, solution, ctx.cache_dir)?.map(|b| {
            let ptxas = parse_ptxas(&b.log);
            b.into_product(ptxas)
        }))
    }

    fn runner_address_space(&self) -> u64 {
        // CUDA maps huge virtual ranges.
        256 << 30
    }

    fn syntax(&self) -> crate::backend::Syntax {
        crate::backend::Syntax::CLike
    }

    fn prompt_facts(&self, task: &ksmith_task::Task, entry: &str) -> crate::backend::PromptFacts {
        crate::backend::PromptFacts {
            language: "CUDA C++",
            device: "GPU",
            fence: "cuda",
            signature: format!(
                "extern \"C\" {}  // device pointers",
                crate::c::prototype(task, entry)
            ),
        }
    }

    fn binding(&self) -> crate::backend::Binding {
        crate::backend::Binding::CudaFfi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_and_nvcc_output_are_parsed() {
        let log = "ptxas info    : Compiling entry function '_Z6kernelPKfPf' for 'sm_90a'\nptxas info    : Function properties for _Z6kernelPKfPf\n    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\nptxas info    : Used 40 registers, 4096 bytes smem, 384 bytes cmem[0]\n";
        let f = parse_ptxas(log);
        assert_eq!(
            f,
            vec![PtxasFacts {
                kernel: "_Z6kernelPKfPf".into(),
                registers: 40,
                smem_bytes: 4096,
                spill_bytes: 8
            }]
        );
        let d = parse_diagnostics(
            "kernel.cu(12): error: identifier \"x\" is undefined\n1 error detected",
        );
        let v = check_source(
            "k.cu",
            "// cublasSgemm in a comment\ncublasSgemm(h, a);\ncudaStreamCreate(&s);",
        );
        assert_eq!(v.iter().map(|v| v.line).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].line, d[0].severity.as_str()), (12, "error"));
    }

    /// nvcc 13.5's own output for two errors, a warning with a number, the host compiler and
    /// the tools: every one is a diagnostic, and the front end's columns land in the source.
    #[test]
    fn every_kind_of_nvcc_message_is_a_diagnostic_with_its_place() {
        let src =
            "__global__ void k(float* x){ x[0] = y; }\nextern \"C\" void f(){ int a = \"s\"; }\n";
        let log = r#"bad.cu(1): error: identifier "y" is undefined
  __attribute__((global)) void k(float* x){ x[0] = y; }
                                                   ^

bad.cu(2): warning #177-D: variable "a" was declared but never referenced
  extern "C" void f(){ int a = "s"; }
                           ^

2 errors detected in the compilation of "bad.cu".
bad.cu:7:3: error: 'foo' was not declared in this scope
ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x10000 bytes, 0xc000 max)
nvcc fatal   : Unsupported gpu architecture 'compute_1'
"#;
        let sources = vec![("bad.cu".to_string(), src.to_string())];
        let d = parse_with_sources(log, &sources);
        let got: Vec<(&str, u32, u32, &str)> = d
            .iter()
            .map(|d| (d.file.as_str(), d.line, d.column, d.severity.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("bad.cu", 1, 37, "error"),
                ("bad.cu", 2, 26, "warning"),
                ("bad.cu", 7, 3, "error"),
                ("ptxas", 0, 0, "error"),
                ("nvcc", 0, 0, "fatal error"),
            ]
        );
        assert_eq!(d[0].message, "identifier \"y\" is undefined");
        assert!(d[3].message.contains("too much shared data"));
        // Without the sources, the caret's column in nvcc's own text.
        assert_eq!(parse_diagnostics(log)[0].column, 50);
    }

    #[test]
    fn targets_parse_and_spell_as_nvcc_wants() {
        for s in ["sm_90", "sm_90a", "90", "9.0", "compute_90"] {
            assert_eq!(
                GpuTarget::parse(s),
                Some(GpuTarget { capability: 90 }),
                "{s}"
            );
        }
        assert_eq!(GpuTarget::parse("sm_x"), None);
        assert_eq!(GpuTarget::parse("5"), None);
        assert_eq!(GpuTarget::DEFAULT.nvcc_arch(), "sm_90a");
        assert_eq!(GpuTarget { capability: 80 }.nvcc_arch(), "sm_80");
        assert_eq!(GpuTarget { capability: 100 }.to_string(), "sm_100");
    }

    #[test]
    fn a_wheel_nvcc_is_found_under_a_python_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir
            .path()
            .join("lib/python3.11/site-packages/nvidia/cu13/bin");
        std::fs::create_dir_all(&bin).unwrap();
        assert_eq!(wheel_nvcc(dir.path()), None);
        std::fs::write(bin.join("nvcc"), "").unwrap();
        assert_eq!(wheel_nvcc(dir.path()), Some(bin.join("nvcc")));
    }
}
