"""Row interchanges (LAPACK slaswp / dlaswp, 0-based, row-major): the launchers of
kernels/laswp.cu, the reference, and host models of the kernel for the CPU tests.

`laswp_inplace` takes a float32 or float64 CuPy row-major view; `laswp_ptr` takes device
pointers and the Element (gpulinalg/core/element.py), for the LU's steps.  Each launch of
laswp_fused applies up to KMAX interchanges: every block of a bandwidth-shaped grid
(FUSED_BLOCKS_PER_SM per SM) plans the net permutation itself while its first strip of rows is
in flight.  The public `laswp` is in gpulinalg/blas.py.
"""

import functools

import numpy as np

from ..core import device
from ..core.arrays import array_kind
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel

FAMILY = "laswp"
# Structural constants of kernels/laswp.cu (they must match the kernel).
KMAX = 512                  # pivots per launch (LASWP_KMAX in the kernel)
FUSED_THREADS = 512         # laswp_fused's __launch_bounds__
FUSED_META = 4 * 6 * KMAX   # s_piv, s_slot, s_key/s_dst (2 KMAX), s_first (2 KMAX)
FUSED_SMEM = FUSED_META + 100 * 1024   # dynamic shared memory of one block
FUSED_BLOCKS_PER_SM = 2     # 2 x FUSED_SMEM (+1 KiB reserved each) fit an SM's 228 KiB
VECTOR_BYTES = 16           # laswp_fused's wide copies: VW = 16 // itemsize elements
ELEMENTS = REAL_KERNEL      # the element types laswp_fused is instantiated for


def fused_cap(element=F32):
    """Elements of strip data per block (the same bytes for every element type)."""
    return (FUSED_SMEM - FUSED_META) // element.itemsize


FUSED_CAP = fused_cap(F32)   # floats of strip data per block


def laswp_reference(v, piv, inverse=False, offset=0):
    """The interchanges one at a time with fancy indexing (NumPy or CuPy), in place: rows
    offset+i <-> piv[i] for i in order (reverse order if inverse); returns v.  The reference
    of the tests and the host path; not fast."""
    order = range(len(piv) - 1, -1, -1) if inverse else range(len(piv))
    for i in order:
        r, p = offset + i, int(piv[i])
        if r != p:
            v[[r, p]] = v[[p, r]]
    return v


def _fused_name(ctype, vw):
    return f"laswp_fused<{ctype},{vw},{FUSED_THREADS}>"


def vector_width(itemsize):
    """Elements per 16-byte copy (VW of the aligned instantiation): 4 floats, 2 doubles."""
    return VECTOR_BYTES // itemsize


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90): per
# element type, 16-byte copies and one-element copies (unaligned rows).
KERNEL_NAMES = tuple(_fused_name(e.ctype, vw) for e in ELEMENTS
                     for vw in (vector_width(e.itemsize), 1))


