//! Timing slots: a timed call's input and output buffers, as files in the runner's directory
//! that both the runner and the judge map. The judge writes fresh inputs and poison into them,
//! evicts them from the caches and reads the outputs back, all while every process of the
//! sandbox is stopped, so the candidate sees a call's inputs only inside the judge's clock.

use crate::protocol::SlotSpec;
use crate::Files;
use memmap2::MmapMut;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// One buffer, mapped by the judge (the runner maps the same file).
pub(crate) struct Buffer {
    path: PathBuf,
    /// The same file where the runner sees it (its own mount namespace may put it elsewhere).
    seen: PathBuf,
    file: File,
    map: MmapMut,
    /// Bytes of the tensor (the file holds at least one byte).
    len: usize,
}

/// Allocates every block of `f`'s first `len` bytes (fallocate; zero writes where the file
/// system has no fallocate).
fn allocate(f: &File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on a descriptor we own.
    let r = unsafe { nix::libc::fallocate(f.as_raw_fd(), 0, 0, len as nix::libc::off_t) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(nix::libc::EOPNOTSUPP) {
        return Err(e);
    }
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = zeros.len().min(len - at);
        f.write_all_at(&zeros[..n], at as u64)?;
        at += n;
    }
    Ok(())
}

/// Makes `f` `len` bytes long (at least one), every page allocated, and maps it whole.
fn sized(f: &File, len: usize) -> std::io::Result<MmapMut> {
    f.set_len(len.max(1) as u64)?;
    // Every page allocated now: a page first touched later through the mapping would need
    // memory then, and a candidate that filled memory would kill the judge with SIGBUS.
    // The sandbox cannot free them again (no truncation, fallocate or MADV_REMOVE there).
    allocate(f, len.max(1))?;
    // SAFETY: the file is ours and stays mapped for the slot's lifetime; the runner maps it
    // too, which is the point (its writes are what the judge reads back).
    unsafe { MmapMut::map_mut(f) }
}

impl Buffer {
    fn create(dir: &Dirs, name: &str, len: usize) -> std::io::Result<Buffer> {
        // Unpredictable name, created fresh: the directory is the candidate's.
        let file = format!("{name}-{:016x}.buf", ksmith_harness::random_u64());
        let path = dir.host.join(&file);
        let seen = dir.seen.join(&file);
        let f: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let map = sized(&f, len)?;
        Ok(Buffer {
            path,
            seen,
            file: f,
            map,
            len,
        })
    }

    /// Makes the buffer hold `len` bytes for another workload: the file grows (every page
    /// allocated, mapped again) only when it is too small, else the tail goes unused. Called
    /// with the runner stopped; it maps the file again itself when it finds it longer.
    fn fit(&mut self, len: usize) -> std::io::Result<()> {
        if len.max(1) > self.map.len() {
            // The old mapping is dropped on assignment.
            self.map = sized(&self.file, len)?;
        }
        self.len = len;
        Ok(())
    }

    /// Whether the file still has the size the judge gave it. The runner may only write it in
    /// place (its directory allows no truncation), and this is checked again, with the runner
    /// stopped, before the judge touches the mapping: touching pages past a shortened file's
    /// end would kill the judge with SIGBUS, and a file written past its end takes memory
    /// nobody accounts for (up to the runner's file-size limit, once: the call fails).
    fn intact(&self) -> bool {
        self.file
            .metadata()
            .is_ok_and(|m| m.len() == self.map.len() as u64)
    }

    fn bytes(&self) -> &[u8] {
        &self.map[..self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map[..self.len]
    }

    /// Evicts the buffer from every cache level of every core (cache-line flush on x86; a write
    /// of the same size elsewhere otherwise).
    fn evict(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            crate::parallel::chunks(self.bytes(), |_, c| {
                for line in c.chunks(64) {
                    // SAFETY: the line lies inside the live mapping; clflush only evicts.
                    unsafe { core::arch::x86_64::_mm_clflush(line.as_ptr()) };
                }
                // SAFETY: a fence has no memory-safety preconditions.
                unsafe { core::arch::x86_64::_mm_mfence() };
            });
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut junk = vec![0u8; self.len * 2];
            junk.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
            std::hint::black_box(&junk);
        }
    }
}

/// One timed call's buffers.
pub(crate) struct Slot {
    pub ins: Vec<Buffer>,
    pub outs: Vec<Buffer>,
}

