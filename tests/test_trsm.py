"""Triangular solve B := L^{-1} B (unit lower, row-major views): launch plan (CPU), the kernel
against SciPy's solve_triangular, float32 and float64 (GPU)."""

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg.core.element import F32, F64
from gpulinalg.lu import trsm as _trsm
from gpulinalg.lu.trsm import (COLS, NB_SHAPES, NB_SHAPES_OF, NBMAX, THREADS, blocks, nb_shape,
                               nbmax, shared_bytes)

NB_SIZES = (1, 7, 32, 95, 96, 97, 127, 128, 256)
NCOLS = (1, 33, 1000, 4097)
ELEMENTS = [F32, F64]


# ---------------------------------------------------------------- CPU

def test_shapes_and_blocks():
    assert [nb_shape(n) for n in (1, 32, 33, 64, 65, 128)] == [32, 32, 64, 64, 128, 128]
    with pytest.raises(ValueError):
        nb_shape(NBMAX + 1)
    assert blocks(100) == [(0, 100)]
    assert blocks(256) == [(0, 128), (128, 256)]
    assert blocks(300) == [(0, 128), (128, 256), (256, 300)]
    assert NB_SHAPES == NB_SHAPES_OF["float"] and NBMAX == nbmax(F32) == 128
    # double: a largest block of 96 rows
    assert [nb_shape(n, F64) for n in (1, 32, 33, 64, 65, 96)] == [32, 32, 64, 64, 96, 96]
    with pytest.raises(ValueError):
        nb_shape(97, F64)
    assert nbmax(F64) == 96
    assert blocks(96, F64) == [(0, 96)]
    assert blocks(128, F64) == [(0, 96), (96, 128)]
    assert blocks(300, F64) == [(0, 96), (96, 192), (192, 288), (288, 300)]
    assert _trsm.KERNEL_NAMES == tuple(f"trsm_left<{e.ctype},{s},{up}>" for e in ELEMENTS
                                       for s in NB_SHAPES_OF[e.ctype]
                                       for up in ("false", "true"))


@pytest.mark.parametrize("element", ELEMENTS)
def test_shared_memory_fits(element):
    top = shared_bytes(nbmax(element), element)
    assert top == element.itemsize * (nbmax(element) * (nbmax(element) + 4 + COLS))
    assert 2 * (top + 1024) <= 228 * 1024       # two blocks per SM of sm_90 (1 KiB reserved)
    assert top <= 99 * 1024                     # a block's opt-in limit on sm_86/89/120
    for s in NB_SHAPES_OF[element.ctype]:
        assert shared_bytes(s, element) % 16 == 0
    assert shared_bytes(128, F64) > 163 * 1024  # why double stops at 96: beyond sm_80's limit


@pytest.mark.parametrize("element", ELEMENTS)
def test_trsm_ptr_blocks_by_element(monkeypatch, element):
    """trsm_ptr's blocked path: the element type's largest block, byte offsets of its
    itemsize, and the GEMM of its type between blocks (CPU: recorded, not run)."""
    calls = []
    monkeypatch.setattr(_trsm, "_launch", lambda *a: calls.append(("trsm",) + a))
    monkeypatch.setattr(_trsm, "gemm_ptr_for", lambda el: (
        lambda *a, **kw: calls.append(("gemm", el) + a + (kw,))))
    lp, bp, ldl, ldb, s = 1 << 30, 1 << 31, 300, 500, element.itemsize
    _trsm.trsm_ptr(200, 77, lp, ldl, bp, ldb, sms=7, table="t", element=element)
    step = nbmax(element)
    assert calls[0] == ("trsm", lp, ldl, bp, ldb, step, 77, element)
    assert calls[1] == ("gemm", element, 200 - step, 77, step, -1.0, lp + s * step * ldl, ldl,
                        True, bp, ldb, True, 1.0, bp + s * step * ldb, ldb,
                        {"sms": 7, "table": "t"})
    assert calls[2][:7] == ("trsm", lp + s * step * (ldl + 1), ldl, bp + s * step * ldb, ldb,
                            min(step, 200 - step), 77)
    calls.clear()
    _trsm.trsm_ptr(step, 5, lp, ldl, bp, ldb, element=element)    # one block: no GEMM
    assert calls == [("trsm", lp, ldl, bp, ldb, step, 5, element)]


def test_kernel_constants_match():
    import re
    from gpulinalg.core import kernels as _kernels
    assert re.search(r"#define TRSM_THREADS (\d+)", _kernels.source("trsm")).group(1) == \
        str(THREADS)
    from gpulinalg.lu.trsm import CHUNK
    assert re.search(r"#define TRSM_CHUNK (\d+)", _kernels.source("trsm")).group(1) == \
        str(CHUNK)
    assert re.search(r"#define TRSM_COLS (\d+)", _kernels.source("trsm")).group(1) == \
        str(COLS) == "32"                                # lane = column
    assert all(nb % CHUNK == 0 for nb in NB_SHAPES)


