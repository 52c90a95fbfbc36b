"""Transpose (kernels/transpose.cu): the tile variants, the tile pick and the launchers, for
float32 and float64 (the Element, gpulinalg/core/element.py, picks the kernels'
instantiation).

`transpose_into` takes CuPy arrays (row- or column-major views, any leading dimension; the
element type is their dtype); `transpose_ptr` takes device pointers and the Element, for the
LU's steps.  The pick reads the Tuning table of the element type (gpulinalg/tuning.py:
transpose_*) and the device's SM count.  The public `transpose` is in gpulinalg/blas.py.
"""

import functools
from collections import namedtuple

from .. import tuning
from ..core import arrays as _arrays
from ..core import device
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel

FAMILY = "transpose"
# One source of truth for the tile shapes, in elements for every element type; the kernels
# static_assert their consistency.  TILE x TILE elements of A per block (SKEW: TILE A rows x
# 32 A columns), 32 x BY threads.  PAIR: transpose_pair (two elements per access: float2 or
# double2; 64 x 64 only), launched where both leading dimensions are even and both pointers
# aligned to two elements, else the same tile with one-element accesses
# (transpose_tiled<T,64,BY>).  PF: the L2 fill size of A's loads (0 or 256 bytes); EL: B
# stored with an L2 evict-last policy; SKEW: transpose_skew, each B row written in whole
# SKEW-element units.
Tile = namedtuple("Tile", "TILE BY PAIR PF EL SKEW", defaults=(False, 0, False, 0))
VARIANTS = {
    "32x8": Tile(32, 8),                                # 4 elements per thread
    "64x4-pair": Tile(64, 4, True),                     # 32 per thread, pair accesses
    "32x8-pf256": Tile(32, 8, False, 256),              # 32x8 with the 256-byte L2 fill
    "32x8-pf256-el": Tile(32, 8, False, 256, True),     # ... and evict-last stores of B
    "128x8-skew32": Tile(128, 8, False, 256, False, 32),   # B rows in whole 128-byte lines
}
BASELINE = "32x8"     # the first tile: the benchmark's baseline (also the small-matrix tile)
_COPY_THREADS = 256   # copy2d's block size (its __launch_bounds__)
_MAX_GRID_Y = 65535
ELEMENTS = REAL_KERNEL  # the element types the kernels are instantiated for


def _tiled_name(t, ctype="float"):
    if t.SKEW:   # TILE A rows x 32 A columns
        return f"transpose_skew<{ctype},{t.TILE},{t.PF},{t.SKEW}>"
    return (f"transpose_pair<{ctype},{t.BY}>" if t.PAIR
            else f"transpose_tiled<{ctype},{t.TILE},{t.BY},{t.PF},{str(t.EL).lower()}>")


def _copy_name(ctype="float"):
    return f"copy2d<{ctype}>"


def _unpaired(t):
    """The one-element-access tile a PAIR variant falls back to on odd strides or pointers."""
    return t._replace(PAIR=False)


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90): every
# variant and its unpaired fallback, and copy2d, for each element type.
KERNEL_NAMES = tuple(dict.fromkeys(
    n for e in ELEMENTS for t in VARIANTS.values()
    for n in (_tiled_name(t, e.ctype), _tiled_name(_unpaired(t), e.ctype)))) \
    + tuple(_copy_name(e.ctype) for e in ELEMENTS)


