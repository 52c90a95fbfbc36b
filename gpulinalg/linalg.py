"""LU decomposition on the GPU, SciPy-compatible: lu_factor, lu, lu_solve.

Each public function checks its arguments (without a GPU), returns early where nothing is to
be computed, has the LU's route decided once (gpulinalg/lu/plan.py: `make_plan`), runs it
and turns the factors into what SciPy returns.
"""

import functools
import warnings

import numpy as np

from .core import arrays as _arrays
from .core import finite as _finite
from .core.backend import cupy
from .core.element import element as _element
from .layout.laswp import laswp_reference
from .lu import getrs as _getrs
from .lu import plan as _plan
from .lu import stacked as _stacked

__all__ = ["lu", "lu_factor", "lu_solve"]

_HOST_KINDS = ("numpy", "torch_cpu")


def _linalg_warning():
    from scipy.linalg import LinAlgWarning
    return LinAlgWarning


def _as_input(a):
    """Lists and other array_likes become NumPy arrays; arrays pass through."""
    return a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)


def _host_input(a, kind, emulated):
    """The host matrix to factor (a NumPy view of the input's own dtype, checked against the
    policy), or None for device input that the GPU factors."""
    if kind in _HOST_KINDS or emulated:
        return _arrays.host_view(a.cpu() if kind == "torch" else a, "a")
    return None


def _factor(a, overwrite_a, check_finite, options, finish, to_host=False,
            backend=_plan.DEVICE):
    """finish(kind, xp, lu, piv, info) of the LU of `a` under `options` (a plan.Options) on
    `backend` (plan.DEVICE: the GPU; gpulinalg.testing.lu supplies the emulation's).

    to_host: a host input's factors come back to the host here (lu_factor).
    """
    a = _as_input(a)
    kind = _arrays.array_kind(a)
    _arrays.check_matrix(a, "a")
    # Everything checkable without a GPU comes before the GPU is asked for.
    options.check(_element(_arrays.dtype_of(a)))
    host = _host_input(a, kind, backend.emulated)
    if (host is not None and check_finite and _plan.finite_on_host(options, backend=backend)
            and not _finite.host_all_finite(host)):
        raise ValueError(_finite.NONFINITE)
    settings = dict(overwrite_a=overwrite_a, check_finite=check_finite, to_host=to_host,
                    backend=backend)
    if backend.emulated or (host is not None and host.size == 0):   # no GPU needed
        plan = _plan.make_plan(_plan.host_matrix(host, kind), options, **settings)
        return finish(kind, *backend.run(plan, host, None))
    with _arrays.launch_context(kind, _arrays.device_of((a,))):
        ids = _plan.resolve_devices(options.devices)
        if host is not None:
            src, x = None, _plan.host_matrix(host, kind)
        else:   # a view for input of the working dtype, else a converted copy
            src = _arrays.to_device(a, kind, "a")
            x = _plan.device_matrix(src, a, kind)
        plan = _plan.make_plan(x, options, device_ids=ids, **settings)
        return finish(kind, *backend.run(plan, host, src))


def _out(x, kind, xp):
    """Result in the caller's kind (xp is numpy for host-only results)."""
    if xp is np:
        if kind == "torch_cpu":
            import torch
            return torch.from_numpy(np.asarray(x))
        if kind in ("cupy", "torch"):  # results of device inputs computed on the host
            return _arrays.from_device(cupy().asarray(x), kind)
        return np.asarray(x)
    return _arrays.from_device(x, kind)


def _finish_factor(kind, xp, A, piv, info):
    """lu_factor's result: (lu, piv) in the input's kind; warns on an exactly zero pivot."""
    if info > 0:
        warnings.warn(f"Diagonal number {info} is exactly zero. Singular matrix.",
                      _linalg_warning(), stacklevel=4)
    P = xp.asarray(piv, dtype=np.int32)
    return _out(A, kind, xp), _out(P, kind, xp)  # piv in the kind of lu


