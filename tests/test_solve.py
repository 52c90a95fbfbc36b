"""solve, inv and det (gpulinalg/gesv.py, gpulinalg/lu/getrs.py): SciPy's semantics on the
NumPy emulation of the LU (CPU) and on the GPU, errors in units of the working dtype's eps."""

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import raised, with_cond
from gpulinalg import tuning
from gpulinalg.core.element import F64
from gpulinalg.lu import getrs
from gpulinalg.testing import solve as gs

SIZES = [1, 2, 3, 17, 64, 65, 131]


def _eps(dtype):
    return np.finfo(np.dtype(dtype)).eps


def backward_error(a, x, b):
    """||b - a x||_inf / ((||a||_inf ||x||_inf + ||b||_inf) n eps), in float64, max over
    columns (the normwise backward error in units of n eps of x's dtype)."""
    eps = _eps(np.asarray(x).dtype)
    a, x, b = (np.asarray(v, np.complex128 if np.iscomplexobj(v) else np.float64)
               for v in (a, x, b))
    x, b = x.reshape(len(x), -1), b.reshape(len(b), -1)
    r = np.abs(b - a @ x).max(axis=0)
    den = np.abs(a).sum(axis=1).max() * np.abs(x).max(axis=0) + np.abs(b).max(axis=0)
    return float((r / den).max()) / (a.shape[0] * eps)


def _refine_from(n):
    return tuning.override(dataclasses.replace(tuning.current(element=F64),
                                               solve_refine_min_n=n))


# ------------------------------------------------------------------ CPU (emulated LU)

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nrhs", [None, 1, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_solve_matches_scipy(rng, n, dtype, nrhs, transposed):
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n,) if nrhs is None else (n, nrhs)).astype(dtype)
    x = gs.solve(a, b, transposed=transposed, emulate=True)
    ref = sl.solve(a, b, transposed=transposed)
    assert x.dtype == ref.dtype and x.shape == ref.shape
    assert backward_error(a.T if transposed else a, x, b) < 4


@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_solve_memory_orders(rng, order):
    base = rng.standard_normal((70, 70))
    a = {"C": base[:33, :33].copy(), "F": np.asfortranarray(base[:33, :33]),
         "strided": base[::2, 1::2][:33, :33]}[order]
    b = rng.standard_normal((70, 2))[::2][:33]
    x = gs.solve(a, b, emulate=True)
    assert backward_error(a, x, b) < 4
    assert x.flags.f_contiguous   # SciPy's (LAPACK's) order for a 2-D answer


@pytest.mark.parametrize("adt,bdt,out", [(np.float32, np.float32, np.float32),
                                         (np.float32, np.float64, np.float64),
                                         (np.int64, np.int64, np.float64),
                                         (np.int8, np.float32, np.float32),
                                         (np.float16, np.float16, np.float32)])
def test_solve_result_dtype_as_scipy(rng, adt, bdt, out):
    a = (rng.standard_normal((6, 6)) * 10 + 30 * np.eye(6)).astype(adt)
    b = (rng.standard_normal(6) * 5).astype(bdt)
    x = gs.solve(a, b, emulate=True)
    assert x.dtype == out == sl.solve(a, b).dtype


