//! The autotuner's search space and strategies: which configuration of a solution's tunable
//! parameters to evaluate next. Evaluating is the judge's job; `ksmith tune` drives both.

use ksmith_task::{Formula, Solution, Task};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// One assignment of a value to every tunable.
pub type Config = BTreeMap<String, i64>;

/// The tunables of a solution, with the constraints that every configuration must satisfy on
/// every workload of the task (one kernel serves them all).
#[derive(Debug, Clone)]
pub struct Space {
    params: Vec<(String, Vec<i64>)>,
    constraints: Vec<Formula>,
    workload_axes: Vec<BTreeMap<String, i64>>,
}

/// Most configurations `enumerate` will list (the Cartesian product can explode).
pub const MAX_ENUMERATED: usize = 200_000;

impl Space {
    /// The space declared by `solution` for `task`.
    pub fn new(task: &Task, solution: &Solution) -> Space {
        Space {
            params: solution
                .tunables
                .iter()
                .map(|t| (t.name.clone(), t.values.clone()))
                .collect(),
            constraints: solution
                .tunables
                .iter()
                .flat_map(|t| t.constraints.iter().cloned())
                .collect(),
            workload_axes: task.workloads.iter().map(|w| w.axes.clone()).collect(),
        }
    }

    /// The configuration the untuned solution runs with: each tunable's `#define NAME VALUE`
    /// default in the sources, when every one is found among the declared values and valid.
    pub fn default_config(&self, solution: &Solution) -> Option<Config> {
        let mut c = Config::new();
        for (name, values) in &self.params {
            let v = solution
                .sources
                .iter()
                .find_map(|(_, text)| define_value(text, name))?;
            if !values.contains(&v) {
                return None;
            }
            c.insert(name.clone(), v);
        }
        self.is_valid(&c).then_some(c)
    }

    /// Whether the space has any parameter.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Parameter names, in declaration order.
    pub fn names(&self) -> Vec<&str> {
        self.params.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Size of the Cartesian product (before constraints).
    pub fn product_size(&self) -> usize {
        self.params
            .iter()
            .map(|(_, v)| v.len())
            .fold(1usize, |a, n| a.saturating_mul(n))
    }

    /// Whether `c` satisfies every constraint on every workload (an unevaluable constraint fails).
    pub fn is_valid(&self, c: &Config) -> bool {
        self.workload_axes.iter().all(|axes| {
            let mut scope = axes.clone();
            scope.extend(c.iter().map(|(k, v)| (k.clone(), *v)));
            self.constraints
                .iter()
                .all(|f| f.eval_bool(&scope).unwrap_or(false))
        })
    }

    /// Every valid configuration, in lexicographic order of value indices (at most `MAX_ENUMERATED`).
    pub fn enumerate(&self) -> Vec<Config> {
        let mut out = Vec::new();
        let mut idx = vec![0usize; self.params.len()];
        if self.params.iter().any(|(_, v)| v.is_empty()) {
            return out;
        }
        loop {
            let c = self.config_at(&idx);
            if self.is_valid(&c) {
                out.push(c);
                if out.len() >= MAX_ENUMERATED {
                    return out;
                }
            }
            // Odometer increment, last parameter fastest.
            let mut i = self.params.len();
            loop {
                if i == 0 {
                    return out;
                }
                i -= 1;
                idx[i] += 1;
                if idx[i] < self.params[i].1.len() {
                    break;
                }
                idx[i] = 0;
            }
        }
    }

    fn config_at(&self, idx: &[usize]) -> Config {
        self.params
            .iter()
            .zip(idx)
            .map(|((n, v), &i)| (n.clone(), v[i]))
            .collect()
    }

    fn index_of(&self, c: &Config) -> Vec<usize> {
        self.params
            .iter()
            .map(|(n, v)| v.iter().position(|x| Some(x) == c.get(n)).unwrap_or(0))
            .collect()
    }

    /// Valid configurations that differ from `c` in one parameter by one step in its value list.
    pub fn neighbors(&self, c: &Config) -> Vec<Config> {
        let idx = self.index_of(c);
        let mut out = Vec::new();
        for p in 0..self.params.len() {
            for step in [-1isize, 1] {
                let j = idx[p] as isize + step;
                if j >= 0 && (j as usize) < self.params[p].1.len() {
                    let mut n = idx.clone();
                    n[p] = j as usize;
                    let cfg = self.config_at(&n);
                    if self.is_valid(&cfg) {
                        out.push(cfg);
                    }
                }
            }
        }
        out
    }

    /// A uniformly random valid configuration (rejection sampling), if one is found.
    pub fn random(&self, rng: &mut fastrand::Rng) -> Option<Config> {
        for _ in 0..10_000 {
            let idx: Vec<usize> = self
                .params
                .iter()
                .map(|(_, v)| rng.usize(..v.len().max(1)))
                .collect();
            let c = self.config_at(&idx);
            if self.is_valid(&c) {
                return Some(c);
            }
        }
        None
    }
}

/// What happened to one evaluated configuration: its cost (lower is better) or a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The configuration.
    pub config: Config,
    /// Lower is better (the CLI uses time relative to the XLA baseline, geometric mean over
    /// workloads); None when it failed to build or was incorrect.
    pub cost: Option<f64>,
    /// Timing stopped early because it was clearly slower than the best so far: its cost is a
    /// rough estimate, good for steering a search but never the winner.
    pub eliminated: bool,
}

