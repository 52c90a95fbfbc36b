"""Blocked right-looking LU with partial pivoting and look-ahead (Volkov & Demmel, SC08).

One driver, `getrf`, for every backend: it calls an ``ops`` object (gpulinalg/_lu_ops.py:
`CupyOps` on the GPU, `NumpyOps` on the host for tests) for each device step, and a ``panel``
object for the panel factorization (`CpuPanel` here; `GpuPanel` in gpulinalg/_panel_gpu.py
plugs in with the same two methods, ``send`` and ``factor``, plus ``final_info``).

The matrix is m x n, row-major (C-order), so that row interchanges touch contiguous rows.
Step s factors the panel A[j0:m, j0:j1] (jb = j1 - j0 <= nb columns), then

    swap     rows j0:m of the columns right (and, later, left) of the panel   (laswp)
    U12  :=  L11^{-1} A12     multiplication by the inverse (SGEMM) or a triangular solve
    A22  -=  L21 U12          SGEMM

With look-ahead (depth 1) the update stream first brings the next panel's columns up to date,
records an event, and the panel stream ships that panel to the host while the update stream
updates the rest of the trailing matrix: the host factors panel s+1 during the update of step s,
as in MAGMA's sgetrf_gpu.  The host only ever waits on one event: the arrival of the panel it
factors next.  No device-wide synchronisation happens inside the loop.
"""

import contextlib
import functools
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from . import host_threads as _host_threads

# Volkov & Demmel: U12 = inv(L11) @ A12 is "provably stable if ||L^{-1}|| < fixed_threshold".
# Norm: the infinity norm (maximum absolute row sum) of L11^{-1}, computed on the host.  The
# residual A12 - L11 X of X = fl(inv(L11) A12) exceeds a triangular solve's by a factor of order
# ||L11||*||L11^{-1}|| (|l_ij| <= 1 under partial pivoting).  Measured at nb = 128: random
# normal and cond-1e6 matrices give ||L11^{-1}|| of 49..101, and the plain product left
# ||PA - LU|| 3-4x SciPy's (H100, 2026-11-21).  So the product is followed by one step of
# refinement, U12 = X + inv(L11) (A12 - L11 X), two more SGEMMs of inner size nb (a fraction
# 2 nb / (m - j0) of the step's flops), which brings the residual to the solve's order as long
# as ||L11^{-1}|| stays below the threshold; above it the driver uses the triangular solve.
INV_THRESHOLD = 1e3


def default_block_size(m, n):
    """Panel width: 128 up to min(m, n) = 8192, 256 above (wider panels feed SGEMM better)."""
    return 128 if min(m, n) <= 8192 else 256


def unit_lower_inverse(l11, threshold):
    """(inv(L11), use_inverse) for the unit lower triangle of l11 (its diagonal is U's)."""
    from scipy.linalg.lapack import strtri
    inv, info = strtri(l11, lower=1, unitdiag=1)
    # strtri with unitdiag leaves the diagonal (U11's) and upper triangle as given: clean them.
    inv = np.tril(inv, -1)
    np.fill_diagonal(inv, 1.0)
    norm = float(np.abs(inv).sum(axis=1).max()) if inv.size else 1.0
    return inv, bool(info == 0 and np.isfinite(norm) and norm < threshold), norm


def mark(ops, stream):
    """An event on `stream` that only the timeline reads: None unless ops.timed (getrf sets
    it from its `timeline`; other callers get events), saving the host an event a time."""
    return ops.record(stream) if getattr(ops, "timed", True) else None


@dataclass
class PanelResult:
    info: int           # 1-based absolute column of the first exact zero on U's diagonal, or 0
    use_inverse: bool   # U12 by multiplication with L11^{-1} (else a triangular solve)
    done: object        # event on the panel stream: factored panel, pivots, L11^{-1} in place
    recv_start: object  # event before the upload (timeline)
    host_start: float   # perf_counter around the host work (timeline)
    host_end: float
    linv_norm: float
    sync_start: float = None    # perf_counter around the host's wait for the panel (timeline)
    sync_end: float = None


