use super::*;

const MIB: u64 = 1 << 20;

fn machine(cores: usize, load: Option<f64>, dram: f64) -> Hardware {
    Hardware {
        format: HW_FORMAT,
        cpu: "test".into(),
        cores,
        // What a VM reported: the whole socket's L3, far beyond this machine's share.
        caches: vec![CacheLevel {
            level: 3,
            kind: "Unified".into(),
            bytes: 480 * MIB,
        }],
        simd: vec![],
        compilers: vec![],
        dram_bandwidth: dram,
        streams: vec![StreamFigure {
            kernel: StreamKernel::Triad,
            stores: Stores::Streaming,
            threads: cores,
            bytes_per_s: dram,
        }],
        sweep: vec![],
        levels: vec![
            MemoryLevel {
                capacity_bytes: 64 << 10,
                bandwidth: dram * 40.0,
            },
            MemoryLevel {
                capacity_bytes: 2 * MIB,
                bandwidth: dram * 16.0,
            },
            MemoryLevel {
                capacity_bytes: 32 * MIB,
                bandwidth: dram * 8.0,
            },
        ],
        peak_fp32_flops: 1e11,
        vector_bits: 256,
        threads: cores,
        measured_at: 0,
        load_at_measure: load,
        method: Method {
            device_lock: DeviceLock::Exclusive,
            stream_bytes: 256 * MIB,
            sweep_bytes: (16 << 10, 1 << 30),
            nontemporal: "avx".into(),
            seconds: 3.0,
        },
        raises: vec![],
        fingerprint: "f".into(),
    }
}

fn by() -> RaisedBy {
    RaisedBy {
        task: "vector_add".into(),
        solution: "fast".into(),
        solution_hash: "abc".into(),
        workload: 1,
    }
}

fn point(bytes: u64, gbps: f64) -> SweepPoint {
    SweepPoint {
        bytes,
        bytes_per_s: gbps * 1e9,
    }
}

#[test]
fn a_measurement_taken_on_a_busy_machine_is_taken_again_once_it_is_quiet() {
    let busy = machine(2, Some(1.5), 5e9);
    assert!(busy.looks_disturbed());
    assert!(busy.remeasure_when(Some(0.2)));
    assert!(
        !busy.remeasure_when(Some(1.8)),
        "still busy: no better figure to get"
    );
    assert!(!busy.remeasure_when(None));
    let quiet = machine(2, Some(0.3), 5e9);
    assert!(!quiet.looks_disturbed());
    assert!(!quiet.remeasure_when(Some(0.0)));
    // Old records without a load are left alone.
    assert!(!machine(2, None, 5e9).remeasure_when(Some(0.0)));
}

#[test]
fn merging_keeps_the_higher_peaks_and_the_quieter_load() {
    let mut a = machine(2, Some(1.5), 5e9);
    a.merge_max(&machine(2, Some(0.1), 12e9));
    assert_eq!(a.dram_bandwidth, 12e9);
    assert_eq!(a.load_at_measure, Some(0.1));
    assert!(!a.looks_disturbed());
    let mut b = machine(2, Some(0.1), 12e9);
    b.merge_max(&machine(2, Some(1.9), 3e9));
    assert_eq!(b.dram_bandwidth, 12e9);
    assert_eq!(b.load_at_measure, Some(0.1));
    assert_eq!(
        b.stream(StreamKernel::Triad, Stores::Streaming, 2),
        Some(12e9)
    );
}

