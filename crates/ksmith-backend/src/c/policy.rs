//! Static policy for C candidates: forbidden calls found in the source (with line numbers) and,
//! after the build, in the library's undefined symbols (which also catches calls hidden behind
//! macros or token pasting).

use regex::Regex;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

/// Forbidden functions and why. Kernels compute; they may not reach the outside world, the
/// harness's protocol descriptors, or the Python interpreter they are loaded into.
const FORBIDDEN: &[(&str, &str)] = &[
    ("system", "spawns a process"),
    ("popen", "spawns a process"),
    ("fork", "spawns a process"),
    ("vfork", "spawns a process"),
    ("clone", "spawns a process"),
    ("clone3", "spawns a process"),
    ("execl", "spawns a process"),
    ("execlp", "spawns a process"),
    ("execle", "spawns a process"),
    ("execv", "spawns a process"),
    ("execvp", "spawns a process"),
    ("execvpe", "spawns a process"),
    ("execve", "spawns a process"),
    ("fexecve", "spawns a process"),
    ("posix_spawn", "spawns a process"),
    ("posix_spawnp", "spawns a process"),
    ("fopen", "touches files"),
    ("fopen64", "touches files"),
    ("freopen", "touches files"),
    ("open", "touches files"),
    ("open64", "touches files"),
    ("openat", "touches files"),
    ("creat", "touches files"),
    ("unlink", "touches files"),
    ("remove", "touches files"),
    ("rename", "touches files"),
    ("mkdir", "touches files"),
    ("write", "writes to raw file descriptors"),
    ("pwrite", "writes to raw file descriptors"),
    ("writev", "writes to raw file descriptors"),
    ("pwritev", "writes to raw file descriptors"),
    ("fdopen", "opens a stream on a raw file descriptor"),
    ("fcntl", "manipulates file descriptors"),
    ("ioctl", "manipulates file descriptors"),
    ("send", "writes to a socket"),
    ("sendto", "writes to a socket"),
    ("sendmsg", "writes to a socket"),
    ("dup", "manipulates file descriptors"),
    ("dup2", "manipulates file descriptors"),
    ("socket", "opens a network socket"),
    ("connect", "opens a network connection"),
    ("bind", "opens a network socket"),
    ("dlopen", "loads code at run time"),
    ("dlsym", "looks up code at run time"),
    ("dlmopen", "loads code at run time"),
    ("getenv", "reads the environment"),
    ("secure_getenv", "reads the environment"),
    ("setenv", "changes the environment"),
    ("putenv", "changes the environment"),
    ("syscall", "makes raw system calls"),
    ("ptrace", "inspects processes"),
    ("kill", "signals processes"),
    ("mprotect", "changes memory protection"),
];

/// A policy violation at a place in a source file (line 0: found in the built library).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyViolation {
    /// Source file (or the library).
    pub file: String,
    /// 1-based line, 0 if not from the source.
    pub line: u32,
    /// The forbidden name.
    pub name: String,
    /// Human-readable explanation.
    pub message: String,
}

fn why(name: &str) -> Option<&'static str> {
    FORBIDDEN.iter().find(|(n, _)| *n == name).map(|(_, w)| *w)
}

