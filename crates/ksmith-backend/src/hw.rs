//! `ksmith hw`: the machine's measured roofline (memory bandwidth, peak FP32) and facts
//! (cores, caches, SIMD flags, compilers), cached on disk.

use crate::c::{BackendError, Compiler, DEFAULT_FLAGS};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

const BENCH_SRC: &str = include_str!("hw_bench.c");

mod floor;

pub use floor::{derive_levels, Floor, FloorRaise, FloorTerm, RaisedBy};

/// Version of `hw.json`'s format: a file of another version is measured again, never read as
/// this one (version 1, unnumbered: one triad per tier and the reported cache sizes).
pub const HW_FORMAT: u32 = 2;

/// Working sets of the cache sweep: from 16 KiB ...
const SWEEP_MIN_BYTES: u64 = 16 << 10;
/// ... to 1 GiB (less where memory is short), ...
const SWEEP_MAX_BYTES: u64 = 1 << 30;
/// ... two sizes per doubling.
const SWEEP_STEPS_PER_OCTAVE: u32 = 2;

/// One cache level as the system reports it (on a VM, often the whole socket's; see
/// [`Hardware::levels`] for what is measured).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheLevel {
    /// 1, 2, 3.
    pub level: u32,
    /// Data, Instruction or Unified.
    pub kind: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// A stream kernel of the DRAM measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKernel {
    /// A sum over one array (reads only).
    Read,
    /// `a[i] = b[i]`.
    Copy,
    /// `a[i] = b[i] + s * c[i]`.
    Triad,
}

/// How a stream kernel stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stores {
    /// It stores nothing (the read kernel).
    None,
    /// Ordinary stores (each line read for ownership first).
    Plain,
    /// Streaming (non-temporal) stores, past the caches.
    Streaming,
}

/// One stream kernel's bandwidth over buffers far larger than the measured caches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamFigure {
    /// The kernel.
    pub kernel: StreamKernel,
    /// Its stores.
    pub stores: Stores,
    /// Threads it ran on (every core, or one).
    pub threads: usize,
    /// Bytes per second, every array counted once (as a task's byte formula counts them).
    pub bytes_per_s: f64,
}

/// Read bandwidth over one working-set size (the cache sweep).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The working set, all threads together.
    pub bytes: u64,
    /// Bytes read per second, every core.
    pub bytes_per_s: f64,
}

/// A memory level as measured: working sets up to `capacity_bytes` read at `bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryLevel {
    /// The largest swept working set (all cores together) still read at this level's speed.
    pub capacity_bytes: u64,
    /// The best read bandwidth of the working sets in this level (bytes/s).
    pub bandwidth: f64,
}

/// Whether the machine was held quiet while it was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceLock {
    /// Under the judge's exclusive device lease: no timing of this store ran beside it.
    Exclusive,
    /// Without the device lock (tests, the lock turned off, or it could not be opened).
    None,
}

/// How the roofline was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Method {
    /// Whether the device lock was held.
    pub device_lock: DeviceLock,
    /// Bytes every stream kernel worked over (its arrays together).
    pub stream_bytes: u64,
    /// Smallest and largest working set of the cache sweep.
    pub sweep_bytes: (u64, u64),
    /// Streaming-store instruction used (`avx512`, `avx`, `sse2`, `builtin`; `none`: plain stores).
    pub nontemporal: String,
    /// Wall time of the whole measurement, compiling included (seconds).
    pub seconds: f64,
}

