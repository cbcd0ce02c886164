//! `scripted:FILE` — canned replies for tests, checked against each call.
//!
//! ```toml
//! [[reply]]
//! role = "planner"                 # must equal the call's role
//! expect = ["vector_add", "Plan"]  # optional: substrings of system + prompt
//! text = "..."                     # or file = "relative/to/this/file.md"
//! tokens_in = 100                  # optional, else estimated
//! tokens_out = 50
//! ```
//!
//! Entry `i` answers the call with `seq == i`, so a resumed run that skips
//! recorded calls still lines up.

use std::path::{Path, PathBuf};
use std::time::Instant;

use toml::Table;

use crate::fields;
use crate::{estimate_usage, LlmError, ModelSpec, Provider, Reply, Request};

/// How much of the actual prompt to show when the run diverges.
const PROMPT_PREVIEW_CHARS: usize = 400;

/// One `[[reply]]`.
#[derive(Debug, Clone)]
struct Entry {
    role: String,
    expect: Vec<String>,
    text: String,
    tokens_in: Option<u64>,
    tokens_out: Option<u64>,
}

/// Replies loaded from a script file.
pub(crate) struct Scripted {
    file: PathBuf,
    entries: Vec<Entry>,
}

impl Scripted {
    /// Load and check the whole script, including `file =` replies.
    pub(crate) fn open(spec: &ModelSpec) -> Result<Scripted, LlmError> {
        let file = PathBuf::from(&spec.model);
        let err = |index: Option<usize>, detail: String| LlmError::Scripted {
            file: file.clone(),
            index,
            detail,
        };
        let text =
            std::fs::read_to_string(&file).map_err(|e| err(None, format!("cannot read: {e}")))?;
        let root: Table = text.parse().map_err(|e: toml::de::Error| {
            err(None, format!("invalid TOML: {}", e.to_string().trim()))
        })?;
        fields::check_keys(&root, &["reply"], "").map_err(|d| err(None, d))?;
        let items = match root.get("reply") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items.clone(),
            Some(other) => {
                return Err(err(
                    None,
                    format!(
                        "reply: expected [[reply]] tables, found {}",
                        other.type_str()
                    ),
                ))
            }
        };
        let base = file.parent().unwrap_or(Path::new("."));
        let entries = items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_entry(item, base).map_err(|d| err(Some(i), d)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scripted { file, entries })
    }

    fn diverged(&self, index: usize, req: &Request, what: String) -> LlmError {
        let preview: String = req.prompt.chars().take(PROMPT_PREVIEW_CHARS).collect();
        let more = if req.prompt.chars().count() > PROMPT_PREVIEW_CHARS {
            "…"
        } else {
            ""
        };
        LlmError::Scripted {
            file: self.file.clone(),
            index: Some(index),
            detail: format!(
                "{what}; actual call: seq {} role `{}`, prompt starts:\n{preview}{more}",
                req.seq, req.role
            ),
        }
    }
}

fn parse_entry(item: &toml::Value, base: &Path) -> Result<Entry, String> {
    let toml::Value::Table(t) = item else {
        return Err(format!("expected a table, found {}", item.type_str()));
    };
    let path = "";
    fields::check_keys(
        t,
        &["role", "expect", "text", "file", "tokens_in", "tokens_out"],
        path,
    )?;
    let role = fields::get::<String>(t, "role", path)?
        .ok_or_else(|| "role: missing (the agent role this reply is for)".to_string())?;
    let expect = fields::get::<Vec<String>>(t, "expect", path)?.unwrap_or_default();
    let text = match (
        fields::get::<String>(t, "text", path)?,
        fields::get::<String>(t, "file", path)?,
    ) {
        (Some(text), None) => text,
        (None, Some(rel)) => {
            let full = base.join(&rel);
            std::fs::read_to_string(&full)
                .map_err(|e| format!("file: cannot read `{}`: {e}", full.display()))?
        }
        (Some(_), Some(_)) => return Err("give either text or file, not both".to_string()),
        (None, None) => return Err("text: missing (or give file = \"path\")".to_string()),
    };
    Ok(Entry {
        role,
        expect,
        text,
        tokens_in: fields::get::<u64>(t, "tokens_in", path)?,
        tokens_out: fields::get::<u64>(t, "tokens_out", path)?,
    })
}

