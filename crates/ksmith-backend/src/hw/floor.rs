//! The roofline floor: measured cache levels from the sweep, the bandwidth a workload's bytes
//! are bounded by, and raising a floor that a correct kernel beat.

use super::{Hardware, MemoryLevel, SweepPoint};
use serde::{Deserialize, Serialize};

/// A sweep point belongs to the level before it while it reads at least this share of the
/// level's bandwidth: plateaus on the machines seen differ by 1.5x or more (L1 to L2, L2 to
/// L3, L3 to DRAM), while noise that survives best-of-trials and the envelope is under 10%.
const LEVEL_KEEP: f64 = 0.75;

/// A level must read at least this much faster than DRAM to count as a cache: a set slightly
/// faster than DRAM is DRAM with a little cache reuse.
const CACHE_OVER_DRAM: f64 = 1.10;

/// Cache levels from a sweep (smallest working set first) and the DRAM bandwidth.
///
/// The sweep is first made non-increasing from the right (a set never reads slower than a
/// larger one can: a lower point is a disturbance, not the machine), then cut where the
/// bandwidth falls below [`LEVEL_KEEP`] of the level's best; the levels stop where the
/// bandwidth is within [`CACHE_OVER_DRAM`] of DRAM's. A level's capacity is its last point's
/// working set, its bandwidth its best (an upper bound for any set that fits).
pub fn derive_levels(sweep: &[SweepPoint], dram: f64) -> Vec<MemoryLevel> {
    let mut envelope: Vec<SweepPoint> = sweep.to_vec();
    envelope.sort_by_key(|p| p.bytes);
    let mut best = 0.0f64;
    for p in envelope.iter_mut().rev() {
        best = best.max(p.bytes_per_s);
        p.bytes_per_s = best;
    }
    let mut levels = Vec::new();
    let mut i = 0;
    while i < envelope.len() {
        let top = envelope[i].bytes_per_s;
        if top <= dram * CACHE_OVER_DRAM {
            break;
        }
        let mut j = i;
        while j + 1 < envelope.len() && envelope[j + 1].bytes_per_s >= top * LEVEL_KEEP {
            j += 1;
        }
        levels.push(MemoryLevel {
            capacity_bytes: envelope[j].bytes,
            bandwidth: top,
        });
        i = j + 1;
    }
    levels
}

/// Which term of the roofline bounds a workload, and at which memory tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "term")]
pub enum FloorTerm {
    /// FLOPs / peak FP32.
    Compute,
    /// Bytes / DRAM bandwidth (caches evicted, or the set larger than every measured level).
    Dram,
    /// Bytes / a measured cache level's bandwidth (the set fits it and was not evicted).
    Cache {
        /// The level's capacity when the floor was computed.
        capacity_bytes: u64,
    },
}

/// A workload's roofline floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floor {
    /// The time floor in seconds.
    pub seconds: f64,
    /// The term that sets it.
    pub term: FloorTerm,
}

/// The kernel that raised a floor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaisedBy {
    /// Task name.
    pub task: String,
    /// Solution name.
    pub solution: String,
    /// The solution's content hash.
    pub solution_hash: String,
    /// The workload's index.
    pub workload: usize,
}

/// A floor raised because a correct kernel beat it after a fresh measurement: the floor was
/// wrong (DESIGN: a kernel above the roofline means the floor is wrong).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorRaise {
    /// When (seconds since the epoch).
    pub at: u64,
    /// The term raised.
    pub term: FloorTerm,
    /// Its peak before (FLOP/s or bytes/s).
    pub from: f64,
    /// Its peak after: the kernel's own rate.
    pub to: f64,
    /// The workload's FLOPs and bytes, whether its caches were evicted, and the kernel's
    /// median time in seconds (what `to` was computed from).
    pub flops: f64,
    /// See `flops`.
    pub bytes: f64,
    /// See `flops`.
    pub flushed: bool,
    /// See `flops`.
    pub seconds: f64,
    /// The kernel.
    pub by: RaisedBy,
}

impl Hardware {
    /// The memory tier that bounds a working set of `bytes`: DRAM when its caches were evicted
    /// before the call, else the smallest measured cache level that holds it (DRAM when none
    /// does). Measured capacities only: a VM's reported cache may be the whole socket's.
    pub fn memory_term(&self, bytes: f64, flushed: bool) -> FloorTerm {
        if flushed || bytes <= 0.0 {
            return FloorTerm::Dram;
        }
        self.levels
            .iter()
            .find(|l| bytes <= l.capacity_bytes as f64)
            .map_or(FloorTerm::Dram, |l| FloorTerm::Cache {
                capacity_bytes: l.capacity_bytes,
            })
    }