def num_tiles(rows, cols, variant):
    t = VARIANTS[variant]
    return -(-rows // t.TILE) * -(-cols // (32 if t.SKEW else t.TILE))


def pick_variant(rows, cols, lds=None, ldd=None, aligned=True, dst_sector=True, sms=None,
                 table=None, element=F32):
    """The tile for a rows x cols transpose of `element`s, from the Tuning table `table`
    (default: the one in force for `element`) and `sms` SMs (default: the current device's).

    transpose_small for small matrices (fewer than transpose_small_tiles_per_sm tiles of
    transpose_variant per SM); transpose_off_sector where B's rows do not start on 32-byte
    sectors; transpose_variant (the 64-wide pair tile) where both row pitches are multiples
    of 256 bytes and both pointers 256-byte aligned; else transpose_off_grid, or
    transpose_off_grid_el where B's rows are not on 128-byte lines.  lds, ldd: leading
    dimensions in elements (default: contiguous, cols and rows); aligned: both pointers
    256-byte aligned; dst_sector: dst 32-byte aligned."""
    sms = device.sm_count() if sms is None else sms
    table = tuning.current(element=element) if table is None else table
    tiles = num_tiles(rows, cols, table.transpose_variant)
    if tiles < table.transpose_small_tiles_per_sm * sms:
        return table.transpose_small
    lds, ldd = cols if lds is None else lds, rows if ldd is None else ldd
    pitch_s, pitch_d = lds * element.itemsize, ldd * element.itemsize   # row pitches, bytes
    if pitch_d % 32 or not dst_sector:   # B's rows off the 32-byte sector grid
        return table.transpose_off_sector
    if aligned and pitch_s % 256 == 0 and pitch_d % 256 == 0:
        return table.transpose_variant
    # B's rows not on 128-byte lines: each tile's row segment shares lines with its neighbours'
    if not (aligned and pitch_d % 128 == 0):
        return table.transpose_off_grid_el
    return table.transpose_off_grid


# The kernels' parameters (rows, cols, src, lds, dst, ldd[, dst's sector offset]), for Launcher
_ARGS = "iiPqPq"


@functools.lru_cache(maxsize=1024)
def _transpose_launch(device_id, rows, cols, variant, pairs_ok, ctype="float"):
    """(launcher, grid, block, skew) of one transpose launch of ctype elements; memoised:
    small transposes are bound by the host, so the launch path stays short."""
    t = VARIANTS[variant]
    if not pairs_ok:
        t = _unpaired(t)
    tiles = num_tiles(rows, cols, variant)
    if tiles >= 2**31:
        raise ValueError("matrix too large for one launch")
    kernel = Launcher(get_kernel(FAMILY, _tiled_name(t, ctype)),
                      _ARGS + ("I" if t.SKEW else ""))
    return kernel, (tiles, 1, 1), (32, t.BY, 1), t.SKEW


@functools.lru_cache(maxsize=1024)
def _copy_launch(device_id, rows, cols, ctype="float"):
    grid = (-(-cols // _COPY_THREADS), min(rows, _MAX_GRID_Y), 1)
    return (Launcher(get_kernel(FAMILY, _copy_name(ctype)), _ARGS), grid,
            (_COPY_THREADS, 1, 1))


def transpose_ptr(rows, cols, sp, lds, dp, ldd, table=None, element=F32):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T for device
    pointers sp, dp to `element`s (F32 or F64; leading dimensions in elements) on the current
    device and stream, the variant as transpose_into picks it (under `table`, default the
    Tuning table in force for `element`: pass it on a hot path).  No validation and no views
    (the LU's steps address blocks by pointer); rows, cols >= 1."""
    _launch_ptr(rows, cols, sp, lds, dp, ldd, None, table, element)


def _launch_ptr(rows, cols, sp, lds, dp, ldd, variant=None, table=None, element=F32):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T at device
    pointers sp, dp of `element`s; variant None: pick_variant's."""
    dev = _device_id()
    either = sp | dp
    size = element.itemsize
    plan = _plans(dev, tuning.current(dev, element=element) if table is None else table,
                  element)
    kernel, grid, block, skew = plan(rows, cols, lds, ldd, either % 256 == 0, dp % 32 == 0,
                                     either % (2 * size) == 0, variant)
    if skew:   # dst's offset in elements (mod 32, a multiple of every SKEW)
        kernel(grid, block, rows, cols, sp, lds, dp, ldd, dp // size % 32)
    else:
        kernel(grid, block, rows, cols, sp, lds, dp, ldd)


_PLANS = {}          # (device, id(table), C type) -> (table, memoised plan of those)
_PLANS_KEPT = 8


def _plans(device_id, table, element=F32):
    """The memoised launch plans of one device under one Tuning table for one element type:
    one lookup on the launch path (small transposes are bound by the host).  The entry holds
    the table, so its id names no other table while the entry exists."""
    key = (device_id, id(table), element.ctype)
    hit = _PLANS.get(key)
    if hit is None:
        while len(_PLANS) >= _PLANS_KEPT:
            _PLANS.pop(next(iter(_PLANS)))
        plan = functools.lru_cache(maxsize=1024)(
            functools.partial(_plan, device_id, table, element))
        hit = _PLANS[key] = (table, plan)
    return hit[1]


def _plan(device_id, table, element, rows, cols, lds, ldd, aligned, dst_sector, ptr_pair,
          variant):
    """_transpose_launch's tuple for one problem, given the pointers' alignment (both on
    256 bytes, dst on 32, both on two elements) and the variant (None: pick_variant's under
    `table`)."""
    if variant is None:
        variant = pick_variant(rows, cols, lds, ldd, aligned, dst_sector,
                               device.sm_count(device_id), table, element)
    # pair accesses (float2, double2) need even leading dimensions and pointers aligned to
    # two elements
    return _transpose_launch(device_id, rows, cols, variant,
                             (lds | ldd) % 2 == 0 and ptr_pair, element.ctype)


def _launch_copy(rows, cols, src, lds, dst, ldd, element=F32):
    """dst[r, c] = src[r, c] for two row-major views with leading dimensions lds, ldd."""
    kernel, grid, block = _copy_launch(_device_id(), rows, cols, element.ctype)
    kernel(grid, block, rows, cols, src.data.ptr, lds, dst.data.ptr, ldd)


def _device_id():
    return cupy().cuda.runtime.getDevice()


def transpose_into(src, dst, variant=None):
    """dst = src.T, on the current device and stream; returns dst.

    src (m x n) and dst (n x m) are CuPy arrays of one dtype, float32 or float64 (the element
    type), that must not overlap.  Row- and column-major views with any leading dimension are
    used in place; src with no unit stride is copied once, dst with no unit stride is written
    through one temporary.  variant None: pick_variant's (the element type's Tuning table),
    else one of VARIANTS.
    """
    m, n = src.shape
    if dst.shape != (n, m):
        raise ValueError(f"dst has shape {dst.shape}, expected {(n, m)}")
    element = exact(src.dtype)
    if element is None or dst.dtype != src.dtype:
        raise TypeError(f"transpose_into takes two float32 or two float64 arrays, got "
                        f"{src.dtype} and {dst.dtype}")
    if max(m, n) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if m == 0 or n == 0:
        return dst
    if variant is not None and variant not in VARIANTS:
        raise ValueError(f"unknown transpose variant {variant!r}; choose from {list(VARIANTS)}")
    size = element.itemsize
    if src.strides == (size * n, size) and dst.strides == (size * m, size):   # both
        # C-contiguous: the common case, fewest steps
        _launch_ptr(m, n, src.data.ptr, n, dst.data.ptr, m, variant, None, element)
        return dst
    d_layout = _arrays.matrix_layout(dst)
    if d_layout is None:  # odd dst strides: transpose into a temporary, then one copy
        tmp = cupy().empty((n, m), dtype=src.dtype)
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
        _launch_copy(n, m, src, lds, dst, ldd, element)
        return dst
    else:                          # column-major dst: dst.T is row-major m x n, like src: copy
        _launch_copy(m, n, src, lds, dst, ldd, element)
        return dst
    _launch_ptr(rows, cols, src.data.ptr, lds, dst.data.ptr, ldd, variant, None, element)
    return dst