def test_reference_ignores_diagonal_and_upper():
    rng = np.random.default_rng(0)
    lo = np.tril(rng.uniform(-1, 1, (5, 5)), -1) + np.eye(5)
    poisoned = lo + np.triu(np.full((5, 5), np.nan))
    b = rng.standard_normal((5, 3))
    np.testing.assert_allclose(_trsm.reference(poisoned, b), np.linalg.solve(lo, b))


# ---------------------------------------------------------------- GPU

def unit_lower(rng, nb, dtype=np.float32):
    """L of a partially pivoted LU of a random matrix (|l| <= 1), in an nb x nb array of
    `dtype` whose diagonal and upper triangle are NaN (the kernel must never read them)."""
    _, l, _ = sl.lu(rng.standard_normal((nb, nb)))
    out = np.tril(l, -1).astype(dtype)
    out[np.triu_indices(nb)] = np.nan
    return out


def check_solution(l, b, x):
    """Scaled residual ||B - L X|| / (||L|| ||X|| nb eps) in float64 (eps of x's dtype),
    L = strict lower + I, and the distance to SciPy's float64 solve (the same bound for
    float64 as for float32, scaled by the ratio of their eps)."""
    nb = l.shape[0]
    eps = np.finfo(x.dtype).eps
    lo = np.tril(np.nan_to_num(l.astype(np.float64)), -1) + np.eye(nb)
    x64 = x.astype(np.float64)
    res = np.linalg.norm(b.astype(np.float64) - lo @ x64)
    scale = np.linalg.norm(lo) * max(np.linalg.norm(x64), 1e-30) * nb * eps
    assert np.isfinite(x).all()
    assert res <= 2.0 * scale, res / scale
    ref = _trsm.reference(l, b)
    atol = 1e-3 * eps / np.finfo(np.float32).eps
    np.testing.assert_allclose(x, ref, rtol=0, atol=atol * max(1.0, float(np.abs(ref).max())))


def need_gemm(element, nb):
    """Skip where a float64 solve of nb rows needs the DGEMM between blocks and this tree has
    none yet (gemm/dmma.py)."""
    if nb > nbmax(element) and element is F64:
        pytest.importorskip("gpulinalg.gemm.dmma")


@pytest.mark.gpu
@pytest.mark.parametrize("ncols", NCOLS)
@pytest.mark.parametrize("nb", NB_SIZES + (300,))
@pytest.mark.parametrize("element", ELEMENTS)
def test_trsm_upper_matches_scipy(cp, rng, nb, ncols, element):
    """B := U^{-1} B, U upper non-unit (the diagonal read, the strict lower triangle never),
    row-major views inside larger arrays, against SciPy's float64 solve."""
    u = np.triu(rng.standard_normal((nb, nb + 3))[:, :nb]) / np.sqrt(nb)
    u[np.diag_indices(nb)] = rng.uniform(1.0, 2.0, nb) * rng.choice([-1, 1], nb)
    u[np.tril_indices(nb, -1)] = np.nan
    full = np.full((nb, nb + 3), 7.0)
    full[:, :nb] = u
    b = rng.standard_normal((nb, ncols + 2))
    du = cp.asarray(full.astype(element.dtype))
    db = cp.asarray(b.astype(element.dtype))
    _trsm.trsm_upper_ptr(nb, ncols, du.data.ptr, nb + 3, db.data.ptr, ncols + 2,
                         element=element)
    cp.cuda.Device().synchronize()
    x = cp.asnumpy(db)
    np.testing.assert_array_equal(x[:, ncols:], b[:, ncols:].astype(element.dtype))
    up = np.nan_to_num(np.triu(u).astype(element.dtype).astype(np.float64))
    rhs = b[:, :ncols].astype(element.dtype).astype(np.float64)
    ref = sl.solve_triangular(up, rhs, lower=False)
    eps = element.eps
    res = np.linalg.norm(rhs - up @ x[:, :ncols].astype(np.float64))
    scale = np.linalg.norm(up) * max(np.linalg.norm(ref), 1e-30) * nb * eps
    assert np.isfinite(x).all() and res <= 2.0 * scale, res / scale


@pytest.mark.gpu
@pytest.mark.parametrize("ncols", NCOLS)
@pytest.mark.parametrize("nb", NB_SIZES)
@pytest.mark.parametrize("element", ELEMENTS)
def test_trsm_matches_scipy(cp, rng, nb, ncols, element):
    need_gemm(element, nb)
    l = unit_lower(rng, nb, element.dtype)
    b = rng.standard_normal((nb, ncols)).astype(element.dtype)
    dl, db = cp.asarray(l), cp.asarray(b)
    out = _trsm.trsm_lower_unit(dl, db)
    assert out is db
    x = cp.asnumpy(db)
    np.testing.assert_array_equal(x[0], b[0])            # unit diagonal: row 0 unchanged
    check_solution(l, b, x)
    np.testing.assert_array_equal(cp.asnumpy(dl), l)     # L untouched (NaNs included)


