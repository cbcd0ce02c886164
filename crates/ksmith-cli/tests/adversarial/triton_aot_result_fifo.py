# task: vector_add; expect: PASSED
# Red team 2026-12-06: Triton's host code runs ahead of time in the build sandbox, in a work
# directory that ends up in the build cache, and the judge then read `result.json` there by
# path, following whatever the candidate left under that name. Here a FIFO (a link to
# /dev/zero would exhaust the judge's memory instead): the judge blocked on it forever, no
# verdict. `os` comes in through a Triton module that imports it (the AST policy checks the
# imported module's root, not what the name is). Now nothing the candidate leaves in the work
# directory but a bounded, regular `result.json` read without following links is used, and
# nothing of it is kept; this kernel is correct and its run in the interpreter passes.
import triton
import triton.language as tl
from triton.runtime.cache import os

if os.path.exists("request.json"):  # the ahead-of-time compile's work directory
    os.mkfifo("result.json")
    os._exit(0)


@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def vector_add(a, b, c, N):
    add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024)
