//! Real inputs from a safetensors file (what the trusted harness's `prepare` writes: one tensor
//! `in.NAME` per input, bfloat16 as raw `U16` bits, bool as `U8`).

use ksmith_task::{DType, Task};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// One input found in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Loaded {
    /// A tensor: its bytes are at `offset..offset + bytes` of the file.
    Tensor { offset: u64, bytes: u64 },
    /// A scalar: its value as a C argument expression.
    Scalar(String),
}

fn accepts(dtype: DType, st: &str) -> bool {
    match dtype {
        DType::Float32 => st == "F32",
        DType::Float64 => st == "F64",
        DType::Float16 => st == "F16",
        DType::Bfloat16 => st == "U16" || st == "BF16",
        DType::Int8 => st == "I8",
        DType::Int16 => st == "I16",
        DType::Int32 => st == "I32",
        DType::Int64 => st == "I64",
        DType::Uint8 => st == "U8",
        DType::Bool => st == "U8" || st == "BOOL",
    }
}

fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let mant = (bits & 0x3ff) as f64;
    sign * match exp {
        0 => mant * 2f64.powi(-24),
        31 => f64::INFINITY,
        e => (1.0 + mant / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The C argument for a scalar stored as `raw` bytes.
fn scalar_literal(dtype: DType, raw: &[u8]) -> Option<String> {
    let le = |n: usize| -> Option<[u8; 8]> {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(raw.get(..n)?);
        Some(b)
    };
    let v = match dtype {
        DType::Float32 => f32::from_le_bytes(le(4)?[..4].try_into().ok()?) as f64,
        DType::Float64 => f64::from_le_bytes(le(8)?),
        DType::Float16 => f16_to_f64(u16::from_le_bytes(le(2)?[..2].try_into().ok()?)),
        DType::Bfloat16 => {
            let bits = u16::from_le_bytes(le(2)?[..2].try_into().ok()?);
            return Some(format!("(uint16_t){bits}"));
        }
        DType::Int8 => raw.first().map(|&b| b as i8 as f64)?,
        DType::Int16 => i16::from_le_bytes(le(2)?[..2].try_into().ok()?) as f64,
        DType::Int32 => i32::from_le_bytes(le(4)?[..4].try_into().ok()?) as f64,
        DType::Int64 => return Some(format!("(int64_t)INT64_C({})", i64::from_le_bytes(le(8)?))),
        DType::Uint8 | DType::Bool => raw.first().map(|&b| b as f64)?,
    };
    Some(crate::driver::scalar_arg(dtype, v))
}

/// Reads the header of `path` and matches it against the task's inputs for workload `w`.
/// Returns what was found and notes on what was not (those inputs are drawn instead).
pub(crate) fn read(
    path: &Path,
    task: &Task,
    w: usize,
) -> Result<(HashMap<String, Loaded>, Vec<String>), String> {
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(|e| e.to_string())?;
    let n = u64::from_le_bytes(n);
    if n > 100 << 20 || 8 + n > len {
        return Err(format!("not a safetensors file (header length {n})"));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(|e| e.to_string())?;
    let header: serde_json::Value =
        serde_json::from_slice(&header).map_err(|e| format!("bad safetensors header: {e}"))?;
    let base = 8 + n;
    let axes = &task.workloads[w].axes;
    let mut found = HashMap::new();
    let mut notes = Vec::new();
    for i in &task.inputs {
        let Some(t) = header
            .get(format!("in.{}", i.name))
            .or_else(|| header.get(&i.name))
        else {
            notes.push(format!(
                "input `{}` is not in {}; drawn instead",
                i.name,
                path.display()
            ));
            continue;
        };
        let st = t["dtype"].as_str().unwrap_or("");
        let shape: Vec<i64> = t["shape"]
            .as_array()
            .map(|a| a.iter().filter_map(|d| d.as_i64()).collect())
            .unwrap_or_default();
        let offs: Vec<u64> = t["data_offsets"]
            .as_array()
            .map(|a| a.iter().filter_map(|d| d.as_u64()).collect())
            .unwrap_or_default();
        let want = i.dims(axes);
        let numel: i64 = want.iter().product();
        let bytes = numel.max(0) as u64 * i.dtype.size() as u64;
        let ok = accepts(i.dtype, st)
            && shape == want
            && offs.len() == 2
            && offs[1] >= offs[0]
            && offs[1] - offs[0] == bytes
            && base + offs[1] <= len;
        if !ok {
            notes.push(format!(
                "input `{}` in {} is {st} {shape:?}, the task wants {} {want:?}; drawn instead",
                i.name,
                path.display(),
                i.dtype
            ));
            continue;
        }
        let offset = base + offs[0];
        if i.is_scalar() {
            let mut raw = vec![0u8; bytes as usize];
            use std::io::{Seek, SeekFrom};
            let lit = f
                .seek(SeekFrom::Start(offset))
                .and_then(|_| f.read_exact(&mut raw))
                .ok()
                .and_then(|_| scalar_literal(i.dtype, &raw));
            match lit {
                Some(l) => {
                    found.insert(i.name.clone(), Loaded::Scalar(l));
                }
                None => notes.push(format!(
                    "scalar `{}` could not be read; drawn instead",
                    i.name
                )),
            }
        } else {
            found.insert(i.name.clone(), Loaded::Tensor { offset, bytes });
        }
    }
    Ok((found, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_bits_decode() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(
            scalar_literal(DType::Int32, &7i32.to_le_bytes()).unwrap(),
            "(int32_t)INT64_C(7)"
        );
        assert_eq!(
            scalar_literal(DType::Float32, &0.5f32.to_le_bytes()).unwrap(),
            "(float)0.5"
        );
    }
}
