"""Batched blocked LU of medium matrices (kernels/getrf_batched_blocked.cu,
gpulinalg/lu/batched_blocked.py).

CPU: kernel names, the shared-memory formula against the kernel's layout, `fits`, the kernel's
parameters against the launcher's, its header, argument validation and the launch path (the
family's compile for sm_90: tests/test_kernels_compile.py); and the kernel's own source run on
the CPU through a fiber emulation of the CUDA features it uses (needs g++): the instances in
use on small orders and instances with narrow panels and 64 threads on orders that take
several panels, chunks and rows per thread, against gpulinalg.lu.batched.reference (pivots, info and
factors bit for bit: the kernel applies the updates in the unblocked order), the backward
error against LAPACK's, the flags, src left alone, nothing written outside the arrays.
GPU: orders 129 .. 1024 and rectangular stacks against the reference and LAPACK, in place and
not, singular and NaN members.
"""

import ctypes
import re
import types
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg.core import kernels as _kernels
from gpulinalg.core.element import F32, F64
from gpulinalg.lu import batched_blocked as _blocked
from gpulinalg.lu.batched import reference
from gpulinalg.lu.batched_blocked import (CANDIDATES, KERNEL_NAMES, MAX_ORDER, fits,
                                          getrf_batched_blocked, panel_pitch, shape_for,
                                          shared_bytes)
from gpulinalg.tuning import SM90, SM90_F64

import kernel_emulation
from array_helpers import assert_same_bits, fake
from lu_helpers import backward_error, special_stack

DTYPES = [np.float32, np.float64]
KIB = 1024
H100_SMEM = 227 * KIB
# Instances only the emulation runs: narrow panels and 64 threads, so that orders of a few
# dozen take several panels, chunks of columns and rows per thread (up to 3: m <= 192).
SMALL = {"float": (8, 64, 3), "double": (4, 64, 3)}
# The shapes the CPU's tuning table (sm_90's values) puts in use.
IN_USE = {"float": SM90.batched_blocked_shapes, "double": SM90_F64.batched_blocked_shapes}


def element_of(dtype):
    return F32 if np.dtype(dtype) == np.float32 else F64


def eps_of(dtype):
    return float(np.finfo(dtype).eps)


def assert_backward_error_like_lapack(a, lu, piv, members):
    """||P A - L U||_F / (||A||_F n eps) <= 2x LAPACK's xgetrf + 1, per member."""
    eps = eps_of(a.dtype)
    for i in members:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_lu, ref_piv = sl.lu_factor(a[i])
        ours = backward_error(a[i], lu[i], piv[i], eps)
        assert ours <= 2 * backward_error(a[i], ref_lu, ref_piv, eps) + 1.0, (i, ours)


# ---------------------------------------------------------------- CPU: names, memory, source

def test_kernel_names_and_shapes():
    assert KERNEL_NAMES[0] == "getrf_batched_blocked<float,32,256,1>"
    assert len(KERNEL_NAMES) == sum(map(len, CANDIDATES.values()))
    for ctype, shapes in CANDIDATES.items():
        size = 4 if ctype == "float" else 8
        for nb, threads, rpt in shapes:
            assert nb * size % 32 == 0 and threads % 64 == 0 and threads >= 2 * nb
            assert threads * rpt <= MAX_ORDER
        # the table's picks are compiled, cover every order, and grow with it
        assert set(IN_USE[ctype]) <= set(shapes)
        tops = [t * r for _, t, r in IN_USE[ctype]]
        assert tops == sorted(tops) and tops[-1] == MAX_ORDER
    src = _kernels.source("getrf_batched_blocked")
    assert "template <typename T, int NB, int THREADS, int RPT>" in src
    assert re.search(r"#define GBB_MAXM (\d+)", src).group(1) == str(MAX_ORDER)


def test_kernel_parameters_match_the_launcher():
    code = kernel_emulation.launch_format("getrf_batched_blocked", "getrf_batched_blocked")
    assert code == _blocked._SPECS == "iiiPPPPPi"


