"""LU: the public API (validation and results on the NumPy emulation, CPU; the real kernels,
GPU)."""

import time

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import (EPS, assert_matches_lapack, assert_same_pivots, backward_error,
                        wilkinson, with_cond)
import gpulinalg
from gpulinalg import linalg as _decomp_lu
from gpulinalg.lu.driver import CpuPanel, HostClock, getrf, unit_lower_inverse
from gpulinalg.testing.emulation import NumpyOps


# ---------------------------------------------------------------- CPU: public API

def test_public_names():
    for name in ("lu", "lu_factor", "lu_solve"):
        assert hasattr(gpulinalg, name)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (9, 9), (13, 6), (6, 13)])
@pytest.mark.parametrize("kw", [{}, {"permute_l": True}, {"p_indices": True}])
def test_lu_parity_host_backend(rng, shape, kw):
    a = rng.standard_normal(shape).astype(np.float32)
    ours = gpulinalg.lu(a, block_size=4, _ops="numpy", **kw)
    ref = sl.lu(a, **kw)
    assert len(ours) == len(ref)
    for x, y in zip(ours, ref):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (9, 9), (13, 6), (6, 13)])
def test_lu_factor_parity_host_backend(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(np.asfortranarray(a), block_size=4, _ops="numpy")
    ref_lu, ref_piv = sl.lu_factor(a)
    assert lu.shape == ref_lu.shape and piv.dtype == np.int32
    assert_same_pivots(piv, ref_lu, ref_piv)
    np.testing.assert_allclose(lu, ref_lu, atol=1e-5)


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("bshape", [(11,), (11, 3), (11, 0)])
def test_lu_solve_host_backend(rng, trans, bshape):
    a = rng.standard_normal((11, 11)).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    x = gpulinalg.lu_solve(gpulinalg.lu_factor(a, block_size=4, _ops="numpy"), b, trans=trans,
                           _ops="numpy")
    ref = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
    assert x.shape == ref.shape
    np.testing.assert_allclose(x, ref, rtol=1e-3, atol=1e-4)


def test_singular_warning_host_backend():
    a = np.ones((4, 4), np.float32)
    with pytest.warns(sl.LinAlgWarning, match=r"^Diagonal number 2 is exactly zero\. "
                                               r"Singular matrix\.$"):
        lu, piv = gpulinalg.lu_factor(a, _ops="numpy")
    assert lu.shape == (4, 4)


def test_input_not_modified_host_backend(rng):
    a = rng.standard_normal((20, 20)).astype(np.float32)
    a0 = a.copy()
    gpulinalg.lu_factor(a, block_size=4, _ops="numpy")
    np.testing.assert_array_equal(a, a0)


# Validation happens before the GPU is touched: these pass without CUDA.
@pytest.mark.parametrize("bad", [np.ones(3, np.float32), np.ones((2, 2, 2), np.float32)])
def test_rejects_non_2d(bad):
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.lu_factor(bad)
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.lu(bad)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int64])
def test_rejects_lossy_dtype(dtype):
    with pytest.raises(TypeError, match="float32"):
        gpulinalg.lu_factor(np.eye(3, dtype=dtype))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_rejects_non_finite(value):
    a = np.eye(3, dtype=np.float32)
    a[1, 2] = value
    with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
        gpulinalg.lu_factor(a)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu(a)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_solve((np.eye(3, dtype=np.float32), np.arange(3, dtype=np.int32)),
                           a[:, 2])


def test_panel_and_option_validation():
    a = np.eye(3, dtype=np.float32)
    for kw in ({"panel": "tpu"}, {"block_size": 0}, {"block_size": 2.5}, {"lookahead": 2},
               {"precision": "fp16"}, {"precision": None}):
        with pytest.raises(ValueError):
            gpulinalg.lu_factor(a, **kw)


@pytest.mark.parametrize("wgmma", [True, False])
def test_auto_precision_rule(monkeypatch, wgmma):
    """lu_factor's precision="auto": 3xTF32 updates for M*N >= AUTO_TC_MIN_MN where wgmma
    exists (one GPU or several), FP32 below, elsewhere and on the host backend; explicit
    precisions pass."""
    from gpulinalg.gemm import wgmma as _gemm_wgmma
    monkeypatch.setattr(_gemm_wgmma, "available", lambda: wgmma)
    big = _decomp_lu.AUTO_TC_MIN_MN
    tc = "3xtf32" if wgmma else "fp32"
    assert _decomp_lu._resolve_precision("auto", 16384, 16384) == tc
    assert _decomp_lu._resolve_precision("auto", big, 1) == tc
    assert _decomp_lu._resolve_precision("auto", 8192, 8192) == tc
    assert _decomp_lu._resolve_precision("auto", big - 1, 1) == "fp32"
    assert _decomp_lu._resolve_precision("auto", 6144, 6144) == "fp32"
    assert _decomp_lu._resolve_precision("auto", 16384, 16384, fp32_only=True) == "fp32"
    for p in ("fp32", "3xtf32", "tf32"):
        assert _decomp_lu._resolve_precision(p, 64, 64) == p


