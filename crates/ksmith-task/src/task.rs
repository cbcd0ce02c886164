//! The task definition (`task.toml`) and its static checks.

use crate::{content_hash, DType, Formula, Problem, Problems};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// Kind of operator, used for grouping in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    /// Elementwise maps.
    Elementwise,
    /// Reductions.
    Reduction,
    /// Normalizations (softmax, norms).
    Normalization,
    /// Matrix multiplications.
    Matmul,
    /// Attention variants.
    Attention,
    /// Convolutions.
    Convolution,
    /// Scans and recurrences.
    Scan,
    /// Mixture of experts.
    Moe,
    /// Fused operator chains.
    Fused,
    /// Anything else.
    Other,
}

impl OpClass {
    const NAMES: [(&'static str, OpClass); 10] = [
        ("elementwise", OpClass::Elementwise),
        ("reduction", OpClass::Reduction),
        ("normalization", OpClass::Normalization),
        ("matmul", OpClass::Matmul),
        ("attention", OpClass::Attention),
        ("convolution", OpClass::Convolution),
        ("scan", OpClass::Scan),
        ("moe", OpClass::Moe),
        ("fused", OpClass::Fused),
        ("other", OpClass::Other),
    ];

    /// Every class, in the documented order.
    pub const ALL: [OpClass; 10] = [
        OpClass::Elementwise,
        OpClass::Reduction,
        OpClass::Normalization,
        OpClass::Matmul,
        OpClass::Attention,
        OpClass::Convolution,
        OpClass::Scan,
        OpClass::Moe,
        OpClass::Fused,
        OpClass::Other,
    ];

    /// The spelling task.toml's `op_class` uses.
    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, c)| *c == self)
            .map(|(n, _)| *n)
            .unwrap_or("other")
    }

    /// The class a spelling names.
    pub fn from_name(s: &str) -> Option<OpClass> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, c)| *c)
    }
}

/// Whether an axis is fixed by the definition or set per workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AxisKind {
    /// Fixed value.
    Const {
        /// The value.
        value: i64,
    },
    /// Set by each workload.
    Var,
}

/// A named dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Axis {
    /// Axis name.
    pub name: String,
    /// Const or var.
    #[serde(flatten)]
    pub kind: AxisKind,
}

/// An input or output tensor (shape `[]` is a scalar).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorSpec {
    /// Name.
    pub name: String,
    /// Axis names, outermost first.
    pub shape: Vec<String>,
    /// Element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// Whether this is a scalar passed by value.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// Concrete shape for the given axis values.
    pub fn dims(&self, axes: &BTreeMap<String, i64>) -> Vec<i64> {
        self.shape
            .iter()
            .map(|a| axes.get(a).copied().unwrap_or(0))
            .collect()
    }

    /// Number of elements for the given axis values.
    pub fn numel(&self, axes: &BTreeMap<String, i64>) -> i64 {
        self.dims(axes).iter().product()
    }
}

/// An output with its tolerance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputSpec {
    /// The tensor.
    #[serde(flatten)]
    pub tensor: TensorSpec,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

/// How the values of one input are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase")]
pub enum Distribution {
    /// Gaussian.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Uniform on [low, high).
    Uniform {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// Uniform integers on [low, high).
    Integers {
        /// Lower bound (inclusive).
        low: i64,
        /// Upper bound (exclusive).
        high: i64,
    },
    /// A named function in the reference file.
    Generator {
        /// Function name.
        function: String,
    },
    /// A fixed value (scalar inputs only).
    Constant {
        /// The value.
        value: f64,
    },
}

impl std::fmt::Display for Distribution {
    /// Short form for people and prompts: `normal(0, 1)`, `uniform(-2, 2)`, `generator make_idx`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Normal { mean, std } => write!(f, "normal(mean {mean}, std {std})"),
            Distribution::Uniform { low, high } => write!(f, "uniform[{low}, {high})"),
            Distribution::Integers { low, high } => write!(f, "integers[{low}, {high})"),
            Distribution::Generator { function } => write!(f, "generator {function}"),
            Distribution::Constant { value } => write!(f, "constant {value}"),
        }
    }
}

/// One workload: values for the var axes and a distribution per input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Which machines it is for.
    pub set: WorkloadSet,
    /// Values of every axis (const axes filled in).
    pub axes: BTreeMap<String, i64>,
    /// Distribution per input, in input declaration order.
    pub inputs: Vec<(String, Distribution)>,
}

