"""Triangular solve B := L^{-1} B (unit lower, row-major views): launch plan (CPU), the kernel
against SciPy's solve_triangular (GPU)."""

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg.lu import trsm as _trsm
from gpulinalg.lu.trsm import COLS, NB_SHAPES, NBMAX, THREADS, blocks, nb_shape, shared_bytes

NB_SIZES = (1, 7, 32, 127, 128, 256)
NCOLS = (1, 33, 1000, 4097)


# ---------------------------------------------------------------- CPU

def test_shapes_and_blocks():
    assert [nb_shape(n) for n in (1, 32, 33, 64, 65, 128)] == [32, 32, 64, 64, 128, 128]
    with pytest.raises(ValueError):
        nb_shape(NBMAX + 1)
    assert blocks(100) == [(0, 100)]
    assert blocks(256) == [(0, 128), (128, 256)]
    assert blocks(300) == [(0, 128), (128, 256), (256, 300)]
    assert _trsm.KERNEL_NAMES == tuple(f"trsm_llnu<{s}>" for s in NB_SHAPES)
    assert 2 * shared_bytes(NBMAX) <= 227 * 1024       # two blocks fit an H100 SM
    assert shared_bytes(NBMAX) % 16 == 0


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

def unit_lower(rng, nb):
    """L of a partially pivoted LU of a random matrix (|l| <= 1), in an nb x nb float32
    array whose diagonal and upper triangle are NaN (the kernel must never read them)."""
    _, l, _ = sl.lu(rng.standard_normal((nb, nb)))
    out = np.tril(l, -1).astype(np.float32)
    out[np.triu_indices(nb)] = np.nan
    return out


def check_solution(l, b, x):
    """Scaled residual ||B - L X|| / (||L|| ||X|| nb eps) in float64, L = strict lower + I."""
    nb = l.shape[0]
    lo = np.tril(np.nan_to_num(l.astype(np.float64)), -1) + np.eye(nb)
    x64 = x.astype(np.float64)
    res = np.linalg.norm(b.astype(np.float64) - lo @ x64)
    scale = np.linalg.norm(lo) * max(np.linalg.norm(x64), 1e-30) * nb * np.finfo(np.float32).eps
    assert np.isfinite(x).all()
    assert res <= 2.0 * scale, res / scale
    ref = _trsm.reference(l, b)
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-3 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.gpu
@pytest.mark.parametrize("ncols", NCOLS)
@pytest.mark.parametrize("nb", NB_SIZES)
def test_trsm_matches_scipy(cp, rng, nb, ncols):
    l = unit_lower(rng, nb)
    b = rng.standard_normal((nb, ncols)).astype(np.float32)
    dl, db = cp.asarray(l), cp.asarray(b)
    out = _trsm.trsm_lower_unit(dl, db)
    assert out is db
    x = cp.asnumpy(db)
    np.testing.assert_array_equal(x[0], b[0])            # unit diagonal: row 0 unchanged
    check_solution(l, b, x)
    np.testing.assert_array_equal(cp.asnumpy(dl), l)     # L untouched (NaNs included)


@pytest.mark.gpu
@pytest.mark.parametrize("nb,ncols", [(128, 1000), (7, 33), (256, 4097), (64, 130), (200, 77)])
def test_trsm_views_of_one_matrix(cp, rng, nb, ncols):
    """L11 and U12 as the LU passes them: blocks of one row-major matrix (leading dimension >
    ncols, odd offsets); nothing outside the B view is written."""
    n = nb + ncols + 37
    big = rng.standard_normal((nb + 50, n)).astype(np.float32)
    j0, c0 = 5, 5 + nb + 3                               # L11 at (j0, j0), B at (j0, c0)
    big[j0:j0 + nb, j0:j0 + nb] = unit_lower(rng, nb)   # NaN diagonal and upper part
    d = cp.asarray(big)
    _trsm.trsm_lower_unit(d[j0:j0 + nb, j0:j0 + nb], d[j0:j0 + nb, c0:c0 + ncols])
    out = cp.asnumpy(d)
    mask = np.ones(big.shape, bool)
    mask[j0:j0 + nb, c0:c0 + ncols] = False
    np.testing.assert_array_equal(out[mask], big[mask])
    check_solution(big[j0:j0 + nb, j0:j0 + nb], big[j0:j0 + nb, c0:c0 + ncols],
                   out[j0:j0 + nb, c0:c0 + ncols])


@pytest.mark.gpu
def test_trsm_single_column_view_and_stream(cp, rng):
    """A one-column B with a non-unit column stride (any stride is fine for one column), on a
    non-default stream."""
    nb = 100
    l = unit_lower(rng, nb)
    b = rng.standard_normal((nb, 3)).astype(np.float32)
    db = cp.asarray(b)
    st = cp.cuda.Stream(non_blocking=True)
    with st:
        col = db[:, 1::5]                               # shape (nb, 1), strides (12, 20)
        assert col.shape == (nb, 1) and col.strides[1] == 20
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
    with pytest.raises(ValueError, match="float32"):
        _trsm.trsm_lower_unit(l.astype(np.float64), b)
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
