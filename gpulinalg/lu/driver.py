"""Blocked right-looking LU with partial pivoting and look-ahead (Volkov & Demmel, SC08).

One driver, `getrf`, for every backend: it calls an ``ops`` object for each device step
(`CupyOps` in gpulinalg/lu/steps.py on the GPU; `NumpyOps` in gpulinalg/testing/emulation.py
on the host, for tests) and a ``panel`` object for the panel factorization (`CpuPanel` in
gpulinalg/lu/panel_cpu.py, `GpuPanel` in gpulinalg/lu/panel_gpu.py; the protocol is in
panel_cpu's docstring).

The matrix is m x n, row-major (C-order), so that row interchanges touch contiguous rows.
Step s factors the panel A[j0:m, j0:j1] (jb = j1 - j0 <= nb columns), then

    swap     rows j0:m of the columns right (and, later, left) of the panel   (laswp)
    U12  :=  L11^{-1} A12     multiplication by the inverse (SGEMM) or a triangular solve
    A22  -=  L21 U12          SGEMM

Two streams carry the work: the panel stream (the panel's factorization or its trips to and
from the host) and the update stream (swaps and updates).  With look-ahead (depth 1) the
update stream first brings the next panel's columns up to date and records an event; the
panel stream factors that panel while the update stream updates the rest of the trailing
matrix, as in MAGMA's sgetrf_gpu.  A host panel waits on the host for one event only: the
arrival of the panel it factors next.  No device-wide synchronisation happens inside the loop.
"""

import time
from dataclasses import dataclass, replace

import numpy as np

# U12 = L11^{-1} A12 is stable while ||L11^{-1}|| stays below a fixed threshold (Volkov &
# Demmel).  The residual A12 - L11 X of X = fl(L11^{-1} A12) exceeds a triangular solve's by a
# factor of order ||L11|| ||L11^{-1}|| (|l_ij| <= 1 under partial pivoting), so the update
# refines X once, U12 = X + L11^{-1} (A12 - L11 X) (two more SGEMMs of inner size jb), which
# brings the residual to the solve's order while the infinity norm of L11^{-1} (computed on
# the host) is below INV_THRESHOLD; above it the update solves with L11 (kernels/trsm.cu).
INV_THRESHOLD = 1e3


def unit_lower_inverse(l11, threshold):
    """(inv(L11), use_inverse, norm) for the unit lower triangle of l11 (its diagonal is
    U's), in l11's dtype: use_inverse where xtrtri succeeded and the infinity norm of
    inv(L11) is below `threshold`."""
    from scipy.linalg import get_lapack_funcs
    trtri, = get_lapack_funcs(("trtri",), (l11,))
    inv, info = trtri(l11, lower=1, unitdiag=1)
    # xtrtri with unitdiag leaves the diagonal (U11's) and upper triangle as given: clean them.
    inv = np.tril(inv, -1)
    np.fill_diagonal(inv, 1.0)
    norm = float(np.abs(inv).sum(axis=1).max()) if inv.size else 1.0
    return inv, bool(info == 0 and np.isfinite(norm) and norm < threshold), norm


def mark(ops, stream):
    """An event on `stream` that only the timeline reads: None unless ops.timed (getrf sets
    it from its `timeline`; other callers get events), saving the host an event a time."""
    return ops.record(stream) if ops.timed else None


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


