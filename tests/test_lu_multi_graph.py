"""The several-GPU LU replayed from a CUDA graph (gpulinalg/lu/multi_graph.py): which calls
replay (CPU), and that replays give the ordinary driver's results bit for bit, call after
call (several GPUs)."""

import dataclasses

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import backward_error
import gpulinalg
from gpulinalg import tuning
from gpulinalg.lu import graph, multi_graph


@pytest.fixture(autouse=True)
def fresh_cache():
    graph.clear()
    yield
    graph.clear()


def _table(**fields):
    return dataclasses.replace(tuning.current(), **fields)


def test_eligible_cases():
    t = tuning.current()
    assert multi_graph.eligible(8192, 8192, "gpu", None, t)
    assert not multi_graph.eligible(8192, 8192, "cpu", None, t)     # host panels wait
    assert not multi_graph.eligible(8192, 8192, "gpu", [], t)       # a timeline is asked for
    assert not multi_graph.eligible(0, 5, "gpu", None, t)
    most = t.graph_multi_max_elements
    assert multi_graph.eligible(most // 4096, 4096, "gpu", None, t)
    assert not multi_graph.eligible(most // 4096 + 1, 4096, "gpu", None, t)
    assert not multi_graph.eligible(64, 64, "gpu", None, _table(graph_multi_max_elements=0))
    with graph.disabled():
        assert not multi_graph.eligible(8192, 8192, "gpu", None, t)


class _Built:
    def __init__(self, nbytes=0):
        self.nbytes = nbytes


def test_cache_first_call_counted_then_built_then_kept():
    cache = graph.Cache(lambda t: (2, float("inf")))
    t = tuning.current()
    built = []

    def build():
        built.append(_Built())
        return built[-1]

    assert cache.get("a", build, t) is None and not built        # counted only
    entry = cache.get("a", build, t)
    assert entry is built[0]                                      # captured
    assert cache.get("a", build, t) is entry and len(built) == 1  # replayed
    for key in ("b", "c"):
        cache.get(key, build, t)
        cache.get(key, build, t)
    assert list(cache.entries) == ["b", "c"]                      # "a" dropped: two kept
    graph.clear()
    assert not cache.entries and not cache.seen


def test_cache_failure_remembered():
    cache = graph.Cache(lambda t: (2, float("inf")))
    t = tuning.current()
    calls = []

    def build():
        calls.append(1)
        raise RuntimeError("cannot capture\nsecond line")

    assert cache.get("k", build, t) is None
    assert cache.get("k", build, t) is None
    assert cache.get("k", build, t) is None and len(calls) == 1
    assert cache.failures == {"k": "RuntimeError: cannot capture"}


def test_cache_bytes_limit_keeps_the_newest():
    cache = graph.Cache(lambda t: (8, 100))
    t = tuning.current()
    for key, size in (("a", 60), ("b", 60), ("c", 500)):
        cache.get(key, lambda: None, t)
        cache.get(key, lambda size=size: _Built(size), t)
    assert list(cache.entries) == ["c"]


# ---------------------------------------------------------------- GPU: several devices

def _replays(cp, a, calls=3, **kw):
    """lu_factor(a_i, devices=2, **kw) of `calls` matrices of a's shape (a + i), each against
    the ordinary driver's factors of the same matrix; the key's first call runs the driver,
    the second captures, the rest replay."""
    for i in range(calls):
        x = a + np.float32(i)
        with graph.disabled():
            want = gpulinalg.lu_factor(cp.asarray(x), devices=2, **kw)
        got = gpulinalg.lu_factor(cp.asarray(x), devices=2, **kw)
        assert isinstance(got[0], cp.ndarray) and got[0].shape == a.shape
        assert cp.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert backward_error(x.astype(np.float64), cp.asnumpy(got[0]).astype(np.float64),
                              got[1], np.finfo(a.dtype).eps) <= 50
    assert not multi_graph._CACHE.failures
    assert len(multi_graph._CACHE.entries) == 1


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("shape", [(1, 1), (257, 257), (1031, 1031), (3000, 1300),
                                   (1300, 3000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_replay_matches_driver(cp, rng, shape, dtype):
    _replays(cp, rng.standard_normal(shape).astype(dtype))


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_replay_tail_panels(cp, rng):
    """block_size=512: the half-width tail panels (two consecutive panels of one owner)."""
    _replays(cp, rng.standard_normal((3000, 3000)).astype(np.float32), block_size=512)


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_replay_in_place_kept_and_nonfinite(cp, rng):
    """overwrite_a: the factors in the caller's array; a kept input unchanged; a NaN or inf
    raises ValueError on a replay as on the driver, the input unchanged."""
    a = rng.standard_normal((900, 900)).astype(np.float32)
    want_lu, want_piv = sl.lu_factor(a)
    for _ in range(3):
        d = cp.asarray(a)
        lu, piv = gpulinalg.lu_factor(d, overwrite_a=True, devices=2, block_size=64)
        assert lu.data.ptr == d.data.ptr
        kept = cp.asarray(a)
        lu2, piv2 = gpulinalg.lu_factor(kept, devices=2, block_size=64)
        assert cp.array_equal(kept, cp.asarray(a)) and cp.array_equal(lu, lu2)
        assert np.array_equal(piv, piv2) and np.array_equal(piv, want_piv)
    assert len(multi_graph._CACHE.entries) == 1   # one key: in place and kept alike
    bad = a.copy()
    for value in (np.nan, np.inf):
        bad[450, 7] = value
        d = cp.asarray(bad)
        with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
            gpulinalg.lu_factor(d, devices=2, block_size=64)
        np.testing.assert_array_equal(cp.asnumpy(d), bad)
        lu, _ = gpulinalg.lu_factor(d, check_finite=False, devices=2, block_size=64)
        assert lu.shape == a.shape
    lu, piv = gpulinalg.lu_factor(cp.asarray(a), devices=2, block_size=64)
    assert np.array_equal(piv, want_piv)   # the flag is cleared for the next replay


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_replay_singular_warns_with_lapack_info(cp, rng):
    a = rng.standard_normal((600, 600)).astype(np.float32)
    a[:, 200] = 0
    for _ in range(3):
        with pytest.warns(sl.LinAlgWarning, match="Diagonal number 201 is exactly zero"):
            gpulinalg.lu_factor(cp.asarray(a), devices=2, block_size=64)
    assert len(multi_graph._CACHE.entries) == 1


@pytest.mark.gpu
@pytest.mark.multi_gpu(2)
def test_replay_on_another_home_device(cp, rng):
    """Input on device 1, devices 1, 0: replays there, the result on device 1."""
    a = rng.standard_normal((700, 700)).astype(np.float32)
    with cp.cuda.Device(1):
        with graph.disabled():
            want_lu, want_piv = gpulinalg.lu_factor(cp.asarray(a), devices=[1, 0])
        for _ in range(3):
            lu, piv = gpulinalg.lu_factor(cp.asarray(a), devices=[1, 0])
            assert lu.device.id == 1
            assert cp.array_equal(lu, want_lu) and np.array_equal(piv, want_piv)
    assert len(multi_graph._CACHE.entries) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("shape,nb", [((1, 1), 64), ((257, 257), 64), ((1031, 1031), 128),
                                      ((700, 300), 64), ((300, 700), 64), ((1500, 1500), 512)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_replay_of_two_shares_on_one_gpu(cp, rng, shape, nb, dtype):
    """Device ids (0, 0): the distributed driver on two column shares of one GPU, captured
    and replayed (its peer copies become copies within the device; every stream, event and
    buffer of two devices is there): each replay equals the driver's factors, pivots and
    info, and its inf/NaN flag says what the input held."""
    from gpulinalg.lu.driver import INV_THRESHOLD
    from gpulinalg.core.element import element as element_of
    from gpulinalg.lu.multi import factor_devices
    from gpulinalg.lu.panel_gpu import GpuPanel
    el = element_of(np.dtype(dtype))
    table = tuning.current(element=el)
    make_panel = lambda: GpuPanel(devices=2, table=table, element=el)   # noqa: E731
    args = ((0, 0), nb, make_panel, 1, INV_THRESHOLD, "fp32")
    for i in range(4):
        a = rng.standard_normal(shape).astype(dtype)
        if i == 3:
            a[shape[0] // 2, :] = 0                 # singular: info from the devices
        x = cp.asarray(a)
        want = cp.empty_like(x)
        want_piv, want_info = factor_devices(x, *args, out=want, table=table)
        got = cp.full_like(x, np.nan)
        res = multi_graph.factor(x, got, *args, table)
        if i == 0:
            assert res is None                      # the key's first call runs the driver
            continue
        piv, info, finite = res
        assert cp.array_equal(got, want) and np.array_equal(piv, want_piv)
        assert info == want_info and finite
        assert cp.array_equal(x, cp.asarray(a))     # the input is only read
    x[0, 0] = np.inf
    assert multi_graph.factor(x, x, *args, table)[2] is False   # in place, flagged
    assert not multi_graph._CACHE.failures and len(multi_graph._CACHE.entries) == 1