/// Measured roofline and machine facts (`.ksmith/hw.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hardware {
    /// Format version ([`HW_FORMAT`]).
    pub format: u32,
    /// CPU model name.
    pub cpu: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// Cache hierarchy of cpu0 as the system reports it (shown, never used for a floor).
    pub caches: Vec<CacheLevel>,
    /// SIMD-related CPU flags.
    pub simd: Vec<String>,
    /// Compiler version lines (`cc`, `gcc`, `clang` when present).
    pub compilers: Vec<String>,
    /// Measured DRAM bandwidth (bytes/s): the best of [`Hardware::streams`] and the sweep's
    /// largest set (the floor's own is [`Hardware::dram_floor_bandwidth`], raises included).
    pub dram_bandwidth: f64,
    /// Every stream kernel's figure over buffers past the measured caches.
    pub streams: Vec<StreamFigure>,
    /// Read bandwidth per working-set size, smallest first.
    pub sweep: Vec<SweepPoint>,
    /// Cache levels derived from where the sweep's bandwidth drops, smallest first (each
    /// faster than DRAM; none when nothing was faster).
    pub levels: Vec<MemoryLevel>,
    /// FMA-loop peak with the widest SIMD, all cores (FLOP/s; the floor's own is
    /// [`Hardware::peak_floor_flops`], raises included).
    pub peak_fp32_flops: f64,
    /// SIMD width the peak loop used.
    pub vector_bits: u32,
    /// Threads used by the measurements.
    pub threads: usize,
    /// When it was measured (seconds since the epoch).
    pub measured_at: u64,
    /// The machine's 1-minute load average just before it was measured (None: unknown).
    pub load_at_measure: Option<f64>,
    /// How it was measured.
    pub method: Method,
    /// Floors raised because a correct kernel ran faster than them, oldest first (kept apart
    /// from the measured figures: `implausible_speed` is judged against those).
    #[serde(default)]
    pub raises: Vec<FloorRaise>,
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

    /// Last-level cache size in bytes as the system reports it (0 if unknown); on a VM often
    /// far more than this machine's share, so no floor uses it.
    pub fn llc_bytes(&self) -> u64 {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .map(|c| (c.level, c.bytes))
            .max()
            .map(|(_, b)| b)
            .unwrap_or(0)
    }

    /// The largest measured cache capacity in bytes (0: no level was faster than DRAM).
    pub fn effective_llc_bytes(&self) -> u64 {
        self.levels.last().map_or(0, |l| l.capacity_bytes)
    }

    /// The best stream figure of `kernel` with `stores` on `threads` threads, if measured.
    pub fn stream(&self, kernel: StreamKernel, stores: Stores, threads: usize) -> Option<f64> {
        self.streams
            .iter()
            .find(|s| s.kernel == kernel && s.stores == stores && s.threads == threads)
            .map(|s| s.bytes_per_s)
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
    /// Keeps the higher of two measurements of each peak (contention only ever lowers a
    /// peak): streams and sweep points pairwise, the levels derived again from the merged
    /// sweep, the raises of both applied on top.
    pub fn merge_max(&mut self, other: &Hardware) {
        self.peak_fp32_flops = self.peak_fp32_flops.max(other.peak_fp32_flops);
        for o in &other.streams {
            match self
                .streams
                .iter_mut()
                .find(|s| (s.kernel, s.stores, s.threads) == (o.kernel, o.stores, o.threads))
            {
                Some(s) => s.bytes_per_s = s.bytes_per_s.max(o.bytes_per_s),
                None => self.streams.push(*o),
            }
        }
        for o in &other.sweep {
            match self.sweep.iter_mut().find(|p| p.bytes == o.bytes) {
                Some(p) => p.bytes_per_s = p.bytes_per_s.max(o.bytes_per_s),
                None => self.sweep.push(*o),
            }
        }
        self.sweep.sort_by_key(|p| p.bytes);
        self.dram_bandwidth = self
            .dram_bandwidth
            .max(other.dram_bandwidth)
            .max(best_stream(&self.streams));
        self.levels = derive_levels(&self.sweep, self.dram_bandwidth);
        for r in &other.raises {
            if !self.raises.contains(r) {
                self.raises.push(r.clone());
            }
        }
        self.measured_at = other.measured_at;
        self.method = other.method.clone();
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

    /// Writes the measurement to `path`, first merged with what is there when that is this
    /// machine's (another judge may have raised a floor or measured higher peaks meanwhile).
    pub fn save_merged(&mut self, path: &Path) -> std::io::Result<()> {
        if let Ok(there) = read_cached(path) {
            if there.fingerprint == self.fingerprint && there.threads == self.threads {
                let mine = self.clone();
                *self = there;
                self.merge_max(&mine);
            }
        }
        self.save(path)
    }
}

/// The best stream figure (0 when none).
fn best_stream(streams: &[StreamFigure]) -> f64 {
    streams.iter().map(|s| s.bytes_per_s).fold(0.0, f64::max)
}

/// Why a cached `hw.json` is not used as it is.
#[derive(Debug, thiserror::Error)]
pub enum Stale {
    /// There is none.
    #[error("no measurement cached")]
    Missing,
    /// It was written in another format (0: before formats were numbered).
    #[error("cached in format {found}, this ksmith reads format {HW_FORMAT}")]
    Format {
        /// The file's format.
        found: u32,
    },
    /// It could not be read or parsed.
    #[error("unreadable: {0}")]
    Unreadable(String),
}

/// Reads a cached measurement, refusing any other format than [`HW_FORMAT`] (its fields
/// could mean something else).
pub fn read_cached(path: &Path) -> Result<Hardware, Stale> {
    /// The one field every format has (from format 2 on; absent before).
    #[derive(Deserialize)]
    struct Header {
        #[serde(default)]
        format: u32,
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Stale::Missing),
        Err(e) => return Err(Stale::Unreadable(e.to_string())),
    };
    let header: Header =
        serde_json::from_slice(&bytes).map_err(|e| Stale::Unreadable(e.to_string()))?;
    if header.format != HW_FORMAT {
        return Err(Stale::Format {
            found: header.format,
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| Stale::Unreadable(e.to_string()))
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
    /// The device lock could not be taken for the measurement.
    #[error("holding the device for the roofline measurement: {0}")]
    Quiet(String),
}

/// Memory the machine can spare now (MemAvailable), if the system says.
fn available_memory() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kib| kib << 10)
    })
}

