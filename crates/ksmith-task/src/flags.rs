//! Compiler flags a solution may add to its build: an allow-list.
//!
//! Why allow, not deny: a compiler driver is a program launcher. `-wrapper`, `-B`, `-specs=`,
//! `-fplugin=`, `@file`, `-Wl,`/`-Xlinker`, `-ccbin` and many more run or load programs, read
//! host files (`-include /etc/shadow`) or write files (`-fdump-*`, `-save-temps`, `-MF`), and
//! every compiler release adds options. A list of forbidden options is always one option short;
//! a list of allowed ones fails closed: a flag nobody thought about is refused with a message,
//! and adding it is a one-line, reviewed change. So every flag a solution adds must match one of
//! the small classes below, as a single token (an option that takes a separate argument is
//! refused, because its argument would be an unchecked token), and use only the characters
//! `[A-Za-z0-9_.+=,-]` (no whitespace, quotes, `$`, `/`, `;` or other shell or path characters).
//!
//! C (gcc/clang):
//! - optimization: `-O0`..`-O3`, `-Os`, `-Oz`, `-Ofast`, `-Og`;
//! - target: `-march=`, `-mtune=`, `-mcpu=`, `-mprefer-vector-width=`, `-mfpmath=`, and feature
//!   switches `-mFEATURE` / `-mno-FEATURE` (`-mavx2`, `-mno-avx512f`, `-mfma`, `-msse4.2`);
//! - code generation, math and optimization switches `-fNAME` / `-fno-NAME` from the families in
//!   [`F_FAMILIES`] (`-ffast-math`, `-fno-math-errno`, `-funroll-loops`, `-fopenmp`,
//!   `-ftree-vectorize`, `-fomit-frame-pointer`, ...), and `-fNAME=VALUE` only for the names in
//!   [`F_VALUES`] with the values listed there (`-fvect-cost-model=dynamic`, `-ffp-contract=fast`);
//!   switches that load plugins or read or write files (`-fplugin`, `-fprofile-*`, `-fdump-*`,
//!   `-frecord-*`, `-fstack-usage`, coverage, ...) are in no family and are refused with a reason;
//! - warnings: `-w`, `-Werror`, `-WNAME`, `-Wno-NAME`, `-Werror=NAME`, `-WNAME=N` (`-Wl,`, `-Wa,`,
//!   `-Wp,` pass options through to other programs and are refused);
//! - `-std=`, `-DNAME`, `-DNAME=VALUE` (NAME a C identifier that is not a keyword or type name,
//!   see [`is_macro_name`]; VALUE from `[A-Za-z0-9_.+-]`),
//!   `-UNAME`, `-g`, `-g0`..`-g3`, `-pipe`, `-pthread`, `-pedantic`, `-pedantic-errors`;
//! - `--param=NAME=VALUE` (one token; `--param NAME=VALUE` is two and refused).
//!
//! CUDA (nvcc): `-O0`..`-O3`, `-arch=`/`--gpu-architecture=` (`sm_XX`,
//! `compute_XX`, `native`, `all`, `all-major`), `-code=`, `-gencode=arch=compute_XX,code=sm_XX`,
//! `--use_fast_math`, `-lineinfo`, `--ftz=`/`--prec-div=`/`--prec-sqrt=`/`--fmad=` `true|false`,
//! `-maxrregcount=N`, `--extra-device-vectorization`, `--restrict`, `--expt-relaxed-constexpr`,
//! `--expt-extended-lambda`, `-std=c++NN`, `-DNAME[=VALUE]`, `-UNAME`, `-w`,
//! `-Wno-deprecated-gpu-targets`, and `-Xptxas=OPTS` with OPTS a comma list of `-v`, `-O0`..`-O3`,
//! `-warn-spills`, `-warn-lmem-usage`, `-dlcm=ca|cg|cs`. Host-compiler and linker pass-through
//! (`-Xcompiler`, `-Xlinker`, `-ccbin`), files (`-I`, `-include`, `--options-file`, `-o`,
//! `--keep`) and the rest are refused.
//!
//! Python languages (Triton, Pallas) are not compiled by us and take no flags.

use crate::solution::Language;
use crate::task::is_identifier;

