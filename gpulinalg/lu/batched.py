"""Batched LU with partial pivoting of stacks of small matrices: the launcher of
kernels/getrf_batched.cu, for float32 and float64, and its NumPy model.

For stacks like 100000 matrices of 8 x 8 or 10000 of 64 x 64, where a blocked LU per matrix
would spend all its time in launches: one launch factors the whole C-contiguous stack
(B, M, N) in place, each matrix held in registers while it is factored (a warp or a part of
one per matrix up to 32, a block of warps per matrix above), with LAPACK xgetrf's result per
matrix -- pivot rule, scaling, info -- and scipy.linalg.lu_factor's 0-based pivots.  The
kernel's header says which thread does what, the arithmetic and the bound.

`getrf_batched(a, piv, info)` takes CuPy arrays on the current device and stream;
`max_order(element)` is the largest M and N it takes; `reference(a)` computes the same in
NumPy (the emulation path and the GPU tests' reference).  `gpulinalg/lu/stacked.py` calls
them for lu_factor on stacks.
"""

import functools

import numpy as np

from ..core import device, mapped
from ..core.arrays import (array_kind, c_contiguous, check_device_array,
                           check_on_device)
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel

FAMILY = "getrf_batched"
WARPS = 4                   # GBATCH_WARPS: warps per block of the C = 1 shapes (32/G matrices each)
# The compiled template shapes (NMAX, G, C) per element C type.  NMAX: the largest order of the
# instance; G: lanes per group (a group holds every row of its columns, NMAX / G rows per
# lane); C: groups per matrix (C = 1: 32 / G matrices per warp; C > 1: one matrix per block
# of C warps).  Data registers per thread: NMAX^2 / (G C) elements, at most 64 floats or 32
# doubles; the fewer lanes per matrix, the more matrices share a warp's per-column overhead,
# the more lanes, the fewer registers and the more warps an SM holds.  The tuning table's
# `batched_shapes` picks one per NMAX among these (tuning.py; evidence: docs/tuning.md).
CANDIDATES = {"float": ((8, 2, 1), (8, 4, 1), (16, 4, 1), (16, 8, 1), (32, 16, 1), (32, 32, 1),
                        (64, 32, 2), (64, 32, 4), (128, 32, 8), (128, 32, 16)),
              "double": ((8, 4, 1), (8, 8, 1), (16, 8, 1), (16, 16, 1), (32, 32, 1),
                         (64, 32, 4), (64, 32, 8), (128, 32, 16))}
META_INTS = 8               # ints of shared memory for the per-column (pivot row, position) pairs
ELEMENTS = REAL_KERNEL      # the element types the kernel is instantiated for
_BY_CTYPE = {e.ctype: e for e in ELEMENTS}
_SPECS = "iiiPPPPPi"        # batch, m, n, src, dst, piv, info, flags, gen


def _name(ctype, nmax, g, c):
    return f"getrf_batched<{ctype},{nmax},{g},{c}>"


KERNEL_NAMES = tuple(_name(e.ctype, *shape) for e in ELEMENTS for shape in CANDIDATES[e.ctype])


def shapes_of(element, shapes=None):
    """The shapes in use for `element`: `shapes`, else the tuning table's batched_shapes of
    the element type on the current device (NMAX ascending)."""
    if shapes is not None:
        return shapes
    from .. import tuning
    return tuning.current(element=element).batched_shapes


def threads(g, c):
    """Threads per block of a (G, C) shape: WARPS warps for C = 1, else G*C (one matrix)."""
    return 32 * WARPS if c == 1 else g * c


def per_block(g, c):
    """Matrices per block of a (G, C) shape."""
    return threads(g, c) // (g * c)


def shared_bytes(nmax, g, c, element=F32):
    """Dynamic shared memory of one block (the kernel's layout): the staging rows of its
    matrices (pitch nmax + 16/itemsize), each group's two pivot-row buffers, for C > 1 the two
    multiplier columns, then the ints: META_INTS, for C > 1 the pivots, and info."""
    vk = 16 // element.itemsize
    mpb = per_block(g, c)
    elems = mpb * nmax * (nmax + vk) + mpb * 2 * nmax + (2 * nmax if c > 1 else 0)
    ints = META_INTS + (nmax if c > 1 else 0) + 1
    return element.itemsize * elems + 4 * ints


