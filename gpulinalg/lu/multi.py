"""LU on several GPUs of one host: the 1-D block column-cyclic layout of Volkov & Demmel.

Column block b (nb columns) lives on device b % P, stored there row-major with the device's
other columns (gpulinalg/lu/distribution.py): row interchanges stay local, no device sends
data for pivoting.  Step s of the blocked right-looking LU (gpulinalg/lu/driver.py on one
device):

    owner o = s % P   factors panel s on its panel stream (GPU or CPU panel, as `panel=` says)
    every other d     copies the factored panel (rows j0:, pivots, L11^{-1}) from o: the ops'
                      `receive`, a peer copy on d's comm stream (cudaMemcpy2DAsync, unified
                      addressing)
    every d           swaps its columns right of the panel, updates them (U12, A22 -= L21 U12)
                      and swaps its columns left of the panel, on its update stream
    look-ahead        the owner of panel s+1 updates that panel's columns first and factors it
                      on its panel stream while every device updates the rest (on at least
                      `panel_first_min_devices` GPUs, over the last `panel_first_columns`
                      columns: the owner updates the rest of its own columns after that panel)

Around the steps: the columns go to the devices in chunks (gpulinalg/lu/transfers.py) and
the first steps start as soon as their columns are there; over the last `tail_columns`
columns the panels are half a block wide (for nb >= `tail_min_nb`); a GPU-resident matrix
is its own "home": each panel's columns are copied back once the other devices have their
copies of the panel, and the row interchanges left of the panels (final columns of L) are
applied there, once per step, instead of on every device -- so scatter and gather overlap
the factorization.  The tuning values named here come from gpulinalg/tuning.py, read once
per factorization.

All of it is asynchronous: events order the streams, also across devices (a stream may wait
on another device's event); the host waits only where a CPU panel must arrive.  Hazards the
events cover: a receiver's comm stream writes the buffer of parity s % 2 only after its update
stream is done with step s - 2; the owner's update stream swaps rows of a factored panel (the
swaps of later steps, left of their panels) only after every receiver has copied it.

Distribution (`distribution.panel_schedule`: who does what, in which order) is kept apart
from transport (the ops' `receive`): a one-process-per-GPU version would keep the schedule
and replace `receive` with a send/receive pair.  The CPU tests run this driver on several
NumpyOps (gpulinalg/testing/multi.py: "virtual devices", emulated streams and events) and
compare with LAPACK.
"""

import collections
import contextlib
import gc
import time

import numpy as np

from .. import tuning
from ..core.device import require_memory
from ..core.element import F32, element as element_of
from .distribution import ColumnCyclic, panel_schedule
from .driver import INV_THRESHOLD, absolute_pivots, mark, panel_blocks
from .steps import CupyOps, workspace_bytes
from .transfers import host_transfers, scatter_from_gpu


