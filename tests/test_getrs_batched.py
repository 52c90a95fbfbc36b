"""Solves with a stack of LU factors (kernels/getrs_batched.cu, gpulinalg/lu/getrs_batched.py):
the kernel emulated on the CPU bit for bit against its NumPy model, the model against SciPy,
and the GPU."""

import ctypes
import dataclasses

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg import tuning
from gpulinalg.core.element import exact
from gpulinalg.lu import getrs_batched as gb
from gpulinalg.lu.batched import reference as getrf_reference

import kernel_emulation
from array_helpers import assert_same_bits

_DRIVER = r"""
template <typename T, int NMAX>
void run(int batch, int n, int nrhs, const void* lu, const int* piv, void* B, int trans,
         int* flags, unsigned seed) {
    const long long warps = (long long)batch * nrhs;
    emu::run_blocks((int)((warps + GETRS_WARPS - 1) / GETRS_WARPS), 32 * GETRS_WARPS, seed, 0,
                    [=]() {
        getrs_batched<T, NMAX>(batch, n, nrhs, static_cast<const T*>(lu), piv,
                               static_cast<T*>(B), trans, flags, 7);
    });
}
template <typename T, int NMAX>
void run_gecon(int batch, int n, const void* lu, const int* piv, double* est, unsigned seed) {
    emu::run_blocks((batch + GETRS_WARPS - 1) / GETRS_WARPS, 32 * GETRS_WARPS, seed, 0, [=]() {
        gecon_batched<T, NMAX>(batch, n, static_cast<const T*>(lu), piv, est, 1.0 / n,
                               1.0 / (n > 1 ? n - 1 : 1));
    });
}
template <typename T, int R>
void run_tiled(int batch, int n, int nrhs, const void* lu, const int* piv, void* B, int trans,
               long smem, int* flags, unsigned seed) {
    emu::run_blocks(batch * ((nrhs + R - 1) / R), 32, seed, smem, [=]() {
        getrs_tiled<T, R>(batch, n, nrhs, static_cast<const T*>(lu), piv, static_cast<T*>(B),
                          trans, flags, 7);
    });
}
extern "C" int tiled_run(int itemsize, int r, int batch, int n, int nrhs, const void* lu,
                         const int* piv, void* B, int trans, long smem, int* flags,
                         unsigned seed) {
#define TCASE(T, N) if (sizeof(T) == (size_t)itemsize && r == N) \
    { run_tiled<T, N>(batch, n, nrhs, lu, piv, B, trans, smem, flags, seed); return 0; }
    TCASES
    return 1;
}
extern "C" int gecon_run(int itemsize, int nmax, int batch, int n, const void* lu,
                         const int* piv, double* est, unsigned seed) {
#define GCASE(T, N) if (sizeof(T) == (size_t)itemsize && nmax == N) \
    { run_gecon<T, N>(batch, n, lu, piv, est, seed); return 0; }
    GCASES
    return 1;
}
extern "C" int grs_run(int itemsize, int nmax, int batch, int n, int nrhs, const void* lu,
                       const int* piv, void* B, int trans, int* flags, unsigned seed) {
#define CASE(T, N) if (sizeof(T) == (size_t)itemsize && nmax == N) \
    { run<T, N>(batch, n, nrhs, lu, piv, B, trans, flags, seed); return 0; }
    CASES
    return 1;
}
"""


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    def cases(kernel, macro):
        return " ".join(f"{macro}({name[name.index('<') + 1:-1]})" for name in gb.KERNEL_NAMES
                        if name.startswith(kernel + "<"))
    lib = kernel_emulation.build(tmp_path_factory, "getrs_batched",
                                 _DRIVER.replace("GCASES", cases("gecon_batched", "GCASE"))
                                 .replace("TCASES", cases("getrs_tiled", "TCASE"))
                                 .replace("CASES", cases("getrs_batched", "CASE")))
    lib.gecon_run.argtypes = ([ctypes.c_int] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_uint])
    lib.tiled_run.argtypes = ([ctypes.c_int] * 5 + [ctypes.c_void_p] * 3
                              + [ctypes.c_int, ctypes.c_long, ctypes.c_void_p, ctypes.c_uint])
    lib.grs_run.argtypes = ([ctypes.c_int] * 5 + [ctypes.c_void_p] * 3
                            + [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint])
    return lib


