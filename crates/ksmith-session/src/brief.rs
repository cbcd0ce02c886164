//! What the agents are told (moved from the CLI's agent loop): the task brief, the machine's roofline, per-workload timing and a
//! failed candidate's diagnostics, rendered from typed results.

use ksmith_backend::hw::{FloorTerm, Hardware};
use ksmith_judge::{BeyondOutcome, EvalResult, Status};
use ksmith_task::{Language, Task};
use serde_json::{json, Value};

/// The task as every role's prompt shows it (`_task.md`): name, signature, workloads, tolerance.
pub fn task_brief(t: &Task, entry: &str, language: Language) -> Value {
    let workloads: Vec<String> = t
        .workloads
        .iter()
        .map(|w| {
            // Axes in declaration order, then each input's distribution (whether a float
            // running sum or a cheap exp is safe depends on the magnitudes).
            let axes = axes_text(t, &w.axes);
            let inputs = w
                .inputs
                .iter()
                .map(|(name, d)| format!("{name} {d}"))
                .collect::<Vec<_>>()
                .join(", ");
            if inputs.is_empty() {
                axes
            } else {
                format!("{axes}; {inputs}")
            }
        })
        .collect();
    let tolerance = t
        .outputs
        .iter()
        .map(|o| format!("{}: atol {:e}, rtol {:e}", o.tensor.name, o.atol, o.rtol))
        .collect::<Vec<_>>()
        .join("; ");
    let facts = ksmith_backend::backend::for_language(language).prompt_facts(t, entry);
    let (language, device, fence, signature) =
        (facts.language, facts.device, facts.fence, facts.signature);
    json!({
        "name": t.name, "description": t.description, "language": language, "device": device,
        "signature": signature, "workloads": workloads, "tolerance": tolerance, "fence": fence,
    })
}

/// The machine line, with a note when the machine is busier than its cores.
pub fn roofline_text(hw: &Hardware) -> String {
    format!(
        "{}{}",
        machine_line(hw),
        busy_note(load_average(), hw.cores)
    )
}

/// The one-minute load average, where the system gives one.
pub use ksmith_backend::hw::load_average;

