//! The tools' inputs: typed structs whose JSON schemas the server publishes, read strictly
//! (an unknown field is refused) and checked; a bad field is an `invalid_params` error that
//! names it (`data.field` holds its path).

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::borrow::Cow;

/// A field that failed a check: its path and what is expected.
#[derive(Debug)]
pub(crate) struct FieldError {
    /// The field's path (`judge.seeds`, `candidates[1].source`).
    pub field: String,
    /// What is wrong or expected.
    pub message: String,
}

impl FieldError {
    /// An error about `field`.
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The MCP error for it.
    pub(crate) fn into_mcp(self) -> ErrorData {
        ErrorData::invalid_params(
            format!("invalid field `{}`: {}", self.field, self.message),
            Some(serde_json::json!({"field": self.field, "message": self.message})),
        )
    }
}

/// Checks a tool input beyond its types (ranges, one-of fields, names).
pub(crate) trait Check {
    /// The first field that is wrong, if any.
    fn check(&self) -> Result<(), FieldError>;
}

/// A tool's arguments, read and checked. Named `Parameters` so that rmcp's `#[tool]` macro
/// publishes `T`'s schema as the tool's input schema, as it does for its own wrapper.
pub(crate) struct Parameters<T>(pub T);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned + Check> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, ErrorData> {
        let args = context.arguments.take().unwrap_or_default();
        parse(serde_json::Value::Object(args)).map(Parameters)
    }
}

/// `value` read as `T` and checked; the error names the field.
pub(crate) fn parse<T: DeserializeOwned + Check>(value: serde_json::Value) -> Result<T, ErrorData> {
    let t: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing or unknown field in its message; the path is where it was.
        let field = match path.as_str() {
            "." => field_in(&inner).unwrap_or_else(|| "(arguments)".into()),
            p => p.to_string(),
        };
        FieldError::new(field, inner).into_mcp()
    })?;
    t.check().map_err(FieldError::into_mcp)?;
    Ok(t)
}

/// The field a serde message names in backquotes (`missing field `task``).
fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// Judge settings, as `ksmith eval`'s flags (every one optional).
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JudgeSettings {
    /// Wall-clock limit per candidate call, in seconds (0.1 to 86400; default 30).
    pub timeout_s: Option<f64>,
    /// Seeds per workload in the full check (3 to 100; default 3).
    pub seeds: Option<u64>,
    /// Draw fresh random seeds instead of the fixed ones (default false).
    pub fresh_seeds: Option<bool>,
    /// Check correctness only, skip timing (default false).
    pub no_timing: Option<bool>,
    /// Minimum timed milliseconds per side per workload (1 to 600000; default 100).
    pub min_time_ms: Option<u64>,
}

impl JudgeSettings {
    /// Checks the ranges `ksmith eval` enforces; `at` is the path of this object.
    fn check_at(&self, at: &str) -> Result<(), FieldError> {
        if let Some(t) = self.timeout_s {
            if !(t.is_finite() && (0.1..=86_400.0).contains(&t)) {
                return Err(FieldError::new(
                    format!("{at}.timeout_s"),
                    "expected a number of seconds from 0.1 to 86400",
                ));
            }
        }
        if let Some(s) = self.seeds {
            if !(3..=100).contains(&s) {
                return Err(FieldError::new(
                    format!("{at}.seeds"),
                    "expected 3 to 100 seeds",
                ));
            }
        }
        if let Some(m) = self.min_time_ms {
            if !(1..=600_000).contains(&m) {
                return Err(FieldError::new(
                    format!("{at}.min_time_ms"),
                    "expected 1 to 600000 milliseconds",
                ));
            }
        }
        Ok(())
    }

