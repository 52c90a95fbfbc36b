"""SGEMM: launch wrappers for kernels/sgemm.cu and the public sgemm / matmul."""

import functools
from collections import namedtuple

import numpy as np

from ..core import arrays as _arrays
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel

# One source of truth for the tile shapes; the kernels static_assert their consistency.
# KIND: "tiled" = sgemm_tiled (register-staged, the first tuning step), "dbuf" = sgemm_tiled
# with double-buffered register fragments, "pipe" = sgemm_pipelined with STAGES cp.async
# buffers.  MINB: resident blocks per SM asked of the register allocator.
Tile = namedtuple("Tile", "KIND BM BN BK TM TN MINB STAGES")
VARIANTS = {
    "tiled128": Tile("tiled", 128, 128, 8, 8, 8, 2, 2),
    "tiled256x128": Tile("tiled", 256, 128, 8, 16, 8, 1, 2),
    "dbuf128": Tile("dbuf", 128, 128, 8, 8, 8, 2, 2),
    "dbuf256x128": Tile("dbuf", 256, 128, 8, 16, 8, 1, 2),
    "dbuf128x256": Tile("dbuf", 128, 256, 8, 8, 16, 1, 2),
    "pipe64": Tile("pipe", 64, 64, 16, 4, 4, 4, 3),
    "pipe128x64": Tile("pipe", 128, 64, 8, 8, 8, 3, 3),
    "pipe128": Tile("pipe", 128, 128, 8, 8, 8, 2, 3),
    "pipe256x128": Tile("pipe", 256, 128, 8, 16, 8, 1, 3),
}
BASELINE = "volkov2008"
_NUM_SMS_GUESS = 132
# pick_variant: rank-k updates (beta != 0) with k below 128 take pipe128 (C staged in shared
# memory); with A M-contiguous also up to k = PIPE_MAX_K_MMAJOR (0: never).
PIPE_MAX_K_MMAJOR = 128
# Long-k products take the 256x128 tile from this fraction of a wave on: at 2048^3 (128 tiles
# on 132 SMs) it ran 43.8-44.6 TF/s against dbuf128's 41.7-42.4 (H100, seventeenth session).
LONG_K_WAVE = 0.9


# Split K (pick_split): a product with fewer tiles of SPLIT_VARIANT than its resident slots
# (SMs x MINB) and k long enough runs as S partial products of k/S each (S grid rows, S
# times the blocks) into a workspace, then one summing kernel (sgemm_splitk_sum).  S from
# the cost model there; its constants fit an H100 sweep (docs/performance_notes.md).
SPLIT_VARIANT = "dbuf128"
SPLIT_MIN_PART = 256     # shortest k per part
SPLIT_BLOCK_COST = 64    # a block's fixed cost (prologue, epilogue), in k-steps
SPLIT_MAX = 64


