//! The optional stages of an agent session, injected as small traits: autotuning (the autotune
//! planner declares tunables over the kernel's `#define` constants, a [`Tuner`] searches them)
//! and profiling (a [`Profiler`] samples the kernel, the profile analyst summarizes it for the
//! next plan), and review (a person approving, editing or guiding each artifact). Every search node
//! runs the same stages with the same prompts and the same adoption rule; a
//! session without them (a search with the stages off) skips them.

use crate::brief::status_text;
use crate::state::Reviewer;
use ksmith_agents::{parse_tunables, TuneDecision};
use ksmith_judge::decide::{decide, Decision, Evidence};
use ksmith_judge::{EvalResult, Judge, Status};
use ksmith_store::Store;
use ksmith_task::{Language, Solution, Task};
use ksmith_tune::Config;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Which stages a session runs (stored with a run, so a resumed run keeps them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSettings {
    /// Configurations the tuner may measure after each kept candidate (0: no autotune stage).
    #[serde(default)]
    pub tune_budget: usize,
    /// Profile each kept, passing candidate and have the analyst summarize it.
    #[serde(default)]
    pub profile: bool,
}

/// Samples a passing candidate (perf, or another profiler); the text goes to the analyst.
pub trait Profiler: Send + Sync {
    /// Whether it can profile kernels in `language` (the stage is skipped otherwise).
    fn supports(&self, language: Language) -> bool;

    /// The raw profile of `sol` (a failure is described in the text, never an error: a
    /// profile is advice).
    fn profile(
        &self,
        judge: &mut Judge,
        cache_dir: &Path,
        task: &Task,
        sol: &Solution,
        judged: &EvalResult,
    ) -> String;
}

/// Searches a candidate's declared tunables with the judge.
pub trait Tuner: Send + Sync {
    /// Measures at most `budget` configurations of `sol` (which declares `[[tunables]]`):
    /// what was found, and how many evaluations the judge ran for it.
    fn tune(
        &self,
        judge: &mut Judge,
        store: &mut Store,
        task: &Task,
        sol: &Solution,
        budget: usize,
    ) -> anyhow::Result<(TuneReport, u64)>;
}

/// The stages a session runs and their implementations.
#[derive(Clone, Default)]
pub struct Stages {
    /// What is on.
    pub settings: StageSettings,
    /// The profiler (None: no profile stage whatever the settings say).
    pub profiler: Option<Arc<dyn Profiler>>,
    /// The tuner (None: no autotune stage).
    pub tuner: Option<Arc<dyn Tuner>>,
    /// A person reviewing each plan, change, tunables and profile summary (None: autonomous).
    pub reviewer: Option<Arc<dyn Reviewer + Send + Sync>>,
}

impl Stages {
    /// The standard stages as `settings` turn them on: perf sampling, and `tuner` (the
    /// search's hill climbing, `ksmith_search::agent::tuner`) when a budget is given.
    pub fn standard(settings: StageSettings, tuner: Arc<dyn Tuner>) -> Stages {
        Stages {
            settings,
            profiler: settings
                .profile
                .then(|| Arc::new(PerfProfiler) as Arc<dyn Profiler>),
            tuner: (settings.tune_budget > 0).then_some(tuner),
            reviewer: None,
        }
    }
}

/// perf's cpu-clock sampling of the C candidate (ksmith-profile) with the compiler's
/// vectorization report, on the workload furthest below its roofline floor.
pub struct PerfProfiler;

impl Profiler for PerfProfiler {
    fn supports(&self, language: Language) -> bool {
        // ksmith-profile rebuilds C kernels with `-g` and samples them with perf.
        language == Language::C
    }

    fn profile(
        &self,
        judge: &mut Judge,
        cache_dir: &Path,
        task: &Task,
        sol: &Solution,
        judged: &EvalResult,
    ) -> String {
        // The workload furthest below its roofline floor is where a change pays most; the
        // largest when there are no figures.
        let weakest = judged.performance.as_ref().and_then(|p| {
            p.workloads
                .iter()
                .min_by(|a, b| a.roofline_fraction.total_cmp(&b.roofline_fraction))
                .map(|w| (w.workload, w.roofline_fraction, w.speedup))
        });
        let (w, why) = match weakest {
            Some((w, frac, speedup)) => (
                w,
                format!(
                    "the furthest below its roofline floor ({:.0}% of it, {speedup:.2}x vs XLA)",
                    frac * 100.0
                ),
            ),
            None => (
                (0..task.workloads.len())
                    .max_by(|a, b| task.flops_of(*a).total_cmp(&task.flops_of(*b)))
                    .unwrap_or(0),
                "the largest".to_string(),
            ),
        };
        let axes = super::brief::axes_text(task, &task.workloads[w].axes);
        let header = format!("Profiled workload {w} ({axes}): {why}.\n");
        if let Err(e) = std::fs::create_dir_all(cache_dir) {
            return format!("{header}profiling failed: {e}");
        }
        // The judge's own inputs for this workload, so generated index tables describe real work.
        let inputs = judge.prepared_inputs(task, w).ok();
        // Sampled alone on the device, as candidates are timed: a neighbour's work would
        // distort the shares the analyst reads.
        let lease = match judge.device_lease(ksmith_judge::scheduler::Work::Profile) {
            Ok(l) => l,
            Err(e) => return format!("{header}profiling failed: {e}"),
        };
        let profiled = ksmith_profile::profile_c(
            task,
            sol,
            w,
            &[],
            cache_dir,
            std::time::Duration::from_millis(500),
            inputs.as_deref(),
        );
        drop(lease);
        // The profiler's driver calls the kernel again and again on the same (warm) inputs;
        // the judge times it on fresh inputs evicted from the caches before every call. Said,
        // so the analyst does not read a warm profile as the judged kernel.
        let judged_ms = judged.performance.as_ref().and_then(|p| {
            p.workloads
                .iter()
                .find(|x| x.workload == w)
                .map(|x| (x.candidate.median_ms, x.cache_flushed))
        });
        let compared = |p: &ksmith_profile::CpuProfile| match judged_ms {
            Some((judged, flushed)) if p.calls > 0 && p.seconds > 0.0 => {
                let profiled = p.seconds * 1e3 / p.calls as f64;
                format!(
                    "Profiled: {profiled:.3} ms per call over {} calls on the same warm inputs; judged: {judged:.3} ms median on fresh inputs{} for every call ({:.2}x the profiled time).\n",
                    p.calls,
                    if flushed { " evicted from the caches" } else { "" },
                    judged / profiled.max(1e-9)
                )
            }
            _ => String::new(),
        };
        match profiled {
            Ok(p) => format!("{header}{}{}", compared(&p), p.summary()),
            Err(e) => format!("{header}profiling failed: {e}"),
        }
    }
}

/// What the autotune planner is told.
#[derive(Debug, Clone, Serialize)]
pub struct AutotuneContext {
    /// The task brief (`task_brief`).
    pub task: Value,
    /// The file the kernel is in.
    pub file: String,
    /// Its source.
    pub source: String,
    /// Its integer `#define` constants as `NAME=VALUE, ...`.
    pub defines: String,
    /// What tuning found earlier in this run or lineage.
    pub earlier: Vec<String>,
    /// Configurations the tuner may measure.
    pub budget: usize,
    /// The kernel's per-workload timing.
    pub timing: String,
}

/// What the profile analyst is told.
#[derive(Debug, Clone, Serialize)]
pub struct AnalystContext {
    /// The task brief.
    pub task: Value,
    /// The file the kernel is in.
    pub file: String,
    /// Its source.
    pub source: String,
    /// Its per-workload timing.
    pub timing: String,
    /// The raw profile.
    pub profile: String,
    /// The machine's roofline.
    pub machine: String,
    /// What autotuning of this kernel found ("" when none ran).
    pub tuning: String,
}

/// The kernel's integer `#define` constants as the autotune planner is shown them.
pub fn defines_list(defs: &[(String, i64)]) -> String {
    defs.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses the autotune planner's reply: `NO TUNING`, or tunables that name only the kernel's
/// own constants (the message goes back to the model).
pub fn check_tunables(reply: &str, names: &[String]) -> Result<TuneDecision, String> {
    let d = parse_tunables(reply).map_err(|e| e.0)?;
    if let TuneDecision::Tunables(t) = &d {
        let parsed: toml::Table = t
            .parse()
            .map_err(|e: toml::de::Error| format!("the toml block is invalid: {}", e.message()))?;
        let entries = parsed
            .get("tunables")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        for e in &entries {
            let name = e.get("name").and_then(|n| n.as_str()).unwrap_or("");
            if !names.iter().any(|n| n == name) {
                return Err(format!(
                    "tunable `{name}` is not one of the kernel's #define constants ({})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(d)
}

/// The candidate with the planner's `[[tunables]]`, validated by the solution parser.
pub fn with_tunables(task: &Task, sol: &Solution, tunables: &str) -> Result<Solution, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    sol.write_dir(dir.path(), "", tunables)
        .map_err(|e| e.to_string())?;
    Solution::load(dir.path(), task).map_err(|e| e.to_string())
}

/// What a tuner run found, as a node records it and tells its children.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneReport {
    /// The configuration to write into the kernel (None: the current values stay).
    pub config: Option<Config>,
    /// One paragraph for the next plan: the winner, every configuration's per-workload
    /// figures, the failures.
    pub note: String,
    /// The tuned configuration against the untuned kernel, timed side by side by the tuner.
    #[serde(default)]
    pub faster: Option<f64>,
    /// The decision rule on that comparison.
    #[serde(default)]
    pub decision: Option<Decision>,
}

/// Whether the tuned kernel (judged again with its values written in) replaces the untuned
/// one: it must pass again, and the tuner's side-by-side decision must say better (two separate
/// evaluations' speedups differ by more than a tuning gain in a noisy window). Without a
/// side-by-side figure, the two evaluations' intervals by the same rule. Otherwise why not.
pub fn adopt_tuned(
    report: &TuneReport,
    tuned: &EvalResult,
    untuned: &EvalResult,
) -> Result<(), String> {
    let passed = tuned.status == Status::Passed && tuned.performance.is_some();
    if !passed {
        return Err(format!("it did not pass ({})", status_text(tuned)));
    }
    let better = match (report.decision, report.faster) {
        (Some(d), _) => d.adopt(),
        // An older journal's figure: its point only.
        (None, Some(x)) => x > 1.0,
        (None, None) => match (&tuned.performance, &untuned.performance) {
            (Some(t), Some(u)) => decide(Evidence::separate(
                (t.speedup, t.speedup_interval),
                (u.speedup, u.speedup_interval),
                t.never_quiet || u.never_quiet,
            ))
            .adopt(),
            _ => false,
        },
    };
    if better {
        Ok(())
    } else {
        Err("it was not faster than the untuned kernel".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_may_name_only_the_kernels_constants() {
        let names = vec!["BM".to_string(), "CHUNK".to_string()];
        let ok = "```toml\n[[tunables]]\nname = \"CHUNK\"\nvalues = [8, 16]\n```\n";
        assert!(matches!(
            check_tunables(ok, &names),
            Ok(TuneDecision::Tunables(_))
        ));
        let bad = "```toml\n[[tunables]]\nname = \"NOPE\"\nvalues = [8, 16]\n```\n";
        let e = check_tunables(bad, &names).unwrap_err();
        assert!(
            e.contains("`NOPE` is not one of") && e.contains("BM, CHUNK"),
            "{e}"
        );
        assert!(matches!(
            check_tunables("NO TUNING: nothing to gain", &names),
            Ok(TuneDecision::None(_))
        ));
        assert_eq!(
            defines_list(&[("BM".into(), 64), ("CHUNK".into(), 8)]),
            "BM=64, CHUNK=8"
        );
    }

    #[test]
    fn the_standard_stages_follow_the_settings() {
        struct NoTuner;
        impl Tuner for NoTuner {
            fn tune(
                &self,
                _: &mut Judge,
                _: &mut Store,
                _: &Task,
                _: &Solution,
                _: usize,
            ) -> anyhow::Result<(TuneReport, u64)> {
                anyhow::bail!("not here")
            }
        }
        let off = Stages::standard(StageSettings::default(), Arc::new(NoTuner));
        assert!(off.profiler.is_none() && off.tuner.is_none());
        let on = Stages::standard(
            StageSettings {
                tune_budget: 4,
                profile: true,
            },
            Arc::new(NoTuner),
        );
        assert!(on.profiler.is_some() && on.tuner.is_some());
    }
}
