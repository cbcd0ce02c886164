//! The correctness checks: every workload and seed run into poisoned buffers in the sandbox,
//! its outputs judged by the trusted process; then timing is started.

use crate::protocol;
use crate::*;

impl Judge {
    pub(crate) fn run_checks(
        &mut self,
        task: &Task,
        runner: &mut Peer,
        load: protocol::Load<'_>,
        r: &mut EvalResult,
    ) -> Result<Option<Verdict>, Failure> {
        let timeout = self.config.call_timeout;
        let started = Instant::now();
        // Waiting for the device is `device_wait_s`, never the runner's part as well (on a busy
        // cluster device the parts once summed to three times the harness time).
        let waited_before = self.device_wait;
        let channel = if self.config.timing {
            // The channel's cost is timed: alone on the device, or a busy machine's figure
            // would be subtracted from every timed call. A warm-up in the trusted process
            // waits, stopped, meanwhile (and while another judge times).
            if let Some(t) = &self.trusted {
                t.freeze();
            }
            self.hold(Work::Calibrate).map_err(Failure::Judge)?;
            let c = self.calibrate_channel(runner);
            let held = self.hold(Work::Check).map_err(Failure::Judge);
            if let Some(t) = &self.trusted {
                t.thaw();
            }
            held?;
            c?
        } else {
            measure::ChannelCost::default()
        };
        let interpreted = interpreted_here(load.product.backend, self.on_gpu);
        let loaded = runner.ask(&load, timeout).map_err(Failure::Candidate)?;
        let waited = self.device_wait.saturating_sub(waited_before);
        self.split.runner_s += started.elapsed().saturating_sub(waited).as_secs_f64();
        // Whether the candidate runs in an interpreter decides whether it is timed (and its
        // timed calls re-checked on fresh inputs): the judge knows it from the backend and
        // the device, and a runner that says otherwise was patched by its candidate (red
        // team 2026-12-06: a C kernel claimed it, skipped timing and passed wrong).
        if loaded.interpreted != interpreted {
            runner.kill();
            return Err(Failure::Candidate(CallError::Protocol(format!(
                "the runner's reply to `load` says interpreted = {}; a {} candidate {} here",
                loaded.interpreted,
                load.product.backend.name(),
                if interpreted {
                    "runs in its interpreter"
                } else {
                    "runs natively"
                }
            ))));
        }
        let seeds = self.config.seeds.clone();
        let mut corr = Correctness {
            seeds: seeds.clone(),
            ..Correctness::default()
        };
        // 4. Quick check on the smallest workload, then 5. the full check.
        self.enter(r, Stage::QuickCheck);
        let smallest = task.smallest_workload();
        let mut order = vec![smallest];
        order.extend((0..task.workloads.len()).filter(|&w| w != smallest));
        let mut elapsed_ns = vec![0u64; task.workloads.len()];
        // Candidates already checked in full under these settings, brought back only to be
        // timed together, get one seed per workload (which also sizes their timing rounds).
        let (quick, check_seeds): (&[(usize, u64)], &[u64]) = if self.light_checks {
            (&[], &seeds[..1])
        } else {
            (&[(smallest, seeds[0])], &seeds)
        };
        // Correctness runs get the same kind of buffers as timed calls: files the judge makes
        // in the slots' directory, which the runner maps shared (page-aligned, its own
        // mapping per file), one set per workload kept across seeds. A kernel that told the
        // phases apart by its buffers (malloc'd here, mapped when timed) once passed every
        // check and misbehaved only when timed.
        let mut check_slot: Option<(usize, slots::Slot)> = None;
        // The quick check's call is the full check's first: the same inputs into the same
        // poisoned buffers again would only cost a run.
        let full = order
            .iter()
            .flat_map(|&w| check_seeds.iter().map(move |&s| (w, s)))
            .filter(|p| !quick.contains(p));
        for (i, (w, seed)) in quick.iter().copied().chain(full).enumerate() {
            if i == 1 {
                self.enter(r, Stage::FullCheck);
            }
            self.at = Some(w);
            let started = Instant::now();
            let mut cached = self.prepare(task, w, seed).map_err(Failure::Judge)?;
            // A copy in the runner's directory: the cache, with the references next to the
            // inputs, stays out of its view.
            let name = format!("w{w}_s{seed}");
            let mut copied = copy_to_runner(
                runner,
                Path::new(&cached),
                &name,
                "inputs.safetensors",
                0o666,
            );
            // Evicted by another process's cap in between: prepared (drawn) again.
            if copied
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            {
                cached = self.prepare(task, w, seed).map_err(Failure::Judge)?;
                copied = copy_to_runner(
                    runner,
                    Path::new(&cached),
                    &name,
                    "inputs.safetensors",
                    0o666,
                );
            }
            let (staged, inputs) = match copied {
                Ok(s) => s,
                // Its in-memory directory holds one run's tensors and some room: the
                // candidate filled it.
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {
                    runner.kill();
                    return Ok(Some(Verdict::new(
                        Status::RuntimeError,
                        Reason::ScratchFull,
                        format!(
                            "the sandbox's private directory (in memory, one run's tensors and {} MiB) was full: the candidate wrote files there",
                            SCRATCH_SLACK >> 20
                        ),
                    )));
                }
                Err(e) => {
                    return Err(Failure::Judge(JudgeError::Harness(HarnessError::Setup(
                        format!("cannot copy inputs {cached} to the sandbox: {e}"),
                    ))))
                }
            };
            self.split.inputs_s += started.elapsed().as_secs_f64();
            let started = Instant::now();
            let out = format!("out_w{w}_s{seed}");
            let prefix = runner.dir_in_child().join(&out).display().to_string();
            let host_prefix = runner.dir().join(&out).display().to_string();
            if check_slot.as_ref().is_none_or(|(at, _)| *at != w) {
                let (ins, outs) = self.tensor_specs(task, w);
                match &mut check_slot {
                    // Handed from workload to workload, as timing slots are: the same files
                    // (grown when too small), so the runner's mappings stay few.
                    Some((at, slot)) => {
                        slot.fit(&ins, &outs).map_err(measure::slot_error)?;
                        *at = w;
                    }
                    None => {
                        let (host, seen) = slots::slot_dirs(runner);
                        let dirs = slots::Dirs {
                            host: &host,
                            seen: &seen,
                        };
                        let slot = slots::Slot::create(&dirs, &format!("w{w}s0"), &ins, &outs)
                            .map_err(measure::slot_error)?;
                        check_slot = Some((w, slot));
                    }
                }
            }
            let Some((_, slot)) = &check_slot else {
                unreachable!("made above for this workload")
            };
            let axes = &task.workloads[w].axes;
            let req = protocol::Run {
                slot: slot.spec(),
                inputs_path: &inputs,
                axes: axis_values(task, w),
                in_shapes: task.inputs.iter().map(|t| t.dims(axes)).collect(),
                out_shapes: task.outputs.iter().map(|o| o.tensor.dims(axes)).collect(),
                out_prefix: prefix,
                // On a GPU the quick check also records which device kernels ran.
                profile: self.on_gpu && i == 0,
            };
            let reply = runner.ask(&req, timeout).map_err(Failure::Candidate)?;
            // Work the host code did outside the kernels (Triton and Pallas: found by the
            // runner, in the candidate's process, so only an admission is taken from it).
            let Some(host) = host_compute(reply.host_compute) else {
                runner.kill();
                return Err(Failure::Candidate(CallError::Protocol(
                    "the runner's reply names host compute in a form the harness never writes"
                        .into(),
                )));
            };
            if !host.is_empty() {
                let _ = std::fs::remove_file(&staged);
                r.policy = host;
                r.correctness = Some(corr);
                return Ok(policy_verdict(r));
            }
            if let Some(names) = reply.device_kernels {
                r.device_kernels = Some(names);
            }
            elapsed_ns[w] = reply.elapsed_ns.unwrap_or(0);
            r.time_split.kernel_s += elapsed_ns[w] as f64 / 1e9;
            let earlier: Vec<u64> = seeds.iter().copied().take_while(|&s| s != seed).collect();
            // The reply is the candidate's process's: only a list of the task's input names
            // goes on to the trusted side.
            let Some(changed) = changed_inputs(task, reply.inputs_changed) else {
                runner.kill();
                return Err(Failure::Candidate(CallError::Protocol(
                    "the runner's reply names the changed inputs in a form the harness never writes"
                        .into(),
                )));
            };
            let checked = self.check(
                task,
                w,
                seed,
                output_paths(task, &host_prefix),
                changed,
                earlier,
                &mut corr,
            );
            // Checked: the run's files go, so the runner's in-memory directory holds one run.
            let _ = std::fs::remove_file(&staged);
            for o in &task.outputs {
                let _ = std::fs::remove_file(format!("{host_prefix}.{}.bin", o.tensor.name));
            }
            self.split.checks_s +=
                (started.elapsed().as_secs_f64() - elapsed_ns[w] as f64 / 1e9).max(0.0);
            if let Some(v) = checked? {
                r.correctness = Some(corr);
                return Ok(Some(v));
            }
        }
        r.correctness = Some(corr);
        if interpreted && self.config.timing {
            r.timing_unavailable = Some(
                "the candidate ran in its interpreter (no accelerator here); interpreter times are not kernel times".into(),
            );
        }
        if !self.config.timing || interpreted {
            return Ok(None);
        }
        if self.parking {
            // Timed later, side by side with other candidates (`Judge::compare`).
            self.park = Some((channel, elapsed_ns));
            return Ok(None);
        }
        // 6. Timing, 7. roofline: alone on the device until the evaluation ends (a warm-up
        // still running in the trusted process is answered first).
        self.trusted().map_err(Failure::Judge)?;
        self.hold(Work::Timing).map_err(Failure::Judge)?;
        self.enter(r, Stage::Timing);
        let (perf, eliminated) = match self.time_all(task, runner, &elapsed_ns, channel, r)? {
            Ok(timed) => timed,
            Err(v) => return Ok(Some(v)),
        };
        Ok(self.performance(task, perf, eliminated, r))
    }

