//! Solutions: a directory with `solution.toml`, or a bare source file.

use crate::task::is_identifier;
use crate::{content_hash, Formula, Problem, Problems, Task};
use serde::Serialize;
use std::path::Path;
use toml::{Table, Value};

/// Source language of a solution (one backend each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

impl Solution {
    /// Loads a solution from a directory (with `solution.toml`) or a bare source file.
    pub fn load(path: &Path, task: &Task) -> Result<Solution, Problems> {
        if path.is_dir() {
            Self::load_dir(path, task)
        } else {
            Self::load_file(path, task)
        }
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
        let mut s = Solution {
            name: name.to_string(),
            language,
            entry_point: entry_point.to_string(),
            sources: vec![(file.to_string(), source)],
            flags,
            tunables: Vec::new(),
            content_hash: String::new(),
        };
        s.content_hash = s.compute_hash();
        s
    }

    fn load_file(path: &Path, task: &Task) -> Result<Solution, Problems> {
        let one = |msg: String| Problems(vec![Problem::new(path, "-", msg)]);
        let source = std::fs::read_to_string(path).map_err(|e| one(format!("cannot read: {e}")))?;
        let language = Language::detect(path, &source).ok_or_else(|| {
            one(
                "unknown source language (expected a .c or .cu file, a .py file importing triton or pallas, or a directory with solution.toml)"
                    .into(),
            )
        })?;
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("kernel.c")
            .to_string();
        let name = path
            .file_stem()
            .and_then(|f| f.to_str())
            .unwrap_or("solution")
            .to_string();
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
        let text =
            std::fs::read_to_string(&file).map_err(|e| one("-", format!("cannot read: {e}")))?;
        let t: Table = text
            .parse()
            .map_err(|e: toml::de::Error| one("-", format!("invalid TOML: {}", e.message())))?;
        let mut problems = Vec::new();
        let mut err = |field: &str, msg: String| problems.push(Problem::new(&file, field, msg));
        for k in t.keys() {
            if ![
                "name",
                "language",
                "entry_point",
                "sources",
                "flags",
                "tunables",
            ]
            .contains(&k.as_str())
            {
                err(k, "unknown field (expected one of: name, language, entry_point, sources, flags, tunables)".into());
            }
        }
        let get_str = |key: &str| t.get(key).and_then(Value::as_str).map(str::to_string);
        let dir_name = dir
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("solution")
            .to_string();
        let name = get_str("name").unwrap_or(dir_name);
        let language = match get_str("language") {
            Some(l) => Language::from_name(&l).unwrap_or_else(|| {
                err(
                    "language",
                    format!(
                        "unsupported language `{l}` (supported: {})",
                        LANGUAGES.join(", ")
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
        let flags = string_list("flags", &mut err);
        let mut sources = Vec::new();
        for (i, s) in source_names.iter().enumerate() {
            if s.contains("..") || Path::new(s).is_absolute() {
                err(
                    &format!("sources[{i}]"),
                    "must be a path inside the solution directory".into(),
                );
                continue;
            }
            match std::fs::read_to_string(dir.join(s)) {
                Ok(text) => sources.push((s.clone(), text)),
                Err(e) => err(
                    &format!("sources[{i}]"),
                    format!("cannot read {}: {e}", dir.join(s).display()),
                ),
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
        let mut h = format!(
            "{:?}\0{}\0{}\0",
            self.language,
            self.entry_point,
            self.flags.join("\u{1}")
        );
        for (n, s) in &self.sources {
            h.push_str(n);
            h.push('\0');
            h.push_str(s);
            h.push('\0');
        }
        content_hash(h.as_bytes())
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
    let mut out = Vec::new();
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
                match c.as_str().map(|s| Formula::parse(s, &scope)) {
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
