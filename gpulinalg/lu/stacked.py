"""Stacks of matrices, (..., M, N), through the LU functions: SciPy 1.16's batch semantics.

`factor` factors a whole stack at once: real matrices up to order 1024 by one launch
(`kernel_route`: lu/batched.py's register kernel for small orders, lu/batched_blocked.py's
one block per matrix above), the NumPy model of the same algorithm on the emulation, and
complex matrices (or real ones past the kernels) one by one through the single-matrix
route.  `getrs_stack` solves with a whole stack of factors (real orders up to 1024: one
launch of lu/getrs_batched.py, or its NumPy model on the emulation; others one matrix at a
time).  `over_batch` runs a per-matrix function over broadcast batch dimensions, as SciPy's
`_apply_over_batch` does, where no stacked form exists.
"""

import contextlib
import math
import sys

import numpy as np

from ..core import arrays as _arrays
from ..core import finite as _finite
from ..core import mapped as _mapped
from ..core.backend import cupy
from ..core.element import F32, F64
from ..core.element import element as _element
from .. import tuning as _tuning
from . import batched as _batched
from . import batched_blocked as _batched_blocked
from . import getrs as _getrs
from . import getrs_batched as _getrs_batched
from . import plan as _plan


_PLAIN = {F32.dtype: F32, F64.dtype: F64}      # the dtypes plain_route takes


def check_options(options):
    """A stack runs the batched LU: lu_factor's driver keywords (which tune the blocked
    single-matrix driver) must stay at their defaults."""
    default = _plan.Options()
    changed = [f"{name}={getattr(options, name)!r}"
               for name in ("panel", "block_size", "lookahead", "precision", "devices")
               if getattr(options, name) != getattr(default, name)]
    if changed:
        raise ValueError(f"a stack of matrices is factored by the batched LU, which takes none "
                         f"of {', '.join(changed)}; factor the matrices one by one to use them")


def module(backend):
    """The array module the work runs in: NumPy for the emulation, else CuPy."""
    return np if backend.emulated else cupy()


def to_module(xp, a, kind, dtype, name="a"):
    """a as a C-contiguous array of `dtype` in module xp (a copy: the factors' buffer)."""
    if xp is np:
        return np.array(_arrays.host_view(a, name) if kind != "numpy" else a, dtype=dtype,
                        order="C")
    return xp.array(_arrays.to_device(a, kind, name, dtype), dtype=dtype, order="C")


def factor(a, check_finite, options, backend, one, overwrite_a=False):
    """The LU of each matrix of the stack `a` (..., M, N): (kind, xp, lu (..., M, N), piv
    (..., K) int32 in module xp, info), LAPACK's factors and 0-based pivots per matrix; info
    (B,) NumPy int32, or None where no matrix has an exactly zero pivot.  one(matrix,
    options, backend) -> (xp, lu, piv, info): the single-matrix route (the public layer's),
    for the matrices the batched kernel does not take.  overwrite_a: a C-contiguous CuPy
    stack of the working dtype is factored in place."""
    kind = _arrays.array_kind(a)
    element = _element(_arrays.dtype_of(a))
    if not options.is_default():
        options.check(element)
        check_options(options)
    shape = tuple(a.shape)
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    count = math.prod(batch)
    xp = module(backend)
    with context(xp, kind, (a,)):
        found = (None if xp is np or element.is_complex or not (count and m and n) else
                 kernel_route(cupy().cuda.runtime.getDevice(), element, m, n))
        if found is not None:
            lu, piv, info = on_kernel(a, kind, element, found, check_finite, overwrite_a)
            return kind, xp, lu, piv, info
        if (overwrite_a and kind == "cupy" and xp is not np and a.dtype == element.dtype
                and a.flags.c_contiguous):
            A = a.reshape(count, m, n)           # a view: the factors land in a
        else:
            A = to_module(xp, a, kind, element.dtype).reshape(count, m, n)
        if check_finite and A.size and not _all_finite(xp, A):
            raise ValueError(_finite.NONFINITE)
        if A.size == 0:
            piv = xp.zeros((count, k), np.int32)
            return kind, xp, A.reshape(shape), piv.reshape(batch + (k,)), np.zeros(count,
                                                                                   np.int32)
        if xp is np:
            lu, piv, info = _batched.reference(A)
        else:
            lu, piv, info = _one_by_one(A, options, backend, one)
    return kind, xp, lu.reshape(shape), piv.reshape(batch + (k,)), info


