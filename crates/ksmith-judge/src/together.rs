//! Several candidates of one task timed side by side: each goes through the cascade up to its
//! checks, its runner is kept (stopped), and then every round of every workload times the
//! baseline once and each candidate in turn (the order rotated per round). Every candidate's
//! rounds share the same windows and the same baseline calls, so candidates are compared with
//! each other directly, per round, instead of through a noisy baseline's separate windows.

use crate::measure::{ChannelCost, Timer};
use crate::scheduler::Work;
use crate::timing::{Paired, NOISY};
use crate::{apply_verdict, classify, geomean, EvalResult, Failure, Judge, JudgeError, Stage};
use ksmith_harness::Peer;
use ksmith_task::{Solution, Task};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A candidate that passed its checks, its runner stopped until its turns.
pub(crate) struct Parked {
    pub(crate) runner: Peer,
    pub(crate) channel: ChannelCost,
    /// Per workload, a first estimate of one call (from the checks).
    pub(crate) est_ns: Vec<u64>,
    pub(crate) on_gpu: bool,
}

/// How much faster one candidate is than another, measured in the same rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Relative {
    /// The other's latency over this one's: the geomean over workloads of the median per-round
    /// ratio.
    pub speedup: f64,
    /// Distribution-free 95% interval (geomean of the workloads' bounds).
    pub interval: (f64, f64),
    /// Whether a workload's interval is wider than the noise threshold.
    pub noisy: bool,
    /// Some round it rests on was disturbed by other work and kept (the machine never became
    /// quiet enough to redo it): no decision rests on it (see [`crate::decide`]).
    #[serde(default)]
    pub disturbed: bool,
}

/// The outcome of [`Judge::compare`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// Per candidate, in the order given: its full result (checks, and timing when it passed).
    pub results: Vec<EvalResult>,
    /// `versus[i][j]`: candidate `i` against candidate `j` (above 1: `i` is faster), when both
    /// were timed to the end.
    pub versus: Vec<Vec<Option<Relative>>>,
}

