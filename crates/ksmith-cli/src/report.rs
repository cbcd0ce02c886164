//! Human-readable output: one evaluation, the machine, and the bench summary.
//!
//! Every string in an [`EvalResult`] may carry candidate text (its name, its output, compiler
//! diagnostics and policy messages quoting its source, an exception's message): lines are
//! printed through `say!` (escaped), one-line fields through [`one`], multi-line ones through
//! [`continued`].

use crate::term::{continued, one};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use ksmith_backend::hw::{DeviceLock, FloorTerm, Hardware, Stores};
use ksmith_judge::{EvalResult, HarnessSplit, Status};
use ksmith_results::suite::{self, Metrics, Row};
use ksmith_task::Task;
use serde_json::json;
use std::collections::BTreeMap;

/// The terminal's width (`COLUMNS` when stdout is not a terminal; 120 when unknown).
pub(crate) fn terminal_width() -> usize {
    let t = comfy_table::Table::new();
    t.width()
        .map(usize::from)
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|&w| w >= 40)
        .unwrap_or(120)
}

/// Cuts the cells of column `col` (ending them with `…`) so that a condensed table of these
/// cells fits in `width` columns; the column keeps at least 24 characters.
pub(crate) fn fit_column(header: &[&str], cells: &mut [Vec<String>], col: usize, width: usize) {
    let len = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| len(c))
                .chain([len(header[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // `│ a │ b │`: one border, then each column's text with a space either side and a border.
    let total: usize = 1 + widths.iter().map(|w| w + 3).sum::<usize>();
    if total <= width {
        return;
    }
    let keep = widths[col].saturating_sub(total - width).max(24);
    for row in cells.iter_mut() {
        if let Some(c) = row.get_mut(col) {
            if len(c) > keep {
                *c = c.chars().take(keep - 1).chain(['…']).collect();
            }
        }
    }
}

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

/// A speedup with its interval, marked `noisy` when the interval is wide.
pub(crate) fn speedup_cell(speedup: f64, interval: (f64, f64), noisy: bool) -> String {
    format!(
        "{}{}",
        ratio(speedup, interval),
        if noisy { " noisy" } else { "" }
    )
}

/// `STATUS (reason)`, on one line.
pub(crate) use ksmith_search::agent::brief::status_text;

/// One line per GPU kernel built: ptxas's registers and spills, shared memory.
fn print_kernel_facts(b: &ksmith_judge::BuildInfo) {
    for k in &b.ptxas {
        say!(
            "  kernel {}: {} registers, {} B shared memory, {} B spilled",
            one(&k.kernel),
            k.registers,
            k.smem_bytes,
            k.spill_bytes
        );
    }
}

/// Prints a candidate that built but could not run here ("built; not run: no device"), or
/// its JSON: `{"not_run": {"backend", "reason", "why"}, "task", "solution", "build"}`.
pub(crate) fn print_not_run(
    task: &Task,
    solution: &ksmith_task::Solution,
    backend: &str,
    reason: ksmith_judge::NotRunReason,
    why: &str,
    build: &ksmith_judge::BuildInfo,
    as_json: bool,
) {
    if as_json {
        crate::term::json(&json!({
            "not_run": {"backend": backend, "reason": reason, "why": why},
            "task": task.name,
            "solution": solution.name,
            "solution_hash": solution.content_hash,
            "build": build,
        }));
        return;
    }
    say!(
        "{} [{}] on task {}: BUILT, NOT RUN ({})",
        one(&solution.name),
        one(&solution.content_hash[..solution.content_hash.len().min(8)]),
        one(&task.name),
        reason.as_str()
    );
    say!("  {backend}: {}", one(why));
    say!(
        "  build: {:.2} s{}: {}",
        build.seconds,
        if build.cached { " (cached)" } else { "" },
        one(&build.command.join(" "))
    );
    print_kernel_facts(build);
    for d in build.diagnostics.iter().take(10) {
        say!("  {}", continued(&d.to_string(), "    "));
    }
    say!("  not stored: a machine with the device judges it");
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
            print_kernel_facts(b);
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
                w.roofline_cell(),
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
        let dropped: usize = p
            .workloads
            .iter()
            .map(|w| w.disturbance.rounds_dropped)
            .sum();
        if dropped > 0 {
            say!("  {dropped} round(s) dropped and timed again: other work on the machine disturbed them (run-queue wait or steal beyond the judge's thresholds)");
        }
        if p.never_quiet {
            say!("  never quiet: the machine stayed busy past the redo cap; some figures rest on disturbed rounds, so no decision is taken on them (undecided)");
        }
        for w in &p.workloads {
            if let Some(d) = &w.disagreement {
                say!(
                    "  workload {}: the ratio of medians {:.2}x lies outside the paired interval ({:.2}-{:.2}): {} ({:?} calls spread {:.1}x p90/p10); the paired figure is the one decisions use",
                    w.workload,
                    d.ratio_of_medians,
                    w.speedup_interval.0,
                    w.speedup_interval.1,
                    match d.why {
                        ksmith_judge::DisagreeWhy::Bimodal => "a side ran at two speeds",
                        ksmith_judge::DisagreeWhy::Drift => "the rounds drifted",
                    },
                    d.wider_side,
                    d.spread
                );
            }
        }
        for w in p.beyond_roofline() {
            if let Some(b) = &w.beyond_roofline {
                say!(
                    "  workload {}: ran at {:.0}% of its roofline floor ({}{}; now {:.0}% of a {:.3} ms floor)",
                    w.workload,
                    b.fraction * 100.0,
                    b.outcome.describe(),
                    b.remeasured_fraction
                        .map(|f| format!(", {:.0}% after measuring again", f * 100.0))
                        .unwrap_or_default(),
                    w.roofline_fraction * 100.0,
                    w.floor_ms
                );
            }
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
    if let Some(device) = &r.device {
        say!("  judged on: cluster device {}", one(device));
    }
    let t = &r.time_split;
    // Every term of the wall time, so the line adds up: waiting for the device (other judges
    // on it) and, on a cluster, the queue and the job's transfer.
    let mut terms = format!(
        "build {:.2} + kernel {:.2} + XLA baseline {:.2} + harness {:.2}",
        t.build_s, t.kernel_s, t.baseline_s, t.harness_s
    );
    if t.device_wait_s >= 0.005 {
        terms.push_str(&format!(" + device wait {:.2}", t.device_wait_s));
    }
    if r.device.is_some() {
        terms.push_str(&format!(" + cluster queue and transfer {:.2}", t.cluster_s));
    }
    say!("  time: {:.2} s = {terms}", r.elapsed_s);
    if t.harness_s > 0.0 {
        let parts: Vec<String> = t
            .harness
            .parts()
            .iter()
            .filter(|(_, s)| *s >= 0.005)
            .map(|(name, s)| format!("{name} {s:.2}"))
            .collect();
        say!("  harness: {}", parts.join(" + "));
        let buffers: Vec<String> = t
            .harness
            .buffer_parts
            .parts()
            .iter()
            .filter(|(_, s)| *s >= 0.005)
            .map(|(name, s)| format!("{name} {s:.2}"))
            .collect();
        if !buffers.is_empty() {
            say!("  buffers: {}", buffers.join(" + "));
        }
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
/// How long ago the roofline was measured and under what load.
fn measured_when(hw: &Hardware) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let ago = now.saturating_sub(hw.measured_at);
    let ago = match ago {
        0..=119 => format!("{ago} s ago"),
        120..=7199 => format!("{} min ago", ago / 60),
        7200..=172_799 => format!("{} h ago", ago / 3600),
        _ => format!("{} days ago", ago / 86_400),
    };
    match hw.load_at_measure {
        None => format!("{ago}, load unknown"),
        Some(l) if hw.looks_disturbed() => format!(
            "{ago}, load {l:.1} on {} cores: busy, the peaks may be low (measured again, keeping the higher peaks, once the machine is quiet)",
            hw.cores
        ),
        Some(l) => format!("{ago}, load {l:.1} on {} cores", hw.cores),
    }
}

pub(crate) fn print_hw(hw: &Hardware) {
    say!("cpu:              {}", hw.cpu);
    say!(
        "cores:            {} (measured with {} threads)",
        hw.cores,
        hw.threads
    );
    for c in &hw.caches {
        say!(
            "cache L{} {:<12} {} (reported)",
            c.level,
            c.kind,
            bytes_human(c.bytes)
        );
    }
    say!("simd:             {}", hw.simd.join(" "));
    let dram = hw.dram_floor_bandwidth();
    say!(
        "DRAM bandwidth:   {:.1} GB/s (the floor: {})",
        dram / 1e9,
        if dram > hw.dram_bandwidth {
            format!(
                "raised by a kernel from the measured {:.1} GB/s",
                hw.dram_bandwidth / 1e9
            )
        } else {
            "the best of the streams below".into()
        }
    );
    for s in &hw.streams {
        say!(
            "  {:<5} {:<9} {:>2} thread{} {:>7.1} GB/s",
            format!("{:?}", s.kernel).to_lowercase(),
            match s.stores {
                Stores::None => "",
                Stores::Plain => "plain",
                Stores::Streaming => "streaming",
            },
            s.threads,
            if s.threads == 1 { " " } else { "s" },
            s.bytes_per_s / 1e9
        );
    }
    say!(
        "  (buffers of {} in all, past the measured caches; streaming stores: {})",
        bytes_human(hw.method.stream_bytes),
        hw.method.nontemporal
    );
    if hw.levels.is_empty() {
        say!("cache levels:     none read faster than DRAM (measured)");
    }
    for (i, l) in hw.levels.iter().enumerate() {
        say!(
            "{} up to {:<10} {:>7.1} GB/s (read, every core)",
            if i == 0 {
                "cache levels:    "
            } else {
                "                 "
            },
            bytes_human(l.capacity_bytes),
            hw.peak(FloorTerm::Cache {
                capacity_bytes: l.capacity_bytes
            }) / 1e9
        );
    }
    say!(
        "peak FP32:        {:.1} GFLOP/s ({}-bit FMA)",
        hw.peak_floor_flops() / 1e9,
        hw.vector_bits
    );
    say!(
        "ridge point:      {:.1} FLOP/byte",
        hw.peak_floor_flops() / dram.max(1.0)
    );
    for r in &hw.raises {
        say!(
            "raised:           {:?} {:.1} -> {:.1} G/s by {} {} (workload {})",
            r.term,
            r.from / 1e9,
            r.to / 1e9,
            one(&r.by.task),
            one(&r.by.solution),
            r.by.workload
        );
    }
    say!(
        "measured:         {} in {:.1} s, {}",
        measured_when(hw),
        hw.method.seconds,
        match hw.method.device_lock {
            DeviceLock::Exclusive => "the device held alone",
            DeviceLock::None => "without the device lock",
        }
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

/// Sum over workloads of the candidate's (or the baseline's) median latency, in ms.
fn total_ms(p: &ksmith_judge::Performance, baseline: bool) -> f64 {
    p.workloads
        .iter()
        .map(|w| {
            if baseline {
                w.baseline.median_ms
            } else {
                w.candidate.median_ms
            }
        })
        .sum()
}

/// The full status text: `STATUS (reason)`, `UNAVAILABLE: why` or `ERROR: message`.
pub(crate) fn status_full(row: &Row) -> String {
    match (&row.unavailable, &row.result) {
        (Some(why), _) => format!("UNAVAILABLE ({})", one(why)),
        (None, Some(r)) => match (r.performance.is_none(), &r.timing_unavailable) {
            (true, Some(_)) if r.status == Status::Passed => {
                format!("{} (untimed: interpreter)", status_text(r))
            }
            _ => status_text(r),
        },
        (None, None) => format!("ERROR: {}", one(row.error.as_deref().unwrap_or("?"))),
    }
}

/// Everything `bench` reports.
pub(crate) struct BenchSummary<'a> {
    pub rows: &'a [Row],
    pub metrics: Vec<Metrics>,
    pub aa: Option<(f64, f64, usize)>,
    pub wall_s: f64,
    pub run_id: i64,
}

impl<'a> BenchSummary<'a> {
    /// Per solution name, over the suite's tasks (first repeat): a task whose solution could
    /// not run here is left out of every count (and named); `correct` and fast_0 (= the
    /// fraction correct) are over the tasks evaluated here; fast_p for p > 0 (correct AND
    /// speedup > p) is over the tasks whose answer is known, i.e. without the correct ones
    /// that have no kernel time. A task missing from the rows counts as evaluated and not
    /// correct (DESIGN.md: a missing task is not fast).
    pub(crate) fn new(
        tasks: &[Task],
        rows: &'a [Row],
        wall_s: f64,
        run_id: i64,
    ) -> BenchSummary<'a> {
        let metrics = suite::metrics(tasks, rows);
        BenchSummary {
            rows,
            metrics,
            aa: suite::aa_spread(rows),
            wall_s,
            run_id,
        }
    }

    /// The table's cells, one row per bench row, the status cut to fit `width` columns.
    fn cells(&self, width: usize) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let header = vec![
            "task",
            "solution",
            "status",
            "speedup vs XLA (95%)",
            "% roofline",
            "candidate ms",
            "XLA ms",
            "eval",
        ];
        let repeats = self.rows.iter().any(|x| x.repeat > 0);
        let mut cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let perf = r.result.as_ref().and_then(|x| x.performance.as_ref());
                // The name it is stored and listed under (`evals`, `show`), not the variant.
                let name = r.name();
                let sol = if repeats {
                    format!("{}#{}", one(name), r.repeat)
                } else {
                    one(name).into_owned()
                };
                vec![
                    one(&r.task).into_owned(),
                    sol,
                    status_full(r),
                    perf.map(|p| speedup_cell(p.speedup, p.speedup_interval, p.noisy))
                        .unwrap_or_else(|| "-".into()),
                    perf.map(|p| p.roofline_cell())
                        .unwrap_or_else(|| "-".into()),
                    perf.map(|p| format!("{:.3}", total_ms(p, false)))
                        .unwrap_or_else(|| "-".into()),
                    perf.map(|p| format!("{:.3}", total_ms(p, true)))
                        .unwrap_or_else(|| "-".into()),
                    r.eval_id.map(|i| i.to_string()).unwrap_or_default(),
                ]
            })
            .collect();
        fit_column(&header, &mut cells, 2, width);
        (header, cells)
    }

    pub(crate) fn print(&self) {
        let width = terminal_width();
        let (header, cells) = self.cells(width);
        let mut t = table(&header);
        // What cutting the status left too wide is wrapped (cells of numbers, long names).
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
        t.set_width(u16::try_from(width).unwrap_or(u16::MAX));
        for c in cells {
            t.add_row(c);
        }
        say!("{t}");
        for line in self.metric_lines() {
            say!("{line}");
        }
        if let Some((median, max)) = self.overhead() {
            say!("harness overhead per evaluation (excl. build, kernel and XLA time): median {median:.2} s, max {max:.2} s");
            say!(
                "  where it went (all evaluations): {}",
                self.overhead_parts()
            );
        }
        if let Some((max, median, n)) = self.aa {
            say!("A/A repeatability: {n} workload pairs >= 1 ms; speedup spread median {:.2}%, max {:.2}%", median * 100.0, max * 100.0);
        }
        say!(
            "bench run {} finished in {:.1} s (suite wall time; `ksmith compare {} OTHER` compares it)",
            self.run_id,
            self.wall_s,
            self.run_id
        );
    }

    /// One line per solution name, then what was left out and why.
    pub(crate) fn metric_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let w = self
            .metrics
            .iter()
            .map(|m| one(&m.solution).chars().count())
            .max()
            .unwrap_or(0);
        for m in &self.metrics {
            let why: Vec<String> = m
                .unavailable_why
                .iter()
                .map(|w| one(w).into_owned())
                .collect();
            if m.evaluated == 0 {
                lines.push(format!(
                    "solution {:<w$}  unavailable here ({} of {} tasks): {}",
                    one(&m.solution),
                    m.unavailable,
                    m.total,
                    why.join("; ")
                ));
                continue;
            }
            let fast: Vec<String> = m
                .fast
                .iter()
                .map(|(p, f, _)| match f {
                    Some(f) => format!("fast_{p}={f:.2}"),
                    None => format!("fast_{p}=n/a"),
                })
                .collect();
            let mut line = format!(
                "solution {:<w$}  correct {}/{}  geomean speedup (correct, timed) {}  {}",
                one(&m.solution),
                m.correct,
                m.evaluated,
                m.geomean
                    .map(|g| format!("{g:.2}x"))
                    .unwrap_or_else(|| "-".into()),
                fast.join(" ")
            );
            let known = m.evaluated - m.untimed;
            if m.untimed > 0 && m.geomean.is_none() {
                line.push_str(&format!(
                    "\n  {} correct without a kernel time (interpreter or --no-timing): speed unknown here, fast_p>0 n/a",
                    m.untimed
                ));
            } else if m.untimed > 0 {
                line.push_str(&format!(
                    "\n  {} correct without a kernel time (speed unknown here): fast_p>0 over the other {known} tasks",
                    m.untimed
                ));
            }
            if m.unavailable > 0 {
                line.push_str(&format!(
                    "\n  {} of {} tasks unavailable here, not counted: {}",
                    m.unavailable,
                    m.total,
                    why.join("; ")
                ));
            }
            lines.push(line);
        }
        lines
    }

    /// The harness parts summed over the evaluations, largest first: `buffers 12.1 s, ...`.
    pub(crate) fn overhead_parts(&self) -> String {
        let mut sums = HarnessSplit::default().parts();
        for r in self.rows.iter().filter_map(|r| r.result.as_ref()) {
            for (sum, (_, s)) in sums.iter_mut().zip(r.time_split.harness.parts()) {
                sum.1 += s;
            }
        }
        sums.sort_by(|a, b| b.1.total_cmp(&a.1));
        sums.iter()
            .filter(|(_, s)| *s >= 0.05)
            .map(|(n, s)| format!("{n} {s:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Median and max of the evaluations' harness time.
    pub(crate) fn overhead(&self) -> Option<(f64, f64)> {
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

    /// The summary as one JSON document: every row (full status and error text) and the metrics.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        json!({
            "run_id": self.run_id,
            "wall_s": self.wall_s,
            "rows": self.rows.iter().map(|r| {
                let perf = r.result.as_ref().and_then(|x| x.performance.as_ref());
                json!({
                    "task": r.task, "solution": r.solution, "name": r.name(), "repeat": r.repeat, "eval_id": r.eval_id,
                    "state": r.state().as_str(),
                    "error": r.error, "unavailable": r.unavailable,
                    "status": r.result.as_ref().map(|x| x.status.as_str()),
                    "reason": r.result.as_ref().and_then(|x| x.reason.clone()),
                    "timing_unavailable": r.result.as_ref().and_then(|x| x.timing_unavailable.clone()),
                    "speedup": perf.map(|p| p.speedup),
                    "speedup_interval": perf.map(|p| [p.speedup_interval.0, p.speedup_interval.1]),
                    "noisy": perf.map(|p| p.noisy),
                    "roofline_fraction": perf.map(|p| p.roofline_fraction),
                    "candidate_ms": perf.map(|p| total_ms(p, false)),
                    "baseline_ms": perf.map(|p| total_ms(p, true)),
                })
            }).collect::<Vec<_>>(),
            "metrics": self.metrics.iter().map(|m| json!({
                "solution": m.solution, "total": m.total, "evaluated": m.evaluated,
                "unavailable": m.unavailable, "unavailable_why": m.unavailable_why,
                "correct": m.correct, "untimed": m.untimed, "geomean_speedup": m.geomean,
                "fast_p": m.fast.iter().map(|(p, f, n)| json!({"p": p, "fraction": f, "of": n})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "harness_overhead_s": self.overhead().map(|(median, max)| json!({"median": median, "max": max})),
            "aa_spread": self.aa.map(|(max, median, n)| json!({"max": max, "median": median, "pairs": n})),
        })
    }
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
    // The decision rule's answer, the reference as the incumbent: a faster point estimate
    // inside a wide interval is no winner.
    let (winner, decided) = ksmith_judge::decide::choose_against(
        reference,
        (0..cmp.results.len()).filter(|&i| cmp.results[i].status == ksmith_judge::Status::Passed),
        &cmp.versus,
    );
    for (i, d) in &decided {
        say!(
            "{} against {}: {}",
            one(&cmp.results[*i].solution),
            one(&cmp.results[reference].solution),
            d.text()
        );
    }
    if !decided.is_empty() {
        say!("winner: {}", one(&cmp.results[winner].solution));
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
