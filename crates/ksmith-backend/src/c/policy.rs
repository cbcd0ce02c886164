//! Static policy for C candidates: forbidden calls found in the source (with line numbers) and,
//! after the build, the library itself (which also catches calls hidden behind macros or token
//! pasting): every symbol it imports must be on the kernel allow-list (libm, the OpenMP
//! runtime, a few libc memory and string functions, what compilers emit), every library it
//! needs one of the C runtime's, and its own executable code may hold no system-call
//! instruction. Like every name check this is a courtesy that refuses the plain attempts early
//! and with a clear reason: code can still find libc's functions in memory, so the sandbox
//! stays the boundary (docs/judge.md).

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
    ("dlvsym", "looks up code at run time"),
    ("dlmopen", "loads code at run time"),
    ("dladdr", "looks up code at run time"),
    ("dladdr1", "looks up code at run time"),
    ("dlinfo", "looks up code at run time"),
    ("dl_iterate_phdr", "looks up code at run time"),
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

/// Math functions a kernel may import from libm (each also with the `f` and `l` suffixes, as
/// glibc's `-ffast-math` `__NAME_finite` entry points, and as libmvec's vector variants).
#[rustfmt::skip]
const MATH: &[&str] = &[
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "sincos", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "logb",
    "ilogb", "pow", "sqrt", "cbrt", "hypot", "erf", "erfc", "tgamma", "lgamma", "ceil", "floor",
    "trunc", "round", "lround", "llround", "rint", "lrint", "llrint", "nearbyint", "fmod",
    "remainder", "remquo", "fabs", "fmin", "fmax", "fdim", "fma", "frexp", "ldexp", "scalbn",
    "scalbln", "modf", "copysign", "nextafter", "nexttoward", "nan",
];

/// libc functions a kernel may import beyond libm: memory (its own scratch buffers), memory
/// and string primitives compilers also emit for loops and copies, and a few pure helpers.
#[rustfmt::skip]
const LIBC: &[&str] = &[
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memcpy", "memmove",
    "memset", "memcmp", "memchr", "strlen", "strcmp", "strncmp", "abs", "labs", "llabs", "qsort",
];

/// What compilers and the C runtime put into every shared library, or emit for checks: the
/// stack protector, `_FORTIFY_SOURCE`'s checked copies, `assert`, thread-local storage, CPU
/// feature dispatch, and the start-up/tear-down hooks.
#[rustfmt::skip]
const RUNTIME: &[&str] = &[
    "__stack_chk_fail", "__stack_chk_guard", "__memcpy_chk", "__memmove_chk", "__memset_chk",
    "__assert_fail", "__tls_get_addr", "__cpu_model", "__cpu_features2", "__cpu_indicator_init",
    "__cxa_finalize", "__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable",
];

/// Libraries a kernel's library may need: the C runtime, libm and the OpenMP runtimes.
#[rustfmt::skip]
const NEEDED: &[&str] = &[
    "libc.so.6", "libm.so.6", "libmvec.so.1", "libgomp.so.1", "libomp.so.5", "libomp.so",
    "libiomp5.so", "libgcc_s.so.1", "libpthread.so.0", "ld-linux-x86-64.so.2",
];

/// Whether a libm name (after removing a `f`/`l` suffix) is on [`MATH`].
fn math(name: &str) -> bool {
    MATH.contains(&name)
        || name
            .strip_suffix('f')
            .or_else(|| name.strip_suffix('l'))
            .is_some_and(|n| MATH.contains(&n))
}

