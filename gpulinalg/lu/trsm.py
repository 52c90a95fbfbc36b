"""Triangular solves B := L^{-1} B with a unit lower triangular L and B := U^{-1} B with a
non-unit upper triangular U, in place on row-major views: the launch wrappers of
kernels/trsm.cu, for float32 and float64 (the Element, gpulinalg/core/element.py, picks the
instantiation).

The LU uses it for U12 = L11^{-1} A12, in the GPU panel's recursion (gpulinalg/lu/panel_gpu.py)
and in the trailing update (gpulinalg/lu/steps.py) where no inverse is used.  A block of
THREADS threads solves COLS columns of B (lane = column) over all rows of a diagonal block of
at most nbmax(element) rows; a taller L is solved block by block, each block's coupling to the
rows below a GEMM of the element type (gemm.dispatch.gemm_ptr_for).  The solve is
latency-bound: its critical path is the chain of 32-row diagonal solves of one warp.
`lu_solve` (lu/getrs.py) solves both triangles of an LU this way for many right-hand sides.
"""

import functools

import numpy as np

from ..core.arrays import array_kind
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel
from ..gemm.dispatch import gemm_ptr_for, product_into
from ..layout.laswp import row_major_ld

FAMILY = "trsm"
THREADS = 256               # TRSM_THREADS: threads per block (8 warps)
COLS = 32                   # TRSM_COLS: columns of B per block (lane = column)
CHUNK = 32                  # TRSM_CHUNK: rows solved per diagonal block
# Template NB per element type (C type), the last the largest diagonal block of one launch.
# float: 128 (84 KB of shared memory, two blocks per SM); double: 96 (99 KB, still two blocks
# per sm_90 SM and within the 99 KB a block may opt in to on sm_86/89/120 -- NB = 128 would
# need 164 KB: one block per SM, and more than sm_80's 163 KB).
NB_SHAPES_OF = {"float": (32, 64, 128), "double": (32, 64, 96)}
NB_SHAPES = NB_SHAPES_OF["float"]
NBMAX = NB_SHAPES[-1]
ELEMENTS = REAL_KERNEL
_BY_CTYPE = {e.ctype: e for e in ELEMENTS}


def _name(ctype, shape, upper=False):
    return f"trsm_left<{ctype},{shape},{'true' if upper else 'false'}>"


KERNEL_NAMES = tuple(_name(e.ctype, nb, upper) for e in ELEMENTS for nb in NB_SHAPES_OF[e.ctype]
                     for upper in (False, True))


def nbmax(element=F32):
    """The largest diagonal block one launch solves for `element`."""
    return NB_SHAPES_OF[element.ctype][-1]


def shared_bytes(nb_shape, element=F32):
    """Dynamic shared memory of one block: L's transposed triangle (row pitch NB + 4) and the
    block's COLS columns of B."""
    return element.itemsize * (nb_shape * (nb_shape + 4) + nb_shape * COLS)


def nb_shape(nb, element=F32):
    """The smallest template NB >= nb (nb <= nbmax(element))."""
    for s in NB_SHAPES_OF[element.ctype]:
        if nb <= s:
            return s
    raise ValueError(f"a diagonal block of {nb} rows exceeds the kernel's {nbmax(element)}")


def blocks(nb, element=F32):
    """Row blocks [(r0, r1)] of at most nbmax(element) rows: solve block r0:r1, then B[r1:] -=
    L[r1:, r0:r1] X[r0:r1] (GEMM), then the next block (blocked forward substitution)."""
    step = nbmax(element)
    return [(r0, min(nb, r0 + step)) for r0 in range(0, nb, step)]


@functools.lru_cache(maxsize=None)
def _kernel(device_id, ctype, shape, upper=False):
    """Launcher of the kernel for T = ctype, template NB = shape, the lower unit or (upper)
    the upper non-unit solve (parameters nb, ncols, L, ldl, B, ldb), opted in to its shared
    memory (once per device; keyed by the C type, a string: a cheap key on the launch
    path)."""
    smem = shared_bytes(shape, _BY_CTYPE[ctype])
    return Launcher(get_kernel(FAMILY, _name(ctype, shape, upper), dynamic_smem=smem),
                    "iiPqPq", smem)


def trsm_lower_unit(l, b):
    """b := L^{-1} b in place on the current stream (no host synchronisation); returns b.

    l: float32 or float64 CuPy (nb, nb) row-major view (unit column stride, any leading
    dimension) whose strict lower triangle is L's; its diagonal and upper triangle are ignored
    (L has a unit diagonal).  b: CuPy (nb, ncols) row-major view of l's dtype.  Any nb: blocks
    of nbmax rows (float32 128, float64 96) are solved by the kernel, the coupling between
    blocks is a GEMM of the dtype (SGEMM, DGEMM).
    """
    if array_kind(l) != "cupy":
        raise TypeError(f"l must be a CuPy array, got {type(l).__name__}")
    element = exact(l.dtype)            # the element type: l's dtype, b's too
    if element is None:
        raise ValueError(f"l must be a float32 or float64 array, got {l.dtype}")
    ldl, ldb = row_major_ld(l, "l", element), row_major_ld(b, "b", element)
    (nb, nb2), (mb, ncols) = l.shape, b.shape
    if nb != nb2 or mb != nb:
        raise ValueError(f"l must be square and match b's rows: l {l.shape}, b {b.shape}")
    if max(nb, ncols) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if nb <= 1 or ncols == 0:
        return b                                # unit diagonal: nothing to do
    trsm_ptr(nb, ncols, l.data.ptr, ldl, b.data.ptr, ldb, element=element)
    return b