/// Where the slots' files are: for the judge and as the runner sees the same directory.
pub(crate) struct Dirs<'a> {
    pub host: &'a Path,
    pub seen: &'a Path,
}

/// The runner's directory for slots (host path, the runner's path): the one the judge makes and
/// the runner may only write in place, or its private one where the sandbox has none.
pub(crate) fn slot_dirs(runner: &ksmith_harness::Peer) -> (PathBuf, PathBuf) {
    match (runner.shared_dir(), runner.shared_dir_in_child()) {
        (Some(host), Some(seen)) => (host.to_path_buf(), seen.to_path_buf()),
        _ => (
            runner.dir().to_path_buf(),
            runner.dir_in_child().to_path_buf(),
        ),
    }
}

/// What the judge needs to know about a tensor to fill or poison its buffer.
pub(crate) struct TensorSpec {
    pub name: String,
    pub bytes: usize,
    /// Element width and bit pattern of the poison (outputs only).
    pub poison: Option<(usize, u64)>,
}

impl Slot {
    /// Whether every buffer still has its full size (checked with the runner stopped).
    pub(crate) fn intact(&self) -> bool {
        self.ins.iter().chain(&self.outs).all(Buffer::intact)
    }

    pub(crate) fn create(
        dir: &Dirs,
        tag: &str,
        ins: &[TensorSpec],
        outs: &[TensorSpec],
    ) -> std::io::Result<Slot> {
        Ok(Slot {
            ins: ins
                .iter()
                .map(|t| Buffer::create(dir, &format!("{tag}_in_{}", t.name), t.bytes))
                .collect::<Result<_, _>>()?,
            outs: outs
                .iter()
                .map(|t| Buffer::create(dir, &format!("{tag}_out_{}", t.name), t.bytes))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Makes a slot of another workload of the same task hold this one's tensors (see
    /// [`Buffer::fit`]): slots are handed from one workload to the next, not made again.
    pub(crate) fn fit(&mut self, ins: &[TensorSpec], outs: &[TensorSpec]) -> std::io::Result<()> {
        for (buf, t) in self.ins.iter_mut().zip(ins) {
            buf.fit(t.bytes)?;
        }
        for (buf, t) in self.outs.iter_mut().zip(outs) {
            buf.fit(t.bytes)?;
        }
        Ok(())
    }

    /// The slot as the runner's `time` request names it.
    pub(crate) fn spec(&self) -> SlotSpec {
        let paths = |b: &[Buffer]| {
            b.iter()
                .map(|x| x.seen.display().to_string())
                .collect::<Vec<_>>()
        };
        SlotSpec {
            ins: paths(&self.ins),
            outs: paths(&self.outs),
        }
    }

    /// Copies raw input files (one per input, as the trusted side wrote them) into the slot.
    pub(crate) fn fill(&mut self, files: &[PathBuf]) -> std::io::Result<()> {
        for (buf, f) in self.ins.iter_mut().zip(files) {
            let data = std::fs::read(f)?;
            if data.len() != buf.len {
                return Err(std::io::Error::other(format!(
                    "{}: {} bytes, expected {}",
                    f.display(),
                    data.len(),
                    buf.len
                )));
            }
            crate::parallel::copy(buf.bytes_mut(), &data);
        }
        Ok(())
    }

    /// Fills the slot's inputs with a fresh set drawn by the judge (see `fresh`).
    pub(crate) fn fill_fresh(
        &mut self,
        base: &[Vec<u8>],
        plan: &[crate::fresh::Refresh],
        seed: u64,
    ) {
        for (k, ((buf, b), rule)) in self.ins.iter_mut().zip(base).zip(plan).enumerate() {
            crate::fresh::fill(buf.bytes_mut(), b, rule, crate::fresh::input_seed(seed, k));
        }
    }

    /// A hash of the outputs as they are now, over the pages `key` picks (see
    /// [`crate::parallel::digest_sampled`]): taken after every timed call, so the judge's pause
    /// after a call is the same whether or not it is the one to be checked. The inputs need
    /// none: the checked call's are compared with a regeneration from its seed.
    pub(crate) fn digest(&self, key: u64) -> blake3::Hash {
        crate::parallel::digest_sampled(self.outs.iter().map(Buffer::bytes), key)
    }

    /// Fills every output with its dtype's poison pattern.
    pub(crate) fn poison(&mut self, outs: &[TensorSpec]) {
        for (buf, spec) in self.outs.iter_mut().zip(outs) {
            let Some((width, bits)) = spec.poison else {
                continue;
            };
            let pattern = &bits.to_le_bytes()[..width.min(8)];
            // Copied a block at a time (an element at a time ran at a third of memory speed).
            // CHUNK and the block are multiples of every element width: the pattern stays
            // aligned.
            let mut block = [0u8; 4096];
            for e in block.chunks_exact_mut(pattern.len()) {
                e.copy_from_slice(pattern);
            }
            crate::parallel::chunks_mut(buf.bytes_mut(), |_, c| {
                for piece in c.chunks_mut(block.len()) {
                    piece.copy_from_slice(&block[..piece.len()]);
                }
            });
        }
    }

    /// Evicts inputs and outputs from the caches (cold-cache timing of the kernel's own
    /// working set, whatever the machine reports as its last-level cache).
    pub(crate) fn evict(&self) {
        self.ins.iter().chain(&self.outs).for_each(Buffer::evict);
    }

    /// The bytes of input `k` as they are now.
    pub(crate) fn input(&self, k: usize) -> &[u8] {
        self.ins[k].bytes()
    }

    /// Writes the slot's outputs and inputs, as they are now, into trusted files for a check:
    /// (outputs by name, inputs by name). The files are written in place, never truncated: a
    /// workload's checks reuse the same files and their memory (`dir` is in memory, where a
    /// file made and freed per check cost more in page faults than the copy itself).
    pub(crate) fn dump(
        &self,
        dir: &Path,
        prefix: &str,
        ins: &[TensorSpec],
        outs: &[TensorSpec],
    ) -> std::io::Result<(Files, Files)> {
        let write = |name: String, bytes: &[u8]| -> std::io::Result<String> {
            use std::os::unix::fs::FileExt;
            let p = dir.join(name);
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)?;
            f.set_len(bytes.len() as u64)?;
            f.write_all_at(bytes, 0)?;
            Ok(p.display().to_string())
        };
        let mut o = BTreeMap::new();
        for (buf, spec) in self.outs.iter().zip(outs) {
            let p = write(format!("{prefix}.{}.bin", spec.name), buf.bytes())?;
            o.insert(spec.name.clone(), p);
        }
        let mut i = BTreeMap::new();
        for (buf, spec) in self.ins.iter().zip(ins) {
            let p = write(format!("{prefix}.in.{}.bin", spec.name), buf.bytes())?;
            i.insert(spec.name.clone(), p);
        }
        Ok((o, i))
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, bytes: usize) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            bytes,
            poison: Some((4, 0x7fc0_dead)),
        }
    }

