"""Stacks of matrices (..., M, N) through lu_factor, lu, lu_solve, solve, inv and det
(gpulinalg/lu/stacked.py): SciPy 1.16's batch semantics, on the NumPy emulation (CPU) and on
the GPU."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import raised
from gpulinalg.testing import lu as glt
from gpulinalg.testing import solve as gs

SHAPES = [(3, 5, 5), (2, 2, 17, 5), (2, 2, 11, 7), (4, 1, 1), (2, 3, 33, 33)]


def _stack(rng, shape, dtype=np.float64):
    return rng.uniform(-10, 10, size=shape).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_factor_stack_is_scipys_per_matrix(rng, shape, dtype):
    a = _stack(rng, shape, dtype)
    lu, piv = glt.lu_factor(a, emulate=True)
    k = min(shape[-2:])
    assert lu.shape == a.shape and lu.dtype == dtype
    assert piv.shape == shape[:-2] + (k,) and piv.dtype == np.int32
    for index in np.ndindex(shape[:-2]):
        ref_lu, ref_piv = sl.lu_factor(a[index])
        np.testing.assert_array_equal(piv[index], ref_piv)
        np.testing.assert_allclose(lu[index], ref_lu, rtol=0,
                                   atol=200 * np.finfo(dtype).eps * np.abs(a[index]).max())


def test_lu_factor_stack_warns_once_for_its_singular_matrices(rng):
    from scipy.linalg import LinAlgWarning
    a = _stack(rng, (5, 4, 4))
    a[1] = 0.0
    a[3, :, 2] = 0.0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        glt.lu_factor(a, emulate=True)
    found = [w for w in seen if issubclass(w.category, LinAlgWarning)]
    assert len(found) == 1
    assert "2 of the 5 matrices" in str(found[0].message) and "(1,)" in str(found[0].message)


def test_lu_factor_stack_checks_and_options(rng):
    a = _stack(rng, (2, 3, 3))
    a[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        glt.lu_factor(a, emulate=True)
    lu, piv = glt.lu_factor(a, check_finite=False, emulate=True)   # only matrix 1 is NaN
    ref_lu, _ = sl.lu_factor(a[0])
    np.testing.assert_allclose(lu[0], ref_lu, rtol=1e-12)
    with pytest.raises(ValueError, match="batched LU"):
        glt.lu_factor(_stack(rng, (2, 3, 3)), block_size=64, emulate=True)


@pytest.mark.parametrize("shape", [(0, 3, 3), (3, 0, 0), (2, 0, 4), (0, 0, 3)])
def test_lu_factor_empty_stacks(shape):
    a = np.empty(shape)
    lu, piv = glt.lu_factor(a, emulate=True)
    assert lu.shape == shape and piv.shape == shape[:-2] + (min(shape[-2:]),)


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_stack(rng, shape):
    a = _stack(rng, shape)
    p, l, u = glt.lu(a, emulate=True)
    np.testing.assert_allclose(p @ l @ u, a, atol=1e-10)
    pl, u2 = glt.lu(a, permute_l=True, emulate=True)
    np.testing.assert_allclose(pl @ u2, a, atol=1e-10)
    pi, l3, u3 = glt.lu(a, p_indices=True, emulate=True)
    for index in np.ndindex(shape[:-2]):
        np.testing.assert_allclose(l3[index][pi[index]] @ u3[index], a[index], atol=1e-10)
        ref = sl.lu(a[index], p_indices=True)
        np.testing.assert_array_equal(pi[index], ref[0])


def test_lu_stack_scipys_special_cases(rng):
    """SciPy's test_1by1_input_output and test_empty_edge_cases, stacked parts."""
    a = rng.random([4, 5, 1, 1], dtype=np.float32)
    p, l, u = glt.lu(a, p_indices=True, emulate=True)
    np.testing.assert_allclose(p, np.zeros((4, 5, 1)))
    np.testing.assert_allclose(l, np.ones((4, 5, 1, 1)))
    np.testing.assert_allclose(u, a)
    p, l, u = glt.lu(a, emulate=True)
    np.testing.assert_allclose(p, np.ones((4, 5, 1, 1)))
    for shape, ps, ls, us in [((3, 0, 0), (3, 0, 0), (3, 0, 0), (3, 0, 0)),
                              ((0, 0, 3), (0, 0, 0), (0, 0, 0), (0, 0, 3))]:
        p, l, u = glt.lu(np.empty(shape), emulate=True)
        assert (p.shape, l.shape, u.shape) == (ps, ls, us)