def multi_panel_blocks(k, nb, table):
    """The panels of the distributed LU: panel_blocks, nb / 2 wide over the last
    table.tail_columns columns when nb >= table.tail_min_nb (each a half of a distribution
    block: two consecutive panels share an owner there; a narrower panel shortens the
    panels' chain, which the trailing update no longer hides)."""
    tails = ((nb // 2, table.tail_columns),) if nb >= table.tail_min_nb else ()
    return panel_blocks(k, nb, tails=tails)


@contextlib.contextmanager
def _gc_paused():
    """The cyclic collector off for the block (if it was on), restored after: the enqueue
    creates many objects a step (events, tuples, views), enough to trigger collections
    mid-loop, and the host's enqueue bounds the factorization on several GPUs."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def getrf_multi(devs, panels, dist, nb, lookahead=1, inv_threshold=INV_THRESHOLD,
                timeline=None, arrivals=None, home=None, received=None, table=None,
                final=None):
    """Factor the distributed matrix in place; return (piv, info) as lu/driver.getrf.

    devs[d]: the device steps of device d on its columns (CupyOps or NumpyOps, built with
    cols=dist.bound(d), receive=True); panels[d]: its panel object (CpuPanel or GpuPanel).
    `timeline`, if a list, receives per-device sums (update stream busy, own panels, wall).
    arrivals, received, home, table, final: as `enqueue_multi`.  The caller waits on
    `home.finish()`.
    """
    t_start = time.perf_counter()
    run = enqueue_multi(devs, panels, dist, nb, lookahead, inv_threshold, timeline is not None,
                        arrivals, home, received, table, final)
    if run is None:
        devs[0].finish()
        return np.zeros(0, np.int32), 0
    enqueued = time.perf_counter()
    piv, info = run.result()
    if timeline is not None:
        timeline.append(_timeline(devs, run.origin, run.marks, run.panel_marks, run.host_s))
        timeline[-1].update(enqueue_ms=(enqueued - t_start) * 1e3,
                            enqueue_home_ms=run.host_s["home"] * 1e3,
                            enqueue_other_ms=run.host_s["other"] * 1e3)
    return piv, info


def enqueue_multi(devs, panels, dist, nb, lookahead=1, inv_threshold=INV_THRESHOLD,
                  timed=False, arrivals=None, home=None, received=None, table=None,
                  final=None):
    """Enqueue every step of the distributed factorization (no host wait with GPU panels, so
    also inside a CUDA graph capture: lu/multi_graph.py); returns the `_Steps` that hold
    what the steps left (its `result()` waits and gives (piv, info)), or None when there is
    no panel.

    timed: events that can be timed (the timeline's marks: `run.origin`, one per device
    before its first step, `run.marks`, `run.panel_marks`).
    arrivals: None (every column in place), or per device a list of (c0, c1, event) in
    column order: device d's columns of the global range [c0, c1) are in place once `event`
    has fired (a pipelined upload).  Step 0 touches every column: its swaps and updates are
    cut at these ranges, each piece waiting only for its own columns.
    received: None, or a callable run once, after step 0's panel copies are enqueued and
    before anything waits on an arrival it records (the rest of a pipelined upload).
    home: None, or ops over the whole matrix (Identity columns) that collects the result:
    each column block is copied there (`take`) as soon as its panel is factored, and the row
    interchanges left of the panels are applied there, once, instead of on every device (a
    block is final on its device after its own step).
    table: the tuning table (default: the one in force).  The steps are enqueued with the
    cyclic collector paused.
    final: None, or final(event, r0, r1, c0, c1), told (with a home) of each piece of the
    home that no later step changes: rows [r0, r1) of columns [c0, c1) are the result once
    `event` (of the home's device) has fired.  The pieces cover the matrix once: at panel
    s's take its columns above it, after its left swaps its rows left of and in it, the
    columns right of the last panel as they come, the rows below the last panel at the end.
    """
    table = tuning.current() if table is None else table
    k = min(devs[0].shape[0], dist.n)
    blocks = multi_panel_blocks(k, nb, table)
    if not blocks:
        return None
    with _gc_paused():
        run = _Steps(devs, panels, dist, blocks, inv_threshold, home, arrivals, received,
                     timed, table, final)
        run.first_panel()   # panel 0 on its way to its owner's panel stream
        for s, ops in enumerate(panel_schedule(k, nb, dist, lookahead, blocks)):
            run.step(s, ops)   # factor, receive, swap and update, in the schedule's order
        run.last_columns(k)
    return run


class _Steps:
    """The distributed factorization while its steps are enqueued: the devices, their
    panels, and what one step hands on to the next."""

    def __init__(self, devs, panels, dist, blocks, inv_threshold, home, arrivals, received,
                 timed, table, final):
        self.devs, self.panels, self.dist, self.blocks = devs, panels, dist, blocks
        self.inv_threshold, self.home, self.received = inv_threshold, home, received
        self.final = final
        self.timed = timed
        for dev in devs + ([home] if home is not None else []):
            dev.timed = timed   # events untimed (cheaper) unless a timeline reads them
        self.origin = [mark(dev, "update") for dev in devs]   # timeline: each device's zero
        self.pending = _Pending(arrivals, len(devs))
        # the tail rule: on enough GPUs, the next panel first once this few columns are left
        self.first_columns = (table.panel_first_columns
                              if len(devs) >= table.panel_first_min_devices else None)
        self.owner = dist.owner(0)   # the owner of the current panel
        self.res = None              # the current panel's PanelResult
        self.sent = None             # the next panel on its way to its owner's panel stream
        self.early = None            # the next panel, already factored (panel first)
        self.unguarded = [[] for _ in devs]   # receivers' copies of d's panels, not yet
        #                                       waited on by d
        self.copies = {}             # step -> the receivers' copies of that step's panel
        self.marks = [[] for _ in devs]       # timeline: (step, start, end) per device
        self.panel_marks = [[] for _ in devs]
        self.host_s = collections.Counter()  # timeline: the host's enqueue, by whom (_charge)
        self._who, self._since = "other", time.perf_counter()
        self.info = 0

    def _charge(self, who):
        """Timeline only: the host's time since the last charge goes to what it was spent
        on (a device's index, "home", or "other": the schedule and the steps' bookkeeping);
        from now on to `who`."""
        if self.timed:
            now = time.perf_counter()
            self.host_s[self._who] += now - self._since
            self._who, self._since = who, now

    def first_panel(self):
        """Panel 0: its owner waits for its columns and sends it to its panel stream."""
        o, (j0, j1) = self.owner, self.blocks[0]
        dev = self.devs[o]
        self._charge(o)
        for _, _, waits in self.pending.pieces(o, 0, j1):
            for ev in waits:
                dev.wait("update", ev)
        self.sent = self.panels[o].send(dev, 0, j0, j1, after=dev.record("update"))
        self._charge("other")

    def step(self, s, ops):
        """Enqueue step s: the schedule's (device, operation, columns) in its order."""
        j0, j1 = self.blocks[s]
        nxt = self.blocks[s + 1] if s + 1 < len(self.blocks) else None
        shipped = nxt is None                # the next panel sent to its panel stream
        collect = self.home is not None      # panel s's columns still to go to the home
        starts = {}
        for d, op, (c0, c1) in ops:
            self._charge(d)
            if op == "factor":
                self._factor(s, d, j0, j1)
            elif op == "receive":
                self._receive(s, d, j0, j1)
            else:
                if self.received is not None:   # the rest of the upload, behind step 0's
                    self.received()             # panel copies
                    self.received = None
                if collect:                     # behind this step's receives (_collect)
                    self._charge("home")
                    self._to_home(s, j0, j1)
                    self._charge(d)
                    collect = False
                if op == "swap_right":
                    continue   # with the update of the same columns, piece by piece
                if op == "swap_left":
                    if self.home is not None:
                        continue   # once, on the home (_collect)
                    self._swap_left(s, d, j0, j1, c0, c1)
                else:   # update, update_next, update_rest
                    self._update(s, d, op, j0, j1, c0, c1)
                    if not shipped and op != "update_rest" and d == self.dist.owner(nxt[0]):
                        self._next_panel(s, d, nxt)
                        shipped = True
            if self.timed and d not in starts:
                starts[d] = self.devs[d].record("update")
        assert shipped, "the schedule never updated the next panel's columns"
        if collect:
            self._charge("home")
            self._to_home(s, j0, j1)
        for d, dev in enumerate(self.devs):
            self._charge(d)
            end = dev.end_step(s)
            if self.timed and d in starts:
                self.marks[d].append((s, starts[d], end))
        self._charge("other")

    def _factor(self, s, d, j0, j1):
        """The owner d factors panel s on its panel stream (unless it did already: panel
        first); its update stream waits for it."""
        dev = self.devs[d]
        res = self.early or self.panels[d].factor(dev, s, j0, j1, self.sent,
                                                  self.inv_threshold)
        self.res, self.early, self.owner = res, None, d
        self.info = self.info or res.info
        self.panel_marks[d].append((s, res.recv_start, res.done))
        dev.wait("update", res.done)

    def _receive(self, s, d, j0, j1):
        """Device d copies the factored panel s from its owner (comm stream); its update
        stream waits for the copy."""
        dev, res = self.devs[d], self.res
        got = dev.receive(s, j0, j1, self.devs[self.owner], res.done, res.use_inverse)
        dev.wait("update", got)
        self.copies.setdefault(s, []).append(got)
        if self.home is None:   # the owner swaps left of later panels in these rows
            self.unguarded[self.owner].append(got)

    def _update(self, s, d, op, j0, j1, c0, c1):
        """Device d's columns [c0, c1) right of panel s: each piece (columns still arriving)
        swapped just before it is updated."""
        dev, use_inverse = self.devs[d], self.res.use_inverse
        for p0, p1, waits in self.pending.pieces(d, c0, c1):
            for ev in waits:
                dev.wait("update", ev)
            dev.swap(s, j0, j1, p0, p1, "swap_right")
            dev.update(s, j0, j1, p0, p1, use_inverse, op)

    def _next_panel(self, s, d, nxt):
        """The next panel's columns are final on its owner d: send it to the panel stream,
        once panel s - 1's receivers have copied its L11^{-1} (panel s + 1 is staged into the
        same parity's buffer; d may own both in the tail), and factor it at once where the
        tail rule puts the panel first (a GPU panel: the host does not wait)."""
        dev, panel = self.devs[d], self.panels[d]
        for got in self.copies.pop(s - 1, ()):
            dev.wait("update", got)
        self.sent = panel.send(dev, s + 1, *nxt, after=dev.record("update"))
        first = self.first_columns is not None and self.dist.n - nxt[1] <= self.first_columns
        if first and not panel.host_wait:
            self.early = panel.factor(dev, s + 1, *nxt, self.sent, self.inv_threshold)
            dev.wait("update", self.early.done)

    def _swap_left(self, s, d, j0, j1, c0, c1):
        """Device d's interchanges of step s left of the panel, once every receiver has
        copied d's earlier panels (these rows)."""
        dev = self.devs[d]
        for got in self.unguarded[d]:
            dev.wait("update", got)
        self.unguarded[d].clear()
        dev.swap(s, j0, j1, c0, c1, "swap_left")

    def _to_home(self, s, j0, j1):
        """Panel s's columns to the home, with its left swaps (`_collect`); the pieces they
        make final to `final`."""
        took = _collect(self.home, s, j0, j1, self.devs[self.owner], self.res.done,
                        self.copies.get(s, ()))
        if self.final is not None:
            self.final(took, 0, j0, j0, j1)      # U above the panel: no later swap there
            self.final(self.home.record("update"), j0, j1, 0, j1)   # after its left swaps

    def last_columns(self, k):
        """After the last step: the deferred chunks (when step 0 updated nothing), and the
        columns right of the last panel (m < n, final now) to the home; the rows below the
        last panel (m > n) final there too."""
        if self.received is not None:   # record the deferred chunks' events
            self.received()
        assert self.pending.empty(), "columns arrived that no step waited for"
        if self.home is None:
            return
        self._charge("home")
        m = self.home.shape[0]
        for d, dev in enumerate(self.devs):
            for c0, c1 in self.dist.blocks(d):
                if c1 > k:
                    took = self.home.take(max(c0, k), c1, dev, dev.record("update"))
                    if self.final is not None:
                        self.final(took, 0, m, max(c0, k), c1)
        if self.final is not None and m > k:
            self.final(self.home.record("update"), k, m, 0, k)
        self._charge("other")

    def result(self):
        """(piv, info) once every device is done.  Every device holds every pivot (its own
        panels' and the received ones): device 0's are taken.  GPU panels keep LAPACK's info
        on their device."""
        pivs = [dev.finish() for dev in self.devs]
        info = self.info
        for panel, dev in zip(self.panels, self.devs):
            found = panel.final_info(dev)
            if found and (not info or found < info):
                info = found
        return absolute_pivots(pivs[0], self.blocks), info


def _collect(home, s, j0, j1, owner, done, receives):
    """The home takes panel s's columns, every row, from its owner's ops once the panel is
    factored (`done`) and the receivers' copies `receives` have landed, then applies the
    panel's row interchanges left of it.  The columns are final but for the left swaps of
    later panels, which the home applies as they come.  After the receives, not beside them:
    the take moves every row of the panel's columns through the same copy engines and links
    as the receivers' copies, which are on the chain to the next panel.  Returns the take's
    event."""
    for got in receives:
        home.wait("comm", got)
    got = home.take(j0, j1, owner, done, piv=(j0, j1))
    home.wait("update", got)
    home.swap(s, j0, j1, 0, j0, "swap_left")
    return got


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


def _timeline(devs, origin, marks, panel_marks, host_s):
    """Per device: wall (first to last event), the update stream's busy time (sum over steps
    from its first operation to its end; includes time a starved SGEMM waits for SMs), its
    own panels' time on the panel stream, the host's time enqueueing its operations
    (`enqueue_ms`, from host_s), and per step [s, start, end] of its update stream (`steps`)
    and of its own panels (`panel_steps`), in ms from its origin (the devices' origins are
    recorded at the same host instant, while every device is idle)."""
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
            "enqueue_ms": host_s[d] * 1e3,
            "panels": len(panels), "steps": steps, "panel_steps": panels})
    return {"devices": rows}


# ------------------------------------------------------------------ on the GPUs

def share_bytes(m, n, nb, dist, d, element=F32):
    """Device bytes device d needs: its columns and its workspace (with the receive buffers),
    of `element`."""
    nd = dist.local_width(d)
    return element.itemsize * m * nd + workspace_bytes(m, nd, nb, receive=True,
                                                       element=element)


def check_memory(m, n, nb, dist, device_ids, home=None, element=F32):
    """MemoryError with the numbers unless every device has room for its share (and the
    home device, when it is one of them, for the home's workspace too), of `element`."""
    for d, dev_id in enumerate(device_ids):
        need = share_bytes(m, n, nb, dist, d, element)
        if dev_id == home:
            need += workspace_bytes(m, n, nb, element=element)
        require_memory(need, f"LU of a {m}x{n} {element.name} matrix on {len(device_ids)} "
                             f"GPUs: "
                             f"{dist.local_width(d)} columns and their workspace"
                             f"{' (and the home workspace)' if dev_id == home else ''} need",
                       dev_id)


def factor_devices(src, device_ids, nb, make_panel, lookahead, inv_threshold, precision,
                   timeline=None, out=None, beside=None, table=None):
    """The distributed LU on the GPUs `device_ids`.

    src: a C-contiguous NumPy matrix of the working element type (float32 or float64:
    `element`) or of a type that converts to it exactly (uploaded by
    `transfers.host_transfers`; the factors come back into `out`, a C-contiguous NumPy
    matrix of its shape and the working dtype, default src itself) or a C-contiguous CuPy
    matrix of the working dtype (factored in place, or into `out`).  Returns (piv, info).

    A CuPy src: the columns go to the devices chunk by chunk (`transfers.scatter_from_gpu`)
    and the factorization starts with the first chunk; `out` (default src: a C-contiguous
    CuPy matrix of src's shape and dtype on src's device, any content) is the home
    (`getrf_multi`): each block comes back as soon as its panel is factored and the left
    swaps are applied there, so little is left to copy after the last step.  Every element
    of `out` is written and src is only read, so an input the caller keeps needs no copy of
    its own.  `beside`: None, or a callable run on src's device once the factorization's
    streams are set up and before its steps are enqueued: work that reads src on the current
    stream beside the factorization (the input's finite check), not ahead of it.  A NumPy
    src goes to the devices before the factorization and comes back after it
    (`transfers.host_transfers`: pinned staging, all devices at once).  `timeline`, if a
    list, receives getrf_multi's record plus scatter_ms (upload: first to last chunk on the
    slowest device, or the host transfer), factor_ms (from the start until every device is
    done) and gather_ms (what is left after that: the home's last blocks and swaps, or the
    host transfer).  `table`: the tuning table (default: the one in force for the first
    GPU and the element).
    """
    from ..core.backend import cupy
    cp = cupy()
    out = src if out is None else out
    el = element_of(out.dtype)
    table = tuning.current(device_ids[0], el) if table is None else table
    m, n = src.shape
    dist = ColumnCyclic(n, nb, len(device_ids))
    on_host = isinstance(src, np.ndarray)
    check_memory(m, n, nb, dist, device_ids, home=None if on_host else src.device.id,
                 element=el)
    enable_peer_access(cp, device_ids)
    t0 = time.perf_counter()
    if on_host:   # complete on return: every column is in place
        shares = host_transfers(cp, src, dist, device_ids, table=table, dtype=el.dtype)
        arrivals = rest = None
        scatter_ms = (time.perf_counter() - t0) * 1e3
    else:
        shares, arrivals, starts, rest = scatter_from_gpu(cp, src, dist, device_ids, table)
    devs = device_steps(cp, shares, dist, device_ids, nb, precision, min(m, n))
    home = None
    if not on_host:
        with cp.cuda.Device(src.device.id):
            home = CupyOps(out, nb, precision, device=src.device.id, npiv=min(m, n))
            if beside is not None:   # after every stream's fork from the current stream
                beside()
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold, timeline=timeline, arrivals=arrivals, home=home,
                            received=rest, table=table)
    t1 = time.perf_counter()
    if home is not None:
        home.finish()
    else:
        host_transfers(cp, out, dist, device_ids, shares, table=table)
    t2 = time.perf_counter()
    if timeline is not None:
        if not on_host:
            scatter_ms = _scatter_ms(cp, device_ids, starts, arrivals)
        timeline[-1].update(m=m, n=n, nb=nb, ndev=len(device_ids), scatter_ms=scatter_ms,
                            factor_ms=(t1 - t0) * 1e3, gather_ms=(t2 - t1) * 1e3)
    return piv, info


def _scatter_ms(cp, device_ids, starts, arrivals):
    """The upload from a GPU: first to last chunk on the slowest device, in ms."""
    ms = 0.0
    for dev_id, ev0, got in zip(device_ids, starts, arrivals):
        with cp.cuda.Device(dev_id):
            for _, _, ev in got:
                ms = max(ms, cp.cuda.get_elapsed_time(ev0, ev))
    return ms


def device_steps(cp, shares, dist, device_ids, nb, precision, npiv):
    """Each device's CupyOps on its share (receive buffers included), npiv pivot slots."""
    devs = []
    for d, (dev_id, x) in enumerate(zip(device_ids, shares)):
        with cp.cuda.Device(dev_id):
            devs.append(CupyOps(x, nb, precision, cols=dist.bound(d), device=dev_id,
                                receive=True, npiv=npiv))
    return devs


def enable_peer_access(cp, device_ids):
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
