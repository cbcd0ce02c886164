//! Judging elsewhere: a [`Remote`] (e.g. a Ray cluster's devices, crate `ksmith-cluster`) runs
//! the whole cascade on another machine; this judge keys, returns and records its typed results
//! as if they were its own.

use crate::{Comparison, Environment, EvalResult, JudgeConfig, JudgeError, Race};
use ksmith_task::{Solution, Task};
use serde::{Deserialize, Serialize};

/// What a remote device is asked to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RemoteKind {
    /// One candidate, raced against an incumbent when `race` is set ([`crate::Judge::evaluate_raced`]).
    Evaluate {
        /// The race, if any.
        race: Option<Race>,
    },
    /// Several candidates timed side by side ([`crate::Judge::compare`]); `light`: one check
    /// seed per workload ([`crate::Judge::compare_checked`]).
    Compare {
        /// Light checks.
        light: bool,
    },
}

/// One job for a remote device.
pub struct RemoteJob<'a> {
    /// The task (with its workloads, possibly derived: held-out shapes).
    pub task: &'a Task,
    /// The candidates.
    pub solutions: &'a [Solution],
    /// The caller's judge settings; the device judges with them.
    pub config: &'a JudgeConfig,
    /// What to do.
    pub kind: RemoteKind,
}

/// What a remote device returns.
#[derive(Debug, Clone)]
pub enum RemoteOutcome {
    /// For [`RemoteKind::Evaluate`].
    Evaluated(Box<EvalResult>),
    /// For [`RemoteKind::Compare`].
    Compared(Comparison),
}

/// Devices that judge for this judge. Implementations return [`JudgeError::Cluster`] for
/// anything that is not the candidate's doing (a device lost, the cluster gone).
pub trait Remote: Send + Sync {
    /// The environment every result will carry for `config` (the devices' machine, with the
    /// caller's threads): its fingerprint keys the evaluations.
    fn environment(&self, config: &JudgeConfig) -> Result<Environment, JudgeError>;
    /// Runs `job` on a device and waits for its outcome.
    fn judge(&self, job: RemoteJob<'_>) -> Result<RemoteOutcome, JudgeError>;
}

impl crate::Judge {
    /// [`crate::Judge::evaluate_raced`] on a remote device.
    pub(crate) fn judge_remote(
        &mut self,
        remote: &dyn Remote,
        task: &Task,
        solution: &Solution,
        race: Option<Race>,
    ) -> Result<EvalResult, JudgeError> {
        let job = RemoteJob {
            task,
            solutions: std::slice::from_ref(solution),
            config: &self.config,
            kind: RemoteKind::Evaluate { race },
        };
        match remote.judge(job)? {
            RemoteOutcome::Evaluated(r) => {
                self.check_remote(std::slice::from_ref(solution), std::slice::from_ref(&*r))?;
                Ok(*r)
            }
            RemoteOutcome::Compared(_) => Err(JudgeError::Cluster(
                "a device answered an evaluation with a comparison".into(),
            )),
        }
    }

    /// [`crate::Judge::compare`] on one remote device (side by side needs one device).
    pub(crate) fn compare_remote(
        &mut self,
        remote: &dyn Remote,
        task: &Task,
        solutions: &[Solution],
    ) -> Result<Comparison, JudgeError> {
        let job = RemoteJob {
            task,
            solutions,
            config: &self.config,
            kind: RemoteKind::Compare {
                light: self.light_checks,
            },
        };
        match remote.judge(job)? {
            RemoteOutcome::Compared(c) => {
                self.check_remote(solutions, &c.results)?;
                Ok(c)
            }
            RemoteOutcome::Evaluated(_) => Err(JudgeError::Cluster(
                "a device answered a comparison with one evaluation".into(),
            )),
        }
    }

    /// A remote answer is stored under this judge's key: it must be about these candidates and
    /// from the environment the key names.
    fn check_remote(
        &mut self,
        solutions: &[Solution],
        results: &[EvalResult],
    ) -> Result<(), JudgeError> {
        let expected = self.environment()?.fingerprint.clone();
        if results.len() != solutions.len() {
            return Err(JudgeError::Cluster(format!(
                "a device returned {} results for {} candidates",
                results.len(),
                solutions.len()
            )));
        }
        for (s, r) in solutions.iter().zip(results) {
            if r.solution_hash != s.content_hash {
                return Err(JudgeError::Cluster(format!(
                    "a device returned a result for another candidate than {}",
                    s.name
                )));
            }
            if r.environment.fingerprint != expected {
                return Err(JudgeError::Cluster(format!(
                    "a device judged {} in environment {}, not {expected} (the fingerprint this run is keyed by)",
                    s.name, r.environment.fingerprint
                )));
            }
        }
        Ok(())
    }
}