def tile_threads(t):
    return (t.BM // t.TM) * (t.BN // t.TN)


def pick_variant(m, n, k, beta=0.0, a_kmajor=True):
    """Tile shape for an m x n x k product, from the H100 sweep in docs/performance.md.

    Square and long-k products: the 256x128 tile with double-buffered fragments once it fills
    LONG_K_WAVE of a wave.  LU-like rank-k updates (k <= 512): the 128x128 tile, with the C
    tile prefetched through shared memory (pipe128) when k is too short to hide the beta*C
    read -- k < 128, or k <= PIPE_MAX_K_MMAJOR with A M-contiguous (a_kmajor False), which
    pipe128 copies with 16-byte cp.async instead of transposing it (16384^2 x 128, A
    column-major: 38.1 / 36.2 TF/s against dbuf128's 36.7 / 35.6 in two runs).  Small
    products: smaller tiles.
    """
    def waves(name):
        t = VARIANTS[name]
        return -(-m // t.BM) * -(-n // t.BN) / _NUM_SMS_GUESS

    short = k < 128 or (not a_kmajor and k <= PIPE_MAX_K_MMAJOR)
    if short and beta != 0.0 and waves("pipe128") >= 2:
        return "pipe128"
    if k <= 512 and waves("dbuf128") >= 2:
        return "dbuf128"
    if k > 512 and waves("dbuf256x128") >= LONG_K_WAVE:
        return "dbuf256x128"
    for name in ("dbuf256x128", "dbuf128", "pipe128x64"):
        if waves(name) >= 1:
            return name
    return "pipe64"


def pick_split(m, n, k):
    """Parts to split k into (1: none) for SPLIT_VARIANT's tiles: the power of two S that
    minimises the modelled time waves(S) * (k/S + SPLIT_BLOCK_COST), where waves(S) =
    ceil(tiles * S / slots), with k/S >= SPLIT_MIN_PART; only when the tiles alone leave
    resident slots empty (otherwise the workspace traffic is not paid back).  H100, against
    the unsplit pick: 1024^3 x0.82 -> x1.17 cuBLAS, 1536^3 0.75 -> 1.05, 512^2 x 8192 0.31 ->
    1.09 (benchmarks/sgemm_ab.py)."""
    t = VARIANTS[SPLIT_VARIANT]
    tiles, slots = -(-m // t.BM) * -(-n // t.BN), _NUM_SMS_GUESS * t.MINB
    if tiles >= slots or k < 2 * SPLIT_MIN_PART:
        return 1
    cost = lambda s: -(-tiles * s // slots) * (k / s + SPLIT_BLOCK_COST)
    best, s = 1, 2
    while s <= SPLIT_MAX and k // s >= SPLIT_MIN_PART:
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
            f"{flags(t.KIND == 'dbuf', a_kmajor, b_nmajor, vec)}{',true' if split else ''}>")


def _dynamic_smem(t, prefetch_c):
    """Bytes of dynamic shared memory sgemm_pipelined needs (mirrors the kernel's carve-up)."""
    if t.KIND != "pipe":
        return 0
    floats = t.STAGES * t.BK * (t.BM + 4 + t.BN + 4) + (t.BM * t.BN if prefetch_c else 0)
    return 4 * floats


FAMILY = "sgemm"
# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(
    _kernel_name(t, am, bn, v, pc) for t in VARIANTS.values()
    for am in (True, False) for bn in (True, False) for v in (True, False)
    for pc in ((False, True) if t.KIND == "pipe" else (False,))) + tuple(
    _kernel_name(t, am, bn, v, split=True) for t in VARIANTS.values() if t.KIND == "dbuf"
    for am in (True, False) for bn in (True, False) for v in (True, False)) + (
    "sgemm_volkov2008", "sgemm_splitk_sum<true>", "sgemm_splitk_sum<false>")


def aligned16(ptr, ld):
    """16-byte vector access possible: aligned base pointer, leading dimension % 4 == 0."""
    return ptr % 16 == 0 and ld % 4 == 0


# sgemm_tiled's and sgemm_pipelined's parameters (M, N, K, alpha, A, lda, B, ldb, beta, C,
# ldc) in Launcher's struct notation.
_GEMM_ARGS = "iiifPqPqfPq"


@functools.lru_cache(maxsize=None)
def _tiled_kernel(device_id, variant, a_kmajor, b_nmajor, vec, prefetch_c, split=False):
    """(Launcher, block) for one instantiation, opted in to its dynamic shared memory beyond
    48 KiB; memoised, so that a launch costs the host one lookup and one cuLaunchKernel."""
    t = VARIANTS[variant]
    smem = _dynamic_smem(t, prefetch_c)
    kernel = get_kernel(FAMILY, _kernel_name(t, a_kmajor, b_nmajor, vec, prefetch_c, split),
                        dynamic_smem=smem)
    return Launcher(kernel, _GEMM_ARGS, smem), (tile_threads(t), 1, 1)


def _launch_tiled(variant, split, m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta,
                  c, ldc):
    gemm_ptr(m, n, k, alpha, a.data.ptr, lda, a_kmajor, b.data.ptr, ldb, b_nmajor, beta,
             c.data.ptr, ldc, variant, split)


def gemm_ptr(m, n, k, alpha, ap, lda, a_kmajor, bp, ldb, b_nmajor, beta, cp, ldc,
             variant=None, split=None):
    """C = alpha A B + beta C for a row-major C (m x n, leading dimension ldc) given by device
    pointers, on the current device and stream: A (m x k) K-major (row-major) when a_kmajor,
    else M-major, B (k x n) N-major when b_nmajor, else K-major.  No validation and no views:
    the LU's steps (gpulinalg/_lu_ops.py) address their blocks by pointer, so that a launch
    costs the host little more than cuLaunchKernel.  m, n >= 1.  variant None: pick_split,
    then SPLIT_VARIANT where it splits, else pick_variant; split None: 1 with a given variant.
    S > 1 (a "dbuf" tile only) allocates an S x m x n workspace from CuPy's pool."""
    if variant is None:
        split = pick_split(m, n, k) if split is None else split
        variant = SPLIT_VARIANT if split > 1 else pick_variant(m, n, k, beta, a_kmajor)
    split = split or 1
    t = VARIANTS[variant]
    dev = cupy().cuda.runtime.getDevice()
    grid = -(-m // t.BM) * -(-n // t.BN)
    if split > 1:
        if t.KIND != "dbuf":
            raise ValueError(f"{variant} does not split k (only the dbuf tiles do)")
        ldw = -(-n // 4) * 4   # 16-byte rows
        work = cupy().empty(split * m * ldw, dtype=np.float32)
        vec = aligned16(ap, lda) and aligned16(bp, ldb)
        launch, block = _tiled_kernel(dev, variant, a_kmajor, b_nmajor, vec, False, True)
        launch((grid, split, 1), block, m, n, k, alpha, ap, lda, bp, ldb, 0.0, work.data.ptr,
               ldw)
        total = m * (ldw // 4)
        _sum_kernel(dev, aligned16(cp, ldc))((min(-(-total // 256), 8 * _NUM_SMS_GUESS), 1, 1),
                                             (256, 1, 1), m, n, split, work.data.ptr, ldw,
                                             beta, cp, ldc)
        return
    vec = aligned16(ap, lda) and aligned16(bp, ldb) and aligned16(cp, ldc)
    launch, block = _tiled_kernel(dev, variant, a_kmajor, b_nmajor, vec,
                                  t.KIND == "pipe" and beta != 0.0)
    launch((grid, 1, 1), block, m, n, k, alpha, ap, lda, bp, ldb, beta, cp, ldc)


@functools.lru_cache(maxsize=None)
def _sum_kernel(device_id, vec):
    """Launcher of sgemm_splitk_sum<vec> (the split-K partials' sum), memoised."""
    name = f"sgemm_splitk_sum<{str(vec).lower()}>"
    return Launcher(get_kernel(FAMILY, name), "iiiPqfPq")


def _launch_volkov(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    # Volkov's kernel is column-major: C^T (n x m) = B^T A^T, where the row-major B is the
    # column-major B^T with the same leading dimension, and likewise for A and C.
    if m % 16 or n % 64 or k % 16:
        raise ValueError("the volkov2008 baseline needs m % 16 == 0, n % 64 == 0, k % 16 == 0")
    kernel = get_kernel(FAMILY, "sgemm_volkov2008")
    kernel((n // 64, m // 16), (64,),
           (np.int32(n), np.int32(m), np.int32(k), np.float32(alpha), b, np.int64(ldb),
            a, np.int64(lda), np.float32(beta), c, np.int64(ldc)))


def row_major_problem(alpha, a, b, beta, c):
    """Validate c = alpha a b + beta c and state it for a kernel that writes row-major C.

    Returns None when there is nothing to compute (m or n is 0), else
    (m, n, k, alpha, A, lda, a_kmajor, B, ldb, b_nmajor, beta, C, ldc): a column-major c is
    computed as C^T = B^T A^T, whose operands swap roles and majors.  Operands with no unit
    stride are copied once (as_matrix); c needs one unit stride.
    """
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise ValueError(f"shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if max(m, n, k) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    c_layout = _arrays.matrix_layout(c)
    if c_layout is None:
        raise ValueError("c must have one unit stride (a row- or column-major view)")
    if m == 0 or n == 0:
        return None
    a, (lda, a_row) = _arrays.as_matrix(a, "a")
    b, (ldb, b_row) = _arrays.as_matrix(b, "b")
    ldc, c_row = c_layout
    if c_row:  # row-major C: A row-major is K-major, B row-major is N-major
        return (m, n, k, alpha, a, lda, a_row, b, ldb, b_row, beta, c, ldc)
    return (n, m, k, alpha, b, ldb, not b_row, a, lda, not a_row, beta, c, ldc)


def _plan(args, beta, c, stage_a):
    """(variant, stage, split) for the row-major problem `args`: SPLIT_VARIANT in pick_split's
    parts where k is split, else pick_variant's tile, and whether to stage A first (see
    gemm_into)."""
    m, n, k, a_kmajor = args[0], args[1], args[2], args[6]
    split = pick_split(m, n, k)
    if split > 1:
        return SPLIT_VARIANT, False, split
    variant = pick_variant(m, n, k, beta, a_kmajor)
    if stage_a and a_kmajor and _arrays.matrix_layout(c)[1]:
        staged = pick_variant(m, n, k, beta, a_kmajor=False)
        if staged == "pipe128":   # 16-byte copies of an M-contiguous A instead of 4-byte ones
            return staged, True, 1
    return variant, False, 1


def chosen_variant(a, b, beta, c, stage_a=False):
    """The tile gemm_into(alpha, a, b, beta, c, stage_a=stage_a) runs, with " (A staged)"
    when it transposes A first and " (k split S)" when it splits k; None when there is
    nothing to compute."""
    args = row_major_problem(1.0, a, b, beta, c)
    if args is None:
        return None
    variant, stage, split = _plan(args, beta, c, stage_a)
    return variant + (" (A staged)" if stage else "") + (f" (k split {split})" if split > 1
                                                          else "")


def gemm_into(alpha, a, b, beta, c, variant=None, stage_a=False, split=None):
    """c = alpha * a @ b + beta * c in place, on the current device and stream.

    a (m x k), b (k x n), c (m x n) are float32 CuPy arrays; a and b may have any strides, c
    needs one unit stride (row- or column-major view).  beta == 0 never reads c.
    stage_a (the public sgemm's choice; off for the LU's internal products, which sit on
    latency-bound chains): where an M-contiguous A would run pipe128 (a rank-k update with
    k <= PIPE_MAX_K_MMAJOR and two waves of tiles), a K-contiguous a (row-major C only) is
    first transposed into a k x m temporary (8 bytes moved per element of a), so that pipe128
    copies it with 16-byte cp.async instead of four transposing 4-byte ones.
    variant None: the tile and split `_plan` picks; split (with a variant): parts of k
    (gemm_ptr's; None: 1).
    """
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    if variant is None:
        variant, stage, split = _plan(args, beta, c, stage_a)
        if stage:
            from ..layout.transpose import transpose_into
            m, k = args[0], args[2]
            pitch = -(-m // 64) * 64   # 16-byte aligned rows (and the transpose's 64 grid)
            at = cupy().empty((k, pitch), dtype=np.float32)[:, :m]
            return gemm_into(alpha, transpose_into(a, at).T, b, beta, c, variant,
                             split=split)
    if variant == BASELINE:
        if not (args[6] and args[9]):
            raise ValueError("the volkov2008 baseline takes row-major operands only")
        mm, nn, kk, al, aa, la, _, bb, lb, _, be, cc, lc = args
        _launch_volkov(mm, nn, kk, al, aa, la, bb, lb, be, cc, lc)
    else:
        _launch_tiled(variant, split, *args)
    return c


PRECISIONS = ("auto", "fp32", "3xtf32", "tf32")
# precision="auto" (the public default): 3xTF32 through wgmma -- FP32-level accuracy, measured
# more accurate than the SIMT kernel from k = 64 on (its sums are split per 32-slice) -- for
# products where it measured faster than the SIMT kernel on the H100, a loop of calls each
# (benchmarks/wgmma_ab.py, C -= A B with m = n, and squares; gpulinalg-bench sgemm):
# k >= AUTO_TC_MIN_K and either m*n >= AUTO_TC_MIN_MN or m*n*k >= AUTO_TC_MIN_MNK.  Below,
# the pre-pass and three launches (~35-50 us of host time per call) outlast the SIMT kernel:
# m = n = 2048, k = 64 / 128 / 256: 7.4 / 14.5 / 29.4 TF/s against 16.1 / 24.6 / 31.9;
# 1024^3 20.0 against 27.5; 3072^2 k = 64 15.0 against 13.6, 4096^2 k = 64 23.7 against
# 19.6, 1536^3 54.4 against 33.4.  On devices without wgmma, the SIMT FP32 kernel.
AUTO_TC_MIN_K = 64
AUTO_TC_MIN_MN = 3072 * 3072
AUTO_TC_MIN_MNK = 2 * 10**9


def _check_precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


def resolve_precision(precision, m, n, k):
    """The arithmetic `precision` means for an m x n x k product ("auto": see AUTO_TC_MIN_K)."""
    if precision != "auto":
        return precision
    if k >= AUTO_TC_MIN_K and (m * n >= AUTO_TC_MIN_MN or m * n * k >= AUTO_TC_MIN_MNK):
        from . import wgmma as _gemm_wgmma
        if _gemm_wgmma.available():
            return "3xtf32"
    return "fp32"


def product_into(alpha, a, b, beta, c, precision="fp32", stage_a=False, persistent=True):
    """gemm_into with the arithmetic chosen by `precision` (see `sgemm`): the tensor-core
    modes run through Hopper's wgmma where the device has it (sm_90), else through mma.sync.
    stage_a: as gemm_into's (FP32 only); persistent: as gemm_wgmma_into's."""
    precision = resolve_precision(precision, a.shape[0], b.shape[1], a.shape[1])
    if precision == "fp32":
        return gemm_into(alpha, a, b, beta, c, stage_a=stage_a)
    from . import wgmma as _gemm_wgmma
    if _gemm_wgmma.available():
        return _gemm_wgmma.gemm_wgmma_into(alpha, a, b, beta, c, mode=precision,
                                           persistent=persistent)
    from .mma import gemm_tc_into
    return gemm_tc_into(alpha, a, b, beta, c, mode=precision)


def _as_trans_flag(t, name):
    if t in (0, 1, 2, False, True):
        return bool(t)
    raise ValueError(f"{name} must be 0/False, 1/True or 2 (conjugate transpose), got {t!r}")


def _real_scalar(x, name):
    """x as the float32 value the kernels use (beyond float32's range: +-inf, as NumPy casts),
    returned as a Python float."""
    if isinstance(x, complex) or np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got {x!r}")
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def sgemm(alpha, a, b, beta=0.0, c=None, trans_a=False, trans_b=False, overwrite_c=False, *,
          precision="auto"):
    """Single-precision general matrix multiply on the GPU.

    Computes ``alpha * op(a) @ op(b) + beta * c`` with ``op(x) = x`` or ``x.T``.

    Parameters
    ----------
    alpha : float
    a : (m, k) or (k, m) array_like
        NumPy/CuPy array or torch tensor; float32, or a type that converts to float32 exactly
        (float16, bfloat16, small integers, bool).  float64 raises TypeError: convert
        explicitly, the library never downcasts silently.
    b : (k, n) or (n, k) array_like
    beta : float, optional
        With ``beta == 0`` (the default) c is not read, so it may hold NaN or garbage.
    c : (m, n) array_like, optional
    trans_a, trans_b : bool or {0, 1, 2}, optional
        Use the transpose of a / b (2, the conjugate transpose, is the transpose for reals).
    precision : {"auto", "fp32", "3xtf32", "tf32"}, keyword-only
        "auto" (default): "3xtf32" on Hopper (sm_90) for products with k >= 64 and either
        m*n >= 3072**2 or m*n*k >= 2e9, where it is both faster and more accurate than the
        SIMT kernel (measured, docs/performance.md), else "fp32".  "fp32": the SIMT FP32 kernel.
        "3xtf32": tensor cores with each operand split into a TF32 head and tail and three
        products summed in FP32 (FP32-level accuracy; entries whose sum comes out Inf or NaN
        are recomputed in FP32 on sm_90, so Inf and NaN inputs give FP32's results).  "tf32":
        one TF32 product (error ~3e-4: not FP32 accuracy).
    overwrite_c : bool, optional
        For a CuPy array or CUDA tensor c of dtype float32 with one unit stride, write the
        result into c and return it.  Otherwise a new array is returned.

    Returns
    -------
    (m, n) ndarray
        Of the inputs' kind: NumPy in, NumPy out; CuPy in, CuPy out on the same device (work
        on the caller's current stream); torch in, torch out (CUDA tensors are shared
        zero-copy and the work runs on torch's current stream).  New arrays are C-ordered.

    Raises
    ------
    ValueError
        Not 2-D, mismatched shapes, or a bad transpose flag.
    TypeError
        A dtype that does not convert exactly to float32, or inputs of mixed kinds.
    CudaUnavailableError
        No CuPy or no CUDA device.

    See Also
    --------
    scipy.linalg.blas.sgemm : the host version this mirrors.

    Notes
    -----
    The FP32 kernel is a register-tiled SIMT SGEMM (kernels/sgemm.cu), the 3xTF32 one a
    Hopper wgmma kernel (kernels/sgemm_wgmma.cu) after a pre-pass that splits the operands
    into a workspace of 8 bytes per operand element (rounded up to whole tiles); strided views with
    one unit stride and both memory orders are used in place, other strides are copied once.
    For a large rank-k update (beta != 0, k <= 128, a C-ordered result) with a row-major
    op(a), op(a) is first transposed into a temporary of k x m floats, which the kernel then
    reads with 16-byte copies.  It performs ``2*m*n*k`` flops.
    """
    alpha, beta = _real_scalar(alpha, "alpha"), _real_scalar(beta, "beta")
    _check_precision(precision)
    ta, tb = _as_trans_flag(trans_a, "trans_a"), _as_trans_flag(trans_b, "trans_b")
    kind = _arrays.common_kind(a, b, c)
    sa, sb = _arrays.check_matrix(a, "a"), _arrays.check_matrix(b, "b")
    sa, sb = (sa[::-1] if ta else sa), (sb[::-1] if tb else sb)
    if sa[1] != sb[0]:
        raise ValueError(f"op(a) has shape {sa} and op(b) {sb}: inner dimensions differ")
    m, n = sa[0], sb[1]
    if c is not None and _arrays.check_matrix(c, "c") != (m, n):
        raise ValueError(f"c has shape {tuple(c.shape)}, expected {(m, n)}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, b, c))):
        A = _arrays.to_device(a, kind, "a")
        B = _arrays.to_device(b, kind, "b")
        A, B = (A.T if ta else A), (B.T if tb else B)
        if c is None:
            out, beta = cp.empty((m, n), dtype=np.float32), 0.0
        else:
            C = _arrays.to_device(c, kind, "c")
            # In place only when C is a view of c itself (float32, not a converted copy).
            in_place = (overwrite_c and kind in ("cupy", "torch")
                        and C.data.ptr == _device_ptr(c, kind)
                        and _arrays.matrix_layout(C) is not None)
            if in_place:
                out = C
            elif beta == 0.0:
                out = cp.empty((m, n), dtype=np.float32)
            else:
                out = cp.array(C, dtype=np.float32, order="C")
        product_into(alpha, A, B, beta, out, precision, stage_a=True)
        if c is not None and out is C and kind == "torch":
            return c  # written in place through the DLPack view
        return _arrays.from_device(out, kind)


def _device_ptr(x, kind):
    """Device pointer of a CuPy array or CUDA tensor (to tell a view from a converted copy)."""
    return x.data.ptr if kind == "cupy" else x.data_ptr()


def matmul(a, b, out=None, *, precision="auto"):
    """Matrix product of two 2-D float32 arrays on the GPU, like ``numpy.matmul``.

    Parameters
    ----------
    a : (m, k) array_like
    b : (k, n) array_like
        NumPy/CuPy arrays or torch tensors, one kind for all; dtype policy as in `sgemm`.
    out : (m, n) array, optional
        Same kind as the inputs, float32.  CuPy/torch CUDA outputs are written in place (any
        view with one unit stride; other views through one temporary); NumPy outputs are
        filled from the device result.

    Returns
    -------
    (m, n) array
        `out` if given, else a new C-ordered array of the inputs' kind.

    precision : {"auto", "fp32", "3xtf32", "tf32"}, keyword-only
        As in `sgemm` ("auto", the default: 3xTF32 on Hopper for large products).

    See Also
    --------
    numpy.matmul, sgemm

    Notes
    -----
    Only 2-D operands: 1-D and batched (stacked) products are not supported and raise
    ValueError.  ``2*m*n*k`` flops.
    """
    _check_precision(precision)
    kind = _arrays.common_kind(a, b, out)
    sa, sb = _arrays.check_matrix(a, "a"), _arrays.check_matrix(b, "b")
    if sa[1] != sb[0]:
        raise ValueError(f"matmul: shapes {sa} and {sb} not aligned: "
                         f"{sa[1]} (dim 1) != {sb[0]} (dim 0)")
    shape = (sa[0], sb[1])
    if out is not None:
        if tuple(out.shape) != shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {shape}")
        if _arrays.dtype_of(out) != np.float32 or str(out.dtype).endswith("bfloat16"):
            raise TypeError(f"out must be float32, got {out.dtype}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, b, out))):
        A = _arrays.to_device(a, kind, "a")
        B = _arrays.to_device(b, kind, "b")
        if out is None:
            res = cp.empty(shape, dtype=np.float32)
            product_into(1.0, A, B, 0.0, res, precision)
            return _arrays.from_device(res, kind)
        if kind in ("cupy", "torch"):
            O = _arrays.to_device(out, kind, "out")
            if _arrays.matrix_layout(O) is not None:
                product_into(1.0, A, B, 0.0, O, precision)
            else:
                O[...] = product_into(1.0, A, B, 0.0, cp.empty(shape, dtype=np.float32),
                                      precision)
        else:
            res = product_into(1.0, A, B, 0.0, cp.empty(shape, dtype=np.float32), precision)
            if kind == "torch_cpu":
                out.copy_(_arrays.from_device(res, kind))
            else:
                np.copyto(out, cp.asnumpy(res))
        return out
