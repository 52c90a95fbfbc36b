"""Triangular solve B := L^{-1} B with a unit lower triangular L, in place on row-major views:
the launch wrapper of kernels/trsm.cu.

The LU uses it for U12 = L11^{-1} A12, in the GPU panel's recursion (gpulinalg/lu/panel_gpu.py)
and in the trailing update (gpulinalg/lu/steps.py) where no inverse is used.  A block of
THREADS threads solves COLS columns of B (lane = column) over all rows of a diagonal block of
at most NBMAX rows; a taller L is solved block by block, each block's coupling to the rows
below an SGEMM.  The solve is latency-bound: its critical path is the chain of 32-row
diagonal solves of one warp.
"""

import functools

import numpy as np

from ..core.arrays import array_kind
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel
from ..gemm.dispatch import gemm_ptr
from ..layout.laswp import row_leading_dim

FAMILY = "trsm"
THREADS = 256               # TRSM_THREADS: threads per block (8 warps)
COLS = 32                   # TRSM_COLS: columns of B per block (lane = column)
CHUNK = 32                  # TRSM_CHUNK: rows solved per diagonal block
NB_SHAPES = (32, 64, 128)   # template NB: largest diagonal block of one launch
NBMAX = NB_SHAPES[-1]
KERNEL_NAMES = tuple(f"trsm_llnu<{nb}>" for nb in NB_SHAPES)


def shared_bytes(nb_shape):
    """Dynamic shared memory of one block: L's transposed triangle (row pitch NB + 4) and the
    block's COLS columns of B."""
    return 4 * (nb_shape * (nb_shape + 4) + nb_shape * COLS)


def nb_shape(nb):
    """The smallest template NB >= nb (nb <= NBMAX)."""
    for s in NB_SHAPES:
        if nb <= s:
            return s
    raise ValueError(f"a diagonal block of {nb} rows exceeds the kernel's {NBMAX}")


def blocks(nb):
    """Row blocks [(r0, r1)] of at most NBMAX rows: solve block r0:r1, then B[r1:] -=
    L[r1:, r0:r1] X[r0:r1] (SGEMM), then the next block (blocked forward substitution)."""
    return [(r0, min(nb, r0 + NBMAX)) for r0 in range(0, nb, NBMAX)]


@functools.lru_cache(maxsize=None)
def _kernel(device_id, shape):
    """Launcher of the kernel for template NB = shape (parameters nb, ncols, L, ldl, B, ldb),
    opted in to its shared memory (once per device)."""
    smem = shared_bytes(shape)
    return Launcher(get_kernel(FAMILY, f"trsm_llnu<{shape}>", dynamic_smem=smem), "iiPqPq",
                    smem)


def _row_ld(x, name):
    """Leading dimension (elements) of a float32 row-major CuPy view, else ValueError."""
    if array_kind(x) != "cupy":
        raise TypeError(f"{name} must be a CuPy array, got {type(x).__name__}")
    if x.ndim != 2 or x.dtype != np.float32:
        raise ValueError(f"{name} must be a 2-D float32 array, got {x.dtype} of shape "
                         f"{x.shape}")
    if any(s % 4 for s in x.strides):
        raise ValueError(f"{name} must have whole-element strides")
    ld = row_leading_dim(x.shape, (x.strides[0] // 4, x.strides[1] // 4))
    if ld is None:
        raise ValueError(f"{name} must be a row-major view (unit column stride, rows not "
                         "overlapping, no negative strides)")
    return ld


def trsm_lower_unit(l, b):
    """b := L^{-1} b in place on the current stream (no host synchronisation); returns b.

    l: float32 CuPy (nb, nb) row-major view (unit column stride, any leading dimension) whose
    strict lower triangle is L's; its diagonal and upper triangle are ignored (L has a unit
    diagonal).  b: float32 CuPy (nb, ncols) row-major view.  Any nb: blocks of 128 rows are
    solved by the kernel, the coupling between blocks is an SGEMM (gemm_into).
    """
    ldl, ldb = _row_ld(l, "l"), _row_ld(b, "b")
    (nb, nb2), (mb, ncols) = l.shape, b.shape
    if nb != nb2 or mb != nb:
        raise ValueError(f"l must be square and match b's rows: l {l.shape}, b {b.shape}")
    if max(nb, ncols) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if nb <= 1 or ncols == 0:
        return b                                # unit diagonal: nothing to do
    trsm_ptr(nb, ncols, l.data.ptr, ldl, b.data.ptr, ldb)
    return b


def trsm_ptr(nb, ncols, lp, ldl, bp, ldb, sms=None, table=None):
    """trsm_lower_unit by device pointer, on the current device and stream: B (nb x ncols at
    bp, leading dimension ldb) := L^{-1} B with the unit lower triangle of the nb x nb L at lp
    (ldl), both row-major.  No validation and no views (the LU's steps address blocks by
    pointer); ncols >= 1.  sms, table: the SM count and tuning table of the SGEMM between
    blocks (gemm_ptr's; pass them on a hot path)."""
    if nb <= NBMAX:
        _launch(lp, ldl, bp, ldb, nb, ncols)
        return
    for r0, r1 in blocks(nb):
        _launch(lp + 4 * r0 * (ldl + 1), ldl, bp + 4 * r0 * ldb, ldb, r1 - r0, ncols)
        if r1 < nb:                             # rows below the block: pure L (i > k)
            gemm_ptr(nb - r1, ncols, r1 - r0, -1.0, lp + 4 * (r1 * ldl + r0), ldl, True,
                     bp + 4 * r0 * ldb, ldb, True, 1.0, bp + 4 * r1 * ldb, ldb,
                     sms=sms, table=table)


def _launch(lp, ldl, bp, ldb, nb, ncols):
    if nb <= 1:
        return
    launch = _kernel(cupy().cuda.runtime.getDevice(), nb_shape(nb))
    launch((-(-ncols // COLS), 1, 1), (THREADS, 1, 1), nb, ncols, lp, ldl, bp, ldb)


def reference(l, b):
    """NumPy reference of trsm_lower_unit: float64 solve with the strict lower triangle of l
    and a unit diagonal (whatever l's diagonal and upper triangle hold)."""
    import scipy.linalg
    l = np.asarray(l, np.float64)
    lo = np.tril(np.where(np.isfinite(l), l, 0.0), -1) + np.eye(l.shape[0])
    return scipy.linalg.solve_triangular(lo, np.asarray(b, np.float64), lower=True,
                                         unit_diagonal=True)
