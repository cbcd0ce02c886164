//! One interface per backend: everything the pipeline knows about a solution language (its
//! policies, its build, where its kernels run and on which workloads, what its runner needs,
//! how its source is normalized, what prompts say about it, how it is deployed). The judge runs
//! one cascade over it; adding a backend (Metal, NKI, ROCm) is a module implementing
//! [`Backend`] and a line in [`BACKENDS`].

use crate::c::{BackendError, BuildFailure, Compiler, PolicyViolation};
use crate::cuda::PtxasFacts;
use crate::Diagnostic;
use ksmith_task::{Language, Solution, Task};
use std::path::{Path, PathBuf};

/// The kind of device a backend's kernels run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The host CPU.
    Cpu,
    /// An accelerator (a GPU), or its interpreter on a CPU.
    Gpu,
}

/// Where a backend's static source policy runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourcePolicy {
    /// Checked here: these are the violations (none: it passed).
    Checked(Vec<PolicyViolation>),
    /// Parsed and checked by the trusted harness process (Python sources: never imported here).
    Trusted,
}

/// How the runner takes the build product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductKind {
    /// A shared library it loads.
    Library,
    /// A Python module it imports.
    Module,
}

/// A candidate built (or staged) for the runner, with the build's facts.
#[derive(Debug, Clone)]
pub struct Product {
    /// Library or module.
    pub kind: ProductKind,
    /// The built file.
    pub path: PathBuf,
    /// Whether it came from the build cache.
    pub cached: bool,
    /// Wall seconds spent building (0 when cached).
    pub seconds: f64,
    /// The build command.
    pub command: Vec<String>,
    /// The build's output.
    pub log: String,
    /// Parsed warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// Per-kernel register, shared-memory and spill facts (CUDA).
    pub ptxas: Vec<PtxasFacts>,
}

/// What the managed Python environment offers a build.
#[derive(Debug, Clone, Default)]
pub struct PythonTools {
    /// The interpreter.
    pub python: PathBuf,
    /// The directory holding `ksmith_harness/`.
    pub harness_dir: PathBuf,
    /// Installation prefixes whose packages may hold a toolkit (nvcc's wheel).
    pub prefixes: Vec<PathBuf>,
    /// What a sandboxed Python must read: its installation and the harness.
    pub read: Vec<PathBuf>,
}

/// Something a backend needs installed in the managed Python environment before it builds
/// (installed from a pinned requirements file under `harness/` on first use).
#[derive(Debug, Clone, Copy)]
pub enum Requirement {
    /// A module its runner or its build imports.
    Module {
        /// The module.
        module: &'static str,
        /// The pinned requirements file.
        file: &'static str,
    },
    /// A tool found on the machine or in the environment's packages, as `present` tells.
    Tool {
        /// The tool, in words.
        what: &'static str,
        /// The pinned requirements file.
        file: &'static str,
        /// Whether it is there, given the environment's installation prefixes.
        present: fn(&[PathBuf]) -> bool,
    },
}

/// What a build needs from the machine.
pub struct BuildContext<'a> {
    /// The C compiler (the CPU backend's).
    pub compiler: &'a Compiler,
    /// The build cache directory.
    pub cache_dir: &'a Path,
    /// The managed Python environment's tools.
    pub python: &'a PythonTools,
    /// The GPU to build for (GPU backends; resolved by the caller).
    pub gpu_target: Option<crate::cuda::GpuTarget>,
}

/// Why a backend's kernels cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// A tool it needs is missing (the message says which and how to get it).
    Tool(String),
    /// It needs a device this machine does not show.
    NoDevice(String),
    /// The task has no workloads this backend can run here.
    NoWorkloads(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Tool(m) | Unavailable::NoDevice(m) | Unavailable::NoWorkloads(m) => {
                f.write_str(m)
            }
        }
    }
}

/// The comment and whitespace rules of a backend's source, for normalization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// C and C++: `//` and `/* */` comments, whitespace free except in preprocessor lines.
    CLike,
    /// Python: `#` comments, indentation is syntax.
    Python,
}

/// How an exported kernel is called from JAX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// A C kernel as an XLA FFI target on the CPU platform.
    CpuFfi,
    /// A CUDA kernel as an XLA FFI target on the CUDA platform.
    CudaFfi,
    /// A Pallas entry function, called directly (it is JAX code).
    Pallas,
    /// A Triton launcher whose launches are replayed through `jax_triton.triton_call`.
    Triton,
}

impl Binding {
    /// The binding of a solution language's backend.
    pub fn of(language: Language) -> Binding {
        for_language(language).binding()
    }

    /// The name in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Binding::CpuFfi => "cpu_ffi",
            Binding::CudaFfi => "cuda_ffi",
            Binding::Pallas => "pallas",
            Binding::Triton => "triton",
        }
    }

    /// The JAX backend (`jax.default_backend()`) the kernel runs on.
    pub fn backend(self) -> &'static str {
        match self {
            Binding::CpuFfi => "cpu",
            Binding::CudaFfi | Binding::Pallas | Binding::Triton => "gpu",
        }
    }
}