impl Comparison {
    /// Index of the fastest candidate against `reference` (itself counting as 1.0), among those
    /// that passed and were timed; None when none was.
    pub fn fastest_against(&self, reference: usize) -> Option<usize> {
        (0..self.results.len())
            .filter_map(|i| {
                let s = if i == reference {
                    self.results[i].performance.as_ref().map(|_| 1.0)
                } else {
                    self.versus[i][reference].map(|r| r.speedup)
                };
                s.filter(|_| self.results[i].status.as_str() == "PASSED")
                    .map(|s| (i, s))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }
}

impl Judge {
    /// Evaluates `solutions` of `task` and times those that pass side by side (see the module
    /// documentation). Correctness is checked in full for each; a candidate that fails during
    /// timing gets its verdict and leaves the rounds. Without timing (`config.timing` false)
    /// this is one evaluation after another.
    pub fn compare(
        &mut self,
        task: &Task,
        solutions: &[Solution],
    ) -> Result<Comparison, JudgeError> {
        if let Some(r) = self.remote.clone() {
            return self.compare_remote(&*r, task, solutions);
        }
        let mut results = Vec::with_capacity(solutions.len());
        let mut parked: Vec<(usize, Parked, Task)> = Vec::new();
        self.parking = self.config.timing;
        let outcome = (|| {
            for (i, s) in solutions.iter().enumerate() {
                let r = self.evaluate_inner(task, s)?;
                if let Some(p) = self.parked.take() {
                    let judged = self.task_for(task, s)?;
                    parked.push((i, p, judged));
                }
                results.push(r);
            }
            Ok::<(), JudgeError>(())
        })();
        self.parking = false;
        if let Err(e) = outcome {
            for (_, p, _) in parked {
                self.end_runner(p.runner);
            }
            return Err(e);
        }
        let n = results.len();
        let mut versus = vec![vec![None; n]; n];
        if let Some((_, first, judged)) = parked.first() {
            let (set, on_gpu) = (judged.content_hash.clone(), first.on_gpu);
            if let Some((i, _, _)) = parked
                .iter()
                .find(|(_, p, t)| t.content_hash != set || p.on_gpu != on_gpu)
            {
                let i = *i;
                for (_, p, _) in parked {
                    self.end_runner(p.runner);
                }
                return Err(JudgeError::Task {
                    task: task.name.clone(),
                    message: format!(
                        "candidates {} and {} run on different devices or workload sets; compare times candidates of one backend together",
                        solutions[0].name, solutions[i].name
                    ),
                });
            }
            let judged = judged.clone();
            self.on_gpu = on_gpu;
            let timed = self.time_together(&judged, &mut parked, &mut results);
            self.release();
            versus = timed?;
        }
        Ok(Comparison { results, versus })
    }

    /// [`Judge::compare`] for candidates already checked in full under this judge's settings
    /// (an agent run's best and its newest candidate): one check seed per workload before the
    /// shared rounds instead of all, so a head-to-head costs little more than its timing.
    pub fn compare_checked(
        &mut self,
        task: &Task,
        solutions: &[Solution],
    ) -> Result<Comparison, JudgeError> {
        self.light_checks = true;
        let r = self.compare(task, solutions);
        self.light_checks = false;
        r
    }

    /// The rounds of [`Judge::compare`]; returns the pairwise figures.
    // Workload by workload, across every candidate's timers: an index reads plainest.
    #[allow(clippy::needless_range_loop)]
    fn time_together(
        &mut self,
        task: &Task,
        parked: &mut Vec<(usize, Parked, Task)>,
        results: &mut [EvalResult],
    ) -> Result<Vec<Vec<Option<Relative>>>, JudgeError> {
        let n = results.len();
        let k = parked.len();
        let started = Instant::now();
        self.split = Default::default();
        // Alone on the device from the first timing buffer to the last round.
        self.device_wait = Default::default();
        if let Err(e) = self.hold(Work::Timing) {
            return Err(self.abandon(parked, e));
        }
        let waited = self.device_wait.as_secs_f64();
        let mut alive = vec![true; k];
        let mut timers: Vec<Vec<Timer>> = Vec::with_capacity(k);
        let mut failure = None;
        for (c, (idx, p, _)) in parked.iter_mut().enumerate() {
            self.enter(&mut results[*idx], Stage::Timing);
            let mut ts = Vec::new();
            for (w, &est) in p.est_ns.iter().enumerate() {
                match self.timer(task, &p.runner, w, est) {
                    Ok(t) => ts.push(t),
                    Err(Failure::Judge(e)) => failure = Some(e),
                    Err(Failure::Candidate(e)) => {
                        let v = classify(e, &p.runner).at(Some(w));
                        apply_verdict(&mut results[*idx], Some(v));
                        alive[c] = false;
                        break;
                    }
                }
            }
            timers.push(ts);
        }
        if let Some(e) = failure {
            return Err(self.abandon(parked, e));
        }
        for w in 0..task.workloads.len() {
            let mut round = 0;
            loop {
                let live: Vec<usize> = (0..k).filter(|&c| alive[c]).collect();
                let Some(&lead) = live.first() else { break };
                let max = self.config.max_rounds;
                let done = live.iter().all(|&c| !timers[c][w].wants_round(max));
                if round >= max + crate::disturb::REDO_CAP || done {
                    break;
                }
                let base_round = match self.baseline_turn(task, &timers[lead][w]) {
                    Ok(b) => b,
                    Err(Failure::Judge(e)) => return Err(self.abandon(parked, e)),
                    Err(Failure::Candidate(_)) => unreachable!("the baseline is trusted"),
                };
                for i in 0..live.len() {
                    let c = live[(i + round) % live.len()];
                    let (idx, p, _) = &mut parked[c];
                    let t = &mut timers[c][w];
                    let turn = self.candidate_turn(task, &mut p.runner, t, p.channel, &base_round);
                    let verdict = match turn {
                        Ok(()) => match self.timed_recheck(task, t, &mut results[*idx]) {
                            Ok(v) => v,
                            Err(Failure::Candidate(e)) => Some(classify(e, &p.runner)),
                            Err(Failure::Judge(e)) => return Err(self.abandon(parked, e)),
                        },
                        Err(Failure::Candidate(e)) => Some(classify(e, &p.runner)),
                        Err(Failure::Judge(e)) => return Err(self.abandon(parked, e)),
                    };
                    if let Some(v) = verdict {
                        apply_verdict(&mut results[*idx], Some(v.at(Some(w))));
                        alive[c] = false;
                        p.runner.kill();
                    }
                }
                round += 1;
            }
            for ts in &mut timers {
                let from = w.min(ts.len());
                if let [done, next, ..] = &mut ts[from..] {
                    done.hand_down(next);
                }
            }
        }
        // Each candidate's own figures, then candidate against candidate, round by round.
        let wall = started.elapsed().as_secs_f64();
        let timed = alive.iter().filter(|a| **a).count().max(1) as f64;
        for (c, (idx, p, _)) in parked.iter().enumerate() {
            let r = &mut results[*idx];
            r.log = p.runner.log();
            if !alive[c] {
                continue;
            }
            let perf = timers[c]
                .iter()
                .map(|t| self.summarize(task, t, r))
                .collect();
            let verdict = self.performance(task, perf, None, r);
            apply_verdict(r, verdict);
            // The shared rounds' wall time and the judge's work in them, in equal parts.
            r.elapsed_s += wall / timed;
            let ts = &mut r.time_split;
            ts.device_wait_s += waited / timed;
            ts.harness_s =
                (r.elapsed_s - ts.build_s - ts.kernel_s - ts.baseline_s - ts.device_wait_s)
                    .max(0.0);
            let (h, shared) = (&mut ts.harness, &self.split);
            h.inputs_s += shared.inputs_s / timed;
            h.baseline_s += shared.baseline_s / timed;
            h.buffers_s += shared.buffers_s / timed;
            h.calls_s += shared.calls_s / timed;
            h.rechecks_s += shared.rechecks_s / timed;
            h.other_s = 0.0;
            let parts: f64 = h.parts().iter().map(|(_, s)| s).sum();
            h.other_s = (ts.harness_s - parts).max(0.0);
        }
        let mut versus = vec![vec![None; n]; n];
        for a in 0..k {
            for b in 0..k {
                if a == b || !alive[a] || !alive[b] {
                    continue;
                }
                let per: Vec<Paired> = (0..task.workloads.len())
                    .filter_map(|w| {
                        // Round by round, only rounds both kept.
                        let (ra, rb) = (&timers[a][w].per_round, &timers[b][w].per_round);
                        let rel: Vec<f64> = ra
                            .iter()
                            .zip(rb)
                            .filter_map(|(x, y)| Some((*x)? / (*y)?))
                            .collect();
                        Paired::from_ratios(&rel)
                    })
                    .collect();
                if per.len() == task.workloads.len() {
                    versus[parked[a].0][parked[b].0] = Some(Relative {
                        speedup: geomean(per.iter().map(|p| p.speedup)),
                        interval: (
                            geomean(per.iter().map(|p| p.low)),
                            geomean(per.iter().map(|p| p.high)),
                        ),
                        noisy: per.iter().any(|p| p.width() > NOISY),
                        disturbed: timers[a]
                            .iter()
                            .chain(&timers[b])
                            .any(|t| t.record.never_quiet()),
                    });
                }
            }
        }
        for (_, p, _) in parked.drain(..) {
            self.end_runner(p.runner);
        }
        Ok(versus)
    }

    /// Stops every kept runner after a failure that is not a candidate's.
    fn abandon(&mut self, parked: &mut Vec<(usize, Parked, Task)>, e: JudgeError) -> JudgeError {
        for (_, p, _) in parked.drain(..) {
            self.end_runner(p.runner);
        }
        if let Some(t) = &self.trusted {
            t.thaw();
        }
        e
    }
}
