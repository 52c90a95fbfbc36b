"""Triangular solves with few right-hand sides, X := op(T)^{-1} X in place on row-major
views: the launcher of kernels/trsv.cu, for float32 and float64.

For `lu_solve` with 1 to MAX_RHS right-hand sides: T is lu_factor's combined LU matrix, read
as its unit lower triangle L (`lower=True`) or its upper triangle U with the diagonal
(`lower=False`), op(T) = T or T^T (`trans`).  One launch per solve: a persistent grid takes
the row blocks in solve order from a ticket counter and hands each block's solution to the
later blocks through flags in a per-stream device workspace, so the triangle is read once
from memory (bandwidth) while the chain of n / NB diagonal solves sets the time (latency):
no chain of small launches as in a blocked trsm.  The kernel's header says which thread does
what, the bound and the arithmetic.

Workspace rules: one workspace per (device, stream) -- per thread as well on the per-thread
default stream -- holding the 64-bit ticket counter and one int32 flag per block; every call
takes the next 32-bit epoch of its workspace under a lock held until the launch is queued,
so calls on one stream run with increasing epochs and no reset between them (the host zeroes
the workspace when the epoch wraps, and when it grows).  Calls on different streams use
different workspaces.  A call being captured into a CUDA graph is refused: a replay would
reuse the captured epoch.
"""

import functools
import threading

import numpy as np

from .. import tuning
from ..core import device
from ..core.arrays import array_kind
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel
from ..layout.laswp import row_major_ld

FAMILY = "trsv"
THREADS = 256               # TRSV_THREADS: threads per block (8 warps, one k-range each)
SUB = 8                     # TRSV_SUB: rows of the diagonal solve's redundant sub-blocks
RHS_STEPS = (1, 2, 4, 8, 16)    # template R: nrhs columns run the smallest R >= nrhs
MAX_RHS = RHS_STEPS[-1]     # the most right-hand sides of one launch
# Template NB (rows per block) per element type (C type), smallest first: a call takes the
# largest up to the tuning table's trsv_nb whose shared memory the device grants a block
# (float 128 needs sm_90 / sm_100).
NB_SHAPES_OF = {"float": (64, 128), "double": (32, 64)}
CTAS_PER_SM = 1             # persistent grid: min(row blocks, CTAS_PER_SM * SMs) blocks
STATIC_SHARED = 16          # bytes of static shared memory (the ticket) beside the dynamic
WORKSPACE_HEAD = 32         # uint32 words before the flags: the 64-bit ticket, own 128 bytes
ELEMENTS = REAL_KERNEL
_BY_CTYPE = {e.ctype: e for e in ELEMENTS}
_SPECS = "iiPqPqiiIPP"      # n, nrhs, A, lda, X, ldx, lower, trans, epoch, ticket, flags


def _name(ctype, nb, r):
    return f"trsv_few<{ctype},{nb},{r}>"


KERNEL_NAMES = tuple(_name(e.ctype, nb, r) for e in ELEMENTS for nb in NB_SHAPES_OF[e.ctype]
                     for r in RHS_STEPS)


def rhs_step(nrhs):
    """The template R of a solve with nrhs columns: the smallest of RHS_STEPS >= nrhs."""
    for r in RHS_STEPS:
        if nrhs <= r:
            return r
    raise ValueError(f"{nrhs} right-hand sides exceed the kernel's {MAX_RHS}")


def shared_bytes(nb, r, element=F32):
    """Dynamic shared memory of one block (the kernel's layout): the ring of two tiles (row
    pitch nb + 16/itemsize), which afterwards holds the 8 warps' partial sums, the diagonal
    tile and X_j."""
    pitch = nb + 16 // element.itemsize
    tile = nb * pitch
    return element.itemsize * (max(2 * tile, 8 * r * nb) + tile + nb * r)


def nb_shape(r, element=F32, limit=None, wanted=None):
    """The template NB for R = r: the largest of NB_SHAPES_OF[element], at most `wanted` (the
    tuning table's trsv_nb by default), whose block fits `limit` bytes of shared memory (the
    current device's opt-in limit by default)."""
    if limit is None:
        limit = device.max_shared_per_block()
    if wanted is None:
        wanted = tuning.current(element=element).trsv_nb
    fits = [nb for nb in NB_SHAPES_OF[element.ctype]
            if shared_bytes(nb, r, element) + STATIC_SHARED <= limit and nb <= wanted]
    if not fits:
        raise ValueError(f"trsv needs {shared_bytes(NB_SHAPES_OF[element.ctype][0], r, element)}"
                         f" bytes of shared memory per block; the device grants {limit}")
    return fits[-1]