def _resolve_args(monkeypatch, **kw):
    """The arguments lu_factor(eye(8), **kw) hands _resolve_precision (a spy stops it there)."""
    seen = []

    class Stop(Exception):
        pass

    def spy(precision, m, n, fp32_only=False):
        seen.append((precision, m, n, fp32_only))
        raise Stop

    monkeypatch.setattr(_decomp_lu, "_resolve_precision", spy)
    with pytest.raises(Stop):
        gpulinalg.lu_factor(np.eye(8, dtype=np.float32), **kw)
    return seen


@pytest.mark.parametrize("devices", [None, 1])
def test_host_backend_resolves_auto_as_fp32(monkeypatch, devices):
    assert _resolve_args(monkeypatch, devices=devices, _ops="numpy") == [("auto", 8, 8, True)]


@pytest.mark.gpu
@pytest.mark.parametrize("devices", [None, 1])
def test_gpu_resolves_auto_by_the_rule(cp, monkeypatch, devices):
    """On the GPU (one or several), "auto" follows the size rule (no fp32_only)."""
    assert _resolve_args(monkeypatch, devices=devices) == [("auto", 8, 8, False)]


def test_lu_solve_validation():
    lu, piv = np.eye(3, dtype=np.float32), np.arange(3, dtype=np.int32)
    with pytest.raises(ValueError, match="incompatible"):
        gpulinalg.lu_solve((lu, piv), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="trans"):
        gpulinalg.lu_solve((lu, piv), np.ones(3, np.float32), trans=3)
    with pytest.raises(ValueError, match="piv"):
        gpulinalg.lu_solve((lu, piv + 5), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="float32"):
        gpulinalg.lu_solve((lu, piv), np.ones(3))


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_clear_error_without_gpu():
    with pytest.raises(gpulinalg.CudaUnavailableError):
        gpulinalg.lu_factor(np.eye(3, dtype=np.float32))


# ---------------------------------------------------------------- GPU: the real kernels

GPU_SIZES = [0, 1, 127, 129, 257, 1000, 1031, 2049]


def _np(x):
    if hasattr(x, "get"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    return np.asarray(x)


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_lu_factor_square(rng, n):
    a = rng.standard_normal((n, n)).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(a)
    assert isinstance(lu, np.ndarray) and lu.shape == (n, n) and piv.dtype == np.int32
    if n == 0:
        return
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1000, 300), (300, 1000), (1031, 129), (129, 1031),
                                   (4096, 512), (1, 7), (7, 1)])
def test_gpu_rectangular(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(a)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("threshold", [0.0, np.inf])
@pytest.mark.parametrize("lookahead", [0, 1])
def test_gpu_paths(rng, threshold, lookahead):
    a = rng.standard_normal((1031, 1031)).astype(np.float32)
    tl = []
    lu, piv = gpulinalg.lu_factor(a, panel="cpu", block_size=64, lookahead=lookahead,
                                  _inv_threshold=threshold, _timeline=tl)
    assert {r["use_inverse"] for r in tl[0]["steps"]} == {threshold == np.inf}
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("shape", [(1031, 1031), (1031, 517), (517, 1031), (2049, 2049)])
def test_gpu_l21_column_major(monkeypatch, rng, panel, shape):
    """The trailing update reading L21 through its column-major copy (forced on every update,
    look-ahead ones included) gives the factors of the row-major path: the same pivots,
    entries equal to rounding, LAPACK's backward error class."""
    from gpulinalg.lu import graph as _lu_graph
    from gpulinalg.lu import steps as _lu_ops
    a = rng.standard_normal(shape).astype(np.float32)
    out = {}
    for cols in (0, 1):
        monkeypatch.setattr(_lu_ops, "L21_COLMAJOR_MIN_COLS", cols)
        _lu_graph.clear()          # a captured graph keeps the launches it was captured with
        out[cols] = gpulinalg.lu_factor(a, panel=panel, block_size=128)
    _lu_graph.clear()
    np.testing.assert_array_equal(out[1][1], out[0][1])
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-5)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert backward_error(a, *out[1]) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["wilkinson", "cond1e6", "rank_deficient"])
def test_gpu_hard_matrices(rng, kind):
    n = 300
    a = {"wilkinson": lambda: wilkinson(100),  # growth 2^99: float32 overflows past n = 128
         "cond1e6": lambda: with_cond(rng, n, 1e6),
         "rank_deficient": lambda: (rng.standard_normal((n, 40)) @ rng.standard_normal(
             (40, n))).astype(np.float32)}[kind]()
    lu, piv = gpulinalg.lu_factor(a, block_size=32)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("kind", ["random", "wilkinson", "cond1e6", "rank_deficient"])