    /// Judges one correctness call's outputs against the cached reference (prepared before
    /// the call); `inputs_changed` the runner's word on which inputs the call changed, `earlier`
    /// the seeds a stale output may match.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        outputs: Files,
        inputs_changed: Vec<String>,
        earlier: Vec<u64>,
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        let req = protocol::Check {
            task: &task.content_hash,
            workload: w,
            seed,
            outputs,
            inputs_changed: Some(inputs_changed),
            previous_seeds: Some(earlier),
            cache_dir: Some(self.ref_cache()),
            given_inputs: None,
        };
        self.judge_outputs(task, w, seed, req, corr)
    }

    /// Judges a timed call's outputs against a reference the trusted side computes in memory
    /// from `inputs` (raw files: the call's fresh inputs, which the judge has compared with
    /// what it wrote; they are never used again, so nothing is cached).
    pub(crate) fn check_timed(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        outputs: &Files,
        inputs: &Files,
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        self.ensure_loaded(task)?;
        let req = protocol::Check {
            task: &task.content_hash,
            workload: w,
            seed,
            outputs: outputs.clone(),
            inputs_changed: None,
            previous_seeds: None,
            cache_dir: None,
            given_inputs: Some(inputs.clone()),
        };
        corr.timed_rechecks += 1;
        self.judge_outputs(task, w, seed, req, corr)
    }

    /// Sends a `check` request; updates the running figures and turns a failure into a verdict.
    pub(crate) fn judge_outputs(
        &mut self,
        task: &Task,
        w: usize,
        seed: u64,
        req: protocol::Check<'_>,
        corr: &mut Correctness,
    ) -> Result<Option<Verdict>, Failure> {
        let v = self.trusted_ask(task, &req).map_err(Failure::Judge)?;
        corr.checks += 1;
        for o in v.outputs {
            // None: not finite (the trusted side writes no NaN into JSON).
            let abs = o.max_abs_error.unwrap_or(f64::INFINITY);
            let rel = o.max_rel_error.unwrap_or(f64::INFINITY);
            corr.max_rel_error = corr.max_rel_error.max(rel);
            if abs >= corr.max_abs_error || corr.worst.is_none() {
                corr.max_abs_error = abs;
                corr.worst = Some(WorstElement {
                    workload: w,
                    seed,
                    output: o.name,
                    index: o.worst_index,
                    got: o.worst_value,
                    expected: o.worst_expected,
                });
            }
            if o.fraction_bad > 0.0 {
                corr.fraction_bad = o.fraction_bad;
            }
        }
        if v.passed {
            return Ok(None);
        }
        let detail = format!("workload {w} seed {seed}: {}", v.detail.unwrap_or_default());
        let reason = v.reason.unwrap_or(Reason::NumericalMismatch);
        Ok(Some(Verdict::new(v.status, reason, detail).at(Some(w))))
    }
}