def fused_grid(n, sms):
    """Blocks of laswp_fused on `sms` SMs: FUSED_BLOCKS_PER_SM per SM, at most one per 8
    columns."""
    return max(1, min(FUSED_BLOCKS_PER_SM * sms, -(-n // 8)))


def fused_strip_width(n, k, grid, element=F32):
    """Host model of laswp_fused's strip width (elements) for k pivots (2k slots) on `grid`
    blocks: the widest multiple of 8 whose 2k rows fit fused_cap(element), shrunk so that the
    strips spread evenly over the grid in as few rounds as possible."""
    wmax = (fused_cap(element) // (2 * k)) & ~7
    rounds = -(-n // (grid * wmax))
    return (-(-n // (grid * rounds)) + 7) & ~7


def hash_bits(k):
    """log2 of the kernel's hash-table size: the power of two >= 2k (load factor <= 1/2)."""
    return max(1, (2 * k - 1).bit_length())


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


def row_major_ld(x, name, element):
    """Leading dimension (elements) of x, a row-major 2-D CuPy view of `element`s (unit
    column stride, rows not overlapping, no negative stride); TypeError / ValueError naming
    `name` otherwise."""
    if array_kind(x) != "cupy":
        raise TypeError(f"{name} must be a CuPy array, got {type(x).__name__}")
    if x.ndim != 2 or x.dtype != element.dtype:
        raise ValueError(f"{name} must be a 2-D {element.name} array, got {x.dtype} of shape "
                         f"{x.shape}")
    size = element.itemsize
    if any(s % size for s in x.strides):
        raise ValueError(f"{name} must have whole-element strides")
    ld = row_leading_dim(x.shape, (x.strides[0] // size, x.strides[1] // size))
    if ld is None:
        raise ValueError(f"{name} must be a row-major view (unit column stride, rows not "
                         "overlapping, no negative strides)")
    return ld


def net_moves(piv, offset=0, inverse=False):
    """Host model of the kernel's plan: the (source row, destination row) pairs that
    applying the interchanges offset+i <-> piv[i] one by one amounts to.

    Same slots (row offset+i: slot i; an outside pivot row: slot k + its first index) and
    the same item-following simulation as laswp_fused; used by the CPU tests and the
    benchmark's gather/scatter baseline.
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


# laswp_fused(n, A, lda, k, piv, offset, inverse, log2h, cap) in Launcher's struct notation.
_FUSED_ARGS = "iPqiPiiii"


@functools.lru_cache(maxsize=None)
def _launcher(device_id, ctype, vw):
    """Launcher of laswp_fused<ctype, vw> on device_id, opted in to FUSED_SMEM; memoised (by
    the C type, a string: a cheap key), so the attribute is set once and a launch costs the
    host one lookup."""
    name = _fused_name(ctype, vw)
    return Launcher(get_kernel(FAMILY, name, dynamic_smem=FUSED_SMEM), _FUSED_ARGS, FUSED_SMEM)


def laswp_inplace(a, piv_dev, inverse=False, offset=0):
    """Apply the interchanges offset+i <-> piv_dev[i] to the rows of `a` in place; returns a.

    a: float32 or float64 CuPy row-major view (unit column stride, any leading dimension; the
    element type is a's dtype).  piv_dev: CuPy integer array of absolute 0-based row indices
    of `a`, already validated (0 <= piv < m, offset + len <= m).  No host synchronisation:
    one laswp_fused launch per KMAX pivots (applied in order) on the current stream.
    """
    cp = cupy()
    if a.ndim != 2:
        raise ValueError("a must be a 2-D array")
    element = exact(a.dtype)
    if element is None:
        raise TypeError(f"laswp_inplace takes float32 or float64 arrays, got {a.dtype}")
    m, n = a.shape
    t0, t1 = a.strides
    size = element.itemsize
    lda = (None if t0 % size or t1 % size
           else row_leading_dim((m, n), (t0 // size, t1 // size)))
    if lda is None:
        raise ValueError("a must be a row-major view (unit column stride)")
    k = piv_dev.shape[0] if piv_dev.ndim == 1 else -1
    if k < 0:
        raise ValueError("piv must be 1-D")
    if offset < 0 or offset + k > m:
        raise ValueError(f"offset {offset} + {k} pivots exceed the {m} rows")
    if k == 0 or n == 0:
        return a
    if m >= 2**31 or n >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    # Pivots as contiguous int32: an asynchronous conversion when needed, never a sync.
    if piv_dev.dtype != np.int32 or (k > 1 and piv_dev.strides[0] != 4):
        piv_dev = cp.ascontiguousarray(piv_dev, dtype=np.int32)
    laswp_ptr(n, a.data.ptr, lda, k, piv_dev.data.ptr, offset, inverse, element=element)
    return a


def laswp_ptr(n, ap, lda, k, pp, offset=0, inverse=False, sms=None, element=F32):
    """laswp_inplace by device pointer, on the current device and stream: the interchanges
    offset+i <-> piv[i] (int32 at pp, 0 <= i < k) on the n columns of the row-major matrix of
    `element`s (F32 or F64) at ap (leading dimension lda, in elements).  No validation and no
    views (the LU's steps address blocks by pointer).  sms: the device's SM count (default:
    asked of the device)."""
    dev = cupy().cuda.runtime.getDevice()
    size = element.itemsize
    # 16-byte row segments: VW = 4 floats or 2 doubles per copy, else one element per copy
    vw = VECTOR_BYTES // size if ap % VECTOR_BYTES == 0 and lda * size % VECTOR_BYTES == 0 else 1
    grid = (fused_grid(n, device.sm_count(dev) if sms is None else sms), 1, 1)
    inv = int(bool(inverse))
    fused = _launcher(dev, element.ctype, vw)
    cap = fused_cap(element)
    for start, count in ((0, k),) if k <= KMAX else launch_plan(k, inverse):
        # pivots are int32: 4 bytes each
        fused(grid, (FUSED_THREADS, 1, 1), n, ap, lda, count, pp + 4 * start, offset + start,
              inv, hash_bits(count), cap)

