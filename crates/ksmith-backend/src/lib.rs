//! Backends: how a candidate is built for a device and what the device's roofline is.
//! Only C on CPU exists so far (`c`); `hw` measures the machine.

pub mod c;
pub mod hw;

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