    /// The CLI's judge options with these settings over the defaults of `ksmith eval`.
    pub(crate) fn opts(&self) -> crate::JudgeOpts {
        let mut o = crate::default_opts();
        o.no_timing = self.no_timing.unwrap_or(false);
        if let Some(t) = self.timeout_s {
            o.timeout = t;
        }
        if let Some(s) = self.seeds {
            o.seeds = s;
        }
        o.fresh_seeds = self.fresh_seeds.unwrap_or(false);
        if let Some(m) = self.min_time_ms {
            o.min_time_ms = m;
        }
        o
    }
}

/// The judge settings of an input, checked at `judge`.
fn check_judge(j: &Option<JudgeSettings>) -> Result<(), FieldError> {
    j.as_ref().map_or(Ok(()), |j| j.check_at("judge"))
}

/// A path on the server's machine: not empty, no NUL.
fn check_path(field: &str, p: &str) -> Result<(), FieldError> {
    if p.trim().is_empty() || p.contains('\0') {
        return Err(FieldError::new(field, "expected a path"));
    }
    Ok(())
}

/// Most bytes of candidate source text accepted in one field.
pub(crate) const MAX_SOURCE_BYTES: usize = 1 << 20;

/// A candidate: a path on this machine, or its source text (exactly one).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Candidate {
    /// A solution directory (with solution.toml, or one kernel source) or a source file.
    pub path: Option<String>,
    /// The candidate's source text (at most 1 MiB); judged as untrusted, like any candidate.
    pub source: Option<String>,
    /// The file name `source` is judged as; its extension picks the language (.c, .cu, .py).
    /// Default kernel.c.
    pub file_name: Option<String>,
}

impl Candidate {
    /// Checks it, `at` being its path in the input ("" at the top level).
    fn check_at(&self, at: &str) -> Result<(), FieldError> {
        let f = |n: &str| format!("{at}{n}");
        match (&self.path, &self.source) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    f("source"),
                    "give either `path` or `source`, not both",
                ))
            }
            (None, None) => {
                return Err(FieldError::new(
                    f("path"),
                    "give the candidate as `path` (on this machine) or `source` (its text)",
                ))
            }
            (Some(p), None) => {
                check_path(&f("path"), p)?;
                if self.file_name.is_some() {
                    return Err(FieldError::new(
                        f("file_name"),
                        "names the file of `source`; a `path` has its own name",
                    ));
                }
            }
            (None, Some(s)) => {
                if s.len() > MAX_SOURCE_BYTES {
                    return Err(FieldError::new(f("source"), "longer than 1 MiB"));
                }
                if s.contains('\0') {
                    return Err(FieldError::new(f("source"), "contains a NUL byte"));
                }
            }
        }
        if let Some(n) = &self.file_name {
            if !safe_file_name(n) {
                return Err(FieldError::new(
                    f("file_name"),
                    "expected a plain file name (letters, digits, `_`, `-`, one `.` before a .c, .cu or .py extension)",
                ));
            }
        }
        Ok(())
    }
}

/// A plain kernel file name: `stem.ext` with ext c, cu or py, no directories.
fn safe_file_name(n: &str) -> bool {
    let Some((stem, ext)) = n.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && stem.len() <= 64
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && matches!(ext, "c" | "cu" | "py")
}

/// `validate`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateInput {
    /// A task directory (with task.toml) or a suite directory.
    pub path: String,
    /// Static checks only: do not run the reference (default false).
    pub no_run: Option<bool>,
}

impl Check for ValidateInput {
    fn check(&self) -> Result<(), FieldError> {
        check_path("path", &self.path)
    }
}

/// `evaluate`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EvaluateInput {
    /// The task directory (with task.toml).
    pub task: String,
    /// A solution directory or source file on this machine (or give `source`).
    pub path: Option<String>,
    /// The candidate's source text (or give `path`); judged as untrusted.
    pub source: Option<String>,
    /// The file name `source` is judged as (.c, .cu or .py; default kernel.c).
    pub file_name: Option<String>,
    /// Judge again even when the same code was judged with the same settings on this machine
    /// (default false: the stored verdict is returned, marked `reused`).
    pub again: Option<bool>,
    /// Judge settings.
    pub judge: Option<JudgeSettings>,
}

