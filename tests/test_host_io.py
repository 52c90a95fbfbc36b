"""Host matrices through pinned staging (gpulinalg/core/host_io.py): the one-GPU packing on
the CPU, the transfers and the LU of NumPy input on the GPU."""

import contextlib
import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gpulinalg
from gpulinalg import tuning
from gpulinalg.core import host_io as _host_io


def _layouts(rng, m, n):
    """The host inputs a caller may pass: C, F, a strided block, float16, int16."""
    base = rng.standard_normal((m + 3, 2 * n + 1)).astype(np.float32)
    c = np.ascontiguousarray(base[:m, :n])
    return {"C": c, "F": np.asfortranarray(c), "strided": base[1:m + 1, 1:2 * n + 1:2],
            "float16": c.astype(np.float16),
            "int16": rng.integers(-300, 300, (m, n)).astype(np.int16)}


@pytest.mark.parametrize("m,n", [(9, 7), (1, 5), (6, 1)])
@pytest.mark.parametrize("threads,min_bytes", [(3, 1 << 20), (3, 1)])
def test_one_gpu_pack(rng, m, n, threads, min_bytes):
    """One device's views cover whole rows: packing a block of rows of any layout and dtype
    gives those rows as row-major float32, and unpacking writes them back in place (in one
    part, or split over the threads)."""
    with ThreadPoolExecutor(3) as pool:
        for name, h in _layouts(rng, m, n).items():
            r0, r1 = m // 3, m
            buf = np.full((r1 - r0, n), np.nan, np.float32)
            _host_io._pack(h[r0:r1], buf, _host_io.whole_rows, True, pool, threads, min_bytes)
            assert np.array_equal(buf, h[r0:r1].astype(np.float32)), name
            out = np.full((m, n), np.nan, np.float32)
            _host_io._pack(out[r0:r1], buf, _host_io.whole_rows, False, pool, threads,
                           min_bytes)
            assert np.array_equal(out[r0:r1], buf) and np.isnan(out[:r0]).all(), name


@pytest.mark.parametrize("m,n", [(8192, 8192), (100, 100), (3, 100000), (100000, 3)])
@pytest.mark.parametrize("table", [tuning.SM90, dataclasses.replace(
    tuning.SM90, staging_bytes_one=1 << 20, staging_parts=3, pack_threads_one=2)])
