//! perf and binutils: discovery, probes, and parsers for their text output.

use crate::vecreport::own_file;
use crate::{Counters, HotLine, HotSymbol};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Sampling frequency of `perf record` (Hz).
pub(crate) const FREQUENCY: u32 = 2000;
/// Hot source lines kept.
pub(crate) const MAX_LINES: usize = 15;
/// Hot symbols kept.
pub(crate) const MAX_SYMBOLS: usize = 12;

/// The external tools a profile uses; `None` where missing.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub perf: Option<PathBuf>,
    pub addr2line: Option<PathBuf>,
    pub nm: Option<PathBuf>,
}

/// Finds `name` in `$PATH` (then /usr/bin, /bin).
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .filter(|d| !d.is_empty())
        .chain(["/usr/bin", "/bin", "/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        });
    found
}

impl Tools {
    pub fn detect() -> Tools {
        Tools {
            perf: which("perf"),
            addr2line: which("addr2line"),
            nm: which("nm"),
        }
    }
}

/// Runs a trusted helper with a wall-clock limit; returns (success, stdout, stderr).
pub(crate) fn run_capture(
    cmd: &mut Command,
    stdin: Option<String>,
    limit: Duration,
) -> std::io::Result<(bool, String, String)> {
    cmd.env("LC_ALL", "C")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let feeder = stdin.map(|s| {
        let mut w = child.stdin.take().expect("piped");
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = w.write_all(s.as_bytes());
        })
    });
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut err).take(1 << 20).read_to_end(&mut v);
        // Drain the rest so the child never blocks on a full pipe.
        let _ = std::io::copy(&mut err, &mut std::io::sink());
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait()? {
            Some(st) => break Some(st),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let out = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned();
    let mut err = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    if status.is_none() {
        err.push_str(&format!("\n(killed after {limit:?})"));
    }
    Ok((status.is_some_and(|s| s.success()), out, err))
}

/// Whether `perf record` understands `-D -1 --control fifo:...` (perf >= 5.10).
pub(crate) fn perf_has_control(perf: &Path) -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        run_capture(
            Command::new(perf).args(["record", "-h"]),
            None,
            Duration::from_secs(20),
        )
        .map(|(_, o, e)| format!("{o}{e}").contains("--control"))
        .unwrap_or(false)
    })
}

/// Probes once whether hardware cycle and instruction counters can be read.
pub(crate) fn hardware_counters(perf: &Path) -> Result<(), String> {
    static OK: OnceLock<Result<(), String>> = OnceLock::new();
    OK.get_or_init(|| {
        let (_, out, err) = run_capture(
            Command::new(perf).args(["stat", "-x", ",", "-e", "cycles,instructions", "--", "true"]),
            None,
            Duration::from_secs(20),
        )
        .map_err(|e| e.to_string())?;
        match parse_stat(&format!("{out}\n{err}")) {
            Some(_) => Ok(()),
            None => {
                let line = err
                    .lines()
                    .chain(out.lines())
                    .find(|l| l.contains("cycles"))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                Err(if line.contains("<not supported>") {
                    "perf stat -e cycles: not supported".into()
                } else if line.contains("<not counted>") {
                    "perf stat -e cycles: not counted".into()
                } else if line.is_empty() {
                    format!("perf stat could not count cycles: {}", err.trim())
                } else {
                    format!("perf stat -e cycles: {line}")
                })
            }
        }
    })
    .clone()
}

/// Parses `perf stat -x,` output: cycles and instructions when both were counted.
pub(crate) fn parse_stat(text: &str) -> Option<Counters> {
    let mut cycles = None;
    let mut instructions = None;
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() < 3 {
            continue;
        }
        let Ok(v) = f[0].trim().parse::<f64>() else {
            continue;
        };
        let ev = f[2].trim();
        let base = ev.split(':').next().unwrap_or(ev);
        match base {
            "cycles" | "cpu-cycles" => cycles = Some(v as u64),
            "instructions" => instructions = Some(v as u64),
            _ if base.ends_with("/cycles/") => cycles = Some(v as u64),
            _ if base.ends_with("/instructions/") => instructions = Some(v as u64),
            _ => {}
        }
    }
    let (cycles, instructions) = (cycles?, instructions?);
    if cycles == 0 {
        return None;
    }
    Some(Counters {
        cycles,
        instructions,
        ipc: instructions as f64 / cycles as f64,
    })
}