/// Why a symbol the library imports is not allowed (None: it is).
fn refused_import(name: &str) -> Option<String> {
    static HELPER: OnceLock<Regex> = OnceLock::new();
    static VECTOR: OnceLock<Regex> = OnceLock::new();
    // libgcc / compiler-rt arithmetic the compiler calls for types the CPU lacks: float16 and
    // bfloat16 conversions, 128-bit integers, complex products, integer powers, bit counts.
    let helper = HELPER.get_or_init(|| {
        Regex::new(
            r"^__(?:(?:extend|trunc)[a-z]{2}[a-z]{2}2|(?:float|floatun|fix|fixuns)[a-z]{2}[a-z]{2}|(?:add|sub|mul|div|neg)[a-z]{2}3|(?:mul|div)[a-z]{2}3|powi[a-z]{2}2|u?(?:div|mod)[td]i3|mul[td]i3|(?:popcount|clz|ctz|parity|ffs)[sdt]i2)$",
        )
        .expect("static regex")
    });
    // libmvec's vector variants (x86-64 vector function ABI): _ZGV<isa><mask><len><params>_NAME.
    let vector = VECTOR.get_or_init(|| {
        Regex::new(r"^_ZGV[bcdex][NM][0-9]+[vlu0-9]*_(.+)$").expect("static regex")
    });
    let allowed = name.starts_with("GOMP_")
        || name.starts_with("omp_")
        || name.starts_with("__kmpc_")
        || math(name)
        || name
            .strip_prefix("__")
            .and_then(|n| n.strip_suffix("_finite"))
            .is_some_and(math)
        || vector.captures(name).is_some_and(|c| math(&c[1]))
        || LIBC.contains(&name)
        || RUNTIME.contains(&name)
        || helper.is_match(name);
    if allowed {
        return None;
    }
    let why = why(name).map(str::to_string).unwrap_or_else(|| {
        if name.starts_with("Py") || name.starts_with("_Py") {
            "calls into the Python interpreter".into()
        } else if name.starts_with("dl") || name.starts_with("_dl") || name.contains("dlsym") {
            "looks up code at run time".into()
        } else {
            "not on the kernel allow-list: libm, the OpenMP runtime, memory allocation, a few \
             memory and string functions, and what compilers emit"
                .into()
        }
    });
    Some(why)
}

/// x86-64 system-call instructions in the library's own executable code, decoded instruction by
/// instruction (the bytes `0f 05` also occur inside honest instructions): (offset, section,
/// mnemonic).
fn syscall_instructions(file: &object::File) -> Vec<(u64, String, &'static str)> {
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};
    use object::{Architecture, Object, ObjectSection, ObjectSegment, SectionFlags};
    if file.architecture() != Architecture::X86_64 {
        return Vec::new();
    }
    // Every section the loader maps executable; no section headers: every executable segment.
    let mut code: Vec<(u64, String, &[u8])> = file
        .sections()
        .filter(|s| match s.flags() {
            SectionFlags::Elf { sh_flags, .. } => {
                sh_flags.contains(object::elf::SHF_EXECINSTR | object::elf::SHF_ALLOC)
            }
            _ => false,
        })
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_string(), s.data().ok()?)))
        .collect();
    if code.is_empty() {
        code = file
            .segments()
            .filter(|s| {
                matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.contains(object::elf::PF_X))
            })
            .filter_map(|s| Some((s.address(), "executable segment".to_string(), s.data().ok()?)))
            .collect();
    }
    let mut found = Vec::new();
    for (address, section, bytes) in code {
        let mut decoder = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE);
        let mut ins = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut ins);
            let what = match ins.mnemonic() {
                Mnemonic::Syscall => "syscall",
                Mnemonic::Sysenter => "sysenter",
                Mnemonic::Int if ins.immediate8() == 0x80 => "int 0x80",
                _ => continue,
            };
            found.push((ins.ip(), section.clone(), what));
        }
    }
    found
}

/// Checks the built library: every symbol it imports against the kernel allow-list, every
/// library it needs against the C runtime's, and its own executable code for system-call
/// instructions. Returns None when the library cannot be read as ELF, so callers can say the
/// check did not run.
pub fn check_library(library: &Path) -> Option<Vec<PolicyViolation>> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(library).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let violation = |name: &str, message: String| PolicyViolation {
        file: "kernel.so".into(),
        line: 0,
        name: name.into(),
        message,
    };
    let imports: BTreeSet<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(str::to_string))
        .collect();
    let mut out: Vec<PolicyViolation> = imports
        .iter()
        .filter_map(|s| {
            let why = refused_import(s)?;
            Some(violation(
                s,
                format!("the built library imports `{s}`, which kernels may not use ({why})"),
            ))
        })
        .collect();
    if let object::File::Elf64(elf) = &file {
        for lib in needed(elf) {
            if !NEEDED.contains(&lib.as_str()) {
                out.push(violation(
                    &lib,
                    format!(
                        "the built library needs `{lib}`; kernels may link only the C runtime, libm and the OpenMP runtime"
                    ),
                ));
            }
        }
    }
    for (at, section, what) in syscall_instructions(&file) {
        out.push(violation(
            what,
            format!(
                "the built library's own code makes a system call: `{what}` at {at:#x} (in {section}); kernels may only compute"
            ),
        ));
    }
    Some(out)
}

