"""The public BLAS-like routines: sgemm, dgemm, matmul, transpose, laswp.

Each checks its arguments before any device work, moves NumPy / torch inputs where they need
to be (core/arrays.py) and calls the launchers of gpulinalg/gemm and gpulinalg/layout.
"""

import numpy as np

from .core import arrays as _arrays
from .core import host_io as _host_io
from .core.backend import cupy
from .core.element import F32, F64, REAL_KERNEL, element as _element
from .gemm.dispatch import check_precision, product_into
from .layout.laswp import laswp_inplace, row_leading_dim
from .layout.transpose import transpose_into

__all__ = ["sgemm", "dgemm", "matmul", "transpose", "laswp"]


def _as_trans_flag(t, name):
    if t in (0, 1, 2, False, True):
        return bool(t)
    raise ValueError(f"{name} must be 0/False, 1/True or 2 (conjugate transpose), got {t!r}")


def _real_scalar(x, name, dtype=np.float32):
    """x as the value of `dtype` the kernels use (beyond its range: +-inf, as NumPy casts),
    returned as a Python float."""
    if isinstance(x, complex) or np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got {x!r}")
    with np.errstate(over="ignore"):
        return float(np.dtype(dtype).type(x))


def _kernel_element(dtype, routine):
    """The Element of a working dtype our kernels compute in (float32, float64), else
    TypeError naming `routine`."""
    el = _element(dtype)
    if el not in REAL_KERNEL:
        raise TypeError(f"{routine} computes in float32 or float64, got {np.dtype(dtype)} "
                        f"(complex products: cupy.matmul)")
    return el


def sgemm(alpha, a, b, beta=0.0, c=None, trans_a=False, trans_b=False, overwrite_c=False, *,
          precision="auto"):
    """Single-precision general matrix multiply on the GPU.

    Computes ``alpha * op(a) @ op(b) + beta * c`` with ``op(x) = x`` or ``x.T``.

    Parameters
    ----------
    alpha : float
    a : (m, k) or (k, m) array_like
        NumPy/CuPy array or torch tensor; float32, or a type that converts to float32 exactly
        (float16, bfloat16, small integers, bool).  float64 raises TypeError: convert
        explicitly, the library never downcasts silently.
    b : (k, n) or (n, k) array_like
    beta : float, optional
        With ``beta == 0`` (the default) c is not read, so it may hold NaN or garbage.
    c : (m, n) array_like, optional
    trans_a, trans_b : bool or {0, 1, 2}, optional
        Use the transpose of a / b (2, the conjugate transpose, is the transpose for reals).
    overwrite_c : bool, optional
        For a CuPy array or CUDA tensor c of dtype float32 with one unit stride, write the
        result into c and return it.  Otherwise a new array is returned.
    precision : {"auto", "fp32", "3xtf32", "tf32"}, keyword-only
        "auto" (default): "3xtf32" on Hopper (compute capability 9.0) for products with
        k >= 64 and either m*n >= 3072**2 or m*n*k >= 2e9, where it is both faster and more
        accurate than the FP32 kernel; "fp32" for smaller products and on other GPUs.
        "fp32": the SIMT FP32 kernel.  "3xtf32": tensor cores with each operand split into a
        TF32 head and tail and three products summed in FP32 (FP32-level accuracy; on sm_90
        the entries whose sum comes out Inf or NaN are recomputed in FP32, so Inf and NaN
        inputs give FP32's results).  "tf32": one TF32 product (error ~3e-4: not FP32
        accuracy).

    Returns
    -------
    (m, n) ndarray
        Of the inputs' kind: NumPy in, NumPy out; CuPy in, CuPy out on the same device (work
        on the caller's current stream); torch in, torch out (CUDA tensors are shared
        zero-copy and the work runs on torch's current stream).  New arrays are C-ordered.

    Raises
    ------
    ValueError
        Not 2-D, mismatched shapes, a bad transpose flag or precision.
    TypeError
        A dtype that does not convert exactly to float32, or inputs of mixed kinds.
    CudaUnavailableError
        No CuPy or no CUDA device.

    See Also
    --------
    scipy.linalg.blas.sgemm : the host version this mirrors.
    matmul : the product alone, like ``numpy.matmul``.

    Notes
    -----
    The FP32 kernel is a register-tiled SIMT SGEMM (kernels/sgemm.cu) whose tile follows the
    shape; products with too few tiles to fill the GPU and a long k split k into parts summed
    by a second kernel.  The 3xTF32 and TF32 kernels run on the tensor cores, through wgmma
    on Hopper (kernels/sgemm_wgmma.cu) after a pre-pass that splits the operands into a
    workspace of 8 bytes per operand element (rounded up to whole tiles), through mma.sync
    elsewhere (kernels/sgemm_tc.cu).  Strided views with one unit stride and both memory
    orders are used in place, other strides are copied once.  In the FP32 path, a large
    rank-k update (beta != 0, k <= 128, a C-ordered result) with a row-major op(a) first
    transposes op(a) into a temporary of k x m floats, which the kernel then reads with
    16-byte copies.  It performs ``2*m*n*k`` flops.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> b = np.ones((3, 2), dtype=np.float32)
    >>> gpulinalg.sgemm(2.0, a, b)
    array([[ 6.,  6.],
           [24., 24.]], dtype=float32)
    >>> gpulinalg.sgemm(1.0, a, a, trans_b=True)
    array([[ 5., 14.],
           [14., 50.]], dtype=float32)

    On CuPy arrays the result stays on the GPU; ``overwrite_c`` updates c in place:

    >>> import cupy as cp
    >>> c = cp.ones((2, 2), dtype=cp.float32)
    >>> gpulinalg.sgemm(1.0, cp.asarray(a), cp.asarray(b), beta=-1.0, c=c,
    ...                 overwrite_c=True) is c
    True
    >>> c
    array([[ 2.,  2.],
           [11., 11.]], dtype=float32)
    """
    return _gemm(F32, alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, precision)