def _finish_lu(permute_l, p_indices, kind, xp, A, piv, info):
    """lu's result from the factors: (p, l, u) or (pl, u), formed where the factors are."""
    m, n = A.shape
    k = min(m, n)
    # SciPy's P is real, of the factors' real dtype; a 1 x 1 input's is of the input's dtype.
    real = A.dtype if (m, n) == (1, 1) else A.real.dtype
    if m == 0 or n == 0:
        # SciPy's empty case: P has shape (0,) / (0, 0) whatever m is.
        L = xp.empty((m, k), A.dtype)
        U = xp.empty((k, n), A.dtype)
        if permute_l:
            return _out(L, kind, xp), _out(U, kind, xp)
        P = xp.empty(0, np.int32) if p_indices else xp.empty((0, 0), real)
        return _out(P, kind, xp), _out(L, kind, xp), _out(U, kind, xp)
    L = xp.tril(A[:, :k], -1)
    xp.fill_diagonal(L, 1.0)
    U = xp.triu(A[:k, :])
    # Pivot base: LAPACK-style interchanges (row i <-> piv[i], 0-based) -> the permutation
    # perm with (L U)[i] = A[perm[i]]; SciPy's p is its inverse: A = L[p] U.
    perm = laswp_reference(np.arange(m), piv)
    p = np.empty(m, np.int64)
    p[perm] = np.arange(m)
    if permute_l:
        return _out(L[xp.asarray(p)], kind, xp), _out(U, kind, xp)
    if p_indices:
        # SciPy returns int64 zeros for a 1 x 1 input and int32 otherwise.
        P = xp.asarray(p, dtype=np.int64 if (m, n) == (1, 1) else np.int32)
    else:
        P = xp.zeros((m, m), real)
        P[xp.arange(m), xp.asarray(p)] = 1.0
    return _out(P, kind, xp), _out(L, kind, xp), _out(U, kind, xp)