def test_lu_solve_stack_broadcasts_as_scipy(rng):
    a = _stack(rng, (3, 6, 6))
    lu_piv = glt.lu_factor(a, emulate=True)
    b = rng.standard_normal((3, 6, 2))
    x = glt.lu_solve(lu_piv, b, emulate=True)
    np.testing.assert_allclose(a @ x, b, atol=1e-9)
    x1 = glt.lu_solve(lu_piv, b[0, :, 0], emulate=True)        # one b for every matrix
    assert x1.shape == (3, 6)
    np.testing.assert_allclose(np.einsum("bij,bj->bi", a, x1),
                               np.broadcast_to(b[0, :, 0], (3, 6)), atol=1e-9)
    x2 = glt.lu_solve(lu_piv, b, trans=1, emulate=True)
    np.testing.assert_allclose(np.swapaxes(a, 1, 2) @ x2, b, atol=1e-9)
    one = glt.lu_factor(a[0], emulate=True)                     # one lu, a stack of b
    x3 = glt.lu_solve(one, b, emulate=True)
    np.testing.assert_allclose(a[0] @ x3, b, atol=1e-9)


def test_solve_inv_det_stacks(rng):
    a = _stack(rng, (2, 3, 4, 4)) + 20 * np.eye(4)
    b = rng.standard_normal(4)
    x = gs.solve(a, b, emulate=True)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10)
    b2 = rng.standard_normal((2, 1, 4, 3))
    np.testing.assert_allclose(gs.solve(a, b2, emulate=True), np.linalg.solve(a, b2),
                               rtol=1e-10)
    np.testing.assert_allclose(gs.inv(a, emulate=True), np.linalg.inv(a), rtol=1e-10)
    d = gs.det(a, emulate=True)
    assert d.shape == (2, 3) and d.dtype == np.float64
    np.testing.assert_allclose(d, np.linalg.det(a), rtol=1e-10)
    assert (gs.det(np.empty((3, 0, 0)), emulate=True) == 1).all()
    np.testing.assert_allclose(gs.det(a[..., :1, :1], emulate=True), a[..., 0, 0])
    assert gs.solve(np.ones((3, 0, 2, 2)), np.ones((2, 4)), emulate=True).shape == (3, 0, 2, 4)
    assert gs.inv(np.ones((3, 1, 0, 0)), emulate=True).shape == (3, 1, 0, 0)


