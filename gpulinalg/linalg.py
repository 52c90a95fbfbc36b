"""LU decomposition on the GPU, SciPy-compatible: lu_factor, lu, lu_solve."""

import warnings
from functools import partial

import numpy as np

from .core import arrays as _arrays
from .core import host_io as _host_io
from .lu import graph as _lu_graph
from .core.backend import cupy, gpu_available
from .lu.driver import INV_THRESHOLD, CpuPanel, default_block_size, getrf
from .layout.laswp import laswp_reference
from .lu.steps import CupyOps, workspace_bytes
from .testing.emulation import NumpyOps

__all__ = ["lu", "lu_factor", "lu_solve"]

_PANELS = ("auto", "cpu", "gpu")
_NONFINITE = "array must not contain infs or NaNs"


def _linalg_warning():
    from scipy.linalg import LinAlgWarning
    return LinAlgWarning


# ------------------------------------------------------------------------ validation

def _check_devices(devices):
    """None (one GPU, the current one), a count >= 1, or distinct device ids; returns the
    number of devices asked for (1 for None)."""
    if devices is None:
        return 1
    def is_int(x):
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
    if is_int(devices):
        if devices < 1:
            raise ValueError(f"devices must be at least 1, got {devices}")
        return int(devices)
    try:
        ids = list(devices)
    except TypeError:
        raise TypeError(f"devices must be None, a count or a sequence of device ids, "
                        f"got {devices!r}") from None
    if not ids or not all(is_int(i) and i >= 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"devices must be distinct non-negative device ids, got {devices!r}")
    return len(ids)


def _device_ids(devices, cp):
    """The GPUs of a multi-device factorization (a count n: devices 0..n-1), checked against
    the machine; None where the single-device path applies (one GPU, the current one)."""
    count = cp.cuda.runtime.getDeviceCount()
    ids = (tuple(range(devices)) if isinstance(devices, (int, np.integer))
           else tuple(int(i) for i in devices))
    if max(ids) >= count:
        raise ValueError(f"devices {ids} asked for, but this machine has {count} GPU(s)")
    return None if ids == (cp.cuda.Device().id,) else ids


# precision="auto" (the default): 3xTF32 trailing updates on Hopper (wgmma) for m*n >=
# AUTO_TC_MIN_MN, FP32 updates below and elsewhere.  Measured on the H100, GPU panel, same run
# as cuSOLVER (docs/performance.md): 3xTF32 vs FP32 updates 1.98x vs 1.45x cuSOLVER at 16384^2,
# 2.05x vs 1.22x at 32768^2, 1.68x vs 1.45x at 16384 x 8192, 1.77x vs 1.53x at 8192 x 16384,
# equal at 8192^2 and 4096^2, 1.21x vs 1.31x at 2048^2; backward errors equal (9.8e-5 vs
# 1.1e-4 at 32768^2).  With the pipelined row leaf (`lu_ab.py 4096,6144,8192 --vary
# _decomp_lu.AUTO_TC_MIN_MN=134217728,1`, 3 rounds): 10.12 / 10.20 ms, 16.15 / 16.86, 24.38
# / 23.91 (FP32 / 3xTF32 updates): 2% at 8192^2, within the rounds' spread, so kept.  With
# the EARLY row leaf (twenty-fourth session, the same command, `=134217728,1`): 4096 10.01 /
# 10.23 ms, 6144 15.25 / 15.68, 8192 23.80 / 22.52 (3xTF32 faster in every round), so the rule
# now starts at 8192^2.
AUTO_TC_MIN_MN = 8192 * 8192
# ...and, with "auto", the GPU panel and one GPU, only while the trailing matrix has at least
# AUTO_TC_MIN_TRAILING rows or columns: the updates after that are small (the panels' chain paces
# those steps), and the tensor-core product's split pre-pass costs the look-ahead chain two
# launches that the FP32 kernel does without (44 -> 34 us a step over n = 8192's last 4096
# columns, lu_timeline).  H100, twenty-fifth session, 3 rounds each: the same cut by rows (a
# constant of that experiment, `_lu_ops.TC_MIN_ROWS` = 0 / 2048 / 4096 / 6144 / 8192) gave
# 8192 21.45 / 21.33 / 21.01 / 21.28 / 22.78 ms (8192: FP32 throughout), in two more calls
# 21.83 -> 21.19 and 22.34 -> 21.17; then `lu_ab.py 8192,16384,32768 --vary
# _decomp_lu.AUTO_TC_MIN_TRAILING=0,16777216` (then a count of elements): 8192 (nb = 128)
# 21.36 -> 20.79 ms, 16384 (nb = 512) 62.68 / 62.79, 32768 (nb = 1024: rank-1024 products,
# where 3xTF32 runs far faster than FP32) 295.8 / 298.4 -- hence only for panels of at most
# AUTO_TC_TAIL_NB columns.  The cut is by rows or columns (an element count would also cut
# the tails of tall and wide matrices, which were not measured apart: 16384 x 8192 ran 31.2
# ms with 3xTF32 throughout against 35.7 with that cut in one run, but its 3xTF32 time alone
# spread over 30.8-45.2 ms in four runs), so a tall or wide matrix keeps the tensor cores to
# the end (every trailing matrix of 16384 x 8192 has over 8192 rows).
AUTO_TC_MIN_TRAILING = 4096
AUTO_TC_TAIL_NB = 256


