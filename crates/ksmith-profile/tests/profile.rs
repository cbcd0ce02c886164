//! Real gcc, real perf: profiles starter-task kernels and misbehaving candidates.

use ksmith_profile::{profile_c, CpuProfile};
use ksmith_task::{Language, Solution, Task};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn task(name: &str) -> Task {
    Task::load(&repo().join("tasks/starter").join(name)).expect("starter task loads")
}

/// Whether `perf record` works on this machine (else sample assertions are skipped).
fn perf_works(p: &CpuProfile) -> bool {
    !p.notes.iter().any(|n| n.starts_with("perf unavailable"))
}

const BUDGET: Duration = Duration::from_millis(300);

#[test]
fn matmul_naive_hot_line_is_the_inner_loop() {
    let t = task("matmul");
    let s = Solution::load(&repo().join("tasks/starter/matmul/solutions/naive"), &t).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = profile_c(&t, &s, 0, &[], dir.path(), BUDGET).unwrap();
    eprintln!("{}", p.summary());
    assert!(p.calls >= 1 && p.seconds > 0.0, "{p:?}");
    assert_eq!(p.workload, "workload 0 (M=384, K=500, N=448)");
    // gcc reports the inner j-loop (line 12) as vectorized.
    assert!(
        p.vectorization
            .iter()
            .any(|n| n.file == "kernel.c" && n.vectorized),
        "{:?}",
        p.vectorization
    );
    assert!(p.vectorization.iter().any(|n| !n.vectorized));
    if !perf_works(&p) {
        eprintln!("perf unavailable here; skipping sample checks");
        return;
    }
    assert!(p.samples > 0, "{p:?}");
    let top = &p.hot_lines[0];
    assert_eq!(top.file, "kernel.c");
    assert!(
        top.text.contains("cr[j]") || top.text.contains("for (int64_t j"),
        "hottest line is not the inner loop: {top:?}"
    );
    assert!(top.percent > 20.0, "{top:?}");
    assert!(
        p.hot_symbols[0].symbol.starts_with("matmul [kernel.so"),
        "{:?}",
        p.hot_symbols
    );
    let summary = p.summary();
    assert!(summary.contains(&format!("kernel.c:{}", top.line)));
    assert!(summary.contains(&top.text));
    assert!(summary.lines().count() <= 60);
    assert!(p.notes.iter().any(|n| n.contains("software sampling")));
}

#[test]
fn intrinsics_are_attributed_to_the_calling_line() {
    let t = task("matmul");
    let src = r#"#include <immintrin.h>
#include <stdint.h>
void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    #pragma omp parallel for
    for (int64_t i = 0; i < M; i++) {
        float* cr = c + i * N;
        for (int64_t j = 0; j < N; j++) cr[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            __m256 av = _mm256_set1_ps(a[i * K + k]);
            const float* br = b + k * N;
            int64_t j = 0;
            for (; j + 8 <= N; j += 8)
                _mm256_storeu_ps(cr + j, _mm256_fmadd_ps(av, _mm256_loadu_ps(br + j), _mm256_loadu_ps(cr + j)));
            for (; j < N; j++) cr[j] += a[i * K + k] * br[j];
        }
    }
}
"#;
    let s = Solution::from_source(
        "simd",
        Language::C,
        "matmul",
        "kernel.c",
        src.into(),
        vec![],
    );
    let dir = tempfile::tempdir().unwrap();
    let p = profile_c(&t, &s, 0, &[], dir.path(), BUDGET).unwrap();
    eprintln!("{}", p.summary());
    if !perf_works(&p) {
        return;
    }
    assert!(p.samples > 0);
    // Every hot line is in the candidate's file, and the top one is the FMA line, not a header.
    assert!(p.hot_lines.iter().all(|h| h.file == "kernel.c"));
    // The FMA line (code inlined from fmaintrin.h/avxintrin.h) is one of the two hottest; the
    // other is its loop header (compare, increment, sampling skid).
    let fma = p
        .hot_lines
        .iter()
        .position(|h| h.text.contains("_mm256_fmadd_ps"));
    assert!(matches!(fma, Some(0 | 1)), "{:?}", p.hot_lines);
    assert!(
        p.hot_lines[fma.unwrap()].percent > 15.0,
        "{:?}",
        p.hot_lines
    );
    assert!(
        p.hot_symbols.iter().any(|h| h.symbol.contains("_omp_fn")),
        "{:?}",
        p.hot_symbols
    );
}

#[test]
fn softmax_naive_with_tunable_defines() {
    let t = task("softmax");
    let s = Solution::load(&repo().join("tasks/starter/softmax/solutions/naive"), &t).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let w = t.smallest_workload();
    let p = profile_c(
        &t,
        &s,
        w,
        &[("UNUSED_TUNABLE".into(), 4)],
        dir.path(),
        BUDGET,
    )
    .unwrap();
    eprintln!("{}", p.summary());
    assert!(p.calls >= 1);
    if perf_works(&p) {
        assert!(p.samples > 0);
        assert!(!p.hot_lines.is_empty());
    }
}

#[test]
fn a_crashing_kernel_is_a_note_not_an_error() {
    let t = task("matmul");
    let src = "#include <stdint.h>\nvoid matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {\n    volatile float* z = (float*)0;\n    c[0] = *z + a[0] + b[0] + (float)(M + K + N);\n}\n";
    let s = Solution::from_source(
        "crash",
        Language::C,
        "matmul",
        "kernel.c",
        src.into(),
        vec![],
    );
    let dir = tempfile::tempdir().unwrap();
    let p = profile_c(&t, &s, 0, &[], dir.path(), BUDGET).unwrap();
    eprintln!("{}", p.summary());
    assert_eq!(p.calls, 0);
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("crashed with SIGSEGV in call 1")),
        "{:?}",
        p.notes
    );
}

#[test]
fn a_hanging_kernel_returns_within_budget_plus_slack() {
    let t = task("matmul");
    let src = "#include <stdint.h>\nvoid matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {\n    volatile int64_t spin = 0;\n    for (;;) spin += M;\n}\n";
    let s = Solution::from_source(
        "hang",
        Language::C,
        "matmul",
        "kernel.c",
        src.into(),
        vec![],
    );
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let p = profile_c(&t, &s, 0, &[], dir.path(), BUDGET).unwrap();
    let took = start.elapsed();
    eprintln!("{}\n(took {took:?})", p.summary());
    // Watchdog at 3 * budget + 2 s, plus build and perf post-processing.
    assert!(took < Duration::from_secs(12), "took {took:?}");
    assert!(
        p.notes.iter().any(|n| n.contains("did not return within")),
        "{:?}",
        p.notes
    );
    if perf_works(&p) {
        assert!(p.samples > 0);
        assert!(
            p.hot_lines[0].text.contains("spin += M"),
            "{:?}",
            p.hot_lines
        );
    }
}

#[test]
fn a_candidate_that_does_not_build_is_a_note() {
    let t = task("matmul");
    let s = Solution::from_source(
        "broken",
        Language::C,
        "matmul",
        "kernel.c",
        "this is not C".into(),
        vec![],
    );
    let dir = tempfile::tempdir().unwrap();
    let p = profile_c(&t, &s, 0, &[], dir.path(), BUDGET).unwrap();
    assert!(p.notes[0].contains("did not build"), "{:?}", p.notes);
    assert!(matches!(
        profile_c(&t, &s, 99, &[], dir.path(), BUDGET),
        Err(ksmith_profile::ProfileError::NoWorkload { index: 99, .. })
    ));
}
