"""lu_factor, lu and lu_solve on SciPy's dtypes: float64 through our own driver and kernels,
complex through cuSOLVER, mixed dtypes in lu_solve.  CPU tests run the float64 driver on the
NumPy emulation (gpulinalg.testing.lu); GPU tests compare with LAPACK (SciPy on the host) by
the scaled backward error ||PA - LU||_F / (||A||_F n eps) of the working dtype."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import assert_matches_lapack, backward_error, eps_of, wilkinson, with_cond
import gpulinalg
from gpulinalg import tuning
from gpulinalg.core.element import F64
from gpulinalg.lu import plan as lu_plan
from gpulinalg.testing import lu as glt

F64_EPS = eps_of(np.float64)


def _random(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _hard(rng, kind, n=96, dtype=np.float64):
    """The issue's matrix families: random, ill-conditioned, growth, rank-deficient, a zero
    column, scaled rows."""
    if kind == "cond1e6":
        return with_cond(rng, n, 1e6, dtype)
    if kind == "cond1e12":
        return with_cond(rng, n, 1e12, dtype)
    if kind == "wilkinson":
        return wilkinson(n, dtype)
    a = _random(rng, (n, n), dtype)
    if kind == "rank_deficient":
        return (a[:, :n // 2] @ _random(rng, (n // 2, n), dtype)).astype(dtype)
    if kind == "zero_column":
        a[:, n // 3] = 0
    if kind == "scaled_rows":
        a *= np.logspace(-150, 150, n)[:, None]
    return a


HARD = ["random", "cond1e6", "cond1e12", "wilkinson", "rank_deficient", "zero_column",
        "scaled_rows"]


# ---------------------------------------------------------------- CPU: plan and emulation

def test_plan_of_float64_and_complex():
    """float64 runs our driver in FP64 under the float64 table; complex goes to cuSOLVER."""
    opts = lu_plan.Options()
    for dtype in (np.float64, np.int64):
        x = lu_plan.host_matrix(np.ones((3000, 3000), dtype), "numpy")
        plan = lu_plan.make_plan(x, opts, wgmma=True)
        assert plan.element is F64 and plan.precision == "fp64" and plan.tc_min == 0
        assert plan.table.dtype == "float64" and plan.route == lu_plan.GRAPH
    x = lu_plan.host_matrix(np.ones((300, 300), np.complex64), "numpy")
    plan = lu_plan.make_plan(x, opts, wgmma=True)
    assert plan.route == lu_plan.CUSOLVER and plan.element.name == "complex64"
    assert "complex64" in repr(plan)


def test_tables_are_keyed_by_element():
    assert tuning.current().dtype == "float32"
    assert tuning.current(element=F64).dtype == "float64"
    table = tuning.current(element=F64)
    with tuning.override(tuning.replace(tuning.current(), row_block_cap=7)):
        assert tuning.current(element=F64) is table     # a float32 override leaves it
        assert tuning.current().row_block_cap == 7


@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (67, 67), (130, 61), (61, 130), (200, 200)])
def test_emulated_float64_matches_lapack(rng, panel, shape):
    a = rng.standard_normal(shape)
    lu, piv = glt.lu_factor(a, emulate=True, panel=panel, block_size=32)
    assert lu.dtype == np.float64 and piv.dtype == np.int32
    assert_matches_lapack(a, lu, piv)


@pytest.mark.parametrize("kind", HARD)
def test_emulated_float64_hard_matrices(rng, kind):
    a = _hard(rng, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lu, piv = glt.lu_factor(a, emulate=True, block_size=32)
    assert_matches_lapack(a, lu, piv, same_pivots=kind not in ("rank_deficient",))


@pytest.mark.parametrize("devices", [2, 3])
def test_emulated_float64_several_devices(rng, devices):
    a = rng.standard_normal((150, 150))
    lu, piv = glt.lu_factor(a, emulate=True, block_size=16, devices=devices)
    assert lu.dtype == np.float64
    assert_matches_lapack(a, lu, piv)


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("lu_dtype, b_dtype", [
    (np.float64, np.float64), (np.float32, np.float64), (np.float64, np.float32),
    (np.float32, np.int32)])
def test_emulated_lu_solve_dtypes(rng, trans, lu_dtype, b_dtype):
    """The result dtype is SciPy's; x solves the system to the working precision."""
    a = rng.standard_normal((40, 40)).astype(lu_dtype)
    b = (rng.standard_normal((40, 3)) * 10).astype(b_dtype)
    fac = sl.lu_factor(a)
    x = glt.lu_solve(fac, b, trans=trans, emulate=True)
    ref = sl.lu_solve(fac, b, trans=trans)
    assert x.dtype == ref.dtype and x.shape == ref.shape
    assert x.flags.f_contiguous == ref.flags.f_contiguous
    eps = eps_of(x.dtype)
    assert np.linalg.norm(x - ref) <= 1e3 * eps * 40 * np.linalg.norm(ref)