# The host's panel work (wait for the panel, sgetrf, strtri) on a worker thread, so that the
# driver's thread enqueues the GPU's work meanwhile (CpuPanel).  Alone it gains nothing (H100,
# benchmarks/lu_ab.py --panel cpu --vary _lu.GATED=0: wall / sum of host panel time 1.21 /
# 1.13 / 1.13 at n = 8192 / 16384 / 32768 with the worker or without); with GATED, the GPU's
# chain from one panel to the next (upload, swaps and U12 of the next panel's columns, their
# update, the download) is enqueued ahead and held on the GPU by a host flag that the worker
# raises once the panel is factored (enqueue_gated): 1.04 / 1.02 / 1.03, walls 112 / 429 /
# 1288 -> 93 / 348 / 1083 ms (docs/performance_notes.md).
HOST_THREAD = True
GATED = True


class CpuPanel:
    """Panel factored on the host with LAPACK sgetrf, L11 inverted with strtri.

    With `threaded` (default HOST_THREAD) the host work runs on a worker thread (sgetrf and
    the event wait release the GIL): `send` enqueues the panel's trip to the host and hands
    the worker the job "wait for it, factor it, invert L11"; `factor` collects the result and
    ships the panel back.  With `gated` (threaded and GATED, on ops that can gate a stream)
    getrf runs `enqueue_gated` instead: the panel's return trip and the next panel's chain are
    enqueued before the panel is factored, held by the host flag that the worker raises, and
    `result` collects what the rest of the step needs.  Meanwhile getrf leaves OpenBLAS a
    quarter of the cores fewer and shortens the interpreter's switch interval
    (gpulinalg/_host_threads.py).
    """

    name = "cpu"
    host_wait = True    # the panel's factorization waits on the host for the panel to arrive

    def __init__(self, threaded=None, gated=None):
        self.threaded = HOST_THREAD if threaded is None else threaded
        self.gated = self.threaded and (GATED if gated is None else gated)
        self._jobs = {}    # step -> future (threaded) or callable: the host work of the panel

    def send(self, ops, step, j0, j1, after):
        """Once `after` (update stream) fires: transpose the panel, copy it to pinned memory;
        a worker thread (threaded) waits for it and factors it."""
        ops.wait("panel", after)
        start = mark(ops, "panel")
        ops.panel_to_host(step, j0, j1)
        sent = start, ops.record("panel")
        args = (ops, step, j0, j1, sent[1])
        self._jobs[step] = (_worker().submit(self._host_work, *args) if self.threaded
                            else functools.partial(self._host_work, *args))
        return sent

    @staticmethod
    def _host_work(ops, step, j0, j1, arrived):
        """Wait for the panel, factor it in the pinned buffer, write its pivots, raise the
        host flag to step + 1 (the factored panel and its pivots are staged), then write
        (where usable) L11^{-1} and L11 to host_linv[step % 2].  Returns (info, linv_norm,
        sync_start, host_start, host_end); linv_norm is inf where L11^{-1} is not usable."""
        from scipy.linalg.lapack import sgetrf
        jb = j1 - j0
        t_sync = time.perf_counter()
        ops.host_sync(arrived)                 # the only host wait: the panel has arrived
        t0 = time.perf_counter()
        panel = ops.host_panel_view(j0, j1)    # F-ordered (m-j0) x jb view of pinned memory
        lu, ipiv, info = sgetrf(panel, overwrite_a=True)
        if not np.shares_memory(lu, panel):    # f2py copied after all: keep the staging valid
            panel[...] = lu
        ops.host_log("getrf", step)
        # Pivots: SciPy's sgetrf returns them 0-based (LAPACK's are 1-based), relative to the
        # panel's first row j0 -- exactly what laswp takes on the view a[j0:, :].
        ops.host_piv[j0:j1] = ipiv[:jb]
        # Once the flag is up the staging may take the next panel: keep L11 (and U11) aside.
        l11 = np.array(panel[:jb, :jb], order="F")
        ops.signal(step + 1)
        linv, usable, norm = unit_lower_inverse(l11, np.inf)
        if usable:   # row-major jb x jb, as the update reads them: L11^{-1}, then L11
            staged = ops.host_linv[step % 2]
            staged[0, :jb * jb] = linv.ravel()
            staged[1, :jb * jb] = (np.tril(l11, -1) + np.eye(jb, dtype=np.float32)).ravel()
        return int(info), (norm if usable else np.inf), t_sync, t0, time.perf_counter()

    def result(self, step, j0, inv_threshold):
        """Panel `step`'s host work, once it is done, as a PanelResult without its events
        (done and recv_start None: the caller's, filled in with `replace`)."""
        job = self._jobs.pop(step, None)
        if job is None:
            raise RuntimeError(f"panel {step} was not sent to the host")
        info, norm, t_sync, t0, t1 = job.result() if self.threaded else job()
        return PanelResult(j0 + info if info > 0 else 0, norm < inv_threshold, None, None,
                           t0, t1, norm, t_sync, t0)

    def upload(self, ops, step, j0, j1):
        """Panel stream, held until the host flag reaches step + 1: the factored panel and its
        pivots back into place.  Returns the events (start, done)."""
        ops.gate("panel", step + 1)
        start = mark(ops, "panel")
        ops.panel_to_device(step, j0, j1, False)
        return start, ops.record("panel")

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        res = self.result(step, j0, inv_threshold)
        recv_start = mark(ops, "panel")
        ops.panel_to_device(step, j0, j1, res.use_inverse)
        return replace(res, done=ops.record("panel"), recv_start=recv_start)

    def running(self):
        """The context getrf runs in: with a worker thread, OpenBLAS short of some cores (the
        driver's thread enqueues beside it) and a short GIL switch interval."""
        return (_host_threads.panel_worker_settings() if self.threaded
                else contextlib.nullcontext())