def solve_order(n, nb, lower, trans):
    """Row blocks [(r0, r1)] in the order the kernel solves them: forward for L x = b and
    U^T x = b, backward for U x = b and L^T x = b (the last block the partial one)."""
    blocks = [(r0, min(n, r0 + nb)) for r0 in range(0, n, nb)]
    return blocks if bool(lower) != bool(trans) else blocks[::-1]


def grid_size(n, nb, sms):
    """Blocks of the persistent grid: one per row block, at most CTAS_PER_SM per SM."""
    return min(-(-n // nb), CTAS_PER_SM * sms)


@functools.lru_cache(maxsize=None)
def _kernel(device_id, ctype, nb, r):
    """Launcher of trsv_few<ctype, nb, r> on the device, opted in to its shared memory."""
    smem = shared_bytes(nb, r, _BY_CTYPE[ctype])
    return Launcher(get_kernel(FAMILY, _name(ctype, nb, r), dynamic_smem=smem), _SPECS, smem)


@functools.lru_cache(maxsize=None)
def _plan(device_id, ctype, r, wanted):
    """(NB, SMs) of the device for element `ctype`, R = r and the table's trsv_nb."""
    return (nb_shape(r, _BY_CTYPE[ctype], device.max_shared_per_block(device_id), wanted),
            device.sm_count(device_id))


class _Workspace:
    """One stream's ticket counter and flags (uint32 words: the counter in words 0-1, flag of
    solve index s in word WORKSPACE_HEAD + s) and its epoch; `lock` is held from taking an
    epoch to queueing the launch, so launches on the stream carry increasing epochs."""

    def __init__(self):
        self.buf, self.epoch, self.lock = None, 0, threading.Lock()

    def reserve(self, nblk):
        """Pointers (ticket, flags) for nblk flags and the call's epoch (the lock held)."""
        cp = cupy()
        have = 0 if self.buf is None else self.buf.size - WORKSPACE_HEAD
        if have < nblk:                              # zeroed in stream order, after the
            self.buf = cp.zeros(WORKSPACE_HEAD + max(nblk, 2 * have), np.uint32)  # last call
        if self.epoch == 0xFFFFFFFF:                 # wrap: no stale flag may match again
            self.buf.fill(0)
            self.epoch = 0
        self.epoch += 1
        ptr = self.buf.data.ptr
        return ptr, ptr + 4 * WORKSPACE_HEAD, self.epoch


_workspaces = {}
_workspaces_lock = threading.Lock()
_PER_THREAD_STREAM = 2      # cudaStreamPerThread's handle


def _workspace(device_id, stream_ptr):
    key = (device_id, stream_ptr,
           threading.get_ident() if stream_ptr == _PER_THREAD_STREAM else None)
    ws = _workspaces.get(key)
    if ws is None:
        with _workspaces_lock:
            ws = _workspaces.setdefault(key, _Workspace())
    return ws


def trsv_ptr(n, nrhs, tp, ldt, xp, ldx, lower, trans=False, element=F32):
    """solve_triangular_few by device pointer, on the current device and stream: X (n x nrhs
    at xp, leading dimension ldx) := op(T)^{-1} X with T the n x n matrix at tp (ldt), both
    row-major matrices of `element`s (F32 or F64; leading dimensions in elements).  lower:
    T's unit lower triangle, else its upper triangle with the diagonal; trans: op(T) = T^T.
    No validation (1 <= nrhs <= MAX_RHS expected); nothing to do for n or nrhs = 0."""
    if n <= 0 or nrhs <= 0:
        return
    cp = cupy()
    dev = cp.cuda.runtime.getDevice()
    stream = cp.cuda.get_current_stream()
    if _capturing(stream):
        raise RuntimeError("trsv cannot be captured into a CUDA graph: a replay would reuse "
                           "the captured epoch of its flags")
    r = rhs_step(nrhs)
    nb, sms = _plan(dev, element.ctype, r, tuning.current(element=element).trsv_nb)
    launch = _kernel(dev, element.ctype, nb, r)
    nblk = -(-n // nb)
    grid = (grid_size(n, nb, sms), 1, 1)
    ws = _workspace(dev, stream.ptr)
    with ws.lock:
        ticket, flags, epoch = ws.reserve(nblk)
        launch(grid, (THREADS, 1, 1), n, nrhs, tp, ldt, xp, ldx, int(bool(lower)),
               int(bool(trans)), epoch, ticket, flags)


def _capturing(stream):
    try:
        return bool(stream.is_capturing())
    except AttributeError:          # a CuPy without graph support cannot be capturing
        return False


def _ld(a, name, element):
    """Leading dimension (elements) of `a`, a row-major 2-D view of `element`s or, for x, a
    1-D vector (one column, any positive stride); ValueError / TypeError otherwise.  Reads only
    the array's kind, ndim, shape, strides and dtype."""
    if a.ndim == 1 and name == "x" and array_kind(a) == "cupy" and a.dtype == element.dtype:
        size = element.itemsize
        if a.strides[0] % size:
            raise ValueError(f"{name} must have whole-element strides")
        stride = a.strides[0] // size
        if stride <= 0 and a.shape[0] > 1:
            raise ValueError("x must have a positive stride")
        return max(stride, 1)
    if a.size == 0 and a.ndim == 2 and array_kind(a) == "cupy" and a.dtype == element.dtype:
        return 1                                    # nothing is read or written
    return row_major_ld(a, name, element)


def check_arguments(t, x):
    """(element, n, nrhs, ldt, ldx) of a solve, or TypeError / ValueError: t (n, n) row-major
    float32 / float64 CuPy view, x (n, nrhs) row-major view (or (n,) vector) of t's dtype,
    nrhs <= MAX_RHS, dimensions below 2**31."""
    if array_kind(t) != "cupy":
        raise TypeError(f"t must be a CuPy array, got {type(t).__name__}")
    element = exact(t.dtype)
    if element is None:
        raise ValueError(f"t must be a float32 or float64 array, got {t.dtype}")
    ldt, ldx = _ld(t, "t", element), _ld(x, "x", element)
    if t.shape[0] != t.shape[1]:
        raise ValueError(f"t must be square, got shape {t.shape}")
    n = t.shape[0]
    if x.shape[0] != n:
        raise ValueError(f"x must have t's {n} rows, got shape {x.shape}")
    nrhs = x.shape[1] if x.ndim == 2 else 1
    if nrhs > MAX_RHS:
        raise ValueError(f"x has {nrhs} columns; this solve takes at most {MAX_RHS} "
                         "(use a blocked triangular solve for more)")
    if max(n, ldt, ldx) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    return element, n, nrhs, ldt, ldx


def solve_triangular_few(t, x, lower, trans=False):
    """x := op(T)^{-1} x in place on the current stream (no host synchronisation); returns x.

    t: float32 or float64 CuPy (n, n) row-major view (unit column stride, any leading
    dimension), read as lu_factor's combined LU: lower=True its strict lower triangle with a
    unit diagonal (L; diagonal and upper triangle never read), lower=False its upper triangle
    with the diagonal (U; strict lower triangle never read).  trans: solve with op(T) = T^T.
    x: CuPy (n, nrhs) row-major view of t's dtype with nrhs <= MAX_RHS, or an (n,) vector;
    both on the current device.  No singularity check: a zero on U's diagonal gives inf/NaN,
    as LAPACK's trsv.
    """
    element, n, nrhs, ldt, ldx = check_arguments(t, x)
    if n == 0 or nrhs == 0:
        return x
    dev = cupy().cuda.runtime.getDevice()
    if t.data.device_id != dev or x.data.device_id != dev:
        raise ValueError(f"t and x must be on the current device {dev}, got devices "
                         f"{t.data.device_id} and {x.data.device_id}")
    trsv_ptr(n, nrhs, t.data.ptr, ldt, x.data.ptr, ldx, lower, trans, element=element)
    return x


def reference(t, x, lower, trans=False):
    """NumPy/SciPy reference of solve_triangular_few in float64 (x not modified): the unit
    lower triangle of t (lower) or its upper triangle with the diagonal, whatever the rest of
    t holds (NaN included)."""
    import scipy.linalg
    t = np.asarray(t, np.float64)
    keep = np.tril(np.ones(t.shape, bool), -1) if lower else np.triu(np.ones(t.shape, bool))
    tri = np.where(keep, t, 0.0) + (np.eye(t.shape[0]) if lower else 0.0)
    return scipy.linalg.solve_triangular(tri, np.asarray(x, np.float64), lower=bool(lower),
                                         trans=1 if trans else 0, unit_diagonal=bool(lower))
