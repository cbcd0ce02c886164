//! The knowledge corpus: BM25 retrieval over our docs and the user's.
//!
//! The built-in corpus lives in `docs/knowledge/` and is embedded into the binary with
//! `include_str!`, so an installed `ksmith` carries it. Users add their own directories
//! (`--knowledge DIR`, repeatable): every `*.md` / `*.txt` file under them, recursively.
//!
//! Each file is cut into passages at its `##` and `###` headings (a passage carries its heading
//! path; a file without such headings is one passage; long sections are split at about
//! [`MAX_PASSAGE_CHARS`] on paragraph boundaries). Passages are indexed in RAM with tantivy:
//! the heading path (boosted) and the body, both with English stemming and stop words removed.
//! Queries are free text: they are tokenized with the same analyzer and every term is an
//! optional clause, so no input is a syntax error.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{doc, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

/// Sections longer than this (in characters) are split on paragraph boundaries.
pub const MAX_PASSAGE_CHARS: usize = 2500;

/// Boost of the heading path over the body.
const TITLE_BOOST: f32 = 2.0;

/// The name of our analyzer in the index's tokenizer manager.
const ANALYZER: &str = "ksmith_en";

/// Memory budget of the (single-threaded) index writer; tantivy's minimum is 15 MB.
const WRITER_MEMORY: usize = 20_000_000;

/// Deepest directory nesting followed under a user directory (guards against symlink loops).
const MAX_DEPTH: usize = 32;

/// The built-in corpus: `(file name, contents)`, embedded from `docs/knowledge/`.
/// `README.md` there describes the corpus and is not indexed.
/// A test checks this list against the directory, so the two never drift.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "cache-blocking.md",
        include_str!("../../../docs/knowledge/cache-blocking.md"),
    ),
    (
        "cpu-simd-avx512.md",
        include_str!("../../../docs/knowledge/cpu-simd-avx512.md"),
    ),
    ("cuda.md", include_str!("../../../docs/knowledge/cuda.md")),
    (
        "gather-scatter-sort.md",
        include_str!("../../../docs/knowledge/gather-scatter-sort.md"),
    ),
    (
        "openmp.md",
        include_str!("../../../docs/knowledge/openmp.md"),
    ),
    (
        "pallas.md",
        include_str!("../../../docs/knowledge/pallas.md"),
    ),
    ("scans.md", include_str!("../../../docs/knowledge/scans.md")),
    (
        "small-problems.md",
        include_str!("../../../docs/knowledge/small-problems.md"),
    ),
    (
        "stable-reductions.md",
        include_str!("../../../docs/knowledge/stable-reductions.md"),
    ),
    (
        "triton.md",
        include_str!("../../../docs/knowledge/triton.md"),
    ),
];

/// A retrieved passage.
#[derive(Debug, Clone)]
pub struct Passage {
    /// Where it comes from: file (relative to its directory) and innermost heading,
    /// e.g. `cache-blocking.md#Loop tiling`; a split section gets ` (part N)`.
    pub source: String,
    /// The heading path, e.g. `Cache blocking > Loop tiling > Register blocking`.
    pub title: String,
    /// The passage: its heading path as a first line, then the section's text.
    pub text: String,
    /// BM25 score (0 for passages not produced by a search).
    pub score: f32,
    /// The kernel languages the file applies to (its `<!-- applies-to: c, cuda -->` line);
    /// empty: every language.
    pub applies_to: Vec<String>,
    /// The operator classes the file applies to (its `<!-- ops: scan -->` line, names as in
    /// `ksmith_task::OpClass`); empty: every class.
    pub ops: Vec<String>,
}

/// The languages a file declares with a `<!-- applies-to: a, b -->` line (empty: all).
fn applies_to(text: &str) -> Vec<String> {
    scope_line(text, "applies-to:")
}

/// The values of a `<!-- KEY a, b -->` scope line (empty: none).
fn scope_line(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("<!--")?
                .strip_suffix("-->")?
                .trim()
                .strip_prefix(key)
                .map(str::to_string)
        })
        .flat_map(|v| {
            v.split(',')
                .map(|x| x.trim().to_lowercase())
                .filter(|x| !x.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

impl fmt::Display for Passage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]\n{}", self.source, self.text)
    }
}

