//! Human-readable output: one evaluation, the machine, and the bench summary.
//!
//! Every string in an [`EvalResult`] may carry candidate text (its name, its output, compiler
//! diagnostics and policy messages quoting its source, an exception's message): lines are
//! printed through `say!` (escaped), one-line fields through [`one`], multi-line ones through
//! [`continued`].

use crate::bench::{group, Row};
use crate::term::{continued, one};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_backend::hw::Hardware;
use ksmith_judge::{EvalResult, Status};
use ksmith_task::Task;
use serde_json::json;
use std::collections::BTreeMap;

/// A table in the one style of every table the CLI prints (Unicode, condensed).
pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    t
}

/// A value that may be non-finite (stored as null).
fn number(x: Option<f64>) -> String {
    x.map(|v| format!("{v}"))
        .unwrap_or_else(|| "non-finite".into())
}

fn axes_str(axes: &BTreeMap<String, i64>) -> String {
    axes.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A ratio with its 95% interval: `1.23x (1.10-1.40)`.
pub(crate) fn ratio(x: f64, (lo, hi): (f64, f64)) -> String {
    format!("{x:.2}x ({lo:.2}-{hi:.2})")
}

/// `STATUS (reason)`, on one line.
pub(crate) fn status_text(r: &EvalResult) -> String {
    match &r.reason {
        Some(reason) => format!("{} ({})", r.status, one(reason)),
        None => r.status.to_string(),
    }
}

/// Prints one evaluation result.
pub(crate) fn print_result(r: &EvalResult, id: Option<i64>) {
    say!(
        "{} [{}] on task {}: {}",
        one(&r.solution),
        one(&r.solution_hash[..r.solution_hash.len().min(8)]),
        one(&r.task),
        status_text(r)
    );
    if let Some(d) = &r.detail {
        say!("  {}", continued(d, "    "));
    }
    for v in &r.policy {
        say!(
            "  policy: {}:{}: {}",
            one(&v.file),
            v.line,
            continued(&v.message, "    ")
        );
    }
    if let Some(b) = &r.build {
        if r.status == Status::CompileError {
            // The detail line above already quotes the first error: not again.
            let shown = r.detail.as_deref().unwrap_or("");
            for d in b
                .diagnostics
                .iter()
                .filter(|d| d.severity != "note")
                .filter(|d| d.to_string() != shown)
                .take(10)
            {
                say!("  {}", continued(&d.to_string(), "    "));
            }
            if b.diagnostics.is_empty() {
                for l in b.log.lines().take(20) {
                    say!("  | {l}");
                }
            }
        } else {
            say!(
                "  build: {:.2} s{}",
                b.seconds,
                if b.cached { " (cached)" } else { "" }
            );
        }
    }
    if let Some(c) = &r.correctness {
        say!(
            "  correctness: {} checks{}, seeds {:?}; max abs error {:.3e}, max rel error {:.3e}",
            c.checks,
            if c.timed_rechecks > 0 {
                format!(" ({} of them re-checking timed calls)", c.timed_rechecks)
            } else {
                String::new()
            },
            c.seeds,
            c.max_abs_error,
            c.max_rel_error
        );
        if let Some(why) = &r.timing_unavailable {
            say!("  timing: unavailable ({})", one(why));
        }
        if let Some(k) = &r.device_kernels {
            let names: Vec<_> = k.iter().map(|n| one(n)).collect();
            say!("  device kernels that ran: {}", names.join(", "));
        }
        if r.status != Status::Passed {
            if let Some(w) = &c.worst {
                say!(
                    "  worst element: workload {} seed {} {}{:?}: got {}, expected {}",
                    w.workload,
                    w.seed,
                    one(&w.output),
                    w.index,
                    number(w.got),
                    number(w.expected)
                );
            }
        }
    }
    if let Some(p) = &r.performance {
        let mut t = table(&[
            "workload",
            "axes",
            "candidate ms (p10-p90)",
            "XLA ms",
            "speedup (95%)",
            "GFLOP/s",
            "GB/s",
            "% roofline",
            "samples",
        ]);
        for w in &p.workloads {
            t.add_row(vec![
                w.workload.to_string(),
                one(&axes_str(&w.axes)).into_owned(),
                format!(
                    "{:.3} ({:.3}-{:.3})",
                    w.candidate.median_ms, w.candidate.p10_ms, w.candidate.p90_ms
                ),
                format!("{:.3}", w.baseline.median_ms),
                format!(
                    "{}{}",
                    ratio(w.speedup, w.speedup_interval),
                    if w.noisy { " noisy" } else { "" }
                ),
                format!("{:.1}", w.gflops),
                format!("{:.1}", w.gbps),
                format!("{:.0}%", w.roofline_fraction * 100.0),
                format!("{}/{}", w.candidate.samples, w.baseline.samples),
            ]);
        }
        say!("{t}");
        say!(
            "  speedup vs XLA (geomean, paired rounds): {:.2}x (95%: {:.2}-{:.2}); roofline (geomean): {:.0}%",
            p.speedup,
            p.speedup_interval.0,
            p.speedup_interval.1,
            p.roofline_fraction * 100.0
        );
        if p.noisy {
            say!("  noisy: the machine disturbed some rounds (an interval wider than ±10%); re-run on a quieter machine for a precise figure");
        }
    }
    if r.status != Status::Passed && !r.log.trim().is_empty() {
        let lines: Vec<&str> = r.log.lines().collect();
        say!(
            "  candidate output ({} lines, first 5; never parsed):",
            lines.len()
        );
        for l in lines.iter().take(5) {
            say!("    | {}", one(&l.chars().take(160).collect::<String>()));
        }
    }
    say!(
        "  environment: {} ({} threads), {}, harness {}",
        one(&r.environment.cpu),
        r.environment.threads,
        one(&r.environment.compiler),
        one(&r.environment.harness_version)
    );
    let t = &r.time_split;
    say!(
        "  time: {:.2} s = build {:.2} + kernel {:.2} + XLA baseline {:.2} + harness {:.2}",
        r.elapsed_s,
        t.build_s,
        t.kernel_s,
        t.baseline_s,
        t.harness_s
    );
    if t.harness_s > 0.0 {
        let parts: Vec<String> = t
            .harness
            .parts()
            .iter()
            .filter(|(_, s)| *s >= 0.005)
            .map(|(name, s)| format!("{name} {s:.2}"))
            .collect();
        say!("  harness: {}", parts.join(" + "));
    }
    if let Some(id) = id {
        say!("  stored as evaluation {id} (ksmith show {id})");
    }
}

/// A size in the largest binary unit that keeps it readable: `48 KiB`, `1.25 MiB`, `300 MiB`.
pub(crate) fn bytes_human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        // Two decimals at most, without trailing zeros (1.5 MiB, 1.25 MiB).
        let s = format!("{v:.2}");
        format!(
            "{} {}",
            s.trim_end_matches('0').trim_end_matches('.'),
            UNITS[u]
        )
    }
}

