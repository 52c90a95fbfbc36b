"""Row interchanges (LAPACK slaswp, 0-based, row-major): launch wrapper for kernels/laswp.cu
and the public laswp."""

import collections
import functools

import numpy as np

from ..core import arrays as _arrays
from ..core import host_io as _host_io
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel

FAMILY = "laswp"
KMAX = 512                  # pivots per launch (LASWP_KMAX in the kernel)
THREADS = 256               # threads per block of laswp_rows (its __launch_bounds__)
STRIP_WIDTHS = (32, 16, 8)  # columns per block, widest first; W=8 always fits KMAX pivots
SMEM_LIMIT = 48 * 1024      # dynamic shared memory without an opt-in

# The planned variant: laswp_plan (one block) writes the net moves to a workspace, then
# laswp_apply moves the rows with a bandwidth-shaped grid.
PLAN_THREADS = 1024         # laswp_plan: one slot per thread (>= 2 * KMAX)
APPLY_THREADS = 512         # laswp_apply's __launch_bounds__
APPLY_BLOCKS_PER_SM = 2     # 2 x APPLY_SMEM (+1 KiB reserved each) within the H100's 228 KiB
MOVES_BYTES = 8 * 2 * KMAX  # s_mv: up to 2k int2 moves
APPLY_SMEM = MOVES_BYTES + 100 * 1024   # dynamic shared memory of one laswp_apply block
APPLY_CAP = (APPLY_SMEM - MOVES_BYTES) // 4   # floats of strip data per block
WORKSPACE_INTS = 2 + 2 * 2 * KMAX       # ws[0] = number of moves, int2 moves from ws + 2

# The fused variant: laswp_fused, plan and apply in one launch (each block plans for itself
# while its first strip is in flight).  Same grid as laswp_apply.
FUSED_THREADS = 512         # laswp_fused's __launch_bounds__
FUSED_META = 4 * 6 * KMAX   # s_piv, s_slot, s_key/s_dst (2 KMAX), s_first (2 KMAX)
FUSED_SMEM = FUSED_META + 100 * 1024   # dynamic shared memory of one laswp_fused block
FUSED_CAP = (FUSED_SMEM - FUSED_META) // 4   # floats of strip data per block

# "strip": laswp_rows, the first kernel (baseline); "planned": laswp_plan + laswp_apply;
# "fused": laswp_fused.  H100, 128 LU-like pivots, kernel-only (graph replay) / per call:
# 16384^2: fused 0.0148 / 0.0284 ms (93% of copy), planned 0.0181 / 0.0327, strip 0.0295 /
# 0.0430; 32768^2: fused 0.0280 / 0.0412 ms (98%), planned 0.0314, strip 0.0538.
VARIANTS = ("planned", "strip", "fused")
DEFAULT = "fused"
BASELINE = "strip"
_NUM_SMS_GUESS = 132
WORKSPACE_CACHE = 16        # cached planned-variant workspaces, one per (device, stream)



def laswp_reference(v, piv, inverse=False):
    """laswp one interchange at a time with fancy indexing (NumPy or CuPy): row i <-> piv[i]
    for i in order (reverse order if inverse).  The reference and the host path; not fast."""
    order = range(len(piv) - 1, -1, -1) if inverse else range(len(piv))
    for i in order:
        p = int(piv[i])
        if p != i:
            v[[i, p]] = v[[p, i]]
    return v

def _kernel_name(w):
    return f"laswp_rows<{w},{THREADS}>"


def _apply_name(vw):
    return f"laswp_apply<{vw},{APPLY_THREADS}>"


PLAN_NAME = f"laswp_plan<{PLAN_THREADS}>"

# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).


def _fused_name(vw):
    return f"laswp_fused<{vw},{FUSED_THREADS}>"


KERNEL_NAMES = (tuple(_kernel_name(w) for w in STRIP_WIDTHS) + (PLAN_NAME,)
                + tuple(_apply_name(vw) for vw in (4, 1))
                + tuple(_fused_name(vw) for vw in (4, 1)))


