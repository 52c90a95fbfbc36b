"""Transpose: launch wrappers for kernels/transpose.cu and the public transpose."""

import functools
from collections import namedtuple

import numpy as np

from ..core import arrays as _arrays
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel

FAMILY = "transpose"
# One source of truth for the tile shapes; the kernels static_assert their consistency.
# TILE x TILE elements of A per block, 32 x BY threads; PAIR: transpose_pair (8-byte accesses,
# 64 x 64 only), launched where both leading dimensions are even and both pointers 8-byte
# aligned, else the same tile with 4-byte accesses (transpose_tiled<64,BY>).
Tile = namedtuple("Tile", "TILE BY PAIR PF EL SKEW", defaults=(False, 0, False, 0))
VARIANTS = {
    "32x8": Tile(32, 8),               # the seed kernel (baseline): 4 elements per thread
    "64x4": Tile(64, 4),               # 32 elements per thread on 128 threads, 13 blocks/SM
    "64x4-pair": Tile(64, 4, True),    # the same with float2 loads and stores
    "32x8-pf256": Tile(32, 8, False, 256),   # 32x8 whose L2 misses fill 256 aligned bytes
    "32x8-pf256-el": Tile(32, 8, False, 256, True),   # and stores B with L2 evict-last
    # transpose_skew: TILE A rows x 32 columns, B rows written in whole SKEW-float units
    "64x8-skew": Tile(64, 8, False, 256, False, 8),     # 32-byte sectors
    "128x8-skew": Tile(128, 8, False, 256, False, 8),   # 7 / 128 rows reread
    "128x8-skew32": Tile(128, 8, False, 256, False, 32),   # 128-byte lines: 31 / 128
}
BASELINE = "32x8"
# H100, burst timing, % of a device copy of as many bytes (gpulinalg-bench transpose, two
# sweeps, 2026-11-21; "a/b" = the two sweeps):
#   size        32x8       64x4       64x4-pair
#   4000^2      96.9/97.0  95.2/95.5  96.2/96.4
#   4096^2      97.4/97.2  98.6/98.7  100.4/100.6
#   5000^2      98.3/98.0  89.4/89.1  97.4/97.1
#   6000x10000  94.6/94.2  87.7/87.3  93.3/93.0
#   8000^2      95.3/94.0  97.6/96.1  98.7/97.3
#   8192^2      95.2/93.9  97.7/96.3  98.4/96.9
#   10000^2     94.0/92.9  87.7/86.7  93.2/92.0
#   12000^2     93.7/93.2  92.2/91.7  92.9/92.3
#   12288^2     93.7/93.5  96.5/96.2  97.2/97.0
#   16384^2     93.6/93.4  96.7/96.4  97.1/96.8
# The 64-wide tiles lose off the 64 grid because of the row pitch, not the partial tiles
# (--layouts 10000: 64x4 86.9% contiguous, 95.7% with leading dimensions padded to
# multiples of 64, 85.8% on the 64-aligned interior at the original pitch, 95.4% on a
# contiguous interior; 64x4-pair 92.3 / 96.5 / 91.1 / 96.3; 32x8 93.1 / 93.2 / 91.9 / 92.8).
# So the choice follows the pitches: 64x4-pair where both leading dimensions are multiples
# of 64 and both pointers 256-byte aligned, 32x8 elsewhere.  Lost everywhere, removed (same
# sweeps, 10000^2 / 16384^2): 32x32 on 128 threads 92.2 / 92.6, 32 x 64 tiles on 128 or 256
# threads 91.3 / 92.2 and 93.1 / 93.2, 64 x 32 tiles 92.0 / 94.1 and 93.0 / 94.9, column-major
# tile order in bands of 32 tile rows (32x8 91.4 / 92.6, 64x4 87.2 / 94.4), float2 on
# 64 x 64 with 256 threads 92.9 / 96.9.  Earlier: diagonal block order and streaming (.cs)
# hints no gain on the grid and 2-5 points slower off it; 64 x 64 on 256 threads (64x8)
# 92.6% at 6000 x 10000; 64 x 128 / 128 x 64 tiles on 256 threads slower than 64x4.
# Off the grid nothing measured reaches 95% of copy at 6000 x 10000 on every H100 (32x8
# 94.2-94.6%, default run 94.3%); at 4000^2 32x8 ran 94.6-97.0% over three runs.
# Twelfth session (benchmarks/transpose_ab.py; the machine moves 32x8 at 6000 x 10000 by 3
# points between H100s: 96.1, 94.4, 93.4%).  A burst pays for the dirty lines its
# predecessor left in L2 (1-5 points between identical kernels at 4000^2), so the figures
# below are means over rounds that rotate the order (% of copy; 32x8 / 32x8-pf256 /
# 32x8-pf256-el / 64x4-pair):
#   4000^2       98.4 / 99.8 / 98.3 / 102.2     (B pitch on 128-byte lines)
#   5000^2       98.4 / 100.2 / 102.0 / 103.3
#   6000 x 10000 94.6 / 95.2 / 96.5 / 95.6      (second run 94.2 / 95.0 / 96.0)
#   10000^2      93.8 / 94.8 / 96.3 / 93.7      (94.2 / 95.2 / 96.5)
#   11000^2      92.4 / 93.3 / 95.3 / 91.6
#   12000^2      93.6 / 94.2 / 94.5 / 93.0      (B pitch on 128-byte lines)
#   16384^2      93.1 / 93.5 / 93.7 / 96.6
# pf256: A read with a 256-byte L2 fill (ld.global.nc.L2::256B), so that the neighbour
# tile's half of a chunk comes from DRAM in the same access: +0.4-1.8 everywhere.  el: B
# also written with an L2 evict-last policy, so that the L2 evicts the consumed lines of A
# before the half-written lines of B: +1.0-2.0 where B's rows are not on 128-byte lines,
# -1.5 at 4000^2 where they are; still +0.5-1.3 when each call is charged with a following
# copy or a 2048^2 cupy.matmul (--chain: what it leaves in L2 does not slow the next kernel).
# So OFF_GRID is 32x8-pf256 and OFF_GRID_EL 32x8-pf256-el where B's pitch is not a multiple
# of 32 floats.  No gain, not kept: column-major order in bands of 2 / 4 / 8 / 16 tile rows
# (6000 x 10000 32x8 96.1 / 96.0 / 94.7 / 94.8 / 93.8), two 32 x 32 tiles per block (93.1 ->
# 92.5), 32 x 32 on 128 threads with the fill (equal), on 512 threads (70%), the fill on
# 64x4-pair (16384^2 96.2 -> 95.8), evict-first or L1::no_allocate loads (-5 to -10).
# Odd sizes (the --sweep's n + 1) ran at 57-74% of copy with every tile above (16385^2:
# 32x8 56.8%, 64x4 64.9%): B's rows start mid-sector, and a sector half written by one
# tile and finished by the next tile row's, gx blocks later, costs DRAM a read-modify-write
# when it leaves L2 in between.  transpose_skew writes each B row in whole sectors (its
# window of A rows shifted by the row's sector offset, kernels/transpose.cu): with 32 A rows
# a tile 83-88%, with 64 ("64x8-skew", the first OFF_SECTOR) 91.5-95.6% (4097^2 95.1,
# 8193^2 92.4, 12289^2 91.5, 16385^2 91.8, 6001 x 10003 93.2, 4002^2 95.6, 2049^2 99.0);
# its stores with evict-last lost 4-5 points.  Thirteenth session (transpose_ab, rounds rotating the order;
# --sweep --variants): 128 A rows ("128x8-skew", 7 / 128 of the rows read twice instead of
# 7 / 64) against 64: 6145^2 97.7 / 96.2, 8193^2 94.6 / 92.8, 10241^2 94.5 / 93.3, 12289^2
# 93.0 / 91.9, 14337^2 93.4 / 92.7, 16385^2 92.7 / 92.2, 4097^2 98.5 / 96.4, 5001^2
# 96.8 / 94.5, 6001 x 10003 94.2 / 93.2 (one sweep had 4097^2 99.5 / 100.6; 2049^2
# kernel-only 97.9 / 97.3): OFF_SECTOR is the 128-row tile.  Twentieth session (transpose_ab,
# 2 rounds): 256 A rows or 64 A columns per block did not help: 128 x 32 / 256 x 32 / 128 x 64
# at 4097^2 99.2 / 97.8 / 95.6, 8193^2 95.1 / 94.8 / 94.3, 12289^2 92.9 / 92.3 / 93.0,
# 16385^2 93.0 / 92.1 / 93.2, 6001 x 10003 94.0 / 92.9 / 93.1 (not kept); each B row's window
# written with 16-byte stores (4 consecutive tile rows a lane: 4-way bank conflicts on the
# column reads) 68-82% against 92.5-100.4% (3 rounds, 4097^2-16385^2, 6001 x 10003, 4002 x
# 4000; not kept).
# Twenty-first session (transpose_ab, 3 rounds, two calls; H100): each B row's window on a
# coarser grid, SA = 8 / 16 / 32 floats (sectors / 64 bytes / 128-byte lines; SA - 1 rows
# above read again): 4097^2 99.6 / 98.2 / 101.8 and 98.8 / - / 100.7, 8193^2 95.9 / 95.9 / 96.5
# and 95.5 / - / 96.1, 12289^2 94.3 / 94.4 / 94.6 and 93.8 / - / 94.1, 16385^2 93.1 / 93.1 /
# 93.2 and 92.7 / - / 92.8, 6001 x 10003 94.9 / 94.8 / 95.5 and 94.3 / - / 94.8: OFF_SECTOR is
# SA = 32 ("128x8-skew32").  Not kept: 256 rows with SA = 32 (1-7 points lower), tile rows
# in bands of 4 per strip (so that the blocks sharing a B line run together: 0.7-1.8 lower),
# each lane's two consecutive window elements in one 8-byte store (0.3-0.5 lower with SA =
# 8, 1.1-8 with 32).  Nsight Compute (benchmarks/ncu_transpose.py): the skew kernel's DRAM
# traffic is the ideal's at odd sizes (16385^2: 1.074 GB read, 1.058 written, against 1.141
# / 1.091 for the 64 x 64 tile there); its L2 reads are 2.29 GB (1.61 on 16384^2).  Also
# not kept: A read with 8-byte loads at any pitch (62 columns a block, each row's 64-float
# window on the 8-byte grid, SA = 32): 4097^2 93.6 against 100.4, 8193^2 92.7 / 95.1,
# 12289^2 91.4 / 93.0, 16385^2 91.2 / 92.4, 6001 x 10003 92.3 / 94.2, 16384^2 93.7 / 94.7.
# Thirty-fifth session (transpose_ab, 3 rounds, H100; commit "transpose_strip", reverted):
# the rows above a 128 x 32 tile carried in shared memory instead of read again, each block
# walking down a strip of A over a segment of tile rows (the next tile's loads in flight
# during the stores; 4 blocks an SM), against 128x8-skew32: 4097^2 82.0 / 98.9, 8193^2
# 77.9 / 94.7, 12289^2 74.0 / 93.3, 14337^2 72.2 / 92.7, 16385^2 72.8 / 92.6, 6001 x 10003
# 69.4 / 93.6, 16384^2 85.0 / 94.2; shorter segments (8 blocks an SM) 83.6 / 74.6 at 8193^2
# / 16385^2: the blocks of one tile row running together (all of A's rows in a band read,
# B's windows written, at once) matter more than the rows read twice from L2.
# Thirty-sixth session (transpose_ab, 3 rounds, H100; not committed): the 128 x 32 skewed
# tile with A's rows brought into shared memory by the SM's bulk-copy engine (cp.async.bulk,
# each row as the 16-byte chunks covering it, 128 or 144 bytes, one mbarrier per block, slots
# placed so the shifted column reads hit 32 banks) instead of 4-byte loads, with 8 / 6
# blocks an SM, against 128x8-skew32: 14337^2 82.9 / 78.9 / 92.2, 16385^2 83.2 / 78.0 /
# 92.4, 6001 x 10003 81.3 / 75.4 / 93.1, 16384^2 88.0 / 80.8 / 94.2 (correct: the GPU
# tests passed): ~160 small copies per block do not keep enough bytes in flight.  Then four
# 2-D tensor copies (TMA) per block instead: A's rows of one residue class mod 4 have a
# pitch of 4 lds floats, a multiple of 16 bytes, so each class is a tensor map (base aligned
# down to 16 bytes); a box whose first element is not on a 16-byte chunk faults (illegal
# instruction, though the map encodes), so each box is 36 wide from the chunk below: 8193^2
# 90.6 / 92.3 (6 blocks an SM / 128x8-skew32), 12289^2 90.3 / 91.9, 16385^2 89.8 / 92.0,
# 6001 x 10003 88.0 / 91.5, 16384^2 89.6 / 93.9, 4097^2 75.8 / 93.0 (8 blocks an SM: 68-78).
# Below 4 tiles of 64 x 64 per SM the 32-wide tile keeps the SMs busy.
DEFAULT = "64x4-pair"
OFF_GRID = "32x8-pf256"
OFF_GRID_EL = "32x8-pf256-el"   # the same where B's row pitch is not a multiple of 128 bytes
OFF_SECTOR = "128x8-skew32"     # where B's pitch or dst is off the 32-byte sector grid
EVICT_LAST_STORES = True        # False: OFF_GRID there too (A/B switch; pick_variant caches)
SMALL = "32x8"
SMALL_TILES_PER_SM = 4
_NUM_SMS_GUESS = 132
_COPY_THREADS = 256   # copy2d's block size (its __launch_bounds__)
_MAX_GRID_Y = 65535


