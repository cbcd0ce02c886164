//! `command:SHELL COMMAND` — any program that reads a prompt and prints a reply.
//!
//! The command runs as `sh -c COMMAND` in its own process group. Its stdin is
//! the system prompt, a newline if it does not already end with one, a line
//! `---`, then the prompt. Its stdout is the reply. `KSMITH_ROLE` and
//! `KSMITH_CALL_SEQ` tell it which agent is calling and the call's index.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::{estimate_usage, LlmError, ModelSpec, Provider, ProviderKind, Reply, Request};

/// How much of stderr to quote in errors.
const STDERR_TAIL_CHARS: usize = 2000;
/// How long to wait for output pipes to close after the shell exits, in case a
/// background child still holds them.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// A shell command acting as a model.
pub(crate) struct CommandProvider {
    command: String,
    timeout: Duration,
}

impl CommandProvider {
    /// The command from the spec and the `[providers.command]` timeout.
    pub(crate) fn open(spec: &ModelSpec, cfg: &Config) -> CommandProvider {
        CommandProvider {
            command: spec.model.clone(),
            timeout: cfg.call_timeout(ProviderKind::Command),
        }
    }

    fn fail(&self, detail: String) -> LlmError {
        LlmError::Command {
            command: self.command.clone(),
            detail,
        }
    }
}

/// Process groups of the commands running now, so that an interrupted ksmith can end them
/// (each leads its own group, out of reach of the terminal's Ctrl-C).
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Registers a running command's group for [`kill_running`]; unregisters on drop.
struct Live(i32);

impl Live {
    fn register(pid: u32) -> Live {
        let pid = i32::try_from(pid).unwrap_or(0);
        if let Ok(mut l) = LIVE.lock() {
            l.push(pid);
        }
        Live(pid)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Ok(mut l) = LIVE.lock() {
            l.retain(|p| *p != self.0);
        }
    }
}

/// Kills every `command:` provider process group still running (SIGKILL).
pub fn kill_running() {
    let Ok(l) = LIVE.lock() else { return };
    for &pid in l.iter().filter(|p| **p > 0) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Words that start a shell command without naming a program on PATH.
const SHELL_WORDS: &[&str] = &[
    "exec", "command", "env", "if", "for", "while", "until", "case", "{", "(", "!", "cd", "set",
    "export", "eval", ".", "source", "time", "nice", "nohup", "builtin", "echo", "printf", "read",
    "test", "[", "true", "false", ":",
];

/// Checks that the program a `command:` shell line starts with exists: a path must be an
/// executable file, a bare name must be on PATH. Lines starting with shell syntax (a
/// keyword, a builtin, a subshell) are left for the shell to judge.
pub(crate) fn check_program(command: &str) -> Result<(), LlmError> {
    let fail = |detail: String| LlmError::Config {
        origin: format!("command:{command}"),
        detail,
    };
    let words = command.split_whitespace();
    // `VAR=value prog ...`: the program is the first word that is not an assignment.
    let Some(prog) = words
        .into_iter()
        .find(|w| !(w.contains('=') && !w.starts_with('=') && !w.contains('/')))
    else {
        return if command.trim().is_empty() {
            Err(fail("empty command; write command:PROGRAM ARGS".into()))
        } else {
            Ok(())
        };
    };
    if SHELL_WORDS.contains(&prog)
        || prog.contains([
            '$', '`', '(', ')', '{', '}', '\'', '"', ';', '|', '&', '<', '>', '*',
        ])
    {
        return Ok(());
    }
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        if executable(std::path::Path::new(prog)) {
            return Ok(());
        }
        return Err(fail(format!(
            "program `{prog}` does not exist or is not executable"
        )));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| executable(&d.join(prog))) {
        return Ok(());
    }
    Err(fail(format!(
        "program `{prog}` not found on PATH; install it or give its full path"
    )))
}

/// What the command reads on stdin.
pub(crate) fn stdin_text(req: &Request) -> String {
    let mut s = req.system.clone();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str("---\n");
    s.push_str(&req.prompt);
    s
}

/// Read a pipe to the end on a thread; the result arrives on the channel.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            // A read error just ends the output; what we have is still useful.
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

fn kill_group(child: &Child) {
    // The child leads its own group, so this also reaches anything it started.
    // ESRCH (already gone) is fine.
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(stderr empty)".to_string();
    }
    let count = text.chars().count();
    if count <= STDERR_TAIL_CHARS {
        return format!("stderr: {text}");
    }
    let kept: String = text.chars().skip(count - STDERR_TAIL_CHARS).collect();
    format!("stderr (last {STDERR_TAIL_CHARS} chars): …{kept}")
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => format!("ended abnormally ({status})"),
    }
}

impl Provider for CommandProvider {
    fn describe(&self) -> String {
        format!("command:{}", self.command)
    }