def max_order(element, limit=None, shapes=None):
    """The largest M and N getrf_batched takes for `element` (F32 or F64): the largest NMAX of
    the shapes in use (shapes_of) whose block fits `limit` bytes of shared memory (default:
    the current device's opt-in limit; float 128 everywhere from sm_80 on, double 128 on
    sm_80, sm_90 and sm_100, 64 on devices with 99 KB per block).  0 for an element type the
    kernel lacks."""
    ctype = getattr(element, "ctype", None)
    if ctype not in CANDIDATES:
        return 0
    if limit is None:
        limit = device.max_shared_per_block()
    fits = [nmax for nmax, g, c in shapes_of(element, shapes)
            if shared_bytes(nmax, g, c, element) <= limit]
    return fits[-1] if fits else 0


def shape_for(m, n, element=F32, limit=None, shapes=None):
    """The (NMAX, G, C) shape of an M x N stack: the first of the shapes in use (shapes_of)
    with NMAX >= max(M, N) whose block fits `limit` bytes (default: the current device's);
    ValueError where none does."""
    if limit is None:
        limit = device.max_shared_per_block()
    order = max(m, n)
    for shape in shapes_of(element, shapes):
        if shape[0] >= order and shared_bytes(*shape, element) <= limit:
            return shape
    raise ValueError(f"getrf_batched takes M, N <= {max_order(element, limit, shapes)} for "
                     f"{element.name}; got a {m} x {n} stack")