/// The sweep measured on a 2-core Zen 5 VM (GB/s): L1 to 90 KiB, L2 to 1.4 MiB, a step, L3 to
/// 32 MiB, a share of the neighbours' L3 to 90 MiB, then DRAM at about 80 GB/s read.
fn zen5_sweep() -> Vec<SweepPoint> {
    [
        (16384, 1024.0),
        (32768, 1041.0),
        (65536, 1052.0),
        (92160, 1053.0),
        (131072, 387.0),
        (262144, 401.0),
        (524288, 398.0),
        (1048576, 519.0),
        (1482752, 457.0),
        (2097152, 333.0),
        (2965504, 260.0),
        (4194304, 229.0),
        (8388608, 214.0),
        (16777216, 209.0),
        (33554432, 182.0),
        (47452160, 159.0),
        (67108864, 160.0),
        (94905344, 141.0),
        (134217728, 108.0),
        (268435456, 75.0),
        (536870912, 78.0),
        (1073741824, 81.0),
    ]
    .into_iter()
    .map(|(b, g)| point(b, g))
    .collect()
}

#[test]
fn levels_are_cut_where_the_measured_bandwidth_drops_and_end_at_dram() {
    let levels = derive_levels(&zen5_sweep(), 117e9);
    let caps: Vec<u64> = levels.iter().map(|l| l.capacity_bytes).collect();
    assert_eq!(
        caps,
        [92160, 1482752, 2965504, 33554432, 94905344],
        "{levels:?}"
    );
    // A level's bandwidth is the best of its sets, a lower point before a higher one lifted.
    assert_eq!(levels[1].bandwidth, 519e9);
    assert_eq!(levels[0].bandwidth, 1053e9);
    // Every level is faster than DRAM and they only slow down.
    assert!(levels.windows(2).all(|w| w[0].bandwidth > w[1].bandwidth));
    assert!(levels.iter().all(|l| l.bandwidth > 117e9));
}

#[test]
fn a_disturbed_point_does_not_make_a_level_and_a_flat_sweep_has_none() {
    let mut sweep = zen5_sweep();
    // Preempted mid-L3: read far below its neighbours.
    sweep[13].bytes_per_s = 20e9;
    let caps: Vec<u64> = derive_levels(&sweep, 117e9)
        .iter()
        .map(|l| l.capacity_bytes)
        .collect();
    assert_eq!(caps, [92160, 1482752, 2965504, 33554432, 94905344]);
    let flat: Vec<SweepPoint> = (0..10).map(|i| point(16384 << i, 20.0)).collect();
    assert!(derive_levels(&flat, 20e9).is_empty());
    assert!(derive_levels(&[], 20e9).is_empty());
}

#[test]
fn the_floor_uses_measured_capacities_never_the_reported_cache() {
    let hw = machine(2, Some(0.1), 25e9);
    assert_eq!(hw.llc_bytes(), 480 * MIB);
    assert_eq!(hw.effective_llc_bytes(), 32 * MIB);
    // 100 MiB fits the reported 480 MiB L3 but no measured level: DRAM.
    let big = 100.0 * MIB as f64;
    assert_eq!(hw.memory_term(big, false), FloorTerm::Dram);
    assert_eq!(hw.bandwidth_for(big, false), 25e9);
    // 1 MiB not evicted: the 2 MiB level; evicted: DRAM.
    let small = MIB as f64;
    assert_eq!(
        hw.memory_term(small, false),
        FloorTerm::Cache {
            capacity_bytes: 2 * MIB
        }
    );
    assert_eq!(hw.bandwidth_for(small, false), 25e9 * 16.0);
    assert_eq!(hw.bandwidth_for(small, true), 25e9);
    // Exactly the capacity still fits.
    assert_eq!(hw.bandwidth_for((64 << 10) as f64, false), 25e9 * 40.0);
    // Compute-bound: FLOPs / peak.
    let f = hw.floor(1e9, small, true);
    assert_eq!(f.term, FloorTerm::Compute);
    assert!((f.seconds - 1e-2).abs() < 1e-12);
    let f = hw.floor(0.0, big, true);
    assert_eq!(f.term, FloorTerm::Dram);
    assert!((f.seconds - big / 25e9).abs() < 1e-15);
}

#[test]
fn a_cache_level_measured_below_dram_is_never_the_floor() {
    let mut hw = machine(2, None, 25e9);
    hw.levels[2].bandwidth = 10e9;
    assert_eq!(hw.bandwidth_for(16.0 * MIB as f64, false), 25e9);
}

