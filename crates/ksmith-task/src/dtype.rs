//! Element types and their C ABI spelling.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Element type of a tensor or scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    Float32,
    /// IEEE binary64.
    Float64,
    /// IEEE binary16.
    Float16,
    /// bfloat16, passed to C as raw `uint16_t` bits.
    Bfloat16,
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    Uint8,
    /// Boolean stored as one byte.
    Bool,
}

impl DType {
    /// All dtypes, for error messages.
    pub const ALL: [DType; 10] = [
        DType::Float32,
        DType::Float64,
        DType::Float16,
        DType::Bfloat16,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Uint8,
        DType::Bool,
    ];

    /// Name as written in task files.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Float16 => "float16",
            DType::Bfloat16 => "bfloat16",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// C type used by the kernel ABI.
    pub fn c_type(self) -> &'static str {
        match self {
            DType::Float32 => "float",
            DType::Float64 => "double",
            DType::Float16 => "_Float16",
            DType::Bfloat16 => "uint16_t",
            DType::Int8 => "int8_t",
            DType::Int16 => "int16_t",
            DType::Int32 => "int32_t",
            DType::Int64 => "int64_t",
            DType::Uint8 | DType::Bool => "uint8_t",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::Float64 | DType::Int64 => 8,
            DType::Float32 | DType::Int32 => 4,
            DType::Float16 | DType::Bfloat16 | DType::Int16 => 2,
            DType::Int8 | DType::Uint8 | DType::Bool => 1,
        }
    }

    /// Whether the type is floating point (tolerances apply, NaN poisoning possible).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float32 | DType::Float64 | DType::Float16 | DType::Bfloat16
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = DType::ALL.iter().map(|d| d.name()).collect();
                format!("unknown dtype {}", crate::suggest::expected(s, &names))
            })
    }
}
