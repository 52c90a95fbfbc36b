"""GPU panel: the recursion and its leaf model on the host against LAPACK sgetrf / dgetrf
(CPU); the leaf kernel and the recursive panel alone, float32 and float64, then
lu_factor(panel="gpu") (GPU)."""

import contextlib
import dataclasses

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import (assert_matches_lapack, assert_same_pivots, backward_error, factors,
                        wilkinson, with_cond)
import gpulinalg
from gpulinalg import tuning
from gpulinalg.core.element import F32, F64
from gpulinalg.lu.driver import getrf
from gpulinalg.testing.emulation import NumpyOps
from gpulinalg.lu import panel_gpu as _panel_gpu
from gpulinalg.lu.panel_gpu import (GCAP, GMAX_ROW, KERNEL_NAMES, LEAF_SHAPES, ROW_FAMILY,
                                    ROW_LW, ROW_SHAPES, ROW_WIDTHS, THREADS, TILE_FAMILY,
                                    GpuPanel, factor_panel, leaf_key, leaf_plan, leaf_shape,
                                    row_block_cap, row_kernel_name, split)
from gpulinalg.testing.panel_models import (EmulatedGpuPanel, emulated_leaf_width, getf2_host,
                                            getf2_rows_host, getrf_panel_host)


TILE32, ROW32, ROW_WIDTHS32 = LEAF_SHAPES[F32], ROW_SHAPES[F32], ROW_WIDTHS[F32]
M_SIZES = (1, "w-1", "w", "w+1", 1000, 4097, 33000)
W_SIZES = (1, 7, 32, 64, 128, 256)


def _m(m, w):
    return {"w-1": w - 1, "w": w, "w+1": w + 1}.get(m, m)


def sgetrf_ref(a):
    """LAPACK's factors and 0-based pivots (min(m, w) of them) and info."""
    lu, ipiv, info = sl.lapack.sgetrf(a)
    return lu, ipiv[:min(a.shape)].astype(np.int32), int(info)


def check_panel(a, lu, piv, info, exact_pivots=True):
    ref_lu, ref_piv, ref_info = sgetrf_ref(a)
    if exact_pivots:
        assert_same_pivots(piv, ref_lu, ref_piv)
    assert info == ref_info
    scale = max(float(np.abs(ref_lu).max()), 1.0)
    assert float(np.abs(np.asarray(lu) - ref_lu).max()) <= 1e-4 * scale
    ours, ref = backward_error(a, lu, piv), backward_error(a, ref_lu, ref_piv)
    assert ours <= 2 * ref + 1e-3, (ours, ref)


def dgetrf_ref(a):
    """LAPACK dgetrf's factors, 0-based pivots (min(m, w) of them) and info."""
    lu, ipiv, info = sl.lapack.dgetrf(a)
    return lu, ipiv[:min(a.shape)].astype(np.int32), int(info)


def backward_error64(a, lu, piv):
    """||PA - LU||_F / (||A||_F n eps) with float64's eps."""
    perm, L, U = factors(lu, piv)
    scale = max(np.linalg.norm(a), 1e-300) * max(a.shape) * F64.eps
    return np.linalg.norm(a[perm] - L @ U) / scale


def check_panel64(a, lu, piv, info):
    """float64 factors against dgetrf: the pivots (up to near-ties), info, the factors
    entrywise, and the scaled backward error within twice LAPACK's."""
    ref_lu, ref_piv, ref_info = dgetrf_ref(a)
    assert_same_pivots(piv, ref_lu, ref_piv, rtol=max(1e-12, a.shape[0] * F64.eps))
    assert info == ref_info
    scale = max(float(np.abs(ref_lu).max()), 1.0)
    if np.array_equal(piv, ref_piv):
        assert float(np.abs(np.asarray(lu) - ref_lu).max()) <= 1e-9 * scale
    ours, ref = backward_error64(a, lu, piv), backward_error64(a, ref_lu, ref_piv)
    assert ours <= 2 * ref + 1e-3, (ours, ref)


# ---------------------------------------------------------------- CPU: the model

