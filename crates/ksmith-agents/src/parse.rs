//! Parsers for the structured replies of the planner, autotune planner and test designer.
//! (Code replies are parsed in [`crate::edit`].)

use regex::Regex;
use std::sync::OnceLock;

/// A planner's plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// A one-line title (histories, tables and run listings); empty when the model gave none.
    #[serde(default)]
    pub title: String,
    /// What to change and how.
    pub strategy: String,
    /// The expected effect, as written.
    pub expected_effect: String,
    /// The number in the expected effect, as a speedup factor (1.3 for "30% faster").
    pub expected_speedup: Option<f64>,
    /// Risks named by the planner.
    pub risks: String,
}

impl Plan {
    /// The plan as markdown (what the implementer and the user see).
    pub fn markdown(&self) -> String {
        let title = if self.title.is_empty() {
            String::new()
        } else {
            format!("## Title\n{}\n\n", self.title)
        };
        format!(
            "{title}## Strategy\n{}\n\n## Expected effect\n{}\n\n## Risks\n{}\n",
            self.strategy, self.expected_effect, self.risks
        )
    }

    /// The plan's title, or the first line of its strategy when it has none (histories, tables).
    pub fn headline(&self) -> String {
        if !self.title.is_empty() {
            return self.title.clone();
        }
        let first = self.strategy.lines().find(|l| !l.trim().is_empty());
        let s = first
            .unwrap_or("")
            .trim()
            .trim_start_matches(['-', '*', ' ']);
        truncate(s, 120)
    }
}

/// Why a structured reply was rejected; the text goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReplyError(pub String);

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n).collect();
    t.push('…');
    t
}

