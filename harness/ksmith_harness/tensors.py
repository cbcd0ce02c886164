"""Dtypes, poison patterns, input generation and hashing shared by both processes.

Only numpy (and ml_dtypes for bfloat16) here: the untrusted runner imports this module and must
not load JAX.
"""

import hashlib

import numpy as np

try:
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes ships with jax
    _BF16 = None

NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.uint8),
}
if _BF16 is not None:
    NUMPY_DTYPES["bfloat16"] = _BF16

# Raw bit patterns written into outputs before every call: quiet NaNs with a payload no
# arithmetic produces, so an untouched element is told apart from a computed NaN.
POISON_BITS = {
    "float32": (np.uint32, 0x7FC07E57),
    "float64": (np.uint64, 0x7FF800007E577E57),
    "float16": (np.uint16, 0x7E57),
    "bfloat16": (np.uint16, 0x7FD7),
    "int8": (np.uint8, 0x57),
    "uint8": (np.uint8, 0x57),
    "bool": (np.uint8, 0x57),
    "int16": (np.uint16, 0x7E57),
    "int32": (np.uint32, 0x7E577E57),
    "int64": (np.uint64, 0x7E577E577E577E57),
}


def np_dtype(name):
    """numpy dtype for a task dtype name."""
    return NUMPY_DTYPES[name]


def bits_view(arr, dtype_name):
    """Unsigned-integer view of an array's raw bits."""
    return arr.view(POISON_BITS[dtype_name][0])


def poison(arr, dtype_name):
    """Fills `arr` in place with the poison pattern of its dtype."""
    uint, bits = POISON_BITS[dtype_name]
    arr.view(uint).fill(bits)


def poisoned_mask(arr, dtype_name):
    """Boolean mask of elements still holding the poison pattern."""
    uint, bits = POISON_BITS[dtype_name]
    return arr.view(uint) == uint(bits)


def digest(arr):
    """Content hash of an array's raw bytes."""
    return hashlib.sha256(np.ascontiguousarray(arr).view(np.uint8)).hexdigest()  # SHA-NI accelerated: 2x blake2b here


class GeneratorError(ValueError):
    """A task's generator returned something other than what its input declares."""


def draw(rng, dist, shape, dtype_name, axes, generators):
    """Draws one input according to its distribution."""
    kind = dist["dist"]
    dt = np_dtype(dtype_name)
    if kind == "normal":
        a = rng.normal(dist["mean"], dist["std"], size=shape)
    elif kind == "uniform":
        a = rng.uniform(dist["low"], dist["high"], size=shape)
    elif kind == "integers":
        a = rng.integers(dist["low"], dist["high"], size=shape)
    elif kind == "constant":
        a = np.full(shape, dist["value"])
    elif kind == "generator":
        fn = generators(dist["function"])
        a = np.asarray(fn(rng, tuple(shape), dt, dict(axes)))
        if tuple(a.shape) != tuple(shape):
            raise GeneratorError(f"returned shape {a.shape}, expected {tuple(shape)}")
        # A silent cast would hide a generator that computes something else than it meant
        # (int64 indices for a float32 input, float64 values rounded to int32).
        if a.dtype != dt and not (dtype_name == "bool" and a.dtype == np.bool_):
            raise GeneratorError(f"returned {a.dtype}, the input is {dtype_name} (end with .astype(dtype))")
    else:
        raise ValueError(f"unknown distribution {kind!r}")
    return np.ascontiguousarray(a.astype(dt))
