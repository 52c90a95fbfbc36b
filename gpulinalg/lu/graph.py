"""The one-GPU, GPU-panel LU replayed from a CUDA graph.

For small matrices the factorization is bound by the host, not the GPU: the driver issues
some hundred launches, events and the Python between them, about as long as the GPU needs
for the work, and a slower host slows the LU one for one.  With the GPU panel the driver's
loop never waits on the host (`driver.enqueue_steps`), so it is captured once into a CUDA
graph and replayed: a call then costs the host a kernel launch that hands over its addresses,
one graph launch and the read-back of the pivots.

Policy (`factor`):
- only the one-GPU GPU-panel path with no timeline, for m * n up to the tuning table's
  `graph_max_elements` (`eligible`);
- the graph is instantiated with per-node priorities (the driver API's
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY), so that the panel's kernels keep the panel
  stream's priority, as in the driver (CuPy's Graph would run every node at the priority of
  the stream it is launched into);
- the first call of a key (device, stream, shape, nb, precision, lookahead, threshold,
  tc_min, tuning table) runs the ordinary driver (the caller's path) and is only counted; the
  second captures the loop under that table (the capture enqueues what one call would, and
  instantiates the graph) and replays it; later calls replay.  A one-off factorization
  therefore never pays for a capture, and a replay never runs a plan captured under another
  table;
- an entry owns its matrix buffer, the driver's and the panel's workspaces and a private
  memory pool, so nothing the graph reads or writes is ever handed to another allocation;
  the graph starts by resetting the panel workspace's counters and tags
  (`PanelWorkspace.reset`), so every replay finds the state its launches were captured
  against;
- the copies in and out are part of the graph (kernels/graph_io.cu), the call's addresses
  handed over in device memory by one small kernel before the replay: the input is copied
  into the entry's buffer and checked for inf/NaN on the way (scipy's check_finite: no
  separate pass), beside the workspace's reset; rows j0..j1 are copied out as soon as step
  s's left swaps have made them final, on a stream of their own, so only the last block's
  copy follows the factorization;
- keys include the stream, and an entry's lock covers everything that touches its buffers
  (copies, launch, the pivots' and info's copies into per-call buffers), so two threads
  never mix their data; at most `graph_cache_entries` entries holding at most
  `graph_cache_bytes` of device memory together (the newest entry always stays), the least
  recently used dropped;
- the environment variable GPULINALG_LU_GRAPHS=0 turns replay off, and so does a `disabled()`
  block (in its own thread and context); `clear()` drops the entries.  A failed capture (e.g.
  a kernel that cannot be captured) is remembered in `failures` and its key runs the ordinary
  driver from then on.

Results are bit-identical to the ordinary driver's: the graph holds the same kernels with
the same arguments in the same dependency order (GPU tests compare them).
"""

import collections
import contextlib
import contextvars
import ctypes
import functools
import os
import threading

import numpy as np

from .. import tuning
from ..core.backend import cupy
from ..core.device import sm_count
from ..core.element import REAL_KERNEL, element as element_of
from ..core.kernels import Launcher, get_kernel
from .driver import absolute_pivots, enqueue_steps, panel_blocks

FAMILY = "graph_io"
KERNEL_NAMES = ("graph_io_set",) + tuple(f"graph_copy<{el.ctype}, {into}>"
                                         for el in REAL_KERNEL for into in ("true", "false"))
_IO_THREADS = 256           # graph_copy's block (its __launch_bounds__)
_IO_SEG_BYTES = 2048        # bytes of one row per warp item (IO_SEG_BYTES in graph_io.cu)
_PIV = 4                    # bytes of a pivot and of info (int32)
_SEEN_LIMIT = 1024          # counted first calls kept before the count restarts
_DEFAULT = 4                # cudaMemcpyDefault: unified addressing finds the devices
_USE_NODE_PRIORITY = 8      # CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY

_ENV_ENABLED = os.environ.get("GPULINALG_LU_GRAPHS", "1") != "0"
_DISABLED = contextvars.ContextVar("gpulinalg_lu_graphs_disabled", default=False)

_lock = threading.Lock()    # every cache: lookups, captures, evictions


