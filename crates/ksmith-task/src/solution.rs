//! Solutions: a directory with `solution.toml`, or a bare source file.
//!
//! Everything in a solution is written by someone we do not trust, so loading refuses, as
//! problems in `file: field: message` form, anything that would let the files reach the host:
//! compiler flags off the allow-list ([`crate::flags`]), a `name` that is not a safe path
//! component ([`crate::is_safe_component`]), and source files (or `solution.toml`, or a bare
//! source file) that are symbolic links, not regular files, larger than [`MAX_SOURCE_BYTES`],
//! or outside the solution directory.

use crate::component::{is_safe_component, safe_component, MAX_COMPONENT_LEN};
use crate::task::is_identifier;
use crate::{Formula, Problem, Problems, Task};
use serde::Serialize;
use std::io::Read;
use std::path::Path;
use toml::{Table, Value};

/// Source language of a solution (one backend each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// C for the CPU backend: a shared library built with the system C compiler.
    C,
    /// CUDA C++: an `extern "C"` host launcher built with nvcc into a shared library.
    Cuda,
    /// A Python module with `@triton.jit` kernels and a destination-passing host function.
    Triton,
    /// A Python module whose entry function calls `pl.pallas_call` and returns the outputs.
    Pallas,
}

/// Language names accepted in `solution.toml`.
pub const LANGUAGES: [&str; 4] = ["c", "cuda", "triton", "pallas"];

impl Language {
    /// Parses a `solution.toml` language name.
    pub fn from_name(s: &str) -> Option<Language> {
        match s {
            "c" => Some(Language::C),
            "cuda" => Some(Language::Cuda),
            "triton" => Some(Language::Triton),
            "pallas" => Some(Language::Pallas),
            _ => None,
        }
    }

    /// The name used in `solution.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cuda => "cuda",
            Language::Triton => "triton",
            Language::Pallas => "pallas",
        }
    }

    /// Whether the solution is a Python module (run by the harness, no native build).
    pub fn is_python(self) -> bool {
        matches!(self, Language::Triton | Language::Pallas)
    }

    /// From a bare source file: `.c`, `.cu`, or a `.py` that imports triton or pallas.
    fn detect(path: &Path, source: &str) -> Option<Language> {
        let source = source.to_lowercase();
        match path.extension()?.to_str()? {
            "c" => Some(Language::C),
            "cu" => Some(Language::Cuda),
            "py" if source.contains("pallas") => Some(Language::Pallas),
            "py" if source.contains("triton") => Some(Language::Triton),
            _ => None,
        }
    }
}

/// A tunable parameter, passed to the build as `-DNAME=value`.
#[derive(Debug, Clone, Serialize)]
pub struct Tunable {
    /// Macro name.
    pub name: String,
    /// Candidate values.
    pub values: Vec<i64>,
    /// Constraints over tunables and axes.
    #[serde(serialize_with = "ser_formulas")]
    pub constraints: Vec<Formula>,
}

fn ser_formulas<S: serde::Serializer>(f: &[Formula], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(f.iter().map(|f| f.text()))
}

/// A candidate implementation of a task.
#[derive(Debug, Clone, Serialize)]
pub struct Solution {
    /// Display name.
    pub name: String,
    /// Language.
    pub language: Language,
    /// Exported entry function.
    pub entry_point: String,
    /// Source files: (path relative to the solution, contents).
    pub sources: Vec<(String, String)>,
    /// Extra compiler flags.
    pub flags: Vec<String>,
    /// Tunable parameters.
    pub tunables: Vec<Tunable>,
    /// blake3 over language, entry point, flags and every source.
    pub content_hash: String,
}

/// File name of a solution definition inside a solution directory.
pub const SOLUTION_FILE: &str = "solution.toml";

/// Largest solution file read (each source, and `solution.toml`): 1 MiB. Kernels are text far
/// smaller than this; the cap keeps a hostile solution from filling memory, the store and
/// exports.
pub const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// Most source files one solution may list.
pub const MAX_SOURCES: usize = 64;

/// Whether `path` (a `sources` entry) is a safe relative path: `/`-separated components that
/// are each a safe path component ([`is_safe_component`]: no `..`, `.`, hidden or empty parts)
/// and do not start with `-` (source names are compiler arguments, so `-wrapper.c` would be an
/// option).
pub fn is_safe_source_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|c| is_safe_component(c) && !c.starts_with('-'))
}

