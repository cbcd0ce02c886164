//! Step 7's roofline rule (DESIGN rule 6: speed beyond the roofline is flagged, not
//! celebrated). A workload timed faster than its floor makes the judge measure the roofline
//! again (once per judge, alone on the device); against the new floor it is then
//! - at or under it: the first floor was stale (`StaleFloor`);
//! - over it by more than the plausibility margin: `POLICY_REJECTED implausible_speed`, as
//!   before (work-skipping kernels are off by 10x or more);
//! - over it within the margin: the floor was wrong, since a correct kernel beat it; the floor
//!   is raised to the kernel's own rate and recorded in `hw.json` with that kernel
//!   (`FloorRaised`); a GPU's roofline or a raced timing is only flagged (`Flagged`).

use crate::result::{BeyondOutcome, BeyondRoofline, WorkloadPerf};
use crate::scheduler::Access;
use crate::{geomean, Elimination, EvalResult, Judge, Performance, Reason, Status, Verdict};
use ksmith_backend::hw::{self, DeviceLock, FloorRaise, Hardware, RaisedBy};
use ksmith_task::Task;

/// A fraction of the floor above this is beyond the roofline (the floor is a limit: 1.0).
pub(crate) const LIMIT: f64 = 1.0;

impl Judge {
    /// Measures the roofline again (once per judge) and keeps the higher peaks: a roofline
    /// measured while the machine was busy is too low and would flag honest kernels.
    pub(crate) fn recheck_roofline(&mut self) {
        if self.hw_rechecked {
            return;
        }
        self.hw_rechecked = true;
        // Called from step 7, under the timing lease when there is a scheduler.
        let lock = if self.lease.as_ref().map(|l| l.access()) == Some(Access::Exclusive) {
            DeviceLock::Exclusive
        } else {
            DeviceLock::None
        };
        if let Ok(fresh) = hw::measure(&self.compiler, self.config.threads, lock) {
            self.hw.merge_max(&fresh);
            if let Some(p) = &self.hw_path {
                let _ = self.hw.save_merged(p);
            }
        }
    }

    /// Applies the rule to a candidate's workloads (their fractions against the floor in force
    /// when they were timed); `eliminated`: the timing was cut short by a race.
    pub(crate) fn settle_roofline(
        &mut self,
        task: &Task,
        perf: &mut [WorkloadPerf],
        eliminated: bool,
        r: &EvalResult,
    ) {
        let first: Vec<f64> = perf.iter().map(|p| p.roofline_fraction).collect();
        if !first.iter().any(|&f| f > LIMIT) {
            return;
        }
        // Before accusing the candidate or the floor, make sure the floor is not stale.
        if !self.on_gpu {
            self.recheck_roofline();
        }
        for p in perf.iter_mut() {
            let floor = self.floor_seconds(task, p.workload, p.cache_flushed);
            p.floor_ms = floor * 1e3;
            p.roofline_fraction = floor / (p.candidate.median_ms / 1e3).max(1e-12);
        }
        let figures: Vec<(f64, f64)> = perf
            .iter()
            .map(|p| (task.flops_of(p.workload), task.bytes_of(p.workload)))
            .collect();
        let by = |workload| RaisedBy {
            task: r.task.clone(),
            solution: r.solution.clone(),
            solution_hash: r.solution_hash.clone(),
            workload,
        };
        let margin = self.config.plausibility_margin;
        let remeasured = !self.on_gpu;
        let raise_on = (!self.on_gpu && !eliminated).then_some(&mut self.hw);
        let raised = settle(perf, &first, &figures, remeasured, margin, raise_on, &by);
        if !raised.is_empty() {
            if let Some(p) = &self.hw_path {
                let _ = self.hw.save_merged(p);
            }
        }
    }
}