def trsm_ptr(nb, ncols, lp, ldl, bp, ldb, sms=None, table=None, element=F32):
    """trsm_lower_unit by device pointer, on the current device and stream: B (nb x ncols at
    bp, leading dimension ldb) := L^{-1} B with the unit lower triangle of the nb x nb L at lp
    (ldl), both row-major matrices of `element`s (F32 or F64; leading dimensions in elements).
    No validation and no views (the LU's steps address blocks by pointer); ncols >= 1.  sms,
    table: the SM count and tuning table (of `element`) of the GEMM between blocks (pass them
    on a hot path)."""
    if nb <= NB_SHAPES_OF[element.ctype][-1]:
        _launch(lp, ldl, bp, ldb, nb, ncols, element)
        return
    gemm = gemm_ptr_for(element)                # SGEMM (SIMT) or DGEMM; same signature
    size = element.itemsize
    for r0, r1 in blocks(nb, element):
        _launch(lp + size * r0 * (ldl + 1), ldl, bp + size * r0 * ldb, ldb, r1 - r0, ncols,
                element)
        if r1 < nb:                             # rows below the block: pure L (i > k)
            gemm(nb - r1, ncols, r1 - r0, -1.0, lp + size * (r1 * ldl + r0), ldl, True,
                 bp + size * r0 * ldb, ldb, True, 1.0, bp + size * r1 * ldb, ldb,
                 sms=sms, table=table)


def trsm_upper_ptr(nb, ncols, up, ldu, bp, ldb, sms=None, table=None, element=F32):
    """B (nb x ncols at bp, leading dimension ldb) := U^{-1} B with the upper triangle
    (diagonal included) of the nb x nb U at up (ldu), both row-major matrices of `element`s,
    on the current device and stream; as trsm_ptr otherwise: blocks of nbmax(element) rows
    from the last, each block's coupling to the rows above a GEMM."""
    gemm = gemm_ptr_for(element)
    size = element.itemsize
    for r0, r1 in reversed(blocks(nb, element)):
        # the kernel reads the diagonal block and the strip from their last rows up
        _launch(up + size * (r1 - 1) * (ldu + 1), ldu, bp + size * (r1 - 1) * ldb, ldb, r1 - r0,
                ncols, element, upper=True)
        if r0 > 0:                              # rows above the block: B[:r0] -= U[:r0, r0:r1] X
            gemm(r0, ncols, r1 - r0, -1.0, up + size * r0, ldu, True, bp + size * r0 * ldb, ldb,
                 True, 1.0, bp, ldb, sms=sms, table=table)


def solve_lu_blocked(lu, x, precision):
    """x := U^{-1} L^{-1} x in place for lu_factor's row-major factors `lu` (n x n CuPy view)
    and the row-major right-hand sides x (n x nrhs, C-contiguous) of lu's dtype: blocks of
    nbmax rows, each diagonal block by the kernel, each block's coupling a product of the
    arithmetic `precision` names (gemm/dispatch.product_into: "auto" takes float32's 3xTF32
    tensor-core GEMM for the large couplings of many right-hand sides; float64: the DGEMM)."""
    element = exact(lu.dtype)
    n, nrhs = x.shape
    ld = row_major_ld(lu, "lu", element)
    size = element.itemsize
    for r0, r1 in blocks(n, element):
        _launch(lu.data.ptr + size * r0 * (ld + 1), ld, x.data.ptr + size * r0 * nrhs, nrhs,
                r1 - r0, nrhs, element)
        if r1 < n:
            product_into(-1.0, lu[r1:, r0:r1], x[r0:r1], 1.0, x[r1:], precision=precision)
    for r0, r1 in reversed(blocks(n, element)):
        _launch(lu.data.ptr + size * (r1 - 1) * (ld + 1), ld, x.data.ptr + size * (r1 - 1) * nrhs,
                nrhs, r1 - r0, nrhs, element, upper=True)
        if r0 > 0:
            product_into(-1.0, lu[:r0, r0:r1], x[r0:r1], 1.0, x[:r0], precision=precision)
    return x


def _launch(lp, ldl, bp, ldb, nb, ncols, element, upper=False):
    if nb <= 1 and not upper:
        return
    launch = _kernel(cupy().cuda.runtime.getDevice(), element.ctype, nb_shape(nb, element),
                     upper)
    launch((-(-ncols // COLS), 1, 1), (THREADS, 1, 1), nb, ncols, lp, ldl, bp, ldb)


def reference(l, b):
    """NumPy reference of trsm_lower_unit: float64 solve with the strict lower triangle of l
    and a unit diagonal (whatever l's diagonal and upper triangle hold)."""
    import scipy.linalg
    l = np.asarray(l, np.float64)
    lo = np.tril(np.where(np.isfinite(l), l, 0.0), -1) + np.eye(l.shape[0])
    return scipy.linalg.solve_triangular(lo, np.asarray(b, np.float64), lower=True,
                                         unit_diagonal=True)