/// Why a `sources` entry is refused, or `None` when it is a safe relative path.
fn source_path_problem(s: &str) -> Option<String> {
    let shown = s.escape_debug();
    if s.is_empty() {
        Some("empty path".into())
    } else if Path::new(s).is_absolute() {
        Some(format!(
            "`{shown}` is absolute; sources must be relative paths inside the solution directory"
        ))
    } else if s.split('/').any(|c| c == "..") {
        Some(format!(
            "`{shown}` contains `..`; sources must be relative paths inside the solution directory"
        ))
    } else if !is_safe_source_path(s) {
        Some(format!(
            "`{shown}` is not a safe source path: `/`-separated parts of 1 to {MAX_COMPONENT_LEN} of A-Z a-z 0-9 . _ -, none starting with `.` or `-`"
        ))
    } else {
        None
    }
}

/// Reads a file a solution's author controls, refusing anything but a regular file of at most
/// [`MAX_SOURCE_BYTES`], and, when `root` (the canonical solution directory) is given, one
/// that resolves outside it. `Err` is the reason, worded to follow the file's name.
fn read_solution_file(path: &Path, root: Option<&Path>) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err(
            "is a symbolic link; a solution's files must be regular files inside its directory"
                .into(),
        );
    }
    if !meta.is_file() {
        return Err("is not a regular file (a directory, fifo, socket or device)".into());
    }
    let too_big = |n: u64| {
        format!("is {n} bytes; a solution file may be at most {MAX_SOURCE_BYTES} bytes (1 MiB)")
    };
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(too_big(meta.len()));
    }
    if let Some(root) = root {
        let real = std::fs::canonicalize(path).map_err(|e| format!("cannot be read: {e}"))?;
        if !real.starts_with(root) {
            return Err("resolves outside the solution directory".into());
        }
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let opened = file
            .metadata()
            .map_err(|e| format!("cannot be read: {e}"))?;
        if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
            return Err("changed while it was being read".into());
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    // Compilers skip NUL bytes with a warning; no source needs one, and they are how text can
    // hide from whoever reads it.
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!(
            "contains a NUL byte (at byte {at}): sources are text"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".into())
}

/// Kernel sources directly in `dir` (not links): `.c`, `.cu`, `.py`.
fn bare_sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| ["c", "cu", "py"].contains(&x))
        })
        .collect();
    found.sort();
    found
}

impl Solution {
    /// Writes a solution as a directory: its sources and a solution.toml (values TOML-escaped),
    /// after a `# header` comment when one is given and with `extra` TOML (e.g. `[[tunables]]`)
    /// appended.
    pub fn write_dir(&self, out: &Path, header: &str, extra: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(out)?;
        for (name, text) in &self.sources {
            let p = out.join(name);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(p, text)?;
        }
        let mut t = Table::new();
        t.insert("name".into(), self.name.clone().into());
        t.insert("language".into(), self.language.name().into());
        t.insert("entry_point".into(), self.entry_point.clone().into());
        let sources: Vec<String> = self.sources.iter().map(|(n, _)| n.clone()).collect();
        t.insert("sources".into(), sources.into());
        t.insert("flags".into(), self.flags.clone().into());
        // The solution's own tunables, unless the caller declares others in `extra`.
        if extra.trim().is_empty() && !self.tunables.is_empty() {
            let tunables: Vec<Value> = self
                .tunables
                .iter()
                .map(|tu| {
                    let mut e = Table::new();
                    e.insert("name".into(), tu.name.clone().into());
                    e.insert("values".into(), tu.values.clone().into());
                    let constraints: Vec<String> = tu
                        .constraints
                        .iter()
                        .map(|c| c.text().to_string())
                        .collect();
                    e.insert("constraints".into(), constraints.into());
                    Value::Table(e)
                })
                .collect();
            t.insert("tunables".into(), tunables.into());
        }
        let header = if header.is_empty() {
            String::new()
        } else {
            format!("# {header}\n")
        };
        let body = toml::to_string(&t).map_err(std::io::Error::other)?;
        std::fs::write(
            out.join(crate::SOLUTION_FILE),
            format!("{header}{body}\n{extra}"),
        )
    }

    /// Loads a solution from a directory (with `solution.toml`, or holding exactly one kernel
    /// source) or a bare source file.
    pub fn load(path: &Path, task: &Task) -> Result<Solution, Problems> {
        if !path.is_dir() {
            return Self::load_file(path, task);
        }
        if path.join(SOLUTION_FILE).exists() {
            return Self::load_dir(path, task);
        }
        match bare_sources(path).as_slice() {
            [one] => Self::load_file(one, task),
            found => Err(Problems(vec![Problem::new(
                path,
                "-",
                format!(
                    "no {SOLUTION_FILE}, and {} kernel sources (.c, .cu, .py): a directory without {SOLUTION_FILE} must hold exactly one",
                    found.len()
                ),
            )])),
        }
    }

    /// Where a task's solution named `name` is: `solutions/NAME/` (with `solution.toml` or one
    /// kernel source) or `solutions/NAME.c|.cu|.py`.
    pub fn find(task_dir: &Path, name: &str) -> Option<std::path::PathBuf> {
        let dir = task_dir.join("solutions").join(name);
        if dir.join(SOLUTION_FILE).is_file() || bare_sources(&dir).len() == 1 {
            return Some(dir);
        }
        ["c", "cu", "py"]
            .iter()
            .map(|ext| task_dir.join("solutions").join(format!("{name}.{ext}")))
            .find(|p| p.is_file())
    }