impl Provider for Scripted {
    fn describe(&self) -> String {
        format!(
            "scripted:{} ({} replies)",
            self.file.display(),
            self.entries.len()
        )
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        let index = usize::try_from(req.seq).unwrap_or(usize::MAX);
        let Some(entry) = self.entries.get(index) else {
            return Err(self.diverged(
                index,
                req,
                format!(
                    "no reply scripted for this call: the script has {} entries",
                    self.entries.len()
                ),
            ));
        };
        if entry.role != req.role {
            return Err(self.diverged(index, req, format!("expected role `{}`", entry.role)));
        }
        let haystack = format!("{}\n{}", req.system, req.prompt);
        if let Some(missing) = entry.expect.iter().find(|s| !haystack.contains(s.as_str())) {
            return Err(self.diverged(
                index,
                req,
                format!("expected the prompt to contain `{missing}`"),
            ));
        }
        let (est_in, est_out) = estimate_usage(req, &entry.text);
        Ok(Reply {
            text: entry.text.clone(),
            tokens_in: entry.tokens_in.unwrap_or(est_in),
            tokens_out: entry.tokens_out.unwrap_or(est_out),
            tokens_estimated: entry.tokens_in.is_none() || entry.tokens_out.is_none(),
            model: self.file.display().to_string(),
            latency: started.elapsed(),
            attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, text: &str) -> Scripted {
        let path = dir.join("script.toml");
        std::fs::write(&path, text).unwrap();
        Scripted::open(&ModelSpec::parse(&format!("scripted:{}", path.display())).unwrap()).unwrap()
    }

    fn script_err(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let spec = ModelSpec::parse(&format!("scripted:{}", path.display())).unwrap();
        let err = Scripted::open(&spec).err().unwrap();
        assert!(matches!(err, LlmError::Scripted { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("bad.toml"), "{msg}");
        msg
    }

    fn req(seq: u64, role: &str, prompt: &str) -> Request {
        Request {
            role: role.into(),
            seq,
            system: "You are the planner.".into(),
            prompt: prompt.into(),
            max_tokens: 100,
            temperature: None,
        }
    }

    const TWO: &str = r#"
[[reply]]
role = "planner"
expect = ["vector_add", "planner"]
text = "PLAN"
tokens_in = 100
tokens_out = 50

[[reply]]
role = "coder"
file = "replies/code.md"
"#;

    fn two(dir: &Path) -> Scripted {
        std::fs::create_dir_all(dir.join("replies")).unwrap();
        std::fs::write(dir.join("replies/code.md"), "__global__ void k() {}\n").unwrap();
        script(dir, TWO)
    }

    #[test]
    fn replays_in_order_with_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = two(dir.path());
        let r = s.complete(&req(0, "planner", "Plan vector_add")).unwrap();
        assert_eq!(r.text, "PLAN");
        assert_eq!(
            (r.tokens_in, r.tokens_out, r.tokens_estimated),
            (100, 50, false)
        );
        let r = s.complete(&req(1, "coder", "Write it")).unwrap();
        assert_eq!(r.text, "__global__ void k() {}\n");
        assert!(r.tokens_estimated);
        // Entries are chosen by seq, so a resumed run can start in the middle.
        let mut s = two(dir.path());
        assert!(s.complete(&req(1, "coder", "Write it")).is_ok());
    }

    #[test]
    fn role_mismatch_fails_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let err = two(dir.path())
            .complete(&req(0, "coder", "Write vector_add"))
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LlmError::Scripted { index: Some(0), .. }));
        assert!(msg.contains("entry 0"), "{msg}");
        assert!(msg.contains("expected role `planner`"), "{msg}");
        assert!(msg.contains("role `coder`"), "{msg}");
        assert!(msg.contains("Write vector_add"), "{msg}");
    }

    #[test]
    fn missing_expected_substring_fails() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("Plan matmul {}", "x".repeat(1000));
        let err = two(dir.path())
            .complete(&req(0, "planner", &long))
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("expected the prompt to contain `vector_add`"),
            "{msg}"
        );
        assert!(msg.contains("Plan matmul"), "{msg}");
        assert!(
            msg.len() < 900,
            "prompt preview should be capped: {}",
            msg.len()
        );
    }

    #[test]
    fn exhausted_script_fails() {
        let dir = tempfile::tempdir().unwrap();
        let err = two(dir.path())
            .complete(&req(2, "coder", "more"))
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("entry 2"), "{msg}");
        assert!(msg.contains("the script has 2 entries"), "{msg}");
    }

    #[test]
    fn parse_errors_name_entry_and_field() {
        let msg = script_err("[[reply]]\nrole = \"a\"\ntext = \"x\"\n[[reply]]\ntext = \"y\"\n");
        assert!(msg.contains("entry 1"), "{msg}");
        assert!(msg.contains("role: missing"), "{msg}");

        let msg = script_err("[[reply]]\nrole = \"a\"\ntext = \"x\"\ntokens_in = \"many\"\n");
        assert!(msg.contains("entry 0: tokens_in: invalid type"), "{msg}");

        let msg = script_err("[[reply]]\nrole = \"a\"\nexpect = \"one\"\ntext = \"x\"\n");
        assert!(msg.contains("entry 0: expect:"), "{msg}");

        let msg = script_err("[[reply]]\nrole = \"a\"\ntxt = \"x\"\n");
        assert!(msg.contains("txt: unknown field"), "{msg}");

        let msg = script_err("[[reply]]\nrole = \"a\"\nfile = \"nope.md\"\n");
        assert!(msg.contains("entry 0: file: cannot read"), "{msg}");
        assert!(msg.contains("nope.md"), "{msg}");

        let msg = script_err("[[reply]]\nrole = \"a\"\n");
        assert!(msg.contains("text: missing"), "{msg}");

        let msg = script_err("[[reply]\n");
        assert!(msg.contains("invalid TOML"), "{msg}");
    }
}