impl Trial {
    /// A fully measured trial.
    pub fn measured(config: Config, cost: Option<f64>) -> Trial {
        Trial {
            config,
            cost,
            eliminated: false,
        }
    }
}

/// Successful trials, cheapest first.
fn ranked(history: &[Trial]) -> Vec<&Trial> {
    let mut ok: Vec<&Trial> = history.iter().filter(|t| t.cost.is_some()).collect();
    ok.sort_by(|a, b| a.cost.partial_cmp(&b.cost).unwrap_or(Ordering::Equal));
    ok
}

/// A search strategy: proposes the next configuration given everything tried so far.
pub trait Strategy {
    /// Name shown to the user.
    fn name(&self) -> &'static str;
    /// The next untried configuration, or None when the strategy has nothing more to try.
    fn propose(&mut self, space: &Space, history: &[Trial]) -> Option<Config>;
}

/// Strategy names accepted by `ksmith tune --strategy`.
pub const STRATEGIES: [&str; 4] = ["exhaustive", "random", "hillclimb", "genetic"];

/// Builds a strategy by name.
pub fn strategy(name: &str, seed: u64) -> Option<Box<dyn Strategy>> {
    match name {
        "exhaustive" => Some(Box::new(Exhaustive { queue: None })),
        "random" => Some(Box::new(RandomSearch {
            rng: fastrand::Rng::with_seed(seed),
        })),
        "hillclimb" => Some(Box::new(HillClimb {
            rng: fastrand::Rng::with_seed(seed),
        })),
        "genetic" => Some(Box::new(Genetic {
            rng: fastrand::Rng::with_seed(seed),
            population: 8,
        })),
        _ => None,
    }
}

fn tried(history: &[Trial]) -> BTreeSet<&Config> {
    history.iter().map(|t| &t.config).collect()
}

/// Every valid configuration in order.
struct Exhaustive {
    queue: Option<std::vec::IntoIter<Config>>,
}

impl Strategy for Exhaustive {
    fn name(&self) -> &'static str {
        "exhaustive"
    }
    fn propose(&mut self, space: &Space, history: &[Trial]) -> Option<Config> {
        let seen = tried(history);
        let q = self
            .queue
            .get_or_insert_with(|| space.enumerate().into_iter());
        q.find(|c| !seen.contains(c))
    }
}

/// Uniform random sampling without repeats.
struct RandomSearch {
    rng: fastrand::Rng,
}

impl Strategy for RandomSearch {
    fn name(&self) -> &'static str {
        "random"
    }
    fn propose(&mut self, space: &Space, history: &[Trial]) -> Option<Config> {
        let seen = tried(history);
        (0..200)
            .filter_map(|_| space.random(&mut self.rng))
            .find(|c| !seen.contains(c))
    }
}

/// The cheapest fully measured successful trial so far.
pub fn best(history: &[Trial]) -> Option<&Trial> {
    ranked(history).into_iter().find(|t| !t.eliminated)
}

/// Greedy local search: the untried neighbours of the best configuration so far, best first;
/// a random restart when the best one's neighbourhood is exhausted.
struct HillClimb {
    rng: fastrand::Rng,
}

impl Strategy for HillClimb {
    fn name(&self) -> &'static str {
        "hillclimb"
    }
    fn propose(&mut self, space: &Space, history: &[Trial]) -> Option<Config> {
        let seen = tried(history);
        for t in ranked(history) {
            if let Some(n) = space
                .neighbors(&t.config)
                .into_iter()
                .find(|c| !seen.contains(c))
            {
                return Some(n);
            }
        }
        (0..200)
            .filter_map(|_| space.random(&mut self.rng))
            .find(|c| !seen.contains(c))
    }
}

/// A small genetic algorithm: tournament selection among the best trials, uniform crossover,
/// one-step mutation; random configurations until the first population is evaluated.
struct Genetic {
    rng: fastrand::Rng,
    population: usize,
}

