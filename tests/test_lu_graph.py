"""The GPU-panel LU replayed from a CUDA graph (gpulinalg/lu/graph.py): which calls replay,
and that replays give the ordinary driver's results bit for bit, call after call."""

import dataclasses
import threading
import warnings

import numpy as np
import pytest

import gpulinalg
from gpulinalg import tuning
from gpulinalg.lu import graph as _lu_graph


@pytest.fixture(autouse=True)
def fresh_cache():
    _lu_graph.clear()
    yield
    _lu_graph.clear()


def test_eligible_cases():
    assert _lu_graph.eligible(2048, 2048, "gpu", None, None)
    assert _lu_graph.eligible(1, 7, "gpu", None, None)
    assert not _lu_graph.eligible(2048, 2048, "cpu", None, None)
    assert not _lu_graph.eligible(2048, 2048, "gpu", [], None)     # a timeline is asked for
    assert not _lu_graph.eligible(2048, 2048, "gpu", None, 2)      # several GPUs
    assert not _lu_graph.eligible(0, 5, "gpu", None, None)
    rows = tuning.current().graph_max_elements // 8192
    assert _lu_graph.eligible(rows, 8192, "gpu", None, None)
    assert _lu_graph.eligible(8192, rows, "gpu", None, None)
    assert not _lu_graph.eligible(rows + 1, 8192, "gpu", None, None)
    assert _lu_graph.eligible(16384, 8192, "gpu", None, None)      # tall: erratic when driven
    with tuning.override(dataclasses.replace(tuning.current(), graph_max_elements=2048 * 2048)):
        assert _lu_graph.eligible(2048, 2048, "gpu", None, None)
        assert not _lu_graph.eligible(2048, 2049, "gpu", None, None)
    with _lu_graph.disabled():
        assert not _lu_graph.eligible(2048, 2048, "gpu", None, None)
    assert _lu_graph.eligible(2048, 2048, "gpu", None, None)


def test_disabled_is_per_context():
    """`disabled()` holds in its own thread (and nested) only: another thread replays."""
    seen = []

    def other():
        seen.append(_lu_graph.eligible(2048, 2048, "gpu", None, None))

    with _lu_graph.disabled():
        with _lu_graph.disabled():
            pass
        assert not _lu_graph.eligible(2048, 2048, "gpu", None, None)
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [True]
    assert _lu_graph.eligible(2048, 2048, "gpu", None, None)


def _inputs(cp, rng, shape, count):
    return [cp.asarray(rng.standard_normal(shape, dtype=np.float32)) for _ in range(count)]


def _eager(a, **kw):
    with _lu_graph.disabled():
        return gpulinalg.lu_factor(a, panel="gpu", **kw)


def _assert_same(got, want):
    np.testing.assert_array_equal(got[1].get(), want[1].get())
    # bit for bit: the graph holds the driver's kernels in the driver's order
    np.testing.assert_array_equal(got[0].get().view(np.int32), want[0].get().view(np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2048, 2048), (1000, 1300), (1300, 1000), (257, 257),
                                   (129, 1), (4096, 300)])
@pytest.mark.parametrize("precision", ["fp32", "3xtf32"])
def test_replay_matches_driver(cp, rng, shape, precision):
    """Instantiated with per-node priorities through the driver API."""
    inputs = _inputs(cp, rng, shape, 4)
    want = [_eager(a, precision=precision) for a in inputs]
    got = [gpulinalg.lu_factor(a, panel="gpu", precision=precision) for a in inputs]
    assert not _lu_graph.failures
    assert len(_lu_graph._entries) == 1      # calls 2-4 replayed one captured graph
    (entry,) = _lu_graph._entries.values()
    assert isinstance(entry.graph, _lu_graph.PriorityGraph)
    for g, w in zip(got, want):
        _assert_same(g, w)


@pytest.mark.gpu
def test_replay_keys_the_tuning_table(cp, rng):
    """A graph captured under one table never replays under another: the table is part of
    the key, and the capture runs under it (here L21 read column-major from 64 columns on,
    which changes the launches)."""
    a = _inputs(cp, rng, (700, 700), 1)[0]
    other = dataclasses.replace(tuning.current(), l21_colmajor_min_cols=64)
    want = _eager(a, precision="fp32")
    with tuning.override(other):
        want_other = _eager(a, precision="fp32")
    for _ in range(3):
        _assert_same(gpulinalg.lu_factor(a, panel="gpu", precision="fp32"), want)
        with tuning.override(other):
            _assert_same(gpulinalg.lu_factor(a, panel="gpu", precision="fp32"), want_other)
    assert not _lu_graph.failures
    assert sorted(key[-1] == other for key in _lu_graph._entries) == [False, True]