def test_leaf_shapes_and_split():
    assert leaf_shape(1) == (32, 4, 1)
    assert leaf_shape(THREADS * 4) == (32, 4, 1)
    assert leaf_shape(THREADS * 4 + 1) == (32, 4, 2)
    assert leaf_shape(33000) == (32, 4, 33)
    assert leaf_shape(GCAP * THREADS * 4 + 1) == (16, 8, GCAP // 2 + 1)
    with pytest.raises(ValueError, match="panel='cpu'"):
        leaf_shape(GCAP * THREADS * 16 + 1)
    assert all(lw * rpt <= 128 for lw, rpt in TILE32)
    assert split(128, 32) == 64 and split(256, 32) == 128 and split(100, 32) == 64
    assert split(33, 32) == 32 and split(127, 32) == 64


CAP = tuning.SM90.row_block_cap        # the row leaf's block cap on one H100


def _plan(mp, row_blocks, row_cap=CAP, **kw):
    """leaf_plan under the one-GPU block cap unless row_cap is given."""
    return leaf_plan(mp, row_blocks, row_cap, **kw)


def _table(**fields):
    """The tuning table in force with `fields` changed."""
    return dataclasses.replace(tuning.current(), **fields)


def test_leaf_plan():
    one = dict(row_cap=GMAX_ROW)                                # one row per thread first
    assert ROW32[0] == (ROW_LW, 1) and all(lw * rpt == 128 for lw, rpt in ROW32)
    assert _plan(1, 132) == ("row", ROW_LW, 1, 1)
    assert _plan(THREADS * 132, 132, **one) == ("row", ROW_LW, 1, 132)
    assert _plan(33000, 132, **one) == ("row", ROW_LW, 1, 129)
    # Taller: more rows per thread (fewer columns per leaf), then the tile leaf.
    assert _plan(THREADS * 132 + 1, 132, **one) == ("row", 64, 2, 67)
    assert _plan(49152, 132, **one) == ("row", 64, 2, 96)
    assert _plan(THREADS * 264 + 1, 132, **one) == ("row", 32, 4, 67)
    assert _plan(THREADS * 528 + 1, 132) == ("tile",) + leaf_shape(THREADS * 528 + 1)
    assert _plan(THREADS * 132 + 1, 132, tile_blocks=GCAP, row_lw=128)[0] == "tile"
    assert _plan(THREADS * GMAX_ROW, 1000, **one)[:3] == ("row", ROW_LW, 1)   # G <= slots
    assert _plan(THREADS * GMAX_ROW + 1, 1000, **one)[:3] == ("row", 64, 2)
    # The default cap: the widest leaf within row_block_cap blocks, else the fewest blocks.
    assert CAP == tuning.DEFAULT.row_block_cap == 32
    assert _plan(THREADS * CAP, 132) == ("row", ROW_LW, 1, CAP)
    assert _plan(THREADS * CAP + 1, 132) == ("row", 64, 2, CAP // 2 + 1)
    assert _plan(16384, 132) == ("row", 64, 2, 32)
    assert _plan(32768, 132) == ("row", 32, 4, 32)
    assert _plan(49152, 132) == ("row", 32, 4, 48)             # over the cap: fewest blocks
    assert _plan(32768, 132, row_cap=64) == ("row", 64, 2, 64)
    assert _plan(32768, 132, row_lw=128) == ("row", ROW_LW, 1, 128)   # a width: no cap
    assert _plan(5000, 132, row_lw=64) == ("row", 64, 2, 10)
    assert split(256, 128) == 128 and split(200, 128) == 128 and split(129, 128) == 128


def test_leaf_plan_on_several_gpus():
    """Several GPUs: a larger row-leaf block cap (the same leaves as one GPU)."""
    sm90 = tuning.SM90
    assert row_block_cap(1, sm90) == CAP
    assert row_block_cap(1, sm90) < row_block_cap(2, sm90) < row_block_cap(3, sm90)
    assert row_block_cap(3, sm90) == row_block_cap(8, sm90) == GMAX_ROW
    for devices in (2, 4):
        cap = row_block_cap(devices, sm90)
        assert _plan(1, 132, row_cap=cap) == ("row", ROW_LW, 1, 1)
        assert _plan(4096, 132, row_cap=cap) == ("row", ROW_LW, 1, 16)


def test_gpu_block_size_rule():
    """lu/plan.py's block size of the GPU panel (the table's gpu_nb*)."""
    from gpulinalg.lu.plan import block_size

    def nb(m, n, precision="fp32", devices=1):
        return block_size(m, n, "gpu", precision, devices, tuning.SM90)

    assert nb(8192, 8192) == 128
    assert nb(8193, 20000) == 256
    assert nb(16384, 16384) == 256
    assert nb(16385, 40000) == 512
    # tensor-core updates on one GPU take wider panels; three or more GPUs take 256 from 4097
    # rows, 512 from 8193 (the host's enqueue bounds them there), 256 again from 28673 to
    # 40960 (the panels' chain), 512 above
    assert nb(8193, 20000, "3xtf32") == 512
    assert nb(24576, 24576, "tf32") == 512
    assert nb(32768, 32768, "3xtf32") == 1024
    assert nb(8192, 8192, "3xtf32") == 128
    assert nb(32768, 32768, "3xtf32", devices=2) == 512
    assert nb(16384, 16384, "3xtf32", devices=2) == 256
    assert nb(32768, 32768, "3xtf32", devices=3) == 256
    assert nb(8192, 8192, "fp32", devices=4) == 256
    assert nb(8193, 8193, "fp32", devices=4) == 512
    assert nb(16384, 16384, "3xtf32", devices=4) == 512
    assert nb(28672, 28672, "fp32", devices=4) == 512
    assert nb(28673, 28673, "fp32", devices=4) == 256
    assert nb(32768, 32768, "fp32", devices=4) == 256
    assert nb(40960, 40960, "fp32", devices=4) == 256
    assert nb(40961, 40961, "3xtf32", devices=4) == 512
    assert nb(49152, 49152, "fp32", devices=4) == 512
    assert nb(4096, 4096) == 128
    assert nb(4096, 9000, devices=2) == 128
    assert nb(4097, 4097, devices=2) == 128
    assert nb(4096, 4096, devices=4) == 128
    assert nb(4097, 4097, devices=4) == 256


def test_kernel_names():
    """Every instantiation the tables launch is listed (tests/test_kernels_compile.py compiles
    them): the row leaf EARLY up to row_early_rpt rows per thread and late, the tile leaf."""
    for t in (tuning.SM90, tuning.DEFAULT):
        for lw, rpt in ROW32:
            assert row_kernel_name(lw, rpt, rpt <= t.row_early_rpt) in KERNEL_NAMES[ROW_FAMILY]
            assert row_kernel_name(lw, rpt, False) in KERNEL_NAMES[ROW_FAMILY]
    assert KERNEL_NAMES[TILE_FAMILY] == (
        tuple(f"getrf_leaf<float,{lw},{rpt}>" for lw, rpt in TILE32)
        + tuple(f"getrf_leaf<double,{lw},{rpt}>" for lw, rpt in LEAF_SHAPES[F64]))
    assert row_kernel_name(128, 1, True) == "getrf_leaf_row<float,128,1,1>"
    assert row_kernel_name(32, 4, False) == "getrf_leaf_row<float,32,4,0>"
    assert row_kernel_name(24, 2, True, F64) == "getrf_leaf_row<double,24,2,1>"
    assert set(KERNEL_NAMES) == {TILE_FAMILY, ROW_FAMILY}


def test_gpu_panel_protocol():
    """The driver's panel protocol without a device: nothing to gate, no host work beside
    the driver, info 0 before any panel."""
    panel = GpuPanel(devices=2)
    assert panel.name == "gpu" and not panel.host_wait and panel.gated is False
    assert isinstance(panel.running(), contextlib.nullcontext)
    assert panel.final_info(None) == 0 and panel.devices == 2
    emulated = EmulatedGpuPanel(leaf_width=4)
    assert isinstance(emulated, GpuPanel) and emulated.gated is False
    assert emulated.final_info(None) == 0


def test_emulated_leaf_width_is_the_device_plan():
    """EmulatedGpuPanel's default leaf width: the device plan's on sm_count SMs."""
    sm90 = tuning.SM90
    assert emulated_leaf_width(4096, 1, 132, sm90) == ROW_LW
    assert emulated_leaf_width(16384, 1, 132, sm90) == 64       # the one-GPU cap: 2 rows
    assert emulated_leaf_width(16384, 4, 132, sm90) == ROW_LW   # a larger cap on 4 GPUs
    assert emulated_leaf_width(4096, 2, 132, sm90) == ROW_LW
    assert emulated_leaf_width(THREADS * 528 + 1, 1, 132, sm90) == leaf_shape(THREADS * 528 + 1)[0]
    assert emulated_leaf_width(THREADS * 33 + 1, 1, 32, sm90) == 64   # fewer SMs


def test_driver_gpu_panel_model_default_plan(rng):
    """The host emulation of GpuPanel with no leaf width takes it from leaf_plan (any kind)."""
    a = rng.standard_normal((300, 300)).astype(np.float32)
    A = a.copy()
    piv, info = getrf(NumpyOps(A, 64), EmulatedGpuPanel(), 64, 1)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert info == 0
    assert backward_error(a, A, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


def test_kernel_constants_match():
    """The #defines of the leaf kernels are the Python constants (one source of truth)."""
    import re
    from gpulinalg.core import kernels as _kernels
    src = _kernels.source(TILE_FAMILY) + _kernels.source(ROW_FAMILY)
    defs = dict(re.findall(r"#define (GETRF_\w+) (\d+)", src))
    assert int(defs["GETRF_THREADS"]) == THREADS and int(defs["GETRF_GCAP"]) == GCAP
    assert int(defs["GETRF_LWMAX"]) == _panel_gpu.LWMAX
    assert int(defs["GETRF_GMAX_ROW"]) == GMAX_ROW
    assert int(defs["GETRF_ROW_BYTES"]) == 4 * _panel_gpu.ROW_WORDS
    for el, shapes in ROW_SHAPES.items():      # a row fits its slot of the exchange
        assert all(lw * el.itemsize <= 4 * _panel_gpu.ROW_WORDS for lw, _ in shapes)


def _tie_matrix(rng, m, w):
    """Random with ties across rows (small integers) and a zero column."""
    a = rng.integers(-3, 4, size=(m, w)).astype(np.float32)
    if w > 2:
        a[:, w // 2] = 0
    return a


@pytest.mark.parametrize("m,w", [(1, 1), (5, 3), (3, 5), (40, 40), (300, 17), (1000, 64)])
@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_row_leaf_model_is_getf2(rng, m, w, kind):
    """Lazy swaps (positions move, rows stay) give getf2's factors and pivots bit for bit."""
    a = (rng.standard_normal((m, w)).astype(np.float32) if kind == "normal"
         else _tie_matrix(rng, m, w))
    b, c = a.copy(), a.copy()
    pb, pc = np.zeros(min(m, w), np.int32), np.zeros(min(m, w), np.int32)
    assert getf2_rows_host(b, pb, 7) == getf2_host(c, pc, 7)
    np.testing.assert_array_equal(pb, pc)
    np.testing.assert_array_equal(b, c)


def test_leaf_key_every_kind():
    """The steps cache key of every leaf kind (the plan less its grid size)."""
    assert leaf_key(("tile", 32, 4, 48)) == ("tile", 32, 4)
    assert leaf_key(("row", 128, 1, 32)) == ("row", 128, 1)
    for mp in (1, 2048, 4096, 8192, 40000, 200000):
        plan = _plan(mp, 132)
        key = leaf_key(plan)
        assert plan[:len(key)] == key and key[0] in ("tile", "row")


@pytest.mark.parametrize("m", [1, 2, 9, 31, 64, 65, 300])
@pytest.mark.parametrize("w", [1, 3, 8, 31, 64, 100])
@pytest.mark.parametrize("lw", [1, 4, 32])
def test_recursion_matches_sgetrf(rng, m, w, lw):
    a = rng.standard_normal((m, w)).astype(np.float32)
    b = a.copy()
    piv, info = getrf_panel_host(b, lw)
    check_panel(a, b, piv, info)


def test_leaf_model_pivot_rule():
    """First max on ties, whole-row swaps, no scaling of a zero column."""
    a = np.array([[1, 2], [-3, 4], [3, 5]], np.float32)
    piv = np.zeros(2, np.int32)
    assert getf2_host(a, piv) == 0
    assert piv[0] == 1
    z = np.zeros((4, 3), np.float32)
    z[:, 1] = [0, 0, 2, 0]
    piv = np.zeros(3, np.int32)
    assert getf2_host(z, piv, col_base=10) == 11
    assert list(piv) == [0, 2, 2]


@pytest.mark.parametrize("zero_col", [0, 5, 40, 63])
@pytest.mark.parametrize("lw", [4, 32])
def test_recursion_zero_column_info(rng, zero_col, lw):
    a = rng.standard_normal((90, 64)).astype(np.float32)
    a[:, zero_col] = 0
    b = a.copy()
    piv, info = getrf_panel_host(b, lw, col_base=0)
    assert info == zero_col + 1
    check_panel(a, b, piv, info)


@pytest.mark.parametrize("shape", [(53, 53), (61, 23), (23, 61), (100, 8), (8, 100), (1, 1)])
@pytest.mark.parametrize("lookahead", [0, 1])
@pytest.mark.parametrize("lw", [2, 32])
def test_driver_with_gpu_panel_model(rng, shape, lookahead, lw):
    a = rng.standard_normal(shape).astype(np.float32)
    A = a.copy()
    piv, info = getrf(NumpyOps(A, 8), EmulatedGpuPanel(leaf_width=lw), 8, lookahead)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert info == 0
    assert backward_error(a, A, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.parametrize("m,w", [(300, 256), (256, 256), (700, 200), (130, 256)])
def test_recursion_with_row_leaves(rng, m, w):
    """nb = 256 with 128-wide leaves: one recursion level, as the device panel does."""
    a = rng.standard_normal((m, w)).astype(np.float32)
    b = a.copy()
    piv, info = getrf_panel_host(b, ROW_LW)
    check_panel(a, b, piv, info)


def test_tag_reset_before_wrap():
    """next_tags: consecutive tags per launch; keys and rows are zeroed before uint32 wraps."""
    class Buffer:
        def __init__(self):
            self.zeroed = 0

        def fill(self, v):
            assert v == 0
            self.zeroed += 1

    ws = object.__new__(_panel_gpu.PanelWorkspace)
    ws.keys, ws.rows, ws.epoch = Buffer(), Buffer(), 1
    assert ws.next_tags(128) == 1 and ws.next_tags(5) == 129 and ws.epoch == 134
    ws.epoch = _panel_gpu.TAG_LIMIT - 100
    assert ws.next_tags(100) == 1 and ws.epoch == 101
    assert ws.keys.zeroed == ws.rows.zeroed == 1
    assert ws.next_tags(128) == 101 and ws.keys.zeroed == ws.rows.zeroed == 1


def test_panel_stream_asks_for_the_greatest_priority():
    """The panel stream's blocks must go first: without CuPy's range query (CuPy 14) the
    stream asks for a priority beyond any range (CUDA clamps it)."""
    from types import SimpleNamespace
    from gpulinalg.lu import steps as _lu_ops
    made = []
    runtime = SimpleNamespace()
    fake = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime,
                                                Stream=lambda **kw: made.append(kw)))
    _lu_ops._priority_stream(fake)
    assert made[-1] == {"non_blocking": True, "priority": _lu_ops._GREATEST}
    assert _lu_ops._GREATEST < -1000
    runtime.deviceGetStreamPriorityRange = lambda: (0, -5)
    _lu_ops._priority_stream(fake)
    assert made[-1] == {"non_blocking": True, "priority": -5}


def test_driver_gpu_panel_model_info_and_timeline():
    a = np.random.default_rng(1).standard_normal((40, 40)).astype(np.float32)
    a[:, 17] = 0
    A, tl = a.copy(), []
    piv, info = getrf(NumpyOps(A, 8), EmulatedGpuPanel(leaf_width=4), 8, 1, timeline=tl)
    assert info == sl.lapack.sgetrf(a)[2] == 18
    assert tl[0]["panel"] == "gpu" and tl[0]["host_panel_ms"] == 0
    assert not any(s["use_inverse"] for s in tl[0]["steps"])


def test_public_api_gpu_panel_host_backend(rng):
    """lu_factor with the GPU panel (the default) on the NumPy emulation."""
    from gpulinalg.lu.plan import make_panel
    from gpulinalg.testing import lu as glt
    assert isinstance(make_panel("gpu"), GpuPanel) and make_panel("gpu", devices=2).devices == 2
    a = rng.standard_normal((37, 37)).astype(np.float32)
    tl = []
    lu, piv = glt.lu_factor(a, block_size=8, emulate=True, timeline=tl)
    assert tl[0]["panel"] == "gpu"                      # panel="auto": the GPU panel
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    np.testing.assert_allclose(lu, ref_lu, atol=1e-4)
    lu, piv = glt.lu_factor(a, panel="gpu", block_size=8, emulate=True)
    assert_same_pivots(piv, ref_lu, ref_piv)
    s = np.ones((4, 4), np.float32)
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 2 is exactly zero"):
        glt.lu_factor(s, panel="gpu", emulate=True)


def test_factor_panel_step_order():
    """The recursion's steps, in order, for a 10 x 8 panel with leaves of width 2."""
    class Log:
        def __init__(self):
            self.calls = []

        def __getattr__(self, name):
            return lambda *args: self.calls.append((name, args[0].shape))

    log = Log()
    factor_panel(log, np.zeros((10, 8), np.float32), np.zeros(8, np.int32), 2, 0)
    names = [c[0] for c in log.calls]
    assert names.count("leaf") == 4
    assert log.calls[0] == ("leaf", (10, 2))
    assert names[-2:] == ["laswp", "add"]          # swaps of A22 reach the left columns
    assert ("gemm_sub", (6, 4)) in log.calls         # A22 of the top split: rows 4:, cols 4:


# ---------------------------------------------------------------- CPU: float64

TILE64 = LEAF_SHAPES[F64]


def test_leaf_shapes_f64():
    """float64 tile leaves: 64 doubles of registers per thread, half the rows of float32's."""
    assert TILE64 == ((32, 2), (16, 4), (8, 8))
    assert all(lw * rpt * F64.itemsize == 512 for lw, rpt in TILE64)
    assert all(lw * rpt * F32.itemsize == 512 for lw, rpt in TILE32)
    assert leaf_shape(1, element=F64) == (32, 2, 1)
    assert leaf_shape(THREADS * 2, element=F64) == (32, 2, 1)
    assert leaf_shape(THREADS * 2 + 1, element=F64) == (32, 2, 2)
    assert leaf_shape(32768, element=F64) == (32, 2, 64)
    assert leaf_shape(GCAP * THREADS * 2, element=F64) == (32, 2, GCAP)
    assert leaf_shape(GCAP * THREADS * 2 + 1, element=F64) == (16, 4, GCAP // 2 + 1)
    assert leaf_shape(100000, element=F64) == (16, 4, 98)
    assert leaf_shape(GCAP * THREADS * 8, element=F64) == (8, 8, GCAP)
    with pytest.raises(ValueError, match="float64 panel of .* use panel='cpu'"):
        leaf_shape(GCAP * THREADS * 8 + 1, element=F64)


def test_leaf_plan_f64():
    """float64: the row leaf (64 doubles at one row per thread, 48 at two) wherever its grid
    is co-resident, under the block cap as float32's; the tile leaf above; KERNEL_NAMES lists
    every float64 instantiation."""
    assert ROW_SHAPES[F64] == ((64, 1), (24, 2))
    assert all(lw * rpt * F64.itemsize <= 512 for lw, rpt in ROW_SHAPES[F64])
    f64 = dict(element=F64)
    assert _plan(1, 132, **f64) == ("row", 64, 1, 1)
    assert _plan(THREADS * CAP, 132, **f64) == ("row", 64, 1, CAP)
    assert _plan(THREADS * CAP + 1, 132, **f64) == ("row", 24, 2, CAP // 2 + 1)
    assert _plan(32768, 132, **f64) == ("row", 24, 2, 64)       # over the cap: fewest blocks
    assert _plan(32768, 132, row_cap=GMAX_ROW, **f64) == ("row", 64, 1, 128)
    assert _plan(THREADS * 264, 132, **f64) == ("row", 24, 2, 132)
    assert _plan(THREADS * 264 + 1, 132, **f64) == ("tile", 16, 4, 67)
    assert _plan(100000, 132, **f64) == ("tile", 16, 4, 98)
    assert _plan(100000, 132, tile_blocks=97, **f64) == ("tile", 8, 8, 49)
    assert _plan(5000, 132, row_lw=24, **f64) == ("row", 24, 2, 10)
    assert _plan(5000, 132, row_lw=128, **f64)[0] == "tile"     # no such float64 row leaf
    assert _plan(5000, 0, **f64) == ("tile", 32, 2, 10)         # no row-leaf grid
    names = KERNEL_NAMES[TILE_FAMILY]
    assert all(f"getrf_leaf<double,{lw},{rpt}>" in names for lw, rpt in TILE64)
    assert all(f"getrf_leaf<float,{lw},{rpt}>" in names for lw, rpt in TILE32)
    for t in (tuning.SM90_F64, tuning.DEFAULT_F64):
        for lw, rpt in ROW_SHAPES[F64]:
            for early in (False, rpt <= t.row_early_rpt):
                assert row_kernel_name(lw, rpt, early, F64) in KERNEL_NAMES[ROW_FAMILY]
    assert _panel_gpu.tile_kernel_name(16, 4, F64) == "getrf_leaf<double,16,4>"


def test_forced_plan_f64():
    """getrf_panel_device's forced leaves for float64: its own tile shapes and row widths."""
    ws = object.__new__(_panel_gpu.PanelWorkspace)
    ws.element = F64
    ws.plan = lambda mp, row_lw=None: _plan(mp, 132, row_lw=row_lw, element=F64)
    assert _panel_gpu._forced_plan(ws, 5000, (16, 4)) == ("tile", 16, 4)
    assert _panel_gpu._forced_plan(ws, 5000, ("row", 64)) == ("row", 64, 1, 20)
    assert _panel_gpu._forced_plan(ws, 5000, ("row", 24)) == ("row", 24, 2, 10)
    with pytest.raises(ValueError, match="row leaf width 128 is not one of"):
        _panel_gpu._forced_plan(ws, 5000, ("row", 128))
    with pytest.raises(ValueError, match="do not fit the row leaf"):
        _panel_gpu._forced_plan(ws, THREADS * 133, ("row", 64))
    with pytest.raises(ValueError, match="is not one of"):
        _panel_gpu._forced_plan(ws, 5000, (32, 4))             # a float32 shape
    with pytest.raises(ValueError, match="too small"):
        _panel_gpu._forced_plan(ws, GCAP * THREADS * 2 + 1, (32, 2))


def test_emulated_leaf_width_f64():
    """The emulation's leaf width for float64: the device plan's tile leaf."""
    sm90 = tuning.SM90_F64
    assert emulated_leaf_width(4096, 1, 132, sm90, F64) == 64
    assert emulated_leaf_width(16384, 1, 132, sm90, F64) == 24
    assert emulated_leaf_width(16384, 4, 132, sm90, F64) == 64     # a larger cap on 4 GPUs
    assert emulated_leaf_width(100000, 1, 132, sm90, F64) == 16
    assert emulated_leaf_width(4096, element=F64) == 64          # the table in force
    panel = EmulatedGpuPanel(element=F64)
    assert panel.element is F64 and panel.table.dtype == "float64"
    with pytest.raises(ValueError, match="pass element="):      # a float32 panel
        panel._enqueue(None, 0, np.zeros((4, 4), np.float32), np.zeros(4, np.int32), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,w", [(1, 1), (5, 3), (40, 40), (300, 17)])
@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_leaf_models_agree_in_both_dtypes(rng, dtype, m, w, kind):
    """Lazy swaps and whole-row swaps agree bit for bit, in the input's dtype."""
    a = (rng.standard_normal((m, w)) if kind == "normal" else _tie_matrix(rng, m, w)).astype(dtype)
    b, c = a.copy(), a.copy()
    pb, pc = np.zeros(min(m, w), np.int32), np.zeros(min(m, w), np.int32)
    assert getf2_rows_host(b, pb, 3) == getf2_host(c, pc, 3)
    assert b.dtype == c.dtype == dtype
    np.testing.assert_array_equal(pb, pc)
    np.testing.assert_array_equal(b, c)


@pytest.mark.parametrize("m", [1, 31, 33, 97, 300])
@pytest.mark.parametrize("w", [1, 7, 32, 33, 70])
@pytest.mark.parametrize("lw", [4, 24, 32])
def test_recursion_matches_dgetrf(rng, m, w, lw):
    """The recursion in float64 (its arithmetic: float64 throughout) against dgetrf."""
    a = rng.standard_normal((m, w))
    b = a.copy()
    piv, info = getrf_panel_host(b, lw)
    assert b.dtype == np.float64
    check_panel64(a, b, piv, info)
    assert backward_error64(a, b, piv) < 1.0          # float64 accuracy, not float32's


@pytest.mark.parametrize("zero_col", [0, 5, 40, 63])
def test_recursion_zero_column_info_f64(rng, zero_col):
    a = rng.standard_normal((90, 64))
    a[:, zero_col] = 0
    b = a.copy()
    piv, info = getrf_panel_host(b, 32, col_base=100)
    assert info == 100 + zero_col + 1
    check_panel64(a, b, piv, info - 100)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaf_model_sfmin(dtype):
    """Multipliers by the reciprocal of the pivot down to the dtype's smallest normal number
    (LAPACK's sfmin), by division below it (where the reciprocal overflows)."""
    tiny = np.finfo(dtype).tiny
    for pv, divides in ((tiny, False), (tiny * 8, False), (tiny / 4, True)):
        col = np.array([pv, pv / 3, -pv / 7, pv / 2], dtype)
        a = col[:, None].copy()
        piv = np.zeros(1, np.int32)
        getf2_host(a, piv)
        expect = col[1:] / col[0] if divides else col[1:] * (dtype(1) / col[0])
        assert piv[0] == 0 and np.all(np.isfinite(a[1:, 0]))
        np.testing.assert_array_equal(a[1:, 0], expect)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaf_models_all_nan_column(rng, dtype):
    """An all-NaN column: piv[j] = j, no update by it (no NaN reaches the other columns), as
    the kernels; both models agree."""
    a = rng.standard_normal((50, 6)).astype(dtype)
    a[:, 2] = np.nan
    out = []
    for model in (getf2_host, getf2_rows_host):
        b, piv = a.copy(), np.zeros(6, np.int32)
        assert model(b, piv) == 0
        assert piv[2] == 2 and np.isnan(b[:, 2]).all()
        assert not np.isnan(np.delete(b, 2, axis=1)).any()
        out.append((b, piv))
    ref, rpiv = a[:, :2].copy(), np.zeros(2, np.int32)
    getf2_host(ref, rpiv)
    np.testing.assert_array_equal(out[0][1][:2], rpiv)
    np.testing.assert_array_equal(out[0][0][:3, :2], ref[:3])     # rows 3: move later
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("shape", [(53, 53), (61, 23), (23, 61), (100, 8), (1, 1)])
@pytest.mark.parametrize("lookahead", [0, 1])
@pytest.mark.parametrize("lw", [2, 32])
def test_driver_with_gpu_panel_model_f64(rng, shape, lookahead, lw):
    """The driver on NumPy with the float64 panel model: dgetrf's pivots, float64 error."""
    a = rng.standard_normal(shape)
    A = a.copy()
    piv, info = getrf(NumpyOps(A, 8), EmulatedGpuPanel(leaf_width=lw, element=F64), 8,
                      lookahead)
    ref_lu, ref_piv, _ = dgetrf_ref(a)
    assert_same_pivots(piv, ref_lu, ref_piv, rtol=1e-12)
    assert info == 0
    assert backward_error64(a, A, piv) <= 2 * backward_error64(a, ref_lu, ref_piv) + 1e-3


# ---------------------------------------------------------------- GPU: the panel alone

def _device_panel(cp, a, **kw):
    from gpulinalg.lu.panel_gpu import getrf_panel_device
    d = cp.asarray(a)
    piv = cp.full(min(a.shape), -1, dtype=np.int32)      # poisoned: every slot must be written
    piv, ws = getrf_panel_device(d, piv, **kw)
    cp.cuda.get_current_stream().synchronize()
    return cp.asnumpy(d), cp.asnumpy(piv), int(ws.info.get()[0])


@pytest.mark.gpu
@pytest.mark.parametrize("w", W_SIZES)
@pytest.mark.parametrize("m", M_SIZES)
def test_panel_kernel_matches_sgetrf(cp, rng, m, w):
    m = _m(m, w)
    if m == 0:
        pytest.skip("empty")
    a = rng.standard_normal((m, w)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a)
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", TILE32)
@pytest.mark.parametrize("m,w", [(5000, 64), (4097, 33), (20000, 16)])
def test_panel_every_leaf_shape(cp, rng, leaf, m, w):
    a = rng.standard_normal((m, w)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a, leaf=leaf)
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
@pytest.mark.parametrize("lw", ROW_WIDTHS32)
@pytest.mark.parametrize("m,w", [(1, 1), (300, 128), (5000, 64), (4097, 128), (33000, 128),
                                 (2000, 100), (129, 128), (128, 128), (50, 128)])
def test_panel_row_leaf(cp, rng, lw, m, w):
    """The one-row-per-thread leaf alone (w <= lw: one launch) and with one recursion level."""
    a = rng.standard_normal((m, w)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a, leaf=("row", lw))
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
def test_panel_stream_has_a_greater_priority(cp):
    """The LU's panel stream really outranks the default (its leaf starts beside an SGEMM)."""
    from gpulinalg.lu.steps import _priority_stream
    assert _priority_stream(cp).priority < cp.cuda.Stream(non_blocking=True).priority


@pytest.mark.gpu
def test_panel_plan_on_several_gpus(cp):
    """Three or more GPUs take the fastest row leaf (row_block_cap_multi), two cap its blocks
    at row_block_cap_2gpu, one alone at row_block_cap; lu_factor(devices=...) builds its
    panels that way."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    from gpulinalg.lu.plan import make_panel
    ws = PanelWorkspace()
    m = THREADS * min(GMAX_ROW, ws.sms)
    assert PanelWorkspace(devices=4).plan(m) == ("row", ROW_LW, 1, m // THREADS)
    for devices in (1, 2):
        cap = row_block_cap(devices, ws.tuning)
        assert PanelWorkspace(devices).plan(m)[3] <= max(cap, m // (THREADS * 4))
    assert make_panel("gpu", devices=2).devices == 2 and make_panel("gpu").devices == 1


@pytest.mark.gpu
def test_panel_row_leaf_largest_grid(cp, rng):
    """As many blocks as the device holds at once (132 on an H100): the widest flag barrier."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    ws = PanelWorkspace(table=_table(row_block_cap=GMAX_ROW))
    m = THREADS * min(GMAX_ROW, ws.sms)
    assert ws.plan(m) == ("row", ROW_LW, 1, m // THREADS)
    a = rng.standard_normal((m, 128)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a, ws=ws)
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
@pytest.mark.parametrize("cap,shape", [(132, (128, 1)), (20, (64, 2)), (10, (32, 4))])
@pytest.mark.parametrize("m,w", [(9000, 256), (9001, 100), (8500, 3)])
def test_panel_row_leaf_rows_per_thread(cp, rng, cap, shape, m, w):
    """The plan under a block cap takes more rows per thread (interleaved over the blocks);
    ties across blocks and rows of one thread still go to the first row."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    with tuning.override(_table(row_block_cap=cap)):      # read when the workspace is made
        ws = PanelWorkspace()
    assert ws.plan(m)[1:3] == shape
    a = rng.standard_normal((m, w)).astype(np.float32)
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[[300, 300 + THREADS * 9, m - 1], 0] = [2.0, -2.0, 2.0]   # ties: the first row wins
    # (with (32, 4), 9 blocks: rows 300 and 300 + 9 * 256 are the same thread's)
    lu, piv, info = _device_panel(cp, a, ws=ws)
    assert piv[0] == 300
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
def test_panel_row_leaf_taller_than_one_row_per_thread(cp, rng):
    """Above 256 rows per co-resident block two rows per thread (without the block cap)."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    ws = PanelWorkspace(table=_table(row_block_cap=GMAX_ROW))
    m = THREADS * min(GMAX_ROW, ws.sms) + 1
    assert ws.plan(m)[:3] == ("row", 64, 2)
    a = rng.standard_normal((m, 128)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a, ws=ws)
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
def test_panel_row_leaf_ties_and_reused_workspace(cp, rng):
    """Ties across blocks take the first row; one workspace across launches of different
    grids (stale records of earlier launches must never pass as current)."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    ws = PanelWorkspace()
    for m, w in [(5000, 3), (700, 128), (9000, 128), (257, 64), (9000, 256), (300, 1)]:
        a = rng.standard_normal((m, w)).astype(np.float32)
        a[:, 0] = np.clip(a[:, 0], -1, 1)
        a[[17, m // 2, m - 1], 0] = [-2.0, 2.0, 2.0]
        if w > 2:
            a[:, w // 2] = 0                            # info = w // 2 + 1, piv = w // 2
        ws.info.fill(0)                                 # info is sticky (first zero column)
        lu, piv, info = _device_panel(cp, a, ws=ws, leaf=("row", 128))
        assert piv[0] == 17
        check_panel(a, lu, piv, info)
    ws.epoch = _panel_gpu.TAG_LIMIT - 3                   # the reset before uint32 wraps
    a = rng.standard_normal((3000, 128)).astype(np.float32)
    ws.info.fill(0)
    lu, piv, info = _device_panel(cp, a, ws=ws, leaf=("row", 128))
    check_panel(a, lu, piv, info)
    assert ws.epoch == 129


@pytest.mark.gpu
@pytest.mark.parametrize("lw", ROW_WIDTHS32)
@pytest.mark.parametrize("m,w", [(8192, 128), (5000, 97), (33, 128), (300, 40), (33000, 64)])
def test_row_leaf_zero_and_nan_columns(cp, rng, lw, m, w):
    """The row leaf (pipelined: the update of pivot j-1 finishes after the search of column j)
    with a zero column (skipped update, info) and an all-NaN column (no candidate: piv[j] = j)
    against the lazy-swap host model: the same pivots, info and NaN pattern.  33000 rows: more
    than 32 blocks (several record slots polled per lane)."""
    a = rng.standard_normal((m, w)).astype(np.float32)
    a[:, w // 3] = 0
    a[:, w // 2] = np.nan
    lu, piv, info = _device_panel(cp, a, leaf=("row", lw))
    if w <= lw:   # one leaf: the host model's pivots (the recursion's are checked elsewhere)
        h = a.copy()
        hp = np.zeros(min(m, w), np.int32)
        assert getf2_rows_host(h, hp) == info
        np.testing.assert_array_equal(piv, hp)
        np.testing.assert_array_equal(np.isnan(lu), np.isnan(h))
    assert info == (w // 3 + 1 if w // 3 < m else 0)
    if w // 2 < m:
        assert piv[w // 2] == w // 2


@pytest.mark.gpu
@pytest.mark.parametrize("m,w", [(5000, 32), (3000, 20), (9000, 32), (33, 32), (40000, 32)])
def test_row_leaf_bitwise_equals_tile_leaf(cp, rng, m, w):
    """row<32> (deferred rank-1 tail, pivot rows completed by their readers) and the tile
    leaf <32, 4> (eager update) do the same operations per element: equal bit for bit."""
    a = rng.standard_normal((m, w)).astype(np.float32)
    a[:, w // 2] = 0                                    # a skipped update in the middle
    lu, piv, info = _device_panel(cp, a, leaf=("row", 32))
    ref_lu, ref_piv, ref_info = _device_panel(cp, a, leaf=(32, 4))
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_array_equal(lu, ref_lu)
    assert info == ref_info == w // 2 + 1


@pytest.mark.gpu
@pytest.mark.parametrize("lw", [lw for lw, rpt in ROW32
                                if rpt <= tuning.SM90.row_early_rpt])
@pytest.mark.parametrize("m,w", [(8192, 128), (5000, 97), (33, 128), (300, 3), (33000, 128)])
def test_row_leaf_early_bitwise_equals_late(cp, rng, lw, m, w):
    """getrf_leaf_row publishing the block's candidate row before the rank-1 update (EARLY:
    the communication warp applies pivot j-1's fmaf) and after it: equal bit for bit, ties, a
    zero column and an all-NaN column included; 33000 rows: more than 32 blocks."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    a = rng.standard_normal((m, w)).astype(np.float32)
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[[m // 3, m // 2, m - 1], 0] = [2.0, -2.0, 2.0]
    if w > 2:
        a[:, w // 3] = 0
        a[:, w // 2] = np.nan
    out = []
    for early_rpt in (0, dict(ROW32)[lw]):         # late, then EARLY for this shape
        ws = PanelWorkspace(table=_table(row_early_rpt=early_rpt))
        out.append(_device_panel(cp, a, ws=ws, leaf=("row", lw)))
    (lu0, piv0, info0), (lu1, piv1, info1) = out
    assert piv1[0] == m // 3 and info0 == info1
    np.testing.assert_array_equal(piv0, piv1)
    np.testing.assert_array_equal(lu0, lu1)


@pytest.mark.gpu
@pytest.mark.parametrize("col0", [0, 1, 64])
def test_panel_row_leaf_alignment(cp, rng, col0):
    """Aligned rows (float4 loads/stores) and unaligned views (scalar path): same results,
    nothing outside the view written."""
    big = rng.standard_normal((3000, 301 if col0 == 1 else 300)).astype(np.float32)
    d = cp.asarray(big)
    from gpulinalg.lu.panel_gpu import getrf_panel_device
    piv, ws = getrf_panel_device(d[40:, col0:col0 + 128], leaf=("row", 128))
    out = cp.asnumpy(d)
    np.testing.assert_array_equal(out[:40], big[:40])
    np.testing.assert_array_equal(out[:, :col0], big[:, :col0])
    np.testing.assert_array_equal(out[:, col0 + 128:], big[:, col0 + 128:])
    check_panel(big[40:, col0:col0 + 128], out[40:, col0:col0 + 128], cp.asnumpy(piv),
                int(ws.info.get()[0]))


@pytest.mark.gpu
def test_panel_most_blocks(cp, rng):
    """GCAP blocks of the widest leaf: the barrier with the largest grid."""
    m = GCAP * THREADS * 4
    a = rng.standard_normal((m, 40)).astype(np.float32)
    lu, piv, info = _device_panel(cp, a)
    check_panel(a, lu, piv, info)


@pytest.mark.gpu
def test_panel_strided_view(cp, rng):
    """A column strip of a wider row-major matrix (lda > w), as the driver passes it."""
    big = rng.standard_normal((3000, 300)).astype(np.float32)
    d = cp.asarray(big)
    from gpulinalg.lu.panel_gpu import getrf_panel_device
    piv, ws = getrf_panel_device(d[100:, 37:165])
    out = cp.asnumpy(d)
    np.testing.assert_array_equal(out[:, :37], big[:, :37])        # outside: untouched
    np.testing.assert_array_equal(out[:100], big[:100])
    np.testing.assert_array_equal(out[:, 165:], big[:, 165:])
    check_panel(big[100:, 37:165], out[100:, 37:165], cp.asnumpy(piv), int(ws.info.get()[0]))


@pytest.mark.gpu
@pytest.mark.parametrize("zero_col", [0, 13, 32, 100, 127])
def test_panel_zero_column_info(cp, rng, zero_col):
    a = rng.standard_normal((2000, 128)).astype(np.float32)
    a[:, zero_col] = 0
    lu, piv, info = _device_panel(cp, a, col_base=0)
    assert info == zero_col + 1
    check_panel(a, lu, piv, info)
    z = np.zeros((700, 64), np.float32)
    lu, piv, info = _device_panel(cp, z, col_base=1000)
    assert info == 1001 and list(piv) == list(range(64)) and not lu.any()


@pytest.mark.gpu
def test_panel_ties_take_first_row(cp, rng):
    a = rng.standard_normal((5000, 3)).astype(np.float32)
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[[17, 2100, 4999], 0] = [-2.0, 2.0, 2.0]     # a tie across blocks (1024 rows each)
    lu, piv, info = _device_panel(cp, a)
    assert piv[0] == 17
    check_panel(a, lu, piv, info)


# ---------------------------------------------------------------- GPU: the float64 panel alone

def _device_panel64(cp, a, ws=None, poison=True, **kw):
    """_device_panel for float64 with its workspace's scratch poisoned first: the tile leaf's
    records NaN (a stale record must never be taken for the pivot row), the row leaf's
    records and rows all ones (tag 2^32 - 1, which no column ever has; value bits NaN).
    Returns (lu, piv, info, ws)."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace, getrf_panel_device
    ws = PanelWorkspace(element=F64) if ws is None else ws
    if poison:
        ws.rec.fill(np.nan)
        ws.keys.fill(np.uint64(2**64 - 1))
        ws.rows.fill(np.uint64(2**64 - 1))
    d = cp.asarray(a)
    piv = cp.full(min(a.shape), -1, dtype=np.int32)      # poisoned: every slot must be written
    piv, ws = getrf_panel_device(d, piv, ws, **kw)
    cp.cuda.get_current_stream().synchronize()
    return cp.asnumpy(d), cp.asnumpy(piv), int(ws.info.get()[0]), ws


def _model64(a, lw, col_base=0):
    """The host model of the device recursion with leaves of width lw, in float64."""
    h = np.array(a, dtype=np.float64)
    piv, info = getrf_panel_host(h, lw, col_base)
    return h, piv, info


def check_against_model64(a, lu, piv, info, lw, col_base=0):
    """The device's float64 panel: the host model's pivots and info exactly, its factors to
    rounding (the kernels fuse multiply-adds), and dgetrf's accuracy (check_panel64)."""
    h, hpiv, hinfo = _model64(a, lw, col_base)
    np.testing.assert_array_equal(piv, hpiv)
    assert info == hinfo
    scale = max(float(np.abs(h).max()), 1.0)
    assert float(np.abs(lu - h).max()) <= 1e-10 * scale
    check_panel64(a, lu, piv, info - col_base if info else 0)


M64 = (1, 31, 32, 33, 509, 4099, 33001)
ROW_WIDTHS64 = ROW_WIDTHS.get(F64, ())
W64 = (1, 7, 31, 32, 33, 64, 97, 256)


@pytest.mark.gpu
@pytest.mark.parametrize("w", W64)
@pytest.mark.parametrize("m", M64)
def test_panel_f64_matches_dgetrf(cp, rng, m, w):
    """The default plan (row or tile leaves, their recursion with DGEMM updates) in float64."""
    a = rng.standard_normal((m, w))
    lu, piv, info, ws = _device_panel64(cp, a)
    check_against_model64(a, lu, piv, info, ws.plan(m)[1])


@pytest.mark.gpu
@pytest.mark.parametrize("m,w,leaf", [(32768, 256, None), (100000, 64, None),
                                      (GCAP * THREADS * 2, 40, (32, 2)), (32768, 256, (32, 2))])
def test_panel_f64_tall(cp, rng, m, w, leaf):
    """Tall float64 panels: the default plan (32768 rows: the row leaf over its block cap;
    100000: the tile leaf, 16-wide); GCAP blocks of the widest tile leaf (the barrier with
    the largest grid)."""
    a = rng.standard_normal((m, w))
    lu, piv, info, ws = _device_panel64(cp, a, leaf=leaf)
    if leaf is None and m == 100000:
        assert ws.plan(m)[:3] == ("tile", 16, 4)
    check_against_model64(a, lu, piv, info, ws.plan(m)[1] if leaf is None else leaf[0])


@pytest.mark.gpu
@pytest.mark.parametrize("lw", ROW_WIDTHS64)
def test_panel_f64_row_leaf_largest_grid(cp, rng, lw):
    """As many row-leaf blocks as the device holds at once (132 on an H100): the widest flag
    barrier, more than 32 record slots (several polled per lane), 70 columns (recursion)."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    ws = PanelWorkspace(element=F64)
    rpt = dict(ROW_SHAPES[F64])[lw]
    m = THREADS * rpt * min(GMAX_ROW, ws.sms)
    a = rng.standard_normal((m, 70))
    lu, piv, info, _ = _device_panel64(cp, a, ws=ws, leaf=("row", lw))
    assert ws.plan(m, lw) == ("row", lw, rpt, m // (THREADS * rpt))
    check_against_model64(a, lu, piv, info, lw)


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", LEAF_SHAPES[F64] + tuple(("row", lw) for lw in ROW_WIDTHS64))
@pytest.mark.parametrize("m,w", [(5000, 64), (4097, 33), (20000, 16), (257, 8), (300, 128)])
def test_panel_f64_every_leaf(cp, rng, leaf, m, w):
    """Every float64 leaf forced, alone and in the recursion: the host model's pivots."""
    a = rng.standard_normal((m, w))
    lu, piv, info, _ = _device_panel64(cp, a, leaf=leaf)
    check_against_model64(a, lu, piv, info, leaf[1] if leaf[0] == "row" else leaf[0])


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", LEAF_SHAPES[F64] + tuple(("row", lw) for lw in ROW_WIDTHS64))
@pytest.mark.parametrize("m,w", [(8192, 32), (5000, 17), (33, 32), (300, 3), (33000, 64)])
def test_panel_f64_zero_and_nan_columns(cp, rng, leaf, m, w):
    """One leaf launch with a zero column (info, skipped update) and an all-NaN column (no
    candidate: piv[j] = j, no update): the host model's pivots, info and NaN pattern.  33000
    rows: more than 32 row-leaf blocks (several record slots polled per lane)."""
    lw = leaf[1] if leaf[0] == "row" else leaf[0]
    w = min(w, lw)
    if leaf[0] != "row" and -(-m // (THREADS * leaf[1])) > GCAP:
        pytest.skip("too many rows for this tile leaf")
    a = rng.standard_normal((m, w))
    a[:, w // 3] = 0
    a[:, w // 2] = np.nan
    lu, piv, info, _ = _device_panel64(cp, a, leaf=leaf)
    h, hpiv = a.copy(), np.zeros(min(m, w), np.int32)
    assert getf2_host(h, hpiv) == info
    np.testing.assert_array_equal(piv, hpiv)
    np.testing.assert_array_equal(np.isnan(lu), np.isnan(h))
    assert info == (w // 3 + 1 if w // 3 != w // 2 else 0)    # (the NaN column overrides)
    assert piv[w // 2] == w // 2


@pytest.mark.gpu
@pytest.mark.parametrize("m,w", [(5000, 24), (3000, 20), (9000, 24), (33, 24), (30000, 17)])
def test_f64_row_leaves_bitwise_equal_tile_leaf(cp, rng, m, w):
    """One launch of each float64 leaf on the same <= 24 columns: the same operations per
    element (row: deferred rank-1 tail, EARLY publication; tile: eager update), so equal bit
    for bit, a skipped update included."""
    a = rng.standard_normal((m, w))
    a[:, w // 2] = 0
    ref = _device_panel64(cp, a, leaf=(32, 2))[:3]
    for lw in ROW_WIDTHS[F64]:
        out = _device_panel64(cp, a, leaf=("row", lw))[:3]
        np.testing.assert_array_equal(out[1], ref[1])
        np.testing.assert_array_equal(out[0], ref[0])
        assert out[2] == ref[2] == w // 2 + 1


@pytest.mark.gpu
@pytest.mark.parametrize("lw", ROW_WIDTHS64)
@pytest.mark.parametrize("m,w", [(8192, 64), (5000, 57), (33, 64), (300, 3), (33000, 64)])
def test_f64_row_leaf_early_bitwise_equals_late(cp, rng, lw, m, w):
    """The float64 row leaf publishing early (the communication warp's fma) and late: equal
    bit for bit, with ties, a zero column and an all-NaN column."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace
    a = rng.standard_normal((m, w))
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[[m // 3, m // 2, m - 1], 0] = [2.0, -2.0, 2.0]
    if w > 2:
        a[:, w // 3] = 0
        a[:, w // 2] = np.nan
    table = tuning.current(element=F64)
    out = []
    for early_rpt in (0, dict(ROW_SHAPES[F64])[lw]):    # late, then EARLY for this shape
        ws = PanelWorkspace(table=dataclasses.replace(table, row_early_rpt=early_rpt),
                            element=F64)
        out.append(_device_panel64(cp, a, ws=ws, leaf=("row", lw))[:3])
    (lu0, piv0, info0), (lu1, piv1, info1) = out
    assert piv1[0] == m // 3 and info0 == info1
    np.testing.assert_array_equal(piv0, piv1)
    np.testing.assert_array_equal(lu0, lu1)


@pytest.mark.gpu
@pytest.mark.parametrize("zero_col", [0, 13, 32, 100, 127])
def test_panel_f64_zero_column_info(cp, rng, zero_col):
    """Exact zero pivots through the recursion: info (1-based, + col_base), the model's
    pivots; a zero panel: info = col_base + 1, no pivoting, zero factors."""
    a = rng.standard_normal((2000, 128))
    a[:, zero_col] = 0
    lu, piv, info, ws = _device_panel64(cp, a, col_base=500)
    assert info == 500 + zero_col + 1
    check_against_model64(a, lu, piv, info, ws.plan(2000)[1], col_base=500)
    for leaf in (None, (32, 2)):
        lu, piv, info, _ = _device_panel64(cp, np.zeros((700, 64)), col_base=1000, leaf=leaf)
        assert info == 1001 and list(piv) == list(range(64)) and not lu.any()


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", [(32, 2), ("row", 64), ("row", 24)])
def test_panel_f64_sfmin(cp, rng, leaf):
    """Multipliers by the reciprocal down to DBL_MIN (LAPACK's sfmin), by division below it:
    a subnormal pivot (whose reciprocal overflows) still gives finite multipliers, bit for
    bit the host model's (column 0: no multiply-add before it)."""
    for pv_scale in (1e-300, 1e-310):
        a = rng.standard_normal((3000, 8))
        a[:, 0] = np.clip(a[:, 0], -1, 1) * pv_scale
        a[1234, 0] = 2 * pv_scale
        lu, piv, info, _ = _device_panel64(cp, a, leaf=leaf)
        h, hpiv = a.copy(), np.zeros(8, np.int32)
        getf2_host(h, hpiv)
        assert piv[0] == hpiv[0] == 1234 and info == 0
        assert np.isfinite(lu).all()
        np.testing.assert_array_equal(lu[:, 0], h[:, 0])
        np.testing.assert_array_equal(piv, hpiv)


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", [(32, 2), ("row", 64), ("row", 24)])
def test_panel_f64_ties_take_first_row(cp, rng, leaf):
    """Ties go to the first row: across lanes (rows 300, 301), across blocks and across a
    thread's rows (the blocks hold 512 rows with (32, 2), 256 with the row leaves)."""
    a = rng.standard_normal((5000, 3))
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[[300, 301, 556, 812, 2100, 4999], 0] = [2.0, -2.0, 2.0, -2.0, -2.0, 2.0]
    lu, piv, info, _ = _device_panel64(cp, a, leaf=leaf)
    assert piv[0] == 300
    check_against_model64(a, lu, piv, info, leaf[1] if leaf[0] == "row" else leaf[0])


@pytest.mark.gpu
@pytest.mark.parametrize("rows,expect", [((40, 41, 5000, 7000), 5000), ((40, 44, 5000), 44)])
def test_panel_f64_keys_equal_in_high_half(cp, rng, rows, expect):
    """Candidates whose |v| agree in the high 32 bits and differ in the low ones (the row
    leaf's 64-bit key is reduced in two halves): the larger wins across blocks (5000), and in
    a warp (44, whose tie with 5000 goes to the first row)."""
    big = 3.0
    nxt = np.nextafter(big, 4.0)                  # the same high half, low half + 1
    vals = {(40, 41, 5000, 7000): [big, -big, -nxt, big], (40, 44, 5000): [big, -nxt, nxt]}
    a = rng.standard_normal((9000, 4))
    a[:, 0] = np.clip(a[:, 0], -1, 1)
    a[list(rows), 0] = vals[rows]
    for leaf in [(32, 2), ("row", 64), ("row", 24)]:
        lu, piv, info, _ = _device_panel64(cp, a, leaf=leaf)
        assert piv[0] == expect
        check_against_model64(a, lu, piv, info, leaf[1] if leaf[0] == "row" else leaf[0])


@pytest.mark.gpu
@pytest.mark.parametrize("leaf", [None, (32, 2)])
def test_panel_f64_strided_view(cp, rng, leaf):
    """A column strip of a wider row-major float64 matrix whose other elements are NaN: none
    is read into the factors or written.  Odd column offset: unaligned rows (the row leaf's
    element-wise path)."""
    for col0 in (37, 38):
        big = np.full((3000, 300), np.nan)
        big[100:, col0:col0 + 128] = rng.standard_normal((2900, 128))
        d = cp.asarray(big)
        from gpulinalg.lu.panel_gpu import PanelWorkspace, getrf_panel_device
        ws = PanelWorkspace(element=F64)
        ws.rec.fill(np.nan)
        piv, ws = getrf_panel_device(d[100:, col0:col0 + 128], ws=ws, leaf=leaf)
        out = cp.asnumpy(d)
        mask = np.ones(big.shape, bool)
        mask[100:, col0:col0 + 128] = False
        assert np.isnan(out[mask]).all()
        check_against_model64(big[100:, col0:col0 + 128], out[100:, col0:col0 + 128],
                              cp.asnumpy(piv), int(ws.info.get()[0]),
                              ws.plan(2900)[1] if leaf is None else 32)


@pytest.mark.gpu
def test_panel_f64_reused_workspace(cp, rng):
    """One float64 workspace across launches of different grids and leaves (the barrier
    counter's base and the column tags carried on the host; stale records must never pass
    as current), the tag reset before uint32 wraps; a panel of the other element type with
    it is an error, as are a float64 tile shape of float32 and a float16 panel."""
    from gpulinalg.lu.panel_gpu import PanelWorkspace, getrf_panel_device
    ws = PanelWorkspace(element=F64)
    assert ws.element is F64 and ws.rec.dtype == np.float64
    assert ws.tuning.dtype == "float64"
    cases = [(5000, 3, None), (700, 128, ("row", 64)), (9000, 64, (16, 4)), (257, 33, None),
             (60000, 40, None), (300, 1, ("row", 24)), (9000, 128, ("row", 24))]
    for m, w, leaf in cases:
        a = rng.standard_normal((m, w))
        a[:, 0] = np.clip(a[:, 0], -1, 1)
        a[[17, m // 2, m - 1], 0] = [-2.0, 2.0, 2.0]
        ws.info.fill(0)                                 # info is sticky (first zero column)
        lu, piv, info, _ = _device_panel64(cp, a, ws=ws, poison=False, leaf=leaf)
        assert piv[0] == 17
        lw = ws.plan(m)[1] if leaf is None else leaf[-1] if leaf[0] == "row" else leaf[0]
        check_against_model64(a, lu, piv, info, lw)
    ws.epoch = _panel_gpu.TAG_LIMIT - 3                   # the reset before uint32 wraps
    a = rng.standard_normal((3000, 64))
    ws.info.fill(0)
    lu, piv, info, _ = _device_panel64(cp, a, ws=ws, poison=False, leaf=("row", 64))
    check_against_model64(a, lu, piv, info, 64)
    assert ws.epoch == 65
    with pytest.raises(ValueError, match="workspace of float64"):
        getrf_panel_device(cp.zeros((10, 4), np.float32), ws=ws)
    with pytest.raises(ValueError, match="workspace of float32"):
        getrf_panel_device(cp.zeros((10, 4)), ws=PanelWorkspace())
    with pytest.raises(ValueError, match="row leaf width"):
        getrf_panel_device(cp.zeros((10, 4)), leaf=("row", 128))
    with pytest.raises(ValueError, match="is not one of"):
        getrf_panel_device(cp.zeros((10, 4)), leaf=(32, 4))
    with pytest.raises(ValueError, match="float32 or float64"):
        getrf_panel_device(cp.zeros((10, 4), np.float16))
    with pytest.raises(ValueError, match="float32 or float64"):
        getrf_panel_device(cp.zeros((4, 10)).T)          # not row-major


@pytest.mark.gpu
def test_gpu_panel_f64_workspace(cp):
    """GpuPanel(element=F64) makes a float64 workspace under the float64 table."""
    panel = GpuPanel(element=F64)
    ws = panel.workspace()
    assert ws.element is F64 and ws.tuning.dtype == "float64" and panel.workspace() is ws
    assert ws.plan(4096)[:3] == ("row", 64, 1)


# ---------------------------------------------------------------- GPU: lu_factor(panel="gpu")

def _gpu_lu_check(cp, a, same_pivots=True, **kw):
    lu, piv = gpulinalg.lu_factor(cp.asarray(a), panel="gpu", **kw)
    assert_matches_lapack(a, cp.asnumpy(lu), cp.asnumpy(piv), same_pivots)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (129, 129), (1000, 1000), (2049, 2049),
                                   (3000, 500), (500, 3000), (1500, 1499), (257, 1000)])
@pytest.mark.parametrize("lookahead", [0, 1])
def test_lu_factor_gpu_panel(cp, rng, shape, lookahead):
    a = rng.standard_normal(shape).astype(np.float32)
    _gpu_lu_check(cp, a, lookahead=lookahead)


@pytest.mark.gpu
@pytest.mark.parametrize("nb", [1, 37, 64, 256])
def test_lu_factor_gpu_panel_block_sizes(cp, rng, nb):
    _gpu_lu_check(cp, rng.standard_normal((700, 700)).astype(np.float32), block_size=nb)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "3xtf32"])
@pytest.mark.parametrize("shape,nb", [((4700, 4700), 512), ((5200, 1500), 384),
                                      ((1500, 5200), 1024)])
def test_lu_factor_gpu_panel_wide_blocks(cp, rng, shape, nb, precision):
    # panels of more than 4096 rows (row leaves, two recursion levels) with the updates
    # of the wide block sizes that tensor-core updates take at large n
    _gpu_lu_check(cp, rng.standard_normal(shape).astype(np.float32), block_size=nb,
                  precision=precision)


@pytest.mark.gpu
def test_lu_factor_gpu_panel_hard_matrices(cp, rng):
    # cond 1e6: near-ties that the different (but equally accurate) summation order of our
    # updates may break the other way than LAPACK's; the backward error is what must match.
    _gpu_lu_check(cp, with_cond(rng, 1024, 1e6), same_pivots=False)
    w = wilkinson(100)
    lu, piv = gpulinalg.lu_factor(cp.asarray(w), panel="gpu", block_size=32)
    assert abs(float(lu[-1, -1])) == 2.0 ** 99


@pytest.mark.gpu
def test_lu_factor_gpu_panel_singular(cp, rng):
    a = rng.standard_normal((600, 600)).astype(np.float32)
    a[:, 300] = 0
    with pytest.warns(sl.LinAlgWarning, match=r"^Diagonal number 301 is exactly zero"):
        gpulinalg.lu_factor(cp.asarray(a), panel="gpu", block_size=128)
    a = np.ones((300, 300), np.float32)
    with pytest.warns(sl.LinAlgWarning, match=r"^Diagonal number 2 is exactly zero"):
        gpulinalg.lu_factor(a, panel="gpu")


@pytest.mark.gpu
@pytest.mark.slow
def test_lu_factor_gpu_panel_large(cp, rng):
    a = rng.standard_normal((8192, 8192)).astype(np.float32)
    _gpu_lu_check(cp, a)