/// Prints the machine's roofline.
pub(crate) fn print_hw(hw: &Hardware) {
    say!("cpu:              {}", hw.cpu);
    say!(
        "cores:            {} (measured with {} threads)",
        hw.cores,
        hw.threads
    );
    for c in &hw.caches {
        say!("cache L{} {:<12} {}", c.level, c.kind, bytes_human(c.bytes));
    }
    say!("simd:             {}", hw.simd.join(" "));
    say!(
        "DRAM bandwidth:   {:.1} GB/s (triad, buffers >> LLC)",
        hw.dram_bandwidth / 1e9
    );
    say!(
        "cache bandwidth:  {:.1} GB/s (triad, LLC-resident)",
        hw.cache_bandwidth / 1e9
    );
    say!(
        "peak FP32:        {:.1} GFLOP/s ({}-bit FMA)",
        hw.peak_fp32_flops / 1e9,
        hw.vector_bits
    );
    say!(
        "ridge point:      {:.1} FLOP/byte",
        hw.peak_fp32_flops / hw.dram_bandwidth.max(1.0)
    );
    for c in &hw.compilers {
        say!("compiler:         {c}");
    }
    let iso = ksmith_sandbox::isolation();
    say!(
        "isolation:        {} (untrusted code {})",
        if iso.complete() {
            "complete"
        } else {
            "INCOMPLETE"
        },
        if iso.complete() {
            "is judged"
        } else {
            "is refused unless --unsafe-no-sandbox"
        }
    );
    for (name, on, what) in iso.layers() {
        say!("  {:<16}{:<4}{what}", name, if on { "on" } else { "OFF" });
    }
    if iso.landlock_abi > 0 {
        say!("  (Landlock ABI {})", iso.landlock_abi);
    }
}

/// Suite metrics for one solution name.
struct Metrics {
    solution: String,
    correct: usize,
    total: usize,
    geomean: Option<f64>,
    fast: Vec<(f64, f64)>,
}

/// Everything `bench` reports.
pub(crate) struct BenchSummary<'a> {
    rows: &'a [Row],
    metrics: Vec<Metrics>,
    aa: Option<(f64, f64, usize)>,
    wall_s: f64,
    run_id: i64,
}