/// The DT_NEEDED entries of a 64-bit ELF file.
fn needed(elf: &object::read::elf::ElfFile64) -> Vec<String> {
    let Ok(table) = elf.elf_dynamic_table() else {
        return Vec::new();
    };
    table
        .iter()
        .filter(|d| d.tag == object::elf::DT_NEEDED)
        .filter_map(|d| table.string(d).ok())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
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
        let v = check_library(&lib).unwrap();
        let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["system"]);
        // Not an ELF file: the check says it did not run.
        assert!(check_library(&src).is_none());
    }

    /// Builds `src` as a kernel library (the judge's default flags); None without a compiler.
    fn library(dir: &Path, src: &str) -> Option<std::path::PathBuf> {
        let c = dir.join("k.c");
        let lib = dir.join("k.so");
        std::fs::write(&c, src).unwrap();
        let o = std::process::Command::new("cc")
            .args(["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&c)
            .output()
            .ok()?;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Some(lib)
    }

    #[test]
    fn the_allow_list_admits_math_openmp_and_memory_and_refuses_lookups() {
        for ok in [
            "expf",
            "tanh",
            "sqrtl",
            "__expf_finite",
            "_ZGVdN8v_expf",
            "_ZGVeN16vv_powf",
            "GOMP_parallel",
            "omp_get_thread_num",
            "__kmpc_fork_call",
            "malloc",
            "memcpy",
            "__memcpy_chk",
            "__stack_chk_fail",
            "__cxa_finalize",
            "__extendhfsf2",
            "__truncsfbf2",
            "__udivti3",
            "__powisf2",
            "__mulsc3",
        ] {
            assert_eq!(refused_import(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("dlvsym", "looks up code"),
            ("dlsym", "looks up code"),
            ("dl_iterate_phdr", "looks up code"),
            ("_dl_find_object", "looks up code"),
            ("fopen", "touches files"),
            ("PyRun_SimpleString", "Python"),
            ("stdout", "allow-list"),
            ("pthread_create", "allow-list"),
            ("mmap", "allow-list"),
            ("_ZGVdN8v_system", "allow-list"),
            ("__libc_dlsym", "looks up code"),
        ] {
            let got = refused_import(bad).unwrap_or_else(|| panic!("{bad} allowed"));
            assert!(got.contains(why), "{bad}: {got}");
        }
    }

    #[test]
    fn refuses_dynamic_lookup_and_system_call_instructions_but_not_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let Some(lookup) = library(
            dir.path(),
            "#define _GNU_SOURCE\n#include <dlfcn.h>\nvoid* f(void) { return dlvsym(RTLD_NEXT, \"fopen\", \"GLIBC_2.2.5\"); }\n",
        ) else {
            eprintln!("skipping: no C compiler");
            return;
        };
        let v = check_library(&lookup).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].name, "dlvsym");
        assert!(v[0].message.contains("looks up code at run time"), "{v:?}");
        let asm = library(
            dir.path(),
            "long f(long n) { long r; __asm__ volatile(\"syscall\" : \"=a\"(r) : \"a\"(n) : \"rcx\", \"r11\", \"memory\"); return r; }\n\
             long g(long n) { long r; __asm__ volatile(\"int $0x80\" : \"=a\"(r) : \"a\"(n) : \"memory\"); return r; }\n",
        )
        .unwrap();
        let v = check_library(&asm).unwrap();
        let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["syscall", "int 0x80"], "{v:?}");
        assert!(v[0].message.contains("(in .text)"), "{v:?}");
        // The bytes of `syscall` (0f 05) inside an honest instruction's immediate are no call.
        let honest = library(
            dir.path(),
            "#include <stdint.h>\nvoid f(int32_t* x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] ^= 0x050f050f; }\n",
        )
        .unwrap();
        let bytes = std::fs::read(&honest).unwrap();
        assert!(
            bytes.windows(2).any(|w| w == [0x0f, 0x05]),
            "the test needs the bytes in the library"
        );
        assert_eq!(check_library(&honest).unwrap(), vec![]);
    }
}