def lu_factor(a, overwrite_a=False, check_finite=True, *, panel="auto", block_size=None,
              lookahead=1, precision="auto", devices=None):
    """Compute the pivoted LU decomposition of a matrix on the GPU.

    The decomposition is ``A = P L U`` with P a permutation, L unit lower triangular
    (trapezoidal for M > N) and U upper triangular (trapezoidal for M < N).

    Parameters
    ----------
    a : (..., M, N) array_like
        NumPy/CuPy array or torch tensor (CPU or CUDA), any memory order or strides; with
        more than two dimensions a stack of matrices, each factored on its own (SciPy 1.16's
        batch semantics; see Notes).  The factorization runs in SciPy's working dtype, never a narrower one: float32 for
        float32, float16, bfloat16, bool and 8/16-bit integers; float64 for float64 and
        32/64-bit integers; complex64 and complex128 as themselves.  Other dtypes (long
        double, objects) raise TypeError.
    overwrite_a : bool, optional
        Allow the factorization to overwrite `a`.  Honoured for C-contiguous CuPy arrays and
        CUDA tensors of the working dtype, and for C-contiguous NumPy arrays of a real working
        dtype too, which then receive the factors (the returned `lu` shares their memory);
        for a stack, C-contiguous CuPy arrays only.  Every other input is never modified
        (copied, or read where it lies).
    check_finite : bool, optional
        Check that `a` holds only finite numbers (raises ValueError otherwise).
    panel : {"auto", "gpu", "cpu"}, optional
        Where the panels are factored.  "gpu": on the GPU, by a recursive factorization whose
        leaves are cooperative kernels holding the panel's rows in registers (one grid
        barrier per column; no host round trip).  "cpu": on the host, with LAPACK
        ``sgetrf`` / ``dgetrf`` on pinned memory.  "auto" (default) is "gpu", the faster at
        every size measured (docs/tuning.md).
    block_size : int, optional
        Panel width nb.  By default it follows ``min(M, N)``, the panel kind, the update
        arithmetic, the dtype and the number of GPUs, from the device's tuning table
        (`gpulinalg.tuning`; docs/tuning.md gives each value and its evidence).
    lookahead : {1, 0}, optional
        Look-ahead depth: 1 factors the next panel (on its own stream) while the rest of
        the trailing matrix is updated; 0 serialises them (for comparison).
    precision : str, optional
        Arithmetic of the trailing updates ``A22 -= L21 U12`` (almost all of the flops).
        float32 input: {"auto", "fp32", "3xtf32", "tf32"}, as in `gpulinalg.sgemm`: "fp32"
        our SIMT SGEMM; "3xtf32" the tensor cores with the error-compensated three-product
        split (FP32-level accuracy); "tf32" one TF32 product (10-bit mantissa: a backward
        error ~1e3 times larger).  "auto" (default) is "3xtf32" on Hopper (compute
        capability 9.0, the wgmma kernels) for large matrices and "fp32" otherwise (the
        cut-overs are tuning values).  Panels and triangular solves always run in FP32.
        float64 input: {"auto", "fp64"}, both FP64 throughout (the updates on the FP64
        tensor cores, `gpulinalg.dgemm`); the float32 kinds raise ValueError.  Complex
        input: "auto" only.
    devices : None, int or sequence of int, optional
        GPUs to factor on (float32 and float64): None (default) the current one; a count n
        the devices 0..n-1; a sequence the devices with those ids.  With more than one, the matrix is distributed
        in blocks of `block_size` columns, column-cyclically, each device keeping its columns
        row-major (pivoting needs no exchange between GPUs); each panel is factored by its
        owner and copied to the others (peer copies).  The result has the form and the
        pivoting rule of a one-GPU call (its rounding follows the block size) and comes
        back where a one-GPU call returns it (the host for host input, the input's device
        otherwise).  Host input is sent to each GPU column share by share, so the matrix
        only has to fit in the GPUs' memory together.  A device input with the GPU panel
        and ``M * N <= 2**30`` is replayed from a CUDA graph from its shape's second call
        on (as on one GPU, below; the graph keeps a copy of the matrix and the devices'
        shares, at most 2 shapes).  Measured before that replay, several GPUs paid from
        about 32768**2: on H100s at default options, against the default one-GPU call,
        1.6x on two and 1.3-2.1x on four at 32768**2, 1.7x and 2.8x at 49152**2; at
        16384**2 two GPUs ran 0.8-1.1x and four 0.6-0.9x one GPU, and below they were
        slower, the host's issuing of the distributed work bounding them
        (docs/performance.md).

    Returns
    -------
    lu : (..., M, N) array
        U in the upper triangle, L below the diagonal (its unit diagonal not stored);
        C-ordered, of the working dtype, of the input's kind (NumPy in, NumPy out; CuPy in, CuPy out on the same
        device; torch in, torch out on its device).
    piv : (..., K) int32 array
        ``K = min(M, N)``; row i was interchanged with row ``piv[i]`` (0-based, as
        `scipy.linalg.lu_factor`).  Same kind as `lu`.

    Raises
    ------
    ValueError
        `a` not 2-D, non-finite entries with `check_finite`, a bad keyword, or a keyword the
        dtype's route does not take (a float32 `precision` for float64; driver options for
        complex input).
    TypeError
        A dtype without a working precision (long double, objects, strings).
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
    Blocked right-looking LU with partial pivoting and look-ahead (Volkov & Demmel, SC08).
    The matrix is kept row-major on the GPU, so row interchanges (the laswp kernel) move
    contiguous rows.  For each panel of nb columns, by default:

    1. the panel is factored on the GPU (LAPACK ``sgetrf2``'s recursion over
       register-resident leaf kernels); the first exactly zero pivot stays on the device
       and is read once, at the end;
    2. its row interchanges are applied to the columns right (and later left) of it;
    3. ``U12 = L11^{-1} A12`` by a triangular solve on the GPU;
    4. ``A22 -= L21 U12`` by our GEMM: SGEMM in the arithmetic `precision` gives for
       float32, the FP64 tensor-core DGEMM for float64.

    With look-ahead the next panel's columns are updated first and that panel is factored
    on a stream of its own (the greatest priority: the panels are the critical path) while
    the rest of the trailing matrix is updated; events order the two streams, and the host
    never waits inside the loop.  The pivot choices are LAPACK's.  The work is
    ``M N^2 - N^3/3`` flops for M >= N (``2/3 N^3`` when square).

    float32 and float64 run the same driver and kernels, instantiated for the element type
    (the panel leaves, row swaps, transposes and triangular solves are templates; the
    products are the SGEMM kernels and the FP64 DGEMM).  Complex input is factored by
    cuSOLVER's ``cgetrf`` / ``zgetrf`` through CuPy (`cupyx.scipy.linalg.lu_factor`), with
    the same checks, kinds and return conventions.

    A stack of matrices (``a.ndim > 2``) is factored by the batched LU, all of it in one
    launch for real matrices up to order 1024: up to 128 each matrix held in registers
    (gpulinalg/lu/batched.py), above that one thread block per matrix with the panel's
    rows in registers (gpulinalg/lu/batched_blocked.py); complex ones one by one through
    cuSOLVER.  One small real device matrix (order up to 256 on the H200's table) runs as
    a batch of one.  Every such call synchronises once with the GPU, for SciPy's
    LinAlgWarning (one for a stack: how many matrices have an exactly zero pivot and the
    first of them) and the check_finite error, which the kernels report as they factor;
    the driver keywords (`panel`, `block_size`, `lookahead`, `precision`, `devices`) must
    keep their defaults for a stack.

    With ``panel="cpu"`` each panel is copied to pinned host memory and factored there
    with LAPACK ``xgetrf`` on a worker thread, then ``U12`` is the product with
    ``L11^{-1}`` (``xtrtri``) followed by one refinement step while
    ``||L11^{-1}||_inf < 1e3``, and the triangular solve otherwise.

    With the GPU panel on one GPU (``devices=None``) and ``M * N <= 2**28``, the second
    call of a shape (on the same stream, with the same keywords) captures the
    factorization into a CUDA graph and later calls replay it: the same kernels at the
    same stream priorities, bit-identical results, without the host's cost of issuing
    each step's launches.  The graphs keep their own buffers, a copy of the matrix
    included (at most 4 shapes and 1 GiB of device memory together, the newest shape
    always kept); the environment variable ``GPULINALG_LU_GRAPHS=0`` turns this off.

    Examples
    --------
    >>> import numpy as np
    >>> from gpulinalg import lu_factor
    >>> A = np.array([[2, 5, 8, 7], [5, 2, 2, 8], [7, 5, 6, 6], [5, 4, 4, 8]],
    ...              dtype=np.float32)
    >>> lu, piv = lu_factor(A)
    >>> piv
    array([2, 2, 3, 3], dtype=int32)

    Apply the interchanges to the rows of A and compare with ``L @ U``:

    >>> perm = np.arange(4)
    >>> for i, p in enumerate(piv):
    ...     perm[[i, p]] = perm[[p, i]]
    >>> L, U = np.tril(lu, k=-1) + np.eye(4), np.triu(lu)
    >>> np.allclose(A[perm], L @ U, atol=1e-5)
    True

    NumPy's default dtype, float64, is factored in float64 (as SciPy does):

    >>> lu64, _ = lu_factor(A.astype(np.float64))
    >>> lu64.dtype
    dtype('float64')

    A CuPy array is factored on its own device and the factors stay there:

    >>> import cupy as cp
    >>> lu_d, piv_d = lu_factor(cp.asarray(A))
    >>> type(lu_d).__name__, piv_d.dtype
    ('ndarray', dtype('int32'))
    """
    options = _plan.Options(panel, block_size, lookahead, precision, devices)
    return _lu_factor(a, overwrite_a, check_finite, options, _plan.DEVICE)