def _resolve_precision(precision, m, n, fp32_only=False):
    """The update arithmetic `precision` means for an m x n factorization, on one GPU or
    several (fp32_only: the host backend, where "auto" means "fp32")."""
    if precision != "auto":
        return precision
    if fp32_only or m * n < AUTO_TC_MIN_MN:
        return "fp32"
    from .gemm import wgmma as _gemm_wgmma
    return "3xtf32" if _gemm_wgmma.available() else "fp32"


def _check_options(panel, block_size, lookahead, precision="auto", devices=None):
    """Validate the LU keywords (no GPU needed); return the panel kind to use."""
    from .gemm.simt import _check_precision
    _check_precision(precision)
    _check_devices(devices)
    if not isinstance(panel, str) or panel not in _PANELS:
        raise ValueError(f"panel must be one of {_PANELS}, got {panel!r}")
    if block_size is not None and (isinstance(block_size, bool)
                                   or not isinstance(block_size, (int, np.integer))
                                   or block_size < 1):
        raise ValueError(f"block_size must be a positive integer or None, got {block_size!r}")
    if lookahead not in (0, 1) or isinstance(lookahead, float):
        raise ValueError(f"lookahead must be 0 or 1, got {lookahead!r}")
    # "auto": the GPU panel.  Measured on the H100 (docs/performance.md, same run as
    # cuSOLVER), the GPU panel beats the CPU panel at every size from 2048 to 32768 by 2-4x:
    # a 16-core host factors a 32768 x 256 panel in ~20 ms, the GPU in ~1 ms, and the host
    # panel only pays when its time hides behind the trailing update, i.e. for trailing widths
    # above ~nb * R_gpu / (2 R_cpu) ~ 30,000 columns on this machine -- where the GPU panel
    # is hidden too.  So the CPU panel is never faster here; it stays selectable ("cpu").
    return "cpu" if panel == "cpu" else "gpu"


def _panel_object(name, devices=1):
    if name == "gpu":
        from .lu.panel_gpu import GpuPanel
        return GpuPanel(devices=devices)
    # Several GPUs: the host work on the driver's thread (the gated chain is the one-GPU
    # driver's, gpulinalg/_lu.py; a worker alone does not shorten the multi-GPU steps).
    return CpuPanel(threaded=False) if devices > 1 else CpuPanel()


def _as_input(a):
    """Lists and other array_likes become NumPy arrays; arrays pass through."""
    return a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)


_ALL_FINITE = None


