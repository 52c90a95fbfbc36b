"""Shared test helpers for arrays: arbitrary bit patterns and the layouts a kernel must read."""

import types

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


def assert_same_bits(x, y):
    """Equal, NaN where NaN (any payload), zeros of either sign equal."""
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape
    nan = np.isnan(x)
    np.testing.assert_array_equal(nan, np.isnan(y))
    np.testing.assert_array_equal(x[~nan], y[~nan])


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


class FakeDeviceArray:
    """What a launcher's validation reads of a CuPy array (kind, ndim, shape, strides, dtype,
    size), over a NumPy array, plus what the launch path reads (data.ptr, data.device_id,
    fill): the CPU tests' stand-in for device arrays."""

    __module__ = "cupy._fake"

    def __init__(self, a, ptr=1 << 32, device_id=0):
        self._a = a
        self.ndim, self.shape, self.strides = a.ndim, a.shape, a.strides
        self.dtype, self.size = a.dtype, a.size
        self.data = types.SimpleNamespace(ptr=ptr, device_id=device_id)
        self.filled = None

    def __getitem__(self, key):
        return FakeDeviceArray(self._a[key], self.data.ptr, self.data.device_id)

    def fill(self, value):
        self.filled = value


def fake(shape, dtype=np.float32, **kw):
    """A FakeDeviceArray of zeros."""
    return FakeDeviceArray(np.zeros(shape, dtype), **kw)
