//! `ksmith hw`: the machine's measured roofline (memory bandwidth, peak FP32) and facts
//! (cores, caches, SIMD flags, compilers), cached on disk.

use crate::c::{BackendError, Compiler, DEFAULT_FLAGS};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

const BENCH_SRC: &str = include_str!("hw_bench.c");

/// One cache level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheLevel {
    /// 1, 2, 3.
    pub level: u32,
    /// Data, Instruction or Unified.
    pub kind: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// Measured roofline and machine facts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hardware {
    /// CPU model name.
    pub cpu: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// Cache hierarchy of cpu0.
    pub caches: Vec<CacheLevel>,
    /// SIMD-related CPU flags.
    pub simd: Vec<String>,
    /// Compiler version lines (`cc`, `gcc`, `clang` when present).
    pub compilers: Vec<String>,
    /// Triad bandwidth over buffers far larger than the last-level cache, all cores (bytes/s).
    pub dram_bandwidth: f64,
    /// Triad bandwidth over cache-resident buffers, all cores (bytes/s).
    pub cache_bandwidth: f64,
    /// FMA-loop peak with the widest SIMD, all cores (FLOP/s).
    pub peak_fp32_flops: f64,
    /// SIMD width the peak loop used.
    pub vector_bits: u32,
    /// Threads used by the measurements.
    pub threads: usize,
    /// When it was measured (seconds since the epoch).
    pub measured_at: u64,
    /// The machine's 1-minute load average just before it was measured (None: unknown).
    #[serde(default)]
    pub load_at_measure: Option<f64>,
    /// Identity used to invalidate the cache: CPU, cores, compiler.
    pub fingerprint: String,
}

/// The machine's 1-minute load average (Linux), if it can be read.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
}

/// Whether a load average means at least half the machine's cores were busy with other work.
fn busy(load: f64, cores: usize) -> bool {
    load >= 0.5 * cores.max(1) as f64
}

impl Hardware {
    /// Whether the measurement was taken while other work held half the cores or more (its
    /// peaks are then probably low).
    pub fn looks_disturbed(&self) -> bool {
        self.load_at_measure.is_some_and(|l| busy(l, self.cores))
    }

    /// Whether a cached measurement should be taken again now, the load being `load_now`: it
    /// was taken on a busy machine and this one is quiet.
    pub fn remeasure_when(&self, load_now: Option<f64>) -> bool {
        self.looks_disturbed() && load_now.is_some_and(|l| !busy(l, self.cores))
    }

    /// Last-level cache size in bytes (0 if unknown).
    pub fn llc_bytes(&self) -> u64 {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .map(|c| (c.level, c.bytes))
            .max()
            .map(|(_, b)| b)
            .unwrap_or(0)
    }

    /// Bandwidth that bounds a working set of `bytes`: the cache triad when it stays in the
    /// last-level cache between calls (fits in half of it and no flush), else the DRAM triad.
    pub fn bandwidth_for(&self, bytes: f64, flushed: bool) -> f64 {
        if !flushed && bytes > 0.0 && bytes < self.llc_bytes() as f64 / 2.0 {
            // A cache-resident set is never slower than DRAM, whatever a noisy measurement said.
            self.cache_bandwidth.max(self.dram_bandwidth)
        } else {
            self.dram_bandwidth
        }
    }

    /// Roofline time floor in seconds for a workload.
    pub fn floor_seconds(&self, flops: f64, bytes: f64, flushed: bool) -> f64 {
        (flops / self.peak_fp32_flops).max(bytes / self.bandwidth_for(bytes, flushed))
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn simd_flags() -> Vec<String> {
    let flags = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.to_string())
        })
        .unwrap_or_default();
    flags
        .split_whitespace()
        .filter(|f| {
            ["sse4_2", "avx", "avx2", "fma", "f16c"].contains(f)
                || f.starts_with("avx512")
                || f.starts_with("amx")
        })
        .map(str::to_string)
        .collect()
}