def grid_size(batch, g, c):
    """Blocks of a launch: one per per_block(g, c) matrices."""
    return -(-batch // per_block(g, c))


@functools.lru_cache(maxsize=None)
def _kernel(device_id, ctype, nmax, g, c):
    """Launcher of getrf_batched<ctype, nmax, g, c> on the device, opted in to its shared
    memory."""
    smem = shared_bytes(nmax, g, c, _BY_CTYPE[ctype])
    return Launcher(get_kernel(FAMILY, _name(ctype, nmax, g, c), dynamic_smem=smem), _SPECS,
                    smem)


@functools.lru_cache(maxsize=None)
def route(device_id, ctype, m, n, shapes):
    """(launcher, threads per block, matrices per block) of an m x n stack of `ctype` on the
    device under the tuning table's `shapes`, or None where the kernel does not take that
    order (its block would not fit)."""
    element = _BY_CTYPE[ctype]
    limit = device.max_shared_per_block(device_id)
    if max(m, n) > max_order(element, limit, shapes):
        return None
    nmax, g, c = shape_for(m, n, element, limit, shapes)
    return _kernel(device_id, ctype, nmax, g, c), threads(g, c), per_block(g, c)


def launch(found, batch, m, n, srcp, dstp, pivp, infop, flagsp, gen):
    """One launch on the current stream of a `route` result: the C-contiguous (batch, m, n)
    stack at srcp factored into dstp (the same pointer: in place), pivots (batch, min(m, n))
    int32 at pivp, info (batch,) int32 at infop; `gen` stored to the host-mapped flagsp[0]
    where a matrix is singular and to flagsp[1] where an input holds an inf or NaN
    (core/mapped.py).  No validation; batch, m, n > 0 expected."""
    launcher, block, per = found
    launcher((-(-batch // per), 1, 1), (block, 1, 1), batch, m, n, srcp, dstp, pivp, infop,
             flagsp, gen)


def getrf_batched_ptr(batch, m, n, srcp, dstp, pivp, infop, flagsp, gen, element=F32):
    """`launch` on the current device for `element`s (F32 or F64), max(m, n) <=
    max_order(element) expected."""
    found = route(cupy().cuda.runtime.getDevice(), element.ctype, m, n, shapes_of(element))
    launch(found, batch, m, n, srcp, dstp, pivp, infop, flagsp, gen)


def check_stack(a, name):
    """(element, batch, m, n) of `a`, or TypeError / ValueError unless it is a float32 or
    float64 C-contiguous (B, M, N) CuPy array (the batched kernels' input)."""
    if array_kind(a) != "cupy":
        raise TypeError(f"{name} must be a CuPy array, got {type(a).__name__}")
    element = exact(a.dtype)
    if element is None:
        raise TypeError(f"{name} must be a float32 or float64 array, got {a.dtype}")
    if a.ndim != 3:
        raise ValueError(f"{name} must be a (B, M, N) stack, got shape {tuple(a.shape)}")
    if not c_contiguous(a):
        raise ValueError(f"{name} must be C-contiguous")
    batch, m, n = (int(s) for s in a.shape)
    return element, batch, m, n


def check_arguments(a, piv, info, limit=None):
    """(element, batch, m, n) of a call, or TypeError / ValueError: a float32 / float64 CuPy
    C-contiguous (B, M, N) array with M, N <= max_order (for `limit` bytes of shared memory,
    default the current device's), piv int32 (B, min(M, N)) and info int32 (B,), both
    C-contiguous CuPy arrays.  Reads only kinds, ndim, shapes, strides and dtypes."""
    element, batch, m, n = check_stack(a, "a")
    check_device_array(piv, "piv", np.int32, (batch, min(m, n)))
    check_device_array(info, "info", np.int32, (batch,))
    if batch >= 2**31:
        raise ValueError(f"at most 2**31 - 1 matrices per call, got {batch}")
    if batch and m and n:
        order = max_order(element, limit)
        if max(m, n) > order:
            raise ValueError(f"getrf_batched takes M, N <= {order} for {element.name}; got "
                             f"{m} x {n} (factor larger matrices one by one)")
    return element, batch, m, n


def getrf_batched(a, piv, info):
    """LU with partial pivoting of each matrix of a stack, in place on the current stream (no
    host synchronisation).

    a: CuPy C-contiguous (B, M, N) float32 or float64 array, M, N <= max_order(element),
    overwritten by the factors in LAPACK's layout (U on and above the diagonal, L's
    multipliers below it, the unit diagonal not stored).  piv: CuPy int32 (B, min(M, N))
    C-contiguous, gets the 0-based pivots (row i was interchanged with row piv[b, i], as
    scipy.linalg.lu_factor's).  info: CuPy int32 (B,), gets 0 or the 1-based index of the
    first exactly zero pivot, as LAPACK's.  All three on the current device.
    """
    element, batch, m, n = check_arguments(a, piv, info)
    if batch == 0:
        return
    check_on_device(((a, "a"), (piv, "piv"), (info, "info")), cupy().cuda.runtime.getDevice())
    if m == 0 or n == 0:
        info.fill(0)                                # nothing to factor: every info is 0
        return
    flags = mapped.flags()
    gen = flags.next_gen()
    getrf_batched_ptr(batch, m, n, a.data.ptr, a.data.ptr, piv.data.ptr, info.data.ptr,
                      flags.ptr, gen, element)


_REFERENCE_TYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                               np.complex128))
_CHUNK = 1 << 20            # elements the reference factors at once (bounds its temporaries)


def reference(a):
    """NumPy model of getrf_batched: (lu, piv, info) for the (B, M, N) stack `a` (float32 or
    float64; also complex64 / complex128 for the emulation of complex stacks), any M, N; new
    arrays lu (B, M, N) of a's dtype, piv int32 (B, min(M, N)) 0-based, info int32 (B,).

    The kernel's algorithm, vectorised over the matrices (one pass per column k): the pivot
    is the first maximum of |a_ik| over i >= k among the numbers, or k itself where a_kk is
    NaN (LAPACK i?amax's strict > scan from row k; complex: |re| + |im|, as izamax); the
    multipliers are a_ik * (1 / a_kk) -- for float64 where |a_kk| < the smallest normal
    number (a subnormal pivot, where LAPACK divides) (a_ik * (1 / (a_kk 2^64))) 2^64, whose
    reciprocal does not overflow -- and unscaled where a_kk == 0 (info = the first such
    k + 1); the
    update a_ij - a_ik a_kj is the kernel's fused multiply-add, rounded once (`fms`), so for
    real matrices of normal numbers the factors are the kernel's bit for bit.  Complex
    matrices (the kernel has none) are updated with two roundings.
    """
    a = np.asarray(a)
    if a.ndim != 3:
        raise ValueError(f"a must be a (B, M, N) stack, got shape {a.shape}")
    if a.dtype not in _REFERENCE_TYPES:
        raise TypeError(f"reference takes float32, float64, complex64 or complex128, got "
                        f"{a.dtype}")
    lu = np.array(a, order="C", copy=True)
    batch, m, n = lu.shape
    kk = min(m, n)
    piv = np.zeros((batch, kk), np.int32)
    info = np.zeros(batch, np.int32)
    step = max(1, _CHUNK // max(1, m * n))
    for s in range(0, batch, step):
        _reference_chunk(lu[s:s + step], piv[s:s + step], info[s:s + step])
    return lu, piv, info


def _reference_chunk(lu, piv, info):
    """reference on a view of the stack, in place."""
    batch, m, n = lu.shape
    dtype = lu.dtype
    cplx = dtype.kind == "c"
    tiny = np.finfo(dtype).tiny                     # LAPACK's sfmin of the dtype
    one = dtype.type(1)
    for k in range(min(m, n)):
        col = lu[:, k:, k]
        mag = np.abs(col.real) + np.abs(col.imag) if cplx else np.abs(col)
        nan = np.isnan(mag)
        p = np.argmax(np.where(nan, -1, mag), axis=1)      # the first maximum of the numbers
        p[nan[:, 0]] = 0                                   # a NaN at k: the scan never moves
        p += k
        piv[:, k] = p
        moved = np.nonzero(p != k)[0]
        if moved.size:
            held = lu[moved, k, :].copy()
            lu[moved, k, :] = lu[moved, p[moved], :]
            lu[moved, p[moved], :] = held
        pv = lu[:, k, k].copy()
        zero = pv == 0
        info[(info == 0) & zero] = k + 1
        if k + 1 == m:
            continue
        sub = lu[:, k + 1:, k]
        with np.errstate(all="ignore"):
            if dtype == np.float32:
                scaled = sub * (one / pv)[:, None]
            elif dtype == np.float64:           # the kernel's reciprocal of a tiny pivot
                up = np.where(np.abs(pv) < tiny, _UP, 1.0)[:, None]
                scaled = (sub * (one / (pv[:, None] * up))) * up
            else:                               # complex: LAPACK's division by a tiny pivot
                scaled = np.where((np.abs(pv) < tiny)[:, None], sub / pv[:, None],
                                  sub * (one / pv)[:, None])
        lu[:, k + 1:, k] = np.where(zero[:, None], sub, scaled)
        if k + 1 == n:
            continue
        t = lu[:, k + 1:, k + 1:]
        t[...] = fms(t, lu[:, k + 1:, k, None], lu[:, k, None, k + 1:])


def _two_sum(a, b):
    """(s, e): s = a + b rounded, e = a + b - s exactly (Knuth's 2Sum; finite a, b)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_odd(s, e):
    """The float64 rounding to odd of x = s + e (s = x rounded to nearest, e exact): s
    where exact or odd, else its neighbour towards x (the odd one of the two around x)."""
    fix = (e != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s


_SPLIT = 134217729.0        # 2^27 + 1: Veltkamp's splitting of a float64 into two halves
_UP = 2.0 ** 64             # the kernel's scaling of a tiny float64 pivot before its reciprocal


def fms(t, l, u):
    """t - l*u rounded once to the dtype of t (broadcasting): the kernel's fma(-l, u, t).

    float32: the product is exact in float64, the difference is rounded to odd in float64 and
    then to float32, which is the correctly rounded result (53 >= 2*24 + 2 bits).  float64:
    Boldo and Melquiond's emulation, l*u = ph + pl exactly (Dekker's product), c + ph =
    th + tl exactly (2Sum), z = RN(th + RO(tl - pl)), correctly rounded where nothing over-
    or underflows; elsewhere (|l|, |u| >= 2^995, 0 < |l*u| <= 2^-960, non-finite values) two
    roundings.  Other dtypes: two roundings.
    """
    with np.errstate(all="ignore"):
        if t.dtype == np.float32:
            p = l.astype(np.float64) * u.astype(np.float64)
            return _round_odd(*_two_sum(t.astype(np.float64), -p)).astype(np.float32)
        ph = l * u
        if t.dtype != np.float64:
            return t - ph
        cl = _SPLIT * l
        lh = cl - (cl - l)
        cu = _SPLIT * u
        uh = cu - (cu - u)
        ll, ul = l - lh, u - uh
        pl = ((lh * uh - ph) + lh * ul + ll * uh) + ll * ul
        th, tl = _two_sum(t, -ph)
        z = th + _round_odd(*_two_sum(tl, -pl))
        exact = (np.isfinite(z) & np.isfinite(ph) & (np.abs(l) < 2.0 ** 995)
                 & (np.abs(u) < 2.0 ** 995) & ((np.abs(ph) > 2.0 ** -960) | (ph == 0)))
        return np.where(exact, z, t - ph)