/// At most this many flags in one solution.
pub const MAX_FLAGS: usize = 64;
/// At most this many bytes in one flag.
pub const MAX_FLAG_LEN: usize = 200;

/// `-f` switch families a C solution may use, as `-fNAME` or `-fno-NAME`: NAME equals a family or
/// starts with `FAMILY-` (so `tree` admits `-ftree-vectorize`, `-ftree-loop-distribution`).
/// Every family is code generation, floating-point semantics or an optimization pass; none
/// reads or writes a file or loads code.
pub const F_FAMILIES: &[&str] = &[
    // floating-point semantics
    "fast-math",
    "math-errno",
    "finite-math-only",
    "associative-math",
    "reciprocal-math",
    "signed-zeros",
    "trapping-math",
    "rounding-math",
    "unsafe-math-optimizations",
    "cx-limited-range",
    "signaling-nans",
    "single-precision-constant",
    // loops and vectorization
    "unroll-loops",
    "unroll-all-loops",
    "peel-loops",
    "split-loops",
    "unswitch-loops",
    "move-loop-invariants",
    "prefetch-loop-arrays",
    "variable-expansion-in-unroller",
    "version-loops-for-strides",
    "tree",
    "loop",
    "vectorize",
    "slp-vectorize",
    "graphite",
    "predictive-commoning",
    "ivopts",
    "modulo-sched",
    "split-paths",
    "gcse",
    "ipa",
    "inline",
    "early-inlining",
    "optimize-sibling-calls",
    "peephole",
    "peephole2",
    "expensive-optimizations",
    "rename-registers",
    "schedule-insns",
    "schedule-insns2",
    "sched-pressure",
    "web",
    "cse-follow-jumps",
    "cse-skip-blocks",
    "strict-aliasing",
    "strict-overflow",
    "wrapv",
    "trapv",
    "allow-store-data-races",
    "merge-all-constants",
    "merge-constants",
    "reorder-blocks",
    "reorder-functions",
    "align-functions",
    "align-loops",
    "align-jumps",
    "align-labels",
    // code generation
    "omit-frame-pointer",
    "openmp",
    "openmp-simd",
    "PIC",
    "pic",
    "builtin",
    "common",
    "function-sections",
    "data-sections",
    "semantic-interposition",
    "plt",
    "stack-protector",
    "stack-protector-strong",
    "stack-protector-all",
    "stack-clash-protection",
    "exceptions",
    "asynchronous-unwind-tables",
    "unwind-tables",
    "jump-tables",
    "zero-initialized-in-bss",
    // diagnostics (printed, never written to a file)
    "diagnostics-show-option",
    "diagnostics-show-caret",
    "show-column",
    "verbose-asm",
];

/// `-fNAME=VALUE` switches a C solution may use, with their allowed values (`#` = a decimal
/// number).
pub const F_VALUES: &[(&str, &[&str])] = &[
    (
        "vect-cost-model",
        &["unlimited", "dynamic", "cheap", "very-cheap"],
    ),
    (
        "simd-cost-model",
        &["unlimited", "dynamic", "cheap", "very-cheap"],
    ),
    ("fp-contract", &["off", "on", "fast", "fast-honor-pragmas"]),
    ("excess-precision", &["fast", "standard", "16"]),
    ("fp-model", &["precise", "strict", "fast"]),
    (
        "visibility",
        &["default", "hidden", "internal", "protected"],
    ),
    (
        "tls-model",
        &[
            "global-dynamic",
            "local-dynamic",
            "initial-exec",
            "local-exec",
        ],
    ),
    ("diagnostics-color", &["never", "always", "auto"]),
    ("inline-limit", &["#"]),
    ("max-errors", &["#"]),
    ("tree-parallelize-loops", &["#"]),
    ("align-functions", &["#"]),
    ("align-loops", &["#"]),
    ("align-jumps", &["#"]),
    ("align-labels", &["#"]),
    ("openmp-version", &["#"]),
];