/// `M=64 N=1000`, in the task's declaration order (as the profile and the brief list them).
pub fn axes_text(task: &Task, values: &std::collections::BTreeMap<String, i64>) -> String {
    task.axes
        .iter()
        .filter_map(|a| values.get(&a.name).map(|v| format!("{}={v}", a.name)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A cache size in KiB or MiB (one decimal where it is not whole).
fn kib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Said to the agents when the machine is busier than its cores: timings are then noisy, and
/// the model should not chase differences inside the intervals.
fn busy_note(load: Option<f64>, cores: usize) -> String {
    match load {
        Some(l) if l > cores as f64 => format!(
            " The machine is busy now (load average {l:.1} on {cores} cores: other work shares it), so timings are noisy: only clear differences are decided (comparisons say \"undecided\" otherwise), and a difference whose interval includes 1.00 is no difference."
        ),
        _ => String::new(),
    }
}

/// The machine in one line: cores, SIMD, measured peaks and cache levels (the reported caches
/// alongside), which floor a workload gets, compile flags.
pub fn machine_line(hw: &Hardware) -> String {
    let reported = hw
        .caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| format!("L{} {}", c.level, kib(c.bytes)))
        .collect::<Vec<_>>()
        .join(", ");
    // The floor's own figures (raises included); never a level at or below DRAM's.
    let dram = hw.dram_floor_bandwidth();
    let levels = hw
        .levels
        .iter()
        .map(|l| {
            let term = FloorTerm::Cache {
                capacity_bytes: l.capacity_bytes,
            };
            (l.capacity_bytes, hw.peak(term))
        })
        .filter(|&(_, bw)| bw > dram)
        .map(|(capacity, bw)| format!("up to {} at {:.0} GB/s", kib(capacity), bw / 1e9))
        .collect::<Vec<_>>()
        .join(", ");
    let raised = if hw.raises.is_empty() {
        String::new()
    } else {
        format!(
            " (raised from the measured {:.1} GB/s or a cache level's by kernels that ran faster: the floor is the fastest rate seen)",
            hw.dram_bandwidth / 1e9
        )
    };
    let levels = if levels.is_empty() {
        "none faster than DRAM".to_string()
    } else {
        levels
    };
    format!(
        "{} ({} cores, {}-bit SIMD: {}); measured peak {:.0} GFLOP/s fp32; memory bandwidth {:.1} GB/s{raised} (the best of read, copy and triad loops with plain and streaming stores, on every core and on one, over buffers far past the caches; every array counted once, as the task's byte formula counts it); measured cache levels (working sets of all cores together, read on every core): {levels} (the system reports {reported}; on a VM that may be far more than this machine's share). A workload's floor: its bytes at the memory bandwidth when its inputs are evicted before each call, else at the smallest measured level that holds them; FLOPs at the peak. Flags: -O3 -march=native -fopenmp.",
        hw.cpu,
        hw.cores,
        hw.vector_bits,
        hw.simd.join(" "),
        hw.peak_floor_flops() / 1e9,
        dram / 1e9,
    )
}

/// Per workload: latency against XLA, throughput and roofline; axes in the task's declaration
/// order (as the profile and the task brief list them).
pub fn timing_text(task: &Task, r: &EvalResult) -> String {
    let Some(p) = &r.performance else {
        return String::new();
    };
    p.workloads
        .iter()
        .map(|w| {
            let axes = axes_text(task, &w.axes);
            // Beyond the floor: said in words, with what the judge made of it.
            let beyond = match &w.beyond_roofline {
                Some(b) if b.outcome != BeyondOutcome::StaleFloor => format!(
                    " (ABOVE the measured floor; {}: the floor is now {:.0}% of this speed)",
                    b.outcome.describe(),
                    w.roofline_fraction * 100.0
                ),
                _ => String::new(),
            };
            format!(
                "- {axes}: {:.3} ms (XLA {:.3} ms, {:.2}x, 95% {:.2}-{:.2}), {:.1} GFLOP/s, {:.1} GB/s, {} of roofline (floor {:.3} ms){beyond}",
                w.candidate.median_ms,
                w.baseline.median_ms,
                w.speedup,
                w.speedup_interval.0,
                w.speedup_interval.1,
                w.gflops,
                w.gbps,
                w.roofline_cell(),
                w.floor_ms
            )
        })
        .chain(std::iter::once(format!(
            "- overall: {:.2}x vs XLA (geometric mean over {} workloads)",
            p.speedup,
            p.workloads.len()
        )))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result's status with its reason: `FAILED_BUILD (compile_error)`.
pub fn status_text(r: &EvalResult) -> String {
    match &r.reason {
        Some(reason) => format!("{} ({})", r.status, reason),
        None => r.status.to_string(),
    }
}

/// The failure of a judged candidate as the fixer needs it: its kind and the detail.
pub fn failure(r: &EvalResult) -> (&'static str, String) {
    let mut d = format!("status {}", r.status);
    if let Some(reason) = &r.reason {
        d.push_str(&format!(" ({reason})"));
    }
    // A compile error's detail is its first diagnostic, listed below with the others.
    let diagnosed = r
        .build
        .as_ref()
        .is_some_and(|b| b.diagnostics.iter().any(|x| x.severity.contains("error")));
    if let Some(detail) = r
        .detail
        .as_ref()
        .filter(|_| !(diagnosed && r.status == Status::CompileError))
    {
        d.push_str(&format!(": {detail}"));
    }
    d.push('\n');
    let kind = match r.status {
        Status::CompileError => "compile error",
        Status::PolicyRejected => "policy violation",
        Status::RuntimeError | Status::Timeout => "runtime failure",
        _ => "wrong results",
    };
    for v in &r.policy {
        d.push_str(&format!(
            "{}:{}: `{}`: {}\n",
            v.file, v.line, v.name, v.message
        ));
    }
    if let Some(b) = &r.build {
        // Errors, each with the notes the compiler put after it ("declared here", "in
        // expansion of macro"...): the context a fix often needs.
        let mut errors: Vec<String> = Vec::new();
        let mut after_error = false;
        for x in &b.diagnostics {
            let keep = if x.severity.contains("error") {
                after_error = true;
                true
            } else {
                after_error &= x.severity.contains("note");
                after_error
            };
            if keep && errors.len() < 30 {
                errors.push(x.to_string());
            }
        }
        if errors.is_empty() && r.status == Status::CompileError {
            d.push_str(&tail(&b.log, 3000));
        }
        for e in errors {
            d.push_str(&e);
            d.push('\n');
        }
    }
    if let Some(c) = &r.correctness {
        d.push_str(&format!(
            "max abs error {:.3e}, max rel error {:.3e}, {:.2}% of elements out of tolerance\n",
            c.max_abs_error,
            c.max_rel_error,
            c.fraction_bad * 100.0
        ));
        if let Some(w) = &c.worst {
            d.push_str(&format!(
                "worst element: output `{}` index {:?} on workload {} (seed {}): got {}, expected {}\n",
                w.output,
                w.index,
                w.workload,
                w.seed,
                w.got.map(|g| format!("{g:e}")).unwrap_or("-".into()),
                w.expected.map(|g| format!("{g:e}")).unwrap_or("-".into())
            ));
        }
    }
    if matches!(r.status, Status::RuntimeError | Status::Timeout) && !r.log.is_empty() {
        d.push_str(&format!(
            "candidate output (tail):\n{}\n",
            tail(&r.log, 1500)
        ));
    }
    (kind, d)
}

/// The last `n` characters of a log.
pub fn tail(s: &str, n: usize) -> String {
    let start = s.char_indices().rev().nth(n).map(|(i, _)| i).unwrap_or(0);
    s[start..].to_string()
}

/// The first `n` lines of a text.
pub fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::{busy_note, machine_line};
    use ksmith_backend::hw::{Hardware, RaisedBy, HW_FORMAT};

    /// A Xeon VM as issue 29 saw it: a 480 MiB L3 reported, a level measured below DRAM.
    fn xeon() -> Hardware {
        serde_json::from_value(serde_json::json!({
            "format": HW_FORMAT, "cpu": "Intel Xeon", "cores": 2,
            "caches": [{"level": 1, "kind": "Data", "bytes": 49152},
                       {"level": 3, "kind": "Unified", "bytes": 503316480u64}],
            "simd": ["avx512f"], "compilers": [], "dram_bandwidth": 26.5e9,
            "streams": [{"kernel": "triad", "stores": "streaming", "threads": 2, "bytes_per_s": 26.5e9}],
            "sweep": [],
            "levels": [{"capacity_bytes": 98304, "bandwidth": 400e9},
                       {"capacity_bytes": 4194304, "bandwidth": 16.1e9}],
            "peak_fp32_flops": 336e9, "vector_bits": 512, "threads": 2, "measured_at": 0,
            "load_at_measure": 0.1,
            "method": {"device_lock": "exclusive", "stream_bytes": 268435456u64,
                       "sweep_bytes": [16384, 1073741824u64], "nontemporal": "avx512", "seconds": 4.0},
            "fingerprint": "f"
        }))
        .unwrap()
    }

    #[test]
    fn the_machine_line_shows_the_floor_and_no_cache_figure_below_dram() {
        let mut hw = xeon();
        let line = machine_line(&hw);
        assert!(line.contains("memory bandwidth 26.5 GB/s"), "{line}");
        assert!(line.contains("up to 96 KiB at 400 GB/s"), "{line}");
        assert!(
            !line.contains("16 GB/s") && !line.contains("cache-resident"),
            "{line}"
        );
        assert!(
            line.contains("the system reports L1 48 KiB, L3 480 MiB"),
            "{line}"
        );
        // A raise is the floor from then on, and said to be one.
        hw.raise(
            0.0,
            3e8,
            true,
            3e8 / 30e9,
            RaisedBy {
                task: "t".into(),
                solution: "s".into(),
                solution_hash: "h".into(),
                workload: 0,
            },
        );
        let line = machine_line(&hw);
        assert!(
            line.contains("memory bandwidth 30.0 GB/s (raised from the measured 26.5"),
            "{line}"
        );
    }

    #[test]
    fn a_busy_machine_is_said_only_when_busier_than_its_cores() {
        assert!(busy_note(Some(3.4), 2).contains("load average 3.4 on 2 cores"));
        assert_eq!(busy_note(Some(1.5), 2), "");
        assert_eq!(busy_note(None, 2), "");
    }
}
