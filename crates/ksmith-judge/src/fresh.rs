//! Fresh inputs for timed calls, drawn by the judge itself: every timed call gets a set no
//! candidate has seen, from each input's declared distribution, written straight into the
//! call's slot (no Python, no files). Inputs drawn by a task's own generator function (index
//! tables, masks) keep the trusted side's set for the workload; at least one input must be
//! drawn here, or the judge asks the trusted side for whole fresh sets instead.
//!
//! Drawing every value from a random generator cost about 5 ns per element (25 ms per call of
//! a 10 M-element task, most of the judge's own time there). Instead each workload draws two
//! small pools per input once, from the OS's randomness, and every call mixes them: each block
//! of [`BLOCK`] elements combines a window of each pool at offsets drawn for that block, in a
//! way that keeps the declared distribution exactly (the scaled sum of two independent normals
//! is normal; a uniform value plus anything, wrapped around the interval, is uniform). Each
//! block is one of about 10^9 combinations, so no kernel can precompute its outputs, and the
//! mixing runs at memory speed.

use ksmith_task::{DType, Distribution, Task};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::StandardNormal;
use std::sync::Arc;

/// Elements per block: each block mixes its own pair of pool windows.
const BLOCK: usize = 2048;
/// Values per pool: windows start anywhere in the first `POOL - BLOCK`; two f64 pools of this
/// size stay in a core's L2 cache.
const POOL: usize = 1 << 15;

/// How one input of a workload is refreshed for each timed call.
#[derive(Debug, Clone)]
pub(crate) enum Refresh {
    /// Mixed again from the pools for every call.
    Draw(Mixer),
    /// The trusted side's set for the workload, unchanged (generator functions, constants).
    Keep,
}

/// How pool values combine into one value of the declared distribution.
#[derive(Debug, Clone, Copy)]
enum Mix {
    /// Pools of standard normals: `mean + std * (a + b) / sqrt 2`.
    Normal { mean: f64, scale: f64 },
    /// Pools uniform on [0, 1): `low + width * frac(a + b)`.
    Uniform { low: f64, width: f64 },
    /// Pools uniform on the integers [0, range): `low + (a + b) mod range`.
    Integers { low: f64, range: f64 },
    /// An empty interval: every value is `low`.
    Constant(f64),
}

/// One drawn input's mixing rule, pools and element type.
#[derive(Debug, Clone)]
pub(crate) struct Mixer {
    mix: Mix,
    dtype: DType,
    pools: Arc<[Vec<f64>; 2]>,
}

impl Mixer {
    /// The mixer for `dist` as `dtype`, its pools drawn from `seed`.
    fn new(dist: &Distribution, dtype: DType, seed: u64) -> Mixer {
        let mix = match *dist {
            Distribution::Normal { mean, std } => Mix::Normal {
                mean,
                scale: std * std::f64::consts::FRAC_1_SQRT_2,
            },
            Distribution::Uniform { low, high } if low < high => Mix::Uniform {
                low,
                width: high - low,
            },
            Distribution::Integers { low, high } if low < high => Mix::Integers {
                low: low as f64,
                range: (high - low) as f64,
            },
            Distribution::Uniform { low, .. } => Mix::Constant(low),
            Distribution::Integers { low, .. } => Mix::Constant(low as f64),
            _ => Mix::Constant(0.0),
        };
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut pool = || -> Vec<f64> {
            (0..POOL)
                .map(|_| match mix {
                    Mix::Normal { .. } => rng.sample::<f64, _>(StandardNormal),
                    Mix::Uniform { .. } => rng.gen::<f64>(),
                    Mix::Integers { range, .. } => rng.gen_range(0..range as u64) as f64,
                    Mix::Constant(_) => 0.0,
                })
                .collect()
        };
        let pools = Arc::new([pool(), pool()]);
        Mixer { mix, dtype, pools }
    }
}