fn caches() -> Vec<CacheLevel> {
    let mut out = Vec::new();
    for i in 0..8 {
        let d = PathBuf::from(format!("/sys/devices/system/cpu/cpu0/cache/index{i}"));
        let read = |f: &str| {
            std::fs::read_to_string(d.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            break;
        };
        let bytes = size
            .strip_suffix('K')
            .and_then(|n| n.parse::<u64>().ok().map(|n| n << 10))
            .or_else(|| {
                size.strip_suffix('M')
                    .and_then(|n| n.parse::<u64>().ok().map(|n| n << 20))
            })
            .or_else(|| size.parse().ok())
            .unwrap_or(0);
        out.push(CacheLevel {
            level: level.parse().unwrap_or(0),
            kind,
            bytes,
        });
    }
    out
}

fn compiler_versions() -> Vec<String> {
    ["cc", "gcc", "clang"]
        .iter()
        .filter_map(|c| {
            let o = Command::new(c).arg("--version").output().ok()?;
            o.status.success().then(|| {
                format!(
                    "{c}: {}",
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim()
                )
            })
        })
        .collect()
}

impl Hardware {
    /// Keeps the higher of two measurements of each peak: contention only ever lowers a peak.
    pub fn merge_max(&mut self, other: &Hardware) {
        self.dram_bandwidth = self.dram_bandwidth.max(other.dram_bandwidth);
        self.cache_bandwidth = self.cache_bandwidth.max(other.cache_bandwidth);
        self.peak_fp32_flops = self.peak_fp32_flops.max(other.peak_fp32_flops);
        self.measured_at = other.measured_at;
        // The kept peaks come from the quieter of the two.
        self.load_at_measure = match (self.load_at_measure, other.load_at_measure) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Writes the measurement to `path` atomically.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, path)
    }
}

/// The CPU as compiled code sees it: model and vector extensions (programs compiled for one
/// may not run on another).
pub fn cpu_identity() -> String {
    format!("{} | {}", cpu_model(), simd_flags().join(" "))
}

/// Identity of the machine for cache invalidation.
pub fn fingerprint(compiler: &Compiler) -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{} | {} cores | {}", cpu_model(), cores, compiler.version)
}

/// Errors measuring the machine.
#[derive(Debug, thiserror::Error)]
pub enum HwError {
    /// Compiler problem.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The microbenchmark failed.
    #[error("hardware microbenchmark failed: {0}")]
    Bench(String),
}