class HostClock(list):
    """A `timeline` list that asks for the host's clock only: getrf records no timing events
    (the call runs as an untimed one does, at a few perf_counter reads a step) and appends
    {"wall_ms", "host_panel_ms", "steps", ...}: the wall time and the host's panel time of
    this very call, which an instrumented call (its events cost host time) overstates."""


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
    # Events for the timeline only when it is asked for, and not for a HostClock.
    ops.timed = timeline is not None and not isinstance(timeline, HostClock)
    t_start = time.perf_counter()
    origin = ops.record("update")
    if not blocks:
        ops.finish()
        return np.zeros(0, np.int32), 0
    with panel.running():
        if lookahead and panel.gated and ops.can_gate:
            try:
                info, steps = enqueue_gated(ops, panel, blocks, inv_threshold, origin)
            finally:   # an error on either thread must not leave a stream held by the gate
                ops.signal(len(blocks))
        else:
            info, steps = enqueue_steps(ops, panel, blocks, lookahead, inv_threshold, origin)
        piv_rel = ops.finish()
    wall_ms = (time.perf_counter() - t_start) * 1e3
    # A GPU panel keeps LAPACK's info on the device: read once, after the last step.
    info = info or panel.final_info(ops)
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
    Returns (info, steps): the first exact zero pivot the host saw (a host panel's; a GPU
    panel's stays on the device) and the per-step records of the timeline.  With a GPU panel
    nothing here waits on the host, so the whole loop can be captured into a CUDA graph
    (gpulinalg/lu/graph.py).
    """
    m, n = ops.shape
    info, steps = 0, []
    # Panel 0 is final from the start: on its way at once.
    sent = panel.send(ops, 0, *blocks[0], after=origin)
    for s, (j0, j1) in enumerate(blocks):
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        rec = {"step": s, "j0": j0, "jb": j1 - j0, "send": sent}
        # Panel stream: factor panel s; its pivots and L11^{-1} in place.
        res = panel.factor(ops, s, j0, j1, sent, inv_threshold)
        info = info or res.info
        # Update stream: wait for the factored panel.
        ops.wait("update", res.done)
        rec.update(res=res, update_start=mark(ops, "update"))
        if nxt is not None and lookahead:
            # Look-ahead: swaps, U12 and update of the next panel's columns only (the chain
            # the next panel waits for), then the next panel goes to the panel stream; the
            # rest of the trailing matrix (up to column n, also beyond k) meanwhile.
            ops.swap(s, j0, j1, j1, nxt[1], "swap_next")
            ops.update(s, j0, j1, j1, nxt[1], res.use_inverse, "update_next")
            ready = rec["ready"] = ops.record("update")
            sent = panel.send(ops, s + 1, *nxt, after=ready)
            ops.swap(s, j0, j1, nxt[1], n, "swap_rest")
            ops.update(s, j0, j1, nxt[1], n, res.use_inverse, "update_rest")
        else:
            # No look-ahead: the whole trailing matrix, then the next panel.
            ops.swap(s, j0, j1, j1, n, "swap_right")
            ops.update(s, j0, j1, j1, n, res.use_inverse, "update")
            if nxt is not None:
                sent = panel.send(ops, s + 1, *nxt, after=ops.record("update"))
        # Row interchanges left of the panel (finished columns of L), off the critical path.
        ops.swap(s, j0, j1, 0, j0, "swap_left")
        if rows_final is not None:   # no later step touches rows above j1
            rows_final(j0, j1 if nxt is not None else m)
        rec["update_end"] = mark(ops, "update")
        rec["enqueued"] = time.perf_counter()
        steps.append(rec)
    return info, steps


def enqueue_gated(ops, panel, blocks, inv_threshold, origin):
    """enqueue_steps for a gated CpuPanel (look-ahead depth 1), with the same results and
    records.

    The GPU's chain from panel s to panel s + 1 (`_gated_chain`: panel s's return trip, the
    swaps, U12 by triangular solve and update of panel s + 1's columns, panel s + 1's trip
    out) is enqueued while the worker still factors panel s, held on the panel stream by the
    host flag that the worker raises; so no Python enqueue lies between two panels.  After the
    worker's result the driver enqueues the rest of step s, then the chain of step s + 1.
    """
    n = ops.shape[1]
    info, steps = 0, []
    chain = _gated_chain(ops, panel, blocks, 0, origin)
    for s, (j0, j1) in enumerate(blocks):
        last = s + 1 == len(blocks)
        rec = {"step": s, "j0": j0, "jb": j1 - j0, "send": chain["sent"]}
        # Host: panel s's factorization (the worker's; its return trip already waits for it).
        res = replace(panel.result(s, j0, inv_threshold), done=chain["done"],
                      recv_start=chain["recv_start"])
        info = info or res.info
        rec.update(res=res, update_start=chain["update_start"])
        if not last:
            rec["ready"] = chain["ready"]
        # Update stream: the rest of step s, behind the chain's look-ahead update (L11^{-1}
        # up where usable, swaps and update of the trailing columns, the left swaps).
        if res.use_inverse:
            ops.linv_to_device(s)
        c0 = j1 if last else blocks[s + 1][1]
        ops.swap(s, j0, j1, c0, n, "swap_rest")
        ops.update(s, j0, j1, c0, n, res.use_inverse, "update_rest")
        ops.swap(s, j0, j1, 0, j0, "swap_left")
        rec["update_end"] = mark(ops, "update")
        # Both streams: the chain of step s + 1, held until the worker has factored panel s + 1.
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

