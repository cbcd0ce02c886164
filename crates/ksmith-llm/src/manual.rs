//! `manual:DIR` — a person (or another tool) answers through files.
//!
//! For call `seq` of agent `role` we write `DIR/{seq:04}-{role}.prompt.md`
//! (system prompt, a line `---`, the prompt) and wait for
//! `DIR/{seq:04}-{role}.reply.md`. The reply counts once it is non-empty and
//! unchanged for a second, or as soon as it ends with a line `<<<END>>>`
//! (which is removed). A reply that already exists when the call starts, e.g.
//! after a restart, is used at once.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::config::Config;
use crate::{estimate_usage, LlmError, ModelSpec, Provider, ProviderKind, Reply, Request};

/// The line that ends a reply early.
const END_MARKER: &str = "<<<END>>>";

/// A directory of prompt and reply files.
pub(crate) struct Manual {
    dir: PathBuf,
    timeout: Duration,
    /// How often to look for the reply.
    poll: Duration,
    /// How long a reply must stay unchanged to count as finished.
    settle: Duration,
}

impl Manual {
    /// The directory from the spec and the `[providers.manual]` timeout.
    pub(crate) fn open(spec: &ModelSpec, cfg: &Config) -> Manual {
        Manual {
            dir: PathBuf::from(&spec.model),
            timeout: cfg.call_timeout(ProviderKind::Manual),
            poll: Duration::from_millis(250),
            settle: Duration::from_secs(1),
        }
    }
}

/// Keep file names portable whatever the role is called.
fn file_safe(role: &str) -> String {
    let s: String = role
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "call".to_string()
    } else {
        s
    }
}

/// The reply without a trailing end-marker line, if it has one.
fn strip_end_marker(text: &str) -> Option<&str> {
    let body = text.trim_end().strip_suffix(END_MARKER)?;
    (body.is_empty() || body.ends_with('\n')).then_some(body)
}

fn manual_err(path: &Path, detail: String) -> LlmError {
    LlmError::Manual {
        path: path.to_path_buf(),
        detail,
    }
}

fn read(path: &Path) -> Result<String, LlmError> {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| manual_err(path, format!("cannot read reply: {e}")))
}

impl Manual {
    fn wait_for_reply(&self, path: &Path, started: Instant) -> Result<String, LlmError> {
        // (size, mtime) last seen and since when.
        let mut last: Option<((u64, Option<SystemTime>), Instant)> = None;
        loop {
            if started.elapsed() >= self.timeout {
                return Err(manual_err(
                    path,
                    format!(
                        "no reply after {:.0} s; write the file and run again",
                        self.timeout.as_secs_f64()
                    ),
                ));
            }
            thread::sleep(self.poll);
            let Ok(meta) = fs::metadata(path) else {
                last = None;
                continue;
            };
            let text = read(path)?;
            if let Some(body) = strip_end_marker(&text) {
                return Ok(body.to_string());
            }
            let seen = (meta.len(), meta.modified().ok());
            match last {
                Some((prev, since)) if prev == seen => {
                    // An empty file is an editor that has not saved yet.
                    if meta.len() > 0 && since.elapsed() >= self.settle {
                        return Ok(text);
                    }
                }
                _ => last = Some((seen, Instant::now())),
            }
        }
    }
}

impl Provider for Manual {
    fn describe(&self) -> String {
        format!("manual:{}", self.dir.display())
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        fs::create_dir_all(&self.dir)
            .map_err(|e| manual_err(&self.dir, format!("cannot create directory: {e}")))?;
        let stem = format!("{:04}-{}", req.seq, file_safe(&req.role));
        let prompt_path = self.dir.join(format!("{stem}.prompt.md"));
        let reply_path = self.dir.join(format!("{stem}.reply.md"));
        fs::write(&prompt_path, crate::command::stdin_text(req))
            .map_err(|e| manual_err(&prompt_path, format!("cannot write prompt: {e}")))?;

        let text = if reply_path.exists() {
            let text = read(&reply_path)?;
            strip_end_marker(&text).map(str::to_string).unwrap_or(text)
        } else {
            eprintln!(
                "ksmith: waiting for {role} call {seq}: read {p}, write {r} \
                 (end with a line {END_MARKER} or stop editing for 1 s)",
                role = req.role,
                seq = req.seq,
                p = prompt_path.display(),
                r = reply_path.display(),
            );
            self.wait_for_reply(&reply_path, started)?
        };
        let (tokens_in, tokens_out) = estimate_usage(req, &text);
        Ok(Reply {
            text,
            tokens_in,
            tokens_out,
            tokens_estimated: true,
            model: self.dir.display().to_string(),
            latency: started.elapsed(),
            attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(seq: u64) -> Request {
        Request {
            role: "planner".into(),
            seq,
            system: "sys".into(),
            prompt: "Plan vector_add.".into(),
            max_tokens: 100,
            temperature: None,
        }
    }

    fn provider(dir: &Path) -> Manual {
        let spec = ModelSpec::parse(&format!("manual:{}", dir.display())).unwrap();
        Manual::open(&spec, &Config::default())
    }

    #[test]
    fn waits_for_a_stable_reply() {
        let dir = tempfile::tempdir().unwrap();
        let reply_path = dir.path().join("0003-planner.reply.md");
        let writer = {
            let reply_path = reply_path.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(300));
                fs::write(&reply_path, "1. load\n2. add\n").unwrap();
            })
        };
        let started = Instant::now();
        let reply = provider(dir.path()).complete(&req(3)).unwrap();
        writer.join().unwrap();
        assert_eq!(reply.text, "1. load\n2. add\n");
        assert!(started.elapsed() >= Duration::from_millis(1300));
        assert!(reply.tokens_estimated);
        let prompt = fs::read_to_string(dir.path().join("0003-planner.prompt.md")).unwrap();
        assert_eq!(prompt, "sys\n---\nPlan vector_add.");
    }

    #[test]
    fn end_marker_finishes_early_and_is_stripped() {
        let dir = tempfile::tempdir().unwrap();
        let reply_path = dir.path().join("0000-planner.reply.md");
        let writer = {
            let reply_path = reply_path.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(100));
                fs::write(&reply_path, "done\n<<<END>>>\n").unwrap();
            })
        };
        let started = Instant::now();
        let reply = provider(dir.path()).complete(&req(0)).unwrap();
        writer.join().unwrap();
        assert_eq!(reply.text, "done\n");
        assert!(started.elapsed() < Duration::from_millis(900));
    }

    #[test]
    fn existing_reply_is_used_at_once() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0001-planner.reply.md"), "ready").unwrap();
        let started = Instant::now();
        let reply = provider(dir.path()).complete(&req(1)).unwrap();
        assert_eq!(reply.text, "ready");
        assert!(started.elapsed() < Duration::from_millis(200));
    }

    #[test]
    fn times_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = provider(dir.path());
        p.timeout = Duration::from_millis(100);
        p.poll = Duration::from_millis(20);
        let err = p.complete(&req(2)).unwrap_err();
        assert!(matches!(err, LlmError::Manual { .. }));
        assert!(err.to_string().contains("0002-planner.reply.md"), "{err}");
    }

    #[test]
    fn marker_parsing() {
        assert_eq!(strip_end_marker("a\n<<<END>>>"), Some("a\n"));
        assert_eq!(strip_end_marker("<<<END>>>\n\n"), Some(""));
        assert_eq!(strip_end_marker("a <<<END>>>"), None);
        assert_eq!(strip_end_marker("a"), None);
        assert_eq!(file_safe("code review/2"), "code_review_2");
    }
}
