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
_D2D = 3                    # cudaMemcpyDeviceToDevice
_USE_NODE_PRIORITY = 8      # CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY

_ENV_ENABLED = os.environ.get("GPULINALG_LU_GRAPHS", "1") != "0"
_DISABLED = contextvars.ContextVar("gpulinalg_lu_graphs_disabled", default=False)

_lock = threading.Lock()
_seen = {}                  # key -> 1 after its first (ordinary) call
_entries = collections.OrderedDict()
failures = {}               # key -> why its capture failed (that key no longer captures)


def eligible(m, n, panel_name, timeline, devices, table=None):
    """Whether a factorization may be replayed (before any key is looked up); table: the
    tuning table of the call (default: the float32 one in force)."""
    if not (_ENV_ENABLED and not _DISABLED.get() and panel_name == "gpu" and timeline is None
            and devices is None):
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
    """Drop every captured graph (and its buffers) and the first-call counts."""
    with _lock:
        _entries.clear()
        _seen.clear()
        failures.clear()


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
    with _lock:
        entry = _entries.get(key)
        if entry is not None:
            _entries.move_to_end(key)
        elif key in failures:
            return None
        elif key not in _seen:
            if len(_seen) >= _SEEN_LIMIT:
                _seen.clear()
            _seen[key] = 1
            return None
        else:
            try:
                with tuning.override(table):
                    entry = _Entry(A.shape, el, nb, precision, lookahead, inv_threshold,
                                   tc_min)
            except Exception as exc:   # noqa: BLE001 -- remembered, the driver runs instead
                failures[key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                return None
            _entries[key] = entry
            while len(_entries) > 1 and (
                    len(_entries) > table.graph_cache_entries
                    or sum(e.nbytes for e in _entries.values()) > table.graph_cache_bytes):
                _entries.popitem(last=False)
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
        mode = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None)
        with cp.cuda.using_allocator(self.pool.malloc), self.stream:
            self.a = cp.empty((m, n), dtype=el.dtype)
            self.slot = cp.zeros(2, dtype=np.uint64)     # the call's (src, dst) addresses
            self.nonfinite = cp.zeros(1, dtype=np.int32)
            self.ops = CupyOps(self.a, nb, precision, tc_min=tc_min)
            self.panel = GpuPanel(element=el)
            ws = self.panel.workspace()
            self.set_slot = Launcher(get_kernel(FAMILY, "graph_io_set"), "PPP")
            copy_in, copy_out = (_copier(True, self.slot, self.a, self.nonfinite),
                                 _copier(False, self.slot, self.a))
            upd, comm = self.ops.streams["update"], self.ops.streams["comm"]
            if mode is None:
                self.stream.begin_capture()
            else:
                self.stream.begin_capture(mode)
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
                graph = _PriorityGraph(self.stream)
            self.info = ws.info
        self.graph = graph
        self.nbytes = self.pool.total_bytes()

    def run(self, A, stream, src):
        cp = cupy()
        rt = cp.cuda.runtime
        k = self.k
        out = cp.empty(k + 2, dtype=np.int32)   # the pivots, info, nonfinite: one read back
        with self.lock:   # the entry's buffers: one call at a time from enqueue to copies
            with stream:
                self.set_slot((1, 1, 1), (1, 1, 1), self.slot.data.ptr, src.data.ptr,
                              A.data.ptr)
            self.graph.launch(stream)
            p = out.data.ptr
            rt.memcpyAsync(p, self.ops.piv.data.ptr, _PIV * k, _D2D, stream.ptr)
            rt.memcpyAsync(p + _PIV * k, self.info.data.ptr, _PIV, _D2D, stream.ptr)
            rt.memcpyAsync(p + _PIV * (k + 1), self.nonfinite.data.ptr, _PIV, _D2D,
                           stream.ptr)
        host = out.get(stream=stream)       # waits for this call's work
        return absolute_pivots(host[:k], self.blocks), int(host[k]), not host[k + 1]


def _copier(into, slot, buf, flag=None):
    """copy(r0, r1) on the current stream: graph_copy<T, into> of rows r0..r1 (all columns)
    between buf and the matrix whose address slot holds (kernels/graph_io.cu)."""
    el = element_of(buf.dtype)
    name = f"graph_copy<{el.ctype}, {'true' if into else 'false'}>"
    launch = Launcher(get_kernel(FAMILY, name), "PPiiqP")
    n = buf.shape[1]
    seg = _IO_SEG_BYTES // el.itemsize
    sms = sm_count()
    per_block = _IO_THREADS // 32   # warps, one (row, segment) item each at a time

    def copy(r0, r1):
        if r1 <= r0 or n == 0:
            return
        items = (r1 - r0) * -(-n // seg)
        grid = max(1, min(-(-items // per_block), 8 * sms))
        launch((grid, 1, 1), (_IO_THREADS, 1, 1), slot.data.ptr, buf.data.ptr, r0, r1, n,
               flag.data.ptr if flag is not None else 0)
    return copy


class _PriorityGraph:
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
