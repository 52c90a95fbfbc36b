"""The row interchanges of a whole LU's pivots applied to a few columns by one gather
(kernels/permute.cu, gpulinalg/layout/permute.py): the kernel emulated on the CPU against the
NumPy model, and on the GPU."""

import ctypes

import numpy as np
import pytest

from gpulinalg.core import mapped
from gpulinalg.core.element import F32, F64
from gpulinalg.layout import permute
from gpulinalg.layout.laswp import laswp_reference

import kernel_emulation

_DRIVER = r"""
template <typename T>
void run(int n, int nrhs, const int* piv, const void* B, long long rs, long long cs, void* X,
         long long ldx, int* flags, int gen, int inverse, unsigned seed) {
    emu::run_blocks(1, PERM_THREADS, seed, 4L * n, [=]() {
        permute_rows<T>(n, nrhs, piv, static_cast<const T*>(B), rs, cs, static_cast<T*>(X),
                        ldx, flags, gen, inverse);
    });
}
extern "C" void perm_run(int itemsize, int n, int nrhs, const int* piv, const void* B,
                         long long rs, long long cs, void* X, long long ldx, int* flags,
                         int gen, int inverse, unsigned seed) {
    if (itemsize == 4) run<float>(n, nrhs, piv, B, rs, cs, X, ldx, flags, gen, inverse, seed);
    else run<double>(n, nrhs, piv, B, rs, cs, X, ldx, flags, gen, inverse, seed);
}
"""


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    lib = kernel_emulation.build(tmp_path_factory, "permute", _DRIVER)
    lib.perm_run.argtypes = ([ctypes.c_int] * 3 + [ctypes.c_void_p] * 2 + [ctypes.c_longlong] * 2
                             + [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p,
                                ctypes.c_int, ctypes.c_int, ctypes.c_uint])
    return lib


def lapack_pivots(rng, n):
    """Pivots as an LU makes them (piv[k] >= k), some repeated, some k itself."""
    piv = np.array([rng.integers(k, n) if rng.random() < 0.7 else k for k in range(n)])
    return piv.astype(np.int32)


def run_emulated(lib, piv, b, transpose=False, inverse=False):
    """The kernel on b (n x nrhs, read through its strides; transpose: an F-ordered view):
    (X, flags) with X row-major; asserts nothing past X was written."""
    n, nrhs = b.shape
    src = np.asfortranarray(b) if transpose else np.ascontiguousarray(b)
    size = b.dtype.itemsize
    rs, cs = src.strides[0] // size, src.strides[1] // size
    pad = 8
    x = np.full(n * nrhs + pad, -3.5, b.dtype)
    flags = np.array([5, 5], np.int32)
    piv = np.ascontiguousarray(piv, np.int32)
    lib.perm_run(size, n, nrhs, piv.ctypes.data, src.ctypes.data, rs, cs, x.ctypes.data, nrhs,
                 flags.ctypes.data, 9, int(inverse), 1)
    assert (x[n * nrhs:] == -3.5).all()
    return x[:n * nrhs].reshape(n, nrhs), flags


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,nrhs", [(1, 1), (2, 1), (31, 3), (32, 1), (33, 16), (700, 2),
                                    (1031, 1)])
def test_emulated_matches_laswp(emulated, rng, dtype, n, nrhs):
    piv = lapack_pivots(rng, n)
    b = rng.standard_normal((n, nrhs)).astype(dtype)
    for transpose in (False, True):
        x, flags = run_emulated(emulated, piv, b, transpose)
        np.testing.assert_array_equal(x, laswp_reference(b.copy(), piv))
        assert (flags == 5).all()
        ref, bad, nonfinite = permute.reference(piv, b)
        np.testing.assert_array_equal(x, ref)
        assert not bad and not nonfinite
        x, flags = run_emulated(emulated, piv, b, transpose, inverse=True)
        np.testing.assert_array_equal(x, laswp_reference(b.copy(), piv, True))
        np.testing.assert_array_equal(x, permute.reference(piv, b, inverse=True)[0])


