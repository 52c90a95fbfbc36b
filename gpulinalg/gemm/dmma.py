"""FP64 tensor-core DGEMM (kernels/dgemm.cu): the tile shapes, the tile pick, the launchers.

`gemm_into` takes float64 CuPy arrays (any strides); `gemm_ptr` takes device pointers, with
exactly the signature and semantics of `simt.gemm_ptr`, for the float64 LU's steps, whose
launches must cost the host little more than cuLaunchKernel.  The pick reads the float64
Tuning table (gpulinalg/tuning.py: dmma_*) and the device's SM count; callers on a hot path
pass both (`sms`, `table`) once read.
"""

import functools
from collections import namedtuple

from .. import tuning
from ..core import device
from ..core.backend import cupy, gpu_available
from ..core.element import F64
from ..core.kernels import Launcher, get_kernel
from .common import row_major_problem

FAMILY = "dgemm"

# One source of truth for the tile shapes; the kernel static_asserts their consistency.
# BM x BN block tile, BK k-slice (16 or 32), WM x WN warp tile (multiples of 16), STAGES cp.async
# ring depth (>= 3), MINB resident blocks per SM asked of the register allocator, MK the k of
# the sm_90 instruction (mma m16n8k16 or m16n8k8; other architectures run m8n8k4), SB: B's
# fragments streamed per n8 tile and A's held (else A streamed per m16 tile, B held).
DTile = namedtuple("DTile", "BM BN BK WM WN STAGES MINB MK SB")
VARIANTS = {
    # large products: 8 warps of 64 x 32, one block per SM, 32-k slices in a 192 KiB ring of 3
    "128x128k32": DTile(128, 128, 32, 64, 32, 3, 1, 16, False),
    # rank-k updates: 4 warps of 32 x 64, two blocks per SM (one's C traffic under the other's
    # products)
    "128x64sb": DTile(128, 64, 16, 32, 64, 4, 2, 16, True),
    # few tiles: 4 warps of 32 x 32, three blocks per SM
    "64x64": DTile(64, 64, 16, 32, 32, 4, 3, 16, False),
}
# dgemm_mma's parameters (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) in Launcher's notation.
_GEMM_ARGS = "iiidPqPqdPq"


def tile_threads(t):
    return (t.BM // t.WM) * (t.BN // t.WN) * 32


def dynamic_smem(t):
    """Bytes of dynamic shared memory one block uses (mirrors the kernel's carve-up)."""
    return 8 * t.STAGES * t.BK * (t.BM + t.BN)


def _kernel_name(t, a_kmajor, b_nmajor, vec):
    flags = ",".join(str(f).lower() for f in (t.SB, a_kmajor, b_nmajor, vec))
    return f"dgemm_mma<{t.BM},{t.BN},{t.BK},{t.WM},{t.WN},{t.STAGES},{t.MINB},{t.MK},{flags}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(
    _kernel_name(t, am, bn, v) for t in VARIANTS.values()
    for am in (True, False) for bn in (True, False) for v in (True, False))


def _vec(ptr, ld):
    """16-byte accesses possible: 16-byte aligned base pointer, even leading dimension."""
    return ptr % 16 == 0 and ld % 2 == 0


def pick_variant(m, n, k, sms=None, table=None):
    """Tile shape for an m x n x k product: table.dmma_small_variant where the large tile's
    blocks would leave more than half of the `sms` SMs idle or its ring does not fit the
    device's shared memory per block; else table.dmma_update_variant for k <= 512 (the LU's
    rank-k updates, bound by C's traffic), table.dmma_variant above.  sms, table: default the
    current device's SM count and the float64 table in force."""
    sms = device.sm_count() if sms is None else sms
    table = tuning.current(element=F64) if table is None else table
    big = VARIANTS[table.dmma_variant]
    tiles = -(-m // big.BM) * -(-n // big.BN)
    if tiles < sms // 2 or dynamic_smem(big) > _shared_limit():
        return table.dmma_small_variant
    if k <= 512 and dynamic_smem(VARIANTS[table.dmma_update_variant]) <= _shared_limit():
        return table.dmma_update_variant
    return table.dmma_variant


@functools.lru_cache(maxsize=None)
def _shared_limit_of(device_id):
    return device.max_shared_per_block(device_id)


def _shared_limit():
    """Shared memory a block of the current device may opt in to (asked once per device);
    no limit without a GPU (a pick that launches nothing)."""
    if not gpu_available():
        return float("inf")
    return _shared_limit_of(cupy().cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _kernel(device_id, variant, a_kmajor, b_nmajor, vec):
    """(Launcher, block, BM, BN) for one instantiation, opted in to its dynamic shared memory
    beyond 48 KiB; memoised, so that a launch costs the host one lookup and one
    cuLaunchKernel."""
    t = VARIANTS[variant]
    smem = dynamic_smem(t)
    kernel = get_kernel(FAMILY, _kernel_name(t, a_kmajor, b_nmajor, vec), dynamic_smem=smem)
    return Launcher(kernel, _GEMM_ARGS, smem), (tile_threads(t), 1, 1), t.BM, t.BN


def gemm_ptr(m, n, k, alpha, ap, lda, a_kmajor, bp, ldb, b_nmajor, beta, cp, ldc,
             variant=None, split=None, sms=None, table=None):
    """C = alpha A B + beta C in float64 for a row-major C (m x n, leading dimension ldc) given
    by device pointers, on the current device and stream: A (m x k) K-major (row-major) when
    a_kmajor, else M-major, B (k x n) N-major when b_nmajor, else K-major.  No validation and
    no views: the LU's steps address their blocks by pointer.  m, n >= 1; k may be 0 (C =
    beta C; beta == 0 never reads C).

    variant None: pick_variant (with `sms` and `table`: pass them on a hot path).  split: None
    or 1 (the signature of simt.gemm_ptr; this kernel does not split k).
    """
    if split is not None and split != 1:
        raise ValueError(f"the DGEMM does not split k (split={split})")
    if variant is None:
        variant = pick_variant(m, n, k, sms, table)
    vec = _vec(ap, lda) and _vec(bp, ldb) and _vec(cp, ldc)
    launch, block, bm, bn = _kernel(cupy().cuda.runtime.getDevice(), variant, bool(a_kmajor),
                                    bool(b_nmajor), vec)
    launch((-(-m // bm) * -(-n // bn), 1, 1), block, m, n, k, alpha, ap, lda, bp, ldb, beta,
           cp, ldc)


def gemm_into(alpha, a, b, beta, c, variant=None, table=None):
    """c = alpha * a @ b + beta * c in place in float64, on the current device and stream;
    returns c.

    a (m x k), b (k x n), c (m x n) are float64 CuPy arrays; a and b may have any strides (an
    operand with no unit stride is copied once), c needs one unit stride (row- or column-major
    view; a column-major c is computed as c^T = b^T a^T).  beta == 0 never reads c.
    variant None: pick_variant's under `table` (default: the float64 table in force).
    """
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x.dtype != F64.dtype:
            raise TypeError(f"{name} must be float64, got {x.dtype}")
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc = args
    if variant is None:
        variant = pick_variant(m, n, k, table=table)
    gemm_ptr(m, n, k, float(alpha), a.data.ptr, lda, a_kmajor, b.data.ptr, ldb, b_nmajor,
             float(beta), c.data.ptr, ldc, variant)
    return c
