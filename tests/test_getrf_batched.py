"""Batched LU of small matrices (kernels/getrf_batched.cu, gpulinalg/lu/batched.py).

CPU: the NumPy model `reference` against scipy.linalg.lu_factor per matrix (random,
singular, tied, NaN-containing and rectangular matrices) and against a scalar transcription
of LAPACK's xgetf2 (every NaN placement), its fused multiply-add against the C library's,
info, kernel names, shapes, shared memory, argument validation and the launch path; and the
kernel's own source run on the CPU through a small fiber emulation of the CUDA features it
uses (needs g++), bit for bit against `reference`.  GPU: the kernel against `reference`
(identical pivots and info, the factors to rounding), the backward error against LAPACK's,
every size step and its neighbours, rectangular, singular and NaN members, B = 0, 1 and a
large B, unaligned stacks, a side stream.
"""

import ctypes
import ctypes.util
import re
import types
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg.core import kernels as _kernels
from gpulinalg.core.element import F32, F64
from gpulinalg.lu import batched as _batched
from gpulinalg.lu.batched import (CANDIDATES, KERNEL_NAMES, WARPS, getrf_batched, max_order,
                                  per_block, reference, shape_for, shared_bytes, threads)
from gpulinalg.tuning import SM90, SM90_F64

import kernel_emulation
from array_helpers import FakeDeviceArray, assert_same_bits, fake
from lu_helpers import assert_same_pivots, backward_error, rank_deficient, special_stack, tied

DTYPES = [np.float32, np.float64]
SIZES = (0, 1, 2, 3, 8, 31, 32, 33, 64, 65, 128)
KIB = 1024
H100_SMEM = 227 * KIB
SHAPES_OF = {"float": SM90.batched_shapes, "double": SM90_F64.batched_shapes}   # sm_90's picks


def element_of(dtype):
    return F32 if np.dtype(dtype) == np.float32 else F64


def eps_of(dtype):
    return float(np.finfo(dtype).eps)


# ---------------------------------------------------------------- test matrices

def random_stack(rng, b, m, n, dtype):
    return rng.standard_normal((b, m, n)).astype(dtype)


def zero_column(rng, b, m, n, dtype):
    """Column j = 0 (j varies): exactly zero through the elimination, info = j + 1."""
    a = rng.standard_normal((b, m, n))
    for i in range(b if n else 0):
        a[i, :, (2 * i + 1) % n] = 0.0
    return a.astype(dtype)



def all_zero(rng, b, m, n, dtype):
    return np.zeros((b, m, n), dtype)





def nan_late(rng, b, m, n, dtype):
    """A NaN where no pivot search with more than one candidate sees it: in the last column
    of a square matrix, in the columns >= m of a wide one (LAPACK implementations differ in
    where a NaN in a pivot column goes; the reference follows i?amax, tested below)."""
    a = rng.standard_normal((b, m, n))
    if m and n and (m == n or n > m):
        col = n - 1 if m == n else m + (n - m) // 2
        a[np.arange(b), rng.integers(0, m, b), col] = np.nan
    return a.astype(dtype)


KINDS = {"random": random_stack, "zero_column": zero_column, "rank_deficient": rank_deficient,
         "all_zero": all_zero, "tied": tied, "nan_late": nan_late}


