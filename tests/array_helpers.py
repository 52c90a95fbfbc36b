"""Shared test helpers for arrays: arbitrary bit patterns and the layouts a kernel must read."""

import numpy as np


def random_bits(rng, shape, dtype):
    """Arbitrary bit patterns of `dtype` (NaNs with payloads, infinities, subnormals, -0):
    data movement must carry every one unchanged."""
    size = np.dtype(dtype).itemsize
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * size, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def bits(x):
    """x's bit patterns as unsigned integers (compares NaN payloads and signed zeros)."""
    x = np.ascontiguousarray(x)
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint64)


def view_maker(cp, view, m, n):
    """make(d): an m x n (or m-long) view of the named layout of the device array d, whose
    shape is at least (m + 3, 2n + 5): C- and F-ordered copies, column blocks, an F-ordered
    block, reversed strides, a strided slice, one column, a vector, a strided row."""
    return {"C": lambda d: cp.ascontiguousarray(d[:m, :n]),
            "F": lambda d: cp.asfortranarray(d[:m, :n]),
            "cols": lambda d: d[1:m + 1, 2:n + 2],
            "rows_f": lambda d: cp.asfortranarray(d)[1:m + 1, :n],
            "reversed": lambda d: d[m - 1::-1, n - 1::-1],
            "strided": lambda d: d[:m, 1:2 * n + 1:2],
            "column": lambda d: d[:m, 1:2],
            "vector": lambda d: d[:m, 0],
            "row": lambda d: d[2, 1:2 * n + 1:2]}[view]