    fn complete(&mut self, req: &Request) -> Result<Reply, LlmError> {
        let started = Instant::now();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .env("KSMITH_ROLE", &req.role)
            .env("KSMITH_CALL_SEQ", req.seq.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| self.fail(format!("cannot start `sh`: {e}")))?;
        let _live = Live::register(child.id());

        let input = stdin_text(req);
        if let Some(mut stdin) = child.stdin.take() {
            // A command that never reads stdin closes the pipe; that is its choice.
            thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());

        let mut pause = Duration::from_millis(2);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() >= self.timeout => {
                    kill_group(&child);
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => {
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) => {
                    kill_group(&child);
                    let _ = child.wait();
                    return Err(self.fail(format!("cannot wait for the process: {e}")));
                }
            }
        };

        let mut out = stdout.recv_timeout(PIPE_GRACE);
        let mut err = stderr.recv_timeout(PIPE_GRACE);
        if out.is_err() || err.is_err() {
            // Something the command left running holds the pipes open.
            kill_group(&child);
            out = out.or_else(|_| stdout.recv_timeout(PIPE_GRACE));
            err = err.or_else(|_| stderr.recv_timeout(PIPE_GRACE));
        }
        let out = out.unwrap_or_default();
        let err = err.unwrap_or_default();

        let Some(status) = status else {
            return Err(self.fail(format!(
                "timed out after {:.1} s and was killed; {}",
                self.timeout.as_secs_f64(),
                tail(&err)
            )));
        };
        if !status.success() {
            return Err(self.fail(format!("{}; {}", describe_status(status), tail(&err))));
        }
        let text = String::from_utf8_lossy(&out).into_owned();
        let (tokens_in, tokens_out) = estimate_usage(req, &text);
        Ok(Reply {
            text,
            tokens_in,
            tokens_out,
            tokens_estimated: true,
            model: self.command.clone(),
            latency: started.elapsed(),
            attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderConfig;

    fn provider(cmd: &str, timeout_s: Option<f64>) -> CommandProvider {
        let cfg = Config::default().with_provider(
            "command",
            ProviderConfig {
                timeout_s,
                ..ProviderConfig::default()
            },
        );
        CommandProvider::open(&ModelSpec::parse(&format!("command:{cmd}")).unwrap(), &cfg)
    }

    #[test]
    fn the_program_must_exist_before_the_run_starts() {
        for ok in [
            "cat",
            "FOO=1 cat -",
            "/bin/sh -c 'cat'",
            "exec cat",
            "(cat)",
            "$HOME/x",
        ] {
            assert!(check_program(ok).is_ok(), "{ok}");
        }
        let err = check_program("no-such-llm-cli --model x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`no-such-llm-cli` not found on PATH"), "{err}");
        let err = check_program("/nonexistent/llm").unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        assert!(check_program("  ").is_err());
    }

    fn req() -> Request {
        Request {
            role: "coder".into(),
            seq: 7,
            system: "You write kernels.".into(),
            prompt: "Write vector_add.".into(),
            max_tokens: 100,
            temperature: None,
        }
    }

    #[test]
    fn echoes_stdin_and_env() {
        let mut p = provider(
            "printf '%s|%s|' \"$KSMITH_ROLE\" \"$KSMITH_CALL_SEQ\"; cat",
            None,
        );
        let reply = p.complete(&req()).unwrap();
        assert_eq!(
            reply.text,
            "coder|7|You write kernels.\n---\nWrite vector_add."
        );
        assert!(reply.tokens_estimated);
        assert_eq!(
            reply.tokens_out,
            (reply.text.chars().count() as u64).div_ceil(4)
        );
        assert_eq!(reply.tokens_in, 5 + 5);
        assert_eq!(reply.attempts, 1);
    }

    #[test]
    fn empty_stdout_is_empty_text() {
        let mut p = provider("true", None);
        assert_eq!(p.complete(&req()).unwrap().text, "");
    }

    #[test]
    fn nonzero_exit_reports_status_and_stderr() {
        let mut p = provider("echo partial; echo 'model exploded' >&2; exit 3", None);
        let err = p.complete(&req()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LlmError::Command { .. }));
        assert!(msg.contains("exited with status 3"), "{msg}");
        assert!(msg.contains("model exploded"), "{msg}");
        assert!(!err.is_retryable());
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        // The background sleep would keep stdout open for 30 s if only `sh` died.
        let mut p = provider("echo starting >&2; sleep 30 & sleep 30", Some(0.3));
        let started = Instant::now();
        let err = p.complete(&req()).unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let msg = err.to_string();
        assert!(msg.contains("timed out after 0.3 s"), "{msg}");
        assert!(msg.contains("starting"), "{msg}");
    }
}
