"""LU on several GPUs of one host: the 1-D block column-cyclic layout of Volkov & Demmel.

Column block b (nb columns) lives on device b % P, stored there row-major with the device's
other columns (gpulinalg/_distribution.py): row interchanges stay local, no device sends data
for pivoting.  Step s of the blocked right-looking LU (gpulinalg/_lu.py, one device):

    owner o = s % P   factors panel s on its panel stream (GPU or CPU panel, as `panel=` says)
    every other d     copies the factored panel (rows j0:, pivots, L11^{-1}) from o: receive,
                      a peer copy on d's comm stream (cudaMemcpy2DAsync, unified addressing)
    every d           swaps its columns right of the panel, updates them (U12, A22 -= L21 U12)
                      and swaps its columns left of the panel, on its update stream
    look-ahead        the owner of panel s+1 updates that panel's columns first and factors it
                      on its panel stream while every device updates the rest (on 3 or
                      more GPUs, over the last PANEL_FIRST_COLUMNS columns: the owner
                      updates the rest of its own columns after that panel)

Around the steps: the columns go to the devices in chunks of blocks (1, 1, 2, 4, ... per
device; all but the first two enqueued after step 0's panel copies, which would otherwise
wait behind them), and the first steps start as soon as their columns are there; over the
last TAIL_COLUMNS columns the panels are half a block wide; a GPU-resident matrix
is its own "home": each panel's columns are copied back once the other devices have their
copies of the panel, and the row
interchanges left of the panels (final columns of L) are applied there, once per step,
instead of on every device -- so scatter and gather overlap the factorization.

All of it is asynchronous: events order the streams, also across devices (a stream may wait
on another device's event); the host waits only where a CPU panel must arrive.  Hazards the
events cover: a receiver's comm stream writes the buffer of parity s % 2 only after its update
stream is done with step s - 2; the owner's update stream swaps rows of a factored panel (the
swaps of later steps, left of their panels) only after every receiver has copied it.

Distribution (`_distribution.panel_schedule`: who does what, in which order) is kept apart
from transport (the ops' `receive`): a one-process-per-GPU version would keep the schedule
and replace `receive` with a send/receive pair.  The CPU tests run this driver on several
NumpyOps ("virtual devices", emulated streams and events) and compare with LAPACK.
"""

import collections
import contextlib
import functools
import gc
import time

import numpy as np

from .distribution import ColumnCyclic, gather, panel_schedule
from ..core.host_io import host_transfers
from .driver import INV_THRESHOLD, absolute_pivots, mark, panel_blocks

F32 = np.float32
_DEFAULT = 4   # cudaMemcpyKind: unified addressing finds both devices


