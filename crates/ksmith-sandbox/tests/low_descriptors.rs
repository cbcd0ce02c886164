//! A process whose descriptors 3 and 4 are free (a cluster worker started by Ray is one):
//! the child's Landlock ruleset and scratch rule then take those numbers in the parent, the
//! very numbers the timing channel is placed at in the child. Its own test binary, so that
//! nothing else in the process holds them.

use ksmith_sandbox::{isolation, Limits, Recv, Sandboxed};
use std::path::Path;
use std::time::Duration;

#[test]
fn a_timed_child_with_scratch_starts_when_descriptors_3_and_4_are_free() {
    if !isolation().complete() || !isolation().user_namespace {
        eprintln!("skipping: {}", isolation().note);
        return;
    }
    for fd in [3, 4] {
        // SAFETY: fcntl(F_GETFD) only asks whether the number is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
            eprintln!("descriptor {fd} is open in this test process; closing it for the test");
            // SAFETY: nothing in this single-test binary uses a descriptor it did not open.
            unsafe { libc::close(fd) };
        }
    }
    // Descriptors opened and closed all the time on another thread (as a busy worker's other
    // judges do): the low numbers are taken while a spawn opens its log and free again by the
    // time it makes its ruleset, which then lands at 3 or 4.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let a = std::fs::File::open("/dev/null").unwrap();
                let b = std::fs::File::open("/dev/null").unwrap();
                std::thread::yield_now();
                drop((a, b));
                std::thread::yield_now();
            }
        })
    };
    let threads: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                for round in 0..25 {
                    let limits = Limits {
                        scratch_bytes: Some(4 << 20),
                        timing_channel: true,
                        ..Limits::default()
                    };
                    let mut s = Sandboxed::spawn(
                        Path::new("/bin/sh"),
                        &["-c".into(), "read x; echo ok > f; cat f".into()],
                        &limits,
                    )
                    .unwrap_or_else(|e| panic!("thread {t} round {round}: {e}"));
                    s.send("go").unwrap();
                    match s.recv(Duration::from_secs(10)) {
                        Recv::Line(l) => assert_eq!(l, "ok", "thread {t} round {round}"),
                        other => panic!("thread {t} round {round}: {other:?}: {}", s.log(2000)),
                    }
                    s.finish(Duration::from_secs(5));
                }
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    for r in results {
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
    }
}
