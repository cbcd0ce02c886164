//! The tuner's driver: a solution's tunable parameters searched with the judge, resumably.
//! Every configuration is raced against the best so far, stored evaluations are reused (so a
//! search killed midway resumes for free), and the leaders are re-timed side by side with the
//! untuned solution before a winner is chosen. Progress goes out as [`Event`]s.

use crate::evaluator::{Evaluator, EvaluatorError, Purpose};
use crate::events::{Event, EventSink, TrialOutcome};
use ksmith_judge::{EvalResult, Judge, Performance, Race, Status};
use ksmith_store::Store;
use ksmith_task::{Solution, Task};
use ksmith_tune::{Config, Space, Trial};
use std::time::{Duration, Instant};

/// How to search (what `ksmith tune` and `ksmith optimize` take from their flags).
#[derive(Debug, Clone)]
pub struct TuneSettings {
    /// Strategy name, one of [`ksmith_tune::STRATEGIES`].
    pub strategy: String,
    /// Configurations to evaluate at most (stored ones count, but cost nothing).
    pub budget: usize,
    /// Stop proposing configurations after this long.
    pub time_budget: Option<Duration>,
    /// Seed of the random strategies.
    pub seed: u64,
    /// Successive elimination against the best so far (off: every configuration timed in full).
    pub race: bool,
    /// Leaders re-timed side by side with the untuned solution at the end (0: none).
    pub confirm: usize,
}

impl Default for TuneSettings {
    fn default() -> TuneSettings {
        TuneSettings {
            strategy: "hillclimb".into(),
            budget: 20,
            time_budget: None,
            seed: 1,
            race: true,
            confirm: 3,
        }
    }
}

/// Why a search could not run. A configuration that fails is not an error: its row says so.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The solution declares nothing to tune.
    #[error("solution {solution}: declares no [[tunables]]; nothing to tune")]
    NothingToTune {
        /// The solution's name.
        solution: String,
    },
    /// The strategy name is not known.
    #[error("unknown strategy {}", ksmith_task::suggest::expected(name, &ksmith_tune::STRATEGIES))]
    UnknownStrategy {
        /// The name given.
        name: String,
    },
    /// An evaluation could not be found or made.
    #[error(transparent)]
    Evaluator(#[from] EvaluatorError),
}

/// One evaluated configuration.
#[derive(Debug, Clone)]
pub struct TuneRow {
    /// The configuration.
    pub config: Config,
    /// Its evaluation (raced: possibly eliminated early).
    pub result: EvalResult,
    /// It came from the store.
    pub reused: bool,
    /// Seconds since the search started when this evaluation finished.
    pub elapsed_s: f64,
}

/// A leader timed twice: in the search, then again side by side with the other leaders and the
/// untuned solution (`config` None); the second figure decides.
#[derive(Debug, Clone)]
pub struct Confirmed {
    /// The configuration; None for the untuned solution.
    pub config: Option<Config>,
    /// Its evaluation in the search.
    pub first: EvalResult,
    /// Its evaluation re-timed together with the other finalists.
    pub second: EvalResult,
    /// Against the untuned solution in the same rounds, when both were re-timed.
    pub vs_untuned: Option<ksmith_judge::Relative>,
    /// The decision rule on `vs_untuned` (`ksmith_judge::decide`): only a configuration
    /// decided better replaces the untuned solution.
    pub decision: Option<ksmith_judge::decide::Decision>,
}

