//! Human-in-the-loop review at the terminal: after each agent step of an interactive run the
//! artifact is shown and the person answers approve / edit / guidance / rerun / quit (the
//! search journals the answers per node, so a resumed run replays them).

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
        ask_user(step, what, shown, editable)
    }
}

fn read_line(stdin: &mut impl BufRead) -> anyhow::Result<Option<String>> {
    let mut line = String::new();
    let n = stdin
        .read_line(&mut line)
        .map_err(|e| anyhow!("reading the terminal: {e}"))?;
    Ok((n > 0).then(|| line.trim().to_string()))
}

fn ask_user(step: &str, what: &str, shown: &str, editable: &str) -> anyhow::Result<Verdict> {
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