/// The refresh rule of every input of workload `w`, in declared order; the pools of drawn
/// inputs come from `seed`.
pub(crate) fn plan(task: &Task, w: usize, seed: u64) -> Vec<Refresh> {
    let dists = &task.workloads[w].inputs;
    task.inputs
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let d = dists.iter().find(|(n, _)| n == &i.name).map(|(_, d)| d);
            let draw = match d {
                Some(Distribution::Normal { .. } | Distribution::Uniform { .. }) => {
                    i.dtype.is_float()
                }
                Some(Distribution::Integers { .. }) => !i.dtype.is_float(),
                _ => false,
            };
            match d {
                Some(d) if draw => Refresh::Draw(Mixer::new(d, i.dtype, input_seed(seed, k))),
                _ => Refresh::Keep,
            }
        })
        .collect()
}

/// Whether the judge can make fresh sets itself (some tensor input is drawn here).
pub(crate) fn can_draw(task: &Task, plan: &[Refresh]) -> bool {
    task.inputs
        .iter()
        .zip(plan)
        .any(|(i, r)| !i.shape.is_empty() && matches!(r, Refresh::Draw(..)))
}

/// The seed of input `k` of the call drawn with `call_seed`.
pub(crate) fn input_seed(call_seed: u64, k: usize) -> u64 {
    call_seed.wrapping_add(k as u64 * 0x9E37_79B9)
}

/// Fills `out` with a fresh mix of `rule`'s pools (or the base bytes for `Keep`),
/// deterministic in `seed`: the judge regenerates a checked call's inputs from it. Mixed in
/// fixed-size chunks, each with its own stream of window offsets, on every core.
pub(crate) fn fill(out: &mut [u8], base: &[u8], rule: &Refresh, seed: u64) {
    let Refresh::Draw(mixer) = rule else {
        crate::parallel::copy(out, base);
        return;
    };
    crate::parallel::chunks_mut(out, |i, chunk| {
        let mut rng = SmallRng::seed_from_u64(chunk_seed(seed, i));
        mix_into(chunk, mixer, &mut rng);
    });
}