_WORKER = None
_WORKER_LOCK = threading.Lock()


def _worker():
    """The thread that runs the host panels' jobs (created at the first threaded CPU panel,
    once also when two factorizations start at the same time; several factorizations at once
    queue their panels on it, as on one host thread)."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            from concurrent.futures import ThreadPoolExecutor
            _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpulinalg-panel")
        return _WORKER


class HostClock(list):
    """A `timeline` list that asks for the host's clock only: getrf records no timing events
    (the call runs as an untimed one does, at a few perf_counter reads a step) and appends
    {"wall_ms", "host_panel_ms", "steps", ...}: the wall time and the host's panel time of
    this very call, which an instrumented call (its events cost host time) overstates."""
    events = False


def panel_blocks(k, nb, tails=()):
    """[(j0, j1)]: the panels' column ranges (at most nb wide) of a factorization with
    k = min(m, n) pivot columns.  tails: (width, left) pairs: from the first panel boundary
    where at most `left` columns are left, panels of `width`, a divisor of the width before
    (so each lies inside one block of nb: the multi-GPU layout's); others are ignored."""
    blocks, j0, w = [], 0, nb
    while j0 < k:
        for tw, left in tails:
            if 0 < tw < w and w % tw == 0 and j0 % w == 0 and k - j0 <= left:
                w = tw
        blocks.append((j0, min(j0 + w, k)))
        j0 = blocks[-1][1]
    return blocks


def absolute_pivots(piv_rel, blocks):
    """Pivots relative to each panel's first row (the device's convention) -> absolute row
    numbers, 0-based int32."""
    starts = np.repeat([j0 for j0, _ in blocks], [j1 - j0 for j0, j1 in blocks])
    return (np.asarray(piv_rel, dtype=np.int64) + starts[:len(piv_rel)]).astype(np.int32)


def getrf(ops, panel, nb, lookahead=1, inv_threshold=INV_THRESHOLD, timeline=None):
    """Factor ops.a in place; return (piv, info): piv 0-based absolute int32, info as LAPACK.

    `timeline`, if a list, receives one dict with per-step host and GPU stage times (a
    HostClock: the host's times only, no events).
    """
    m, n = ops.shape
    blocks = panel_blocks(min(m, n), nb)
    # events for the timeline only when it is asked for, and not for a HostClock
    ops.timed = timeline is not None and getattr(timeline, "events", True)
    t_start = time.perf_counter()
    origin = ops.record("update")
    if not blocks:
        ops.finish()
        return np.zeros(0, np.int32), 0
    running = getattr(panel, "running", contextlib.nullcontext)
    gated = lookahead and getattr(panel, "gated", False) and ops.can_gate
    with running():
        if gated:
            try:
                info, steps = enqueue_gated(ops, panel, blocks, inv_threshold, origin)
            finally:   # an error on either thread must not leave a stream held by the gate
                ops.signal(len(blocks))
        else:
            info, steps = enqueue_steps(ops, panel, blocks, lookahead, inv_threshold, origin)
        piv_rel = ops.finish()
    wall_ms = (time.perf_counter() - t_start) * 1e3
    # A GPU panel keeps LAPACK's info on the device: read it once, after the last step.
    final_info = getattr(panel, "final_info", None)
    if final_info is not None:
        info = info or final_info(ops)
    if timeline is not None:
        args = (steps, wall_ms, m, n, nb, lookahead, panel.name)
        timeline.append(_timeline(ops, origin, t_start, *args) if ops.timed
                        else _host_clock(*args))
    return absolute_pivots(piv_rel, blocks), info


def enqueue_steps(ops, panel, blocks, lookahead, inv_threshold, origin, rows_final=None):
    """The blocked factorization's loop over `blocks` (panel_blocks): every step's panel,
    swaps and updates issued to `ops` in order, after the event `origin` (update stream).
    rows_final(r0, r1), if given, is called once the update stream's work that makes rows
    r0..r1 final has been issued (step s's left swaps: rows j0..j1, the last step's up to m).
    Returns (info, steps): the first exact zero pivot the host saw (a CPU panel's; a GPU
    panel's stays on the device) and the per-step records of the timeline.  With a GPU panel
    nothing here waits on the host, so the whole loop can be captured into a CUDA graph
    (gpulinalg/_lu_graph.py)."""
    n = ops.shape[1]
    info, steps = 0, []
    # Prologue: panel 0 is final from the start; ship it.
    sent = panel.send(ops, 0, *blocks[0], after=origin)
    for s, (j0, j1) in enumerate(blocks):
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        rec = {"step": s, "j0": j0, "jb": j1 - j0, "send": sent}
        # 1. Panel s: wait for it on the host, factor it, send it back (panel_stream).
        res = panel.factor(ops, s, j0, j1, sent, inv_threshold)
        info = info or res.info
        # 2. The update stream waits for the factored panel, its pivots and L11^{-1}.
        ops.wait("update", res.done)
        rec.update(res=res, update_start=mark(ops, "update"))
        if nxt is not None and lookahead:
            # 3. Look-ahead: the row interchanges, U12 and the update of the next panel's
            #    columns only (the chain the next panel waits for).
            ops.swap(s, j0, j1, j1, nxt[1], "swap_next")
            ops.update(s, j0, j1, j1, nxt[1], res.use_inverse, "update_next")
            ready = rec["ready"] = ops.record("update")
            # 4. Ship the next panel (panel_stream); it is factored during the rest.
            sent = panel.send(ops, s + 1, *nxt, after=ready)
            # 5. The rest of the trailing matrix (all columns right of the next panel, also
            #    beyond k): its interchanges, then its update.
            ops.swap(s, j0, j1, nxt[1], n, "swap_rest")
            ops.update(s, j0, j1, nxt[1], n, res.use_inverse, "update_rest")
        else:
            # 3'. No look-ahead: the interchanges right of the panel, the whole trailing
            #     update, then ship the next panel.
            ops.swap(s, j0, j1, j1, n, "swap_right")
            ops.update(s, j0, j1, j1, n, res.use_inverse, "update")
            if nxt is not None:
                sent = panel.send(ops, s + 1, *nxt, after=ops.record("update"))
        # 6. Row interchanges left of the panel (finished columns of L), off the critical path.
        ops.swap(s, j0, j1, 0, j0, "swap_left")
        if rows_final is not None:   # no later step touches rows above j1
            rows_final(j0, j1 if nxt is not None else ops.shape[0])
        rec["update_end"] = mark(ops, "update")
        rec["enqueued"] = time.perf_counter()
        steps.append(rec)
    return info, steps


def enqueue_gated(ops, panel, blocks, inv_threshold, origin):
    """enqueue_steps for a gated CpuPanel (look-ahead depth 1): the GPU's chain from panel s to
    panel s + 1 -- upload of panel s, the swaps, U12 (triangular solve) and update of panel
    s + 1's columns, its download -- is enqueued while the worker still factors panel s, held
    on the panel stream by the host flag the worker raises, so that no Python enqueue lies
    between two panels.  After the worker's result the driver enqueues the rest of step s
    (L11^{-1} up where usable, swaps and update of the trailing columns, left swaps), then the
    chain of step s + 1.  Same results and records as enqueue_steps."""
    n = ops.shape[1]
    info, steps = 0, []
    chain = _gated_chain(ops, panel, blocks, 0, origin)
    for s, (j0, j1) in enumerate(blocks):
        last = s + 1 == len(blocks)
        rec = {"step": s, "j0": j0, "jb": j1 - j0, "send": chain["sent"]}
        # 1. Panel s's host work (the worker's; the GPU's copy back already waits for it).
        res = replace(panel.result(s, j0, inv_threshold), done=chain["done"],
                                  recv_start=chain["recv_start"])
        use_inverse = res.use_inverse
        info = info or res.info
        rec.update(res=res, update_start=chain["update_start"])
        if not last:
            rec["ready"] = chain["ready"]
        # 2. The rest of step s on the update stream, behind the chain's look-ahead update.
        if use_inverse:
            ops.linv_to_device(s)
        c0 = j1 if last else blocks[s + 1][1]
        ops.swap(s, j0, j1, c0, n, "swap_rest")
        ops.update(s, j0, j1, c0, n, use_inverse, "update_rest")
        ops.swap(s, j0, j1, 0, j0, "swap_left")
        rec["update_end"] = mark(ops, "update")
        # 3. The chain of step s + 1, held until the worker has factored panel s + 1.
        if not last:
            chain = _gated_chain(ops, panel, blocks, s + 1, None, chain["next_sent"])
        rec["enqueued"] = time.perf_counter()
        steps.append(rec)
    return info, steps


def _gated_chain(ops, panel, blocks, s, origin, sent=None):
    """Step s's chain (enqueue_gated): panel s sent to the host (after `origin`, for s = 0;
    else `sent` is how it went), its return gated on the host flag, the swaps, U12 and update
    of panel s + 1's columns, and panel s + 1 sent.  Returns the events in a dict."""
    j0, j1 = blocks[s]
    if sent is None:
        sent = panel.send(ops, s, j0, j1, after=origin)
    recv_start, done = panel.upload(ops, s, j0, j1)
    ops.wait("update", done)
    chain = {"sent": sent, "recv_start": recv_start, "done": done,
             "update_start": mark(ops, "update")}
    if s + 1 < len(blocks):
        nxt = blocks[s + 1]
        ops.swap(s, j0, j1, j1, nxt[1], "swap_next")
        ops.update(s, j0, j1, j1, nxt[1], False, "update_next")
        chain["ready"] = ops.record("update")
        chain["next_sent"] = panel.send(ops, s + 1, *nxt, after=chain["ready"])
    return chain


def _host_clock(steps, wall_ms, m, n, nb, lookahead, panel_name):
    """A HostClock's record: the wall time and the host panel time (sum of the steps'
    host_ms), with no device times."""
    host = sum(rec["res"].host_end - rec["res"].host_start for rec in steps) * 1e3
    return {"m": m, "n": n, "nb": nb, "lookahead": lookahead, "panel": panel_name,
            "events": False, "wall_ms": wall_ms, "host_panel_ms": host, "steps": len(steps)}


def _timeline(ops, origin, t_start, steps, wall_ms, m, n, nb, lookahead, panel_name):
    """Per-step times (ms from the start): host panel, transfers, GPU updates, and their sums.

    Host clock (ms from the start): host_start/host_end around the host's panel work,
    sync_start/sync_end around its wait for the panel (None where the panel does not wait on
    the host), enqueued when the step's enqueue ends; gap_ms: the host's time from this
    panel's end to the next one's start (its enqueue plus its wait).  Device clock (ms from
    `origin`): send_start, update_start, update_end; span lengths send_ms / recv_ms (panel to
    / from the host), update_ms, and next_ms (look-ahead: from the update's start to the next
    panel's columns being ready, the part of the step the next panel waits for).
    """
    rows = []
    ms = lambda t: None if t is None else (t - t_start) * 1e3
    for i, rec in enumerate(steps):
        res = rec["res"]
        send0, send1 = rec["send"]
        nxt = steps[i + 1]["res"] if i + 1 < len(steps) else None
        rows.append({
            "step": rec["step"], "j0": rec["j0"], "jb": rec["jb"],
            "use_inverse": res.use_inverse, "linv_norm": res.linv_norm,
            "host_start": ms(res.host_start), "host_end": ms(res.host_end),
            "host_ms": (res.host_end - res.host_start) * 1e3,
            "sync_start": ms(res.sync_start), "sync_end": ms(res.sync_end),
            "enqueued": ms(rec["enqueued"]),
            "gap_ms": (nxt.host_start - res.host_end) * 1e3 if nxt is not None else 0.0,
            "send_start": ops.elapsed_ms(origin, send0),
            "send_ms": ops.elapsed_ms(send0, send1),
            "recv_ms": ops.elapsed_ms(res.recv_start, res.done),
            "update_start": ops.elapsed_ms(origin, rec["update_start"]),
            "update_end": ops.elapsed_ms(origin, rec["update_end"]),
            "update_ms": ops.elapsed_ms(rec["update_start"], rec["update_end"]),
            # The look-ahead chain: swaps, U12 and update of the next panel's columns.
            "next_ms": (ops.elapsed_ms(rec["update_start"], rec["ready"])
                        if "ready" in rec else None),
        })
    host = sum(r["host_ms"] for r in rows)
    transfer = sum(r["send_ms"] + r["recv_ms"] for r in rows)
    update = sum(r["update_ms"] for r in rows)
    gpu = update + transfer
    chain = sum(r["next_ms"] or 0.0 for r in rows)
    return {"m": m, "n": n, "nb": nb, "lookahead": lookahead, "panel": panel_name,
            "backend": type(ops).__name__, "wall_ms": wall_ms, "host_panel_ms": host,
            "transfer_ms": transfer, "update_ms": update, "gpu_ms": gpu, "next_ms": chain,
            "gap_ms": sum(r["gap_ms"] for r in rows),
            "wall_over_max": wall_ms / max(host, gpu, 1e-9), "steps": rows}