/// `## Heading` sections of a markdown reply, keyed by lower-cased heading.
fn sections(reply: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in reply.lines() {
        let t = line.trim();
        // A bold line right under a heading is that section's text ("## Title" then
        // "**Fuse the passes**"), not a heading of its own.
        let awaiting_body = out.last().is_some_and(|(_, b)| b.trim().is_empty());
        let heading = t
            .strip_prefix("###")
            .or_else(|| t.strip_prefix("##"))
            .or_else(|| t.strip_prefix('#'))
            .map(|h| h.trim().trim_matches('*').trim_end_matches(':').trim())
            .or_else(|| {
                // **Strategy**: also seen from models.
                t.strip_prefix("**")
                    .filter(|_| !awaiting_body || t.trim_end_matches('*').ends_with(':'))
                    .and_then(|h| h.split_once("**"))
                    .filter(|(_, rest)| rest.trim().is_empty() || rest.trim() == ":")
                    .map(|(h, _)| h.trim_end_matches(':').trim())
            });
        match heading {
            Some(h) if !h.is_empty() => out.push((h.to_lowercase(), String::new())),
            _ => {
                if let Some((_, body)) = out.last_mut() {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    out.into_iter()
        .map(|(h, b)| (h, b.trim().to_string()))
        .collect()
}

/// The speedup a free-text expectation states: "1.8x", "2×", "30% faster", "reduce latency by 40%".
/// Where it names several factors ("compute becomes 10x cheaper, so about 3x faster than the
/// current best"), the one said against the best or overall wins over the first.
pub fn expected_speedup(text: &str) -> Option<f64> {
    static X: OnceLock<Regex> = OnceLock::new();
    static PCT: OnceLock<Regex> = OnceLock::new();
    let x = X.get_or_init(|| Regex::new(r"(\d+(?:\.\d+)?)\s*(?:x|×)(?:\b|\s|$)").expect("regex"));
    let pct = PCT.get_or_init(|| Regex::new(r"(\d+(?:\.\d+)?)\s*%").expect("regex"));
    // Each factor with the words around it, up to the neighbouring factors (so words said of
    // one are not read as said of another).
    let found: Vec<(f64, usize, usize)> = x
        .captures_iter(text)
        .filter_map(|c| {
            let v: f64 = c[1].parse().ok().filter(|v: &f64| *v > 0.0)?;
            let whole = c.get(0)?;
            Some((v, whole.start(), whole.end()))
        })
        .collect();
    let factors: Vec<(f64, bool)> = found
        .iter()
        .enumerate()
        .map(|(i, &(v, start, end))| {
            let lo = if i > 0 { found[i - 1].2 } else { 0 };
            let hi = found.get(i + 1).map_or(text.len(), |f| f.1);
            let window = |from: usize, to: usize| text[from..to].to_lowercase();
            let before = window(floor_char(text, start.saturating_sub(30).max(lo)), start);
            let after = window(end, floor_char(text, (end + 40).min(hi)));
            let said_of_best = ["best", "overall", "faster than", "current"]
                .iter()
                .any(|w| after.contains(w) || before.contains(w));
            (v, said_of_best)
        })
        .collect();
    if let Some(&(v, _)) = factors.iter().find(|(_, b)| *b).or(factors.first()) {
        return Some(v);
    }
    let c = pct.captures(text)?;
    let p: f64 = c[1].parse().ok()?;
    let lower = text.to_lowercase();
    // "40% less time / lower latency" is a 1/(1-0.4) speedup; "40% faster" is 1.4.
    if ["less time", "lower latency", "reduce", "cut", "fewer"]
        .iter()
        .any(|w| lower.contains(w))
        && p < 100.0
    {
        Some(1.0 / (1.0 - p / 100.0))
    } else {
        Some(1.0 + p / 100.0)
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Parses a planner reply; the error says what is missing so the model can answer again.
pub fn parse_plan(reply: &str) -> Result<Plan, ReplyError> {
    if reply.trim().is_empty() {
        return Err(ReplyError("the reply was empty; answer with the sections ## Strategy, ## Expected effect and ## Risks".into()));
    }
    let secs = sections(reply);
    let find = |names: &[&str]| {
        secs.iter()
            .find(|(h, _)| names.iter().any(|n| h.starts_with(n)))
            .map(|(_, b)| b.clone())
    };
    let strategy = find(&["strategy", "plan"]).filter(|s| !s.is_empty());
    let effect = find(&["expected effect", "expected", "effect"]).filter(|s| !s.is_empty());
    let risks = find(&["risk"]).unwrap_or_default();
    // One line: the first non-empty one, without list or emphasis marks.
    let title = find(&["title"])
        .and_then(|t| {
            t.lines()
                .map(|l| {
                    l.trim()
                        .trim_start_matches(['-', '*', ' '])
                        .trim_matches('*')
                })
                .find(|l| !l.is_empty())
                .map(|l| truncate(l.trim(), 100))
        })
        .unwrap_or_default();
    let mut missing = Vec::new();
    if strategy.is_none() {
        missing.push("## Strategy");
    }
    if effect.is_none() {
        missing.push("## Expected effect");
    }
    if !missing.is_empty() {
        return Err(ReplyError(format!(
            "the plan has no {} section; answer with the sections ## Strategy, ## Expected effect (with a number, e.g. \"1.5x\") and ## Risks",
            missing.join(" or ")
        )));
    }
    let (strategy, expected_effect) = (strategy.unwrap_or_default(), effect.unwrap_or_default());
    let expected_speedup = expected_speedup(&expected_effect);
    if expected_speedup.is_none() {
        return Err(ReplyError(
            "## Expected effect states no number; say how much faster you expect it to be (e.g. \"about 1.5x\" or \"30% faster\")".into(),
        ));
    }
    Ok(Plan {
        title,
        strategy,
        expected_effect,
        expected_speedup,
        risks,
    })
}

/// The fenced blocks of a reply with their info strings.
pub fn fenced_blocks(reply: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for line in reply.lines() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            match cur.take() {
                Some(block) => out.push(block),
                None => cur = Some((info.trim().to_lowercase(), String::new())),
            }
        } else if let Some((_, body)) = cur.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// What the autotune planner decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TuneDecision {
    /// No tuning, with the planner's reason.
    None(String),
    /// `[[tunables]]` TOML to add to the solution (validated by the solution parser).
    Tunables(String),
}

/// Parses an autotune planner reply.
pub fn parse_tunables(reply: &str) -> Result<TuneDecision, ReplyError> {
    let toml_block = fenced_blocks(reply)
        .into_iter()
        .find(|(info, body)| info == "toml" || body.contains("[[tunables]]"));
    match toml_block {
        Some((_, body)) if body.contains("[[tunables]]") => Ok(TuneDecision::Tunables(body)),
        Some(_) => Err(ReplyError(
            "the toml block declares no [[tunables]] entries".into(),
        )),
        None if reply.to_uppercase().contains("NO TUNING") => Ok(TuneDecision::None(truncate(
            reply.trim().trim_start_matches("NO TUNING").trim(),
            200,
        ))),
        None => Err(ReplyError(
            "answer with one ```toml block of [[tunables]] entries, or NO TUNING".into(),
        )),
    }
}

/// The task.toml a test designer drafted.
pub fn parse_task_draft(reply: &str) -> Result<String, ReplyError> {
    fenced_blocks(reply)
        .into_iter()
        .filter(|(info, body)| info == "toml" || body.contains("[[workloads]]"))
        .map(|(_, b)| b)
        .max_by_key(|b| b.len())
        .ok_or_else(|| ReplyError("answer with the complete task.toml in one ```toml block".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_sections_and_numbers() {
        let p = parse_plan(
            "Here is my plan.\n## Strategy\nBlock rows by 8 and vectorize the exp.\nMore.\n## Expected effect\nAbout 1.8x faster.\n## Risks\nTails.",
        )
        .unwrap();
        assert_eq!(p.headline(), "Block rows by 8 and vectorize the exp.");
        assert_eq!(p.expected_speedup, Some(1.8));
        assert_eq!(p.risks, "Tails.");
        let bold = parse_plan("**Strategy:**\nfuse\n**Expected effect:**\n30% faster\n").unwrap();
        assert!((bold.expected_speedup.unwrap() - 1.3).abs() < 1e-9);
        assert!((expected_speedup("reduce latency by 50%").unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(expected_speedup("2× on large rows"), Some(2.0));
        assert_eq!(expected_speedup("a lot"), None);
        // The factor said against the best, not the first one named.
        assert_eq!(
            expected_speedup("Compute becomes ~10x cheaper, so expect about 3x faster overall than the current best."),
            Some(3.0)
        );
        assert_eq!(
            expected_speedup("8-10x on that workload, so about 2.5x against the best"),
            Some(2.5)
        );
        assert_eq!(
            expected_speedup("10x fewer ops → 3x faster than the best"),
            Some(3.0)
        );
        assert_eq!(expected_speedup("×2 maybe; 1.5× overall"), Some(1.5));
        // A title is the headline; only its first line, without emphasis.
        let t = parse_plan("## Title\n**Fuse the two passes**\nmore\n## Strategy\nFuse max and sum.\n## Expected effect\n1.3x\n").unwrap();
        assert_eq!(t.title, "Fuse the two passes");
        assert_eq!(t.headline(), "Fuse the two passes");
        assert!(t
            .markdown()
            .starts_with("## Title\nFuse the two passes\n\n## Strategy"));
    }

    #[test]
    fn plan_errors_say_what_is_missing() {
        assert!(parse_plan("  ").unwrap_err().0.contains("empty"));
        let e = parse_plan("## Strategy\nx\n").unwrap_err().0;
        assert!(e.contains("## Expected effect"), "{e}");
        let e = parse_plan("## Strategy\nx\n## Expected effect\nfaster\n")
            .unwrap_err()
            .0;
        assert!(e.contains("no number"), "{e}");
        let e = parse_plan("I think we should tile.").unwrap_err().0;
        assert!(e.contains("## Strategy"), "{e}");
    }

    #[test]
    fn tunables_and_task_drafts() {
        let t = parse_tunables("ok\n```toml\n[[tunables]]\nname = \"BM\"\nvalues = [8, 16]\n```\n")
            .unwrap();
        assert!(matches!(t, TuneDecision::Tunables(s) if s.contains("BM")));
        assert!(
            matches!(parse_tunables("NO TUNING: nothing to tune").unwrap(), TuneDecision::None(r) if r.contains("nothing"))
        );
        assert!(parse_tunables("```toml\nx = 1\n```").is_err());
        assert!(parse_tunables("maybe").is_err());
        let d = parse_task_draft("```toml\nname = \"a\"\n[[workloads]]\n```\n").unwrap();
        assert!(d.starts_with("name"));
        assert!(parse_task_draft("no").is_err());
    }
}
