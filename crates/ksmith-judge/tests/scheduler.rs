//! Two judges in two threads of one process share one device, one timing a candidate alone
//! (`evaluate`), the other two side by side (`compare`): from the stage hooks' moments and the
//! scheduler's lease events, no judge's timing overlaps the other judge's timing, build or
//! checks, while their builds and checks do run side by side.

use ksmith_backend::c::Compiler;
use ksmith_backend::hw;
use ksmith_harness::PythonEnv;
use ksmith_judge::scheduler::{Access, Device, DeviceScheduler, LeaseEvent, Phase, Work};
use ksmith_judge::{Judge, JudgeConfig, Stage};
use ksmith_task::{Solution, Task};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// vector_add with two small workloads, so two debug-build judges time it in seconds.
fn small_vector_add(dest: &Path) -> PathBuf {
    let src = root().join("tasks/starter/vector_add");
    let dir = dest.join("vector_add");
    std::fs::create_dir_all(&dir).expect("task dir");
    let toml = std::fs::read_to_string(src.join("task.toml")).expect("task.toml");
    let head = toml.split("[[workloads]]").next().expect("task head");
    let workloads = "[[workloads]]\naxes = { N = 200000 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n\n[[workloads]]\naxes = { N = 100003 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"normal\", mean = 1.0, std = 1.0 }\n";
    std::fs::write(dir.join("task.toml"), format!("{head}{workloads}")).expect("write task");
    std::fs::copy(src.join("reference.py"), dir.join("reference.py")).expect("reference");
    dir
}

/// Something a judge did, at a moment.
#[derive(Debug, Clone, Copy)]
enum Seen {
    Stage(Stage),
    Lease(LeaseEvent),
}