def test_header_states_storage_threads_and_bound():
    head = (_kernels.kernel_dir() / "getrf_batched_blocked.cu").read_text()
    head = head[:head.index("#include")]
    assert head.startswith("// getrf_batched_blocked.cu")
    assert all(line.startswith("//") for line in head.strip().splitlines())
    for word in ("ROW-MAJOR", "0-BASED", "Bound:", "docs/journal/batched.md", "Knobs",
                 "Threads", "i?amax", "info", "flags", "GBB_REGS", "NB", "RPT"):
        assert word in head, word


def test_shared_memory():
    # float, m = 1024: pitch 1028 (4 mod 32), panel 1028 x 32, U12 32 x 512, 16 warps, tables
    assert panel_pitch(1024, F32) == 1028 and panel_pitch(1024, F64) == 1028
    assert panel_pitch(129, F32) == 132 and panel_pitch(1000, F64) == 1012
    assert panel_pitch(4, F32) == 4 and panel_pitch(5, F64) == 20
    assert shape_for(1024, F32) == (32, 512, 2) and shape_for(256, F64) == (16, 256, 1)
    assert shape_for(257, F64) == (16, 256, 2) and shape_for(1025, F32) is None
    assert shared_bytes(1024, F32) == 4 * (1028 * 32 + 32 * 512) + 24 * 16 + 8 * 32
    assert shared_bytes(1024, F64) == 8 * (1028 * 16 + 16 * 512) + 24 * 16 + 8 * 16
    assert shared_bytes(512, F32) == 4 * (516 * 32 + 32 * 256) + 24 * 8 + 8 * 32
    # an emulated instance, (NB, THREADS, RPT) = (8, 64, 3): pitch 68, 2 warps
    assert shared_bytes(40, F32, shape=(8, 64, 3)) == 4 * (68 * 8 + 8 * 64) + 24 * 2 + 8 * 8
    for element, pad in ((F32, 32), (F64, 16)):
        for m in range(1, MAX_ORDER + 1):
            ld = panel_pitch(m, element)
            assert ld >= m and ld % pad == 4 and ld - m < pad
        assert shared_bytes(MAX_ORDER, element) <= H100_SMEM          # sm_90 takes every order
        assert shared_bytes(512, element) <= 163 * KIB                # sm_80 up to 512
        # up to m = 512 two blocks share an SM (as many as the registers allow)
        assert 2 * (shared_bytes(512, element) + KIB) <= 228 * KIB


def test_fits():
    for element in (F32, F64):
        assert fits(1, 1, element, limit=H100_SMEM)
        assert fits(1024, 1024, element, limit=H100_SMEM)
        assert fits(129, 1024, element, limit=H100_SMEM)
        assert not fits(1025, 4, element, limit=H100_SMEM)
        assert not fits(4, 1025, element, limit=H100_SMEM)
        assert not fits(0, 4, element, limit=H100_SMEM)
        assert fits(512, 1024, element, limit=99 * KIB)               # the panel is m's
        assert not fits(1024, 512, element, limit=99 * KIB)
    assert not fits(8, 8, types.SimpleNamespace(ctype="float2"), limit=H100_SMEM)


# ---------------------------------------------------------------- CPU: validation, launch path

def call_args(b, m, n, dtype=np.float32, in_place=True):
    """(src, dst, piv, info, flags) fakes of a call; dst far from src unless in place."""
    src = fake((b, m, n), dtype, ptr=1 << 32)
    dst = src if in_place else fake((b, m, n), dtype, ptr=1 << 36)
    return (src, dst, fake((b, min(m, n)), np.int32, ptr=2 << 36),
            fake((b,), np.int32, ptr=3 << 36), 4 << 36)


def test_check_arguments_accepts():
    check = _blocked.check_arguments
    assert check(*call_args(5, 300, 200), limit=H100_SMEM) == (F32, 5, 300, 200, 4 << 36)
    assert check(*call_args(3, 1024, 7, np.float64, in_place=False),
                 limit=H100_SMEM)[:4] == (F64, 3, 1024, 7)
    assert check(*call_args(0, 4, 4), limit=H100_SMEM)[1] == 0
    assert check(*call_args(2, 0, 5), limit=H100_SMEM)[2:4] == (0, 5)
    assert check(*call_args(0, 2000, 2000), limit=H100_SMEM)[1] == 0
    src, dst, piv, info, _ = call_args(2, 8, 8)
    flags = fake((2,), np.int32, ptr=5 << 36)
    assert check(src, dst, piv, info, flags, limit=H100_SMEM)[4] == 5 << 36