    #[test]
    fn a_slot_handed_to_a_larger_workload_grows_and_to_a_smaller_one_keeps_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = Dirs {
            host: dir.path(),
            seen: dir.path(),
        };
        let mut slot = Slot::create(&dirs, "w0s0", &[spec("a", 4096)], &[spec("c", 4096)]).unwrap();
        let file_len = |b: &Buffer| std::fs::metadata(&b.path).unwrap().len();
        // Larger: the files grow, every byte is usable and the outputs take the poison.
        let (ins, outs) = ([spec("a", 3 << 20)], [spec("c", (3 << 20) + 4)]);
        slot.fit(&ins, &outs).unwrap();
        assert!(slot.intact());
        assert_eq!(file_len(&slot.ins[0]), 3 << 20);
        assert_eq!(slot.input(0).len(), 3 << 20);
        slot.poison(&outs);
        assert!(slot.outs[0]
            .bytes()
            .chunks_exact(4)
            .all(|e| e == 0x7fc0_deadu32.to_le_bytes()));
        // Smaller: the file stays as it is, the buffer is the tensor's size.
        let (ins, outs) = ([spec("a", 100)], [spec("c", 8)]);
        slot.fit(&ins, &outs).unwrap();
        assert_eq!(file_len(&slot.ins[0]), 3 << 20);
        assert_eq!(slot.input(0).len(), 100);
        assert!(slot.intact());
        // The runner shortening a file is still caught, and so is one writing past its end.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&slot.outs[0].path)
            .unwrap()
            .set_len(4)
            .unwrap();
        assert!(!slot.intact());
        let slot = Slot::create(&dirs, "w0s1", &ins, &outs).unwrap();
        assert!(slot.intact());
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&slot.ins[0].path)
            .unwrap();
        f.write_all_at(b"more", 100).unwrap();
        assert!(!slot.intact());
    }
}