# ---------------------------------------------------------------- GPU: float64

GPU_SIZES = [0, 1, 31, 32, 33, 127, 129, 257, 521, 1000, 1031, 2049]


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_float64_square(rng, n):
    a = rng.standard_normal((n, n))
    lu, piv = gpulinalg.lu_factor(a)
    assert lu.dtype == np.float64 and lu.shape == (n, n) and piv.dtype == np.int32
    if n:
        assert_matches_lapack(a, lu, piv)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3000, 257), (257, 3000), (5000, 1031), (127, 4097)])
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
def test_gpu_float64_rectangular(rng, shape, panel):
    a = rng.standard_normal(shape)
    lu, piv = gpulinalg.lu_factor(a, panel=panel)
    assert_matches_lapack(a, lu, piv)


def _reference_error(cp, a):
    """The larger of LAPACK's (SciPy) and cuSOLVER's backward error on a (float64).  LAPACK's
    own varies with OpenBLAS's threads (H200 host, n = 4096-8192: 0.006 with 4 threads,
    0.027 with 16; cuSOLVER 0.024-0.026): the bound takes the worse of the two references a
    user would otherwise run."""
    from cupyx.scipy.linalg import lu_factor as cusolver_lu_factor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lapack = backward_error(a, *sl.lu_factor(a), F64_EPS)
        lu, piv = cusolver_lu_factor(cp.asarray(a))
    return max(lapack, backward_error(a, cp.asnumpy(lu), cp.asnumpy(piv), F64_EPS))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", HARD)
def test_gpu_float64_hard_matrices(rng, cp, kind):
    a = _hard(rng, kind, n=700)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lu, piv = gpulinalg.lu_factor(a)
    # LAPACK's pivots (rank-deficient: pivots among equals, any choice is valid), the error
    # within 2x the worse of LAPACK's and cuSOLVER's: on the kappa = 1e6 matrix the GPU panel
    # gives 0.0063, LAPACK 0.0017-0.0027 by OpenBLAS's threads (docs/journal/float64.md)
    assert_matches_lapack(a, lu, piv, same_pivots=kind != "rank_deficient",
                          ref=_reference_error(cp, a))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4096, 8192])
def test_gpu_float64_large(rng, cp, n):
    """Sizes where nb grows and the DGEMM updates dominate; the factorization of a CuPy
    matrix stays on the device, twice (the second call replays a CUDA graph)."""
    a = cp.asarray(rng.standard_normal((n, n)))
    for _ in range(2):
        lu, piv = gpulinalg.lu_factor(a)
        assert isinstance(lu, cp.ndarray) and lu.dtype == cp.float64
    h = cp.asnumpy(a)
    ours = backward_error(h, cp.asnumpy(lu), cp.asnumpy(piv), F64_EPS)
    assert ours <= 2 * _reference_error(cp, h) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("where", ["numpy", "cupy"])
def test_gpu_float64_layouts_and_input_kept(rng, cp, layout, where):
    base = rng.standard_normal((700, 900))
    a = {"C": base, "F": np.asfortranarray(base), "strided": base[::2, 1::3]}[layout]
    x = cp.asarray(a) if where == "cupy" else a
    if where == "cupy" and layout == "strided":
        x = cp.asarray(base)[::2, 1::3]
    keep = a.copy()
    lu, piv = gpulinalg.lu_factor(x)
    lu = cp.asnumpy(lu) if where == "cupy" else lu
    assert_matches_lapack(keep, lu, cp.asnumpy(piv) if where == "cupy" else piv)
    np.testing.assert_array_equal(cp.asnumpy(x) if where == "cupy" else x, keep)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.int16])
