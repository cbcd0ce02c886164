//! The agent roles: one prompt template per role (embedded, overridable from a directory),
//! rendered from typed state with minijinja.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// The specialized agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Writes the plan for the next iteration (new or revision mode).
    Planner,
    /// Turns a plan into code.
    Implementer,
    /// Repairs build, runtime and numerical failures.
    Fixer,
    /// Declares tunables for the deterministic tuner.
    AutotunePlanner,
    /// Summarizes profiler output into a bottleneck diagnosis.
    ProfileAnalyst,
    /// Drafts a task definition from a bare reference.
    TestDesigner,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Planner,
        Role::Implementer,
        Role::Fixer,
        Role::AutotunePlanner,
        Role::ProfileAnalyst,
        Role::TestDesigner,
    ];

    /// The role's name (as stored and as the scripted provider expects).
    pub fn name(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Implementer => "implementer",
            Role::Fixer => "fixer",
            Role::AutotunePlanner => "autotune",
            Role::ProfileAnalyst => "profile",
            Role::TestDesigner => "test_designer",
        }
    }

    /// The role's template file name.
    pub fn template(self) -> String {
        format!("{}.md", self.name())
    }

    /// Reply length budget in tokens.
    pub fn max_tokens(self) -> u32 {
        match self {
            Role::Planner | Role::ProfileAnalyst | Role::AutotunePlanner => 2048,
            Role::Implementer | Role::Fixer | Role::TestDesigner => 8192,
        }
    }
}

/// The built-in templates.
const BUILTIN: [(&str, &str); 7] = [
    ("_task.md", include_str!("../prompts/_task.md")),
    ("planner.md", include_str!("../prompts/planner.md")),
    ("implementer.md", include_str!("../prompts/implementer.md")),
    ("fixer.md", include_str!("../prompts/fixer.md")),
    ("autotune.md", include_str!("../prompts/autotune.md")),
    ("profile.md", include_str!("../prompts/profile.md")),
    (
        "test_designer.md",
        include_str!("../prompts/test_designer.md"),
    ),
];

/// Separates the system part of a template from the user part.
const USER_MARK: &str = "=== user ===";

/// Template errors.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// An override file could not be read.
    #[error("prompt template {path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A template failed to parse or render.
    #[error("prompt template {name}: {detail}")]
    Template {
        /// Template name.
        name: String,
        /// What went wrong.
        detail: String,
    },
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The system instruction.
    pub system: String,
    /// The user message.
    pub user: String,
}

/// The role templates in use.
pub struct Prompts {
    env: minijinja::Environment<'static>,
}

impl Prompts {
    /// The built-in templates, with any file of the same name in `overrides` taking precedence.
    pub fn load(overrides: Option<&Path>) -> Result<Prompts, PromptError> {
        if let Some(d) = overrides.filter(|d| !d.is_dir()) {
            return Err(PromptError::Io {
                path: d.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
        env.set_trim_blocks(true);
        for (name, text) in BUILTIN {
            let text = match overrides.map(|d| d.join(name)).filter(|p| p.exists()) {
                Some(p) => std::fs::read_to_string(&p)
                    .map_err(|e| PromptError::Io { path: p, source: e })?,
                None => text.to_string(),
            };
            env.add_template_owned(name.to_string(), text)
                .map_err(|e| PromptError::Template {
                    name: name.to_string(),
                    detail: format!("{e:#}"),
                })?;
        }
        Ok(Prompts { env })
    }

    /// Renders a role's prompt from its typed context.
    pub fn render<C: Serialize>(&self, role: Role, ctx: &C) -> Result<Rendered, PromptError> {
        let name = role.template();
        let err = |e: minijinja::Error| PromptError::Template {
            name: name.clone(),
            detail: format!("{e:#}"),
        };
        let text = self
            .env
            .get_template(&name)
            .map_err(err)?
            .render(ctx)
            .map_err(err)?;
        let (system, user) = text
            .split_once(USER_MARK)
            .ok_or_else(|| PromptError::Template {
                name: name.clone(),
                detail: format!("no `{USER_MARK}` line separating the system and user parts"),
            })?;
        Ok(Rendered {
            system: system.trim().to_string(),
            user: collapse_blank_lines(user.trim()),
        })
    }
}

/// Templates with optional sections leave runs of blank lines; one is enough.
fn collapse_blank_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    for line in s.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> serde_json::Value {
        json!({"name": "softmax", "description": "Row softmax.", "language": "c", "device": "cpu",
               "signature": "void softmax(const float* x, float* y, int64_t M, int64_t N);",
               "workloads": ["M=2000 N=600", "M=64 N=32000"], "tolerance": "atol 1e-6, rtol 2e-4",
               "fence": "c"})
    }

    #[test]
    fn every_role_renders_with_minimal_state() {
        let p = Prompts::load(None).unwrap();
        for role in Role::ALL {
            let r = p
                .render(
                    role,
                    &json!({"task": task(), "mode": "new", "file": "kernel.c"}),
                )
                .unwrap();
            assert!(!r.system.is_empty(), "{role:?}");
            assert!(!r.user.contains("\n\n\n"), "{role:?}");
        }
    }

    #[test]
    fn a_search_node_planner_sees_its_hint_and_inspirations_and_a_loop_planner_neither() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::Planner,
                &json!({"task": task(), "mode": "revision",
                        "hint": {"name": "tile", "instruction": "Block the rows by eight."},
                        "inspirations": [{"label": "node n3 (fuse, 2.10x vs XLA)", "source": "void g() {}"}]}),
            )
            .unwrap();
        assert!(
            r.user
                .contains("## Direction for this plan (tile)\nBlock the rows by eight."),
            "{}",
            r.user
        );
        assert!(
            r.user
                .contains("### node n3 (fuse, 2.10x vs XLA)\n```c\nvoid g() {}\n```"),
            "{}",
            r.user
        );
        let plain = p
            .render(Role::Planner, &json!({"task": task(), "mode": "new"}))
            .unwrap();
        assert!(!plain.user.contains("Direction for this plan"));
        assert!(!plain.user.contains("Other programs found"));
    }