/// The inputs a runner's reply says its correctness call changed (`inputs_changed`: a list of
/// the task's input names, or nothing); None when the reply holds anything else.
pub(crate) fn changed_inputs(task: &Task, names: Option<Vec<String>>) -> Option<Vec<String>> {
    let names = names.unwrap_or_default();
    names
        .iter()
        .all(|n| task.inputs.iter().any(|i| i.name == *n))
        .then_some(names)
}

/// Findings the runner reports of host code computing outside the kernels (none when the
/// field is absent), as policy violations; `None` for anything the harness never writes.
pub(crate) fn host_compute(
    found: Option<Vec<protocol::HostFinding>>,
) -> Option<Vec<c::PolicyViolation>> {
    const MAX: usize = 16;
    let found = found.unwrap_or_default();
    if found.len() > MAX {
        return None;
    }
    found
        .into_iter()
        .map(|f| {
            (f.file.len() <= 512 && f.message.len() <= 2048).then(|| c::PolicyViolation {
                file: f.file,
                line: f.line,
                name: String::new(),
                message: f.message,
            })
        })
        .collect()
}

pub(crate) fn axis_values(task: &Task, w: usize) -> Vec<i64> {
    task.axes
        .iter()
        .map(|a| task.workloads[w].axes[&a.name])
        .collect()
}

