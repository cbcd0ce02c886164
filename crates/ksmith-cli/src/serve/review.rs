//! The web page's side of human-in-the-loop review, as files a run and `ksmith serve` share:
//! a run started with `--review web` writes the artifact it waits on to
//! `STORE/serve/RUN/review-pending.json` and polls `review-answer.json`, which the page's
//! answer writes. Files, not a socket: the run and the server are separate processes that may
//! start and stop in any order (a server restarted mid-review finds the question still there),
//! and the answer is the same [`Verdict`] the terminal gives, journaled by the same loop.

use anyhow::{anyhow, Context, Result};
use ksmith_search::agent::state::{Reviewer, Verdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory `ksmith serve` keeps a run's files in (review files, events, log).
pub(crate) fn serve_dir(store: &Path, run: &str) -> PathBuf {
    store.join("serve").join(run)
}

/// Where a run's pending review is written.
pub(crate) fn pending_path(store: &Path, run: &str) -> PathBuf {
    serve_dir(store, run).join("review-pending.json")
}

/// Where the page's answer is written.
pub(crate) fn answer_path(store: &Path, run: &str) -> PathBuf {
    serve_dir(store, run).join("review-answer.json")
}

/// What a run waits on: one artifact to approve, edit, reject with guidance, or stop at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingReview {
    /// Unique per question, so a late answer to an earlier one is never taken for this one.
    pub id: String,
    /// The run.
    pub run: String,
    /// The loop's step (`iter 1 plan`).
    pub step: String,
    /// What the artifact is (`plan`, `diff`, `tuning space`).
    pub what: String,
    /// The artifact as shown (model text: escape before showing).
    pub shown: String,
    /// The text an edit starts from.
    pub editable: String,
    /// When it was asked (Unix seconds).
    pub asked_at: u64,
    /// The process that asks (a question left by a process that is gone is not pending).
    pub pid: u32,
}

/// The page's answer to one pending review.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReviewAnswer {
    /// The [`PendingReview::id`] it answers.
    pub id: String,
    /// The decision, as the terminal would give it.
    pub verdict: Verdict,
}

/// Writes `value` as JSON to `path` atomically (a temporary file renamed over it), so a reader
/// polling the path sees the whole document or nothing.
pub(crate) fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("a temporary file in {}", dir.display()))?;
    serde_json::to_writer(&mut tmp, value).context("writing JSON")?;
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Reads the JSON document at `path`; None when there is none.
pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("reading {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The review the run waits on: the question file, when the process that wrote it still holds
/// the run (one killed while asking leaves its file behind; its resumed run asks anew).
pub(crate) fn pending(store: &Path, run: &str) -> Result<Option<PendingReview>> {
    let Some(p) = read_json::<PendingReview>(&pending_path(store, run))? else {
        return Ok(None);
    };
    let holder = ksmith_store::Store::open_read(store)
        .map(|s| s.run_holder(run))
        .context("reading the run's lock")?;
    Ok(match holder {
        ksmith_store::RunHolder::Held(Some(pid)) if pid != p.pid => None,
        ksmith_store::RunHolder::Held(_) => Some(p),
        ksmith_store::RunHolder::Free => None,
    })
}

/// Answers the pending review `id` of `run`; refused when the run waits on no such question
/// (already answered, or a page showing an older one).
pub(crate) fn answer(store: &Path, run: &str, id: &str, verdict: Verdict) -> Result<()> {
    match pending(store, run)? {
        Some(p) if p.id == id => write_json_atomic(
            &answer_path(store, run),
            &ReviewAnswer {
                id: id.to_string(),
                verdict,
            },
        ),
        Some(_) => Err(anyhow!(
            "run {run} now waits on another review; reload the page"
        )),
        None => Err(anyhow!("run {run} waits on no review")),
    }
}

/// A reviewer that asks through the files above and waits for the page's answer.
pub(crate) struct WebReviewer {
    /// The store directory.
    pub store: PathBuf,
    /// The run.
    pub run: String,
}

impl WebReviewer {
    /// How often the answer file is looked at: a person's answer, so a fraction of a second
    /// is prompt, and a poll costs one failed open.
    const POLL: Duration = Duration::from_millis(200);
}

impl Reviewer for WebReviewer {
    fn review(&self, step: &str, what: &str, shown: &str, editable: &str) -> Result<Verdict> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let id = ksmith_task::content_hash(
            format!(
                "{}-{}-{step}-{}",
                self.run,
                now.as_nanos(),
                std::process::id()
            )
            .as_bytes(),
        )[..16]
            .to_string();
        let answer_file = answer_path(&self.store, &self.run);
        // An answer left from an earlier question is stale by construction (another id);
        // removing it first keeps the directory readable.
        let _ = std::fs::remove_file(&answer_file);
        let pending_file = pending_path(&self.store, &self.run);
        write_json_atomic(
            &pending_file,
            &PendingReview {
                id: id.clone(),
                run: self.run.clone(),
                step: step.to_string(),
                what: what.to_string(),
                shown: shown.to_string(),
                editable: editable.to_string(),
                asked_at: now.as_secs(),
                pid: std::process::id(),
            },
        )?;
        note!(
            "ksmith: {step}: waiting for a review of the {what} on the web page (`ksmith serve`)"
        );
        loop {
            // A half-written or foreign file is not an answer; keep waiting for one that is.
            if let Ok(Some(a)) = read_json::<ReviewAnswer>(&answer_file) {
                if a.id == id {
                    let _ = std::fs::remove_file(&pending_file);
                    let _ = std::fs::remove_file(&answer_file);
                    return Ok(a.verdict);
                }
            }
            std::thread::sleep(Self::POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_web_review_is_answered_through_the_files() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().to_path_buf();
        // The run's lock, held as its driving process holds it (the question is pending
        // only while it is).
        let s = ksmith_store::Store::open(&store).unwrap();
        let lock = s.lock_run("run-1-abc").unwrap();
        let r = WebReviewer {
            store: store.clone(),
            run: "run-1-abc".into(),
        };
        let waiter = std::thread::spawn(move || r.review("iter 1 plan", "plan", "P", "P"));
        let p = loop {
            if let Some(p) = pending(&store, "run-1-abc").unwrap() {
                break p;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(p.what, "plan");
        assert!(answer(&store, "run-1-abc", "not-this-one", Verdict::Approve).is_err());
        answer(
            &store,
            "run-1-abc",
            &p.id,
            Verdict::Guidance("smaller".into()),
        )
        .unwrap();
        let v = waiter.join().unwrap().unwrap();
        assert_eq!(v, Verdict::Guidance("smaller".into()));
        assert!(pending(&store, "run-1-abc").unwrap().is_none());
        // A question left by a process that no longer holds the run is not pending.
        write_json_atomic(&pending_path(&store, "run-1-abc"), &p).unwrap();
        assert!(pending(&store, "run-1-abc").unwrap().is_some());
        drop(lock);
        assert!(pending(&store, "run-1-abc").unwrap().is_none());
    }
}