/// What prompts say about the backend for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptFacts {
    /// The language's display name.
    pub language: &'static str,
    /// The device the kernel is written for.
    pub device: &'static str,
    /// The code fence's language tag.
    pub fence: &'static str,
    /// The entry point's signature.
    pub signature: String,
}

/// Everything the pipeline needs to know about one solution language.
pub trait Backend: Send + Sync {
    /// The language it builds.
    fn language(&self) -> Language;

    /// The device its kernels run on.
    fn device(&self) -> Device;

    /// The static policy on the sources, or that the trusted process runs it.
    fn source_policy(&self, solution: &Solution) -> SourcePolicy;

    /// What it needs installed in the managed Python environment before it builds, if any.
    fn requirement(&self) -> Option<Requirement> {
        None
    }

    /// Whether its tools are here (checked, after [`Backend::requirement`], before the build).
    fn toolchain(&self, _python: &PythonTools) -> Result<(), Unavailable> {
        Ok(())
    }

    /// Whether its kernels can run on a machine without the device they are built for (in an
    /// interpreter); if not, they are built and reported "not run: no device".
    fn runs_without_device(&self) -> bool {
        true
    }

    /// The task restricted to the workloads its kernels run on here, given whether an
    /// accelerator is visible, or why they cannot run here.
    fn workloads(&self, task: &Task, accelerator: bool) -> Result<Task, Unavailable>;

    /// Builds (or stages) the candidate.
    fn build(
        &self,
        ctx: &BuildContext<'_>,
        task: &Task,
        solution: &Solution,
    ) -> Result<Result<Product, BuildFailure>, BackendError>;

    /// The policy on the built product (the C library's imports and instructions); a product
    /// the check cannot read is refused, never let through unchecked.
    fn product_policy(&self, _product: &Product) -> Vec<PolicyViolation> {
        Vec::new()
    }

    /// Whether the runner may start while the build runs, the product then copied into its
    /// private directory (a library, loaded from there).
    fn runner_starts_early(&self) -> bool {
        false
    }

    /// Address space the runner needs beyond the tensors (interpreters and GPU runtimes map
    /// large ranges).
    fn runner_address_space(&self) -> u64 {
        0
    }

    /// The comment and whitespace rules of its sources.
    fn syntax(&self) -> Syntax;

    /// What prompts say about it for `task`'s entry point `entry`.
    fn prompt_facts(&self, task: &Task, entry: &str) -> PromptFacts;

    /// How an exported kernel is called from JAX.
    fn binding(&self) -> Binding;
}

/// Every backend, one line each.
pub static BACKENDS: [&dyn Backend; 4] = [
    &crate::c::CBackend,
    &crate::cuda::CudaBackend,
    &crate::python::TRITON,
    &crate::python::PALLAS,
];

/// The backend of a solution language.
pub fn for_language(language: Language) -> &'static dyn Backend {
    BACKENDS
        .iter()
        .copied()
        .find(|b| b.language() == language)
        .expect("every language has a backend in BACKENDS")
}

/// The Python signature line for backends whose entry point is a Python function: inputs, then
/// preallocated outputs, then axes.
pub(crate) fn python_signature(task: &Task, entry: &str) -> String {
    let args: Vec<&str> = task
        .inputs
        .iter()
        .map(|i| i.name.as_str())
        .chain(task.outputs.iter().map(|o| o.tensor.name.as_str()))
        .chain(task.axes.iter().map(|a| a.name.as_str()))
        .collect();
    format!(
        "def {}({}): ...  # inputs, then preallocated outputs, then axes",
        entry,
        args.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_task::WorkloadSet;

    #[test]
    fn every_language_has_exactly_one_backend() {
        for name in ksmith_task::LANGUAGES {
            let l = Language::from_name(name).unwrap();
            let n = BACKENDS.iter().filter(|b| b.language() == l).count();
            assert_eq!(n, 1, "{name}");
            assert_eq!(for_language(l).language(), l);
        }
    }

    #[test]
    fn each_backend_runs_the_workloads_of_its_device() {
        let task = Task::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tasks/starter/softmax"
        )))
        .unwrap();
        let sets = |t: &Task| t.workloads.iter().map(|w| w.set).collect::<Vec<_>>();
        let c = for_language(Language::C).workloads(&task, false).unwrap();
        assert_eq!(c.workloads.len(), task.workloads.len());
        let interp = for_language(Language::Triton)
            .workloads(&task, false)
            .unwrap();
        assert!(sets(&interp).iter().all(|s| *s == WorkloadSet::Interpret));
        let gpu = for_language(Language::Pallas)
            .workloads(&task, true)
            .unwrap();
        assert!(sets(&gpu).iter().all(|s| *s == WorkloadSet::Gpu));
        // Built without a GPU, then reported not run.
        let cuda = for_language(Language::Cuda);
        assert_eq!(
            cuda.workloads(&task, false).unwrap().workloads.len(),
            task.workloads.len()
        );
        assert!(!cuda.runs_without_device());
        let mut cpu_only = task.clone();
        cpu_only.other_workloads.clear();
        assert!(matches!(
            for_language(Language::Pallas).workloads(&cpu_only, false),
            Err(Unavailable::NoWorkloads(_))
        ));
    }
}