impl EvaluateInput {
    /// The candidate it names.
    pub(crate) fn candidate(&self) -> Candidate {
        Candidate {
            path: self.path.clone(),
            source: self.source.clone(),
            file_name: self.file_name.clone(),
        }
    }
}

impl Check for EvaluateInput {
    fn check(&self) -> Result<(), FieldError> {
        check_path("task", &self.task)?;
        self.candidate().check_at("")?;
        check_judge(&self.judge)
    }
}

/// `compare`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareInput {
    /// The task directory.
    pub task: String,
    /// Two to eight candidates, timed side by side (same rounds, same baseline calls) and
    /// each compared with the first.
    pub candidates: Vec<Candidate>,
    /// Judge settings.
    pub judge: Option<JudgeSettings>,
}

impl Check for CompareInput {
    fn check(&self) -> Result<(), FieldError> {
        check_path("task", &self.task)?;
        if !(2..=8).contains(&self.candidates.len()) {
            return Err(FieldError::new("candidates", "expected 2 to 8 candidates"));
        }
        for (i, c) in self.candidates.iter().enumerate() {
            c.check_at(&format!("candidates[{i}]."))?;
        }
        check_judge(&self.judge)
    }
}

/// The tuner's strategies.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TuneStrategy {
    /// Every configuration.
    Exhaustive,
    /// Random sampling.
    Random,
    /// Hill climbing (the default).
    Hillclimb,
    /// A genetic algorithm.
    Genetic,
}

impl TuneStrategy {
    /// The CLI's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TuneStrategy::Exhaustive => "exhaustive",
            TuneStrategy::Random => "random",
            TuneStrategy::Hillclimb => "hillclimb",
            TuneStrategy::Genetic => "genetic",
        }
    }
}

/// `tune`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TuneInput {
    /// The task directory.
    pub task: String,
    /// The solution directory whose solution.toml declares the tunables.
    pub solution: String,
    /// Search strategy (default hillclimb).
    pub strategy: Option<TuneStrategy>,
    /// Most configurations to evaluate (1 to 100000; default 20).
    pub budget: Option<usize>,
    /// Stop searching after this many seconds (1 to 604800).
    pub time_budget_s: Option<u64>,
    /// Seed for the random strategies (default 1).
    pub seed: Option<u64>,
    /// Time every configuration in full, no successive elimination (default false).
    pub no_race: Option<bool>,
    /// Leading configurations re-timed once more with the untuned solution (0 to 50; default 3).
    pub confirm: Option<usize>,
    /// Where to write the tuned solution (default STORE/tuned/TASK/SOLUTION-tuned).
    pub out: Option<String>,
    /// Judge settings.
    pub judge: Option<JudgeSettings>,
}

impl Check for TuneInput {
    fn check(&self) -> Result<(), FieldError> {
        check_path("task", &self.task)?;
        check_path("solution", &self.solution)?;
        if let Some(b) = self.budget {
            if !(1..=100_000).contains(&b) {
                return Err(FieldError::new("budget", "expected 1 to 100000"));
            }
        }
        if let Some(t) = self.time_budget_s {
            if !(1..=604_800).contains(&t) {
                return Err(FieldError::new("time_budget_s", "expected 1 to 604800"));
            }
        }
        if let Some(c) = self.confirm {
            if c > 50 {
                return Err(FieldError::new("confirm", "expected 0 to 50"));
            }
        }
        if let Some(o) = &self.out {
            check_path("out", o)?;
        }
        check_judge(&self.judge)
    }
}