/// `-f` switches refused with a specific reason (they are in no family either; this only makes
/// the message clearer).
const F_REFUSED: &[(&str, &str)] = &[
    (
        "plugin",
        "loads a compiler plugin (code run inside the compiler)",
    ),
    ("profile", "reads or writes profile data files"),
    ("auto-profile", "reads a profile data file"),
    ("create-profile", "writes profile data files"),
    ("test-coverage", "writes coverage files"),
    ("coverage", "writes coverage files"),
    ("dump", "writes compiler dump files"),
    ("record", "records the command line in the output"),
    ("stack-usage", "writes .su files"),
    ("callgraph-info", "writes .ci files"),
    (
        "save-optimization-record",
        "writes optimization record files",
    ),
    ("opt-info", "may write optimization reports to a file"),
    ("debug-prefix-map", "takes a path"),
    ("file-prefix-map", "takes a path"),
    ("macro-prefix-map", "takes a path"),
    (
        "compare-debug",
        "runs the compiler again with other options",
    ),
    ("self-test", "takes a path"),
    ("use-ld", "chooses which linker program runs"),
    ("ld-path", "chooses which linker program runs"),
    ("sanitize", "links sanitizer runtimes and may write reports"),
    (
        "instrument",
        "calls user-provided hooks around every function",
    ),
    ("modules", "reads and writes module cache files"),
    ("crash-diagnostics", "writes crash reports"),
    ("embed-bitcode", "embeds compiler input in the output"),
    ("integrated-as", "changes which assembler program runs"),
    ("lto", "runs the link-time optimizer as a separate program"),
    ("syntax-only", "produces no library"),
];

/// Options (or option prefixes) refused with a specific reason, for both compilers; anything
/// else not allowed gets the general message.
const REFUSED: &[(&str, &str)] = &[
    (
        "-wrapper",
        "runs the compiler's subprocesses through another program",
    ),
    (
        "-specs",
        "reads a specs file, which can run arbitrary programs",
    ),
    (
        "--specs",
        "reads a specs file, which can run arbitrary programs",
    ),
    (
        "-B",
        "sets where the compiler finds its own programs (a path)",
    ),
    (
        "-fplugin",
        "loads a compiler plugin (code run inside the compiler)",
    ),
    ("-include", "reads a file from a path"),
    ("-imacros", "reads a file from a path"),
    ("-isystem", "adds an include directory (a path)"),
    ("-iquote", "adds an include directory (a path)"),
    ("-idirafter", "adds an include directory (a path)"),
    ("-isysroot", "takes a path"),
    ("-iprefix", "takes a path"),
    ("-iwithprefix", "takes a path"),
    ("--sysroot", "takes a path"),
    ("-save-temps", "writes intermediate files"),
    ("-Xlinker", "passes arbitrary options through to the linker"),
    (
        "-Xassembler",
        "passes arbitrary options through to the assembler",
    ),
    (
        "-Xpreprocessor",
        "passes arbitrary options through to the preprocessor",
    ),
    (
        "-Xclang",
        "passes arbitrary options through to the compiler front end",
    ),
    (
        "-Xcompiler",
        "passes arbitrary options through to the host compiler",
    ),
    (
        "--compiler-options",
        "passes arbitrary options through to the host compiler",
    ),
    (
        "-Xnvlink",
        "passes arbitrary options through to the device linker",
    ),
    (
        "-Xarchive",
        "passes arbitrary options through to the archiver",
    ),
    (
        "--linker-options",
        "passes arbitrary options through to the linker",
    ),
    ("-ccbin", "chooses which host compiler program runs"),
    (
        "--compiler-bindir",
        "chooses which host compiler program runs",
    ),
    ("--options-file", "reads more options from a file"),
    ("-optf", "reads more options from a file"),
    ("--keep", "writes intermediate files"),
    ("-keep", "writes intermediate files"),
    ("-odir", "takes a path"),
    ("--run", "runs a program"),
    ("-run", "runs a program"),
    ("-Wl,", "passes arbitrary options through to the linker"),
    ("-Wa,", "passes arbitrary options through to the assembler"),
    (
        "-Wp,",
        "passes arbitrary options through to the preprocessor",
    ),
    ("-I", "adds an include directory (a path)"),
    ("-L", "adds a library directory (a path)"),
    ("-l", "links a library from the host"),
    ("-o", "sets the output path"),
    (
        "-x",
        "changes the source language and takes a separate argument",
    ),
    ("-M", "writes dependency files"),
    (
        "--param",
        "takes a separate argument; use the one-token form --param=NAME=VALUE",
    ),
];

