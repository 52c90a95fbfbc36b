"""Solves with LU factors where they lie: the getrs steps and LAPACK's gecon estimate.

Both work on the array module of the factors, `xp` (CuPy on the GPU; NumPy for the NumPy
emulation the tests run): the row interchanges by our laswp kernel (NumPy: its reference), the
triangular solves, up to trsv.MAX_RHS right-hand sides, by our few-column kernel (lu/trsv.py:
each triangle read once), beyond by our blocked solves (lu/trsm.py: a kernel per diagonal
block, a GEMM per block's coupling) for A x = b, and `cupyx.scipy.linalg.solve_triangular`
(cuBLAS trsm) for the transposed systems (NumPy: SciPy's).  The factors are lu_factor's: the row-major (C-ordered) n x n LU of a real
dtype and 0-based LAPACK pivots.
"""

import numpy as np

from ..core import mapped
from ..core.element import exact
from .. import tuning
from ..core.finite import NONFINITE
from ..layout import permute
from ..layout.laswp import laswp_reference, row_leading_dim
from . import trsm as _trsm
from . import trsv


def _kit(xp):
    """(solve_triangular, laswp(x, piv, inverse) in place) for arrays of module xp."""
    if xp is np:
        import scipy.linalg
        return scipy.linalg.solve_triangular, laswp_reference
    from cupyx.scipy.linalg import solve_triangular

    from ..layout.laswp import laswp_inplace
    return solve_triangular, laswp_inplace