/// The seed of chunk `i`'s stream.
fn chunk_seed(seed: u64, i: usize) -> u64 {
    // splitmix64's finalizer: neighbouring chunks get unrelated streams.
    let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes mixed values as `mixer.dtype` into `out`, block by block.
fn mix_into(out: &mut [u8], mixer: &Mixer, rng: &mut SmallRng) {
    let width = mixer.dtype.size();
    let starts = (POOL - BLOCK + 1) as u64;
    let [pa, pb] = &*mixer.pools;
    let mut vals = [0f64; BLOCK];
    for block in out.chunks_mut(BLOCK * width) {
        let r = rng.next_u64();
        let (oa, ob) = (
            ((r & 0xffff_ffff) % starts) as usize,
            ((r >> 32) % starts) as usize,
        );
        let n = block.len() / width;
        let (a, b, v) = (&pa[oa..oa + n], &pb[ob..ob + n], &mut vals[..n]);
        match mixer.mix {
            Mix::Normal { mean, scale } => {
                for ((v, a), b) in v.iter_mut().zip(a).zip(b) {
                    *v = mean + scale * (a + b);
                }
            }
            Mix::Uniform { low, width } => {
                for ((v, a), b) in v.iter_mut().zip(a).zip(b) {
                    let u = a + b;
                    *v = low + width * if u >= 1.0 { u - 1.0 } else { u };
                }
            }
            Mix::Integers { low, range } => {
                for ((v, a), b) in v.iter_mut().zip(a).zip(b) {
                    let u = a + b;
                    *v = low + if u >= range { u - range } else { u };
                }
            }
            Mix::Constant(c) => v.fill(c),
        }
        write_as(block, v, mixer.dtype);
    }
}

/// Writes `vals` into `out` as `dtype`, little-endian.
fn write_as(out: &mut [u8], vals: &[f64], dtype: DType) {
    macro_rules! each {
        ($w:expr, |$v:ident| $bytes:expr) => {
            for (e, &$v) in out.chunks_exact_mut($w).zip(vals) {
                e.copy_from_slice(&$bytes);
            }
        };
    }
    match dtype {
        DType::Float32 => each!(4, |v| (v as f32).to_le_bytes()),
        DType::Float64 => each!(8, |v| v.to_le_bytes()),
        DType::Bfloat16 => each!(2, |v| bf16_bits(v as f32).to_le_bytes()),
        DType::Float16 => each!(2, |v| f16_bits(v as f32).to_le_bytes()),
        DType::Int8 => each!(1, |v| (v as i8).to_le_bytes()),
        DType::Int16 => each!(2, |v| (v as i16).to_le_bytes()),
        DType::Int32 => each!(4, |v| (v as i32).to_le_bytes()),
        DType::Int64 => each!(8, |v| (v as i64).to_le_bytes()),
        DType::Uint8 | DType::Bool => each!(1, |v| (v as u8).to_le_bytes()),
    }
}

fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return 0x7fc0;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// IEEE binary16 bits of `x` (finite inputs of the sizes tasks draw), rounded to nearest even.
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
    if exp >= 31 {
        return sign | 0x7c00;
    }
    if exp <= 0 {
        if exp < -10 {
            return sign;
        }
        let m = (man | 0x80_0000) >> (1 - exp);
        let r = (m + 0xfff + ((m >> 13) & 1)) >> 13;
        return sign | r as u16;
    }
    let r = ((exp as u32) << 10) | (man >> 13);
    let round = man & 0x1fff;
    let up = round > 0x1000 || (round == 0x1000 && (r & 1) == 1);
    sign | (r + up as u32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_match_known_values() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(bf16_bits(-2.5), 0xc020);
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-2.5), 0xc100);
        assert_eq!(f16_bits(0.1), 0x2e66);
        assert_eq!(f16_bits(65504.0), 0x7bff);
    }

    #[test]
    fn draws_follow_the_distribution_and_differ_by_seed() {
        let uniform = Distribution::Uniform {
            low: -2.0,
            high: 2.0,
        };
        let rule = Refresh::Draw(Mixer::new(&uniform, DType::Float32, 7));
        let mut a = vec![0u8; 4000];
        let mut b = vec![0u8; 4000];
        fill(&mut a, &[], &rule, 1);
        fill(&mut b, &[], &rule, 2);
        assert_ne!(a, b);
        let v: Vec<f32> = a
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(v.iter().all(|x| (-2.0..2.0).contains(x)));
        let ints = Refresh::Draw(Mixer::new(
            &Distribution::Integers { low: 3, high: 7 },
            DType::Int32,
            8,
        ));
        let mut c = vec![0u8; 400];
        fill(&mut c, &[], &ints, 3);
        assert!(c
            .chunks_exact(4)
            .map(|x| i32::from_le_bytes(x.try_into().unwrap()))
            .all(|x| (3..7).contains(&x)));
        let keep = vec![9u8; 8];
        let mut d = vec![0u8; 8];
        fill(&mut d, &keep, &Refresh::Keep, 4);
        assert_eq!(d, keep);
    }

    #[test]
    fn mixed_normals_keep_mean_and_spread_and_every_call_is_new() {
        let normal = Distribution::Normal {
            mean: 1.5,
            std: 2.0,
        };
        let rule = Refresh::Draw(Mixer::new(&normal, DType::Float32, 11));
        let n = 1 << 20;
        let values = |seed| {
            let mut b = vec![0u8; n * 4];
            fill(&mut b, &[], &rule, seed);
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect::<Vec<_>>()
        };
        let (a, again, other) = (values(5), values(5), values(6));
        assert_eq!(a, again, "a call's inputs are regenerated from its seed");
        let mean = a.iter().sum::<f64>() / n as f64;
        let sd = (a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean - 1.5).abs() < 0.05, "mean {mean}");
        assert!((sd - 2.0).abs() < 0.05, "sd {sd}");
        let same = a.iter().zip(&other).filter(|(x, y)| x == y).count();
        assert!(
            same < n / 1000,
            "{same} of {n} elements repeat across calls"
        );
        let uniform = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        let rule = Refresh::Draw(Mixer::new(&uniform, DType::Float64, 12));
        let mut b = vec![0u8; n * 8];
        fill(&mut b, &[], &rule, 9);
        let mut bins = [0usize; 4];
        for c in b.chunks_exact(8) {
            let x = f64::from_le_bytes(c.try_into().unwrap());
            assert!((0.0..1.0).contains(&x));
            bins[(x * 4.0) as usize] += 1;
        }
        for k in bins {
            assert!((k as f64 / n as f64 - 0.25).abs() < 0.01, "{bins:?}");
        }
    }
}
