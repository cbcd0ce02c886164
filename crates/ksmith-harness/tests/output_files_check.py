"""What the trusted server makes of the output files a candidate leaves in its own directory:
a verdict on the candidate for anything that is not the tensor (wrong size, a byte count that
is no whole number of elements, a FIFO, a directory, a link, nothing), never an error of the
judge's own. Run by trusted_checks.rs with the harness directory on sys.path."""

import os
import sys
import tempfile

import numpy as np
from ksmith_harness import trusted


def verdict(path, dt="float32", shape=(3,)):
    try:
        return trusted._load_output(path, dt, shape)
    except trusted._Unfit as e:
        return e.args[:2]


with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "good.bin")
    np.arange(3, dtype=np.float32).tofile(good)
    got = verdict(good)
    assert isinstance(got, np.ndarray) and got.shape == (3,) and got.tolist() == [0.0, 1.0, 2.0], got

    for name, nbytes in [("ragged", 10), ("short", 8), ("long", 16), ("odd", 1), ("empty", 0)]:
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(b"\x01" * nbytes)
        assert verdict(p) == ("INCORRECT_SHAPE", "output_size_mismatch"), (name, verdict(p))

    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    assert verdict(fifo) == ("RUNTIME_ERROR", "output_missing"), verdict(fifo)
    sub = os.path.join(d, "dir")
    os.mkdir(sub)
    assert verdict(sub) == ("RUNTIME_ERROR", "output_missing"), verdict(sub)
    link = os.path.join(d, "link")
    os.symlink(good, link)
    assert verdict(link) == ("RUNTIME_ERROR", "output_missing"), verdict(link)
    assert verdict(os.path.join(d, "absent")) == ("RUNTIME_ERROR", "output_missing")
    # bfloat16 outputs are read as their own dtype: 2 bytes an element.
    bf = os.path.join(d, "bf.bin")
    with open(bf, "wb") as f:
        f.write(b"\x00" * 5)
    assert verdict(bf, "bfloat16") == ("INCORRECT_SHAPE", "output_size_mismatch"), verdict(bf, "bfloat16")

print("ok: every unusable output file is a verdict on the candidate")
sys.exit(0)
