//! The C driver that loads a candidate library and calls its entry point in a loop.
//!
//! The driver is generated per task and workload: every buffer size, distribution, scalar value
//! and axis value is a literal in its source. It talks to the profiler over a private
//! descriptor (a copy of its original stdout taken before the candidate is loaded; fd 1 then
//! points at the log), one line per event:
//!
//! - `ready` after the inputs are filled,
//! - `warm SECONDS` after the first (warm-up) call,
//! - `done CALLS SECONDS` after the timed loop (the warm-up call is counted alone when it took
//!   the whole budget),
//! - `timeout CALLS` when the watchdog timer fired (the kernel hangs or is far too slow),
//! - `signal NUMBER CALLS` when the kernel crashed,
//! - `error MESSAGE` / `note MESSAGE` for the driver's own problems.
//!
//! Usage: `driver LIBRARY BUDGET_SECONDS WATCHDOG_SECONDS CONTROL_FIFO|- [INPUTS_FILE]`; inputs
//! found in the safetensors `INPUTS_FILE` are read from it instead of drawn. When a control FIFO
//! is given the driver writes `enable` to it right before the warm-up call, so a
//! `perf record -D -1 --control fifo:...` run samples the kernel calls and not the setup.

use crate::inputs::Loaded;
use ksmith_task::{DType, Distribution, Task};
use std::collections::HashMap;

/// A generated driver.
pub(crate) struct Driver {
    /// C source.
    pub source: String,
    /// Bytes of all buffers together.
    pub bytes: u64,
    /// Things the profile reader should know (inputs we could not draw like the harness).
    pub notes: Vec<String>,
}

/// How one input tensor is filled (kind codes of the C `draw` function).
fn fill_kind(d: Option<&Distribution>, dtype: DType) -> (u32, f64, f64, Option<String>) {
    match d {
        Some(Distribution::Uniform { low, high }) => (0, *low, *high, None),
        Some(Distribution::Normal { mean, std }) => (1, *mean, *std, None),
        Some(Distribution::Integers { low, high }) => (2, *low as f64, *high as f64, None),
        Some(Distribution::Constant { value }) => (3, *value, 0.0, None),
        Some(Distribution::Generator { function }) => {
            if dtype.is_float() {
                (
                    0,
                    -1.0,
                    1.0,
                    Some(format!(
                        "drawn by `{function}` in the reference; the profile driver used U[-1, 1)"
                    )),
                )
            } else {
                (
                    3,
                    0.0,
                    0.0,
                    Some(format!(
                        "drawn by `{function}` in the reference; the profile driver filled it with 0 (a safe index, but zero lengths or counts can hide the real work; pass the judge's inputs to profile_c)"
                    )),
                )
            }
        }
        None if dtype.is_float() => (0, -1.0, 1.0, None),
        None => (3, 0.0, 0.0, None),
    }
}

/// A central, safe value for a scalar input.
fn scalar_value(d: Option<&Distribution>, dtype: DType) -> f64 {
    let v = match d {
        Some(Distribution::Constant { value }) => *value,
        Some(Distribution::Uniform { low, high }) => (low + high) / 2.0,
        Some(Distribution::Normal { mean, .. }) => *mean,
        Some(Distribution::Integers { low, high }) => ((low + high - 1) / 2) as f64,
        Some(Distribution::Generator { .. }) | None => {
            if dtype.is_float() {
                0.5
            } else {
                1.0
            }
        }
    };
    if dtype.is_float() {
        v
    } else {
        v.floor()
    }
}