def shapes_around(size):
    """(m, n) pairs for a size: square, tall (m > n) and wide (m < n)."""
    out = [(size, size)]
    if size >= 2:
        out += [(size, size // 2 + 1), (size // 2 + 1, size)]
    return out


# ---------------------------------------------------------------- CPU: reference vs LAPACK

def assert_matches_scipy(a, lu, piv, exact_pivots):
    """Per matrix: scipy.linalg.lu_factor's pivots (or, for random matrices, a first
    difference at a near-tie) and factors equal to rounding; where pivots part at a near-tie,
    a backward error within 2x of LAPACK's."""
    b, m, n = a.shape
    eps = eps_of(a.dtype)
    for i in range(b):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_lu, ref_piv = sl.lu_factor(a[i], check_finite=False)
        if exact_pivots or np.array_equal(piv[i], ref_piv):
            np.testing.assert_array_equal(piv[i], ref_piv, err_msg=f"matrix {i}")
            tol = 16 * max(m, n) * eps * max(1.0, float(np.nanmax(np.abs(ref_lu), initial=0)))
            np.testing.assert_allclose(lu[i], ref_lu, rtol=0, atol=tol, equal_nan=True,
                                       err_msg=f"matrix {i}")
        else:
            assert_same_pivots(piv[i], ref_lu, ref_piv, rtol=max(1e-4, m * eps))
            ours = backward_error(a[i], lu[i], piv[i], eps)
            assert ours <= 2 * backward_error(a[i], ref_lu, ref_piv, eps) + 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_reference_matches_lapack(rng, dtype, size, kind):
    for m, n in shapes_around(size):
        a = KINDS[kind](rng, 7, m, n, dtype)
        lu, piv, info = reference(a)
        assert lu.dtype == a.dtype and lu.shape == a.shape and lu.flags.c_contiguous
        assert piv.dtype == np.int32 and piv.shape == (7, min(m, n))
        assert info.dtype == np.int32 and info.shape == (7,)
        assert_matches_scipy(a, lu, piv, exact_pivots=kind != "random")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [0, 1])
def test_reference_small_batches(rng, dtype, batch):
    for size in SIZES:
        for m, n in shapes_around(size):
            a = random_stack(rng, batch, m, n, dtype)
            lu, piv, info = reference(a)
            assert lu.shape == (batch, m, n) and piv.shape == (batch, min(m, n))
            assert info.shape == (batch,) and not info.any()
            assert_matches_scipy(a, lu, piv, exact_pivots=False)


def test_reference_leaves_input_alone(rng):
    a = random_stack(rng, 3, 5, 5, np.float64)
    before = a.copy()
    lu, _, _ = reference(a)
    np.testing.assert_array_equal(a, before)
    assert not np.shares_memory(lu, a)


# ---------------------------------------------------------------- CPU: the pivot rule, info

def getf2_model(a):
    """LAPACK xgetf2 transcribed, one matrix, with the kernel's arithmetic: i?amax's scan from
    row k with a strict >, the interchange, the reciprocal (float64: of pivot * 2^64 below
    the smallest normal number, products scaled back), the update by `fms`."""
    a = np.array(a)
    m, n = a.shape
    piv = np.zeros(min(m, n), np.int32)
    info = 0
    one = a.dtype.type(1)
    for k in range(min(m, n)):
        p, best = k, abs(a[k, k])
        for i in range(k + 1, m):
            if abs(a[i, k]) > best:
                p, best = i, abs(a[i, k])
        piv[k] = p
        a[[k, p]] = a[[p, k]]
        pv = a[k, k]
        if pv == 0:
            info = info or k + 1
        elif k + 1 < m:
            with np.errstate(all="ignore"):
                if a.dtype == np.float64 and abs(pv) < np.finfo(np.float64).tiny:
                    a[k + 1:, k] = (a[k + 1:, k] * (one / (pv * 2.0 ** 64))) * 2.0 ** 64
                else:
                    a[k + 1:, k] *= one / pv
        if k + 1 < m and k + 1 < n:
            a[k + 1:, k + 1:] = _batched.fms(a[k + 1:, k + 1:], a[k + 1:, k, None],
                                             a[k, None, k + 1:])
    return a, piv, info


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_is_getf2_with_nans_and_infs(rng, dtype):
    """Every NaN and infinity placement the model meets: the vectorised reference is the
    scalar xgetf2 bit for bit, pivots and info included."""
    for m, n in [(1, 1), (2, 2), (3, 3), (5, 4), (4, 6), (8, 8), (17, 13), (33, 33)]:
        a = rng.standard_normal((40, m, n))
        for i in range(40):
            for _ in range(i % 4):
                a[i, rng.integers(0, m), rng.integers(0, n)] = np.nan
            if i % 5 == 0:
                a[i, rng.integers(0, m), rng.integers(0, n)] = np.inf
            if i % 7 == 0:
                a[i, :, rng.integers(0, n)] = np.nan
            if i % 9 == 0:
                a[i, rng.integers(0, m), :] = -np.inf
        assert_reference_is_getf2(a.astype(dtype))


def assert_reference_is_getf2(a):
    """reference() of the stack a equals the scalar xgetf2 model on every matrix, bit for
    bit (factors), and in pivots and info."""
    lu, piv, info = reference(a)
    for i in range(a.shape[0]):
        mlu, mpiv, minfo = getf2_model(a[i])
        assert_same_bits(lu[i], mlu)
        np.testing.assert_array_equal(piv[i], mpiv)
        assert info[i] == minfo


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_is_getf2_on_special_matrices(rng, dtype):
    for kind in sorted(KINDS):
        for m, n in [(6, 6), (9, 5), (5, 9), (32, 32)]:
            a = KINDS[kind](rng, 6, m, n, dtype)
            a[1::2] = rng.integers(-2, 3, (3, m, n))       # exact ties and cancellations
            assert_reference_is_getf2(a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pivot_rule_with_nan(dtype):
    """i?amax: the first maximum of the numbers from row k on; a NaN at row k itself keeps
    k (nothing compares greater than it), a NaN below k never wins."""
    nan = np.nan
    cases = [([[nan, 1.0], [5.0, 2.0]], 0),         # NaN first: stays
             ([[1.0, 1.0], [nan, 2.0], [5.0, 0.0]], 2),   # NaN below: skipped
             ([[1.0, 0.0], [5.0, 2.0], [nan, 0.0]], 1),
             ([[nan, 0.0], [nan, 1.0]], 0),          # all NaN: k
             ([[0.0, 1.0], [nan, 2.0], [0.0, 3.0]], 0),   # zero pivot beside a NaN
             ([[-3.0, 1.0], [3.0, 1.0], [-3.0, 2.0]], 0),  # ties: the first
             ([[1.0, 1.0], [-3.0, 1.0], [3.0, 2.0]], 1)]
    for rows, want in cases:
        a = np.array([rows], dtype)
        _, piv, info = reference(a)
        assert piv[0, 0] == want, rows
    _, piv, info = reference(np.array([[[0.0, 1.0], [nan, 2.0], [0.0, 3.0]]], dtype))
    assert info[0] == 1                              # the pivot 0 beside the NaN is zero


@pytest.mark.parametrize("dtype", DTYPES)
def test_info(rng, dtype):
    a = random_stack(rng, 6, 8, 8, dtype)
    a[1, :, 3] = 0                                   # column 3 zero: info 4
    a[2] = 0                                         # all zero: info 1
    a[3, rng.permutation(8)[:5]] = 0                 # rank 3: info 4
    a[4, :, 0] = 0                                   # column 0 zero: info 1
    a[4, :, 5] = 0                                   # the first counts
    a[5, 0, 0] = np.nan                              # a NaN pivot is no zero pivot
    lu, piv, info = reference(a)
    np.testing.assert_array_equal(info, [0, 4, 1, 4, 1, 0])
    np.testing.assert_array_equal(piv[2], np.arange(8))   # zero columns: no interchange
    assert np.isnan(lu[5, 1:]).all() and not np.isnan(lu[5, 0, 1:]).any()
    # a zero column is left unscaled (LAPACK xgetf2): the multipliers stay 0
    assert (lu[1, 4:, 3] == 0).all()
    wide = random_stack(rng, 2, 3, 7, dtype)
    wide[1, :, :3] = 0                                # K = 3 steps, all zero
    assert list(reference(wide)[2]) == [0, 1]
    tall = random_stack(rng, 2, 7, 3, dtype)
    tall[1, :, 2] = 0
    assert list(reference(tall)[2]) == [0, 3]


def test_reference_tiny_float64_pivot(rng):
    """A subnormal float64 pivot: the reciprocal of pivot * 2^64, the products scaled back:
    finite multipliers within an ulp of LAPACK's quotients."""
    a = rng.standard_normal((3, 5, 1)) * 1e-311         # one column: no later interchange
    a[:, 0, 0] = 4e-310
    lu, piv, _ = reference(a)
    assert (piv[:, 0] == 0).all() and np.isfinite(lu).all()
    np.testing.assert_allclose(lu[:, 1:, 0], a[:, 1:, 0] / a[:, :1, 0], rtol=4e-16)
    with np.errstate(over="ignore"):
        assert 1.0 / a[0, 0, 0] == np.inf               # where the plain reciprocal overflows


def test_reference_complex_uses_lapack_magnitude():
    """The emulation of complex stacks: izamax's |re| + |im| picks the pivot."""
    a = np.array([[[3 + 0j, 1], [2 + 2j, 1]]], np.complex128)   # |re|+|im|: 3 < 4
    lu, piv, info = reference(a)
    _, ref_piv = sl.lu_factor(a[0])
    np.testing.assert_array_equal(piv[0], ref_piv)
    assert piv[0, 0] == 1 and info[0] == 0


def test_reference_rejects():
    with pytest.raises(ValueError, match="stack"):
        reference(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="float32"):
        reference(np.zeros((1, 3, 3), np.int64))
    with pytest.raises(TypeError, match="float32"):
        reference(np.zeros((1, 3, 3), np.float16))


# ---------------------------------------------------------------- CPU: the fused multiply-add

def _libm():
    name = ctypes.util.find_library("m")
    if name is None:
        pytest.skip("no C math library to compare with")
    lib = ctypes.CDLL(name)
    lib.fma.restype, lib.fma.argtypes = ctypes.c_double, [ctypes.c_double] * 3
    lib.fmaf.restype, lib.fmaf.argtypes = ctypes.c_float, [ctypes.c_float] * 3
    return lib


@pytest.mark.parametrize("dtype", DTYPES)
def test_fms_is_a_fused_multiply_add(rng, dtype):
    """fms(t, l, u) == fma(-l, u, t) of the C library, bit for bit, on products that nearly
    cancel t (where two roundings differ) and on random triples."""
    lib = _libm()
    count = 20000
    scale = 10.0 ** rng.integers(-20, 20, count)
    l = (rng.standard_normal(count) * scale).astype(dtype)
    u = rng.standard_normal(count).astype(dtype)
    near = (l.astype(np.float64) * u * (1 + rng.integers(-4, 5, count) * eps_of(dtype)))
    t = np.where(rng.random(count) < 0.7, near, rng.standard_normal(count) * scale)
    t = t.astype(dtype)
    got = _batched.fms(t, l, u)
    f = lib.fmaf if dtype == np.float32 else lib.fma
    want = np.array([f(-x, y, z) for x, y, z in zip(l.tolist(), u.tolist(), t.tolist())],
                    dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    with np.errstate(all="ignore"):
        assert (t - l * u != want).any()            # two roundings differ: not a trivial case


# ---------------------------------------------------------------- CPU: names, shapes, memory

def test_kernel_names_and_shapes():
    assert KERNEL_NAMES == tuple(f"getrf_batched<{e.ctype},{nmax},{g},{c}>"
                                 for e in (F32, F64) for nmax, g, c in CANDIDATES[e.ctype])
    for ctype, shapes in SHAPES_OF.items():
        assert [s[0] for s in shapes] == [8, 16, 32, 64, 128]
        assert set(shapes) <= set(CANDIDATES[ctype])            # the table picks compiled ones
    for ctype, shapes in CANDIDATES.items():
        size = 4 if ctype == "float" else 8
        vk = 16 // size
        for nmax, g, c in shapes:
            assert g in (2, 4, 8, 16, 32) and nmax % g == 0 and nmax % (c * vk) == 0
            assert c == 1 or g == 32
            assert nmax * nmax // (g * c) * size <= 256     # <= 64 registers of data
            assert threads(g, c) == (32 * WARPS if c == 1 else g * c)
            assert per_block(g, c) * g * c == threads(g, c)
    src = _kernels.source("getrf_batched")
    assert "template <typename T, int NMAX, int G, int C>" in src
    assert re.search(r"#define GBATCH_WARPS (\d+)", src).group(1) == str(WARPS)


def test_kernel_parameters_match_the_launcher():
    assert kernel_emulation.launch_format("getrf_batched", "getrf_batched") == _batched._SPECS


def test_header_states_storage_threads_and_bound():
    head = (_kernels.kernel_dir() / "getrf_batched.cu").read_text()
    head = head[:head.index("#include")]
    assert head.startswith("// getrf_batched.cu")
    assert all(line.startswith("//") for line in head.strip().splitlines())
    for word in ("ROW-MAJOR", "0-BASED", "Bound:", "GBATCH_WARPS", "GBATCH_REGS", "Knobs",
                 "Threads", "i?amax", "info"):
        assert word in head, word


def test_shared_memory():
    # float (32, 16, 1): 8 matrices of 32 rows, pitch 36, two pivot-row buffers each
    assert shared_bytes(32, 16, 1, F32) == 4 * (8 * 32 * 36 + 8 * 2 * 32) + 4 * (8 + 1)
    # double (128, 32, 16): one matrix, pitch 130, multipliers and pivots
    assert shared_bytes(128, 32, 16, F64) == \
        8 * (128 * 130 + 2 * 128 + 2 * 128) + 4 * (8 + 128 + 1)
    for element in (F32, F64):
        for shape in SHAPES_OF[element.ctype]:
            assert shared_bytes(*shape, element) <= 163 * KIB        # sm_80 takes them all
    assert max_order(F32, limit=H100_SMEM) == 128 and max_order(F64, limit=H100_SMEM) == 128
    assert max_order(F32, limit=163 * KIB) == 128 and max_order(F64, limit=163 * KIB) == 128
    assert max_order(F32, limit=99 * KIB) == 128 and max_order(F64, limit=99 * KIB) == 64
    assert max_order(F32, limit=48 * KIB) == 64 and max_order(F64, limit=48 * KIB) == 64
    assert max_order(F64, limit=1024) == 0
    assert max_order(types.SimpleNamespace(ctype="float2")) == 0      # no complex kernel


def test_shape_for():
    for element in (F32, F64):
        shapes = SHAPES_OF[element.ctype]
        for m, n, want in [(1, 1, 0), (8, 8, 0), (9, 1, 1), (3, 16, 1), (17, 17, 2),
                           (32, 32, 2), (33, 2, 3), (64, 64, 3), (65, 65, 4), (128, 1, 4)]:
            assert shape_for(m, n, element, limit=H100_SMEM) == shapes[want]
        with pytest.raises(ValueError, match="128"):
            shape_for(129, 4, element, limit=H100_SMEM)
    with pytest.raises(ValueError, match="64"):
        shape_for(100, 100, F64, limit=99 * KIB)
    assert _batched.grid_size(100001, 4, 1) == 3126 and _batched.grid_size(7, 32, 8) == 7


# ---------------------------------------------------------------- CPU: validation, launch path

def triple(b, m, n, dtype=np.float32):
    return fake((b, m, n), dtype), fake((b, min(m, n)), np.int32), fake((b,), np.int32)


def test_check_arguments_accepts():
    assert _batched.check_arguments(*triple(5, 8, 8), limit=H100_SMEM) == (F32, 5, 8, 8)
    assert _batched.check_arguments(*triple(3, 128, 7, np.float64),
                                    limit=H100_SMEM) == (F64, 3, 128, 7)
    assert _batched.check_arguments(*triple(0, 4, 4), limit=H100_SMEM)[1] == 0
    assert _batched.check_arguments(*triple(2, 0, 5), limit=H100_SMEM)[2:] == (0, 5)
    assert _batched.check_arguments(*triple(0, 999, 999), limit=H100_SMEM)[1] == 0
    a, piv, info = triple(4, 6, 6)
    assert _batched.check_arguments(a[1:3], piv[1:3], info[1:3], limit=H100_SMEM)[1] == 2


def test_check_arguments_rejects():
    a, piv, info = triple(4, 6, 5)
    check = _batched.check_arguments
    with pytest.raises(TypeError, match="CuPy"):
        check(np.zeros((4, 6, 5), np.float32), piv, info, limit=H100_SMEM)
    with pytest.raises(TypeError, match="CuPy"):
        check(a, np.zeros((4, 5), np.int32), info, limit=H100_SMEM)
    with pytest.raises(TypeError, match="float32 or float64"):
        check(fake((4, 6, 5), np.float16), piv, info, limit=H100_SMEM)
    with pytest.raises(TypeError, match="float32 or float64"):
        check(fake((4, 6, 5), np.complex64), piv, info, limit=H100_SMEM)
    with pytest.raises(TypeError, match="int32"):
        check(a, fake((4, 5), np.int64), info, limit=H100_SMEM)
    with pytest.raises(TypeError, match="int32"):
        check(a, piv, fake((4,), np.uint32), limit=H100_SMEM)
    with pytest.raises(ValueError, match="stack"):
        check(fake((6, 5)), piv, info, limit=H100_SMEM)
    with pytest.raises(ValueError, match="stack"):
        check(fake((1, 4, 6, 5)), piv, info, limit=H100_SMEM)
    with pytest.raises(ValueError, match="shape"):
        check(a, fake((4, 6), np.int32), info, limit=H100_SMEM)
    with pytest.raises(ValueError, match="shape"):
        check(a, piv, fake((3,), np.int32), limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(fake((4, 6, 10))[:, :, ::2], piv, info, limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(FakeDeviceArray(np.zeros((4, 5, 6), np.float32).transpose(0, 2, 1)), piv, info,
              limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(a, fake((4, 10), np.int32)[:, ::2], info, limit=H100_SMEM)
    with pytest.raises(ValueError, match="C-contiguous"):
        check(a, piv, fake((8,), np.int32)[::2], limit=H100_SMEM)
    for m, n in [(129, 4), (4, 129), (200, 200)]:
        with pytest.raises(ValueError, match="M, N <= 128"):
            check(*triple(2, m, n), limit=H100_SMEM)
    with pytest.raises(ValueError, match="M, N <= 64"):
        check(*triple(2, 65, 65, np.float64), limit=99 * KIB)


@pytest.fixture
def fake_launch(monkeypatch):
    """getrf_batched without a GPU: device 0 with 227 KB per block; returns the launches."""
    launches = []
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(_batched, "cupy", lambda: cp)
    monkeypatch.setattr(_batched.device, "max_shared_per_block", lambda *a: H100_SMEM)
    monkeypatch.setattr(_batched.mapped, "flags",
                        lambda: types.SimpleNamespace(ptr=4 << 30, next_gen=lambda: 3))
    _batched.route.cache_clear()
    monkeypatch.setattr(_batched, "_kernel", lambda dev, ctype, nmax, g, c: (
        lambda grid, block, *args: launches.append((_batched._name(ctype, nmax, g, c), grid,
                                                    block, args))))
    yield launches
    _batched.route.cache_clear()


def test_launch_arguments(fake_launch):
    launches = fake_launch
    a, piv, info = (fake((100001, 8, 8), ptr=1 << 30), fake((100001, 8), np.int32, ptr=2 << 30),
                    fake((100001,), np.int32, ptr=3 << 30))
    getrf_batched(a, piv, info)
    name, grid, block, args = launches[-1]
    assert name == "getrf_batched<float,8,4,1>" and grid == (3126, 1, 1)
    assert block == (128, 1, 1)
    assert args == (100001, 8, 8, 1 << 30, 1 << 30, 2 << 30, 3 << 30, 4 << 30, 3)
    getrf_batched(*triple(10000, 64, 64, np.float64))
    assert launches[-1][0] == "getrf_batched<double,64,32,4>"
    assert launches[-1][1:3] == ((10000, 1, 1), (128, 1, 1))
    getrf_batched(*triple(2000, 128, 100))
    assert launches[-1][0] == "getrf_batched<float,128,32,8>"
    assert launches[-1][1:3] == ((2000, 1, 1), (256, 1, 1))
    getrf_batched(*triple(20000, 31, 32))
    assert launches[-1][0] == "getrf_batched<float,32,32,1>"
    assert launches[-1][1:3] == ((5000, 1, 1), (128, 1, 1))
    count = len(launches)
    getrf_batched(*triple(0, 8, 8))                          # nothing to do
    a, piv, info = triple(5, 0, 7)
    getrf_batched(a, piv, info)                              # info set, no launch
    assert info.filled == 0 and len(launches) == count
    with pytest.raises(ValueError, match="device"):
        getrf_batched(fake((2, 4, 4), device_id=1), *triple(2, 4, 4)[1:])


# ---------------------------------------------------------------- CPU: the kernel, emulated

_DRIVER = r"""
template <typename T, int NMAX, int G, int C>
void run(int batch, int m, int n, void* A, int* piv, int* info, int* flags, int gen,
         unsigned seed, long smem) {
    constexpr int THREADS = GBATCH_THREADS(G, C), MPB = THREADS / (G * C);
    emu::run_blocks((batch + MPB - 1) / MPB, THREADS, seed, smem, [=]() {
        getrf_batched<T, NMAX, G, C>(batch, m, n, static_cast<const T*>(A), static_cast<T*>(A),
                                     piv, info, flags, gen);
    });
}
extern "C" int gb_run(int itemsize, int nmax, int g, int c, int batch, int m, int n, void* A,
                      int* piv, int* info, int* flags, int gen, unsigned seed, long smem) {
#define CASE(T, N, GG, CC) if (sizeof(T) == (size_t)itemsize && nmax == N && g == GG && c == CC) \
    { run<T, N, GG, CC>(batch, m, n, A, piv, info, flags, gen, seed, smem); return 0; }
    CASES
    return 1;
}
"""


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """gb_run of the kernel source compiled for the CPU (tests/kernel_emulation.py)."""
    cases = " ".join(f"CASE({name[name.index('<') + 1:-1]})" for name in KERNEL_NAMES)
    gb = kernel_emulation.build(tmp_path_factory, "getrf_batched",
                                _DRIVER.replace("CASES", cases))
    gb.gb_run.argtypes = ([ctypes.c_int] * 7 + [ctypes.c_void_p] * 4
                          + [ctypes.c_int, ctypes.c_uint, ctypes.c_long])
    return gb


def run_emulated(gb, a, shape=None, offset=0, seed=1):
    """The kernel on the stack a (copied into a guarded buffer, `offset` elements off its
    16-byte alignment): (lu, piv, info); asserts nothing outside the arrays was written and
    that the flags report the singular and the non-finite matrices."""
    b, m, n = a.shape
    element = element_of(a.dtype)
    nmax, g, c = shape or shape_for(m, n, element, limit=H100_SMEM)
    pad = 64
    buf = np.full(b * m * n + 2 * pad + offset, 7.25, a.dtype)
    view = buf[pad + offset:pad + offset + b * m * n]
    view[:] = a.ravel()
    k = min(m, n)
    pbuf, ibuf = np.full(b * k + 2 * pad, -7, np.int32), np.full(b + 2 * pad, -7, np.int32)
    flags, gen = np.array([5, 5, -7], np.int32), 9
    assert gb.gb_run(a.dtype.itemsize, nmax, g, c, b, m, n, view.ctypes.data,
                     pbuf[pad:].ctypes.data, ibuf[pad:].ctypes.data, flags.ctypes.data, gen,
                     seed, shared_bytes(nmax, g, c, element)) == 0
    info = ibuf[pad:pad + b]
    assert flags[0] == (gen if info.any() else 5)
    assert flags[1] == (gen if not np.isfinite(a).all() else 5)
    assert flags[2] == -7
    untouched = np.concatenate([buf[:pad + offset], buf[pad + offset + b * m * n:]])
    assert (untouched == 7.25).all()
    assert (pbuf[:pad] == -7).all() and (pbuf[pad + b * k:] == -7).all()
    assert (ibuf[:pad] == -7).all() and (ibuf[pad + b:] == -7).all()
    return (view.reshape(b, m, n).copy(), pbuf[pad:pad + b * k].reshape(b, k).copy(),
            ibuf[pad:pad + b].copy())





@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_kernel_is_the_reference(emulated, rng, dtype):
    """Every shape on sizes around its steps, rectangular, partial last blocks, unaligned
    rows (element copies) and special members: pivots, info and factors bit for bit."""
    element = element_of(dtype)
    for m, n in [(1, 1), (2, 2), (3, 3), (8, 8), (5, 8), (9, 4), (16, 16), (17, 17), (12, 16),
                 (31, 31), (32, 32), (32, 7), (33, 33), (64, 64), (50, 64), (64, 61),
                 (65, 65), (128, 128), (128, 77), (90, 128)]:
        count = 3 if max(m, n) > 64 else 37
        a = special_stack(rng, count, m, n, dtype)
        lu, piv, info = run_emulated(emulated, a, offset=1 if m == 9 else 0)
        ref_lu, ref_piv, ref_info = reference(a)
        np.testing.assert_array_equal(piv, ref_piv, err_msg=f"{m} x {n}")
        np.testing.assert_array_equal(info, ref_info, err_msg=f"{m} x {n}")
        assert_same_bits(lu, ref_lu)
    for shape in CANDIDATES[element.ctype]:                # each shape below its order too
        a = special_stack(rng, 9, 7, 6, dtype)
        lu, piv, info = run_emulated(emulated, a, shape=shape, seed=shape[0])
        ref_lu, ref_piv, ref_info = reference(a)
        np.testing.assert_array_equal(piv, ref_piv)
        np.testing.assert_array_equal(info, ref_info)
        assert_same_bits(lu, ref_lu)


# ---------------------------------------------------------------- GPU

def factor_on_gpu(cp, a):
    """getrf_batched on a copy of the NumPy stack a: (lu, piv, info) as NumPy arrays."""
    b, m, n = a.shape
    da = cp.asarray(a)
    piv = cp.full((b, min(m, n)), -1, np.int32)
    info = cp.full((b,), -1, np.int32)
    getrf_batched(da, piv, info)
    return cp.asnumpy(da), cp.asnumpy(piv), cp.asnumpy(info)


def assert_kernel_matches_reference(a, lu, piv, info):
    """Identical pivots and info; factors within a few ulps scaled by the matrix's norm (bit
    for bit but for subnormals, which the kernel's float arithmetic flushes)."""
    ref_lu, ref_piv, ref_info = reference(a)
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_array_equal(info, ref_info)
    np.testing.assert_array_equal(np.isnan(lu), np.isnan(ref_lu))
    if a.size:
        b = a.shape[0]
        finite = np.where(np.isfinite(a), a, 0).reshape(b, -1)
        scale = np.maximum(np.abs(finite).max(axis=1), 1e-30)[:, None, None]
        diff = np.where(np.isnan(lu), 0, np.abs(np.nan_to_num(lu) - np.nan_to_num(ref_lu)))
        assert (diff <= 4 * eps_of(a.dtype) * scale).all()


ERROR_FLOOR = 0.25            # in units of ||A|| n eps


def assert_backward_error_like_lapack(a, lu, piv, sample=None):
    """||P A - L U||_F / (||A||_F n eps) <= 2x LAPACK's xgetrf, per matrix (of `sample`), or
    below ERROR_FLOOR: at orders of a few, both errors are a few roundings (LAPACK's is often
    exactly 0), where their ratio means nothing."""
    eps = eps_of(a.dtype)
    for i in (range(a.shape[0]) if sample is None else sample):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_lu, ref_piv = sl.lu_factor(a[i])
        ours = backward_error(a[i], lu[i], piv[i], eps)
        assert ours <= max(2 * backward_error(a[i], ref_lu, ref_piv, eps), ERROR_FLOOR), i


def sizes_around_steps():
    """Each shape's order, one below and one above it (up to 128), and the small ones."""
    out = {1, 2, 3}
    for nmax in (8, 16, 32, 64, 128):
        out |= {nmax - 1, nmax, min(nmax + 1, 128)}
    return sorted(out)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,count", [(s, s, 37) for s in sizes_around_steps()]
                         + [(m, n, 19) for m, n in [(8, 3), (3, 8), (17, 16), (16, 17), (33, 5),
                                                    (5, 33), (64, 40), (40, 64), (128, 65),
                                                    (65, 128), (128, 1), (1, 128)]])
def test_kernel_shapes(cp, rng, dtype, m, n, count):
    """Square stacks around each shape's order and rectangular ones, against the model."""
    if max(m, n) > max_order(element_of(dtype)):
        pytest.skip(f"this device takes {dtype.__name__} up to {max_order(element_of(dtype))}")
    a = random_stack(rng, count, m, n, dtype)
    lu, piv, info = factor_on_gpu(cp, a)
    assert_kernel_matches_reference(a, lu, piv, info)
    assert_backward_error_like_lapack(a, lu, piv)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [4, 8, 13, 32, 33, 64, 100, 128])
def test_kernel_special_members(cp, rng, dtype, size):
    """Singular, tied, integer, NaN and infinity members beside random ones: the same as the
    reference, and a NaN or zero pivot in one matrix changes no other."""
    if size > max_order(element_of(dtype)):
        pytest.skip("beyond this device's order")
    a = special_stack(rng, 40, size, size, dtype)
    lu, piv, info = factor_on_gpu(cp, a)
    assert_kernel_matches_reference(a, lu, piv, info)
    clean = a[0::8]                                   # the random members, factored alone
    lu_c, piv_c, info_c = factor_on_gpu(cp, clean)
    np.testing.assert_array_equal(lu[0::8], lu_c)
    np.testing.assert_array_equal(piv[0::8], piv_c)
    assert np.isfinite(lu[0::8]).all() and not info[0::8].any()
    assert (info[4::8] == 1).all()                    # all-zero members


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_batch_zero_and_one(cp, rng, dtype):
    for size in (0, 1, 5, 32, 64):
        for batch in (0, 1):
            a = random_stack(rng, batch, size, size + 1, dtype)
            lu, piv, info = factor_on_gpu(cp, a)
            assert lu.shape == a.shape and piv.shape == (batch, min(size, size + 1))
            if size == 0:
                assert not info.any()                 # info written, piv has no columns
            else:
                assert_kernel_matches_reference(a, lu, piv, info)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,shape", [(np.float32, (20000, 32, 32)),
                                         (np.float32, (100000, 8, 8)),
                                         (np.float32, (10000, 64, 64)),
                                         (np.float64, (5000, 16, 16)),
                                         (np.float64, (3000, 64, 64)),
                                         (np.float32, (600, 128, 128))])
def test_kernel_large_batch(cp, rng, dtype, shape):
    a = random_stack(rng, *shape, dtype)
    zero, nan = shape[0] // 3, shape[0] * 2 // 3 + 1
    a[zero] = 0
    a[nan, 2, 2] = np.nan
    lu, piv, info = factor_on_gpu(cp, a)
    assert_kernel_matches_reference(a, lu, piv, info)
    assert info[zero] == 1 and np.isnan(lu[nan]).any()
    assert np.isfinite(np.delete(lu, nan, axis=0)).all()
    assert_backward_error_like_lapack(a, lu, piv, sample=range(0, shape[0], shape[0] // 16))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_unaligned_stack(cp, rng, dtype):
    """A stack starting 4 or 8 bytes past a 16-byte boundary: one element per copy."""
    for m, n in [(8, 8), (16, 12), (32, 32), (64, 64)]:
        a = random_stack(rng, 9, m, n, dtype)
        buf = cp.zeros(a.size + 1, dtype)
        da = buf[1:].reshape(a.shape)
        da[...] = cp.asarray(a)
        piv = cp.empty((9, min(m, n)), np.int32)
        info = cp.empty(9, np.int32)
        getrf_batched(da, piv, info)
        assert float(buf[0]) == 0.0
        assert_kernel_matches_reference(a, cp.asnumpy(da), cp.asnumpy(piv), cp.asnumpy(info))


@pytest.mark.gpu
def test_kernel_on_a_side_stream(cp, rng):
    a = random_stack(rng, 300, 24, 24, np.float32)
    with cp.cuda.Stream(non_blocking=True) as stream:
        da = cp.asarray(a)
        piv = cp.empty((300, 24), np.int32)
        info = cp.empty(300, np.int32)
        getrf_batched(da, piv, info)
        stream.synchronize()
        lu = cp.asnumpy(da)
    assert_kernel_matches_reference(a, lu, cp.asnumpy(piv), cp.asnumpy(info))


@pytest.mark.gpu
def test_kernel_orders_and_errors(cp):
    assert max_order(F32) == 128
    assert max_order(F64) in (64, 128)
    a = cp.zeros((2, 129, 3), np.float32)
    with pytest.raises(ValueError, match="128"):
        getrf_batched(a, cp.zeros((2, 3), np.int32), cp.zeros(2, np.int32))
    a = cp.zeros((2, 4, 4), np.float32)
    with pytest.raises(ValueError, match="shape"):
        getrf_batched(a, cp.zeros((2, 3), np.int32), cp.zeros(2, np.int32))
    with pytest.raises(TypeError, match="int32"):
        getrf_batched(a, cp.zeros((2, 4), np.int64), cp.zeros(2, np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        getrf_batched(cp.zeros((2, 4, 8), np.float32)[:, :, ::2], cp.zeros((2, 4), np.int32),
                      cp.zeros(2, np.int32))
