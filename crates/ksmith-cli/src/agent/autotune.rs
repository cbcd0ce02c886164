//! The autotune step: the autotune planner declares tunables over the kernel's `#define`
//! constants, the deterministic tuner searches them, the winning values are written into the
//! source.

use super::brief::{task_brief, timing_text};
use super::iterate::{ask, evaluate, first_line, report_line, variant, Judged, State};
use super::review::{review, Verdict};
use super::session::{Halt, Session};
use crate::tune::{self, SearchArgs};
use ksmith_agents::{parse_tunables, Role, TuneDecision};
use ksmith_task::Solution;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The source with each tuned `#define NAME VALUE` set to the configuration's value.
pub(super) fn bake_defines(source: &str, config: &BTreeMap<String, i64>) -> String {
    static DEFINE: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?m)^([ \t]*#[ \t]*define[ \t]+)(\w+)([ \t]+\(?)(-?\d+)")
            .expect("regex")
    });
    DEFINE
        .replace_all(source, |c: &regex::Captures| match config.get(&c[2]) {
            Some(v) => format!("{}{}{}{v}", &c[1], &c[2], &c[3]),
            None => c[0].to_string(),
        })
        .into_owned()
}

/// Configurations whose figures are told to the next autotune plan, at most.
const TUNE_ROWS_SHOWN: usize = 16;

#[derive(Serialize, Deserialize)]
struct TuneOutcome {
    config: Option<BTreeMap<String, i64>>,
    note: String,
    /// The tuned configuration against the untuned kernel, timed side by side by the tuner.
    #[serde(default)]
    faster: Option<f64>,
    /// The decision rule on that comparison (None in older journals).
    #[serde(default)]
    decision: Option<ksmith_judge::decide::Decision>,
}