/// Errors.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// A directory or file could not be read (missing, unreadable, or not UTF-8).
    #[error("knowledge: {}: {source}", path.display())]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The search index failed (should not happen: it lives in RAM).
    #[error("knowledge index: {detail}")]
    Index {
        /// tantivy's message.
        detail: String,
    },
    /// A user directory holds no `*.md` or `*.txt` file.
    #[error("knowledge: {}: no .md or .txt files found", path.display())]
    Empty {
        /// The directory.
        path: PathBuf,
    },
}

impl From<tantivy::TantivyError> for KnowledgeError {
    fn from(e: tantivy::TantivyError) -> Self {
        KnowledgeError::Index {
            detail: e.to_string(),
        }
    }
}

/// The searchable corpus.
pub struct Knowledge {
    passages: Vec<Passage>,
    searcher: Searcher,
    // Kept so the searcher's segments stay valid and for future reloads.
    _reader: IndexReader,
    index: Index,
    title: Field,
    body: Field,
    id: Field,
}

impl fmt::Debug for Knowledge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Knowledge")
            .field("passages", &self.passages.len())
            .finish()
    }
}

impl Knowledge {
    /// The built-in corpus (docs/knowledge embedded into the binary) plus the given user
    /// directories (every `*.md` / `*.txt` file under them, recursively; a path naming a file
    /// indexes that file).
    ///
    /// Errors: a missing or unreadable path ([`KnowledgeError::Io`] naming it), a file that is
    /// not UTF-8 (`Io` naming the file), a directory without any `.md`/`.txt` file
    /// ([`KnowledgeError::Empty`]). A directory given twice is indexed once.
    pub fn open(extra_dirs: &[PathBuf]) -> Result<Knowledge, KnowledgeError> {
        let mut passages = builtin_passages();
        passages.extend(user_passages(extra_dirs)?);
        Knowledge::build(passages)
    }

    /// Only the given directories (no built-in corpus); errors as for [`open`](Self::open).
    pub fn from_dirs(dirs: &[PathBuf]) -> Result<Knowledge, KnowledgeError> {
        Knowledge::build(user_passages(dirs)?)
    }

    /// Number of indexed passages.
    pub fn len(&self) -> usize {
        self.passages.len()
    }