/// Measures the machine now (takes a few seconds).
pub fn measure(compiler: &Compiler, threads: usize) -> Result<Hardware, HwError> {
    let load_before = load_average();
    let dir = tempfile::tempdir().map_err(|e| HwError::Bench(e.to_string()))?;
    let src = dir.path().join("hw_bench.c");
    std::fs::write(&src, BENCH_SRC).map_err(|e| HwError::Bench(e.to_string()))?;
    let exe = dir.path().join("hw_bench");
    let flags: Vec<&str> = DEFAULT_FLAGS
        .iter()
        .copied()
        .filter(|f| !matches!(*f, "-shared" | "-fPIC"))
        .collect();
    let out = Command::new(&compiler.command)
        .args(&flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| HwError::Bench(e.to_string()))?;
    if !out.status.success() {
        return Err(HwError::Bench(format!(
            "compiling the microbenchmark: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let caches = caches();
    let llc = caches.iter().map(|c| c.bytes).max().unwrap_or(32 << 20);
    // DRAM triad: 3 arrays, together 16x the LLC (at least 256 MiB). Cache triad: a quarter of the LLC.
    let big = ((llc * 16).max(256 << 20) / 12).max(1 << 20);
    let small = (llc / 4 / 12).max(4096);
    let run = Command::new(&exe)
        .arg(big.to_string())
        .arg(small.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .output()
        .map_err(|e| HwError::Bench(e.to_string()))?;
    if !run.status.success() {
        return Err(HwError::Bench(format!(
            "running the microbenchmark: {}",
            String::from_utf8_lossy(&run.stderr)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&run.stdout)
        .map_err(|e| HwError::Bench(format!("bad output: {e}")))?;
    let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    Ok(Hardware {
        cpu: cpu_model(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        caches,
        simd: simd_flags(),
        compilers: compiler_versions(),
        dram_bandwidth: f("dram_bytes_per_s"),
        cache_bandwidth: f("cache_bytes_per_s"),
        peak_fp32_flops: f("fp32_flops_per_s"),
        vector_bits: f("vector_bits") as u32,
        threads: f("threads") as usize,
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        load_at_measure: load_before,
        fingerprint: fingerprint(compiler),
    })
}

/// Loads the cached measurement for this machine from `path`, or measures and caches it.
pub fn load_or_measure(
    path: &Path,
    compiler: &Compiler,
    threads: usize,
    refresh: bool,
) -> Result<(Hardware, bool), HwError> {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    // One measurement at a time: concurrent ones would disturb each other's numbers.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("lock"));
    let _guard = lock
        .ok()
        .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
    if !refresh {
        if let Some(hw) = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Hardware>(&b).ok())
        {
            if hw.fingerprint == fingerprint(compiler) && hw.threads == threads {
                // Taken on a busy machine and the machine is quiet now: measured again, keeping
                // the higher peaks (contention only ever lowers them).
                if !hw.remeasure_when(load_average()) {
                    return Ok((hw, true));
                }
                let mut hw = hw;
                if let Ok(fresh) = measure(compiler, threads) {
                    hw.merge_max(&fresh);
                    let _ = hw.save(path);
                }
                return Ok((hw, false));
            }
        }
    }
    let hw = measure(compiler, threads)?;
    // The cache is an optimisation: failing to write it must not fail the command.
    let _ = hw.save(path);
    Ok((hw, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: usize, load: Option<f64>, dram: f64) -> Hardware {
        Hardware {
            cpu: "test".into(),
            cores,
            caches: vec![],
            simd: vec![],
            compilers: vec![],
            dram_bandwidth: dram,
            cache_bandwidth: dram * 4.0,
            peak_fp32_flops: 1e11,
            vector_bits: 256,
            threads: cores,
            measured_at: 0,
            load_at_measure: load,
            fingerprint: "f".into(),
        }
    }

    #[test]
    fn a_measurement_taken_on_a_busy_machine_is_taken_again_once_it_is_quiet() {
        let busy = machine(2, Some(1.5), 5e9);
        assert!(busy.looks_disturbed());
        assert!(busy.remeasure_when(Some(0.2)));
        assert!(
            !busy.remeasure_when(Some(1.8)),
            "still busy: no better figure to get"
        );
        assert!(!busy.remeasure_when(None));
        let quiet = machine(2, Some(0.3), 5e9);
        assert!(!quiet.looks_disturbed());
        assert!(!quiet.remeasure_when(Some(0.0)));
        // Old records without a load are left alone.
        assert!(!machine(2, None, 5e9).remeasure_when(Some(0.0)));
    }

    #[test]
    fn merging_keeps_the_higher_peaks_and_the_quieter_load() {
        let mut a = machine(2, Some(1.5), 5e9);
        a.merge_max(&machine(2, Some(0.1), 12e9));
        assert_eq!(a.dram_bandwidth, 12e9);
        assert_eq!(a.load_at_measure, Some(0.1));
        assert!(!a.looks_disturbed());
        let mut b = machine(2, Some(0.1), 12e9);
        b.merge_max(&machine(2, Some(1.9), 3e9));
        assert_eq!(b.dram_bandwidth, 12e9);
        assert_eq!(b.load_at_measure, Some(0.1));
    }
}