/// The rule on figures already re-measured: `first` the fractions first seen, `figures` each
/// workload's FLOPs and bytes, `remeasured` whether the floor was measured again, `raise_on`
/// the roofline to raise (None: flag only). Returns the raises made.
pub(crate) fn settle(
    perf: &mut [WorkloadPerf],
    first: &[f64],
    figures: &[(f64, f64)],
    remeasured: bool,
    margin: f64,
    mut raise_on: Option<&mut Hardware>,
    by: &dyn Fn(usize) -> RaisedBy,
) -> Vec<FloorRaise> {
    let mut raised = Vec::new();
    for ((p, &fraction), &(flops, bytes)) in perf.iter_mut().zip(first).zip(figures) {
        if fraction <= LIMIT {
            continue;
        }
        let after = p.roofline_fraction;
        let seconds = p.candidate.median_ms / 1e3;
        // Implausible against the measured floor, raises aside: otherwise each kernel could
        // go the margin beyond the last one's raise.
        let measured = raise_on.as_deref().map_or(after, |hw| {
            hw.measured_floor(flops, bytes, p.cache_flushed).seconds / seconds.max(1e-12)
        });
        let outcome = if after.max(measured) > margin {
            // The fraction the implausibility check of step 7 reads.
            p.roofline_fraction = after.max(measured);
            BeyondOutcome::Implausible
        } else if after <= LIMIT {
            BeyondOutcome::StaleFloor
        } else if let Some(hw) = raise_on.as_deref_mut() {
            raised.extend(hw.raise(flops, bytes, p.cache_flushed, seconds, by(p.workload)));
            let floor = hw.floor_seconds(flops, bytes, p.cache_flushed);
            p.floor_ms = floor * 1e3;
            p.roofline_fraction = floor / seconds.max(1e-12);
            BeyondOutcome::FloorRaised
        } else {
            BeyondOutcome::Flagged
        };
        p.beyond_roofline = Some(BeyondRoofline {
            fraction,
            remeasured_fraction: remeasured.then_some(after),
            outcome,
        });
    }
    raised
}

