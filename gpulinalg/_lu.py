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

import time
from dataclasses import dataclass

import numpy as np

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


class CpuPanel:
    """Panel factored on the host with LAPACK sgetrf, L11 inverted with strtri."""

    name = "cpu"
    host_wait = True    # factor() waits on the host for the panel to arrive

    def send(self, ops, step, j0, j1, after):
        """Once `after` (update stream) fires: transpose the panel, copy it to pinned memory."""
        ops.wait("panel", after)
        start = mark(ops, "panel")
        ops.panel_to_host(step, j0, j1)
        return start, ops.record("panel")

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        from scipy.linalg.lapack import sgetrf
        jb = j1 - j0
        t_sync = time.perf_counter()
        ops.host_sync(sent[1])                 # the only host wait: panel s has arrived
        t0 = time.perf_counter()
        panel = ops.host_panel_view(j0, j1)    # F-ordered (m-j0) x jb view of pinned memory
        lu, ipiv, info = sgetrf(panel, overwrite_a=True)
        if not np.shares_memory(lu, panel):    # f2py copied after all: keep the staging valid
            panel[...] = lu
        ops.host_log("getrf", step)
        # Pivots: SciPy's sgetrf returns them 0-based (LAPACK's are 1-based), relative to the
        # panel's first row j0 -- exactly what laswp takes on the view a[j0:, :].
        ops.host_piv[j0:j1] = ipiv[:jb]
        linv, use_inverse, norm = unit_lower_inverse(panel[:jb, :jb], inv_threshold)
        if use_inverse:  # row-major jb x jb, as gemm_into reads them: L11^{-1}, then L11
            ops.host_linv[0, :jb * jb] = linv.ravel()
            l11 = np.tril(panel[:jb, :jb], -1) + np.eye(jb, dtype=np.float32)
            ops.host_linv[1, :jb * jb] = l11.ravel()
        t1 = time.perf_counter()
        recv_start = mark(ops, "panel")
        ops.panel_to_device(step, j0, j1, use_inverse)
        done = ops.record("panel")
        return PanelResult(j0 + int(info) if info > 0 else 0, use_inverse, done, recv_start,
                           t0, t1, norm, t_sync, t0)


class HostClock(list):
    """A `timeline` list that asks for the host's clock only: getrf records no timing events
    (the call runs as an untimed one does, at a few perf_counter reads a step) and appends
    {"wall_ms", "host_panel_ms", "steps", ...}: the wall time and the host's panel time of
    this very call, which an instrumented call (its events cost host time) overstates."""
    events = False


def panel_blocks(k, nb):
    """[(j0, j1)]: the panels' column ranges (at most nb wide) of a factorization with
    k = min(m, n) pivot columns."""
    return [(j0, min(j0 + nb, k)) for j0 in range(0, k, nb)]


def absolute_pivots(piv_rel, blocks):
    """Pivots relative to each panel's first row (the device's convention) -> absolute row
    numbers, 0-based int32."""
    piv = np.asarray(piv_rel).astype(np.int64)
    for j0, j1 in blocks:
        piv[j0:j1] += j0
    return piv.astype(np.int32)


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


def enqueue_steps(ops, panel, blocks, lookahead, inv_threshold, origin):
    """The blocked factorization's loop over `blocks` (panel_blocks): every step's panel,
    swaps and updates issued to `ops` in order, after the event `origin` (update stream).
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
        rec["update_end"] = mark(ops, "update")
        rec["enqueued"] = time.perf_counter()
        steps.append(rec)
    return info, steps


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