def dgemm(alpha, a, b, beta=0.0, c=None, trans_a=False, trans_b=False, overwrite_c=False):
    """Double-precision general matrix multiply on the GPU's FP64 tensor cores.

    Computes ``alpha * op(a) @ op(b) + beta * c`` with ``op(x) = x`` or ``x.T``, as
    `scipy.linalg.blas.dgemm`.

    Parameters
    ----------
    alpha : float
    a : (m, k) or (k, m) array_like
        NumPy/CuPy array or torch tensor; float64, or a type that converts to float64
        exactly (float32, integers, bool).  Complex raises TypeError.
    b : (k, n) or (n, k) array_like
    beta : float, optional
        With ``beta == 0`` (the default) c is not read, so it may hold NaN or garbage.
    c : (m, n) array_like, optional
    trans_a, trans_b : bool or {0, 1, 2}, optional
        Use the transpose of a / b (2, the conjugate transpose, is the transpose for reals).
    overwrite_c : bool, optional
        For a CuPy array or CUDA tensor c of dtype float64 with one unit stride, write the
        result into c and return it.  Otherwise a new array is returned.

    Returns
    -------
    (m, n) array
        float64, of the inputs' kind (all inputs must be of one kind).

    Raises
    ------
    ValueError, TypeError, CudaUnavailableError
        As `sgemm`.

    See Also
    --------
    scipy.linalg.blas.dgemm, sgemm, matmul

    Notes
    -----
    kernels/dgemm.cu: ``mma.sync`` on the FP64 tensor cores (IEEE double products and sums;
    Hopper has no FP64 ``wgmma``), tiles staged through shared memory by ``cp.async``.
    ``2*m*n*k`` flops.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> gpulinalg.dgemm(2.0, a, np.ones((3, 2)))
    array([[ 6.,  6.],
           [24., 24.]])
    """
    return _gemm(F64, alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, "auto")