def test_gpu_tensor_core_updates(rng, kind, panel):
    """precision="3xtf32": the trailing updates on the tensor cores keep LAPACK's backward
    error class (within 2x); plain "tf32" is shown to be what it is (much larger errors)."""
    n = 1031
    a = {"random": lambda: rng.standard_normal((n, n)).astype(np.float32),
         "wilkinson": lambda: wilkinson(100),
         "cond1e6": lambda: with_cond(rng, n, 1e6),
         "rank_deficient": lambda: (rng.standard_normal((n, 40)) @ rng.standard_normal(
             (40, n))).astype(np.float32)}[kind]()
    ref = backward_error(a, *sl.lu_factor(a))
    lu, piv = gpulinalg.lu_factor(a, block_size=128, panel=panel, precision="3xtf32")
    assert backward_error(a, lu, piv) <= 2 * ref + 1e-3
    if kind == "random":
        lu, piv = gpulinalg.lu_factor(a, block_size=128, panel=panel, precision="tf32")
        assert backward_error(a, lu, piv) > 20 * ref


@pytest.mark.gpu
def test_gpu_auto_precision_fp32_tail(rng, monkeypatch):
    """precision="auto" with 3xTF32 updates turns to FP32 once the trailing matrix is below
    AUTO_TC_MIN_TRAILING rows and columns: rows factored before the switch equal the
    pure-3xTF32 run's bit for bit, the rest differ from it, and the error stays LAPACK's
    class."""
    from gpulinalg.gemm import wgmma as _gemm_wgmma
    if not _gemm_wgmma.available():
        pytest.skip("precision='auto' takes 3xTF32 only where wgmma exists (Hopper)")
    n, nb = 1031, 128
    monkeypatch.setattr(_decomp_lu, "AUTO_TC_MIN_MN", 1)
    monkeypatch.setattr(_decomp_lu, "AUTO_TC_MIN_TRAILING", 512)
    a = rng.standard_normal((n, n)).astype(np.float32)
    kw = dict(block_size=nb, panel="gpu")
    lu, piv = gpulinalg.lu_factor(a, precision="auto", **kw)
    lu3, piv3 = gpulinalg.lu_factor(a, precision="3xtf32", **kw)
    lu1, _ = gpulinalg.lu_factor(a, precision="fp32", **kw)
    # Updates of steps ending at column j1 with n - j1 >= 512 (j1 <= 512) on the tensor
    # cores: rows 0..639 (panels 0-4) saw only those.
    np.testing.assert_array_equal(piv[:640], piv3[:640])
    np.testing.assert_array_equal(lu[:640], lu3[:640])
    assert not np.array_equal(lu[640:], lu3[640:])
    assert not np.array_equal(lu[:640], lu1[:640])
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, *sl.lu_factor(a)) + 1e-3