/// Limits of a run, as `optimize`'s and `resume`'s budget flags.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunLimits {
    /// Agent loop: optimization iterations (0 to 1000; default 3).
    pub iterations: Option<u32>,
    /// Most LLM calls (at least 1).
    pub max_calls: Option<u64>,
    /// Most tokens, in + out (at least 1).
    pub max_tokens: Option<u64>,
    /// Most USD spent.
    pub max_cost: Option<f64>,
    /// Most wall seconds of running.
    pub max_wall_s: Option<f64>,
    /// Search: most nodes (1 to 100000; default 20 when no other limit is given).
    pub max_nodes: Option<u64>,
    /// Search: most evaluations by the judge (at least 1).
    pub max_evals: Option<u64>,
}

impl RunLimits {
    /// Checks the ranges the CLI enforces.
    fn check_at(&self, at: &str) -> Result<(), FieldError> {
        let f = |n: &str| format!("{at}{n}");
        if self.iterations.is_some_and(|n| n > 1000) {
            return Err(FieldError::new(f("iterations"), "expected 0 to 1000"));
        }
        for (name, v) in [
            ("max_calls", self.max_calls),
            ("max_tokens", self.max_tokens),
            ("max_evals", self.max_evals),
        ] {
            if v == Some(0) {
                return Err(FieldError::new(f(name), "expected at least 1"));
            }
        }
        if self.max_nodes.is_some_and(|n| !(1..=100_000).contains(&n)) {
            return Err(FieldError::new(f("max_nodes"), "expected 1 to 100000"));
        }
        for (name, v) in [("max_cost", self.max_cost), ("max_wall_s", self.max_wall_s)] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(FieldError::new(f(name), "expected a number above 0"));
            }
        }
        Ok(())
    }

    /// The CLI flags for these limits; `search` says whether the search-only ones apply.
    pub(crate) fn flags(&self, search: bool) -> Vec<String> {
        let mut a = Vec::new();
        let mut push = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(flag.to_string());
                a.push(v);
            }
        };
        push("--iterations", self.iterations.map(|v| v.to_string()));
        push("--max-calls", self.max_calls.map(|v| v.to_string()));
        push("--max-tokens", self.max_tokens.map(|v| v.to_string()));
        push("--max-cost", self.max_cost.map(|v| v.to_string()));
        push("--max-wall", self.max_wall_s.map(|v| v.to_string()));
        if search {
            push("--max-nodes", self.max_nodes.map(|v| v.to_string()));
            push("--max-evals", self.max_evals.map(|v| v.to_string()));
        }
        a
    }
}

/// `optimize_start`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OptimizeInput {
    /// The task directory.
    pub task: String,
    /// The model, `provider:model` as `ksmith optimize --model` takes it (gemini:, anthropic:,
    /// openai:, ..., command:SHELL-COMMAND, scripted:FILE, sim:POOL.json).
    pub model: String,
    /// A graph search strategy; without one, the serial agent loop runs.
    pub strategy: Option<ksmith_search::StrategyKind>,
    /// The solution to start from (default the task's seed, naive or fast solution).
    pub from: Option<String>,
    /// Where the winner is written (default STORE/optimized/TASK).
    pub out: Option<String>,
    /// Search: node expansions in flight at once (1 to 64; default 1).
    pub jobs: Option<u32>,
    /// Fix attempts per failing stage (0 to 20; default 3).
    pub fix_attempts: Option<u32>,
    /// Configurations the autotune stage may measure per kept candidate (0: no autotuning;
    /// default 8).
    pub tune_budget: Option<usize>,
    /// Profile each kept candidate and have the profile analyst summarize it (default true).
    pub profile: Option<bool>,
    /// Seed of the search's random choices (default 1).
    pub seed: Option<u64>,
    /// Limits of the run.
    pub limits: Option<RunLimits>,
    /// Judge settings frozen with the run (timeout_s, seeds, min_time_ms).
    pub judge: Option<JudgeSettings>,
    /// Seconds to wait for the run, sending its events as progress notifications, before
    /// answering (0 to 600; default 0: answer once it has started).
    pub wait_s: Option<u64>,
}

