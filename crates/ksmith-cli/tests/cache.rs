//! The store's caches kept to their caps, through the real binary: the reference cache under a
//! small `KSMITH_REFERENCE_CACHE_MB`, evaluations still right after their entries were evicted,
//! `ksmith cache du` and `ksmith cache prune` (to the cap, and `--all`).

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Two workloads of 3 MiB per entry (1 MiB of float32 inputs, 2 MiB of float64 reference):
/// three check seeds each, 18 MiB in all.
const SMALL_SOFTMAX: &str = r#"
[[workloads]]
axes = { M = 256, N = 1024 }
[workloads.inputs]
x = { dist = "normal", mean = 0.0, std = 1.0 }

[[workloads]]
axes = { M = 128, N = 2048 }
[workloads.inputs]
x = { dist = "normal", mean = 0.0, std = 2.0 }
"#;

const MIB: u64 = 1 << 20;

/// `cache du --json`'s part `name`.
fn part(store: &Path, name: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let o = ksmith_env(store, &["cache", "du", "--json"], env);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    v["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no part {name} in {v}"))
        .clone()
}

fn eval_passes(store: &Path, task: &Path, env: &[(&str, &str)]) {
    let solution = root().join("tasks/starter/softmax/solutions/fast");
    let o = ksmith_env(
        store,
        &[
            "eval",
            task.to_str().unwrap(),
            solution.to_str().unwrap(),
            "--json",
            "--no-timing",
        ],
        env,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["status"], "PASSED", "{}", text(&o));
}

/// Every file of the reference cache last used two hours ago (as if by an earlier session).
fn age(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            age(&p);
        } else {
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(7200))
                .unwrap();
        }
    }
}

#[test]
fn reference_cache_kept_to_its_cap_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let task = small_task("softmax", tmp.path(), SMALL_SOFTMAX);
    let store = tmp.path().join("store");
    let capped = [("KSMITH_REFERENCE_CACHE_MB", "8")];

    // Under a cap of 8 MiB the 18 MiB an evaluation made are cut back when it ends.
    eval_passes(&store, &task, &capped);
    let r = part(&store, "reference", &capped);
    assert_eq!(r["cap_bytes"], 8 * MIB);
    let held = r["bytes"].as_u64().unwrap();
    assert!(
        held <= 8 * MIB,
        "reference cache {held} B over its 8 MiB cap: {r}"
    );
    assert!(held > 0, "the newest entries stay: {r}");

    // Judged again right after: what was evicted is drawn and computed again, same verdict.
    eval_passes(&store, &task, &capped);
    assert!(
        part(&store, "reference", &capped)["bytes"]
            .as_u64()
            .unwrap()
            <= 8 * MIB
    );

    // Under the default cap every entry stays.
    eval_passes(&store, &task, &[]);
    let r = part(&store, "reference", &[]);
    assert_eq!(r["entries"], 6, "{r}");
    assert!(r["bytes"].as_u64().unwrap() >= 18 * MIB, "{r}");
    assert_eq!(r["cap_bytes"], 1024 * MIB);

    // Entries used in the last minute are left to the process that may be using them.
    let o = ksmith_env(&store, &["cache", "prune", "--json"], &capped);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["reference"]["entries_removed"], 0, "{}", text(&o));

    // An earlier session's entries: inputs dropped first (cheap to draw again), then the
    // oldest entries, down to the cap.
    age(&store.join("cache/reference"));
    let o = ksmith_env(&store, &["cache", "prune", "--json"], &capped);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["reference"]["inputs_dropped"], 6, "{v}");
    assert!(
        v["reference"]["bytes_left"].as_u64().unwrap() <= 8 * MIB,
        "{v}"
    );
    assert!(v["freed_bytes"].as_u64().unwrap() >= 10 * MIB, "{v}");
    assert!(
        part(&store, "reference", &capped)["bytes"]
            .as_u64()
            .unwrap()
            <= 8 * MIB
    );

    // --all empties the caches, the record stays.
    let db_before = part(&store, "database", &[])["bytes"].clone();
    let o = ksmith(&store, &["cache", "prune", "--all"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(stdout(&o).contains("freed"), "{}", text(&o));
    assert_eq!(part(&store, "reference", &[])["entries"], 0);
    assert_eq!(part(&store, "xla", &[])["bytes"], 0);
    assert_eq!(part(&store, "database", &[])["bytes"], db_before);
    let o = ksmith(&store, &["evals", "--json"]);
    assert!(o.status.success(), "{}", text(&o));

    // The table names every part and its cap.
    let o = ksmith(&store, &["cache", "du"]);
    let t = stdout(&o);
    for word in [
        "reference",
        "build",
        "xla",
        "database",
        "artifacts",
        "1 GiB",
        "total",
    ] {
        assert!(t.contains(word), "cache du lacks {word}:\n{t}");
    }
}