@pytest.mark.gpu
def test_gpu_singular_warning():
    a = np.ones((200, 200), np.float32)
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 2 is exactly zero"):
        lu, piv = gpulinalg.lu_factor(a, block_size=32)
    assert lu.shape == (200, 200)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_gpu_cupy_layouts_and_no_modification(cp, rng, order):
    h = rng.standard_normal((600, 1000)).astype(np.float32)
    if order == "strided":
        d = cp.asarray(h)[:, ::2][:, :300]
        h = h[:, ::2][:, :300]
    else:
        d = cp.asarray(np.asarray(h, order=order))
    d0 = d.copy()
    lu, piv = gpulinalg.lu_factor(d)
    assert isinstance(lu, cp.ndarray) and isinstance(piv, cp.ndarray)
    assert bool((d == d0).all())
    ref_lu, ref_piv = sl.lu_factor(h)
    assert_same_pivots(_np(piv), ref_lu, ref_piv)
    assert backward_error(h, _np(lu), _np(piv)) <= 2 * backward_error(h, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
def test_gpu_overwrite_in_place(cp, rng):
    h = rng.standard_normal((513, 513)).astype(np.float32)
    d = cp.asarray(h)
    lu, piv = gpulinalg.lu_factor(d, overwrite_a=True)
    assert lu.data.ptr == d.data.ptr
    h2 = np.asfortranarray(h)
    lu2, _ = gpulinalg.lu_factor(h2, overwrite_a=True)  # NumPy input: never modified
    np.testing.assert_array_equal(h2, h)
    np.testing.assert_allclose(_np(lu), lu2, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_torch(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA torch")
    h = rng.standard_normal((700, 700)).astype(np.float32)
    t = torch.from_numpy(h).cuda()
    lu, piv = gpulinalg.lu_factor(t)
    assert isinstance(lu, torch.Tensor) and lu.is_cuda
    ref_lu, ref_piv = sl.lu_factor(h)
    assert_same_pivots(_np(piv), ref_lu, ref_piv)
    assert backward_error(h, _np(lu), _np(piv)) <= 2 * backward_error(h, ref_lu, ref_piv) + 1e-3
    np.testing.assert_array_equal(t.cpu().numpy(), h)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(257, 257), (300, 1031), (1031, 300), (1, 1), (0, 5)])
@pytest.mark.parametrize("kw", [{}, {"permute_l": True}, {"p_indices": True}])
def test_gpu_lu_parity(rng, shape, kw):
    a = rng.standard_normal(shape).astype(np.float32)
    ours, ref = gpulinalg.lu(a, **kw), sl.lu(a, **kw)
    for x, y in zip(ours, ref):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=1e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("nrhs", [None, 1, 7])
def test_gpu_lu_solve(cp, rng, trans, nrhs):
    n = 1031
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n,) if nrhs is None else (n, nrhs)).astype(np.float32)
    f = gpulinalg.lu_factor(a)
    x = gpulinalg.lu_solve(f, b, trans=trans)
    assert x.shape == b.shape and isinstance(x, np.ndarray)
    op = a.T if trans else a

    def resid(x):
        x = np.asarray(x, np.float64).reshape(n, -1)
        r = op.astype(np.float64) @ x - b.reshape(n, -1)
        return np.linalg.norm(r) / (np.linalg.norm(a) * np.linalg.norm(x) * n * EPS)
    ref = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
    assert resid(x) <= 2 * resid(ref) + 1e-3
    xd = gpulinalg.lu_solve((cp.asarray(f[0]), cp.asarray(f[1])), cp.asarray(b), trans=trans)
    assert isinstance(xd, cp.ndarray)
    np.testing.assert_allclose(_np(xd), x, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("overwrite_a,order", [(False, "C"), (True, "C"), (False, "F"),
                                               (True, "F")])
def test_gpu_rejects_non_finite_device_input(cp, rng, panel, overwrite_a, order):
    """Device input with a NaN or inf: ValueError, whether the check waits before the
    factorization (the caller's array factored in place) or is read after it (a copy is
    factored), and the caller's array is never changed."""
    for value in (np.nan, np.inf):
        a = np.asarray(rng.standard_normal((300, 300)), dtype=np.float32, order=order)
        a[150, 7] = value
        d = cp.asarray(a, order=order)
        with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
            gpulinalg.lu_factor(d, overwrite_a=overwrite_a, panel=panel)
        np.testing.assert_array_equal(cp.asnumpy(d), a)
        lu, piv = gpulinalg.lu_factor(d, check_finite=False, panel=panel)   # no hang, no error
        assert lu.shape == a.shape


@pytest.mark.gpu
def test_gpu_memory_error_message(cp):
    free = cp.cuda.Device().mem_info[1]
    n = int((free / 4) ** 0.5) + 1024
    with pytest.raises(MemoryError, match="GiB"):
        _decomp_lu._check_memory(cp, n, n, 256, copy_matrix=True)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_n50000_64bit_indexing(cp):
    # 50000^2 floats = 10 GB: offsets pass 2**31 elements (and 2**32 bytes) many times over.
    from gpulinalg.bench.lu import backward_error as estimate
    n = 50000
    if cp.cuda.Device().mem_info[0] < 3 * 4 * n * n:
        pytest.skip("needs ~30 GB of free GPU memory")
    a = cp.random.default_rng(11).standard_normal((n, n), dtype=cp.float32)
    lu, piv = gpulinalg.lu_factor(a)
    p = cp.asnumpy(piv)
    assert p.shape == (n,) and (p >= np.arange(n)).all() and (p < n).all()
    assert bool(cp.isfinite(lu[-1]).all()) and bool(cp.isfinite(lu[:, -1]).all())
    x = cp.random.default_rng(12).standard_normal(n)
    # A wrong block (bad offset, unwritten tile) gives an error of order 1/(n eps) ~ 1e3.
    assert estimate(cp, a, lu, piv, x) < 0.05