def test_gpu_integer_input_as_scipy(rng, dtype):
    a = rng.integers(-9, 10, (300, 300)).astype(dtype)
    if dtype == np.bool_:
        a = a | np.eye(300, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_lu, _ = sl.lu_factor(a)
        lu, piv = gpulinalg.lu_factor(a)
    assert lu.dtype == ref_lu.dtype
    assert_matches_lapack(a.astype(ref_lu.dtype), lu, piv,
                          same_pivots=dtype != np.bool_)


@pytest.mark.gpu
def test_gpu_float64_singular_warning():
    a = np.ones((50, 50))
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 2 is exactly zero"):
        gpulinalg.lu_factor(a)


@pytest.mark.gpu
@pytest.mark.parametrize("permute_l", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (7, 3), (3, 7), (200, 200)])
def test_gpu_lu_as_scipy(rng, dtype, shape, permute_l):
    a = _random(rng, shape, dtype)
    ours, ref = gpulinalg.lu(a, permute_l=permute_l), sl.lu(a, permute_l=permute_l)
    assert len(ours) == len(ref)
    for x, y in zip(ours, ref):
        assert x.dtype == y.dtype and x.shape == y.shape
    tol = 100 * eps_of(dtype) * max(shape)
    rebuilt = ours[0] @ ours[1] if permute_l else ours[0] @ ours[1] @ ours[2]
    assert np.linalg.norm(rebuilt - a) <= tol * max(np.linalg.norm(a), 1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (33, 33), (700, 700), (300, 500), (500, 300)])
@pytest.mark.parametrize("where", ["numpy", "cupy"])
def test_gpu_complex_lu_factor(rng, cp, dtype, shape, where):
    a = _random(rng, shape, dtype)
    x = cp.asarray(a) if where == "cupy" else a
    lu, piv = gpulinalg.lu_factor(x)
    lu, piv = (cp.asnumpy(lu), cp.asnumpy(piv)) if where == "cupy" else (lu, piv)
    assert lu.dtype == dtype and piv.dtype == np.int32
    # cuSOLVER's own rounding: its backward error reaches ~3x LAPACK's on wide complex128
    # matrices (0.06 against 0.02 at 300 x 500), far below 1 in units of n eps.
    assert backward_error(a, lu, piv, eps_of(dtype)) <= 3 * backward_error(
        a, *sl.lu_factor(a), eps_of(dtype)) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("lu_dtype, b_dtype", [
    (np.float64, np.float64), (np.float32, np.float64), (np.float64, np.float32),
    (np.complex64, np.complex64), (np.complex128, np.complex128), (np.float64, np.complex64),
    (np.complex64, np.float32)])
@pytest.mark.parametrize("nrhs", [None, 1, 5])
def test_gpu_lu_solve_dtypes(rng, cp, trans, lu_dtype, b_dtype, nrhs):
    n = 300
    a = _random(rng, (n, n), lu_dtype)
    b = _random(rng, (n,) if nrhs is None else (n, nrhs), b_dtype)
    fac = sl.lu_factor(a)
    ref = sl.lu_solve(fac, b, trans=trans)
    x = gpulinalg.lu_solve(fac, b, trans=trans)
    assert x.dtype == ref.dtype and x.shape == ref.shape
    assert x.flags.f_contiguous == ref.flags.f_contiguous
    xd = gpulinalg.lu_solve((cp.asarray(fac[0]), cp.asarray(fac[1])), cp.asarray(b),
                            trans=trans)
    assert xd.dtype == ref.dtype
    op = {0: a, 1: a.T, 2: a.conj().T}[trans].astype(ref.dtype)
    eps = max(eps_of(lu_dtype), eps_of(ref.dtype))   # the factors' precision bounds x's
    for sol in (x, cp.asnumpy(xd)):
        res = np.linalg.norm(op @ sol - b.astype(ref.dtype))
        scale = np.linalg.norm(op) * np.linalg.norm(sol) * n * eps
        assert res <= 10 * scale, (res, scale)


@pytest.mark.gpu
def test_gpu_float64_memory_error_message(cp):
    """The up-front check counts 8-byte elements: a size that fits in float32 does not."""
    total = cp.cuda.Device().mem_info[1]
    n = int((total / 8) ** 0.5) + 1024
    with pytest.raises(MemoryError, match="float64"):
        lu_plan.check_memory(n, n, 256, copy_matrix=True, element=F64)
