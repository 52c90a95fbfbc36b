"""SIMT SGEMM (kernels/sgemm.cu): the tile shapes, the tile and split-K picks, the launchers.

`gemm_into` takes CuPy arrays (any strides); `gemm_ptr` takes device pointers, for the LU's
steps, whose launches must cost the host little more than cuLaunchKernel.  The picks read
the Tuning table (gpulinalg/tuning.py: simt_*) and the device's SM count; callers on a hot
path pass both (`sms`, `table`) once read.
"""

import functools
from collections import namedtuple

import numpy as np

from .. import tuning
from ..core import arrays as _arrays
from ..core import device
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel
from ..layout.transpose import transpose_into
from .common import aligned16, row_major_problem

FAMILY = "sgemm"

# One source of truth for the tile shapes; the kernels static_assert their consistency.
# KIND "dbuf": sgemm_tiled (register-staged slices, double-buffered register fragments);
# "pipe": sgemm_pipelined (STAGES cp.async buffers).  BM x BN block tile, BK k-slice, TM x TN
# thread tile, MINB resident blocks per SM asked of the register allocator.
Tile = namedtuple("Tile", "KIND BM BN BK TM TN MINB STAGES")
VARIANTS = {
    "dbuf128": Tile("dbuf", 128, 128, 8, 8, 8, 2, 2),
    "dbuf256x128": Tile("dbuf", 256, 128, 8, 16, 8, 1, 2),
    "pipe64": Tile("pipe", 64, 64, 16, 4, 4, 4, 3),
    "pipe128x64": Tile("pipe", 128, 64, 8, 8, 8, 3, 3),
    "pipe128": Tile("pipe", 128, 128, 8, 8, 8, 2, 3),
}
SUM_THREADS = 256        # sgemm_splitk_sum's block (its __launch_bounds__)
SUM_BLOCKS_PER_SM = 8    # its grid-stride loop runs on at most this many blocks per SM