def _row_major(a):
    """a is a row-major view (unit column stride): the layout the few-column solve reads."""
    size = a.itemsize
    return row_leading_dim(a.shape, (a.strides[0] // size, a.strides[1] // size)) is not None


def few_columns(LU, B, trans):
    """Whether `getrs_few` takes the system: A x = b (trans 0) with real row-major factors LU
    on the GPU, B of LU's dtype with whole-element strides and at most trsv.MAX_RHS columns,
    0 < n <= permute.max_rows()."""
    n = LU.shape[0]
    size = LU.itemsize
    return (trans == 0 and exact(LU.dtype) is not None and B.dtype == LU.dtype
            and 0 < n <= permute.max_rows() and B.size // n <= trsv.MAX_RHS
            and all(st % size == 0 for st in B.strides) and _row_major(LU))


def getrs_few(LU, B, piv, check_finite, range_message):
    """A^{-1} B for A = P L U given by (LU, piv), CuPy arrays on the current device (see
    few_columns; B (n, nrhs) any strides, piv int32 (n,)): a new row-major X, by one gather
    (the interchanges applied as one permutation: layout/permute.py, which also checks the
    pivots' range and B's values) and the two few-column triangular solves, then one
    synchronisation to read the checks.  ValueError(range_message) where a pivot lies
    outside [0, n); ValueError for an inf or NaN in B where check_finite."""
    flags = mapped.flags()
    gen = flags.next_gen()
    X = _solve_few(LU, B, piv, flags, gen, 0)
    bad, nonfinite = flags.wait(gen)
    if bad:
        raise ValueError(range_message)
    if check_finite and nonfinite:
        raise ValueError(NONFINITE)
    return X


def _solve_few(LU, B, piv, flags, gen, trans):
    """op(A)^{-1} B on the GPU with few columns (see few_columns): a new row-major X by the
    interchanges as one gather (trans 0: before the solves; else one scatter after them) and
    one few-column solve per triangle, the gather's checks reported to `flags` under `gen`."""
    if trans == 0:
        X = permute.permute_rows(B, piv, flags, gen)
        trsv.solve_triangular_few(LU, X, lower=True)
        return trsv.solve_triangular_few(LU, X, lower=False)
    X = trsv.solve_triangular_few(LU, B, lower=False, trans=True)
    trsv.solve_triangular_few(LU, X, lower=True, trans=True)
    return permute.permute_rows(X, piv, flags, gen, inverse=True)


def getrs(xp, LU, X, piv, trans=0):
    """op(A)^{-1} X for A = P L U given by (LU, piv): X row-major (n x nrhs, C-ordered) of
    LU's dtype, modified or replaced; returns the solution (n x nrhs).  piv: the pivots as an
    array of xp (0-based, absolute).  trans 0: A x = b; 1: A^T x = b; 2: A^H x = b.  Complex
    factors (cuSOLVER's, through lu_factor's complex route) are solved by cuSOLVER's getrs
    (NumPy: LAPACK's)."""
    if np.dtype(LU.dtype).kind == "c":
        if xp is np:
            from scipy.linalg import lu_solve
        else:   # CuPy's implementation module (see lu.plan._cusolver)
            from cupyx.scipy.linalg._decomp_lu import lu_solve
        return lu_solve((LU, piv), X, trans=trans, check_finite=False)
    trsm, laswp = _kit(xp)
    if (xp is not np and trans == 0 and X.shape[1] > trsv.MAX_RHS and X.flags.c_contiguous
            and _row_major(LU)):
        # many right-hand sides: blocked forward and back substitution (lu/trsm.py)
        laswp(X, piv, False)
        element = exact(LU.dtype)
        n, nrhs = X.shape
        if nrhs >= tuning.current(element=element).solve_tc_min_rhs:
            return _trsm.solve_lu_blocked(LU, X, "auto")        # tensor-core couplings
        ld = LU.strides[0] // LU.itemsize
        _trsm.trsm_ptr(n, nrhs, LU.data.ptr, ld, X.data.ptr, nrhs, element=element)
        _trsm.trsm_upper_ptr(n, nrhs, LU.data.ptr, ld, X.data.ptr, nrhs, element=element)
        return X
    if xp is not np and X.shape[1] <= trsv.MAX_RHS and _row_major(LU):
        # few right-hand sides: one bandwidth-bound launch per triangle (lu/trsv.py), the
        # interchanges as one gather (or scatter) where one block holds the permutation
        if X.shape[0] <= permute.max_rows():
            flags = mapped.flags()
            return _solve_few(LU, X, piv.astype(np.int32, copy=False), flags,
                              flags.next_gen(), trans)
        if trans == 0:
            laswp(X, piv, False)
            trsv.solve_triangular_few(LU, X, lower=True)
            return trsv.solve_triangular_few(LU, X, lower=False)
        trsv.solve_triangular_few(LU, X, lower=False, trans=True)
        trsv.solve_triangular_few(LU, X, lower=True, trans=True)
        return laswp(X, piv, True)
    if trans == 0:
        X = laswp(X, piv, False)                                                 # P^T b
        X = trsm(LU, X, lower=True, unit_diagonal=True)                          # L y = X
        return trsm(LU, X, lower=False)                                          # U x = y
    X = trsm(LU, X, trans=1, lower=False)                                        # U^T y = b
    X = trsm(LU, X, trans=1, lower=True, unit_diagonal=True)                     # L^T z = y
    X = xp.ascontiguousarray(X)
    return laswp(X, piv, True)                                                   # x = P z


def norm1(xp, a, wait=True):
    """||a||_1, the largest column sum of |a|, as a Python float (one host synchronisation);
    for a non-empty stack (..., m, n), each matrix's, as a NumPy float64 array, or with
    wait=False as an array of xp not waited for (`host` brings it over)."""
    if a.ndim > 2:
        norms = xp.abs(a).sum(axis=-2).max(axis=-1)
        return host(norms).astype(np.float64) if wait else norms
    return float(xp.abs(a).sum(axis=0).max()) if a.size else 0.0


def host(v):
    """A NumPy copy of the small array v (NumPy or CuPy)."""
    return v.get() if hasattr(v, "get") else np.asarray(v)


def inverse_norm1(solve, count, n, xp, dtype, max_iter=5):
    """Estimates of ||A_b^{-1}||_1 for a stack of `count` matrices A_b of order n from solves
    with them (LAPACK's xlacn2 for each: Hager's method as refined by Higham, 1988):
    solve(x, trans) returns the rows A_b^{-1} x_b (trans 0) or A_b^{-H} x_b (trans 1) for x
    (count, n) of xp.  A NumPy float64 array (count,).  Every matrix takes xlacn2's steps and
    stops where it does; the stack is solved whole until the last one stops (at most
    2 * max_iter + 1 solves); every step reads norms and indices on the host."""
    complex_ = np.dtype(dtype).kind == "c"

    def sign(y):
        if complex_:
            a = xp.abs(y)
            return xp.where(a > 0, y / xp.where(a > 0, a, 1), 1).astype(dtype)
        return xp.where(y >= 0, 1, -1).astype(dtype)

    rows = xp.arange(count)
    x = xp.full((count, n), 1.0 / n, dtype=dtype)
    est, xi = np.zeros(count), None
    active = np.ones(count, bool)
    for it in range(max_iter):
        y = solve(x, 0)
        new = host(xp.abs(y).sum(axis=1)).astype(np.float64)
        s = sign(y)
        stop = np.zeros(count, bool)
        if it > 0:   # xlacn2 stops on a repeated sign vector or a sum no larger than before
            same = np.zeros(count, bool) if complex_ else host((s == xi).all(axis=1))
            stop = (new <= est) | same
        est = np.where(active, new, est)    # as xlacn2, which keeps the new sum either way
        active &= ~stop
        if not active.any():
            break
        keep = xp.asarray(active)[:, None]
        xi = s if xi is None else xp.where(keep, s, xi)
        z = solve(xi, 1)
        j = xp.argmax(xp.abs(z), axis=1)
        if it > 0:
            largest = host(xp.abs(z[rows, j]))
            along = host(xp.real((xp.conj(z) * x).sum(axis=1)))
            active &= ~(largest <= along)
            if not active.any():
                break
        e = xp.zeros((count, n), dtype=dtype)
        e[rows, j] = 1
        x = xp.where(xp.asarray(active)[:, None], e, x)
    # Higham's alternative vector guards against the underestimates of special structure.
    i = xp.arange(n, dtype=np.float64)
    alt = ((-1.0) ** i * (1 + i / max(n - 1, 1))).astype(dtype)
    alt = xp.ascontiguousarray(xp.broadcast_to(alt, (count, n)))
    return np.maximum(est, 2 * host(xp.abs(solve(alt, 0)).sum(axis=1)) / (3 * n))


def rcond(xp, LU, piv, anorm):
    """LAPACK's xgecon: the reciprocal 1-norm condition number estimate 1 / (||A||_1
    ||A^{-1}||_1) from the factors (LU, piv) of A and anorm = ||A||_1.  0 where anorm is 0 or
    the solves overflow."""
    n = LU.shape[0]
    if n == 0:
        return float("inf")

    def solve(x, trans):
        return getrs(xp, LU, xp.array(x.reshape(n, 1), order="C"), piv,
                     2 * trans).reshape(1, n)

    with np.errstate(all="ignore"):
        inv = inverse_norm1(solve, 1, n, xp, LU.dtype)
    return float(reciprocal_condition(inv, np.array([anorm]))[0])


def reciprocal_condition(inv, anorm):
    """xgecon's result for a stack from the estimates inv of ||A_b^{-1}||_1 and the 1-norms
    anorm (NumPy, (count,)): 1 / (||A_b||_1 ||A_b^{-1}||_1), 0 where a norm is 0 or the solves
    overflowed."""
    inv, anorm = np.asarray(inv, np.float64), np.asarray(anorm, np.float64)
    with np.errstate(all="ignore"):
        ok = np.isfinite(inv) & (inv > 0) & (anorm > 0)
        return np.where(ok, 1.0 / np.where(ok, anorm * inv, 1.0), 0.0)