@pytest.mark.parametrize("structure", ["sym", "symmetric", "pos", "positive definite"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_symmetric_reads_one_triangle(rng, structure, lower):
    s = rng.standard_normal((9, 9))
    s = s @ s.T + 9 * np.eye(9)
    a = np.tril(s) if lower else np.triu(s)
    a[np.triu_indices(9, 1) if lower else np.tril_indices(9, -1)] = 7.0   # never read
    b = rng.standard_normal(9)
    x = gs.solve(a, b, assume_a=structure, lower=lower, emulate=True)
    np.testing.assert_allclose(x, np.linalg.solve(s, b), rtol=1e-10)


def test_solve_hermitian_needs_gpu_for_complex_but_checks_first():
    with pytest.raises(NotImplementedError, match="complex"):
        gs.solve(np.eye(3, dtype=complex), np.ones(3), transposed=True, emulate=True)


@pytest.mark.parametrize("structure", ["diagonal", "tridiagonal", "banded",
                                       "upper triangular", "lower triangular"])
def test_structured_kinds_name_the_function_to_use(structure):
    with pytest.raises(NotImplementedError, match="use"):
        gs.solve(np.eye(3), np.ones(3), assume_a=structure, emulate=True)
    with pytest.raises(NotImplementedError):
        gs.inv(np.eye(3), assume_a=structure, emulate=True)


def test_unknown_structure_and_precision():
    with pytest.raises(ValueError, match="not a recognized matrix structure"):
        gs.solve(np.eye(3), np.ones(3), assume_a="kaboom", emulate=True)
    with pytest.raises(KeyError):   # SciPy's inv raises KeyError
        gs.inv(np.eye(3), assume_a="kaboom", emulate=True)
    with pytest.raises(ValueError, match="precision"):
        gs.solve(np.eye(3), np.ones(3), precision="tf32", emulate=True)


def test_solve_errors_and_warnings():
    from scipy.linalg import LinAlgError, LinAlgWarning
    with pytest.raises(LinAlgError, match="singular"):
        gs.solve(np.zeros((10, 10)), np.ones(10), emulate=True)
    with pytest.warns(LinAlgWarning, match="ill-conditioned"):
        gs.solve(np.diag(np.logspace(0, 50, 10)), np.ones(10), emulate=True)
    with pytest.raises(ValueError, match="incompatible"):
        gs.solve(np.eye(3), np.ones(4), emulate=True)
    with pytest.raises(ValueError, match="square"):
        gs.solve(np.ones((2, 3)), np.ones(2), emulate=True)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gs.solve(np.array([[1.0, np.nan], [0, 1]]), np.ones(2), emulate=True)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gs.solve(np.eye(2), np.array([1.0, np.inf]), emulate=True)


def test_solve_scalar_and_empty():
    from scipy.linalg import LinAlgError
    np.testing.assert_allclose(gs.solve(2.0, [2.0, 4.0], emulate=True), [1.0, 2.0])
    with pytest.raises(LinAlgError):
        gs.solve(0, [0, 1], emulate=True)
    for a, b in [(np.empty((0, 0)), np.empty(0)), (np.empty((0, 0)), np.empty((0, 3))),
                 (np.eye(3), np.empty((3, 0)))]:
        x = gs.solve(a, b, emulate=True)
        ref = sl.solve(a, b)
        assert x.shape == ref.shape and x.dtype == ref.dtype


def test_refinement_converges_or_falls_back(rng):
    """A float64 system on float32 factors: refined to float64's backward error where kappa
    allows it; where it cannot (kappa 1e10 >> 1 / eps32), the float64 factorization answers
    and the error is the direct path's."""
    n = 60
    for cond, path in [(10.0, "refined"), (1e4, "refined"), (1e10, "fallback")]:
        a = with_cond(rng, n, cond, np.float64)
        b = rng.standard_normal((n, 2))
        with _refine_from(2):
            x, info = gs.solve(a, b, return_info=True, emulate=True)
        assert info.path == path, (cond, info)
        assert backward_error(a, x, b) < 4, (cond, info)
        if path == "refined":
            assert info.factor_dtype == np.float32 and info.backward_error < n * _eps(float)
    with _refine_from(2):
        _, info = gs.solve(a, b, return_info=True, precision="fp64", emulate=True)
    assert info.path == "direct" and info.factor_dtype == np.float64


def test_refinement_reads_a_where_it_lies(rng):
    """The refined path leaves `a` as it was (also where it falls back), raises for an inf or
    NaN in `a` under check_finite, and falls back for a finite value beyond float32's range
    (its float32 copy overflows)."""
    n = 50
    a = rng.standard_normal((n, n)) + 4 * np.eye(n)
    b = rng.standard_normal(n)
    with _refine_from(2):
        for case, path in ((a, "refined"), (with_cond(rng, n, 1e10, np.float64), "fallback")):
            before = case.copy()
            x, info = gs.solve(case, b, return_info=True, emulate=True)
            assert info.path == path
            np.testing.assert_array_equal(case, before)
            assert backward_error(case, x, b) < 4
        big = a * 1e300
        x, info = gs.solve(big, b, return_info=True, emulate=True)
        assert info.path == "fallback" and backward_error(big, x, b) < 4
        bad = a.copy()
        bad[7, 3] = np.nan
        with pytest.raises(ValueError, match="infs or NaNs"):
            gs.solve(bad, b, emulate=True)
        bad[7, 3] = np.inf
        with pytest.raises(ValueError, match="infs or NaNs"):
            gs.solve(bad, b, emulate=True)


def test_rcond_estimate_is_lapacks(rng):
    for cond in (1.0, 1e3, 1e8):
        a = with_cond(rng, 40, cond, np.float64)
        lu, piv = sl.lu_factor(a)
        anorm = getrs.norm1(np, a)
        ref, _ = sl.lapack.dgecon(lu, anorm, norm="1")
        ours = getrs.rcond(np, np.ascontiguousarray(lu), piv, anorm)
        assert ref / 3 <= ours <= ref * 3, (cond, ours, ref)


def _not_posdef():
    """SciPy's test matrix (test_posdef_not_posdef): symmetric and invertible, eigenvalues
    -2.49, 1 and 28.5."""
    a = np.arange(9.0).reshape(3, 3)
    return a + a.T + np.eye(3)


def _posdef(rng, shape, dtype):
    """Symmetric positive definite matrices B B^T + n I of `shape` (..., n, n)."""
    n = shape[-1]
    b = rng.standard_normal(shape)
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)).astype(dtype)


