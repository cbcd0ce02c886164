//! Fresh inputs for timed calls, drawn by the judge itself: every timed call gets a set no
//! candidate has seen, from each input's declared distribution, written straight into the
//! call's slot (no Python, no files). Inputs drawn by a task's own generator function (index
//! tables, masks) keep the trusted side's set for the workload; at least one input must be
//! drawn here, or the judge asks the trusted side for whole fresh sets instead.

use ksmith_task::{DType, Distribution, Task};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// How one input of a workload is refreshed for each timed call.
#[derive(Debug, Clone)]
pub(crate) enum Refresh {
    /// Drawn again by the judge for every call.
    Draw(Distribution, DType),
    /// The trusted side's set for the workload, unchanged (generator functions, constants).
    Keep,
}

/// The refresh rule of every input of workload `w`, in declared order.
pub(crate) fn plan(task: &Task, w: usize) -> Vec<Refresh> {
    let dists = &task.workloads[w].inputs;
    task.inputs
        .iter()
        .map(|i| {
            let d = dists.iter().find(|(n, _)| n == &i.name).map(|(_, d)| d);
            match d {
                Some(d @ (Distribution::Normal { .. } | Distribution::Uniform { .. }))
                    if i.dtype.is_float() =>
                {
                    Refresh::Draw(d.clone(), i.dtype)
                }
                Some(d @ Distribution::Integers { .. }) if !i.dtype.is_float() => {
                    Refresh::Draw(d.clone(), i.dtype)
                }
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

/// Fills `out` with a fresh draw of `rule` (or the base bytes for `Keep`), deterministic in
/// `seed`: the judge regenerates a checked call's inputs from it for the reference. Drawn in
/// fixed-size chunks, each from its own stream, on every core (drawing 50 MB one value at a
/// time was most of the judge's own time on memory-bound tasks).
pub(crate) fn fill(out: &mut [u8], base: &[u8], rule: &Refresh, seed: u64) {
    let Refresh::Draw(dist, dtype) = rule else {
        crate::parallel::copy(out, base);
        return;
    };
    crate::parallel::chunks_mut(out, |i, chunk| {
        let mut rng = SmallRng::seed_from_u64(chunk_seed(seed, i));
        draw(chunk, dist, *dtype, &mut rng);
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

/// Writes values drawn from `dist` as `dtype` into `out`.
fn draw(out: &mut [u8], dist: &Distribution, dtype: DType, rng: &mut SmallRng) {
    use rand::distributions::Uniform;
    enum Sampler {
        Normal(f64, f64),
        Uniform(Uniform<f64>),
        Integers(Uniform<i64>),
        Constant(f64),
    }
    let sampler = match dist {
        Distribution::Normal { mean, std } => Sampler::Normal(*mean, *std),
        Distribution::Uniform { low, high } if low < high => {
            Sampler::Uniform(Uniform::new(*low, *high))
        }
        Distribution::Integers { low, high } if low < high => {
            Sampler::Integers(Uniform::new(*low, *high))
        }
        Distribution::Uniform { low, .. } => Sampler::Constant(*low),
        Distribution::Integers { low, .. } => Sampler::Constant(*low as f64),
        _ => Sampler::Constant(0.0),
    };
    let mut sample = || -> f64 {
        match &sampler {
            Sampler::Normal(mean, std) => mean + std * rng.sample::<f64, _>(StandardNormal),
            Sampler::Uniform(u) => rng.sample(u),
            Sampler::Integers(u) => rng.sample(u) as f64,
            Sampler::Constant(c) => *c,
        }
    };
    macro_rules! each {
        ($w:expr, |$v:ident| $bytes:expr) => {
            for chunk in out.chunks_exact_mut($w) {
                let $v = sample();
                chunk.copy_from_slice(&$bytes);
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
        let rule = Refresh::Draw(
            Distribution::Uniform {
                low: -2.0,
                high: 2.0,
            },
            DType::Float32,
        );
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
        let ints = Refresh::Draw(Distribution::Integers { low: 3, high: 7 }, DType::Int32);
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
}
