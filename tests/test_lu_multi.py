"""Multi-GPU LU: the column-cyclic distribution and the driver on virtual devices (CPU); the
real thing on several GPUs (multi_gpu)."""

import dataclasses
import gc

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import assert_matches_lapack, backward_error, wilkinson, with_cond
import gpulinalg
from gpulinalg import tuning
from gpulinalg.lu.distribution import ColumnCyclic, gather, panel_schedule, scatter
from gpulinalg.lu.driver import INV_THRESHOLD
from gpulinalg.testing import lu as testing_lu


def _tuned(**fields):
    """The tuning table in force with `fields` changed (for tuning.override or table=)."""
    return dataclasses.replace(tuning.current(), **fields)


def make_panel(name, devices):
    """The panel object of one virtual device of `devices`: the host panel on the driver's
    thread (as several GPUs run it), or the GPU panel's recursion on the host."""
    if name == "cpu":
        from gpulinalg.lu.panel_cpu import CpuPanel
        return CpuPanel(threaded=False)
    from gpulinalg.testing.panel_models import EmulatedGpuPanel
    return EmulatedGpuPanel(devices=devices)

# ---------------------------------------------------------------- CPU: the distribution

DISTS = [(0, 4, 2), (1, 4, 3), (10, 4, 2), (37, 4, 3), (64, 8, 4), (65, 8, 4), (100, 7, 5),
         (9, 16, 2), (33, 1, 3), (128, 128, 2)]