def factors(rng, batch, n, dtype):
    """A random stack, its factors by the batched LU's model (the kernel's own), pivots."""
    a = rng.standard_normal((batch, n, n)).astype(dtype)
    lu, piv, info = getrf_reference(a)
    assert not info.any()
    return a, lu, piv


_GEN = 7        # the drivers' generation: a kernel's check stores it to its flag word


def run_emulated(lib, lu, piv, b, nmax=None, trans=0, flags=None):
    """getrs_batched emulated: the solution; `flags` (a zeroed int32 pair) gets its checks."""
    batch, n, nrhs = b.shape
    nmax = nmax or next(s for s in gb.NMAX_SHAPES if s >= n)
    x = np.ascontiguousarray(b).copy()
    lu = np.ascontiguousarray(lu)
    piv = np.ascontiguousarray(piv, np.int32)
    flags = np.zeros(2, np.int32) if flags is None else flags
    assert lib.grs_run(lu.dtype.itemsize, nmax, batch, n, nrhs, lu.ctypes.data,
                       piv.ctypes.data, x.ctypes.data, trans, flags.ctypes.data, 1) == 0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,nrhs", [(1, 1), (2, 3), (31, 1), (32, 2), (33, 1), (64, 1),
                                    (65, 2), (100, 1), (128, 1)])
def test_emulated_matches_model(emulated, rng, dtype, n, nrhs):
    batch = 3 if n > 64 else 5
    a, lu, piv = factors(rng, batch, n, dtype)
    b = rng.standard_normal((batch, n, nrhs)).astype(dtype)
    for trans in (0, 1):
        x = run_emulated(emulated, lu, piv, b, trans=trans)
        assert_same_bits(x, gb.reference(lu, piv, b, trans))


def test_emulated_larger_template(emulated, rng):
    """An order below the template's NMAX (rows past n idle) gives the same bits."""
    a, lu, piv = factors(rng, 4, 20, np.float64)
    b = rng.standard_normal((4, 20, 2))
    for nmax in gb.NMAX_SHAPES:
        assert_same_bits(run_emulated(emulated, lu, piv, b, nmax), gb.reference(lu, piv, b))


def run_tiled(lib, lu, piv, b, r, trans=0, flags=None):
    """getrs_tiled emulated: the solution; `flags` (a zeroed int32 pair) gets its checks."""
    batch, n, nrhs = b.shape
    x = np.ascontiguousarray(b).copy()
    lu = np.ascontiguousarray(lu)
    piv = np.ascontiguousarray(piv, np.int32)
    smem = gb.tiled_shared_bytes(n, r, exact(lu.dtype))
    flags = np.zeros(2, np.int32) if flags is None else flags
    assert lib.tiled_run(lu.dtype.itemsize, r, batch, n, nrhs, lu.ctypes.data,
                         piv.ctypes.data, x.ctypes.data, trans, smem, flags.ctypes.data, 1) == 0
    return x


def assert_solves(x, a, b, trans):
    """Each system's normwise backward error ||b - op(A) x|| / (||A|| ||x|| + ||b||) (inf-norms,
    float64) within 4 n eps of the factors' dtype (getrs_tiled sums its products by tiles, the
    model by columns: the bits differ)."""
    n = a.shape[-1]
    bound = 4 * n * np.finfo(a.dtype).eps
    for i in range(len(x)):
        op = a[i].astype(np.float64).T if trans else a[i].astype(np.float64)
        xi, bi = x[i].astype(np.float64), b[i].astype(np.float64)
        r = np.abs(bi - op @ xi).max()
        scale = np.abs(op).sum(axis=1).max() * np.abs(xi).max() + np.abs(bi).max()
        assert r <= bound * scale, (i, r / scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,nrhs,r", [(1, 1, 1), (33, 2, 1), (64, 1, 1), (129, 1, 1),
                                      (150, 9, 8), (97, 8, 8)])