def _factor_one(a, options, backend):
    """(xp, lu, piv, info) of one matrix, factored in place where it can be (a stack's
    matrices the batched kernel does not take)."""
    return _factor(a, True, False, options, lambda kind, xp, lu, piv, info: (xp, lu, piv, info),
                   backend=backend)


def _at_least_2d(a):
    if a.ndim < 2:
        raise ValueError(f"a must be at least two-dimensional (a matrix, or a stack of them), "
                         f"got shape {tuple(a.shape)}")


def _on_batched_kernel(a, options, backend, overwrite_a, check_finite):
    """(kind, lu, piv, info) where a batched kernel factors `a` at once (lu/stacked.py's
    on_kernel), lu_factor's driver keywords at their defaults, on the device backend: a
    float32 or float64 CuPy stack or matrix on the current device (stacked.plain_route,
    without the general path's conversions), or one CUDA torch matrix; a single matrix only
    up to the tuning table's one_matrix_batched_max (a batch of one).  Else None (other
    stacks go through stacked.factor)."""
    if backend is not _plan.DEVICE or not options.is_default():
        return None
    plain = _stacked.plain_route(a)                     # on the current device already
    if plain is not None:
        element, found = plain
        return ("cupy",) + _stacked.on_kernel(a, "cupy", element, found, check_finite,
                                              overwrite_a)
    if a.ndim != 2 or 0 in a.shape or _arrays.array_kind(a) != "torch":
        return None                     # stacks of other kinds: _stacked.factor
    element = _element(_arrays.dtype_of(a))
    if element.is_complex:
        return None
    with _arrays.launch_context("torch", _arrays.device_of((a,))):
        found = _stacked.kernel_route(cupy().cuda.runtime.getDevice(), element, *a.shape,
                                      single=True)
        if found is None:
            return None
        return ("torch",) + _stacked.on_kernel(a, "torch", element, found, check_finite,
                                               overwrite_a)


