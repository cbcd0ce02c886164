//! The build cache kept to a size: every distinct candidate leaves a library behind, so without
//! a cap a long search (or a candidate with a large table) fills the disk. Least recently used
//! builds go first; a build used in the last minutes stays whatever the size (another process
//! may be about to copy it), and staging directories left by killed builds are swept.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Default cap of a build cache (`KSMITH_BUILD_CACHE_MB` overrides it).
pub const DEFAULT_CAP_BYTES: u64 = 2 << 30;

/// A build used this recently is never evicted.
const IN_USE: Duration = Duration::from_secs(10 * 60);

/// A staging directory this old belongs to a build that was killed.
const ABANDONED: Duration = Duration::from_secs(60 * 60);

/// The cap in force: `KSMITH_BUILD_CACHE_MB` (whole MiB, at least 1) or the default.
pub fn cap_bytes() -> u64 {
    std::env::var("KSMITH_BUILD_CACHE_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&mb| mb >= 1)
        .map_or(DEFAULT_CAP_BYTES, |mb| mb.saturating_mul(1 << 20))
}

/// Marks a build as used now (its hash file's modification time is its last use).
pub fn touch(build_dir: &Path) {
    if let Ok(f) = std::fs::File::options()
        .write(true)
        .open(build_dir.join(super::LIBRARY_HASH))
    {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// One cached build.
struct Entry {
    dir: PathBuf,
    bytes: u64,
    last_used: SystemTime,
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Removes least recently used builds from `cache_dir` until it holds at most `cap` bytes
/// (builds used within the last minutes, and `keep`, stay); returns the bytes removed.
pub fn evict(cache_dir: &Path, cap: u64, keep: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(cache_dir) else {
        return 0;
    };
    let now = SystemTime::now();
    let age = |t: SystemTime| now.duration_since(t).unwrap_or_default();
    let mut entries = Vec::new();
    let mut freed = 0;
    for e in rd.flatten() {
        let path = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(".build-") {
            let stale = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| age(t) > ABANDONED);
            if stale {
                freed += dir_bytes(&path);
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        // Only this module's own entries (a build with its hash file) are sized and evicted.
        let Ok(last_used) =
            std::fs::metadata(path.join(super::LIBRARY_HASH)).and_then(|m| m.modified())
        else {
            continue;
        };
        entries.push(Entry {
            bytes: dir_bytes(&path),
            dir: path,
            last_used,
        });
    }
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    entries.sort_by_key(|e| e.last_used);
    for e in entries {
        if total <= cap {
            break;
        }
        if e.dir == keep || age(e.last_used) < IN_USE {
            continue;
        }
        if std::fs::remove_dir_all(&e.dir).is_ok() {
            total = total.saturating_sub(e.bytes);
            freed += e.bytes;
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(root: &Path, name: &str, bytes: usize, used_ago: Duration) -> PathBuf {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("kernel.so"), vec![0u8; bytes]).unwrap();
        std::fs::write(d.join(super::super::LIBRARY_HASH), "h").unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(d.join(super::super::LIBRARY_HASH))
            .unwrap();
        f.set_modified(SystemTime::now() - used_ago).unwrap();
        d
    }

    #[test]
    fn least_recently_used_builds_go_first_and_recent_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let oldest = build(tmp.path(), "a", 1000, hour * 3);
        let older = build(tmp.path(), "b", 1000, hour * 2);
        let old = build(tmp.path(), "c", 1000, hour);
        let fresh = build(tmp.path(), "d", 1000, Duration::ZERO);
        // Not ours: left alone.
        std::fs::create_dir_all(tmp.path().join("python-module")).unwrap();
        std::fs::write(tmp.path().join("python-module/x.py"), vec![b'x'; 5000]).unwrap();
        // A killed build's staging directory, two hours old.
        let staging = tmp.path().join(".build-x");
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("kernel.so"), vec![0u8; 1000]).unwrap();
        std::fs::File::open(&staging)
            .unwrap()
            .set_modified(SystemTime::now() - hour * 2)
            .unwrap();

        let freed = evict(tmp.path(), 2100, &older);
        assert!(!oldest.exists(), "the least recently used goes");
        assert!(older.exists(), "the one being used is kept");
        assert!(!old.exists(), "then the next least recently used");
        assert!(fresh.exists(), "a build used minutes ago stays");
        assert!(!staging.exists(), "an abandoned staging directory is swept");
        assert!(tmp.path().join("python-module/x.py").exists());
        assert!(freed >= 3000, "{freed}");

        // Under the cap nothing more goes; a touched build counts as just used.
        touch(&older);
        assert_eq!(evict(tmp.path(), 2100, Path::new("/")), 0);
        assert!(older.exists() && fresh.exists());
    }
}