class Cache:
    """Captured factorizations by key, with the first-call rule (module docstring): `get`
    counts a key's first call, builds its entry (the capture) at the second, and hands it out
    from then on; a build that raises is remembered in `failures` and never retried.  At
    most `limits(table)` = (entries, bytes) are kept, the least recently used dropped (the
    newest always stays)."""

    caches = []   # every Cache, for `clear`

    def __init__(self, limits):
        self.limits = limits
        self.entries = collections.OrderedDict()
        self.seen = {}        # key -> 1 after its first (ordinary) call
        self.failures = {}    # key -> why its capture failed
        Cache.caches.append(self)

    def get(self, key, build, table):
        """The entry of `key`, or None when the call runs the ordinary driver; build(): the
        new entry (an object with `nbytes`), run under `table`."""
        with _lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
                return entry
            if key in self.failures:
                return None
            if key not in self.seen:
                if len(self.seen) >= _SEEN_LIMIT:
                    self.seen.clear()
                self.seen[key] = 1
                return None
            try:
                with tuning.override(table):
                    entry = build()
            except Exception as exc:   # noqa: BLE001 -- remembered, the driver runs instead
                self.failures[key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                return None
            self.entries[key] = entry
            most, most_bytes = self.limits(table)
            while len(self.entries) > 1 and (
                    len(self.entries) > most
                    or sum(e.nbytes for e in self.entries.values()) > most_bytes):
                self.entries.popitem(last=False)
            return entry

    def clear(self):
        self.entries.clear()
        self.seen.clear()
        self.failures.clear()


_ONE_GPU = Cache(lambda t: (t.graph_cache_entries, t.graph_cache_bytes))
_entries, failures = _ONE_GPU.entries, _ONE_GPU.failures   # the one-GPU graphs (tests read them)


def enabled():
    """Whether replay may run at all here (the environment, a `disabled()` block)."""
    return _ENV_ENABLED and not _DISABLED.get()


def eligible(m, n, panel_name, timeline, devices, table=None):
    """Whether a factorization may be replayed (before any key is looked up); table: the
    tuning table of the call (default: the float32 one in force)."""
    if not (enabled() and panel_name == "gpu" and timeline is None and devices is None):
        return False
    table = tuning.current() if table is None else table
    return 0 < m * n <= table.graph_max_elements


@contextlib.contextmanager
def disabled():
    """Within the block, every factorization runs the ordinary driver (benchmarks, tests)."""
    token = _DISABLED.set(True)
    try:
        yield
    finally:
        _DISABLED.reset(token)


def clear():
    """Drop every captured graph (and its buffers) and the first-call counts, of one GPU and
    of several."""
    with _lock:
        for cache in Cache.caches:
            cache.clear()


def factor(A, nb, precision, lookahead, inv_threshold, tc_min=0, src=None, table=None):
    """(piv, info, finite) of A (C-contiguous m x n CuPy of a real element type, factored in
    place) by graph
    replay, or None when this call should run the ordinary driver (first call of its key,
    or a key whose capture failed).  piv and info as `driver.getrf`'s; tc_min as CupyOps's;
    finite: whether the matrix read held no inf/NaN.  src: the matrix to factor when it is
    not A's content (C-contiguous, A's shape, A itself or not overlapping it): read from
    there, the factors written to A.  table: the tuning table (default: the one in force),
    part of the key; the capture runs under it."""
    cp = cupy()
    el = element_of(A.dtype)
    table = tuning.current(element=el) if table is None else table
    stream = cp.cuda.get_current_stream()
    key = (cp.cuda.runtime.getDevice(), stream.ptr, A.shape, el, nb, precision, lookahead,
           inv_threshold, tc_min, table)
    entry = _ONE_GPU.get(key, lambda: _Entry(A.shape, el, nb, precision, lookahead,
                                             inv_threshold, tc_min), table)
    if entry is None:
        return None
    return entry.run(A, stream, A if src is None else src)


class _Entry:
    """One captured factorization: its buffers, workspaces, private pool and graph."""

    def __init__(self, shape, el, nb, precision, lookahead, inv_threshold, tc_min=0):
        from .steps import CupyOps
        from .panel_gpu import GpuPanel
        cp = cupy()
        m, n = shape
        self.k = min(m, n)
        self.blocks = panel_blocks(self.k, nb)
        self.lock = threading.Lock()
        self.pool = cp.cuda.MemoryPool()
        self.stream = cp.cuda.Stream(non_blocking=True)   # the capture's origin
        with cp.cuda.using_allocator(self.pool.malloc), self.stream:
            self.a = cp.empty((m, n), dtype=el.dtype)
            self.slot = cp.zeros(2, dtype=np.uint64)     # the call's (src, dst) addresses
            self.nonfinite = cp.zeros(1, dtype=np.int32)
            self.ops = CupyOps(self.a, nb, precision, tc_min=tc_min)
            self.panel = GpuPanel(element=el)
            ws = self.panel.workspace()
            self.set_slot = Launcher(get_kernel(FAMILY, "graph_io_set"), "PPP")
            copy_in, copy_out = (copier(True, self.slot, self.a, self.nonfinite),
                                 copier(False, self.slot, self.a))
            upd, comm = self.ops.streams["update"], self.ops.streams["comm"]
            begin_capture(self.stream)
            try:
                self.nonfinite.fill(0)        # the graph's first node
                self.ops.fork(self.stream)    # the driver's streams join the capture
                with upd:
                    copy_in(0, m)
                origin = self.ops.record("update")
                ws.reset()                    # beside the copy; the panels wait for it
                reset = cp.cuda.Event(disable_timing=True)
                reset.record(self.stream)
                self.ops.wait("panel", reset)

                def rows_final(r0, r1):       # copied out beside the next steps
                    self.ops.wait("comm", self.ops.record("update"))
                    with comm:
                        copy_out(r0, r1)

                enqueue_steps(self.ops, self.panel, self.blocks, lookahead, inv_threshold,
                              origin, rows_final)
                self.ops.join()
            finally:
                graph = PriorityGraph(self.stream)
            self.info = ws.info
        self.graph = graph
        self.nbytes = self.pool.total_bytes()

    def run(self, A, stream, src):
        k = self.k
        host = replay(self, stream, src, A, ((self.ops.piv, k), (self.info, 1),
                                             (self.nonfinite, 1)))
        return absolute_pivots(host[:k], self.blocks), int(host[k]), not host[k + 1]


def replay(entry, stream, src, dst, pieces):
    """One call of a captured entry (an object with lock, slot, set_slot and graph): the
    call's addresses handed over (slot = src, dst), the graph launched on `stream`, and the
    int32 `pieces` read back after it (`read_ints`), all under the entry's lock (its buffers
    serve one call at a time, from the enqueue to the read-back)."""
    with entry.lock:
        with stream:
            entry.set_slot((1, 1, 1), (1, 1, 1), entry.slot.data.ptr, src.data.ptr,
                           dst.data.ptr)
        entry.graph.launch(stream)
        return read_ints(stream, pieces)


def begin_capture(stream):
    """Start capturing `stream` (CuPy), in relaxed mode where this CuPy has it (the captured
    code allocates from a pool and makes events, which the global mode would forbid)."""
    mode = getattr(cupy().cuda.runtime, "streamCaptureModeRelaxed", None)
    if mode is None:
        stream.begin_capture()
    else:
        stream.begin_capture(mode)


def read_ints(stream, pieces):
    """The int32 device arrays' first counts, pieces ((array, count), ...) on any devices,
    copied on `stream` after its work into one buffer and read back in one wait: a NumPy
    int32 array, the pieces one after another."""
    cp = cupy()
    rt = cp.cuda.runtime
    out = cp.empty(sum(count for _, count in pieces), dtype=np.int32)
    p = out.data.ptr
    for x, count in pieces:
        rt.memcpyAsync(p, x.data.ptr, _PIV * count, _DEFAULT, stream.ptr)
        p += _PIV * count
    return out.get(stream=stream)       # waits for this call's work


def copier(into, slot, buf, flag=None):
    """copy(r0, r1, c0=0, c1=n) on the current stream: graph_copy<T, into> of rows r0..r1,
    columns c0..c1 between buf (m x n, C-contiguous) and the matrix of buf's shape whose
    address slot holds (kernels/graph_io.cu); into: towards buf, raising *flag on a value
    that is not finite."""
    el = element_of(buf.dtype)
    name = f"graph_copy<{el.ctype}, {'true' if into else 'false'}>"
    launch = Launcher(get_kernel(FAMILY, name), "PPiiqqqP")
    n = buf.shape[1]
    seg = _IO_SEG_BYTES // el.itemsize
    sms = sm_count()
    per_block = _IO_THREADS // 32   # warps, one (row, segment) item each at a time

    def copy(r0, r1, c0=0, c1=n):
        if r1 <= r0 or c1 <= c0:
            return
        items = (r1 - r0) * -(-(c1 - c0) // seg)
        grid = max(1, min(-(-items // per_block), 8 * sms))
        launch((grid, 1, 1), (_IO_THREADS, 1, 1), slot.data.ptr, buf.data.ptr, r0, r1, c0, c1,
               n, flag.data.ptr if flag is not None else 0)
    return copy


class PriorityGraph:
    """The capture on `stream` ended and instantiated through the driver API with
    CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY: each kernel node runs at the priority of the
    stream it was captured from (the panel stream's is the greatest), where CuPy's Graph runs
    every node at the priority of the stream it is launched into."""

    def __init__(self, stream):
        self._cu = cu = _libcuda()
        graph, self._exec = ctypes.c_void_p(), ctypes.c_void_p()
        _check(cu, cu.cuStreamEndCapture(ctypes.c_void_p(stream.ptr), ctypes.byref(graph)))
        try:
            _check(cu, cu.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), graph,
                                                      ctypes.c_ulonglong(_USE_NODE_PRIORITY)))
        finally:
            cu.cuGraphDestroy(graph)

    def launch(self, stream):
        _check(self._cu, self._cu.cuGraphLaunch(self._exec, ctypes.c_void_p(stream.ptr)))

    def __del__(self):
        if getattr(self, "_exec", None):
            self._cu.cuGraphExecDestroy(self._exec)


@functools.lru_cache(maxsize=None)
def _libcuda():
    """The CUDA driver library (CuPy has loaded it already)."""
    return ctypes.CDLL("libcuda.so.1")


def _check(cu, status):
    if status:
        name = ctypes.c_char_p()
        cu.cuGetErrorName(status, ctypes.byref(name))
        raise RuntimeError(f"CUDA driver error {status} ({(name.value or b'?').decode()})")