def test_check_arguments_rejects():
    check = _blocked.check_arguments
    src, dst, piv, info, flags = call_args(4, 6, 5)
    with pytest.raises(TypeError, match="CuPy"):
        check(np.zeros((4, 6, 5), np.float32), dst, piv, info, flags, limit=H100_SMEM)
    with pytest.raises(TypeError, match="CuPy"):
        check(src, np.zeros((4, 6, 5), np.float32), piv, info, flags, limit=H100_SMEM)
    with pytest.raises(TypeError, match="float32 or float64"):
        check(fake((4, 6, 5), np.float16), dst, piv, info, flags, limit=H100_SMEM)
    with pytest.raises(TypeError, match="float32"):
        check(src, fake((4, 6, 5), np.float64, ptr=1 << 40), piv, info, flags,
              limit=H100_SMEM)
    with pytest.raises(ValueError, match="shape"):
        check(src, fake((4, 6, 6), ptr=1 << 40), piv, info, flags, limit=H100_SMEM)
    with pytest.raises(TypeError, match="int32"):
        check(src, dst, fake((4, 5), np.int64), info, flags, limit=H100_SMEM)
    with pytest.raises(ValueError, match="shape"):
        check(src, dst, piv, fake((3,), np.int32), flags, limit=H100_SMEM)
    with pytest.raises(ValueError, match="shape"):
        check(src, dst, piv, info, fake((3,), np.int32), limit=H100_SMEM)
    with pytest.raises(ValueError, match="stack"):
        check(fake((6, 5)), dst, piv, info, flags, limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(fake((4, 6, 10))[:, :, ::2], dst, piv, info, flags, limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(src, dst, fake((4, 10), np.int32)[:, ::2], info, flags, limit=H100_SMEM)
    with pytest.raises(ValueError, match="overlap"):
        check(src, fake((4, 6, 5), ptr=(1 << 32) + 4), piv, info, flags, limit=H100_SMEM)
    for m, n in [(1025, 4), (4, 1025)]:
        with pytest.raises(ValueError, match="1024"):
            check(*call_args(2, m, n), limit=H100_SMEM)
    with pytest.raises(ValueError, match="shared memory"):
        check(*call_args(2, 1024, 1024), limit=99 * KIB)


@pytest.fixture
def fake_launch(monkeypatch):
    """The launch path without a GPU: device 0 with 227 KB per block; records the launches
    as (name, smem, grid, block, args)."""
    launches = []
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(_blocked, "cupy", lambda: cp)
    monkeypatch.setattr(_blocked.device, "max_shared_per_block", lambda *a: H100_SMEM)
    monkeypatch.setattr(_blocked, "_kernel", lambda dev, ctype, shape, smem: (
        lambda grid, block, *args: launches.append((_blocked._name(ctype, *shape), smem, grid,
                                                    block, args))))
    _blocked.route.cache_clear()
    yield launches
    _blocked.route.cache_clear()


def test_launch_arguments(fake_launch):
    launches = fake_launch
    src, dst, piv, info, flags = call_args(1000, 256, 256, in_place=False)
    getrf_batched_blocked(src, dst, piv, info, flags, 7)
    assert launches[-1] == ("getrf_batched_blocked<float,32,256,1>", shared_bytes(256, F32),
                            (1000, 1, 1), (256, 1, 1),
                            (1000, 256, 256, 1 << 32, 1 << 36, 2 << 36, 3 << 36, 4 << 36, 7))
    getrf_batched_blocked(*call_args(50, 1024, 1024, np.float64), 8)
    assert launches[-1][:4] == ("getrf_batched_blocked<double,16,512,2>",
                                shared_bytes(1024, F64), (50, 1, 1), (512, 1, 1))
    count = len(launches)
    getrf_batched_blocked(*call_args(0, 300, 300), 9)          # nothing to do
    src, dst, piv, info, flags = call_args(5, 0, 7)
    getrf_batched_blocked(src, dst, piv, info, flags, 9)       # info set, no launch
    assert info.filled == 0 and len(launches) == count
    src, dst, piv, info, flags = call_args(2, 300, 300)
    with pytest.raises(ValueError, match="device"):
        getrf_batched_blocked(src, dst, fake((2, 300), np.int32, device_id=1), info, flags, 1)


# ---------------------------------------------------------------- CPU: the kernel, emulated

_DRIVER = r"""
template <typename T, int NB, int THREADS, int RPT>
void run(int batch, int m, int n, void* src, void* dst, int* piv, int* info, int* flags,
         int gen, unsigned seed, long smem) {
    emu::run_blocks(batch, THREADS, seed, smem, [=]() {
        getrf_batched_blocked<T, NB, THREADS, RPT>(batch, m, n, static_cast<const T*>(src),
                                              static_cast<T*>(dst), piv, info, flags, gen);
    });
}
extern "C" int gbb_run(int itemsize, int nb, int threads, int rpt, int batch, int m, int n,
                       void* src,
                       void* dst, int* piv, int* info, int* flags, int gen, unsigned seed,
                       long smem) {
#define CASE(T, NB_, TH, R) if (sizeof(T) == (size_t)itemsize && nb == NB_ && threads == TH \
                             && rpt == R) \
    { run<T, NB_, TH, R>(batch, m, n, src, dst, piv, info, flags, gen, seed, smem); return 0; }
    CASES
    return 1;
}
"""


def _instances():
    """(ctype, NB, THREADS, RPT) of every instance the emulation compiles."""
    return [(c, *shape) for c in IN_USE for shape in IN_USE[c]] + [(c, *SMALL[c]) for c in SMALL]


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """gbb_run of the kernel source compiled for the CPU (tests/kernel_emulation.py)."""
    cases = " ".join(f"CASE({c}, {nb}, {th}, {r})" for c, nb, th, r in _instances())
    gb = kernel_emulation.build(tmp_path_factory, "getrf_batched_blocked",
                                _DRIVER.replace("CASES", cases), ("-ffp-contract=off",))
    gb.gbb_run.argtypes = ([ctypes.c_int] * 7 + [ctypes.c_void_p] * 5
                           + [ctypes.c_int, ctypes.c_uint, ctypes.c_long])
    return gb


def run_emulated(gb, a, shape=None, in_place=True, offset=0, seed=1):
    """The kernel (instance `shape` = (NB, THREADS, RPT), default the one in use for its
    order) on the stack a, copied into a guarded buffer `offset` elements off 16-byte
    alignment; not in place: dst a second guarded buffer poisoned with NaN.  Returns (lu, piv,
    info); asserts src is left alone when not in place, nothing outside the arrays was written
    and the flags report the singular and the non-finite matrices."""
    b, m, n = a.shape
    element = element_of(a.dtype)
    nb, threads, rpt = shape or shape_for(m, element)
    pad, size = 64, b * m * n

    def guarded(fill):
        buf = np.full(size + 2 * pad + offset, fill, a.dtype)
        return buf, buf[pad + offset:pad + offset + size]

    sbuf, src = guarded(7.25)
    src[:] = a.ravel()
    dbuf, dst = (sbuf, src) if in_place else guarded(np.nan)
    k = min(m, n)
    pbuf, ibuf = np.full(b * k + 2 * pad, -7, np.int32), np.full(b + 2 * pad, -7, np.int32)
    flags, gen = np.array([5, 5, -7], np.int32), 9
    assert gb.gbb_run(a.dtype.itemsize, nb, threads, rpt, b, m, n, src.ctypes.data,
                      dst.ctypes.data,
                      pbuf[pad:].ctypes.data, ibuf[pad:].ctypes.data, flags.ctypes.data, gen,
                      seed, shared_bytes(m, element, shape=(nb, threads, rpt))) == 0
    info = ibuf[pad:pad + b]
    assert flags[0] == (gen if info.any() else 5)
    assert flags[1] == (gen if not np.isfinite(a).all() else 5)
    assert flags[2] == -7
    def outside(buf):
        return np.concatenate([buf[:pad + offset], buf[pad + offset + size:]])

    assert (outside(sbuf) == 7.25).all()
    if not in_place:
        assert np.isnan(outside(dbuf)).all()
        assert_same_bits(src, a.ravel())
    assert (pbuf[:pad] == -7).all() and (pbuf[pad + b * k:] == -7).all()
    assert (ibuf[:pad] == -7).all() and (ibuf[pad + b:] == -7).all()
    return (dst.reshape(b, m, n).copy(), pbuf[pad:pad + b * k].reshape(b, k).copy(),
            info.copy())


def assert_is_reference(a, lu, piv, info):
    """Pivots, info and factors of `reference`, bit for bit (NaN where NaN); the backward
    error of the random members against LAPACK's."""
    ref_lu, ref_piv, ref_info = reference(a)
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_array_equal(info, ref_info)
    assert_same_bits(lu, ref_lu)
    assert_backward_error_like_lapack(a, lu, piv, range(0, a.shape[0], 8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_kernel_is_the_reference(emulated, rng, dtype):
    """The production instance on orders around NB and the panel steps, rectangular both
    ways, in place, with every kind of special member."""
    nb = IN_USE[element_of(dtype).ctype][0][0]
    for m, n in [(1, 1), (2, 2), (5, 5), (nb - 1, nb - 1), (nb, nb), (nb + 1, nb + 1),
                 (2 * nb + 3, 2 * nb + 3), (37, 53), (53, 37), (3, 40), (40, 3), (1, 9),
                 (9, 1)]:
        count = 8 if max(m, n) <= 40 else 3
        a = special_stack(rng, count, m, n, dtype)
        lu, piv, info = run_emulated(emulated, a, seed=m * 100 + n)
        assert_is_reference(a, lu, piv, info)


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_narrow_panels(emulated, rng, dtype):
    """Narrow panels and 64 threads: many panels, several column chunks and block tiles,
    rows per thread > 1 (m > 64), primes and non-multiples of NB, tall and wide."""
    shape = SMALL[element_of(dtype).ctype]
    for m, n in [(9, 9), (16, 16), (23, 23), (64, 64), (65, 65), (97, 97), (130, 67),
                 (67, 130), (131, 5), (7, 150)]:
        a = special_stack(rng, 8 if max(m, n) <= 70 else 3, m, n, dtype)
        lu, piv, info = run_emulated(emulated, a, shape=shape, seed=m + n)
        assert_is_reference(a, lu, piv, info)


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_rows_per_thread(emulated, rng, dtype):
    """The production instance with more rows than threads (several rows per thread, up to
    the largest m: positions and rows in the search tag's full 10 bits), tall and wide."""
    nb = IN_USE[element_of(dtype).ctype][0][0]
    for m, n in [(300, nb + 5), (1024, nb + 1), (257, 2 * nb + 1), (nb + 3, 600)]:
        a = special_stack(rng, 3, m, n, dtype)
        a[2, m - 1, 0] = 1e6                          # the last row is the first pivot
        lu, piv, info = run_emulated(emulated, a, seed=m)
        assert piv[2, 0] == m - 1
        assert_is_reference(a, lu, piv, info)


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_out_of_place(emulated, rng, dtype):
    """src != dst (dst poisoned with NaN): every element of dst written, src untouched; the
    copy by 16-byte pieces and, off alignment, by elements."""
    element = element_of(dtype)
    for shape in (None, SMALL[element.ctype]):
        for m, n, offset in [(33, 33, 0), (33, 33, 1), (20, 45, 0), (45, 20, 3)]:
            a = special_stack(rng, 8, m, n, dtype)
            lu, piv, info = run_emulated(emulated, a, shape=shape, in_place=False,
                                         offset=offset)
            assert_is_reference(a, lu, piv, info)


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_ties_and_zeros(emulated, rng, dtype):
    """Pivot ties across threads and warps (the smallest position wins), zero columns in and
    after the first panel, NaN at the pivot position and below it."""
    shape = SMALL[element_of(dtype).ctype]
    m = n = 70
    a = rng.standard_normal((6, m, n)).astype(dtype)
    a[0, :, 0] = 2.0                                  # every row ties: no interchange
    a[1, ::3, 0] = -4.0                               # ties on rows 0, 3, 6, ...: row 0
    a[1, 5, 0] = 1.0
    a[2, :, 9] = 0.0                                  # zero column 9: info 10
    a[3, :, 40] = 0.0                                 # zero column 40 (a later panel)
    a[4, 0, 0] = np.nan                               # NaN at the pivot: kept
    a[5, 7:, 0] = np.nan                              # NaN below: never wins
    for inst in (None, shape):
        lu, piv, info = run_emulated(emulated, a, shape=inst)
        ref_lu, ref_piv, ref_info = reference(a)
        np.testing.assert_array_equal(piv, ref_piv)
        np.testing.assert_array_equal(info, ref_info)
        assert_same_bits(lu, ref_lu)
        assert piv[0, 0] == 0 and piv[1, 0] == 0 and piv[4, 0] == 0
        assert info[2] == 10 and info[3] == 41 and info[0] == info[1] == 0


def test_emulated_tiny_double_pivot(emulated, rng):
    """A subnormal float64 pivot: the reciprocal of pivot * 2^64, the products scaled back
    (finite multipliers where the plain reciprocal overflows), as the reference."""
    for shape in (None, SMALL["double"]):
        a = rng.standard_normal((3, 40, 40))
        a[:, :, 0] = rng.uniform(-1, 1, (3, 40)) * 1e-311
        a[:, 0, 0] = 4e-310                           # the first maximum: the pivot
        with np.errstate(over="ignore"):
            assert 1.0 / a[0, 0, 0] == np.inf
        lu, piv, info = run_emulated(emulated, a, shape=shape)
        assert (piv[:, 0] == 0).all() and np.isfinite(lu).all()
        assert_is_reference(a, lu, piv, info)


# ---------------------------------------------------------------- GPU

GPU_ORDERS = [129, 130, 255, 256, 257, 511, 512, 513, 1000, 1024]


def factor_on_gpu(cp, a, in_place):
    """The kernel on a copy of the NumPy stack a: (lu, piv, info, flags, src after) as NumPy."""
    b, m, n = a.shape
    src = cp.asarray(a)
    dst = src if in_place else cp.full(a.shape, np.nan, a.dtype)
    piv = cp.full((b, min(m, n)), -1, np.int32)
    info = cp.full((b,), -1, np.int32)
    flags = cp.full(2, 5, np.int32)
    getrf_batched_blocked(src, dst, piv, info, flags, 11)
    return (cp.asnumpy(dst), cp.asnumpy(piv), cp.asnumpy(info), cp.asnumpy(flags),
            cp.asnumpy(src))


def assert_kernel_matches_reference(a, lu, piv, info, members):
    """For `members`: the reference's pivots and info, factors within a few ulps of the
    reference's scaled by the factors' magnitude (bit for bit but for float subnormals,
    which the kernel flushes), NaN where NaN."""
    sub = a[list(members)]
    ref_lu, ref_piv, ref_info = reference(sub)
    lu, piv, info = lu[list(members)], piv[list(members)], info[list(members)]
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_array_equal(info, ref_info)
    np.testing.assert_array_equal(np.isnan(lu), np.isnan(ref_lu))
    finite = np.isfinite(ref_lu)
    scale = np.maximum(np.abs(np.where(finite, ref_lu, 0)).reshape(len(sub), -1).max(axis=1),
                       1e-30)[:, None, None]
    diff = np.where(finite, np.abs(np.where(finite, lu, 0) - np.where(finite, ref_lu, 0)), 0)
    assert (diff <= 4 * eps_of(a.dtype) * scale).all()


def check_flags(a, info, flags):
    assert flags[0] == (11 if info.any() else 5)
    assert flags[1] == (11 if not np.isfinite(a).all() else 5)


@pytest.mark.gpu
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", GPU_ORDERS)
def test_kernel_square(cp, rng, dtype, order, in_place):
    batch = 3 if order >= 1000 else 5 + order % 3
    a = rng.standard_normal((batch, order, order)).astype(dtype)
    lu, piv, info, flags, src = factor_on_gpu(cp, a, in_place)
    if not in_place:
        assert_same_bits(src, a)
    assert not info.any()
    check_flags(a, info, flags)
    # the reference (NumPy, slow) on every member up to 257, then on the first two; from 1000
    # on the backward error alone (the emulation checks the bits at order 1024)
    if order <= 513:
        assert_kernel_matches_reference(a, lu, piv, info, range(batch if order <= 257 else 2))
    assert_backward_error_like_lapack(a, lu, piv, range(batch))


@pytest.mark.gpu
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(300, 200), (200, 300), (1024, 129), (129, 1024)])
def test_kernel_rectangular(cp, rng, dtype, m, n, in_place):
    a = rng.standard_normal((4, m, n)).astype(dtype)
    lu, piv, info, flags, src = factor_on_gpu(cp, a, in_place)
    if not in_place:
        assert_same_bits(src, a)
    check_flags(a, info, flags)
    assert_kernel_matches_reference(a, lu, piv, info, range(4))
    assert_backward_error_like_lapack(a, lu, piv, range(4))


@pytest.mark.gpu
@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", [129, 257, 512])
def test_kernel_special_members(cp, rng, dtype, order, in_place):
    """Singular, tied, integer, NaN and infinity members beside random ones: the reference's
    pivots, info and factors; the flags; a special member changes no other."""
    a = special_stack(rng, 8, order, order, dtype)
    lu, piv, info, flags, src = factor_on_gpu(cp, a, in_place)
    if not in_place:
        assert_same_bits(src, a)
    check_flags(a, info, flags)
    assert flags[0] == 11 and flags[1] == 11
    assert_kernel_matches_reference(a, lu, piv, info, range(8))
    assert info[4] == 1                                   # the all-zero member
    clean = a[:1]                                         # the random member, alone
    lu_c, piv_c, _, flags_c, _ = factor_on_gpu(cp, clean, in_place)
    np.testing.assert_array_equal(lu[0], lu_c[0])
    np.testing.assert_array_equal(piv[0], piv_c[0])
    assert flags_c[0] == 5 and flags_c[1] == 5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_many_blocks(cp, rng, dtype):
    """More matrices than SMs (several blocks per SM at once), a singular and a NaN member
    among them: a sample against the reference, every member's backward error."""
    a = rng.standard_normal((400, 160, 160)).astype(dtype)
    a[123] = 0
    a[321, 7, 9] = np.nan
    lu, piv, info, flags, _ = factor_on_gpu(cp, a, in_place=True)
    check_flags(a, info, flags)
    assert info[123] == 1 and np.isnan(lu[321]).any()
    assert not np.delete(info, 123).any() and np.isfinite(np.delete(lu, 321, axis=0)).all()
    assert_kernel_matches_reference(a, lu, piv, info, [0, 123, 199, 321, 399])
    assert_backward_error_like_lapack(a, lu, piv, [i for i in range(0, 400, 7) if i != 321])


@pytest.mark.gpu
def test_kernel_flags_in_mapped_memory(cp, rng):
    """flags as a pointer into host-mapped memory (core/mapped.py): the host reads the
    generation after the stream's synchronisation."""
    from gpulinalg.core import mapped
    flags = mapped.flags()
    a = rng.standard_normal((3, 200, 200)).astype(np.float32)
    a[1, 5, 7] = np.nan
    a[2] = 0
    da = cp.asarray(a)
    piv = cp.empty((3, 200), np.int32)
    info = cp.empty(3, np.int32)
    gen = flags.next_gen()
    getrf_batched_blocked(da, da, piv, info, flags.ptr, gen)
    cp.cuda.get_current_stream().synchronize()
    assert flags.read(gen) == (True, True)
    assert list(cp.asnumpy(info)) == [0, 0, 1]
    gen = flags.next_gen()
    clean = cp.asarray(rng.standard_normal((2, 150, 150)).astype(np.float64))
    getrf_batched_blocked(clean, clean, cp.empty((2, 150), np.int32), cp.empty(2, np.int32),
                          flags.ptr, gen)
    cp.cuda.get_current_stream().synchronize()
    assert flags.read(gen) == (False, False)
