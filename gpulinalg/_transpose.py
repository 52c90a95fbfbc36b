"""Transpose: launch wrappers for kernels/transpose.cu and the public transpose."""

import functools
from collections import namedtuple

import numpy as np

from . import _arrays
from ._backend import cupy
from ._kernels import get_kernel

FAMILY = "transpose"
# One source of truth for the tile shapes; the kernels static_assert their consistency.
# TILE x TC elements of A per block (TILE rows, TC columns; TC None means a square tile),
# 32 x BY threads, DIAG: diagonal block order.  All are transpose_tiled (one tile per block,
# 4-byte accesses, every load of a thread in flight before the shared stores).
Tile = namedtuple("Tile", "TILE BY DIAG TC STREAM", defaults=(None, False))
VARIANTS = {
    "32x8": Tile(32, 8, False),        # the seed kernel (baseline): 4 elements per thread
    "32x8-diag": Tile(32, 8, True),
    "64x8": Tile(64, 8, False),        # 16 elements per thread, 8 blocks (16.6 KiB) per SM
    "64x8-diag": Tile(64, 8, True),
    "64x16-diag": Tile(64, 16, True),
    "64x4": Tile(64, 4, False),        # 32 elements per thread on 128 threads, 13 blocks/SM
    "64x128-by8": Tile(64, 8, False, 128),   # 32 per thread, 512-byte A row segments
    "128x64-by8": Tile(128, 8, False, 64),   # 32 per thread, 512-byte B row segments
    "32x8-cs": Tile(32, 8, False, None, True),    # streaming (evict-first) loads and stores
    "64x8-cs": Tile(64, 8, False, None, True),
    "64x4-cs": Tile(64, 4, False, None, True),
}
BASELINE = "32x8"
# H100 measurements (call timing): plain row-order tiles beat every diagonal variant at every
# size (no partition camping on Hopper) and the persistent 16-byte cp.async kernel (removed).
# Below 4 tiles of 64 x 64 per SM the 32-wide tile keeps the SMs busy.
# H100, burst timing (gpulinalg-bench transpose --variants ..., two runs, 2026-11-21): with
# both dimensions multiples of 64 the 64 x 64 tile on 128 threads (64x4) ran 95.6-99.0% of
# copy (4096-16384); with a dimension off the 64 grid (partial 64-wide edge tiles, row pitches
# that are not multiples of 256 bytes) the 32 x 32 seed tile did best: 4000^2 96.2-96.9%,
# 5000^2 97.8%, 6000 x 10000 94.7-94.8%, 10000^2 92.5%, 12000^2 93.2% (64x8: 95.5, 96.0, 92.6,
# 91.3, 92.0).  The streaming-hint variants (-cs) were within noise on the grid and 2-5 points
# slower off it.
DEFAULT = "64x4"
OFF_GRID = "32x8"
SMALL = "32x8"
SMALL_TILES_PER_SM = 4
_NUM_SMS_GUESS = 132
_COPY_THREADS = 256   # copy2d's block size (its __launch_bounds__)
_MAX_GRID_Y = 65535


def tile_cols(t):
    """Columns of A per tile (TC, or TILE for a square tile)."""
    return t.TC or t.TILE


def _tiled_name(t):
    tc = "" if t.TC in (None, t.TILE) and not t.STREAM else f",{tile_cols(t)}"
    stream = ",true" if t.STREAM else ""
    return f"transpose_tiled<{t.TILE},{t.BY},{str(t.DIAG).lower()}{tc}{stream}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(dict.fromkeys(_tiled_name(t) for t in VARIANTS.values())) + ("copy2d",)


