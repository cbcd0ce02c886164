//! Keeps the machine's CPUs awake while a candidate is timed. On a VM an idle virtual CPU is
//! halted and handed back to the host, and the next thread scheduled on it waits for the host
//! to run it again: measured here, 2 to 15 ms after the judge spent a few milliseconds filling
//! a call's buffers, against 0.5-1 ms kernels. Spinning threads at the lowest scheduling class
//! (`SCHED_IDLE`) keep every CPU running without taking time from anyone: any other thread
//! that wakes up preempts them at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Spinning idle-class threads, one per CPU, until dropped.
pub(crate) struct KeepAwake {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl KeepAwake {
    /// Starts one spinner per CPU. Where the idle class is refused, no spinner runs (a
    /// normal-priority spinner would take CPU time from the kernel being timed).
    pub(crate) fn start() -> KeepAwake {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..n)
            .filter_map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::Builder::new()
                    .name("ksmith-keepawake".into())
                    .spawn(move || {
                        if !idle_class() {
                            return;
                        }
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .ok()
            })
            .collect();
        KeepAwake { stop, threads }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Moves the calling thread to `SCHED_IDLE`; whether that worked.
fn idle_class() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
}