def _lu_factor(a, overwrite_a, check_finite, options, backend):
    """lu_factor on `backend`; a stack (ndim > 2) through the batched LU (lu/stacked.py), with
    one warning for all its singular matrices; a small device matrix as a batch of one."""
    a = _as_input(a)
    _at_least_2d(a)
    done = _on_batched_kernel(a, options, backend, overwrite_a, check_finite)
    if done is None and a.ndim == 2:
        return _factor(a, overwrite_a, check_finite, options, _finish_factor, to_host=True,
                       backend=backend)
    if done is not None:
        kind, LU, piv, info = done
        xp = cupy()
    else:
        kind, xp, LU, piv, info = _stacked.factor(a, check_finite, options, backend,
                                                  _factor_one, overwrite_a)
    if a.ndim == 2:
        return _finish_factor(kind, xp, LU, piv, 0 if info is None else int(info[0]))
    message = _stacked.singular_warning(info, tuple(a.shape[:-2]))
    if message:
        warnings.warn(message, _linalg_warning(), stacklevel=3)
    return _out(LU, kind, xp), _out(piv, kind, xp)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False, *,
       panel="auto", block_size=None, lookahead=1, precision="auto", devices=None):
    """Compute the LU decomposition of a matrix with partial pivoting on the GPU.

    The decomposition satisfies ``A = P @ L @ U``; with `permute_l`, ``A = PL @ U``; with
    `p_indices`, ``A = L[P, :] @ U``.

    Parameters
    ----------
    a : (..., M, N) array_like
        As in `lu_factor` (kinds, layouts, dtype policy: SciPy's working dtypes; a stack
        gives stacked P, L, U).
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
        p : (M, M) permutation matrix of the working dtype's real type (as SciPy's), or
            (M,) int32 row indices with `p_indices`
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
    Computed with the blocked LU of `lu_factor` (panels, look-ahead, block size and
    precision as `lu_factor` chooses them, ``M N^2 - N^3/3`` flops for M >= N); L, U and P
    are then formed on the device.

    Examples
    --------
    >>> import numpy as np
    >>> from gpulinalg import lu
    >>> A = np.array([[2, 5, 8, 7], [5, 2, 2, 8], [7, 5, 6, 6], [5, 4, 4, 8]],
    ...              dtype=np.float32)
    >>> p, l, u = lu(A)
    >>> np.allclose(A, p @ l @ u, atol=1e-5)
    True
    >>> pl, u = lu(A, permute_l=True)
    >>> np.allclose(A, pl @ u, atol=1e-5)
    True
    >>> p, l, u = lu(A, p_indices=True)
    >>> p
    array([1, 3, 0, 2], dtype=int32)
    >>> np.allclose(A, l[p] @ u, atol=1e-5)
    True
    """
    options = _plan.Options(panel, block_size, lookahead, precision, devices)
    return _lu(a, permute_l, overwrite_a, check_finite, p_indices, options, _plan.DEVICE)


def _lu(a, permute_l, overwrite_a, check_finite, p_indices, options, backend):
    """lu on `backend`; a stack (ndim > 2) through the batched LU (lu/stacked.py), a small
    device matrix as a batch of one."""
    a = _as_input(a)
    _at_least_2d(a)
    done = _on_batched_kernel(a, options, backend, overwrite_a, check_finite)
    if done is not None and a.ndim == 2:
        kind, LU, piv, info = done
        return _finish_lu(permute_l, p_indices, kind, cupy(), LU, piv.get(), info)
    if done is not None:
        kind, LU, piv, _ = done
        return _finish_lu_stack(permute_l, p_indices, kind, cupy(), LU, piv)
    if a.ndim > 2:
        kind, xp, LU, piv, _ = _stacked.factor(a, check_finite, options, backend,
                                               _factor_one, overwrite_a)
        return _finish_lu_stack(permute_l, p_indices, kind, xp, LU, piv)
    return _factor(a, overwrite_a, check_finite, options,
                   functools.partial(_finish_lu, permute_l, p_indices), backend=backend)