def tile_threads(t):
    return (t.BM // t.TM) * (t.BN // t.TN)


def _settings(sms, table):
    """(SM count, Tuning table): the given ones, else the current device's and the table in
    force."""
    return (device.sm_count() if sms is None else sms,
            tuning.current() if table is None else table)


def pick_variant(m, n, k, beta=0.0, a_kmajor=True, sms=None, table=None):
    """Tile shape for an m x n x k product on `sms` SMs (default: the current device's).

    Square and long-k products: the 256x128 tile with double-buffered fragments once it fills
    table.simt_long_k_wave of a wave.  LU-like rank-k updates (k <= 512): the 128x128 tile,
    with the C tile prefetched through shared memory (pipe128) when k is too short to hide
    the beta*C read: k < 128, or k <= table.simt_pipe_max_k_mmajor with A M-contiguous
    (a_kmajor False), which pipe128 copies with 16-byte cp.async instead of transposing it.
    Small products: smaller tiles.
    """
    sms, table = _settings(sms, table)

    def waves(name):
        t = VARIANTS[name]
        return -(-m // t.BM) * -(-n // t.BN) / sms

    short = k < 128 or (not a_kmajor and k <= table.simt_pipe_max_k_mmajor)
    if short and beta != 0.0 and waves("pipe128") >= 2:
        return "pipe128"
    if k <= 512 and waves("dbuf128") >= 2:
        return "dbuf128"
    if k > 512 and waves("dbuf256x128") >= table.simt_long_k_wave:
        return "dbuf256x128"
    for name in ("dbuf256x128", "dbuf128", "pipe128x64"):
        if waves(name) >= 1:
            return name
    return "pipe64"


def pick_split(m, n, k, sms=None, table=None):
    """Parts to split k into (1: none) for the simt_split_variant tile: the power of two S
    that minimises the modelled time waves(S) * (k/S + simt_split_block_cost), where
    waves(S) = ceil(tiles * S / slots), with k/S >= simt_split_min_part and S <=
    simt_split_max; only when the tiles alone leave resident slots (SMs x MINB) empty,
    otherwise the workspace traffic is not paid back."""
    sms, table = _settings(sms, table)
    t = VARIANTS[table.simt_split_variant]
    tiles, slots = -(-m // t.BM) * -(-n // t.BN), sms * t.MINB
    min_part = table.simt_split_min_part
    if tiles >= slots or k < 2 * min_part:
        return 1
    cost = lambda s: -(-tiles * s // slots) * (k / s + table.simt_split_block_cost)
    best, s = 1, 2
    while s <= table.simt_split_max and k // s >= min_part:
        if cost(s) < cost(best):
            best = s
        s *= 2
    return best


def _kernel_name(t, a_kmajor, b_nmajor, vec, prefetch_c=False, split=False):
    flags = lambda *fs: ",".join(str(f).lower() for f in fs)
    if t.KIND == "pipe":
        return (f"sgemm_pipelined<{t.BM},{t.BN},{t.BK},{t.TM},{t.TN},{t.STAGES},{t.MINB},"
                f"{flags(a_kmajor, b_nmajor, vec, prefetch_c)}>")
    return (f"sgemm_tiled<{t.BM},{t.BN},{t.BK},{t.TM},{t.TN},{t.MINB},"
            f"{flags(a_kmajor, b_nmajor, vec)}{',true' if split else ''}>")


def _dynamic_smem(t, prefetch_c):
    """Bytes of dynamic shared memory sgemm_pipelined needs (mirrors the kernel's carve-up)."""
    if t.KIND != "pipe":
        return 0
    floats = t.STAGES * t.BK * (t.BM + 4 + t.BN + 4) + (t.BM * t.BN if prefetch_c else 0)
    return 4 * floats


def _sum_name(vec):
    return f"sgemm_splitk_sum<{str(vec).lower()}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(
    _kernel_name(t, am, bn, v, pc) for t in VARIANTS.values()
    for am in (True, False) for bn in (True, False) for v in (True, False)
    for pc in ((False, True) if t.KIND == "pipe" else (False,))) + tuple(
    _kernel_name(t, am, bn, v, split=True) for t in VARIANTS.values() if t.KIND == "dbuf"
    for am in (True, False) for bn in (True, False) for v in (True, False)) + (
    _sum_name(True), _sum_name(False))

# sgemm_tiled's and sgemm_pipelined's parameters (M, N, K, alpha, A, lda, B, ldb, beta, C,
# ldc) and sgemm_splitk_sum's (M, N, S, W, ldw, beta, C, ldc) in Launcher's struct notation.
_GEMM_ARGS = "iiifPqPqfPq"
_SUM_ARGS = "iiiPqfPq"


@functools.lru_cache(maxsize=None)
def _tiled_kernel(device_id, variant, a_kmajor, b_nmajor, vec, prefetch_c, split=False):
    """(Launcher, block) for one instantiation, opted in to its dynamic shared memory beyond
    48 KiB; memoised, so that a launch costs the host one lookup and one cuLaunchKernel."""
    t = VARIANTS[variant]
    smem = _dynamic_smem(t, prefetch_c)
    kernel = get_kernel(FAMILY, _kernel_name(t, a_kmajor, b_nmajor, vec, prefetch_c, split),
                        dynamic_smem=smem)
    return Launcher(kernel, _GEMM_ARGS, smem), (tile_threads(t), 1, 1)


@functools.lru_cache(maxsize=None)
def _sum_kernel(device_id, vec):
    """Launcher of sgemm_splitk_sum<vec> (the split-K partials' sum), memoised."""
    return Launcher(get_kernel(FAMILY, _sum_name(vec)), _SUM_ARGS)


def gemm_ptr(m, n, k, alpha, ap, lda, a_kmajor, bp, ldb, b_nmajor, beta, cp, ldc,
             variant=None, split=None, sms=None, table=None):
    """C = alpha A B + beta C for a row-major C (m x n, leading dimension ldc) given by device
    pointers, on the current device and stream: A (m x k) K-major (row-major) when a_kmajor,
    else M-major, B (k x n) N-major when b_nmajor, else K-major.  No validation and no views:
    the LU's steps (gpulinalg/lu/steps.py) address their blocks by pointer.  m, n >= 1.

    variant None: pick_split, then table.simt_split_variant where it splits, else
    pick_variant (with `sms` and `table`: pass them on a hot path); split None: 1 with a
    given variant.  S > 1 (a "dbuf" tile only) allocates an S x m x n workspace from CuPy's
    pool and adds the partials with sgemm_splitk_sum.
    """
    if variant is None:
        sms, table = _settings(sms, table)
        split = pick_split(m, n, k, sms, table) if split is None else split
        variant = (table.simt_split_variant if split > 1
                   else pick_variant(m, n, k, beta, a_kmajor, sms, table))
    split = split or 1
    t = VARIANTS[variant]
    dev = cupy().cuda.runtime.getDevice()
    grid = -(-m // t.BM) * -(-n // t.BN)
    if split == 1:
        vec = aligned16(ap, lda) and aligned16(bp, ldb) and aligned16(cp, ldc)
        launch, block = _tiled_kernel(dev, variant, a_kmajor, b_nmajor, vec,
                                      t.KIND == "pipe" and beta != 0.0)
        launch((grid, 1, 1), block, m, n, k, alpha, ap, lda, bp, ldb, beta, cp, ldc)
        return
    if t.KIND != "dbuf":
        raise ValueError(f"{variant} does not split k (only the dbuf tiles do)")
    # Grid row y writes the y-th partial product to its slab of the workspace (beta 0), then
    # sgemm_splitk_sum adds the slabs and beta*C into C.
    ldw = -(-n // 4) * 4   # 16-byte rows
    work = cupy().empty(split * m * ldw, dtype=np.float32)
    vec = aligned16(ap, lda) and aligned16(bp, ldb)
    launch, block = _tiled_kernel(dev, variant, a_kmajor, b_nmajor, vec, False, True)
    launch((grid, split, 1), block, m, n, k, alpha, ap, lda, bp, ldb, 0.0, work.data.ptr, ldw)
    sms = device.sm_count(dev) if sms is None else sms
    blocks = min(-(-m * (ldw // 4) // SUM_THREADS), SUM_BLOCKS_PER_SM * sms)
    _sum_kernel(dev, aligned16(cp, ldc))((blocks, 1, 1), (SUM_THREADS, 1, 1), m, n, split,
                                         work.data.ptr, ldw, beta, cp, ldc)


def _plan(args, beta, c, stage_a, sms, table):
    """(variant, stage, split) for the row-major problem `args`: table.simt_split_variant in
    pick_split's parts where k is split, else pick_variant's tile, and whether to stage A
    first (see gemm_into)."""
    m, n, k, a_kmajor = args[0], args[1], args[2], args[6]
    split = pick_split(m, n, k, sms, table)
    if split > 1:
        return table.simt_split_variant, False, split
    variant = pick_variant(m, n, k, beta, a_kmajor, sms, table)
    if stage_a and a_kmajor and _arrays.matrix_layout(c)[1]:
        staged = pick_variant(m, n, k, beta, False, sms, table)
        if staged == "pipe128":   # 16-byte copies of an M-contiguous A instead of 4-byte ones
            return staged, True, 1
    return variant, False, 1


def chosen_variant(a, b, beta, c, stage_a=False, sms=None, table=None):
    """The tile gemm_into(alpha, a, b, beta, c, stage_a=stage_a) runs, with " (A staged)"
    when it transposes A first and " (k split S)" when it splits k; None when there is
    nothing to compute.  a, b, c may be NumPy arrays (only shapes and strides are read)."""
    args = row_major_problem(1.0, a, b, beta, c)
    if args is None:
        return None
    variant, stage, split = _plan(args, beta, c, stage_a, *_settings(sms, table))
    return variant + (" (A staged)" if stage else "") + (f" (k split {split})" if split > 1
                                                          else "")


def gemm_into(alpha, a, b, beta, c, variant=None, stage_a=False, split=None, table=None):
    """c = alpha * a @ b + beta * c in place, on the current device and stream; returns c.

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.
    stage_a (the public sgemm's choice; off for the LU's internal products, which sit on
    latency-bound chains): where an M-contiguous A would run pipe128 (a rank-k update with
    k <= simt_pipe_max_k_mmajor and two waves of tiles), a K-contiguous a (row-major C only)
    is first transposed into a k x m temporary (8 bytes moved per element of a), so that
    pipe128 copies it with 16-byte cp.async instead of four transposing 4-byte ones.
    variant None: the tile and split `_plan` picks under `table` (default: the one in
    force); split (with a variant): parts of k (gemm_ptr's; None: 1).
    """
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant, stage, split = _plan(args, beta, c, stage_a, *_settings(None, table))
        if stage:
            return _staged(alpha, a, b, beta, c, args, variant)
    m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc = args
    gemm_ptr(m, n, k, alpha, a.data.ptr, lda, a_kmajor, b.data.ptr, ldb, b_nmajor, beta,
             c.data.ptr, ldc, variant, split)
    return c


def _staged(alpha, a, b, beta, c, args, variant):
    """gemm_into with `a` first transposed into an M-contiguous temporary (stage_a)."""
    m, k = args[0], args[2]
    pitch = -(-m // 64) * 64   # 16-byte aligned rows (and the transpose's 64 grid)
    at = cupy().empty((k, pitch), dtype=np.float32)[:, :m]
    return gemm_into(alpha, transpose_into(a, at).T, b, beta, c, variant, split=1)