/// Blanks comments and string/char literals (keeping newlines), so they cannot trigger or hide matches.
fn strip_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c == '/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == '/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && i + 1 < b.len() && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] as char != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                if i < b.len() && b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Scans one source file for forbidden calls, inline assembly and the Python C API.
pub fn check_source(file: &str, src: &str) -> Vec<PolicyViolation> {
    static CALL: OnceLock<Regex> = OnceLock::new();
    static ASM: OnceLock<Regex> = OnceLock::new();
    static PY: OnceLock<Regex> = OnceLock::new();
    let call =
        CALL.get_or_init(|| Regex::new(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(").expect("static regex"));
    let asm = ASM.get_or_init(|| Regex::new(r"\b(asm|__asm__|__asm)\b").expect("static regex"));
    let py = PY.get_or_init(|| {
        Regex::new(r"#\s*include\s*[<]\s*Python\.h|\bPy[A-Z][A-Za-z_]*\s*\(").expect("static regex")
    });
    let clean = strip_comments_and_strings(src);
    let mut out = Vec::new();
    for (i, line) in clean.lines().enumerate() {
        let line_no = i as u32 + 1;
        for c in call.captures_iter(line) {
            let name = &c[1];
            if let Some(w) = why(name) {
                out.push(PolicyViolation {
                    file: file.into(),
                    line: line_no,
                    name: name.into(),
                    message: format!("forbidden call `{name}` ({w}; kernels may only compute)"),
                });
            }
        }
        if let Some(m) = asm.find(line) {
            out.push(PolicyViolation {
                file: file.into(),
                line: line_no,
                name: m.as_str().into(),
                message:
                    "inline assembly is not allowed (it can make system calls); use intrinsics"
                        .into(),
            });
        }
        if let Some(m) = py.find(line) {
            out.push(PolicyViolation {
                file: file.into(),
                line: line_no,
                name: if m.as_str().starts_with('#') {
                    "Python.h".into()
                } else {
                    m.as_str().trim_end_matches('(').trim().into()
                },
                message: "kernels may not call into the Python interpreter".into(),
            });
        }
    }
    // `#include <Python.h>` lives in a directive, which the blanking above keeps; strings in
    // directives are blanked, so also look at the raw source for that one.
    if out.iter().all(|v| !v.name.contains("Python")) {
        for (i, line) in src.lines().enumerate() {
            if line.trim_start().starts_with('#') && line.contains("Python.h") {
                out.push(PolicyViolation {
                    file: file.into(),
                    line: i as u32 + 1,
                    name: "Python.h".into(),
                    message: "kernels may not call into the Python interpreter".into(),
                });
            }
        }
    }
    out
}

/// The library's dynamic symbols, defined or undefined (imported), read from its ELF tables
/// in process (`nm -D` cost ~30 ms a run, twice per build); None if it is not a readable ELF.
fn dynamic_symbols(library: &Path, defined: bool) -> Option<BTreeSet<String>> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(library).ok()?;
    let file = object::File::parse(&*data).ok()?;
    Some(
        file.dynamic_symbols()
            .filter(|s| s.is_undefined() != defined)
            .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(str::to_string))
            .collect(),
    )
}

/// Symbols the library defines (None when it cannot be read as ELF).
pub fn defined_symbols(library: &Path) -> Option<BTreeSet<String>> {
    dynamic_symbols(library, true)
}

/// Checks the library's undefined (imported) symbols against the policy. Returns None when
/// the library cannot be read as ELF, so callers can say the check did not run.
pub fn check_symbols(library: &Path) -> Option<Vec<PolicyViolation>> {
    let undefined = dynamic_symbols(library, false)?;
    Some(
        undefined
            .iter()
            .filter_map(|s| {
                let w = why(s).or_else(|| {
                    s.starts_with("Py")
                        .then_some("calls into the Python interpreter")
                })?;
                Some(PolicyViolation {
                    file: "kernel.so".into(),
                    line: 0,
                    name: s.clone(),
                    message: format!("the built library imports forbidden symbol `{s}` ({w})"),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_calls_with_lines_and_ignores_comments_strings_and_lookalikes() {
        let src = "#include <stdlib.h>\n// system(\"x\") in a comment\nvoid f(){\n  const char* s = \"fork()\";\n  my_system(1); systems(2);\n  system(\"echo\");\n  int r = fork ();\n}\n";
        let v = check_source("k.c", src);
        let got: Vec<_> = v.iter().map(|v| (v.name.as_str(), v.line)).collect();
        assert_eq!(got, vec![("system", 6), ("fork", 7)]);
    }

    #[test]
    fn rejects_inline_asm_and_python() {
        let v = check_source(
            "k.c",
            "#include <Python.h>\nvoid f(){ __asm__(\"syscall\"); PyRun_SimpleString(0); }\n",
        );
        let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
        assert!(names.contains(&"__asm__"), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("PyRun")), "{names:?}");
        assert!(names.contains(&"Python.h"), "{names:?}");
    }

    #[test]
    fn reads_the_librarys_exports_and_imports_from_its_elf_tables() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("k.c");
        let lib = dir.path().join("k.so");
        std::fs::write(
            &src,
            "#include <stdlib.h>\nint helper(int x) { return system(x ? \"a\" : \"b\"); }\n\
             static int hidden(void) { return 1; }\nint f(void) { return hidden(); }\n",
        )
        .unwrap();
        let ok = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping: no C compiler");
            return;
        }
        let defined = defined_symbols(&lib).unwrap();
        assert!(
            defined.contains("f") && defined.contains("helper"),
            "{defined:?}"
        );
        assert!(!defined.contains("hidden") && !defined.contains("system"));
        let v = check_symbols(&lib).unwrap();
        let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["system"]);
        // Not an ELF file: the check says it did not run.
        assert!(check_symbols(&src).is_none());
    }
}