    /// Builds a solution from in-memory source (used by proposers and tests).
    pub fn from_source(
        name: &str,
        language: Language,
        entry_point: &str,
        file: &str,
        source: String,
        flags: Vec<String>,
    ) -> Solution {
        Self::from_parts(
            name.to_string(),
            language,
            entry_point.to_string(),
            vec![(file.to_string(), source)],
            flags,
        )
    }

    /// A solution from its parts (e.g. received from another machine), its hash computed here;
    /// check it with [`Solution::untrusted_problems`] before judging it.
    pub fn from_parts(
        name: String,
        language: Language,
        entry_point: String,
        sources: Vec<(String, String)>,
        flags: Vec<String>,
    ) -> Solution {
        let mut s = Solution {
            name,
            language,
            entry_point,
            sources,
            flags,
            tunables: Vec::new(),
            content_hash: String::new(),
        };
        s.content_hash = s.compute_hash();
        s
    }

    /// What `solution.toml` loading would refuse in a solution built from parts: source count,
    /// names and sizes, entry point, flags. Empty when it is acceptable.
    pub fn untrusted_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.name.is_empty() || self.name.len() > 256 || self.name.chars().any(char::is_control)
        {
            out.push("name: empty, longer than 256 bytes or with control characters".to_string());
        }
        if self.sources.is_empty() || self.sources.len() > MAX_SOURCES {
            out.push(format!(
                "sources: {} files; 1 to {MAX_SOURCES} are allowed",
                self.sources.len()
            ));
        }
        for (i, (path, text)) in self.sources.iter().enumerate() {
            if let Some(why) = source_path_problem(path) {
                out.push(format!("sources[{i}]: {why}"));
            }
            if text.len() as u64 > MAX_SOURCE_BYTES {
                out.push(format!(
                    "sources[{i}]: {} bytes; at most {MAX_SOURCE_BYTES}",
                    text.len()
                ));
            }
            if self.sources[..i].iter().any(|(p, _)| p == path) {
                out.push(format!(
                    "sources[{i}]: `{}` is listed twice",
                    path.escape_debug()
                ));
            }
        }
        if !is_identifier(&self.entry_point) {
            out.push(format!(
                "entry_point: `{}` is not an identifier",
                self.entry_point.escape_debug()
            ));
        }
        for (i, why) in crate::flags::check_flags(self.language, &self.flags) {
            out.push(format!("flags[{i}]: {why}"));
        }
        out
    }

    fn load_file(path: &Path, task: &Task) -> Result<Solution, Problems> {
        let one = |msg: String| Problems(vec![Problem::new(path, "-", msg)]);
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("")
            .to_string();
        if !is_safe_source_path(&file) {
            return Err(one(format!(
                "file name `{}` is not a safe source name: 1 to {MAX_COMPONENT_LEN} of A-Z a-z 0-9 . _ -, not starting with `.` or `-`",
                file.escape_debug()
            )));
        }
        let source = read_solution_file(path, None).map_err(|why| one(format!("{file} {why}")))?;
        let language = Language::detect(path, &source).ok_or_else(|| {
            one(
                "unknown source language (expected a .c or .cu file, a .py file importing triton or pallas, or a directory with solution.toml)"
                    .into(),
            )
        })?;
        let name = safe_component(
            path.file_stem()
                .and_then(|f| f.to_str())
                .unwrap_or("solution"),
        );
        Ok(Self::from_source(
            &name,
            language,
            &task.name,
            &file,
            source,
            Vec::new(),
        ))
    }

    fn load_dir(dir: &Path, task: &Task) -> Result<Solution, Problems> {
        let file = dir.join(SOLUTION_FILE);
        let one = |field: &str, msg: String| Problems(vec![Problem::new(&file, field, msg)]);
        let root = std::fs::canonicalize(dir)
            .map_err(|e| one("-", format!("cannot read the solution directory: {e}")))?;
        let text = read_solution_file(&file, Some(&root))
            .map_err(|why| one("-", format!("{SOLUTION_FILE} {why}")))?;
        let t: Table = text
            .parse()
            .map_err(|e: toml::de::Error| one("-", crate::task::toml_error(&text, &e)))?;
        let mut problems = Vec::new();
        let mut err = |field: &str, msg: String| problems.push(Problem::new(&file, field, msg));
        for k in t.keys() {
            const FIELDS: [&str; 6] = [
                "name",
                "language",
                "entry_point",
                "sources",
                "flags",
                "tunables",
            ];
            if !FIELDS.contains(&k.as_str()) {
                let near = crate::suggest::closest(k, FIELDS)
                    .map(|n| format!(": did you mean `{n}`?"))
                    .unwrap_or_default();
                err(
                    k,
                    format!(
                        "unknown field{near} (expected one of: {})",
                        FIELDS.join(", ")
                    ),
                );
            }
        }
        let get_str = |key: &str| t.get(key).and_then(Value::as_str).map(str::to_string);
        let dir_name = dir
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("solution")
            .to_string();
        let name = match get_str("name") {
            Some(n) if !is_safe_component(&n) => {
                err(
                    "name",
                    format!(
                        "`{}` is not a safe name (it becomes a file name when results are exported): use 1 to {MAX_COMPONENT_LEN} of A-Z a-z 0-9 . _ -, not starting with `.`",
                        n.escape_debug()
                    ),
                );
                n
            }
            Some(n) => n,
            None => safe_component(&dir_name),
        };
        let language = match get_str("language") {
            Some(l) => Language::from_name(&l).unwrap_or_else(|| {
                err(
                    "language",
                    format!(
                        "unsupported language {}",
                        crate::suggest::expected(&l, &LANGUAGES)
                    ),
                );
                Language::C
            }),
            None => {
                err("language", "missing required field".into());
                Language::C
            }
        };
        let entry_point = get_str("entry_point").unwrap_or_else(|| task.name.clone());
        if !is_identifier(&entry_point) {
            err(
                "entry_point",
                format!("`{entry_point}` is not an identifier"),
            );
        }
        let string_list = |key: &str, err: &mut dyn FnMut(&str, String)| -> Vec<String> {
            match t.get(key) {
                None => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| match v.as_str() {
                        Some(s) => Some(s.to_string()),
                        None => {
                            err(&format!("{key}[{i}]"), "expected a string".into());
                            None
                        }
                    })
                    .collect(),
                Some(_) => {
                    err(key, "expected a list of strings".into());
                    Vec::new()
                }
            }
        };
        let source_names = string_list("sources", &mut err);
        if source_names.is_empty() {
            err(
                "sources",
                "a solution needs at least one source file".into(),
            );
        }
        if source_names.len() > MAX_SOURCES {
            err(
                "sources",
                format!(
                    "{} sources; at most {MAX_SOURCES} are allowed",
                    source_names.len()
                ),
            );
        }
        let flags = string_list("flags", &mut err);
        for (i, why) in crate::flags::check_flags(language, &flags) {
            if i < flags.len() {
                err(&format!("flags[{i}]"), why);
            } else {
                err("flags", why);
            }
        }
        let mut sources: Vec<(String, String)> = Vec::new();
        for (i, s) in source_names.iter().enumerate().take(MAX_SOURCES) {
            let field = format!("sources[{i}]");
            if let Some(why) = source_path_problem(s) {
                err(&field, why);
                continue;
            }
            if sources.iter().any(|(n, _)| n == s) {
                err(&field, format!("`{s}` is listed twice"));
                continue;
            }
            match read_solution_file(&dir.join(s), Some(&root)) {
                Ok(text) => sources.push((s.clone(), text)),
                Err(why) => err(&field, format!("{s} {why}")),
            }
        }
        let tunables = parse_tunables(&t, task, &mut err);
        if !problems.is_empty() {
            return Err(Problems(problems));
        }
        let mut s = Solution {
            name,
            language,
            entry_point,
            sources,
            flags,
            tunables,
            content_hash: String::new(),
        };
        s.content_hash = s.compute_hash();
        Ok(s)
    }

    fn compute_hash(&self) -> String {
        let mut h = crate::FieldHasher::new("ksmith solution v2");
        h.field(format!("{:?}", self.language))
            .field(&self.entry_point)
            .list(&self.flags)
            .field((self.sources.len() as u64).to_le_bytes());
        for (n, s) in &self.sources {
            h.field(n).field(s);
        }
        h.hex()
    }

    /// A variant with extra compiler flags (e.g. `-DBM=64` for tunables) under another name.
    pub fn variant(&self, name: &str, extra_flags: &[String]) -> Solution {
        let mut s = self.clone();
        s.name = name.to_string();
        s.flags.extend(extra_flags.iter().cloned());
        s.content_hash = s.compute_hash();
        s
    }
}