impl Workload {
    /// Its axes as `M=64 N=1000` (in name order).
    pub fn axes_text(&self) -> String {
        self.axes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Which machines a workload is for: the judge picks the set by backend and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadSet {
    /// CPU-sized shapes (the default): the C backend, and the baseline on a CPU.
    Cpu,
    /// Larger shapes for GPU backends on a GPU.
    Gpu,
    /// Small shapes that Triton's and Pallas's interpreters check on a CPU in seconds.
    Interpret,
}

impl WorkloadSet {
    /// Names accepted by `set = "..."`.
    pub const NAMES: [&'static str; 3] = ["cpu", "gpu", "interpret"];

    /// Parses a set name.
    pub fn from_name(s: &str) -> Option<WorkloadSet> {
        match s {
            "cpu" => Some(WorkloadSet::Cpu),
            "gpu" => Some(WorkloadSet::Gpu),
            "interpret" => Some(WorkloadSet::Interpret),
            _ => None,
        }
    }

    /// The name used in task.toml.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// The content hash of a task with content hash `task_hash` restricted to `set` by
/// [`Task::for_set`] (when that set is not the one in use): an evaluation's `task_hash` names the
/// set it was judged on.
pub fn set_content_hash(task_hash: &str, set: WorkloadSet) -> String {
    content_hash(format!("{task_hash}|{}", set.name()).as_bytes())
}

/// Where the reference lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferenceSpec {
    /// File name relative to the task directory.
    pub file: String,
    /// Function name.
    pub function: String,
}

/// A loaded, statically valid task.
#[derive(Debug, Clone, Serialize)]
pub struct Task {
    /// The task directory.
    pub dir: PathBuf,
    /// Identifier.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Operator class.
    pub op_class: OpClass,
    /// Axes in declaration (ABI) order.
    pub axes: Vec<Axis>,
    /// Inputs in declaration order.
    pub inputs: Vec<TensorSpec>,
    /// Outputs in declaration order.
    pub outputs: Vec<OutputSpec>,
    /// FLOP count formula.
    #[serde(serialize_with = "ser_formula")]
    pub flops: Formula,
    /// Minimum byte traffic formula.
    #[serde(serialize_with = "ser_formula")]
    pub bytes: Formula,
    /// Workloads of the set in use (after loading: the CPU set; see [`Task::for_set`]).
    pub workloads: Vec<Workload>,
    /// Workloads of the other sets.
    pub other_workloads: Vec<Workload>,
    /// The reference function.
    pub reference: ReferenceSpec,
    /// blake3 of task.toml + reference file: changes whenever the tests could change.
    pub content_hash: String,
}

fn ser_formula<S: serde::Serializer>(f: &Formula, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.text())
}

/// Most elements one tensor of a workload may have (2^32: 16 GiB of float32, 32 GiB as the
/// float64 reference).
pub const MAX_TENSOR_ELEMENTS: i64 = 1 << 32;

/// File name of the task definition inside a task directory.
pub const TASK_FILE: &str = "task.toml";

/// A TOML syntax error as one line with where it is: "invalid TOML at line L, column C: ...".
pub(crate) fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(
                "invalid TOML at line {line}, column {column}: {}",
                e.message()
            )
        }
        None => format!("invalid TOML: {}", e.message()),
    }
}

impl Task {
    /// Loads `dir/task.toml`, collecting every problem found.
    pub fn load(dir: &Path) -> Result<Task, Problems> {
        // Absolute, so the harness (which runs elsewhere) finds the reference.
        let dir = &std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let file = dir.join(TASK_FILE);
        let whole = |at: &Path, msg: String| Problems(vec![Problem::new(at, "-", msg)]);
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(whole(
                dir,
                "no such task directory (a task is a directory holding task.toml and reference.py)"
                    .into(),
            )),
            Ok(m) if !m.is_dir() => {
                return Err(whole(
                    dir,
                    "not a directory (a task is a directory holding task.toml and reference.py)"
                        .into(),
                ))
            }
            _ => {}
        }
        if !file.exists() {
            // A suite given where a task is expected is the likely mistake.
            let holds_tasks = std::fs::read_dir(dir)
                .is_ok_and(|rd| rd.flatten().any(|e| e.path().join(TASK_FILE).is_file()));
            let hint = if holds_tasks {
                "; this directory holds tasks (a suite): give one of them, or a command that takes a suite (bench, validate)"
            } else {
                "; a task directory holds task.toml and reference.py"
            };
            return Err(whole(&file, format!("missing{hint}")));
        }
        let text = std::fs::read_to_string(&file)
            .map_err(|e| whole(&file, format!("cannot read: {e}")))?;
        let table: Table = text.parse().map_err(|e: toml::de::Error| {
            Problems(vec![Problem::new(&file, "-", toml_error(&text, &e))])
        })?;
        let mut r = Reader {
            file: file.clone(),
            problems: Vec::new(),
            broken_axes: Vec::new(),
        };
        let task = r.task(dir, &table, &text);
        match task {
            Some(t) if r.problems.is_empty() => Ok(t),
            _ => Err(Problems(r.problems)),
        }
    }

    /// The task restricted to one workload set (None if it declares no workload of that set).
    /// Its content hash differs per set, so references and stored results never mix.
    pub fn for_set(&self, set: WorkloadSet) -> Option<Task> {
        let current = self.workloads.first().map(|w| w.set);
        if current == Some(set) {
            return Some(self.clone());
        }
        let all = self.workloads.iter().chain(&self.other_workloads);
        let (mine, others): (Vec<Workload>, Vec<Workload>) =
            all.cloned().partition(|w| w.set == set);
        if mine.is_empty() {
            return None;
        }
        let mut t = self.clone();
        t.workloads = mine;
        t.other_workloads = others;
        t.content_hash = set_content_hash(&self.content_hash, set);
        Some(t)
    }

    /// Workloads the task does not declare, to check that a kernel generalizes beyond the shapes
    /// it was shown: declared workloads (of the set in use) with every var axis moved to an
    /// awkward nearby value: just above, just below, and about two thirds (odd). Deterministic
    /// in `seed`; never a declared shape; the caller checks that the reference accepts them.
    pub fn held_out_workloads(&self, seed: u64) -> Vec<Workload> {
        let var: Vec<&str> = self
            .axes
            .iter()
            .filter(|a| a.kind == AxisKind::Var)
            .map(|a| a.name.as_str())
            .collect();
        if var.is_empty() || self.workloads.is_empty() {
            return Vec::new();
        }
        // splitmix64: a small, good stream from the seed.
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut out: Vec<Workload> = Vec::new();
        for variant in 0..3 {
            let base = &self.workloads[(next() % self.workloads.len() as u64) as usize];
            let mut axes = base.axes.clone();
            for a in &var {
                let Some(&v) = axes.get(*a) else { continue };
                let step = 1 + (next() % 3) as i64;
                let moved = match variant {
                    0 => v + step,
                    1 => (v - step).max(1),
                    _ => {
                        let t = (v * 2 / 3).max(1);
                        if t % 2 == 0 {
                            t + 1
                        } else {
                            t
                        }
                    }
                };
                axes.insert(a.to_string(), moved);
            }
            let known = self
                .workloads
                .iter()
                .chain(&self.other_workloads)
                .chain(&out)
                .any(|w| w.axes == axes);
            if !known {
                out.push(Workload {
                    set: base.set,
                    axes,
                    inputs: base.inputs.clone(),
                });
            }
        }
        out
    }

    /// Why `w` is not a held-out shape of this task, if it is not: one of the task's workload
    /// sets, every axis named (const axes at their value), var axes from 1 to a little past
    /// twice the largest declared value (what [`held_out_workloads`](Self::held_out_workloads)
    /// makes, with room), and the input distributions of a declared workload of that set. A
    /// workload that arrives from elsewhere (a cluster request) is checked with this before it
    /// is judged.
    pub fn held_out_problem(&self, w: &Workload) -> Option<String> {
        let declared: Vec<&Workload> = self
            .workloads
            .iter()
            .chain(&self.other_workloads)
            .filter(|d| d.set == w.set)
            .collect();
        if declared.is_empty() {
            return Some(format!(
                "workload set `{}` is not one the task declares",
                w.set.name()
            ));
        }
        if w.axes.len() != self.axes.len() {
            return Some(format!(
                "{} axis values for the task's {} axes",
                w.axes.len(),
                self.axes.len()
            ));
        }
        for a in &self.axes {
            let Some(&v) = w.axes.get(&a.name) else {
                return Some(format!("axis `{}` has no value", a.name));
            };
            match a.kind {
                AxisKind::Const { value } if v != value => {
                    return Some(format!("const axis `{}` is {v}, not {value}", a.name));
                }
                AxisKind::Const { .. } => {}
                AxisKind::Var => {
                    let most = declared
                        .iter()
                        .filter_map(|d| d.axes.get(&a.name))
                        .max()
                        .copied()
                        .unwrap_or(1);
                    let limit = most.saturating_mul(2).saturating_add(8);
                    if !(1..=limit).contains(&v) {
                        return Some(format!(
                            "axis `{}` = {v} is outside 1..={limit} (near the declared shapes)",
                            a.name
                        ));
                    }
                }
            }
        }
        if !declared.iter().any(|d| d.inputs == w.inputs) {
            return Some("its input distributions are not those of a declared workload".into());
        }
        None
    }

    /// This task with other workloads (held-out shapes): its own content hash, over the whole
    /// workloads (shapes and input distributions), so references and stored results never mix
    /// with the task's or with other workloads'.
    pub fn with_workloads(&self, workloads: Vec<Workload>, tag: &str) -> Task {
        let mut t = self.clone();
        t.content_hash = content_hash(
            format!(
                "{}|{tag}|{}",
                self.content_hash,
                serde_json::to_string(&workloads).unwrap_or_default()
            )
            .as_bytes(),
        );
        t.workloads = workloads;
        t.other_workloads = Vec::new();
        t
    }

    /// Every workload set the task declares, CPU first.
    pub fn sets(&self) -> Vec<WorkloadSet> {
        let mut v: Vec<WorkloadSet> = self
            .workloads
            .iter()
            .chain(&self.other_workloads)
            .map(|w| w.set)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The smallest workload by total input+output elements (used for the quick check).
    pub fn smallest_workload(&self) -> usize {
        (0..self.workloads.len())
            .min_by_key(|&i| self.workload_elements(i))
            .unwrap_or(0)
    }

    fn workload_elements(&self, i: usize) -> i64 {
        let axes = &self.workloads[i].axes;
        self.inputs.iter().map(|t| t.numel(axes)).sum::<i64>()
            + self
                .outputs
                .iter()
                .map(|o| o.tensor.numel(axes))
                .sum::<i64>()
    }

    /// FLOPs of workload `i`.
    pub fn flops_of(&self, i: usize) -> f64 {
        self.flops.eval_f64(&self.workloads[i].axes).unwrap_or(0.0)
    }

    /// Minimum bytes moved by workload `i`.
    pub fn bytes_of(&self, i: usize) -> f64 {
        self.bytes.eval_f64(&self.workloads[i].axes).unwrap_or(0.0)
    }

    /// Path of the reference file.
    pub fn reference_path(&self) -> PathBuf {
        self.dir.join(&self.reference.file)
    }
}