#[test]
fn a_kernel_beating_the_floor_raises_it_to_its_own_rate_and_is_recorded() {
    let mut hw = machine(2, None, 25e9);
    let bytes = 400.0 * MIB as f64;
    let floor = hw.floor_seconds(0.0, bytes, true);
    // 20% faster than the floor.
    let seconds = floor / 1.2;
    let made = hw.raise(0.0, bytes, true, seconds, by());
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].term, FloorTerm::Dram);
    assert_eq!(made[0].from, 25e9);
    assert!((made[0].to - 30e9).abs() < 1e3);
    assert_eq!(made[0].by, by());
    assert_eq!(hw.raises, made);
    assert!((hw.floor_seconds(0.0, bytes, true) - seconds).abs() < 1e-12);
    // Not faster than the floor: nothing to raise.
    assert!(hw.raise(0.0, bytes, true, seconds * 2.0, by()).is_empty());
    assert_eq!(hw.raises.len(), 1);
    // The measured figure stays: implausibility is judged against it, so a second kernel
    // cannot go 2.5x beyond the first one's raise.
    assert_eq!(hw.dram_bandwidth, 25e9);
    assert!((hw.measured_floor(0.0, bytes, true).seconds - floor).abs() < 1e-12);
    assert!((hw.dram_floor_bandwidth() - 30e9).abs() < 1e3);
    // A raised DRAM figure lifts a cache level measured below it.
    assert!(hw.bandwidth_for((64 << 10) as f64, false) >= 30e9);
    // A fresh measurement (lower, on a busy machine) keeps the raised floor.
    let fresh = machine(2, Some(1.8), 20e9);
    let mut merged = fresh.clone();
    merged.merge_max(&hw);
    assert!((merged.dram_floor_bandwidth() - 30e9).abs() < 1e3);
    hw.merge_max(&fresh);
    assert!((hw.dram_floor_bandwidth() - 30e9).abs() < 1e3);
    assert_eq!(hw.raises.len(), 1);
}

#[test]
fn raises_of_a_cache_level_and_of_compute_apply_to_those_terms_only() {
    let mut hw = machine(2, None, 25e9);
    let bytes = MIB as f64;
    let level = hw.bandwidth_for(bytes, false);
    let made = hw.raise(0.0, bytes, false, bytes / (level * 1.5), by());
    assert_eq!(
        made[0].term,
        FloorTerm::Cache {
            capacity_bytes: 2 * MIB
        }
    );
    assert!((hw.bandwidth_for(bytes, false) - level * 1.5).abs() < 1e3);
    assert_eq!(hw.dram_floor_bandwidth(), 25e9);
    let made = hw.raise(2e9, 0.0, true, 1e-2, by());
    assert_eq!(made[0].term, FloorTerm::Compute);
    assert!((hw.peak_floor_flops() - 2e11).abs() < 1.0);
    assert_eq!(hw.peak_fp32_flops, 1e11);
    // A workload in another level is not touched by the first level's raise.
    assert_eq!(hw.bandwidth_for(16.0 * MIB as f64, false), 25e9 * 8.0);
}

#[test]
fn a_cached_roofline_of_another_format_is_measured_again_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hw.json");
    assert!(matches!(read_cached(&path), Err(Stale::Missing)));
    // Format 1 (unnumbered): one triad per tier and the reported caches.
    std::fs::write(
        &path,
        r#"{"cpu": "x", "cores": 2, "caches": [], "simd": [], "compilers": [],
            "dram_bandwidth": 15.4e9, "cache_bandwidth": 16.1e9, "peak_fp32_flops": 3e11,
            "vector_bits": 512, "threads": 2, "measured_at": 1, "fingerprint": "f"}"#,
    )
    .unwrap();
    assert!(matches!(
        read_cached(&path),
        Err(Stale::Format { found: 0 })
    ));
    // A later format is not read as this one either.
    let mut v = serde_json::to_value(machine(2, None, 25e9)).unwrap();
    v["format"] = serde_json::json!(HW_FORMAT + 1);
    std::fs::write(&path, v.to_string()).unwrap();
    assert!(matches!(read_cached(&path), Err(Stale::Format { found }) if found == HW_FORMAT + 1));
    std::fs::write(&path, "{not json").unwrap();
    assert!(matches!(read_cached(&path), Err(Stale::Unreadable(_))));
    let hw = machine(2, Some(0.2), 25e9);
    hw.save(&path).unwrap();
    let back = read_cached(&path).unwrap();
    assert_eq!(back.levels, hw.levels);
    assert_eq!(back.method, hw.method);
}