/// One sample of `perf script -F ip,sym,symoff,dso`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub sym: String,
    pub off: Option<u64>,
    pub dso: String,
}

/// Parses one `perf script -F ip,sym,symoff,dso` line:
/// `    7f755033b235 matmul+0x125 (/tmp/pf/kernel.so)`.
pub(crate) fn parse_sample(line: &str) -> Option<Sample> {
    let l = line.trim();
    let (_ip, rest) = l.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    let (symoff, dso) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (rest[..i].trim(), &rest[i + 2..rest.len() - 1]),
        _ if rest.starts_with('(') && rest.ends_with(')') => ("", &rest[1..rest.len() - 1]),
        _ => (rest, ""),
    };
    let (sym, off) = match symoff.rsplit_once("+0x") {
        Some((s, o)) => (s, u64::from_str_radix(o, 16).ok()),
        None => (symoff, None),
    };
    let sym = if sym.is_empty() { "[unknown]" } else { sym };
    Some(Sample {
        sym: sym.to_string(),
        off,
        dso: dso.to_string(),
    })
}

/// Short display name of a DSO (`kernel.so`, `libgomp.so.1`, `kernel` for the OS).
pub(crate) fn dso_name(dso: &str) -> String {
    if dso.starts_with("[kernel") {
        return "kernel".into();
    }
    if dso.is_empty() {
        return "?".into();
    }
    Path::new(dso)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(dso)
        .to_string()
}

/// Defined symbols of an ELF file and their addresses (`nm --defined-only`).
pub(crate) fn parse_nm(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for l in text.lines() {
        let mut it = l.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(kind, "T" | "t" | "W" | "w" | "i") {
            continue;
        }
        if let Ok(a) = u64::from_str_radix(addr, 16) {
            m.entry(name.to_string()).or_insert(a);
        }
    }
    m
}

/// Parses `addr2line -i -a` output: for each address, its inline chain innermost first
/// (`(file, line)`; unknown frames are dropped).
pub(crate) fn parse_addr2line(text: &str) -> Chains {
    let mut m: Chains = HashMap::new();
    let mut cur: Option<u64> = None;
    for l in text.lines() {
        let l = l.trim();
        if let Some(hex) = l.strip_prefix("0x") {
            if let Ok(a) = u64::from_str_radix(hex, 16) {
                cur = Some(a);
                m.entry(a).or_default();
                continue;
            }
        }
        let Some(a) = cur else { continue };
        let l = match l.find(" (discriminator") {
            Some(i) => &l[..i],
            None => l,
        };
        let Some((file, line)) = l.rsplit_once(':') else {
            continue;
        };
        let Ok(line) = line.trim().parse::<u32>() else {
            continue;
        };
        if file == "??" || line == 0 {
            continue;
        }
        m.entry(a).or_default().push((file.to_string(), line));
    }
    m
}

/// Inline chains per library address, innermost frame first.
pub(crate) type Chains = HashMap<u64, Vec<(String, u32)>>;

/// What the samples of one run say.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub total: u64,
    pub in_library: u64,
    pub hot_lines: Vec<HotLine>,
    pub hot_symbols: Vec<HotSymbol>,
    pub notes: Vec<String>,
}

fn percent(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        (10000.0 * n as f64 / total as f64).round() / 100.0
    }
}