impl Check for OptimizeInput {
    fn check(&self) -> Result<(), FieldError> {
        check_path("task", &self.task)?;
        if self.model.trim().is_empty() || !self.model.contains(':') {
            return Err(FieldError::new(
                "model",
                "expected provider:model (e.g. anthropic:claude-sonnet-4-5, scripted:FILE, sim:POOL.json)",
            ));
        }
        for (name, v) in [("from", &self.from), ("out", &self.out)] {
            if let Some(p) = v {
                check_path(name, p)?;
            }
        }
        if self.jobs.is_some_and(|j| !(1..=64).contains(&j)) {
            return Err(FieldError::new("jobs", "expected 1 to 64"));
        }
        if self.jobs.is_some() && self.strategy.is_none() {
            return Err(FieldError::new(
                "jobs",
                "applies to a graph search; give a `strategy`",
            ));
        }
        if self.fix_attempts.is_some_and(|j| j > 20) {
            return Err(FieldError::new("fix_attempts", "expected 0 to 20"));
        }
        if let Some(b) = self.tune_budget {
            crate::parse_tune_budget(&b.to_string())
                .map_err(|e| FieldError::new("tune_budget", e))?;
        }
        if let Some(l) = &self.limits {
            l.check_at("limits.")?;
            if self.strategy.is_none() && (l.max_nodes.is_some() || l.max_evals.is_some()) {
                return Err(FieldError::new(
                    if l.max_nodes.is_some() {
                        "limits.max_nodes"
                    } else {
                        "limits.max_evals"
                    },
                    "applies to a graph search; give a `strategy`",
                ));
            }
            if self.strategy.is_some() && l.iterations.is_some() {
                return Err(FieldError::new(
                    "limits.iterations",
                    "counts agent-loop iterations; a search takes max_nodes, max_calls, max_evals, max_tokens, max_cost or max_wall_s",
                ));
            }
        }
        check_judge(&self.judge)?;
        check_wait(self.wait_s)
    }
}

/// A wait of 0 to 600 seconds.
fn check_wait(w: Option<u64>) -> Result<(), FieldError> {
    if w.is_some_and(|w| w > 600) {
        return Err(FieldError::new("wait_s", "expected 0 to 600 seconds"));
    }
    Ok(())
}

/// A run id as `ksmith runs` lists it.
fn check_run(id: &str) -> Result<(), FieldError> {
    if !super::runs::valid_run_id(id) {
        return Err(FieldError::new(
            "run",
            "expected a run id (run-..., as `runs` lists them)",
        ));
    }
    Ok(())
}

/// `run_resume`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeInput {
    /// The run id.
    pub run: String,
    /// Raised or new limits for the rest of the run (iterations, max_calls, max_tokens,
    /// max_cost, max_wall_s).
    pub limits: Option<RunLimits>,
    /// Seconds to wait for the run, sending its events as progress notifications (0 to 600).
    pub wait_s: Option<u64>,
}

impl Check for ResumeInput {
    fn check(&self) -> Result<(), FieldError> {
        check_run(&self.run)?;
        if let Some(l) = &self.limits {
            l.check_at("limits.")?;
            if l.max_nodes.is_some() || l.max_evals.is_some() {
                return Err(FieldError::new(
                    "limits.max_nodes",
                    "`ksmith resume` raises max_calls, max_tokens, max_cost, max_wall_s or iterations",
                ));
            }
        }
        check_wait(self.wait_s)
    }
}

/// `run_status`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusInput {
    /// The run id.
    pub run: String,
    /// Seconds to wait for the run to end, sending its events as progress notifications
    /// (0 to 600; default 0: answer at once).
    pub wait_s: Option<u64>,
    /// The first event to return (`next_event` of the previous answer; default 0).
    pub since: Option<u64>,
}

impl Check for StatusInput {
    fn check(&self) -> Result<(), FieldError> {
        check_run(&self.run)?;
        check_wait(self.wait_s)
    }
}

/// `run_stop`'s and `report`'s input: a run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunInput {
    /// The run id.
    pub run: String,
}