def test_stacked_solve_errors(rng):
    from scipy.linalg import LinAlgError
    a = _stack(rng, (3, 4, 4))
    a[1] = 0.0
    with pytest.raises(LinAlgError):
        gs.solve(a, np.ones(4), emulate=True)
    with pytest.raises(LinAlgError):
        gs.inv(a, emulate=True)
    with pytest.raises(ValueError, match="return_info"):
        gs.solve(a + 5 * np.eye(4), np.ones(4), return_info=True, emulate=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_stacked_solve_is_scipys(rng, dtype):
    """The whole stack at once (its LU, its condition estimates, its solve) gives SciPy's
    answers for broadcast stacks, transposed systems and the symmetric kinds."""
    a = _stack(rng, (2, 1, 6, 6), dtype) + 30 * np.eye(6, dtype=dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * _stack(rng, (2, 1, 6, 6))
    b = _stack(rng, (2, 3, 6, 2), dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    cases = [dict(), dict(assume_a="sym", lower=True), dict(assume_a="her"),
             dict(assume_a="pos", lower=False)]
    if np.dtype(dtype).kind != "c":
        cases.append(dict(transposed=True))
    for kw in cases:
        x = gs.solve(a, b, emulate=True, **kw)
        ref = sl.solve(a, b, **kw)
        assert x.shape == ref.shape and x.dtype == ref.dtype, kw
        np.testing.assert_allclose(x, ref, rtol=tol, atol=tol, err_msg=str(kw))
    x = gs.inv(a, emulate=True)
    assert x.shape == a.shape and x.dtype == sl.inv(a).dtype
    np.testing.assert_allclose(x, sl.inv(a), rtol=tol, atol=tol)


def test_stacked_solve_names_singular_and_ill_conditioned_slices(rng):
    """One LinAlgError naming every singular slice, one LinAlgWarning naming every
    ill-conditioned one with its estimate, as SciPy's batched solve and inv do (the same types
    and texts; the slices are flat indices of the broadcast batch, where SciPy 1.17 numbers
    the ones it lists from 0 and prints 1 / rcond)."""
    a = _stack(rng, (2, 1, 5, 5)) + 20 * np.eye(5)
    b = _stack(rng, (2, 3, 5, 1))
    bad = a.copy()
    bad[1, 0, :, 2] = 0.0
    for ours, theirs in ((lambda: gs.solve(bad, b, emulate=True), lambda: sl.solve(bad, b)),
                         (lambda: gs.inv(bad, emulate=True), lambda: sl.inv(bad))):
        mine, ref = raised(ours), raised(theirs)
        assert type(mine) is type(ref) and str(ref).startswith(str(mine).split("[")[0])
    assert "slice(s) [3, 4, 5] are singular" in str(raised(
        lambda: gs.solve(bad, b, emulate=True)))
    assert "slice(s) [1] are singular" in str(raised(lambda: gs.inv(bad, emulate=True)))
    ill = a.copy()
    ill[0, 0] = np.diag([1.0, 2.0, 3.0, 4.0, 1e-20])
    for fn, listed in ((lambda: gs.solve(ill, b, emulate=True), [0, 1, 2]),
                       (lambda: gs.inv(ill, emulate=True), [0])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
        assert len(caught) == 1 and caught[0].category is sl.LinAlgWarning
        text = str(caught[0].message)
        assert text == "An ill-conditioned matrix detected: " + ",".join(
            f"slice {i} has rcond = 2.5e-21" for i in listed) + ".", text


def test_stack_condition_estimates_are_each_matrixs(rng):
    """The stack's estimates (one pass over all) equal each matrix's own."""
    from gpulinalg.lu import getrs
    from gpulinalg.lu import stacked
    n = 12
    a = np.stack([_stack(rng, (n, n)) @ np.diag(np.logspace(0, -k, n)) for k in range(6)])
    lu = np.empty_like(a)
    piv = np.empty((6, n), np.int32)
    for i in range(6):
        lu[i], piv[i] = sl.lu_factor(a[i])
    lu = np.ascontiguousarray(lu)
    anorm = np.abs(a).sum(axis=1).max(axis=1)
    rc = getrs.reciprocal_condition(stacked.inverse_norm1_stack(np, lu, piv), anorm)
    for i in range(6):
        one = getrs.rcond(np, lu[i], piv[i], anorm[i])
        assert rc[i] == pytest.approx(one, rel=1e-12)
        ref, _ = sl.lapack.dgecon(np.asfortranarray(lu[i]), anorm[i], norm="1")
        assert ref / 3 <= rc[i] <= ref * 3


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2, 8, 31, 32, 33, 64, 65, 128, 200])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("kind", ["numpy", "cupy"])
def test_gpu_lu_factor_stack(cp, rng, n, dtype, kind):
    import gpulinalg
    a = rng.standard_normal((5, n, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((5, n, n)).astype(dtype)
    wrap = cp.asarray if kind == "cupy" else (lambda v: v)
    lu, piv = gpulinalg.lu_factor(wrap(a))
    assert type(lu) is type(wrap(a)) and lu.shape == a.shape and piv.shape == (5, n)
    lu, piv = (cp.asnumpy(v) if kind == "cupy" else v for v in (lu, piv))
    eps = np.finfo(dtype).eps
    for i in range(5):
        ref_lu, ref_piv = sl.lu_factor(a[i])
        np.testing.assert_array_equal(piv[i], ref_piv)
        np.testing.assert_allclose(lu[i], ref_lu, rtol=0,
                                   atol=50 * n * eps * np.abs(a[i]).max())


@pytest.mark.gpu
def test_gpu_stacked_solves(cp, rng):
    import gpulinalg
    a = cp.asarray(rng.standard_normal((4, 40, 40)) + 10 * np.eye(40))
    b = cp.asarray(rng.standard_normal((4, 40, 2)))
    x = gpulinalg.solve(a, b)
    cp.testing.assert_allclose(a @ x, b, atol=1e-9)
    x = gpulinalg.lu_solve(gpulinalg.lu_factor(a), b)
    cp.testing.assert_allclose(a @ x, b, atol=1e-9)
    cp.testing.assert_allclose(gpulinalg.det(a), cp.linalg.det(a), rtol=1e-9)
    cp.testing.assert_allclose(gpulinalg.inv(a) @ a, cp.broadcast_to(cp.eye(40), a.shape),
                               atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_lu_solve_host_stack(cp, rng, dtype):
    """NumPy stacks (SciPy's own factors) solve on the device at once: SciPy's answers,
    shapes and dtypes, NumPy out, b untouched."""
    import gpulinalg
    a = rng.standard_normal((6, 150, 150)).astype(dtype) + 5 * np.eye(150, dtype=dtype)
    lu, piv = sl.lu_factor(a)
    b = rng.standard_normal((6, 150, 3)).astype(dtype)
    held = b.copy()
    x = gpulinalg.lu_solve((lu, piv), b)
    ref = sl.lu_solve((lu, piv), b)
    assert isinstance(x, np.ndarray) and x.shape == ref.shape and x.dtype == ref.dtype
    tol = 1e-3 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(x, ref, rtol=0, atol=tol)
    np.testing.assert_array_equal(b, held)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_lu_solve_stack_in_one_launch(cp, rng, dtype):
    """Broadcast stacks of small systems through the batched solve: SciPy's shapes, dtypes
    and answers, b left as it was, its checks."""
    import gpulinalg
    a = rng.standard_normal((3, 1, 20, 20)).astype(dtype) + 5 * np.eye(20, dtype=dtype)
    lu, piv = gpulinalg.lu_factor(cp.asarray(a))
    for b in (rng.standard_normal((3, 4, 20, 2)), rng.standard_normal(20),
              rng.standard_normal((20, 4)), rng.standard_normal((2, 3, 1, 20, 5))):
        b = b.astype(dtype)
        db = cp.asarray(b)
        x = gpulinalg.lu_solve((lu, piv), db)
        ref = sl.lu_solve(sl.lu_factor(a), b)
        assert x.shape == ref.shape and x.dtype == ref.dtype
        tol = 1e-3 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(cp.asnumpy(x), ref, rtol=0, atol=tol)
        np.testing.assert_array_equal(cp.asnumpy(db), b)        # b not overwritten
        for trans in (1, 2):                                     # A^T x = b (real: A^H)
            x = gpulinalg.lu_solve((lu, piv), db, trans=trans)
            ref = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
            np.testing.assert_allclose(cp.asnumpy(x), ref, rtol=0, atol=tol)
    bad = piv.copy()
    bad[1, 0, 3] = 20
    with pytest.raises(ValueError, match="piv"):
        gpulinalg.lu_solve((lu, bad), cp.asarray(rng.standard_normal(20).astype(dtype)))
    c = cp.asarray(rng.standard_normal((3, 1, 20, 1)).astype(dtype))
    c[2, 0, 7, 0] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_solve((lu, piv), c)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,n", [(d, n) for d in (np.float32, np.float64)
                                     for n in (3, 32, 100, 200)] + [(np.complex64, 20)])
def test_gpu_stacked_solve_inv_at_once(cp, rng, dtype, n):
    """solve and inv of device stacks (the batched LU, the stack's condition estimates, the
    batched solve): each system's backward error within a small multiple of n eps, and
    SciPy's error and warning naming the slices."""
    import gpulinalg
    from scipy.linalg import LinAlgError
    count = 300
    a = rng.standard_normal((count, n, n)).astype(dtype)
    b = rng.standard_normal((count, n, 2)).astype(dtype)
    da, db = cp.asarray(a), cp.asarray(b)
    eps = np.finfo(dtype).eps
    for transposed in (False, True)[:1 if np.dtype(dtype).kind == "c" else 2]:
        x = cp.asnumpy(gpulinalg.solve(da, db, transposed=transposed)).astype(np.complex128)
        op = np.swapaxes(a, -1, -2) if transposed else a
        r = np.abs(b - op.astype(np.complex128) @ x).max(axis=(1, 2))
        scale = (np.abs(op).sum(axis=2).max(axis=1) * np.abs(x).max(axis=(1, 2))
                 + np.abs(b).max(axis=(1, 2)))
        assert (r / scale).max() <= 8 * n * eps
    sym = np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    for kw, full in (({}, a), ({"assume_a": "sym"}, sym)):   # NumPy stacks: through the GPU
        x = gpulinalg.solve(a, b, **kw)
        assert type(x) is np.ndarray and x.dtype == sl.solve(a[:2], b[:2], **kw).dtype
        x = x.astype(np.complex128)
        r = np.abs(b - full.astype(np.complex128) @ x).max(axis=(1, 2))
        scale = (np.abs(full).sum(axis=2).max(axis=1) * np.abs(x).max(axis=(1, 2))
                 + np.abs(b).max(axis=(1, 2)))
        assert (r / scale).max() <= 8 * n * eps, kw
    assert type(gpulinalg.inv(a[:, ::-1])) is np.ndarray    # negative strides
    inv = cp.asnumpy(gpulinalg.inv(da)).astype(np.complex128)
    resid = np.abs(inv @ a.astype(np.complex128) - np.eye(n)).max(axis=(1, 2))
    cond = np.linalg.cond(a.astype(np.complex128), 1)
    assert (resid <= 8 * n * eps * cond).all()
    bad = a.copy()
    bad[[7, 201], :, 1] = 0
    with pytest.raises(LinAlgError, match=r"slice\(s\) \[7, 201\] are singular"):
        gpulinalg.solve(cp.asarray(bad), db)
    ill = a.copy()
    ill[5] = np.diag(np.r_[np.ones(n - 1), 1e-30]).astype(dtype)
    with pytest.warns(sl.LinAlgWarning, match=r"^An ill-conditioned matrix detected: slice 5 "):
        gpulinalg.inv(cp.asarray(ill))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [3, 20, 150])
def test_gpu_stacked_solve_checks_in_scipys_order(cp, rng, n):
    """Infs and NaNs (a's or b's, SciPy's ValueError) come before a singular matrix's
    LinAlgError, whichever kernel reports them; check_finite=False lets b's through."""
    import gpulinalg
    from scipy.linalg import LinAlgError
    a = rng.standard_normal((50, n, n))
    b = rng.standard_normal((50, n, 2))
    singular = a.copy()
    singular[9, :, 0] = 0
    nan_b = b.copy()
    nan_b[31, n - 1, 1] = np.nan
    nan_a = a.copy()
    nan_a[40, 0, n - 1] = np.inf
    for m, rhs, error in ((singular, b, LinAlgError), (singular, nan_b, ValueError),
                          (a, nan_b, ValueError), (nan_a, b, ValueError)):
        with pytest.raises(error):
            gpulinalg.solve(cp.asarray(m), cp.asarray(rhs))
    x = cp.asnumpy(gpulinalg.solve(cp.asarray(a), cp.asarray(nan_b), check_finite=False))
    assert np.isfinite(np.delete(x, 31, axis=0)).all()      # the NaN stays in its system
    lu, piv = gpulinalg.lu_factor(cp.asarray(a))
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_solve((lu, piv), cp.asarray(nan_b))
    bad = piv.copy()
    bad[3, 1] = n
    with pytest.raises(ValueError, match="piv"):
        gpulinalg.lu_solve((lu, bad), cp.asarray(b))


@pytest.mark.gpu
def test_gpu_stack_overwrite_a(cp, rng):
    import gpulinalg
    a = cp.asarray(_stack(rng, (6, 16, 16), np.float32))
    ref = cp.asnumpy(a)
    lu, piv = gpulinalg.lu_factor(a, overwrite_a=True)
    assert lu.data.ptr == a.data.ptr                      # the factors landed in a
    for i in range(6):
        np.testing.assert_array_equal(cp.asnumpy(piv[i]), sl.lu_factor(ref[i])[1])
    b = cp.asarray(ref)
    gpulinalg.lu_factor(b)
    cp.testing.assert_array_equal(b, cp.asarray(ref))      # untouched without overwrite_a
