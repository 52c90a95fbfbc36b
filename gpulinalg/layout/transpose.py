"""Transpose (kernels/transpose.cu): the tile variants, the tile pick and the launchers.

`transpose_into` takes CuPy arrays (row- or column-major views, any leading dimension);
`transpose_ptr` takes device pointers, for the LU's steps.  The pick reads the Tuning table
(gpulinalg/tuning.py: transpose_*) and the device's SM count.  The public `transpose` is in
gpulinalg/blas.py.
"""

import functools
from collections import namedtuple

import numpy as np

from .. import tuning
from ..core import arrays as _arrays
from ..core import device
from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel

FAMILY = "transpose"
# One source of truth for the tile shapes; the kernels static_assert their consistency.
# TILE x TILE elements of A per block (SKEW: TILE A rows x 32 A columns), 32 x BY threads.
# PAIR: transpose_pair (8-byte accesses, 64 x 64 only), launched where both leading
# dimensions are even and both pointers 8-byte aligned, else the same tile with 4-byte
# accesses (transpose_tiled<64,BY>).  PF: the L2 fill size of A's loads (0 or 256 bytes); EL:
# B stored with an L2 evict-last policy; SKEW: transpose_skew, each B row written in whole
# SKEW-float units.
Tile = namedtuple("Tile", "TILE BY PAIR PF EL SKEW", defaults=(False, 0, False, 0))
VARIANTS = {
    "32x8": Tile(32, 8),                                # 4 elements per thread
    "64x4-pair": Tile(64, 4, True),                     # 32 per thread, float2 accesses
    "32x8-pf256": Tile(32, 8, False, 256),              # 32x8 with the 256-byte L2 fill
    "32x8-pf256-el": Tile(32, 8, False, 256, True),     # ... and evict-last stores of B
    "128x8-skew32": Tile(128, 8, False, 256, False, 32),   # B rows in whole 128-byte lines
}
BASELINE = "32x8"     # the first tile: the benchmark's baseline (also the small-matrix tile)
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


def pick_variant(rows, cols, lds=None, ldd=None, aligned=True, dst_sector=True, sms=None,
                 table=None):
    """The tile for a rows x cols transpose, from the Tuning table `table` (default: the one
    in force) and `sms` SMs (default: the current device's).

    transpose_small for small matrices (fewer than transpose_small_tiles_per_sm tiles of
    transpose_variant per SM); transpose_off_sector where B's rows do not start on 32-byte
    sectors; transpose_variant (the 64-wide float2 tile) where both row pitches are multiples
    of 256 bytes and both pointers 256-byte aligned; else transpose_off_grid, or
    transpose_off_grid_el where B's rows are not on 128-byte lines.  lds, ldd: leading
    dimensions (default: contiguous, cols and rows); aligned: both pointers 256-byte aligned;
    dst_sector: dst 32-byte aligned."""
    sms = device.sm_count() if sms is None else sms
    table = tuning.current() if table is None else table
    tiles = num_tiles(rows, cols, table.transpose_variant)
    if tiles < table.transpose_small_tiles_per_sm * sms:
        return table.transpose_small
    lds, ldd = cols if lds is None else lds, rows if ldd is None else ldd
    if ldd % 8 or not dst_sector:   # B's rows off the 32-byte sector grid
        return table.transpose_off_sector
    if aligned and lds % 64 == 0 and ldd % 64 == 0:
        return table.transpose_variant
    # B's rows not on 128-byte lines: each tile's row segment shares lines with its neighbours'
    if not (aligned and ldd % 32 == 0):
        return table.transpose_off_grid_el
    return table.transpose_off_grid


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


def transpose_ptr(rows, cols, sp, lds, dp, ldd, table=None):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T for float32
    device pointers sp, dp on the current device and stream, the variant as transpose_into
    picks it (under `table`, default the Tuning table in force: pass it on a hot path).  No
    validation and no views (the LU's steps address blocks by pointer); rows, cols >= 1."""
    _launch_ptr(rows, cols, sp, lds, dp, ldd, None, table)


def _launch_ptr(rows, cols, sp, lds, dp, ldd, variant=None, table=None):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T at device
    pointers sp, dp; variant None: pick_variant's."""
    dev = _device_id()
    either = sp | dp
    plan = _plans(dev, tuning.current(dev) if table is None else table)
    kernel, grid, block, skew = plan(rows, cols, lds, ldd, either % 256 == 0, dp % 32 == 0,
                                     either % 8 == 0, variant)
    if skew:   # dst's offset in floats from a 128-byte line
        kernel(grid, block, rows, cols, sp, lds, dp, ldd, dp // 4 % 32)
    else:
        kernel(grid, block, rows, cols, sp, lds, dp, ldd)


_PLANS = {}          # (device, id(table)) -> (table, memoised plan of that device and table)
_PLANS_KEPT = 8


def _plans(device_id, table):
    """The memoised launch plans of one device under one Tuning table: one lookup on the
    launch path (small transposes are bound by the host).  The entry holds the table, so its
    id names no other table while the entry exists."""
    hit = _PLANS.get((device_id, id(table)))
    if hit is None:
        while len(_PLANS) >= _PLANS_KEPT:
            _PLANS.pop(next(iter(_PLANS)))
        plan = functools.lru_cache(maxsize=1024)(functools.partial(_plan, device_id, table))
        hit = _PLANS[device_id, id(table)] = (table, plan)
    return hit[1]


def _plan(device_id, table, rows, cols, lds, ldd, aligned, dst_sector, ptr8, variant):
    """_transpose_launch's tuple for one problem, given the pointers' alignment (both on
    256 bytes, dst on 32, both on 8) and the variant (None: pick_variant's under `table`)."""
    if variant is None:
        variant = pick_variant(rows, cols, lds, ldd, aligned, dst_sector,
                               device.sm_count(device_id), table)
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
    is copied once, dst with no unit stride is written through one temporary.  variant None:
    pick_variant's, else one of VARIANTS.
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
    elif not s_row and not d_row:  # src.T (n x m), dst.T (m x n) row-major: dst.T = (src.T)^T
        rows, cols = n, m
    elif not s_row:                # column-major src: src.T is row-major n x m, like dst: copy
        _launch_copy(n, m, src, lds, dst, ldd)
        return dst
    else:                          # column-major dst: dst.T is row-major m x n, like src: copy
        _launch_copy(m, n, src, lds, dst, ldd)
        return dst
    _launch_ptr(rows, cols, src.data.ptr, lds, dst.data.ptr, ldd, variant)
    return dst
