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

With the CPU panel the host idles between panels for the chain "upload panel s -> update the
next panel's columns -> ship panel s+1" and for its own Python enqueue.  `CpuPanel.chain`
(opt-in: CHAIN_CHUNKS, PRE_ENQUEUE) pipelines the chain: the panel goes up in row chunks,
and each chunk's rows of the next panel are updated and shipped back as soon as that chunk
lands, so the two copy directions and the SMs overlap; optionally the chain is enqueued while
the host is still factoring (LAPACK in a worker thread), its first copy held by a stream wait
on a host flag.  Measured on the H100 it does not pay (see CHAIN_CHUNKS), so the default is
the unpipelined look-ahead above.
"""

import concurrent.futures
import functools
import sys
import threading
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

# The CPU panel's chain (CpuPanel.chain).  CHAIN_CHUNKS: row chunks per panel (0: the
# unpipelined path, panel_to_device then the look-ahead update then panel_to_host); None:
# about CHAIN_CHUNK_BYTES of panel per chunk, at most CHAIN_MAX_CHUNKS.  PRE_ENQUEUE: enqueue
# the chain while the host factors, gated on the host flag, where the device can wait on it.
# Measured (H100, n = 8192 / 16384 / 32768, benchmarks/lu_chain_ab.py, median of 3): the
# unpipelined path walls 118-121 / 355-356 / 1114-1118 ms.  Between panels the host waits
# only 0.005 / 0.06 / 0.4 ms for the GPU; the rest of its 0.6 / 0.8 / 1.2 ms gap is its own
# Python enqueue (~0.6 ms a step).  Each chunk adds ~0.13 ms of enqueue: 1 / 2 / 4 chunks
# wall 124 / 132 / 148 ms at 8192 and 1100 / 1077 / 1129 at 32768 (within the unpipelined
# path's 1093-1137 spread).  Pre-enqueued: host panel time +9-69 %, and at 32768 the early
# steps' update stream takes 19.8 ms instead of 13 with the host waiting 6-7 ms a panel
# (cause not established: the enqueue against LAPACK's 16 threads on 16 cores, or the flag
# wait holding update work behind it); walls (1 chunk) 134 / 397 / 1287 ms.  Hence off.
CHAIN_CHUNKS = 0
CHAIN_CHUNK_BYTES = 4 << 20
CHAIN_MAX_CHUNKS = 8
PRE_ENQUEUE = False
SWITCH_INTERVAL = 5e-5   # s: GIL switch interval while LAPACK's thread and the enqueue overlap


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
    update_start: object = None  # event: the update stream starts on this panel (chain)


def chain_rows(j0, j1, m, chunks):
    """Row chunks [(r0, r1)] of the panel rows j0:m: `chunks` of them (fewer when short),
    multiples of 32 rows, the first holding at least L11's jb rows (U12 needs them)."""
    mp, jb = m - j0, j1 - j0
    size = max(jb, -(-mp // max(chunks, 1)))
    size = -(-size // 32) * 32
    return [(r0, min(r0 + size, m)) for r0 in range(j0, m, size)]


def _worker():
    """The thread that runs LAPACK while the main thread enqueues (sgetrf releases the GIL)."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(1, "gpulinalg-panel")
    return _EXECUTOR


_EXECUTOR = None


class CpuPanel:
    """Panel factored on the host with LAPACK sgetrf, L11 inverted with strtri.

    chunks, pre_enqueue: the chain's settings (CHAIN_CHUNKS, PRE_ENQUEUE when None).
    """

    name = "cpu"
    host_wait = True    # factor() waits on the host for the panel to arrive

    def __init__(self, chunks=None, pre_enqueue=None):
        self.chunks = CHAIN_CHUNKS if chunks is None else chunks
        self.pre_enqueue = PRE_ENQUEUE if pre_enqueue is None else pre_enqueue

    @property
    def chained(self):
        """Whether the driver runs the look-ahead through `chain`."""
        return self.chunks != 0

    def send(self, ops, step, j0, j1, after):
        """Once `after` (update stream) fires: transpose the panel, copy it to pinned memory."""
        ops.wait("panel", after)
        start = ops.record("panel")
        ops.panel_to_host(step, j0, j1)
        return start, ops.record("panel")

    def _factor_host(self, ops, step, j0, j1, panel, inv_threshold):
        """LAPACK on the staged panel (F-ordered view of pinned memory, in place); pivots and
        L11^{-1} into the host staging.  Returns (info, use_inverse, norm, t0, t1)."""
        from scipy.linalg.lapack import sgetrf
        jb = j1 - j0
        t0 = time.perf_counter()
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
        return j0 + int(info) if info > 0 else 0, use_inverse, norm, t0, time.perf_counter()

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        t_sync = time.perf_counter()
        ops.host_sync(sent[1])                 # the only host wait: panel s has arrived
        t_synced = time.perf_counter()
        panel = ops.host_panel_view(j0, j1)    # F-ordered (m-j0) x jb view of pinned memory
        info, use_inverse, norm, t0, t1 = self._factor_host(ops, step, j0, j1, panel,
                                                            inv_threshold)
        recv_start = ops.record("panel")
        ops.panel_to_device(step, j0, j1, use_inverse)
        done = ops.record("panel")
        return PanelResult(info, use_inverse, done, recv_start, t0, t1, norm, t_sync, t_synced)

    def chain(self, ops, step, j0, j1, nxt, sent, inv_threshold, pending=None):
        """Factor panel `step` on the host and run the chain to the next panel (nxt, or None
        at the last step): returns (PanelResult, the next panel's send events or None).
        `pending` (callable): enqueues the rest of the previous step's update.

        Panel stream: pivots (and L11^{-1}), then the panel's rows chunk by chunk (2-D copies
        of the column-major staging).  Update stream: the next panel's columns swapped, U12
        of them, then per chunk: its rows into place, its rows of the next panel updated and
        transposed to the next staging.  Send stream: each chunk of the next panel to the
        host as soon as it is ready.  The host waits only for the last one (next step).

        Pre-enqueued (pre_enqueue and a device that can wait on host memory): LAPACK runs in
        a worker thread, and once it has started the main thread enqueues `pending` and the
        chain, behind a panel-stream wait on the host flag that the worker raises once the
        staging holds the factored panel.  U12 then uses the triangular solve (the inverse's
        norm is not known yet); the rest of the update still takes the inverse when its norm
        allows.  Otherwise `pending` is enqueued first and the chain after LAPACK.
        """
        m = ops.shape[0]
        gated = ops.chain_setup() and self.pre_enqueue
        if not gated and pending is not None:
            pending()
        t_sync = time.perf_counter()
        ops.host_sync(sent[1])
        t_synced = time.perf_counter()
        panel = ops.staged_panel(step, j0, j1)
        host = (lambda: self._factor_host(ops, step, j0, j1, panel, inv_threshold))
        if not gated:
            got = host()
            ev = self._enqueue_chain(ops, step, j0, j1, nxt, m, None, got[1])
        else:
            token = step + 1
            threaded = not getattr(ops, "emulated", False)
            started = threading.Event()

            def factor_then_signal():
                started.set()    # the main thread resumes once sgetrf releases the GIL
                try:
                    return host()
                finally:
                    ops.signal_host(token)     # also on failure: never leave streams held

            job, switch = None, sys.getswitchinterval()
            if threaded:
                job = _worker().submit(factor_then_signal)
                started.wait()
                # The worker needs the GIL back after sgetrf: do not let the enqueue below
                # hold it for the default 5 ms.
                sys.setswitchinterval(min(switch, SWITCH_INTERVAL))
            try:
                if pending is not None:
                    pending()
                ev = self._enqueue_chain(ops, step, j0, j1, nxt, m, token, False)
            finally:
                # Emulation: the host factors after the enqueue, so ungated work runs early.
                got = job.result() if job is not None else factor_then_signal()
                sys.setswitchinterval(switch)
        info, use_inverse, norm, t0, t1 = got
        recv_start, done, update_start, sent_next = ev
        return (PanelResult(info, use_inverse, done, recv_start, t0, t1, norm, t_sync,
                            t_synced, update_start), sent_next)

    def _enqueue_chain(self, ops, step, j0, j1, nxt, m, token, use_inverse):
        """The chain's device work (see `chain`); token: the host flag value that releases
        it (None: the panel is factored already and use_inverse known)."""
        rows = chain_rows(j0, j1, m, self.chunks if self.chunks is not None
                          else chain_chunks(m - j0, j1 - j0))
        if token is not None:
            ops.wait_host("panel", token)
        recv_start = ops.record("panel")
        ops.pivots_to_device(step, j0, j1)
        if token is None and use_inverse:
            ops.linv_to_device(step)       # U12 below reads it
        first = ops.record("panel")
        landed = []
        for r0, r1 in rows:
            ops.rows_to_device(step, j0, j1, r0, r1)
            landed.append(ops.record("panel"))
        if token is not None:
            ops.linv_to_device(step)       # for the rest of the update (needed or not)
        done = ops.record("panel")
        ops.wait("update", first)
        update_start = ops.record("update")
        if nxt is not None:
            ops.swap(step, j0, j1, j1, nxt[1], "swap_next")
        send_start = None
        for (r0, r1), ev in zip(rows, landed):
            ops.wait("update", ev)
            ops.place_rows(step, j0, j1, r0, r1)
            if nxt is None:
                continue
            if r0 == j0:   # chunk 0 holds L11
                ops.solve_u12(step, j0, j1, j1, nxt[1], use_inverse)
            q0 = max(r0, j1)
            if r1 > q0:
                ops.update_rows(step, j0, j1, j1, nxt[1], q0, r1)
                ops.stage_rows(step + 1, j1, nxt[1], q0, r1)
                ops.wait("send", ops.record("update"))
                if send_start is None:
                    send_start = ops.record("send")
                ops.rows_to_host(step + 1, j1, nxt[1], q0, r1)
        sent_next = None
        if nxt is not None:
            # The host rewrites its L11^{-1} staging once this fires: copied by then.
            ops.wait("send", done)
            sent_next = (send_start, ops.record("send"))
        return recv_start, done, update_start, sent_next


def chain_chunks(mp, jb):
    """Chunks of a panel of mp x jb floats: about CHAIN_CHUNK_BYTES each."""
    return max(1, min(CHAIN_MAX_CHUNKS, round(4 * mp * jb / CHAIN_CHUNK_BYTES)))


def getrf(ops, panel, nb, lookahead=1, inv_threshold=INV_THRESHOLD, timeline=None):
    """Factor ops.a in place; return (piv, info): piv 0-based absolute int32, info as LAPACK.

    `timeline`, if a list, receives one dict with per-step host and GPU stage times.
    """
    m, n = ops.shape
    k = min(m, n)
    blocks = [(j0, min(j0 + nb, k)) for j0 in range(0, k, nb)]
    info, steps = 0, []
    t_start = time.perf_counter()
    origin = ops.record("update")
    if not blocks:
        piv_rel = ops.finish()
        return np.zeros(0, np.int32), 0
    # Prologue: panel 0 is final from the start; ship it.
    sent = panel.send(ops, 0, *blocks[0], after=origin)
    chained = lookahead and getattr(panel, "chained", False)
    pending = None
    for s, (j0, j1) in enumerate(blocks):
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        rec = {"step": s, "j0": j0, "jb": j1 - j0, "send": sent}
        if chained:
            # 1-5 as one pipelined chain (CpuPanel.chain): panel s up in row chunks, the
            # swaps, U12 and update of the next panel's columns chunk by chunk, the next
            # panel shipped chunk by chunk.  The chain enqueues the previous step's rest
            # (pending) where it costs the host least.
            res, sent = panel.chain(ops, s, j0, j1, nxt, sent, inv_threshold, pending)
            info = info or res.info
            rec.update(res=res, update_start=res.update_start)
            steps.append(rec)
            pending = functools.partial(_chain_rest, ops, s, j0, j1, nxt, n, res, rec)
            continue
        else:
            # 1. Panel s: wait for it on the host, factor it, send it back (panel_stream).
            res = panel.factor(ops, s, j0, j1, sent, inv_threshold)
            info = info or res.info
            # 2. The update stream waits for the factored panel, its pivots and L11^{-1}.
            ops.wait("update", res.done)
            rec.update(res=res, update_start=ops.record("update"))
            # 3. Row interchanges right of the panel (all trailing columns, also beyond k).
            ops.swap(s, j0, j1, j1, n, "swap_right")
            if nxt is not None and lookahead:
                # 4. Look-ahead: U12 and the update of the next panel's columns only.
                ops.update(s, j0, j1, j1, nxt[1], res.use_inverse, "update_next")
                ready = ops.record("update")
                # 5. Ship the next panel (panel_stream); the host factors it at the next step.
                sent = panel.send(ops, s + 1, *nxt, after=ready)
                # 6. The rest of the trailing matrix, while the host factors panel s+1.
                ops.update(s, j0, j1, nxt[1], n, res.use_inverse, "update_rest")
            else:
                # 4'. No look-ahead: the whole trailing update, then ship the next panel.
                ops.update(s, j0, j1, j1, n, res.use_inverse, "update")
                if nxt is not None:
                    sent = panel.send(ops, s + 1, *nxt, after=ops.record("update"))
        # 7. Row interchanges left of the panel (finished columns of L), off the critical path.
        ops.swap(s, j0, j1, 0, j0, "swap_left")
        rec["update_end"] = ops.record("update")
        rec["enqueued"] = time.perf_counter()
        steps.append(rec)
    if pending is not None:
        pending()
    piv_rel = ops.finish()
    wall_ms = (time.perf_counter() - t_start) * 1e3
    # A GPU panel keeps LAPACK's info on the device: read it once, after the last step.
    final_info = getattr(panel, "final_info", None)
    if final_info is not None:
        info = info or final_info(ops)
    # Pivot base: relative to each panel's first row -> absolute row numbers (still 0-based).
    piv = piv_rel.astype(np.int64)
    for j0, j1 in blocks:
        piv[j0:j1] += j0
    if timeline is not None:
        timeline.append(_timeline(ops, origin, t_start, steps, wall_ms, m, n, nb, lookahead,
                                  panel.name))
    return piv.astype(np.int32), info


def _chain_rest(ops, s, j0, j1, nxt, n, res, rec):
    """Step s after its chain: 6. the swaps and update of the columns right of the next
    panel (of the panel, at the last step), 7. the swaps left of the panel."""
    ops.wait("update", res.done)      # the whole panel and L11^{-1} are in place
    c0 = nxt[1] if nxt is not None else j1
    ops.swap(s, j0, j1, c0, n, "swap_rest")
    ops.update(s, j0, j1, c0, n, res.use_inverse, "update_rest")
    ops.swap(s, j0, j1, 0, j0, "swap_left")
    rec["update_end"] = ops.record("update")
    rec["enqueued"] = time.perf_counter()


def _timeline(ops, origin, t_start, steps, wall_ms, m, n, nb, lookahead, panel_name):
    """Per-step times (ms from the start): host panel, transfers, GPU updates, and their sums.

    Host clock (ms from the start): host_start/host_end around the host's panel work,
    sync_start/sync_end around its wait for the panel, enqueued when the step's enqueue ends;
    gap_ms: the host's idle time from this panel's end to the next one's start.  Device clock
    (ms from `origin`): send_start, update_start, update_end; span lengths send_ms / recv_ms
    (panel to / from the host; with the chain, from the first to the last chunk's copy).
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
        })
    host = sum(r["host_ms"] for r in rows)
    transfer = sum(r["send_ms"] + r["recv_ms"] for r in rows)
    update = sum(r["update_ms"] for r in rows)
    gpu = update + transfer
    return {"m": m, "n": n, "nb": nb, "lookahead": lookahead, "panel": panel_name,
            "backend": type(ops).__name__, "wall_ms": wall_ms, "host_panel_ms": host,
            "transfer_ms": transfer, "update_ms": update, "gpu_ms": gpu,
            "gap_ms": sum(r["gap_ms"] for r in rows),
            "wall_over_max": wall_ms / max(host, gpu, 1e-9), "steps": rows}
