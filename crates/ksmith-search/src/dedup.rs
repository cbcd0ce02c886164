//! Candidate dedup. The same code (byte for byte, same flags and entry point) proposed twice, in
//! one run or in an earlier run on the same machine and task, is judged once: [`DedupIndex`]
//! is keyed by the judge's evaluation key of the exact code. Sources are also normalized
//! (comments and insignificant whitespace removed, string literals kept) and hashed, but only
//! to group nodes for prompts and reports: the normalizer is not the compiler (C joins
//! backslash-newlines before removing comments, so `// ... \` swallows the next line), and a
//! normalized match never stands in for a verdict.

use crate::node::NodeId;
use ksmith_backend::backend::Syntax;
use ksmith_task::Language;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The source without comments and without whitespace that cannot change its meaning.
///
/// C and CUDA: `//` and `/* */` comments go; whitespace between two identifier or number
/// characters becomes one space, elsewhere it goes, except the newline that ends a preprocessor
/// line. Python (Triton, Pallas): `#` comments and blank lines go, indentation stays (it is
/// syntax), other whitespace runs are treated as in C. String and character literals are kept
/// byte for byte in both. CRLF counts as a newline.
pub fn normalize(source: &str, language: Language) -> String {
    let src = source.replace("\r\n", "\n").replace('\r', "\n");
    match ksmith_backend::backend::for_language(language).syntax() {
        Syntax::CLike => normalize_c(&src),
        Syntax::Python => normalize_python(&src),
    }
}

/// The normalized source's hash (language included: the same text in two languages differs).
pub fn norm_hash(source: &str, language: Language) -> String {
    let n = normalize(source, language);
    ksmith_task::content_hash(format!("{}\n{n}", language.name()).as_bytes())
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Characters that fuse into other tokens when written together (`a - -b` is not `a--b`,
/// `x / *p` is not a comment opener).
fn is_op(c: char) -> bool {
    "+-*/%&|<>=!^.:#".contains(c)
}

/// Appends a pending whitespace run as one space where dropping it could change the program:
/// between two word characters, between two operator characters, and before `(` after a name
/// in a directive (`#define F (x)` is an object-like macro, `#define F(x)` a function-like one).
fn push_gap(out: &mut String, gap: bool, next: char, directive: bool) {
    let Some(prev) = out.chars().last() else {
        return;
    };
    let keep = (is_word(prev) && is_word(next))
        || (is_op(prev) && is_op(next))
        || (directive && is_word(prev) && next == '(');
    if gap && keep {
        out.push(' ');
    }
}

/// Copies a quoted literal starting at `chars[i]` (the quote) into `out`; returns the index
/// after it. An unterminated literal runs to the end of the line.
fn copy_literal(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let quote = chars[i];
    out.push(quote);
    i += 1;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        if c == '\\' && i < chars.len() {
            out.push(chars[i]);
            i += 1;
        } else if c == quote || c == '\n' {
            break;
        }
    }
    i
}

fn normalize_c(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut gap = false;
    // Inside a preprocessor line (its end is a newline that matters).
    let mut directive = false;
    let mut line_start = true;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i = (i + 2).min(chars.len());
            // A comment separates tokens like whitespace does.
            gap = true;
            continue;
        }
        if c == '\n' {
            // A backslash-continued directive goes on.
            if directive && !out.ends_with('\\') {
                out.push('\n');
                directive = false;
                gap = false;
            } else {
                gap = true;
            }
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            gap = true;
            i += 1;
            continue;
        }
        if line_start && c == '#' {
            directive = true;
        }
        line_start = false;
        push_gap(&mut out, gap, c, directive);
        gap = false;
        if c == '"' || c == '\'' {
            i = copy_literal(&chars, i, &mut out);
            continue;
        }
        out.push(c);
        i += 1;
    }
    out.trim_end().to_string()
}

fn normalize_python(src: &str) -> String {
    let mut out_lines: Vec<String> = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut line = String::new();
    let mut gap = false;
    let mut at_indent = true;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            let t = line.trim_end().to_string();
            if !t.trim().is_empty() {
                out_lines.push(t);
            }
            line.clear();
            gap = false;
            at_indent = true;
            i += 1;
            continue;
        }
        if at_indent && (c == ' ' || c == '\t') {
            line.push(c);
            i += 1;
            continue;
        }
        at_indent = false;
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c.is_whitespace() {
            gap = true;
            i += 1;
            continue;
        }
        if gap && line.trim().chars().last().is_some_and(is_word) && is_word(c) {
            line.push(' ');
        }
        gap = false;
        if c == '"' || c == '\'' {
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            if triple {
                // Kept whole, newlines included.
                line.extend([c, c, c]);
                i += 3;
                while i < chars.len() {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        line.push(chars[i]);
                        line.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    if chars[i] == c && chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c)
                    {
                        line.extend([c, c, c]);
                        i += 3;
                        break;
                    }
                    line.push(chars[i]);
                    i += 1;
                }
            } else {
                i = copy_literal(&chars, i, &mut line);
                if line.ends_with('\n') {
                    line.pop();
                    i -= 1;
                }
            }
            continue;
        }
        line.push(c);
        i += 1;
    }
    let t = line.trim_end().to_string();
    if !t.trim().is_empty() {
        out_lines.push(t);
    }
    out_lines.join("\n")
}

