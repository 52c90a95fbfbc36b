"""LU driver (getrf) on the NumPy emulation of the device steps, with the host panel
(CpuPanel) (CPU); its GPU-only paths (GPU)."""

import dataclasses
import time

import numpy as np
import pytest
import scipy.linalg as sl

from lu_helpers import assert_matches_lapack, wilkinson, with_cond
import gpulinalg
from gpulinalg import tuning
from gpulinalg.lu.driver import HostClock, getrf, unit_lower_inverse
from gpulinalg.lu.panel_cpu import CpuPanel
from gpulinalg.testing.emulation import NumpyOps

# ---------------------------------------------------------------- helpers

# The CPU panel's three drivers: the host work on the driver's thread, on a worker thread, and
# on a worker thread with the GPU's chain enqueued ahead behind the host flag (the default).
MODES = {"serial": dict(threaded=False), "threaded": dict(threaded=True, gated=False),
         "gated": dict(threaded=True, gated=True)}


def run_driver(a, nb, lookahead=1, inv_threshold=1e3, timeline=None, eager=False,
               threaded=True, gated=True):
    A = np.array(a, dtype=np.float32, order="C")
    ops = NumpyOps(A, nb, eager=eager)
    piv, info = getrf(ops, CpuPanel(threaded, gated), nb, lookahead, inv_threshold, timeline)
    return A, piv, info, ops


def check_against_scipy(a, nb, lookahead=1, inv_threshold=1e3, same_pivots=True, eager=False,
                        threaded=True, gated=True):
    a = np.asarray(a, dtype=np.float32)
    lu, piv, info, _ = run_driver(a, nb, lookahead, inv_threshold, eager=eager,
                                  threaded=threaded, gated=gated)
    assert_matches_lapack(a, lu, piv, same_pivots)
    return lu, piv, info


# ---------------------------------------------------------------- CPU: the driver (NumpyOps)

@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (8, 8), (9, 9), (15, 15), (17, 17), (31, 31),
                                   (53, 53), (97, 97), (61, 23), (23, 61), (100, 8), (8, 100),
                                   (2, 1), (1, 3)])
@pytest.mark.parametrize("lookahead", [0, 1])
@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_driver_matches_sgetrf(rng, shape, lookahead, eager, mode):
    """Emulated lazily (streams run when the host waits: a missing stream wait gives wrong
    factors) and eagerly (as early as their waits allow: so does an upload enqueued before
    the host has written its staging)."""
    a = rng.standard_normal(shape).astype(np.float32)
    check_against_scipy(a, nb=8, lookahead=lookahead, eager=eager, **MODES[mode])


@pytest.mark.parametrize("inv_threshold", [1e3, 0.0])
def test_gated_chain_needs_its_gate(rng, monkeypatch, inv_threshold):
    """The gated driver is right with its gate, and wrong without it: the eager emulation
    then uploads the panel before the host has factored it (the worker is held back 0.2 s
    before each panel, so that the upload always comes first)."""
    a = rng.standard_normal((40, 40)).astype(np.float32)
    check_against_scipy(a, 8, eager=True, inv_threshold=inv_threshold, **MODES["gated"])
    monkeypatch.setattr(NumpyOps, "gate", lambda self, stream, value: None)
    host_sync = NumpyOps.host_sync
    monkeypatch.setattr(NumpyOps, "host_sync",
                        lambda self, tok: (time.sleep(0.2), host_sync(self, tok))[1])
    with pytest.raises(AssertionError):
        check_against_scipy(a, 8, eager=True, inv_threshold=inv_threshold, **MODES["gated"])


@pytest.mark.parametrize("nb", [1, 3, 16, 128])
def test_driver_block_sizes(rng, nb):
    check_against_scipy(rng.standard_normal((67, 67)), nb=nb)


@pytest.mark.parametrize("threshold", [0.0, np.inf])
@pytest.mark.parametrize("shape", [(64, 64), (70, 45), (45, 70)])
@pytest.mark.parametrize("eager", [False, True])
def test_inverse_and_solve_paths(rng, threshold, shape, eager):
    a = rng.standard_normal(shape).astype(np.float32)
    tl = []
    lu, piv, info, _ = run_driver(a, 8, inv_threshold=threshold, timeline=tl, eager=eager)
    used = {r["use_inverse"] for r in tl[0]["steps"]}
    assert used == {threshold == np.inf}
    assert_matches_lapack(a, lu, piv)


