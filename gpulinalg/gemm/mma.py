"""Tensor-core SGEMM through mma.sync (kernels/sgemm_tc.cu): 3xTF32 (FP32-level accuracy)
and plain TF32, on GPUs without Hopper's wgmma (dispatch.py chooses).

`gemm_tc_into` has exactly the semantics of `simt.gemm_into`.  The tile pick reads the Tuning
table (gpulinalg/tuning.py: mma_variant) and the device's SM count.
"""

import functools
from collections import namedtuple

import numpy as np

from .. import tuning
from ..core import device
from ..core.backend import cupy
from ..core.kernels import get_kernel
from .common import aligned16, row_major_problem

# mode name -> MODE template argument (mma products per multiply-add); the Tuning table's
# mma_variant pair is indexed in the order of MODES.
MODES = ("3xtf32", "tf32")
_MODE_ARG = {"3xtf32": 3, "tf32": 1}

# One source of truth for the tile shapes; the kernel static_asserts their consistency.
# BM x BN block tile, BK k-slice (32: the swizzles assume it), WM x WN warp tile, STAGES cp.async
# ring depth, MINB resident blocks per SM asked of the register allocator, SPLIT: each k-slice
# accumulated from zero and added to the sum with FP32 round-to-nearest (the tensor cores
# truncate when they accumulate).
TcTile = namedtuple("TcTile", "BM BN BK WM WN STAGES MINB SPLIT")
VARIANTS = {
    "128x128s": TcTile(128, 128, 32, 64, 32, 4, 1, True),
    "128x128": TcTile(128, 128, 32, 64, 32, 4, 1, False),
    "64x128s": TcTile(64, 128, 32, 32, 32, 4, 1, True),
}

FAMILY = "sgemm_tc"


def tile_threads(t):
    return (t.BM // t.WM) * (t.BN // t.WN) * 32


def dynamic_smem(t):
    """Bytes of dynamic shared memory one block uses (mirrors the kernel's carve-up)."""
    return 4 * t.STAGES * t.BK * (t.BM + t.BN)


def _kernel_name(t, mode, a_kmajor, b_nmajor, vec):
    flags = ",".join(str(f).lower() for f in (t.SPLIT, a_kmajor, b_nmajor, vec))
    return (f"sgemm_tc<{t.BM},{t.BN},{t.BK},{t.WM},{t.WN},{t.STAGES},{t.MINB},"
            f"{_MODE_ARG[mode]},{flags}>")


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(
    _kernel_name(t, mode, am, bn, v) for t in VARIANTS.values() for mode in MODES
    for am in (True, False) for bn in (True, False) for v in (True, False))


def pick_variant(m, n, k, mode="3xtf32", sms=None, table=None):
    """Tile shape for an m x n x k product: table.mma_variant, or table.mma_small_variant (64-row tiles)
    where 128 x 128 tiles would leave half the `sms` SMs idle.  sms, table: default the current
    device's SM count and the table in force."""
    if mode not in _MODE_ARG:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    sms = device.sm_count() if sms is None else sms
    table = tuning.current() if table is None else table
    tiles = -(-m // 128) * -(-n // 128)
    if tiles < sms // 2:
        return table.mma_small_variant
    return table.mma_variant[MODES.index(mode)]


@functools.lru_cache(maxsize=None)
def _tc_kernel(device_id, variant, mode, a_kmajor, b_nmajor, vec):
    """(kernel, dynamic shared memory bytes) for one instantiation, opted in beyond 48 KiB."""
    t = VARIANTS[variant]
    smem = dynamic_smem(t)
    return get_kernel(FAMILY, _kernel_name(t, mode, a_kmajor, b_nmajor, vec),
                      dynamic_smem=smem), smem


def _launch(variant, mode, m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc):
    t = VARIANTS[variant]
    vec = all(aligned16(x.data.ptr, ld) for x, ld in ((a, lda), (b, ldb), (c, ldc)))
    kernel, smem = _tc_kernel(cupy().cuda.runtime.getDevice(), variant, mode, a_kmajor,
                              b_nmajor, vec)
    grid = (-(-m // t.BM) * -(-n // t.BN),)
    kernel(grid, (tile_threads(t),),
           (np.int32(m), np.int32(n), np.int32(k), np.float32(alpha), a, np.int64(lda),
            b, np.int64(ldb), np.float32(beta), c, np.int64(ldc)), shared_mem=smem)


def gemm_tc_into(alpha, a, b, beta, c, mode="3xtf32", variant=None, table=None):
    """c = alpha * a @ b + beta * c in place on the tensor cores (current device and stream);
    returns c.

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.  mode
    "3xtf32": FP32-level accuracy from three TF32 products; "tf32": one (10-bit mantissa).
    variant None: pick_variant's under `table` (default: the one in force).
    """
    if mode not in _MODE_ARG:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant = pick_variant(args[0], args[1], args[2], mode, table=table)
    if mode == "3xtf32" and not VARIANTS[variant].SPLIT:
        # Without per-slice accumulation the tensor cores' truncating adds cost 3xTF32 its
        # FP32 accuracy.
        raise ValueError(f"3xtf32 needs a SPLIT_ACC variant, {variant!r} is not one")
    _launch(variant, mode, *args)
    return c
