//! Backends: how a candidate is built for a device and what the device's roofline is.
//! `backend`: the one interface every backend implements and their registry; `c`: C on CPU;
//! `python`: Triton and Pallas modules staged; `triton`: Triton compiled ahead of time for a
//! named GPU; `cuda`: nvcc discovery and builds for a named GPU (no device needed for either);
//! `hw`: the measured roofline.

pub mod backend;
pub mod c;
pub mod cuda;
pub mod hw;
pub mod python;
pub mod triton;

/// One compiler or policy message tied to a place in the source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    /// Source file, relative to the solution.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: u32,
    /// 1-based column (0 when unknown).
    pub column: u32,
    /// `error`, `warning`, `note` or `fatal error`.
    pub severity: String,
    /// The message.
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.severity, self.message
        )
    }
}