def _forward_error(a, x, ref):
    """max |x - ref| / (max |ref| kappa_1(a) n eps), eps of x's dtype: the distance of our
    answer from SciPy's in units of the forward error bound of a backward stable solve."""
    a64 = np.asarray(a, np.float64)
    scale = np.abs(ref).max() * np.linalg.cond(a64, 1) * a64.shape[-1] * _eps(x.dtype)
    return float(np.abs(np.asarray(x, np.float64) - ref).max() / scale)


@pytest.mark.parametrize("lower", [False, True])
def test_pos_refuses_a_matrix_that_is_not_positive_definite(lower):
    """SciPy's LinAlgError and message for assume_a='pos' on a matrix that is not positive
    definite, in solve and inv; without assume_a the same matrix solves."""
    from scipy.linalg import LinAlgError
    A, b = _not_posdef(), np.ones(3)
    for ours, theirs in ((lambda: gs.solve(A, b, assume_a="pos", lower=lower, emulate=True),
                          lambda: sl.solve(A, b, assume_a="pos", lower=lower)),
                         (lambda: gs.inv(A, assume_a="pos", lower=lower, emulate=True),
                          lambda: sl.inv(A, assume_a="pos", lower=lower))):
        mine, ref = raised(ours), raised(theirs)
        assert isinstance(mine, LinAlgError) and type(mine) is type(ref)
        assert str(mine) == str(ref) == "A singular matrix detected: slice(s) [0] are singular."
    x = gs.solve(A, b, emulate=True)
    assert backward_error(A, x, b) < 4
    np.testing.assert_allclose(gs.inv(A, emulate=True) @ A, np.eye(3), atol=1e-13)
    assert backward_error(A, gs.solve(A, b, assume_a="sym", lower=lower, emulate=True), b) < 4


