"""Transpose: launch wrappers for kernels/transpose.cu and the public transpose."""

import functools
from collections import namedtuple

import numpy as np

from . import _arrays
from ._backend import cupy
from ._kernels import get_kernel

FAMILY = "transpose"
# One source of truth for the tile shapes; the kernels static_assert their consistency.
# TILE x TILE elements per block, 32 x BY threads, DIAG: diagonal block order; KIND "tiled" is
# transpose_tiled (one tile per block, 4-byte accesses), "vec" transpose_vec (persistent grid,
# 16-byte accesses, cp.async double buffer, always 64 x 64 and 256 threads).
Tile = namedtuple("Tile", "TILE BY DIAG KIND", defaults=("tiled",))
VARIANTS = {
    "32x8": Tile(32, 8, False),        # the seed kernel (baseline)
    "32x8-diag": Tile(32, 8, True),
    "64x8": Tile(64, 8, False),
    "64x8-diag": Tile(64, 8, True),
    "64x16-diag": Tile(64, 16, True),
    "64v4-persist": Tile(64, 8, False, "vec"),
}
BASELINE = "32x8"
# H100 measurements: plain 64x8 beat every diagonal variant at every size (no partition camping
# on Hopper), so it is the default; 64v4-persist is the candidate to replace it once timed.
DEFAULT = "64x8"
SMALL = "32x8"
VEC_BLOCKS_PER_SM = 4   # TRANSPOSE_VEC_BLOCKS_PER_SM in the kernel (its __launch_bounds__)
_NUM_SMS_GUESS = 132
_COPY_THREADS = 256   # copy2d's block size (its __launch_bounds__)
_MAX_GRID_Y = 65535


def _tiled_name(t):
    if t.KIND == "vec":
        return f"transpose_vec<{32 * t.BY}>"
    return f"transpose_tiled<{t.TILE},{t.BY},{str(t.DIAG).lower()}>"


# Every kernel this module can launch (the nvcc CI test compiles each one for sm_90).
KERNEL_NAMES = tuple(dict.fromkeys(_tiled_name(t) for t in VARIANTS.values())) + ("copy2d",)

_kernel_cache = {}


def _kernel(name):
    """get_kernel for the current device, memoised (the launch path is short for small sizes)."""
    key = (cupy().cuda.get_device_id(), name)
    k = _kernel_cache.get(key)
    if k is None:
        k = _kernel_cache[key] = get_kernel(FAMILY, name)
    return k


@functools.lru_cache(maxsize=None)
def _sm_count(device_id):
    return cupy().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


def vec_grid(tiles, sm_count):
    """Blocks of the persistent transpose_vec: one resident wave, never more than the tiles."""
    return max(1, min(tiles, VEC_BLOCKS_PER_SM * sm_count))


def pick_variant(rows, cols):
    """The 64-wide tile once it gives a few blocks per SM, the 32-wide one below that."""
    t = VARIANTS[DEFAULT]
    tiles = -(-rows // t.TILE) * -(-cols // t.TILE)
    return DEFAULT if tiles >= 4 * _NUM_SMS_GUESS else SMALL


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
    t = VARIANTS[variant]
    tiles = -(-rows // t.TILE) * -(-cols // t.TILE)
    if tiles >= 2**31:
        raise ValueError("matrix too large for one launch")
    kernel = _kernel(_tiled_name(t))
    if t.KIND == "vec":   # persistent: one resident wave walks all the tiles
        grid, block = vec_grid(tiles, _sm_count(cupy().cuda.get_device_id())), (32 * t.BY,)
    else:
        grid, block = tiles, (32, t.BY)
    kernel((grid,), block,
           (np.int32(rows), np.int32(cols), src, np.int64(lds), dst, np.int64(ldd)))


def _launch_copy(rows, cols, src, lds, dst, ldd):
    """dst[r, c] = src[r, c] for two row-major views with leading dimensions lds, ldd."""
    kernel = _kernel("copy2d")
    grid = (-(-cols // _COPY_THREADS), min(rows, _MAX_GRID_Y))
    kernel(grid, (_COPY_THREADS,),
           (np.int32(rows), np.int32(cols), src, np.int64(lds), dst, np.int64(ldd)))


def transpose_into(src, dst, variant=None):
    """dst = src.T, on the current device and stream; returns dst.

    src (m x n) and dst (n x m) are float32 CuPy arrays that must not overlap.  Row- and
    column-major views with any leading dimension are used in place; src with no unit stride
    is copied once, dst with no unit stride is written through one temporary.
    """
    m, n = src.shape
    if dst.shape != (n, m):
        raise ValueError(f"dst has shape {dst.shape}, expected {(n, m)}")
    if src.dtype != np.float32 or dst.dtype != np.float32:
        raise TypeError("transpose_into takes float32 arrays")
    if max(m, n) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    if m == 0 or n == 0:
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
    if variant is None:
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