impl Check for RunInput {
    fn check(&self) -> Result<(), FieldError> {
        check_run(&self.run)
    }
}

/// `report`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportInput {
    /// The run id.
    pub run: String,
    /// Where to write the page (default STORE/reports/RUN.html).
    pub out: Option<String>,
}

impl Check for ReportInput {
    fn check(&self) -> Result<(), FieldError> {
        check_run(&self.run)?;
        match &self.out {
            Some(o) => check_path("out", o),
            None => Ok(()),
        }
    }
}

/// `runs`'s input (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoInput {}

impl Check for NoInput {
    fn check(&self) -> Result<(), FieldError> {
        Ok(())
    }
}

/// `evals`'s input: filters, as `ksmith evals` takes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EvalsInput {
    /// Only evaluations of this task (its name).
    pub task: Option<String>,
    /// Only evaluations of this solution (its name).
    pub solution: Option<String>,
    /// Only this status (PASSED, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, INCORRECT_SHAPE,
    /// INCORRECT_DTYPE, INCORRECT_NUMERICAL, POLICY_REJECTED; any case).
    pub status: Option<String>,
    /// Recorded on or after this date (YYYY-MM-DD, UTC) or RFC 3339 time.
    pub since: Option<String>,
    /// Recorded on or before this date or time.
    pub until: Option<String>,
    /// At most this many, newest first (0: all; default 50).
    pub limit: Option<usize>,
}

impl Check for EvalsInput {
    fn check(&self) -> Result<(), FieldError> {
        match &self.status {
            Some(s) => crate::results::parse_status(s)
                .map(|_| ())
                .map_err(|m| FieldError::new("status", m)),
            None => Ok(()),
        }
    }
}

/// `show`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShowInput {
    /// An evaluation id (a number) or a run id (run-...).
    pub id: String,
}

impl Check for ShowInput {
    fn check(&self) -> Result<(), FieldError> {
        if self.id.parse::<i64>().is_ok() {
            return Ok(());
        }
        check_run(&self.id).map_err(|_| {
            FieldError::new(
                "id",
                "expected an evaluation id (a number) or a run id (run-...)",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<T: DeserializeOwned + Check + std::fmt::Debug>(v: serde_json::Value) -> String {
        let e = parse::<T>(v).unwrap_err();
        e.data.unwrap()["field"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        // Wrong type deep inside.
        assert_eq!(
            err::<EvaluateInput>(
                serde_json::json!({"task": "t", "path": "p", "judge": {"seeds": "three"}})
            ),
            "judge.seeds"
        );
        // Missing.
        assert_eq!(
            err::<EvaluateInput>(serde_json::json!({"path": "p"})),
            "task"
        );
        // Unknown.
        assert_eq!(
            err::<EvaluateInput>(serde_json::json!({"task": "t", "path": "p", "speed": 1})),
            "speed"
        );
        // Out of range.
        assert_eq!(
            err::<EvaluateInput>(
                serde_json::json!({"task": "t", "path": "p", "judge": {"seeds": 1}})
            ),
            "judge.seeds"
        );
        // One of two.
        assert_eq!(
            err::<CompareInput>(serde_json::json!({"task": "t", "candidates": [
                {"path": "a"}, {"path": "b", "source": "int x;"}]})),
            "candidates[1].source"
        );
        assert_eq!(
            err::<EvaluateInput>(
                serde_json::json!({"task": "t", "source": "x", "file_name": "../k.c"})
            ),
            "file_name"
        );
    }

    #[test]
    fn file_names_are_plain_kernel_names() {
        for ok in ["kernel.c", "k-1_x.cu", "a.py"] {
            assert!(safe_file_name(ok), "{ok}");
        }
        for bad in ["", ".c", "k", "k.sh", "../k.c", "a/b.c", "a.b.c", "k .c"] {
            assert!(!safe_file_name(bad), "{bad}");
        }
    }
}