/// Where a normalized code was first judged in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstSeen {
    /// The node that proposed it first.
    pub node: NodeId,
    /// Its evaluation.
    pub eval_id: i64,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    /// A node is judging it now.
    Judging(NodeId),
    /// Judged.
    Judged(FirstSeen),
}

/// The in-run index shared by concurrent expansions: evaluation key → first judged node. A
/// code being judged by one node makes another node with the same code wait for that verdict
/// instead of judging it too.
#[derive(Debug, Default)]
pub struct DedupIndex {
    slots: Mutex<HashMap<String, Slot>>,
    judged: Condvar,
}

impl DedupIndex {
    /// An empty index.
    pub fn new() -> DedupIndex {
        DedupIndex::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where this normalized hash was first judged in the run (None while it is being judged).
    pub fn get(&self, norm_hash: &str) -> Option<FirstSeen> {
        match self.lock().get(norm_hash) {
            Some(Slot::Judged(f)) => Some(*f),
            _ => None,
        }
    }

    /// Where this code was judged, waiting while another node judges it; None: `node` is to
    /// judge it now and must then [`insert`](Self::insert) or [`release`](Self::release) it.
    pub fn claim(&self, norm_hash: &str, node: NodeId) -> Option<FirstSeen> {
        let mut slots = self.lock();
        loop {
            match slots.get(norm_hash).copied() {
                Some(Slot::Judged(f)) => return Some(f),
                Some(Slot::Judging(n)) if n != node => {
                    slots = self.judged.wait(slots).unwrap_or_else(|p| p.into_inner());
                }
                _ => {
                    slots.insert(norm_hash.to_string(), Slot::Judging(node));
                    return None;
                }
            }
        }
    }

    /// Records a judged candidate (the first judged record wins); returns the one kept.
    pub fn insert(&self, norm_hash: &str, first: FirstSeen) -> FirstSeen {
        let mut slots = self.lock();
        let kept = match slots.get(norm_hash) {
            Some(Slot::Judged(f)) => *f,
            _ => {
                slots.insert(norm_hash.to_string(), Slot::Judged(first));
                first
            }
        };
        self.judged.notify_all();
        kept
    }

    /// A guard that [`release`](Self::release)s `node`'s claim when dropped, including when
    /// the judge panics (after [`insert`](Self::insert) the release does nothing), so a node
    /// waiting on the claim never waits forever.
    pub fn hold<'a>(&'a self, norm_hash: &str, node: NodeId) -> ClaimGuard<'a> {
        ClaimGuard {
            index: self,
            key: norm_hash.to_string(),
            node,
        }
    }

    /// Gives up a claim that ended without a verdict (the judge failed): a waiting node judges
    /// it instead.
    pub fn release(&self, norm_hash: &str, node: NodeId) {
        let mut slots = self.lock();
        if matches!(slots.get(norm_hash), Some(Slot::Judging(n)) if *n == node) {
            slots.remove(norm_hash);
        }
        self.judged.notify_all();
    }
}