    /// Whether no passage is indexed.
    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// Every indexed passage, in corpus order (score 0).
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// The best `limit` passages for a free-text query (BM25), best first.
    /// Any string is accepted: operators and punctuation are treated as separators.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Passage>, KnowledgeError> {
        if limit == 0 || self.passages.is_empty() {
            return Ok(Vec::new());
        }
        let Some(query) = self.build_query(query)? else {
            return Ok(Vec::new());
        };
        let hits = self.searcher.search(&query, &TopDocs::with_limit(limit))?;
        let mut out = Vec::with_capacity(hits.len());
        for (score, address) in hits {
            let doc: TantivyDocument = self.searcher.doc(address)?;
            let id = doc
                .get_first(self.id)
                .and_then(|v| v.as_u64())
                .ok_or_else(|| KnowledgeError::Index {
                    detail: "stored passage id missing".into(),
                })?;
            let passage = self
                .passages
                .get(id as usize)
                .ok_or_else(|| KnowledgeError::Index {
                    detail: format!("stored passage id {id} out of range"),
                })?;
            out.push(Passage {
                score,
                ..passage.clone()
            });
        }
        Ok(out)
    }

    /// Like [`search`](Self::search), but the returned texts total at most `max_chars`
    /// characters (for prompt budgets): the last one is truncated at a line boundary, and a
    /// passage none of whose lines fits is dropped.
    pub fn retrieve(
        &self,
        query: &str,
        limit: usize,
        max_chars: usize,
    ) -> Result<Vec<Passage>, KnowledgeError> {
        self.retrieve_for(query, None, limit, max_chars)
    }

    /// [`retrieve`](Self::retrieve) among the passages that apply to `language` (those of files
    /// declaring it, or no language at all): CUDA tiling notes have no place in a C prompt.
    pub fn retrieve_for(
        &self,
        query: &str,
        language: Option<&str>,
        limit: usize,
        max_chars: usize,
    ) -> Result<Vec<Passage>, KnowledgeError> {
        self.retrieve_scoped(query, language, None, limit, max_chars)
    }

    /// [`retrieve_for`](Self::retrieve_for) among the passages that also apply to the
    /// operator class `op_class` (those of files declaring it with `<!-- ops: ... -->`, or no
    /// class at all): scan notes have no place in a row normalization's prompt.
    pub fn retrieve_scoped(
        &self,
        query: &str,
        language: Option<&str>,
        op_class: Option<&str>,
        limit: usize,
        max_chars: usize,
    ) -> Result<Vec<Passage>, KnowledgeError> {
        let fits = |p: &Passage| {
            language.is_none_or(|l| p.applies_to.is_empty() || p.applies_to.iter().any(|a| a == l))
                && op_class.is_none_or(|c| p.ops.is_empty() || p.ops.iter().any(|a| a == c))
        };
        // Look further than `limit`, since some hits may be filtered out.
        let hits: Vec<Passage> = self
            .search(query, limit.saturating_mul(4))?
            .into_iter()
            .filter(|p| fits(p))
            .take(limit)
            .collect();
        let mut left = max_chars;
        let mut out = Vec::new();
        for mut passage in hits {
            let n = passage.text.chars().count();
            if n <= left {
                left -= n;
                out.push(passage);
                continue;
            }
            // Whole paragraphs where there is a paragraph end (a sentence cut half-way reads
            // as a claim), and a mark that the passage goes on.
            let cut = truncate_at_line(&passage.text, left.saturating_sub(CUT_MARK.len() + 1));
            let cut = match cut.rfind("\n\n") {
                Some(end) => cut[..end].trim_end().to_string(),
                None => cut,
            };
            // Kept only with some of its body: a heading alone followed by the mark says
            // nothing (it was seen in prompts as a bare `[...]`).
            let body: usize = cut.lines().skip(1).map(|l| l.trim().chars().count()).sum();
            if body >= MIN_CUT_BODY {
                passage.text = format!("{cut}\n{CUT_MARK}");
                out.push(passage);
            }
            break;
        }
        Ok(out)
    }

    fn build(passages: Vec<Passage>) -> Result<Knowledge, KnowledgeError> {
        let mut builder = Schema::builder();
        let text_options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let title = builder.add_text_field("title", text_options.clone());
        let body = builder.add_text_field("body", text_options);
        let id = builder.add_u64_field("id", STORED);
        let index = Index::create_in_ram(builder.build());
        index.tokenizers().register(ANALYZER, analyzer());

        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
        for (i, p) in passages.iter().enumerate() {
            // The file's name is part of the title: in user directories it is often the
            // best description of the file.
            let indexed_title = format!("{} {}", file_words(&p.source), p.title);
            writer.add_document(doc!(
                title => indexed_title,
                body => p.text.as_str(),
                id => i as u64,
            ))?;
        }
        writer.commit()?;
        drop(writer);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let searcher = reader.searcher();
        Ok(Knowledge {
            passages,
            searcher,
            _reader: reader,
            index,
            title,
            body,
            id,
        })
    }

    /// One optional, boosted term clause per distinct analyzed query token and field.
    fn build_query(&self, query: &str) -> Result<Option<Box<dyn Query>>, KnowledgeError> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, boost) in [(self.title, TITLE_BOOST), (self.body, 1.0)] {
            let mut analyzer = self.index.tokenizer_for_field(field)?;
            let mut stream = analyzer.token_stream(query);
            let mut seen = HashSet::new();
            while let Some(token) = stream.next() {
                if !seen.insert(token.text.clone()) {
                    continue;
                }
                let term = Term::from_field_text(field, &token.text);
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
                clauses.push((Occur::Should, Box::new(BoostQuery::new(q, boost))));
            }
        }
        if clauses.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(BooleanQuery::new(clauses))))
    }
}

/// Lower-casing, English stop words removed, English (Porter) stemming.
fn analyzer() -> TextAnalyzer {
    let builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser);
    match StopWordFilter::new(Language::English) {
        Some(stop) => builder
            .filter(stop)
            .filter(Stemmer::new(Language::English))
            .build(),
        None => builder.filter(Stemmer::new(Language::English)).build(),
    }
}

/// The words of a passage's file name: `dir/cpu-simd-avx512.md#X` -> `dir cpu simd avx512`.
fn file_words(source: &str) -> String {
    let file = source.split('#').next().unwrap_or(source);
    let stem = file
        .strip_suffix(".md")
        .or_else(|| file.strip_suffix(".txt"))
        .unwrap_or(file);
    stem.replace(['-', '_', '/', '\\', '.'], " ")
}

