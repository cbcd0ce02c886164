//! `ksmith cache du|prune`: what a store holds on disk, and the caches brought back to their
//! caps (or emptied). The record (database, artifacts) is never pruned: it is the evidence.

use crate::term::one;
use crate::{env_err, Ctx, Exit};
use ksmith_backend::c::evict as build_cache;
use ksmith_judge::refcache;
use serde_json::json;
use std::path::Path;

/// `ksmith cache`.
#[derive(clap::Subcommand)]
pub(crate) enum CacheCmd {
    /// What the store holds on disk: each cache with its cap, the database and the artifacts.
    Du {
        /// Print {"store", "parts": [{"name", "path", "bytes", "cap_bytes", "entries", ...}], "total_bytes"}.
        #[arg(long)]
        json: bool,
    },
    /// Bring the reference and build caches back to their caps (least recently used first), or
    /// empty every cache with --all; the database and artifacts are kept.
    Prune {
        /// Empty the reference, build and XLA caches (all regenerated when next needed; builds
        /// used in the last ten minutes stay).
        #[arg(long)]
        all: bool,
        /// Print {"freed_bytes", "reference": {...}, "build_bytes", "xla_bytes", "total_bytes"}.
        #[arg(long)]
        json: bool,
    },
}

impl CacheCmd {
    /// Whether the command changes the store.
    pub(crate) fn writes_store(&self) -> bool {
        matches!(self, CacheCmd::Prune { .. })
    }
}

/// Bytes of the files under `path` (0 when it does not exist); symbolic links not followed.
fn bytes_under(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| bytes_under(&e.path())).sum())
        .unwrap_or(0)
}

/// One line of `cache du`.
struct Part {
    name: &'static str,
    path: String,
    bytes: u64,
    cap: Option<u64>,
    entries: Option<u64>,
    what: &'static str,
}

fn parts(store: &Path) -> Vec<Part> {
    let reference = refcache::du(&store.join("cache/reference"));
    let db: u64 = ["ksmith.db", "ksmith.db-wal", "ksmith.db-shm"]
        .iter()
        .map(|f| bytes_under(&store.join(f)))
        .sum();
    let mut v = vec![
        Part {
            name: "reference",
            path: "cache/reference".into(),
            bytes: reference.bytes(),
            cap: Some(refcache::cap_bytes()),
            entries: Some(reference.entries),
            what: "inputs and float64 references per task, workload and seed (KSMITH_REFERENCE_CACHE_MB)",
        },
        Part {
            name: "build",
            path: "cache/build".into(),
            bytes: bytes_under(&store.join("cache/build")),
            cap: Some(build_cache::cap_bytes()),
            entries: None,
            what: "built kernels by source, flags and compiler (KSMITH_BUILD_CACHE_MB)",
        },
        Part {
            name: "xla",
            path: "cache/xla".into(),
            bytes: bytes_under(&store.join("cache/xla")),
            cap: None,
            entries: None,
            what: "JAX's compiled references and baselines (emptied by prune --all)",
        },
        Part {
            name: "database",
            path: "ksmith.db".into(),
            bytes: db,
            cap: None,
            entries: None,
            what: "evaluations, runs, searches (kept)",
        },
        Part {
            name: "artifacts",
            path: "artifacts".into(),
            bytes: bytes_under(&store.join("artifacts")),
            cap: None,
            entries: None,
            what: "sources and logs of evaluations (kept)",
        },
    ];
    let counted: u64 = v.iter().map(|p| p.bytes).sum();
    v.push(Part {
        name: "other",
        path: ".".into(),
        bytes: bytes_under(store).saturating_sub(counted),
        cap: None,
        entries: None,
        what: "roofline, tuned solutions, skeletons, other caches",
    });
    v
}

/// Runs `ksmith cache ...`.
pub(crate) fn run(ctx: &Ctx, cmd: &CacheCmd) -> Result<u8, Exit> {
    let store = ctx.store_dir.as_path();
    match cmd {
        CacheCmd::Du { json } => {
            let parts = parts(store);
            let total: u64 = parts.iter().map(|p| p.bytes).sum();
            if *json {
                let rows: Vec<_> = parts
                    .iter()
                    .map(|p| {
                        json!({"name": p.name, "path": p.path, "bytes": p.bytes,
                               "cap_bytes": p.cap, "entries": p.entries, "what": p.what})
                    })
                    .collect();
                crate::term::json(&json!({
                    "store": store.display().to_string(),
                    "parts": rows,
                    "total_bytes": total,
                }));
                return Ok(0);
            }
            let mut t = crate::report::table(&["part", "path", "size", "cap", "what"]);
            for p in &parts {
                let size = match p.entries {
                    Some(n) => format!("{} ({n} entries)", crate::report::bytes_human(p.bytes)),
                    None => crate::report::bytes_human(p.bytes),
                };
                t.add_row([
                    p.name.to_string(),
                    p.path.clone(),
                    size,
                    p.cap.map_or("-".into(), crate::report::bytes_human),
                    p.what.to_string(),
                ]);
            }
            say!("store {}", one(&store.display().to_string()));
            say!("{t}");
            say!("total {}", crate::report::bytes_human(total));
            Ok(0)
        }
        CacheCmd::Prune { all, json } => {
            let before = bytes_under(store);
            let reference_root = store.join("cache/reference");
            let build_root = store.join("cache/build");
            let xla_root = store.join("cache/xla");
            let (ref_cap, build_cap) = if *all {
                (0, 0)
            } else {
                (refcache::cap_bytes(), build_cache::cap_bytes())
            };
            // Down to the cap, an entry another process used in the last minute stays; --all
            // empties it (a process using an entry draws and computes it again).
            let all = *all;
            let reference = refcache::evict(&reference_root, ref_cap, &|_, used| {
                !all && refcache::recently_used(used)
            });
            let build_freed = build_cache::evict(&build_root, build_cap, Path::new(""));
            let xla_freed = if all {
                let n = bytes_under(&xla_root);
                match std::fs::remove_dir_all(&xla_root) {
                    Ok(()) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
                    Err(e) => {
                        return Err(env_err(anyhow::anyhow!(
                            "{}: cannot remove: {e}",
                            xla_root.display()
                        )))
                    }
                }
            } else {
                0
            };
            let after = bytes_under(store);
            let freed = before.saturating_sub(after);
            if *json {
                crate::term::json(&json!({
                    "freed_bytes": freed,
                    "reference": {
                        "freed_bytes": reference.freed,
                        "entries_removed": reference.entries_removed,
                        "inputs_dropped": reference.inputs_dropped,
                        "entries_left": reference.left.entries,
                        "bytes_left": reference.left.bytes(),
                    },
                    "build_bytes": build_freed,
                    "xla_bytes": xla_freed,
                    "total_bytes": after,
                }));
                return Ok(0);
            }
            say!(
                "freed {}: references {} ({} entries removed, inputs of {} more dropped; {} left in {} entries), builds {}, XLA {}",
                crate::report::bytes_human(freed),
                crate::report::bytes_human(reference.freed),
                reference.entries_removed,
                reference.inputs_dropped,
                crate::report::bytes_human(reference.left.bytes()),
                reference.left.entries,
                crate::report::bytes_human(build_freed),
                crate::report::bytes_human(xla_freed),
            );
            say!(
                "store {} now holds {}",
                one(&store.display().to_string()),
                crate::report::bytes_human(after)
            );
            Ok(0)
        }
    }
}
