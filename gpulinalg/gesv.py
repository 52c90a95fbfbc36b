"""solve, inv and det on the GPU, SciPy-compatible, on gpulinalg's LU.

Each function checks its arguments without a GPU, returns early where nothing is to be
computed, factors the matrix once with our LU (`linalg._factor`: the plan, its route and the
backend that runs it) and finishes with the factors where they lie (lu/getrs.py).  A float64
`solve` may factor a float32 copy and refine the float64 answer instead (`_refined`).
assume_a='pos' first checks that the matrix is positive definite by a Cholesky factorization
(`_not_positive_definite`), as SciPy refuses one that is not.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np

from . import linalg as _linalg
from . import tuning as _tuning
from .core import arrays as _arrays
from .core import finite as _finite
from .core import mapped as _mapped
from .core.backend import cupy
from .core.element import F64
from .core.element import element as _element
from .lu import getrs as _getrs
from .lu import plan as _plan
from .lu import stacked as _stacked

__all__ = ["solve", "inv", "det", "SolveInfo"]

# assume_a's structures that our LU solves (the symmetric kinds from the indicated triangle),
# by SciPy's names and aliases.
_LU_STRUCTURES = {None: "general", "general": "general", "gen": "general",
                  "symmetric": "symmetric", "sym": "symmetric",
                  "hermitian": "hermitian", "her": "hermitian",
                  "positive definite": "positive definite", "pos": "positive definite"}
# The structured kinds SciPy also takes, and what to call instead.
_ELSEWHERE = {
    "diagonal": "b / diag(a)[:, None] (or scipy.linalg.solve on the host)",
    "tridiagonal": "scipy.linalg.solve_banded, or cupyx.scipy.linalg.solve_banded",
    "banded": "scipy.linalg.solve_banded, or cupyx.scipy.linalg.solve_banded",
    "upper triangular": "cupyx.scipy.linalg.solve_triangular(a, b, lower=False)",
    "lower triangular": "cupyx.scipy.linalg.solve_triangular(a, b, lower=True)",
}


@dataclass(frozen=True)
class SolveInfo:
    """How `solve` reached its answer (``solve(..., return_info=True)``).

    path : "direct" (factored in the working dtype and solved), "refined" (float64: factored
        in float32, the answer refined in float64 to float64's backward error) or "fallback"
        (refinement stopped short and the float64 factorization answered).
    factor_dtype : the dtype of the factors that gave the answer's last correction.
    iterations : refinement steps taken (0 on the direct path).
    backward_error : the refined answer's normwise backward error ||b - A x||_inf /
        (||A||_inf ||x||_inf + ||b||_inf), largest over the columns; None on the direct path
        (not computed).
    rcond : the reciprocal 1-norm condition estimate (LAPACK's gecon) from the factors that
        answered, None where it was not needed (a converged refinement).
    """
    path: str
    factor_dtype: np.dtype
    iterations: int
    backward_error: float = None
    rcond: float = None


def _structure(assume_a, error=ValueError):
    """The structure our LU solves for `assume_a`; NotImplementedError for the structured
    kinds (naming what to call), `error` for unknown names (SciPy: ValueError in solve,
    KeyError in inv)."""
    if assume_a in _ELSEWHERE:
        raise NotImplementedError(
            f"gpulinalg solves assume_a={assume_a!r} as a general matrix only on request: "
            f"pass assume_a='general', or use {_ELSEWHERE[assume_a]}")
    try:
        return _LU_STRUCTURES[assume_a]
    except (KeyError, TypeError):
        raise error(f"{assume_a} is not a recognized matrix structure") from None


def _singular(slices=(0,)):
    """SciPy's error for singular matrices (and, with assume_a='pos', for matrices that are
    not positive definite), naming the flat indices of the slices."""
    from scipy.linalg import LinAlgError
    return LinAlgError(f"A singular matrix detected: slice(s) {list(slices)} are singular.")


def _not_positive_definite(xp, M):
    """Which matrices of M ((n, n) or (count, n, n), each Hermitian, in module xp) are not
    positive definite: a NumPy bool array of M's batch shape (0-d for one matrix), by their
    Cholesky factorizations (cuSOLVER's potrf through CuPy on the device, LAPACK's through
    NumPy on the host).  Both raise one LinAlgError for a whole stack without naming its
    matrices, so the halves of a stack that fails are factored again, down to the single
    matrices that fail."""
    def fails(X):
        try:
            if xp is np:
                np.linalg.cholesky(X)
            else:
                import cupyx
                with cupyx.errstate(linalg="raise"):   # else CuPy does not read potrf's info
                    xp.linalg.cholesky(X)
        except np.linalg.LinAlgError:    # NumPy's and CuPy's (SciPy's is the same class)
            return True
        return False

    if M.ndim == 2:
        return np.array(fails(M))
    bad = np.zeros(len(M), bool)

    def mark(lo, hi):
        if fails(M[lo:hi]):
            if hi - lo == 1:
                bad[lo] = True
            else:
                mark(lo, (lo + hi) // 2)
                mark((lo + hi) // 2, hi)

    mark(0, len(M))
    return bad


def _warn_ill_conditioned(rcond, dtype, stacklevel=4):
    """SciPy's warning where the estimate is below the working dtype's eps."""
    if rcond < np.finfo(dtype).eps:
        warnings.warn(f"An ill-conditioned matrix detected: slice 0 has rcond = {rcond}.",
                      _linalg._linalg_warning(), stacklevel=stacklevel)


def _square(a, name="a"):
    """The order of a, a 2-D square matrix (stacks take their own paths before); ValueError
    otherwise."""
    if a.ndim < 2:
        raise ValueError(f"Expected at least ndim=2, got {name}.ndim={a.ndim}")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"Expected square matrix, got {name}.shape={tuple(a.shape)}")
    return a.shape[0]


def _working_matrix(xp, a, kind, dtype, structure, lower, check_finite, copy=True):
    """A C-ordered copy of `a` of `dtype` in module xp (copy=False: `a` itself where it is
    one, to be read only), the full matrix of its structure: the symmetric kinds are rebuilt
    from the triangle `lower` names (SciPy reads only that one, and checks all of `a` for
    non-finite numbers, as here)."""
    if xp is np:
        m = np.array(_arrays.host_view(a, "a"), dtype=dtype, order="C", copy=copy or None)
    else:
        m = xp.array(_arrays.to_device(a, kind, "a", dtype), dtype=dtype, order="C",
                     copy=copy)
    if check_finite and not _all_finite(xp, m):
        raise ValueError(_finite.NONFINITE)
    return _full(xp, m, structure, lower)


def _full(xp, m, structure, lower):
    """The full matrices (..., n, n) of `structure` from m: m itself for "general"; the
    symmetric kinds rebuilt from the triangle `lower` names, a new C-ordered array."""
    if structure == "general":
        return m
    # Hermitian for 'hermitian' and 'positive definite' (LAPACK's xpotrf reads its triangle
    # as Hermitian), symmetric for 'symmetric'
    hermitian = structure != "symmetric"
    n = m.shape[-1]
    keep = np.tri(n, dtype=bool) if lower else ~np.tri(n, k=-1, dtype=bool)
    tri = xp.where(xp.asarray(keep), m, xp.zeros((), m.dtype))    # any stack of matrices
    other = xp.swapaxes(tri, -1, -2)
    full = tri + (other.conj() if hermitian else other)
    diag = xp.arange(n)
    full[..., diag, diag] = m[..., diag, diag].real if hermitian else m[..., diag, diag]
    return xp.ascontiguousarray(full)


def _factors(M, backend, precision="auto"):
    """(xp, lu, piv, info) of the LU of the working matrix M (overwritten)."""
    options = _plan.Options("auto", None, 1, precision, None)
    return _linalg._factor(M, True, False, options,
                           lambda kind, xp, lu, piv, info: (xp, lu, piv, info),
                           backend=backend)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False, *, precision="auto", return_info=False):
    """Solve ``a @ x == b`` for ``x`` on the GPU.

    Parameters
    ----------
    a : (..., N, N) array_like
        Square matrix: NumPy/CuPy array or torch tensor (CPU or CUDA), any order or strides.
        Stacks broadcast with `b`'s as SciPy's and are solved at once (one stacked LU, one
        condition estimate of the stack, one batched solve), except float64 stacks that
        ``precision="auto"`` refines (orders from the tuning table's ``solve_refine_min_n``),
        solved matrix by matrix by the 2-D path; no `return_info`.
    b : (N,) or (..., N, NRHS) array_like
        Right-hand side(s), of the same kind as `a`.
    lower : bool, optional
        With a symmetric `assume_a`, use the lower triangle of `a` (default: the upper).
    overwrite_a, overwrite_b : bool, optional
        As SciPy's: where allowed, an F-ordered NumPy `a` of the working dtype receives the
        LU factors, and an F-ordered NumPy `b` of the result dtype receives the solution and
        is returned.  Other inputs are never modified.
    check_finite : bool, optional
        Check that `a` and `b` hold only finite numbers (ValueError otherwise).
    assume_a : str, optional
        None or 'general' ('gen'): our pivoted LU.  'symmetric' ('sym'), 'hermitian' ('her')
        and 'positive definite' ('pos', Hermitian): the matrix rebuilt from the triangle
        `lower` names, then our pivoted LU (no Bunch-Kaufman factorization).  'pos' first
        checks that the matrix is positive definite with a Cholesky factorization (cuSOLVER's
        potrf through CuPy on the GPU: about half an LU more, a copy of the matrix and a
        synchronisation) and raises LinAlgError, as SciPy, where it is not.  'diagonal',
        'tridiagonal', 'banded', 'upper triangular', 'lower triangular' raise
        NotImplementedError naming the function to use.
    transposed : bool, optional
        Solve ``a.T @ x == b`` (real `a` only, as SciPy).
    precision : {"auto", "fp64", "direct"}, keyword-only
        float64 systems: "auto" (default) factors a float32 copy of `a` with our LU and
        refines the float64 answer with float64 residuals of the original `a` until its
        backward error is float64's (LAPACK's dsgesv criterion); where the refinement stalls
        or diverges, or the float32 copy does not fit in GPU memory, `a` is factored in
        float64 and the answer comes from those factors: never less accurate than the direct
        path.  "fp64" (or "direct") factors in float64 at once.  Below the tuning table's
        ``solve_refine_min_n`` the direct path is taken (the float32 LU's fixed cost is not
        repaid).  Other dtypes solve directly in their working dtype.
    return_info : bool, keyword-only
        Also return a `SolveInfo` (the path, iterations, backward error, rcond).

    Returns
    -------
    x : (N,) or (N, NRHS) array
        Of b's shape, the inputs' kind, and SciPy's dtype (the promotion of the working
        dtypes of `a` and `b`: float32 for float32, float64 for float64 and integers, ...).
    info : SolveInfo
        With `return_info` only.

    Raises
    ------
    LinAlgError
        `a` is singular (an exactly zero pivot), or not positive definite with
        ``assume_a='pos'``: SciPy's "A singular matrix detected: slice(s) [0] are singular."
        for both (a stack's lists the flat batch indices of every such matrix).
    ValueError
        Shapes, non-finite input with `check_finite`, an unknown `assume_a` or `precision`,
        `return_info` with stacked input.
    NotImplementedError
        A structured `assume_a`; `transposed` with complex `a`.

    Warns
    -----
    LinAlgWarning
        The reciprocal condition estimate (LAPACK's gecon, on the GPU, from the factors) is
        below the working dtype's eps, as SciPy warns.

    Notes
    -----
    The estimate needs a few single right-hand-side solves and reads their norms on the
    host: the call synchronises with the GPU (as SciPy's semantics need the warning before
    returning).  A converged refinement skips it: its convergence already bounds the
    condition number far above eps.  Complex systems are factored and solved by cuSOLVER
    through CuPy (lu_factor's complex route).

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.array([[3, 2, 0], [1, -1, 0], [0, 5, 1]])
    >>> b = np.array([2, 4, -1])
    >>> x = gpulinalg.solve(a, b)
    >>> x
    array([ 2., -2.,  9.])
    >>> np.allclose(a @ x, b)
    True
    """
    return _solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a, transposed,
                  precision, return_info, _plan.DEVICE)


_PRECISIONS = ("auto", "fp64", "direct")


def _solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a, transposed, precision,
           return_info, backend):
    structure = _structure(assume_a)
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {_PRECISIONS}, got {precision!r}")
    a, b = _linalg._as_input(a), _linalg._as_input(b)
    kind = _arrays.common_kind(a, b)
    if a.ndim > 2 or b.ndim > 2:
        if return_info:
            raise ValueError("return_info describes one system; solve stacked systems "
                             "without it")
        return _solve_stack(a, b, kind, lower, check_finite, assume_a, transposed, precision,
                            backend)
    if a.ndim < 2 and a.size == 1:
        a = a.reshape(1, 1)
    n = _square(a)
    if b.ndim == 0:
        b = b.reshape(1)
    bshape = tuple(b.shape)
    if b.ndim > 2:
        raise ValueError(f"b has shape {bshape}: stacked right-hand sides (ndim > 2) are not "
                         "supported yet")
    if bshape[0] != n and n != 1:
        raise ValueError(f"incompatible shapes: a.shape={tuple(a.shape)} and b.shape={bshape}")
    dtype = np.promote_types(_element(_arrays.dtype_of(a)).dtype,
                             _element(_arrays.dtype_of(b)).dtype)
    if dtype.kind == "c" and transposed:
        raise NotImplementedError("scipy.linalg.solve can currently not solve a^T x = b or "
                                  "a^H x = b for complex matrices.")
    info = SolveInfo("direct", dtype, 0)
    xp = _stacked.module(backend)
    if n == 0 or b.size == 0:
        x = xp.empty(bshape, dtype)
        return _finish(x, kind, xp, bshape, info, return_info)
    # float64 refined from float32 factors reads a general `a` where it lies and checks it on
    # its float32 copy (the symmetric kinds' copy holds one triangle: `a` is checked first)
    refine = (dtype == F64.dtype and precision == "auto"
              and n >= _tuning.current(element=F64).solve_refine_min_n)
    defer_check = refine and structure == "general"
    with _stacked.context(xp, kind, (a, b)):
        M = _working_matrix(xp, a, kind, dtype, structure, lower,
                            check_finite and not defer_check, copy=not refine)
        B = _rhs(xp, b, kind, dtype)
        if check_finite and not _all_finite(xp, B):
            raise ValueError(_finite.NONFINITE)
        if n == 1:   # SciPy: a scalar a divides any b
            if not bool(M[0, 0] != 0):
                raise _singular()
            return _finish(B / M[0, 0], kind, xp, bshape, info, return_info)
        # 'pos' is checked once, before the direct, refined or fallback path factors M
        if structure == "positive definite" and _not_positive_definite(xp, M):
            raise _singular()
        trans = 1 if transposed else 0
        if refine:
            X, info = _refined(xp, M, B, trans, backend, check_finite)
        else:
            X, info, LU = _direct(xp, M, B, trans, backend)
            if overwrite_a and _writable_as(a, kind, dtype, "F"):
                _copy_into(a, LU)      # as LAPACK's gesv leaves its factors in a
        if overwrite_b and _writable_as(b, kind, dtype, "F"):
            _copy_into(b, _linalg._solution(xp, X, bshape))
            return (b, info) if return_info else b
        return _finish(X, kind, xp, bshape, info, return_info)


def _stack_module(kind, backend):
    """The array module stacked work is gathered in: the input's side (host or device)."""
    return np if backend.emulated or kind in _linalg._HOST_KINDS else cupy()


def _solve_stack(a, b, kind, lower, check_finite, assume_a, transposed, precision, backend):
    """solve over broadcast stacks, as SciPy 1.17's: a (..., N, N), b (..., N, K) or (N,).
    The whole stack at once (`_solve_batch`), except float64 systems that `precision="auto"`
    refines (orders from the table's solve_refine_min_n), each solved by the 2-D path."""
    xp = _stack_module(kind, backend)
    A, B = _stacked.native(a, xp), _stacked.native(b, xp)
    one = B.ndim == 1
    if one:
        B = B[:, None]
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected square matrix, got a.shape={tuple(A.shape)}")
    if B.shape[-2] != A.shape[-1]:
        raise ValueError(f"incompatible shapes: a.shape={tuple(A.shape)} and "
                         f"b.shape={tuple(b.shape)}")
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    dtype = np.promote_types(_element(A.dtype).dtype, _element(B.dtype).dtype)
    if dtype.kind == "c" and transposed:
        raise NotImplementedError("scipy.linalg.solve can currently not solve a^T x = b or "
                                  "a^H x = b for complex matrices.")
    n = A.shape[-1]
    if 0 in batch or A.size == 0 or B.size == 0:
        X = xp.empty(batch + tuple(B.shape[-2:]), dtype)
    elif (dtype == F64.dtype and precision == "auto"
          and n >= _tuning.current(element=F64).solve_refine_min_n):
        X = _stacked.over_batch(
            lambda ai, bi: _solve(ai, bi, lower, False, False, check_finite, assume_a,
                                  transposed, precision, False, backend),
            [A, B], [2, 2], xp)
    else:   # on the device whatever side the input is on (the emulation: on the host)
        xp = _stacked.module(backend)
        with _stacked.context(xp, kind, (a, b)):
            X = _solve_batch(xp, _stacked.native(A, xp), _stacked.native(B, xp), batch, dtype,
                             _structure(assume_a), lower, 1 if transposed else 0,
                             check_finite, backend)
    return _linalg._out(X[..., 0] if one else X, kind, xp)


def _solve_batch(xp, A, B, batch, dtype, structure, lower, trans, check_finite, backend):
    """op(A_b)^{-1} B_b over the broadcast `batch` (A (..., n, n), B (..., n, k) arrays of
    module xp; trans 0: A x = b, 1: A^T x = b), as SciPy's batched solve: with structure
    "positive definite", one LinAlgError naming the slices that are not; each distinct matrix
    of A factored once by the stacked LU, one LinAlgError naming the singular slices, one
    LinAlgWarning naming the ill-conditioned ones (the condition estimates of the whole stack
    at once), then one solve of the stack; the result (batch + (n, k)) of `dtype`."""
    n, nrhs = A.shape[-1], B.shape[-1]
    own = tuple(A.shape[:-2])
    count = math.prod(own)
    M = xp.array(A, dtype=dtype, order="C")
    Bs = xp.array(xp.broadcast_to(B, batch + (n, nrhs)), dtype=dtype, order="C")
    # Infs and NaNs: in a general A the stacked LU's kernel reports them, in b the batched
    # solve's (read with the estimates: no wait of their own); the symmetric kinds' a (all
    # of it, as SciPy's) and the other routes' b are checked here.
    in_kernel = _stacked.checked(xp, dtype, n)
    general = structure == "general"
    if check_finite and not ((general or _stacked._all_finite(xp, M))
                             and (in_kernel or _stacked._all_finite(xp, Bs))):
        raise ValueError(_finite.NONFINITE)
    M = _full(xp, M, structure, lower).reshape(count, n, n)

    def slices(flags):     # the flat indices in `batch` of the matrices of A flagged
        return [int(i) for i in np.flatnonzero(np.broadcast_to(flags.reshape(own), batch))]

    if structure == "positive definite":
        bad = _not_positive_definite(xp, M)
        if bad.any():
            raise _singular(slices(bad))
    anorm = _getrs.norm1(xp, M, wait=False)
    _, _, LU, piv, info = _stacked.factor(M, check_finite and general, _plan.Options(),
                                          backend, _linalg._factor_one, overwrite_a=True)
    LU, piv = LU.reshape(count, n, n), xp.asarray(piv).reshape(count, n)
    if info is not None and np.any(info):
        if check_finite and in_kernel and not _stacked._all_finite(xp, Bs):
            raise ValueError(_finite.NONFINITE)            # SciPy checks b first
        raise _singular(slices(info != 0))

    est = _stacked.inverse_norm1_stack(xp, LU, piv)
    total = math.prod(batch)
    if own != batch:
        LU = xp.ascontiguousarray(xp.broadcast_to(LU.reshape(own + (n, n)), batch + (n, n)))
        piv = xp.ascontiguousarray(xp.broadcast_to(piv.reshape(own + (n,)), batch + (n,)))
    flags = _mapped.flags() if in_kernel else None
    gen = flags.next_gen() if in_kernel else None
    X = _stacked.getrs_stack(xp, LU.reshape(total, n, n), piv.reshape(total, n),
                             Bs.reshape(total, n, nrhs), trans, overwrite_b=True, gen=gen)
    # One wait: the estimates, the norms and the solve's checks come back together.
    rc = _getrs.reciprocal_condition(_getrs.host(est), _getrs.host(anorm))
    if check_finite and in_kernel and flags.read(gen)[1]:
        raise ValueError(_finite.NONFINITE)
    ill = rc < np.finfo(LU.dtype).eps
    if ill.any():
        rcb = np.broadcast_to(rc.reshape(own), batch).ravel()
        listed = ",".join(f"slice {i} has rcond = {rcb[i]}" for i in slices(ill))
        warnings.warn(f"An ill-conditioned matrix detected: {listed}.",
                      _linalg._linalg_warning(), stacklevel=5)
    return X.reshape(batch + (n, nrhs))


def _rhs(xp, b, kind, dtype):
    """b as a C-ordered rows x nrhs array of `dtype` in module xp."""
    if xp is np:
        B = np.array(_arrays.host_view(b, "b"), dtype=dtype, order="C")
    else:
        B = xp.array(_arrays.to_device(b, kind, "b", dtype), dtype=dtype, order="C")
    return B.reshape(B.shape[0], -1)


def _all_finite(xp, x):
    return bool(xp.isfinite(x).all()) if xp is np else _finite.device_all_finite(x)


def _finish(X, kind, xp, bshape, info, return_info):
    x = _linalg._out(_linalg._solution(xp, X, bshape), kind, xp)
    return (x, info) if return_info else x


def _writable_as(x, kind, dtype, order):
    """x is a writeable NumPy array of `dtype` in `order` ("C" or "F"): SciPy then uses, and
    so may overwrite, its memory where the caller allows it."""
    return (kind == "numpy" and x.dtype == dtype and x.flags.writeable
            and (x.flags.f_contiguous if order == "F" else x.flags.c_contiguous))


def _copy_into(dest, value):
    """dest[...] = value (a NumPy or CuPy array)."""
    np.copyto(dest, value.get() if hasattr(value, "get") else value)


def _direct(xp, M, B, trans, backend, rcond_check=True):
    """Factor M (overwritten) in its dtype and solve; (X, SolveInfo, LU)."""
    anorm = _getrs.norm1(xp, M)
    _, LU, piv, info = _factors(M, backend)
    if info > 0:
        raise _singular()
    piv = xp.asarray(piv)
    rc = _getrs.rcond(xp, LU, piv, anorm)
    if rcond_check:
        _warn_ill_conditioned(rc, LU.dtype, stacklevel=5)
    X = _getrs.getrs(xp, LU, B, piv, trans)
    return X, SolveInfo("direct", LU.dtype, 0, rcond=rc), LU


def _backward_error(xp, rn, xn, B, anorm_inf):
    """max over columns of ||b - op(A) x||_inf / (||A||_inf ||x||_inf + ||b||_inf), from the
    residual's and the solution's column norms rn, xn (infinity norms)."""
    den = anorm_inf * xn + xp.abs(B).max(axis=0)
    with np.errstate(all="ignore"):
        err = xp.where(den > 0, rn / xp.where(den > 0, den, 1), xp.where(rn > 0, xp.inf, 0))
    return float(err.max())


def _out_of_memory(exc):
    """exc reports an allocation that failed (CuPy's OutOfMemoryError is not a
    MemoryError)."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"


def _refined(xp, A, B, trans, backend, check_finite):
    """float64 A x = B (A, B float64, C-ordered; A is read only): a float32 LU and float64
    refinement (LAPACK dsgesv's stopping rule: ||r||_inf <= sqrt(n) eps ||A||_inf ||x||_inf
    per column), the direct float64 path on a copy of A where the refinement stalls (the
    residual not halved), diverges, exceeds the table's steps or the float32 copy does not
    fit.  check_finite: ValueError for an inf or NaN in A (checked on its float32 copy, and
    on A itself only where that copy holds one: a value beyond float32's range)."""
    table = _tuning.current(element=F64)
    n = A.shape[0]
    eps = np.finfo(np.float64).eps
    try:
        with np.errstate(over="ignore"):    # overflow to inf: checked below
            A32 = A.astype(np.float32, order="C")
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        return _fallback(xp, A, B, trans, backend, 0, check_finite)
    if not _all_finite(xp, A32):
        del A32
        return _fallback(xp, A, B, trans, backend, 0, check_finite)
    anorm = _getrs.norm1(xp, A32 if trans else A32.T)   # ||op(A)||_inf, of the rounded A
    try:
        _, LU, piv, info = _factors(A32, backend)
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        return _fallback(xp, A, B, trans, backend, 0, False)
    if info > 0 or not bool(xp.isfinite(LU).all()):   # float32 factors of no use
        del LU
        return _fallback(xp, A, B, trans, backend, 0, False)
    piv = xp.asarray(piv)
    X = _getrs.getrs(xp, LU, B.astype(np.float32), piv, trans).astype(np.float64)
    last = np.inf
    for it in range(1, table.solve_refine_max_iter + 1):
        R = B - (A.T @ X if trans else A @ X)
        rn = xp.abs(R).max(axis=0)
        xn = xp.abs(X).max(axis=0)
        if not bool(xp.isfinite(rn).all()):
            break
        if bool((rn <= np.sqrt(n) * eps * anorm * xn).all()):
            err = _backward_error(xp, rn, xn, B, anorm)   # the residual just formed
            return X, SolveInfo("refined", np.dtype(np.float32), it - 1, backward_error=err)
        size = float(rn.max())
        if size > table.solve_refine_stall * last:   # stalled or diverging
            break
        last = size
        D = _getrs.getrs(xp, LU, xp.ascontiguousarray(R.astype(np.float32)), piv, trans)
        X += D.astype(np.float64)
    del LU
    return _fallback(xp, A, B, trans, backend, it, False)


def _fallback(xp, A, B, trans, backend, iterations, check_finite):
    """The direct path on a copy of A (ValueError first for an inf or NaN in A where
    check_finite)."""
    if check_finite and not _all_finite(xp, A):
        raise ValueError(_finite.NONFINITE)
    X, info, _ = _direct(xp, A.copy(), B, trans, backend)
    return X, SolveInfo("fallback", info.factor_dtype, iterations, rcond=info.rcond)


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """The inverse of a square matrix, on the GPU.

    Parameters
    ----------
    a : (..., N, N) array_like
        NumPy/CuPy array or torch tensor (CPU or CUDA), any order or strides; a stack is
        inverted at once (one stacked LU, one condition estimate of the stack, one batched
        solve).
    overwrite_a : bool, optional
        As SciPy's: where allowed, an F-ordered NumPy `a` of the working dtype receives the
        inverse and is returned.  Other inputs are never modified.
    check_finite : bool, optional
        Check that `a` holds only finite numbers (ValueError otherwise).
    assume_a : str, keyword-only
        As `solve`'s: None / 'general' ('gen'), 'sym', 'her', 'pos' (the matrix rebuilt from
        the triangle `lower` names) on our LU; 'pos' first checks that the matrix is positive
        definite with a Cholesky factorization (cuSOLVER's potrf through CuPy on the GPU:
        about half an LU more) and raises LinAlgError where it is not; the structured kinds
        raise NotImplementedError; an unknown name raises KeyError (as SciPy's inv).
    lower : bool, keyword-only
        With a symmetric `assume_a`, use the lower triangle.

    Returns
    -------
    ainv : (N, N) array
        The inverse, of the working dtype (float32 for float32, float64 for float64 and
        integers, complex as itself) and the input's kind.

    Raises
    ------
    LinAlgError
        `a` is singular, or not positive definite with ``assume_a='pos'`` (SciPy's message
        for both, as `solve`'s).
    ValueError
        Not square, fewer than 2 dimensions, non-finite with `check_finite`.

    Warns
    -----
    LinAlgWarning
        The reciprocal condition estimate is below the working dtype's eps.

    Notes
    -----
    Our LU, then ``L U X = P^T`` solved for all N columns of the identity (``2 N^3`` flops in
    the triangular solves) by lu/getrs.py's `getrs`: for real dtypes our own triangular
    solves (lu/trsm.py's blocked ones, a kernel per diagonal block and a GEMM per block's
    coupling; lu/trsv.py's few-column ones for N <= 16), for complex ones cuSOLVER's getrs.
    A stack is solved by lu/stacked.py's `getrs_stack` (one launch for real orders up to
    1024).  The condition estimate synchronises with the GPU.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.array([[1., 2.], [3., 4.]])
    >>> gpulinalg.inv(a)
    array([[-2. ,  1. ],
           [ 1.5, -0.5]])
    """
    return _inv(a, overwrite_a, check_finite, assume_a, lower, _plan.DEVICE)


def _inv(a, overwrite_a, check_finite, assume_a, lower, backend):
    structure = _structure(assume_a, error=KeyError)
    a = _linalg._as_input(a)
    kind = _arrays.array_kind(a)
    if a.ndim > 2:
        xp = _stack_module(kind, backend)
        A = _stacked.native(a, xp)
        if A.shape[-1] != A.shape[-2]:
            raise ValueError(f"Expected square matrix, got a.shape={tuple(A.shape)}")
        dtype = _element(A.dtype).dtype
        if A.size == 0:
            return _linalg._out(xp.empty(A.shape, dtype), kind, xp)
        xp = _stacked.module(backend)        # on the device whatever side `a` is on
        with _stacked.context(xp, kind, (a,)):
            X = _solve_batch(xp, _stacked.native(A, xp), xp.eye(A.shape[-1], dtype=dtype),
                             A.shape[:-2], dtype, structure, lower, 0, check_finite, backend)
        return _linalg._out(X, kind, xp)
    n = _square(a)
    dtype = _element(_arrays.dtype_of(a)).dtype
    xp = _stacked.module(backend)
    if n == 0:
        return _linalg._out(xp.empty((0, 0), dtype), kind, xp)
    with _stacked.context(xp, kind, (a,)):
        M = _working_matrix(xp, a, kind, dtype, structure, lower, check_finite)
        if structure == "positive definite" and _not_positive_definite(xp, M):
            raise _singular()
        X, _, _ = _direct(xp, M, xp.eye(n, dtype=dtype), 0, backend)
        if overwrite_a and _writable_as(a, kind, dtype, "F"):
            _copy_into(a, X)       # as SciPy's inv, into an F-ordered a it may overwrite
            return a
        return _linalg._out(xp.ascontiguousarray(X), kind, xp)


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of a square matrix, from our LU on the GPU.

    Parameters
    ----------
    a : (..., N, N) array_like
        NumPy/CuPy array or torch tensor (CPU or CUDA), any order or strides; a stack gives
        an array of determinants of the batch shape, from one batched LU.
    overwrite_a : bool, optional
        As SciPy's: where allowed, a C-ordered NumPy `a` of the working dtype receives the LU
        factors.  Other inputs are never modified.
    check_finite : bool, optional
        Check that `a` holds only finite numbers (ValueError otherwise).

    Returns
    -------
    det : float64 or complex128
        As SciPy: a NumPy scalar for host input (float64 for real, complex128 for complex
        input, whatever the working dtype); for CuPy or CUDA torch input a 0-d array of that
        kind and dtype on the input's device.  1.0 for a 0 x 0 matrix; 0.0 for a singular
        one.

    Notes
    -----
    The product of U's diagonal, with the sign of the row interchanges, formed in float64
    (complex128) with the exponents kept apart: no overflow or underflow in the product
    where the determinant itself is representable, for float32 factors too.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.array([[0, 2, 3], [4, 5, 6], [7, 8, 9]])
    >>> round(float(gpulinalg.det(a)), 10)
    3.0
    """
    return _det(a, overwrite_a, check_finite, _plan.DEVICE)


def _det(a, overwrite_a, check_finite, backend):
    a = _linalg._as_input(a)
    kind = _arrays.array_kind(a)
    if a.ndim < 2:
        raise ValueError("The input array must be at least two-dimensional.")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError("Last 2 dimensions of the array must be square but received shape "
                         f"{tuple(a.shape)}.")
    if a.ndim > 2:
        return _det_stack(a, kind, check_finite, backend)
    n = _square(a)
    dtype = _element(_arrays.dtype_of(a)).dtype
    out = np.complex128 if dtype.kind == "c" else np.float64
    xp = _stacked.module(backend)
    if n == 0:
        return _det_out(out(1.0), kind)
    with _stacked.context(xp, kind, (a,)):
        M = _working_matrix(xp, a, kind, dtype, "general", False, check_finite)
        if n == 1:
            return _det_out(out(complex(M[0, 0]) if out is np.complex128 else float(M[0, 0])),
                            kind)
        _, LU, piv, _ = _factors(M, backend)
        if overwrite_a and _writable_as(a, kind, dtype, "C"):
            _copy_into(a, LU)      # as SciPy's det, which factors a C-ordered a in place
        diag = LU.diagonal()
        d = np.asarray(diag.get() if xp is not np else diag).astype(out)
        swaps = int(np.count_nonzero(np.asarray(piv.get() if hasattr(piv, "get") else piv)
                                     != np.arange(n)))
        return _det_out(_products(d[None])[0] * (-1.0 if swaps % 2 else 1.0), kind)


def _det_stack(a, kind, check_finite, backend):
    """det of each matrix of a stack (..., N, N): an array of the batch shape (float64 or
    complex128), from one batched LU of the stack."""
    batch, n = tuple(a.shape[:-2]), a.shape[-1]
    out = np.complex128 if _element(_arrays.dtype_of(a)).dtype.kind == "c" else np.float64
    if n == 0 or 0 in batch:
        values = np.ones(batch, out)
    elif n == 1:
        xp = _stack_module(kind, backend)
        A = _stacked.native(a, xp)
        if check_finite and not bool(xp.isfinite(A).all()):
            raise ValueError(_finite.NONFINITE)
        values = np.asarray(A.get() if hasattr(A, "get") else A)[..., 0, 0].astype(out)
    else:
        _, xp, LU, piv, _ = _stacked.factor(a, check_finite, _plan.Options(), backend,
                                          _linalg._factor_one)
        diag = LU.reshape(-1, n, n).diagonal(axis1=1, axis2=2)
        d = np.asarray(diag.get() if hasattr(diag, "get") else diag).astype(out)
        p = np.asarray(piv.get() if hasattr(piv, "get") else piv).reshape(len(d), n)
        swaps = np.count_nonzero(p != np.arange(n), axis=1)
        values = _products(d).reshape(batch)
        values *= np.where(swaps % 2 == 1, -1.0, 1.0).reshape(batch)
    if kind in ("cupy", "torch"):
        return _arrays.from_device(cupy().asarray(values), kind)
    return values


def _products(d):
    """The products of the rows of d (count, n), float64 or complex128, in d's dtype with the
    exponents summed apart: a result that is representable does not overflow or underflow on
    the way."""
    mag = np.abs(d)
    m, e = np.frexp(mag)
    mant, expo = np.ones(len(d)), np.zeros(len(d), np.int64)
    for chunk in range(0, d.shape[1], 512):   # 512 factors in [0.5, 1) stay above 2**-512
        mant, ex = np.frexp(mant * np.prod(m[:, chunk:chunk + 512], axis=1))
        expo += ex
    expo += e.sum(axis=1)
    with np.errstate(over="ignore", under="ignore"):
        value = np.ldexp(mant, np.clip(expo, -2000, 2000))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = value * (np.prod(d / mag, axis=1) if d.dtype.kind == "c"
                         else np.prod(np.sign(d), axis=1))
    return np.where(mag.all(axis=1), value, 0).astype(d.dtype)


def _det_out(value, kind):
    if kind in ("cupy", "torch"):
        return _arrays.from_device(cupy().asarray(value), kind)
    return value