# PANEL_FIRST: a GPU panel (no host wait) is enqueued as soon as its columns are up to date,
# and its owner updates the rest of its columns only after it.  Off by default: the panel
# stream has the device's greatest priority, so the leaf's blocks get SMs before the SGEMM's
# that runs beside it, and the SGEMM keeps the rest (H200 x4, benchmarks/lu_multi_ab.py, same
# run: 32768 on 2 / 4 GPUs 373.4 / 227.5 ms with it, 361.8 / 230.0 without; 49152:
# 1109.9 / 616.6 against 1090.2 / 613.7).  It won (1.57x -> 1.74x on 2 GPUs) while the panel
# stream had no priority: the panel then waited for the SGEMM beside it.  (A CPU panel blocks
# the host, so it is factored at the start of its step, after everything before it.)
PANEL_FIRST = False
# ... but on PANEL_FIRST_MIN_DEVICES or more GPUs, panel first once at most
# PANEL_FIRST_COLUMNS columns are left right of the next panel (0: never).  There the
# panels' chain, not the updates, sets the pace, and the leaves and the small kernels
# between them waited for SMs held by the owner's own trailing SGEMM beside them (inside a
# 256-wide panel at ~9700 rows: 18-22 us between kernels, its rank-128 product 67 us;
# benchmarks/lu_trace.py 32768 --devices 4 --precision fp32, thirty-fifth session).  H200
# x4, 32768, FP32 updates (benchmarks/lu_multi_ab.py 32768 --devices 2,4 --nb 0 --precision
# fp32 --vary PANEL_FIRST_COLUMNS=0,8192,16384,32768,0,8192,16384,32768): 4 GPUs 185.1 /
# 186.1 ms without, 185.2 / 184.6, 182.4 / 182.2 and 185.9 / 184.8 with 8192 / 16384 /
# 32768; 2 GPUs 303.5 / 305.4 without, 305.8 / 305.6, 311.3 / 311.0, 326.0 / 325.7 (two GPUs
# each have half the trailing update to do beside the chain: it no longer hides the wait).
PANEL_FIRST_COLUMNS = 16384
PANEL_FIRST_MIN_DEVICES = 3
# Narrower panels at the end: with nb >= TAIL_MIN_NB, the panels are nb / 2 wide once at most
# TAIL_COLUMNS columns are left (each a half of a distribution block, so two consecutive
# panels share an owner there).  The trailing update no longer hides the panels' chain in
# those steps, and a narrower panel shortens it.  H200 x2, 32768, nb = 512, FP32 updates
# (benchmarks/lu_multi_ab.py 32768 --devices 2 --nb 512 --precision fp32 --vary TAIL_NB=0,256
# --vary TAIL_FROM=8192,12288,16384, twenty-seventh session, the constants of that A/B):
# 319.8 ms without, 317.5 / 314.5 / 314.7 with 256-wide panels from 8192 / 12288 / 16384
# columns left (128-wide: 316.6 / 314.1 / 316.4; a further 128-wide stage from 4096 or
# 8192 left gained nothing measurable); 49152 981.1 -> 972.0 ms; 3xTF32 updates 193.7 -> 190.6.
TAIL_COLUMNS = 12288
TAIL_MIN_NB = 512


def _collect(home, s, j0, j1, owner, done, receives):
    """The home takes panel s's columns, every row, from its owner's ops once the panel is
    factored (`done`) and the receivers' copies `receives` have landed, then applies the
    panel's row interchanges left of it.  The columns are final but for the left swaps of
    later panels, which the home applies as they come.

    After the receives, not beside them: a take moves every row of the panel's columns
    (32 MB at 32768 x 256) through the same copy engines and links as the receivers' copies
    of the panel, which are on the chain to the next panel.  H200 x4, FP32 updates, taken
    at the panel against after its receives (benchmarks/lu_multi_ab.py N --devices 2,4 --nb 0
    --precision fp32, twenty-ninth session, alternating): 32768 on 4 GPUs 198.0 / 198.5 ->
    194.6 / 193.9 ms, on 2 GPUs 311.1 / 311.2 -> 310.8 / 310.6; 49152 on 4 GPUs 565.5 ->
    554.8, on 2 GPUs 970.9 -> 968.7."""
    for got in receives:
        home.wait("comm", got)
    got = home.take(j0, j1, owner, done, piv=(j0, j1))
    home.wait("update", got)
    home.swap(s, j0, j1, 0, j0, "swap_left")


