//! `ksmith memory` through the real binary: a scripted agent run on a starter task that
//! improves becomes a memory entry (op class, gain, a capped excerpt), listed, shown, pruned;
//! bad flags exit 2.

mod common;

use common::{fresh_store, json, ksmith, root, small_task, text};
use serde_json::Value;
use std::path::Path;

/// One scripted reply (TOML literal string).
fn reply(role: &str, text: &str) -> String {
    assert!(!text.contains("'''"));
    format!("[[reply]]\nrole = \"{role}\"\ntext = '''\n{text}'''\n\n")
}

fn run_id(t: &str) -> String {
    common::search_run_id(t)
}

fn ok_json(store: &Path, args: &[&str]) -> Value {
    let o = ksmith(store, args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    json(&o)
}

fn entries(store: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["memory", "list", "--json"];
    args.extend(extra);
    ok_json(store, &args)["entries"].as_array().unwrap().clone()
}

#[test]
fn an_improving_run_becomes_one_entry_listed_shown_and_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let task = small_task(
        "softmax",
        dir.path(),
        "[[workloads]]\naxes = { M = 2000, N = 600 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 3.0 }\n\n\
         [[workloads]]\naxes = { M = 256, N = 4096 }\n[workloads.inputs]\nx = { dist = \"normal\", mean = 0.0, std = 3.0 }\n",
    );
    let fast =
        std::fs::read_to_string(root().join("tasks/starter/softmax/solutions/fast/kernel.c"))
            .unwrap();
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        [
            reply(
                "planner",
                "## Title\nVectorized exp with row blocking\n## Strategy\nUse the vectorized kernel.\n## Expected effect\nabout 3.0x faster than the current best\n## Risks\nTails.\n",
            ),
            reply("implementer", &format!("kernel.c\n```c\n{fast}```\n")),
        ]
        .concat(),
    )
    .unwrap();
    let model = format!("scripted:{}", scenario.display());
    let o = ksmith(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--model",
            &model,
            "--from",
            root()
                .join("tasks/starter/softmax/solutions/naive")
                .to_str()
                .unwrap(),
            "--iterations",
            "1",
            "--no-profile",
            "--tune-budget",
            "0",
            "--min-time-ms",
            "20",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let run = run_id(&text(&o));

    // The run's end harvested it (one improvement, iteration 1 over iteration 0); harvesting
    // again finds the same improvement and adds nothing.
    assert!(
        text(&o).contains("memory: 1 improvement(s)") && text(&o).contains("1 new entry"),
        "{}",
        text(&o)
    );
    let h = ok_json(&store, &["memory", "harvest", &run, "--json"]);
    assert_eq!(h["improvements"], 1, "{h}");
    assert_eq!(h["added"].as_array().unwrap().len(), 0, "{h}");
    let listed = entries(&store, &[]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let e = &listed[0];
    assert_eq!(e["op_class"], "normalization", "{e}");
    assert_eq!(e["task"], "softmax");
    assert_eq!(e["run"], run.as_str());
    assert_eq!(e["step"], serde_json::json!({"kind": "node", "n": 1}));
    assert_eq!(e["headline"], "Vectorized exp with row blocking");
    let gain = e["gain"]["ratio"].as_f64().unwrap();
    assert!(gain > 1.0, "{e}");
    // Timed side by side with the previous best: the interval is known.
    let iv = e["gain"]["interval"].as_array().expect("interval");
    assert!(iv[0].as_f64().unwrap() <= gain && gain <= iv[1].as_f64().unwrap());
    let excerpt = e["excerpt"].as_str().unwrap();
    assert!(!excerpt.is_empty());
    // Never the whole kernel: at most 12 lines of a 95-line file.
    assert!(excerpt.lines().count() <= 12, "{excerpt}");
    assert!(
        excerpt
            .lines()
            .all(|l| l.starts_with("- ") || l.starts_with("+ ") || l.starts_with('…')),
        "{excerpt}"
    );
    assert!(excerpt.contains("more changed lines"), "{excerpt}");
    assert!(!e["fingerprint"].as_str().unwrap().is_empty());
    let id = e["id"].as_i64().unwrap();

    // Idempotent.
    let again = ok_json(&store, &["memory", "harvest", &run, "--json"]);
    assert_eq!(again["added"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(entries(&store, &[]).len(), 1);

    // Filters.
    assert_eq!(entries(&store, &["--task", "softmax"]).len(), 1);
    assert_eq!(entries(&store, &["--task", "layernorm"]).len(), 0);
    assert_eq!(entries(&store, &["--op-class", "normalization"]).len(), 1);
    assert_eq!(entries(&store, &["--op-class", "matmul"]).len(), 0);
    // A planner on the same task never gets it; one on another task of any class does.
    let own = root().join("tasks/starter/softmax");
    assert_eq!(entries(&store, &["--for", own.to_str().unwrap()]).len(), 0);
    let other = root().join("tasks/starter/matmul");
    let fp = e["fingerprint"].as_str().unwrap();
    let got = entries(
        &store,
        &["--for", other.to_str().unwrap(), "--fingerprint", fp],
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], id);
    let listed = &entries(&store, &[])[0];
    assert_eq!(listed["id"], id);
    assert_eq!(listed["win_rate"], 0.5, "never shown: the prior's mean");

    // The table and `show`.
    let o = ksmith(&store, &["memory", "list"]);
    assert!(o.status.success());
    let t = text(&o);
    assert!(
        t.contains("normalization") && t.contains("Vectorized exp"),
        "{t}"
    );
    let o = ksmith(&store, &["memory", "show", &id.to_string()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains(&format!("memory entry {id}")), "{t}");
    assert!(t.contains(&format!("run {run}, node n1")), "{t}");
    assert!(t.contains("timed together"), "{t}");
    assert!(t.contains(excerpt.lines().next().unwrap()), "{t}");
    let shown = ok_json(&store, &["memory", "show", &id.to_string(), "--json"]);
    assert_eq!(shown["id"], id);
    let o = ksmith(&store, &["memory", "show", "99999"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Prune: a dry run deletes nothing; the real one does; the run is not harvested back.
    let rule = ["--min-win-rate", "0.6", "--min-shown", "0"];
    let mut args = vec!["memory", "prune", "--json", "--dry-run"];
    args.extend(rule);
    let p = ok_json(&store, &args);
    assert_eq!(p["dry_run"], true);
    assert_eq!(p["pruned"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(entries(&store, &[]).len(), 1);
    let mut args = vec!["memory", "prune", "--json", "--older-than", "30"];
    args.extend(rule);
    let p = ok_json(&store, &args);
    assert_eq!(p["pruned"][0]["id"], id, "{p}");
    assert_eq!(entries(&store, &[]).len(), 0);
    let back = ok_json(&store, &["memory", "harvest", &run, "--json"]);
    assert_eq!(back["added"].as_array().unwrap().len(), 0, "{back}");
    let o = ksmith(&store, &["memory", "list"]);
    assert!(text(&o).contains("no memory entries"), "{}", text(&o));
}

#[test]
fn bad_memory_flags_and_unknown_runs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    for args in [
        &["memory", "list", "--op-class", "banana"][..],
        &["memory", "prune"],
        &["memory", "prune", "--min-win-rate", "2"],
        &["memory", "prune", "--older-than", "-1"],
        &["memory", "prune", "--older-than", "3", "--min-shown", "4"],
        &["memory", "show", "abc"],
        &["memory", "show", "7"],
        &["memory", "harvest", "run-nope"],
        &["memory", "frobnicate"],
        &["memory", "list", "--fingerprint", "x"],
        &["memory", "list", "--for", "/nonexistent/task"],
    ] {
        let o = ksmith(&store, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    }
    let o = ksmith(&store, &["memory", "list", "--op-class", "banana"]);
    assert!(
        text(&o).contains("expected one of elementwise"),
        "{}",
        text(&o)
    );
    let o = ksmith(&store, &["memory", "harvest", "run-nope"]);
    assert!(
        text(&o).contains("run run-nope: no such run"),
        "{}",
        text(&o)
    );
    // An empty store lists nothing, as JSON too.
    assert_eq!(entries(&store, &[]).len(), 0);
}
