"""Solves with a stack of LU factors in one launch: the launchers of kernels/getrs_batched.cu
(float32 and float64, orders up to MAX_ORDER) and its NumPy model.

lu_solve of a stack of real systems on the GPU calls `getrs_batched_ptr`: orders up to the
tuning table's stack_solve_register_max_n run getrs_batched, one warp per system and
right-hand side with the solution held in registers; larger orders run getrs_tiled, one warp
per system and group of TILED_RHS right-hand sides with the solution in shared memory and the
factors read by 32 x 32 tiles (the kernel's header says which lane does what).
"""

import numpy as np

from .. import tuning
from ..core import mapped as _mapped
from ..core.backend import cupy
from ..core.element import REAL_KERNEL
from ..core.kernels import Launcher, get_kernel
from . import batched as _batched

FAMILY = "getrs_batched"
WARPS = 4                   # GETRS_WARPS: warps (systems x right-hand sides) per block
NMAX_SHAPES = (32, 64, 128)  # template NMAX: a call takes the smallest >= n
ELEMENTS = REAL_KERNEL
TILED_RHS = (1, 8)          # template R of getrs_tiled: right-hand sides per warp
_SPECS = {"getrs_batched": "iiiPPPiPi",  # batch, n, nrhs, lu, piv, B, trans, flags, gen
          "gecon_batched": "iiPPPdd",     # batch, n, lu, piv, est, 1 / n, 1 / max(n - 1, 1)
          "getrs_tiled": "iiiPPPiPi"}     # batch, n, nrhs, lu, piv, B, trans, flags, gen


def _name(kernel, ctype, nmax):
    return f"{kernel}<{ctype},{nmax}>"


KERNEL_NAMES = (tuple(_name(k, e.ctype, nmax) for k in ("getrs_batched", "gecon_batched")
                      for e in ELEMENTS for nmax in NMAX_SHAPES)
                + tuple(_name("getrs_tiled", e.ctype, r) for e in ELEMENTS for r in TILED_RHS))
REGISTER_ORDER = NMAX_SHAPES[-1]    # the largest order getrs_batched and gecon_batched take
MAX_ORDER = 1024                    # GRT_MAXN: the largest order getrs_tiled takes
PITCH = 33                          # GRT_PITCH: the shared tile's row pitch
_PIVOT = np.dtype(np.int32).itemsize    # the kernels' pivots: int32 whatever the element

_launchers = {}


def _launcher(device_id, kernel, ctype, shape, smem=0):
    key = (device_id, kernel, ctype, shape, smem)
    if key not in _launchers:
        _launchers[key] = Launcher(get_kernel(FAMILY, _name(kernel, ctype, shape),
                                              dynamic_smem=smem), _SPECS[kernel], smem)
    return _launchers[key]


