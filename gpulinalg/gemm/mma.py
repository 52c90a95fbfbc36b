"""Tensor-core SGEMM (kernels/sgemm_tc.cu): 3xTF32 (FP32-level accuracy) and plain TF32.

`gemm_tc_into` has exactly the semantics of `_blas.gemm_into`; the public `precision=`
keyword of sgemm/matmul/lu is wired to it elsewhere.
"""

import functools
from collections import namedtuple

import numpy as np

from .simt import aligned16, row_major_problem
from ..core.backend import cupy
from ..core.kernels import get_kernel

# mode name -> MODE template argument (mma products per multiply-add)
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
DEFAULT_VARIANT = {"3xtf32": "128x128s", "tf32": "128x128"}

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


def pick_variant(m, n, k, mode="3xtf32"):
    """Tile shape for an m x n x k product (untuned: the 64-row tile when 128x128 tiles would
    leave most SMs idle)."""
    if mode not in _MODE_ARG:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tiles = -(-m // 128) * -(-n // 128)
    if tiles < 66:
        return "64x128s"
    return DEFAULT_VARIANT[mode]


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


def gemm_tc_into(alpha, a, b, beta, c, mode="3xtf32", variant=None):
    """c = alpha * a @ b + beta * c in place on the tensor cores (current device and stream).

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.  mode
    "3xtf32": FP32-level accuracy from three TF32 products; "tf32": one (10-bit mantissa).
    """
    if mode not in _MODE_ARG:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant = pick_variant(args[0], args[1], args[2], mode)
    if mode == "3xtf32" and not VARIANTS[variant].SPLIT:
        # Measured on the H100: without per-slice accumulation the tensor cores' truncating
        # adds cost 3xTF32 its FP32 accuracy (1.8x SIMT's error at 257 x 255 x 513).
        raise ValueError(f"3xtf32 needs a SPLIT_ACC variant, {variant!r} is not one")
    _launch(variant, mode, *args)
    return c
