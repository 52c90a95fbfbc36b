"""Hopper tensor-core SGEMM through wgmma (kernels/sgemm_wgmma.cu): 3xTF32 and plain TF32.

`gemm_wgmma_into` has exactly the semantics of `_gemm_tc.gemm_tc_into` (and `_blas.gemm_into`),
on sm_90 devices only (wgmma exists for sm_90a alone).  A pre-pass splits the operands into
TF32 parts, in the main kernel's shared-memory image, in a workspace; the main kernel then
streams whole tiles (bulk copies from a producer warpgroup in the default "tma" variants,
16-byte cp.async in the "cpasync" baseline) and multiplies with wgmma.mma_async.
"""

import functools
from collections import namedtuple

import numpy as np

from ._blas import row_major_problem
from ._backend import cupy
from ._kernels import get_kernel

MODES = ("3xtf32", "tf32")
_PARTS = {"3xtf32": 2, "tf32": 1}   # TF32 parts per operand element in the workspace

# One source of truth for the tile shapes; the kernel static_asserts their consistency.
# BM x BN block tile (BM/64 consumer warpgroups, each 64 rows x BN), BK the k-slice (32: one
# 128-byte swizzle row), WN the wgmma N of one sub-block, STAGES3 / STAGES1 ring depth in
# 3xtf32 / tf32 mode (0: mode not offered), SPLIT: each k-slice accumulated from zero in a
# temporary tile and added to the sum with FP32 round-to-nearest (the tensor cores truncate
# when they accumulate).  PIPE "cpasync": sgemm_wgmma (every thread copies with cp.async, one
# __syncthreads per slice; the first version, kept as the baseline); "tma": sgemm_wgmma_tma (a
# producer warpgroup's bulk copies, full/empty mbarriers, decoupled consumer warpgroups).
WgTile = namedtuple("WgTile", "BM BN BK WN STAGES3 STAGES1 SPLIT PIPE")
VARIANTS = {
    "128x256s": WgTile(128, 256, 32, 128, 2, 4, True, "cpasync"),
    "128x128s": WgTile(128, 128, 32, 128, 3, 6, True, "cpasync"),
    "128x256": WgTile(128, 256, 32, 256, 0, 4, False, "cpasync"),
    "128x256t": WgTile(128, 256, 32, 128, 2, 0, True, "tma"),
    "128x128t": WgTile(128, 128, 32, 128, 3, 0, True, "tma"),
    "128x256tf": WgTile(128, 256, 32, 256, 0, 4, False, "tma"),
}
# Measured on the H100 (benchmarks/wgmma_sweep.py, n = 2048..16384): the TMA variants are the
# fastest in both modes; below one 128 x 256 tile per SM, 128 x 128 for 3xtf32.
DEFAULT_VARIANT = {"3xtf32": "128x256t", "tf32": "128x256tf"}
SMALL_VARIANT = {"3xtf32": "128x128t", "tf32": "128x256tf"}
_NUM_SMS_GUESS = 132

FAMILY = "sgemm_wgmma"
_SMEM_LIMIT = 227 * 1024


def _check_mode(mode):
    if mode not in _PARTS:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def tile_threads(t):
    """Threads per block: the consumer warpgroups, plus the producer warpgroup of "tma"."""
    return (t.BM // 64) * 128 + (128 if t.PIPE == "tma" else 0)


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
    args = f"{t.BM},{t.BN},{t.WN},{stages(t, mode)},{_PARTS[mode]},{str(t.SPLIT).lower()}"
    return f"sgemm_wgmma{'_tma' if t.PIPE == 'tma' else ''}<{args}>"


def _split_name(kmajor, mode):
    return f"wgmma_split<{str(kmajor).lower()},{_PARTS[mode]}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90a).
KERNEL_NAMES = tuple(
    _kernel_name(t, mode) for t in VARIANTS.values() for mode in MODES
    if stages(t, mode)) + tuple(
    _split_name(km, mode) for km in (True, False) for mode in MODES)


def pick_variant(m, n, k, mode="3xtf32"):
    """Tile shape for an m x n x k product: DEFAULT_VARIANT[mode] once its tiles fill the
    SMs, else SMALL_VARIANT[mode]."""
    _check_mode(mode)
    big = VARIANTS[DEFAULT_VARIANT[mode]]
    if -(-m // big.BM) * -(-n // big.BN) >= _NUM_SMS_GUESS:
        return DEFAULT_VARIANT[mode]
    return SMALL_VARIANT[mode]


def available():
    """True when the current device can run these kernels (compute capability exactly 9.0:
    wgmma is an sm_90a feature, absent from later architectures)."""
    try:
        cp = cupy()
        return int(cp.cuda.Device().compute_capability) == 90
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def _main_kernel(device_id, variant, mode):
    """(kernel, dynamic shared memory bytes) for one instantiation, opted in beyond 48 KiB."""
    t = VARIANTS[variant]
    smem = dynamic_smem(t, mode)
    return get_kernel(FAMILY, _kernel_name(t, mode), dynamic_smem=smem,
                      arch_specific=True), smem


def _split(x, ld, kmajor, rows, k, tr, ktiles, mode, out):
    """Launch the pre-pass: operand x (rows x k; K-contiguous when kmajor) -> out."""
    kernel = get_kernel(FAMILY, _split_name(kmajor, mode), arch_specific=True)
    rp = -(-rows // tr) * tr
    grid = (rp // 32, min(ktiles, 65535))
    kernel(grid, (256,), (x, np.int64(ld), np.int32(rows), np.int32(k), np.int32(tr),
                          np.int32(ktiles), out))


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
    kernel, smem = _main_kernel(cp.cuda.runtime.getDevice(), variant, mode)
    grid = (-(-m // t.BM) * -(-n // t.BN),)
    kernel(grid, (tile_threads(t),),
           (np.int32(m), np.int32(n), np.int32(ktiles), np.float32(alpha), wa, wb,
            np.float32(beta), c, np.int64(ldc), a, np.int64(lda), b, np.int64(ldb),
            np.int32(k), np.int32(int(a_kmajor) | 2 * int(b_nmajor))), shared_mem=smem)


def _launch(variant, mode, m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc):
    operands = (a, lda, a_kmajor, b, ldb, b_nmajor)
    work, wa, wb = split_operands(variant, mode, m, n, k, *operands)
    multiply(variant, mode, m, n, k, alpha, wa, wb, beta, c, ldc, operands)


def gemm_wgmma_into(alpha, a, b, beta, c, mode="3xtf32", variant=None):
    """c = alpha * a @ b + beta * c in place on the Hopper tensor cores (current device and
    stream; compute capability 9.0 only).

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.  mode
    "3xtf32": FP32-level accuracy from three TF32 products; "tf32": one (10-bit mantissa).
    Uses a temporary workspace of workspace_floats(...) float32 elements.
    """
    _check_mode(mode)
    if not available():
        raise RuntimeError("gemm_wgmma_into needs a compute capability 9.0 (Hopper, sm_90a) "
                           "device: wgmma does not exist elsewhere")
    if variant is not None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        if not stages(VARIANTS[variant], mode):
            # 3xTF32 without per-slice accumulation loses FP32 accuracy (see _gemm_tc).
            raise ValueError(f"variant {variant!r} does not offer mode {mode!r} "
                             "(3xtf32 needs a SPLIT variant)")
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant = pick_variant(args[0], args[1], args[2], mode)
    _launch(variant, mode, *args)
    return c
