//! SEARCH/REPLACE edits and full-file replies.
//!
//! The implementer and fixer agents answer with either a whole source file in a fenced code
//! block or aider-style SEARCH/REPLACE blocks against the current source. [`parse_change`]
//! turns a reply into a [`Change`]; [`apply_edits`] applies edit blocks with whitespace-tolerant
//! matching, and a block that does not apply becomes an [`ApplyError`] whose
//! [`feedback`](ApplyError::feedback) goes back to the model with the nearest candidate text.
//!
//! Edit block syntax (the file-name line is optional, the block may sit inside a fence, and
//! each marker may use 5 to 9 `<`, `=` or `>` characters):
//!
//! ```text
//! kernel.c
//! <<<<<<< SEARCH
//! old lines
//! =======
//! new lines
//! >>>>>>> REPLACE
//! ```

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// One SEARCH/REPLACE block.
///
/// Parsed blocks hold whole lines: `search` and `replace` are either empty or end with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The file named above the block; `None` means the default file. A block without a
    /// file-name line targets the file of the block before it (aider's convention), or the
    /// default file when it is the first.
    pub file: Option<String>,
    /// The text to find in the current source.
    pub search: String,
    /// The text to put in its place.
    pub replace: String,
}

/// What a code reply asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A complete new source file (always ends with `\n`).
    Full {
        /// The file named above the fence (or in its info string); `None` = the default file.
        file: Option<String>,
        /// The file's new contents.
        text: String,
    },
    /// Edit blocks, to be applied in order.
    Edits(Vec<Edit>),
}

impl Change {
    /// The files a change touches (`None` = the default file), without repeats, in the order
    /// they first appear.
    pub fn files(&self) -> Vec<Option<String>> {
        match self {
            Change::Full { file, .. } => vec![file.clone()],
            Change::Edits(edits) => {
                let mut files: Vec<Option<String>> = Vec::new();
                for edit in edits {
                    if !files.contains(&edit.file) {
                        files.push(edit.file.clone());
                    }
                }
                files
            }
        }
    }
}

/// Why a reply could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The reply is blank.
    #[error("the reply is empty")]
    Empty,
    /// The reply has neither a (non-empty) fenced code block nor SEARCH/REPLACE blocks.
    #[error("the reply contains neither a fenced code block nor SEARCH/REPLACE edit blocks")]
    NoCode,
    /// A broken edit block or code fence; `line` is the 1-based reply line where it starts.
    #[error("malformed reply at line {line}: {detail}")]
    Malformed {
        /// 1-based line of the reply (the SEARCH marker or the opening fence).
        line: usize,
        /// What is wrong.
        detail: String,
    },
}

/// Why an edit did not apply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("SEARCH/REPLACE block {} did not apply: {kind}", .index + 1)]
pub struct ApplyError {
    /// 0-based index of the failing block.
    pub index: usize,
    /// The block's SEARCH text, as given.
    pub search: String,
    /// What went wrong.
    pub kind: ApplyErrorKind,
    /// For `NotFound`: the closest source text, when at least 50% similar. For `Ambiguous`:
    /// the first match (similarity 1.0). `None` otherwise.
    pub nearest: Option<Nearest>,
}

/// The ways an edit can fail to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyErrorKind {
    /// The SEARCH text matches nowhere, even ignoring whitespace differences.
    NotFound,
    /// The SEARCH text matches more than one place.
    Ambiguous {
        /// How many places it matches.
        matches: usize,
    },
    /// The SEARCH text is empty (or blank) but the source is not.
    EmptySearch,
}

impl fmt::Display for ApplyErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyErrorKind::NotFound => write!(f, "the SEARCH text was not found"),
            ApplyErrorKind::Ambiguous { matches } => {
                write!(f, "the SEARCH text matches {matches} places")
            }
            ApplyErrorKind::EmptySearch => {
                write!(f, "the SEARCH text is empty but the file is not")
            }
        }
    }
}

/// The closest text in the source to a failed SEARCH.
#[derive(Debug, Clone, PartialEq)]
pub struct Nearest {
    /// 1-based line where the text starts.
    pub start_line: usize,
    /// The source lines, joined with `\n` (no trailing newline).
    pub text: String,
    /// How alike the text and the SEARCH are, 0..=1 (whitespace runs are ignored).
    pub similarity: f64,
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

static SEARCH_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\s*<{5,9}\s*SEARCH\s*$").expect("valid regex"));
static DIVIDER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^={5,9}\s*$").expect("valid regex"));
static REPLACE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\s*>{5,9}\s*REPLACE\s*$").expect("valid regex"));
static FENCE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([ \t]*)(`{3,}|~{3,})[ \t]*(.*?)\s*$").expect("valid regex"));
static FILENAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.[A-Za-z][A-Za-z0-9]{0,7}$").expect("valid regex")
});
static FILE_COMMENT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?://+|#+|--|/\*+)\s*(?:file\s*name|file|path)\s*:\s*(.+?)\s*(?:\*/)?\s*$")
        .expect("valid regex")
});

/// Parses a model reply into a change. Prefers edit blocks when both appear.
///
/// Edit blocks are recognised anywhere in the reply (inside a fence or not). Without them, the
/// reply must hold a fenced code block: the one whose file is named (a file-name line within
/// two lines above the fence, a file name in the fence's info string, or a `// file: x.c`
/// first line) wins, else the longest. An unclosed fence is `Malformed` (truncated reply).
pub fn parse_change(reply: &str) -> Result<Change, ParseError> {
    if reply.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let lines: Vec<&str> = reply.lines().collect();
    if lines
        .iter()
        .any(|l| SEARCH_RE.is_match(l) || REPLACE_RE.is_match(l))
    {
        return parse_edits(&lines).map(Change::Edits);
    }
    let blocks = fenced_blocks(&lines)?;
    let blocks: Vec<Block> = blocks
        .into_iter()
        .filter(|b| b.lines.iter().any(|l| !l.trim().is_empty()))
        .collect();
    let named = blocks.iter().any(|b| b.file.is_some());
    let mut best: Option<&Block> = None;
    for block in blocks.iter().filter(|b| !named || b.file.is_some()) {
        // `>=`: among equally long blocks the last one (usually the final answer) wins.
        if best.is_none_or(|b| block.len() >= b.len()) {
            best = Some(block);
        }
    }
    let block = best.ok_or(ParseError::NoCode)?;
    Ok(Change::Full {
        file: block.file.clone(),
        text: join_lines(&block.lines),
    })
}

fn join_lines<S: AsRef<str>>(lines: &[S]) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(line.as_ref());
        out.push('\n');
    }
    out
}

