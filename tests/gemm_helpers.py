"""Shared setup for the GEMM tests."""

import numpy as np


def orders_problem(cp, rng, orders, vec):
    """C = 1.5 A B - 0.5 C with A, B, C in the memory orders `orders` (e.g. "FCF") on the GPU.

    vec: leading dimensions that allow 16-byte accesses; otherwise odd ones, forcing the
    scalar/4-byte paths.  Returns (A, B, C, float64 reference)."""
    m, n, k = (132, 76, 44) if vec else (131, 77, 45)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c0 = rng.standard_normal((m, n), dtype=np.float32)
    ref = 1.5 * (a.astype(np.float64) @ b) - 0.5 * c0
    put = lambda x, order: cp.asarray(np.asarray(x, order=order))
    return put(a, orders[0]), put(b, orders[1]), put(c0, orders[2]), ref
