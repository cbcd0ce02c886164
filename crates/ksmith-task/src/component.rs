//! Names that become one path component (a file or directory name) somewhere on the host.
//!
//! Task, definition and solution names come from files a candidate's author controls, and some
//! of them end up in paths (`ksmith export` writes `solutions/<task>/<solution>.json`). A name
//! like `../../../../tmp/x` must never leave the directory it is written under, and two distinct
//! names must never land on the same file.

/// Longest name (in bytes) kept as it is; longer ones are cut and given a hash suffix.
pub const MAX_COMPONENT_LEN: usize = 100;

/// Hex digits of the hash suffix [`safe_component`] adds (64 bits: distinct names do not
/// collide by accident, and forcing a collision is out of reach).
const SUFFIX_HEX: usize = 16;

/// Whether `name` is usable as a path component as it is: 1 to [`MAX_COMPONENT_LEN`] bytes of
/// `[A-Za-z0-9._-]`, not starting with `.` (so neither `.`, `..` nor a hidden file). The rule
/// that `name` fields in `solution.toml` must follow.
pub fn is_safe_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_COMPONENT_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `name` made safe to use as one path component (a file or directory name), injectively.
///
/// A name that [`is_safe_component`] accepts comes back unchanged, unless it already ends like
/// a suffix this function adds (`_` and 16 hex digits). Any other name is mapped: every byte
/// outside `[A-Za-z0-9._-]` and a leading `.` become `_`, the result is cut to fit
/// [`MAX_COMPONENT_LEN`], and `_` plus 16 hex digits of the blake3 hash of the original name is
/// appended. So the result is never empty, `.` or `..`, never contains `/` or `\0`, is at most
/// [`MAX_COMPONENT_LEN`] bytes, and distinct names give distinct results (unchanged names never
/// end in a suffix; suffixed ones differ in the hash of the original). On a case-insensitive
/// file system `A` and `a` still meet; the names we write are not expected to differ only in
/// case.
pub fn safe_component(name: &str) -> String {
    if is_safe_component(name) && !looks_suffixed(name) {
        return name.to_string();
    }
    let mut mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if mapped.starts_with('.') {
        mapped.replace_range(..1, "_");
    }
    mapped.truncate(MAX_COMPONENT_LEN - SUFFIX_HEX - 1);
    let hash = crate::content_hash(name.as_bytes());
    format!("{mapped}_{}", &hash[..SUFFIX_HEX])
}

/// Whether `name` ends with `_` and [`SUFFIX_HEX`] lower-case hex digits.
fn looks_suffixed(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > SUFFIX_HEX
        && b[b.len() - SUFFIX_HEX - 1] == b'_'
        && b[b.len() - SUFFIX_HEX..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_are_kept() {
        for n in [
            "fast",
            "softmax_fast",
            "vector_add-3-tuned",
            "v1.2",
            "A-b_c.d",
        ] {
            assert!(is_safe_component(n), "{n}");
            assert_eq!(safe_component(n), n);
        }
    }

    #[test]
    fn unsafe_names_are_mapped_and_stay_one_component() {
        for n in [
            "../../../../tmp/x",
            "..",
            ".",
            "",
            ".hidden",
            "a/b",
            "a\\b",
            "a\0b",
            "nul\n",
            "m[BM=64,BN=32]",
            "ünïcode",
            &"x".repeat(300),
        ] {
            assert!(!is_safe_component(n), "{n:?}");
            let s = safe_component(n);
            assert!(is_safe_component(&s), "{n:?} -> {s:?}");
            assert!(!s.contains('/') && s != "." && s != "..", "{s}");
            assert!(s.len() <= MAX_COMPONENT_LEN);
        }
        assert!(safe_component("../../x").starts_with("_._.._x_"));
    }

    #[test]
    fn distinct_names_never_collide() {
        let mut names: Vec<String> = ["a/b", "a_b", "a?b", "a b", ".a", "_a"]
            .map(String::from)
            .to_vec();
        names.push("x".repeat(200));
        names.push(format!("{}y", "x".repeat(199)));
        let mapped: std::collections::BTreeSet<String> =
            names.iter().map(|n| safe_component(n)).collect();
        assert_eq!(mapped.len(), names.len());
        // A safe name shaped like a mapped one is suffixed too, so it cannot take its place.
        let forged = safe_component("a/b");
        assert_ne!(safe_component(&forged), forged);
    }
}
