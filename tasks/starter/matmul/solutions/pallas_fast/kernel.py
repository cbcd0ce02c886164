"""c = a @ b on the tensor cores with float32 accuracy, no host-side padding or slicing.

- 128x128 output tiles (128x64 on ragged shapes, 64x64 when the grid would leave most
  of the 132 SMs idle), K swept in 16/32-deep slices in a fori_loop that Triton
  software-pipelines (num_stages) through shared memory.
- 3xTF32: each operand slice is split in the kernel into a TF32-exact head (low 13
  mantissa bits cleared) and the exact float32 remainder; three TF32 dots
  (hi*hi + hi*lo + lo*hi, float32 accumulation) give ~2^-21 relative error per
  product, close to float32 FMA, where a plain TF32 dot (~1e-3) would fail the
  tolerance.  (On the CPU interpreter the dots are plain float32.)
- One-dimensional grid in grouped order (GROUP_M tile rows share each b column strip)
  for L2 reuse; the index maps and the kernel derive the same tile coordinates.
- Edges: the full-K row/column strips of the last tiles are loaded with masks only where
  M, N or K are not multiples of the tile (decided statically); a partial K slice is done
  once after the loop (reading the in-bounds slice [K - bk, K), masked to the columns the
  loop did not cover); the store is masked only on ragged shapes.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

GROUP_M = 8


def _tile(pid, gm, gn):
    width = GROUP_M * gn
    first_m = (pid // width) * GROUP_M
    size = jnp.minimum(gm - first_m, GROUP_M)
    return first_m + (pid % width) % size, (pid % width) // size


def _dot3(a, b):
    mask = jnp.int32(-8192)  # 0xFFFFE000: sign, exponent and the 10 TF32 mantissa bits
    a_hi = lax.bitcast_convert_type(lax.bitcast_convert_type(a, jnp.int32) & mask, jnp.float32)
    b_hi = lax.bitcast_convert_type(lax.bitcast_convert_type(b, jnp.int32) & mask, jnp.float32)
    return a_hi, a - a_hi, b_hi, b - b_hi


def _matmul_kernel(a_ref, b_ref, c_ref, *, m, k, n, bm, bn, bk, gm, gn):
    pid_m, pid_n = _tile(pl.program_id(0), gm, gn)
    rows = pid_m * bm + jnp.arange(bm)
    cols = pid_n * bn + jnp.arange(bn)
    rmask = (rows < m)[:, None]
    cmask = (cols < n)[None, :]
    kk = jnp.arange(bk)

    def step(start, acc, kmask=None):
        ka = pl.ds(start, bk)
        amask = rmask if kmask is None else rmask & kmask[None, :]
        bmask = cmask if kmask is None else cmask & kmask[:, None]
        if m % bm or kmask is not None:
            at = plgpu.load(a_ref.at[:, ka], mask=amask, other=0.0)
        else:
            at = a_ref[:, ka]
        if n % bn or kmask is not None:
            bt = plgpu.load(b_ref.at[ka, :], mask=bmask, other=0.0)
        else:
            bt = b_ref[ka, :]
        a_hi, a_lo, b_hi, b_lo = _dot3(at, bt)
        acc = acc + jnp.dot(a_lo, b_hi, preferred_element_type=jnp.float32)
        acc = acc + jnp.dot(a_hi, b_lo, preferred_element_type=jnp.float32)
        return acc + jnp.dot(a_hi, b_hi, preferred_element_type=jnp.float32)

    acc = jnp.zeros((bm, bn), jnp.float32)
    acc = lax.fori_loop(0, k // bk, lambda i, acc: step(pl.multiple_of(i * bk, bk), acc), acc)
    if k % bk:
        if k >= bk:
            # last partial slice: read the in-bounds slice [k - bk, k) and keep only the
            # columns the loop has not covered yet
            acc = step(k - bk, acc, kmask=kk >= bk - k % bk)
        else:
            acc = step(0, acc, kmask=kk < k)
    if m % bm or n % bn:
        plgpu.store(c_ref, acc, mask=rmask & cmask)
    else:
        c_ref[...] = acc


def matmul(a, b, M, K, N):
    # Configurations that compile to wgmma without register spills on sm_90 (the 3xTF32
    # split triples the operand registers; the edge masks and the K-tail step add more).
    if pl.cdiv(M, 128) * pl.cdiv(N, 128) < 132:
        bm, bn, bk, num_warps, num_stages = 64, 64, 32, 4, 3
    elif M % 128 or N % 128 or K % 16:
        bm, bn, bk, num_warps, num_stages = 128, 64, 32, 8, 3
    else:
        bm, bn, bk, num_warps, num_stages = 128, 128, 16, 8, 4
    gm, gn = pl.cdiv(M, bm), pl.cdiv(N, bn)
    return pl.pallas_call(
        functools.partial(_matmul_kernel, m=M, k=K, n=N, bm=bm, bn=bn, bk=bk, gm=gm, gn=gn),
        out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
        grid=(gm * gn,),
        in_specs=[pl.BlockSpec((bm, K), lambda p: (_tile(p, gm, gn)[0], 0)),
                  pl.BlockSpec((K, bn), lambda p: (0, _tile(p, gm, gn)[1]))],
        out_specs=pl.BlockSpec((bm, bn), lambda p: _tile(p, gm, gn)),
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
    )(a, b)
