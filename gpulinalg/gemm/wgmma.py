"""Hopper tensor-core SGEMM through wgmma (kernels/sgemm_wgmma.cu): 3xTF32 and plain TF32.

`gemm_wgmma_into` has exactly the semantics of `mma.gemm_tc_into` (and `simt.gemm_into`), on
sm_90 devices only (wgmma exists for sm_90a alone).  A pre-pass splits the operands into TF32
parts, in the main kernel's shared-memory image, in a workspace; the main kernel then streams
whole tiles with a producer warpgroup's bulk copies and multiplies with wgmma.mma_async.  The
tile picks read the Tuning table (gpulinalg/tuning.py: wgmma_*) and the device's SM count.
"""

import functools
from collections import namedtuple

import numpy as np

from .. import tuning
from ..core import device
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel
from .common import row_major_problem

FAMILY = "sgemm_wgmma"
MODES = ("3xtf32", "tf32")   # the Tuning table's wgmma_* pairs are indexed in this order
_PARTS = {"3xtf32": 2, "tf32": 1}   # TF32 parts per operand element in the workspace

# One source of truth for the tile shapes; the kernel static_asserts their consistency.
# BM x BN block tile (BM/64 consumer warpgroups, each 64 rows x BN, plus the producer
# warpgroup), BK the k-slice (32: one 128-byte swizzle row), WN the wgmma N of one sub-block,
# STAGES3 / STAGES1 ring depth in 3xtf32 / tf32 mode (0: mode not offered), SPLIT: each k-slice
# accumulated from zero in a temporary tile and added to the sum with FP32 round-to-nearest
# (the tensor cores truncate when they accumulate), PERSIST: one block per SM walks the tiles
# (each tile's epilogue goes through one ring stage, so the producer loads the next tile's
# first slices meanwhile); otherwise one block per tile.
WgTile = namedtuple("WgTile", "BM BN BK WN STAGES3 STAGES1 SPLIT PERSIST")
VARIANTS = {
    "128x256t": WgTile(128, 256, 32, 128, 2, 0, True, False),
    "128x128t": WgTile(128, 128, 32, 128, 3, 0, True, False),
    "128x256tf": WgTile(128, 256, 32, 256, 0, 4, False, False),
    "128x256tp": WgTile(128, 256, 32, 128, 2, 0, True, True),
}