@pytest.mark.gpu
def test_replay_after_other_allocations(cp, rng):
    """The entry's private pool: memory freed and reallocated by others after the capture
    (here filled with NaN) is never what the graph reads or writes."""
    a, b = _inputs(cp, rng, (777, 777), 2)
    want = _eager(b)
    gpulinalg.lu_factor(a, panel="gpu")
    gpulinalg.lu_factor(a, panel="gpu")          # captured
    junk = [cp.full(777 * 777 + i, cp.nan, dtype=cp.float32) for i in range(8)]
    del junk
    noise = cp.full((777, 777), cp.nan, dtype=cp.float32)
    _assert_same(gpulinalg.lu_factor(b, panel="gpu"), want)
    assert bool(cp.isnan(noise).all())


@pytest.mark.gpu
def test_replay_reports_singularity_per_call(cp, rng):
    a = rng.standard_normal((300, 300), dtype=np.float32)
    s = a.copy()
    s[:, 17] = 0.0
    a, s = cp.asarray(a), cp.asarray(s)
    gpulinalg.lu_factor(a, panel="gpu")
    gpulinalg.lu_factor(a, panel="gpu")          # captured
    with pytest.warns(Warning, match="Diagonal number 18 is exactly zero"):
        gpulinalg.lu_factor(s, panel="gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the info of a replay starts from zero
        gpulinalg.lu_factor(a, panel="gpu")


@pytest.mark.gpu
def test_replay_checks_finite_and_keeps_input(cp, rng):
    a = cp.asarray(rng.standard_normal((200, 200), dtype=np.float32))
    keep = a.copy()
    for _ in range(3):
        gpulinalg.lu_factor(a, panel="gpu")
    np.testing.assert_array_equal(a.get(), keep.get())
    bad = a.copy()
    bad[5, 7] = cp.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_factor(bad, panel="gpu")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [300, 302, 701])
def test_replay_copies_views_and_checks_every_column(cp, rng, n):
    """The replay reads the input where it lies (kernels/graph_io.cu): C-contiguous row
    views whose rows start off the 16-byte grid (n = 302, 701) take the 4-byte path; the
    inf/NaN check covers the first panel's columns and the rest alike, and the input is
    never written."""
    big = cp.asarray(rng.standard_normal((n + 1, n), dtype=np.float32))
    a = big[1:]
    assert a.flags.c_contiguous
    keep = big.copy()
    want = _eager(a.copy())
    for _ in range(3):
        _assert_same(gpulinalg.lu_factor(a, panel="gpu"), want)
    assert len(_lu_graph._entries) == 1
    np.testing.assert_array_equal(big.get(), keep.get())
    for r, c, v in [(3, 2, cp.nan), (n - 1, n - 1, cp.inf), (n // 2, n - 3, -cp.inf)]:
        bad = a.copy()
        bad[r, c] = v
        with pytest.raises(ValueError, match="infs or NaNs"):
            gpulinalg.lu_factor(bad, panel="gpu")
    _assert_same(gpulinalg.lu_factor(a, panel="gpu"), want)   # the flag starts from zero


@pytest.mark.gpu
def test_replay_in_place(cp, rng):
    a = cp.asarray(rng.standard_normal((500, 500), dtype=np.float32))
    want = _eager(a)
    for _ in range(3):
        x = a.copy()
        lu, piv = gpulinalg.lu_factor(x, overwrite_a=True, panel="gpu")
        _assert_same((lu, piv), want)
        assert lu.data.ptr == x.data.ptr


@pytest.mark.gpu
def test_streams_and_eviction(cp, rng):
    """One entry per stream; at most graph_cache_entries entries, least recently used
    dropped."""
    entries = tuning.current().graph_cache_entries
    shapes = [(64 + 8 * i, 64 + 8 * i) for i in range(entries + 1)]
    inputs = {s: _inputs(cp, rng, s, 1)[0] for s in shapes}
    want = {s: _eager(a) for s, a in inputs.items()}
    for s in shapes:
        for _ in range(2):
            _assert_same(gpulinalg.lu_factor(inputs[s], panel="gpu"), want[s])
    assert len(_lu_graph._entries) == entries
    assert not any(key[2] == shapes[0] for key in _lu_graph._entries)
    other = cp.cuda.Stream(non_blocking=True)
    with other:
        for _ in range(2):
            got = gpulinalg.lu_factor(inputs[shapes[-1]], panel="gpu")
        other.synchronize()
    _assert_same(got, want[shapes[-1]])
    assert sum(key[2] == shapes[-1] for key in _lu_graph._entries) == 2