def _finish_lu_stack(permute_l, p_indices, kind, xp, A, piv):
    """lu's result for a stack of factors A (..., M, N) and pivots (..., K): the 2-D
    conventions (_finish_lu) per matrix, formed for all matrices at once."""
    batch, (m, n) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
    k = min(m, n)
    real = A.dtype if (m, n) == (1, 1) else A.real.dtype
    if m == 0 or n == 0 or not batch or 0 in batch:
        L = xp.zeros(batch + (m, k), A.dtype)
        U = xp.zeros(batch + (k, n), A.dtype)
        if permute_l:
            return _out(L, kind, xp), _out(U, kind, xp)
        P = xp.zeros(batch + ((0,) if p_indices else (0, 0)),
                     np.int32 if p_indices else real)
        if m and n:   # an empty stack of non-empty matrices
            P = xp.zeros(batch + ((m,) if p_indices else (m, m)),
                         np.int32 if p_indices else real)
        return _out(P, kind, xp), _out(L, kind, xp), _out(U, kind, xp)
    count = int(np.prod(batch))
    A3 = A.reshape(count, m, n)
    below = xp.asarray(np.tri(m, k, -1, dtype=bool))
    L = xp.where(below, A3[:, :, :k], xp.zeros((), A.dtype))
    idx = xp.arange(k)
    L[:, idx, idx] = 1
    U = xp.where(xp.asarray(np.tri(k, n, -1, dtype=bool)), xp.zeros((), A.dtype), A3[:, :k, :])
    piv_h = np.asarray(piv.get() if hasattr(piv, "get") else piv).reshape(count, k)
    perm = _stacked.permutations(piv_h, m)
    p = np.empty_like(perm)
    np.put_along_axis(p, perm, np.broadcast_to(np.arange(m), perm.shape), axis=1)
    rows = np.arange(count)[:, None]
    shape = batch + (m, k), batch + (k, n)
    if permute_l:
        PL = L[xp.asarray(rows), xp.asarray(p)]
        return _out(PL.reshape(shape[0]), kind, xp), _out(U.reshape(shape[1]), kind, xp)
    if p_indices:
        P = xp.asarray(p.reshape(batch + (m,)), dtype=np.int64 if (m, n) == (1, 1) else np.int32)
    else:
        P = xp.zeros((count, m, m), real)
        P[xp.asarray(rows), xp.asarray(np.arange(m))[None, :], xp.asarray(p)] = 1
        P = P.reshape(batch + (m, m))
    return _out(P, kind, xp), _out(L.reshape(shape[0]), kind, xp), _out(U.reshape(shape[1]),
                                                                          kind, xp)


def _stacked_solve(lu_and_piv, b):
    """lu_solve's arguments hold a stack: lu with ndim > 2, piv > 1 or b > 2."""
    lu_, piv = lu_and_piv
    return (np.ndim(lu_) > 2 or np.ndim(piv) > 1 or np.ndim(b) > 2)


def _lu_solve_stack(lu_and_piv, b, trans, check_finite, solve_one, emulated=False):
    """lu_solve over broadcast stacks, as SciPy 1.16's: lu (..., N, N), piv (..., N), b (...,
    N, K) (or (N,)): on the device whatever side the inputs are on (one upload of a host
    stack), real stacks the kernels take in one launch, others each system solved by
    solve_one((lu, piv), b, trans, False, check_finite); emulated: NumPy, system by system."""
    lu_, piv = (_as_input(x) for x in lu_and_piv)
    b = _as_input(b)
    kind = _arrays.common_kind(lu_, b)
    xp = np if emulated else cupy()
    with _stacked.context(xp, kind, (lu_, b)):
        arrays = [_stacked.native(x, xp) for x in (lu_, piv, b)]
        X = None if emulated else _stacked.solve_batched(*arrays, check_finite, trans)
        if X is None:
            X = _stacked.over_batch(
                lambda l, p, bb: solve_one((l, p), bb, trans, False, check_finite),
                arrays, [2, 1, "1|2"], xp)
    return _out(X, kind, xp)