impl Strategy for Genetic {
    fn name(&self) -> &'static str {
        "genetic"
    }
    fn propose(&mut self, space: &Space, history: &[Trial]) -> Option<Config> {
        let seen = tried(history);
        let mut ok = ranked(history);
        ok.truncate(self.population);
        if ok.len() < 2 {
            return (0..200)
                .filter_map(|_| space.random(&mut self.rng))
                .find(|c| !seen.contains(c));
        }
        for _ in 0..200 {
            let mut pick = || {
                let a = ok[self.rng.usize(..ok.len())];
                let b = ok[self.rng.usize(..ok.len())];
                if a.cost <= b.cost {
                    a
                } else {
                    b
                }
            };
            let (p1, p2) = (pick(), pick());
            let mut child: Config = p1
                .config
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        if self.rng.bool() {
                            *v
                        } else {
                            p2.config.get(k).copied().unwrap_or(*v)
                        },
                    )
                })
                .collect();
            if self.rng.f64() < 0.5 {
                let ns = space.neighbors(&child);
                if !ns.is_empty() {
                    child = ns[self.rng.usize(..ns.len())].clone();
                }
            }
            if space.is_valid(&child) && !seen.contains(&child) {
                return Some(child);
            }
        }
        (0..200)
            .filter_map(|_| space.random(&mut self.rng))
            .find(|c| !seen.contains(c))
    }
}

/// The integer value of `#define NAME VALUE` in C source, if present.
fn define_value(text: &str, name: &str) -> Option<i64> {
    source_defines(text)
        .into_iter()
        .find_map(|(n, v)| (n == name).then_some(v))
}

/// Every `#define NAME VALUE` of C source whose value is an integer (`64`, `(8)`, `64u`), in
/// order; anything after the value (a comment) is ignored.
pub fn source_defines(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("define")?;
            if !rest.starts_with([' ', '\t']) {
                return None;
            }
            let rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let (name, tail) = rest.split_at(end);
            // An object-like macro (`F(x)` is a function-like one).
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            // The whole value must be one integer literal, maybe in parentheses: `(1 << 18)`
            // is an expression, not the constant 1.
            let mut value = tail;
            for marker in ["//", "/*"] {
                if let Some(i) = value.find(marker) {
                    value = &value[..i];
                }
            }
            let mut value = value.trim();
            while let Some(inner) = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')) {
                value = inner.trim();
            }
            let value = value.trim_end_matches(['u', 'U', 'l', 'L']).parse().ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}

/// `-DNAME=VALUE` flags for a configuration.
pub fn defines(c: &Config) -> Vec<String> {
    c.iter().map(|(k, v)| format!("-D{k}={v}")).collect()
}

