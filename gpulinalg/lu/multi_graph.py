"""The several-GPU LU (lu/multi.py) of a GPU-resident matrix, replayed from a CUDA graph.

One Python thread issues the work of every GPU: a step costs the host ~1 ms of Python and
CUDA calls on two GPUs, as long as the GPUs' own work at n = 8192-16384, so the host's
enqueue bounds the call there.  With GPU panels the distributed steps never wait on the host
(`multi.enqueue_multi`), so they are captured once into one CUDA graph that spans the devices
(cross-device event waits become its edges, the peer copies its memcpy nodes) and replayed:
a call then costs the host one small kernel launch, one graph launch and one read-back.

Policy (`factor`), as lu/graph.py's for one GPU:
- only a GPU-resident input, GPU panels and no timeline, for m * n up to the tuning table's
  `graph_multi_max_elements` (`eligible`);
- the first call of a key (home device, devices, stream, shape, element, nb, precision,
  lookahead, threshold, tuning table) runs the ordinary driver and is only counted; the
  second captures and replays; later calls replay; a failed capture is remembered and its key
  runs the driver from then on (graph.Cache);
- an entry owns a copy of the matrix on the home device (the caller's device), the devices'
  shares, every workspace and a private memory pool.  The graph copies the caller's matrix
  into its copy column block by column block (kernels/graph_io.cu, the address handed over
  in device memory before the launch; the inf/NaN check on the way), each block's copy
  followed by its scatter to its device; the home collects the factored blocks and applies
  the left swaps (multi.py), and each piece of the result goes on to the caller's output as
  soon as no later step changes it (`multi.enqueue_multi`'s `final`), so only the last
  step's pieces follow the factorization;
- at most `graph_multi_cache_entries` entries are kept (least recently used dropped); they
  hold device memory (about twice the matrix: the copy and the shares) until then or
  `graph.clear()`;
- `graph.disabled()` and GPULINALG_LU_GRAPHS=0 turn replay off here too.

Results are bit-identical to the ordinary driver's: the same kernels with the same arguments
in the same dependency order (GPU tests compare them).
"""

import threading

import numpy as np

from ..core.backend import cupy
from ..core.element import element as element_of
from ..core.kernels import Launcher, get_kernel
from . import graph
from .distribution import ColumnCyclic
from .driver import absolute_pivots
from .multi import device_steps, enable_peer_access, enqueue_multi
from .steps import CupyOps
from .transfers import allocate_shares, scatter_from_gpu

_CACHE = graph.Cache(lambda t: (t.graph_multi_cache_entries, float("inf")))


def eligible(m, n, panel_name, timeline, table):
    """Whether a several-GPU factorization of a GPU-resident matrix may be replayed."""
    return (graph.enabled() and panel_name == "gpu" and timeline is None
            and 0 < m * n <= table.graph_multi_max_elements)


def factor(src, out, device_ids, nb, make_panel, lookahead, inv_threshold, precision, table):
    """(piv, info, finite) of src (C-contiguous m x n CuPy matrix of a real element type, on
    the current device) factored on the GPUs `device_ids` into out (src's shape and dtype,
    C-contiguous on the same device; src itself or not overlapping it), by graph replay on
    the current stream; None when this call should run the ordinary driver (first call of its
    key, or a key whose capture failed).  piv and info as multi.factor_devices's; finite:
    whether src held no inf/NaN.  make_panel(): a GPU panel of the plan (GpuPanel); table:
    the tuning table, part of the key."""
    cp = cupy()
    el = element_of(out.dtype)
    stream = cp.cuda.get_current_stream()
    home = out.device.id
    key = (home, tuple(device_ids), stream.ptr, out.shape, el, nb, precision, lookahead,
           inv_threshold, table)
    entry = _CACHE.get(key, lambda: _Entry(out.shape, el, home, device_ids, nb, make_panel,
                                           lookahead, inv_threshold, precision, table), table)
    if entry is None:
        return None
    return entry.run(src, out, stream)


