//! The reference cache kept to a size. Every (task, workload, seed) leaves its inputs and its
//! float64 reference on disk (`cache/reference/<harness digest>/<task>/w{W}_s{S}_h{V}.*`); a few
//! agent runs once left 8 GB. Least recently used entries go first, and their inputs before
//! their references: inputs are drawn again from the seed in milliseconds, a reference means
//! running the task's code. The trusted side regenerates whatever is missing (trusted.py), so an
//! entry removed while another process uses it costs time, never a verdict; still, an entry used
//! in the last moments by another process stays (it is probably about to be read).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Default cap of the reference cache (`KSMITH_REFERENCE_CACHE_MB` overrides it).
pub const DEFAULT_CAP_BYTES: u64 = 1 << 30;

/// An entry another process used this recently is left alone.
pub const GRACE: Duration = Duration::from_secs(60);

/// Files left half-written by a killed process are this old before they are swept.
const ABANDONED: Duration = Duration::from_secs(60 * 60);

const INPUTS: &str = ".inputs.safetensors";
const REFERENCE: &str = ".ref.safetensors";
const META: &str = ".meta.json";

/// The cap in force: `KSMITH_REFERENCE_CACHE_MB` (whole MiB, at least 1) or the default.
pub fn cap_bytes() -> u64 {
    std::env::var("KSMITH_REFERENCE_CACHE_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&mb| mb >= 1)
        .map_or(DEFAULT_CAP_BYTES, |mb| mb.saturating_mul(1 << 20))
}

/// The entry a prepared inputs path belongs to: the path without its suffix (the identity
/// [`evict`]'s `protect` is asked about).
pub fn entry_of(inputs_path: &Path) -> PathBuf {
    let s = inputs_path.to_string_lossy();
    PathBuf::from(s.strip_suffix(INPUTS).unwrap_or(&s))
}

/// One (task, workload, seed) entry: its files that exist.
#[derive(Default)]
struct Entry {
    inputs: u64,
    reference: u64,
    meta: u64,
    /// The meta file's modification time (touched on every use), else the newest file's.
    last_used: Option<SystemTime>,
    has_meta: bool,
}

impl Entry {
    fn bytes(&self) -> u64 {
        self.inputs + self.reference + self.meta
    }
}

/// What the cache holds (and, after [`evict`], what was removed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// (task, workload, seed) entries.
    pub entries: u64,
    /// Bytes of inputs files.
    pub inputs_bytes: u64,
    /// Bytes of references and their metadata.
    pub reference_bytes: u64,
}

impl Usage {
    /// Every byte counted.
    pub fn bytes(&self) -> u64 {
        self.inputs_bytes + self.reference_bytes
    }
}

/// What [`evict`] did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Evicted {
    /// What is left.
    pub left: Usage,
    /// Entries removed whole.
    pub entries_removed: u64,
    /// Entries whose inputs were removed (their references kept).
    pub inputs_dropped: u64,
    /// Bytes removed, stray files included.
    pub freed: u64,
}

/// Every entry under `root` (`cache/reference`), by its path without suffix; stray files
/// (half-written by a killed process, older than an hour) are removed on the way when `sweep`.
fn scan(root: &Path, sweep: bool, freed: &mut u64) -> BTreeMap<PathBuf, Entry> {
    let mut entries: BTreeMap<PathBuf, Entry> = BTreeMap::new();
    let now = SystemTime::now();
    let old = |t: SystemTime| now.duration_since(t).unwrap_or_default() > ABANDONED;
    let dirs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    for digest in dirs(root) {
        for task in dirs(&digest) {
            let Ok(rd) = std::fs::read_dir(&task) else {
                continue;
            };
            for f in rd.flatten() {
                let Ok(meta) = f.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                let path = f.path();
                let name = f.file_name().to_string_lossy().into_owned();
                let modified = meta.modified().ok();
                let kind = [INPUTS, REFERENCE, META]
                    .into_iter()
                    .find(|suffix| name.ends_with(suffix));
                let Some(suffix) = kind else {
                    // `NAME.tmpPID`: a write-then-rename a killed process never finished.
                    if sweep && name.contains(".tmp") && modified.is_some_and(old) {
                        *freed += meta.len();
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                };
                let stem = task.join(&name[..name.len() - suffix.len()]);
                let e = entries.entry(stem).or_default();
                match suffix {
                    INPUTS => e.inputs = meta.len(),
                    REFERENCE => e.reference = meta.len(),
                    _ => {
                        e.meta = meta.len();
                        e.has_meta = true;
                    }
                }
                if suffix == META {
                    e.last_used = modified;
                } else if !e.has_meta {
                    e.last_used = e.last_used.max(modified);
                }
            }
        }
    }
    entries
}

fn usage<'a>(entries: impl Iterator<Item = &'a Entry>) -> Usage {
    let mut u = Usage::default();
    for e in entries {
        u.entries += 1;
        u.inputs_bytes += e.inputs;
        u.reference_bytes += e.reference + e.meta;
    }
    u
}

/// What the reference cache under `root` holds.
pub fn du(root: &Path) -> Usage {
    let mut freed = 0;
    usage(scan(root, false, &mut freed).values())
}