/// Collects problems while walking the TOML tree.
struct Reader {
    file: PathBuf,
    problems: Vec<Problem>,
    /// Axes declared under names that are fine but with a broken spec (reported once): the
    /// shapes, formulas and workloads that use them are not reported again.
    broken_axes: Vec<String>,
}

impl Reader {
    fn err(&mut self, field: impl Into<String>, msg: impl Into<String>) {
        self.problems.push(Problem::new(&self.file, field, msg));
    }

    fn unknown_keys(&mut self, t: &Table, prefix: &str, allowed: &[&str]) {
        for k in t.keys() {
            if !allowed.contains(&k.as_str()) {
                self.err(
                    join(prefix, k),
                    match crate::suggest::closest(k, allowed.iter().copied()) {
                        Some(near) => format!(
                            "unknown field: did you mean `{near}`? (expected one of: {})",
                            allowed.join(", ")
                        ),
                        None => format!("unknown field (expected one of: {})", allowed.join(", ")),
                    },
                );
            }
        }
    }

    fn str_field(&mut self, t: &Table, prefix: &str, key: &str, required: bool) -> Option<String> {
        match t.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                self.err(
                    join(prefix, key),
                    format!("expected a string, found {}", other.type_str()),
                );
                None
            }
            None => {
                if required {
                    self.err(join(prefix, key), "missing required field");
                }
                None
            }
        }
    }

    fn num_field(&mut self, t: &Table, prefix: &str, key: &str) -> Option<f64> {
        match t.get(key) {
            Some(Value::Float(f)) => Some(*f),
            Some(Value::Integer(i)) => Some(*i as f64),
            Some(other) => {
                self.err(
                    join(prefix, key),
                    format!("expected a number, found {}", other.type_str()),
                );
                None
            }
            None => {
                self.err(join(prefix, key), "missing required field");
                None
            }
        }
    }

    fn int_field(&mut self, t: &Table, prefix: &str, key: &str) -> Option<i64> {
        match t.get(key) {
            Some(Value::Integer(i)) => Some(*i),
            Some(other) => {
                self.err(
                    join(prefix, key),
                    format!("expected an integer, found {}", other.type_str()),
                );
                None
            }
            None => {
                self.err(join(prefix, key), "missing required field");
                None
            }
        }
    }

    fn array_of_tables<'a>(&mut self, t: &'a Table, key: &str) -> Vec<&'a Table> {
        match t.get(key) {
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, v) in items.iter().enumerate() {
                    match v {
                        Value::Table(t) => out.push(t),
                        other => self.err(
                            format!("{key}[{i}]"),
                            format!("expected a table, found {}", other.type_str()),
                        ),
                    }
                }
                out
            }
            Some(other) => {
                self.err(
                    key,
                    format!(
                        "expected an array of tables ([[{key}]]), found {}",
                        other.type_str()
                    ),
                );
                Vec::new()
            }
            None => {
                self.err(key, "missing required field");
                Vec::new()
            }
        }
    }

    fn task(&mut self, dir: &Path, t: &Table, text: &str) -> Option<Task> {
        self.unknown_keys(
            t,
            "",
            &[
                "name",
                "description",
                "op_class",
                "axes",
                "inputs",
                "outputs",
                "flops",
                "bytes",
                "workloads",
                "reference",
            ],
        );
        let name = self.str_field(t, "", "name", true).unwrap_or_default();
        if !name.is_empty() && !is_identifier(&name) {
            self.err(
                "name",
                format!("`{name}` is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"),
            );
        }
        let description = self
            .str_field(t, "", "description", false)
            .unwrap_or_default();
        let op_class = match self.str_field(t, "", "op_class", true) {
            Some(s) => match OpClass::NAMES.iter().find(|(n, _)| *n == s) {
                Some((_, c)) => *c,
                None => {
                    let names: Vec<_> = OpClass::NAMES.iter().map(|(n, _)| *n).collect();
                    self.err(
                        "op_class",
                        format!("unknown op class {}", crate::suggest::expected(&s, &names)),
                    );
                    OpClass::Other
                }
            },
            None => OpClass::Other,
        };
        let before_axes = self.problems.len();
        let axes = self.axes(t);
        // A broken axis (a const of 0) would make every formula "evaluate to 0" as well.
        let axes_ok = self.problems.len() == before_axes;
        let axis_names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
        let broken_axes = self.broken_axes.clone();
        // Names shapes and formulas may use without a follow-on "unknown axis".
        let known: Vec<&str> = axis_names
            .iter()
            .copied()
            .chain(broken_axes.iter().map(String::as_str))
            .collect();
        let input_tables = self.array_of_tables(t, "inputs");
        // Names of inputs declared but broken (bad dtype, say): workloads that give them a
        // distribution are right to, so no follow-on "not a declared input" for them. An input
        // without a usable name could be any of them: then none is reported.
        let named: Vec<Option<&str>> = input_tables
            .iter()
            .map(|it| it.get("name").and_then(Value::as_str))
            .collect();
        let declared: Option<Vec<&str>> = named.iter().copied().collect();
        let inputs: Vec<TensorSpec> = input_tables
            .into_iter()
            .enumerate()
            .filter_map(|(i, it)| {
                self.tensor(
                    it,
                    &format!("inputs[{i}]"),
                    &known,
                    &["name", "shape", "dtype"],
                )
            })
            .collect();
        let outputs: Vec<OutputSpec> = self
            .array_of_tables(t, "outputs")
            .into_iter()
            .enumerate()
            .filter_map(|(i, ot)| self.output(ot, &format!("outputs[{i}]"), &known))
            .collect();
        // Only an empty list: outputs that failed to parse were reported already.
        if t.get("outputs")
            .and_then(Value::as_array)
            .is_some_and(|a| a.is_empty())
        {
            self.err("outputs", "a task needs at least one output");
        }
        let mut seen = BTreeMap::new();
        for (field, n) in inputs
            .iter()
            .enumerate()
            .map(|(i, x)| (format!("inputs[{i}].name"), &x.name))
            .chain(
                outputs
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (format!("outputs[{i}].name"), &o.tensor.name)),
            )
        {
            if axis_names.contains(&n.as_str()) || seen.insert(n.clone(), ()).is_some() {
                self.err(field, format!("name `{n}` is used twice (names of axes, inputs and outputs must be unique)"));
            }
        }
        for o in &outputs {
            if o.tensor.is_scalar() {
                self.err("outputs", format!("output `{}` is a scalar; outputs must be tensors (use shape [\"ONE\"] with a const axis of 1)", o.tensor.name));
            }
        }
        let flops = self.formula(t, "flops", &known);
        let bytes = self.formula(t, "bytes", &known);
        let reference = self.reference(t);
        let ref_path = dir.join(&reference.file);
        let ref_text = match std::fs::read(&ref_path) {
            Ok(b) => b,
            Err(e) => {
                self.problems.push(Problem::new(
                    &ref_path,
                    "-",
                    format!("cannot read reference file: {e}"),
                ));
                Vec::new()
            }
        };
        let workload_tables = self.array_of_tables(t, "workloads");
        let n_tables = workload_tables.len();
        let tensors: Vec<&TensorSpec> = inputs
            .iter()
            .chain(outputs.iter().map(|o| &o.tensor))
            .collect();
        let workloads: Vec<Workload> = workload_tables
            .into_iter()
            .enumerate()
            .filter_map(|(i, wt)| {
                self.workload(wt, i, &axes, &inputs, declared.as_deref(), &tensors)
            })
            .collect();
        // A broken workload was reported already; its set is not to be guessed at.
        if t.contains_key("workloads")
            && workloads.len() == n_tables
            && !workloads.iter().any(|w| w.set == WorkloadSet::Cpu)
        {
            self.err(
                "workloads",
                "a task needs at least one workload of the default set (cpu)",
            );
        }
        if let (Some(f), Some(b), true) = (&flops, &bytes, axes_ok) {
            for (i, w) in workloads.iter().enumerate() {
                for (key, formula) in [("flops", f), ("bytes", b)] {
                    match formula.eval_f64(&w.axes) {
                        Ok(v) if v > 0.0 && v.is_finite() => {}
                        Ok(v) => self.err(
                            key,
                            format!(
                                "evaluates to {v} on workloads[{i}]; must be a positive number"
                            ),
                        ),
                        Err(e) => self.err(key, e.to_string()),
                    }
                }
            }
        }
        let mut hashed = text.as_bytes().to_vec();
        hashed.extend_from_slice(&ref_text);
        let (cpu, others): (Vec<Workload>, Vec<Workload>) = workloads
            .into_iter()
            .partition(|w| w.set == WorkloadSet::Cpu);
        Some(Task {
            dir: dir.to_path_buf(),
            name,
            description,
            op_class,
            axes,
            inputs,
            outputs,
            flops: flops?,
            bytes: bytes?,
            workloads: cpu,
            other_workloads: others,
            reference,
            content_hash: content_hash(&hashed),
        })
    }

    fn axes(&mut self, t: &Table) -> Vec<Axis> {
        let Some(v) = t.get("axes") else {
            self.err("axes", "missing required field");
            return Vec::new();
        };
        let Value::Table(at) = v else {
            self.err(
                "axes",
                format!("expected a table of axes, found {}", v.type_str()),
            );
            return Vec::new();
        };
        let mut axes = Vec::new();
        for (name, spec) in at {
            let field = format!("axes.{name}");
            if !is_identifier(name) {
                self.err(&field, "axis names must be identifiers");
                continue;
            }
            let Value::Table(st) = spec else {
                self.err(
                    &field,
                    "expected { kind = \"var\" } or { kind = \"const\", value = N }",
                );
                self.broken_axes.push(name.clone());
                continue;
            };
            self.unknown_keys(st, &field, &["kind", "value"]);
            match self.str_field(st, &field, "kind", true).as_deref() {
                Some("var") => {
                    if st.contains_key("value") {
                        self.err(
                            format!("{field}.value"),
                            "a var axis takes its value from each workload",
                        );
                    }
                    axes.push(Axis {
                        name: name.clone(),
                        kind: AxisKind::Var,
                    });
                }
                Some("const") => {
                    if let Some(v) = self.int_field(st, &field, "value") {
                        if v <= 0 {
                            self.err(
                                format!("{field}.value"),
                                format!("must be positive, found {v}"),
                            );
                        }
                        axes.push(Axis {
                            name: name.clone(),
                            kind: AxisKind::Const { value: v },
                        });
                    } else {
                        self.broken_axes.push(name.clone());
                    }
                }
                Some(other) => {
                    self.err(
                        format!("{field}.kind"),
                        format!("unknown kind `{other}` (expected var or const)"),
                    );
                    self.broken_axes.push(name.clone());
                }
                None => self.broken_axes.push(name.clone()),
            }
        }
        axes
    }

    fn tensor(
        &mut self,
        t: &Table,
        prefix: &str,
        axes: &[&str],
        allowed: &[&str],
    ) -> Option<TensorSpec> {
        self.unknown_keys(t, prefix, allowed);
        let name = self.str_field(t, prefix, "name", true)?;
        if !is_identifier(&name) {
            self.err(
                format!("{prefix}.name"),
                format!("`{name}` is not a C identifier"),
            );
        }
        let shape = match t.get("shape") {
            Some(Value::Array(a)) => {
                let mut shape = Vec::new();
                for (i, d) in a.iter().enumerate() {
                    match d {
                        Value::String(s) if axes.contains(&s.as_str()) => shape.push(s.clone()),
                        Value::String(s) => self.err(
                            format!("{prefix}.shape[{i}]"),
                            format!("unknown axis `{s}`"),
                        ),
                        other => self.err(
                            format!("{prefix}.shape[{i}]"),
                            format!("expected an axis name, found {}", other.type_str()),
                        ),
                    }
                }
                shape
            }
            Some(other) => {
                self.err(
                    format!("{prefix}.shape"),
                    format!("expected a list of axis names, found {}", other.type_str()),
                );
                Vec::new()
            }
            None => {
                self.err(
                    format!("{prefix}.shape"),
                    "missing required field ([] for a scalar)",
                );
                Vec::new()
            }
        };
        let dtype = match self.str_field(t, prefix, "dtype", true)?.parse::<DType>() {
            Ok(d) => d,
            Err(e) => {
                self.err(format!("{prefix}.dtype"), e);
                return None;
            }
        };
        Some(TensorSpec { name, shape, dtype })
    }

    fn output(&mut self, t: &Table, prefix: &str, axes: &[&str]) -> Option<OutputSpec> {
        let tensor = self.tensor(t, prefix, axes, &["name", "shape", "dtype", "atol", "rtol"])?;
        let atol = self.num_field(t, prefix, "atol")?;
        let rtol = self.num_field(t, prefix, "rtol")?;
        for (k, v) in [("atol", atol), ("rtol", rtol)] {
            if !(v >= 0.0 && v.is_finite()) {
                self.err(
                    format!("{prefix}.{k}"),
                    format!("must be a finite number >= 0, found {v}"),
                );
            }
        }
        if !tensor.dtype.is_float() && (atol != 0.0 || rtol != 0.0) {
            self.err(
                prefix,
                "integer outputs are compared exactly: atol and rtol must be 0",
            );
        }
        Some(OutputSpec { tensor, atol, rtol })
    }

    fn formula(&mut self, t: &Table, key: &str, axes: &[&str]) -> Option<Formula> {
        let text = self.str_field(t, "", key, true)?;
        match Formula::parse(&text, axes) {
            Ok(f) => Some(f),
            Err(e) => {
                self.err(key, e.to_string());
                None
            }
        }
    }

    fn reference(&mut self, t: &Table) -> ReferenceSpec {
        let mut spec = ReferenceSpec {
            file: "reference.py".into(),
            function: "reference".into(),
        };
        match t.get("reference") {
            None => {}
            Some(Value::Table(rt)) => {
                self.unknown_keys(rt, "reference", &["file", "function"]);
                if let Some(f) = self.str_field(rt, "reference", "file", false) {
                    spec.file = f;
                }
                if let Some(f) = self.str_field(rt, "reference", "function", false) {
                    spec.function = f;
                }
            }
            Some(other) => self.err(
                "reference",
                format!("expected a table, found {}", other.type_str()),
            ),
        }
        if spec.file.contains("..") || Path::new(&spec.file).is_absolute() {
            self.err("reference.file", "must be a path inside the task directory");
        }
        spec
    }

    fn workload(
        &mut self,
        t: &Table,
        i: usize,
        axes: &[Axis],
        inputs: &[TensorSpec],
        declared: Option<&[&str]>,
        tensors: &[&TensorSpec],
    ) -> Option<Workload> {
        let prefix = format!("workloads[{i}]");
        let problems_before = self.problems.len();
        self.unknown_keys(t, &prefix, &["set", "axes", "inputs"]);
        let set = match t.get("set") {
            None => WorkloadSet::Cpu,
            Some(v) => match v.as_str().and_then(WorkloadSet::from_name) {
                Some(s) => s,
                None => {
                    self.err(
                        format!("{prefix}.set"),
                        match v.as_str() {
                            Some(name) => format!(
                                "unknown workload set {}",
                                crate::suggest::expected(name, &WorkloadSet::NAMES)
                            ),
                            None => format!(
                                "expected one of {}, found {v}",
                                WorkloadSet::NAMES.join(", ")
                            ),
                        },
                    );
                    WorkloadSet::Cpu
                }
            },
        };
        let empty = Table::new();
        let at = match t.get("axes") {
            Some(Value::Table(at)) => at,
            None => &empty,
            Some(other) => {
                self.err(
                    format!("{prefix}.axes"),
                    format!("expected a table, found {}", other.type_str()),
                );
                return None;
            }
        };
        let mut values = BTreeMap::new();
        for a in axes {
            let field = format!("{prefix}.axes.{}", a.name);
            match (a.kind, at.get(&a.name)) {
                (AxisKind::Const { value }, None) => {
                    values.insert(a.name.clone(), value);
                }
                (AxisKind::Const { .. }, Some(_)) => {
                    self.err(field, "const axis cannot be set by a workload")
                }
                (AxisKind::Var, None) => {
                    self.err(field, format!("missing value for var axis {}", a.name))
                }
                (AxisKind::Var, Some(Value::Integer(v))) if *v > 0 => {
                    values.insert(a.name.clone(), *v);
                }
                (AxisKind::Var, Some(v)) => {
                    self.err(field, format!("expected a positive integer, found {v}"))
                }
            }
        }
        for k in at.keys() {
            if !axes.iter().any(|a| &a.name == k) && !self.broken_axes.contains(k) {
                self.err(format!("{prefix}.axes.{k}"), "not a declared axis");
            }
        }
        if self.problems.len() == problems_before {
            self.tensor_sizes(&prefix, &values, tensors);
        }
        let it = match t.get("inputs") {
            Some(Value::Table(it)) => it,
            None => &empty,
            Some(other) => {
                self.err(
                    format!("{prefix}.inputs"),
                    format!("expected a table, found {}", other.type_str()),
                );
                return None;
            }
        };
        let mut dists = Vec::new();
        for inp in inputs {
            let field = format!("{prefix}.inputs.{}", inp.name);
            match it.get(&inp.name) {
                None => self.err(field, "missing distribution for input"),
                Some(Value::Table(dt)) => {
                    if let Some(d) = self.distribution(dt, &field, inp) {
                        dists.push((inp.name.clone(), d));
                    }
                }
                Some(other) => self.err(field, format!("expected a table like {{ dist = \"normal\", mean = 0.0, std = 1.0 }}, found {}", other.type_str())),
            }
        }
        for k in it.keys() {
            let broken = declared.is_none_or(|d| d.contains(&k.as_str()));
            if !inputs.iter().any(|x| &x.name == k) && !broken {
                self.err(format!("{prefix}.inputs.{k}"), "not a declared input");
            }
        }
        // A workload with a problem is left out, so nothing downstream (FLOP and byte
        // formulas) evaluates it and reports the same problem again in other words.
        if self.problems.len() > problems_before {
            return None;
        }
        Some(Workload {
            set,
            axes: values,
            inputs: dists,
        })
    }

    /// Refuses a workload whose tensors are too large to ever allocate (10^12 elements, say):
    /// one line at load time instead of a harness failure minutes later.
    fn tensor_sizes(
        &mut self,
        prefix: &str,
        values: &BTreeMap<String, i64>,
        tensors: &[&TensorSpec],
    ) {
        for t in tensors {
            let mut n: Option<i64> = Some(1);
            for a in &t.shape {
                n = n.and_then(|n| n.checked_mul(*values.get(a).unwrap_or(&1)));
            }
            if n.is_none_or(|n| n > MAX_TENSOR_ELEMENTS) {
                let dims: Vec<String> = t
                    .shape
                    .iter()
                    .map(|a| format!("{a}={}", values.get(a).unwrap_or(&1)))
                    .collect();
                let count = n.map_or("more than 2^63".to_string(), |n| n.to_string());
                self.err(
                    format!("{prefix}.axes"),
                    format!(
                        "tensor `{}` would have {count} elements ({}); at most {MAX_TENSOR_ELEMENTS} (2^32) per tensor",
                        t.name,
                        dims.join(" x ")
                    ),
                );
                // The other tensors share the axes: one line says it.
                return;
            }
        }
    }

    fn distribution(&mut self, t: &Table, field: &str, inp: &TensorSpec) -> Option<Distribution> {
        let dist = self.str_field(t, field, "dist", true)?;
        let d = match dist.as_str() {
            "normal" => {
                self.unknown_keys(t, field, &["dist", "mean", "std"]);
                let (mean, std) = (
                    self.num_field(t, field, "mean")?,
                    self.num_field(t, field, "std")?,
                );
                if std <= 0.0 {
                    self.err(
                        format!("{field}.std"),
                        "must be > 0 (a constant input lets constant kernels pass)",
                    );
                }
                Distribution::Normal { mean, std }
            }
            "uniform" => {
                self.unknown_keys(t, field, &["dist", "low", "high"]);
                let (low, high) = (
                    self.num_field(t, field, "low")?,
                    self.num_field(t, field, "high")?,
                );
                if high <= low {
                    self.err(
                        format!("{field}.high"),
                        format!("must be greater than low ({low})"),
                    );
                }
                Distribution::Uniform { low, high }
            }
            "integers" => {
                self.unknown_keys(t, field, &["dist", "low", "high"]);
                let (low, high) = (
                    self.int_field(t, field, "low")?,
                    self.int_field(t, field, "high")?,
                );
                if high <= low {
                    self.err(
                        format!("{field}.high"),
                        format!("must be greater than low ({low}); high is exclusive"),
                    );
                }
                Distribution::Integers { low, high }
            }
            "generator" => {
                self.unknown_keys(t, field, &["dist", "function"]);
                let function = self.str_field(t, field, "function", true)?;
                if !is_identifier(&function) {
                    self.err(
                        format!("{field}.function"),
                        "must be a Python function name",
                    );
                }
                Distribution::Generator { function }
            }
            "constant" => {
                self.unknown_keys(t, field, &["dist", "value"]);
                if !inp.is_scalar() {
                    self.err(format!("{field}.dist"), "constant is only allowed for scalar inputs (constant tensors let wrong kernels pass)");
                }
                Distribution::Constant {
                    value: self.num_field(t, field, "value")?,
                }
            }
            other => {
                self.err(format!("{field}.dist"), format!("unknown distribution `{other}` (expected normal, uniform, integers, generator, constant)"));
                return None;
            }
        };
        Some(d)
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Whether `s` is a C identifier.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_syntax_error_names_its_line_and_column() {
        let text = "name = \"x\"\nop_class = \"elementwise\" = = broken\n";
        let e = text.parse::<Table>().unwrap_err();
        let msg = toml_error(text, &e);
        assert!(
            msg.starts_with("invalid TOML at line 2, column 26: "),
            "{msg}"
        );
    }

    const GOOD: &str = r#"
name = "softmax"
op_class = "normalization"
flops = "5 * M * N"
bytes = "8 * M * N"
[axes]
M = { kind = "var" }
N = { kind = "var" }
[[inputs]]
name = "x"
shape = ["M", "N"]
dtype = "float32"
[[outputs]]
name = "y"
shape = ["M", "N"]
dtype = "float32"
atol = 1e-6
rtol = 1e-4
[[workloads]]
axes = { M = 64, N = 100 }
inputs = { x = { dist = "normal", mean = 0.0, std = 1.0 } }
"#;

    fn write(toml: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("task.toml"), toml).unwrap();
        std::fs::write(
            d.path().join("reference.py"),
            "def reference(x):\n    return x\n",
        )
        .unwrap();
        d
    }

    #[test]
    fn loads_a_good_task() {
        let d = write(GOOD);
        let t = Task::load(d.path()).unwrap();
        assert_eq!(t.axes.len(), 2);
        assert_eq!(t.axes[0].name, "M");
        assert_eq!(t.workloads[0].axes["N"], 100);
        assert_eq!(t.flops_of(0), 5.0 * 64.0 * 100.0);
    }

    #[test]
    fn a_broken_declaration_or_workload_is_reported_once_without_follow_ons() {
        let cases = [
            (
                "dtype = \"float32\"\n[[outputs]]",
                "dtype = 32\n[[outputs]]",
                "inputs[0].dtype",
            ),
            ("atol = 1e-6", "atol = \"small\"", "outputs[0].atol"),
            ("M = 64, N = 100", "M = 0, N = 100", "workloads[0].axes.M"),
            (
                "M = { kind = \"var\" }",
                "M = { kind = \"variable\" }",
                "axes.M.kind",
            ),
            (
                "M = { kind = \"var\" }",
                "M = { kind = \"const\" }",
                "axes.M.value",
            ),
            ("M = { kind = \"var\" }", "M = 3", "axes.M"),
            ("name = \"x\"", "name = 5", "inputs[0].name"),
            (
                "M = 64, N = 100",
                "M = 1000000, N = 1000000",
                "workloads[0].axes",
            ),
            (
                "M = 64, N = 100",
                "M = 4294967296, N = 4294967296",
                "workloads[0].axes",
            ),
        ];
        for (from, to, field) in cases {
            assert!(GOOD.contains(from));
            let d = write(&GOOD.replacen(from, to, 1));
            let p = Task::load(d.path()).unwrap_err().0;
            assert_eq!(p.len(), 1, "{to}: {p:?}");
            assert!(
                p[0].to_string().contains(&format!("task.toml: {field}: ")),
                "{}",
                p[0]
            );
        }
        // A const axis of 0 used by the formulas: no "flops evaluates to 0" after it.
        let d = write(
            &GOOD
                .replace(
                    "N = { kind = \"var\" }",
                    "N = { kind = \"var\" }\nK = { kind = \"const\", value = 0 }",
                )
                .replace("5 * M * N", "5 * M * N * K"),
        );
        let p = Task::load(d.path()).unwrap_err().0;
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "axes.K.value");
        // 2^32 elements is still allowed.
        let d = write(&GOOD.replacen("M = 64, N = 100", "M = 65536, N = 65536", 1));
        assert!(Task::load(d.path()).is_ok());
    }

    #[test]
    fn reports_every_problem_with_file_and_field() {
        let bad = GOOD
            .replace("dtype = \"float32\"\natol", "dtype = \"float33\"\natol")
            .replace("axes = { M = 64, N = 100 }", "axes = { M = 64 }")
            .replace("5 * M * N", "5 * M * Q")
            .replace("std = 1.0", "std = 0.0, extra = 1");
        let d = write(&bad);
        let errs = Task::load(d.path()).unwrap_err().0;
        let fields: Vec<_> = errs.iter().map(|p| p.field.as_str()).collect();
        assert!(fields.contains(&"outputs[0].dtype"), "{fields:?}");
        assert!(fields.contains(&"workloads[0].axes.N"), "{fields:?}");
        assert!(fields.contains(&"flops"), "{fields:?}");
        assert!(
            fields.contains(&"workloads[0].inputs.x.extra"),
            "{fields:?}"
        );
        assert!(errs.iter().all(|p| p.file.ends_with("task.toml")));
        let shown = errs[0].to_string();
        assert!(shown.contains("task.toml: "), "{shown}");
    }

    #[test]
    fn held_out_workloads_are_new_nearby_shapes_and_deterministic() {
        let d = write(GOOD);
        let t = Task::load(d.path()).unwrap();
        let a = t.held_out_workloads(7);
        assert_eq!(a, t.held_out_workloads(7), "deterministic in the seed");
        assert!(!a.is_empty());
        for w in &a {
            assert!(
                !t.workloads.iter().any(|d| d.axes == w.axes),
                "{:?} is declared",
                w.axes
            );
            assert!(w.axes.values().all(|&v| v >= 1));
            let near = t.workloads.iter().any(|d| {
                d.axes.iter().all(|(k, &v)| {
                    let h = w.axes[k];
                    (h - v).abs() <= 3 || (h - v * 2 / 3).abs() <= 1
                })
            });
            assert!(near, "{:?} is not near a declared shape", w.axes);
        }
        let h = t.with_workloads(a.clone(), "held-out");
        assert_ne!(h.content_hash, t.content_hash);
        assert_eq!(h.workloads, a);
        // Every held-out shape the task makes is one it accepts back (from a cluster request).
        for w in &a {
            assert_eq!(t.held_out_problem(w), None, "{w:?}");
        }
        // The hash covers the input distributions, not only the shapes: other inputs under the
        // same shapes never share references with these.
        let mut other = a.clone();
        other[0].inputs[0].1 = Distribution::Uniform {
            low: 5.0,
            high: 6.0,
        };
        assert_ne!(
            t.with_workloads(other.clone(), "held-out").content_hash,
            h.content_hash
        );
        // Workloads that are not near the task's own are refused, naming why.
        let why = t.held_out_problem(&other[0]).unwrap();
        assert!(why.contains("input distributions"), "{why}");
        let mut far = a[0].clone();
        far.axes.insert("M".into(), 1 << 40);
        assert!(t.held_out_problem(&far).unwrap().contains("outside"));
        let mut missing = a[0].clone();
        missing.axes.remove("N");
        assert!(t.held_out_problem(&missing).is_some());
        let mut extra = a[0].clone();
        extra.axes.insert("Z".into(), 3);
        assert!(t.held_out_problem(&extra).is_some());
    }

    #[test]
    fn workload_sets_split_and_each_has_its_own_hash() {
        let extra = |set: &str, m: i64| {
            format!("[[workloads]]\nset = \"{set}\"\naxes = {{ M = {m}, N = 7 }}\ninputs = {{ x = {{ dist = \"normal\", mean = 0.0, std = 1.0 }} }}\n")
        };
        let text = format!("{GOOD}{}{}", extra("gpu", 4096), extra("interpret", 3));
        let d = write(&text);
        let t = Task::load(d.path()).unwrap();
        assert_eq!(t.workloads.len(), 1, "the cpu set is the default");
        assert_eq!(
            t.sets(),
            [WorkloadSet::Cpu, WorkloadSet::Gpu, WorkloadSet::Interpret]
        );
        let g = t.for_set(WorkloadSet::Gpu).unwrap();
        assert_eq!(g.workloads.len(), 1);
        assert_eq!(g.workloads[0].axes["M"], 4096);
        assert_ne!(g.content_hash, t.content_hash);
        let i = t.for_set(WorkloadSet::Interpret).unwrap();
        assert_eq!(i.workloads[0].axes["M"], 3);
        assert_ne!(i.content_hash, g.content_hash);
        // Back to the cpu set from a derived task.
        assert_eq!(
            i.for_set(WorkloadSet::Cpu).unwrap().workloads[0].axes["M"],
            64
        );
        // A bad set name is reported; a task with only gpu workloads is refused.
        let errs = Task::load(write(&text.replace("\"interpret\"", "\"tpu\"")).path())
            .unwrap_err()
            .0;
        assert!(
            errs.iter().any(|p| p.field == "workloads[2].set"),
            "{errs:?}"
        );
        let only_gpu = text.replacen(
            "[[workloads]]\naxes",
            "[[workloads]]\nset = \"gpu\"\naxes",
            1,
        );
        let errs = Task::load(write(&only_gpu).path()).unwrap_err().0;
        assert!(
            errs.iter().any(|p| p.message.contains("default set (cpu)")),
            "{errs:?}"
        );
    }

    #[test]
    fn constant_tensor_inputs_are_rejected() {
        let d = write(&GOOD.replace(
            r#"{ dist = "normal", mean = 0.0, std = 1.0 }"#,
            r#"{ dist = "constant", value = 1.0 }"#,
        ));
        let errs = Task::load(d.path()).unwrap_err().0;
        assert!(errs
            .iter()
            .any(|p| p.message.contains("only allowed for scalar")));
    }
}