    /// The measured peak of a term (bandwidth never below DRAM's: a cache is not slower than
    /// memory, whatever a disturbed measurement said).
    fn measured_peak(&self, term: FloorTerm) -> f64 {
        match term {
            FloorTerm::Compute => self.peak_fp32_flops,
            FloorTerm::Dram => self.dram_bandwidth,
            FloorTerm::Cache { capacity_bytes } => self
                .levels
                .iter()
                .find(|l| l.capacity_bytes == capacity_bytes)
                .map_or(0.0, |l| l.bandwidth)
                .max(self.dram_bandwidth),
        }
    }

    /// The highest rate a kernel reached beyond a term's measured peak (0: none). A cache
    /// level's raise applies to the level that now holds the raising workload's bytes, so it
    /// survives a measurement that moved the capacities.
    fn raised_peak(&self, term: FloorTerm) -> f64 {
        self.raises
            .iter()
            .filter(|r| match (r.term, term) {
                (FloorTerm::Compute, FloorTerm::Compute) | (FloorTerm::Dram, FloorTerm::Dram) => {
                    true
                }
                (FloorTerm::Cache { .. }, FloorTerm::Cache { .. }) => {
                    self.memory_term(r.bytes, r.flushed) == term
                }
                _ => false,
            })
            .map(|r| r.to)
            .fold(0.0, f64::max)
    }

    /// A term's peak in the floor: measured, or raised by a kernel that beat it. Raised
    /// bandwidths also lift every cache level below them (a cache is not slower than memory).
    pub fn peak(&self, term: FloorTerm) -> f64 {
        let peak = self.measured_peak(term).max(self.raised_peak(term));
        match term {
            FloorTerm::Cache { .. } => peak.max(self.raised_peak(FloorTerm::Dram)),
            _ => peak,
        }
    }

    /// The DRAM bandwidth of the floor (measured, or raised by a kernel).
    pub fn dram_floor_bandwidth(&self) -> f64 {
        self.peak(FloorTerm::Dram)
    }

    /// The peak FP32 of the floor (measured, or raised by a kernel).
    pub fn peak_floor_flops(&self) -> f64 {
        self.peak(FloorTerm::Compute)
    }

    /// Bandwidth that bounds a working set of `bytes` (see [`Hardware::memory_term`]).
    pub fn bandwidth_for(&self, bytes: f64, flushed: bool) -> f64 {
        self.peak(self.memory_term(bytes, flushed))
    }

    /// Roofline floor of a workload: the larger of FLOPs / peak and bytes / bandwidth, with
    /// the raised peaks.
    pub fn floor(&self, flops: f64, bytes: f64, flushed: bool) -> Floor {
        self.floor_with(flops, bytes, flushed, |t| self.peak(t))
    }

    /// The floor from the measured peaks alone, raises aside: what `implausible_speed` is
    /// judged against, so kernels cannot ratchet the floor up raise after raise.
    pub fn measured_floor(&self, flops: f64, bytes: f64, flushed: bool) -> Floor {
        self.floor_with(flops, bytes, flushed, |t| self.measured_peak(t))
    }

    fn floor_with(
        &self,
        flops: f64,
        bytes: f64,
        flushed: bool,
        peak: impl Fn(FloorTerm) -> f64,
    ) -> Floor {
        let term = self.memory_term(bytes, flushed);
        let memory = bytes / peak(term).max(1.0);
        let compute = flops / peak(FloorTerm::Compute).max(1.0);
        if compute > memory {
            Floor {
                seconds: compute,
                term: FloorTerm::Compute,
            }
        } else {
            Floor {
                seconds: memory,
                term,
            }
        }
    }

    /// Roofline time floor in seconds for a workload.
    pub fn floor_seconds(&self, flops: f64, bytes: f64, flushed: bool) -> f64 {
        self.floor(flops, bytes, flushed).seconds
    }

    /// Raises the floor of a workload that a correct kernel ran in `seconds`, below it: each
    /// term above `seconds` gets the kernel's own rate as its peak. Returns the raises made
    /// (none when the kernel was not faster than the floor), already recorded in
    /// [`Hardware::raises`]; the measured figures are kept as they are.
    pub fn raise(
        &mut self,
        flops: f64,
        bytes: f64,
        flushed: bool,
        seconds: f64,
        by: RaisedBy,
    ) -> Vec<FloorRaise> {
        if seconds <= 0.0 || !seconds.is_finite() {
            return Vec::new();
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut made = Vec::new();
        let memory = self.memory_term(bytes, flushed);
        for (term, amount) in [(FloorTerm::Compute, flops), (memory, bytes)] {
            let (peak, rate) = (self.peak(term), amount / seconds);
            if amount > 0.0 && rate > peak {
                made.push(FloorRaise {
                    at,
                    term,
                    from: peak,
                    to: rate,
                    flops,
                    bytes,
                    flushed,
                    seconds,
                    by: by.clone(),
                });
            }
        }
        self.raises.extend(made.iter().cloned());
        made
    }
}
