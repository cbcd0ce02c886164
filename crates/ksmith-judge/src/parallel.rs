//! The judge's own work on large buffers (drawing inputs, poisoning, evicting, hashing), spread
//! over every core: the runner is stopped while it happens, so the cores are free, and on
//! memory-bound tasks this work was most of an evaluation's wall time.

/// Bytes per chunk: a multiple of every element width and of the cache line, large enough
/// that handing chunks out costs nothing, small enough to balance the cores.
pub(crate) const CHUNK: usize = 1 << 20;

/// Worker threads to use for `len` bytes (1: do it on the calling thread).
fn workers(len: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(len.div_ceil(CHUNK)).max(1)
}

/// Calls `f(i, chunk)` for every `CHUNK`-sized piece of `buf` (the last may be shorter), on
/// every core. Which piece is `i` does not depend on the number of cores.
pub(crate) fn chunks_mut(buf: &mut [u8], f: impl Fn(usize, &mut [u8]) + Sync) {
    let n = workers(buf.len());
    let mut lanes: Vec<Vec<(usize, &mut [u8])>> = (0..n).map(|_| Vec::new()).collect();
    for (i, c) in buf.chunks_mut(CHUNK).enumerate() {
        lanes[i % n].push((i, c));
    }
    if n == 1 {
        lanes.into_iter().flatten().for_each(|(i, c)| f(i, c));
        return;
    }
    let f = &f;
    std::thread::scope(|s| {
        for lane in lanes {
            s.spawn(move || lane.into_iter().for_each(|(i, c)| f(i, c)));
        }
    });
}

/// Calls `f(i, chunk)` for every `CHUNK`-sized piece of `buf`, on every core, and returns
/// the results in order.
pub(crate) fn chunks<T: Send>(buf: &[u8], f: impl Fn(usize, &[u8]) -> T + Sync) -> Vec<T> {
    let n = workers(buf.len());
    if n == 1 {
        return buf
            .chunks(CHUNK)
            .enumerate()
            .map(|(i, c)| f(i, c))
            .collect();
    }
    let f = &f;
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|lane| {
                s.spawn(move || {
                    buf.chunks(CHUNK)
                        .enumerate()
                        .skip(lane)
                        .step_by(n)
                        .map(|(i, c)| (i, f(i, c)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, t)| t).collect()
}

/// `dst.copy_from_slice(src)` on every core.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "parallel copy of unequal lengths");
    chunks_mut(dst, |i, c| {
        let at = i * CHUNK;
        c.copy_from_slice(&src[at..at + c.len()]);
    });
}

/// Bytes per page of a sampled digest.
const PAGE: usize = 4096;
/// One page in `SAMPLE` is hashed by [`digest_sampled`].
const SAMPLE: u64 = 8;
/// Buffers at most this long are hashed whole by [`digest_sampled`].
const WHOLE: usize = 64 * PAGE;

/// Whether page `index` of buffer `buf` is in the sample `key` picks (a splitmix64 mix:
/// without `key`, which pages are hashed cannot be told from the indices).
fn picked(key: u64, buf: usize, index: usize) -> bool {
    let mut z = key ^ (buf as u64).wrapping_mul(0xA24B_AED4_963E_E407) ^ index as u64;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).is_multiple_of(SAMPLE)
}

/// A hash of a secret sample of `bufs`' pages: every page of a buffer up to `WHOLE` bytes, one
/// page in `SAMPLE` (picked by `key`) of a longer one, on every core. Equal contents under the
/// same key, equal hash; a change to m pages of a long buffer goes unseen with probability
/// (1 - 1/SAMPLE)^m to whoever does not know `key`.
pub(crate) fn digest_sampled<'a>(bufs: impl Iterator<Item = &'a [u8]>, key: u64) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    for (b, buf) in bufs.enumerate() {
        h.update(&(buf.len() as u64).to_le_bytes());
        if buf.len() <= WHOLE {
            h.update(blake3::hash(buf).as_bytes());
            continue;
        }
        let parts = chunks(buf, |i, c| {
            let mut ph = blake3::Hasher::new();
            for (j, page) in c.chunks(PAGE).enumerate() {
                if picked(key, b, i * (CHUNK / PAGE) + j) {
                    ph.update(page);
                }
            }
            ph.finalize()
        });
        for part in parts {
            h.update(part.as_bytes());
        }
    }
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_buffer_in_order_whatever_the_split() {
        let mut buf = vec![0u8; 3 * CHUNK + 17];
        chunks_mut(&mut buf, |i, c| c.fill(i as u8 + 1));
        assert_eq!(buf[0], 1);
        assert_eq!(buf[CHUNK], 2);
        assert_eq!(buf[3 * CHUNK + 16], 4);
        let sums = chunks(&buf, |i, c| (i, c.len()));
        assert_eq!(sums, vec![(0, CHUNK), (1, CHUNK), (2, CHUNK), (3, 17)]);
        let mut dst = vec![0u8; buf.len()];
        copy(&mut dst, &buf);
        assert_eq!(dst, buf);
    }

    #[test]
    fn a_sampled_digest_sees_small_buffers_whole_and_an_eighth_of_long_ones() {
        let small = vec![7u8; WHOLE];
        let mut long = vec![0u8; 4 * CHUNK];
        let key = 0x1234_5678;
        let d = digest_sampled([small.as_slice(), long.as_slice()].into_iter(), key);
        // Every byte of the small buffer counts.
        let mut other = small.clone();
        other[WHOLE - 1] ^= 1;
        assert_ne!(
            digest_sampled([other.as_slice(), long.as_slice()].into_iter(), key),
            d
        );
        // In the long one, a change counts exactly when its page is picked.
        let pages = long.len() / PAGE;
        let picked_pages: Vec<usize> = (0..pages).filter(|&p| picked(key, 1, p)).collect();
        let share = picked_pages.len() as f64 / pages as f64;
        assert!((0.09..0.16).contains(&share), "{share}");
        let unpicked = (0..pages).find(|p| !picked(key, 1, *p)).unwrap();
        long[unpicked * PAGE] ^= 1;
        assert_eq!(
            digest_sampled([small.as_slice(), long.as_slice()].into_iter(), key),
            d
        );
        long[picked_pages[3] * PAGE + 100] ^= 1;
        assert_ne!(
            digest_sampled([small.as_slice(), long.as_slice()].into_iter(), key),
            d
        );
        // Another key picks other pages.
        let again: Vec<usize> = (0..pages).filter(|&p| picked(key + 1, 1, p)).collect();
        assert_ne!(again, picked_pages);
    }
}