/// The class of flags that admitted one flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagClass {
    /// `-O` levels, `--param=NAME=VALUE`.
    Optimization,
    /// `-march=`, `-mtune=`, `-mcpu=`, `-m` feature switches; nvcc `-arch=`, `-code=`, `-gencode=`.
    Target,
    /// `-f` switches from [`F_FAMILIES`] and [`F_VALUES`]; nvcc math and code-generation options.
    CodeGen,
    /// `-W` warnings, `-w`, `-pedantic`.
    Warning,
    /// `-std=`.
    Standard,
    /// `-DNAME[=VALUE]`, `-UNAME`.
    Macro,
    /// `-g` levels, nvcc `-lineinfo`.
    Debug,
    /// How the driver runs its tools, without naming any: `-pipe`, `-pthread`, nvcc `-Xptxas=`
    /// with listed options.
    Driver,
}

/// Checks every flag of a solution in `language`; returns `(index, message)` for each refused
/// one (and index `flags.len()` when there are too many).
pub fn check_flags(language: Language, flags: &[String]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = flags
        .iter()
        .enumerate()
        .filter_map(|(i, f)| check_flag(language, f).err().map(|m| (i, m)))
        .collect();
    if flags.len() > MAX_FLAGS {
        out.push((
            flags.len(),
            format!("{} flags; at most {MAX_FLAGS} are allowed", flags.len()),
        ));
    }
    out
}

/// Checks one flag a `language` solution adds: `Ok` is the class that admits it, `Err` says
/// which flag and why it is refused.
pub fn check_flag(language: Language, flag: &str) -> Result<FlagClass, String> {
    let refuse = |why: &str| Err(format!("flag `{}` is not allowed: {why}", shown(flag)));
    if language.is_python() {
        return refuse(&format!(
            "{} solutions are not compiled and take no flags",
            language.name()
        ));
    }
    if flag.is_empty() {
        return refuse("empty flag");
    }
    if flag.len() > MAX_FLAG_LEN {
        return refuse(&format!("longer than {MAX_FLAG_LEN} bytes"));
    }
    if flag.starts_with('@') {
        return refuse("a response file (@FILE) reads more options from a path");
    }
    if !flag.starts_with('-') {
        return refuse("not an option (a bare word is an input file or a separate argument)");
    }
    let bad_char = flag
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_.+=,-".contains(*c)));
    let class = match language {
        _ if bad_char.is_some() => None,
        Language::Cuda => cuda_class(flag),
        _ => c_class(flag),
    };
    if let Some(class) = class {
        return Ok(class);
    }
    // Refused; say why as precisely as we can.
    if let Some((_, why)) = REFUSED.iter().find(|(p, _)| refused_match(flag, p)) {
        return refuse(why);
    }
    if let Some(rest) = flag.strip_prefix("-f") {
        let name = rest.strip_prefix("no-").unwrap_or(rest);
        if let Some((_, why)) = F_REFUSED.iter().find(|(p, _)| name.starts_with(p)) {
            return refuse(why);
        }
    }
    if let Some(name) = flag.strip_prefix("-D").or(flag.strip_prefix("-U")) {
        let name = name.split('=').next().unwrap_or("");
        if is_identifier(name) && !is_macro_name(name) {
            return refuse(
                "redefines a C keyword or type name, which would change the ABI header's meaning",
            );
        }
    }
    if let Some(c) = bad_char {
        return refuse(&format!(
            "contains `{}`; flags may use only letters, digits and _ . + = , -",
            c.escape_default()
        ));
    }
    refuse(match language {
        Language::Cuda => "not on the allow-list for nvcc (-O levels, -arch=, -code=, -gencode=, --use_fast_math, -lineinfo, --ftz= and friends, -maxrregcount=, -std=, -DNAME[=VALUE], -UNAME, -w, -Xptxas=OPTS)",
        _ => "not on the allow-list (-O levels, -march=/-mtune=/-mcpu=, -m feature switches, listed -f switches, -W warnings, -std=, -DNAME[=VALUE], -UNAME, -g, -pipe, -w, --param=NAME=VALUE)",
    })
}

