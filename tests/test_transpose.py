"""Transpose: validation, block order, kernel table and launch arguments (CPU); the kernels
against NumPy, float32 and float64, bit for bit (GPU)."""

import dataclasses
import types

import numpy as np
import pytest

from array_helpers import bits, random_bits

import gpulinalg
from gpulinalg import tuning
from gpulinalg.core.element import F32, F64
from gpulinalg.layout import transpose as _transpose

SM90, SMS = tuning.SM90, 132   # the H100's table and SM count: the picks tested on the CPU
SM90_F64 = tuning.SM90_F64
DTYPES = [np.float32, np.float64]

SIZES = [(0, 0), (0, 5), (5, 0), (1, 1), (1, 7), (7, 1), (31, 31), (32, 32), (33, 33),
         (63, 64), (64, 65), (65, 63), (97, 1031), (1031, 97), (127, 129), (2, 300), (300, 3)]


# ---------------------------------------------------------------- CPU

def test_public_name():
    assert hasattr(gpulinalg, "transpose")
    from gpulinalg import blas
    assert gpulinalg.transpose is blas.transpose


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_clear_error_without_gpu():
    with pytest.raises(gpulinalg.CudaUnavailableError):
        gpulinalg.transpose(np.ones((3, 2), np.float32))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_rejects_complex(dtype):
    with pytest.raises(TypeError, match="float32 or float64"):
        gpulinalg.transpose(np.ones((3, 3), dtype))