@pytest.mark.parametrize("lower", [False, True])
def test_pos_names_the_stacks_slices_that_are_not_positive_definite(rng, lower):
    """A stack with matrices that are not positive definite: one LinAlgError of SciPy's type
    and text naming them by flat batch index (SciPy's own list differs between its versions),
    from solve (broadcast against b's batch) and inv."""
    a = _posdef(rng, (5, 3, 3), np.float64)
    a[1] = a[4] = _not_posdef()
    b = rng.standard_normal((2, 1, 3, 2))
    mine = raised(lambda: gs.solve(a, b, assume_a="pos", lower=lower, emulate=True))
    ref = raised(lambda: sl.solve(a, b, assume_a="pos", lower=lower))
    assert type(mine) is type(ref) is sl.LinAlgError     # SciPy's text names its own slices
    assert str(mine) == "A singular matrix detected: slice(s) [1, 4, 6, 9] are singular."
    mine = raised(lambda: gs.inv(a, assume_a="pos", lower=lower, emulate=True))
    assert type(mine) is sl.LinAlgError
    assert str(mine) == "A singular matrix detected: slice(s) [1, 4] are singular."
    x = gs.solve(a, b, lower=lower, emulate=True)      # without assume_a: solved
    np.testing.assert_allclose(a @ x, np.broadcast_to(b, x.shape), atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lower", [False, True])
def test_pos_solves_positive_definite_matrices_as_scipy(rng, dtype, lower):
    """Positive definite matrices still solve under assume_a='pos', 2-D and stacked, to SciPy's
    answers within the forward error bound, with a backward error of a few n eps."""
    n = 33
    a = _posdef(rng, (n, n), dtype)
    b = rng.standard_normal((n, 2)).astype(dtype)
    x = gs.solve(a, b, assume_a="pos", lower=lower, emulate=True)
    ref = sl.solve(a, b, assume_a="pos", lower=lower)
    assert x.dtype == ref.dtype and x.shape == ref.shape
    assert backward_error(a, x, b) < 4 and _forward_error(a, x, ref) < 4
    ainv = gs.inv(a, assume_a="pos", lower=lower, emulate=True)
    ref = sl.inv(a, assume_a="pos", lower=lower)
    assert ainv.dtype == ref.dtype and _forward_error(a, ainv, ref) < 4
    stack = _posdef(rng, (2, 3, n, n), dtype)
    bs = rng.standard_normal((3, n, 2)).astype(dtype)
    x = gs.solve(stack, bs, assume_a="pos", lower=lower, emulate=True)
    ref = sl.solve(stack, bs, assume_a="pos", lower=lower)
    assert x.dtype == ref.dtype and x.shape == ref.shape
    ainv = gs.inv(stack, assume_a="pos", lower=lower, emulate=True)
    refinv = sl.inv(stack, assume_a="pos", lower=lower)
    assert ainv.dtype == refinv.dtype and ainv.shape == refinv.shape
    for i, j in np.ndindex(2, 3):
        assert backward_error(stack[i, j], x[i, j], bs[j]) < 4
        assert _forward_error(stack[i, j], x[i, j], ref[i, j]) < 4
        assert _forward_error(stack[i, j], ainv[i, j], refinv[i, j]) < 4


def test_pos_is_checked_once_before_refinement_or_fallback(rng, monkeypatch):
    """float64 under precision="auto": one Cholesky factorization decides 'pos' before the
    refined path and its fallback; a matrix that is not positive definite is refused before
    either runs; the check follows check_finite's (SciPy's order)."""
    calls = []
    cholesky = np.linalg.cholesky
    monkeypatch.setattr(np.linalg, "cholesky", lambda x: calls.append(x.shape) or cholesky(x))
    n = 40
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    b = rng.standard_normal(n)
    with _refine_from(2):
        for cond, path in ((10.0, "refined"), (1e10, "fallback")):
            a = (q * np.logspace(0, -np.log10(cond), n)) @ q.T
            a = (a + a.T) / 2
            calls.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x, info = gs.solve(a, b, assume_a="pos", return_info=True, emulate=True)
            assert info.path == path and calls == [(n, n)]
            assert backward_error(a, x, b) < 4
        a[n // 2, n // 2] = -1.0
        with pytest.raises(sl.LinAlgError, match=r"slice\(s\) \[0\] are singular"):
            gs.solve(a, b, assume_a="pos", emulate=True)
        a[n - 1, 0] = np.nan      # in the triangle that is not read: still checked first
        with pytest.raises(ValueError, match="infs or NaNs"):
            gs.solve(a, b, assume_a="pos", emulate=True)


@pytest.mark.parametrize("n", [1, 2, 5, 64, 65])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_inv_matches_numpy(rng, n, dtype):
    a = (rng.standard_normal((n, n)) * 4 + 8 * np.eye(n)).astype(dtype)
    x = gs.inv(a, emulate=True)
    ref = sl.inv(a)
    assert x.dtype == ref.dtype and x.shape == (n, n)
    work = np.asarray(a, ref.dtype)
    assert np.abs(work @ x - np.eye(n)).max() < 100 * n * _eps(ref.dtype)


def test_inv_errors_and_empty():
    from scipy.linalg import LinAlgError, LinAlgWarning
    with pytest.raises(LinAlgError):
        gs.inv(np.ones((2, 2)), emulate=True)
    with pytest.warns(LinAlgWarning):
        gs.inv(np.diag([1.0, 1e-20]), emulate=True)
    x = gs.inv(np.empty((0, 0), np.float32), emulate=True)
    assert x.shape == (0, 0) and x.dtype == sl.inv(np.empty((0, 0), np.float32)).dtype


@pytest.mark.parametrize("n", [2, 3, 10, 64, 100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_det_matches_scipy(rng, n, dtype):
    a = (rng.standard_normal((n, n)) * 3).astype(dtype)
    d = gs.det(a, emulate=True)
    assert type(d) is type(sl.det(a))
    # against float64 (SciPy's float32 det overflows to inf where the product leaves float32's
    # range; ours forms the product in float64)
    ref = sl.det(a.astype(np.float64))
    eps = _eps(np.float32 if dtype == np.float32 else np.float64)
    hadamard = np.prod(np.linalg.norm(a.astype(np.float64), axis=1))   # bounds |det|
    assert abs(d - ref) <= 200 * n * eps * hadamard, (d, ref)


def test_det_special_cases():
    assert gs.det(np.empty((0, 0)), emulate=True) == 1.0
    assert type(gs.det(np.array([[3]], np.float32), emulate=True)) is np.float64
    assert gs.det(np.ones((3, 3)), emulate=True) == 0.0
    assert gs.det([[0, 2, 3], [4, 5, 6], [7, 8, 9]], emulate=True) == pytest.approx(3.0)
    # float32 factors, a product beyond float32's range but not float64's: no overflow
    assert gs.det(np.diag([1e30, 1e30]).astype(np.float32), emulate=True) \
        == pytest.approx(1e60, rel=1e-6)
    # a representable determinant whose partial products leave float64's range
    assert gs.det(np.diag([1e200, 1e200, 1e-300]), emulate=True) == pytest.approx(1e100)
    with pytest.raises(ValueError, match="two-dimensional"):
        gs.det(np.ones(3), emulate=True)
    with pytest.raises(ValueError, match="square"):
        gs.det(np.ones((2, 3)), emulate=True)


# ------------------------------------------------------------------ GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("kind", ["numpy", "cupy"])
def test_gpu_solve_inv_det(rng, cp, dtype, kind):
    import gpulinalg
    n = 130
    a = rng.standard_normal((n, n)) + 4 * np.eye(n)
    b = rng.standard_normal((n, 3))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
        b = b + 1j * rng.standard_normal((n, 3))
    a, b = a.astype(dtype), b.astype(dtype)
    wrap = cp.asarray if kind == "cupy" else (lambda v: v)
    x = gpulinalg.solve(wrap(a), wrap(b))
    assert type(x) is type(wrap(b)) and x.dtype == dtype and x.shape == b.shape
    x = cp.asnumpy(x) if kind == "cupy" else x
    assert backward_error(a, x, b) < 8
    ai = gpulinalg.inv(wrap(a))
    ai = cp.asnumpy(ai) if kind == "cupy" else ai
    assert np.abs(a.astype(np.complex128) @ ai - np.eye(n)).max() < 1e3 * n * _eps(dtype)
    d = gpulinalg.det(wrap(a / 4))
    d = complex(d) if np.dtype(dtype).kind == "c" else float(d)
    np.testing.assert_allclose(d, sl.det((a / 4).astype(np.complex128)), rtol=1e3 * n * _eps(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("cond", [1e3, 1e6, 1e9, 1e12])
def test_gpu_float64_solve_every_kappa(rng, cp, cond):
    """The issue's acceptance matrices at a smaller n: every answer's backward error within
    2x cupy.linalg.solve's (cuSOLVER dgetrf + dgetrs), whichever path answered."""
    import gpulinalg
    n = 1024
    a = cp.asarray(with_cond(rng, n, cond, np.float64))
    b = cp.asarray(rng.standard_normal(n))
    with _refine_from(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x, info = gpulinalg.solve(a, b, return_info=True)
    ref = cp.linalg.solve(a, b)
    ours = backward_error(cp.asnumpy(a), cp.asnumpy(x), cp.asnumpy(b))
    theirs = backward_error(cp.asnumpy(a), cp.asnumpy(ref), cp.asnumpy(b))
    assert ours <= 2 * theirs + 0.05, (ours, theirs, info)
    assert info.path == ("refined" if cond <= 1e6 else "fallback"), info


@pytest.mark.gpu
def test_gpu_solve_singular_and_ill_conditioned(cp):
    import gpulinalg
    from scipy.linalg import LinAlgError, LinAlgWarning
    with pytest.raises(LinAlgError):
        gpulinalg.solve(cp.zeros((10, 10)), cp.ones(10))
    with pytest.warns(LinAlgWarning):
        gpulinalg.solve(cp.diag(cp.logspace(0, 50, 10)), cp.ones(10))
    with pytest.raises(LinAlgError):
        gpulinalg.inv(np.ones((4, 4)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["numpy", "cupy"])
def test_gpu_pos_checks_positive_definiteness(rng, cp, dtype, kind):
    """assume_a='pos' on the GPU (cuSOLVER's potrf through CuPy): a matrix that is not
    positive definite raises SciPy's LinAlgError (a stack's names its slices); positive
    definite ones solve to SciPy's answers, 2-D and stacked."""
    import gpulinalg
    wrap = cp.asarray if kind == "cupy" else (lambda v: v)
    host = cp.asnumpy if kind == "cupy" else (lambda v: v)
    bad = _not_posdef().astype(dtype)
    for lower in (False, True):
        with pytest.raises(sl.LinAlgError, match=r"slice\(s\) \[0\] are singular"):
            gpulinalg.solve(wrap(bad), wrap(np.ones(3, dtype)), assume_a="pos", lower=lower)
        with pytest.raises(sl.LinAlgError, match=r"slice\(s\) \[0\] are singular"):
            gpulinalg.inv(wrap(bad), assume_a="pos", lower=lower)
    stack = _posdef(rng, (6, 3, 3), dtype)
    stack[2] = bad
    with pytest.raises(sl.LinAlgError, match=r"slice\(s\) \[2\] are singular"):
        gpulinalg.solve(wrap(stack), wrap(np.ones(3, dtype)), assume_a="pos")
    with pytest.raises(sl.LinAlgError, match=r"slice\(s\) \[2\] are singular"):
        gpulinalg.inv(wrap(stack), assume_a="pos")
    n = 200
    a = _posdef(rng, (n, n), dtype)
    b = rng.standard_normal((n, 3)).astype(dtype)
    x = host(gpulinalg.solve(wrap(a), wrap(b), assume_a="pos"))
    assert backward_error(a, x, b) < 8
    assert _forward_error(a, x, sl.solve(a, b, assume_a="pos")) < 8
    ainv = host(gpulinalg.inv(wrap(a), assume_a="pos", lower=True))
    assert _forward_error(a, ainv, sl.inv(a, assume_a="pos", lower=True)) < 8
    stack = _posdef(rng, (4, 40, 40), dtype)
    bs = rng.standard_normal((4, 40, 2)).astype(dtype)
    x = host(gpulinalg.solve(wrap(stack), wrap(bs), assume_a="pos"))
    ref = sl.solve(stack, bs, assume_a="pos")
    for i in range(4):
        assert _forward_error(stack[i], x[i], ref[i]) < 8
