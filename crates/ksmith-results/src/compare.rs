//! `ksmith compare A B`'s rule: per task, B's speedup over A's with both 95% intervals combined,
//! a verdict called only when that interval excludes 1, and the `--fail-if-slower` gate.

/// What a task's pair of results says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// B's interval over A lies above 1.
    Faster,
    /// B's interval over A lies below 1.
    Slower,
    /// The combined interval contains 1.
    WithinNoise,
    /// Passed in A, not in B.
    Broke,
    /// Not passed in A, passed in B.
    Fixed,
    /// Passed on neither side.
    BothFailed,
    /// Passed on both sides, not timed on one of them.
    Untimed,
    /// The task is only on side A.
    OnlyInA,
    /// The task is only on side B.
    OnlyInB,
    /// Timed on both sides, on different machines or settings.
    NotComparable,
    /// Timed on both sides, on different versions of the task (workloads, reference).
    TaskChanged,
}

impl Verdict {
    /// As printed and in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
            Verdict::Broke => "broke (passed in A)",
            Verdict::Fixed => "fixed (failed in A)",
            Verdict::BothFailed => "failed in both",
            Verdict::Untimed => "untimed",
            Verdict::OnlyInA => "only in A",
            Verdict::OnlyInB => "only in B",
            Verdict::NotComparable => "not compared (machines differ)",
            Verdict::TaskChanged => "not compared (task changed)",
        }
    }

    /// Whether the ratio counts toward the geometric mean over tasks.
    pub fn compared(self) -> bool {
        !matches!(self, Verdict::NotComparable | Verdict::TaskChanged)
    }
}

/// A speedup with its 95% interval: (point, (low, high)).
pub type Figure = (f64, (f64, f64));

/// One side's result for a task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Side<'a> {
    /// The task is not on this side.
    Missing,
    /// Evaluated and not passed (or not evaluated at all).
    Failed,
    /// Passed; its speedup when timed, and the hash of the task it was judged on.
    Passed {
        /// Speedup vs XLA with its interval, when timed.
        timing: Option<Figure>,
        /// The task's content hash as judged.
        task_hash: &'a str,
    },
}

/// A task's pair decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// B / A with the combined interval, when both were timed.
    pub ratio: Option<Figure>,
    /// What the pair says.
    pub verdict: Verdict,
    /// The gate fails on it.
    pub regression: bool,
}

/// An interval, or the point itself where none was stored (results older than intervals).
pub fn interval(x: f64, (lo, hi): (f64, f64)) -> (f64, f64) {
    if lo > 0.0 && hi > 0.0 {
        (lo, hi)
    } else {
        (x, x)
    }
}

/// B/A of two speedups with the 95% intervals combined in log space (independent errors add
/// in quadrature).
pub fn combine(a: Figure, b: Figure) -> Figure {
    let (sa, (alo, ahi)) = (a.0, interval(a.0, a.1));
    let (sb, (blo, bhi)) = (b.0, interval(b.0, b.1));
    let r = (sb / sa).ln();
    let down = ((sb / blo).ln().powi(2) + (ahi / sa).ln().powi(2)).sqrt();
    let up = ((bhi / sb).ln().powi(2) + (sa / alo).ln().powi(2)).sqrt();
    (r.exp(), ((r - down).exp(), (r + up).exp()))
}