/// Whether `flag` is the refused option `p`: equal, or `p` followed by its argument. One-letter
/// options (`-I`, `-o`) take their argument glued on; longer ones take `=` or nothing.
fn refused_match(flag: &str, p: &str) -> bool {
    if p.ends_with(',') || p.len() == 2 {
        return flag.starts_with(p);
    }
    flag == p || flag.strip_prefix(p).is_some_and(|r| r.starts_with('='))
}

/// The flag as shown in a message (control characters escaped, long ones cut).
fn shown(flag: &str) -> String {
    let s: String = flag.chars().take(80).collect();
    let s = s.escape_debug().to_string();
    if flag.chars().count() > 80 {
        format!("{s}...")
    } else {
        s
    }
}

fn c_class(flag: &str) -> Option<FlagClass> {
    use FlagClass::*;
    let fixed = match flag {
        "-O" | "-O0" | "-O1" | "-O2" | "-O3" | "-Os" | "-Oz" | "-Ofast" | "-Og" => {
            Some(Optimization)
        }
        "-g" | "-g0" | "-g1" | "-g2" | "-g3" => Some(Debug),
        "-w" | "-pedantic" | "-pedantic-errors" => Some(Warning),
        "-pipe" | "-pthread" => Some(Driver),
        _ => None,
    };
    if fixed.is_some() {
        return fixed;
    }
    let (class, ok) = if let Some(v) = flag.strip_prefix("-std=") {
        (Standard, word(v, "+"))
    } else if let Some(d) = flag.strip_prefix("-D") {
        (Macro, define(d))
    } else if let Some(u) = flag.strip_prefix("-U") {
        (Macro, is_macro_name(u))
    } else if let Some(p) = flag.strip_prefix("--param=") {
        let ok = match p.split_once('=') {
            Some((name, value)) => word(name, "-") && word(value, "-"),
            None => false,
        };
        (Optimization, ok)
    } else if let Some(m) = flag.strip_prefix("-m") {
        (Target, target(m))
    } else if let Some(f) = flag.strip_prefix("-f") {
        (CodeGen, f_switch(f))
    } else if let Some(w) = flag.strip_prefix("-W") {
        (Warning, warning(w))
    } else {
        return None;
    };
    ok.then_some(class)
}

/// Lower-case-first word of ASCII letters, digits and `extra`.
fn word(s: &str, extra: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphanumeric())
        && cs.all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// C and CUDA keywords and built-in type names: a closed set. A macro with one of these names
/// (or a `_t` type name) would change what the ABI header `-include`d before the source means
/// (`-Dfloat=double`), so such names are refused as macro and tunable names.
pub const KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "alignas",
    "alignof",
    "bool",
    "constexpr",
    "false",
    "nullptr",
    "static_assert",
    "thread_local",
    "true",
    "typeof",
    "typeof_unqual",
    "asm",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_BitInt",
    "_Bool",
    "_Complex",
    "_Decimal32",
    "_Decimal64",
    "_Decimal128",
    "_Float16",
    "_Float32",
    "_Float64",
    "_Float128",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "__fp16",
    "__bf16",
    "__int128",
    "__restrict",
    "__restrict__",
    "__inline",
    "__inline__",
    "__const",
    "__volatile__",
    "__attribute__",
    "__typeof__",
    "__asm__",
    "__extension__",
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "__constant__",
    "__managed__",
    "__launch_bounds__",
];

/// Whether `name` may be defined as a macro (`-DNAME`, a tunable): a C identifier that is not a
/// keyword, a built-in type name or a `_t` type name (see [`KEYWORDS`]).
pub fn is_macro_name(name: &str) -> bool {
    is_identifier(name) && !KEYWORDS.contains(&name) && !name.ends_with("_t")
}

/// `NAME` or `NAME=VALUE` after `-D`.
fn define(d: &str) -> bool {
    let (name, value) = match d.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (d, None),
    };
    is_macro_name(name)
        && value.is_none_or(|v| {
            v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c))
        })
}

/// After `-m`: `arch=`, `tune=`, `cpu=`, `prefer-vector-width=`, `fpmath=` with a plain value,
/// or a feature switch `FEATURE` / `no-FEATURE`.
fn target(m: &str) -> bool {
    if let Some((key, value)) = m.split_once('=') {
        return matches!(
            key,
            "arch" | "tune" | "cpu" | "prefer-vector-width" | "fpmath"
        ) && word(value, "-._+");
    }
    let feature = m.strip_prefix("no-").unwrap_or(m);
    word(feature, "-.") && feature.chars().all(|c| !c.is_ascii_uppercase())
}