#[test]
fn saving_merges_with_a_raise_another_judge_wrote_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hw.json");
    let mut other = machine(2, None, 25e9);
    other.raise(0.0, 1e9, true, 1e9 / 30e9, by());
    other.save(&path).unwrap();
    let mut mine = machine(2, None, 25e9);
    mine.peak_fp32_flops = 2e11;
    mine.save_merged(&path).unwrap();
    let back = read_cached(&path).unwrap();
    assert_eq!(back.raises.len(), 1);
    assert!((back.dram_floor_bandwidth() - 30e9).abs() < 1e3);
    assert_eq!(back.peak_fp32_flops, 2e11);
}

#[test]
fn stream_buffers_go_past_the_measured_caches_within_memory() {
    assert_eq!(stream_bytes(0, 1 << 30), 256 * MIB);
    assert_eq!(stream_bytes(95 * MIB, 1 << 30), 380 * MIB);
    assert_eq!(stream_bytes(1 << 30, 1 << 30), 1 << 30);
    assert_eq!(stream_bytes(32 * MIB, 64 * MIB), 64 * MIB);
}

/// Measures for real (a few seconds; nothing about the figures is asserted but their shape, so
/// a busy machine passes too).
#[test]
fn an_old_roofline_is_measured_again_under_the_device_lock_then_reused() {
    let Ok(compiler) = Compiler::detect() else {
        eprintln!("no C compiler: skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hw.json");
    std::fs::write(
        &path,
        r#"{"cpu": "x", "cores": 2, "caches": [], "simd": [], "compilers": [],
            "dram_bandwidth": 15.4e9, "cache_bandwidth": 16.1e9, "peak_fp32_flops": 3e11,
            "vector_bits": 512, "threads": 2, "measured_at": 1, "fingerprint": "f"}"#,
    )
    .unwrap();
    let mut held = 0;
    let mut quiet = || -> Result<Option<Box<dyn std::any::Any>>, String> {
        held += 1;
        Ok(Some(Box::new(())))
    };
    let (hw, cached) = load_or_measure_quiet(&path, &compiler, 2, false, &mut quiet).unwrap();
    assert!(!cached);
    assert_eq!(held, 1);
    assert_eq!(hw.format, HW_FORMAT);
    assert_eq!(hw.method.device_lock, DeviceLock::Exclusive);
    assert!(hw.dram_bandwidth > 0.0 && hw.peak_fp32_flops > 0.0);
    assert_eq!(hw.streams.len(), 10, "{:?}", hw.streams);
    assert!(hw.dram_bandwidth >= best_stream(&hw.streams));
    assert!(hw.sweep.windows(2).all(|w| w[0].bytes < w[1].bytes));
    assert!(hw.levels.iter().all(|l| l.bandwidth > hw.dram_bandwidth));
    assert!(hw.method.seconds > 0.0);
    // Cached now (unless the machine was busy then and quiet now: measured again, merged).
    let (again, cached) =
        load_or_measure_quiet(&path, &compiler, 2, false, &mut || Ok(None)).unwrap();
    assert_eq!(again.format, HW_FORMAT);
    if cached {
        assert_eq!(again.measured_at, hw.measured_at);
    }
}
