//! Code features for the MAP-Elites archive and the simulator's notion of "near": computed
//! from a C source by counting, not by parsing (cheap, and good enough to tell programs apart).
//!
//! - `threads`: uses OpenMP or pthreads (0/1);
//! - `vector`: widest explicit SIMD: 0 none, 1 `#pragma omp simd`/vector attributes or 128-bit
//!   intrinsics (`_mm_`), 2 AVX (`_mm256_`), 3 AVX-512 (`_mm512_`);
//! - `nest`: deepest `for`/`while` nesting (a proxy for tiling depth), capped at 6;
//! - `loops`: number of loops, bucketed 0-2, 3-5, 6-9, 10+ (0..3);
//! - `length`: code length bucket, log2 of non-blank lines over 16, capped at 5.

use serde::{Deserialize, Serialize};

/// Features of one program.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Features {
    /// Uses threads (OpenMP, pthreads).
    pub threads: u8,
    /// Widest explicit SIMD (0..=3).
    pub vector: u8,
    /// Deepest loop nesting (0..=6).
    pub nest: u8,
    /// Loop-count bucket (0..=3).
    pub loops: u8,
    /// Length bucket (0..=5).
    pub length: u8,
}

impl Features {
    /// Features of a C source.
    pub fn of_source(src: &str) -> Features {
        let code = strip_comments(src);
        let threads = u8::from(code.contains("#pragma omp parallel") || code.contains("pthread_"));
        let vector = if code.contains("_mm512_") {
            3
        } else if code.contains("_mm256_") {
            2
        } else if code.contains("_mm_") || code.contains("omp simd") || code.contains("vector_size")
        {
            1
        } else {
            0
        };
        // Preprocessor lines (`#pragma omp parallel for`) are not loops.
        let body: String = code
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let (nest, loops) = loop_shape(&body);
        let lines = code.lines().filter(|l| !l.trim().is_empty()).count();
        let length = ((lines / 16).max(1) as f64).log2().floor().min(5.0) as u8;
        let loops = match loops {
            0..=2 => 0,
            3..=5 => 1,
            6..=9 => 2,
            _ => 3,
        };
        Features {
            threads,
            vector,
            nest: nest.min(6),
            loops,
            length,
        }
    }

    /// L1 distance, each feature scaled to [0, 1].
    pub fn distance(&self, o: &Features) -> f64 {
        let d = |a: u8, b: u8, max: f64| (f64::from(a) - f64::from(b)).abs() / max;
        d(self.threads, o.threads, 1.0)
            + d(self.vector, o.vector, 3.0)
            + d(self.nest, o.nest, 6.0)
            + d(self.loops, o.loops, 3.0)
            + d(self.length, o.length, 5.0)
    }
}

fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    loop {
        let next = match (rest.find("/*"), rest.find("//")) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(b), Some(l)) => b.min(l),
            (Some(b), None) => b,
            (None, Some(l)) => l,
        };
        out.push_str(&rest[..next]);
        let r = &rest[next..];
        rest = if let Some(body) = r.strip_prefix("/*") {
            out.push(' ');
            body.find("*/").map_or("", |i| &body[i + 2..])
        } else {
            r.find('\n').map_or("", |i| &r[i..])
        };
    }
}

/// (deepest nesting, loop count), tracking braces: a loop's depth is the number of loop
/// bodies open where it starts.
fn loop_shape(code: &str) -> (u8, usize) {
    let bytes = code.as_bytes();
    let mut open: Vec<bool> = Vec::new(); // per open brace: is it a loop body
    let mut pending_loops = 0usize; // loops seen whose body brace has not opened yet
    let (mut deepest, mut count) = (0usize, 0usize);
    let mut parens = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let kw = |k: &[u8]| {
            bytes[i..].starts_with(k)
                && bytes
                    .get(i + k.len())
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        };
        match bytes[i] {
            _ if word_start && (kw(b"for") || kw(b"while")) => {
                count += 1;
                let depth = open.iter().filter(|l| **l).count() + pending_loops + 1;
                deepest = deepest.max(depth);
                pending_loops += 1;
            }
            b'(' => parens += 1,
            b')' => parens = parens.saturating_sub(1),
            b'{' => {
                open.push(pending_loops > 0);
                pending_loops = pending_loops.saturating_sub(1);
            }
            b'}' => {
                open.pop();
            }
            // A braceless loop body's statement ends every loop waiting for a body.
            b';' if parens == 0 => pending_loops = 0,
            _ => {}
        }
        i += 1;
    }
    (deepest.min(255) as u8, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_naive_from_tuned() {
        let naive = "void f(const float* a, float* b, int64_t n) {\n for (int64_t i = 0; i < n; i++) b[i] = a[i];\n}\n";
        let fast = "#include <immintrin.h>\nvoid f(const float* a, float* b, int64_t n) {\n#pragma omp parallel for\n for (int64_t i = 0; i < n; i += 64) {\n  for (int64_t j = i; j < i + 64; j += 8) {\n   _mm256_storeu_ps(b + j, _mm256_loadu_ps(a + j));\n  }\n }\n}\n// for while _mm512_ in a comment\n";
        let a = Features::of_source(naive);
        let b = Features::of_source(fast);
        assert_eq!((a.threads, a.vector, a.nest), (0, 0, 1));
        assert_eq!((b.threads, b.vector, b.nest), (1, 2, 2));
        assert!(a.distance(&b) > 1.0);
        assert_eq!(a.distance(&a), 0.0);
    }
}
