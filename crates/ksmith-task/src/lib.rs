//! Task and solution definitions: parsing, static validation and content hashing.
//!
//! A task is a directory holding `task.toml` and `reference.py` (see docs/task-format.md).
//! Parsing never stops at the first problem: every problem is collected as a [`Problem`]
//! naming the file, the field and what is wrong, so `ksmith validate` can report them all.

mod component;
mod dtype;
pub mod escape;
pub mod flags;
mod formula;
mod solution;
pub mod suggest;
mod task;

pub use component::{is_safe_component, safe_component, MAX_COMPONENT_LEN};
pub use dtype::DType;
pub use flags::{check_flag, check_flags, FlagClass};
pub use formula::{Formula, FormulaError};
pub use solution::{
    is_safe_source_path, Language, Solution, Tunable, LANGUAGES, MAX_SOURCES, MAX_SOURCE_BYTES,
    SOLUTION_FILE,
};
pub use task::TASK_FILE as TASK_FILE_NAME;
pub use task::{
    set_content_hash, Axis, AxisKind, Distribution, OpClass, OutputSpec, ReferenceSpec, Task,
    TensorSpec, Workload, WorkloadSet,
};

use std::fmt;
use std::path::PathBuf;

/// One problem found in a task or solution: `file: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The file the problem is in.
    pub file: PathBuf,
    /// Dotted path of the offending field (`workloads[1].axes.N`), or `-` for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// Builds a problem from its three parts.
    pub fn new(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}

/// Every problem found while loading a task or solution.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Hex blake3 digest of a byte string; the content hash used across the project.
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Hashes a sequence of fields unambiguously: each is length-prefixed, so two different
/// sequences never feed the hash the same bytes, whatever a field holds (separator bytes, NUL,
/// text that looks like the next field). Every key that identifies code or settings is built
/// with it: a source that imitated a field boundary once made a wrong kernel reuse a correct
/// twin's build and verdicts.
#[derive(Clone)]
pub struct FieldHasher(blake3::Hasher);

impl FieldHasher {
    /// A hasher for keys of one kind (`domain` keeps different kinds of key apart).
    pub fn new(domain: &str) -> FieldHasher {
        let mut h = FieldHasher(blake3::Hasher::new());
        h.field(domain);
        h
    }

    /// Adds one field.
    pub fn field(&mut self, bytes: impl AsRef<[u8]>) -> &mut FieldHasher {
        let b = bytes.as_ref();
        self.0.update(&(b.len() as u64).to_le_bytes());
        self.0.update(b);
        self
    }

    /// Adds a list of fields, with its length first.
    pub fn list<T: AsRef<[u8]>>(&mut self, items: &[T]) -> &mut FieldHasher {
        self.field((items.len() as u64).to_le_bytes());
        for i in items {
            self.field(i);
        }
        self
    }

    /// The hex digest.
    pub fn hex(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}
