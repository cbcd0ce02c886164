//! Step 6 of the cascade: timing every workload in alternating rounds against the XLA baseline,
//! re-checking the outputs of timed calls, and (when racing) dropping clearly slower candidates.

use crate::disturb::{self, Probe, Turn};
use crate::fresh::{self, Refresh};
use crate::slots::{Dirs, Slot, TensorSpec};
use crate::timing::{Paired, RoundPlan, NOISY};
use crate::{
    axis_values, ColdCache, Elimination, EvalResult, Failure, Flush, Judge, JudgeError, Reason,
    Status, Timing, Verdict, WorkloadPerf,
};
use crate::{protocol, Files};
use ksmith_harness::{CallError, HarnessError, Peer};
use ksmith_task::{DType, Task};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// Bytes written between timed calls on a GPU: several times any current L2.
const GPU_FLUSH_BYTES: u64 = 256 << 20;

/// Most input sets in one timed round: each call gets its own, never seen before, so a kernel
/// that caches results by input content gains nothing; more calls mean more rounds.
pub(crate) const MAX_SETS: usize = 8;
/// Memory the timing slots of one workload may take (fewer sets per round beyond it).
const SLOT_BYTES: usize = 512 << 20;

/// Timing state of one workload: cache policy, slots, the samples so far, and the inputs of
/// the last round.
pub(crate) struct Timer {
    pub(crate) w: usize,
    /// The baseline's input sets (the first two check seeds; the baseline is trusted).
    base_seeds: [u64; 2],
    /// Fresh-input slots (slot i for call i of a round), made as rounds first need them: most
    /// rounds of large workloads make one or two calls, and each slot costs its working set.
    slots: Vec<Slot>,
    /// Slots a workload timed earlier handed down (see [`Timer::hand_down`]), taken before any
    /// is made: making one allocates and maps its whole working set.
    spare: Vec<Slot>,
    /// Most fresh-input slots the workload may have.
    max_sets: usize,
    /// The warm-up slot (a mix, or the first check seed's inputs when some input is kept);
    /// last in the runner's list.
    warm: Slot,
    /// Where slots are made: the judge's path and the runner's.
    slot_dirs: (PathBuf, PathBuf),
    /// Seeds of the last round's timed calls, one fresh input set per call (slot i).
    round_seeds: Vec<u64>,
    /// Raw input files of the last round, per call (trusted directory; only when the trusted
    /// side makes every fresh set, see `fresh`).
    round_files: Vec<Vec<PathBuf>>,
    /// How each input is refreshed per call, and the trusted set inputs not drawn here keep.
    refresh: Vec<Refresh>,
    base_set: Vec<Vec<u8>>,
    /// Whether the judge draws fresh sets itself (else the trusted side makes each one).
    draws: bool,
    /// The last round's call chosen (secretly, before the round) for a re-check, read right
    /// after its call with the runner stopped.
    snapshot: Option<Snapshot>,
    /// The trusted files re-checks copy calls into (the same ones every round; removed with
    /// the timer).
    check_files: Vec<PathBuf>,
    /// Memory an input is drawn again into, to compare with a checked call's.
    scratch: Vec<u8>,
    flush: bool,
    flush_bytes: u64,
    pub(crate) plan: RoundPlan,
    pub(crate) cand: Vec<u64>,
    pub(crate) base: Vec<u64>,
    /// Per kept round: the baseline's median / the candidate's median.
    pub(crate) ratios: Vec<f64>,
    /// Per round timed (kept or dropped): its ratio when kept, so candidates timed together
    /// are paired round by round.
    pub(crate) per_round: Vec<Option<f64>>,
    /// Rounds timed, dropped ones included.
    pub(crate) rounds: usize,
    /// What else ran during the rounds; which were dropped.
    pub(crate) record: disturb::Record,
}