def _solve_inputs(lu_and_piv, b, trans, kind=None, device_pivots=False):
    """lu_solve's arguments checked (no GPU needed): (kind, lu, b, piv, n, bshape, dtype), piv
    as host int32, dtype the solve's: SciPy's, the promotion of the working dtypes of lu and
    b.  kind: the kind to treat them as (default: theirs, which must agree).  device_pivots:
    an integer CuPy or CUDA torch piv of shape (n,) is returned as it is, its values not
    read (no synchronisation: the caller checks their range on the device)."""
    lu_, piv = lu_and_piv
    if trans not in (0, 1, 2) or isinstance(trans, float):
        raise ValueError(f"trans must be 0, 1 or 2, got {trans!r}")
    lu_, b = _as_input(lu_), _as_input(b)
    kind = _arrays.common_kind(lu_, b) if kind is None else kind
    n, n2 = _arrays.check_matrix(lu_, "lu")
    bshape = tuple(b.shape)
    if len(bshape) not in (1, 2):
        raise ValueError(f"b must be 1-D or 2-D, got shape {bshape}")
    dtype = np.promote_types(_arrays.check_dtype(_arrays.dtype_of(lu_), "lu"),
                             _arrays.check_dtype(_arrays.dtype_of(b), "b"))
    if n != bshape[0]:
        raise ValueError(f"Shapes of lu {(n, n2)} and b {bshape} are incompatible")
    if n != n2:
        raise ValueError(f"lu must be square, got shape {(n, n2)}")
    if device_pivots and _device_pivots(piv, n):
        return kind, lu_, b, piv, n, bshape, dtype
    return kind, lu_, b, _checked_pivots(piv, n), n, bshape, dtype


def _device_pivots(piv, n):
    """Whether piv is an int32 CuPy array or CUDA torch tensor of shape (n,) (lu_factor's;
    wider integers are checked on the host, where a value past int32 cannot wrap)."""
    kind = _arrays.array_kind(piv) if hasattr(piv, "shape") else "numpy"
    return (kind in ("cupy", "torch") and tuple(piv.shape) == (n,)
            and _arrays.dtype_of(piv) == np.int32)


def _checked_pivots(piv, n):
    """piv as a host int32 vector of 0-based row indices in [0, n), or ValueError."""
    piv_h = _host_pivots(piv)
    if piv_h.shape != (n,):
        raise ValueError(f"piv must have shape ({n},), got {piv_h.shape}")
    if n and (piv_h.min() < 0 or piv_h.max() >= n):  # the laswp kernel trusts its pivots
        raise ValueError(_PIVOT_RANGE.format(n=n))
    return piv_h