def _host_all_finite(x, rows=None):
    """True when a host matrix holds no inf/NaN; in blocks of rows (about 16 MiB of
    temporaries at a time, never one the size of the matrix)."""
    rows = rows or max(1, (1 << 22) // max(1, x.shape[1]))
    return all(np.isfinite(x[i:i + rows]).all() for i in range(0, x.shape[0], rows))


def _checked_on_host(ops, devices):
    """Whether a host matrix is checked for inf/NaN on the host: by the host backend, for
    several GPUs (the matrix is never whole on one) and without a GPU (checked before
    anything needs one).  One GPU checks the copy it uploads instead: on the host the check
    cost ~30 ms at 8192^2 (H100 host), more than the LU."""
    return ops == "numpy" or devices is not None or not gpu_available()


def _device_finite_flag(x):
    """A 0-d device bool: x (a CuPy array) holds no inf/NaN.  One reduction on the current
    stream, no m*n temporary, no host wait."""
    global _ALL_FINITE
    cp = cupy()
    if _ALL_FINITE is None:
        _ALL_FINITE = cp.ReductionKernel("T x", "bool y", "isfinite(x)", "a && b", "y = a",
                                         "true", "gpulinalg_all_finite")
    return _ALL_FINITE(x)


def _device_all_finite(x):
    """True when a CuPy array holds no inf/NaN (waits for the reduction)."""
    return x.size == 0 or bool(_device_finite_flag(x))


def _device_ptr(x, kind):
    return x.data.ptr if kind == "cupy" else x.data_ptr()


def _check_memory(cp, m, n, nb, copy_matrix):
    """Raise MemoryError with the numbers when matrix + workspace exceed free GPU memory."""
    matrix = 4 * m * n if copy_matrix else 0
    need = matrix + workspace_bytes(m, n, nb)
    free, total = cp.cuda.Device().mem_info
    free += cp.get_default_memory_pool().free_bytes()  # cached blocks are reusable
    if need > free:
        gib = 2.0 ** 30
        raise MemoryError(
            f"LU of a {m}x{n} float32 matrix needs {need / gib:.2f} GiB of GPU memory "
            f"(matrix copy {matrix / gib:.2f} GiB + workspace "
            f"{(need - matrix) / gib:.2f} GiB) but only {free / gib:.2f} GiB of "
            f"{total / gib:.2f} GiB are free")


# ------------------------------------------------------------------------ factorization

def _factor(a, overwrite_a, check_finite, panel, block_size, lookahead, inv_threshold,
            timeline, ops, precision, devices=None, to_host=False):
    """Validate, move to the working layout, run the driver.

    Returns (kind, xp, LU, piv, info): LU row-major float32 in xp (cupy, or numpy for the
    host test backend, and with to_host for a host input on one GPU, downloaded here into
    the input itself where overwrite_a allows, else into a new array faulted in while the
    GPU works), piv 0-based int32 NumPy.  Call inside `_arrays.launch_context`.
    """
    a = _as_input(a)
    kind = _arrays.array_kind(a)
    m, n = _arrays.check_matrix(a, "a")
    panel_name = _check_options(panel, block_size, lookahead, precision, devices)
    ndev = _check_devices(devices)
    auto = precision == "auto"
    precision = _resolve_precision(precision, m, n, ops == "numpy")
    if ops not in (None, "numpy"):
        raise ValueError(f"_ops must be None or 'numpy', got {ops!r}")
    host = finite = None
    spread = defer = late_check = False   # (device input, below)
    if kind in ("numpy", "torch_cpu") or ops == "numpy":
        host = _arrays.host_view(a if kind != "torch" else a.cpu(), "a")
        host_check = _checked_on_host(ops, devices)
        if check_finite and host_check and not _host_all_finite(host):
            raise ValueError(_NONFINITE)
    k = min(m, n)
    if block_size is not None:
        nb = int(block_size)
    elif panel_name == "gpu":   # the GPU panel's own rule (its leaf is 128 columns wide)
        from .lu.panel_gpu import default_block_size as gpu_block_size
        nb = gpu_block_size(m, n, precision, ndev)
    else:
        nb = default_block_size(m, n)
    nb = max(1, min(nb, k))
    tc_min = (AUTO_TC_MIN_TRAILING if auto and precision != "fp32" and panel_name == "gpu"
              and nb <= AUTO_TC_TAIL_NB else 0)

    # A host matrix factored where it lies: allowed, and already row-major float32.
    host_inplace = (host is not None and overwrite_a and kind == "numpy"
                    and host.dtype == np.float32 and host.flags.c_contiguous
                    and host.flags.writeable)
    if ops == "numpy":  # host test/debug backend: same driver, NumPy steps, never GPU speed
        A = host if host_inplace else np.array(host, dtype=np.float32, order="C")
        if ndev > 1:   # the multi-GPU driver on `ndev` virtual devices
            from .lu.multi import factor_host
            piv, info = factor_host(A, nb, ndev, partial(_panel_object, panel_name, devices=ndev),
                                    lookahead, inv_threshold)
        else:
            piv, info = getrf(NumpyOps(A, nb), _panel_object(panel_name), nb, lookahead,
                              inv_threshold, timeline)
        return kind, np, A, piv, info

    if host is not None and k == 0:  # empty host input: empty outputs, no GPU needed
        return kind, np, np.empty((m, n), np.float32), np.zeros(0, np.int32), 0
    cp = cupy()
    ids = _device_ids(devices, cp) if devices is not None else None
    graph = _lu_graph.eligible(m, n, panel_name, timeline, devices)   # may replay a graph
    if ids is not None and k and host is not None:
        # Several GPUs, host input: each device receives its columns from the host (the
        # whole matrix never sits on one GPU), and the factors come back into a host array:
        # the input itself (overwrite_a), else a new one; a C-ordered input is read where it
        # lies (other exact types converted chunk by chunk in the pinned staging), no host
        # copy first (4.3 GB at n = 32768).
        from .lu.multi import factor_devices
        if host_inplace:
            A = src = host
        elif host.flags.c_contiguous:
            A, src = np.empty((m, n), np.float32), host
        else:
            A = src = np.array(host, dtype=np.float32, order="C")
        piv, info = factor_devices(src, ids, nb,
                                   partial(_panel_object, panel_name, devices=len(ids)),
                                   lookahead, inv_threshold, precision, timeline, out=A)
        return kind, np, A, piv, info
    if host is not None:
        _check_memory(cp, m, n, nb, copy_matrix=True)
        # Layout: any host layout/dtype -> row-major float32 on the GPU, converted on the way
        # through pinned staging (gpulinalg/_host_io.py); checked there, its flag read last.
        A = _host_io.upload(cp, host)   # not host_view's strides: C-ordered, as LU needs
        if check_finite and not host_check:
            finite = _device_finite_flag(A)
        # The factors come back into the input itself where allowed, else into a new array
        # whose pages are faulted in meanwhile (see _host_io.result_array).
        if to_host:
            dest, ready = ((host, lambda: None) if host_inplace
                           else _host_io.result_array((m, n)))
    else:
        src = _arrays.to_device(a, kind, "a")  # a view for float32 input, else a converted copy
        owned = src.data.ptr != _device_ptr(a, kind) or src.dtype != _arrays.dtype_of(a)
        in_place = src.flags.c_contiguous and (overwrite_a or owned) and src.size > 0
        # Several GPUs, a C-ordered input to keep: the upload reads it where it lies and the
        # factors collect in a fresh matrix (factor_devices' `out`), no copy of it first.
        spread = ids is not None and not in_place and src.flags.c_contiguous and src.size > 0
        # One GPU, a C-ordered input to keep, a replay possible: the replay reads the input
        # where it lies and writes the factors into a fresh A, so no copy is made here (made
        # below if the ordinary driver runs after all).
        defer = graph and not in_place and src.flags.c_contiguous
        if check_finite and src.size:
            if in_place and not owned:
                # The caller's own memory is factored: check first, so that non-finite
                # input raises before anything changes.
                if not _device_all_finite(src):
                    raise ValueError(_NONFINITE)
            elif graph:   # the replay checks what it reads (or below, before the driver)
                late_check = True
            elif not spread:   # (spread: factor_devices runs it, `beside`)
                # A copy is factored: the check is enqueued before it, its flag is read
                # after the factorization (no host wait before it starts).
                finite = _device_finite_flag(src)
        _check_memory(cp, m, n, nb, copy_matrix=not in_place)
        if in_place:
            A = src  # factored in place: the caller allowed it, or it is our own copy
        elif spread or defer:
            A = cp.empty((m, n), dtype=np.float32)   # every element written by the home
        elif src.flags.f_contiguous and src.size > 0:
            # Layout: an F-ordered m x n array is the C-ordered n x m array src.T; transpose
            # it into a fresh row-major buffer with our kernel.
            from .layout.transpose import transpose_into
            A = cp.empty((m, n), dtype=np.float32)
            transpose_into(src.T, A)
        else:
            # Other strides (or C-order without permission to overwrite): one explicit copy;
            # ascontiguousarray would hand back the caller's C-contiguous array itself.
            A = cp.array(src, dtype=np.float32, order="C", copy=True)
    if k == 0:
        return kind, cp, A, np.zeros(0, np.int32), 0
    if ids is not None:
        # Several GPUs, device input: the columns go to the devices (from src where `spread`,
        # else from A) and come back into A.
        from .lu.multi import factor_devices

        def beside():   # the finite check of an input read in place, beside the upload
            nonlocal finite
            finite = _device_finite_flag(src)

        piv, info = factor_devices(src if spread else A, ids, nb,
                                   partial(_panel_object, panel_name, devices=len(ids)),
                                   lookahead, inv_threshold, precision, timeline, out=A,
                                   beside=beside if spread and check_finite else None)
    else:
        res = None
        if graph:   # a shape seen before: replayed from a CUDA graph (see the module)
            res = _lu_graph.factor(A, nb, precision, lookahead, inv_threshold, tc_min,
                                   src=src if defer else None)
        if res is None:
            if late_check:   # enqueued before anything overwrites what it reads
                finite = _device_finite_flag(src)
            if defer:
                A[...] = src
            piv, info = getrf(CupyOps(A, nb, precision, tc_min=tc_min),
                              _panel_object(panel_name), nb, lookahead, inv_threshold,
                              timeline)
        else:
            piv, info, read_finite = res
            if late_check:
                finite = read_finite
    back = host is not None and to_host   # one GPU, host input: back to the host here
    if back:
        ready()   # dest's pages in memory (and no pool job left on it if we raise)
    if finite is not None and not bool(finite):
        raise ValueError(_NONFINITE)
    if back:
        return kind, np, _host_io.download(cp, A, out=dest), piv, info
    return kind, cp, A, piv, info


def _out(x, kind, xp):
    """Result in the caller's kind (xp is numpy for host-only results)."""
    if xp is np:
        if kind == "torch_cpu":
            import torch
            return torch.from_numpy(np.asarray(x))
        if kind in ("cupy", "torch"):  # empty results of device inputs
            return _arrays.from_device(cupy().asarray(x), kind)
        return np.asarray(x)
    return _arrays.from_device(x, kind)


def lu_factor(a, overwrite_a=False, check_finite=True, *, panel="auto", block_size=None,
              lookahead=1, precision="auto", devices=None, _inv_threshold=INV_THRESHOLD,
              _timeline=None, _ops=None):
    """Compute the pivoted LU decomposition of a matrix on the GPU.

    The decomposition is ``A = P L U`` with P a permutation, L unit lower triangular
    (trapezoidal for m > n) and U upper triangular (trapezoidal for m < n).

    Parameters
    ----------
    a : (M, N) array_like
        NumPy/CuPy array or torch tensor (CPU or CUDA), any memory order or strides.  dtype
        float32, or a type that converts to float32 exactly (float16, bfloat16, small
        integers, bool); float64 and complex raise TypeError -- the working precision is
        float32 and the library never downcasts silently.
    overwrite_a : bool, optional
        Allow the factorization to overwrite `a`.  Honoured for C-contiguous float32 CuPy
        arrays and CUDA tensors, and for C-contiguous float32 NumPy arrays too, which then
        receive the factors (the returned `lu` shares their memory); every other input is
        never modified (copied, or with several `devices` a C-ordered input read where it
        lies).
    check_finite : bool, optional
        Check that `a` holds only finite numbers (raises ValueError otherwise).
    panel : {"auto", "cpu", "gpu"}, optional
        Where panels are factored: "cpu" is the host (LAPACK sgetrf on pinned memory);
        "gpu" is the GPU (a cooperative kernel holding the panel's rows in registers, one
        grid barrier per column; no host round trips); "auto" (default) is "gpu", which
        measured 2-4x faster than "cpu" at every size on an H100 host (see Notes).
    block_size : int, optional
        Panel width nb.  By default, with the GPU panel: 256 for min(M, N) <= 4096, 128 up
        to 8192, then 256 (512 above 16384) with FP32 updates, 512 (1024 above 24576) with
        tensor-core updates on one GPU, 256 (512 above 16384) on two GPUs, 256 (512 above
        40960) on more; with the CPU panel 128 up to 8192 and 256 above.
    lookahead : {1, 0}, optional
        Look-ahead depth: 1 factors the next panel (on its own stream) while the rest of
        the trailing matrix is updated; 0 serialises them (for comparison).
    precision : {"auto", "fp32", "3xtf32", "tf32"}, optional
        Arithmetic of the trailing updates ``A22 -= L21 U12`` (almost all of the flops), as
        in `gpulinalg.sgemm`: "auto" (default) "3xtf32" on Hopper when M*N >= 8192*8192,
        on one GPU or several (measured faster there at the same backward error), else
        "fp32"; on one GPU, with the GPU panel and panels of at most 256 columns, "auto"
        turns to "fp32" for the last, small updates (trailing matrix below 4096 rows and
        columns); "fp32" our SIMT SGEMM; "3xtf32" the tensor cores
        with the error-compensated three-product split (FP32-level accuracy); "tf32" one
        TF32 product (10-bit mantissa: a backward error ~1e3 times larger).  Panels and
        triangular solves always run in FP32.
    devices : None, int or sequence of int, optional
        GPUs to factor on: None (default) the current one; a count n the devices 0..n-1; a
        sequence the devices with those ids.  With more than one, the matrix is distributed
        in blocks of `block_size` columns, column-cyclically, each device keeping its columns
        row-major (pivoting needs no exchange between GPUs); each panel is factored by its
        owner and copied to the others (peer copies).  The result is the same as on one GPU
        and comes back where a single-GPU call returns it (the host for host input, the
        input's device otherwise).  Host input is sent to each GPU column share by share, so
        the matrix only has to fit in the GPUs' memory together.  Several GPUs pay off for
        large matrices (four H200s, FP32 updates: 2.5x one GPU at 24576^2, 3.1x at 32768^2,
        3.5x at 49152^2); below about 16384^2 the host's issuing of the distributed work
        bounds it and one GPU is faster (docs/performance.md).

    Returns
    -------
    lu : (M, N) array
        U in the upper triangle, L below the diagonal (its unit diagonal not stored);
        C-ordered, of the input's kind (NumPy in, NumPy out; CuPy in, CuPy out on the same
        device; torch in, torch out on its device).
    piv : (K,) int32 array
        ``K = min(M, N)``; row i was interchanged with row ``piv[i]`` (0-based, as
        `scipy.linalg.lu_factor`).  Same kind as `lu`.

    Raises
    ------
    ValueError
        `a` not 2-D, non-finite entries with `check_finite`, or a bad keyword.
    TypeError
        A dtype that does not convert exactly to float32.
    MemoryError
        The matrix and the workspace do not fit in free GPU memory (numbers in the message).
    CudaUnavailableError
        No CuPy or no CUDA device.

    Warns
    -----
    LinAlgWarning
        "Diagonal number %d is exactly zero. Singular matrix." (1-based, as SciPy); the
        factors are returned.

    See Also
    --------
    scipy.linalg.lu_factor : the host version this mirrors.
    lu, lu_solve

    Notes
    -----
    Blocked right-looking LU with partial pivoting after Volkov & Demmel (SC08).  The matrix
    is kept row-major on the GPU, so row interchanges (the laswp kernel) move contiguous rows.
    For each panel of nb columns: the panel is transposed on the GPU into a column-major
    buffer, copied asynchronously to pinned host memory and factored there with LAPACK
    ``sgetrf``; it comes back the same way.  The block row is then ``U12 = L11^{-1} A12``,
    computed as a multiplication by ``L11^{-1}`` (inverted on the host with ``strtri``) with
    our SGEMM when ``||L11^{-1}||_inf`` (maximum absolute row sum) is below 1e3, and with a
    triangular solve otherwise -- the multiplication is provably stable only while the norm
    of the inverse is bounded.  The trailing matrix is updated with ``A22 -= L21 U12`` (our
    SGEMM).  With look-ahead the GPU first updates the next panel's columns, which are then
    shipped to the host and factored while the GPU updates the rest of the trailing matrix
    (two CUDA streams ordered by events).  The pivot choices are LAPACK's.  The work is
    ``m n^2 - n^3/3`` flops for m >= n (``2/3 n^3`` when square).

    With the GPU panel on one GPU and ``m * n <= 2**28``, the second call of a shape
    (on the same stream, with the same keywords) captures the factorization into a CUDA
    graph and later calls replay it: the same kernels at the same stream priorities,
    bit-identical results, without the host cost of issuing ~12 launches per step (which
    bounds the small sizes and makes tall ones erratic).  The graphs keep their own
    buffers, a copy of the matrix included (at most 4 shapes and 1 GiB of device memory
    together, the newest shape always kept); set the environment variable
    ``GPULINALG_LU_GRAPHS=0`` to turn this off.
    """
    return _factor_in_context(a, overwrite_a, check_finite, panel, block_size, lookahead,
                              _inv_threshold, _timeline, _ops, _finish_factor, precision,
                              devices, to_host=True)


def _factor_in_context(a, overwrite_a, check_finite, panel, block_size, lookahead,
                       inv_threshold, timeline, ops, finish, precision="auto", devices=None,
                       to_host=False):
    """_factor, then finish(kind, xp, A, piv, info), inside the input's device context."""
    a = _as_input(a)
    kind = _arrays.array_kind(a)
    # Everything checkable without a GPU comes before cupy() is first called.
    _arrays.check_matrix(a, "a")
    _check_options(panel, block_size, lookahead, precision, devices)
    args = (overwrite_a, check_finite, panel, block_size, lookahead, inv_threshold, timeline,
            ops, precision, devices, to_host)
    if kind in ("numpy", "torch_cpu"):
        h = _arrays.host_view(a, "a")
        if check_finite and _checked_on_host(ops, devices):
            if not _host_all_finite(h):
                raise ValueError(_NONFINITE)
            args = (overwrite_a, False) + args[2:]  # checked
        if ops == "numpy" or h.size == 0:  # host backend, or an empty result: no GPU
            return finish(*_factor(a, *args))
    elif ops == "numpy":
        return finish(*_factor(a, *args))
    with _arrays.launch_context(kind, _arrays.device_of((a,))):
        return finish(*_factor(a, *args))


def _finish_factor(kind, xp, A, piv, info):
    if info > 0:
        warnings.warn(f"Diagonal number {info} is exactly zero. Singular matrix.",
                      _linalg_warning(), stacklevel=4)
    P = xp.asarray(piv, dtype=np.int32)
    return _out(A, kind, xp), _out(P, kind, xp)  # piv in the kind of lu


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False, *,
       panel="auto", block_size=None, lookahead=1, precision="auto", devices=None,
       _inv_threshold=INV_THRESHOLD, _timeline=None, _ops=None):
    """Compute the LU decomposition of a matrix with partial pivoting on the GPU.

    The decomposition satisfies ``A = P @ L @ U``; with `permute_l`, ``A = PL @ U``; with
    `p_indices`, ``A = L[P, :] @ U``.

    Parameters
    ----------
    a : (M, N) array_like
        As in `lu_factor` (kinds, layouts, dtype policy: float32, exact upcasts only).
    permute_l : bool, optional
        Return ``P @ L`` instead of P and L.
    overwrite_a : bool, optional
        As in `lu_factor`.
    check_finite : bool, optional
        Check that `a` holds only finite numbers.
    p_indices : bool, optional
        Return the permutation as row indices instead of a matrix.
    panel, block_size, lookahead, precision, devices
        As in `lu_factor`.

    Returns
    -------
    (p, l, u) or (pl, u)
        p : (M, M) float32 permutation matrix, or (M,) int32 row indices with `p_indices`
        l : (M, K) unit lower trapezoidal, ``K = min(M, N)``
        pl : (M, K) ``P @ L``
        u : (K, N) upper trapezoidal
        Of the input's kind (NumPy, CuPy on the same device, or torch).

    Raises
    ------
    ValueError, TypeError, MemoryError, CudaUnavailableError
        As `lu_factor`.  Like SciPy's `lu`, no warning is issued for a singular matrix.

    See Also
    --------
    scipy.linalg.lu : the host version this mirrors (including its empty and 1 x 1 cases).
    lu_factor, lu_solve

    Notes
    -----
    Computed with the blocked GPU LU of `lu_factor` (Volkov & Demmel; panels, look-ahead
    and block size as `lu_factor` chooses them, ``m n^2 - n^3/3`` flops for m >= n); L, U
    and P are then formed on the device.
    """
    def finish(kind, xp, A, piv, info):
        m, n = A.shape
        k = min(m, n)
        if m == 0 or n == 0:
            # SciPy's empty case: P has shape (0,) / (0, 0) whatever m is.
            L = xp.empty((m, k), np.float32)
            U = xp.empty((k, n), np.float32)
            if permute_l:
                return _out(L, kind, xp), _out(U, kind, xp)
            P = xp.empty(0, np.int32) if p_indices else xp.empty((0, 0), np.float32)
            return _out(P, kind, xp), _out(L, kind, xp), _out(U, kind, xp)
        L = xp.tril(A[:, :k], -1)
        xp.fill_diagonal(L, 1.0)
        U = xp.triu(A[:k, :])
        # Pivot base: LAPACK-style interchanges (row i <-> piv[i], 0-based) -> the
        # permutation perm with (L U)[i] = A[perm[i]]; SciPy's p is its inverse: A = L[p] U.
        perm = laswp_reference(np.arange(m), piv)
        p = np.empty(m, np.int64)
        p[perm] = np.arange(m)
        if permute_l:
            return _out(L[xp.asarray(p)], kind, xp), _out(U, kind, xp)
        if p_indices:
            # SciPy returns int64 zeros for a 1 x 1 input and int32 otherwise.
            P = xp.asarray(p, dtype=np.int64 if (m, n) == (1, 1) else np.int32)
        else:
            P = xp.zeros((m, m), np.float32)
            P[xp.arange(m), xp.asarray(p)] = 1.0
        return _out(P, kind, xp), _out(L, kind, xp), _out(U, kind, xp)

    return _factor_in_context(a, overwrite_a, check_finite, panel, block_size, lookahead,
                              _inv_threshold, _timeline, _ops, finish, precision, devices)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True, *, _ops=None):
    """Solve ``a x = b`` on the GPU, given the LU factorization of a.

    Parameters
    ----------
    lu_and_piv : (lu, piv)
        The factorization from `lu_factor` (or `scipy.linalg.lu_factor`): lu (N, N), piv
        (N,) 0-based pivot indices.
    b : (N,) or (N, NRHS) array_like
        Right-hand side(s); NumPy/CuPy/torch of the same kind as lu; dtype policy as in
        `lu_factor` (float32, exact upcasts only).
    trans : {0, 1, 2}, optional
        Solve ``a x = b`` (0), ``a^T x = b`` (1) or ``a^H x = b`` (2, the same for reals).
    overwrite_b : bool, optional
        Accepted for SciPy compatibility; b is never modified (the solve works on a
        row-major copy).
    check_finite : bool, optional
        Check that b holds only finite numbers (SciPy checks b only, and so do we).

    Returns
    -------
    x : (N,) or (N, NRHS) array
        Same shape as b, float32, of the inputs' kind.

    Raises
    ------
    ValueError
        Incompatible shapes, lu not square, non-finite b with `check_finite`, a bad `trans`.
    TypeError
        A dtype that does not convert exactly to float32, or inputs of mixed kinds.

    See Also
    --------
    scipy.linalg.lu_solve : the host version this mirrors.
    lu_factor

    Notes
    -----
    For trans = 0: the row interchanges are applied to a row-major copy of b with the laswp
    kernel, then ``L y = P b`` and ``U x = y`` are solved with triangular solves on the GPU
    (cuBLAS trsm through cupyx).  For trans = 1, 2: ``U^T`` and ``L^T`` solves, then the
    interchanges in reverse order.  ``2 n^2`` flops per right-hand side.
    """
    lu_, piv = lu_and_piv
    if trans not in (0, 1, 2) or isinstance(trans, float):
        raise ValueError(f"trans must be 0, 1 or 2, got {trans!r}")
    lu_, b = _as_input(lu_), _as_input(b)
    kind = _arrays.common_kind(lu_, b) if _ops != "numpy" else "numpy"
    n, n2 = _arrays.check_matrix(lu_, "lu")
    bshape = tuple(b.shape)
    if len(bshape) not in (1, 2):
        raise ValueError(f"b must be 1-D or 2-D, got shape {bshape}")
    _arrays.check_dtype(_arrays.dtype_of(b), "b")
    if n != bshape[0]:
        raise ValueError(f"Shapes of lu {(n, n2)} and b {bshape} are incompatible")
    if n != n2:
        raise ValueError(f"lu must be square, got shape {(n, n2)}")
    piv_h = _host_pivots(piv)
    if piv_h.shape != (n,):
        raise ValueError(f"piv must have shape ({n},), got {piv_h.shape}")
    if n and (piv_h.min() < 0 or piv_h.max() >= n):  # the laswp kernel trusts its pivots
        raise ValueError(f"piv must hold 0-based row indices in [0, {n})")
    if kind in ("numpy", "torch_cpu"):
        bh = _arrays.host_view(b, "b")
        if check_finite and not np.isfinite(bh).all():
            raise ValueError(_NONFINITE)
        check_finite = False
    if _ops == "numpy":
        import scipy.linalg
        LU = np.asarray(_arrays.host_view(lu_, "lu"), dtype=np.float32)
        X = np.array(bh, dtype=np.float32, order="C").reshape(n, -1)
        return _solve(np, scipy.linalg.solve_triangular, LU, X, piv_h, trans,
                      lambda v, p, inv: laswp_reference(v, p, inv)).reshape(bshape)
    if 0 in bshape:
        if kind in ("numpy", "torch_cpu"):
            return _out(np.empty(bshape, np.float32), kind, np)
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((lu_, b))):
        B = _arrays.to_device(b, kind, "b")
        if check_finite and not _device_all_finite(B):
            raise ValueError(_NONFINITE)
        if B.size == 0:
            return _out(cp.empty(bshape, np.float32), kind, cp)
        LU = _arrays.to_device(lu_, kind, "lu")
        from cupyx.scipy.linalg import solve_triangular
        from .layout.laswp import laswp_inplace
        # Layout: right-hand sides row-major (n x nrhs, C-order), so laswp moves whole rows.
        X = cp.array(B.reshape(n, -1), dtype=np.float32, order="C")
        P = cp.asarray(piv_h)  # 0-based absolute = relative to row 0 of X
        X = _solve(cp, solve_triangular, LU, X, P, trans,
                   lambda v, p, inv: laswp_inplace(v, p, inverse=inv))
        return _out(X.reshape(bshape), kind, cp)