#[test]
fn two_judges_never_time_while_the_other_builds_checks_or_times() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task_dir = small_vector_add(tmp.path());
    let task = Task::load(&task_dir).expect("task");
    let sols = root().join("tasks/starter/vector_add/solutions");
    let fast = Solution::load(&sols.join("fast"), &task).expect("fast solution");
    let naive = Solution::load(&sols.join("naive"), &task).expect("naive solution");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let compiler = Compiler::detect().expect("a C compiler");
    // The roofline the CLI tests measured, when they did (measured here otherwise).
    let hw_path = root().join("target/ksmith-test-store/hw.json");
    let (hw, _) = hw::load_or_measure(&hw_path, &compiler, threads, false).expect("roofline");
    let env = PythonEnv::resolve(None, &|_| {}).expect("python environment");
    let locks = tmp.path().join("store/locks");
    let seen: Arc<Mutex<Vec<(usize, Instant, Seen)>>> = Arc::default();
    let mut judges = Vec::new();
    for j in 0..2 {
        let mut config = JudgeConfig::new(tmp.path().join("store/cache"), threads);
        config.min_time = Duration::from_millis(30);
        let mut judge = Judge::new(config, env.clone(), compiler.clone(), hw.clone());
        // Each judge its own scheduler on the same lock files, as two processes would have.
        let s = Arc::clone(&seen);
        let sched = DeviceScheduler::open(&locks, Device::Cpu)
            .expect("lock files")
            .with_observer(Arc::new(move |e: &LeaseEvent| {
                s.lock().expect("seen").push((j, e.at, Seen::Lease(*e)))
            }));
        judge.set_scheduler(Some(Arc::new(sched)));
        let s = Arc::clone(&seen);
        judge.set_stage_hook(Some(Box::new(move |_, stage| {
            s.lock()
                .expect("seen")
                .push((j, Instant::now(), Seen::Stage(stage)))
        })));
        judges.push(judge);
    }
    // References computed and both trusted processes started before the race begins, so the
    // two evaluations start together.
    for judge in &mut judges {
        judge.validate_task(&task).expect("task validates");
        judge.prepared_inputs(&task, 0).expect("inputs");
    }
    let barrier = Arc::new(Barrier::new(2));
    let runs: Vec<_> = judges
        .into_iter()
        .enumerate()
        .map(|(j, mut judge)| {
            let (task, fast, naive) = (task.clone(), fast.clone(), naive.clone());
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                // One judge times a candidate alone, the other two side by side.
                if j == 0 {
                    vec![judge.evaluate(&task, &fast).expect("evaluation")]
                } else {
                    judge
                        .compare(&task, &[naive, fast])
                        .expect("comparison")
                        .results
                }
            })
        })
        .collect();
    let results: Vec<_> = runs
        .into_iter()
        .flat_map(|r| r.join().expect("judge thread"))
        .collect();
    assert_eq!(results.len(), 3);
    for r in &results {
        assert_eq!(r.status.as_str(), "PASSED", "{:?} {:?}", r.reason, r.detail);
        assert!(r.performance.is_some(), "timed");
        assert!(r.time_split.device_wait_s >= 0.0);
    }
    let seen = seen.lock().expect("seen").clone();

    // Leases per judge: (judge, access, work, start, end).
    let leases: Vec<(usize, Access, Work, Instant, Instant)> = seen
        .iter()
        .filter_map(|&(j, at, s)| match s {
            Seen::Lease(e) if e.phase == Phase::Acquired => {
                let end = seen
                    .iter()
                    .find_map(|&(k, t, s)| match s {
                        Seen::Lease(r)
                            if k == j && r.lease == e.lease && r.phase == Phase::Released =>
                        {
                            Some(t)
                        }
                        _ => None,
                    })
                    .expect("every lease released");
                Some((j, e.access, e.work, at, end))
            }
            _ => None,
        })
        .collect();
    // What each judge did, from its stage hook: a stage runs from the moment it was entered to
    // the end of the lease it was entered under (which must exist, of the right kind).
    let mut timing = Vec::new();
    let mut sharing = Vec::new();
    for &(j, at, s) in &seen {
        let Seen::Stage(stage) = s else { continue };
        let lease = leases
            .iter()
            .find(|l| l.0 == j && l.3 <= at && at <= l.4)
            .unwrap_or_else(|| panic!("judge {j} entered {stage:?} holding no lease"));
        match stage {
            Stage::Timing => {
                assert_eq!(lease.2, Work::Timing, "judge {j} timed under {lease:?}");
                timing.push((j, at, lease.4));
            }
            Stage::Build | Stage::Load | Stage::QuickCheck | Stage::FullCheck => {
                assert_eq!(lease.1, Access::Shared, "{stage:?} of judge {j}");
                sharing.push((j, at, lease.4));
            }
            Stage::Policy | Stage::Done => {}
        }
    }
    // Judge 0 timed its candidate, judge 1 its two in shared rounds under one lease.
    assert_eq!(timing.len(), 3, "{timing:?}");
    assert_eq!(timing.iter().filter(|t| t.0 == 1).count(), 2, "{timing:?}");
    assert!(sharing.len() >= 8, "{sharing:?}");
    let overlap = |a: (usize, Instant, Instant), b: (usize, Instant, Instant)| {
        a.0 != b.0 && a.1 < b.2 && b.1 < a.2
    };
    for &t in &timing {
        for &o in timing.iter().chain(&sharing) {
            assert!(!overlap(t, o), "timing {t:?} overlaps {o:?}");
        }
    }
    // Whatever a judge held alone (calibration, timing), the other held nothing meanwhile.
    for a in leases.iter().filter(|l| l.1 == Access::Exclusive) {
        for b in &leases {
            assert!(
                !overlap((a.0, a.3, a.4), (b.0, b.3, b.4)),
                "{a:?} overlaps {b:?}"
            );
        }
    }
    // The test is not vacuous: the two judges did share the device at some point.
    let shared: Vec<_> = leases.iter().filter(|l| l.1 == Access::Shared).collect();
    assert!(
        shared.iter().any(|a| shared
            .iter()
            .any(|b| overlap((a.0, a.3, a.4), (b.0, b.3, b.4)))),
        "builds and checks never ran side by side: {leases:?}"
    );
    for r in &results {
        eprintln!(
            "{}: waited {:.3} s for the device, {:.1} s in all",
            r.solution, r.time_split.device_wait_s, r.elapsed_s
        );
    }
}