def test_emulated_tiled(emulated, rng, dtype, n, nrhs, r):
    """getrs_tiled (orders past the registers' 128; any order runs) solves as the model."""
    batch = 2
    a, lu, piv = factors(rng, batch, n, dtype)
    b = rng.standard_normal((batch, n, nrhs)).astype(dtype)
    for trans in (0, 1):
        assert_solves(run_tiled(emulated, lu, piv, b, r, trans), a, b, trans)


@pytest.mark.parametrize("tiled", [False, True])
def test_emulated_checks(emulated, rng, tiled):
    """Both kernels flag a pivot outside [0, n) (word 0, its interchange skipped: no access
    outside the arrays) and an inf or NaN in B (word 1), and nothing for good input."""
    n = 40
    a, lu, piv = factors(rng, 3, n, np.float64)
    b = rng.standard_normal((3, n, 2))

    def flags_of(piv, b):
        flags = np.zeros(2, np.int32)
        if tiled:
            run_tiled(emulated, lu, piv, b, 1, flags=flags)
        else:
            run_emulated(emulated, lu, piv, b, flags=flags)
        return list(flags)

    assert flags_of(piv, b) == [0, 0]
    bad = piv.copy()
    bad[1, 5] = n
    bad[2, 0] = -1
    assert flags_of(bad, b) == [_GEN, 0]
    nan = b.copy()
    nan[2, 17, 1] = np.nan
    assert flags_of(piv, nan) == [0, _GEN]
    inf = b.copy()
    inf[0, 0, 0] = -np.inf
    assert flags_of(bad, inf) == [_GEN, _GEN]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_model_solves_like_scipy(rng, dtype):
    a, lu, piv = factors(rng, 6, 40, dtype)
    b = rng.standard_normal((6, 40, 3)).astype(dtype)
    for trans in (0, 1):
        x = gb.reference(lu, piv, b, trans)
        for i in range(6):
            ref = sl.lu_solve((lu[i].astype(np.float64), piv[i]), b[i].astype(np.float64),
                              trans=trans)
            tol = 1e-3 if dtype == np.float32 else 1e-10
            np.testing.assert_allclose(x[i], ref, rtol=0, atol=tol * max(1, np.abs(ref).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 7, 32, 33, 64, 100, 128])
def test_emulated_condition_estimate(emulated, rng, dtype, n):
    """The kernel's xlacn2 (one warp per matrix) against the stack version in NumPy (the
    same steps, its sums in another order) and LAPACK's dgecon."""
    from gpulinalg.lu import getrs, stacked
    batch = 6
    a = np.stack([rng.standard_normal((n, n)) @ np.diag(np.logspace(0, -k, n))
                  for k in range(batch)]).astype(dtype)
    lu, piv, info = getrf_reference(a)
    assert not info.any()
    lu, piv = np.ascontiguousarray(lu), np.ascontiguousarray(piv, np.int32)
    est = np.zeros(batch)
    nmax = next(s for s in gb.NMAX_SHAPES if s >= n)
    assert emulated.gecon_run(lu.dtype.itemsize, nmax, batch, n, lu.ctypes.data,
                              piv.ctypes.data, est.ctypes.data, 1) == 0
    model = getrs.inverse_norm1(
        lambda x, t: stacked.getrs_stack(np, lu, piv, x[:, :, None], 2 * t)[:, :, 0], batch, n,
        np, dtype)
    np.testing.assert_allclose(est, model, rtol=1e-4 if dtype == np.float32 else 1e-12)
    for i in range(batch):
        rc, _ = sl.lapack.dgecon(np.asfortranarray(lu[i], np.float64), 1.0, norm="1")
        assert 1 / (3 * rc) <= est[i] <= 3 / rc      # ||A^-1||_1 as dgecon estimates it