/// Releases a claim when dropped (see [`DedupIndex::hold`]).
pub struct ClaimGuard<'a> {
    index: &'a DedupIndex,
    key: String,
    node: NodeId,
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        self.index.release(&self.key, self.node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_whose_judge_panics_is_released_for_the_waiting_node() {
        let index = std::sync::Arc::new(DedupIndex::new());
        assert!(index.claim("k", NodeId(1)).is_none());
        let waiter = {
            let index = index.clone();
            std::thread::spawn(move || index.claim("k", NodeId(2)))
        };
        let judging = {
            let index = index.clone();
            std::thread::spawn(move || {
                let _claim = index.hold("k", NodeId(1));
                std::thread::sleep(std::time::Duration::from_millis(50));
                panic!("the judge panicked");
            })
        };
        assert!(judging.join().is_err());
        // Node 2 gets the claim (judges it itself) instead of waiting forever.
        assert_eq!(waiter.join().unwrap(), None);
        // A guard dropped after a verdict leaves the verdict alone.
        let first = FirstSeen {
            node: NodeId(2),
            eval_id: 7,
        };
        {
            let _claim = index.hold("k", NodeId(2));
            index.insert("k", first);
        }
        assert_eq!(index.get("k"), Some(first));
    }

    fn c(s: &str) -> String {
        normalize(s, Language::C)
    }

    #[test]
    fn c_comments_and_whitespace_go_strings_stay() {
        let a = "#include <math.h>\n/* header */\nvoid f(float *x, int n) { // loop\n  for (int i = 0; i < n; i++)  x[i] = 0; }\n";
        let b = "#include <math.h>\nvoid f(float*x,int n){for(int i=0;i<n;i++)x[i]=0;}";
        assert_eq!(c(a), c(b));
        assert_eq!(
            c(b),
            "#include<math.h>\nvoid f(float*x,int n){for(int i=0;i<n;i++)x[i]=0;}"
        );
        // Comment markers inside strings and chars are text, not comments.
        let s = "const char *p = \"a // not a comment /* nor this */\"; char q = '/';";
        assert_eq!(
            c(s),
            "const char*p=\"a // not a comment /* nor this */\";char q='/';"
        );
        // Whitespace inside a string is kept; an escaped quote does not end it.
        assert_ne!(c("s = \"a  b\";"), c("s = \"a b\";"));
        assert_eq!(c("s = \"x\\\" // y\";"), "s=\"x\\\" // y\";");
        // Tokens a comment or whitespace separates stay separate.
        assert_eq!(c("return/**/x;"), "return x;");
        assert_ne!(c("int a;"), c("inta;"));
        // A different program is different.
        assert_ne!(c("x[i] = 0;"), c("x[i] = 1;"));
    }

    #[test]
    fn crlf_and_directives() {
        let unix = "#define N 4\nint a[N];\n";
        let dos = "#define N 4\r\nint a[N];  \r\n\r\n";
        assert_eq!(c(unix), c(dos));
        // The newline ending a directive matters; a continued directive goes on.
        assert_eq!(c(unix), "#define N 4\nint a[N];");
        assert_eq!(
            c("#define M(a) \\\n  (a+1)\nint x;"),
            "#define M(a)\\(a+1)\nint x;"
        );
        assert_eq!(
            norm_hash(unix, Language::C),
            norm_hash(dos, Language::C),
            "CRLF does not change the hash"
        );
        assert_ne!(
            norm_hash(unix, Language::C),
            norm_hash(unix, Language::Cuda)
        );
    }

    #[test]
    fn python_keeps_indentation_and_strings() {
        let a = "import triton  # the jit\n\ndef k(x):\n    # body\n    y = x  +  1\n    return '# kept'\n";
        let b = "import triton\ndef k(x):\n    y = x+1\n    return '# kept'";
        assert_eq!(
            normalize(a, Language::Triton),
            normalize(b, Language::Triton)
        );
        assert_eq!(
            normalize(b, Language::Triton),
            "import triton\ndef k(x):\n    y=x+1\n    return'# kept'"
        );
        // Indentation is syntax: a different block structure is a different program.
        let c1 = "if a:\n    x()\n    y()\n";
        let c2 = "if a:\n    x()\ny()\n";
        assert_ne!(
            normalize(c1, Language::Pallas),
            normalize(c2, Language::Pallas)
        );
        // Triple-quoted strings keep their lines and their `#`.
        let d = "s = \"\"\"a\n# b\n\"\"\"\n";
        assert_eq!(normalize(d, Language::Triton), "s=\"\"\"a\n# b\n\"\"\"");
    }

    #[test]
    fn index_keeps_the_first() {
        let ix = DedupIndex::new();
        assert_eq!(ix.get("h"), None);
        let first = FirstSeen {
            node: NodeId(1),
            eval_id: 10,
        };
        assert_eq!(ix.insert("h", first), first);
        let kept = ix.insert(
            "h",
            FirstSeen {
                node: NodeId(2),
                eval_id: 11,
            },
        );
        assert_eq!(kept, first);
        assert_eq!(ix.get("h"), Some(first));
    }

    #[test]
    fn a_code_being_judged_makes_the_next_claimant_wait_for_its_verdict() {
        let ix = std::sync::Arc::new(DedupIndex::new());
        assert_eq!(ix.claim("h", NodeId(1)), None, "node 1 judges it");
        assert_eq!(ix.get("h"), None, "not judged yet");
        assert_eq!(
            ix.claim("h", NodeId(1)),
            None,
            "a node's own claim does not block it"
        );
        let waiter = {
            let ix = ix.clone();
            std::thread::spawn(move || ix.claim("h", NodeId(2)))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "node 2 waits for node 1's verdict");
        let first = FirstSeen {
            node: NodeId(1),
            eval_id: 5,
        };
        ix.insert("h", first);
        assert_eq!(waiter.join().unwrap(), Some(first));
        // A released claim (the judge failed) passes to the waiting node.
        assert_eq!(ix.claim("g", NodeId(3)), None);
        let waiter = {
            let ix = ix.clone();
            std::thread::spawn(move || ix.claim("g", NodeId(4)))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        ix.release("g", NodeId(3));
        assert_eq!(waiter.join().unwrap(), None, "node 4 now judges it");
        assert_eq!(ix.claim("g", NodeId(4)), None);
    }

    #[test]
    fn whitespace_that_separates_tokens_is_kept() {
        let n = |a: &str| normalize(a, Language::C);
        assert_ne!(n("y = a - -b;"), n("y = a--b;"));
        assert_ne!(n("y = x / *p;"), n("y = x/*p;*/;"));
        assert_ne!(n("#define F (x)\n"), n("#define F(x)\n"));
        assert_eq!(n("y = a  +  b ;"), n("y=a+b;"));
    }
}