fn parse_tunables(t: &Table, task: &Task, err: &mut dyn FnMut(&str, String)) -> Vec<Tunable> {
    let Some(v) = t.get("tunables") else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        err(
            "tunables",
            "expected an array of tables ([[tunables]])".into(),
        );
        return Vec::new();
    };
    let names: Vec<String> = items
        .iter()
        .filter_map(|i| i.get("name")?.as_str().map(str::to_string))
        .collect();
    let mut scope: Vec<&str> = task.axes.iter().map(|a| a.name.as_str()).collect();
    scope.extend(names.iter().map(String::as_str));
    let mut out: Vec<Tunable> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("tunables[{i}]");
        let Some(tt) = item.as_table() else {
            err(&field, "expected a table".into());
            continue;
        };
        for k in tt.keys() {
            if !["name", "values", "range", "constraints"].contains(&k.as_str()) {
                err(
                    &format!("{field}.{k}"),
                    "unknown field (expected name, values, range, constraints)".into(),
                );
            }
        }
        let Some(name) = tt.get("name").and_then(Value::as_str) else {
            err(
                &format!("{field}.name"),
                "missing required string field".into(),
            );
            continue;
        };
        if !crate::flags::is_macro_name(name) {
            err(
                &format!("{field}.name"),
                format!(
                    "`{}` is not a usable macro name (it becomes -D{}=VALUE): a C identifier that is not a keyword or type name",
                    name.escape_debug(),
                    name.escape_debug()
                ),
            );
            continue;
        }
        if out.iter().any(|t| t.name == name) || task.axes.iter().any(|a| a.name == name) {
            err(
                &format!("{field}.name"),
                format!("`{name}` is already the name of another tunable or of a task axis"),
            );
            continue;
        }
        let values: Vec<i64> = match (tt.get("values"), tt.get("range")) {
            (Some(Value::Array(a)), None) => a.iter().filter_map(Value::as_integer).collect(),
            (None, Some(Value::Table(r))) => {
                let g = |k: &str| r.get(k).and_then(Value::as_integer);
                match (g("start"), g("stop"), g("step").or(Some(1))) {
                    (Some(a), Some(b), Some(s)) if s > 0 && b >= a => {
                        (a..=b).step_by(s as usize).collect()
                    }
                    _ => {
                        err(
                            &format!("{field}.range"),
                            "expected { start = A, stop = B, step = S } with B >= A and S > 0"
                                .into(),
                        );
                        Vec::new()
                    }
                }
            }
            _ => {
                err(
                    &field,
                    "give exactly one of `values` (list of integers) or `range`".into(),
                );
                Vec::new()
            }
        };
        if values.is_empty() {
            err(&format!("{field}.values"), "no integer values".into());
        }
        let mut constraints = Vec::new();
        if let Some(cs) = tt.get("constraints").and_then(Value::as_array) {
            for (j, c) in cs.iter().enumerate() {
                match c.as_str().map(|s| Formula::parse_constraint(s, &scope)) {
                    Some(Ok(f)) => constraints.push(f),
                    Some(Err(e)) => err(&format!("{field}.constraints[{j}]"), e.to_string()),
                    None => err(
                        &format!("{field}.constraints[{j}]"),
                        "expected a string".into(),
                    ),
                }
            }
        }
        out.push(Tunable {
            name: name.to_string(),
            values,
            constraints,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn task() -> Task {
        Task::load(&repo().join("tasks/starter/vector_add")).unwrap()
    }

    fn in_memory(sources: &[(&str, &str)], flags: &[&str]) -> Solution {
        let mut s = Solution {
            name: "s".into(),
            language: Language::C,
            entry_point: "vector_add".into(),
            sources: sources
                .iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            tunables: vec![],
            content_hash: String::new(),
        };
        s.content_hash = s.compute_hash();
        s
    }

    /// The red team's collision: one file whose text imitates a file boundary, against the
    /// two files it imitates. Field boundaries are lengths, so no text can forge one.
    #[test]
    fn no_source_text_can_imitate_a_file_or_flag_boundary() {
        let one = in_memory(&[("kernel.c", "A\0helper.c\0B")], &[]);
        let two = in_memory(&[("kernel.c", "A"), ("helper.c", "B")], &[]);
        assert_ne!(one.content_hash, two.content_hash);
        let joined = in_memory(&[("kernel.c", KERNEL)], &["-DA\u{1}-DB"]);
        let split = in_memory(&[("kernel.c", KERNEL)], &["-DA", "-DB"]);
        assert_ne!(joined.content_hash, split.content_hash);
        let flag_or_source = in_memory(&[("kernel.c", "")], &["x"]);
        let source_only = in_memory(&[("kernel.c", "x")], &[]);
        assert_ne!(flag_or_source.content_hash, source_only.content_hash);
        assert_eq!(
            in_memory(&[("kernel.c", KERNEL)], &[]).content_hash,
            in_memory(&[("kernel.c", KERNEL)], &[]).content_hash
        );
    }

    #[test]
    fn a_source_with_a_nul_byte_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kernel.c"), "int x;\0helper.c\0").unwrap();
        let e = Solution::load(d.path(), &task()).unwrap_err().to_string();
        assert!(e.contains("NUL byte"), "{e}");
    }

    const KERNEL: &str = "#include <stdint.h>\nvoid vector_add(const float* a, const float* b, float* c, int64_t n) {\n  for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n";

    /// A solution directory with `kernel.c` and a solution.toml of `head` plus `rest`.
    fn dir_with(rest: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kernel.c"), KERNEL).unwrap();
        std::fs::write(
            d.path().join(SOLUTION_FILE),
            format!("language = \"c\"\nentry_point = \"vector_add\"\n{rest}"),
        )
        .unwrap();
        d
    }

    #[test]
    fn bare_solution_directories_and_files_are_found_and_loaded() {
        let t = task();
        let root = tempfile::tempdir().unwrap();
        let sols = root.path().join("solutions");
        std::fs::create_dir_all(sols.join("naive")).unwrap();
        std::fs::write(sols.join("naive/kernel.c"), KERNEL).unwrap();
        std::fs::write(sols.join("fast.c"), KERNEL).unwrap();
        std::fs::create_dir_all(sols.join("two")).unwrap();
        std::fs::write(sols.join("two/a.c"), KERNEL).unwrap();
        std::fs::write(sols.join("two/b.c"), KERNEL).unwrap();
        let naive = Solution::find(root.path(), "naive").unwrap();
        assert_eq!(naive, sols.join("naive"));
        let s = Solution::load(&naive, &t).unwrap();
        assert_eq!(s.entry_point, "vector_add");
        assert_eq!(
            Solution::find(root.path(), "fast").unwrap(),
            sols.join("fast.c")
        );
        assert!(Solution::find(root.path(), "seed").is_none());
        assert!(Solution::find(root.path(), "two").is_none());
        let e = Solution::load(&sols.join("two"), &t)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("must hold exactly one") && e.contains("2 kernel sources"),
            "{e}"
        );
    }

    fn with_flags(flags: &[&str]) -> tempfile::TempDir {
        let list: Vec<String> = flags.iter().map(|f| Value::from(*f).to_string()).collect();
        dir_with(&format!(
            "sources = [\"kernel.c\"]\nflags = [{}]\n",
            list.join(", ")
        ))
    }

    /// Every problem of loading `path`, one `file: field: message` string each.
    fn problems(path: &Path) -> Vec<String> {
        match Solution::load(path, &task()) {
            Ok(_) => Vec::new(),
            Err(p) => p.0.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn one_problem(path: &Path) -> String {
        let p = problems(path);
        assert_eq!(p.len(), 1, "{p:#?}");
        p[0].clone()
    }

    #[test]
    fn allowed_flags_load() {
        let d = with_flags(&[
            "-O2",
            "-march=native",
            "-mavx2",
            "-mno-avx512f",
            "-ffast-math",
            "-fno-math-errno",
            "-funroll-loops",
            "-fopenmp",
            "-fvect-cost-model=dynamic",
            "-Wall",
            "-Werror",
            "-std=c11",
            "-DBM=64",
            "-DEPS=1e-5f",
            "-g",
            "-pipe",
            "--param=max-unroll-times=8",
        ]);
        let s = Solution::load(d.path(), &task()).unwrap();
        assert_eq!(s.flags.len(), 17);
        // What the tuner adds passes the same check when the tuned solution is loaded again.
        let v = s.variant("tuned", &["-DBM=64".into(), "-DBN=32".into()]);
        assert!(crate::flags::check_flags(v.language, &v.flags).is_empty());
    }

    #[test]
    fn refused_flags_are_problems_naming_solution_toml_flags_and_the_flag() {
        for (flag, why) in [
            ("-wrapper", "another program"),
            ("/bin/sh,-c,touch /tmp/PWNED", "not an option"),
            ("-B/tmp", "own programs"),
            ("-B", "own programs"),
            ("-specs=x", "specs file"),
            ("-fplugin=x.so", "plugin"),
            ("@flags.txt", "response file"),
            ("-include", "reads a file"),
            ("-imacros", "reads a file"),
            ("-Wl,-rpath,/tmp", "linker"),
            ("-Wa,-adhln=x", "assembler"),
            ("-Xlinker", "linker"),
            ("-o", "output path"),
            ("-I/etc", "include directory"),
            ("-lfoo", "links a library"),
            ("-x", "source language"),
            ("-DX=$(id)", "contains `$`"),
            ("-fdump-tree-all", "dump"),
            ("-save-temps", "intermediate"),
            ("--param", "separate argument"),
        ] {
            let d = with_flags(&[flag]);
            let p = one_problem(d.path());
            let head = format!(
                "{}: flags[0]: flag `{}` is not allowed: ",
                d.path().join(SOLUTION_FILE).display(),
                flag.escape_debug()
            );
            assert!(p.starts_with(&head) && p.contains(why), "{flag}: {p}");
        }
        // Two refused flags after an allowed one: both reported, at their own indexes.
        let d = with_flags(&["-O3", "-wrapper", "/bin/sh,-c,id"]);
        let p = problems(d.path());
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("flags[1]") && p[1].contains("flags[2]"),
            "{p:#?}"
        );
    }

    #[test]
    fn python_solutions_take_no_flags() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kernel.py"), "import triton\n").unwrap();
        std::fs::write(
            d.path().join(SOLUTION_FILE),
            "language = \"triton\"\nsources = [\"kernel.py\"]\nflags = [\"-O3\"]\n",
        )
        .unwrap();
        assert!(one_problem(d.path()).contains("flags[0]"));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_source_is_refused() {
        let d = dir_with("sources = [\"kernel.c\"]\n");
        std::fs::remove_file(d.path().join("kernel.c")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("kernel.c")).unwrap();
        let p = one_problem(d.path());
        assert!(
            p.contains("solution.toml: sources[0]: kernel.c is a symbolic link"),
            "{p}"
        );
        // Even a link to a file inside the directory: sources are regular files.
        std::fs::write(d.path().join("real.c"), KERNEL).unwrap();
        std::fs::remove_file(d.path().join("kernel.c")).unwrap();
        std::os::unix::fs::symlink("real.c", d.path().join("kernel.c")).unwrap();
        assert!(one_problem(d.path()).contains("symbolic link"));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_solution_toml_is_refused() {
        let d = dir_with("sources = [\"kernel.c\"]\n");
        let elsewhere = tempfile::tempdir().unwrap();
        let real = elsewhere.path().join(SOLUTION_FILE);
        std::fs::rename(d.path().join(SOLUTION_FILE), &real).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join(SOLUTION_FILE)).unwrap();
        let p = one_problem(d.path());
        assert!(
            p.contains("solution.toml: -: solution.toml is a symbolic link"),
            "{p}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_bare_source_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("real.c"), KERNEL).unwrap();
        std::os::unix::fs::symlink(d.path().join("real.c"), d.path().join("link.c")).unwrap();
        assert!(Solution::load(&d.path().join("real.c"), &task()).is_ok());
        let p = one_problem(&d.path().join("link.c"));
        assert!(p.contains("link.c: -: link.c is a symbolic link"), "{p}");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("passwd.c")).unwrap();
        assert!(one_problem(&d.path().join("passwd.c")).contains("symbolic link"));
        // A bare file whose name would be read as an option.
        std::fs::write(d.path().join("-wrapper.c"), KERNEL).unwrap();
        assert!(one_problem(&d.path().join("-wrapper.c")).contains("not a safe source name"));
    }

    #[test]
    fn sources_outside_the_directory_are_refused() {
        for (src, why) in [
            ("../kernel.c", "contains `..`"),
            ("sub/../../kernel.c", "contains `..`"),
            ("/etc/passwd", "is absolute"),
            ("", "empty path"),
            ("./kernel.c", "not a safe source path"),
            (".hidden.c", "not a safe source path"),
            ("-wrapper.c", "not a safe source path"),
            ("@flags.c", "not a safe source path"),
            ("a b.c", "not a safe source path"),
            ("sub//kernel.c", "not a safe source path"),
        ] {
            let d = dir_with(&format!("sources = [{}]\n", Value::from(src)));
            let p = one_problem(d.path());
            assert!(p.contains("sources[0]: ") && p.contains(why), "{src}: {p}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_source_reached_through_a_symlinked_directory_outside_is_refused() {
        let d = dir_with("sources = [\"sub/kernel.c\"]\n");
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("kernel.c"), KERNEL).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), d.path().join("sub")).unwrap();
        let p = one_problem(d.path());
        assert!(
            p.contains("sources[0]: sub/kernel.c resolves outside the solution directory"),
            "{p}"
        );
        // A real subdirectory is fine.
        std::fs::remove_file(d.path().join("sub")).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/kernel.c"), KERNEL).unwrap();
        assert_eq!(problems(d.path()), Vec::<String>::new());
    }

    #[test]
    fn non_regular_and_huge_files_are_refused() {
        let d = dir_with("sources = [\"sub\"]\n");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(one_problem(d.path()).contains("sub is not a regular file"));

        let d = dir_with("sources = [\"kernel.c\"]\n");
        let big = format!("{KERNEL}//{}\n", "x".repeat(MAX_SOURCE_BYTES as usize));
        std::fs::write(d.path().join("kernel.c"), big).unwrap();
        let p = one_problem(d.path());
        assert!(
            p.contains("kernel.c is ") && p.contains("at most 1048576 bytes (1 MiB)"),
            "{p}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = dir_with("sources = [\"kernel.c\"]\n");
        std::fs::remove_file(d.path().join("kernel.c")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(d.path().join("kernel.c"))
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !made {
            eprintln!("no mkfifo here; skipped");
            return;
        }
        assert!(one_problem(d.path()).contains("kernel.c is not a regular file"));
    }

    #[test]
    fn the_name_must_be_a_safe_path_component() {
        for name in ["../../x", "../../../../tmp/x", "a/b", ".hidden", "", "a b"] {
            let d = dir_with(&format!(
                "name = {}\nsources = [\"kernel.c\"]\n",
                Value::from(name)
            ));
            let p = one_problem(d.path());
            assert!(
                p.contains("solution.toml: name: ") && p.contains("not a safe name"),
                "{p}"
            );
        }
        let d = dir_with("name = \"vector_add-fast.v2\"\nsources = [\"kernel.c\"]\n");
        assert_eq!(
            Solution::load(d.path(), &task()).unwrap().name,
            "vector_add-fast.v2"
        );
    }

    #[test]
    fn tunable_names_must_be_identifiers() {
        for name in ["BM -wrapper", "float", "int64_t"] {
            let d = dir_with(&format!(
                "sources = [\"kernel.c\"]\n[[tunables]]\nname = {}\nvalues = [1, 2]\n",
                Value::from(name)
            ));
            assert!(one_problem(d.path()).contains("tunables[0].name"), "{name}");
        }
    }

    #[test]
    fn duplicate_tunables_and_broken_constraints_are_refused() {
        let d = dir_with(
            "sources = [\"kernel.c\"]\n[[tunables]]\nname = \"BM\"\nvalues = [1, 2]\n[[tunables]]\nname = \"BM\"\nvalues = [4]\n",
        );
        let p = one_problem(d.path());
        assert!(
            p.contains("tunables[1].name") && p.contains("already"),
            "{p}"
        );
        let d = dir_with(
            "sources = [\"kernel.c\"]\n[[tunables]]\nname = \"BM\"\nvalues = [1, 2]\nconstraints = [\"BM <= <= N\"]\n",
        );
        assert!(one_problem(d.path()).contains("tunables[0].constraints[0]"));
    }

    /// Every solution shipped in tasks/ still loads under the allow-list and file checks.
    #[test]
    fn every_solution_in_the_repository_loads() {
        let mut loaded = 0;
        for suite in ["starter", "ksbench"] {
            let Ok(rd) = std::fs::read_dir(repo().join("tasks").join(suite)) else {
                continue;
            };
            for t in rd.flatten() {
                if !t.path().join(crate::TASK_FILE_NAME).exists() {
                    continue;
                }
                let task = Task::load(&t.path()).unwrap();
                let Ok(sols) = std::fs::read_dir(t.path().join("solutions")) else {
                    continue;
                };
                for s in sols.flatten() {
                    if let Err(p) = Solution::load(&s.path(), &task) {
                        panic!("{}:\n{p}", s.path().display());
                    }
                    loaded += 1;
                }
            }
        }
        assert!(loaded >= 8, "only {loaded} solutions found");
    }
}

#[cfg(test)]
mod write_tests {
    use super::*;

    #[test]
    fn written_solutions_load_back_with_flags_and_extra_tunables() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/softmax");
        let task = crate::Task::load(&root).unwrap();
        let src = "#define CHUNK 8\nvoid softmax(const float* x, float* y, long M, long N) {}\n";
        let sol = Solution::from_source(
            "softmax-tuned.v2",
            crate::Language::C,
            "softmax",
            "kernel.c",
            src.into(),
            vec!["-fno-math-errno".into()],
        );
        let dir = tempfile::tempdir().unwrap();
        sol.write_dir(
            dir.path(),
            "",
            "[[tunables]]\nname = \"CHUNK\"\nvalues = [4, 8]\n",
        )
        .unwrap();
        let back = Solution::load(dir.path(), &task).unwrap();
        assert_eq!(back.name, sol.name);
        assert_eq!(back.flags, sol.flags);
        assert_eq!(back.sources, sol.sources);
        assert_eq!(back.tunables.len(), 1);
    }

    #[test]
    fn a_solutions_own_tunables_are_written_with_their_constraints() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/starter/softmax");
        let task = crate::Task::load(&root).unwrap();
        let fast = Solution::load(&root.join("solutions/fast"), &task).unwrap();
        assert!(!fast.tunables.is_empty());
        let dir = tempfile::tempdir().unwrap();
        fast.write_dir(dir.path(), "", "").unwrap();
        let back = Solution::load(dir.path(), &task).unwrap();
        assert_eq!(back.tunables.len(), fast.tunables.len());
        for (a, b) in back.tunables.iter().zip(&fast.tunables) {
            assert_eq!(a.name, b.name);
            assert_eq!(a.values, b.values);
            let texts = |t: &crate::Tunable| {
                t.constraints
                    .iter()
                    .map(|c| c.text().to_string())
                    .collect::<Vec<_>>()
            };
            assert_eq!(texts(a), texts(b));
        }
    }
}