@pytest.mark.parametrize("n,nb,p", DISTS)
def test_columns_partition(n, nb, p):
    dist = ColumnCyclic(n, nb, p)
    cols = [dist.global_columns(d) for d in range(p)]
    assert sorted(np.concatenate(cols).tolist()) == list(range(n))
    for d in range(p):
        assert dist.local_width(d) == cols[d].size
        assert all(np.diff(cols[d]) > 0)                       # global order kept
        assert all(dist.owner(int(c)) == d for c in cols[d])
        assert all((c // nb) % p == d for c in cols[d])       # block-cyclic


@pytest.mark.parametrize("n,nb,p", DISTS)
def test_local_ranges(rng, n, nb, p):
    dist = ColumnCyclic(n, nb, p)
    ranges = [(0, n), (n, n), (0, 0)] + [tuple(sorted(rng.integers(0, n + 1, 2)))
                                         for _ in range(20)]
    for d in range(p):
        cols = dist.global_columns(d)
        for c0, c1 in ranges:
            l0, l1 = dist.local_range(d, c0, c1)
            assert cols[l0:l1].tolist() == [c for c in cols if c0 <= c < c1]
            assert dist.bound(d).local_range(c0, c1) == (l0, l1)
    # asked again (the map caches its answers): the same as a fresh map's, in another order
    fresh = ColumnCyclic(n, nb, p)
    for d in reversed(range(p)):
        for c0, c1 in reversed(ranges):
            assert dist.local_range(d, c0, c1) == fresh.local_range(d, c0, c1)


def test_scatter_gather_roundtrip(rng):
    a = rng.standard_normal((13, 37)).astype(np.float32)
    dist = ColumnCyclic(37, 4, 3)
    shares = scatter(a, dist)
    assert [x.shape for x in shares] == [(13, dist.local_width(d)) for d in range(3)]
    assert all(x.flags.c_contiguous for x in shares)
    out = gather(shares, dist, np.zeros_like(a))
    assert np.array_equal(out, a)


def test_bad_distribution():
    with pytest.raises(ValueError):
        ColumnCyclic(10, 0, 2)
    with pytest.raises(ValueError):
        ColumnCyclic(10, 4, 0)


@pytest.mark.parametrize("m,n,nb,p", [(40, 40, 4, 2), (40, 40, 4, 3), (23, 50, 5, 3),
                                      (50, 23, 5, 4), (8, 8, 8, 2), (70, 70, 8, 2)])
@pytest.mark.parametrize("lookahead", [0, 1])
@pytest.mark.parametrize("tail", [False, True])
def test_schedule(m, n, nb, p, lookahead, tail):
    """One factor by the owner, one receive on each other device, each device's trailing
    columns updated exactly once per step, the next panel's columns first (look-ahead) --
    also with the narrower tail, where consecutive panels may share an owner."""
    from gpulinalg.lu.driver import panel_blocks
    k = min(m, n)
    dist = ColumnCyclic(n, nb, p)
    blocks = panel_blocks(k, nb, tails=((nb // 2, 24),) if tail else ())
    steps = list(panel_schedule(k, nb, dist, lookahead, blocks))
    assert len(steps) == len(blocks)
    for s, ops in enumerate(steps):
        j0, j1 = blocks[s]
        owner = dist.owner(j0)
        assert dist.owner(j1 - 1) == owner   # a panel lies inside one distribution block
        assert [(d, op) for d, op, _ in ops[:p]] == (
            [(owner, "factor")] + [((owner + i) % p, "receive") for i in range(1, p)])
        nxt_owner = dist.owner(j1) if j1 < k else None
        for d in range(p):
            mine = [(op, rng_) for dd, op, rng_ in ops[p:] if dd == d]
            names = [op for op, _ in mine]
            updates = [r for op, r in mine if op.startswith("update")]
            covered = sorted(c for c0, c1 in updates for c in range(c0, c1) if dist.owner(c) == d)
            assert covered == [c for c in dist.global_columns(d) if c >= j1]
            if lookahead and d == nxt_owner:
                assert names.index("update_next") == names.index("swap_right") + 1
                assert dict(mine)["update_next"] == (j1, blocks[s + 1][1])
            else:
                assert "update_next" not in names
            if "swap_left" in names:
                assert names[-1] == "swap_left" and dict(mine)["swap_left"] == (0, j0)


@pytest.mark.parametrize("k,nb,tails,widths", [
    (40, 8, (), [8] * 5),
    (40, 8, ((4, 24),), [8, 8] + [4] * 6),          # switches where <= 24 columns are left
    (37, 8, ((4, 20),), [8] * 3 + [4] * 3 + [1]),   # only at a whole block (16 left: not 20)
    (64, 8, ((4, 32), (2, 8)), [8] * 4 + [4] * 6 + [2] * 4),
    (5, 8, ((4, 24),), [4, 1]),
    (20, 6, ((4, 24),), [6] * 3 + [2]),             # 4 does not divide 6: no tail
    (0, 8, ((4, 24),), [])])
def test_panel_blocks_tails(k, nb, tails, widths):
    from gpulinalg.lu.driver import panel_blocks
    blocks = panel_blocks(k, nb, tails=tails)
    assert [j1 - j0 for j0, j1 in blocks] == widths
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    assert not blocks or (blocks[0][0], blocks[-1][1]) == (0, k)


@pytest.mark.parametrize("table", [tuning.SM90, dataclasses.replace(tuning.SM90,
                                                                     tail_columns=4096,
                                                                     tail_min_nb=256)])
def test_multi_panel_blocks(table):
    """The distributed LU's panels: nb / 2 wide over the last tail_columns columns, for
    nb >= tail_min_nb only (two GPUs take nb = 512 above 16384)."""
    from gpulinalg.lu.multi import multi_panel_blocks
    tail = table.tail_columns
    for nb in (256, 512):
        widths = [j1 - j0 for j0, j1 in multi_panel_blocks(32768, nb, table)]
        if nb >= table.tail_min_nb:
            assert widths == [nb] * ((32768 - tail) // nb) + [nb // 2] * (tail // (nb // 2))
        else:
            assert set(widths) == {nb}


# ---------------------------------------------------------------- CPU: the driver on virtual devices

def factor_virtual(a, p, nb, panel="cpu", lookahead=1, **kw):
    return testing_lu.lu_factor(a, panel=panel, block_size=nb, lookahead=lookahead,
                                devices=p, emulate=True, **kw)


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (37, 37), (64, 64), (61, 23), (23, 61),
                                   (100, 8), (8, 100), (53, 53)])
@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("panel", ["cpu", "gpu"])
def test_virtual_devices_match_lapack(rng, shape, p, panel):
    a = rng.standard_normal(shape).astype(np.float32)
    lu, piv = factor_virtual(a, p, 4, panel)
    assert_matches_lapack(a, lu, piv)
    lu1, piv1 = testing_lu.lu_factor(a, panel=panel, block_size=4, emulate=True)
    assert np.array_equal(piv, piv1)


@pytest.mark.parametrize("lookahead", [0, 1])
@pytest.mark.parametrize("threshold", [0.0, np.inf])
def test_virtual_devices_paths(rng, lookahead, threshold):
    """Both U12 paths (triangular solve; L11^{-1} copied with the panel) and both orders."""
    a = rng.standard_normal((67, 67)).astype(np.float32)
    lu, piv = factor_virtual(a, 3, 8, "cpu", lookahead, inv_threshold=threshold)
    assert_matches_lapack(a, lu, piv)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("panel", ["cpu", "gpu"])
@pytest.mark.parametrize("threshold", [0.0, np.inf])
def test_virtual_devices_tail(rng, monkeypatch, p, panel, threshold):
    """Narrower panels at the end (nb / 2, then nb / 4: up to four consecutive panels of one
    owner), whose receivers must have copied a panel's L11^{-1} before its owner stages the
    next one of the same parity (without that wait the CPU panel gave wrong factors)."""
    from gpulinalg.lu import multi as _lu_multi
    from gpulinalg.lu.driver import panel_blocks

    def two_tails(k, nb, table):   # two narrower stages (the tuning table has one)
        return panel_blocks(k, nb, tails=((nb // 2, 48), (nb // 4, 24)))

    monkeypatch.setattr(_lu_multi, "multi_panel_blocks", two_tails)
    for shape in [(70, 70), (90, 45), (45, 90)]:
        a = rng.standard_normal(shape).astype(np.float32)
        lu, piv = factor_virtual(a, p, 8, panel, inv_threshold=threshold)
        assert_matches_lapack(a, lu, piv)


@pytest.mark.parametrize("kind", ["wilkinson", "cond1e6"])
def test_virtual_devices_hard_matrices(rng, kind):
    a = wilkinson(40) if kind == "wilkinson" else with_cond(rng, 60, 1e6)
    lu, piv = factor_virtual(a, 2, 8, "gpu")
    assert_matches_lapack(a, lu, piv)


@pytest.mark.parametrize("panel", ["cpu", "gpu"])
def test_virtual_devices_singular(rng, panel):
    """LAPACK's info comes from whichever device factored the first zero pivot."""
    a = rng.standard_normal((24, 24)).astype(np.float32)
    a[:, 13] = 0            # column 13 (block 3 of width 4: device 1 of 2) is zero
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 14 is exactly zero"):
        factor_virtual(a, 2, 4, panel)


@pytest.mark.parametrize("shape", [(37, 37), (61, 23), (23, 61), (8, 100), (100, 8)])
@pytest.mark.parametrize("collect", [True, False])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("panel", ["cpu", "gpu"])
@pytest.mark.parametrize("scatter_first", [0, 1, 2])
def test_virtual_devices_upload_and_home(rng, shape, collect, p, panel, scatter_first):
    """Columns arriving chunk by chunk (emulated streams: an operation that does not wait for
    its columns reads NaN; one that waits on a chunk enqueued only later, after step 0's panel
    copies, fails), and the result collected on a home that also applies the left swaps
    (collect) or gathered from the devices at the end."""
    from gpulinalg.testing.multi import factor_host
    a = rng.standard_normal(shape).astype(np.float32)
    work = a.copy()
    with tuning.override(_tuned(scatter_first=scatter_first)):
        piv, info = factor_host(work, 4, p, lambda: make_panel(panel, p), 1, INV_THRESHOLD,
                                collect=collect)
    assert info == 0
    assert_matches_lapack(a, work, piv)


@pytest.mark.parametrize("shape", [(37, 37), (61, 23), (23, 61)])
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("panel", ["cpu", "gpu"])
def test_virtual_devices_home_apart(rng, shape, p, panel):
    """The factors collected into a separate home (`out`, NaN at the start: every element
    must be written) while the input is only read: the same bits as factoring in place."""
    from gpulinalg.testing.multi import factor_host
    a = rng.standard_normal(shape).astype(np.float32)
    keep, work = a.copy(), a.copy()
    out = np.full_like(a, np.nan)
    piv, info = factor_host(a, 4, p, lambda: make_panel(panel, p), 1, INV_THRESHOLD, out=out)
    piv1, info1 = factor_host(work, 4, p, lambda: make_panel(panel, p), 1, INV_THRESHOLD)
    assert info == info1 == 0
    assert np.array_equal(a, keep)
    assert np.array_equal(out, work) and np.array_equal(piv, piv1)
    assert_matches_lapack(a, out, piv)


@pytest.mark.parametrize("shape,nb", [((37, 37), 4), ((61, 23), 4), ((23, 61), 4),
                                      ((50, 50), 8), ((33, 33), 33)])
@pytest.mark.parametrize("p", [2, 3])
def test_final_pieces_cover_the_home_once_and_never_change(rng, shape, nb, p):
    """The pieces `final` names (a graph replay copies each out as it is told) cover every
    element of the home once, and each holds its final value when its event has fired (the
    emulated streams run that far at once: a piece named too early would still change)."""
    from gpulinalg.testing.multi import factor_host
    a = rng.standard_normal(shape).astype(np.float32)
    work = a.copy()
    seen, count = [], np.zeros(shape, int)

    def final(event, r0, r1, c0, c1):
        event.wait()
        seen.append(((r0, r1, c0, c1), work[r0:r1, c0:c1].copy()))
        count[r0:r1, c0:c1] += 1

    with tuning.override(_tuned(tail_columns=16, tail_min_nb=8)):   # tails of nb / 2 too
        piv, _ = factor_host(work, nb, p, lambda: make_panel("gpu", p), 1, INV_THRESHOLD,
                             final=final)
    assert (count == 1).all()
    for (r0, r1, c0, c1), piece in seen:
        np.testing.assert_array_equal(piece, work[r0:r1, c0:c1])
    assert_matches_lapack(a, work, piv)


@pytest.mark.parametrize("p", [2, 3])
def test_home_collects_after_the_receives(rng, monkeypatch, p):
    """The home takes each panel's columns only behind every receiver's copy of that panel
    (their copies are on the chain to the next panel; a take queued beside them slowed it)."""
    from gpulinalg.lu import multi as _lu_multi
    from gpulinalg.testing.multi import factor_host
    seen = []

    def collect(home, s, j0, j1, owner, done, receives):
        seen.append((s, len(receives)))
        return original(home, s, j0, j1, owner, done, receives)

    original = _lu_multi._collect
    monkeypatch.setattr(_lu_multi, "_collect", collect)
    a = rng.standard_normal((40, 40)).astype(np.float32)
    work = a.copy()
    piv, info = factor_host(work, 4, p, lambda: make_panel("gpu", p), 1, INV_THRESHOLD)
    assert seen == [(s, p - 1) for s in range(10)]
    assert info == 0
    assert_matches_lapack(a, work, piv)


@pytest.mark.parametrize("n,nb,p", [(100, 4, 2), (96, 8, 3), (7, 4, 3), (64, 8, 4), (5, 8, 2)])
def test_host_column_views(rng, n, nb, p):
    """The host transfers' views: every column of a device's share, in local order, written
    through into the host matrix (views, not copies), for whole and partial block groups,
    packed by several threads."""
    from concurrent.futures import ThreadPoolExecutor

    from gpulinalg.core.host_io import _pack
    from gpulinalg.lu.distribution import column_views
    dist = ColumnCyclic(n, nb, p)
    a = rng.standard_normal((9, n)).astype(np.float32)
    out = np.full_like(a, np.nan)

    def pack(rows, buf, d, up):
        views = lambda r, b: column_views(r, b, dist, d)
        _pack(rows, buf, views, up, pool, 3, 1)

    with ThreadPoolExecutor(3) as pool:
        for d in range(p):
            share = a[:, dist.global_columns(d)]
            packed = np.full((6, dist.local_width(d)), np.nan, np.float32)
            pack(a[2:8], packed, d, True)
            assert np.array_equal(packed, share[2:8])
            pack(out[2:8], packed, d, False)
    assert np.array_equal(out[2:8], a[2:8]) and np.isnan(out[[0, 1, 8]]).all()
    # A float16 input is packed straight into the float32 staging (no converted copy first).
    a16 = rng.standard_normal((9, n)).astype(np.float16)
    with ThreadPoolExecutor(3) as pool:
        for d in range(p):
            packed = np.full((9, dist.local_width(d)), np.nan, np.float32)
            pack(a16, packed, d, True)
            assert np.array_equal(packed, a16[:, dist.global_columns(d)].astype(np.float32))


def test_upload_chunks():
    dist = ColumnCyclic(100, 4, 2)
    chunks = dist.chunks(1)
    assert [len(c) for c in chunks] == [1, 1, 2, 4, 4]
    assert [b for c in chunks for b in c] == dist.blocks(1)
    assert dist.blocks(1)[0] == (4, 8) and dist.blocks(1)[-1] == (92, 96)
    assert [b for c in ColumnCyclic(10, 4, 3).chunks(2) for b in c] == [(8, 10)]
    assert ColumnCyclic(3, 4, 2).chunks(1) == []


def test_virtual_devices_input_not_modified(rng):
    a = rng.standard_normal((30, 30)).astype(np.float32)
    keep = a.copy()
    factor_virtual(a, 3, 4)
    assert np.array_equal(a, keep)


def test_virtual_devices_overwrite_a(rng):
    """overwrite_a on a C-ordered float32 host matrix: factored where it lies (no copy of a
    matrix that may be too large for one GPU and as large as the host's memory)."""
    a = rng.standard_normal((30, 30)).astype(np.float32)
    keep = a.copy()
    lu, piv = factor_virtual(a, 2, 4, overwrite_a=True)
    assert np.shares_memory(lu, a)
    assert_matches_lapack(keep, lu, piv)


@pytest.mark.parametrize("bad_row", [0, 7, 9])
def test_host_finite_check_in_blocks(rng, bad_row):
    """The host input's finite check, block of rows by block of rows (first, middle, last)."""
    from gpulinalg.core.finite import host_all_finite
    a = rng.standard_normal((10, 6)).astype(np.float32)
    assert host_all_finite(a, rows=3)
    a[bad_row, 5] = np.inf
    assert not host_all_finite(a, rows=3)
    assert not host_all_finite(a)


def test_lu_with_devices_host_backend(rng):
    a = rng.standard_normal((29, 31)).astype(np.float32)
    p, l, u = testing_lu.lu(a, block_size=4, devices=2, emulate=True)
    assert np.allclose(p @ l @ u, a, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -1, [], [0, 0], [0, -1], [1.5], "ab", 2.0, True, [True]])
def test_devices_validation(bad):
    with pytest.raises((ValueError, TypeError)):
        testing_lu.lu_factor(np.eye(3, dtype=np.float32), devices=bad, emulate=True)


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_devices_without_gpu():
    with pytest.raises(gpulinalg.CudaUnavailableError):
        gpulinalg.lu_factor(np.eye(3, dtype=np.float32), devices=2)


# ---------------------------------------------------------------- GPU: several devices

def _np(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)


def _check(a, lu, piv):
    ref_lu, ref_piv = sl.lu_factor(a)
    assert backward_error(a, _np(lu), _np(piv)) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


def _one_gpu_same_plan(cp, a, panel, ndev, block_size=None):
    """One GPU's factors of `a` with the plan that a call on `ndev` GPUs takes: its block
    size, and for GPU panels the panel object of `ndev` GPUs (its leaves: the row leaf's
    block cap on `ndev` GPUs), run by the one-GPU driver.  The same sums in the same order,
    so the same pivots.  With each path's own defaults the plans may differ (the row leaf's
    block cap, nb on three or more GPUs), and a near-tie may then pick the other row (rows
    2498 / 2499 of the last 2 x 2 block at 2500 on four GPUs); both are LAPACK-accurate."""
    m, n = a.shape
    if panel == "cpu":
        return gpulinalg.lu_factor(cp.asarray(a), panel=panel, block_size=block_size)
    from gpulinalg.lu.driver import getrf
    from gpulinalg.lu.panel_gpu import GpuPanel
    from gpulinalg.lu.plan import block_size as plan_block_size
    from gpulinalg.lu.steps import CupyOps
    nb = block_size or plan_block_size(m, n, "gpu", "fp32", ndev, tuning.current())
    nb = max(1, min(nb, m, n))
    lu = cp.array(a, dtype=np.float32, order="C")
    piv, _ = getrf(CupyOps(lu, nb, "fp32"), GpuPanel(devices=ndev), nb)
    return lu, piv


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("shape", [(1, 1), (257, 257), (1031, 1031), (2049, 2049),
                                   (3000, 1300), (1300, 3000)])
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
def test_multi_gpu_matches_single(cp, rng, shape, panel):
    """Two GPUs: LAPACK-accurate, and the same pivots as one GPU with the same plan (same
    kernels, same sums per column block)."""
    a = rng.standard_normal(shape).astype(np.float32)
    lu2, piv2 = gpulinalg.lu_factor(cp.asarray(a), panel=panel, devices=2)
    assert isinstance(lu2, cp.ndarray) and lu2.device.id == 0 and lu2.shape == shape
    _check(a, lu2, piv2)
    lu1, piv1 = _one_gpu_same_plan(cp, a, panel, 2)
    assert np.array_equal(_np(piv2), _np(piv1))


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("shape", [(3000, 3000), (3100, 1500), (1500, 3100)])
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
def test_multi_gpu_tail(cp, rng, shape, panel):
    """block_size=512 on two GPUs: 256-wide panels below TAIL_COLUMNS (here every panel,
    two consecutive ones per owner), the panels of one GPU at block_size=256."""
    a = rng.standard_normal(shape).astype(np.float32)
    lu2, piv2 = gpulinalg.lu_factor(cp.asarray(a), panel=panel, devices=2, block_size=512)
    _check(a, lu2, piv2)
    lu1, piv1 = _one_gpu_same_plan(cp, a, panel, 2, block_size=256)
    assert np.array_equal(_np(piv2), _np(piv1))


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("precision", ["fp32", "3xtf32"])
@pytest.mark.parametrize("kind", ["random", "wilkinson", "cond1e6"])
def test_multi_gpu_accuracy(rng, precision, kind):
    n, nb = (120, 16) if kind == "wilkinson" else (1536, 128)   # growth 2^(n-1) < float32 max
    a = {"random": lambda: rng.standard_normal((n, n)).astype(np.float32),
         "wilkinson": lambda: wilkinson(n),
         "cond1e6": lambda: with_cond(rng, n, 1e6)}[kind]()
    keep = a.copy()
    lu, piv = gpulinalg.lu_factor(a, block_size=nb, devices=[0, 1], precision=precision)
    assert isinstance(lu, np.ndarray) and np.array_equal(a, keep)
    _check(a, lu, piv)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("dtype,order,overwrite_a", [(np.float16, "C", False),
                                                     (np.float32, "F", False),
                                                     (np.float32, "C", True)])
def test_multi_gpu_host_input(rng, dtype, order, overwrite_a):
    """Host input on two GPUs: C-ordered float16 read where it lies (converted in the
    staging), other orders through a copy, overwrite_a factored into the input itself; a
    kept input never changes, and the result equals that of the float32 C-ordered copy."""
    a = np.asarray(rng.standard_normal((1000, 1000)), dtype=dtype, order=order)
    keep = a.copy()
    lu, piv = gpulinalg.lu_factor(a, block_size=64, devices=2, overwrite_a=overwrite_a)
    ref_lu, ref_piv = gpulinalg.lu_factor(np.ascontiguousarray(keep, dtype=np.float32),
                                          block_size=64, devices=2)
    assert lu.dtype == np.float32 and lu.flags.c_contiguous
    assert np.shares_memory(lu, a) == (overwrite_a and dtype == np.float32 and order == "C")
    if not np.shares_memory(lu, a):
        assert np.array_equal(a, keep)
    assert np.array_equal(lu, ref_lu) and np.array_equal(piv, ref_piv)
    _check(keep.astype(np.float32), lu, piv)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_multi_gpu_host_transfers_in_blocks(rng):
    """Host input through many blocks of rows (small staging buffers, split over several
    packing threads): the same factors as through the default staging."""
    a = rng.standard_normal((500, 300)).astype(np.float32)
    want_lu, want_piv = gpulinalg.lu_factor(a, block_size=32, devices=2)
    with tuning.override(_tuned(staging_bytes_multi=4 * 150 * 7, pack_threads_multi=3,
                                pack_min_bytes=64)):
        lu, piv = gpulinalg.lu_factor(a, block_size=32, devices=2)
    assert np.array_equal(lu, want_lu) and np.array_equal(piv, want_piv)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_multi_gpu_other_device_order_and_home(cp, rng):
    """Input on device 1, devices listed 1, 0: the result comes back on device 1."""
    a = rng.standard_normal((700, 700)).astype(np.float32)
    with cp.cuda.Device(1):
        lu, piv = gpulinalg.lu_factor(cp.asarray(a), block_size=64, devices=[1, 0])
        assert lu.device.id == 1
    _check(a, lu, piv)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("overwrite_a,order", [(False, "C"), (True, "C"), (False, "F")])
def test_multi_gpu_device_input_kept_or_overwritten(cp, rng, overwrite_a, order):
    """Device input on two GPUs: kept (the upload reads a C-ordered input in place, the
    factors go to a new array; other orders through a copy) or factored where it lies
    (overwrite_a, C order); a NaN or inf raises ValueError either way, the input unchanged."""
    a = np.asarray(rng.standard_normal((900, 900)), dtype=np.float32, order=order)
    d = cp.asarray(a, order=order)
    lu, piv = gpulinalg.lu_factor(d, overwrite_a=overwrite_a, devices=2, block_size=64)
    assert (lu.data.ptr == d.data.ptr) == (overwrite_a and order == "C")
    if lu.data.ptr != d.data.ptr:
        np.testing.assert_array_equal(cp.asnumpy(d), a)
    _check(a, lu, piv)
    for value in (np.nan, np.inf):
        a[450, 7] = value
        d = cp.asarray(a, order=order)
        with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
            gpulinalg.lu_factor(d, overwrite_a=overwrite_a, devices=2, block_size=64)
        np.testing.assert_array_equal(cp.asnumpy(d), a)
        lu, piv = gpulinalg.lu_factor(d, check_finite=False, devices=2, block_size=64)
        assert lu.shape == a.shape


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_multi_gpu_lu_and_singular(rng):
    a = rng.standard_normal((300, 300)).astype(np.float32)
    a[:, 200] = 0
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 201 is exactly zero"):
        gpulinalg.lu_factor(a, block_size=64, devices=2)
    p, l, u = gpulinalg.lu(a, block_size=64, devices=2)
    assert np.allclose(p @ l @ u, a, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_multi_gpu_torch(rng):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((600, 600)).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(torch.from_numpy(a).cuda(), devices=2)
    assert isinstance(lu, torch.Tensor) and lu.is_cuda
    _check(a, lu.cpu().numpy(), piv.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.multi_gpu(4)
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("first_columns", [0, 1500])
def test_four_gpus(cp, rng, panel, first_columns):
    """Four GPUs, with the panels first from the middle on (panel_first_columns) or not."""
    a = rng.standard_normal((2500, 2500)).astype(np.float32)
    with tuning.override(_tuned(panel_first_columns=first_columns)):
        lu4, piv4 = gpulinalg.lu_factor(cp.asarray(a), panel=panel, devices=4)
    _check(a, lu4, piv4)
    lu1, piv1 = _one_gpu_same_plan(cp, a, panel, 4)
    assert np.array_equal(_np(piv4), _np(piv1))


@pytest.mark.gpu
def test_update_stream_priority(cp):
    """A device of a multi-GPU factorization (receive=True) runs its updates one priority
    above the default, where the device allows it below the panel's; the one-GPU driver's
    and the home's update streams keep the default."""
    from gpulinalg.lu.steps import CupyOps
    a = cp.ones((8, 8), dtype=np.float32)
    multi, single = CupyOps(a, 4, receive=True, npiv=8), CupyOps(a, 4, npiv=8)
    top = multi.streams["panel"].priority
    assert top < 0   # the panel's stream: the device's greatest priority
    assert multi.streams["update"].priority == (-1 if top <= -2 else 0)
    assert single.streams["update"].priority == 0


def test_update_priority_rule():
    from gpulinalg.lu.steps import _update_priority
    stream = type("Stream", (), {})
    for top, want in [(-5, -1), (-2, -1), (-1, 0), (0, 0)]:
        s = stream()
        s.priority = top
        assert _update_priority(s) == want


@pytest.mark.gpu
def test_too_many_devices(cp):
    with pytest.raises(ValueError, match="GPU"):
        gpulinalg.lu_factor(np.eye(4, dtype=np.float32), devices=cp.cuda.runtime.getDeviceCount() + 1)


@pytest.mark.parametrize("first_columns,min_devices", [(0, 3), (20, 3), (45, 3), (45, 4)])
@pytest.mark.parametrize("panel", ["cpu", "gpu"])
def test_driver_panel_first_and_timeline(rng, first_columns, min_devices, panel):
    """Both orders of the next owner's work (panel first, or beside the rest of the update):
    a GPU panel first exactly where at most panel_first_columns columns are left right of
    it, on at least panel_first_min_devices devices (45: every panel); a host panel never
    first.  The timeline has one record per device."""
    from gpulinalg.lu.multi import getrf_multi
    from gpulinalg.testing.emulation import NumpyOps
    a = rng.standard_normal((45, 45)).astype(np.float32)
    dist = ColumnCyclic(45, 4, 3)
    shares = scatter(a, dist)
    devs = [NumpyOps(x, 4, cols=dist.bound(d), receive=True, npiv=45)
            for d, x in enumerate(shares)]
    panels = [make_panel(panel, 3) for _ in devs]
    order = []   # ("factor", step) of every panel, ("end", step) of device 0's steps
    for p in panels:
        def factor(ops, step, *args, _factor=p.factor):
            order.append(("factor", step))
            return _factor(ops, step, *args)
        p.factor = factor

    def end_step(step, _end_step=devs[0].end_step):
        order.append(("end", step))
        return _end_step(step)

    devs[0].end_step = end_step
    tl = []
    table = _tuned(panel_first_columns=first_columns, panel_first_min_devices=min_devices)
    piv, info = getrf_multi(devs, panels, dist, 4, timeline=tl, table=table)
    lu = gather(shares, dist, np.empty_like(a))
    assert info == 0
    assert_matches_lapack(a, lu, piv)
    early = {s for s in range(1, 12) if order.index(("factor", s)) < order.index(("end", s - 1))}
    want = {s for s in range(1, 12) if 45 - min(4 * s + 4, 45) <= first_columns}
    assert early == (want if panel == "gpu" and min_devices <= 3 else set())
    assert [r["device"] for r in tl[0]["devices"]] == [0, 1, 2]
    assert sum(r["panels"] for r in tl[0]["devices"]) == 12
    # the host's enqueue by whom it was for: every device's share, the rest, within the whole
    by_device = [r["enqueue_ms"] for r in tl[0]["devices"]]
    assert min(by_device) > 0 and tl[0]["enqueue_home_ms"] == 0   # no home here
    assert sum(by_device) + tl[0]["enqueue_other_ms"] <= tl[0]["enqueue_ms"]


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_multi_gpu_memory_error_message(cp):
    """Each GPU's share is checked against its free memory, with the numbers in the message:
    the GPUs, the share's columns, the GiB needed on which GPU."""
    from gpulinalg.lu.multi import check_memory
    total = cp.cuda.Device(0).mem_info[1]
    n = int((2 * total / 4) ** 0.5) + 4096       # each of 2 shares larger than one GPU
    dist = ColumnCyclic(n, 256, 2)
    with pytest.raises(MemoryError, match=f"on 2 GPUs: {dist.local_width(0)} columns and "
                                          "their workspace need .* GiB of GPU memory on GPU 0"):
        check_memory(n, n, 256, dist, (0, 1))


def test_getrf_multi_pauses_the_collector_and_restores_it(monkeypatch):
    """The enqueue runs with the cyclic collector off; it is back on afterwards, also when
    the driver raises, and left off when the caller had turned it off."""
    import types
    from gpulinalg.lu import multi as _lu_multi
    seen = []

    def steps(*args, **kwargs):
        seen.append(gc.isenabled())
        raise RuntimeError("driver failed")

    monkeypatch.setattr(_lu_multi, "_Steps", steps)
    dev = types.SimpleNamespace(shape=(4, 4), timed=False)
    call = lambda: _lu_multi.enqueue_multi([dev], [], types.SimpleNamespace(n=4), 4,
                                           table=tuning.DEFAULT)
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="driver failed"):
        call()
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(RuntimeError):
            call()
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
