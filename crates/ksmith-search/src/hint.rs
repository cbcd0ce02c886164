//! Strategy hints: the direction a node's agent session is asked to pursue. The list is fixed
//! and documented (docs/search.md); a bandit allocates hints by measured improvement.

use serde::{Deserialize, Serialize};

/// One documented optimization direction given to a node's planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hint {
    /// Write a first correct kernel from the task alone (nodes with no parent code).
    FirstKernel,
    /// No direction given: the planner chooses, with the kernel and its figures in view (the
    /// bandit weighs its own choices against the documented directions).
    Own,
    /// SIMD: make the inner loops vectorize (contiguous access, no aliasing, simple bounds).
    Vectorize,
    /// Cache blocking / tiling so the working set stays in L1/L2.
    Tile,
    /// Fuse passes over memory into fewer (one read, one write where possible).
    Fuse,
    /// Spread the work over cores (OpenMP, balanced chunks, no false sharing).
    Parallelize,
    /// Unroll and keep several independent accumulators to hide latency.
    Unroll,
    /// Change the memory access order or data layout (transpose, pack, stride-1 inner loops).
    Layout,
    /// A different algorithm doing less work (online softmax, Welford, reassociation).
    Algorithm,
    /// Precision choices the tolerance allows (float32 accumulation, fast reciprocal).
    Precision,
    /// Expose and tune parameters (tile sizes, unroll factors, thread counts).
    Autotune,
    /// Remove overhead: branches, redundant work, allocation, bounds checks in the hot loop.
    Simplify,
}

impl Hint {
    /// Every hint, in a fixed order (the bandit's arms).
    pub const ALL: [Hint; 12] = [
        Hint::FirstKernel,
        Hint::Own,
        Hint::Vectorize,
        Hint::Tile,
        Hint::Fuse,
        Hint::Parallelize,
        Hint::Unroll,
        Hint::Layout,
        Hint::Algorithm,
        Hint::Precision,
        Hint::Autotune,
        Hint::Simplify,
    ];

    /// Hints a node with parent code may pursue (all but [`Hint::FirstKernel`]).
    pub fn improving() -> impl Iterator<Item = Hint> {
        Hint::ALL.into_iter().filter(|h| *h != Hint::FirstKernel)
    }

    /// The improving directions that can apply to a kernel of this operator class: no cache
    /// tiling, fusion of separate passes or layout change for an elementwise map, no tiling for
    /// scans, reductions and normalizations (their rows stream once); every direction for the
    /// rest. The bandit weighs what is left; `own` (the planner's choice) is always there.
    pub fn for_op_class(op: ksmith_task::OpClass) -> Vec<Hint> {
        use ksmith_task::OpClass;
        let skip: &[Hint] = match op {
            OpClass::Elementwise => &[Hint::Tile, Hint::Fuse, Hint::Layout],
            OpClass::Scan | OpClass::Reduction | OpClass::Normalization => &[Hint::Tile],
            _ => &[],
        };
        Hint::improving().filter(|h| !skip.contains(h)).collect()
    }

    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Hint::FirstKernel => "first_kernel",
            Hint::Own => "own",
            Hint::Vectorize => "vectorize",
            Hint::Tile => "tile",
            Hint::Fuse => "fuse",
            Hint::Parallelize => "parallelize",
            Hint::Unroll => "unroll",
            Hint::Layout => "layout",
            Hint::Algorithm => "algorithm",
            Hint::Precision => "precision",
            Hint::Autotune => "autotune",
            Hint::Simplify => "simplify",
        }
    }

    /// The hint a stored spelling names.
    pub fn from_name(s: &str) -> Option<Hint> {
        Hint::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// What the planner is told to pursue.
    pub fn instruction(self) -> &'static str {
        match self {
            Hint::FirstKernel => "Write a first correct kernel for the task from its definition and reference; correctness first, then the obvious speed.",
            Hint::Own => "No direction is given: read the kernel, its per-workload figures (memory- or compute-bound, how far from the roofline) and what was tried, and plan the change you expect to gain the most; name the bottleneck it attacks.",
            Hint::Vectorize => "Make the hot loops vectorize: contiguous stride-1 access, restrict pointers, simple bounds, no calls or data-dependent branches inside.",
            Hint::Tile => "Block the computation so each tile's working set stays in L1/L2 and is reused before eviction.",
            Hint::Fuse => "Fuse separate passes over memory into fewer passes: read each input once and write each output once where possible.",
            Hint::Parallelize => "Spread independent work over all cores (OpenMP parallel for over the outer dimension) with balanced chunks and no false sharing.",
            Hint::Unroll => "Unroll the inner loops and keep several independent accumulators so latency is hidden.",
            Hint::Layout => "Change the memory access order or layout (loop interchange, packing, transposed copies) so inner loops read memory sequentially.",
            Hint::Algorithm => "Use an algorithm that does less work or fewer passes (for example online/one-pass formulations, reassociation).",
            Hint::Precision => "Use the cheapest arithmetic the tolerance allows (float32 accumulation, fused multiply-add, reciprocal instead of division).",
            Hint::Autotune => "Expose the kernel's performance parameters (tile sizes, unroll factors) as tunables and pick them for these shapes.",
            Hint::Simplify => "Remove overhead from the hot path: redundant work, branches, allocation, repeated index arithmetic.",
        }
    }
}

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in Hint::ALL {
            assert_eq!(Hint::from_name(h.as_str()), Some(h));
            assert!(!h.instruction().is_empty());
        }
        assert_eq!(Hint::from_name("nope"), None);
        assert!(!Hint::improving().any(|h| h == Hint::FirstKernel));
        let ew = Hint::for_op_class(ksmith_task::OpClass::Elementwise);
        assert!(ew.contains(&Hint::Own) && ew.contains(&Hint::Vectorize));
        assert!(!ew.contains(&Hint::Tile) && !ew.contains(&Hint::Fuse));
        assert!(!Hint::for_op_class(ksmith_task::OpClass::Scan).contains(&Hint::Tile));
        assert_eq!(
            Hint::for_op_class(ksmith_task::OpClass::Matmul).len(),
            Hint::improving().count()
        );
    }
}