    #[test]
    fn a_planner_with_nothing_passing_asks_for_a_first_correct_kernel() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::Planner,
                &json!({"task": task(), "mode": "new", "not_passing": true,
                        "best": {"iteration": 0, "file": "kernel.c", "source": "void f() {}", "speedup": "not passing", "latency": "-"}}),
            )
            .unwrap();
        assert!(r.user.contains("plan a first correct kernel"), "{}", r.user);
        assert!(
            !r.user.contains("Plan the first optimized version"),
            "{}",
            r.user
        );
    }

    #[test]
    fn the_planner_sees_the_bests_timing_and_a_warning_far_above_xla_and_the_implementer_the_machine(
    ) {
        let p = Prompts::load(None).unwrap();
        let best = json!({"iteration": 2, "file": "kernel.c", "source": "void f() {}", "speedup": "48.00x",
                          "latency": "2.700 ms geometric mean over workloads", "timing": "- M=64 N=1000: 0.9 ms (XLA 43 ms, 48x)",
                          "far_ahead": true});
        let r = p
            .render(
                Role::Planner,
                &json!({"task": task(), "mode": "revision", "best": best}),
            )
            .unwrap();
        for needle in [
            "Timing per workload of the current best",
            "- M=64 N=1000: 0.9 ms",
            "compare latencies in ms, not speedups",
            "the roofline floor is the machine's measured limit",
        ] {
            assert!(r.user.contains(needle), "missing {needle}:\n{}", r.user);
        }
        let r = p
            .render(
                Role::Implementer,
                &json!({"task": task(), "file": "kernel.c", "source": "", "plan": "p", "machine": "AMD EPYC (2 cores, 256-bit SIMD)"}),
            )
            .unwrap();
        assert!(
            r.user
                .contains("## Machine\nAMD EPYC (2 cores, 256-bit SIMD)"),
            "{}",
            r.user
        );
    }

    #[test]
    fn the_implementer_sees_the_code_of_iterations_the_plan_names() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::Implementer,
                &json!({"task": task(), "file": "kernel.c", "source": "int best;", "plan": "take the iteration 1 kernel",
                        "snapshots": [{"iteration": 1, "status": "PASSED", "source": "int one;"}]}),
            )
            .unwrap();
        assert!(
            r.user.contains(
                "## `kernel.c` of iteration 1 (named in the plan; PASSED)\n```c\nint one;\n```"
            ),
            "{}",
            r.user
        );
    }

    #[test]
    fn a_search_planner_hears_what_siblings_tried_and_the_search_best() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::Planner,
                &json!({"task": task(), "reference": "x", "roofline": "2 cores", "mode": "revision",
                        "best": {"iteration": 1, "file": "kernel.c", "source": "int k;", "speedup": "1.20x", "latency": "-",
                                 "timing": "- M=64: 0.9 ms (XLA 1.1 ms, 1.20x, 95% 1.10-1.30)"},
                        "tried": ["sibling: node 3 [tile] Block rows by 8 -> PASSED 0.80x (0.70-0.90) vs XLA"],
                        "search_best": {"node": 5, "title": "Fuse the two passes", "hint": "fuse",
                                        "figures": "2.10x (1.90-2.30) vs XLA", "timing": "- M=64: 0.5 ms"}}),
            )
            .unwrap();
        assert!(
            r.user.contains("## Tried elsewhere in this search"),
            "{}",
            r.user
        );
        assert!(
            r.user.contains("sibling: node 3 [tile] Block rows by 8"),
            "{}",
            r.user
        );
        assert!(
            r.user.contains("## The search's best so far (node 5, [fuse] Fuse the two passes: 2.10x (1.90-2.30) vs XLA)"),
            "{}",
            r.user
        );
        assert!(r.user.contains("95% 1.10-1.30"), "{}", r.user);
    }

    #[test]
    fn the_autotune_planner_hears_what_earlier_tuning_found() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::AutotunePlanner,
                &json!({"task": task(), "file": "kernel.c", "source": "#define BM 64", "defines": "BM=64",
                        "earlier": ["iteration 1: block rows -> passed; autotune: the defaults stayed best; 1 of 3 configurations failed: BM=128: COMPILE_ERROR"],
                        "timing": "- M=64 N=1000: 0.9 ms (XLA 43 ms, 48x)", "budget": 8}),
            )
            .unwrap();
        assert!(
            r.user.contains("measures at most 8 configurations"),
            "the planner is told the tuner's budget: {}",
            r.user
        );
        assert!(
            r.user
                .contains("## How this kernel did (it passed its checks)\n- M=64 N=1000: 0.9 ms"),
            "{}",
            r.user
        );
        assert!(
            r.user.contains("USE_PREFETCH == 1 || PF_DIST == 0"),
            "{}",
            r.user
        );
        assert!(
            r.user
                .contains("## Tuning in earlier iterations of this run\n- iteration 1"),
            "{}",
            r.user
        );
        assert!(r.user.contains("BM=128: COMPILE_ERROR"), "{}", r.user);
    }

    #[test]
    fn no_sentence_is_glued_to_the_next_by_a_template_tag() {
        // `{% endif %}` at the end of a line ate its newline: "...version.Answer with".
        let p = Prompts::load(None).unwrap();
        for role in Role::ALL {
            for mode in ["new", "revision"] {
                let r = p
                    .render(
                        role,
                        &json!({"task": task(), "mode": mode, "file": "kernel.c"}),
                    )
                    .unwrap();
                let c: Vec<char> = r.user.chars().collect();
                let glued = c.windows(3).position(|w| {
                    w[0].is_ascii_lowercase() && w[1] == '.' && w[2].is_ascii_uppercase()
                });
                if let Some(at) = glued {
                    let from = at.saturating_sub(40);
                    let text: String = c[from..(at + 20).min(c.len())].iter().collect();
                    panic!("{role:?} ({mode}): {text:?}");
                }
            }
        }
    }

    #[test]
    fn every_heading_starts_a_line_whatever_sections_are_present() {
        // A paragraph before `{%- endif %}` lost its newline and the next heading was glued to
        // it ("...disagree with it.## Last iteration (2)"): the model never saw that section.
        let p = Prompts::load(None).unwrap();
        let full = json!({"task": task(), "file": "kernel.c", "source": "int x;",
            "reference": "def reference(x): ...", "roofline": "peak", "machine": "peak",
            "history": ["iteration 1: a -> passed"], "iteration": 2, "of": 3,
            "best": {"iteration": 1, "file": "kernel.c", "source": "int x;", "speedup": "2x",
                     "latency": "1 ms", "timing": "- w0: 1 ms", "far_ahead": true},
            "last": {"iteration": 1, "outcome": "passed", "timing": "- w0: 1 ms", "profile": "memory bound"},
            "knowledge": [{"source": "a.md#b", "text": "text"}], "guidance": "go",
            "snapshots": [{"iteration": 1, "source": "int y;"}], "plan": "## Strategy\nx",
            "failure": {"kind": "compile", "detail": "error"}, "attempts": ["compile: error"],
            "defines": "BM=64", "earlier": ["iteration 1: autotune: tuned BM=32"], "timing": "- w0: 1 ms",
            "tuning": "tuned BM=32", "profile": "CPU profile", "format": "fmt", "feedback": "bad",
            "target": "1 MB", "reference_file": "ref.py", "retry": "again"});
        for role in Role::ALL {
            for mode in ["new", "revision"] {
                let mut vars = full.clone();
                vars["mode"] = json!(mode);
                let r = p.render(role, &vars).unwrap();
                let c: Vec<char> = r.user.chars().collect();
                let glued = c.windows(4).position(|w| {
                    w[0] != '\n' && w[0] != '#' && w[1] == '#' && w[2] == '#' && w[3] == ' '
                });
                if let Some(at) = glued {
                    let from = at.saturating_sub(60);
                    let text: String = c[from..(at + 30).min(c.len())].iter().collect();
                    panic!("{role:?} ({mode}): heading glued to the text before: {text:?}");
                }
            }
        }
    }

    #[test]
    fn planner_revision_shows_last_iteration_and_knowledge() {
        let p = Prompts::load(None).unwrap();
        let r = p
            .render(
                Role::Planner,
                &json!({"task": task(), "mode": "revision", "reference": "def reference(x): ...",
                        "roofline": "peak 100 GFLOP/s", "history": ["iter 1: blocked rows -> passed 1.4x"],
                        "last": {"iteration": 1, "outcome": "passed, 1.4x", "timing": "w0 1.2 ms", "profile": "memory bound"},
                        "knowledge": [{"source": "stable-reductions.md#Online softmax", "text": "one pass"}],
                        "iteration": 2, "of": 3}),
            )
            .unwrap();
        for needle in [
            "Task `softmax`",
            "Last iteration (1): passed, 1.4x",
            "memory bound",
            "Online softmax",
            "iter 1: blocked rows",
            "Plan a revision",
            "An interval containing 1.00 means no measurable difference",
            "This is iteration 2 of 3.",
        ] {
            assert!(r.user.contains(needle), "missing {needle}:\n{}", r.user);
        }
    }

    #[test]
    fn profile_analyst_sees_the_machine_peaks_and_the_tuning() {
        let p = Prompts::load(None).unwrap();
        let vars = json!({"task": task(), "file": "kernel.c", "source": "int x;",
            "timing": "- M=64: 0.9 ms", "profile": "Profiled workload 1",
            "machine": "peak 100 GFLOP/s fp32, DRAM 20 GB/s",
            "tuning": "tuned BM=32; 1 of 4 configurations failed: BM=128: COMPILE_ERROR"});
        let r = p.render(Role::ProfileAnalyst, &vars).unwrap();
        for needle in [
            "## Machine\npeak 100 GFLOP/s",
            "## Autotuning of this kernel\ntuned BM=32",
            "BM=128: COMPILE_ERROR",
        ] {
            assert!(r.user.contains(needle), "missing {needle}:\n{}", r.user);
        }
        let untuned = p
            .render(Role::ProfileAnalyst, &json!({"task": task(), "tuning": ""}))
            .unwrap();
        assert!(!untuned.user.contains("Autotuning"), "{}", untuned.user);
    }

    #[test]
    fn overrides_replace_builtin_templates_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("planner.md"),
            "SYS\n=== user ===\nplan {{ task.name }}",
        )
        .unwrap();
        let p = Prompts::load(Some(dir.path())).unwrap();
        let r = p.render(Role::Planner, &json!({"task": task()})).unwrap();
        assert_eq!(
            (r.system.as_str(), r.user.as_str()),
            ("SYS", "plan softmax\n")
        );
        std::fs::write(dir.path().join("fixer.md"), "{% if %}").unwrap();
        let e = Prompts::load(Some(dir.path())).err().unwrap().to_string();
        assert!(e.contains("fixer.md"), "{e}");
        std::fs::write(dir.path().join("fixer.md"), "no marker").unwrap();
        let p = Prompts::load(Some(dir.path())).unwrap();
        let e = p.render(Role::Fixer, &json!({})).unwrap_err().to_string();
        assert!(e.contains("=== user ==="), "{e}");
        let missing = dir.path().join("nope");
        let e = Prompts::load(Some(&missing)).err().unwrap().to_string();
        assert!(e.contains("nope") && e.contains("not a directory"), "{e}");
    }
}