impl Judge {
    /// Step 7: the workloads' figures become the result's performance; beyond the floor they
    /// are measured again, then flagged, raised or implausible (see the module documentation).
    pub(crate) fn performance(
        &mut self,
        task: &Task,
        mut perf: Vec<WorkloadPerf>,
        eliminated: Option<Elimination>,
        r: &mut EvalResult,
    ) -> Option<Verdict> {
        self.settle_roofline(task, &mut perf, eliminated.is_some(), r);
        let performance = Performance {
            speedup: geomean(perf.iter().map(|p| p.speedup)),
            speedup_interval: (
                geomean(perf.iter().map(|p| p.speedup_interval.0)),
                geomean(perf.iter().map(|p| p.speedup_interval.1)),
            ),
            noisy: perf.iter().any(|p| p.noisy),
            never_quiet: perf.iter().any(|p| p.disturbance.rounds_disturbed_kept > 0),
            roofline_fraction: geomean(perf.iter().map(|p| p.roofline_fraction)),
            workloads: perf,
            eliminated,
        };
        let implausible = performance
            .workloads
            .iter()
            .find(|p| p.roofline_fraction > self.config.plausibility_margin)
            .cloned();
        r.performance = Some(performance);
        implausible.map(|p| {
            Verdict::new(
                Status::PolicyRejected,
                Reason::ImplausibleSpeed,
                format!(
                    "workload {}: {:.4} ms is {:.1}x faster than the measured roofline floor {:.4} ms",
                    p.workload, p.candidate.median_ms, p.roofline_fraction, p.floor_ms
                ),
            )
            .at(Some(p.workload))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{ColdCache, Timing};
    use ksmith_backend::hw::{
        DeviceLock, FloorTerm, Method, Stores, StreamFigure, StreamKernel, HW_FORMAT,
    };

    /// A synthetic roofline: 20 GB/s DRAM, 100 GFLOP/s, no cache levels.
    fn roofline() -> Hardware {
        Hardware {
            format: HW_FORMAT,
            cpu: "test".into(),
            cores: 2,
            caches: vec![],
            simd: vec![],
            compilers: vec![],
            dram_bandwidth: 20e9,
            streams: vec![StreamFigure {
                kernel: StreamKernel::Triad,
                stores: Stores::Streaming,
                threads: 2,
                bytes_per_s: 20e9,
            }],
            sweep: vec![],
            levels: vec![],
            peak_fp32_flops: 1e11,
            vector_bits: 256,
            threads: 2,
            measured_at: 0,
            load_at_measure: None,
            method: Method {
                device_lock: DeviceLock::Exclusive,
                stream_bytes: 256 << 20,
                sweep_bytes: (16 << 10, 1 << 30),
                nontemporal: "avx".into(),
                seconds: 1.0,
            },
            raises: vec![],
            fingerprint: "f".into(),
        }
    }

    fn timing(ms: f64) -> Timing {
        Timing {
            median_ms: ms,
            p10_ms: ms,
            p90_ms: ms,
            samples: 10,
        }
    }

    /// Workload `w` moving `bytes` in `ms`, its fraction against `hw`'s floor.
    fn workload(hw: &Hardware, w: usize, bytes: f64, ms: f64) -> WorkloadPerf {
        let floor = hw.floor_seconds(0.0, bytes, true);
        WorkloadPerf {
            workload: w,
            axes: Default::default(),
            candidate: timing(ms),
            baseline: timing(ms * 2.0),
            speedup: 2.0,
            speedup_interval: (1.9, 2.1),
            noisy: false,
            gflops: 0.0,
            gbps: bytes / (ms / 1e3) / 1e9,
            floor_ms: floor * 1e3,
            roofline_fraction: floor / (ms / 1e3),
            cache_flushed: true,
            baseline_cold: ColdCache::Lines,
            disturbance: Default::default(),
            disagreement: None,
            beyond_roofline: None,
        }
    }

    fn by(workload: usize) -> RaisedBy {
        RaisedBy {
            task: "t".into(),
            solution: "s".into(),
            solution_hash: "h".into(),
            workload,
        }
    }

    #[test]
    fn a_kernel_above_its_floor_is_flagged_and_raises_the_floor_once_remeasured() {
        let mut hw = roofline();
        let bytes = 200e6;
        // 10 ms at 20 GB/s: 12 ms is 83%, 8 ms is 125% (26.5 GB/s with streaming stores).
        let mut perf = vec![workload(&hw, 0, bytes, 12.0), workload(&hw, 1, bytes, 8.0)];
        let first: Vec<f64> = perf.iter().map(|p| p.roofline_fraction).collect();
        assert!(first[1] > 1.2);
        let figures = vec![(0.0, bytes); 2];
        let raised = settle(&mut perf, &first, &figures, true, 2.5, Some(&mut hw), &by);
        assert!(perf[0].beyond_roofline.is_none());
        let b = perf[1].beyond_roofline.as_ref().unwrap();
        assert_eq!(b.outcome, BeyondOutcome::FloorRaised);
        assert!((b.fraction - 1.25).abs() < 1e-9);
        assert_eq!(b.remeasured_fraction, Some(first[1]));
        // The floor is now the kernel's own rate: 100%, and 25 GB/s for every later kernel.
        assert!((perf[1].roofline_fraction - 1.0).abs() < 1e-9);
        assert!((hw.dram_floor_bandwidth() - 25e9).abs() < 1.0);
        assert_eq!(raised.len(), 1);
        assert_eq!(raised[0].term, FloorTerm::Dram);
        assert_eq!(raised[0].by, by(1));
        assert_eq!(hw.raises, raised);
        // The flag is in the result's JSON, typed.
        let v = serde_json::to_value(&perf[1]).unwrap();
        assert_eq!(v["beyond_roofline"]["outcome"], "floor_raised");
        assert!(serde_json::to_value(&perf[0]).unwrap()["beyond_roofline"].is_null());
        assert_eq!(perf[1].roofline_cell(), "125%!");
        assert_eq!(perf[0].roofline_cell(), "83%");
    }

    #[test]
    fn far_beyond_the_floor_is_implausible_and_raises_nothing() {
        let mut hw = roofline();
        let bytes = 200e6;
        let mut perf = vec![workload(&hw, 0, bytes, 1.0)];
        let first = vec![perf[0].roofline_fraction];
        let raised = settle(
            &mut perf,
            &first,
            &[(0.0, bytes)],
            true,
            2.5,
            Some(&mut hw),
            &by,
        );
        assert!(raised.is_empty());
        assert_eq!(
            perf[0].beyond_roofline.as_ref().unwrap().outcome,
            BeyondOutcome::Implausible
        );
        assert_eq!(hw.dram_floor_bandwidth(), 20e9);
        assert!(perf[0].roofline_fraction > 2.5);
    }

    #[test]
    fn kernels_cannot_ratchet_the_floor_past_the_margin_raise_after_raise() {
        let mut hw = roofline();
        let bytes = 200e6;
        // 2.4x the measured floor: plausible, raises DRAM to 48 GB/s.
        let mut perf = vec![workload(&hw, 0, bytes, 10.0 / 2.4)];
        let first = vec![perf[0].roofline_fraction];
        settle(
            &mut perf,
            &first,
            &[(0.0, bytes)],
            true,
            2.5,
            Some(&mut hw),
            &by,
        );
        assert_eq!(
            perf[0].beyond_roofline.as_ref().unwrap().outcome,
            BeyondOutcome::FloorRaised
        );
        // 2.4x the raised floor is 5.8x the measured one: implausible.
        let mut perf = vec![workload(&hw, 1, bytes, 10.0 / 2.4 / 2.4)];
        let first = vec![perf[0].roofline_fraction];
        assert!((first[0] - 2.4).abs() < 1e-9);
        settle(
            &mut perf,
            &first,
            &[(0.0, bytes)],
            true,
            2.5,
            Some(&mut hw),
            &by,
        );
        assert_eq!(
            perf[0].beyond_roofline.as_ref().unwrap().outcome,
            BeyondOutcome::Implausible
        );
        assert!(perf[0].roofline_fraction > 5.7);
        assert_eq!(hw.raises.len(), 1);
    }

    #[test]
    fn a_stale_floor_or_a_floor_not_ours_is_not_raised() {
        // Re-measured higher: the kernel is under the new floor.
        let mut hw = roofline();
        let bytes = 200e6;
        let mut perf = vec![workload(&hw, 0, bytes, 8.0)];
        let first = vec![perf[0].roofline_fraction];
        hw.dram_bandwidth = 30e9;
        let floor = hw.floor_seconds(0.0, bytes, true);
        perf[0].roofline_fraction = floor / 8e-3;
        settle(
            &mut perf,
            &first,
            &[(0.0, bytes)],
            true,
            2.5,
            Some(&mut hw),
            &by,
        );
        assert_eq!(
            perf[0].beyond_roofline.as_ref().unwrap().outcome,
            BeyondOutcome::StaleFloor
        );
        assert_eq!(perf[0].roofline_cell(), "83%");
        assert!(hw.raises.is_empty());
        // No roofline to raise (a GPU's, a raced timing): flagged only.
        let hw = roofline();
        let mut perf = vec![workload(&hw, 0, bytes, 8.0)];
        let first = vec![perf[0].roofline_fraction];
        settle(&mut perf, &first, &[(0.0, bytes)], false, 2.5, None, &by);
        let b = perf[0].beyond_roofline.as_ref().unwrap();
        assert_eq!(b.outcome, BeyondOutcome::Flagged);
        assert_eq!(b.remeasured_fraction, None);
        assert_eq!(perf[0].roofline_cell(), "125%!");
    }
}