def _solve(xp, trsm, LU, X, piv, trans, laswp):
    """The getrs steps; X row-major (n x nrhs), modified or replaced; returns X."""
    if trans == 0:
        laswp(X, piv, False)                                        # X = P^T b
        X = trsm(LU, X, lower=True, unit_diagonal=True)             # L y = X
        return trsm(LU, X, lower=False)                             # U x = y
    X = trsm(LU, X, trans=1, lower=False)                           # U^T y = b
    X = trsm(LU, X, trans=1, lower=True, unit_diagonal=True)        # L^T z = y
    X = xp.ascontiguousarray(X)
    laswp(X, piv, True)                                             # x = P z (reverse order)
    return X


def _host_pivots(piv):
    """piv of any kind as a host int32 vector (pivots are tiny: one copy is fine)."""
    kind = _arrays.array_kind(piv) if hasattr(piv, "shape") else "numpy"
    if kind == "cupy":
        piv = cupy().asnumpy(piv)
    elif kind.startswith("torch"):
        piv = piv.detach().cpu().numpy()
    piv = np.asarray(piv)
    if piv.dtype.kind not in "iu":
        raise TypeError(f"piv must hold integers, got dtype {piv.dtype}")
    return piv.astype(np.int32).ravel() if piv.ndim <= 1 else piv.astype(np.int32)