/// After `-f`: a family switch, or a `NAME=VALUE` from [`F_VALUES`].
fn f_switch(f: &str) -> bool {
    if let Some((name, value)) = f.split_once('=') {
        return F_VALUES.iter().any(|(n, values)| {
            *n == name
                && values.iter().any(|v| {
                    *v == value
                        || (*v == "#"
                            && !value.is_empty()
                            && value.chars().all(|c| c.is_ascii_digit()))
                })
        });
    }
    let name = f.strip_prefix("no-").unwrap_or(f);
    if F_REFUSED.iter().any(|(p, _)| name.starts_with(p)) {
        return false;
    }
    F_FAMILIES.iter().any(|fam| {
        name == *fam
            || name
                .strip_prefix(fam)
                .is_some_and(|r| r.starts_with('-') && word(&r[1..], "-"))
    })
}

/// After `-W`: empty (`-W`), `error`, `NAME`, `no-NAME`, `error=NAME`, `no-error=NAME`,
/// `NAME=N`; NAME at least two lower-case letters, digits, `-` or `+` (so the pass-through
/// `-Wl,` `-Wa,` `-Wp,` never match).
fn warning(w: &str) -> bool {
    if w.is_empty() {
        return true;
    }
    let name = w
        .strip_prefix("error=")
        .or_else(|| w.strip_prefix("no-error="))
        .unwrap_or(w);
    let (name, level) = match name.split_once('=') {
        Some((n, l)) => (n, Some(l)),
        None => (name, None),
    };
    // At least two characters: `-Wl`, `-Wa` and `-Wp` are the pass-through options' prefixes.
    let lower = |s: &str| {
        s.len() >= 2
            && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-+".contains(c))
    };
    lower(name) && level.is_none_or(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
}

fn cuda_class(flag: &str) -> Option<FlagClass> {
    use FlagClass::*;
    if matches!(flag, "-O0" | "-O1" | "-O2" | "-O3") {
        return Some(Optimization);
    }
    if matches!(flag, "-lineinfo" | "--generate-line-info") {
        return Some(Debug);
    }
    if matches!(
        flag,
        "-w" | "-Wno-deprecated-gpu-targets" | "-Wno-deprecated-declarations"
    ) {
        return Some(Warning);
    }
    if matches!(
        flag,
        "--use_fast_math"
            | "-use_fast_math"
            | "--extra-device-vectorization"
            | "-extra-device-vectorization"
            | "--restrict"
            | "-restrict"
            | "--expt-relaxed-constexpr"
            | "-expt-relaxed-constexpr"
            | "--expt-extended-lambda"
            | "-expt-extended-lambda"
            | "--extended-lambda"
    ) {
        return Some(CodeGen);
    }
    if let Some(v) = flag.strip_prefix("-std=").or(flag.strip_prefix("--std=")) {
        return matches!(v, "c++11" | "c++14" | "c++17" | "c++20").then_some(Standard);
    }
    if let Some(d) = flag.strip_prefix("-D") {
        return define(d).then_some(Macro);
    }
    if let Some(u) = flag.strip_prefix("-U") {
        return is_macro_name(u).then_some(Macro);
    }
    let opt = flag
        .strip_prefix("--")
        .or(flag.strip_prefix('-'))
        .unwrap_or(flag);
    let (key, value) = opt.split_once('=')?;
    let (class, ok) = match key {
        "arch" | "gpu-architecture" => (Target, gpu_arch(value)),
        "code" | "gpu-code" => (Target, value.split(',').all(gpu_arch)),
        "gencode" | "generate-code" => (Target, gencode(value)),
        "ftz" | "prec-div" | "prec-sqrt" | "fmad" => (CodeGen, matches!(value, "true" | "false")),
        "maxrregcount" => (
            CodeGen,
            !value.is_empty() && value.len() <= 4 && value.chars().all(|c| c.is_ascii_digit()),
        ),
        "Xptxas" | "ptxas-options" => (
            Driver,
            value.split(',').all(|o| {
                matches!(
                    o,
                    "-v" | "--verbose"
                        | "-O0"
                        | "-O1"
                        | "-O2"
                        | "-O3"
                        | "-warn-spills"
                        | "--warn-on-spills"
                        | "-warn-lmem-usage"
                        | "--warn-on-local-memory-usage"
                        | "-dlcm=ca"
                        | "-dlcm=cg"
                        | "-dlcm=cs"
                )
            }),
        ),
        _ => return None,
    };
    ok.then_some(class)
}

/// `sm_XX`, `compute_XX` (optionally with a letter suffix: `sm_90a`), `lto_XX`, `native`,
/// `all`, `all-major`.
fn gpu_arch(v: &str) -> bool {
    if matches!(v, "native" | "all" | "all-major") {
        return true;
    }
    let Some(n) = v
        .strip_prefix("sm_")
        .or(v.strip_prefix("compute_"))
        .or(v.strip_prefix("lto_"))
    else {
        return false;
    };
    let digits = n.trim_end_matches(|c: char| c.is_ascii_lowercase());
    (2..=3).contains(&digits.len())
        && digits.chars().all(|c| c.is_ascii_digit())
        && n.len() - digits.len() <= 1
}

/// `arch=compute_XX,code=sm_XX` (code may list several: `code=sm_90,compute_90`; a bracketed
/// list needs `[` which flags may not contain).
fn gencode(v: &str) -> bool {
    let Some(rest) = v.strip_prefix("arch=") else {
        return false;
    };
    let Some((arch, code)) = rest.split_once(",code=") else {
        return false;
    };
    gpu_arch(arch) && !code.is_empty() && code.split(',').all(gpu_arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(f: &str) -> Result<FlagClass, String> {
        check_flag(Language::C, f)
    }
    fn cu(f: &str) -> Result<FlagClass, String> {
        check_flag(Language::Cuda, f)
    }

    #[test]
    fn c_accepts_the_allowed_classes() {
        for f in [
            "-O0",
            "-O3",
            "-Os",
            "-Ofast",
            "-Og",
            "-march=native",
            "-march=x86-64-v3",
            "-mtune=znver3",
            "-mcpu=neoverse-v1",
            "-march=armv8.2-a+fp16",
            "-mavx2",
            "-mno-avx512f",
            "-mfma",
            "-msse4.2",
            "-mprefer-vector-width=512",
            "-ffast-math",
            "-fno-math-errno",
            "-funroll-loops",
            "-fopenmp",
            "-fopenmp-simd",
            "-fno-tree-vectorize",
            "-ftree-vectorize",
            "-ftree-loop-distribution",
            "-fomit-frame-pointer",
            "-fvect-cost-model=dynamic",
            "-fvect-cost-model=unlimited",
            "-ffp-contract=fast",
            "-fno-strict-aliasing",
            "-falign-loops=32",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
            "-Werror",
            "-Werror=vla",
            "-Wstrict-overflow=2",
            "-Wc++-compat",
            "-w",
            "-std=c11",
            "-std=gnu17",
            "-DBM=64",
            "-DNDEBUG",
            "-DEPS=1e-5f",
            "-DNEG=-3",
            "-UNDEBUG",
            "-g",
            "-pipe",
            "--param=max-unroll-times=8",
        ] {
            assert!(c(f).is_ok(), "{f}: {:?}", c(f));
        }
    }

    #[test]
    fn c_refuses_everything_else_with_a_reason() {
        for (f, why) in [
            ("-wrapper", "subprocesses"),
            ("/bin/sh,-c,touch /tmp/x", "not an option"),
            ("-B/tmp", "own programs"),
            ("-B", "own programs"),
            ("-specs=x", "specs file"),
            ("--specs=x", "specs file"),
            ("-fplugin=x.so", "plugin"),
            ("-fplugin-arg-x-y=z", "plugin"),
            ("@flags.txt", "response file"),
            ("-include", "reads a file"),
            ("-imacros", "reads a file"),
            ("-Wl,-rpath,.", "linker"),
            ("-Wa,-adhln", "assembler"),
            ("-Wp,-MD,x", "preprocessor"),
            ("-Xlinker", "linker"),
            ("-o", "output path"),
            ("-okernel.so", "output path"),
            ("-x", "source language"),
            ("-I.", "include directory"),
            ("-Isub", "include directory"),
            ("-L.", "library directory"),
            ("-lm", "links a library"),
            ("-MD", "dependency"),
            ("-MF", "dependency"),
            ("-save-temps", "intermediate"),
            ("-fprofile-generate", "profile"),
            ("-fprofile-use=x", "profile"),
            ("-fdump-tree-all", "dump"),
            ("-frecord-gcc-switches", "records"),
            ("-fstack-usage", ".su"),
            ("-flto", "link-time"),
            ("-fuse-ld=bfd", "linker program"),
            ("--param", "separate argument"),
            ("-DX=$(id)", "contains `$`"),
            ("-DX=`id`", "contains"),
            ("-DX=a b", "contains"),
            ("-DX;id", "contains `;`"),
            ("-D1X=2", "allow-list"),
            ("-D", "allow-list"),
            ("-std=c11 -x", "contains"),
            ("-Wl", "allow-list"),
            ("-march=../x", "contains `/`"),
            ("-mabi=lp64", "allow-list"),
            ("-fvect-cost-model=free", "allow-list"),
            ("-fsomething-new", "allow-list"),
            ("-shared", "allow-list"),
            ("-static", "allow-list"),
            ("-nostdlib", "allow-list"),
            ("", "empty"),
            ("-Xclang", "front end"),
            ("-Dfloat=double", "keyword or type name"),
            ("-Dint64_t=int", "keyword or type name"),
            ("-Dconst=", "keyword or type name"),
            ("-Ufloat", "keyword or type name"),
            ("-O3\n", "contains"),
        ] {
            let e = c(f).expect_err(f);
            assert!(e.contains("not allowed") && e.contains(why), "{f}: {e}");
        }
    }

    #[test]
    fn cuda_has_its_own_conservative_list() {
        for f in [
            "-O3",
            "-arch=sm_90",
            "-arch=sm_90a",
            "--gpu-architecture=compute_80",
            "-gencode=arch=compute_90,code=sm_90",
            "-gencode=arch=compute_90a,code=sm_90a,compute_90a",
            "--use_fast_math",
            "-lineinfo",
            "-Xptxas=-v",
            "-Xptxas=-v,-O3",
            "--ftz=true",
            "-maxrregcount=64",
            "-std=c++17",
            "-DBM=64",
        ] {
            assert!(cu(f).is_ok(), "{f}: {:?}", cu(f));
        }
        for f in [
            "-Xcompiler",
            "-Xcompiler=-fplugin=x.so",
            "-ccbin=x",
            "-ccbin",
            "-Xptxas",
            "-Xptxas=--output-file=x",
            "-Xlinker=-rpath",
            "--options-file=x",
            "-include",
            "-I.",
            "-o",
            "--keep",
            "-arch=sm_9x",
            "-ffast-math",
            "-DX=$(id)",
            "-wrapper",
        ] {
            assert!(cu(f).is_err(), "{f}");
        }
    }

    #[test]
    fn each_flag_is_admitted_by_its_class() {
        use FlagClass::*;
        for (f, class) in [
            ("-O3", Optimization),
            ("--param=max-unroll-times=8", Optimization),
            ("-march=native", Target),
            ("-mavx2", Target),
            ("-ffast-math", CodeGen),
            ("-Wall", Warning),
            ("-std=c11", Standard),
            ("-DBM=64", Macro),
            ("-g", Debug),
            ("-pipe", Driver),
        ] {
            assert_eq!(c(f), Ok(class), "{f}");
        }
        assert_eq!(cu("-gencode=arch=compute_90,code=sm_90"), Ok(Target));
        assert_eq!(cu("--use_fast_math"), Ok(CodeGen));
        assert_eq!(cu("-Xptxas=-v"), Ok(Driver));
    }

    #[test]
    fn python_solutions_take_no_flags() {
        assert!(check_flag(Language::Triton, "-O3").is_err());
        assert!(check_flag(Language::Pallas, "-O3").is_err());
    }

    #[test]
    fn too_many_flags_are_refused() {
        let flags = vec!["-O3".to_string(); MAX_FLAGS + 1];
        let p = check_flags(Language::C, &flags);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, MAX_FLAGS + 1);
    }
}
