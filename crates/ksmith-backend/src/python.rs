//! Triton and Pallas solutions: Python modules staged for the runner (no native build).
//! Their static policy runs in the trusted harness process on the parsed AST.

use ksmith_task::Solution;
use std::path::{Path, PathBuf};

/// Writes the solution's sources under `cache_dir/py-<hash>/` (once) and returns the path of
/// its first source, the module the runner imports.
pub fn stage(solution: &Solution, cache_dir: &Path) -> std::io::Result<PathBuf> {
    let dir = cache_dir.join(format!(
        "py-{}",
        &solution.content_hash[..16.min(solution.content_hash.len())]
    ));
    for (name, text) in &solution.sources {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, text)?;
    }
    let first = solution
        .sources
        .first()
        .map(|(n, _)| n.as_str())
        .unwrap_or("kernel.py");
    Ok(dir.join(first))
}

/// A Python backend (Triton or Pallas): the module is staged and imported by the runner; its
/// policy runs in the trusted process on the parsed source.
pub struct PythonBackend {
    language: ksmith_task::Language,
}

/// Triton kernels with a destination-passing host function.
pub static TRITON: PythonBackend = PythonBackend {
    language: ksmith_task::Language::Triton,
};

/// Pallas kernels behind an entry that calls `pl.pallas_call`.
pub static PALLAS: PythonBackend = PythonBackend {
    language: ksmith_task::Language::Pallas,
};

impl crate::backend::Backend for PythonBackend {
    fn language(&self) -> ksmith_task::Language {
        self.language
    }

    fn device(&self) -> crate::backend::Device {
        crate::backend::Device::Gpu
    }

    fn source_policy(&self, _solution: &Solution) -> crate::backend::SourcePolicy {
        crate::backend::SourcePolicy::Trusted
    }

    fn requirement(&self) -> Option<crate::backend::Requirement> {
        (self.language == ksmith_task::Language::Triton).then_some(
            crate::backend::Requirement::Module {
                module: "triton",
                file: "requirements-triton.txt",
            },
        )
    }

    fn workloads(
        &self,
        task: &ksmith_task::Task,
        accelerator: bool,
    ) -> Result<ksmith_task::Task, crate::backend::Unavailable> {
        use ksmith_task::WorkloadSet;
        if accelerator {
            return Ok(task
                .for_set(WorkloadSet::Gpu)
                .unwrap_or_else(|| task.clone()));
        }
        task.for_set(WorkloadSet::Interpret).ok_or_else(|| {
            crate::backend::Unavailable::NoWorkloads(format!(
                "{} candidates run in the interpreter on this CPU, which needs small workloads: add [[workloads]] with set = \"interpret\"",
                self.language.name()
            ))
        })
    }

    fn build(
        &self,
        ctx: &crate::backend::BuildContext<'_>,
        task: &ksmith_task::Task,
        solution: &Solution,
    ) -> Result<Result<crate::backend::Product, crate::c::BuildFailure>, crate::c::BackendError>
    {
        let module =
            stage(solution, ctx.cache_dir).map_err(|source| crate::c::BackendError::Io {
                path: ctx.cache_dir.to_path_buf(),
                source,
            })?;
        let staged = crate::backend::Product {
            kind: crate::backend::ProductKind::Module,
            command: vec![format!("python: import {}", module.display())],
            path: module,
            cached: true,
            seconds: 0.0,
            log: String::new(),
            diagnostics: Vec::new(),
            ptxas: Vec::new(),
        };
        if self.language != ksmith_task::Language::Triton {
            return Ok(Ok(staged));
        }
        // Triton's kernels compiled ahead of time for the target, in the build sandbox (the
        // candidate's host code runs there once, on stand-ins): a kernel that does not compile
        // is the build's failure, wherever it would run.
        let target = ctx.gpu_target.unwrap_or(crate::cuda::GpuTarget::DEFAULT);
        let req = crate::triton::AotRequest {
            python: &ctx.python.python,
            harness_dir: &ctx.python.harness_dir,
            read: ctx.python.read.clone(),
            target,
            module: &staged.path,
            entry: &solution.entry_point,
            workload: crate::triton::workload_of(task),
        };
        let what = format!("triton: compile for {target} ahead of time");
        Ok(
            match crate::triton::compile(&req, solution, ctx.cache_dir)? {
                crate::triton::AotOutcome::Built(b) => Ok(crate::backend::Product {
                    cached: b.cached,
                    seconds: b.seconds,
                    command: vec![what],
                    log: format!("triton {}\n{}", b.triton, b.log),
                    ptxas: b.facts,
                    ..staged
                }),
                crate::triton::AotOutcome::Failed(mut f) => {
                    f.command = vec![what];
                    Err(f)
                }
                crate::triton::AotOutcome::Skipped(why, detail) => Ok(crate::backend::Product {
                    cached: false,
                    command: vec![what],
                    log: format!("not compiled ahead of time ({why:?}): {detail}\n"),
                    ..staged
                }),
            },
        )
    }

    fn runner_address_space(&self) -> u64 {
        // The interpreters (JAX/XLA, Triton) map far more address space than a C kernel.
        32 << 30
    }

    fn syntax(&self) -> crate::backend::Syntax {
        crate::backend::Syntax::Python
    }

    fn prompt_facts(&self, task: &ksmith_task::Task, entry: &str) -> crate::backend::PromptFacts {
        crate::backend::PromptFacts {
            language: self.language.name(),
            device: "GPU (interpreter on a CPU)",
            fence: "python",
            signature: crate::backend::python_signature(task, entry),
        }
    }

    fn binding(&self) -> crate::backend::Binding {
        if self.language == ksmith_task::Language::Triton {
            crate::backend::Binding::Triton
        } else {
            crate::backend::Binding::Pallas
        }
    }
}
