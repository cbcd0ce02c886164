//! Escaping untrusted text before a person sees it (DESIGN.md, the judge's rule 5).
//!
//! What a candidate prints, compiler diagnostics quoting its source, policy messages, solution
//! and file names and anything a model wrote may contain terminal control sequences (ANSI
//! escapes that clear the screen and repaint it as a fake `PASSED`), carriage returns that
//! overwrite a line, or Unicode bidirectional overrides that reorder what is displayed. These
//! functions replace every such character with a visible escape (`\x1b`, `\r`, `\u{202e}`) and
//! leave everything else untouched. They borrow, without allocating, when nothing needs
//! escaping. The escapes themselves contain no control characters, so escaping twice changes
//! nothing.
//!
//! - [`for_terminal`]: multi-line text (a log, a diff); keeps `\n` and `\t`.
//! - [`one_line`]: a field that must stay on one line (a name, a status reason, a table cell);
//!   also escapes `\n` and `\t`, so it cannot start a fake line of its own.
//! - [`markdown_cell`]: one line for a markdown table cell (`|` escaped as well).
//! - [`markdown_code`]: an inline code span that the text inside cannot close.
//! - [`markdown_fence`]: a fenced code block that the text inside cannot close.
//! - [`json_text`]: serialized JSON with the same characters as `\uXXXX` escapes (serde_json
//!   escapes only C0 controls), still the same JSON value.

use std::borrow::Cow;

/// Whether `c` must be shown escaped. `\n` and `\t` are kept when `multi_line`.
fn must_escape(c: char, multi_line: bool) -> bool {
    match c {
        '\n' | '\t' => !multi_line,
        // C0 controls (ESC, CR, BS, BEL, ...) and DEL.
        '\0'..='\x1f' | '\x7f' => true,
        // C1 controls (U+009B is a one-character CSI on some terminals).
        '\u{80}'..='\u{9f}' => true,
        // Bidirectional embeddings, overrides and isolates, and the implicit marks.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        '\u{200e}' | '\u{200f}' | '\u{061c}' => true,
        // Line and paragraph separators: some terminals and viewers break lines on them.
        '\u{2028}' | '\u{2029}' => true,
        _ => false,
    }
}

/// Byte offset of the first character that must be escaped, if any. Only bytes that can
/// start such a character are decoded: ASCII controls, and the UTF-8 lead bytes 0xC2 (C1
/// controls), 0xD8 (U+061C) and 0xE2 (U+2000-U+2FFF); every other byte is skipped as is.
fn first_escape(s: &str, multi_line: bool) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            0x00..=0x1f | 0x7f => {
                if must_escape(b as char, multi_line) {
                    return Some(i);
                }
                i += 1;
            }
            // A lead byte, so `i` is a character boundary.
            0xc2 | 0xd8 | 0xe2 => {
                let c = s[i..].chars().next().expect("a character starts here");
                if must_escape(c, multi_line) {
                    return Some(i);
                }
                i += c.len_utf8();
            }
            _ => i += 1,
        }
    }
    None
}