def multi_panel_blocks(k, nb):
    """The panels of the distributed LU: panel_blocks with the narrower tail above."""
    return panel_blocks(k, nb, tails=((nb // 2, TAIL_COLUMNS),) if nb >= TAIL_MIN_NB else ())


# The cyclic garbage collector paused while getrf_multi enqueues (PAUSE_GC = 1): below 32768
# the host's enqueue bounds the factorization on several GPUs, and it creates ~1000 objects a
# step (events, tuples, views), enough to trigger collections of every generation mid-loop.
PAUSE_GC = 1
# Events without timing unless a timeline reads them (1.26 against 2.22 us a record on the
# H100, benchmarks/panel_launch_host.py); 0: every event timed, as before (A/B switch).
UNTIMED_EVENTS = 1


@contextlib.contextmanager
def _gc_paused(on):
    """gc.disable() for the block when `on` and the collector was enabled; restored after."""
    paused = bool(on) and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def getrf_multi(*args, **kwargs):
    """Factor the distributed matrix in place; return (piv, info) as `_lu.getrf`
    (`_getrf_multi`, with the collector paused: PAUSE_GC)."""
    with _gc_paused(PAUSE_GC):
        return _getrf_multi(*args, **kwargs)


def _getrf_multi(devs, panels, dist, nb, lookahead=1, inv_threshold=INV_THRESHOLD,
                 panel_first=None, timeline=None, arrivals=None, home=None, received=None):
    """Factor the distributed matrix in place; return (piv, info) as `_lu.getrf`.

    devs[d]: the device steps of device d on its columns (CupyOps or NumpyOps, built with
    cols=dist.bound(d), receive=True); panels[d]: its panel object (CpuPanel or GpuPanel).
    `timeline`, if a list, receives per-device sums (update stream busy, own panels, wall).
    panel_first: None for PANEL_FIRST.
    arrivals: None (every column in place), or per device a list of (c0, c1, event) in
    column order: device d's columns of the global range [c0, c1) are in place once `event`
    has fired (a pipelined upload).  Step 0 touches every column: its swaps and updates are
    cut at these ranges, each piece waiting only for its own columns.
    received: None, or a callable run once, after step 0's panel copies are enqueued and
    before anything waits on an arrival it records (the rest of a pipelined upload).
    home: None, or ops over the whole matrix (Identity columns) that collects the result:
    each column block is copied there (`take`) as soon as its panel is factored, and the row
    interchanges left of the panels are applied there, once, instead of on every device (a
    block is final on its device after its own step).  The caller waits on `home.finish()`.
    """
    panel_first = PANEL_FIRST if panel_first is None else panel_first
    m = devs[0].shape[0]
    k = min(m, dist.n)
    blocks = multi_panel_blocks(k, nb)
    schedule = panel_schedule(k, nb, dist, lookahead, blocks)
    pending = _Pending(arrivals, len(devs))
    if not blocks:
        devs[0].finish()
        return np.zeros(0, np.int32), 0
    t_start = time.perf_counter()
    for dev in devs + ([home] if home is not None else []):
        # events the host can time only for the timeline (UNTIMED_EVENTS: A/B switch)
        dev.timed = timeline is not None or not UNTIMED_EVENTS
    origin = [mark(dev, "update") for dev in devs]
    o = dist.owner(0)
    for c0, c1, waits in pending.pieces(o, 0, blocks[0][1]):   # panel 0's columns in place
        for ev in waits:
            devs[o].wait("update", ev)
    sent = panels[o].send(devs[o], 0, *blocks[0], after=devs[o].record("update"))
    unguarded = [[] for _ in devs]   # receivers' copies of d's panels, not yet waited on by d
    copies = {}                      # step -> the receivers' copies of that step's panel
    early = None                     # the next panel, when already enqueued (panel_first)
    marks = [[] for _ in devs]       # timeline: (step, start, end) events per device
    panel_marks = [[] for _ in devs]
    info = 0
    for s, ops in enumerate(schedule):
        j0, j1 = blocks[s]
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        shipped = nxt is None
        starts = {}
        collect = home is not None   # panel s's columns still to be collected on the home
        for d, op, (c0, c1) in ops:
            dev = devs[d]
            if op not in ("factor", "receive"):
                if received is not None:
                    received()   # the rest of the upload, behind step 0's panel copies
                    received = None
                if collect:      # behind this step's receives (_collect)
                    _collect(home, s, j0, j1, devs[o], res.done, copies.get(s, ()))
                    collect = False
            if op == "factor":
                res, early = early or panels[d].factor(dev, s, j0, j1, sent, inv_threshold), None
                o, info = d, info or res.info
                panel_marks[d].append((s, res.recv_start, res.done))
                dev.wait("update", res.done)
            elif op == "receive":
                got = dev.receive(s, j0, j1, devs[o], res.done, res.use_inverse)
                dev.wait("update", got)
                copies.setdefault(s, []).append(got)
                if home is None:   # the owner swaps left of later panels in these rows
                    unguarded[o].append(got)
            elif op == "swap_right":
                continue   # done with the update of the same columns, piece by piece (below)
            elif op == "swap_left":
                if home is not None:   # done once, on the home (above)
                    continue
                # These rows of the owner's earlier panels are being copied elsewhere: wait.
                for got in unguarded[d]:
                    dev.wait("update", got)
                unguarded[d].clear()
                dev.swap(s, j0, j1, c0, c1, op)
            else:   # update, update_next, update_rest
                # The swaps right of the panel cover the same columns as the updates: each
                # piece is swapped just before it is updated (columns still arriving, and the
                # rest of the swaps after the next panel has been shipped).
                for p0, p1, waits in pending.pieces(d, c0, c1):
                    for ev in waits:
                        dev.wait("update", ev)
                    dev.swap(s, j0, j1, p0, p1, "swap_right")
                    dev.update(s, j0, j1, p0, p1, res.use_inverse, op)
                if not shipped and d == dist.owner(nxt[0]) and op != "update_rest":
                    # The next panel's columns are final: ship / factor it (panel stream),
                    # once panel s - 1's receivers have copied its L11^{-1}: panel s + 1 is
                    # staged into the same parity's buffer (d may own both in the tail).
                    for got in copies.pop(s - 1, ()):
                        dev.wait("update", got)
                    sent = panels[d].send(dev, s + 1, *nxt, after=dev.record("update"))
                    shipped = True
                    first = panel_first or (len(devs) >= PANEL_FIRST_MIN_DEVICES
                                            and dist.n - nxt[1] <= PANEL_FIRST_COLUMNS)
                    if first and not panels[d].host_wait:
                        early = panels[d].factor(dev, s + 1, *nxt, sent, inv_threshold)
                        dev.wait("update", early.done)
            if timeline is not None and d not in starts:
                starts[d] = dev.record("update")
        assert shipped, "the schedule never updated the next panel's columns"
        if collect:
            _collect(home, s, j0, j1, devs[o], res.done, copies.get(s, ()))
        for d, dev in enumerate(devs):
            end = dev.end_step(s)
            if timeline is not None and d in starts:
                marks[d].append((s, starts[d], end))
    if received is not None:   # step 0 updated nothing: record the deferred chunks' events
        received()
    assert pending.empty(), "columns arrived that no step waited for"
    if home is not None:   # columns right of the last panel (m < n) are final now
        for d, dev in enumerate(devs):
            for c0, c1 in dist.blocks(d):
                if c1 > k:
                    home.take(max(c0, k), c1, dev, dev.record("update"))
    enqueued = time.perf_counter()
    pivs = [dev.finish() for dev in devs]
    for d, panel in enumerate(panels):   # GPU panels keep LAPACK's info on their device
        final_info = getattr(panel, "final_info", None)
        found = final_info(devs[d]) if final_info is not None else 0
        if found and (not info or found < info):
            info = found
    if timeline is not None:
        timeline.append(_timeline(devs, origin, marks, panel_marks))
        timeline[-1]["enqueue_ms"] = (enqueued - t_start) * 1e3
    # Every device holds every pivot (its own panels' and the received ones): take device 0's.
    return absolute_pivots(pivs[0], blocks), info


class _Pending:
    """Per device, the column ranges still arriving: (c0, c1, event), in column order."""

    def __init__(self, arrivals, ndev):
        self.queues = [collections.deque(a) for a in (arrivals or [()] * ndev)]

    def pieces(self, d, c0, c1):
        """The global range [c0, c1) of device d cut where its pending ranges end: a list of
        (p0, p1, events to wait for before touching columns [p0, p1)); one piece, with no
        event, once everything has arrived.  Each range is handed out once (the device's
        update stream keeps the order for later steps)."""
        q, out, waits, start = self.queues[d], [], [], c0
        while q and q[0][0] < c1:
            _, a1, ev = q.popleft()
            waits.append(ev)
            end = min(a1, c1)
            if end > start:
                out.append((start, end, waits))
                waits, start = [], end
        if start < c1 or waits:
            out.append((start, c1, waits))
        return out

    def empty(self):
        return not any(self.queues)


def _timeline(devs, origin, marks, panel_marks):
    """Per device: wall (first to last event), the update stream's busy time (sum over steps
    from its first operation to its end; includes time a starved SGEMM waits for SMs), its
    own panels' time on the panel stream, and per step [s, start, end] of its update stream
    (`steps`) and of its own panels (`panel_steps`), in ms from its origin (the devices'
    origins are recorded at the same host instant, while every device is idle)."""
    rows = []
    for d, dev in enumerate(devs):
        el = dev.elapsed_ms
        spans = lambda ms: [[s, el(origin[d], a), el(origin[d], b)] for s, a, b in ms]
        steps, panels = spans(marks[d]), spans(panel_marks[d])
        rows.append({
            "device": d,
            "wall_ms": steps[-1][2] if steps else 0.0,
            "update_ms": sum(b - a for _, a, b in steps),
            "panel_ms": sum(b - a for _, a, b in panels),
            "panels": len(panels), "steps": steps, "panel_steps": panels})
    return {"devices": rows}


def factor_host(a, nb, ndev, make_panel, lookahead, inv_threshold, collect=True, out=None):
    """The distributed LU on `ndev` virtual devices (NumpyOps): a is factored in place
    (float32, C-order), or into `out` (same shape, any content; `a` is then only read);
    returns (piv, info).  The CPU tests' model of factor_devices: the devices' columns
    arrive chunk by chunk on emulated streams (a missing wait reads NaN), and with `collect`
    (as for a GPU-resident matrix) `out` (default `a`) is the home that takes the finished
    blocks and the left swaps; without, the devices swap and are gathered into it."""
    from ..testing.emulation import NumpyOps
    m, n = a.shape
    dist = ColumnCyclic(n, nb, ndev)
    devs, arrivals, rests = [], [], []

    def copier(d):   # copy(i, chunk, ev) for _upload, on device d's emulated scatter stream
        def copy(i, chunk, ev):
            for c0, c1 in chunk:
                l0, l1 = dist.local_range(d, c0, c1)
                devs[d].copy_in(devs[d].a[:, l0:l1], a[:, c0:c1])
            devs[d].record("scatter", ev)
        return copy

    for d in range(ndev):
        devs.append(NumpyOps(np.full((m, dist.local_width(d)), np.nan, F32), nb,
                             cols=dist.bound(d), receive=True, npiv=min(m, n)))
        event = functools.partial(devs[d].event, "scatter")
        got, rest = _upload(dist.chunks(d), event, copier(d))
        arrivals.append(got)
        rests.append(rest)

    out = a if out is None else out
    home = NumpyOps(out, nb, npiv=min(m, n)) if collect else None
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold, arrivals=arrivals, home=home,
                            received=lambda: [rest() for rest in rests])
    if home is not None:
        home.finish()
    else:
        gather([dev.a for dev in devs], dist, out)
    return piv, info


def share_bytes(m, n, nb, dist, d):
    """Device bytes device d needs: its columns and its workspace (with the receive buffers)."""
    from .steps import workspace_bytes
    nd = dist.local_width(d)
    return 4 * m * nd + workspace_bytes(m, nd, nb, receive=True)


def check_memory(cp, m, n, nb, dist, device_ids, home=None):
    """MemoryError with the numbers unless every device has room for its share (and the
    home device, when it is one of them, for the home's workspace too)."""
    from .steps import workspace_bytes
    gib = 2.0 ** 30
    for d, dev_id in enumerate(device_ids):
        need = share_bytes(m, n, nb, dist, d)
        if dev_id == home:
            need += workspace_bytes(m, n, nb)
        with cp.cuda.Device(dev_id):
            free, total = cp.cuda.Device().mem_info
            free += cp.get_default_memory_pool().free_bytes()
        if need > free:
            raise MemoryError(
                f"LU of a {m}x{n} float32 matrix on {len(device_ids)} GPUs needs "
                f"{need / gib:.2f} GiB on GPU {dev_id} (its {dist.local_width(d)} columns and "
                f"workspace) but only {free / gib:.2f} GiB of {total / gib:.2f} GiB are free")


def factor_devices(src, device_ids, nb, make_panel, lookahead, inv_threshold, precision,
                   timeline=None, out=None, beside=None):
    """The distributed LU on the GPUs `device_ids`.

    src: a C-contiguous NumPy matrix of float32 or a type that converts to it exactly
    (uploaded by `_host_io.host_transfers`; the factors come back into `out`, a C-contiguous float32
    NumPy matrix of its shape, default src itself when float32) or a C-contiguous float32
    CuPy matrix (factored in place, or into `out`).  Returns (piv, info).

    A CuPy src: the columns go to the devices chunk by chunk (`_scatter`) and the
    factorization starts with the first chunk; `out` (default src: a C-contiguous float32
    CuPy matrix of src's shape on src's device, any content) is the home (`getrf_multi`):
    each block comes back as soon as its panel is factored and the left swaps are applied
    there, so little is left to copy after the last step.  Every element of `out` is
    written and src is only read, so an input the caller keeps needs no copy of its own
    (4.3 GB, ~2 ms on an H200 at n = 32768).  `beside`: None, or a callable run on src's
    device once the factorization's streams are set up and before its steps are enqueued:
    work that reads src on the current stream beside the factorization (the input's
    finite check), not ahead of it.  A NumPy src goes to the devices before the
    factorization and comes back after it (`_host_io.host_transfers`: pinned staging, all devices at
    once).  `timeline`, if a list, receives getrf_multi's record plus scatter_ms (upload:
    first to last chunk on the slowest device, or the host transfer), factor_ms (from the
    start until every device is done) and gather_ms (what is left after that: the home's last
    blocks and swaps, or the host transfer).
    """
    from ..core.backend import cupy
    from .steps import CupyOps
    cp = cupy()
    m, n = src.shape
    dist = ColumnCyclic(n, nb, len(device_ids))
    on_host = isinstance(src, np.ndarray)
    out = src if out is None else out
    check_memory(cp, m, n, nb, dist, device_ids, home=None if on_host else src.device.id)
    _enable_peer_access(cp, device_ids)
    t0 = time.perf_counter()
    if on_host:   # complete on return: every column is in place
        shares, arrivals = host_transfers(cp, src, dist, device_ids), None
        rest = None
        scatter = (time.perf_counter() - t0) * 1e3
    else:
        shares, arrivals, first, rest = _scatter(cp, src, dist, device_ids)
    devs = []
    for d, (dev_id, x) in enumerate(zip(device_ids, shares)):
        with cp.cuda.Device(dev_id):
            devs.append(CupyOps(x, nb, precision, cols=dist.bound(d), device=dev_id,
                                receive=True, npiv=min(m, n)))
    home = None
    if not on_host:
        with cp.cuda.Device(src.device.id):
            home = CupyOps(out, nb, precision, device=src.device.id, npiv=min(m, n))
            if beside is not None:   # after every stream's fork from the current stream
                beside()
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold, timeline=timeline, arrivals=arrivals, home=home,
                            received=rest)
    t1 = time.perf_counter()
    if home is not None:
        home.finish()
    else:
        host_transfers(cp, out, dist, device_ids, shares)
    t2 = time.perf_counter()
    if timeline is not None and not on_host:
        scatter = 0.0
        for dev_id, ev0, got in zip(device_ids, first, arrivals):
            with cp.cuda.Device(dev_id):
                for _, _, ev in got:
                    scatter = max(scatter, cp.cuda.get_elapsed_time(ev0, ev))
    if timeline is not None:
        timeline[-1].update(m=m, n=n, nb=nb, ndev=len(device_ids), scatter_ms=scatter,
                            factor_ms=(t1 - t0) * 1e3, gather_ms=(t2 - t1) * 1e3)
    return piv, info


def _enable_peer_access(cp, device_ids):
    """Let every pair of devices address each other (direct NVLink/PCIe copies); pairs that
    cannot still copy, staged by the driver."""
    rt = cp.cuda.runtime
    for a in device_ids:
        for b in device_ids:
            if a != b and rt.deviceCanAccessPeer(a, b):
                with cp.cuda.Device(a):
                    try:
                        rt.deviceEnablePeerAccess(b)
                    except rt.CUDARuntimeError as e:   # already enabled: fine
                        if "PeerAccessAlreadyEnabled" not in str(e):
                            raise


def _copy_blocks(cp, dist, d, blocks, matrix, share, stream):
    """Copy the column blocks `blocks` (global ranges, device d's) of the whole row-major
    matrix into d's share, one 2-D copy per block (all rows of the block's width; the copy
    engines, no kernel; both CuPy arrays, on any devices); enqueued on `stream`."""
    m, n, nd = matrix.shape[0], dist.n, share.shape[1]
    for c0, c1 in blocks:
        src, dst = matrix.data.ptr + 4 * c0, share.data.ptr + 4 * dist.count_before(d, c0)
        cp.cuda.runtime.memcpy2DAsync(dst, 4 * nd, src, 4 * n, 4 * (c1 - c0), m, _DEFAULT,
                                      stream.ptr)


# Side streams per device for the scatter from a GPU: consecutive chunks alternate between
# them, so that several copy engines pull at once.
SCATTER_STREAMS = 2
# Chunks per device enqueued before the factorization starts (0: all of them); the rest go
# after step 0's panel copies (getrf_multi's `received`).  A panel copy enqueued behind the
# whole upload waited for it: on two H200s at 32768 the second GPU began step 0 at 8.8 ms,
# its panel factored at 2.1 ms.  With the first 2 chunks (3 blocks) ahead: at 2.1 ms, and
# the LU 315.0 -> 311.3 ms (benchmarks/lu_multi_ab.py 32768 --devices 2 --nb 512 --precision
# fp32 --vary SCATTER_FIRST=0,1,2 --steps FILE, twenty-seventh session; 1: 312.2 ms).
SCATTER_FIRST = 2
# The deferred chunks go the last device's first: the copies out of the source's device run
# one after another at its link's rate (~370 GB/s on an H200: 6.5 ms for a device's share
# at 49152), and device d updates steps 0 .. d - 2 on all its columns before its first
# panel (step d), so the last device needs its columns soonest.  In device order, the 4th
# device of an H200 x4 idled from 8.9 to 22.6 ms waiting for them and panel 3 began at ~50
# ms (49152, nb = 512; benchmarks/lu_trace.py 49152 --devices 4 --precision fp32).
SCATTER_REVERSED = True


def _upload(chunks, event, copy):
    """One device's pipelined upload: per chunk i an event ev = event() and copy(i, chunk, ev)
    (the chunk's copies, then ev recorded behind them), at once for the first SCATTER_FIRST
    chunks, by the returned rest() for the others.  Returns (arrivals [(c0, c1, ev)] as
    getrf_multi takes them, rest)."""
    got, later = [], []
    for i, chunk in enumerate(chunks):
        ev = event()
        got.append((chunk[0][0], chunk[-1][1], ev))
        if SCATTER_FIRST and i >= SCATTER_FIRST:
            later.append((i, chunk, ev))
        else:
            copy(i, chunk, ev)

    def rest():
        for job in later:
            copy(*job)
    return got, rest


def _scatter(cp, src, dist, device_ids, streams=None):
    """Each device's columns of src (CuPy, on any device), C-contiguous on that device,
    copied chunk by chunk (`ColumnCyclic.chunks`, `_upload`) on side streams of the device,
    after the source's pending work.  Returns (shares, arrivals, starts, rest): arrivals[d]
    the (c0, c1, event) of each chunk, as getrf_multi takes them; rest() enqueues the
    deferred chunks (getrf_multi's `received`); starts[d] an event before the first copy
    (timeline)."""
    m, streams = src.shape[0], streams or SCATTER_STREAMS
    with cp.cuda.Device(src.device.id):    # an event of the source device
        ready = cp.cuda.get_current_stream().record()
    shares, arrivals, starts, rests = [], [], [], []
    for d, dev_id in enumerate(device_ids):
        with cp.cuda.Device(dev_id):
            x = cp.empty((m, dist.local_width(d)), np.float32)
            sides = [cp.cuda.Stream(non_blocking=True) for _ in range(streams)]
            sides[0].wait_event(ready)
            start = sides[0].record()
            for side in sides[1:]:
                side.wait_event(start)
            starts.append(start)
            got, rest = _upload(dist.chunks(d), cp.cuda.Event,
                                _chunk_copier(cp, dist, d, dev_id, src, x, sides))
            shares.append(x)
            arrivals.append(got)
            rests.append(rest)
    order = rests[::-1] if SCATTER_REVERSED else rests
    return shares, arrivals, starts, lambda: [rest() for rest in order]


def _chunk_copier(cp, dist, d, dev_id, src, share, sides):
    """copy(i, chunk, ev) for _upload: device d's chunk i on side stream i % len(sides)."""
    def copy(i, chunk, ev):
        side = sides[i % len(sides)]
        with cp.cuda.Device(dev_id):
            _copy_blocks(cp, dist, d, chunk, src, share, side)
            ev.record(side)
    return copy