def num_tiles(rows, cols, variant):
    t = VARIANTS[variant]
    return -(-rows // t.TILE) * -(-cols // tile_cols(t))


@functools.lru_cache(maxsize=1024)
def pick_variant(rows, cols):
    """The 32-wide tile for small matrices (fewer than a few 64-wide tiles per SM) and for
    dimensions off the 64 grid; the 64-wide tile otherwise (see OFF_GRID)."""
    tiles = num_tiles(rows, cols, DEFAULT)
    if tiles < SMALL_TILES_PER_SM * _NUM_SMS_GUESS:
        return SMALL
    return DEFAULT if rows % 64 == 0 and cols % 64 == 0 else OFF_GRID


@functools.lru_cache(maxsize=1024)
def _transpose_launch(device_id, rows, cols, variant):
    """(kernel, grid, block) of one transpose launch; memoised: the launch path stays short."""
    t = VARIANTS[variant]
    tiles = num_tiles(rows, cols, variant)
    if tiles >= 2**31:
        raise ValueError("matrix too large for one launch")
    return get_kernel(FAMILY, _tiled_name(t)), (tiles,), (32, t.BY)


@functools.lru_cache(maxsize=1024)
def _copy_launch(device_id, rows, cols):
    grid = (-(-cols // _COPY_THREADS), min(rows, _MAX_GRID_Y))
    return get_kernel(FAMILY, "copy2d"), grid, (_COPY_THREADS,)


def block_order(gx, gy, diag):
    """(bx, by) tile coordinates of linear block ids 0..gx*gy-1, as the kernel computes them."""
    bid = np.arange(gx * gy, dtype=np.int64)
    if diag:
        by = bid % gy
        bx = (bid // gy + by) % gx
    else:
        bx, by = bid % gx, bid // gx
    return bx, by


def _launch_transpose(rows, cols, src, lds, dst, ldd, variant):
    """dst (cols x rows, row-major, ldd) = src (rows x cols, row-major, lds)^T."""
    kernel, grid, block = _transpose_launch(_device_id(), rows, cols, variant)
    kernel(grid, block, (np.int32(rows), np.int32(cols), src, np.int64(lds), dst, np.int64(ldd)))


def _launch_copy(rows, cols, src, lds, dst, ldd):
    """dst[r, c] = src[r, c] for two row-major views with leading dimensions lds, ldd."""
    kernel, grid, block = _copy_launch(_device_id(), rows, cols)
    kernel(grid, block, (np.int32(rows), np.int32(cols), src, np.int64(lds), dst, np.int64(ldd)))


def _device_id():
    return cupy().cuda.runtime.getDevice()


def transpose_into(src, dst, variant=None):
    """dst = src.T, on the current device and stream; returns dst.

    src (m x n) and dst (n x m) are float32 CuPy arrays that must not overlap.  Row- and
    column-major views with any leading dimension are used in place; src with no unit stride
    is copied once, dst with no unit stride is written through one temporary.
    """
    m, n = src.shape
    auto = variant is None
    if dst.shape != (n, m):
        raise ValueError(f"dst has shape {dst.shape}, expected {(n, m)}")
    if src.dtype != np.float32 or dst.dtype != np.float32:
        raise TypeError("transpose_into takes float32 arrays")
    if max(m, n) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if m == 0 or n == 0:
        return dst
    if variant is None:
        variant = pick_variant(m, n)   # memoised per shape
    elif variant not in VARIANTS:
        raise ValueError(f"unknown transpose variant {variant!r}; choose from {list(VARIANTS)}")
    if src.flags.c_contiguous and dst.flags.c_contiguous:   # the common case, fewest steps
        _launch_transpose(m, n, src, n, dst, m, variant)
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
    if auto and rows != m:   # both column-major: choose for the row-major problem
        variant = pick_variant(rows, cols)
    _launch_transpose(rows, cols, src, lds, dst, ldd, variant)
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
    goes through 64 x 64 shared-memory tiles (32 x 32 for small matrices) so that reads and
    writes are both coalesced.  It is bandwidth-bound:
    ``8*m*n`` bytes are read and written.  A column-major `a` transposes to a C-ordered result
    by a plain strided copy.
    """
    kind = _arrays.common_kind(a, out)
    m, n = _arrays.check_matrix(a, "a")
    if out is not None:
        if tuple(out.shape) != (n, m):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(n, m)}")
        if _arrays.dtype_of(out) != np.float32 or str(out.dtype).endswith("bfloat16"):
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