fn push_escaped(out: &mut String, c: char) {
    use std::fmt::Write;
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\0'..='\x7f' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape(s: &str, multi_line: bool) -> Cow<'_, str> {
    let Some(start) = first_escape(s, multi_line) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 16);
    out.push_str(&s[..start]);
    for c in s[start..].chars() {
        if must_escape(c, multi_line) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Untrusted multi-line text made safe to print on a terminal: every control character
/// except `\n` and `\t` (C0, DEL, C1), every bidirectional override, embedding, isolate and
/// mark, and the Unicode line/paragraph separators become visible escapes (`\x1b`, `\r`,
/// `\u{202e}`). Borrows when nothing needs escaping.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// Like [`for_terminal`], and `\n` and `\t` are escaped too: for a field that must stay on
/// one line (a solution name, a status reason, a file name, a table cell).
pub fn one_line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Untrusted text for one cell of a markdown table: [`one_line`], with `|` escaped so it
/// cannot add columns. Backticks are left alone (an unclosed one only renders literally).
pub fn markdown_cell(s: &str) -> Cow<'_, str> {
    match one_line(s) {
        Cow::Borrowed(b) if !b.contains('|') => Cow::Borrowed(b),
        t => Cow::Owned(t.replace('|', "\\|")),
    }
}

/// Serialized JSON made safe for a terminal without changing its value: every character
/// [`for_terminal`] would escape becomes a JSON `\uXXXX` escape. serde_json already escapes C0
/// controls inside strings; this catches DEL, C1 controls (U+009B is a CSI), bidi controls and
/// U+2028/U+2029. Only for JSON text, where such characters can only occur inside strings.
pub fn json_text(json: &str) -> Cow<'_, str> {
    use std::fmt::Write;
    let Some(start) = first_escape(json, true) else {
        return Cow::Borrowed(json);
    };
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..start]);
    for c in json[start..].chars() {
        if must_escape(c, true) {
            // Every such character is in the Basic Multilingual Plane: one \u escape.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The longest run of backticks in `s`.
fn longest_backtick_run(s: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Untrusted text as an inline markdown code span (`` `name` ``) on one line: delimited by
/// more backticks than any run inside, padded with a space when the text starts or ends with
/// a backtick, `|` escaped for table cells; [`one_line`] first.
pub fn markdown_code(s: &str) -> String {
    let s = markdown_cell(s);
    let ticks = "`".repeat(longest_backtick_run(&s) + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{s}{pad}{ticks}")
}

/// Untrusted multi-line text as a fenced markdown code block (`info` is the language tag,
/// trusted): the fence is a run of backticks longer than any run inside the text (at least
/// three), so nothing in the text can close it early; the text is escaped with
/// [`for_terminal`].
pub fn markdown_fence(text: &str, info: &str) -> String {
    let text = for_terminal(text);
    let fence = "`".repeat((longest_backtick_run(&text) + 1).max(3));
    let nl = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}{info}\n{text}{nl}{fence}\n")
}

/// Untrusted text for HTML element content or a quoted attribute value: [`for_terminal`]
/// first (controls and bidi overrides become visible escapes), then `& < > " '` become
/// character references, so no candidate text can open a tag or leave an attribute.
pub fn html(s: &str) -> String {
    let s = for_terminal(s);
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_text_cannot_open_a_tag_or_leave_an_attribute() {
        let s = "</script><script>alert(1)</script> a=\"x\" b='y' & \u{202e}";
        let h = html(s);
        assert!(
            !h.contains('<') && !h.contains('>') && !h.contains('"'),
            "{h}"
        );
        assert!(!h.contains('\'') && !h.contains('\u{202e}'), "{h}");
        assert!(
            h.starts_with("&lt;/script&gt;&lt;script&gt;alert(1)"),
            "{h}"
        );
        assert!(h.contains("&amp; \\u{202e}"), "{h}");
    }

    #[test]
    fn clean_text_is_borrowed_unchanged() {
        for s in [
            "",
            "vector_add [0123abcd] on task vector_add: PASSED",
            "two\nlines\twith a tab",
            "ünïcödé — “quotes”, 中文, emoji 🚀, arrows → ⇒",
            "\u{a0}no-break space and \u{ad} soft hyphen are printable",
        ] {
            assert!(
                matches!(for_terminal(s), Cow::Borrowed(b) if b == s),
                "{s:?}"
            );
        }
        assert!(matches!(one_line("a name"), Cow::Borrowed("a name")));
    }

    #[test]
    fn ansi_sequences_become_visible() {
        let s = "\x1b[2J\x1b[H\x1b[32mPASSED\x1b[0m";
        assert_eq!(for_terminal(s), "\\x1b[2J\\x1b[H\\x1b[32mPASSED\\x1b[0m");
        assert!(!for_terminal(s).contains('\x1b'));
    }

    #[test]
    fn every_c0_control_but_newline_and_tab_is_escaped() {
        for b in 0u8..0x20 {
            let c = b as char;
            let s = format!("a{c}b");
            let e = for_terminal(&s);
            if c == '\n' || c == '\t' {
                assert_eq!(e, s);
            } else {
                assert!(!e.contains(c), "{b:#x} survived: {e:?}");
                assert!(e.starts_with("a\\") && e.ends_with('b'), "{e:?}");
            }
            assert!(!one_line(&s).contains(c), "{b:#x} survived one_line");
        }
        assert_eq!(for_terminal("x\x7fy"), "x\\x7fy");
        assert_eq!(for_terminal("FAILED\rPASSED"), "FAILED\\rPASSED");
        assert_eq!(for_terminal("\0\x07\x08"), "\\x00\\x07\\x08");
    }

    #[test]
    fn c1_controls_are_escaped() {
        for u in 0x80u32..=0x9f {
            let c = char::from_u32(u).unwrap();
            let e = for_terminal(&format!("<{c}>")).into_owned();
            assert_eq!(e, format!("<\\u{{{u:x}}}>"));
        }
        // U+00A0 shares the lead byte 0xC2 but is printable.
        assert_eq!(for_terminal("\u{a0}"), "\u{a0}");
    }

    #[test]
    fn bidi_controls_are_escaped() {
        let s = "ok \u{202e}DESSAP\u{202c} \u{2066}x\u{2069} \u{200f}\u{061c}";
        let e = for_terminal(s);
        assert_eq!(
            e,
            "ok \\u{202e}DESSAP\\u{202c} \\u{2066}x\\u{2069} \\u{200f}\\u{61c}"
        );
        for u in (0x202au32..=0x202e).chain(0x2066..=0x2069) {
            let c = char::from_u32(u).unwrap();
            assert!(!for_terminal(&c.to_string()).contains(c), "{u:#x}");
        }
        assert_eq!(for_terminal("a\u{2028}b"), "a\\u{2028}b");
        // Neighbours in the same UTF-8 block stay: en dash, ellipsis, zero-width joiner.
        assert_eq!(for_terminal("–…\u{200d}"), "–…\u{200d}");
    }

    #[test]
    fn one_line_escapes_newlines_and_tabs() {
        assert_eq!(
            one_line("name\nfake [00000000] on task t: PASSED\tx"),
            "name\\nfake [00000000] on task t: PASSED\\tx"
        );
    }

    #[test]
    fn escaping_is_idempotent_and_keeps_surrounding_text() {
        let s = "é\x1b[1mbold\u{202e}é\n\u{9b}2J";
        let once = for_terminal(s).into_owned();
        assert_eq!(for_terminal(&once), once.as_str());
        assert!(matches!(for_terminal(&once), Cow::Borrowed(_)));
        assert!(once.starts_with('é') && once.contains("bold") && once.contains('\n'));
    }

    #[test]
    fn json_text_escapes_what_serde_json_leaves_raw() {
        let j = "{\"log\": \"a\u{9b}2J\u{202e}b\u{7f}\\u001b\",\n \"n\": 1}";
        let e = json_text(j);
        assert_eq!(
            e,
            "{\"log\": \"a\\u009b2J\\u202eb\\u007f\\u001b\",\n \"n\": 1}"
        );
        assert!(matches!(json_text("{\"a\": \"é\"}"), Cow::Borrowed(_)));
    }

    #[test]
    fn markdown_cells_cannot_add_columns_or_rows() {
        assert_eq!(markdown_cell("a|b\nc\x1b"), "a\\|b\\nc\\x1b");
        assert!(matches!(markdown_cell("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn markdown_code_spans_outlast_the_text() {
        assert_eq!(markdown_code("vector_add"), "`vector_add`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("``x"), "``` ``x ```");
        assert_eq!(markdown_code("a|b\n\x1b"), "`a\\|b\\n\\x1b`");
    }

    #[test]
    fn markdown_fences_outlast_the_text() {
        let f = markdown_fence("int x;\n", "c");
        assert_eq!(f, "```c\nint x;\n```\n");
        let evil = "a\n```\n# Fake heading: PASSED\n````\nb";
        let f = markdown_fence(evil, "");
        assert!(f.starts_with("`````\n") && f.ends_with("\n`````\n"), "{f}");
        // The only lines that are fences of five or more backticks are the first and the last.
        let lines: Vec<&str> = f.lines().collect();
        let fences: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with("`````"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(fences, vec![0, lines.len() - 1]);
        assert!(!markdown_fence("\x1b[2J", "").contains('\x1b'));
    }

    #[test]
    fn arbitrary_text_never_keeps_a_dangerous_character() {
        // Every character of a few interesting ranges, mixed with plain text.
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let e = for_terminal(&all);
        assert!(e.chars().all(|c| !must_escape(c, true)));
        let e = one_line(&all);
        assert!(e.chars().all(|c| !must_escape(c, false)));
        assert!(!e.contains('\n'));
    }
}
