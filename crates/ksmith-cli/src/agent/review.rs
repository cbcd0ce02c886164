//! Human-in-the-loop review: after each agent step an interactive run shows the artifact and
//! waits for approve / edit / guidance / rerun / quit. Decisions are journaled, so a resumed run
//! replays them instead of asking again.

use super::session::{Halt, Session};
use anyhow::anyhow;
use std::io::{BufRead, Write};

use ksmith_search::agent::state::Reviewer;
pub(crate) use ksmith_search::agent::state::Verdict;

/// The person at the terminal (stdin/stdout, `$EDITOR` for edits).
pub(crate) struct TerminalReviewer;

impl Reviewer for TerminalReviewer {
    fn review(
        &self,
        step: &str,
        what: &str,
        shown: &str,
        editable: &str,
    ) -> anyhow::Result<Verdict> {
        ask_user(step, what, shown, editable).map_err(|h| match h {
            Halt::Failed(e) | Halt::Input(e) => e,
            other => anyhow!("{other:?}"),
        })
    }
}

/// Shows an artifact and gets a verdict (always `Approve` in autonomous runs).
pub(crate) fn review(
    s: &mut Session,
    step: &str,
    what: &str,
    shown: &str,
    editable: &str,
) -> Result<Verdict, Halt> {
    if !s.interactive {
        return Ok(Verdict::Approve);
    }
    if let Some(v) = s.replay("review")? {
        return Ok(v);
    }
    let v = match s.review_via {
        crate::run_args::ReviewVia::Terminal => {
            TerminalReviewer.review(step, what, shown, editable)
        }
        crate::run_args::ReviewVia::Web => crate::serve::review::WebReviewer {
            store: s.store_dir.clone(),
            run: s.run.id.clone(),
        }
        .review(step, what, shown, editable),
    }
    .map_err(Halt::Failed)?;
    // A quit is not journaled: the resumed run asks again at the same step.
    if v != Verdict::Quit {
        s.record("review", &v)?;
    }
    Ok(v)
}

fn read_line(stdin: &mut impl BufRead) -> Result<Option<String>, Halt> {
    let mut line = String::new();
    let n = stdin
        .read_line(&mut line)
        .map_err(|e| Halt::Failed(anyhow!("reading the terminal: {e}")))?;
    Ok((n > 0).then(|| line.trim().to_string()))
}

fn ask_user(step: &str, what: &str, shown: &str, editable: &str) -> Result<Verdict, Halt> {
    let mut out = std::io::stdout();
    let stdin = std::io::stdin();
    let mut stdin = stdin.lock();
    // The artifact is a model's text (a plan, a diff): escaped for the terminal. The editor
    // gets the text as it is.
    let _ = writeln!(
        out,
        "\n==== {step}: {what} ====\n{}\n==== end of {what} ====",
        ksmith_task::escape::for_terminal(shown.trim_end())
    );
    loop {
        let _ = write!(
            out,
            "[a]pprove, [e]dit, [g]uidance for the next call, [r]erun this step, [q]uit > "
        );
        let _ = out.flush();
        // End of input means nobody is there to answer: stop safely, resumable.
        let Some(answer) = read_line(&mut stdin)? else {
            return Ok(Verdict::Quit);
        };
        match answer.chars().next().map(|c| c.to_ascii_lowercase()) {
            Some('a') => return Ok(Verdict::Approve),
            Some('q') => return Ok(Verdict::Quit),
            Some('r') => return Ok(Verdict::Rerun),
            Some('g') => {
                let _ = write!(out, "guidance (one line): ");
                let _ = out.flush();
                match read_line(&mut stdin)? {
                    Some(g) if !g.is_empty() => return Ok(Verdict::Guidance(g)),
                    Some(_) => continue,
                    None => return Ok(Verdict::Quit),
                }
            }
            Some('e') => match edit_in_editor(editable) {
                Ok(text) => return Ok(Verdict::Edited(text)),
                Err(e) => {
                    let e = format!("{e:#}");
                    let _ = writeln!(
                        out,
                        "editing failed: {}",
                        ksmith_task::escape::for_terminal(&e)
                    );
                }
            },
            _ => {}
        }
    }
}

/// Opens `$VISUAL`/`$EDITOR` (else `vi`) on a copy of the text and returns what was saved.
fn edit_in_editor(text: &str) -> anyhow::Result<String> {
    let file = tempfile::Builder::new()
        .prefix("ksmith-edit-")
        .suffix(".txt")
        .tempfile()?;
    std::fs::write(file.path(), text)?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    // Through the shell, so EDITOR may carry arguments ("code --wait").
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("ksmith-editor")
        .arg(file.path())
        .status()?;
    if !status.success() {
        anyhow::bail!("`{editor}` exited with {status}");
    }
    Ok(std::fs::read_to_string(file.path())?)
}