fn malformed(line: usize, detail: String) -> ParseError {
    ParseError::Malformed { line, detail }
}

fn parse_edits(lines: &[&str]) -> Result<Vec<Edit>, ParseError> {
    let mut edits = Vec::new();
    let mut last_file: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        if REPLACE_RE.is_match(lines[i]) {
            return Err(malformed(
                i + 1,
                format!(
                    "`>>>>>>> REPLACE` at line {} has no `<<<<<<< SEARCH` before it",
                    i + 1
                ),
            ));
        }
        if !SEARCH_RE.is_match(lines[i]) {
            i += 1;
            continue;
        }
        let start = i + 1; // 1-based line of the SEARCH marker
        let file = filename_above_edit(lines, i).or_else(|| last_file.clone());

        let mut j = i + 1;
        let mut search = Vec::new();
        loop {
            let Some(line) = lines.get(j) else {
                return Err(malformed(
                    start,
                    format!(
                        "the SEARCH block opened at line {start} has no `=======` divider \
                         (the reply ends first)"
                    ),
                ));
            };
            if DIVIDER_RE.is_match(line) {
                break;
            }
            if SEARCH_RE.is_match(line) || REPLACE_RE.is_match(line) {
                return Err(malformed(
                    start,
                    format!(
                        "the SEARCH block opened at line {start} has no `=======` divider \
                         before the marker at line {}",
                        j + 1
                    ),
                ));
            }
            search.push(*line);
            j += 1;
        }
        let divider = j + 1;
        j += 1;
        let mut replace = Vec::new();
        loop {
            let Some(line) = lines.get(j) else {
                return Err(malformed(
                    start,
                    format!(
                        "the SEARCH block opened at line {start} (divider at line {divider}) \
                         has no `>>>>>>> REPLACE` marker (the reply ends first)"
                    ),
                ));
            };
            if REPLACE_RE.is_match(line) {
                break;
            }
            if SEARCH_RE.is_match(line) {
                return Err(malformed(
                    start,
                    format!(
                        "the SEARCH block opened at line {start} (divider at line {divider}) \
                         has no `>>>>>>> REPLACE` marker before the next SEARCH at line {}",
                        j + 1
                    ),
                ));
            }
            // A second divider would go into the code as a line of `=======` (a conflict
            // marker the compiler rejects): the block is malformed, said before any build.
            if DIVIDER_RE.is_match(line) {
                return Err(malformed(
                    start,
                    format!(
                        "the SEARCH block opened at line {start} has a second `=======` divider \
                         at line {} (after the one at line {divider}): one divider per block",
                        j + 1
                    ),
                ));
            }
            replace.push(*line);
            j += 1;
        }
        edits.push(Edit {
            file: file.clone(),
            search: join_lines(&search),
            replace: join_lines(&replace),
        });
        last_file = file;
        i = j + 1;
    }
    Ok(edits)
}

/// The file named just above the SEARCH marker at `idx`: up to three lines back, skipping
/// blank lines and fence lines (whose info string may itself name the file).
fn filename_above_edit(lines: &[&str], idx: usize) -> Option<String> {
    for j in (idx.saturating_sub(3)..idx).rev() {
        let line = lines[j];
        if line.trim().is_empty() {
            continue;
        }
        if let Some(caps) = FENCE_RE.captures(line) {
            if let Some(file) = filename_in_info(&caps[3]) {
                return Some(file);
            }
            continue;
        }
        return filename_in_line(line);
    }
    None
}

/// A file name standing alone on a line, possibly decorated: `kernel.c`, `**kernel.c**`,
/// `` `kernel.c`: ``, `### kernel.c`, `// file: kernel.c`, `File: kernel.c`.
fn filename_in_line(line: &str) -> Option<String> {
    let mut s = line.trim();
    s = s.strip_suffix("*/").unwrap_or(s);
    s = s.trim_start_matches(|c: char| {
        matches!(c, '/' | '#' | '-' | '>' | '*' | '`' | ';') || c.is_whitespace()
    });
    s = s.trim_end_matches(|c: char| matches!(c, '*' | '`' | ':') || c.is_whitespace());
    let lower = s.to_ascii_lowercase();
    for label in ["filename", "file name", "file", "path"] {
        if lower.starts_with(label) {
            if let Some(rest) = s[label.len()..].trim_start().strip_prefix(':') {
                s = rest;
                break;
            }
        }
    }
    s = s.trim_matches(|c: char| matches!(c, '*' | '`' | '"' | '\'') || c.is_whitespace());
    let s = s.strip_prefix("./").unwrap_or(s);
    FILENAME_RE.is_match(s).then(|| s.to_string())
}

/// A file name in a fence's info string: ```` ```kernel.c ````, ```` ```c kernel.c ````,
/// ```` ```python title="kernel.py" ````.
fn filename_in_info(info: &str) -> Option<String> {
    info.split_whitespace().find_map(|token| {
        let token = token
            .split_once('=')
            .map_or(token, |(_, value)| value)
            .trim_matches(|c: char| matches!(c, '"' | '\'' | '{' | '}'));
        let token = token.strip_prefix("./").unwrap_or(token);
        FILENAME_RE.is_match(token).then(|| token.to_string())
    })
}

struct Block {
    lines: Vec<String>,
    file: Option<String>,
}

impl Block {
    fn len(&self) -> usize {
        self.lines.iter().map(|l| l.len() + 1).sum()
    }
}