_PIVOT_RANGE = "piv must hold 0-based row indices in [0, {n})"


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` on the GPU, given the LU factorization of a.

    Parameters
    ----------
    lu_and_piv : (lu, piv)
        The factorization from `lu_factor` (or `scipy.linalg.lu_factor`): lu (N, N), piv
        (N,) 0-based pivot indices.
    b : (N,) or (N, NRHS) array_like
        Right-hand side(s); NumPy/CuPy/torch of the same kind as lu.  Stacks broadcast as
        in SciPy 1.16: lu (..., N, N), piv (..., N), b (..., N, NRHS); real stacks up to
        order 1024 are solved in one launch on the device (host stacks uploaded once),
        others (complex, larger) system by system through the single-system path.
    trans : {0, 1, 2}, optional
        Solve ``a x = b`` (0), ``a^T x = b`` (1) or ``a^H x = b`` (2, the conjugate
        transpose; the same as 1 for real factors).
    overwrite_b : bool, optional
        Accepted for SciPy compatibility; b is never modified (the solve works on a copy).
    check_finite : bool, optional
        Check that b holds only finite numbers (SciPy checks b only, and so do we).

    Returns
    -------
    x : (N,) or (N, NRHS) array
        Same shape as b, of the inputs' kind.  Its dtype is SciPy's: the promotion of the
        working dtypes of lu and b (as `lu_factor` maps them: float32 factors and a float64
        b give float64; complex when either is complex).  Like SciPy's, a 2-D x is
        F-ordered.

    Raises
    ------
    ValueError
        Incompatible shapes, lu not square, non-finite b with `check_finite`, a bad `trans`.
    TypeError
        A dtype without a working precision (`lu_factor`), or inputs of mixed kinds.

    See Also
    --------
    scipy.linalg.lu_solve : the host version this mirrors.
    lu_factor

    Notes
    -----
    Real dtypes, trans = 0, up to 16 right-hand sides with device factors and int32
    pivots: one launch applies all the row interchanges to b as one permutation, reading b
    where it lies and checking the pivots' range (and, with `check_finite`, b's values) on
    the GPU; ``L y = P b`` and ``U x = y`` are then solved by our kernel that reads each
    triangle once (one launch per triangle), and one synchronisation reads the checks.
    More right-hand sides: the interchanges by our laswp kernel on a row-major copy of b, then
    our blocked substitution (a kernel per diagonal block, a GEMM per block's coupling).
    trans = 1, 2: cuBLAS trsm (``U^T`` and ``L^T`` solves, through cupyx), then the
    interchanges in reverse order.  Complex dtypes: cuSOLVER's getrs (through
    `cupyx.scipy.linalg.lu_solve`).  ``2 N^2`` flops per right-hand side.

    Examples
    --------
    >>> import numpy as np
    >>> from gpulinalg import lu_factor, lu_solve
    >>> A = np.array([[2, 5, 8, 7], [5, 2, 2, 8], [7, 5, 6, 6], [5, 4, 4, 8]])
    >>> b = np.array([1, 1, 1, 1])
    >>> x = lu_solve(lu_factor(A), b)
    >>> x.dtype, np.allclose(A @ x, b)
    (dtype('float64'), True)
    """
    if _stacked_solve(lu_and_piv, b):
        return _lu_solve_stack(lu_and_piv, b, trans, check_finite, lu_solve)
    kind, lu_, b, piv, n, bshape, dtype = _solve_inputs(lu_and_piv, b, trans,
                                                        device_pivots=True)
    if kind in _HOST_KINDS:
        if check_finite and not np.isfinite(_arrays.host_view(b, "b")).all():
            raise ValueError(_finite.NONFINITE)
        check_finite = False
        if 0 in bshape:
            return _out(np.empty(bshape, dtype), kind, np)
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((lu_, b))):
        B = _arrays.to_device(b, kind, "b", dtype)
        LU = _arrays.to_device(lu_, kind, "lu", dtype)
        if B.size and not isinstance(piv, np.ndarray) and _getrs.few_columns(LU, B, trans):
            # one gather (pivots checked, b copied and checked on the device) and the two
            # few-column solves, then one synchronisation for the checks' flags
            P = _arrays.to_device(piv, kind, "piv", np.int32)
            X = _getrs.getrs_few(LU, B.reshape(n, -1), P, check_finite,
                                 _PIVOT_RANGE.format(n=n))
            return _out(_solution(cp, X, bshape), kind, cp)
        if check_finite and not _finite.device_all_finite(B):
            raise ValueError(_finite.NONFINITE)
        if B.size == 0:
            return _out(cp.empty(bshape, dtype), kind, cp)
        if not isinstance(piv, np.ndarray):
            piv = _checked_pivots(piv, n)
        # Layout: right-hand sides row-major (n x nrhs, C-order), so laswp moves whole rows.
        X = cp.array(B.reshape(n, -1), dtype=dtype, order="C")
        X = _getrs.getrs(cp, LU, X, cp.asarray(piv), trans)
        return _out(_solution(cp, X, bshape), kind, cp)


def _solution(xp, X, bshape):
    """The n x nrhs solution X in b's shape; F-ordered when 2-D (SciPy's, LAPACK's)."""
    return X.reshape(bshape) if len(bshape) == 1 else xp.asfortranarray(X)


def _host_pivots(piv):
    """piv of any kind as a host int32 vector (pivots are tiny: one copy is fine)."""
    kind = _arrays.array_kind(piv) if hasattr(piv, "shape") else "numpy"
    if kind == "cupy":
        piv = cupy().asnumpy(piv)
    elif kind.startswith("torch"):
        piv = piv.detach().cpu().numpy()
    piv = np.asarray(piv)
    if piv.size == 0:   # SciPy accepts np.array([]) (float64) for an empty factorization
        return np.zeros(piv.shape, np.int32).ravel()
    if piv.dtype.kind not in "iu":
        raise TypeError(f"piv must hold integers, got dtype {piv.dtype}")
    return piv.astype(np.int32).ravel() if piv.ndim <= 1 else piv.astype(np.int32)