/// Decides a task's pair. `comparable`: the two sides ran on the same machine and settings (or
/// the user allowed it). `fail_if_slower`: the gate's percentage, when gating: a task broke, or
/// its whole interval lies below 1 / (1 + pct / 100).
pub fn decide_pair(a: Side, b: Side, comparable: bool, fail_if_slower: Option<f64>) -> Pair {
    let timing = |s: Side| match s {
        Side::Passed { timing, .. } => timing,
        _ => None,
    };
    let ratio = match (timing(a), timing(b)) {
        (Some(x), Some(y)) => Some(combine(x, y)),
        _ => None,
    };
    let verdict = match (a, b) {
        (Side::Missing, _) => Verdict::OnlyInB,
        (_, Side::Missing) => Verdict::OnlyInA,
        (Side::Passed { .. }, Side::Failed) => Verdict::Broke,
        (Side::Failed, Side::Passed { .. }) => Verdict::Fixed,
        (Side::Failed, Side::Failed) => Verdict::BothFailed,
        (Side::Passed { task_hash: ha, .. }, Side::Passed { task_hash: hb, .. }) => match ratio {
            None => Verdict::Untimed,
            Some(_) if !comparable => Verdict::NotComparable,
            Some(_) if ha != hb => Verdict::TaskChanged,
            Some((_, (lo, _))) if lo > 1.0 => Verdict::Faster,
            Some((_, (_, hi))) if hi < 1.0 => Verdict::Slower,
            Some(_) => Verdict::WithinNoise,
        },
    };
    let regression = fail_if_slower.is_some_and(|pct| match verdict {
        Verdict::Broke => true,
        Verdict::Slower => ratio.is_some_and(|(_, (_, hi))| hi < 1.0 / (1.0 + pct / 100.0)),
        _ => false,
    });
    Pair {
        ratio,
        verdict,
        regression,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(s: f64, lo: f64, hi: f64) -> Side<'static> {
        Side::Passed {
            timing: Some((s, (lo, hi))),
            task_hash: "t",
        }
    }

    #[test]
    fn ratio_intervals_combine_both_sides() {
        // Same figure, ±10% each: within noise, an interval wider than either.
        let (r, (lo, hi)) = combine((2.0, (1.8, 2.2)), (2.0, (1.8, 2.2)));
        assert!((r - 1.0).abs() < 1e-12);
        assert!(lo < 0.9 && hi > 1.1 && lo > 0.8 && hi < 1.2, "{lo} {hi}");
        // Five times slower with tight intervals: far below 1.
        let (r, (_, hi)) = combine((2.0, (1.9, 2.1)), (0.4, (0.38, 0.42)));
        assert!((r - 0.2).abs() < 1e-12 && hi < 0.25);
        // No stored interval: a point.
        assert_eq!(
            combine((1.0, (0.0, 0.0)), (2.0, (0.0, 0.0))),
            (2.0, (2.0, 2.0))
        );
    }

    #[test]
    fn a_verdict_is_called_only_outside_the_noise() {
        let p = decide_pair(passed(1.0, 0.95, 1.05), passed(2.0, 1.9, 2.1), true, None);
        assert_eq!(p.verdict, Verdict::Faster);
        let p = decide_pair(passed(2.0, 1.9, 2.1), passed(1.0, 0.95, 1.05), true, None);
        assert_eq!(p.verdict, Verdict::Slower);
        // 10% apart with ±30% intervals: no call either way.
        let p = decide_pair(passed(1.0, 0.7, 1.3), passed(1.1, 0.8, 1.4), true, None);
        assert_eq!(p.verdict, Verdict::WithinNoise);
    }

    #[test]
    fn machines_tasks_and_failures_are_named_not_timed() {
        let fast = passed(2.0, 1.9, 2.1);
        let slow = passed(1.0, 0.95, 1.05);
        assert_eq!(
            decide_pair(slow, fast, false, None).verdict,
            Verdict::NotComparable
        );
        let other_task = Side::Passed {
            timing: Some((2.0, (1.9, 2.1))),
            task_hash: "u",
        };
        assert_eq!(
            decide_pair(slow, other_task, true, None).verdict,
            Verdict::TaskChanged
        );
        assert_eq!(
            decide_pair(slow, Side::Failed, true, None).verdict,
            Verdict::Broke
        );
        assert_eq!(
            decide_pair(Side::Failed, slow, true, None).verdict,
            Verdict::Fixed
        );
        assert_eq!(
            decide_pair(Side::Missing, slow, true, None).verdict,
            Verdict::OnlyInB
        );
        let untimed = Side::Passed {
            timing: None,
            task_hash: "t",
        };
        assert_eq!(
            decide_pair(slow, untimed, true, None).verdict,
            Verdict::Untimed
        );
    }

    #[test]
    fn the_gate_fails_on_a_slowdown_beyond_its_margin_or_a_break() {
        let a = passed(1.0, 0.98, 1.02);
        // 20% slower, clearly: fails a 5% gate, passes a 50% one.
        let b = passed(0.8, 0.78, 0.82);
        assert!(decide_pair(a, b, true, Some(5.0)).regression);
        assert!(!decide_pair(a, b, true, Some(50.0)).regression);
        assert!(!decide_pair(a, b, true, None).regression);
        assert!(decide_pair(a, Side::Failed, true, Some(50.0)).regression);
        // Within noise never fails the gate.
        let near = passed(0.97, 0.8, 1.2);
        assert!(!decide_pair(a, near, true, Some(1.0)).regression);
    }
}
