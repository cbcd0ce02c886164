//! CUDA solutions: nvcc discovery. Without nvcc the backend is unavailable on the machine,
//! which is reported as such (never as a pass or a compile error).

use crate::c::{build_with, BackendError, BuildFailure, Built, PolicyViolation, Toolchain};
use ksmith_task::Solution;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds a CUDA solution with nvcc into a shared library (`-Xptxas -v` for the build facts).
pub fn build(
    nvcc: &Path,
    solution: &Solution,
    cache_dir: &Path,
) -> Result<Result<Built, BuildFailure>, BackendError> {
    let version = Command::new(nvcc)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    let mut flags: Vec<String> = ["-O3", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    flags.push(format!("-arch={}", arch()));
    flags.extend(solution.flags.iter().cloned());
    let tool = Toolchain {
        command: nvcc.display().to_string(),
        version,
        flags,
        header: None,
        parse: parse_diagnostics,
    };
    build_with(&tool, solution, cache_dir)
}

/// The nvcc to use: `$NVCC`, else `nvcc` on PATH, else `/usr/local/cuda/bin/nvcc`.
pub fn nvcc() -> Option<PathBuf> {
    let candidates = std::env::var_os("NVCC")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            PathBuf::from("nvcc"),
            PathBuf::from("/usr/local/cuda/bin/nvcc"),
        ]);
    candidates.into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
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

/// `-arch` for the first GPU (`sm_90a` on Hopper, where the `a` features need it), from
/// `nvidia-smi`; `sm_80` when it cannot be asked.
pub fn arch() -> String {
    let cap = Command::new("nvidia-smi")
        .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().replace('.', ""))
        })
        .unwrap_or_else(|| "80".into());
    if cap == "90" {
        "sm_90a".into()
    } else {
        format!("sm_{cap}")
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

/// nvcc's diagnostics: `kernel.cu(12): error: identifier "x" is undefined`.
pub fn parse_diagnostics(log: &str) -> Vec<crate::Diagnostic> {
    log.lines()
        .filter_map(|l| {
            let (file, rest) = l.split_once('(')?;
            let (line, rest) = rest.split_once("): ")?;
            let (severity, message) = rest.split_once(": ")?;
            let severity = severity.trim();
            if !["error", "warning", "remark", "catastrophic error"].contains(&severity) {
                return None;
            }
            Some(crate::Diagnostic {
                file: file.trim().to_string(),
                line: line.parse().ok()?,
                column: 0,
                severity: severity.to_string(),
                message: message.trim().to_string(),
            })
        })
        .collect()
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

    fn toolchain(&self) -> Result<(), crate::backend::Unavailable> {
        nvcc().map(|_| ()).ok_or_else(|| {
            crate::backend::Unavailable::Tool(
                "nvcc not found (set NVCC or put nvcc on PATH)".into(),
            )
        })
    }

    fn workloads(
        &self,
        task: &ksmith_task::Task,
        accelerator: bool,
    ) -> Result<ksmith_task::Task, crate::backend::Unavailable> {
        if !accelerator {
            return Err(crate::backend::Unavailable::NoDevice(
                "no GPU visible to the harness".into(),
            ));
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
        let nvcc = nvcc().ok_or_else(|| BackendError::NoCompiler {
            command: "nvcc".into(),
            detail: "not found (set NVCC or put nvcc on PATH)".into(),
        })?;
        Ok(build(&nvcc, solution, ctx.cache_dir)?.map(|b| {
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
}
