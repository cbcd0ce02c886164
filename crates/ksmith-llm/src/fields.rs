//! Field-by-field TOML reading, so every error names the exact field.
//!
//! Deserializing a whole file with serde reports a line and column but not the
//! key path, and unknown keys are easy to miss; reading field by field lets
//! messages say `providers.gemini.timeout_s: expected ...`.

use serde::de::DeserializeOwned;
use toml::Table;

/// `path.key`, or just `key` at the top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Reject keys outside `allowed`, listing the allowed ones.
pub(crate) fn check_keys(table: &Table, allowed: &[&str], path: &str) -> Result<(), String> {
    for key in table.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(format!(
                "{}: unknown field; expected one of: {}",
                join(path, key),
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

/// Read an optional field as `T`.
pub(crate) fn get<T: DeserializeOwned>(
    table: &Table,
    key: &str,
    path: &str,
) -> Result<Option<T>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(value) => value
            .clone()
            .try_into::<T>()
            .map(Some)
            .map_err(|e| format!("{}: {}", join(path, key), e.to_string().trim())),
    }
}

/// Read an optional sub-table.
pub(crate) fn table<'a>(
    table: &'a Table,
    key: &str,
    path: &str,
) -> Result<Option<&'a Table>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(other) => Err(format!(
            "{}: expected a table, found {}",
            join(path, key),
            other.type_str()
        )),
    }
}

/// Read an optional finite number that must be positive, or also zero with `allow_zero`.
pub(crate) fn number(
    t: &Table,
    key: &str,
    path: &str,
    allow_zero: bool,
) -> Result<Option<f64>, String> {
    let Some(v) = get::<f64>(t, key, path)? else {
        return Ok(None);
    };
    let ok = v.is_finite() && (v > 0.0 || (allow_zero && v == 0.0));
    if !ok {
        let want = if allow_zero {
            "zero or more"
        } else {
            "more than zero"
        };
        return Err(format!("{}: must be {want}, got {v}", join(path, key)));
    }
    Ok(Some(v))
}
