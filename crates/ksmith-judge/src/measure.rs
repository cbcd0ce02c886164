//! Step 6 of the cascade: timing every workload in alternating rounds against the XLA baseline,
//! re-checking the outputs of timed calls, and (when racing) dropping clearly slower candidates.

use crate::timing::RoundPlan;
use crate::{
    axis_values, Elimination, EvalResult, Failure, Flush, Judge, Timing, Verdict, WorkloadPerf,
};
use ksmith_harness::Peer;
use ksmith_task::{DType, Task};

/// Bytes written between timed calls on a GPU: several times any current L2.
const GPU_FLUSH_BYTES: u64 = 256 << 20;
use serde_json::{json, Value};

/// Timing state of one workload: its input sets, cache policy and the samples so far.
struct Timer {
    w: usize,
    seeds: [u64; 2],
    paths: Vec<String>,
    flush: bool,
    flush_bytes: u64,
    plan: RoundPlan,
    cand: Vec<u64>,
    base: Vec<u64>,
    rounds: usize,
    /// Rounds whose outputs have been re-checked.
    checked_rounds: usize,
}

fn samples(v: &Value) -> impl Iterator<Item = u64> + '_ {
    v["samples_ns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
}

/// Timed workloads and, when the candidate was dropped from a race, why.
type Timed = (Vec<WorkloadPerf>, Option<Elimination>);

impl Judge {
    /// Times every workload. With a race, every workload first gets the race's minimum rounds;
    /// a candidate clearly slower than the incumbent overall stops there.
    pub(crate) fn time_all(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        est_ns: &[u64],
        r: &mut EvalResult,
    ) -> Result<Result<Timed, Verdict>, Failure> {
        let mut timers = Vec::new();
        for (w, &est) in est_ns.iter().enumerate() {
            timers.push(self.timer(task, w, est)?);
        }
        let mut eliminated = None;
        if let Some(race) = self.race.clone() {
            for t in &mut timers {
                while t.rounds < race.min_rounds.min(self.config.max_rounds) {
                    self.round(task, runner, t)?;
                }
                if let Some(v) = self.recheck(task, runner, t, r)? {
                    return Ok(Err(v));
                }
            }
            let speedups: Vec<f64> = timers
                .iter()
                .map(|t| median(&t.base) / median(&t.cand).max(1.0))
                .collect();
            eliminated = race.slowdown(&speedups).map(|slowdown| Elimination {
                slowdown,
                rounds: race.min_rounds,
            });
        }
        if eliminated.is_none() {
            for t in &mut timers {
                while t.rounds < self.config.max_rounds && !t.plan.done(t.rounds, &t.cand, &t.base)
                {
                    self.round(task, runner, t)?;
                }
                if let Some(v) = self.recheck(task, runner, t, r)? {
                    return Ok(Err(v));
                }
            }
        }
        let perf = timers.iter().map(|t| self.summarize(task, t, r)).collect();
        Ok(Ok((perf, eliminated)))
    }

    fn timer(&mut self, task: &Task, w: usize, est_ns: u64) -> Result<Timer, Failure> {
        let seeds = [self.config.seeds[0], self.config.seeds[1]];
        let mut paths = Vec::new();
        for s in seeds {
            paths.push(self.prepare(task, w, s).map_err(Failure::Judge)?);
        }
        let axes = &task.workloads[w].axes;
        let flush = match self.config.flush {
            Flush::Always => true,
            Flush::Never => false,
            // A GPU's L2 (50-60 MB on Hopper) is flushed between every timed call.
            Flush::Auto => self.on_gpu || task.bytes_of(w) < self.hw.llc_bytes() as f64,
        };
        let flush_bytes = match (flush, self.on_gpu) {
            (false, _) => 0,
            (true, true) => GPU_FLUSH_BYTES,
            (true, false) => self.hw.llc_bytes().max(8 << 20),
        };
        // Untimed work per call: the flush writes `flush_bytes`, poisoning writes the outputs.
        let out_bytes: f64 = task
            .outputs
            .iter()
            .map(|o| (o.tensor.numel(axes) as usize * o.tensor.dtype.size()) as f64)
            .sum();
        let per_call_ns = (flush_bytes as f64 + out_bytes) / 10.0; // ~10 GB/s
        Ok(Timer {
            w,
            seeds,
            paths,
            flush,
            flush_bytes,
            plan: RoundPlan::new(est_ns, per_call_ns, &self.config),
            cand: Vec::new(),
            base: Vec::new(),
            rounds: 0,
            checked_rounds: 0,
        })
    }

