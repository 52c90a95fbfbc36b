"""Shared helpers for the LU tests: factors, backward error, test matrices, LAPACK checks."""

import warnings

import numpy as np
import scipy.linalg as sl

from gpulinalg.layout.laswp import laswp_reference


def assert_same_pivots(piv, ref_lu, ref_piv, rtol=None):
    """Pivots equal LAPACK's, or first differ at a column where LAPACK's choice was a near-tie.

    Our updates sum in another order than LAPACK's, so a candidate within rounding of the
    maximum (|l_ij| >= 1 - rtol in LAPACK's L) may win instead; after that the two
    factorizations legitimately part ways.  Anything else is a wrong pivot.  Rounding: an
    entry after j updates carries a relative error up to ~j eps, so rtol defaults to
    max(1e-4, m eps) for m rows (8192 rows: 4.9e-4; a near-tie of 1.3e-4 was seen there).
    """
    piv, ref_piv, ref_lu = np.asarray(piv), np.asarray(ref_piv), np.asarray(ref_lu)
    if rtol is None:
        rtol = max(1e-4, ref_lu.shape[0] * EPS)
    assert piv.shape == ref_piv.shape
    diff = np.nonzero(piv != ref_piv)[0]
    if diff.size == 0:
        return
    j = int(diff[0])
    below = np.abs(ref_lu[j + 1:, j])
    runner_up = float(below.max()) if below.size else 0.0
    assert runner_up >= 1 - rtol, (
        f"pivot {j} is {piv[j]}, LAPACK's {ref_piv[j]}, and no other candidate was within "
        f"{rtol} of the maximum (runner-up |l| = {runner_up:.7f})")


EPS = np.finfo(np.float32).eps


# ---------------------------------------------------------------- helpers

def factors(lu, piv):
    """(perm, L, U) in float64: (L U)[i] = A[perm[i]]."""
    lu = np.asarray(lu, dtype=np.complex128 if np.iscomplexobj(lu) else np.float64)
    m, n = lu.shape
    k = min(m, n)
    L = np.tril(lu[:, :k], -1) + np.eye(m, k)
    U = np.triu(lu[:k, :])
    return laswp_reference(np.arange(m), np.asarray(piv)), L, U


def eps_of(dtype):
    """The machine epsilon of a working dtype (complex: of its real part)."""
    return float(np.finfo(np.dtype(dtype)).eps)


def backward_error(a, lu, piv, eps=EPS):
    """||PA - LU||_F / (||A||_F n eps), products in float64 (complex128 for complex)."""
    wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(lu) else np.float64
    a = np.asarray(a, dtype=wide)
    perm, L, U = factors(np.asarray(lu, dtype=wide), piv)
    scale = max(np.linalg.norm(a), 1e-300) * max(a.shape) * eps
    return np.linalg.norm(a[perm] - L @ U) / scale


def wilkinson(n, dtype=np.float32):
    """Pivot growth 2^(n-1) under partial pivoting."""
    a = np.tril(-np.ones((n, n)), -1) + np.eye(n)
    a[:, -1] = 1
    return a.astype(dtype)


def with_cond(rng, n, cond, dtype=np.float32):
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return ((u * np.logspace(0, -np.log10(cond), n)) @ v.T).astype(dtype)


def assert_matches_lapack(a, lu, piv, same_pivots=True, ref=None):
    """Pivots as LAPACK's (up to near-ties) and ||PA - LU|| within 2x of LAPACK's xgetrf in
    the working dtype of `a` (sgetrf for float32, dgetrf for float64, ...), or of `ref`, a
    reference backward error the caller computed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_lu, ref_piv = sl.lu_factor(a)
    eps = eps_of(ref_lu.dtype)
    if same_pivots:
        assert_same_pivots(piv, ref_lu, ref_piv,
                           rtol=max(1e-4 if eps > 1e-10 else 1e-10, ref_lu.shape[0] * eps))
    ours = backward_error(a, lu, piv, eps)
    if ref is None:
        ref = backward_error(a, ref_lu, ref_piv, eps)
    assert ours <= 2 * ref + 1e-3, (ours, ref)


# Stacks with the cases a pivot search must get right (the batched kernels' tests).

def rank_deficient(rng, b, m, n, dtype):
    """Half of the rows zero, in random places: rank r = m - m // 2 (exactly), the zero rows
    stay zero, every pivot from step r on is zero (info = r + 1 where r < min(m, n))."""
    a = rng.standard_normal((b, m, n))
    for i in range(b):
        a[i, rng.permutation(m)[: m // 2]] = 0.0
    return a.astype(dtype)


def tied(rng, b, m, n, dtype):
    """Column 0 holds the maximum magnitude 4 in several rows (signs mixed), the first of
    them copied, negated, to another row: the tie goes to the first, every multiplier of
    step 0 at a tied row is exactly +-1 (a power-of-two pivot), so the copy becomes exactly
    zero and no later pivot depends on rounding."""
    a = rng.uniform(-1, 1, (b, m, n))
    if m >= 2:
        for i in range(b):
            rows = rng.permutation(m)[: max(2, m // 3)]
            a[i, rows, 0] = np.where(np.arange(rows.size) % 2, 4.0, -4.0)
            a[i, rows[1:].max() if rows[0] == rows.min() else rows[0]] = -a[i, rows.min()]
    return a.astype(dtype)


def special_stack(rng, b, m, n, dtype):
    """Random, tied, zero-column, rank-deficient, all-zero, integer, NaN and infinity members."""
    a = rng.standard_normal((b, m, n))
    for i in range(b):
        kind = i % 8
        if kind == 1:
            a[i] = tied(rng, 1, m, n, np.float64)[0]
        elif kind == 2:
            a[i, :, rng.integers(0, n)] = 0
        elif kind == 3:
            a[i] = rank_deficient(rng, 1, m, n, np.float64)[0]
        elif kind == 4:
            a[i] = 0
        elif kind == 5:
            a[i] = rng.integers(-2, 3, (m, n))
        elif kind == 6:
            a[i, rng.integers(0, m), rng.integers(0, n)] = np.nan
        elif kind == 7:
            a[i, rng.integers(0, m), rng.integers(0, n)] = np.inf
    return a.astype(dtype)


def raised(fn):
    """The exception fn() raises, or None: for comparing ours with SciPy's."""
    try:
        fn()
    except Exception as exc:     # noqa: BLE001 -- the caller compares it
        return exc
    return None