/// The autotune planner declares tunables; the deterministic tuner searches them.
pub(super) fn autotune(
    s: &mut Session,
    st: &mut State,
    it: u32,
    cand: Judged,
) -> Result<Judged, Halt> {
    let defs = ksmith_tune::source_defines(cand.source());
    if defs.is_empty() || s.opts.tune_budget == 0 {
        return Ok(cand);
    }
    let list = defs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    // What tuning found in earlier iterations (failed configurations included).
    let earlier: Vec<&String> = st
        .history
        .iter()
        .filter(|h| h.contains("; autotune: "))
        .collect();
    let vars = json!({"task": task_brief(st), "file": st.file, "source": cand.source(),
                      "defines": list, "earlier": earlier, "budget": s.opts.tune_budget,
                      "timing": timing_text(&st.task, &cand.result)});
    let step = format!("iteration {it} autotune");
    let names: Vec<String> = defs.iter().map(|(k, _)| k.clone()).collect();
    let check = |r: &str| -> Result<TuneDecision, String> {
        let d = parse_tunables(r).map_err(|e| e.0)?;
        if let TuneDecision::Tunables(t) = &d {
            let parsed: toml::Table = t.parse().map_err(|e: toml::de::Error| {
                format!("the toml block is invalid: {}", e.message())
            })?;
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
    };
    let toml_text = loop {
        let got = ask(s, st, Role::AutotunePlanner, &step, vars.clone(), 1, check)?;
        let toml_text = match got {
            Ok((TuneDecision::Tunables(t), _)) => t,
            Ok((TuneDecision::None(why), _)) => {
                note!(
                    "ksmith:   autotune planner: no tuning ({})",
                    crate::term::one(&why)
                );
                return Ok(cand);
            }
            Err(e) => {
                note!(
                    "ksmith:   autotune planner gave no usable tunables ({})",
                    crate::term::one(first_line(&e))
                );
                return Ok(cand);
            }
        };
        match review(s, &step, "tunables", &toml_text, &toml_text)? {
            Verdict::Approve => break toml_text,
            Verdict::Guidance(g) => {
                st.guidance = Some(g);
                break toml_text;
            }
            Verdict::Edited(t) => match check(&format!("```toml\n{t}\n```")) {
                Ok(TuneDecision::Tunables(t)) => break t,
                _ => {
                    note!("ksmith:   the edited tunables are not usable; no tuning this iteration");
                    return Ok(cand);
                }
            },
            Verdict::Rerun => continue,
            Verdict::Quit => return Err(Halt::Quit),
        }
    };
    let tuned: TuneOutcome = s.event("tune", |s| {
        let sol = match solution_with_tunables(st, &cand.solution, &toml_text) {
            Ok(sol) => sol,
            Err(e) => {
                return Ok(TuneOutcome {
                    config: None,
                    note: e,
                    faster: None,
                    decision: None,
                })
            }
        };
        let args = SearchArgs {
            strategy: "hillclimb".into(),
            budget: s.opts.tune_budget,
            time_budget: None,
            seed: 1,
            no_race: false,
            confirm: 2,
        };
        let o = tune::search(
            st.ctx,
            &st.task,
            &sol,
            &args,
            &super::judge_opts(&s.opts.judge),
        )
        .map_err(Halt::from)?;
        let config = o.best.and_then(|(c, _)| c);
        let chosen = config
            .as_ref()
            .and_then(|c| o.confirmed.iter().find(|k| k.config.as_ref() == Some(c)));
        let versus = chosen.and_then(|k| k.vs_untuned);
        let decision = chosen.and_then(|k| k.decision);
        let mut note = match (&config, versus) {
            (Some(c), Some(v)) => format!(
                "tuned {}, {:.2}x ({:.2}-{:.2}) against the untuned kernel in the same rounds",
                ksmith_tune::label(c),
                v.speedup,
                v.interval.0,
                v.interval.1
            ),
            (None, _) if o.confirmed.iter().any(|k| k.decision.is_some()) => format!(
                "the current values stayed: no configuration was decided better in the same rounds ({}); {} other configuration(s) tried",
                o.confirmed
                    .iter()
                    .filter_map(|k| Some(format!("{}: {}", ksmith_tune::label(k.config.as_ref()?), k.decision?.text())))
                    .collect::<Vec<_>>()
                    .join("; "),
                o.rows.len()
            ),
            (Some(c), None) => format!("tuned {}", ksmith_tune::label(c)),
            (None, _) => format!(
                "the current values stayed best; {} other configuration(s) tried",
                o.rows.len()
            ),
        };
        // Configurations that failed are data for the next plan, not noise to drop.
        let failed: Vec<String> = o
            .rows
            .iter()
            .filter(|r| r.result.status != ksmith_judge::Status::Passed)
            .map(|r| {
                let why = r
                    .result
                    .detail
                    .as_deref()
                    .and_then(|d| d.lines().next())
                    .unwrap_or("");
                format!(
                    "{}: {}{}",
                    ksmith_tune::label(&r.config),
                    crate::report::status_text(&r.result),
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why.chars().take(160).collect::<String>())
                    }
                )
            })
            .collect();
        // Every configuration's per-workload figures: the next plan sees which values helped
        // where, not only the winner.
        let measured: Vec<String> = o
            .rows
            .iter()
            .filter_map(|r| {
                let p = r.result.performance.as_ref()?;
                let per = p
                    .workloads
                    .iter()
                    .map(|w| format!("{:.2}x", w.speedup))
                    .collect::<Vec<_>>()
                    .join("/");
                Some(format!(
                    "{}: {:.2}x ({per})",
                    ksmith_tune::label(&r.config),
                    p.speedup
                ))
            })
            .take(TUNE_ROWS_SHOWN)
            .collect();
        if !measured.is_empty() {
            note.push_str(&format!(
                "; configurations measured (vs XLA, overall and per workload; a raced one's figure is rough): {}",
                measured.join("; ")
            ));
        }
        if !failed.is_empty() {
            note.push_str(&format!(
                "; {} of {} configurations failed: {}",
                failed.len(),
                o.rows.len(),
                failed.join("; ")
            ));
        }
        Ok(TuneOutcome {
            config,
            note,
            faster: versus.map(|v| v.speedup),
            decision,
        })
    })?;
    note!("ksmith:   autotune: {}", crate::term::one(&tuned.note));
    st.tune_note = Some(tuned.note.clone());
    let Some(config) = tuned.config else {
        return Ok(cand);
    };
    // The values are written into the source, so later iterations edit the tuned kernel.
    let baked = bake_defines(cand.source(), &config);
    let sol = variant(st, &cand.solution, it, "-tuned", baked);
    let j = evaluate(s, st, &sol)?;
    report_line(
        st,
        it,
        &format!("tuned [{}]", ksmith_tune::label(&config)),
        &j,
    );
    // The tuner's side-by-side figure decides when there is one (two separate evaluations'
    // speedups differ by more than the gain in a noisy window); the tuned kernel must pass again.
    let keep = j.passed()
        && match (tuned.decision, tuned.faster) {
            (Some(d), _) => d.adopt(),
            // An older journal's figure: its point only.
            (None, Some(x)) => x > 1.0,
            // No side-by-side figure: the two evaluations' intervals combined, by the same rule.
            (None, None) => match (&j.result.performance, &cand.result.performance) {
                (Some(t), Some(u)) => {
                    ksmith_judge::decide::decide(ksmith_judge::decide::Evidence::separate(
                        (t.speedup, t.speedup_interval),
                        (u.speedup, u.speedup_interval),
                        t.never_quiet || u.never_quiet,
                    ))
                    .adopt()
                }
                _ => false,
            },
        };
    if !keep {
        let why = if j.passed() {
            "it was not faster than the untuned kernel".to_string()
        } else {
            format!(
                "it did not pass ({})",
                crate::report::status_text(&j.result)
            )
        };
        let discarded = format!("{}; the tuned kernel was discarded: {why}", tuned.note);
        note!("ksmith:   autotune: {}", crate::term::one(&discarded));
        st.tune_note = Some(discarded);
        return Ok(cand);
    }
    Ok(j)
}

/// The candidate with the planner's `[[tunables]]`, validated by the solution parser.
fn solution_with_tunables(st: &State, sol: &Solution, tunables: &str) -> Result<Solution, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    crate::tune::write_solution(sol, dir.path(), "", tunables).map_err(|e| e.to_string())?;
    Solution::load(dir.path(), &st.task).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_values_are_baked_into_the_source() {
        let c: BTreeMap<String, i64> = [("BM".to_string(), 32)].into();
        let src = "#ifndef BM\n#define BM 64 /* rows */\n#endif\n#define BN 8\n";
        assert_eq!(
            bake_defines(src, &c),
            "#ifndef BM\n#define BM 32 /* rows */\n#endif\n#define BN 8\n"
        );
    }

    #[test]
    fn defines_are_found() {
        let d = ksmith_tune::source_defines("#ifndef BM\n#define BM 64\n#endif\n#define NAME_2 (8) /* rows */\n#define F 1.5\n#define C 3 // x\n#define SHIFTED (1 << 18)\n#define SUM 2 + 3\n#define G(x) 4\n#define U 16u\n#define NOVALUE\n");
        assert_eq!(
            d,
            vec![
                ("BM".to_string(), 64),
                ("NAME_2".to_string(), 8),
                ("C".to_string(), 3),
                ("U".to_string(), 16)
            ]
        );
    }
}