fn fenced_blocks(lines: &[&str]) -> Result<Vec<Block>, ParseError> {
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(caps) = FENCE_RE.captures(lines[i]) else {
            i += 1;
            continue;
        };
        let indent = caps[1].len();
        let fence = &caps[2];
        let info = &caps[3];
        let fence_char = fence.chars().next().unwrap_or('`');
        if fence_char == '`' && info.contains('`') {
            // Inline code such as ```` ```x``` ````, not a fence.
            i += 1;
            continue;
        }
        let mut content: Vec<String> = Vec::new();
        let mut j = i + 1;
        let mut closed = false;
        while j < lines.len() {
            let t = lines[j].trim();
            if !t.is_empty() && t.chars().all(|c| c == fence_char) && t.len() >= fence.len() {
                closed = true;
                break;
            }
            content.push(strip_indent(lines[j], indent).to_string());
            j += 1;
        }
        if !closed {
            return Err(malformed(
                i + 1,
                format!(
                    "the code fence opened at line {} is never closed (is the reply truncated?)",
                    i + 1
                ),
            ));
        }
        let file = filename_in_info(info)
            .or_else(|| filename_above_fence(lines, i))
            .or_else(|| {
                let first = content.iter().find(|l| !l.trim().is_empty())?;
                let caps = FILE_COMMENT_RE.captures(first)?;
                filename_in_line(&caps[1])
            });
        blocks.push(Block {
            lines: content,
            file,
        });
        i = j + 1;
    }
    Ok(blocks)
}

/// The file named by the nearest non-blank line within two lines above the fence at `idx`.
fn filename_above_fence(lines: &[&str], idx: usize) -> Option<String> {
    let line = (idx.saturating_sub(2)..idx)
        .rev()
        .map(|j| lines[j])
        .find(|l| !l.trim().is_empty())?;
    filename_in_line(line)
}

/// Removes up to `n` leading spaces or tabs (the fence's own indentation).
fn strip_indent(line: &str, n: usize) -> &str {
    let k = line
        .bytes()
        .take(n)
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count();
    &line[k..]
}

// ---------------------------------------------------------------------------------------------
// Applying
// ---------------------------------------------------------------------------------------------

/// Applies edits to `source` in order, each to the result of the one before; all or nothing.
///
/// Each SEARCH is matched by the first rule that finds it:
/// 1. exact text (anchored at a line start when the SEARCH ends with a newline);
/// 2. whole lines, ignoring trailing whitespace;
/// 3. whole lines, ignoring leading/trailing whitespace and the width of whitespace runs; the
///    REPLACE is then re-indented by the indentation difference between the SEARCH's first
///    non-blank line and the source line it matched.
///
/// A rule that matches two or more places gives `Ambiguous`; nothing matching gives `NotFound`
/// with the most similar window of source lines. An empty SEARCH replaces an empty (or blank)
/// file and is `EmptySearch` otherwise. Line matches replace whole lines. The source's line
/// endings (CRLF or LF) and its trailing newline (or lack of one) are kept.
pub fn apply_edits(source: &str, edits: &[Edit]) -> Result<String, ApplyError> {
    let crlf = uses_crlf(source);
    let mut text = source.replace("\r\n", "\n");
    for (index, edit) in edits.iter().enumerate() {
        let search = edit.search.replace("\r\n", "\n");
        let replace = edit.replace.replace("\r\n", "\n");
        text = apply_one(&text, &search, &replace).map_err(|(kind, nearest)| ApplyError {
            index,
            search: edit.search.clone(),
            kind,
            nearest,
        })?;
    }
    if crlf {
        text = text.replace('\n', "\r\n");
    }
    Ok(text)
}

/// Whether most of the source's line breaks are CRLF.
fn uses_crlf(source: &str) -> bool {
    let crlf = source.matches("\r\n").count();
    let lf = source.matches('\n').count();
    crlf > 0 && crlf * 2 >= lf
}

/// Splits LF text into lines and whether it ends with a newline.
fn split_lines(text: &str) -> (Vec<&str>, bool) {
    if text.is_empty() {
        return (Vec::new(), false);
    }
    match text.strip_suffix('\n') {
        Some(body) => (body.split('\n').collect(), true),
        None => (text.split('\n').collect(), false),
    }
}

type Failure = (ApplyErrorKind, Option<Nearest>);

fn apply_one(text: &str, search: &str, replace: &str) -> Result<String, Failure> {
    if search.trim().is_empty() {
        if text.trim().is_empty() {
            return Ok(replace.to_string());
        }
        return Err((ApplyErrorKind::EmptySearch, None));
    }
    let (src, trailing_newline) = split_lines(text);
    let pat = split_lines(search).0;

    // 1. Exact text.
    let positions = exact_positions(text, search);
    if let [pos] = positions[..] {
        return Ok(format!(
            "{}{}{}",
            &text[..pos],
            replace,
            &text[pos + search.len()..]
        ));
    }
    if let Some(&first) = positions.first() {
        let line = text[..first].matches('\n').count();
        return Err(ambiguous(&src, line, pat.len(), positions.len()));
    }

    // 2. and 3. Whole lines, increasingly tolerant of whitespace.
    for tolerant in [false, true] {
        let key = |l: &str| {
            if tolerant {
                collapse_ws(l)
            } else {
                l.trim_end().to_string()
            }
        };
        let src_keys: Vec<String> = src.iter().map(|l| key(l)).collect();
        let pat_keys: Vec<String> = pat.iter().map(|l| key(l)).collect();
        let matches: Vec<usize> = (0..src.len())
            .filter(|&p| p + pat.len() <= src.len() && src_keys[p..p + pat.len()] == pat_keys[..])
            .collect();
        match matches[..] {
            [] => continue,
            [p] => {
                let repl = if replace.is_empty() {
                    Vec::new()
                } else {
                    split_lines(replace).0
                };
                let repl: Vec<String> = if tolerant {
                    let j = pat.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
                    reindent(&repl, leading_ws(pat[j]), leading_ws(src[p + j]))
                } else {
                    repl.iter().map(|l| l.to_string()).collect()
                };
                let mut out: Vec<&str> = Vec::with_capacity(src.len() + repl.len());
                out.extend_from_slice(&src[..p]);
                out.extend(repl.iter().map(String::as_str));
                out.extend_from_slice(&src[p + pat.len()..]);
                let mut result = out.join("\n");
                if trailing_newline && !out.is_empty() {
                    result.push('\n');
                }
                return Ok(result);
            }
            [first, ..] => return Err(ambiguous(&src, first, pat.len(), matches.len())),
        }
    }

    // 4. Not found: report the most similar window.
    Err((ApplyErrorKind::NotFound, nearest(&src, &pat)))
}