def _gemm(el, alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, precision):
    """sgemm (el F32) and dgemm (el F64): inputs converted exactly to el's dtype or refused."""
    dtype = el.dtype
    alpha, beta = _real_scalar(alpha, "alpha", dtype), _real_scalar(beta, "beta", dtype)
    check_precision(precision, el)
    ta, tb = _as_trans_flag(trans_a, "trans_a"), _as_trans_flag(trans_b, "trans_b")
    kind = _arrays.common_kind(a, b, c)
    sa, sb = _arrays.check_matrix(a, "a", dtype), _arrays.check_matrix(b, "b", dtype)
    sa, sb = (sa[::-1] if ta else sa), (sb[::-1] if tb else sb)
    if sa[1] != sb[0]:
        raise ValueError(f"op(a) has shape {sa} and op(b) {sb}: inner dimensions differ")
    m, n = sa[0], sb[1]
    if c is not None and _arrays.check_matrix(c, "c", dtype) != (m, n):
        raise ValueError(f"c has shape {tuple(c.shape)}, expected {(m, n)}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, b, c))):
        A = _arrays.to_device(a, kind, "a", dtype)
        B = _arrays.to_device(b, kind, "b", dtype)
        A, B = (A.T if ta else A), (B.T if tb else B)
        if c is None:
            out, beta = cp.empty((m, n), dtype=dtype), 0.0
        else:
            C = _arrays.to_device(c, kind, "c", dtype)
            # In place only when C is a view of c itself (of dtype, not a converted copy).
            in_place = (overwrite_c and kind in ("cupy", "torch")
                        and C.data.ptr == _arrays.device_ptr(c, kind)
                        and _arrays.matrix_layout(C) is not None)
            if in_place:
                out = C
            elif beta == 0.0:
                out = cp.empty((m, n), dtype=dtype)
            else:
                out = cp.array(C, dtype=dtype, order="C")
        product_into(alpha, A, B, beta, out, precision, stage_a=True)
        if c is not None and out is C and kind == "torch":
            return c  # written in place through the DLPack view
        return _arrays.from_device(out, kind)


def matmul(a, b, out=None, *, precision="auto"):
    """Matrix product of two 2-D real arrays on the GPU, like ``numpy.matmul``.

    Parameters
    ----------
    a : (m, k) array_like
    b : (k, n) array_like
        NumPy/CuPy arrays or torch tensors, one kind for all.  The product is computed in
        float32 when both convert to float32 exactly (`sgemm`'s kernels), else in float64
        (`dgemm`'s; float64 and 32/64-bit integers), as NumPy promotes; complex raises
        TypeError.
    out : (m, n) array, optional
        Same kind as the inputs, of the product's dtype.  CuPy/torch CUDA outputs are written
        in place (any view with one unit stride; other views through one temporary); NumPy
        outputs are filled from the device result.
    precision : {"auto", "fp32", "3xtf32", "tf32", "fp64"}, keyword-only
        float32 products: as in `sgemm` ("auto", the default: 3xTF32 on Hopper for large
        products, else FP32).  float64 products: "auto" or "fp64" (the FP64 tensor cores).

    Returns
    -------
    (m, n) array
        `out` if given, else a new C-ordered array of the inputs' kind.

    Raises
    ------
    ValueError
        Not 2-D, shapes that do not align, `out` of the wrong shape, or a bad precision.
    TypeError
        A complex or unsupported dtype, `out` not of the product's dtype, or inputs of mixed
        kinds.
    CudaUnavailableError
        No CuPy or no CUDA device.

    See Also
    --------
    numpy.matmul, sgemm, dgemm

    Notes
    -----
    The kernels are `sgemm`'s and `dgemm`'s.  Only 2-D operands: 1-D and batched (stacked) products are
    not supported and raise ValueError.  ``2*m*n*k`` flops.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> gpulinalg.matmul(a, np.ones((3, 2), dtype=np.float32))
    array([[ 3.,  3.],
           [12., 12.]], dtype=float32)
    """
    kind = _arrays.common_kind(a, b, out)
    sa, sb = _arrays.check_matrix(a, "a"), _arrays.check_matrix(b, "b")
    dtype = np.promote_types(_arrays.check_dtype(_arrays.dtype_of(a), "a"),
                             _arrays.check_dtype(_arrays.dtype_of(b), "b"))
    check_precision(precision, _kernel_element(dtype, "matmul"))
    if sa[1] != sb[0]:
        raise ValueError(f"matmul: shapes {sa} and {sb} not aligned: "
                         f"{sa[1]} (dim 1) != {sb[0]} (dim 0)")
    shape = (sa[0], sb[1])
    if out is not None:
        if tuple(out.shape) != shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {shape}")
        if _arrays.dtype_of(out) != dtype or str(out.dtype).endswith("bfloat16"):
            raise TypeError(f"out must be {dtype}, got {out.dtype}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, b, out))):
        A = _arrays.to_device(a, kind, "a", dtype)
        B = _arrays.to_device(b, kind, "b", dtype)
        if out is None:
            res = cp.empty(shape, dtype=dtype)
            product_into(1.0, A, B, 0.0, res, precision)
            return _arrays.from_device(res, kind)
        if kind in ("cupy", "torch"):
            O = _arrays.to_device(out, kind, "out", dtype)
            if _arrays.matrix_layout(O) is not None:
                product_into(1.0, A, B, 0.0, O, precision)
            else:
                O[...] = product_into(1.0, A, B, 0.0, cp.empty(shape, dtype=dtype), precision)
        else:
            res = product_into(1.0, A, B, 0.0, cp.empty(shape, dtype=dtype), precision)
            _copy_to_host_out(res, out, kind)
        return out


def _copy_to_host_out(res, out, kind):
    """Fill the host `out` (NumPy array or CPU tensor) from the device result `res`."""
    if kind == "torch_cpu":
        out.copy_(_arrays.from_device(res, kind))
    else:
        np.copyto(out, cupy().asnumpy(res))


def transpose(a, out=None):
    """Transpose of a 2-D real array on the GPU, as a C-ordered array.

    Parameters
    ----------
    a : (m, n) array_like
        NumPy/CuPy array or torch tensor; float32 or float64 (other real dtypes as
        `lu_factor` maps them: float16, bfloat16, small integers and bool to float32, wider
        integers to float64).  Complex raises TypeError.  Views with one unit stride (row- or
        column-major blocks of a larger matrix) are read in place, other strides are copied
        once.
    out : (n, m) array, optional
        Same kind as `a`, of a's working dtype, not overlapping `a`.  CuPy/torch CUDA outputs are written in
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
        A complex or unsupported dtype, `out` not of a's working dtype, or inputs of mixed
        kinds.
    CudaUnavailableError
        No CuPy or no CUDA device.

    See Also
    --------
    numpy.transpose, numpy.ascontiguousarray

    Notes
    -----
    Unlike ``a.T``, which is a view, this moves the data: the kernel (kernels/transpose.cu)
    goes through 64 x 64 shared-memory tiles with 8-byte accesses (32 x 32 tiles with 4-byte
    accesses for small matrices and for row pitches that are not multiples of 256 bytes;
    128 x 32 tiles that write each result row in whole 128-byte lines where those rows do
    not start on a 32-byte sector, e.g. odd sizes) so that reads and writes are both
    coalesced.  It is bandwidth-bound: ``8*m*n`` bytes are read and written.  A column-major
    `a` transposes to a C-ordered result by a plain strided copy.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> gpulinalg.transpose(np.arange(6, dtype=np.float32).reshape(2, 3))
    array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)
    """
    if _arrays.plain_cupy(a, out) and a.ndim == 2:
        m, n = a.shape   # the common GPU call, on the shortest host path (errors: below)
        if out is None:
            return transpose_into(a, cupy().empty((n, m), dtype=np.float32))
        if out.shape == (n, m):
            return transpose_into(a, out)
    kind = _arrays.common_kind(a, out)
    m, n = _arrays.check_matrix(a, "a")
    dtype = _kernel_element(_arrays.check_dtype(_arrays.dtype_of(a), "a"), "transpose").dtype
    if out is not None:
        if tuple(out.shape) != (n, m):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(n, m)}")
        bf16 = kind.startswith("torch") and str(out.dtype).endswith("bfloat16")
        if bf16 or _arrays.dtype_of(out) != dtype:
            raise TypeError(f"out must be {dtype}, got {out.dtype}")
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a, out))):
        A = _arrays.to_device(a, kind, "a", dtype)
        if out is None:
            res = cp.empty((n, m), dtype=dtype)
            transpose_into(A, res)
            return _arrays.from_device(res, kind)
        if kind in ("cupy", "torch"):
            transpose_into(A, _arrays.to_device(out, kind, "out", dtype))
        else:
            _copy_to_host_out(transpose_into(A, cp.empty((n, m), dtype=dtype)), out, kind)
        return out