def _tiled_name(t):
    if t.SKEW:
        return f"transpose_skew<{t.TILE},{t.PF},{t.SKEW}>"   # TILE A rows x 32 A columns
    return (f"transpose_pair<{t.BY}>" if t.PAIR
            else f"transpose_tiled<{t.TILE},{t.BY},{t.PF},{str(t.EL).lower()}>")


def _unpaired(t):
    """The 4-byte-access tile a PAIR variant falls back to on odd strides or pointers."""
    return t._replace(PAIR=False)


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(dict.fromkeys(
    n for t in VARIANTS.values() for n in (_tiled_name(t), _tiled_name(_unpaired(t))))) \
    + ("copy2d",)


def num_tiles(rows, cols, variant):
    t = VARIANTS[variant]
    return -(-rows // t.TILE) * -(-cols // (32 if t.SKEW else t.TILE))


@functools.lru_cache(maxsize=1024)
def pick_variant(rows, cols, lds=None, ldd=None, aligned=True, dst_sector=True):
    """The 32-wide tile for small matrices (fewer than a few 64-wide tiles per SM); the
    sector-aligned 128 x 32 tile where B's rows do not start on 32-byte sectors (OFF_SECTOR);
    the 32-wide tile where a row pitch is not a multiple of 256 bytes (with evict-last
    stores where B's is not a multiple of 128: OFF_GRID_EL); the 64-wide float2 tile
    otherwise.  lds, ldd: leading dimensions (default: contiguous, cols and rows); aligned:
    both pointers 256-byte aligned; dst_sector: dst 32-byte aligned."""
    tiles = num_tiles(rows, cols, DEFAULT)
    if tiles < SMALL_TILES_PER_SM * _NUM_SMS_GUESS:
        return SMALL
    lds, ldd = cols if lds is None else lds, rows if ldd is None else ldd
    if ldd % 8 or not dst_sector:   # B's rows off the 32-byte sector grid
        return OFF_SECTOR
    if aligned and lds % 64 == 0 and ldd % 64 == 0:
        return DEFAULT
    # B's rows not on 128-byte lines: each tile's row segment shares lines with its neighbours'
    return OFF_GRID_EL if EVICT_LAST_STORES and not (aligned and ldd % 32 == 0) else OFF_GRID


# The kernels' parameters (rows, cols, src, lds, dst, ldd[, dst's sector offset]), for Launcher
_ARGS = "iiPqPq"


@functools.lru_cache(maxsize=1024)
def _transpose_launch(device_id, rows, cols, variant, pairs_ok):
    """(launcher, grid, block, skew) of one transpose launch; memoised: small transposes are
    bound by the host, so the launch path stays short."""
    t = VARIANTS[variant]
    if not pairs_ok:
        t = _unpaired(t)
    tiles = num_tiles(rows, cols, variant)
    if tiles >= 2**31:
        raise ValueError("matrix too large for one launch")
    kernel = Launcher(get_kernel(FAMILY, _tiled_name(t)), _ARGS + ("I" if t.SKEW else ""))
    return kernel, (tiles, 1, 1), (32, t.BY, 1), t.SKEW


@functools.lru_cache(maxsize=1024)
def _copy_launch(device_id, rows, cols):
    grid = (-(-cols // _COPY_THREADS), min(rows, _MAX_GRID_Y), 1)
    return Launcher(get_kernel(FAMILY, "copy2d"), _ARGS), grid, (_COPY_THREADS, 1, 1)


def transpose_ptr(rows, cols, sp, lds, dp, ldd):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T for float32
    device pointers sp, dp on the current device and stream, the variant as transpose_into
    picks it.  No validation and no views (the LU's steps address blocks by pointer);
    rows, cols >= 1."""
    _launch_ptr(rows, cols, sp, lds, dp, ldd)


def _launch_ptr(rows, cols, sp, lds, dp, ldd, variant=None):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T at device
    pointers sp, dp; variant None: pick_variant's."""
    either = sp | dp
    kernel, grid, block, skew = _plan(_device_id(), rows, cols, lds, ldd, either % 256 == 0,
                                      dp % 32 == 0, either % 8 == 0, variant)
    if skew:   # dst's offset in floats from a 128-byte line
        kernel(grid, block, rows, cols, sp, lds, dp, ldd, dp // 4 % 32)
    else:
        kernel(grid, block, rows, cols, sp, lds, dp, ldd)


@functools.lru_cache(maxsize=1024)
def _plan(device_id, rows, cols, lds, ldd, aligned, dst_sector, ptr8, variant):
    """_transpose_launch's tuple for one problem, given the pointers' alignment (both on
    256 bytes, dst on 32, both on 8) and the variant (None: pick_variant's): one memoised
    lookup on the launch path."""
    if variant is None:
        variant = pick_variant(rows, cols, lds, ldd, aligned, dst_sector)
    # 8-byte accesses need even leading dimensions and 8-byte aligned pointers
    return _transpose_launch(device_id, rows, cols, variant, (lds | ldd) % 2 == 0 and ptr8)


def _launch_copy(rows, cols, src, lds, dst, ldd):
    """dst[r, c] = src[r, c] for two row-major views with leading dimensions lds, ldd."""
    kernel, grid, block = _copy_launch(_device_id(), rows, cols)
    kernel(grid, block, rows, cols, src.data.ptr, lds, dst.data.ptr, ldd)


def _device_id():
    return cupy().cuda.runtime.getDevice()


def transpose_into(src, dst, variant=None):
    """dst = src.T, on the current device and stream; returns dst.

    src (m x n) and dst (n x m) are float32 CuPy arrays that must not overlap.  Row- and
    column-major views with any leading dimension are used in place; src with no unit stride
    is copied once, dst with no unit stride is written through one temporary.
    """
    m, n = src.shape
    if dst.shape != (n, m):
        raise ValueError(f"dst has shape {dst.shape}, expected {(n, m)}")
    if not (_arrays.is_float32(src.dtype) and _arrays.is_float32(dst.dtype)):
        raise TypeError("transpose_into takes float32 arrays")
    if max(m, n) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if m == 0 or n == 0:
        return dst
    if variant is not None and variant not in VARIANTS:
        raise ValueError(f"unknown transpose variant {variant!r}; choose from {list(VARIANTS)}")
    if src.strides == (4 * n, 4) and dst.strides == (4 * m, 4):   # both C-contiguous: the
        _launch_ptr(m, n, src.data.ptr, n, dst.data.ptr, m, variant)  # common case, fewest steps
        return dst
    d_layout = _arrays.matrix_layout(dst)
    if d_layout is None:  # odd dst strides: transpose into a temporary, then one copy
        tmp = cupy().empty((n, m), dtype=np.float32)
        transpose_into(src, tmp, variant)
        dst[...] = tmp
        return dst
    src, (lds, s_row) = _arrays.as_matrix(src, "src")
    ldd, d_row = d_layout
    if s_row and d_row:            # the tiled transpose proper
        rows, cols = m, n
    elif not s_row and not d_row:  # src.T (n x m) and dst.T (m x n) are row-major: dst.T = (src.T)^T
        rows, cols = n, m
    elif not s_row:                # column-major src: src.T is row-major n x m, like dst: copy
        _launch_copy(n, m, src, lds, dst, ldd)
        return dst
    else:                          # column-major dst: dst.T is row-major m x n, like src: copy
        _launch_copy(m, n, src, lds, dst, ldd)
        return dst
    _launch_ptr(rows, cols, src.data.ptr, lds, dst.data.ptr, ldd, variant)
    return dst


def transpose(a, out=None):
    """Transpose of a 2-D single-precision array on the GPU, as a C-ordered array.

    Parameters
    ----------
    a : (m, n) array_like
        NumPy/CuPy array or torch tensor; float32, or a type that converts to float32 exactly
        (float16, bfloat16, small integers, bool).  float64 raises TypeError.  Views with one
        unit stride (row- or column-major blocks of a larger matrix) are read in place, other
        strides are copied once.
    out : (n, m) array, optional
        Same kind as `a`, float32, not overlapping `a`.  CuPy/torch CUDA outputs are written in
        place (any view with one unit stride; other views through one temporary); NumPy
        outputs are filled from the device result.

    Returns
    -------
    (n, m) array
        `out` if given, else a new C-ordered array of `a`'s kind (NumPy in, NumPy out; CuPy
        in, CuPy out on the same device, on the caller's current stream; torch in, torch out
        on torch's current stream).

    Raises
    ------
    ValueError
        `a` not 2-D, or `out` of the wrong shape.
    TypeError
        A dtype that does not convert exactly to float32, `out` not float32, or inputs of
        mixed kinds.
    CudaUnavailableError
        No CuPy or no CUDA device.

    See Also
    --------
    numpy.transpose, numpy.ascontiguousarray

    Notes
    -----
    Unlike ``a.T``, which is a view, this moves the data: the kernel (kernels/transpose.cu)
    goes through 64 x 64 shared-memory tiles with 8-byte accesses (32 x 32 tiles with 4-byte
    accesses for small matrices and for row pitches that are not multiples of 256 bytes;
    128 x 32 tiles that write each result row in whole 128-byte lines where those rows do
    not start on a 32-byte sector, e.g. odd sizes) so that reads and writes are both coalesced. It is
    bandwidth-bound: ``8*m*n`` bytes are read and written. A column-major `a` transposes to a
    C-ordered result by a plain strided copy.
    """
    if _arrays.plain_cupy(a, out) and a.ndim == 2:
        m, n = a.shape   # the common GPU call, on the shortest host path (errors: below)
        if out is None:
            return transpose_into(a, cupy().empty((n, m), dtype=np.float32))
        if out.shape == (n, m):
            return transpose_into(a, out)
    kind = _arrays.common_kind(a, out)
    m, n = _arrays.check_matrix(a, "a")
    if out is not None:
        if tuple(out.shape) != (n, m):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(n, m)}")
        bf16 = kind.startswith("torch") and str(out.dtype).endswith("bfloat16")
        if bf16 or not _arrays.is_float32(_arrays.dtype_of(out)):
            raise TypeError(f"out must be float32, got {out.dtype}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, out))):
        A = _arrays.to_device(a, kind, "a")
        if out is None:
            res = cp.empty((n, m), dtype=np.float32)
            transpose_into(A, res)
            return _arrays.from_device(res, kind)
        if kind in ("cupy", "torch"):
            transpose_into(A, _arrays.to_device(out, kind, "out"))
        else:
            res = transpose_into(A, cp.empty((n, m), dtype=np.float32))
            if kind == "torch_cpu":
                out.copy_(_arrays.from_device(res, kind))
            else:
                np.copyto(out, cp.asnumpy(res))
        return out