class _Entry:
    """One captured distributed factorization: the matrix copy, shares, workspaces, pool,
    graph."""

    def __init__(self, shape, el, home, device_ids, nb, make_panel, lookahead, inv_threshold,
                 precision, table):
        cp = cupy()
        m, n = shape
        self.k = k = min(m, n)
        dist = ColumnCyclic(n, nb, len(device_ids))
        enable_peer_access(cp, device_ids)
        self.lock = threading.Lock()
        self.pool = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(self.pool.malloc), cp.cuda.Device(home):
            self.a = cp.empty((m, n), dtype=el.dtype)
            self.slot = cp.zeros(2, dtype=np.uint64)     # the call's (src, out) addresses
            self.nonfinite = cp.zeros(1, dtype=np.int32)
            shares = allocate_shares(cp, m, dist, device_ids, el.dtype)
            devs = device_steps(cp, shares, dist, device_ids, nb, precision, k)
            collector = CupyOps(self.a, nb, precision, device=home, npiv=k)
            panels = [make_panel() for _ in devs]
            workspaces = []
            for dev_id, panel in zip(device_ids, panels):
                with cp.cuda.Device(dev_id):
                    workspaces.append(panel.workspace())
            self.set_slot = Launcher(get_kernel(graph.FAMILY, "graph_io_set"), "PPP")
            copy_in = graph.copier(True, self.slot, self.a, self.nonfinite)
            copy_out = graph.copier(False, self.slot, self.a)
            origin = cp.cuda.Stream(non_blocking=True)   # the capture's origin, on home
            graph.begin_capture(origin)
            try:
                with origin:
                    self.nonfinite.fill(0)
                    start = origin.record()
                    for ops in devs + [collector]:   # every stream joins the capture
                        ops.fork(origin, start)
                    for ops, ws in zip(devs, workspaces):   # each replay starts afresh
                        with ops.device, ops.streams["panel"]:
                            ws.reset()
                    ready = _copied_in(cp, origin, copy_in, m, dist)
                    _, arrivals, _, rest = scatter_from_gpu(cp, self.a, dist, device_ids,
                                                            table, shares=shares, ready=ready)
                    out_stream = cp.cuda.Stream(non_blocking=True)

                    def final(event, r0, r1, c0, c1):   # a finished piece to the caller
                        out_stream.wait_event(event)
                        with out_stream:
                            copy_out(r0, r1, c0, c1)

                    run = enqueue_multi(devs, panels, dist, nb, lookahead, inv_threshold,
                                        False, arrivals, collector, rest, table, final)
                    for ops in devs + [collector]:
                        ops.join()
                    origin.wait_event(out_stream.record())
            finally:
                self.graph = graph.PriorityGraph(origin)
        self.blocks = run.blocks
        self.piv = devs[0].piv
        self.infos = [ws.info for ws in workspaces]
        self.keep = (shares, devs, collector, panels, origin, out_stream)   # in the graph
        self.nbytes = 0
        for dev_id in set(device_ids) | {home}:
            with cp.cuda.Device(dev_id):
                self.nbytes += self.pool.total_bytes()

    def run(self, src, out, stream):
        k = self.k
        host = graph.replay(self, stream, src, out, ((self.piv, k),)
                            + tuple((i, 1) for i in self.infos) + ((self.nonfinite, 1),))
        found = [int(i) for i in host[k:-1] if i]   # each device's first zero pivot (LAPACK)
        return absolute_pivots(host[:k], self.blocks), min(found, default=0), not host[-1]


def _copied_in(cp, stream, copy_in, m, dist):
    """Copy the caller's matrix into the entry's, column block by column block in column
    order, on `stream`; returns ready(c0, c1): the event after which columns [c0, c1) are in
    (transfers.scatter_from_gpu's `ready`)."""
    ends, events = [], []
    for c0 in range(0, dist.n, dist.nb):
        c1 = min(c0 + dist.nb, dist.n)
        copy_in(0, m, c0, c1)
        ends.append(c1)
        events.append(stream.record())

    def ready(c0, c1):
        return events[int(np.searchsorted(ends, c1))]   # the block holding column c1 - 1
    return ready
