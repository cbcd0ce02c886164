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

/// A hash of `bufs`' contents, each hashed in chunks on every core (equal contents, equal
/// hash; it is compared only with itself).
pub(crate) fn digest<'a>(bufs: impl Iterator<Item = &'a [u8]>) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    for b in bufs {
        h.update(&(b.len() as u64).to_le_bytes());
        for part in chunks(b, |_, c| blake3::hash(c)) {
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
        let d = digest([buf.as_slice()].into_iter());
        buf[CHUNK + 5] ^= 1;
        assert_ne!(digest([buf.as_slice()].into_iter()), d);
    }
}