def _check_mode(mode):
    if mode not in _PARTS:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def tile_threads(t):
    """Threads per block: the consumer warpgroups plus the producer warpgroup."""
    return (t.BM // 64) * 128 + 128


def stages(t, mode):
    """Ring depth of variant t in `mode` (0: the variant does not offer the mode)."""
    _check_mode(mode)
    return t.STAGES3 if mode == "3xtf32" else t.STAGES1


def dynamic_smem(t, mode):
    """Bytes of dynamic shared memory one block uses (mirrors the kernel's carve-up: the ring
    plus 1024 bytes to align it for the swizzled descriptors)."""
    return stages(t, mode) * _PARTS[mode] * (t.BM + t.BN) * t.BK * 4 + 1024


def workspace_floats(m, n, k, t, mode):
    """float32 elements of the split workspace: A as (m rounded up to BM) x (k rounded up to
    BK), B^T as (n rounded up to BN) x the same, each element in _PARTS[mode] parts."""
    kp = -(-k // t.BK) * t.BK
    mp = -(-m // t.BM) * t.BM
    np_ = -(-n // t.BN) * t.BN
    return _PARTS[mode] * kp * (mp + np_)


def _kernel_name(t, mode):
    return (f"sgemm_wgmma_tma<{t.BM},{t.BN},{t.WN},{stages(t, mode)},{_PARTS[mode]},"
            f"{str(t.SPLIT).lower()},{str(t.PERSIST).lower()}>")


def _split_name(kmajor, mode):
    return f"wgmma_split<{str(kmajor).lower()},{_PARTS[mode]}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90a).
KERNEL_NAMES = tuple(
    _kernel_name(t, mode) for t in VARIANTS.values() for mode in MODES
    if stages(t, mode)) + tuple(
    _split_name(km, mode) for km in (True, False) for mode in MODES)


def pick_variant(m, n, k, mode="3xtf32", persistent=True, sms=None, table=None):
    """Tile shape for an m x n x k product: table.wgmma_variant once its tiles fill the `sms`
    SMs (table.wgmma_shared_variant when not `persistent`: one block per tile, for products
    that run beside other kernels), else table.wgmma_small_variant; each a (3xtf32, tf32)
    pair.  sms, table: default the current device's SM count and the table in force."""
    _check_mode(mode)
    sms = device.sm_count() if sms is None else sms
    table = tuning.current() if table is None else table
    i = MODES.index(mode)
    big = (table.wgmma_variant if persistent else table.wgmma_shared_variant)[i]
    t = VARIANTS[big]
    if -(-m // t.BM) * -(-n // t.BN) >= sms:
        return big
    return table.wgmma_small_variant[i]


# The kernels' parameters, for Launcher (a small product's call is bound by its host time).
MAIN_ARGS = "iiifPPfPqPqPqii"    # M N ktiles alpha WA WB beta C ldc A lda B ldb K layout
_SPLIT_ARGS = "PqiiiiP"          # X ld R K TR ktiles W


@functools.lru_cache(maxsize=None)
def _main_kernel(device_id, variant, mode):
    """Launcher of one instantiation, its dynamic shared memory opted in beyond 48 KiB."""
    t = VARIANTS[variant]
    smem = dynamic_smem(t, mode)
    return Launcher(get_kernel(FAMILY, _kernel_name(t, mode), dynamic_smem=smem,
                               arch_specific=True), MAIN_ARGS, shared_mem=smem)


@functools.lru_cache(maxsize=None)
def _split_kernel(device_id, kmajor, mode):
    return Launcher(get_kernel(FAMILY, _split_name(kmajor, mode), arch_specific=True),
                    _SPLIT_ARGS)


def _split(x, ld, kmajor, rows, k, tr, ktiles, mode, out):
    """Launch the pre-pass: operand x (rows x k; K-contiguous when kmajor) -> out."""
    kernel = _split_kernel(cupy().cuda.runtime.getDevice(), kmajor, mode)
    rp = -(-rows // tr) * tr
    kernel((rp // 32, min(ktiles, 65535), 1), (256, 1, 1), x.data.ptr, ld, rows, k, tr, ktiles,
           out.data.ptr)


def split_operands(variant, mode, m, n, k, a, lda, a_kmajor, b, ldb, b_nmajor):
    """Run the pre-pass on both operands; returns (workspace, wa, wb)."""
    cp = cupy()
    t = VARIANTS[variant]
    ktiles = -(-k // t.BK)
    # The workspace: A split as (Mp x Kp) and B^T as (Np x Kp), K-major, tile images.
    work = cp.empty(max(workspace_floats(m, n, k, t, mode), 1), dtype=np.float32)
    wa = work[:_PARTS[mode] * ktiles * t.BK * -(-m // t.BM) * t.BM]
    wb = work[wa.size:]
    if ktiles:
        _split(a, lda, a_kmajor, m, k, t.BM, ktiles, mode, wa)
        # B (K x N) is the N x K operand B^T: K-major exactly when B is not N-major.
        _split(b, ldb, not b_nmajor, n, k, t.BN, ktiles, mode, wb)
    return work, wa, wb


def multiply(variant, mode, m, n, k, alpha, wa, wb, beta, c, ldc, operands):
    """The main kernel on a split workspace (wa, wb from split_operands).  operands: the
    original (a, lda, a_kmajor, b, ldb, b_nmajor), from which the kernel recomputes in FP32
    the entries whose split sum comes out Inf or NaN (kernels/sgemm_wgmma.cu, WgExact)."""
    cp = cupy()
    t = VARIANTS[variant]
    ktiles = -(-k // t.BK)
    a, lda, a_kmajor, b, ldb, b_nmajor = operands
    dev = cp.cuda.runtime.getDevice()
    kernel = _main_kernel(dev, variant, mode)
    tiles = -(-m // t.BM) * -(-n // t.BN)
    grid = (min(tiles, device.sm_count(dev)) if t.PERSIST else tiles, 1, 1)
    kernel(grid, (tile_threads(t), 1, 1), m, n, ktiles, alpha, wa.data.ptr, wb.data.ptr, beta,
           c.data.ptr, ldc, a.data.ptr, lda, b.data.ptr, ldb, k,
           int(a_kmajor) | 2 * int(b_nmajor))


def _launch(variant, mode, m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc):
    operands = (a, lda, a_kmajor, b, ldb, b_nmajor)
    work, wa, wb = split_operands(variant, mode, m, n, k, *operands)
    multiply(variant, mode, m, n, k, alpha, wa, wb, beta, c, ldc, operands)


def gemm_wgmma_into(alpha, a, b, beta, c, mode="3xtf32", variant=None, persistent=True,
                    table=None):
    """c = alpha * a @ b + beta * c in place on the Hopper tensor cores (current device and
    stream; compute capability 9.0 only); returns c.

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.  mode
    "3xtf32": FP32-level accuracy from three TF32 products; "tf32": one (10-bit mantissa).
    Uses a temporary workspace of workspace_floats(...) float32 elements.  variant None:
    pick_variant's under `table` (default: the one in force); persistent=False: no variant
    that keeps one block on every SM to the end, for products that run beside other kernels.
    """
    _check_mode(mode)
    if not device.has_wgmma():   # wgmma is an sm_90a feature, absent from later GPUs
        raise RuntimeError("gemm_wgmma_into needs a compute capability 9.0 (Hopper, sm_90a) "
                           "device: wgmma does not exist elsewhere")
    if variant is not None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        if not stages(VARIANTS[variant], mode):
            # 3xTF32 without per-slice accumulation loses FP32 accuracy (see mma.py).
            raise ValueError(f"variant {variant!r} does not offer mode {mode!r} "
                             "(3xtf32 needs a SPLIT variant)")
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant = pick_variant(args[0], args[1], args[2], mode, persistent, table=table)
    _launch(variant, mode, *args)
    return c