def test_names():
    assert gb.KERNEL_NAMES == (tuple(f"{k}<{t},{n}>" for k in ("getrs_batched", "gecon_batched")
                                     for t in ("float", "double") for n in (32, 64, 128))
                               + tuple(f"getrs_tiled<{t},{r}>" for t in ("float", "double")
                                       for r in (1, 8)))
    src = kernel_emulation.kernel_source("getrs_batched")
    assert f"#define GRT_MAXN {gb.MAX_ORDER}\n" in src
    assert f"#define GRT_PITCH {gb.PITCH}\n" in src
    for kernel, spec in gb._SPECS.items():
        assert kernel_emulation.launch_format("getrs_batched", kernel) == spec


def gpu_solves(cp, rng, dtype, batch, n, nrhs, register_max_n):
    """(a, lu, piv, b, x, trans) for trans 0 and 1: a random stack's factors (the model's) and
    x from getrs_batched_ptr on the GPU under a table whose stack_solve_register_max_n is
    register_max_n (which kernel runs)."""
    element = exact(np.dtype(dtype))
    table = dataclasses.replace(tuning.current(element=element),
                                stack_solve_register_max_n=register_max_n)
    a, lu, piv = factors(rng, batch, n, dtype)
    b = rng.standard_normal((batch, n, nrhs)).astype(dtype)
    dlu, dpiv = cp.asarray(lu), cp.asarray(piv)
    for trans in (0, 1):
        db = cp.asarray(b)
        gb.getrs_batched_ptr(batch, n, nrhs, dlu.data.ptr, dpiv.data.ptr, db.data.ptr,
                             element, trans, table=table)
        yield a, lu, piv, b, cp.asnumpy(db), trans


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,n,nrhs", [(1, 1, 1), (1000, 8, 1), (37, 33, 5), (300, 128, 2),
                                          (5, 100, 100)])
def test_gpu_matches_model(cp, rng, dtype, batch, n, nrhs):
    """getrs_batched (every order up to 128 in registers: an explicit table) bit for bit."""
    for a, lu, piv, b, x, trans in gpu_solves(cp, rng, dtype, batch, n, nrhs, gb.REGISTER_ORDER):
        assert_same_bits(x, gb.reference(lu, piv, b, trans))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,n,nrhs", [(3, 129, 1), (40, 300, 3), (7, 515, 8),
                                          (4, 1024, 20), (50, 1, 1), (30, 33, 9), (9, 128, 2)])
def test_gpu_tiled(cp, rng, dtype, batch, n, nrhs):
    """getrs_tiled on the GPU against the model, past the registers' 128 and (an explicit
    table: no order in registers) at small orders."""
    for a, lu, piv, b, x, trans in gpu_solves(cp, rng, dtype, batch, n, nrhs, 0):
        assert_solves(x, a, b, trans)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 33, 128])
def test_gpu_condition_estimate(cp, rng, dtype, n):
    """The kernel's estimates on the GPU against the stack estimator in NumPy."""
    from gpulinalg.core.element import exact
    from gpulinalg.lu import getrs, stacked
    a, lu, piv = factors(rng, 200, n, dtype)
    est = cp.zeros(200)
    dlu, dpiv = cp.asarray(lu), cp.asarray(piv)
    gb.inverse_norm1_ptr(200, n, dlu.data.ptr, dpiv.data.ptr, est.data.ptr,
                         exact(np.dtype(dtype)))
    model = getrs.inverse_norm1(
        lambda x, t: stacked.getrs_stack(np, lu, piv, x[:, :, None], 2 * t)[:, :, 0], 200, n,
        np, dtype)
    np.testing.assert_allclose(cp.asnumpy(est), model, rtol=1e-3 if dtype == np.float32
                               else 1e-10)