def _element_strides(a, kind):
    """Strides of a in elements (None when they are not whole elements)."""
    if kind.startswith("torch"):
        return tuple(a.stride())
    if any(s % a.itemsize for s in a.strides):
        return None
    return tuple(s // a.itemsize for s in a.strides)


def _host_pivots(piv, m):
    """Validated pivots as a host int32 array (one device->host copy for device pivots)."""
    kind = _arrays.array_kind(piv)
    if kind == "cupy":
        p = piv.get()
    elif kind.startswith("torch"):
        p = piv.detach().cpu().numpy()
    else:
        p = np.asarray(piv)
    if p.ndim != 1:
        raise ValueError(f"piv must be 1-D, got shape {p.shape}")
    if p.size == 0:
        return np.empty(0, dtype=np.int32)
    if p.dtype.kind not in "iu":
        raise TypeError(f"piv must hold integers, got dtype {p.dtype}")
    if p.size > m:
        raise ValueError(f"piv has {p.size} entries but a has only {m} rows")
    bad = np.flatnonzero((p < 0) | (p >= m))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"piv[{i}] = {int(p[i])} is out of range for a matrix with {m} rows "
                         "(pivots are 0-based)")
    return p.astype(np.int32)


def laswp(a, piv, inverse=False):
    """Apply row interchanges to a float32 or float64 matrix in place, on the GPU.

    For ``i = 0, 1, ..., len(piv)-1`` in order, rows ``i`` and ``piv[i]`` of `a` are swapped
    (``inverse=True``: ``i`` from ``len(piv)-1`` down to 0, which undoes the forward swaps).
    This is LAPACK's ``slaswp`` / ``dlaswp`` with 0-based pivots, as returned by `scipy.linalg.lu_factor`.

    Parameters
    ----------
    a : (m, n) array
        float32 or float64, modified in place: a CuPy array or torch CUDA tensor (on the caller's current
        stream; torch: torch's current stream), or a NumPy array / CPU tensor (sent to the GPU,
        swapped there and written back).  Row-major rows (unit column stride) with any leading
        dimension, e.g. a block of columns ``b[:, j0:j1]`` of a C-ordered matrix.
    piv : (k,) array_like of int
        0-based row indices, ``k <= m``, ``0 <= piv[i] < m``; NumPy, CuPy, torch or a list.
        Rows may be named several times (a row may move twice): the result is always that of
        the swaps applied one by one.
    inverse : bool, optional
        Apply the interchanges in reverse order.

    Returns
    -------
    a : (m, n) array
        The same object, permuted.

    Raises
    ------
    ValueError
        `a` not 2-D or without unit column stride, `piv` not 1-D, too long or out of range.
    TypeError
        `a` neither float32 nor float64 (the swap is in place, so no conversion is
        possible), or non-integer pivots.
    CudaUnavailableError
        No CuPy or no CUDA device.

    All checks happen before `a` is touched: on error it is unchanged.

    See Also
    --------
    scipy.linalg.lapack.slaswp : the LAPACK routine (1-based pivots, column-major storage).
    scipy.linalg.lu_factor : produces such pivots.

    Notes
    -----
    Unlike LAPACK, `a` is stored row-wise, so each row is contiguous.  Up to 512
    interchanges are applied per launch (kernels/laswp.cu): each block of a bandwidth-shaped
    grid requests its first column strip of the touched rows, works out the net permutation
    of the (at most ``2k``) touched rows while those copies are in flight, then writes each
    moved row's strip to its destination row; every moved row is read and written once.  It
    is bandwidth-bound: ``2 * n * a.itemsize`` bytes per moved row.  Device pivots are copied to the host
    once for validation.

    Examples
    --------
    >>> import numpy as np
    >>> import gpulinalg
    >>> a = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> gpulinalg.laswp(a, [2, 2])    # rows 0 <-> 2, then rows 1 <-> 2
    array([[4., 5.],
           [0., 1.],
           [2., 3.],
           [6., 7.]], dtype=float32)
    >>> gpulinalg.laswp(a, [2, 2], inverse=True)   # undone
    array([[0., 1.],
           [2., 3.],
           [4., 5.],
           [6., 7.]], dtype=float32)
    """
    if not hasattr(a, "shape"):
        raise TypeError("a must be an array (NumPy, CuPy or torch): it is modified in place")
    kind = _arrays.array_kind(a)
    shape = tuple(a.shape)
    if len(shape) != 2:
        raise ValueError(f"a must be 2-D, got shape {shape}")
    dtype = _arrays.dtype_of(a)
    if dtype not in (F32.dtype, F64.dtype) or str(a.dtype).endswith("bfloat16"):
        raise TypeError(f"a has dtype {a.dtype}; laswp works in place and needs float32 or "
                        f"float64")
    strides = _element_strides(a, kind)
    if strides is None or row_leading_dim(shape, strides) is None:
        raise ValueError("a must have unit column stride (row-major rows, any leading "
                         "dimension); use numpy.ascontiguousarray or permute a.T instead")
    m, n = shape
    p = _host_pivots(piv, m)
    if p.size == 0 or n == 0:
        return a
    cp = cupy()
    with _arrays.launch_context(kind, _arrays.device_of((a,))):
        piv_dev = cp.asarray(p)
        if kind in ("cupy", "torch"):
            laswp_inplace(_arrays.to_device(a, kind, "a"), piv_dev, inverse)
            return a
        host = a.detach().numpy() if kind == "torch_cpu" else a   # shares a's memory
        dev = _host_io.upload(cp, host, dtype=dtype)   # C-ordered, as laswp_inplace needs
        laswp_inplace(dev, piv_dev, inverse)
        _host_io.download(cp, dev, out=host)   # straight into the caller's rows
        return a
