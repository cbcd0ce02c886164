//! "Did you mean": the valid name nearest a misspelt one (`flaot32`, `--solution fastest`), so an
//! error says what to type instead of only that something was wrong.

/// The name in `names` closest to `given`, when it is close enough to be a likely misspelling
/// (case ignored; Jaro-Winkler similarity at least 0.8, or one edit on a short name).
pub fn closest<'a>(given: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let g = given.to_lowercase();
    names
        .into_iter()
        .map(|n| {
            let l = n.to_lowercase();
            let near =
                strsim::jaro_winkler(&g, &l) >= 0.8 || strsim::damerau_levenshtein(&g, &l) <= 1;
            (n, strsim::jaro_winkler(&g, &l), near)
        })
        .filter(|(_, _, near)| *near)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _, _)| n)
}

/// `` `given`: did you mean `x`? (expected one of a, b, c) `` — or without the question when
/// nothing is near: the tail of an "unknown NAME" message.
pub fn expected(given: &str, names: &[&str]) -> String {
    match closest(given, names.iter().copied()) {
        Some(near) => format!(
            "`{given}`: did you mean `{near}`? (expected one of {})",
            names.join(", ")
        ),
        None => format!("`{given}` (expected one of {})", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_and_far_ones_are_not() {
        let dtypes = ["float32", "float64", "float16", "bfloat16", "int8"];
        assert_eq!(closest("flaot32", dtypes), Some("float32"));
        assert_eq!(closest("Float64", dtypes), Some("float64"));
        assert_eq!(closest("fastest", ["fast", "naive"]), Some("fast"));
        assert_eq!(closest("rtl", ["c", "cuda", "triton", "pallas"]), None);
        assert_eq!(
            closest("cud", ["c", "cuda", "triton", "pallas"]),
            Some("cuda")
        );
        assert_eq!(
            expected("flaot32", &dtypes),
            "`flaot32`: did you mean `float32`? (expected one of float32, float64, float16, bfloat16, int8)"
        );
        assert_eq!(
            expected("rtl", &["c", "cuda"]),
            "`rtl` (expected one of c, cuda)"
        );
    }
}
