//! The workloads' timings turned into the result's performance, against the measured roofline.

use crate::*;

impl Judge {
    /// Measures the roofline again (once per judge) and keeps the higher peaks: a roofline
    /// measured while the machine was busy is too low and would flag honest kernels.
    pub(crate) fn recheck_roofline(&mut self) {
        if self.hw_rechecked {
            return;
        }
        self.hw_rechecked = true;
        if let Ok(fresh) = ksmith_backend::hw::measure(&self.compiler, self.config.threads) {
            self.hw.merge_max(&fresh);
            if let Some(p) = &self.hw_path {
                let _ = self.hw.save(p);
            }
        }
    }

    /// Step 7: the workloads' figures become the result's performance (the roofline
    /// re-measured once before speed beyond it is called implausible).
    pub(crate) fn performance(
        &mut self,
        task: &Task,
        mut perf: Vec<WorkloadPerf>,
        eliminated: Option<Elimination>,
        r: &mut EvalResult,
    ) -> Option<Verdict> {
        if perf
            .iter()
            .any(|p| p.roofline_fraction > self.config.plausibility_margin)
        {
            // Before accusing the candidate, make sure the roofline itself is not stale.
            if !self.on_gpu {
                self.recheck_roofline();
            }
            for p in &mut perf {
                let floor = self.floor_seconds(task, p.workload, p.cache_flushed);
                p.floor_ms = floor * 1e3;
                p.roofline_fraction = floor / (p.candidate.median_ms / 1e3).max(1e-12);
            }
        }
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