/// Aggregates samples: per symbol over all samples, per source line for the library's samples
/// (the first frame of each sample's inline chain that lies in one of `files`, so code inlined
/// from intrinsics headers counts on the candidate's line that used it).
pub(crate) fn analyze(
    samples: &[Sample],
    library: &Path,
    symbols: &HashMap<String, u64>,
    lines: &dyn Fn(&[u64]) -> Result<Chains, String>,
    files: &[String],
    sources: &[(String, String)],
) -> Analysis {
    let mut a = Analysis {
        total: samples.len() as u64,
        ..Analysis::default()
    };
    let lib = library.to_string_lossy();
    let mut by_sym: HashMap<(String, String), u64> = HashMap::new();
    let mut by_addr: HashMap<u64, u64> = HashMap::new();
    let mut unresolved = 0u64;
    for s in samples {
        let in_lib = s.dso == lib;
        *by_sym.entry((s.sym.clone(), dso_name(&s.dso))).or_default() += 1;
        if in_lib {
            a.in_library += 1;
            match (symbols.get(&s.sym), s.off) {
                (Some(base), Some(off)) => *by_addr.entry(base + off).or_default() += 1,
                _ => unresolved += 1,
            }
        }
    }
    // The operating system's samples are one entry naming its top functions (page faults,
    // interrupts and scheduling are rarely worth a line each).
    let mut os: Vec<(String, u64)> = Vec::new();
    let mut syms: Vec<((String, String), u64)> = Vec::new();
    for ((sym, dso), n) in by_sym {
        if dso == "kernel" {
            os.push((sym, n));
        } else {
            syms.push(((sym, dso), n));
        }
    }
    if !os.is_empty() {
        os.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        let n = os.iter().map(|(_, n)| n).sum();
        let top: Vec<&str> = os.iter().take(3).map(|(s, _)| s.as_str()).collect();
        syms.push((
            (
                format!("OS kernel (top: {})", top.join(", ")),
                "kernel".into(),
            ),
            n,
        ));
    }
    syms.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    a.hot_symbols = syms
        .into_iter()
        .take(MAX_SYMBOLS)
        .map(|((sym, dso), n)| HotSymbol {
            symbol: if sym == "[unknown]"
                && (dso.starts_with("libgomp") || dso.starts_with("libomp"))
            {
                format!("OpenMP runtime internals: barriers, idle spinning [{dso}]")
            } else {
                format!("{sym} [{dso}]")
            },
            percent: percent(n, a.total),
        })
        .collect();
    // A few samples on PLT stubs and the like have no symbol in `nm`; only many matter.
    if unresolved > 10 && unresolved * 20 > a.in_library {
        a.notes.push(format!(
            "{unresolved} samples in the library could not be mapped to an address (no symbol)"
        ));
    }
    if by_addr.is_empty() {
        return a;
    }
    let mut addrs: Vec<u64> = by_addr.keys().copied().collect();
    addrs.sort_unstable();
    let chains = match lines(&addrs) {
        Ok(c) => c,
        Err(e) => {
            a.notes.push(format!("no source lines: {e}"));
            return a;
        }
    };
    let mut by_line: HashMap<(String, u32), u64> = HashMap::new();
    let mut outside = 0u64;
    for (addr, n) in &by_addr {
        let chain = chains.get(addr).map(Vec::as_slice).unwrap_or(&[]);
        match chain
            .iter()
            .find_map(|(f, l)| own_file(f, files).map(|f| (f.to_string(), *l)))
        {
            Some(key) => *by_line.entry(key).or_default() += n,
            None => outside += n,
        }
    }
    if outside > 0 && a.in_library > 0 {
        a.notes.push(format!(
            "{:.1}% of the library's samples have no line in the candidate's sources (no debug info or compiler-generated code)",
            100.0 * outside as f64 / a.in_library as f64
        ));
    }
    let mut lines: Vec<((String, u32), u64)> = by_line.into_iter().collect();
    lines.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    a.hot_lines = lines
        .into_iter()
        .take(MAX_LINES)
        .map(|((file, line), n)| HotLine {
            text: source_line(sources, &file, line),
            file,
            line,
            percent: percent(n, a.total),
        })
        .collect();
    a
}