def kernel_route(device_id, element, m, n, single=False):
    """The launch route (lu/batched.py's `route`, launched by its `launch`) of an m x n stack
    of the real `element` on the device: the register kernel (lu/batched.py) below the
    tuning table's batched_blocked_min_order, the blocked one (lu/batched_blocked.py) from
    there; None where neither takes the order, or for `single` (one matrix, a batch of one)
    where the order passes the table's one_matrix_batched_max."""
    table = _tuning.current(element=element)
    if single and max(m, n) > table.one_matrix_batched_max:
        return None
    if max(m, n) < table.batched_blocked_min_order:
        found = _batched.route(device_id, element.ctype, m, n, table.batched_shapes)
        if found is not None:
            return found
    return _batched_blocked.route(device_id, element.ctype, m, n, table.batched_blocked_shapes)


def plain_route(a):
    """(element, route) where `a` is a non-empty float32 or float64 CuPy array on the
    current device whose order the batched kernels take (`kernel_route`; a 2-D `a` as a
    batch of one), else None: the common call, which goes to `on_kernel` without the general
    path's conversions."""
    cp = sys.modules.get("cupy")
    if cp is None or type(a) is not cp.ndarray:
        return None
    element = _PLAIN.get(a.dtype)
    if element is None or 0 in a.shape:
        return None
    device_id = cp.cuda.runtime.getDevice()
    if a.data.device_id != device_id:
        return None
    found = kernel_route(device_id, element, *a.shape[-2:], single=a.ndim == 2)
    return None if found is None else (element, found)


def on_kernel(a, kind, element, found, check_finite, overwrite_a):
    """(lu, piv, info) of the device stack or matrix `a` (..., M, N), real, M, N > 0, by
    one launch of the batched kernel (`found`: lu/batched.py's `route` of its order on the
    current device): lu (..., M, N) C-contiguous and piv (..., K) int32 CuPy arrays, info as
    `factor`'s.  The kernel reads a C-contiguous input of the working dtype where it lies
    and writes new factors (in place under overwrite_a for CuPy input); it reports singular
    and non-finite matrices through host-mapped flags, so the call's one host
    synchronisation is the stream's, and the info array is copied back only when a matrix
    is singular."""
    cp = cupy()
    shape = a.shape
    m, n = shape[-2:]
    k = min(m, n)
    count = math.prod(shape[:-2])
    src = a if kind == "cupy" and a.dtype == element.dtype else _arrays.to_device(
        a, kind, "a", element.dtype)
    # Factored in place: a copy of ours (an upload, a conversion), or the caller's CuPy
    # array under overwrite_a; else into a new array.
    owned = kind not in ("cupy", "torch") or src.data.ptr != _arrays.device_ptr(a, kind)
    if not src.flags.c_contiguous:
        src, owned = cp.ascontiguousarray(src), True
    in_place = owned or (overwrite_a and kind == "cupy")
    dst = src if in_place else cp.empty(shape, element.dtype)
    pivinfo = cp.empty(count * k + count, np.int32)
    flags = _mapped.flags()
    gen = flags.next_gen()
    _batched.launch(found, count, m, n, src.data.ptr, dst.data.ptr, pivinfo.data.ptr,
                    pivinfo.data.ptr + pivinfo.itemsize * count * k, flags.ptr, gen)
    singular, nonfinite = flags.wait(gen)
    if check_finite and nonfinite:
        raise ValueError(_finite.NONFINITE)
    info = pivinfo[count * k:].get() if singular else None
    piv = pivinfo[:count * k].reshape(shape[:-2] + (k,))
    return dst, piv, info


def _one_by_one(A, options, backend, one):
    """Each matrix through the single-matrix route `one` (complex: cuSOLVER; real matrices
    above the batched kernel's order: our blocked driver), in place in A."""
    cp = cupy()
    count, m, n = A.shape
    piv = cp.empty((count, min(m, n)), np.int32)
    info = np.zeros(count, np.int32)
    for i in range(count):
        _, lu, p, inf = one(A[i], options, backend)
        if lu.data.ptr != A[i].data.ptr:
            A[i] = lu
        piv[i] = cp.asarray(p, dtype=np.int32)
        info[i] = inf
    return A, piv, info