def test_inverse_threshold_is_per_panel(rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    tl = []
    run_driver(a, 16, timeline=tl)
    norms = [r["linv_norm"] for r in tl[0]["steps"]]
    mid = float(np.median(norms))
    tl2 = []
    run_driver(a, 16, inv_threshold=mid, timeline=tl2)
    flags = [r["use_inverse"] for r in tl2[0]["steps"]]
    assert flags == [nrm < mid for nrm in norms]
    check_against_scipy(a, nb=16, inv_threshold=mid)


def test_unit_lower_inverse():
    l = np.array([[5, 9, 9], [0.5, 7, 9], [0.25, -0.5, 3]], np.float32, order="F")
    inv, use, norm = unit_lower_inverse(l, 1e3)
    ref = np.linalg.inv(np.tril(l, -1) + np.eye(3))
    np.testing.assert_allclose(inv, ref, rtol=1e-6)
    assert use and norm == pytest.approx(np.abs(ref).sum(axis=1).max())
    assert not unit_lower_inverse(l, 1.0)[1]


@pytest.mark.parametrize("threaded", [False, True])
def test_cpu_panel_thread(rng, monkeypatch, threaded):
    """The host's panel work (wait, sgetrf, strtri) runs on the worker thread when threaded
    (the driver's thread enqueues the rest of the update meanwhile), else on the driver's;
    factoring a panel that was never sent is an error."""
    import threading
    threads, view = [], NumpyOps.host_panel_view

    def log(self, j0, j1):   # the host panel takes this view to factor the panel
        threads.append(threading.current_thread())
        return view(self, j0, j1)

    monkeypatch.setattr(NumpyOps, "host_panel_view", log)
    for lookahead in (0, 1):
        check_against_scipy(rng.standard_normal((40, 37)), 8, lookahead, threaded=threaded)
    assert len(threads) == 10
    assert (threading.current_thread() not in threads) == threaded
    ops = NumpyOps(np.ones((8, 8), np.float32), 8)
    with pytest.raises(RuntimeError, match="was not sent"):
        CpuPanel(threaded).factor(ops, 0, 0, 8, None, 1e3)


def test_staging_buffers_made_once_under_two_threads():
    """CupyOps' staging buffers (`_once`) are made once when the driver's thread and the
    worker ask at the same time: each thread holds the same object after."""
    import threading
    from gpulinalg.lu.steps import _once
    made = []

    class Staging:
        @_once
        def buf(self):
            made.append(np.zeros(1))
            time.sleep(0.05)   # a slow allocation (cudaHostAlloc): both threads ask meanwhile
            return made[-1]

        @_once
        def addr(self):   # asks for another such attribute, as CupyOps._host_addr does
            return id(self.buf)

    def run(*targets):   # daemon threads: a deadlock fails the test rather than hanging it
        threads = [threading.Thread(target=t, daemon=True) for t in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert not any(t.is_alive() for t in threads)

    first = Staging()
    run(lambda: first.addr)
    assert first.addr == id(first.buf) and len(made) == 1
    obj, seen = Staging(), []
    run(lambda: seen.append(obj.buf), lambda: seen.append(obj.buf))
    assert len(made) == 2 and seen[0] is seen[1] is obj.buf is made[1]


def test_panel_worker_settings():
    """OpenBLAS short of spare_cores() and a short switch interval inside the block, both
    restored after (also nested); the threaded host panel runs inside one, with the values
    of the tuning table in force (or its own), the serial one inside none."""
    import sys
    from gpulinalg.lu import host_threads as ht
    api = ht.openblas_threads()
    get = api[0] if api is not None else (lambda: None)
    saved, interval = get(), sys.getswitchinterval()
    table = dataclasses.replace(tuning.current(), openblas_spare_share=4,
                                switch_interval_us=100)

    def inside(share):
        return None if api is None else max(1, min(saved, ht.usable_cores()
                                                    - ht.spare_cores(share)))

    def seen_in(make):
        seen = []
        with make():
            seen.append((get(), sys.getswitchinterval()))
            with make():
                seen.append((get(), sys.getswitchinterval()))
            seen.append((get(), sys.getswitchinterval()))
        assert get() == saved and sys.getswitchinterval() == interval
        return seen

    short = pytest.approx(min(interval, 1e-4), rel=0.05)
    assert seen_in(lambda: ht.panel_worker_settings(4, 100)) == [(inside(4), short)] * 3
    with tuning.override(table):
        assert seen_in(lambda: CpuPanel(True).running()) == [(inside(4), short)] * 3
    own = dataclasses.replace(table, openblas_spare_share=0, switch_interval_us=0)
    assert seen_in(lambda: CpuPanel(True, table=own).running()) == [(saved, interval)] * 3
    assert seen_in(lambda: CpuPanel(False).running()) == [(saved, interval)] * 3


def test_wilkinson_growth():
    a = wilkinson(40)
    lu, piv, info = check_against_scipy(a, nb=8)
    assert abs(lu[-1, -1]) == 2.0 ** 39  # pivot growth 2^(n-1), exact in float32


@pytest.mark.parametrize("threshold", [1e3, 0.0, np.inf])
def test_ill_conditioned(rng, threshold):
    check_against_scipy(with_cond(rng, 80, 1e6), nb=8, inv_threshold=threshold)


def test_rank_deficient(rng):
    a = (rng.standard_normal((72, 20)) @ rng.standard_normal((20, 72))).astype(np.float32)
    check_against_scipy(a, nb=8, same_pivots=False)


def test_exactly_singular_reports_first_zero():
    a = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    a[:, 1] = 0
    lu, piv, info, _ = run_driver(a, 2)
    assert info == sl.lapack.sgetrf(a)[2] == 2
    a = np.zeros((20, 20), np.float32)
    assert run_driver(a, 8)[2] == 1


def test_lookahead_order_in_log(rng):
    """Panel s+1 reaches the host before the rest of step s's trailing update runs."""
    _, _, _, ops = run_driver(rng.standard_normal((48, 48)), 8, lookahead=1)
    log = ops.log
    for s in range(4):
        assert log.index(("host", "getrf", s + 1)) < log.index(("update", "update_rest", s))
        assert log.index(("update", "update_next", s)) < log.index(("panel", "d2h", s + 1))
    _, _, _, ops = run_driver(rng.standard_normal((48, 48)), 8, lookahead=0)
    for s in range(5):
        assert ops.log.index(("update", "update", s)) < ops.log.index(("host", "getrf", s + 1))


def test_docs_cpu_panel_steps(rng):
    """benchmarks/make_docs.py's per-step table pairs each timeline with its row by order
    (only when every (m, n, panel) agrees) and sums the CPU panel's steps."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "make_docs.py"
    spec = importlib.util.spec_from_file_location("make_docs", path)
    make_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_docs)
    tl = []
    run_driver(rng.standard_normal((40, 40)), 8, timeline=tl)
    t = tl[0]
    rows = [{"m": 40, "n": 40, "panel": "cpu", "precision": "3xtf32"}]
    (out,) = make_docs.cpu_panel_steps({"rows": rows, "timelines": [t]})
    assert out["precision"] == "3xtf32" and out["steps"] == 5
    assert out["gaps"] == pytest.approx(sum(x["gap_ms"] for x in t["steps"]))
    assert out["host_med"] == pytest.approx(np.median([x["host_ms"] for x in t["steps"]]))
    rows[0]["n"] = 41   # a timeline of another shape: no table
    assert make_docs.cpu_panel_steps({"rows": rows, "timelines": [t]}) == []


@pytest.mark.parametrize("threaded", [False, True])
def test_timeline_fields(rng, threaded):
    tl = []
    run_driver(rng.standard_normal((40, 40)), 8, timeline=tl, threaded=threaded)
    t = tl[0]
    assert len(t["steps"]) == 5 and t["backend"] == "NumpyOps"
    for key in ("wall_ms", "host_panel_ms", "gpu_ms", "update_ms", "transfer_ms", "gap_ms"):
        assert t[key] >= 0
    steps = t["steps"]
    for r, nxt in zip(steps, steps[1:] + [None]):
        assert r["send_ms"] >= 0 and r["recv_ms"] >= 0
        # Host clock: wait for the panel, factor it, finish the step's enqueue (threaded:
        # the worker waits for the next panel while the driver's thread enqueues).
        assert r["sync_start"] <= r["sync_end"] <= r["host_start"] <= r["host_end"]
        assert r["host_end"] <= r["enqueued"]
        if nxt is not None:
            assert (r["host_end"] if threaded else r["enqueued"]) <= nxt["sync_start"]
            assert r["gap_ms"] == pytest.approx(nxt["host_start"] - r["host_end"])
        else:
            assert r["gap_ms"] == 0.0
    assert t["gap_ms"] == pytest.approx(sum(r["gap_ms"] for r in steps))


def test_host_clock_timeline(rng):
    """A HostClock gets the wall and host panel times of an uninstrumented call: no
    timeline-only events, the same factors as a call without a timeline."""
    a = rng.standard_normal((40, 40))
    clock = HostClock()
    lu, piv, _, ops = run_driver(a, 8, timeline=clock)
    lu0, piv0, _, _ = run_driver(a, 8)
    assert not ops.timed and np.array_equal(lu, lu0) and np.array_equal(piv, piv0)
    (t,) = clock
    assert t["events"] is False and t["steps"] == 5 and "gpu_ms" not in t
    assert 0 < t["host_panel_ms"] <= t["wall_ms"]


def test_stream_emulation_order():
    """NumpyOps runs a stream only up to the awaited event, honouring cross-stream waits."""
    ops = NumpyOps(np.eye(4, dtype=np.float32), 2)
    ops._enqueue("panel", "p0", 0, lambda: None)
    tok = ops.record("panel")
    ops.wait("update", tok)
    ops._enqueue("update", "u0", 0, lambda: None)
    ops._enqueue("panel", "p1", 1, lambda: None)
    ops.host_sync(ops.record("update"))
    assert ops.log == [("panel", "p0", 0), ("update", "u0", 0)]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [100, 300])
def test_gpu_gated_chain_with_slow_staging(monkeypatch, rng, n):
    """The gated host-panel driver (one GPU) with a slow pinned allocation, as cudaHostAlloc
    is at times: the worker raises the very flag word the GPU waits on (made once, whichever
    thread asks first), and the factors match LAPACK's."""
    from gpulinalg.lu import driver as _lu
    from gpulinalg.lu import steps as _lu_ops
    pinned, calls = _lu_ops.CupyOps._pinned, []

    def slow_pinned(self, shape, dtype):
        time.sleep(0.02)
        return pinned(self, shape, dtype)

    def counted(*args, **kwargs):
        calls.append(1)
        return enqueue_gated(*args, **kwargs)

    enqueue_gated = _lu.enqueue_gated
    monkeypatch.setattr(_lu_ops.CupyOps, "_pinned", slow_pinned)
    monkeypatch.setattr(_lu, "enqueue_gated", counted)
    a = rng.standard_normal((n, n)).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(a, block_size=128, panel="cpu")
    assert calls == [1]
    assert_matches_lapack(a, lu, piv, True)


@pytest.mark.gpu
def test_gpu_timeline(rng):
    from gpulinalg.testing.lu import lu_factor
    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    tl = []
    lu_factor(a, panel="cpu", timeline=tl)
    t = tl[0]
    assert t["backend"] == "CupyOps" and len(t["steps"]) == 2048 // 128
    assert t["gpu_ms"] > 0 and t["host_panel_ms"] > 0 and t["wall_ms"] > 0
    clock = HostClock()
    lu, piv = lu_factor(a, panel="cpu", timeline=clock)
    assert_matches_lapack(a, lu, piv, True)
    assert clock[0]["events"] is False and 0 < clock[0]["host_panel_ms"] < clock[0]["wall_ms"]
