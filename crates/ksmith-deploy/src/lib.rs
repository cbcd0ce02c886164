//! Deploy: the best judged kernel of each task as an installable Python package, callable from
//! `jax.jit` code. C kernels become XLA FFI targets on the CPU platform and CUDA kernels on the
//! CUDA platform (handlers generated from the task's signature, built on the user's machine);
//! Pallas kernels are called directly and Triton kernels through jax-triton. Where a kernel
//! cannot run, the package falls back to the task's JAX reference (or the user's function).

mod handler;
mod package;
mod select;
mod verify;

pub use handler::{source as handler_source, Device};
pub use package::{write_package, Written};
pub use select::{choose_best, choose_eval, Choice};
pub use verify::{check_c_kernel, check_choice, policy_summary, verify_package, VerifySettings};

use std::path::PathBuf;

/// Why an export could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] ksmith_store::StoreError),
    /// No evaluation of the task passed on this machine.
    #[error("task `{task}`: no PASSED evaluation of the task as it is now on this machine (environment fingerprint {fingerprint}){hint}")]
    NoPassed {
        /// Task name.
        task: String,
        /// This machine's environment fingerprint.
        fingerprint: String,
        /// What to do about it.
        hint: String,
    },
    /// A named evaluation cannot be exported.
    #[error("evaluation {id}: {message}")]
    Eval {
        /// Evaluation id.
        id: i64,
        /// What is wrong.
        message: String,
    },
    /// A name that cannot become a Python identifier.
    #[error("{what} `{name}` is not a Python identifier (letters, digits and `_`, not starting with a digit, not a keyword)")]
    Name {
        /// Which name.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The output directory cannot be used.
    #[error("{path}: {message}")]
    Out {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// File I/O failed.
    #[error("{path}: {source}")]
    Io {
        /// Path involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// A template failed to render (a bug, not an input problem).
    #[error("template {name}: {message}")]
    Template {
        /// Template name.
        name: &'static str,
        /// Renderer message.
        message: String,
    },
}

/// How the package reaches a kernel from JAX (each backend names its own).
pub use ksmith_backend::backend::Binding;

const PY_KEYWORDS: [&str; 38] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case", "type",
];

/// Checks that `name` can be a Python module or attribute name (ASCII identifier, no keyword).
pub fn python_identifier(what: &'static str, name: &str) -> Result<(), DeployError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !PY_KEYWORDS.contains(&name);
    if ok {
        Ok(())
    } else {
        Err(DeployError::Name {
            what,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_identifiers_are_checked() {
        for ok in ["softmax", "_x", "rms_norm2"] {
            python_identifier("task", ok).unwrap();
        }
        for bad in ["2mm", "a-b", "", "class", "import", "naïve", "a b"] {
            let e = python_identifier("task", bad).unwrap_err().to_string();
            assert!(e.contains("not a Python identifier"), "{bad}: {e}");
        }
    }

    #[test]
    fn bindings_follow_the_language_and_name_their_backend() {
        assert_eq!(Binding::of(ksmith_task::Language::C), Binding::CpuFfi);
        assert_eq!(Binding::of(ksmith_task::Language::Cuda).backend(), "gpu");
        assert_eq!(Binding::CpuFfi.backend(), "cpu");
        for b in [
            Binding::CpuFfi,
            Binding::CudaFfi,
            Binding::Pallas,
            Binding::Triton,
        ] {
            assert_eq!(
                serde_json::to_value(b).unwrap(),
                serde_json::json!(b.name())
            );
        }
    }
}