def apply_grid(n, sm_count):
    """Blocks of laswp_apply: APPLY_BLOCKS_PER_SM per SM, at most one per 8 columns."""
    return max(1, min(APPLY_BLOCKS_PER_SM * sm_count, -(-n // 8)))


def apply_strip_width(n, nm, grid, cap=APPLY_CAP):
    """Host model of laswp_apply's strip width (floats) for nm moved rows on `grid` blocks."""
    wmax = (cap // nm) & ~7
    rounds = -(-n // (grid * wmax))
    return (-(-n // (grid * rounds)) + 7) & ~7


def fused_strip_width(n, k, grid):
    """Host model of laswp_fused's strip width (floats): laswp_apply's rule for 2k slots."""
    return apply_strip_width(n, 2 * k, grid, cap=FUSED_CAP)


@functools.lru_cache(maxsize=None)
def _sm_count(device_id):
    return cupy().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


# Kernel parameters in Launcher's struct notation (kernels/laswp.cu).
_FUSED_ARGS = "iPqiPiiii"   # laswp_fused(n, A, lda, k, piv, offset, inverse, log2h, cap)
_PLAN_ARGS = "iPiiiP"       # laswp_plan(k, piv, offset, inverse, log2h, ws)
_APPLY_ARGS = "iPqPi"       # laswp_apply(n, A, lda, ws, cap)


@functools.lru_cache(maxsize=None)
def _launcher(device_id, name, fmt, smem=0):
    """Launcher of kernel `name` on the current device (device_id) with `smem` bytes of
    dynamic shared memory (opted in beyond the 48 KiB default); memoised, so the attribute is
    set once and a launch costs the host one lookup."""
    return Launcher(get_kernel(FAMILY, name, dynamic_smem=smem), fmt, smem)


_workspaces = collections.OrderedDict()


def _workspace(device_id):
    """The planned variant's workspace for the current stream of device_id, reused by every
    call on that stream (stream order makes the reuse safe: a plan only overwrites it after
    the previous apply on the stream has read it).  Keyed by stream pointer; the stream
    object is held so that its pointer cannot be reused by another stream while cached.  A
    graph replayed on another stream than the one it was captured on shares its workspace
    with that stream: pass workspace= explicitly there."""
    stream = cupy().cuda.get_current_stream()
    key = (device_id, stream.ptr)
    hit = _workspaces.get(key)
    if hit is not None:
        return hit[1]
    ws = cupy().empty(WORKSPACE_INTS, dtype=np.int32)
    _workspaces[key] = (stream, ws)
    while len(_workspaces) > WORKSPACE_CACHE:   # dropped ones go back to their stream's pool
        _workspaces.popitem(last=False)
    return ws


def hash_bits(k):
    """log2 of the kernel's hash-table size: the power of two >= 2k (load factor <= 1/2)."""
    return max(1, (2 * k - 1).bit_length())


def shared_bytes(k, w):
    """Dynamic shared memory of one block: s_val[2k][w], s_piv[k], s_slot[k], 2 hash arrays."""
    return 4 * (2 * k * w + 2 * k + 2 * (1 << hash_bits(k)))


def strip_width(k):
    """Widest column strip whose shared memory fits SMEM_LIMIT for k pivots (k <= KMAX)."""
    for w in STRIP_WIDTHS:
        if shared_bytes(k, w) <= SMEM_LIMIT:
            return w
    raise ValueError(f"{k} pivots do not fit one launch (at most {KMAX})")


def launch_plan(k, inverse=False):
    """[(start, count)] pivot chunks of at most KMAX, in the order they are launched."""
    chunks = [(s, min(KMAX, k - s)) for s in range(0, k, KMAX)]
    return chunks[::-1] if inverse else chunks


def row_leading_dim(shape, strides):
    """Leading dimension of a row-major view (strides in elements), or None when the view
    has no unit column stride, a negative stride, or overlapping rows."""
    m, n = shape
    s0, s1 = strides
    if s0 < 0 or s1 < 0 or (n > 1 and s1 != 1):
        return None
    if m <= 1:
        return max(n, 1)
    return s0 if s0 >= max(n, 1) else None


def net_moves(piv, offset=0, inverse=False):
    """Host model of the kernel's prologue: the (source row, destination row) pairs that
    applying the interchanges offset+i <-> piv[i] one by one amounts to.

    Same slots (row offset+i: slot i; an outside pivot row: slot k + its first index) and
    the same item-following simulation as laswp_rows; used by the CPU tests.
    """
    piv = np.asarray(piv, dtype=np.int64)
    k = len(piv)
    first = {}
    slot = np.empty(k, dtype=np.int64)
    for i, p in enumerate(piv):
        slot[i] = p - offset if 0 <= p - offset < k else k + first.setdefault(int(p), i)
    pos = np.arange(2 * k)
    for i in (range(k - 1, -1, -1) if inverse else range(k)):
        a, b = i, slot[i]
        pos = np.where(pos == a, b, np.where(pos == b, a, pos))

    def row(t):
        return offset + t if t < k else int(piv[t - k])
    return [(row(s), row(int(f))) for s, f in enumerate(pos) if f != s]


def reference_laswp(a, piv, inverse=False, offset=0):
    """Sequential NumPy reference: swap rows offset+i and piv[i], i in order (in place)."""
    order = range(len(piv) - 1, -1, -1) if inverse else range(len(piv))
    for i in order:
        r, p = offset + i, int(piv[i])
        if r != p:
            a[[r, p]] = a[[p, r]]
    return a


def laswp_inplace(a, piv_dev, inverse=False, offset=0, variant=None, workspace=None):
    """Apply the interchanges offset+i <-> piv_dev[i] to the rows of `a` in place; returns a.

    a: float32 CuPy row-major view (unit column stride, any leading dimension).  piv_dev: CuPy
    integer array of absolute 0-based row indices of `a`, already validated (0 <= piv < m,
    offset + len <= m).  No host synchronisation: launches on the current stream, per KMAX
    pivots (applied in order) one laswp_rows launch ("strip"), laswp_plan + laswp_apply
    ("planned", the default) or one laswp_fused launch ("fused").  workspace: optional CuPy
    int32 array of at least WORKSPACE_INTS elements for the planned variant (else one cached
    per device and stream is used).
    """
    cp = cupy()
    if a.ndim != 2 or a.dtype != np.float32:
        raise ValueError("a must be a 2-D float32 array")
    m, n = a.shape
    t0, t1 = a.strides
    lda = None if t0 % 4 or t1 % 4 else row_leading_dim((m, n), (t0 // 4, t1 // 4))
    if lda is None:
        raise ValueError("a must be a row-major view (unit column stride)")
    k = piv_dev.shape[0] if piv_dev.ndim == 1 else -1
    if k < 0:
        raise ValueError("piv must be 1-D")
    if offset < 0 or offset + k > m:
        raise ValueError(f"offset {offset} + {k} pivots exceed the {m} rows")
    variant = DEFAULT if variant is None else variant
    if variant not in VARIANTS:
        raise ValueError(f"unknown laswp variant {variant!r}; choose from {VARIANTS}")
    if k == 0 or n == 0:
        return a
    if m >= 2**31 or n >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    # Pivots as contiguous int32: an asynchronous conversion when needed, never a sync.
    if piv_dev.dtype != np.int32 or (k > 1 and piv_dev.strides[0] != 4):
        piv_dev = cp.ascontiguousarray(piv_dev, dtype=np.int32)
    if variant == "strip":
        for start, count in (((0, k),) if k <= KMAX else launch_plan(k, inverse)):
            w = strip_width(count)
            kernel = get_kernel(FAMILY, _kernel_name(w))
            kernel((-(-n // w),), (THREADS,),
                   (np.int32(n), a, np.int64(lda), np.int32(count),
                    _piv_chunk(piv_dev, start, count, k), np.int32(offset + start),
                    np.int32(bool(inverse)), np.int32(hash_bits(count))),
                   shared_mem=shared_bytes(count, w))
        return a
    if variant == "planned":
        if workspace is None:
            workspace = _workspace(cp.cuda.runtime.getDevice())
        elif (workspace.dtype != np.int32 or workspace.size < WORKSPACE_INTS
              or not workspace.flags.c_contiguous):
            raise ValueError(f"workspace must be a contiguous int32 array of {WORKSPACE_INTS}")
    laswp_ptr(n, a.data.ptr, lda, k, piv_dev.data.ptr, offset, inverse, variant,
              0 if workspace is None else workspace.data.ptr)
    return a


def laswp_ptr(n, ap, lda, k, pp, offset=0, inverse=False, variant=None, wp=0):
    """laswp_inplace by device pointer, on the current device and stream: the interchanges
    offset+i <-> piv[i] (int32 at pp, 0 <= i < k) on the n columns of the row-major float32
    matrix at ap (leading dimension lda).  No validation and no views (the LU's steps address
    blocks by pointer); variant "fused" (None: DEFAULT) or "planned" (wp: its workspace)."""
    variant = DEFAULT if variant is None else variant
    if variant not in ("fused", "planned"):
        raise ValueError(f"laswp_ptr runs the fused and planned variants, not {variant!r}")
    dev = cupy().cuda.runtime.getDevice()
    vw = 4 if ap % 16 == 0 and lda % 4 == 0 else 1   # 16-byte row segments
    grid = (apply_grid(n, _sm_count(dev)), 1, 1)
    inv = int(bool(inverse))
    chunks = ((0, k),) if k <= KMAX else launch_plan(k, inverse)
    if variant == "fused":
        fused = _launcher(dev, _fused_name(vw), _FUSED_ARGS, FUSED_SMEM)
        for start, count in chunks:
            fused(grid, (FUSED_THREADS, 1, 1), n, ap, lda, count, pp + 4 * start,
                  offset + start, inv, hash_bits(count), FUSED_CAP)
        return
    plan = _launcher(dev, PLAN_NAME, _PLAN_ARGS)
    apply = _launcher(dev, _apply_name(vw), _APPLY_ARGS, APPLY_SMEM)
    for start, count in chunks:
        plan((1, 1, 1), (PLAN_THREADS, 1, 1), count, pp + 4 * start, offset + start, inv,
             hash_bits(count), wp)
        apply(grid, (APPLY_THREADS, 1, 1), n, ap, lda, wp, APPLY_CAP)


def _piv_chunk(piv_dev, start, count, k):
    """piv_dev[start:start+count] (the array itself when it is the whole vector: no view)."""
    return piv_dev if count == k else piv_dev[start:start + count]


def _element_strides(a, kind):
    """Strides of a in elements (None when they are not whole elements)."""
    if kind.startswith("torch"):
        return tuple(a.stride())
    if any(s % a.itemsize for s in a.strides):
        return None
    return tuple(s // a.itemsize for s in a.strides)


def _host_pivots(piv, m):
    """Validated pivots as a host int32 array (one device->host copy for device pivots)."""
    kind = _arrays.array_kind(piv)
    if kind == "cupy":
        p = piv.get()
    elif kind.startswith("torch"):
        p = piv.detach().cpu().numpy()
    else:
        p = np.asarray(piv)
    if p.ndim != 1:
        raise ValueError(f"piv must be 1-D, got shape {p.shape}")
    if p.size == 0:
        return np.empty(0, dtype=np.int32)
    if p.dtype.kind not in "iu":
        raise TypeError(f"piv must hold integers, got dtype {p.dtype}")
    if p.size > m:
        raise ValueError(f"piv has {p.size} entries but a has only {m} rows")
    bad = np.flatnonzero((p < 0) | (p >= m))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"piv[{i}] = {int(p[i])} is out of range for a matrix with {m} rows "
                         "(pivots are 0-based)")
    return p.astype(np.int32)


def laswp(a, piv, inverse=False):
    """Apply row interchanges to a single-precision matrix in place, on the GPU.

    For ``i = 0, 1, ..., len(piv)-1`` in order, rows ``i`` and ``piv[i]`` of `a` are swapped
    (``inverse=True``: ``i`` from ``len(piv)-1`` down to 0, which undoes the forward swaps).
    This is LAPACK's ``slaswp`` with 0-based pivots, as returned by `scipy.linalg.lu_factor`.

    Parameters
    ----------
    a : (m, n) array
        float32, modified in place: a CuPy array or torch CUDA tensor (on the caller's current
        stream; torch: torch's current stream), or a NumPy array / CPU tensor (sent to the GPU,
        swapped there and written back).  Row-major rows (unit column stride) with any leading
        dimension, e.g. a block of columns ``b[:, j0:j1]`` of a C-ordered matrix.
    piv : (k,) array_like of int
        0-based row indices, ``k <= m``, ``0 <= piv[i] < m``; NumPy, CuPy, torch or a list.
        Rows may be named several times (a row may move twice): the result is always that of
        the swaps applied one by one.
    inverse : bool, optional
        Apply the interchanges in reverse order.

    Returns
    -------
    a : (m, n) array
        The same object, permuted.

    Raises
    ------
    ValueError
        `a` not 2-D or without unit column stride, `piv` not 1-D, too long or out of range.
    TypeError
        `a` not float32 (the swap is in place, so no conversion is possible), or non-integer
        pivots.
    CudaUnavailableError
        No CuPy or no CUDA device.

    All checks happen before `a` is touched: on error it is unchanged.

    See Also
    --------
    scipy.linalg.lapack.slaswp : the LAPACK routine (1-based pivots, column-major storage).
    scipy.linalg.lu_factor : produces such pivots.

    Notes
    -----
    Unlike LAPACK, `a` is stored row-wise, so each row is contiguous.  Up to 512
    interchanges are applied per pass (kernels/laswp.cu): one small kernel works out the net
    permutation of the (at most ``2k``) touched rows once, then a bandwidth kernel copies each
    moved row's column strip into shared memory and writes it to its destination row, every
    moved row read and written once.  It is bandwidth-bound: ``8 * n`` bytes per moved row.
    Device pivots are copied to the host once for validation.
    """
    if not hasattr(a, "shape"):
        raise TypeError("a must be an array (NumPy, CuPy or torch): it is modified in place")
    kind = _arrays.array_kind(a)
    shape = tuple(a.shape)
    if len(shape) != 2:
        raise ValueError(f"a must be 2-D, got shape {shape}")
    dtype = _arrays.dtype_of(a)
    if dtype != np.float32 or str(a.dtype).endswith("bfloat16"):
        raise TypeError(f"a has dtype {a.dtype}; laswp works in place and needs float32")
    strides = _element_strides(a, kind)
    if strides is None or row_leading_dim(shape, strides) is None:
        raise ValueError("a must have unit column stride (row-major rows, any leading "
                         "dimension); use numpy.ascontiguousarray or permute a.T instead")
    m, n = shape
    p = _host_pivots(piv, m)
    if p.size == 0 or n == 0:
        return a
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a,))):
        piv_dev = cp.asarray(p)
        if kind in ("cupy", "torch"):
            laswp_inplace(_arrays.to_device(a, kind, "a"), piv_dev, inverse)
            return a
        host = a.detach().numpy() if kind == "torch_cpu" else a   # shares a's memory
        dev = _host_io.upload(cp, host)   # C-ordered float32, as laswp_inplace needs
        laswp_inplace(dev, piv_dev, inverse)
        _host_io.download(cp, dev, out=host)   # straight into the caller's rows
        return a