fn remove(stem: &Path, suffix: &str) -> bool {
    let mut p = stem.as_os_str().to_owned();
    p.push(suffix);
    match std::fs::remove_file(PathBuf::from(p)) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Removes least recently used entries under `root` until it holds at most `cap` bytes: first
/// their inputs (drawn again from the seed when next needed), then whole entries. An entry for
/// which `protect(entry, last_used)` holds stays (the judge protects those of its evaluation in
/// progress and those other processes used within [`GRACE`]); so does an entry whose files
/// are still being written. Empty directories go too.
pub fn evict(root: &Path, cap: u64, protect: &dyn Fn(&Path, SystemTime) -> bool) -> Evicted {
    let mut out = Evicted::default();
    let mut entries = scan(root, true, &mut out.freed);
    let now = SystemTime::now();
    // A reference or inputs file with no metadata yet: being written, unless abandoned.
    let orphans: Vec<PathBuf> = entries
        .iter()
        .filter(|(_, e)| {
            !e.has_meta
                && e.last_used
                    .is_some_and(|t| now.duration_since(t).unwrap_or_default() > ABANDONED)
        })
        .map(|(p, _)| p.clone())
        .collect();
    for stem in orphans {
        if let Some(e) = entries.remove(&stem) {
            if remove(&stem, INPUTS) && remove(&stem, REFERENCE) {
                out.freed += e.bytes();
            }
        }
    }
    let mut total: u64 = entries.values().map(Entry::bytes).sum();
    let mut order: Vec<(SystemTime, PathBuf)> = entries
        .iter()
        .filter(|(_, e)| e.has_meta)
        .map(|(p, e)| (e.last_used.unwrap_or(SystemTime::UNIX_EPOCH), p.clone()))
        .collect();
    order.sort();
    order.retain(|(t, p)| !protect(p, *t));
    // Inputs first: cheap to draw again.
    for (_, stem) in &order {
        if total <= cap {
            break;
        }
        let Some(e) = entries.get_mut(stem) else {
            continue;
        };
        if e.inputs > 0 && remove(stem, INPUTS) {
            total -= e.inputs;
            out.freed += e.inputs;
            out.inputs_dropped += 1;
            e.inputs = 0;
        }
    }
    for (_, stem) in &order {
        if total <= cap {
            break;
        }
        let Some(e) = entries.get(stem) else { continue };
        // The metadata last: an entry without it is never taken as complete.
        if remove(stem, REFERENCE) && remove(stem, INPUTS) && remove(stem, META) {
            total -= e.bytes();
            out.freed += e.bytes();
            out.entries_removed += 1;
            entries.remove(stem);
        }
    }
    remove_empty_dirs(root);
    out.left = usage(entries.values());
    out
}

/// Removes the task and digest directories left empty (never `root` itself).
fn remove_empty_dirs(root: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for digest in rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        if let Ok(tasks) = std::fs::read_dir(&digest) {
            for task in tasks.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
                // Fails (and is meant to) when not empty.
                let _ = std::fs::remove_dir(&task);
            }
        }
        let _ = std::fs::remove_dir(&digest);
    }
}

/// Whether an entry used at `last_used` by someone else counts as in use now.
pub fn recently_used(last_used: SystemTime) -> bool {
    SystemTime::now()
        .duration_since(last_used)
        .unwrap_or_default()
        < GRACE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(root: &Path, stem: &str, inputs: usize, reference: usize, ago: Duration) -> PathBuf {
        let dir = root.join("d".repeat(8)).join("t".repeat(8));
        std::fs::create_dir_all(&dir).unwrap();
        let stem = dir.join(stem);
        for (suffix, n) in [(INPUTS, inputs), (REFERENCE, reference), (META, 2)] {
            let mut p = stem.as_os_str().to_owned();
            p.push(suffix);
            std::fs::write(PathBuf::from(&p), vec![b'x'; n]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(SystemTime::now() - ago).unwrap();
        }
        stem
    }

    #[test]
    fn inputs_go_before_references_oldest_first_and_protected_entries_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let a = entry(tmp.path(), "w0_s1_h1", 1000, 1000, hour * 3);
        let b = entry(tmp.path(), "w0_s2_h1", 1000, 1000, hour * 2);
        let c = entry(tmp.path(), "w0_s3_h1", 1000, 1000, hour);
        assert_eq!(du(tmp.path()).bytes(), 6006);
        // Dropping a's and b's inputs is enough.
        let ev = evict(tmp.path(), 4100, &|_, _| false);
        assert_eq!((ev.inputs_dropped, ev.entries_removed), (2, 0));
        assert!(!Path::new(&format!("{}{INPUTS}", a.display())).exists());
        assert!(Path::new(&format!("{}{REFERENCE}", a.display())).exists());
        assert!(Path::new(&format!("{}{INPUTS}", c.display())).exists());
        // Now whole entries, oldest first, c protected.
        let ev = evict(tmp.path(), 0, &|p, _| p == c.as_path());
        assert_eq!(ev.entries_removed, 2);
        assert!(!Path::new(&format!("{}{META}", b.display())).exists());
        assert_eq!(ev.left.entries, 1);
        assert_eq!(du(tmp.path()).bytes(), 2002);
        let ev = evict(tmp.path(), 0, &|_, _| false);
        assert_eq!(ev.left, Usage::default());
        // Empty directories are gone, the root stays.
        assert!(tmp.path().exists());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