def tiled_shared_bytes(n, r, element):
    """getrs_tiled's dynamic shared memory for order n and R = r: the solution's rows padded
    to a multiple of 32, the tile, the pivots."""
    return (-(-n // 32) * 32 * r + 32 * PITCH) * element.itemsize + _PIVOT * n


def _tiled_rhs(nrhs):
    """R of getrs_tiled for nrhs right-hand sides: the largest of TILED_RHS up to nrhs."""
    return max(r for r in TILED_RHS if r <= nrhs)


def getrs_batched_ptr(batch, n, nrhs, lup, pivp, bp, element, trans=0, table=None, gen=None):
    """B_b := op(A_b)^{-1} B_b for every b < batch (trans 0: A_b, else A_b^T), A_b = P_b L_b
    U_b given by the C-contiguous factors (batch, n, n) at lup and 0-based pivots (batch, n)
    int32 at pivp; B (batch, n, nrhs) C-contiguous at bp, overwritten; `element`s F32 or F64.
    One launch on the current device and stream (one per 2^31 warps): getrs_batched up to the
    table's stack_solve_register_max_n (the current one by default), getrs_tiled beyond.  The
    kernels report a pivot outside [0, n) (its interchange skipped) and an inf or NaN in B
    through this host thread's mapped flags under generation `gen` (core/mapped.py: read
    them after the stream's synchronisation; None: a new generation, not read).  No other
    validation (0 < n <= MAX_ORDER, batch, nrhs > 0)."""
    flags = _mapped.flags()
    gen = gen or flags.next_gen()
    device_id = cupy().cuda.runtime.getDevice()
    table = table or tuning.current(device_id, element)
    if n <= min(table.stack_solve_register_max_n, REGISTER_ORDER):
        nmax = next(s for s in NMAX_SHAPES if s >= n)
        launch = _launcher(device_id, "getrs_batched", element.ctype, nmax)
        per_system, warps_per_block = nrhs, WARPS
    else:
        r = _tiled_rhs(nrhs)
        launch = _launcher(device_id, "getrs_tiled", element.ctype, r,
                           tiled_shared_bytes(n, r, element))
        per_system, warps_per_block = -(-nrhs // r), 1
    size = element.itemsize
    step = max(1, (2**31 - 1) // per_system)    # systems per launch: warps below 2^31
    for start in range(0, batch, step):
        count = min(step, batch - start)
        warps = count * per_system
        launch((-(-warps // warps_per_block), 1, 1), (32 * warps_per_block, 1, 1), count, n,
               nrhs, lup + start * n * n * size, pivp + start * n * _PIVOT,
               bp + start * n * nrhs * size, int(bool(trans)), flags.ptr, gen)


def inverse_norm1_ptr(batch, n, lup, pivp, estp, element):
    """est[b] := xlacn2's estimate of ||A_b^{-1}||_1 (float64 at estp) for every b < batch,
    from the factors and pivots as getrs_batched_ptr takes them: one launch, one warp per
    matrix (kernels/getrs_batched.cu's gecon_batched; lu/getrs.py's inverse_norm1 is the same
    algorithm over whole stacks).  No validation (0 < n <= REGISTER_ORDER, 0 < batch < 2^31)."""
    nmax = next(s for s in NMAX_SHAPES if s >= n)
    launch = _launcher(cupy().cuda.runtime.getDevice(), "gecon_batched", element.ctype, nmax)
    launch((-(-batch // WARPS), 1, 1), (32 * WARPS, 1, 1), batch, n, lup, pivp, estp, 1.0 / n,
           1.0 / max(n - 1, 1))


def reference(lu, piv, b, trans=0):
    """The kernel's result in NumPy for lu (batch, n, n), piv (batch, n), b (batch, n, nrhs),
    float32 or float64: the interchanges and the two substitutions in the kernel's order with
    its fused multiply-adds (batched.fms) and divisions, so real inputs of normal numbers give
    its bits."""
    lu, b = np.asarray(lu), np.array(b, copy=True)
    batch, n, _ = lu.shape
    rows = np.arange(batch)
    piv = np.asarray(piv)

    def swap(k):
        q = piv[:, k]
        held = b[rows, k].copy()
        b[rows, k] = b[rows, q]
        b[rows, q] = held

    if trans:
        for k in range(n):                                      # U^T y = b
            b[:, k] = b[:, k] / lu[:, k, k, None]
            b[:, k + 1:] = _batched.fms(b[:, k + 1:], lu[:, k, k + 1:, None], b[:, k, None])
        for k in range(n - 1, -1, -1):                          # L^T z = y
            b[:, :k] = _batched.fms(b[:, :k], lu[:, k, :k, None], b[:, k, None])
        for k in range(n - 1, -1, -1):
            swap(k)
        return b
    for k in range(n):
        swap(k)
    for k in range(n):
        b[:, k + 1:] = _batched.fms(b[:, k + 1:], lu[:, k + 1:, k, None], b[:, k, None])
    for k in range(n - 1, -1, -1):
        b[:, k] = b[:, k] / lu[:, k, k, None]
        b[:, :k] = _batched.fms(b[:, :k], lu[:, :k, k, None], b[:, k, None])
    return b