@pytest.mark.gpu
@pytest.mark.parametrize("nb,ncols", [(128, 1000), (7, 33), (256, 4097), (64, 130), (200, 77),
                                      (96, 500)])
@pytest.mark.parametrize("element", ELEMENTS)
def test_trsm_views_of_one_matrix(cp, rng, nb, ncols, element):
    """L11 and U12 as the LU passes them: blocks of one row-major matrix (leading dimension >
    ncols, odd offsets); nothing outside the B view is written."""
    need_gemm(element, nb)
    n = nb + ncols + 37
    big = rng.standard_normal((nb + 50, n)).astype(element.dtype)
    j0, c0 = 5, 5 + nb + 3                               # L11 at (j0, j0), B at (j0, c0)
    big[j0:j0 + nb, j0:j0 + nb] = unit_lower(rng, nb, element.dtype)   # NaN diagonal, upper
    d = cp.asarray(big)
    _trsm.trsm_lower_unit(d[j0:j0 + nb, j0:j0 + nb], d[j0:j0 + nb, c0:c0 + ncols])
    out = cp.asnumpy(d)
    mask = np.ones(big.shape, bool)
    mask[j0:j0 + nb, c0:c0 + ncols] = False
    np.testing.assert_array_equal(out[mask], big[mask])
    check_solution(big[j0:j0 + nb, j0:j0 + nb], big[j0:j0 + nb, c0:c0 + ncols],
                   out[j0:j0 + nb, c0:c0 + ncols])


@pytest.mark.gpu
@pytest.mark.parametrize("element", ELEMENTS)
def test_trsm_single_column_view_and_stream(cp, rng, element):
    """A one-column B with a non-unit column stride (any stride is fine for one column), on a
    non-default stream."""
    nb = 90
    l = unit_lower(rng, nb, element.dtype)
    b = rng.standard_normal((nb, 3)).astype(element.dtype)
    db = cp.asarray(b)
    st = cp.cuda.Stream(non_blocking=True)
    with st:
        col = db[:, 1::5]                               # shape (nb, 1), strides (3, 5) elements
        assert col.shape == (nb, 1) and col.strides[1] == 5 * element.itemsize
        _trsm.trsm_lower_unit(cp.asarray(l), col)
    st.synchronize()
    x = cp.asnumpy(db)
    np.testing.assert_array_equal(x[:, [0, 2]], b[:, [0, 2]])
    check_solution(l, b[:, 1:2], x[:, 1:2])


@pytest.mark.gpu
def test_trsm_bad_inputs(cp):
    l = cp.zeros((4, 4), np.float32)
    b = cp.zeros((4, 5), np.float32)
    with pytest.raises(TypeError):
        _trsm.trsm_lower_unit(np.zeros((4, 4), np.float32), b)
    with pytest.raises(ValueError, match="float64"):               # b of another dtype
        _trsm.trsm_lower_unit(l.astype(np.float64), b)
    with pytest.raises(ValueError, match="float32"):
        _trsm.trsm_lower_unit(l, b.astype(np.float64))
    with pytest.raises(ValueError, match="float32 or float64"):
        _trsm.trsm_lower_unit(l.astype(np.float16), b.astype(np.float16))
    with pytest.raises(ValueError, match="square"):
        _trsm.trsm_lower_unit(cp.zeros((4, 3), np.float32), b)
    with pytest.raises(ValueError, match="square"):
        _trsm.trsm_lower_unit(l, cp.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="row-major"):
        _trsm.trsm_lower_unit(l, cp.asfortranarray(b))
    with pytest.raises(ValueError, match="row-major"):
        _trsm.trsm_lower_unit(l[::-1], b)
    with pytest.raises(ValueError):
        _trsm.trsm_lower_unit(l, b[:, :, None])
    # Nothing to do: no columns, or nb <= 1 (unit diagonal).
    _trsm.trsm_lower_unit(l, b[:, :0])
    one = cp.ones((1, 7), np.float32)
    _trsm.trsm_lower_unit(cp.full((1, 1), np.nan, np.float32), one)
    assert bool((one == 1).all())


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "auto"])
@pytest.mark.parametrize("element", ELEMENTS)
def test_solve_lu_blocked(cp, rng, element, precision):
    """U^{-1} L^{-1} x with the couplings in either arithmetic, against SciPy's solve with the
    same factors (float64)."""
    n, nrhs = 700, 1300
    a = rng.standard_normal((n, n))
    lu, _ = sl.lu_factor(a)
    lu = np.ascontiguousarray(lu).astype(element.dtype)
    x = rng.standard_normal((n, nrhs)).astype(element.dtype)
    out = cp.asnumpy(_trsm.solve_lu_blocked(cp.asarray(lu), cp.asarray(x), precision))
    lo = np.tril(lu.astype(np.float64), -1) + np.eye(n)
    up = np.triu(lu.astype(np.float64))
    res = np.linalg.norm(x - lo @ (up @ out.astype(np.float64)))
    scale = np.linalg.norm(lo) * np.linalg.norm(up) * np.linalg.norm(out) * n * element.eps
    assert res <= 4.0 * scale, res / scale