/// The longest prefix of `text` made of whole lines with at most `max_chars` characters.
/// Ends a passage that was cut short to fit the prompt.
pub const CUT_MARK: &str = "[...]";

/// Characters of body text a cut passage must keep to be shown at all.
const MIN_CUT_BODY: usize = 160;

fn truncate_at_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for line in text.split_inclusive('\n') {
        let n = line.chars().count();
        if used + n > max_chars {
            // A last line without its newline may still fit.
            let bare = line.trim_end_matches('\n');
            if used + bare.chars().count() <= max_chars && bare.len() < line.len() {
                out.push_str(bare);
            }
            break;
        }
        out.push_str(line);
        used += n;
    }
    out.truncate(out.trim_end().len());
    out
}

fn builtin_passages() -> Vec<Passage> {
    BUILTIN
        .iter()
        .flat_map(|(name, text)| chunk(name, text))
        .collect()
}

/// The passages of every user directory (or file), each distinct path once.
fn user_passages(dirs: &[PathBuf]) -> Result<Vec<Passage>, KnowledgeError> {
    let mut seen = HashSet::new();
    let mut passages = Vec::new();
    for dir in dirs {
        let key = std::fs::canonicalize(dir).map_err(|source| KnowledgeError::Io {
            path: dir.clone(),
            source,
        })?;
        if seen.insert(key) {
            passages.extend(dir_passages(dir)?);
        }
    }
    Ok(passages)
}

/// The passages of every `*.md` / `*.txt` file under `path` (or of `path` itself if it is a
/// file), in sorted path order. Sources are relative to `path`.
fn dir_passages(path: &Path) -> Result<Vec<Passage>, KnowledgeError> {
    let io_err = |source| KnowledgeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if meta.is_file() {
        let text = read_utf8(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        return Ok(chunk(&name, &text));
    }
    let mut files = Vec::new();
    collect_files(path, 0, &mut files)?;
    if files.is_empty() {
        return Err(KnowledgeError::Empty {
            path: path.to_path_buf(),
        });
    }
    let mut passages = Vec::new();
    for file in files {
        let text = read_utf8(&file)?;
        let rel = file.strip_prefix(path).unwrap_or(&file);
        let name = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        passages.extend(chunk(&name, &text));
    }
    Ok(passages)
}

/// Recursively collects `*.md` / `*.txt` files, skipping hidden entries, sorted.
fn collect_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), KnowledgeError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let io_err = |path: &Path, source| KnowledgeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        entries.push(entry.path());
    }
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        // `metadata` follows symlinks; a dangling link is an error naming it.
        let meta = std::fs::metadata(&path).map_err(|e| io_err(&path, e))?;
        if meta.is_dir() {
            collect_files(&path, depth + 1, out)?;
        } else if meta.is_file() {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            if matches!(ext.as_deref(), Some("md") | Some("txt")) {
                out.push(path);
            }
        }
    }
    Ok(())
}

fn read_utf8(path: &Path) -> Result<String, KnowledgeError> {
    let bytes = std::fs::read(path).map_err(|source| KnowledgeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| KnowledgeError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to()),
        ),
    })
}