/// Short label such as `BM=64,BK=32`.
pub fn label(c: &Config) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(constraints: &[&str]) -> Space {
        let names = ["BM", "BN", "N"];
        Space {
            params: vec![
                ("BM".into(), vec![16, 32, 64, 128]),
                ("BN".into(), vec![8, 16, 32]),
            ],
            constraints: constraints
                .iter()
                .map(|c| Formula::parse(c, &names).unwrap())
                .collect(),
            workload_axes: vec![
                [("N".to_string(), 256)].into(),
                [("N".to_string(), 96)].into(),
            ],
        }
    }

    #[test]
    fn constraints_hold_on_every_workload() {
        let s = space(&["N % BN == 0", "BM * BN <= 2048"]);
        let all = s.enumerate();
        // BN must divide both 256 and 96: 8, 16, 32 all do; BM*BN <= 2048 removes (128, 32).
        assert_eq!(all.len(), 11);
        assert!(all.iter().all(|c| s.is_valid(c)));
        let s = space(&["N % BM == 0"]);
        // BM must divide 96 too: only 16 and 32.
        assert!(s.enumerate().iter().all(|c| c["BM"] == 16 || c["BM"] == 32));
    }

    #[test]
    fn an_or_of_equalities_excludes_what_neither_side_allows() {
        // The shape a model wrote: "use prefetch, or the only distance that works without it".
        let s = space(&["BM == 128 || BN == 32"]);
        let bad: Config = [("BM".to_string(), 16), ("BN".to_string(), 8)].into();
        assert!(!s.is_valid(&bad));
        let all = s.enumerate();
        assert!(!all.is_empty());
        assert!(
            all.iter().all(|c| c["BM"] == 128 || c["BN"] == 32),
            "{all:?}"
        );
        for name in STRATEGIES {
            let mut st = strategy(name, 3).unwrap();
            let mut history = Vec::new();
            while let Some(c) = st.propose(&s, &history) {
                assert!(c["BM"] == 128 || c["BN"] == 32, "{name}: proposed {c:?}");
                history.push(Trial::measured(c, Some(1.0)));
            }
        }
    }

    #[test]
    fn every_strategy_proposes_only_new_valid_configs_until_the_space_is_exhausted() {
        let s = space(&["BM * BN <= 2048"]);
        let total = s.enumerate().len();
        for name in STRATEGIES {
            let mut st = strategy(name, 7).unwrap();
            let mut history = Vec::new();
            while let Some(c) = st.propose(&s, &history) {
                assert!(s.is_valid(&c), "{name}: invalid {c:?}");
                assert!(
                    history.iter().all(|t: &Trial| t.config != c),
                    "{name}: repeated {c:?}"
                );
                // A latency with a single minimum at BM=64, BN=16.
                let lat = ((c["BM"] - 64).abs() + (c["BN"] - 16).abs()) as f64 + 1.0;
                history.push(Trial::measured(c, Some(lat)));
                assert!(history.len() <= total);
            }
            assert_eq!(history.len(), total, "{name} stopped early");
        }
    }

    #[test]
    fn hill_climbing_finds_the_optimum_of_a_smooth_space_quickly() {
        let s = space(&[]);
        let mut st = strategy("hillclimb", 3).unwrap();
        let mut history: Vec<Trial> = Vec::new();
        for _ in 0..8 {
            let c = st.propose(&s, &history).unwrap();
            let lat = ((c["BM"] - 64).abs() + (c["BN"] - 16).abs()) as f64 + 1.0;
            history.push(Trial::measured(c, Some(lat)));
        }
        assert_eq!(best(&history).unwrap().cost, Some(1.0), "{history:?}");
    }

    #[test]
    fn the_untuned_configuration_is_read_from_the_source_defines() {
        let s = space(&[]);
        let src = "#ifndef BM\n#define BM 32\n#endif\n#  define BN 16u\n";
        let sol = Solution::from_source(
            "s",
            ksmith_task::Language::C,
            "f",
            "k.c",
            src.into(),
            vec![],
        );
        let c = s.default_config(&sol).unwrap();
        assert_eq!((c["BM"], c["BN"]), (32, 16));
        let off = Solution::from_source(
            "s",
            ksmith_task::Language::C,
            "f",
            "k.c",
            src.replace("32", "33"),
            vec![],
        );
        assert_eq!(s.default_config(&off), None, "33 is not a declared value");
    }

    #[test]
    fn an_eliminated_trial_steers_the_search_but_is_never_the_best() {
        let c = |bm: i64| Config::from([("BM".to_string(), bm)]);
        let mut history = vec![
            Trial::measured(c(16), Some(2.0)),
            Trial::measured(c(32), None),
        ];
        history.push(Trial {
            config: c(64),
            cost: Some(1.0),
            eliminated: true,
        });
        assert_eq!(best(&history).unwrap().config, c(16));
        assert_eq!(ranked(&history)[0].config, c(64));
    }
}

/// The source with each `#define NAME VALUE` named in `config` set to the configuration's value
/// (tuned values written into the kernel, so later edits start from the tuned kernel).
pub fn bake_defines(source: &str, config: &BTreeMap<String, i64>) -> String {
    static DEFINE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?m)^([ \t]*#[ \t]*define[ \t]+)(\w+)([ \t]+\(?)(-?\d+)")
            .expect("regex")
    });
    DEFINE
        .replace_all(source, |c: &regex::Captures| match config.get(&c[2]) {
            Some(v) => format!("{}{}{}{v}", &c[1], &c[2], &c[3]),
            None => c[0].to_string(),
        })
        .into_owned()
}

#[cfg(test)]
mod define_tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn tuned_values_are_baked_into_the_source() {
        let c: BTreeMap<String, i64> = [("BM".to_string(), 32)].into();
        let src = "#ifndef BM\n#define BM 64 /* rows */\n#endif\n#define BN 8\n";
        assert_eq!(
            bake_defines(src, &c),
            "#ifndef BM\n#define BM 32 /* rows */\n#endif\n#define BN 8\n"
        );
    }

    #[test]
    fn defines_are_found() {
        let d = source_defines("#ifndef BM\n#define BM 64\n#endif\n#define NAME_2 (8) /* rows */\n#define F 1.5\n#define C 3 // x\n#define SHIFTED (1 << 18)\n#define SUM 2 + 3\n#define G(x) 4\n#define U 16u\n#define NOVALUE\n");
        assert_eq!(
            d,
            vec![
                ("BM".to_string(), 64),
                ("NAME_2".to_string(), 8),
                ("C".to_string(), 3),
                ("U".to_string(), 16)
            ]
        );
    }
}
