//! One sandboxed runner for the variants of one solution (the tuner's configurations): the
//! runner, its calibrated channel and a directory of the libraries it may load are kept after
//! a clean evaluation, and the next variant is loaded into the same process.
//!
//! Why isolation allows it: the variants share every source file and differ only in `-D`
//! values, so whatever one could leave behind for the next (threads, memory, files in its
//! directory) the next could do itself; the judge's clock, fresh inputs, checks and the
//! stopped sandbox between calls do not depend on the runner being new. A runner that failed
//! anything is never kept, and the tuner's finalists are re-judged in fresh runners.

use crate::measure::ChannelCost;
use ksmith_harness::Peer;
use ksmith_task::{Solution, Task};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Most variants one runner judges: libraries are never unloaded (OpenMP's cannot be), and a
/// fresh process now and then bounds what has piled up.
pub(crate) const MAX_LOADS: usize = 24;

/// What makes two candidates variants of one another: the task (with its workload set), the
/// entry point and every source, not the flags.
pub(crate) fn family(task: &Task, solution: &Solution) -> String {
    let mut h = ksmith_task::FieldHasher::new("ksmith runner family v1");
    h.field(&task.content_hash)
        .field(&solution.entry_point)
        .field(solution.language.name())
        .field((solution.sources.len() as u64).to_le_bytes());
    for (name, text) in &solution.sources {
        h.field(name).field(text);
    }
    h.hex()
}

/// A directory the runner may read (and nothing else of the build cache): each variant's
/// library is copied in under a name of its own before it is loaded (a second `dlopen` of one
/// path returns the first library).
pub(crate) struct Libraries {
    dir: tempfile::TempDir,
    count: usize,
}

impl Libraries {
    /// An empty directory under `parent`, readable by the sandbox's user.
    pub(crate) fn new(parent: &Path) -> std::io::Result<Libraries> {
        std::fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new().prefix("r").tempdir_in(parent)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        Ok(Libraries { dir, count: 0 })
    }

    /// The directory (for the sandbox's view).
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies `library` in; returns the copy's path.
    pub(crate) fn add(&mut self, library: &Path) -> std::io::Result<PathBuf> {
        let to = self.dir.path().join(format!("v{}.so", self.count));
        std::fs::copy(library, &to)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
        self.count += 1;
        Ok(to)
    }

    /// Libraries loaded so far.
    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

/// A runner kept, frozen, for the next variant of its family.
pub(crate) struct Kept {
    pub(crate) runner: Peer,
    pub(crate) family: String,
    pub(crate) channel: ChannelCost,
    pub(crate) libraries: Libraries,
    /// Wall seconds of the evaluations it ran: with every thread busy, a bound on the CPU time
    /// it used of its limit (a fresh runner follows before a variant could run out of it).
    pub(crate) busy_s: f64,
}

impl Kept {
    /// Whether the next candidate of `family` may be loaded into this runner, whose CPU limit
    /// is `cpu_seconds` and which runs `threads` threads: not past half its limit, counting
    /// every thread busy the whole time.
    pub(crate) fn takes(&self, family: &str, cpu_seconds: u64, threads: usize) -> bool {
        self.family == family
            && self.libraries.count() < MAX_LOADS
            && self.busy_s * (threads.max(1) as f64) < cpu_seconds as f64 / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_share_a_family_and_other_sources_do_not() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let task = Task::load(&repo.join("tasks/starter/vector_add")).unwrap();
        let sol = |src: &str| Solution {
            name: "s".into(),
            language: ksmith_task::Language::C,
            entry_point: "vector_add".into(),
            sources: vec![("kernel.c".into(), src.into())],
            flags: vec![],
            tunables: vec![],
            content_hash: String::new(),
        };
        let a = sol("#ifndef B\n#define B 4\n#endif\nvoid vector_add(void) {}\n");
        let b = a.variant("s[B=8]", &["-DB=8".to_string()]);
        assert_eq!(family(&task, &a), family(&task, &b));
        assert_ne!(
            family(&task, &a),
            family(&task, &sol("void vector_add(void) { }\n"))
        );
        let mut other_entry = a.clone();
        other_entry.entry_point = "other".into();
        assert_ne!(family(&task, &a), family(&task, &other_entry));
    }

    #[test]
    fn each_library_gets_a_name_of_its_own_the_sandbox_can_read() {
        let cache = tempfile::tempdir().unwrap();
        let lib = cache.path().join("kernel.so");
        std::fs::write(&lib, b"\x7fELF").unwrap();
        let mut libs = Libraries::new(cache.path()).unwrap();
        let one = libs.add(&lib).unwrap();
        let two = libs.add(&lib).unwrap();
        assert_ne!(one, two);
        assert_eq!(libs.count(), 2);
        assert!(one.starts_with(libs.path()));
        let mode = std::fs::metadata(libs.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o005, 0o005, "others may list and enter: {mode:o}");
        let gone = libs.path().to_path_buf();
        drop(libs);
        assert!(!gone.exists(), "removed with the runner");
    }
}