/// A Markdown ATX heading outside code: `(level, text)`.
fn heading(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.bytes().take_while(|&b| b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let mut text = rest.trim();
    // An optional closing sequence of `#`s counts only after a space (`## C#` keeps its `#`).
    let unclosed = text.trim_end_matches('#');
    if unclosed.is_empty() || unclosed.ends_with([' ', '\t']) {
        text = unclosed.trim_end();
    }
    if text.is_empty() {
        return None;
    }
    Some((level, text))
}

fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// Cuts one file into passages at its `##` / `###` headings.
fn chunk(name: &str, text: &str) -> Vec<Passage> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let scope = applies_to(text);
    let ops = scope_line(text, "ops:");
    // The file's title: its first `#` heading, else its name without extension.
    let mut doc_title: Option<String> = None;
    // (h2, h3, body lines) of the section being collected.
    let mut h2: Option<String> = None;
    let mut h3: Option<String> = None;
    let mut body: Vec<&str> = Vec::new();
    let mut sections: Vec<(Option<String>, Option<String>, String)> = Vec::new();
    let mut in_fence = false;

    for line in text.lines() {
        if is_fence(line) {
            in_fence = !in_fence;
            body.push(line);
            continue;
        }
        if !in_fence && (!applies_to(line).is_empty() || !scope_line(line, "ops:").is_empty()) {
            continue; // scope lines are for retrieval, not for prompts
        }
        let head = if in_fence { None } else { heading(line) };
        match head {
            Some((1, t)) if doc_title.is_none() && h2.is_none() && !t.is_empty() => {
                doc_title = Some(t.to_string());
            }
            Some((level @ (2 | 3), t)) => {
                sections.push((h2.clone(), h3.clone(), body.join("\n")));
                body.clear();
                if level == 2 {
                    h2 = Some(t.to_string());
                    h3 = None;
                } else {
                    h3 = Some(t.to_string());
                }
            }
            _ => body.push(line),
        }
    }
    sections.push((h2, h3, body.join("\n")));

    let stem = name
        .rsplit('/')
        .next()
        .unwrap_or(name)
        .trim_end_matches(".md")
        .trim_end_matches(".txt")
        .to_string();
    let has_h1 = doc_title.is_some();
    let doc_title = doc_title.unwrap_or(stem);

    let mut passages = Vec::new();
    for (h2, h3, body) in sections {
        let body = body.trim();
        if body.is_empty() {
            continue;
        }
        let mut path = vec![doc_title.as_str()];
        path.extend(h2.as_deref());
        path.extend(h3.as_deref());
        let title = path.join(" > ");
        // The innermost heading; the text before the first `##` is anchored at the `#` title.
        let anchor = h3
            .as_deref()
            .or(h2.as_deref())
            .or(has_h1.then_some(doc_title.as_str()));
        let source = match anchor {
            Some(a) => format!("{name}#{a}"),
            None => name.to_string(),
        };
        let parts = split_long(body, MAX_PASSAGE_CHARS);
        let many = parts.len() > 1;
        for (i, part) in parts.into_iter().enumerate() {
            let (source, heading_line) = if many {
                (
                    format!("{source} (part {})", i + 1),
                    format!("{title} (part {})", i + 1),
                )
            } else {
                (source.clone(), title.clone())
            };
            passages.push(Passage {
                source,
                title: title.clone(),
                text: format!("{heading_line}\n\n{part}"),
                score: 0.0,
                applies_to: scope.clone(),
                ops: ops.clone(),
            });
        }
    }
    passages
}

/// Splits `body` into pieces of at most about `max` characters, on paragraph boundaries (blank
/// lines outside code fences) where possible, else on line boundaries, else anywhere.
fn split_long(body: &str, max: usize) -> Vec<String> {
    if body.chars().count() <= max {
        return vec![body.to_string()];
    }
    // Paragraphs: blank-line separated blocks; a code fence stays inside one block.
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in body.lines() {
        if is_fence(line) {
            in_fence = !in_fence;
        }
        if !in_fence && line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(current.join("\n"));
                current.clear();
            }
        } else {
            current.push(line);
        }
    }
    if !current.is_empty() {
        blocks.push(current.join("\n"));
    }

    // Blocks that alone exceed the limit are cut on lines, then on characters.
    let mut pieces: Vec<String> = Vec::new();
    for block in blocks {
        if block.chars().count() <= max {
            pieces.push(block);
            continue;
        }
        let mut acc = String::new();
        for line in block.lines() {
            for seg in hard_split(line, max) {
                if !acc.is_empty() && acc.chars().count() + 1 + seg.chars().count() > max {
                    pieces.push(std::mem::take(&mut acc));
                }
                if !acc.is_empty() {
                    acc.push('\n');
                }
                acc.push_str(&seg);
            }
        }
        if !acc.is_empty() {
            pieces.push(acc);
        }
    }

    // Greedy packing of pieces into parts.
    let mut parts: Vec<String> = Vec::new();
    let mut acc = String::new();
    for piece in pieces {
        if !acc.is_empty() && acc.chars().count() + 2 + piece.chars().count() > max {
            parts.push(std::mem::take(&mut acc));
        }
        if !acc.is_empty() {
            acc.push_str("\n\n");
        }
        acc.push_str(&piece);
    }
    if !acc.is_empty() {
        parts.push(acc);
    }
    parts
}