impl Drop for Timer {
    fn drop(&mut self) {
        for f in &self.check_files {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Timer {
    /// Gives this (finished) workload's fresh-input slots to `next`, of the same candidate.
    pub(crate) fn hand_down(&mut self, next: &mut Timer) {
        next.spare.append(&mut self.slots);
        next.spare.append(&mut self.spare);
    }

    /// The candidate's calls in its next round: a round's worth, at most one per input set.
    pub(crate) fn cand_reps(&self) -> usize {
        self.plan.reps(&self.cand).clamp(1, self.max_sets)
    }

    /// The paired speedup so far.
    pub(crate) fn paired(&self) -> Option<Paired> {
        Paired::from_ratios(&self.ratios)
    }

    /// Rounds kept (dropped ones are timed again).
    pub(crate) fn kept(&self) -> usize {
        self.ratios.len()
    }

    /// Whether another round is needed: fewer kept than the plan wants, within the round cap
    /// (dropped rounds do not count against it; their redos are capped by the record).
    pub(crate) fn wants_round(&self, max_rounds: usize) -> bool {
        self.kept() < max_rounds
            && self.rounds < max_rounds + disturb::REDO_CAP
            && !self
                .plan
                .done(self.kept(), &self.cand, &self.base, self.paired())
    }
}

/// A timed call's buffers copied into trusted files (name -> path maps) for a re-check.
struct Snapshot {
    call: usize,
    /// Its outputs.
    outputs: Files,
    /// Its inputs as read back after the call: equal to what the judge wrote (else `mutated`),
    /// so the reference is computed from them.
    inputs: Files,
    /// The first input the call changed, if any.
    mutated: Option<String>,
}

/// A failure to make, fill or copy timing buffers: the judge's, not the candidate's.
pub(crate) fn slot_error(e: std::io::Error) -> Failure {
    Failure::Judge(JudgeError::Harness(HarnessError::Setup(format!(
        "timing slots: {e}"
    ))))
}

/// Fails the call (the runner killed) if a timing buffer was shortened (touching its mapping
/// past the end would kill the judge with SIGBUS) or lengthened. Checked with the runner
/// stopped.
fn intact(runner: &mut Peer, slot: &Slot) -> Result<(), Failure> {
    if slot.intact() {
        return Ok(());
    }
    runner.kill();
    Err(Failure::Candidate(CallError::Protocol(
        "a timing buffer's size changed (the runner may only write it in place)".into(),
    )))
}

/// Copies call `slot`'s buffers into trusted files, and compares its inputs with what the
/// judge wrote there (drawn again from the call's seed, or the trusted side's files).
fn snapshot(
    t: &mut Timer,
    slot: usize,
    dir: &std::path::Path,
    ins: &[TensorSpec],
    outs: &[TensorSpec],
) -> std::io::Result<Snapshot> {
    let prefix = format!("check_w{}", t.w);
    let (outputs, inputs) = t.slots[slot].dump(dir, &prefix, ins, outs)?;
    if t.check_files.is_empty() {
        // The same names every round.
        t.check_files = outputs
            .values()
            .chain(inputs.values())
            .map(PathBuf::from)
            .collect();
    }
    let mut mutated = None;
    for (k, spec) in ins.iter().enumerate() {
        let same = if t.draws {
            // Drawn again into memory kept across checks (not a fresh allocation each time).
            t.scratch.resize(spec.bytes, 0);
            let seed = fresh::input_seed(t.round_seeds[slot], k);
            fresh::fill(&mut t.scratch, &t.base_set[k], &t.refresh[k], seed);
            t.scratch[..] == *t.slots[slot].input(k)
        } else {
            std::fs::read(&t.round_files[slot][k])? == t.slots[slot].input(k)
        };
        if !same {
            mutated = Some(spec.name.clone());
            break;
        }
    }
    Ok(Snapshot {
        call: slot,
        outputs,
        inputs,
        mutated,
    })
}

/// Timed workloads and, when the candidate was dropped from a race, why.
type Timed = (Vec<WorkloadPerf>, Option<Elimination>);

/// Reads one byte from the timing channel; anything but `want` is the candidate's fault.
/// Returns when the kernel received it (not when the judge woke up to read it).
fn expect(runner: &mut Peer, want: u8, timeout: Duration) -> Result<SystemTime, CallError> {
    let chan = runner
        .channel()
        .ok_or_else(|| CallError::Protocol("the runner has no timing channel".into()))?;
    match chan.recv(timeout) {
        Some(m) if m.byte == want => Ok(m.at),
        // The channel says nothing when the runner dies mid-call: its exit does.
        None => Err(runner.ended().unwrap_or(CallError::Timeout(timeout))),
        Some(m) => Err(CallError::Protocol(format!(
            "unexpected byte {:#04x} on the timing channel (the judge's clock is not the candidate's to drive)",
            m.byte
        ))),
    }
}

/// The ratio of the two medians against the paired speedup's interval: `None` when it lies
/// inside (with 2% of slack for rounding), else which side spread more and why the figures
/// differ. The paired figure weighs each round once; pooled medians weigh rounds by their
/// call counts, so a side with two speeds (a kernel at 1.2 ms in some rounds and 12 ms in
/// others) or drift between rounds moves one figure and not the other.
fn disagreement(
    c: &Timing,
    b: &Timing,
    of_medians: f64,
    paired: &Paired,
) -> Option<crate::Disagreement> {
    if of_medians >= paired.low / 1.02 && of_medians <= paired.high * 1.02 {
        return None;
    }
    let spread = |t: &Timing| t.p90_ms / t.p10_ms.max(1e-9);
    let (wider_side, spread) = if spread(c) >= spread(b) {
        (crate::Side::Candidate, spread(c))
    } else {
        (crate::Side::Baseline, spread(b))
    };
    Some(crate::Disagreement {
        ratio_of_medians: of_medians,
        wider_side,
        spread,
        why: if spread > 2.0 {
            crate::DisagreeWhy::Bimodal
        } else {
            crate::DisagreeWhy::Drift
        },
    })
}

/// Nanoseconds from `a` to `b` (0 if the clock stepped back).
fn span(a: SystemTime, b: SystemTime) -> u64 {
    b.duration_since(a)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One call on the judge's clock, the runner running only from "p" to "f".
#[derive(Debug, Clone, Copy)]
struct Clocked {
    /// From sending "p" to the kernel receiving "r": waking the runner and its CPUs. The
    /// inputs are readable from "p" on, so this is charged beyond a small fixed allowance.
    prepare_ns: u64,
    /// From "r" to "f": the call and everything after it (CPU).
    call_ns: u64,
    /// From "r" to "d" (GPU: the launch and the device-wide synchronization; the device
    /// copies before "r" are ours).
    device_ns: u64,
    /// From "f" to when a thread of the runner was last seen running after the stop signal
    /// (0: all at rest at the first look). Shown with `KSMITH_TRACE_CALLS`, not charged: a
    /// thread seen runnable may only be waiting for a core (see docs/judge.md).
    stop_ns: u64,
}

/// One call: the judge sends "p"+slot; the runner answers "r", calls, answers "d" and then
/// "f". Arrival times come from the kernel's stamps on the channel, so the judge only waits
/// (never spins, never answers inside the call): its own wake-up latency is not counted, and
/// it takes no CPU the runner's threads need.
fn clocked_call(runner: &mut Peer, slot: u8, timeout: Duration) -> Result<Clocked, CallError> {
    runner.thaw();
    let p = SystemTime::now();
    {
        let chan = runner
            .channel()
            .ok_or_else(|| CallError::Protocol("the runner has no timing channel".into()))?;
        chan.send(&[b'p', slot])
            .map_err(|e| CallError::Protocol(format!("timing channel: {e}")))?;
    }
    let r = expect(runner, b'r', timeout)?;
    let d = expect(runner, b'd', timeout)?;
    let f = expect(runner, b'f', timeout)?;
    let ran_until = runner.stop()?;
    Ok(Clocked {
        prepare_ns: span(p, r),
        call_ns: span(r, f),
        device_ns: span(r, d),
        stop_ns: ran_until.map_or(0, |t| span(f, t)),
    })
}

/// Added to the honest wake-up ("p" to "r" of an empty call) before charging a call for it.
const PREPARE_SLACK_NS: u64 = 50_000;
/// The most a wake-up may be allowed: a calibration under load (other jobs, a busy host) must
/// not open a window in which a kernel could compute off the clock. On the 2-vCPU VMs here the
/// allowance measures 0.11 ms (the runner's 0.05 ms OpenMP warm-up included).
const PREPARE_ALLOW_MAX_NS: u64 = 250_000;

/// What the timing protocol costs on its own, measured before the candidate is loaded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChannelCost {
    /// One empty call on the same clock (lower quartile): subtracted from every timed call.
    pub call_ns: u64,
    /// "p" to "r" of an empty call (lower quartile) plus 0.1 ms: beyond it, waking up is
    /// charged to the call. The honest wake-up cost and no more: a noisy allowance (twice the
    /// worst calibrated call, once) let a red-team kernel compute entirely before "r". What a
    /// kernel can still hide is what waking its CPUs costs here (about 2 ms on a VM whose idle
    /// CPUs the host deschedules, well under 0.3 ms elsewhere).
    pub prepare_allow_ns: u64,
}

impl Judge {
    /// Before the candidate is loaded (the runner is still only our code): what the timing
    /// protocol itself costs around an empty call.
    pub(crate) fn calibrate_channel(&mut self, runner: &mut Peer) -> Result<ChannelCost, Failure> {
        const CALLS: usize = 15;
        let timeout = self.config.call_timeout;
        let pending = runner
            .send(&protocol::Calibrate { calls: CALLS })
            .map_err(Failure::Candidate)?;
        let mut t = Vec::new();
        let mut prep = Vec::new();
        for _ in 0..CALLS {
            match clocked_call(runner, 0, timeout) {
                Ok(c) => {
                    t.push(if self.on_gpu { c.device_ns } else { c.call_ns });
                    prep.push(c.prepare_ns);
                }
                Err(e) => {
                    runner.kill();
                    return Err(Failure::Candidate(e));
                }
            }
        }
        runner
            .receive(pending, timeout)
            .map_err(Failure::Candidate)?;
        // The fastest calibrated calls: the channel's own cost, not its noise.
        t.sort_unstable();
        Ok(ChannelCost {
            call_ns: t[t.len() / 4],
            prepare_allow_ns: {
                prep.sort_unstable();
                (prep[prep.len() / 4] + PREPARE_SLACK_NS).min(PREPARE_ALLOW_MAX_NS)
            },
        })
    }

    /// Times every workload. With a race, every workload first gets the race's minimum rounds;
    /// a candidate clearly slower than the incumbent overall stops there.
    pub(crate) fn time_all(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        est_ns: &[u64],
        channel: ChannelCost,
        r: &mut EvalResult,
    ) -> Result<Result<Timed, Verdict>, Failure> {
        let mut timers = Vec::new();
        for (w, &est) in est_ns.iter().enumerate() {
            self.at = Some(w);
            let started = Instant::now();
            timers.push(self.timer(task, runner, w, est)?);
            let s = started.elapsed().as_secs_f64();
            self.split.buffers_s += s;
            self.split.buffer_parts.setup_s += s;
        }
        let mut eliminated = None;
        if let Some(race) = self.race.clone() {
            for t in &mut timers {
                while t.kept() < race.min_rounds.min(self.config.max_rounds)
                    && t.rounds < self.config.max_rounds + disturb::REDO_CAP
                {
                    self.at = Some(t.w);
                    self.round(task, runner, t, channel)?;
                    if let Some(v) = self.timed_recheck(task, t, r)? {
                        return Ok(Err(v));
                    }
                }
            }
            let speedups: Vec<f64> = timers
                .iter()
                .map(|t| t.paired().map_or(0.0, |p| p.speedup))
                .collect();
            eliminated = race.slowdown(&speedups).map(|slowdown| Elimination {
                slowdown,
                rounds: race.min_rounds,
            });
        }
        if eliminated.is_none() {
            for i in 0..timers.len() {
                let t = &mut timers[i];
                while t.wants_round(self.config.max_rounds) {
                    self.at = Some(t.w);
                    self.round(task, runner, t, channel)?;
                    if let Some(v) = self.timed_recheck(task, t, r)? {
                        return Ok(Err(v));
                    }
                }
                if let [done, next, ..] = &mut timers[i..] {
                    done.hand_down(next);
                }
            }
        }
        let perf = timers.iter().map(|t| self.summarize(task, t, r)).collect();
        Ok(Ok((perf, eliminated)))
    }

    /// Whether workload `w` is timed with flushed caches, and how many bytes the baseline's
    /// flush writes (the candidate's own buffers are evicted line by line instead).
    pub(crate) fn flush_plan(&self, task: &Task, w: usize) -> (bool, u64) {
        let flush = match self.config.flush {
            Flush::Always => true,
            Flush::Never => false,
            // A GPU's L2 (50-60 MB on Hopper) is flushed between every timed call.
            Flush::Auto => self.on_gpu || task.bytes_of(w) < self.hw.llc_bytes() as f64,
        };
        let bytes = match (flush, self.on_gpu) {
            (false, _) => 0,
            (true, true) => GPU_FLUSH_BYTES,
            (true, false) => self.hw.llc_bytes().max(8 << 20),
        };
        (flush, bytes)
    }

    /// Tensor sizes and poison patterns of workload `w` (inputs, outputs).
    pub(crate) fn tensor_specs(
        &mut self,
        task: &Task,
        w: usize,
    ) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let axes = &task.workloads[w].axes;
        let poison = self.poison.clone();
        let ins = task
            .inputs
            .iter()
            .map(|t| TensorSpec {
                name: t.name.clone(),
                bytes: t.numel(axes) as usize * t.dtype.size(),
                poison: None,
            })
            .collect();
        let outs = task
            .outputs
            .iter()
            .map(|o| TensorSpec {
                name: o.tensor.name.clone(),
                bytes: o.tensor.numel(axes) as usize * o.tensor.dtype.size(),
                poison: poison.get(o.tensor.dtype.name()).copied(),
            })
            .collect();
        (ins, outs)
    }

    pub(crate) fn timer(
        &mut self,
        task: &Task,
        runner: &Peer,
        w: usize,
        est_ns: u64,
    ) -> Result<Timer, Failure> {
        let base_seeds = [self.config.seeds[0], self.config.seeds[1]];
        for s in base_seeds {
            self.prepare(task, w, s).map_err(Failure::Judge)?;
        }
        let (ins, outs) = self.tensor_specs(task, w);
        let ws: usize = ins
            .iter()
            .chain(&outs)
            .map(|t| t.bytes)
            .sum::<usize>()
            .max(1);
        let sets = (SLOT_BYTES / ws).clamp(2, MAX_SETS);
        let io = slot_error;
        let slot_dirs = crate::slots::slot_dirs(runner);
        let dir = Dirs {
            host: &slot_dirs.0,
            seen: &slot_dirs.1,
        };
        let mut warm_slot = Slot::create(&dir, &format!("w{w}warm"), &ins, &outs).map_err(io)?;
        // Pools from the OS's randomness: no candidate can know them in advance.
        let refresh = fresh::plan(task, w, ksmith_harness::random_u64());
        let draws = fresh::can_draw(task, &refresh);
        let base_set = if refresh.iter().all(|r| matches!(r, Refresh::Draw(_))) {
            // Every input is mixed here: the warm-up calls (neither timed nor checked) get a
            // mix too, and no trusted set is needed.
            let none = vec![Vec::new(); refresh.len()];
            warm_slot.fill_fresh(&none, &refresh, ksmith_harness::random_u64());
            none
        } else {
            // The warm-up slot holds the first check seed's inputs, which are also what the
            // inputs the judge does not draw itself keep.
            let warm = self.fresh_input_files(task, w, base_seeds[0], "warm")?;
            warm_slot.fill(&warm).map_err(io)?;
            let base_set = warm
                .iter()
                .map(std::fs::read)
                .collect::<Result<Vec<_>, _>>()
                .map_err(io)?;
            for f in &warm {
                let _ = std::fs::remove_file(f);
            }
            base_set
        };
        let (flush, flush_bytes) = self.flush_plan(task, w);
        // Untimed work per call: channel round trips, input copy, poisoning.
        let per_call_ns = 100_000.0 + ws as f64 / 5.0;
        Ok(Timer {
            w,
            base_seeds,
            slots: Vec::new(),
            spare: Vec::new(),
            max_sets: sets,
            warm: warm_slot,
            slot_dirs,
            round_seeds: Vec::new(),
            round_files: Vec::new(),
            refresh,
            base_set,
            draws,
            snapshot: None,
            check_files: Vec::new(),
            scratch: Vec::new(),
            flush,
            flush_bytes,
            plan: RoundPlan::new(est_ns, per_call_ns, &self.config),
            cand: Vec::new(),
            base: Vec::new(),
            ratios: Vec::new(),
            per_round: Vec::new(),
            rounds: 0,
            record: Default::default(),
        })
    }

    /// One alternating round: the baseline's calls (the candidate stopped), then the
    /// candidate's, each on a fresh input set and timed by the judge's clock.
    fn round(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        t: &mut Timer,
        channel: ChannelCost,
    ) -> Result<(), Failure> {
        let base_round = self.baseline_turn(task, t)?;
        self.candidate_turn(task, runner, t, channel, &base_round)
    }

    /// The baseline's calls of one round of `t`'s workload (every sandbox stopped); their
    /// times, not yet added to any timer, and what else ran meanwhile.
    pub(crate) fn baseline_turn(
        &mut self,
        task: &Task,
        t: &Timer,
    ) -> Result<(Vec<u64>, Turn), Failure> {
        let warmup = if t.rounds == 0 { 2 } else { 0 };
        let cache_dir = self.ref_cache();
        let breq = protocol::Baseline {
            task: &task.content_hash,
            workload: t.w,
            seeds: &t.base_seeds,
            reps: t.plan.base_reps(&t.cand, &t.base, t.cand_reps()),
            warmup,
            flush_bytes: t.flush_bytes,
            evict: t.flush && !self.on_gpu,
            device: protocol::TimingDevice::of(self.on_gpu),
            cache_dir: &cache_dir,
        };
        let started = Instant::now();
        let tids = self
            .trusted
            .as_mut()
            .map(Peer::thread_ids)
            .unwrap_or_default();
        // Others' work before the turn, with the candidate stopped and the trusted process
        // idle: XLA's own pool threads wait for each other on every call (their run-queue wait
        // was about their whole timed time on an idle machine, so every baseline turn read as
        // disturbed), which is no disturbance.
        let others = disturb::others_runnable();
        let probe = Probe::now(&tids);
        let b = self.trusted_ask(task, &breq).map_err(Failure::Judge)?;
        let base_round = b.samples_ns;
        let turn = Turn {
            others_seen: Some(others),
            ..probe.turn(&tids, base_round.len(), base_round.iter().sum())
        };
        self.baseline_cold = match b.eviction {
            protocol::Eviction::Lines => ColdCache::Lines,
            protocol::Eviction::Buffer => ColdCache::Buffer,
            protocol::Eviction::None => ColdCache::Hot,
        };
        let timed_ns: u64 = base_round.iter().sum();
        self.split.baseline_s += (started.elapsed().as_secs_f64() - timed_ns as f64 / 1e9).max(0.0);
        Ok((base_round, turn))
    }

    /// The candidate's calls of one round, paired with the baseline's `base_round` (timed just
    /// before, in the same window): each call on a fresh input set, timed by the judge's clock.
    /// A round either side of which other work disturbed is dropped (see `disturb`).
    pub(crate) fn candidate_turn(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        t: &mut Timer,
        channel: ChannelCost,
        base: &(Vec<u64>, Turn),
    ) -> Result<(), Failure> {
        let (base_round, base_turn) = (&base.0[..], &base.1);
        let mut warmup = if t.rounds == 0 { 2 } else { 0 };
        let w = t.w;
        let axes = &task.workloads[w].axes;
        let n = t.cand_reps();
        if t.slots.len() < n {
            let started = Instant::now();
            let (ins, outs) = self.tensor_specs(task, w);
            let dir = Dirs {
                host: &t.slot_dirs.0,
                seen: &t.slot_dirs.1,
            };
            for i in t.slots.len()..n {
                let slot = match t.spare.pop() {
                    Some(mut slot) => {
                        slot.fit(&ins, &outs).map_err(slot_error)?;
                        slot
                    }
                    None => {
                        Slot::create(&dir, &format!("w{w}s{i}"), &ins, &outs).map_err(slot_error)?
                    }
                };
                t.slots.push(slot);
            }
            let s = started.elapsed().as_secs_f64();
            self.split.buffers_s += s;
            self.split.buffer_parts.setup_s += s;
            // The runner maps (and pre-faults) new slots when the request arrives, inside the
            // first call's "p" to "r": an untimed warm-up call takes that instead of a timed one.
            warmup = warmup.max(1);
        }
        let sets = t.slots.len();
        t.round_seeds.clear();
        t.round_files.clear();
        for i in 0..n {
            let seed = self.next_fresh_seed();
            if !t.draws {
                let started = Instant::now();
                let files = self.fresh_input_files(task, w, seed, &format!("r{}c{i}", t.rounds))?;
                self.split.inputs_s += started.elapsed().as_secs_f64();
                t.round_files.push(files);
            }
            t.round_seeds.push(seed);
        }
        let (ins, outs) = self.tensor_specs(task, w);
        // The call to re-check is chosen now, where the candidate cannot see it: in the first
        // round of a workload, then in a random half of the others (each costs a float64
        // reference). A kernel counting calls knows which rounds are always checked and spares
        // them, so only the random rounds constrain it: a second always-checked round cost a
        // reference and caught nothing the first had not. Every call's outputs are hashed right
        // after it, so the pause after a call does not tell which one is checked, and a checked
        // call's outputs cannot change later (large outputs: a secret eighth of their pages,
        // new every round, which a kernel changing pages late cannot avoid).
        let checked = t.rounds == 0 || ksmith_harness::random_u64().is_multiple_of(2);
        let check_call = checked.then(|| (ksmith_harness::random_u64() % n as u64) as usize);
        t.snapshot = None;
        let snap_dir = self.fresh_dir.path().to_path_buf();
        let creq = protocol::Time {
            axes: axis_values(task, w),
            in_shapes: task.inputs.iter().map(|i| i.dims(axes)).collect(),
            out_shapes: task.outputs.iter().map(|o| o.tensor.dims(axes)).collect(),
            slots: t.slots.iter().chain([&t.warm]).map(Slot::spec).collect(),
            calls: warmup + n,
        };
        let timeout = self.config.call_timeout;
        let io = slot_error;
        // The trusted server is stopped as the candidate was during the baseline's turn: what
        // its threads still do after replying (XLA's pools, freeing buffers) is not the
        // candidate's to pay for.
        if let Some(p) = &self.trusted {
            p.freeze();
        }
        let pending = runner.send(&creq).map_err(Failure::Candidate)?;
        // The runner's threads (its OpenMP workers exist after the first round's warm-up).
        let tids = runner.thread_ids();
        let mut probe = None;
        let mut others_seen = 0u32;
        let mut calls = Vec::with_capacity(n);
        let mut digests = Vec::with_capacity(n);
        let mut tails = Vec::with_capacity(n);
        // Which pages of large outputs the round's hashes cover: secret, new every round.
        let sample_key = ksmith_harness::random_u64();
        for k in 0..warmup + n {
            let started = Instant::now();
            // The runner is stopped: its buffers are the judge's to fill.
            runner.stop().map_err(Failure::Candidate)?;
            if k > warmup {
                // Every thread of the candidate is stopped: what runs now is others' work.
                others_seen = others_seen.max(disturb::others_runnable());
            }
            // The warm-up slot is last in the runner's list.
            let slot = if k < warmup { sets } else { k - warmup };
            let buf = if k < warmup {
                &mut t.warm
            } else {
                &mut t.slots[slot]
            };
            intact(runner, buf)?;
            let parts = &mut self.split.buffer_parts;
            if k >= warmup {
                if t.draws {
                    buf.fill_fresh(&t.base_set, &t.refresh, t.round_seeds[slot]);
                } else {
                    buf.fill(&t.round_files[slot]).map_err(io)?;
                }
            }
            let drawn = Instant::now();
            parts.draw_s += (drawn - started).as_secs_f64();
            buf.poison(&outs);
            let poisoned = Instant::now();
            parts.poison_s += (poisoned - drawn).as_secs_f64();
            if t.flush {
                buf.evict();
            }
            parts.evict_s += poisoned.elapsed().as_secs_f64();
            self.split.buffers_s += started.elapsed().as_secs_f64();
            if k == warmup {
                // From the first timed call: the warm-up's start-up waits are not the round's.
                probe = Some(Probe::now(&tids));
            }
            let started = Instant::now();
            let clocked = clocked_call(runner, slot as u8, timeout);
            let wall = started.elapsed().as_secs_f64();
            match clocked {
                Ok(c) if k >= warmup => {
                    // CPU: the call, and waking up beyond the allowance; GPU: the device work
                    // (the copies before "r" are ours).
                    let ns = if self.on_gpu {
                        c.device_ns
                    } else {
                        c.call_ns + c.prepare_ns.saturating_sub(channel.prepare_allow_ns)
                    };
                    let ns = ns.saturating_sub(channel.call_ns).max(1);
                    self.split.calls_s += (wall - ns as f64 / 1e9).max(0.0);
                    calls.push(ns);
                    tails.push(c.stop_ns);
                }
                Ok(_) => self.split.calls_s += wall,
                Err(e) => {
                    runner.kill();
                    return Err(Failure::Candidate(e));
                }
            }
            if k >= warmup {
                let started = Instant::now();
                intact(runner, &t.slots[slot])?;
                digests.push(t.slots[slot].digest(sample_key));
                let s = started.elapsed().as_secs_f64();
                self.split.buffers_s += s;
                self.split.buffer_parts.hash_s += s;
            }
        }
        // After the last call the candidate is stopped again: one more look.
        others_seen = others_seen.max(disturb::others_runnable());
        let cand_turn = probe.map_or_else(Turn::default, |p| Turn {
            others_seen: Some(others_seen),
            ..p.turn(&tids, calls.len(), calls.iter().sum())
        });
        if let Some(p) = &self.trusted {
            p.thaw();
        }
        let reply = runner
            .receive(pending, timeout)
            .map_err(Failure::Candidate)?;
        // The runner is stopped again. The checked call's buffers must be as they were right
        // after it: work finished later is a fault, not a result.
        if let Some(c) = check_call {
            let started = Instant::now();
            intact(runner, &t.slots[c])?;
            if t.slots[c].digest(sample_key) != digests[c] {
                runner.kill();
                return Err(Failure::Candidate(CallError::Protocol(
                    "the buffers of a timed call changed after the call finished".into(),
                )));
            }
            t.snapshot = Some(snapshot(t, c, &snap_dir, &ins, &outs).map_err(io)?);
            self.split.rechecks_s += started.elapsed().as_secs_f64();
        }
        if std::env::var_os("KSMITH_TRACE_CALLS").is_some() {
            eprintln!(
                "[clock] workload {w}: channel {channel:?}; judge's clock {calls:?}; seen running after \"f\" {tails:?}; runner's own figures {:?}",
                reply.inproc_ns
            );
        }
        if std::env::var_os("KSMITH_TRACE_DISTURBANCE").is_some() {
            eprintln!(
                "[disturbance] workload {w} round {}: baseline {base_turn:?} disturbed {}; candidate {cand_turn:?} disturbed {}",
                t.rounds,
                base_turn.disturbed(),
                cand_turn.disturbed()
            );
        }
        let ratio = match (RoundPlan::median(base_round), RoundPlan::median(&calls)) {
            (Some(b), Some(c)) => Some(b / c.max(1.0)),
            _ => None,
        };
        // The round's calls were checked like any other's; only its times are dropped.
        let keep = t.record.round(base_turn, &cand_turn);
        if keep {
            t.ratios.extend(ratio);
            t.base.extend(base_round);
            t.cand.extend(calls);
        }
        t.per_round.push(ratio.filter(|_| keep));
        t.rounds += 1;
        Ok(())
    }

    /// [`Judge::recheck`], its time counted.
    pub(crate) fn timed_recheck(
        &mut self,
        task: &Task,
        t: &mut Timer,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, Failure> {
        let started = Instant::now();
        let v = self.recheck(task, t, r);
        self.split.rechecks_s += started.elapsed().as_secs_f64();
        v
    }

    /// Re-checks the call of the last round chosen (secretly) before the round, against the
    /// reference for its inputs; the candidate cannot know which call will be checked.
    fn recheck(
        &mut self,
        task: &Task,
        t: &mut Timer,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, Failure> {
        let mut verdict = None;
        let files: Vec<PathBuf> = t.round_files.drain(..).flatten().collect();
        if let Some(snap) = t.snapshot.take() {
            let seed = t.round_seeds[snap.call];
            let mut corr = r.correctness.take().unwrap_or_default();
            let checked = match &snap.mutated {
                Some(name) => Ok(Some(Verdict::new(
                    Status::IncorrectNumerical,
                    Reason::InputMutated,
                    format!("input {name} changed during the call"),
                ))),
                None => self.check_timed(task, t.w, seed, &snap.outputs, &snap.inputs, &mut corr),
            };
            r.correctness = Some(corr);
            verdict = checked?.map(|mut v| {
                v.detail = format!(
                    "timed call {} of round {}: {}",
                    snap.call, t.rounds, v.detail
                );
                v
            });
        }
        for f in files {
            let _ = std::fs::remove_file(f);
        }
        Ok(verdict)
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

    pub(crate) fn summarize(&self, task: &Task, t: &Timer, r: &mut EvalResult) -> WorkloadPerf {
        r.time_split.kernel_s += t.cand.iter().sum::<u64>() as f64 / 1e9;
        r.time_split.baseline_s += t.base.iter().sum::<u64>() as f64 / 1e9;
        let (flops, bytes) = (task.flops_of(t.w), task.bytes_of(t.w));
        let c = Timing::from_ns(&t.cand);
        let b = Timing::from_ns(&t.base);
        let secs = c.median_ms / 1e3;
        let floor = self.floor_seconds(task, t.w, t.flush);
        let of_medians = b.median_ms / c.median_ms.max(1e-9);
        let paired = t.paired().unwrap_or(Paired {
            speedup: of_medians,
            low: of_medians,
            high: of_medians,
        });
        let disagreement = disagreement(&c, &b, of_medians, &paired);
        WorkloadPerf {
            workload: t.w,
            axes: task.workloads[t.w].axes.clone(),
            speedup: paired.speedup,
            speedup_interval: (paired.low, paired.high),
            noisy: paired.width() > NOISY,
            gflops: flops / secs.max(1e-12) / 1e9,
            gbps: bytes / secs.max(1e-12) / 1e9,
            floor_ms: floor * 1e3,
            roofline_fraction: floor / secs.max(1e-12),
            cache_flushed: t.flush,
            baseline_cold: if t.flush {
                self.baseline_cold
            } else {
                ColdCache::Hot
            },
            disturbance: t.record.summary(),
            disagreement,
            candidate: c,
            baseline: b,
            beyond_roofline: None,
        }
    }
}