@pytest.mark.parametrize("pattern", ["last", "shift", "any", "chunk"])
def test_emulated_conflicting_chunks(emulated, rng, pattern):
    """Interchanges of one chunk of 32 that share rows run in order: every row swapped with
    the last; each with the next (a chain through the whole chunk); pivots anywhere in
    [0, n), below k included; pivots within the chunk."""
    n = 200
    k = np.arange(n)
    piv = {"last": np.full(n, n - 1), "shift": np.minimum(k + 1, n - 1),
           "any": rng.integers(0, n, n), "chunk": k // 32 * 32 + rng.integers(0, 32, n)}[pattern]
    piv = np.minimum(piv, n - 1).astype(np.int32)
    b = rng.standard_normal((n, 3))
    x, flags = run_emulated(emulated, piv, b)
    np.testing.assert_array_equal(x, laswp_reference(b.copy(), piv))
    assert (flags == 5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_emulated_flags(emulated, rng, dtype):
    n = 100
    piv = lapack_pivots(rng, n)
    b = rng.standard_normal((n, 2)).astype(dtype)
    for k, value in ((0, -1), (57, n), (99, 10**6)):       # out of range: skipped, flagged
        bad = piv.copy()
        bad[k] = value
        x, flags = run_emulated(emulated, bad, b)
        ref, was_bad, _ = permute.reference(bad, b)
        assert was_bad and flags[0] == 9 and flags[1] == 5
        np.testing.assert_array_equal(x, ref)
    for value in (np.nan, np.inf, -np.inf):
        c = b.copy()
        c[37, 1] = value
        x, flags = run_emulated(emulated, piv, c)
        assert flags[0] == 5 and flags[1] == 9
        np.testing.assert_array_equal(np.isnan(x), np.isnan(permute.reference(piv, c)[0]))
    piv_back = np.arange(n, dtype=np.int32)[::-1].copy()    # pivots below k are interchanges too
    x, flags = run_emulated(emulated, piv_back, b)
    np.testing.assert_array_equal(x, laswp_reference(b.copy(), piv_back))


def test_names_and_limits(monkeypatch):
    assert permute.KERNEL_NAMES == ("permute_rows<float>", "permute_rows<double>")
    monkeypatch.setattr(permute.device, "max_shared_per_block", lambda *a: 227 * 1024)
    assert permute.max_rows() == 227 * 256
    assert kernel_emulation.launch_format("permute", "permute_rows") == permute._SPECS


@pytest.mark.gpu
@pytest.mark.parametrize("element", [F32, F64])
@pytest.mark.parametrize("n,nrhs", [(1, 1), (8192, 1), (1031, 16), (40000, 2)])
def test_gpu_matches_laswp(cp, rng, element, n, nrhs):
    if n > permute.max_rows():
        pytest.skip(f"this device's block holds {permute.max_rows()} rows")
    piv = lapack_pivots(rng, n)
    b = rng.standard_normal((nrhs, n)).astype(element.dtype).T     # an F-ordered view
    db, dpiv = cp.asarray(b.T).T, cp.asarray(piv)
    x = cp.full((n, nrhs), np.nan, element.dtype)
    flags = mapped.flags()
    gen = flags.next_gen()
    size = element.itemsize
    permute.permute_rows_ptr(n, nrhs, dpiv.data.ptr, db.data.ptr, db.strides[0] // size,
                             db.strides[1] // size, x.data.ptr, nrhs, flags.ptr, gen, element)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(x), laswp_reference(b.copy(), piv))
    assert flags.read(gen) == (False, False)
    gen = flags.next_gen()
    x = permute.permute_rows(db, dpiv, flags, gen, inverse=True)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(x), laswp_reference(b.copy(), piv, True))
    assert flags.read(gen) == (False, False)
