//! The compiler's vectorization report: flags that ask for it and a parser for its lines.

use crate::VecNote;
use regex::Regex;
use std::collections::HashSet;
use std::sync::OnceLock;

/// Most notes kept per profile.
pub(crate) const MAX_NOTES: usize = 64;

/// Which report format a compiler writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// gcc: `-fopt-info-vec-all` (`file:line:col: optimized|missed: ...`).
    Gcc,
    /// clang: `-Rpass*=loop-vectorize` remarks.
    Clang,
}

impl Flavor {
    /// From the compiler's `--version` line.
    pub fn of(version: &str) -> Flavor {
        if version.to_lowercase().contains("clang") {
            Flavor::Clang
        } else {
            Flavor::Gcc
        }
    }

    /// Flags that make the compiler report what it vectorized and what it did not.
    pub fn flags(self) -> Vec<String> {
        match self {
            Flavor::Gcc => vec!["-fopt-info-vec-all".into()],
            Flavor::Clang => vec![
                "-Rpass=loop-vectorize|slp-vectorizer".into(),
                "-Rpass-missed=loop-vectorize".into(),
                "-Rpass-analysis=loop-vectorize".into(),
            ],
        }
    }
}

/// The solution file a reported path refers to, if any (`kernel.c`, `./kernel.c` or
/// `/abs/build/dir/kernel.c` all name `kernel.c`).
pub(crate) fn own_file<'a>(path: &str, files: &'a [String]) -> Option<&'a str> {
    let p = path.trim().trim_start_matches("./");
    files
        .iter()
        .find(|f| {
            let f = f.trim_start_matches("./");
            p == f || p.ends_with(&format!("/{f}"))
        })
        .map(String::as_str)
}

/// Parses a build log into notes for the solution's own files (deduplicated, sorted by file and
/// line, at most [`MAX_NOTES`]).
pub(crate) fn parse(log: &str, flavor: Flavor, files: &[String]) -> Vec<VecNote> {
    static GCC: OnceLock<Regex> = OnceLock::new();
    static CLANG: OnceLock<Regex> = OnceLock::new();
    let gcc = GCC.get_or_init(|| {
        Regex::new(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:\d+:)? (?P<kind>optimized|missed): (?P<msg>.*)$")
            .expect("static regex")
    });
    let clang = CLANG.get_or_init(|| {
        Regex::new(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:\d+:)? remark: (?P<msg>.*?)\s*\[-Rpass(?P<kind>|-missed|-analysis)=(?:loop-vectorize|slp-vectorizer)\]$")
            .expect("static regex")
    });
    let mut seen = HashSet::new();
    let mut notes = Vec::new();
    for l in log.lines() {
        let (c, vectorized) = match flavor {
            Flavor::Gcc => match gcc.captures(l) {
                Some(c) => {
                    let v = &c["kind"] == "optimized";
                    (c, v)
                }
                None => continue,
            },
            Flavor::Clang => match clang.captures(l) {
                Some(c) => {
                    let v = c["kind"].is_empty();
                    (c, v)
                }
                None => continue,
            },
        };
        let Some(file) = own_file(&c["file"], files) else {
            continue;
        };
        let line: u32 = c["line"].parse().unwrap_or(0);
        let message = c["msg"].split_whitespace().collect::<Vec<_>>().join(" ");
        if message.is_empty() {
            continue;
        }
        if seen.insert((file.to_string(), line, vectorized, message.clone())) {
            notes.push(VecNote {
                file: file.to_string(),
                line,
                vectorized,
                message,
            });
        }
    }
    notes.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    if notes.len() > MAX_NOTES {
        // Keep every "vectorized" note and the first missed ones by position.
        let mut kept: Vec<VecNote> = Vec::new();
        let budget_missed = MAX_NOTES.saturating_sub(notes.iter().filter(|n| n.vectorized).count());
        let mut missed = 0;
        for n in notes {
            if n.vectorized {
                if kept.len() < MAX_NOTES {
                    kept.push(n);
                }
            } else if missed < budget_missed {
                missed += 1;
                kept.push(n);
            }
        }
        notes = kept;
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    const GCC_LOG: &str = "\
kernel.c:5:27: missed: couldn't vectorize loop
kernel.c:5:27: missed: not vectorized: multiple nested loops.
kernel.c:12:35: optimized: loop vectorized using 32 byte vectors
kernel.c:12:35: optimized:  loop versioned for vectorization because of possible aliasing
kernel.c:12:35: optimized: loop vectorized using 32 byte vectors
kernel.c:4:6: note: vectorized 1 loops in function.
/usr/lib/gcc/x86_64-linux-gnu/12/include/avxintrin.h:911:1: missed: statement clobbers memory
other.c:3:1: optimized: loop vectorized using 16 byte vectors
";

    #[test]
    fn gcc_report_keeps_own_files_dedupes_and_sorts() {
        let files = vec!["kernel.c".to_string()];
        let n = parse(GCC_LOG, Flavor::Gcc, &files);
        assert_eq!(n.len(), 4, "{n:?}");
        assert_eq!((n[0].line, n[0].vectorized), (5, false));
        assert_eq!(n[0].message, "couldn't vectorize loop");
        assert!(n
            .iter()
            .any(|x| x.line == 12 && x.vectorized && x.message.contains("32 byte")));
        assert!(n
            .iter()
            .any(|x| x.message == "loop versioned for vectorization because of possible aliasing"));
    }

    #[test]
    fn clang_remarks_are_parsed() {
        let log = "\
kernel.c:12:13: remark: vectorized loop (vectorization width: 8, interleaved count: 4) [-Rpass=loop-vectorize]
kernel.c:7:5: remark: loop not vectorized [-Rpass-missed=loop-vectorize]
/abs/dir/kernel.c:8:5: remark: loop not vectorized: cannot prove it is safe to reorder floating-point operations [-Rpass-analysis=loop-vectorize]
kernel.c:9:5: remark: something else [-Rpass=inline]
";
        let files = vec!["kernel.c".to_string()];
        let n = parse(log, Flavor::Clang, &files);
        assert_eq!(n.len(), 3, "{n:?}");
        assert!(!n[0].vectorized && n[0].line == 7);
        assert!(n[1].message.contains("floating-point"));
        assert!(n[2].vectorized && n[2].message.starts_with("vectorized loop"));
        assert_eq!(Flavor::of("Debian clang version 14.0.6"), Flavor::Clang);
        assert_eq!(Flavor::of("cc (Debian 12.2.0-14) 12.2.0"), Flavor::Gcc);
    }

    #[test]
    fn own_file_matches_relative_and_absolute_paths() {
        let files = vec!["src/k.c".to_string(), "kernel.c".to_string()];
        assert_eq!(own_file("/tmp/x/src/k.c", &files), Some("src/k.c"));
        assert_eq!(own_file("./kernel.c", &files), Some("kernel.c"));
        assert_eq!(own_file("/tmp/xkernel.c", &files), None);
        assert_eq!(own_file("avxintrin.h", &files), None);
    }
}