/// Whether a candidate of `language` runs in an interpreter here: an accelerator's language
/// (Triton, Pallas) on a machine judging without one. Never the runner's word.
pub(crate) fn interpreted_here(language: ksmith_task::Language, on_gpu: bool) -> bool {
    ksmith_backend::backend::for_language(language).device() == ksmith_backend::backend::Device::Gpu
        && !on_gpu
}

#[cfg(test)]
mod tests {
    use super::{host_compute, interpreted_here};
    use crate::protocol::Run;
    use ksmith_harness::parse_reply;
    use serde_json::{json, Value};

    fn read(v: Value) -> Option<Vec<ksmith_backend::c::PolicyViolation>> {
        let ran = parse_reply::<Run>(json!({ "host_compute": v })).ok()?;
        host_compute(ran.host_compute)
    }

    #[test]
    fn whether_a_candidate_is_interpreted_is_the_judges_own_knowledge() {
        use ksmith_task::Language;
        assert!(!interpreted_here(Language::C, false));
        assert!(!interpreted_here(Language::C, true));
        assert!(interpreted_here(Language::Triton, false));
        assert!(interpreted_here(Language::Pallas, false));
        assert!(!interpreted_here(Language::Triton, true));
        assert!(!interpreted_here(Language::Cuda, true));
    }

    #[test]
    fn host_compute_findings_are_read_strictly() {
        assert_eq!(read(json!(null)).map(|v| v.len()), Some(0));
        let found = read(json!([
            {"file": "kernel.py", "line": 11, "message": "host code computes `mul`"}
        ]))
        .unwrap();
        assert_eq!((found[0].file.as_str(), found[0].line), ("kernel.py", 11));
        for bad in [
            json!("PASSED"),
            json!([{"file": "kernel.py", "line": -1, "message": "m"}]),
            json!([{"file": "kernel.py", "message": "m"}]),
            json!([{"file": 3, "line": 1, "message": "m"}]),
            json!([{"file": "k", "line": 1, "message": "m", "status": "PASSED"}]),
            json!([{"file": "k", "line": 1, "message": "m".repeat(3000)}]),
            json!(vec![json!({"file": "k", "line": 1, "message": "m"}); 17]),
        ] {
            assert!(read(bad.clone()).is_none(), "{bad}");
        }
    }
}