@pytest.mark.parametrize("size", [4, 8])
def test_one_gpu_staging_size(m, n, table, size):
    """At least one row a buffer; else at most staging_bytes_one and a staging_parts-th of
    the matrix, so that packing and copying overlap; pack_threads_one threads."""
    b, _, threads = _host_io._one_gpu(m, n, size, table)
    assert threads == table.pack_threads_one
    assert b >= size * n
    if size * n <= size * m * n // table.staging_parts:
        assert b <= min(table.staging_bytes_one, size * m * n // table.staging_parts)


@pytest.mark.parametrize("shape", [(1000, 1025), (7, 3000), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prefault_touches_every_page(shape, dtype):
    """One write of 0 at every page start (every _PAGE_BYTES-th byte), nothing else; below
    staged_min_bytes nothing at all."""
    out = np.full(shape, np.nan, dtype)
    with tuning.override(dataclasses.replace(tuning.current(), staged_min_bytes=0)):
        _host_io.prefault(out)()
    flat = out.reshape(-1)
    touched = np.zeros(flat.size, bool)
    touched[::_host_io._PAGE_BYTES // out.itemsize] = True
    assert (flat[touched] == 0).all() and np.isnan(flat[~touched]).all()
    out = np.full(shape, np.nan, dtype)
    with tuning.override(dataclasses.replace(tuning.current(), staged_min_bytes=out.nbytes + 1)):
        _host_io.prefault(out)()
        new, ready = _host_io.result_array(shape, dtype)
    assert np.isnan(out).all()
    ready()
    assert new.shape == shape and new.dtype == dtype and new.flags.c_contiguous


@pytest.fixture
def force_staging():
    """force_staging(nbytes): the staged path for every size, through buffers of about
    `nbytes`, for the rest of the test (a tuning override)."""
    with contextlib.ExitStack() as stack:
        yield lambda nbytes: stack.enter_context(tuning.override(dataclasses.replace(
            tuning.current(), staged_min_bytes=0, staging_bytes_one=nbytes)))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n", [(257, 131), (1, 300), (300, 1)])
@pytest.mark.parametrize("staging", [4 * 64, 4 * 300 * 5, 1 << 25])
def test_upload_download(cp, rng, force_staging, m, n, staging):
    """Every layout and dtype up and back, in one buffer or many (odd last chunk)."""
    force_staging(staging)
    for name, h in _layouts(rng, m, n).items():
        x = _host_io.upload(cp, h)
        assert x.flags.c_contiguous and x.dtype == np.float32
        np.testing.assert_array_equal(cp.asnumpy(x), h.astype(np.float32), err_msg=name)
        back = _host_io.download(cp, x)
        assert back.flags.c_contiguous
        np.testing.assert_array_equal(back, h.astype(np.float32), err_msg=name)
        # layout=True keeps an F-ordered input F-ordered (as cupy.asarray does), and its
        # download comes back F-ordered (as cupy.asnumpy gives it).
        y = _host_io.upload(cp, h, layout=True)
        f_only = h.flags.f_contiguous and not h.flags.c_contiguous
        assert y.flags.f_contiguous if f_only else y.flags.c_contiguous, name
        np.testing.assert_array_equal(cp.asnumpy(y), h.astype(np.float32), err_msg=name)
        back = _host_io.download(cp, y)
        assert back.flags.f_contiguous if f_only else back.flags.c_contiguous, name
        np.testing.assert_array_equal(back, h.astype(np.float32), err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("staging", [4 * 64, 1 << 25, None])
def test_download_into_out(cp, rng, force_staging, staging):
    """download(x, out=): straight into a C, F or row-strided float32 host array (through
    the staging, or the plain copy below staged_min_bytes: staging None); the rest of the
    array it is a view of untouched; a wrong shape or dtype raises."""
    if staging is not None:
        force_staging(staging)
    m, n = 257, 131
    h = rng.standard_normal((m, n)).astype(np.float32)
    x = cp.asarray(h)
    base = np.full((m + 2, 2 * n + 3), -7.0, np.float32)
    outs = {"C": np.zeros((m, n), np.float32), "F": np.zeros((m, n), np.float32, order="F"),
            "strided": base[1:m + 1, 2:2 + n]}
    for name, out in outs.items():
        assert _host_io.download(cp, x, out=out) is out
        np.testing.assert_array_equal(out, h, err_msg=name)
    assert (base[0] == -7).all() and (base[m + 1] == -7).all() and (base[:, n + 2:] == -7).all()
    assert (base[:, :2] == -7).all()
    for bad in (np.zeros((m, n + 1), np.float32), np.zeros((m, n), np.float64)):
        with pytest.raises(ValueError, match="out must be float32"):
            _host_io.download(cp, x, out=bad)


@pytest.mark.gpu
def test_download_waits_for_the_current_stream(cp, force_staging):
    """A download follows the work the caller's stream has queued (not what the buffer held
    before): the result of a product still running when the download is called."""
    force_staging(4 * 512 * 16)
    big = cp.full((4096, 4096), 0.5, np.float32)
    cp.cuda.runtime.deviceSynchronize()
    with cp.cuda.Stream(non_blocking=True):
        x = cp.full((512, 512), -1.0, np.float32)
        x[...] = (big @ big)[:512, :512]   # each element 4096 * 0.25
        got = _host_io.download(cp, x)
    assert (got == 1024.0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["C", "F", "strided", "float16", "int16"])
def test_lu_factor_numpy_staged(cp, rng, force_staging, layout):
    """NumPy input through the staging: the same factors and pivots as the CuPy input of the
    same matrix, NumPy out; the caller's array unchanged."""
    force_staging(4 * 300 * 7)
    h = _layouts(rng, 300, 300)[layout]
    keep = h.copy()
    lu, piv = gpulinalg.lu_factor(h)
    lu_d, piv_d = gpulinalg.lu_factor(cp.asarray(h.astype(np.float32)))
    assert isinstance(lu, np.ndarray) and isinstance(piv, np.ndarray)
    np.testing.assert_array_equal(lu, cp.asnumpy(lu_d))
    np.testing.assert_array_equal(piv, cp.asnumpy(piv_d))
    np.testing.assert_array_equal(h, keep)
    p, low, up = gpulinalg.lu(h)
    a = h.astype(np.float64)
    err = np.linalg.norm(p @ low @ up - a) / (np.linalg.norm(a) * 300 * np.finfo(np.float32).eps)
    assert err < 1.0


@pytest.mark.gpu
def test_lu_factor_numpy_result_memory(cp, rng, force_staging):
    """The factors of a NumPy input come back into a new array (its pages faulted in
    beforehand), or with overwrite_a into a C-ordered float32 input itself; an F-ordered one
    is never modified.  The same values every way."""
    force_staging(4 * 300 * 7)
    a = rng.standard_normal((300, 300)).astype(np.float32)
    want = cp.asnumpy(gpulinalg.lu_factor(cp.asarray(a))[0])
    keep = a.copy()
    lu, _ = gpulinalg.lu_factor(a)
    assert not np.shares_memory(lu, a)
    np.testing.assert_array_equal(a, keep)
    np.testing.assert_array_equal(lu, want)
    f = np.asfortranarray(a)
    lu_f, _ = gpulinalg.lu_factor(f, overwrite_a=True)
    np.testing.assert_array_equal(f, keep)
    np.testing.assert_array_equal(lu_f, want)
    lu_in, _ = gpulinalg.lu_factor(a, overwrite_a=True)
    assert np.shares_memory(lu_in, a)
    np.testing.assert_array_equal(a, want)


@pytest.mark.gpu
@pytest.mark.parametrize("overwrite_a", [False, True])
def test_lu_factor_numpy_non_finite_checked_on_gpu(cp, rng, force_staging, overwrite_a):
    """One GPU checks the uploaded copy: a NaN or inf still raises the host check's
    ValueError and leaves the caller's array as it was."""
    force_staging(4 * 200 * 9)
    for value in (np.nan, np.inf):
        a = rng.standard_normal((200, 200)).astype(np.float32)
        a[150, 7] = value
        keep = a.copy()
        with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
            gpulinalg.lu_factor(a, overwrite_a=overwrite_a)
        np.testing.assert_array_equal(a, keep)
        lu, _ = gpulinalg.lu_factor(a, check_finite=False)   # no hang, no error
        assert lu.shape == a.shape
