"""Batched LU with partial pivoting of stacks of medium matrices (orders up to 1024, used
from 129 on): the launcher of kernels/getrf_batched_blocked.cu, for float32 and float64.

One launch factors a C-contiguous stack (B, M, N), one thread block per matrix: a blocked
right-looking LU within the block (the panel factored in registers, the trailing update from
register tiles), LAPACK xgetrf's result per matrix -- pivot rule, scaling, info -- with
scipy.linalg.lu_factor's 0-based pivots.  Its NumPy model is gpulinalg/lu/batched.py's
`reference`: the kernel applies every update by a fused multiply-add in the unblocked order,
so the factors are the model's.  The kernel's header says which thread does what and the
bound.

`getrf_batched_blocked_ptr` launches by device pointer (no validation);
`getrf_batched_blocked(src, dst, piv, info, flags, gen)` checks CuPy arrays first.
`fits(m, n, element)` says whether the device's shared memory takes an order.
"""

import functools

import numpy as np

from ..core import device
from ..core.arrays import check_device_array, check_on_device
from ..core.backend import cupy
from ..core.element import REAL_KERNEL
from ..core.kernels import Launcher, get_kernel
from .batched import check_stack, launch

FAMILY = "getrf_batched_blocked"
MAX_ORDER = 1024            # GBB_MAXM: the largest M and N
# The compiled template shapes (NB, THREADS, RPT) per element C type: NB the panel width
# (columns factored at a time, the depth of each trailing update), THREADS the threads of a
# matrix's block, RPT the panel rows each thread holds in registers (RPT * NB elements):
# an instance takes M <= THREADS * RPT.  The tuning table's `batched_blocked_shapes` picks
# among these (tuning.py; evidence: docs/tuning.md).
CANDIDATES = {"float": ((32, 256, 1), (32, 256, 2), (32, 512, 1), (32, 512, 2)),
              "double": ((16, 256, 1), (16, 256, 2), (16, 512, 1), (16, 512, 2))}
ELEMENTS = REAL_KERNEL      # the element types the kernel is instantiated for
_BY_CTYPE = {e.ctype: e for e in ELEMENTS}
_SPECS = "iiiPPPPPi"        # batch, m, n, src, dst, piv, info, flags, gen


def _name(ctype, nb, threads, rpt):
    return f"getrf_batched_blocked<{ctype},{nb},{threads},{rpt}>"


KERNEL_NAMES = tuple(_name(e.ctype, *shape) for e in ELEMENTS for shape in CANDIDATES[e.ctype])


def shapes_of(element, shapes=None):
    """The shapes in use for `element`: `shapes`, else the tuning table's
    batched_blocked_shapes of the element type on the current device (THREADS * RPT
    ascending)."""
    if shapes is not None:
        return shapes
    from .. import tuning
    return tuning.current(element=element).batched_blocked_shapes


def shape_for(m, element, shapes=None):
    """The (NB, THREADS, RPT) of an m-row stack: the first of the shapes in use whose
    THREADS * RPT >= m, or None."""
    for shape in shapes_of(element, shapes):
        if shape[1] * shape[2] >= m:
            return shape
    return None


