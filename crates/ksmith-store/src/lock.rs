//! One OS lock per agent run (`flock` on `STORE/locks/RUN.lock`), held for the whole life of the
//! process that drives the run: a second driver is refused at once, and a process that dies in
//! any way (SIGKILL included) releases it, since the kernel drops the lock with the process.
//! The holder writes its pid into the file, so a refusal and `ksmith runs` can name it.

use crate::{Store, StoreError};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;

/// The lock on one run; dropping it (or the process ending) releases it.
pub struct RunLock {
    _lock: Flock<File>,
}

/// Who drives a run right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunHolder {
    /// A live process holds the run's lock (its pid, when it has written it yet).
    Held(Option<u32>),
    /// Nobody: a run marked running was left by a process that is gone.
    Free,
}

impl Store {
    fn lock_path(&self, run: &str) -> Result<PathBuf, StoreError> {
        // Run ids are ours (`run-SECS-HEX`), but never let one name a path elsewhere.
        if run.is_empty() || !run.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(StoreError::Io {
                path: self.root.join("locks"),
                source: std::io::Error::other(format!("run id `{run}` is not a plain name")),
            });
        }
        Ok(self.root.join("locks").join(format!("{run}.lock")))
    }

    /// Takes the run's lock for this process, or says which process has it.
    pub fn lock_run(&self, run: &str) -> Result<RunLock, StoreError> {
        let path = self.lock_path(run)?;
        let io = |e: std::io::Error| StoreError::Io {
            path: path.clone(),
            source: e,
        };
        if self.read_only {
            return Err(StoreError::ReadOnly {
                root: self.root.clone(),
            });
        }
        std::fs::create_dir_all(path.parent().expect("lock path has a parent")).map_err(io)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                let mut f: &File = &lock;
                f.set_len(0).map_err(io)?;
                f.rewind().map_err(io)?;
                f.write_all(format!("{}\n", std::process::id()).as_bytes())
                    .map_err(io)?;
                Ok(RunLock { _lock: lock })
            }
            Err((mut file, Errno::EWOULDBLOCK)) => Err(StoreError::RunBusy {
                run: run.to_string(),
                pid: read_pid(&mut file),
            }),
            Err((_, e)) => Err(io(e.into())),
        }
    }

    /// Whether a live process drives the run (works on a read-only store).
    pub fn run_holder(&self, run: &str) -> RunHolder {
        let Ok(path) = self.lock_path(run) else {
            return RunHolder::Free;
        };
        let Ok(file) = File::open(&path) else {
            return RunHolder::Free; // never locked, or by a ksmith from before locks
        };
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(_probe) => RunHolder::Free, // released as `_probe` drops
            Err((mut file, Errno::EWOULDBLOCK)) => RunHolder::Held(read_pid(&mut file)),
            // Cannot tell: say it is held rather than offer to resume a live run.
            Err(_) => RunHolder::Held(None),
        }
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_locked_once_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.run_holder("run-1-abc"), RunHolder::Free);
        let lock = store.lock_run("run-1-abc").unwrap();
        // flock locks belong to the open file, so a second open in this process conflicts too.
        match store.lock_run("run-1-abc") {
            Err(StoreError::RunBusy { run, pid }) => {
                assert_eq!(run, "run-1-abc");
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("expected RunBusy, got {:?}", other.map(|_| ())),
        }
        assert_eq!(
            store.run_holder("run-1-abc"),
            RunHolder::Held(Some(std::process::id()))
        );
        drop(lock);
        assert_eq!(store.run_holder("run-1-abc"), RunHolder::Free);
        assert!(store.lock_run("run-1-abc").is_ok());
        assert!(store.lock_run("../x").is_err());
    }
}