fn ambiguous(src: &[&str], line: usize, n: usize, matches: usize) -> Failure {
    let end = (line + n.max(1)).min(src.len());
    let nearest = (line < src.len()).then(|| Nearest {
        start_line: line + 1,
        text: src[line..end].join("\n"),
        similarity: 1.0,
    });
    (ApplyErrorKind::Ambiguous { matches }, nearest)
}

/// Byte offsets of every (possibly overlapping) occurrence of `search`; when `search` ends
/// with a newline only occurrences starting a line count.
fn exact_positions(text: &str, search: &str) -> Vec<usize> {
    let anchored = search.ends_with('\n');
    let step = search.chars().next().map_or(1, char::len_utf8);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(off) = text[from..].find(search) {
        let pos = from + off;
        if !anchored || pos == 0 || text.as_bytes()[pos - 1] == b'\n' {
            out.push(pos);
        }
        from = pos + step;
        if from > text.len() {
            break;
        }
    }
    out
}

fn collapse_ws(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

const TAB_WIDTH: usize = 4;

fn ws_width(ws: &str) -> usize {
    ws.chars()
        .map(|c| if c == '\t' { TAB_WIDTH } else { 1 })
        .sum()
}

/// Moves non-blank lines from indentation `from` to indentation `to`.
fn reindent(lines: &[&str], from: &str, to: &str) -> Vec<String> {
    if from == to {
        return lines.iter().map(|l| l.to_string()).collect();
    }
    let delta = ws_width(to) as isize - ws_width(from) as isize;
    lines
        .iter()
        .map(|line| {
            if line.trim().is_empty() {
                return line.to_string();
            }
            let lead = leading_ws(line);
            let rest = &line[lead.len()..];
            if let Some(extra) = lead.strip_prefix(from) {
                return format!("{to}{extra}{rest}");
            }
            let width = (ws_width(lead) as isize + delta).max(0) as usize;
            let tabs = if to.is_empty() {
                lead.starts_with('\t')
            } else {
                to.starts_with('\t')
            };
            let indent = if tabs {
                "\t".repeat(width / TAB_WIDTH) + &" ".repeat(width % TAB_WIDTH)
            } else {
                " ".repeat(width)
            };
            format!("{indent}{rest}")
        })
        .collect()
}

/// Similarity of two lines: 2 * LCS / total length, over chars (at most 400 of each line).
fn line_similarity(a: &[char], b: &[char]) -> f64 {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        _ => {}
    }
    let a = &a[..a.len().min(400)];
    let b = &b[..b.len().min(400)];
    let total = (a.len() + b.len()) as f64;
    if 2.0 * a.len().min(b.len()) as f64 / total < 0.3 {
        return 0.0; // cannot be alike; skip the quadratic work
    }
    let mut prev = vec![0u16; b.len() + 1];
    let mut cur = vec![0u16; b.len() + 1];
    for &ca in a {
        for (k, &cb) in b.iter().enumerate() {
            cur[k + 1] = if ca == cb {
                prev[k] + 1
            } else {
                prev[k + 1].max(cur[k])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    2.0 * f64::from(prev[b.len()]) / total
}

/// The window of source lines (the SEARCH's line count ±2) most similar to the SEARCH, when
/// at least 50% similar.
///
/// Lines are compared with whitespace runs collapsed. Candidate positions come from aligning
/// the SEARCH line by line at every offset (bigram similarity, cheap); around the best five,
/// windows of each start and size (±2) are scored by a weighted line alignment,
/// 2 * Σ matched line similarity / (w + n), where line similarity is 2 * LCS / total chars.
fn nearest(src: &[&str], pat: &[&str]) -> Option<Nearest> {
    let (l, n) = (src.len(), pat.len());
    if l == 0 || n == 0 {
        return None;
    }
    let norm = |s: &&str| collapse_ws(s).chars().collect::<Vec<char>>();
    let src_n: Vec<Vec<char>> = src.iter().map(norm).collect();
    let pat_n: Vec<Vec<char>> = pat.iter().map(norm).collect();

    // Candidate positions: cheap bigram similarity of each SEARCH line with the source line
    // it would face at that offset.
    let src_b: Vec<Vec<u64>> = src_n.iter().map(|c| bigrams(c)).collect();
    let pat_b: Vec<Vec<u64>> = pat_n.iter().map(|c| bigrams(c)).collect();
    let mut anchors: Vec<(usize, f64)> = (0..l)
        .map(|p| {
            let total: f64 = (0..n)
                .take_while(|j| p + j < l)
                .map(|j| dice(&src_b[p + j], &pat_b[j]))
                .sum();
            (p, total / n as f64)
        })
        .collect();
    anchors.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen: Vec<usize> = Vec::new();
    for (p, _) in anchors {
        if chosen.iter().all(|&c| c.abs_diff(p) > 2) {
            chosen.push(p);
            if chosen.len() == 5 {
                break;
            }
        }
    }

    // Around each candidate, score every window start (±2) and size (±2) precisely.
    let offsets: [isize; 5] = [0, -1, 1, -2, 2];
    let mut best: Option<(usize, usize, f64)> = None;
    for &p in &chosen {
        let lo = p.saturating_sub(2);
        let hi = (p + n + 4).min(l);
        let mut sim = vec![0.0f64; (hi - lo) * n];
        for i in lo..hi {
            for (j, pl) in pat_n.iter().enumerate() {
                sim[(i - lo) * n + j] = line_similarity(&src_n[i], pl);
            }
        }
        for ds in offsets {
            let Some(s) = p.checked_add_signed(ds).filter(|&s| s < l) else {
                continue;
            };
            for dw in offsets {
                let Some(w) = n.checked_add_signed(dw).filter(|&w| w >= 1) else {
                    continue;
                };
                let w = w.min(hi - s);
                let score = window_score(&sim, n, s - lo, w);
                if best.is_none_or(|(_, _, b)| score > b) {
                    best = Some((s, w, score));
                }
            }
        }
    }
    let (s, w, score) = best?;
    (score >= 0.5).then(|| Nearest {
        start_line: s + 1,
        text: src[s..s + w].join("\n"),
        similarity: score,
    })
}

/// The sorted character bigrams of a line (the single char of a one-char line).
fn bigrams(chars: &[char]) -> Vec<u64> {
    let mut out: Vec<u64> = if chars.len() == 1 {
        vec![u64::from(chars[0])]
    } else {
        chars
            .windows(2)
            .map(|w| (u64::from(w[0]) << 32) | u64::from(w[1]))
            .collect()
    };
    out.sort_unstable();
    out
}

/// Dice coefficient of two sorted bigram multisets (1.0 for two empty lines).
fn dice(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

/// Weighted alignment of source lines `s..s+w` with the `n` SEARCH lines.
fn window_score(sim: &[f64], n: usize, s: usize, w: usize) -> f64 {
    let mut prev = vec![0.0f64; n + 1];
    let mut cur = vec![0.0f64; n + 1];
    for a in 0..w {
        cur[0] = 0.0;
        for b in 0..n {
            let diag = prev[b] + sim[(s + a) * n + b];
            cur[b + 1] = diag.max(prev[b + 1]).max(cur[b]);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    2.0 * prev[n] / (w + n) as f64
}

// ---------------------------------------------------------------------------------------------
// Feedback
// ---------------------------------------------------------------------------------------------

/// Lines of SEARCH text quoted back to the model at most.
const QUOTE_LINES: usize = 40;

impl ApplyError {
    /// A message for the model explaining a failed edit: which block, what it searched for,
    /// the nearest text with its line number, and what to do (copy the text exactly, or send
    /// the full file).
    pub fn feedback(&self) -> String {
        let block = self.index + 1;
        let mut out = String::new();
        match &self.kind {
            ApplyErrorKind::NotFound => out.push_str(&format!(
                "SEARCH/REPLACE block {block} did not apply: its SEARCH text was not found in \
                 the current source, not even ignoring whitespace differences.\n"
            )),
            ApplyErrorKind::Ambiguous { matches } => {
                out.push_str(&format!(
                    "SEARCH/REPLACE block {block} did not apply: its SEARCH text matches \
                     {matches} places in the current source, so it is unclear which to change"
                ));
                if let Some(n) = &self.nearest {
                    out.push_str(&format!(" (the first is at line {})", n.start_line));
                }
                out.push_str(".\n");
            }
            ApplyErrorKind::EmptySearch => out.push_str(&format!(
                "SEARCH/REPLACE block {block} did not apply: its SEARCH section is empty, but \
                 the file is not. An empty SEARCH is only allowed for an empty file.\n"
            )),
        }
        out.push_str("None of the edits in your reply were applied.\n");

        if self.kind != ApplyErrorKind::EmptySearch {
            out.push_str("\nYour SEARCH text was:\n");
            out.push_str(&quote(&truncate_lines(&self.search, QUOTE_LINES)));
        }

        match (&self.kind, &self.nearest) {
            (ApplyErrorKind::NotFound, Some(n)) => {
                let last = n.start_line + n.text.lines().count().max(1) - 1;
                let lines = if last > n.start_line {
                    format!("lines {}-{last}", n.start_line)
                } else {
                    format!("line {}", n.start_line)
                };
                out.push_str(&format!(
                    "\nThe most similar text in the current source is at {lines} ({:.0}% \
                     similar):\n",
                    n.similarity * 100.0
                ));
                out.push_str(&quote(&n.text));
            }
            (ApplyErrorKind::NotFound, None) => out.push_str(
                "\nNothing in the current source resembles it closely; it may describe code \
                 that is not in the file (or was already changed).\n",
            ),
            _ => {}
        }

        out.push('\n');
        out.push_str(match self.kind {
            ApplyErrorKind::NotFound => {
                "What to do: copy the SEARCH lines exactly from the current source, character \
                 for character (indentation, comments and blank lines included), then resend \
                 all of your SEARCH/REPLACE blocks. Or reply with the complete file in a single \
                 fenced code block instead."
            }
            ApplyErrorKind::Ambiguous { .. } => {
                "What to do: add a few unchanged lines before or after the SEARCH text (in both \
                 SEARCH and REPLACE) so that it matches exactly one place, then resend all of \
                 your SEARCH/REPLACE blocks. Or reply with the complete file in a single fenced \
                 code block instead."
            }
            ApplyErrorKind::EmptySearch => {
                "What to do: to add code, SEARCH for the existing lines next to where it goes \
                 and repeat them in REPLACE together with the new code, then resend all of your \
                 SEARCH/REPLACE blocks. Or reply with the complete file in a single fenced code \
                 block instead."
            }
        });
        out.push('\n');
        out
    }
}

fn truncate_lines(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= max {
        return lines.join("\n");
    }
    format!(
        "{}\n... ({} more lines)",
        lines[..max].join("\n"),
        lines.len() - max
    )
}

/// Wraps text in a fence longer than any backtick run inside it.
fn quote(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{text}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(search: &str, replace: &str) -> Edit {
        Edit {
            file: None,
            search: search.to_string(),
            replace: replace.to_string(),
        }
    }

    fn edits(reply: &str) -> Vec<Edit> {
        match parse_change(reply).expect("parses") {
            Change::Edits(e) => e,
            other => panic!("expected edits, got {other:?}"),
        }
    }

    fn full(reply: &str) -> (Option<String>, String) {
        match parse_change(reply).expect("parses") {
            Change::Full { file, text } => (file, text),
            other => panic!("expected a full file, got {other:?}"),
        }
    }

    // ----- parsing: full files -----

    #[test]
    fn full_file_with_language() {
        let reply = "Here is the kernel:\n\n```c\nint main(void) {\n  return 0;\n}\n```\nDone.";
        assert_eq!(
            full(reply),
            (None, "int main(void) {\n  return 0;\n}\n".to_string())
        );
    }

    #[test]
    fn full_file_without_language() {
        let reply = "```\nimport triton\nx = 1\n```";
        assert_eq!(full(reply), (None, "import triton\nx = 1\n".to_string()));
    }

    #[test]
    fn full_file_with_file_name_line() {
        for header in [
            "kernel.cu",
            "**kernel.cu**",
            "// file: kernel.cu",
            "`kernel.cu`:",
        ] {
            let reply = format!("{header}\n```cuda\n__global__ void k() {{}}\n```\n");
            let (file, text) = full(&reply);
            assert_eq!(file.as_deref(), Some("kernel.cu"), "header {header:?}");
            assert_eq!(text, "__global__ void k() {}\n");
        }
        // File name in the info string.
        let (file, _) = full("```python kernel.py\nx = 1\n```");
        assert_eq!(file.as_deref(), Some("kernel.py"));
    }

    #[test]
    fn several_blocks_take_the_longest() {
        let reply = "Compile with:\n```bash\nnvcc k.cu\n```\nThe kernel:\n```cuda\n\
                     __global__ void k(float* x) {\n  x[0] = 1.0f;\n}\n```\n";
        assert_eq!(
            full(reply).1,
            "__global__ void k(float* x) {\n  x[0] = 1.0f;\n}\n"
        );
    }

    #[test]
    fn several_blocks_prefer_the_named_one() {
        let reply = "Old version, for reference:\n```c\nint f(void) { return 1 + 2 + 3 + 4; }\n\
                     int g(void) { return 5; }\n```\n\n**kernel.c**\n\n```c\nint f(void) { return 10; }\n```\n";
        assert_eq!(
            full(reply),
            (
                Some("kernel.c".to_string()),
                "int f(void) { return 10; }\n".to_string()
            )
        );
    }

    #[test]
    fn indented_fence_is_dedented() {
        let reply = "1. The kernel:\n   ```c\n   int x;\n     int y;\n   ```\n";
        assert_eq!(full(reply).1, "int x;\n  int y;\n");
    }

    // ----- parsing: edits -----

    #[test]
    fn single_edit_with_file_name() {
        let reply = "kernel.c\n<<<<<<< SEARCH\nint a = 1;\n=======\nint a = 2;\n>>>>>>> REPLACE\n";
        assert_eq!(
            edits(reply),
            vec![Edit {
                file: Some("kernel.c".into()),
                search: "int a = 1;\n".into(),
                replace: "int a = 2;\n".into(),
            }]
        );
    }

    #[test]
    fn multiple_blocks_and_missing_file_name() {
        let reply = "First:\n\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n\nThen delete c:\n\
                     <<<<<<< SEARCH\nc\nd\n=======\n>>>>>>> REPLACE\n";
        let e = edits(reply);
        assert_eq!(e, vec![edit("a\n", "b\n"), edit("c\nd\n", "")]);
        assert_eq!(
            parse_change(reply).unwrap().files(),
            vec![None],
            "a missing file-name line targets the default file"
        );
    }

    #[test]
    fn edits_inside_a_fence() {
        let reply = "kernel.c\n```c\n<<<<<<< SEARCH\n    x += 1;\n=======\n    x += 2;\n>>>>>>> REPLACE\n```\n";
        let e = edits(reply);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].file.as_deref(), Some("kernel.c"));
        assert_eq!(e[0].search, "    x += 1;\n");
        assert_eq!(e[0].replace, "    x += 2;\n");
        // File name inside the fence, as the first line.
        let reply = "```\n**kernel.c**\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```";
        assert_eq!(edits(reply)[0].file.as_deref(), Some("kernel.c"));
    }

    #[test]
    fn crlf_reply() {
        let reply = "kernel.c\r\n<<<<<<< SEARCH  \r\nint a;\r\n=======   \r\nint b;\r\n>>>>>>> REPLACE \r\n";
        assert_eq!(
            edits(reply),
            vec![Edit {
                file: Some("kernel.c".into()),
                search: "int a;\n".into(),
                replace: "int b;\n".into(),
            }]
        );
        let (_, text) = full("```c\r\nint a;\r\nint b;\r\n```\r\n");
        assert_eq!(text, "int a;\nint b;\n");
    }

    #[test]
    fn marker_lengths_five_seven_nine() {
        for n in [5, 7, 9] {
            let (l, e, g) = ("<".repeat(n), "=".repeat(n), ">".repeat(n));
            let reply = format!("{l} SEARCH\nold\n{e}\nnew\n{g} REPLACE\n");
            assert_eq!(edits(&reply), vec![edit("old\n", "new\n")], "{n} chars");
        }
        // Ten is not a marker: the reply then has no code at all.
        let (l, e, g) = ("<".repeat(10), "=".repeat(10), ">".repeat(10));
        let reply = format!("{l} SEARCH\nold\n{e}\nnew\n{g} REPLACE\n");
        assert_eq!(parse_change(&reply), Err(ParseError::NoCode));
    }

    #[test]
    fn malformed_without_divider() {
        let reply = "Fix:\nkernel.c\n<<<<<<< SEARCH\nint a;\n>>>>>>> REPLACE\n";
        match parse_change(reply) {
            Err(ParseError::Malformed { line, detail }) => {
                assert_eq!(line, 3);
                assert!(detail.contains("======="), "{detail}");
                assert!(detail.contains("line 5"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        // Reply ending inside the SEARCH section.
        assert!(matches!(
            parse_change("<<<<<<< SEARCH\nint a;\n"),
            Err(ParseError::Malformed { line: 1, .. })
        ));
    }

    #[test]
    fn a_block_with_two_dividers_is_malformed_not_a_conflict_marker_in_the_code() {
        let reply = "kernel.c\n<<<<<<< SEARCH\nint a = 1;\n=======\nint a = 2;\n=======\nint a = 3;\n>>>>>>> REPLACE\n";
        match parse_change(reply) {
            Err(ParseError::Malformed { line, detail }) => {
                assert_eq!(line, 2);
                assert!(
                    detail.contains("second `=======`") && detail.contains("line 6"),
                    "{detail}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_without_replace_marker() {
        let reply =
            "<<<<<<< SEARCH\na\n=======\nb\n\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n";
        match parse_change(reply) {
            Err(ParseError::Malformed { line, detail }) => {
                assert_eq!(line, 1);
                assert!(detail.contains("REPLACE"), "{detail}");
                assert!(detail.contains("line 6"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_change("x\n<<<<<<< SEARCH\na\n=======\nb\n"),
            Err(ParseError::Malformed { line: 2, .. })
        ));
        // A REPLACE marker with no SEARCH before it.
        assert!(matches!(
            parse_change("a\n=======\nb\n>>>>>>> REPLACE\n"),
            Err(ParseError::Malformed { line: 4, .. })
        ));
    }

    #[test]
    fn unclosed_fence_is_malformed() {
        let reply = "Here:\n```c\nint main(void) {\n";
        assert!(matches!(
            parse_change(reply),
            Err(ParseError::Malformed { line: 2, .. })
        ));
    }

    #[test]
    fn empty_and_prose_only_replies() {
        assert_eq!(parse_change(""), Err(ParseError::Empty));
        assert_eq!(parse_change("  \n\t\n"), Err(ParseError::Empty));
        assert_eq!(
            parse_change("I think the kernel is fine as it is.\nNo changes needed."),
            Err(ParseError::NoCode)
        );
        assert_eq!(
            parse_change("Nothing:\n```\n\n```\n"),
            Err(ParseError::NoCode)
        );
    }

    #[test]
    fn edits_preferred_over_fenced_code() {
        let reply = "Example usage:\n```python\nprint(run())\n```\n\nkernel.py\n\
                     <<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n";
        assert_eq!(
            edits(reply),
            vec![Edit {
                file: Some("kernel.py".into()),
                search: "x = 1\n".into(),
                replace: "x = 2\n".into(),
            }]
        );
    }

    #[test]
    fn files_reports_task_toml() {
        let reply =
            "task.toml\n<<<<<<< SEARCH\nblock = 128\n=======\nblock = 256\n>>>>>>> REPLACE\n\n\
                     kernel.c\n<<<<<<< SEARCH\nint a;\n=======\nint b;\n>>>>>>> REPLACE\n\n\
                     <<<<<<< SEARCH\nint c;\n=======\nint d;\n>>>>>>> REPLACE\n";
        let change = parse_change(reply).unwrap();
        assert_eq!(
            change.files(),
            vec![Some("task.toml".to_string()), Some("kernel.c".to_string())]
        );
        let Change::Edits(e) = change else { panic!() };
        assert_eq!(
            e[2].file.as_deref(),
            Some("kernel.c"),
            "an unnamed block follows the block before it"
        );
    }

    // ----- applying -----

    #[test]
    fn exact_apply() {
        let src = "int a = 1;\nint b = 2;\nint c = 3;\n";
        let out = apply_edits(src, &[edit("int b = 2;\n", "int b = 20;\nint bb = 0;\n")]).unwrap();
        assert_eq!(out, "int a = 1;\nint b = 20;\nint bb = 0;\nint c = 3;\n");
        // A whole-line SEARCH does not match the tail of a longer line.
        let src = "int max = 1;\nx = 1;\n";
        assert_eq!(
            apply_edits(src, &[edit("x = 1;\n", "x = 2;\n")]).unwrap(),
            "int max = 1;\nx = 2;\n"
        );
    }

    #[test]
    fn trailing_whitespace_tolerant_apply() {
        let src = "void f() {  \n  g();\t\n}\n";
        let out =
            apply_edits(src, &[edit("void f() {\n  g();\n", "void f() {\n  h();\n")]).unwrap();
        assert_eq!(out, "void f() {\n  h();\n}\n");
        // The last line without a newline still matches.
        let src = "a\nb";
        assert_eq!(apply_edits(src, &[edit("b\n", "c\n")]).unwrap(), "a\nc");
    }

    #[test]
    fn indentation_tolerant_apply_reindents() {
        let src = "def f(x):\n    if x:\n        return 1\n    return 0\n";
        // The model dropped the indentation.
        let e = edit(
            "if x:\n    return 1\n",
            "if x > 0:\n    return 1\nelif x < 0:\n    return -1\n",
        );
        assert_eq!(
            apply_edits(src, &[e]).unwrap(),
            "def f(x):\n    if x > 0:\n        return 1\n    elif x < 0:\n        return -1\n    return 0\n"
        );
        // Too much indentation and collapsed internal whitespace.
        let src = "{\n  for (int i = 0;  i < n; i++)\n      y[i] = x[i];\n}\n";
        let e = edit(
            "        for (int i = 0; i < n; i++)\n            y[i] = x[i];\n",
            "        for (int i = 0; i < n; i++)\n            y[i] = 2 * x[i];\n",
        );
        assert_eq!(
            apply_edits(src, &[e]).unwrap(),
            "{\n  for (int i = 0; i < n; i++)\n      y[i] = 2 * x[i];\n}\n"
        );
    }

    #[test]
    fn ambiguous_match() {
        let src = "x = 0;\ny = 1;\nx = 0;\n";
        let err = apply_edits(src, &[edit("x = 0;\n", "x = 5;\n")]).unwrap_err();
        assert_eq!(err.kind, ApplyErrorKind::Ambiguous { matches: 2 });
        assert_eq!(err.index, 0);
        assert_eq!(err.nearest.as_ref().map(|n| n.start_line), Some(1));
        let fb = err.feedback();
        assert!(fb.contains("matches 2 places"), "{fb}");
        assert!(fb.contains("block 1"), "{fb}");
        // Ambiguous after whitespace normalisation too.
        let src = "  x = 0;\n    x = 0;\n";
        let err = apply_edits(src, &[edit("x  = 0;\n", "x = 5;\n")]).unwrap_err();
        assert_eq!(err.kind, ApplyErrorKind::Ambiguous { matches: 2 });
    }

    #[test]
    fn not_found_reports_nearest() {
        let src = "#include <stdio.h>\n\nint add(int a, int b) {\n    return a + b;\n}\n\n\
                   int mul(int a, int b) {\n    return a * b;\n}\n";
        let err = apply_edits(
            src,
            &[edit(
                "int mul(int x, int y) {\n    return x * y;\n}\n",
                "int mul(int a, int b) {\n    return b * a;\n}\n",
            )],
        )
        .unwrap_err();
        assert_eq!(err.kind, ApplyErrorKind::NotFound);
        let n = err.nearest.clone().expect("a nearest candidate");
        assert_eq!(n.start_line, 7);
        assert_eq!(n.text, "int mul(int a, int b) {\n    return a * b;\n}");
        assert!(
            n.similarity >= 0.5 && n.similarity < 1.0,
            "{}",
            n.similarity
        );
        let fb = err.feedback();
        assert!(fb.contains("line 7") || fb.contains("lines 7-9"), "{fb}");
        assert!(
            fb.contains("int mul(int a, int b) {\n    return a * b;\n}"),
            "{fb}"
        );
        assert!(fb.contains("int mul(int x, int y)"), "{fb}");
        assert!(fb.contains("exactly"), "{fb}");
        assert!(fb.contains("complete file"), "{fb}");
    }

    #[test]
    fn nearest_window_may_differ_in_length() {
        let src = "a();\nb();\nsetup();\nstep_one();\nstep_two();\nfinish();\nz();\n";
        // The SEARCH misses `step_two();`: the best window is four lines long.
        let err = apply_edits(
            src,
            &[edit("setup();\nstep_one();\nfinish();\n", "done();\n")],
        )
        .unwrap_err();
        let n = err.nearest.expect("a nearest candidate");
        assert_eq!(n.start_line, 3);
        assert_eq!(n.text, "setup();\nstep_one();\nstep_two();\nfinish();");
    }

    #[test]
    fn not_found_without_a_close_candidate() {
        let src = "int a;\nint b;\n";
        let err = apply_edits(
            src,
            &[edit("completely_unrelated_function_call(42);\n", "")],
        )
        .unwrap_err();
        assert_eq!(err.kind, ApplyErrorKind::NotFound);
        assert_eq!(err.nearest, None);
        assert!(err.feedback().contains("complete file"));
    }

    #[test]
    fn sequential_blocks_build_on_each_other() {
        let src = "float f(float x) {\n  return x;\n}\n";
        let e = [
            edit("  return x;\n", "  float y = x * 2.0f;\n  return y;\n"),
            edit("  return y;\n", "  return y + 1.0f;\n"),
        ];
        assert_eq!(
            apply_edits(src, &e).unwrap(),
            "float f(float x) {\n  float y = x * 2.0f;\n  return y + 1.0f;\n}\n"
        );
    }

    #[test]
    fn failure_names_the_failing_block() {
        let src = "a\nb\n";
        let e = [edit("a\n", "A\n"), edit("zzz qqq\n", "c\n")];
        let err = apply_edits(src, &e).unwrap_err();
        assert_eq!(err.index, 1);
        assert_eq!(err.search, "zzz qqq\n");
        assert!(err.feedback().contains("block 2"));
        assert!(err.to_string().contains("block 2"));
    }

    #[test]
    fn empty_search() {
        assert_eq!(
            apply_edits("", &[edit("", "int x;\n")]).unwrap(),
            "int x;\n"
        );
        assert_eq!(
            apply_edits("\n", &[edit("\n", "int x;\n")]).unwrap(),
            "int x;\n"
        );
        let err = apply_edits("int y;\n", &[edit("", "int x;\n")]).unwrap_err();
        assert_eq!(err.kind, ApplyErrorKind::EmptySearch);
        let fb = err.feedback();
        assert!(fb.contains("empty"), "{fb}");
        assert!(fb.contains("complete file"), "{fb}");
    }

    #[test]
    fn line_endings_and_final_newline_are_kept() {
        let src = "int a;\r\n  int b;  \r\nint c;\r\n";
        assert_eq!(
            apply_edits(src, &[edit("int b;\n", "int bb;\n")]).unwrap(),
            "int a;\r\n  int bb;\r\nint c;\r\n"
        );
        assert_eq!(
            apply_edits(src, &[edit("int a;\r\n", "int z;\r\n")]).unwrap(),
            "int z;\r\n  int b;  \r\nint c;\r\n"
        );
        let src = "x\ny";
        assert_eq!(apply_edits(src, &[edit("x\n", "w\n")]).unwrap(), "w\ny");
    }

    #[test]
    fn parse_then_apply() {
        let src = "__global__ void k(float* x, int n) {\n\tint i = threadIdx.x;\n\tif (i < n) x[i] = 0;\n}\n";
        let reply = "Use the global index:\n\n```cuda\nkernel.cu\n<<<<<<< SEARCH\n    int i = threadIdx.x;\n\
                     =======\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n>>>>>>> REPLACE\n```\n";
        let Change::Edits(e) = parse_change(reply).unwrap() else {
            panic!()
        };
        assert_eq!(
            apply_edits(src, &e).unwrap(),
            "__global__ void k(float* x, int n) {\n\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n\tif (i < n) x[i] = 0;\n}\n"
        );
    }
}