/// The trimmed text of `file:line` in the solution's sources (empty when out of range).
pub(crate) fn source_line(sources: &[(String, String)], file: &str, line: u32) -> String {
    let Some((_, text)) = sources.iter().find(|(n, _)| n == file) else {
        return String::new();
    };
    let t = text
        .lines()
        .nth(line.saturating_sub(1) as usize)
        .unwrap_or("")
        .trim();
    if t.chars().count() > 160 {
        let cut: String = t.chars().take(157).collect();
        format!("{cut}...")
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_script_lines() {
        let s = parse_sample("     7f755033b235 matmul+0x125 (/tmp/pf/kernel.so)").unwrap();
        assert_eq!(
            s,
            Sample {
                sym: "matmul".into(),
                off: Some(0x125),
                dso: "/tmp/pf/kernel.so".into()
            }
        );
        let s = parse_sample(" ffffffff81473711 map_id_range_up+0x21 ([kernel.kallsyms])").unwrap();
        assert_eq!(dso_name(&s.dso), "kernel");
        let s = parse_sample("     7f0000001000 [unknown] (/tmp/x/kernel.so)").unwrap();
        assert_eq!((s.sym.as_str(), s.off), ("[unknown]", None));
        let s = parse_sample("     7f0000001000 [unknown] ([unknown])").unwrap();
        assert_eq!(s.dso, "[unknown]");
        let s = parse_sample("  401000 matmul._omp_fn.0+0x1f (/a b/kernel.so)").unwrap();
        assert_eq!(
            (s.sym.as_str(), s.dso.as_str()),
            ("matmul._omp_fn.0", "/a b/kernel.so")
        );
        assert!(parse_sample("").is_none());
    }

    #[test]
    fn parses_addr2line_inline_chains() {
        let t = "0x0000000000001235\n/usr/lib/gcc/x86_64-linux-gnu/12/include/fmaintrin.h:65 (discriminator 2)\n/tmp/pf/k2.c:13 (discriminator 2)\n0x0000000000009999\n??:0\n";
        let m = parse_addr2line(t);
        assert_eq!(m[&0x1235].len(), 2);
        assert_eq!(m[&0x1235][1], ("/tmp/pf/k2.c".to_string(), 13));
        assert!(m[&0x9999].is_empty());
    }

    #[test]
    fn parses_nm_and_stat() {
        let m = parse_nm("0000000000001110 T matmul\n0000000000004008 d __dso_handle\n00000000000010c0 t helper\n");
        assert_eq!(m.get("matmul"), Some(&0x1110));
        assert_eq!(m.get("helper"), Some(&0x10c0));
        assert!(!m.contains_key("__dso_handle"));
        let c = parse_stat("4000000,,cycles,1000,100.00,,\n6000000,,instructions,1000,100.00,1.50,insn per cycle\n").unwrap();
        assert_eq!((c.cycles, c.instructions), (4_000_000, 6_000_000));
        assert!((c.ipc - 1.5).abs() < 1e-9);
        assert!(parse_stat(
            "<not supported>,,cycles,0,100.00,,\n<not supported>,,instructions,0,100.00,,\n"
        )
        .is_none());
        let c = parse_stat("10,,cpu_core/cycles/,1,100,,\n20,,cpu_core/instructions/,1,100,,\n")
            .unwrap();
        assert_eq!(c.instructions, 20);
    }

    #[test]
    fn analysis_attributes_inlined_header_code_to_the_candidate_line() {
        let lib = Path::new("/w/kernel.so");
        let samples: Vec<Sample> = [
            ("matmul", Some(0x10), "/w/kernel.so"),
            ("matmul", Some(0x10), "/w/kernel.so"),
            ("matmul", Some(0x20), "/w/kernel.so"),
            ("gomp_barrier_wait_end", Some(1), "/usr/lib/libgomp.so.1"),
        ]
        .iter()
        .map(|(s, o, d)| Sample {
            sym: s.to_string(),
            off: *o,
            dso: d.to_string(),
        })
        .collect();
        let mut syms = HashMap::new();
        syms.insert("matmul".to_string(), 0x1000u64);
        let lines = |addrs: &[u64]| -> Result<Chains, String> {
            assert_eq!(addrs, &[0x1010, 0x1020]);
            let mut m = HashMap::new();
            m.insert(
                0x1010,
                vec![
                    ("/usr/include/fmaintrin.h".to_string(), 65),
                    ("/b/kernel.c".into(), 3),
                ],
            );
            m.insert(0x1020, vec![("/b/kernel.c".to_string(), 2)]);
            Ok(m)
        };
        let sources = vec![(
            "kernel.c".to_string(),
            "a\n  b;  \n c = fma();\n".to_string(),
        )];
        let a = analyze(&samples, lib, &syms, &lines, &["kernel.c".into()], &sources);
        assert_eq!((a.total, a.in_library), (4, 3));
        assert_eq!(a.hot_lines[0].line, 3);
        assert_eq!(a.hot_lines[0].text, "c = fma();");
        assert_eq!(a.hot_lines[0].percent, 50.0);
        assert_eq!(a.hot_lines[1].text, "b;");
        assert_eq!(a.hot_symbols[0].symbol, "matmul [kernel.so]");
        assert_eq!(a.hot_symbols[0].percent, 75.0);
        assert_eq!(
            a.hot_symbols[1].symbol,
            "gomp_barrier_wait_end [libgomp.so.1]"
        );
    }
}