def singular_warning(info, batch):
    """SciPy's warning for a stack, once: how many matrices have an exactly zero pivot, the
    first of them and its diagonal number; None where none has (info None: none has)."""
    if info is None:
        return None
    bad = np.flatnonzero(info)
    if not bad.size:
        return None
    first = bad[0]
    where = tuple(int(i) for i in np.unravel_index(first, batch)) if batch else ()
    return (f"Diagonal number {int(info[first])} is exactly zero. Singular matrix: "
            f"{bad.size} of the {info.size} matrices of the stack have an exactly zero "
            f"pivot, the first at index {where}.")


def permutations(piv, m):
    """perm (B, m) with (L U)[b, i] = A[b, perm[b, i]], from 0-based LAPACK pivots (B, K) on
    the host: the interchanges applied in order to the identity, all matrices at once."""
    count, k = piv.shape
    perm = np.tile(np.arange(m), (count, 1))
    rows = np.arange(count)
    for i in range(k):
        p = piv[:, i]
        held = perm[rows, i].copy()
        perm[rows, i] = perm[rows, p]
        perm[rows, p] = held
    return perm


def over_batch(f, arrays, core_ndims, xp):
    """f applied to each matrix of broadcast stacks, as SciPy's _apply_over_batch: `arrays`
    with their core ndims (an int, or "1|2": 2 if the array has 2 or more dims, else 1); f
    takes the per-matrix arrays and returns one array.  The results stacked in module xp
    with the broadcast batch shape in front."""
    cores, batches = [], []
    for x, nd in zip(arrays, core_ndims):
        if nd == "1|2":
            nd = 2 if x.ndim >= 2 else 1
        cores.append(tuple(x.shape[len(x.shape) - nd:]))
        batches.append(tuple(x.shape[:len(x.shape) - nd]))
    batch = np.broadcast_shapes(*batches)
    if not batch:
        return f(*arrays)
    views = [xp.broadcast_to(x, batch + c) if hasattr(xp, "broadcast_to") else x
             for x, c in zip(arrays, cores)]
    results = [f(*(v[index] for v in views)) for index in np.ndindex(batch)]
    if not results:
        raise ValueError("an empty stack (a zero-size batch dimension) has nothing to solve")
    out = xp.stack([xp.asarray(r) for r in results])
    return out.reshape(batch + tuple(out.shape[1:]))


def solve_batched(lu, piv, b, check_finite, trans=0):
    """lu_solve of broadcast CuPy stacks in one launch (lu/getrs_batched.py; trans 0:
    A x = b, 1 or 2: A^T x = b, the same for real A): lu (..., N, N), piv (..., N), b (...,
    N, K) or (..., N) as over_batch broadcasts them (b with
    one dimension: one vector for all), real, 0 < N <= its MAX_ORDER, every batch and
    right-hand side non-empty; None where the stacks are not of that kind (the caller solves
    them one by one).  SciPy's checks: ValueError for pivots outside [0, N), for b's infs or
    NaNs (check_finite) and for mismatched shapes, by the kernel, read after one wait for the
    stream.  The result has the batch shape in front and b's core shape, C-contiguous."""
    cp = cupy()
    if lu.ndim < 2 or piv.ndim < 1 or lu.shape[-1] != lu.shape[-2]:
        return None
    n = lu.shape[-1]
    core = 2 if b.ndim >= 2 else 1
    if not 0 < n <= _getrs_batched.MAX_ORDER or b.shape[b.ndim - core] != n \
            or piv.shape[-1] != n or piv.dtype.kind not in "iu":
        return None
    try:
        dtype = np.promote_types(_element(lu.dtype).dtype, _element(b.dtype).dtype)
    except TypeError:
        return None
    if np.dtype(dtype).kind != "f":
        return None
    batch = np.broadcast_shapes(lu.shape[:-2], piv.shape[:-1], b.shape[:b.ndim - core])
    rhs = tuple(b.shape[b.ndim - core:])
    count, nrhs = math.prod(batch), math.prod(rhs[1:])
    if not (count and nrhs):
        return None
    B = cp.array(cp.broadcast_to(b, batch + rhs), dtype=dtype, order="C")   # ours: solved in place
    P = cp.ascontiguousarray(cp.broadcast_to(piv, batch + (n,)), dtype=np.int32)
    LU = cp.ascontiguousarray(cp.broadcast_to(lu.astype(dtype, copy=False), batch + (n, n)))
    flags = _mapped.flags()
    gen = flags.next_gen()
    X = getrs_stack(cp, LU.reshape(count, n, n), P.reshape(count, n),
                    B.reshape(count, n, nrhs), trans, overwrite_b=True, gen=gen)
    bad_pivot, nonfinite = flags.wait(gen)          # the kernel's checks: one wait
    if check_finite and nonfinite:
        raise ValueError(_finite.NONFINITE)
    if bad_pivot:
        raise ValueError(f"piv must hold 0-based row indices in [0, {n})")
    return X.reshape(batch + rhs)