impl Confirmed {
    /// The cost re-timed together (all leaders against the same baseline calls); None unless
    /// it passed again.
    pub fn cost(&self) -> Option<f64> {
        cost(&self.second)
    }
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct TuneOutcome {
    /// The untuned solution's evaluation.
    pub default_result: EvalResult,
    /// Every configuration tried, in order.
    pub rows: Vec<TuneRow>,
    /// Leaders re-timed, cheapest first.
    pub confirmed: Vec<Confirmed>,
    /// The winning configuration (None: the untuned solution) and its cost.
    pub best: Option<(Option<Config>, f64)>,
    /// Seconds the whole search took.
    pub elapsed_s: f64,
    /// Valid configurations in the space.
    pub space_size: usize,
    /// The untuned solution's configuration (its `#define` defaults), when known.
    pub default_config: Option<Config>,
    /// Seconds since the start when the untuned solution's evaluation finished.
    pub default_elapsed_s: f64,
}

/// Geometric mean of the per-workload median latencies of a passed evaluation.
pub use ksmith_session::context::latency_ms;

/// The tuner's figure of merit (lower is better): time relative to the XLA baseline measured in
/// the same alternating windows (1 / speedup), so machine drift between evaluations cancels.
pub fn cost(r: &EvalResult) -> Option<f64> {
    passed_perf(r).map(|p| 1.0 / p.speedup.max(1e-12))
}

/// The performance of a passed evaluation.
pub fn passed_perf(r: &EvalResult) -> Option<&Performance> {
    r.performance
        .as_ref()
        .filter(|_| r.status == Status::Passed)
}

/// Whether timing stopped early (successive elimination).
pub fn eliminated(r: &EvalResult) -> bool {
    r.performance
        .as_ref()
        .is_some_and(|p| p.eliminated.is_some())
}

/// An evaluation as the events report it.
pub fn trial_outcome(r: &EvalResult) -> TrialOutcome {
    let p = passed_perf(r);
    TrialOutcome {
        status: r.status,
        reason: r.reason.clone(),
        speedup: p.map(|p| p.speedup),
        interval: p.map(|p| p.speedup_interval),
        eliminated: eliminated(r),
    }
}

/// The solution with a configuration's values fixed as `-D` flags.
pub fn tuned_variant(solution: &Solution, config: &Config) -> Solution {
    let name = format!("{}[{}]", solution.name, ksmith_tune::label(config));
    solution.variant(&name, &ksmith_tune::defines(config))
}

/// Per-workload speedups of a fully timed evaluation: what later candidates race against.
fn incumbent(r: &EvalResult, workloads: usize) -> Option<Vec<f64>> {
    let p = passed_perf(r).filter(|p| p.eliminated.is_none())?;
    let mut v = vec![0.0; workloads];
    for w in &p.workloads {
        *v.get_mut(w.workload)? = w.speedup;
    }
    Some(v)
}

/// Total order on optional costs: missing (failed) last.
pub fn cmp_cost(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    a.unwrap_or(f64::INFINITY)
        .total_cmp(&b.unwrap_or(f64::INFINITY))
}

/// The space and the strategy, or why the search cannot run.
fn prepare(
    task: &Task,
    solution: &Solution,
    settings: &TuneSettings,
) -> Result<(Space, Box<dyn ksmith_tune::Strategy>), TuneError> {
    let space = Space::new(task, solution);
    if space.is_empty() {
        return Err(TuneError::NothingToTune {
            solution: solution.name.clone(),
        });
    }
    let strategy = ksmith_tune::strategy(&settings.strategy, settings.seed).ok_or_else(|| {
        TuneError::UnknownStrategy {
            name: settings.strategy.clone(),
        }
    })?;
    Ok((space, strategy))
}

/// Whether a search of `solution` with `settings` can run (something to tune, a known
/// strategy), without judging anything: for a front end to refuse before it starts a judge.
pub fn check(task: &Task, solution: &Solution, settings: &TuneSettings) -> Result<(), TuneError> {
    prepare(task, solution, settings).map(|_| ())
}

/// Evaluates the untuned solution, then up to `settings.budget` configurations proposed by the
/// strategy, racing each against the best so far; then re-times the leaders and the untuned
/// solution side by side. Evaluations already in the store are reused, so an interrupted
/// search resumes for free. The judge's settings (seeds, timing) are the caller's.
pub fn search(
    judge: &mut Judge,
    store: &mut Store,
    task: &Task,
    solution: &Solution,
    settings: &TuneSettings,
    events: &dyn EventSink,
) -> Result<TuneOutcome, TuneError> {
    let started = Instant::now();
    let deadline = settings.time_budget.map(|d| started + d);
    let (space, mut strategy) = prepare(task, solution, settings)?;
    let space_size = space.enumerate().len();
    events.emit(Event::TuneStarted {
        task: task.name.clone(),
        solution: solution.name.clone(),
        parameters: space.names().iter().map(|n| n.to_string()).collect(),
        space_size,
        strategy: strategy.name().to_string(),
        racing: settings.race,
        steps: settings.budget.min(space_size.saturating_sub(1).max(1)) as u64,
    });
    let mut ev = Evaluator::new(judge, store);
    // A raced result may be a rough estimate: its key names the race, so it is never reused
    // where a full measurement (or a race against another incumbent) is wanted.
    let mut evaluate = |variant: &Solution, race: Option<Race>| -> Result<_, TuneError> {
        let purpose = race.map_or(Purpose::Plain, Purpose::Raced);
        Ok(ev.evaluate(task, variant, &purpose)?)
    };
    // The untuned solution (macro defaults) is the reference point and the first incumbent.
    events.emit(Event::TuneJudging { config: None });
    let first = evaluate(solution, None)?;
    let default_result = first.result;
    events.emit(Event::TuneJudged {
        config: None,
        outcome: trial_outcome(&default_result),
        reused: first.reused,
    });
    let default_elapsed_s = started.elapsed().as_secs_f64();
    let nw = task.workloads.len();
    let mut leader = incumbent(&default_result, nw);
    // When the untuned configuration is known, the search starts from it (hill climbing explores
    // its neighbours first) and never proposes it again.
    let default_config = space.default_config(solution);
    let mut history: Vec<Trial> = default_config
        .iter()
        .map(|c| Trial::measured(c.clone(), cost(&default_result)))
        .collect();
    let mut rows: Vec<TuneRow> = Vec::new();
    while rows.len() < settings.budget && deadline.is_none_or(|d| Instant::now() < d) {
        let Some(config) = strategy.propose(&space, &history) else {
            break;
        };
        let variant = tuned_variant(solution, &config);
        let race = leader.clone().filter(|_| settings.race).map(Race::against);
        events.emit(Event::TuneJudging {
            config: Some(config.clone()),
        });
        let e = evaluate(&variant, race)?;
        events.emit(Event::TuneJudged {
            config: Some(config.clone()),
            outcome: trial_outcome(&e.result),
            reused: e.reused,
        });
        let trial = Trial {
            config: config.clone(),
            cost: cost(&e.result),
            eliminated: eliminated(&e.result),
        };
        let improves = trial.cost.is_some()
            && !trial.eliminated
            && ksmith_tune::best(&history)
                .and_then(|b| b.cost)
                .is_none_or(|b| trial.cost < Some(b));
        let beats_default = cost(&default_result).is_none_or(|d| trial.cost < Some(d));
        if improves && beats_default {
            leader = incumbent(&e.result, nw).or(leader);
        }
        history.push(trial);
        rows.push(TuneRow {
            config,
            result: e.result,
            reused: e.reused,
            elapsed_s: started.elapsed().as_secs_f64(),
        });
    }
    // The search may end before the budget (space exhausted, time budget).
    events.emit(Event::TuneSearchEnded {
        evaluated: rows.len(),
    });
    let confirmed = if settings.confirm > 0 {
        confirm(
            &mut ev,
            task,
            solution,
            &history,
            &rows,
            &default_result,
            default_config.as_ref(),
            settings.confirm,
            events,
        )?
    } else {
        Vec::new()
    };
    // Re-timed with the untuned solution: it is the incumbent, and a configuration replaces it
    // only when decided better in the same rounds (the cheapest such); else the untuned
    // solution stays, even when a configuration's point estimate is lower.
    let untuned = confirmed
        .iter()
        .find(|c| c.config.is_none())
        .and_then(|u| u.cost());
    let decided = untuned.map(|u| {
        confirmed
            .iter()
            .filter(|c| c.decision.is_some_and(|d| d.adopt()))
            .find_map(|c| Some((c.config.clone(), c.cost()?)))
            .unwrap_or((None, u))
    });
    let best = match decided.or_else(|| {
        confirmed
            .first()
            .and_then(|c| Some((c.config.clone(), c.cost()?)))
    }) {
        Some(b) => Some(b),
        None => {
            // No confirmation: the cheaper of the best trial and the untuned solution.
            let tuned =
                ksmith_tune::best(&history).and_then(|b| Some((Some(b.config.clone()), b.cost?)));
            let default = cost(&default_result).map(|c| (None, c));
            match (tuned, default) {
                (Some(t), Some(d)) => Some(if t.1 < d.1 { t } else { d }),
                (t, d) => t.or(d),
            }
        }
    };
    Ok(TuneOutcome {
        default_result,
        rows,
        confirmed,
        best,
        elapsed_s: started.elapsed().as_secs_f64(),
        space_size,
        default_config,
        default_elapsed_s,
    })
}

/// Spends repetitions on the leaders: the best few and the untuned solution re-timed side by
/// side; cheapest first.
#[allow(clippy::too_many_arguments)]
fn confirm(
    ev: &mut Evaluator<'_>,
    task: &Task,
    solution: &Solution,
    history: &[Trial],
    rows: &[TuneRow],
    default_result: &EvalResult,
    default_config: Option<&Config>,
    count: usize,
    events: &dyn EventSink,
) -> Result<Vec<Confirmed>, TuneError> {
    // The untuned configuration is re-timed as the untuned solution itself, below.
    let mut leaders: Vec<&Trial> = history
        .iter()
        .filter(|t| t.cost.is_some() && !t.eliminated)
        .filter(|t| Some(&t.config) != default_config)
        .collect();
    leaders.sort_by(|a, b| cmp_cost(a.cost, b.cost));
    // The untuned solution first (the reference), then the leaders: timed side by side.
    let mut finalists: Vec<(Option<Config>, EvalResult, Solution)> = Vec::new();
    if default_result.status == Status::Passed {
        finalists.push((None, default_result.clone(), solution.clone()));
    }
    for t in leaders.into_iter().take(count) {
        let first = rows
            .iter()
            .find(|r| r.config == t.config)
            .map(|r| r.result.clone())
            .unwrap_or_else(|| default_result.clone());
        finalists.push((
            Some(t.config.clone()),
            first,
            tuned_variant(solution, &t.config),
        ));
    }
    if finalists.is_empty() {
        return Ok(Vec::new());
    }
    let untuned_first = finalists[0].0.is_none();
    events.emit(Event::TuneRetiming {
        finalists: finalists.len(),
        with_untuned: untuned_first,
    });
    let sols: Vec<Solution> = finalists.iter().map(|f| f.2.clone()).collect();
    let (_, mut cmp) = ev.compare(task, &sols)?;
    // Against the untuned solution: a wide interval across 1.00 with nothing decided faster
    // is timed again with more rounds (2x, then 4x) before the decision stands.
    if untuned_first {
        for k in 1..=ksmith_judge::decide::MORE_ROUNDS {
            let (w, decided) =
                ksmith_judge::decide::choose_against(0, 0..cmp.results.len(), &cmp.versus);
            if w != 0 || !decided.iter().any(|(_, d)| d.wants_more_rounds()) {
                break;
            }
            events.emit(Event::TuneRetiming {
                finalists: sols.len(),
                with_untuned: true,
            });
            cmp = ev.compare_with_more_rounds(task, &sols, 1 << k)?.1;
        }
    }
    let mut confirmed = Vec::new();
    for (i, ((config, first, _), second)) in finalists.into_iter().zip(cmp.results).enumerate() {
        let vs_untuned = (untuned_first && i > 0).then(|| cmp.versus[i][0]).flatten();
        let decision = (untuned_first && i > 0)
            .then(|| ksmith_judge::decide::decide_paired(vs_untuned.as_ref()));
        confirmed.push(Confirmed {
            config,
            first,
            second,
            vs_untuned,
            decision,
        });
    }
    confirmed.sort_by(|a, b| cmp_cost(a.cost(), b.cost()));
    Ok(confirmed)
}