def panel_pitch(m, element):
    """Elements between the panel's columns in shared memory: the least >= m that is 4 mod
    128 / itemsize (conflict-free staging, 16-byte aligned columns)."""
    return m + (4 - m) % (128 // element.itemsize)


def shared_bytes(m, element, shape=None):
    """Dynamic shared memory of the block of an m-row matrix under `shape` = (NB, THREADS,
    ...) (default: shape_for(m)), the kernel's layout: the panel (pitch x NB), the U12 chunk
    (NB x THREADS), then 16 bytes of search keys and 8 of tags per warp, and the two NB-int
    interchange tables."""
    nb, threads = (shape or shape_for(m, element))[:2]
    elems = panel_pitch(m, element) * nb + nb * threads
    return element.itemsize * elems + 24 * (threads // 32) + 8 * nb


def fits(m, n, element, limit=None, shapes=None):
    """Whether the kernel takes an M x N stack of `element` (F32 or F64): both orders in
    1 .. MAX_ORDER, a shape in use for M, and the block's shared memory within `limit` bytes
    (default: the current device's opt-in limit; every order fits sm_80, sm_90 and sm_100)."""
    if getattr(element, "ctype", None) not in CANDIDATES or not 0 < m <= MAX_ORDER \
            or not 0 < n <= MAX_ORDER:
        return False
    shape = shape_for(m, element, shapes)
    if shape is None:
        return False
    if limit is None:
        limit = device.max_shared_per_block()
    return shared_bytes(m, element, shape) <= limit


@functools.lru_cache(maxsize=None)
def _function(device_id, ctype, shape):
    """The kernel on the device, opted in once to the shared memory of the largest order the
    instance takes (or the device's limit, where that is less: fits() keeps larger calls
    away)."""
    top = min(shape[1] * shape[2], MAX_ORDER)
    smem = min(shared_bytes(top, _BY_CTYPE[ctype], shape), device.max_shared_per_block(device_id))
    return get_kernel(FAMILY, _name(ctype, *shape), dynamic_smem=smem)


@functools.lru_cache(maxsize=None)
def _kernel(device_id, ctype, shape, smem):
    """Launcher of the instance with `smem` bytes of dynamic shared memory (a Launcher's is
    fixed: one per size in use)."""
    return Launcher(_function(device_id, ctype, shape), _SPECS, smem)


@functools.lru_cache(maxsize=None)
def route(device_id, ctype, m, n, shapes):
    """(launcher, threads per block, matrices per block) of an m x n stack of `ctype` on the
    device under the tuning table's `shapes` (batched_blocked_shapes), as lu/batched.py's
    `route` (its `launch` launches either), or None where the kernel does not take the
    order."""
    element = _BY_CTYPE[ctype]
    if not fits(m, n, element, device.max_shared_per_block(device_id), shapes):
        return None
    shape = shape_for(m, element, shapes)
    return _kernel(device_id, ctype, shape, shared_bytes(m, element, shape)), shape[1], 1


def getrf_batched_blocked_ptr(batch, m, n, src_ptr, dst_ptr, piv_ptr, info_ptr, flags_ptr, gen,
                              element):
    """The kernel by device pointer, on the current device and stream: the C-contiguous
    (batch, m, n) stack of `element`s (F32 or F64) at src_ptr factored into dst_ptr (the same
    pointer: in place), pivots (batch, min(m, n)) int32 at piv_ptr, info (batch,) int32 at
    info_ptr; `gen` stored to the host-mapped flags_ptr[0] where a matrix is singular and to
    flags_ptr[1] where an input holds an inf or NaN.  No validation; batch, m, n > 0 and
    fits(m, n, element) expected."""
    found = route(cupy().cuda.runtime.getDevice(), element.ctype, m, n,
                  shapes_of(element))
    launch(found, batch, m, n, src_ptr, dst_ptr, piv_ptr, info_ptr, flags_ptr, gen)


def check_arguments(src, dst, piv, info, flags, limit=None):
    """(element, batch, m, n, flags pointer) of a call, or TypeError / ValueError: src and dst
    float32 / float64 CuPy C-contiguous (B, M, N) arrays of one dtype and shape, the same
    array or apart in memory, with fits(M, N) (for `limit` bytes of shared memory, default
    the current device's); piv int32 (B, min(M, N)) and info int32 (B,), C-contiguous CuPy
    arrays; flags a device-addressable int pointer or a CuPy int32 array of 2."""
    element, batch, m, n = check_stack(src, "src")
    check_device_array(dst, "dst", element.dtype, (batch, m, n))
    check_device_array(piv, "piv", np.int32, (batch, min(m, n)))
    check_device_array(info, "info", np.int32, (batch,))
    if isinstance(flags, (int, np.integer)):
        flags_ptr = int(flags)
    else:
        check_device_array(flags, "flags", np.int32, (2,))
        flags_ptr = flags.data.ptr
    nbytes = batch * m * n * element.itemsize
    s, d = src.data.ptr, dst.data.ptr
    if s != d and s < d + nbytes and d < s + nbytes:
        raise ValueError("src and dst must be the same array or not overlap")
    if batch >= 2**31:
        raise ValueError(f"at most 2**31 - 1 matrices per call, got {batch}")
    if batch and m and n and not fits(m, n, element, limit):
        raise ValueError(f"getrf_batched_blocked takes M, N <= {MAX_ORDER} within this "
                         f"device's shared memory; got {m} x {n} {element.name}")
    return element, batch, m, n, flags_ptr


def getrf_batched_blocked(src, dst, piv, info, flags, gen):
    """LU with partial pivoting of each matrix of a stack, on the current stream (no host
    synchronisation).

    src: CuPy C-contiguous (B, M, N) float32 or float64 array, M, N <= MAX_ORDER; dst: the
    same array (in place) or another of its dtype and shape, which gets the factors in
    LAPACK's layout (U on and above the diagonal, L's multipliers below it, the unit diagonal
    not stored); src is not written when dst is another array.  piv: CuPy int32
    (B, min(M, N)), gets the 0-based pivots (row i was interchanged with row piv[b, i], as
    scipy.linalg.lu_factor's).  info: CuPy int32 (B,), gets 0 or the 1-based index of the
    first exactly zero pivot.  flags: an int pointer to two int32 (host-mapped memory, as
    core/mapped.py's) or a CuPy int32 array of 2: the kernel stores `gen` to flags[0] when a
    matrix is singular and to flags[1] when an input holds an inf or NaN, and leaves them
    alone otherwise.  All arrays on the current device.
    """
    element, batch, m, n, flags_ptr = check_arguments(src, dst, piv, info, flags)
    if batch == 0:
        return
    check_on_device(((src, "src"), (dst, "dst"), (piv, "piv"), (info, "info")),
                    cupy().cuda.runtime.getDevice())
    if m == 0 or n == 0:
        info.fill(0)                                # nothing to factor: every info is 0
        return
    getrf_batched_blocked_ptr(batch, m, n, src.data.ptr, dst.data.ptr, piv.data.ptr,
                              info.data.ptr, flags_ptr, int(gen), element)