const FAST_P: [f64; 4] = [0.0, 1.0, 1.5, 2.0];

impl<'a> BenchSummary<'a> {
    pub(crate) fn new(
        tasks: &[Task],
        rows: &'a [Row],
        wall_s: f64,
        run_id: i64,
    ) -> BenchSummary<'a> {
        let mut names: Vec<String> = rows.iter().map(|r| r.solution.clone()).collect();
        names.sort();
        names.dedup();
        let metrics = names
            .into_iter()
            .map(|name| {
                let passed: Vec<&EvalResult> = tasks
                    .iter()
                    .filter_map(|t| {
                        rows.iter()
                            .find(|r| r.task == t.name && r.solution == name && r.repeat == 0)?
                            .result
                            .as_ref()
                            .filter(|r| r.status == Status::Passed)
                    })
                    .collect();
                // Untimed passes (an interpreter on a CPU) are correct but never "fast".
                let ok: Vec<f64> = passed
                    .iter()
                    .filter_map(|r| r.performance.as_ref().map(|p| p.speedup))
                    .collect();
                let geomean = (!ok.is_empty())
                    .then(|| (ok.iter().map(|s| s.ln()).sum::<f64>() / ok.len() as f64).exp());
                let fast = FAST_P
                    .iter()
                    .map(|&p| {
                        (
                            p,
                            ok.iter().filter(|&&s| s > p).count() as f64 / tasks.len() as f64,
                        )
                    })
                    .collect();
                Metrics {
                    solution: name,
                    correct: passed.len(),
                    total: tasks.len(),
                    geomean,
                    fast,
                }
            })
            .collect();
        BenchSummary {
            rows,
            metrics,
            aa: aa_spread(rows),
            wall_s,
            run_id,
        }
    }

    pub(crate) fn print(&self) {
        let mut t = table(&[
            "task",
            "solution",
            "status",
            "speedup vs XLA",
            "% roofline",
            "candidate ms",
            "XLA ms",
            "eval",
        ]);
        for r in self.rows {
            let (status, speed, roof, cand, base) = match &r.result {
                Some(res) => {
                    let s = status_text(res);
                    match &res.performance {
                        Some(p) => (
                            s,
                            format!("{:.2}x", p.speedup),
                            format!("{:.0}%", p.roofline_fraction * 100.0),
                            format!(
                                "{:.3}",
                                p.workloads
                                    .iter()
                                    .map(|w| w.candidate.median_ms)
                                    .sum::<f64>()
                            ),
                            format!(
                                "{:.3}",
                                p.workloads
                                    .iter()
                                    .map(|w| w.baseline.median_ms)
                                    .sum::<f64>()
                            ),
                        ),
                        None => (s, "-".into(), "-".into(), "-".into(), "-".into()),
                    }
                }
                None => (
                    format!("ERROR: {}", one(r.error.as_deref().unwrap_or("?"))),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ),
            };
            let sol = if self.rows.iter().any(|x| x.repeat > 0) {
                format!("{}#{}", one(&r.solution), r.repeat)
            } else {
                one(&r.solution).into_owned()
            };
            t.add_row(vec![
                one(&r.task).into_owned(),
                sol,
                status,
                speed,
                roof,
                cand,
                base,
                r.eval_id.map(|i| i.to_string()).unwrap_or_default(),
            ]);
        }
        say!("{t}");
        for m in &self.metrics {
            let fast: Vec<String> = m
                .fast
                .iter()
                .map(|(p, f)| format!("fast_{p}={f:.2}"))
                .collect();
            say!(
                "solution {:<10} correct {}/{}  geomean speedup (correct tasks) {}  {}",
                one(&m.solution),
                m.correct,
                m.total,
                m.geomean
                    .map(|g| format!("{g:.2}x"))
                    .unwrap_or_else(|| "- (no timing)".into()),
                fast.join(" ")
            );
        }
        if let Some((median, max)) = self.overhead() {
            say!("harness overhead per evaluation (excl. build, kernel and XLA time): median {median:.2} s, max {max:.2} s");
        }
        if let Some((max, median, n)) = self.aa {
            say!("A/A repeatability: {n} workload pairs >= 1 ms; speedup spread median {:.2}%, max {:.2}%", median * 100.0, max * 100.0);
        }
        say!(
            "bench run {} finished in {:.1} s (suite wall time)",
            self.run_id,
            self.wall_s
        );
    }

    /// Median and max of the evaluations' harness time.
    fn overhead(&self) -> Option<(f64, f64)> {
        let mut h: Vec<f64> = self
            .rows
            .iter()
            .filter_map(|r| Some(r.result.as_ref()?.time_split.harness_s))
            .collect();
        if h.is_empty() {
            return None;
        }
        h.sort_by(|a, b| a.total_cmp(b));
        Some((h[h.len() / 2], h[h.len() - 1]))
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        json!({
            "run_id": self.run_id,
            "wall_s": self.wall_s,
            "rows": self.rows.iter().map(|r| json!({
                "task": r.task, "solution": r.solution, "repeat": r.repeat, "eval_id": r.eval_id, "error": r.error,
                "status": r.result.as_ref().map(|x| x.status.as_str()),
                "reason": r.result.as_ref().and_then(|x| x.reason.clone()),
                "speedup": r.result.as_ref().and_then(|x| x.performance.as_ref().map(|p| p.speedup)),
                "roofline_fraction": r.result.as_ref().and_then(|x| x.performance.as_ref().map(|p| p.roofline_fraction)),
            })).collect::<Vec<_>>(),
            "metrics": self.metrics.iter().map(|m| json!({
                "solution": m.solution, "correct": m.correct, "total": m.total, "geomean_speedup": m.geomean,
                "fast_p": m.fast.iter().map(|(p, f)| json!({"p": p, "fraction": f})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "harness_overhead_s": self.overhead().map(|(median, max)| json!({"median": median, "max": max})),
            "aa_spread": self.aa.map(|(max, median, n)| json!({"max": max, "median": median, "pairs": n})),
        })
    }
}

/// Speedup spread between repeats of the same solution, over workloads whose kernel takes >= 1 ms:
/// (max, median, count) of max/min - 1.
fn aa_spread(rows: &[Row]) -> Option<(f64, f64, usize)> {
    let mut spreads = Vec::new();
    for list in group(rows).values() {
        let perfs: Vec<_> = list
            .iter()
            .filter_map(|r| r.result.as_ref()?.performance.as_ref())
            .collect();
        if perfs.len() < 2 {
            continue;
        }
        for w in &perfs[0].workloads {
            let s: Vec<f64> = perfs
                .iter()
                .filter_map(|p| p.workloads.iter().find(|x| x.workload == w.workload))
                .map(|x| x.speedup)
                .collect();
            if w.candidate.median_ms >= 1.0 && s.len() == perfs.len() {
                let (lo, hi) = s
                    .iter()
                    .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                spreads.push(hi / lo - 1.0);
            }
        }
    }
    if spreads.is_empty() {
        return None;
    }
    spreads.sort_by(|a, b| a.total_cmp(b));
    Some((
        *spreads.last().unwrap_or(&0.0),
        spreads[spreads.len() / 2],
        spreads.len(),
    ))
}

/// The side-by-side table of `eval TASK A B ...`: each candidate against XLA and against the
/// first, all from the same rounds.
pub(crate) fn print_comparison(cmp: &ksmith_judge::Comparison, ids: &[i64]) {
    // The reference is the first solution that passed (a failed one was timed with nothing).
    let reference = cmp
        .results
        .iter()
        .position(|r| r.status == ksmith_judge::Status::Passed)
        .unwrap_or(0);
    let mut t = table(&[
        "solution",
        "evaluation",
        "status",
        "vs XLA (95%)",
        if reference == 0 {
            "vs the first (95%)"
        } else {
            "vs the first passing (95%)"
        },
    ]);
    for (i, r) in cmp.results.iter().enumerate() {
        let vs_xla = r
            .performance
            .as_ref()
            .map(|p| ratio(p.speedup, p.speedup_interval))
            .unwrap_or_else(|| "-".into());
        let vs_first = match (i, cmp.versus[i][reference]) {
            (i, _) if i == reference => "(reference)".to_string(),
            (_, Some(v)) => format!(
                "{}{}",
                ratio(v.speedup, v.interval),
                if v.noisy { " noisy" } else { "" }
            ),
            (_, None) => "-".into(),
        };
        t.add_row(vec![
            one(&r.solution).into_owned(),
            ids[i].to_string(),
            status_text(r),
            vs_xla,
            vs_first,
        ]);
    }
    say!("timed side by side (the same rounds and baseline calls for every candidate):");
    say!("{t}");
    if let Some(best) = cmp.fastest_against(reference) {
        say!("fastest: {}", one(&cmp.results[best].solution));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(bytes_human(48 << 10), "48 KiB");
        assert_eq!(bytes_human(300 << 20), "300 MiB");
        assert_eq!(bytes_human(1280 << 10), "1.25 MiB");
        assert_eq!(bytes_human(512), "512 B");
    }
}
