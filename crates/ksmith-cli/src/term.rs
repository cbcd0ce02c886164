//! The one way the CLI talks to a person (DESIGN.md, the judge's rule 5: candidate text shown
//! to a person is escaped). Every line printed for a person goes through [`say!`] (stdout) or
//! [`note!`] (stderr), which escape the whole formatted text with
//! [`ksmith_task::escape::for_terminal`], so no control sequence a candidate, a compiler
//! quoting its source or a model put in a string reaches the terminal raw, whichever field it
//! hid in. `print_stdout`/`print_stderr` are denied for the crate (see main.rs): a new
//! `println!` does not pass clippy. Fields that must stay on one line (names, reasons, table
//! cells) are additionally passed through [`one`], so an embedded newline cannot start a fake
//! line; multi-line untrusted text is shown with [`continued`]. Machine output (`--json`) is
//! printed with [`json`]: serde_json writes C0 controls as `\u001b`, and [`json`] writes the
//! rest (C1 controls, bidi overrides) as `\uXXXX` escapes too; the value is unchanged.

use ksmith_task::escape;
use std::borrow::Cow;
use std::fmt;

/// Writes one line to stdout. A closed pipe (`ksmith runs | head -1`) ends the process
/// quietly with the status a shell gives a tool killed by SIGPIPE (141), instead of a panic;
/// SIGPIPE itself stays ignored, so a sandboxed child that dies never kills ksmith.
fn write_stdout(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
    }
}

/// Prints a line on stdout, escaped for the terminal.
pub(crate) fn out(args: fmt::Arguments) {
    match args.as_str() {
        Some(s) => write_stdout(&escape::for_terminal(s)),
        None => write_stdout(&escape::for_terminal(&args.to_string())),
    }
}

/// Prints a line on stderr, escaped for the terminal (a closed stderr is ignored).
pub(crate) fn err(args: fmt::Arguments) {
    use std::io::Write;
    let _ = match args.as_str() {
        Some(s) => writeln!(std::io::stderr().lock(), "{}", escape::for_terminal(s)),
        None => writeln!(
            std::io::stderr().lock(),
            "{}",
            escape::for_terminal(&args.to_string())
        ),
    };
}

/// Prints a serialized JSON document on stdout. serde_json escapes C0 controls in strings;
/// DEL, C1 controls, bidi controls and U+2028/U+2029 are legal raw in JSON and are escaped
/// here as `\uXXXX` (the same value for a program, inert on a terminal).
pub(crate) fn json(v: &impl fmt::Display) {
    write_stdout(&escape::json_text(&v.to_string()));
}

/// `println!`, escaped (see the module documentation).
macro_rules! say {
    () => {
        $crate::term::out(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::term::out(format_args!($($arg)*))
    };
}

/// `eprintln!`, escaped (see the module documentation).
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::term::err(format_args!($($arg)*))
    };
}

/// An untrusted field that must stay on one line (newlines and tabs escaped too).
pub(crate) fn one(s: &str) -> Cow<'_, str> {
    escape::one_line(s)
}

/// Untrusted multi-line text: the first line as is, every further line after `indent` and a
/// `| ` marker, so no line of it can pass for a line of ours.
pub(crate) fn continued(text: &str, indent: &str) -> String {
    let text = escape::for_terminal(text);
    let mut lines = text.lines();
    let mut s = lines.next().unwrap_or("").to_string();
    for l in lines {
        s.push('\n');
        s.push_str(indent);
        s.push_str("| ");
        s.push_str(l);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_lines_are_marked() {
        assert_eq!(continued("one line", "  "), "one line");
        assert_eq!(
            continued("boom\nx [00000000] on task t: PASSED\x1b[0m", "    "),
            "boom\n    | x [00000000] on task t: PASSED\\x1b[0m"
        );
    }

    #[test]
    fn one_line_fields_cannot_break_lines() {
        assert_eq!(one("a\nb\r\x1b"), "a\\nb\\r\\x1b");
    }
}
