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

from .simt import row_major_problem
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel

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
# PERSIST ("tma" only): one block per SM walks the tiles; each tile's epilogue goes through
# one ring stage, so the producer loads the next tile's first slices meanwhile.
WgTile = namedtuple("WgTile", "BM BN BK WN STAGES3 STAGES1 SPLIT PIPE PERSIST",
                    defaults=(False,))
VARIANTS = {
    "128x256s": WgTile(128, 256, 32, 128, 2, 4, True, "cpasync"),
    "128x128s": WgTile(128, 128, 32, 128, 3, 6, True, "cpasync"),
    "128x256": WgTile(128, 256, 32, 256, 0, 4, False, "cpasync"),
    "128x256t": WgTile(128, 256, 32, 128, 2, 0, True, "tma"),
    "128x128t": WgTile(128, 128, 32, 128, 3, 0, True, "tma"),
    "128x256tf": WgTile(128, 256, 32, 256, 0, 4, False, "tma"),
    "128x256tp": WgTile(128, 256, 32, 128, 2, 0, True, "tma", True),
}
# Measured on the H100 (benchmarks/wgmma_sweep.py, n = 2048..16384): the TMA variants are the
# fastest in both modes; below one 128 x 256 tile per SM, 128 x 128 for 3xtf32.  The
# persistent 128 x 256 ("128x256tp", benchmarks/wgmma_ab.py --also 128x256t): 16384^2
# C -= A B k = 64 / 128 / 256 / 512 36.6 / 58.6 / 88.7 / 113.3 TF/s against 33.8 / 57.1 /
# 83.7 / 110.1; squares -2% to +5% (4096^3 / 8192^3 / 16384^3 143.0 / 138.8 / 130.8 against
# 139.6 / 141.0 / 124.4); so the 3xtf32 default, except beside other kernels.
DEFAULT_VARIANT = {"3xtf32": "128x256tp", "tf32": "128x256tf"}
SMALL_VARIANT = {"3xtf32": "128x128t", "tf32": "128x256tf"}
# Where other kernels must find SMs while the product runs (the LU's look-ahead panel beside
# its trailing update), one block per tile: blocks finish and free their SM all along.
SHARED_VARIANT = {"3xtf32": "128x256t", "tf32": "128x256tf"}
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
    if t.PIPE == "tma":
        return f"sgemm_wgmma_tma<{args},{str(t.PERSIST).lower()}>"
    return f"sgemm_wgmma<{args}>"


def _split_name(kmajor, mode):
    return f"wgmma_split<{str(kmajor).lower()},{_PARTS[mode]}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90a).
KERNEL_NAMES = tuple(
    _kernel_name(t, mode) for t in VARIANTS.values() for mode in MODES
    if stages(t, mode)) + tuple(
    _split_name(km, mode) for km in (True, False) for mode in MODES)


def pick_variant(m, n, k, mode="3xtf32", persistent=True):
    """Tile shape for an m x n x k product: DEFAULT_VARIANT[mode] once its tiles fill the
    SMs (SHARED_VARIANT[mode] when not `persistent`), else SMALL_VARIANT[mode]."""
    _check_mode(mode)
    big = (DEFAULT_VARIANT if persistent else SHARED_VARIANT)[mode]
    t = VARIANTS[big]
    if -(-m // t.BM) * -(-n // t.BN) >= _NUM_SMS_GUESS:
        return big
    return SMALL_VARIANT[mode]


def available():
    """True when the current device can run these kernels (compute capability exactly 9.0:
    wgmma is an sm_90a feature, absent from later architectures)."""
    try:
        return _available(cupy().cuda.runtime.getDevice())
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def _available(device_id):
    return int(cupy().cuda.Device(device_id).compute_capability) == 90


# The kernels' parameters, for Launcher (a small product's call is bound by its host time).
_MAIN_ARGS = "iiifPPfPqPqPqii"   # M N ktiles alpha WA WB beta C ldc A lda B ldb K layout
_SPLIT_ARGS = "PqiiiiP"          # X ld R K TR ktiles W


@functools.lru_cache(maxsize=None)
def _main_kernel(device_id, variant, mode):
    """Launcher of one instantiation, its dynamic shared memory opted in beyond 48 KiB."""
    t = VARIANTS[variant]
    smem = dynamic_smem(t, mode)
    return Launcher(get_kernel(FAMILY, _kernel_name(t, mode), dynamic_smem=smem,
                               arch_specific=True), _MAIN_ARGS, shared_mem=smem)


@functools.lru_cache(maxsize=None)
def _split_kernel(device_id, kmajor, mode):
    return Launcher(get_kernel(FAMILY, _split_name(kmajor, mode), arch_specific=True),
                    _SPLIT_ARGS)


@functools.lru_cache(maxsize=None)
def _num_sms(device_id):
    return cupy().cuda.Device(device_id).attributes["MultiProcessorCount"]


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
    device = cp.cuda.runtime.getDevice()
    kernel = _main_kernel(device, variant, mode)
    tiles = -(-m // t.BM) * -(-n // t.BN)
    grid = (min(tiles, _num_sms(device)) if t.PERSIST else tiles, 1, 1)
    kernel(grid, (tile_threads(t), 1, 1), m, n, ktiles, alpha, wa.data.ptr, wb.data.ptr, beta,
           c.data.ptr, ldc, a.data.ptr, lda, b.data.ptr, ldb, k,
           int(a_kmajor) | 2 * int(b_nmajor))


def _launch(variant, mode, m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc):
    operands = (a, lda, a_kmajor, b, ldb, b_nmajor)
    work, wa, wb = split_operands(variant, mode, m, n, k, *operands)
    multiply(variant, mode, m, n, k, alpha, wa, wb, beta, c, ldc, operands)


def gemm_wgmma_into(alpha, a, b, beta, c, mode="3xtf32", variant=None, persistent=True):
    """c = alpha * a @ b + beta * c in place on the Hopper tensor cores (current device and
    stream; compute capability 9.0 only).

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.  mode
    "3xtf32": FP32-level accuracy from three TF32 products; "tf32": one (10-bit mantissa).
    Uses a temporary workspace of workspace_floats(...) float32 elements.  persistent=False:
    no variant that keeps one block on every SM to the end (pick_variant), for products that
    run beside other kernels.
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
        variant = pick_variant(args[0], args[1], args[2], mode, persistent)
    _launch(variant, mode, *args)
    return c