def test_argument_errors():
    a = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.transpose(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.transpose(np.ones((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="out has shape"):
        gpulinalg.transpose(a, out=np.empty((3, 4), np.float32))
    with pytest.raises(TypeError, match="out must be float32"):
        gpulinalg.transpose(a, out=np.empty((4, 3), np.float64))


def emulate_tiled(a, variant):
    """NumPy model of transpose_tiled: per-block tile reads/writes with the kernel's bounds
    (transpose_pair moves the same tiles, two columns per thread)."""
    t = _transpose.VARIANTS[variant]
    tr = tcols = t.TILE
    rows, cols = a.shape
    out = np.full((cols, rows), np.nan, np.float32)
    gx, gy = -(-cols // tcols), -(-rows // tr)
    for bid in range(gx * gy):
        r0, c0 = bid // gx * tr, bid % gx * tcols
        tile = np.zeros((tr, tcols + 1), np.float32)
        ty, q, tx, p = np.meshgrid(np.arange(t.BY), np.arange(tr // t.BY), np.arange(32),
                                   np.arange(tcols // 32), indexing="ij")
        ar, ac = (ty + t.BY * q).ravel(), (tx + 32 * p).ravel()
        ok = (r0 + ar < rows) & (c0 + ac < cols)
        tile[ar[ok], ac[ok]] = a[r0 + ar[ok], c0 + ac[ok]]
        ty, q, tx, p = np.meshgrid(np.arange(t.BY), np.arange(tcols // t.BY), np.arange(32),
                                   np.arange(tr // 32), indexing="ij")
        br, bc = (ty + t.BY * q).ravel(), (tx + 32 * p).ravel()   # B row c0+br, column r0+bc
        ok = (c0 + br < cols) & (r0 + bc < rows)
        out[c0 + br[ok], r0 + bc[ok]] = tile[bc[ok], br[ok]]
    return out


@pytest.mark.parametrize("variant", sorted(v for v, t in _transpose.VARIANTS.items()
                                            if not t.SKEW))
@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (64, 64), (97, 31), (130, 70), (128, 192),
                                   (129, 257)])
def test_tile_model_covers_every_element(variant, shape):
    a = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    np.testing.assert_array_equal(emulate_tiled(a, variant), a.T)


def emulate_skew(a, ldd, doff, tr, sa=8):
    """NumPy model of transpose_skew<tr, sa>: B = a.T written into a flat buffer at offset
    doff with pitch ldd, each B row's window of tr A rows per tile row shifted to the
    sa-float grid.  Returns (B, write counts, whether every full 32-element warp store was
    aligned to sa floats)."""
    rows, cols = a.shape
    buf = np.full(doff + (cols - 1) * ldd + rows, np.nan, np.float32)
    count = np.zeros(buf.size, np.int32)
    aligned = True
    gx, gy = -(-cols // 32), -(-rows // tr)
    for bid in range(gx * gy):
        k, c0 = bid // gx, bid % gx * 32
        r0 = tr * k
        lo = r0 - (sa - 1)   # the tile holds A rows r0 - sa + 1 .. r0 + tr - 1 (those that exist)
        tile = np.zeros((tr + sa - 1, 32), np.float32)
        rr = np.arange(lo, lo + tr + sa - 1)
        okr = (rr >= 0) & (rr < rows)
        tile[okr, :min(32, cols - c0)] = a[rr[okr], c0:c0 + 32]
        for jj in range(min(32, cols - c0)):
            j = c0 + jj
            t = (doff + j * ldd) % sa
            end = rows if k + 1 == gy else r0 + tr - t
            for w in range(tr // 32 + 1):   # the last pass only in the last tile row
                start = r0 - t + 32 * w
                i = start + np.arange(32)
                ok = (i >= 0) & (i < end)
                if ok.all():
                    aligned &= (doff + j * ldd + start) % sa == 0
                e = doff + j * ldd + i[ok]
                buf[e] = tile[i[ok] - lo, jj]
                count[e] += 1
    b = np.stack([buf[doff + j * ldd: doff + j * ldd + rows] for j in range(cols)])
    c = np.stack([count[doff + j * ldd: doff + j * ldd + rows] for j in range(cols)])
    return b, c, aligned


@pytest.mark.parametrize("tr,sa", [(32, 8), (64, 8), (32, 16), (64, 32)])
@pytest.mark.parametrize("shape,ldd_extra,doff", [((1, 1), 0, 0), ((33, 65), 1, 3),
                                                  ((64, 64), 5, 7), ((97, 31), 0, 1),
                                                  ((129, 70), 3, 6), ((40, 9), 2, 5),
                                                  ((200, 40), 1, 2), ((50, 20), 2, 21)])
def test_skew_model_writes_each_element_once_in_whole_sectors(shape, ldd_extra, doff, tr, sa):
    a = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    b, count, aligned = emulate_skew(a, shape[0] + ldd_extra, doff, tr, sa)
    np.testing.assert_array_equal(b, a.T)
    assert (count == 1).all()
    assert aligned


def test_launcher_packs_the_kernel_parameter_layout():
    """Launcher's struct format lays the transpose kernels' parameters out as C does (the
    layout cuLaunchKernel reads); without a CUfunction handle it hands CuPy NumPy scalars
    of the kernel's types."""
    import ctypes

    from gpulinalg.core.kernels import Launcher

    c = ctypes   # transpose_skew's parameters: rows, cols, src, lds, dst, ldd, doff
    types = (c.c_int, c.c_int, c.c_void_p, c.c_longlong, c.c_void_p, c.c_longlong, c.c_uint)

    class Params(ctypes.Structure):
        _fields_ = [(f"p{i}", t) for i, t in enumerate(types)]

    calls = []
    launcher = Launcher(lambda grid, block, args, shared_mem: calls.append(
        (grid, block, args, shared_mem)), _transpose._ARGS + "I")
    assert launcher.pack.size == Params.p6.offset + ctypes.sizeof(c.c_uint) == 44
    # cuLaunchKernel's kernelParams: this thread's pointers name each field of the block
    assert launcher.offsets == [getattr(Params, f"p{i}").offset for i in range(len(types))]
    block, fields, _ = launcher._blocks()
    pointers = (ctypes.c_void_p * len(types)).from_address(fields)
    assert [p - ctypes.addressof(block) for p in pointers] == launcher.offsets
    raw = launcher.pack.pack(5, 6, 1 << 40, -7, 3 << 40, 8, 2**32 - 1)
    assert ctypes.string_at(ctypes.addressof(Params(5, 6, 1 << 40, -7, 3 << 40, 8, 2**32 - 1)),
                            len(raw)) == raw
    launcher((3, 1, 1), (32, 8, 1), 5, 6, 1 << 40, -7, 3 << 40, 8, 2)
    (grid, block, args, smem), = calls
    assert grid == (3, 1, 1) and block == (32, 8, 1) and smem == 0
    assert [a.dtype.name for a in args] == ["int32", "int32", "uint64", "int64", "uint64",
                                            "int64", "uint32"]
    assert [int(a) for a in args] == [5, 6, 1 << 40, -7, 3 << 40, 8, 2]


def test_kernel_table():
    for name, t in _transpose.VARIANTS.items():
        assert t.TILE % 32 == 0 and t.TILE % t.BY == 0 and 32 * t.BY <= 1024, name
        for size in (4, 8):              # static shared memory, float and double
            smem = (t.TILE + t.SKEW - 1) * 33 if t.SKEW else t.TILE * (t.TILE + 1)
            assert smem * size <= 48 * 1024, (name, size)
        assert not t.PAIR or t.TILE == 64, name                 # transpose_pair is 64 x 64
        assert t.PF in (0, 256) and not (t.PAIR and (t.PF or t.EL)), name   # tiled only
        assert not t.SKEW or ((t.BY, t.PAIR, t.EL) == (8, False, False)
                              and t.SKEW in (8, 16, 32)), name
    assert _transpose.BASELINE in _transpose.VARIANTS
    for table in (SM90, SM90_F64):
        for field in ("transpose_variant", "transpose_off_grid", "transpose_off_grid_el",
                      "transpose_off_sector", "transpose_small"):
            assert getattr(table, field) in _transpose.VARIANTS, field
        assert _transpose.VARIANTS[table.transpose_variant].PAIR
        assert _transpose.VARIANTS[table.transpose_off_sector].SKEW
    assert len(_transpose.KERNEL_NAMES) == len(set(_transpose.KERNEL_NAMES))
    for ctype in ("float", "double"):
        assert f"copy2d<{ctype}>" in _transpose.KERNEL_NAMES
        assert f"transpose_pair<{ctype},4>" in _transpose.KERNEL_NAMES
        # transpose_pair<T,4>'s fallback for odd strides
        assert f"transpose_tiled<{ctype},64,4,0,false>" in _transpose.KERNEL_NAMES
        for t in _transpose.VARIANTS.values():
            assert _transpose._tiled_name(t, ctype) in _transpose.KERNEL_NAMES
    assert _transpose.num_tiles(130, 129, "64x4-pair") == 3 * 3
    assert _transpose.num_tiles(130, 129, "128x8-skew32") == 2 * 5


def test_pick_variant_follows_the_row_pitches():
    T = SM90
    pick = lambda *a, **kw: _transpose.pick_variant(*a, **kw, sms=SMS, table=T)
    assert pick(16384, 16384) == T.transpose_variant
    assert pick(4096, 4096) == T.transpose_variant
    # B's pitch (the rows of A) a multiple of 32 floats: the lines are whole, no evict-last
    assert pick(4000, 4096) == T.transpose_off_grid
    assert pick(4096, 4000) == T.transpose_off_grid
    assert pick(6000, 10000) == T.transpose_off_grid_el   # 6000 % 32 = 16
    assert pick(10000, 6016) == T.transpose_off_grid_el
    assert pick(100, 100) == T.transpose_small
    # off-grid extents in buffers whose leading dimensions are multiples of 64
    assert pick(10000, 10000, 10048, 10048) == T.transpose_variant
    assert pick(8192, 8192, 8200, 8192) == T.transpose_off_grid
    assert pick(8192, 8192, 8192, 8200) == T.transpose_off_grid_el
    assert pick(8192, 8192, aligned=False) == T.transpose_off_grid_el
    # B's rows off the 32-byte sector grid: odd sizes, pitches of 2 mod 8, an offset dst
    assert pick(8193, 8193) == T.transpose_off_sector
    assert pick(4002, 4000) == T.transpose_off_sector
    assert pick(4000, 4002) == T.transpose_off_grid
    assert pick(8192, 8192, dst_sector=False) == T.transpose_off_sector
    # small: fewer than transpose_small_tiles_per_sm tiles of 64 x 64 per SM
    assert pick(64 * 24, 64 * 21) == T.transpose_small            # 504 tiles < 4 * 132
    assert pick(64 * 24, 64 * 22) == T.transpose_variant          # 528
    assert _transpose.pick_variant(64 * 24, 64 * 21, sms=100, table=T) == T.transpose_variant


def test_pick_variant_follows_the_row_pitches_in_bytes_for_float64():
    """The pitch rules are in bytes: a double row pitch is twice a float one of the same
    length, so the same extents can pick another tile."""
    T = SM90_F64
    pick = lambda *a, **kw: _transpose.pick_variant(*a, **kw, sms=SMS, table=T, element=F64)
    assert pick(16384, 16384) == T.transpose_variant
    assert pick(4096, 4064) == T.transpose_variant       # 4064 doubles: 127 x 256 bytes
    assert _transpose.pick_variant(4096, 4064, sms=SMS, table=SM90) == SM90.transpose_off_grid
    assert pick(6000, 10000) == T.transpose_off_grid      # 48000 bytes: whole 128-byte lines
    assert _transpose.pick_variant(6000, 10000, sms=SMS, table=SM90) == \
        SM90.transpose_off_grid_el                         # 24000 bytes: not
    assert pick(6008, 10000) == T.transpose_off_grid_el   # 48064 bytes: 64 mod 128
    assert pick(4002, 4000) == T.transpose_off_sector     # 32016 bytes: off the sector grid
    assert pick(4004, 4000) == T.transpose_off_grid_el    # 32032: on sectors, not on lines
    assert _transpose.pick_variant(4004, 4000, sms=SMS, table=SM90) == \
        SM90.transpose_off_sector                          # 16016 bytes
    assert pick(8192, 8192, aligned=False) == T.transpose_off_grid_el
    assert pick(8192, 8192, dst_sector=False) == T.transpose_off_sector
    assert pick(100, 100) == T.transpose_small


def _fake_device(monkeypatch, launches):
    """The transpose launch path without a GPU: device 0 with SMS SMs, kernels that record
    (name, grid, block, args) into `launches`."""
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(_transpose, "cupy", lambda: fake)
    monkeypatch.setattr(_transpose.device, "sm_count", lambda *a: SMS)
    monkeypatch.setattr(_transpose, "_PLANS", {})

    def launch(device_id, rows, cols, variant, pairs_ok, ctype="float"):
        t = _transpose.VARIANTS[variant]
        t = t if pairs_ok else _transpose._unpaired(t)
        name = _transpose._tiled_name(t, ctype)
        return ((lambda grid, block, *args: launches.append((name, grid, block, args))),
                (_transpose.num_tiles(rows, cols, variant), 1, 1), (32, t.BY, 1), t.SKEW)
    monkeypatch.setattr(_transpose, "_transpose_launch", launch)


@pytest.mark.parametrize("element,table", [(F32, SM90), (F64, SM90_F64)])
def test_transpose_ptr_launch_arguments(monkeypatch, element, table):
    """transpose_ptr launches the element type's instantiation of the picked tile; the pair
    tile needs pointers aligned to two elements, and the skew tile gets dst's offset in
    elements (CPU: the launch is recorded, not run)."""
    launches = []
    _fake_device(monkeypatch, launches)
    c, size = element.ctype, element.itemsize
    base = 1 << 30
    _transpose.transpose_ptr(4096, 4096, base, 4096, base + (1 << 28), 4096, table=table,
                             element=element)
    _transpose.transpose_ptr(4096, 4096, base + size, 4096, base + (1 << 28), 4096,
                             table=table, element=element)       # dst 32-byte, src not 256
    _transpose.transpose_ptr(4096, 4096, base + 2 * size, 4096, base + (1 << 28), 4098,
                             table=table, element=element)      # ldd 4098: off sectors
    _transpose.transpose_ptr(4095, 4096, base, 4096, base + 3 * size, 4095, table=table,
                             element=element)                    # odd pitch: skew
    names = [n for n, *_ in launches]
    assert names[0] == f"transpose_pair<{c},4>"
    assert names[1] == f"transpose_tiled<{c},32,8,256,true>"       # off the 128-byte lines
    assert names[2] == names[3] == f"transpose_skew<{c},128,256,32>"   # B's pitch off sectors
    assert launches[2][3][-1] == 0 and launches[3][3][-1] == 3   # dst's offset, elements
    assert launches[0][3] == (4096, 4096, base, 4096, base + (1 << 28), 4096)
    # the pair tile by name, pointers aligned to one element only: the unpaired 64 x 64 tile
    launches.clear()
    _transpose._launch_ptr(256, 256, base + size, 256, base, 256, "64x4-pair", table, element)
    _transpose._launch_ptr(256, 256, base + 2 * size, 256, base, 256, "64x4-pair", table,
                           element)
    assert [n for n, *_ in launches] == [f"transpose_tiled<{c},64,4,0,false>",
                                         f"transpose_pair<{c},4>"]


def test_pick_variant_reads_the_table_in_force():
    """An experiment replaces a field (gpulinalg.tuning.override), and the launch plans,
    memoised per table, follow it."""
    assert _transpose.pick_variant(6000, 10000, sms=SMS) == "32x8-pf256-el"
    table = dataclasses.replace(tuning.current(), transpose_off_grid_el="32x8-pf256")
    with tuning.override(table):
        assert _transpose.pick_variant(6000, 10000, sms=SMS) == "32x8-pf256"
    assert _transpose._plans(0, table) is _transpose._plans(0, table)
    assert _transpose._plans(0, table) is not _transpose._plans(0, SM90)
    assert _transpose._plans(0, table, F64) is not _transpose._plans(0, table, F32)
    # float64 work reads the float64 table: an override of the float32 one does not apply
    assert _transpose.pick_variant(4096, 4004, sms=SMS, element=F64) == "32x8-pf256"
    f64 = dataclasses.replace(tuning.current(element=F64), transpose_off_grid="32x8")
    with tuning.override(f64), tuning.override(table):
        assert _transpose.pick_variant(4096, 4004, sms=SMS, element=F64) == "32x8"
        assert _transpose.pick_variant(6000, 10000, sms=SMS) == "32x8-pf256"


# ---------------------------------------------------------------- GPU

def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)




@pytest.mark.gpu
@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("variant", sorted(_transpose.VARIANTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_into_variants(cp, rng, shape, variant, dtype):
    a = _rand(rng, shape, dtype)
    dst = cp.full(shape[::-1], cp.nan, dtype=dtype)
    _transpose.transpose_into(cp.asarray(a), dst, variant=variant)
    np.testing.assert_array_equal(dst.get(), a.T)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(_transpose.VARIANTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_moves_bits_unchanged(cp, rng, variant, dtype):
    a = random_bits(rng, (130, 197), dtype)
    for src, ref in ((cp.asarray(a), a), (cp.asarray(a)[1:, 3:], a[1:, 3:])):
        dst = cp.empty(ref.shape[::-1], dtype=dtype)
        _transpose.transpose_into(src, dst, variant=variant)
        np.testing.assert_array_equal(bits(dst.get()), bits(ref.T))
    for order in ("C", "F"):                    # the copy kernel (one operand column-major)
        dst = cp.empty(a.shape[::-1], dtype=dtype, order=order)
        _transpose.transpose_into(cp.asarray(a, order="F" if order == "C" else "C"), dst)
        np.testing.assert_array_equal(bits(dst.get()), bits(a.T))


@pytest.mark.gpu
def test_unknown_variant_is_rejected(cp):
    with pytest.raises(ValueError, match="variant"):
        _transpose.transpose_into(cp.zeros((2, 3), cp.float32), cp.zeros((3, 2), cp.float32),
                                  variant="nope")


@pytest.mark.gpu
def test_transpose_into_rejects_other_dtypes(cp):
    for s_dtype, d_dtype in ((cp.float32, cp.float64), (cp.float64, cp.float32),
                             (cp.float16, cp.float16), (cp.complex64, cp.complex64)):
        with pytest.raises(TypeError, match="float32 or two float64"):
            _transpose.transpose_into(cp.zeros((2, 3), s_dtype), cp.zeros((3, 2), d_dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(_transpose.VARIANTS))
@pytest.mark.parametrize("s_off,d_off", [(0, 0), (1, 0), (0, 3), (2, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_into_variants_unaligned_views(cp, rng, variant, s_off, d_off, dtype):
    # offsets and leading dimensions that are not multiples of 16 bytes (16-byte paths off;
    # odd offsets: pair accesses off too); 530 rows: the 128-row tiles have interior blocks
    # too (rows above and below theirs)
    a = _rand(rng, (600, 301), dtype)
    big = cp.asarray(a)
    out = cp.full((300, 1037), cp.nan, dtype=dtype)
    src = big[:, s_off:s_off + 257][:530]
    dst = out[:257, d_off:d_off + 530]
    _transpose.transpose_into(src, dst, variant=variant)
    res = out.get()
    np.testing.assert_array_equal(res[:257, d_off:d_off + 530], a[:530, s_off:s_off + 257].T)
    res[:257, d_off:d_off + 530] = np.nan
    assert np.isnan(res).all()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(_transpose.VARIANTS))
@pytest.mark.parametrize("shape", [(4096, 4096), (2049, 4097), (5000, 300)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_large_variants(cp, shape, variant, dtype):
    # many tiles, full and partial edge tiles of every tile shape
    a = cp.random.default_rng(2).standard_normal(shape, dtype=dtype)
    out = cp.full(shape[::-1], cp.nan, dtype=dtype)
    _transpose.transpose_into(a, out, variant=variant)
    assert bool(cp.array_equal(out, a.T))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 4096), (6000, 1000), (1000, 6000), (2049, 4097)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_large(cp, shape, dtype):
    a = cp.random.default_rng(1).standard_normal(shape, dtype=dtype)
    out = cp.full(shape[::-1], cp.nan, dtype=dtype)
    _transpose.transpose_into(a, out)
    assert bool(cp.array_equal(out, a.T))


@pytest.mark.gpu
@pytest.mark.parametrize("element", [F32, F64])
@pytest.mark.parametrize("rows,cols,lds,ldd", [(4096, 4096, 4096, 4096), (2049, 777, 800, 2051),
                                               (100, 3000, 3001, 128), (1, 5, 5, 1)])
def test_transpose_ptr(cp, rng, element, rows, cols, lds, ldd):
    """transpose_ptr on row-major blocks addressed by pointer (the LU's steps), under the
    element type's table; nothing outside B's rows x cols block is written."""
    a = _rand(rng, (rows, lds), element.dtype)
    src = cp.asarray(a)
    out = cp.full((cols, ldd), cp.nan, dtype=element.dtype)
    _transpose.transpose_ptr(rows, cols, src.data.ptr, lds, out.data.ptr, ldd, element=element)
    res = out.get()
    np.testing.assert_array_equal(res[:, :rows], a[:, :cols].T)
    assert np.isnan(res[:, rows:]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("s_order", ["C", "F"])
@pytest.mark.parametrize("d_order", ["C", "F"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (33, 65), (97, 40)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_into_all_layouts(cp, rng, shape, s_order, d_order, dtype):
    a = _rand(rng, shape, dtype)
    src = cp.asarray(a, order=s_order)
    dst = cp.full(shape[::-1], cp.nan, dtype=dtype, order=d_order)
    _transpose.transpose_into(src, dst)
    np.testing.assert_array_equal(dst.get(), a.T)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_into_views_with_leading_dimensions(cp, rng, dtype):
    big = _rand(rng, (150, 170), dtype)
    bigd = cp.asarray(big)
    out = cp.full((200, 210), cp.nan, dtype=dtype)
    src = bigd[5:102, 3:50]                          # row-major view, ld 170
    dst = out[7:54, 11:108]                          # row-major view, ld 210
    _transpose.transpose_into(src, dst)
    res = out.get()
    np.testing.assert_array_equal(res[7:54, 11:108], big[5:102, 3:50].T)
    res[7:54, 11:108] = np.nan
    assert np.isnan(res).all()                       # nothing written outside the view
    outf = cp.full((120, 80), cp.nan, dtype=dtype, order="F")
    _transpose.transpose_into(bigd.T[3:50, 5:102], outf[10:107, 20:67])  # column-major views
    np.testing.assert_array_equal(outf.get()[10:107, 20:67], big[5:102, 3:50])
    dst2 = cp.full((60, 30), cp.nan, dtype=dtype)[::2, ::3]             # no unit stride
    _transpose.transpose_into(bigd[::4, ::5][:10, :30], dst2)
    np.testing.assert_array_equal(dst2.get(), big[::4, ::5][:10, :30].T)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_public_numpy(rng, shape, dtype):
    a = _rand(rng, shape, dtype)
    res = gpulinalg.transpose(a)
    assert isinstance(res, np.ndarray) and res.flags.c_contiguous and res.dtype == dtype
    np.testing.assert_array_equal(res, a.T)


@pytest.mark.gpu
def test_public_numpy_orders_views_and_dtypes(rng):
    big = _rand(rng, (100, 120))
    for a in (big[::1, 3:50], np.asfortranarray(big), big[::2, ::3], big.T, big[:1, ::2]):
        np.testing.assert_array_equal(gpulinalg.transpose(a), a.T)
    h = big.astype(np.float16)
    np.testing.assert_array_equal(gpulinalg.transpose(h), h.T.astype(np.float32))
    out = np.full((120, 100), np.nan, np.float32)
    assert gpulinalg.transpose(big, out=out) is out
    np.testing.assert_array_equal(out, big.T)


@pytest.mark.gpu
def test_public_cupy(cp, rng):
    big = _rand(rng, (130, 70))
    d = cp.asarray(big)
    for a, ref in ((d, big), (d[::1, 3:50], big[:, 3:50]), (cp.asfortranarray(d), big),
                   (d[::2, ::3], big[::2, ::3])):
        res = gpulinalg.transpose(a)
        assert isinstance(res, cp.ndarray) and res.flags.c_contiguous
        np.testing.assert_array_equal(res.get(), ref.T)
    out = cp.full((70, 130), cp.nan, dtype=cp.float32)
    assert gpulinalg.transpose(d, out=out) is out
    np.testing.assert_array_equal(out.get(), big.T)
    outv = cp.full((90, 150), cp.nan, dtype=cp.float32)[5:75, 7:137]   # view with ld 150
    gpulinalg.transpose(d, out=outv)
    np.testing.assert_array_equal(outv.get(), big.T)
    with pytest.raises(TypeError, match="one kind"):
        gpulinalg.transpose(d, out=np.empty((70, 130), np.float32))


@pytest.mark.gpu
def test_public_torch(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    big = _rand(rng, (65, 97))
    t = torch.from_numpy(big).cuda()
    res = gpulinalg.transpose(t)
    assert isinstance(res, torch.Tensor) and res.is_cuda
    np.testing.assert_array_equal(res.cpu().numpy(), big.T)
    np.testing.assert_array_equal(gpulinalg.transpose(t[:, 3:50]).cpu().numpy(), big[:, 3:50].T)
    out = torch.full((97, 65), float("nan"), device="cuda")
    assert gpulinalg.transpose(t, out=out) is out
    np.testing.assert_array_equal(out.cpu().numpy(), big.T)
    res = gpulinalg.transpose(torch.from_numpy(big))
    assert isinstance(res, torch.Tensor) and not res.is_cuda
    np.testing.assert_array_equal(res.numpy(), big.T)


@pytest.mark.gpu
@pytest.mark.parametrize("element", [F32, F64])
def test_transpose_padded_pitch_views(cp, element):
    # off-grid extents in buffers whose leading dimensions are on the 64 grid: the pair tile
    big = cp.random.default_rng(3).standard_normal((2100, 2176), dtype=element.dtype)
    src = big[:2049, :2111]
    out = cp.full((2111, 2112), cp.nan, dtype=element.dtype)
    dst = out[:, :2049]
    assert _transpose.pick_variant(2049, 2111, 2176, 2112, element=element) == \
        tuning.current(element=element).transpose_variant
    _transpose.transpose_into(src, dst)
    assert bool(cp.array_equal(dst, src.T)) and bool(cp.isnan(out[:, 2049:]).all())