    /// One alternating round: the baseline's calls, then the candidate's.
    fn round(&mut self, task: &Task, runner: &mut Peer, t: &mut Timer) -> Result<(), Failure> {
        // Warm up on a workload's first round, and when coming back to it after another.
        let warmup = if t.rounds == 0 || t.checked_rounds == t.rounds {
            2
        } else {
            0
        };
        let w = t.w;
        let axes = &task.workloads[w].axes;
        let breq = json!({"cmd": "baseline", "task": task.content_hash, "workload": w, "seeds": t.seeds,
                          "reps": t.plan.reps(&t.base), "warmup": warmup, "flush_bytes": t.flush_bytes,
                          "cache_dir": self.ref_cache()});
        let b = self.trusted_call(task, breq).map_err(Failure::Judge)?;
        t.base.extend(samples(&b));
        let creq = json!({
            "cmd": "time", "inputs_paths": t.paths, "axes": axis_values(task, w),
            "in_shapes": task.inputs.iter().map(|i| i.dims(axes)).collect::<Vec<_>>(),
            "out_shapes": task.outputs.iter().map(|o| o.tensor.dims(axes)).collect::<Vec<_>>(),
            "reps": t.plan.reps(&t.cand), "warmup": warmup, "flush_bytes": t.flush_bytes,
        });
        let c = runner
            .call(&creq, self.config.call_timeout)
            .map_err(Failure::Candidate)?;
        t.cand.extend(samples(&c));
        t.rounds += 1;
        Ok(())
    }

    /// Re-checks the outputs of the last timed call on each input set (if not done yet).
    fn recheck(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        t: &mut Timer,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, Failure> {
        if t.checked_rounds == t.rounds {
            return Ok(None);
        }
        t.checked_rounds = t.rounds;
        let prefixes: Vec<String> = t
            .seeds
            .iter()
            .map(|s| {
                let name = format!("timed_w{}_s{s}_r{}", t.w, t.rounds);
                runner.dir().join(name).display().to_string()
            })
            .collect();
        let dump = json!({"cmd": "dump", "out_prefixes": prefixes});
        let reply = runner
            .call(&dump, self.config.call_timeout)
            .map_err(Failure::Candidate)?;
        let mut corr = r.correctness.take().unwrap_or_default();
        for (i, s) in t.seeds.iter().enumerate() {
            let out = &reply["outputs"][i];
            let hashes = &reply["input_hashes"][i];
            if let Some(mut v) = self.check(task, t.w, *s, out, hashes, &[], &mut corr)? {
                v.detail = format!("timed run: {}", v.detail);
                r.correctness = Some(corr);
                return Ok(Some(v));
            }
        }
        r.correctness = Some(corr);
        Ok(None)
    }

    /// Roofline time floor of workload `w` on the device this evaluation runs on.
    pub(crate) fn floor_seconds(&self, task: &Task, w: usize, flushed: bool) -> f64 {
        let (flops, bytes) = (task.flops_of(w), task.bytes_of(w));
        match (&self.gpu_roofline, self.on_gpu) {
            (Some(g), true) => {
                let low = task
                    .inputs
                    .iter()
                    .any(|i| matches!(i.dtype, DType::Bfloat16 | DType::Float16));
                g.floor_seconds(flops, bytes, low)
            }
            _ => self.hw.floor_seconds(flops, bytes, flushed),
        }
    }

    fn summarize(&self, task: &Task, t: &Timer, r: &mut EvalResult) -> WorkloadPerf {
        r.time_split.kernel_s += t.cand.iter().sum::<u64>() as f64 / 1e9;
        r.time_split.baseline_s += t.base.iter().sum::<u64>() as f64 / 1e9;
        let (flops, bytes) = (task.flops_of(t.w), task.bytes_of(t.w));
        let c = Timing::from_ns(&t.cand);
        let b = Timing::from_ns(&t.base);
        let secs = c.median_ms / 1e3;
        let floor = self.floor_seconds(task, t.w, t.flush);
        WorkloadPerf {
            workload: t.w,
            axes: task.workloads[t.w].axes.clone(),
            speedup: b.median_ms / c.median_ms.max(1e-9),
            gflops: flops / secs.max(1e-12) / 1e9,
            gbps: bytes / secs.max(1e-12) / 1e9,
            floor_ms: floor * 1e3,
            roofline_fraction: floor / secs.max(1e-12),
            cache_flushed: t.flush,
            candidate: c,
            baseline: b,
        }
    }
}

fn median(samples: &[u64]) -> f64 {
    RoundPlan::median(samples).unwrap_or(0.0)
}