/// A C double literal (always with a decimal point or exponent, never NaN/inf).
fn c_double(v: f64) -> String {
    if !v.is_finite() {
        return "0.0".into();
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// bfloat16 bits of a value (round to nearest even).
fn bf16_bits(v: f64) -> u16 {
    let x = (v as f32).to_bits();
    let r = x.wrapping_add(0x7fff + ((x >> 16) & 1));
    (r >> 16) as u16
}

/// The C argument expression for a scalar of `dtype` with value `v`.
pub(crate) fn scalar_arg(dtype: DType, v: f64) -> String {
    match dtype {
        DType::Float32 => format!("(float){}", c_double(v)),
        DType::Float64 => c_double(v),
        DType::Float16 => format!("(_Float16){}f", c_double(v)),
        DType::Bfloat16 => format!("(uint16_t){}", bf16_bits(v)),
        DType::Bool => format!("(uint8_t){}", u8::from(v != 0.0)),
        _ => format!("({})INT64_C({})", dtype.c_type(), v as i64),
    }
}

/// Store expression for one element `v` (a double) into `p[i]` of the given dtype.
fn store(dtype: DType) -> &'static str {
    match dtype {
        DType::Float32 => "((float*)p)[i] = (float)v;",
        DType::Float64 => "((double*)p)[i] = v;",
        DType::Float16 => "((uint16_t*)p)[i] = ks_f16((float)v);",
        DType::Bfloat16 => "((uint16_t*)p)[i] = ks_bf16((float)v);",
        DType::Int8 => "((int8_t*)p)[i] = (int8_t)ks_clamp(v, -128.0, 127.0);",
        DType::Int16 => "((int16_t*)p)[i] = (int16_t)ks_clamp(v, -32768.0, 32767.0);",
        DType::Int32 => "((int32_t*)p)[i] = (int32_t)ks_clamp(v, -2147483648.0, 2147483647.0);",
        DType::Int64 => "((int64_t*)p)[i] = (int64_t)ks_clamp(v, -9.2e18, 9.2e18);",
        DType::Uint8 => "((uint8_t*)p)[i] = (uint8_t)ks_clamp(v, 0.0, 255.0);",
        DType::Bool => "((uint8_t*)p)[i] = (uint8_t)(ks_clamp(v, 0.0, 1.0) != 0.0);",
    }
}

const PRELUDE: &str = r#"/* Generated by ksmith-profile: calls one kernel in a loop for sampling. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int ks_res = -1;
static volatile long ks_calls = 0;

static void ks_write(const char* s, size_t n) {
    while (n > 0) {
        ssize_t w = write(ks_res, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void ks_say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void ks_say(const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n') buf[i] = ' ';
    buf[n++] = '\n';
    ks_write(buf, (size_t)n);
}

/* Async-signal-safe decimal formatting. */
static size_t ks_utoa(char* out, unsigned long v) {
    char tmp[24];
    size_t n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static void ks_on_alarm(int sig) {
    (void)sig;
    char b[64] = "timeout ";
    size_t n = 8;
    n += ks_utoa(b + n, (unsigned long)ks_calls);
    b[n++] = '\n';
    ks_write(b, n);
    _exit(3);
}

static void ks_on_fatal(int sig) {
    char b[64] = "signal ";
    size_t n = 7;
    n += ks_utoa(b + n, (unsigned long)sig);
    b[n++] = ' ';
    n += ks_utoa(b + n, (unsigned long)ks_calls);
    b[n++] = '\n';
    ks_write(b, n);
    _exit(4);
}

static double ks_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t ks_rng = 0x9e3779b97f4a7c15ull;
static uint64_t ks_next(void) {
    uint64_t z = (ks_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double ks_uniform(void) { return (double)(ks_next() >> 11) * 0x1.0p-53; }

/* kind 0: U[a, b); 1: N(a, b) (Irwin-Hall, 4 terms); 2: integers [a, b); 3: constant a. */
static double ks_draw(int kind, double a, double b) {
    switch (kind) {
    case 0: return a + (b - a) * ks_uniform();
    case 1: {
        double s = ks_uniform() + ks_uniform() + ks_uniform() + ks_uniform();
        return a + b * (s - 2.0) * 1.7320508075688772;
    }
    case 2: {
        uint64_t span = (uint64_t)(b - a);
        return span ? a + (double)(ks_next() % span) : a;
    }
    default: return a;
    }
}

static double ks_clamp(double v, double lo, double hi) {
    v = floor(v);
    return v < lo ? lo : v > hi ? hi : v;
}

static uint16_t ks_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t e = (int32_t)((x >> 23) & 0xff);
    uint32_t mant = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int32_t exp = e - 127 + 15;
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
}

static uint16_t ks_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static int ks_load(const char* path, void* dst, uint64_t off, uint64_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char* p = (char*)dst;
    while (n > 0) {
        size_t chunk = n > (1ull << 30) ? (size_t)(1ull << 30) : (size_t)n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r <= 0) {
            close(fd);
            return 0;
        }
        p += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    close(fd);
    return 1;
}

static void* ks_alloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0) n = 64;
    void* p = aligned_alloc(64, n);
    if (p) memset(p, 0, n);
    return p;
}
"#;

/// Generates the driver for workload `w` of `task`, calling `entry`; inputs in `loaded` come
/// from the inputs file (the driver's fifth argument), the others are drawn.
pub(crate) fn generate(
    task: &Task,
    w: usize,
    entry: &str,
    loaded: &HashMap<String, Loaded>,
) -> Driver {
    let wl = &task.workloads[w];
    let mut notes = Vec::new();
    let mut bytes: u64 = 0;
    let mut src = String::from(PRELUDE);

    // The entry's type, built from types only (parameter names could clash with macros).
    let mut params = Vec::new();
    for i in &task.inputs {
        if i.is_scalar() {
            params.push(i.dtype.c_type().to_string());
        } else {
            params.push(format!("const {}*", i.dtype.c_type()));
        }
    }
    for o in &task.outputs {
        params.push(format!("{}*", o.tensor.dtype.c_type()));
    }
    for _ in &task.axes {
        params.push("int64_t".into());
    }
    let params = if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    };
    src.push_str(&format!("\ntypedef void ks_entry_fn({params});\n"));

    // Fill code and call arguments.
    let mut fill = String::new();
    let mut args = Vec::new();
    for (k, i) in task.inputs.iter().enumerate() {
        let dist = wl.inputs.iter().find(|(n, _)| n == &i.name).map(|(_, d)| d);
        let from_file = loaded.get(&i.name);
        if i.is_scalar() {
            args.push(match from_file {
                Some(Loaded::Scalar(lit)) => lit.clone(),
                _ => scalar_arg(i.dtype, scalar_value(dist, i.dtype)),
            });
            continue;
        }
        let n = i.numel(&wl.axes).max(0) as u64;
        let b = n * i.dtype.size() as u64;
        bytes += b;
        args.push(format!("(const {}*)in{k}", i.dtype.c_type()));
        if let Some(Loaded::Tensor { offset, bytes: nb }) = from_file {
            fill.push_str(&format!(
                "    void* in{k} = ks_alloc((size_t){b}ull);\n    if (!in{k}) {{ ks_say(\"error cannot allocate {b} bytes for input {name}\"); _exit(2); }}\n    if (argc < 6 || !ks_load(argv[5], in{k}, {offset}ull, {nb}ull)) {{ ks_say(\"error cannot read input {name} from the inputs file\"); _exit(2); }}\n",
                name = i.name,
            ));
            continue;
        }
        let (kind, a, bb, note) = fill_kind(dist, i.dtype);
        if let Some(note) = note {
            notes.push(format!("input `{}`: {note}", i.name));
        }
        fill.push_str(&format!(
            "    void* in{k} = ks_alloc((size_t){b}ull);\n    if (!in{k}) {{ ks_say(\"error cannot allocate {b} bytes for input {name}\"); _exit(2); }}\n    {{ void* p = in{k}; ks_rng = 0x9e3779b97f4a7c15ull * {seed}ull; for (size_t i = 0; i < (size_t){n}ull; i++) {{ double v = ks_draw({kind}, {a}, {bb}); {store} }} }}\n",
            name = i.name,
            seed = k + 1,
            a = c_double(a),
            bb = c_double(bb),
            store = store(i.dtype),
        ));
    }
    for (k, o) in task.outputs.iter().enumerate() {
        let n = o.tensor.numel(&wl.axes).max(0) as u64;
        let b = n * o.tensor.dtype.size() as u64;
        bytes += b;
        fill.push_str(&format!(
            "    void* out{k} = ks_alloc((size_t){b}ull);\n    if (!out{k}) {{ ks_say(\"error cannot allocate {b} bytes for output {name}\"); _exit(2); }}\n",
            name = o.tensor.name,
        ));
        args.push(format!("({}*)out{k}", o.tensor.dtype.c_type()));
    }
    for a in &task.axes {
        let v = wl.axes.get(&a.name).copied().unwrap_or(0);
        args.push(format!("(int64_t)INT64_C({v})"));
    }
    src.push_str(&format!("#define KS_CALL(fn) (fn)({})\n", args.join(", ")));

    src.push_str(&format!(
        r#"
int main(int argc, char** argv) {{
    if (argc < 5) return 2;
    const char* lib = argv[1];
    double budget = atof(argv[2]);
    double watchdog = atof(argv[3]);
    const char* ctl = argv[4];
    /* Results travel on a private copy of stdout; whatever the kernel prints goes to the log. */
    ks_res = fcntl(1, F_DUPFD_CLOEXEC, 10);
    if (ks_res < 0) return 2;
    dup2(2, 1);

    static char altstack[1 << 16];
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ks_on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    int fatal[] = {{SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGXCPU}};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], &sa, NULL);
    sa.sa_handler = ks_on_alarm;
    sigaction(SIGALRM, &sa, NULL);

    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {{ ks_say("error dlopen: %s", dlerror()); return 2; }}
    ks_entry_fn* fn = (ks_entry_fn*)dlsym(h, "{entry}");
    if (!fn) {{ ks_say("error dlsym {entry}: %s", dlerror()); return 2; }}

{fill}
    ks_say("ready");
    if (strcmp(ctl, "-") != 0) {{
        int fd = open(ctl, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {{
            if (write(fd, "enable\n", 7) != 7) ks_say("note cannot enable sampling: %s", strerror(errno));
            close(fd);
        }} else {{
            ks_say("note cannot open the perf control fifo: %s", strerror(errno));
        }}
    }}
    struct itimerval it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = (time_t)watchdog;
    it.it_value.tv_usec = (suseconds_t)((watchdog - (double)(time_t)watchdog) * 1e6);
    setitimer(ITIMER_REAL, &it, NULL);

    double t0 = ks_now();
    KS_CALL(fn);
    ks_calls = 1;
    double warm = ks_now() - t0;
    ks_say("warm %.9f", warm);
    if (warm >= budget) {{
        ks_say("done 1 %.9f", warm);
        _exit(0);
    }}
    long n = 0;
    double t1 = ks_now(), el;
    do {{
        KS_CALL(fn);
        n++;
        ks_calls++;
        el = ks_now() - t1;
    }} while (el < budget);
    ks_say("done %ld %.9f", n, el);
    _exit(0);
}}
"#
    ));
    Driver {
        source: src,
        bytes,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_c_doubles() {
        assert_eq!(c_double(1.0), "1.0");
        assert_eq!(c_double(-0.5), "-0.5");
        assert_eq!(c_double(1e-5), "1e-5");
        assert_eq!(c_double(f64::NAN), "0.0");
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(scalar_arg(DType::Int32, 3.0), "(int32_t)INT64_C(3)");
    }

    #[test]
    fn integer_generators_are_zero_filled_with_a_note() {
        let (kind, a, _, note) = fill_kind(
            Some(&Distribution::Generator {
                function: "make_table".into(),
            }),
            DType::Int32,
        );
        assert_eq!((kind, a), (3, 0.0));
        assert!(note.unwrap().contains("make_table"));
        assert_eq!(
            scalar_value(
                Some(&Distribution::Integers { low: 0, high: 10 }),
                DType::Int64
            ),
            4.0
        );
    }
}