/// `line` cut into pieces of at most `max` characters (at char boundaries).
fn hard_split(line: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= max {
        return vec![line.to_string()];
    }
    chars
        .chunks(max.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_by_h2_and_h3_with_heading_path() {
        let text = "# Doc\n\nIntro text.\n\n## A\n\nBody a.\n\n### A1\n\nBody a1.\n\n## B\n\n### B1\n\nBody b1.\n";
        let p = chunk("doc.md", text);
        let sources: Vec<&str> = p.iter().map(|p| p.source.as_str()).collect();
        assert_eq!(
            sources,
            ["doc.md#Doc", "doc.md#A", "doc.md#A1", "doc.md#B1"]
        );
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, ["Doc", "Doc > A", "Doc > A > A1", "Doc > B > B1"]);
        assert_eq!(p[2].text, "Doc > A > A1\n\nBody a1.");
    }

    #[test]
    fn headings_inside_code_fences_are_body() {
        let text = "## Code\n\n```python\n# a comment\n## not a heading\n```\nafter\n";
        let p = chunk("x.md", text);
        assert_eq!(p.len(), 1);
        assert!(p[0].text.contains("## not a heading"));
        assert!(p[0].text.ends_with("after"));
    }

    #[test]
    fn file_without_headings_is_one_passage() {
        let p = chunk("dir/notes.txt", "line one\n#pragma omp simd\nline three\n");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].source, "dir/notes.txt");
        assert_eq!(p[0].title, "notes");
        assert!(p[0].text.contains("#pragma omp simd"));
    }

    #[test]
    fn heading_parsing() {
        assert_eq!(heading("## Loop tiling"), Some((2, "Loop tiling")));
        assert_eq!(heading("### T ###"), Some((3, "T")));
        assert_eq!(heading("#pragma omp"), None);
        assert_eq!(heading("#include <x.h>"), None);
        assert_eq!(heading("    ## indented code"), None);
        assert_eq!(heading("####### seven"), None);
        assert_eq!(heading("### Using C#"), Some((3, "Using C#")));
        assert_eq!(heading("##"), None);
        assert_eq!(heading("## ##"), None);
    }

    #[test]
    fn passages_are_retrieved_only_for_the_languages_their_file_applies_to() {
        let k = Knowledge::open(&[]).unwrap();
        let query = "shared memory tiles coalescing warps occupancy";
        let any = k.retrieve_for(query, None, 5, 100_000).unwrap();
        assert!(
            any.iter().any(|p| p.source.starts_with("cuda.md")),
            "{any:?}"
        );
        let c = k.retrieve_for(query, Some("c"), 5, 100_000).unwrap();
        assert!(!c.is_empty());
        for p in &c {
            assert!(
                p.applies_to.is_empty() || p.applies_to.contains(&"c".to_string()),
                "{} applies to {:?}",
                p.source,
                p.applies_to
            );
            assert!(!p.text.contains("applies-to"), "{}", p.text);
        }
        assert!(!c
            .iter()
            .any(|p| p.source.starts_with("cuda.md") || p.source.starts_with("triton.md")));
        assert_eq!(
            applies_to("# T\n<!-- applies-to: c, CUDA -->\ntext"),
            ["c", "cuda"]
        );
        assert!(applies_to("# T\ntext").is_empty());
    }

    #[test]
    fn split_long_keeps_pieces_under_the_limit() {
        let long_line = "x".repeat(7000);
        let parts = split_long(&long_line, 2500);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.chars().count() <= 2500));
        assert_eq!(parts.concat(), long_line);

        let body = format!(
            "{}\n\n{}\n\n{}",
            "a ".repeat(1000),
            "b ".repeat(1000),
            "c ".repeat(1000)
        );
        let parts = split_long(body.trim(), 2500);
        assert_eq!(parts.len(), 3);
        // A fenced block with blank lines stays together when it fits.
        let fenced = format!(
            "```\n{}\n\nmore\n```\n\n{}",
            "y".repeat(100),
            "z ".repeat(1300)
        );
        let parts = split_long(&fenced, 2500);
        assert!(parts[0].starts_with("```") && parts[0].ends_with("```"));
    }

    #[test]
    fn truncation_is_at_line_boundaries() {
        let t = "abc\ndef\nghi";
        assert_eq!(truncate_at_line(t, 100), t);
        assert_eq!(truncate_at_line(t, 7), "abc\ndef");
        assert_eq!(truncate_at_line(t, 8), "abc\ndef");
        assert_eq!(truncate_at_line(t, 6), "abc");
        assert_eq!(truncate_at_line(t, 2), "");
        assert_eq!(truncate_at_line("é\né", 3), "é\né");
    }
}