def getrs_stack(xp, LU, piv, B, trans=0, overwrite_b=False, gen=None):
    """op(A_b)^{-1} B_b for every b of a stack of factors, a (count, n, nrhs) array of module
    xp: LU (count, n, n) C-contiguous (lu_factor's row-major factors), piv (count, n) int32
    0-based pivots, B (count, n, nrhs) of LU's dtype; trans 0: A x = b, 1: A^T x = b, 2:
    A^H x = b.  overwrite_b: the solution may take B's memory (a C-contiguous B), else a new
    array.  Real stacks of order up to getrs_batched.MAX_ORDER on the device: one launch,
    which reports pivots out of range and infs or NaNs in B under mapped-flag generation
    `gen` (getrs_batched_ptr; `checked` says whether this stack goes there); the NumPy model
    on the emulation; others (complex, larger) one matrix at a time (lu/getrs.py), pivots in
    range."""
    count, n, nrhs = B.shape
    if checked(xp, LU.dtype, n):
        X = xp.ascontiguousarray(B) if overwrite_b else xp.array(B, order="C")
        _getrs_batched.getrs_batched_ptr(count, n, nrhs, LU.data.ptr, piv.data.ptr,
                                         X.data.ptr, _element(np.dtype(LU.dtype)), trans,
                                         gen=gen)
        return X
    if np.dtype(LU.dtype).kind == "f" and n <= _getrs_batched.MAX_ORDER and xp is np:
        return _getrs_batched.reference(LU, piv, B, trans)
    X = xp.empty(B.shape, LU.dtype)
    for i in range(count):
        X[i] = _getrs.getrs(xp, LU[i], xp.array(B[i], order="C"), piv[i], trans)
    return X


def checked(xp, dtype, n):
    """Whether getrs_stack of such a stack runs the device kernels that check the pivots'
    range and b's finiteness."""
    return xp is not np and np.dtype(dtype).kind == "f" and n <= _getrs_batched.MAX_ORDER


def inverse_norm1_stack(xp, LU, piv):
    """xlacn2's estimates of ||A_b^{-1}||_1 for a stack of factors (as getrs_stack takes
    them), a float64 array (count,): real stacks of order up to 128 on the GPU in one launch
    (getrs_batched.inverse_norm1_ptr), a CuPy array not waited for; others by lu/getrs.py's
    inverse_norm1 over batched solves, a NumPy array."""
    count, n, _ = LU.shape
    if xp is not np and np.dtype(LU.dtype).kind == "f" and n <= _getrs_batched.REGISTER_ORDER:
        est = xp.empty(count, np.float64)
        _getrs_batched.inverse_norm1_ptr(count, n, LU.data.ptr, piv.data.ptr, est.data.ptr,
                                         _element(np.dtype(LU.dtype)))
        return est

    def solve(x, trans):
        return getrs_stack(xp, LU, piv, x[:, :, None], 2 * trans)[:, :, 0]

    with np.errstate(all="ignore"):
        return _getrs.inverse_norm1(solve, count, n, xp, LU.dtype)


def native(x, xp):
    """x (NumPy, CuPy, torch or an array_like) as an array of module xp, without a copy
    where it already is one."""
    kind = _arrays.array_kind(x) if hasattr(x, "shape") else "numpy"
    if kind.startswith("torch"):
        x = x.detach()
        if xp is np or kind == "torch_cpu":
            x = x.cpu().numpy()
            return x if xp is np else cupy().asarray(np.ascontiguousarray(x))
        return cupy().from_dlpack(x)
    if xp is np:
        return np.asarray(x) if kind == "numpy" else cupy().asnumpy(x)
    return cupy().asarray(np.ascontiguousarray(x) if kind == "numpy" else x)


def _all_finite(xp, x):
    """x (C-contiguous, any ndim) holds no inf/NaN; the device check takes 2-D views."""
    if xp is np:
        return bool(np.isfinite(x).all())
    return _finite.device_all_finite(x.reshape(-1, x.shape[-1]) if x.ndim > 2 else x)


def context(xp, kind, arrays):
    """The inputs' device made current (and torch's stream CuPy's); nothing for NumPy."""
    if xp is np:
        return contextlib.nullcontext()
    return _arrays.launch_context(kind, _arrays.device_of(arrays))
