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


def rel_err(c, ref):
    """||c - ref||_F / ||ref||_F in float64."""
    return np.linalg.norm(np.asarray(c, dtype=np.float64) - ref) / max(np.linalg.norm(ref), 1e-300)


def simt_err(cp, a, b, ref, alpha=1.0, beta=0.0, c0=None):
    """rel_err of our SIMT SGEMM on the same product (the accuracy yardstick of 3xTF32), in
    one pass over k: the public path splits a long k over few tiles into parts summed
    apart, which is more accurate than one FP32 dot product (256^2 x 16384, 64 parts: 2.4e-7,
    below 3xTF32's 8.5e-7 there; H100) and so no yardstick."""
    from gpulinalg.gemm import simt
    c = cp.asarray(c0) if c0 is not None else cp.full(ref.shape, np.nan, dtype=np.float32)
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    simt.gemm_into(alpha, cp.asarray(a), cp.asarray(b), beta, c,
                   variant=simt.pick_variant(m, n, k, beta), split=1)
    return rel_err(cp.asnumpy(c), ref)


def check_edges_and_accuracy(cp, rng, shape, mode, run):
    """run(a, b) -> a @ b on the device (NaN-poisoned output, beta = 0) for an m x n x k
    problem: every element written and finite, zeros for k = 0, and the error of the mode:
    3xtf32 within 1.5x the SIMT kernel's, tf32 within TF32's rounding."""
    m, n, k = shape
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = cp.asnumpy(run(a, b))
    assert np.isfinite(out).all()
    if not (m * n and k):
        assert not out.any()
        return
    err = rel_err(out, ref)
    if mode == "3xtf32":
        assert err <= max(1.5 * simt_err(cp, a, b, ref), 2e-6)
    else:
        assert err <= 2e-3 * max(1.0, np.sqrt(k) / 16)


def check_current_stream(cp, rng, gemm_into):
    """gemm_into(alpha, a, b, beta, c) runs on the caller's current (non-default) stream."""
    a = cp.asarray(rng.standard_normal((300, 200), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((200, 100), dtype=np.float32))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = cp.full((300, 100), cp.nan, dtype=cp.float32)
        gemm_into(1.0, a, b, 0.0, c)
        r = cp.asnumpy(c, stream=s)
    s.synchronize()
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b)
    assert rel_err(r, ref) < 1e-5