/// The compiled microbenchmark.
struct Bench {
    _dir: tempfile::TempDir,
    exe: PathBuf,
    threads: usize,
}

impl Bench {
    fn build(compiler: &Compiler, threads: usize) -> Result<Bench, HwError> {
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
            .arg("-lm")
            .output()
            .map_err(|e| HwError::Bench(format!("running {}: {e}", compiler.command)))?;
        if !out.status.success() {
            return Err(HwError::Bench(format!(
                "compiling the microbenchmark: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(Bench {
            _dir: dir,
            exe,
            threads,
        })
    }

    /// Runs one mode and parses its JSON line.
    fn run<T: serde::de::DeserializeOwned>(&self, args: &[String]) -> Result<T, HwError> {
        let what = args.first().map_or("", String::as_str);
        let run = Command::new(&self.exe)
            .args(args)
            .env("OMP_NUM_THREADS", self.threads.to_string())
            .output()
            .map_err(|e| HwError::Bench(format!("{what}: {e}")))?;
        if !run.status.success() {
            return Err(HwError::Bench(format!(
                "{what}: {} {}",
                run.status,
                String::from_utf8_lossy(&run.stderr)
            )));
        }
        serde_json::from_slice(&run.stdout)
            .map_err(|e| HwError::Bench(format!("{what}: bad output: {e}")))
    }
}

/// `hw_bench sweep`'s output.
#[derive(Deserialize)]
struct SweepOut {
    points: Vec<SweepPoint>,
}

/// `hw_bench streams`'s output.
#[derive(Deserialize)]
struct StreamsOut {
    nontemporal: String,
    streams: Vec<StreamFigure>,
}

/// `hw_bench fma`'s output.
#[derive(Deserialize)]
struct FmaOut {
    fp32_flops_per_s: f64,
    vector_bits: u32,
    threads: usize,
}

/// Stream buffers for a measured last cache capacity: four times past it, at least 256 MiB,
/// at most `cap`.
fn stream_bytes(effective_llc: u64, cap: u64) -> u64 {
    (effective_llc.saturating_mul(4)).max(256 << 20).min(cap)
}

/// Measures the machine now (a few seconds: the cache sweep, the stream kernels, the FMA
/// peak), `lock` saying whether the caller holds the device alone meanwhile.
pub fn measure(compiler: &Compiler, threads: usize, lock: DeviceLock) -> Result<Hardware, HwError> {
    let started = std::time::Instant::now();
    let load_before = load_average();
    let bench = Bench::build(compiler, threads)?;
    // The sweep's largest set and the stream kernels' buffers (1.83x their bytes) must fit in
    // memory beside everything else running.
    let cap = available_memory()
        .map_or(SWEEP_MAX_BYTES, |m| (m / 4).min(SWEEP_MAX_BYTES))
        .max(64 << 20);
    let sweep: SweepOut = bench.run(&[
        "sweep".into(),
        SWEEP_MIN_BYTES.to_string(),
        cap.to_string(),
        SWEEP_STEPS_PER_OCTAVE.to_string(),
    ])?;
    // Where the sweep found the caches end decides how large DRAM's buffers must be; the
    // levels are derived again below against the DRAM figure.
    let read_tail = sweep.points.last().map_or(0.0, |p| p.bytes_per_s);
    let llc = derive_levels(&sweep.points, read_tail)
        .last()
        .map_or(0, |l| l.capacity_bytes);
    let bytes = stream_bytes(llc, cap);
    let streams: StreamsOut = bench.run(&["streams".into(), bytes.to_string()])?;
    let fma: FmaOut = bench.run(&["fma".into()])?;
    // The sweep's largest set is one more read stream past the caches: the best of them all.
    let tail = sweep
        .points
        .last()
        .filter(|p| p.bytes >= 256 << 20)
        .map_or(0.0, |p| p.bytes_per_s);
    let dram = best_stream(&streams.streams).max(tail);
    let levels = derive_levels(&sweep.points, dram);
    Ok(Hardware {
        format: HW_FORMAT,
        cpu: cpu_model(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        caches: caches(),
        simd: simd_flags(),
        compilers: compiler_versions(),
        dram_bandwidth: dram,
        streams: streams.streams,
        levels,
        peak_fp32_flops: fma.fp32_flops_per_s,
        vector_bits: fma.vector_bits,
        threads: fma.threads,
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        load_at_measure: load_before,
        method: Method {
            device_lock: lock,
            stream_bytes: bytes,
            sweep_bytes: (
                sweep.points.first().map_or(0, |p| p.bytes),
                sweep.points.last().map_or(0, |p| p.bytes),
            ),
            nontemporal: streams.nontemporal,
            seconds: started.elapsed().as_secs_f64(),
        },
        sweep: sweep.points,
        raises: Vec::new(),
        fingerprint: fingerprint(compiler),
    })
}

/// Holds the device alone for a measurement: `Ok(Some(guard))` while the guard lives (the
/// judge's exclusive lease), `Ok(None)` where there is no lock to take.
pub type Quiet<'a> = dyn FnMut() -> Result<Option<Box<dyn std::any::Any>>, String> + 'a;

/// Loads the cached measurement for this machine from `path`, or measures and caches it
/// (without the device lock; see [`load_or_measure_quiet`]).
pub fn load_or_measure(
    path: &Path,
    compiler: &Compiler,
    threads: usize,
    refresh: bool,
) -> Result<(Hardware, bool), HwError> {
    load_or_measure_quiet(path, compiler, threads, refresh, &mut || Ok(None))
}

/// Whether a cached measurement serves `compiler` and `threads` as it is.
fn usable(hw: &Hardware, compiler: &Compiler, threads: usize) -> bool {
    hw.fingerprint == fingerprint(compiler) && hw.threads == threads
}

/// Loads the cached measurement for this machine from `path`, or measures and caches it with
/// the device held through `quiet` (taken before the file's own lock, the order the judge
/// takes them in). Returns the roofline and whether it came from the cache unchanged.
pub fn load_or_measure_quiet(
    path: &Path,
    compiler: &Compiler,
    threads: usize,
    refresh: bool,
    quiet: &mut Quiet<'_>,
) -> Result<(Hardware, bool), HwError> {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let cached = read_cached(path)
        .ok()
        .filter(|hw| !refresh && usable(hw, compiler, threads));
    if let Some(hw) = &cached {
        if !hw.remeasure_when(load_average()) {
            return Ok((hw.clone(), true));
        }
    }
    let guard = quiet().map_err(HwError::Quiet)?;
    let lock = if guard.is_some() {
        DeviceLock::Exclusive
    } else {
        DeviceLock::None
    };
    // One measurement at a time: concurrent ones would disturb each other's numbers.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("lock"));
    let _flock = file
        .ok()
        .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
    // Another process may have measured while this one waited.
    if !refresh {
        if let Ok(hw) = read_cached(path) {
            if usable(&hw, compiler, threads) && !hw.remeasure_when(load_average()) {
                return Ok((hw, true));
            }
            if usable(&hw, compiler, threads) {
                // Taken on a busy machine and the machine is quiet now: measured again,
                // keeping the higher peaks (contention only ever lowers them).
                let mut hw = hw;
                if let Ok(fresh) = measure(compiler, threads, lock) {
                    hw.merge_max(&fresh);
                    let _ = hw.save(path);
                }
                return Ok((hw, false));
            }
        }
    }
    let hw = measure(compiler, threads, lock)?;
    // The cache is an optimisation: failing to write it must not fail the command.
    let _ = hw.save(path);
    Ok((hw, false))
}

#[cfg(test)]
mod tests;
