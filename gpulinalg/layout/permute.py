"""A whole LU's row interchanges applied to a few columns by one gather: the launcher of
kernels/permute.cu, for lu_solve's few-column path (float32 and float64), and its NumPy model.

`permute_rows_ptr` launches by device pointer on the current device and stream: X := P B for
the 0-based LAPACK pivots piv (n of them, in order), B read with any strides, X row-major;
pivots outside [0, n) and non-finite values of B are reported through host-mapped flags
(core/mapped.py) instead of a synchronisation.  `max_rows()` is the largest n one block's
shared memory holds; `reference` computes the same on the host.
"""

import functools

import numpy as np

from ..core import device
from ..core.backend import cupy
from ..core.element import F32, REAL_KERNEL, exact
from ..core.kernels import Launcher, get_kernel
from .laswp import laswp_reference

FAMILY = "permute"
THREADS = 512               # PERM_THREADS: the block's threads
SMEM_STEP = 4096            # shared memory of a launch, rounded up to this (launchers cached)
_WORD = np.dtype(np.int32).itemsize     # one entry of the permutation in shared memory
ELEMENTS = REAL_KERNEL
_SPECS = "iiPPqqPqPii"      # n, nrhs, piv, B, rs, cs, X, ldx, flags, gen, inverse


def _name(ctype):
    return f"permute_rows<{ctype}>"


KERNEL_NAMES = tuple(_name(e.ctype) for e in ELEMENTS)


def max_rows(device_id=None):
    """The largest n of one launch: its n ints of permutation in the shared memory a block
    of the current (or given) device may opt in to."""
    return device.max_shared_per_block(device_id) // _WORD


@functools.lru_cache(maxsize=None)
def _function(device_id, ctype):
    """The kernel on the device, opted in once to the shared memory of max_rows."""
    return get_kernel(FAMILY, _name(ctype), dynamic_smem=_WORD * max_rows(device_id))


@functools.lru_cache(maxsize=None)
def _launcher(device_id, ctype, smem):
    return Launcher(_function(device_id, ctype), _SPECS, smem)


def permute_rows_ptr(n, nrhs, pivp, bp, rs, cs, xp, ldx, flagsp, gen, element=F32,
                     inverse=False):
    """X (n x nrhs at xp, row-major, leading dimension ldx) := P B, (P B)(i, :) =
    B(perm[i], :) for the interchanges i <-> piv[i], i = 0 .. n-1 in order (int32 at pivp);
    inverse: P^T B, the interchanges in reverse order, X(perm[i], :) = B(i, :).  B (n x nrhs
    at bp, rows rs and columns cs elements apart, any signs) of `element`s (F32 or F64).
    `gen` stored to the host-mapped flagsp[0] where a pivot lies outside [0, n) (that
    interchange skipped) and to flagsp[1] where B holds an inf or NaN.  One block on the
    current device and stream; no validation (0 < n <= max_rows(), nrhs >= 1)."""
    dev = cupy().cuda.runtime.getDevice()
    smem = -(-_WORD * n // SMEM_STEP) * SMEM_STEP
    launch = _launcher(dev, element.ctype, smem)
    launch((1, 1, 1), (THREADS, 1, 1), n, nrhs, pivp, bp, rs, cs, xp, ldx, flagsp, gen,
           int(inverse))


def permute_rows(B, piv, flags, gen, inverse=False):
    """P B (inverse: P^T B) as a new row-major CuPy array of B's dtype (see permute_rows_ptr):
    B (n, nrhs) float32 or float64 with whole-element strides, piv int32 (n,) on the current
    device, the checks reported to the host-mapped `flags` under `gen`."""
    cp = cupy()
    n, nrhs = B.shape
    size = B.itemsize
    X = cp.empty((n, nrhs), B.dtype)
    permute_rows_ptr(n, nrhs, piv.data.ptr, B.data.ptr, B.strides[0] // size,
                     B.strides[1] // size, X.data.ptr, nrhs, flags.ptr, gen,
                     exact(B.dtype), inverse)
    return X


def reference(piv, b, inverse=False):
    """(X, bad, nonfinite) of permute_rows for host arrays: X = P b (inverse: P^T b) as a new
    row-major (n, nrhs) array (b 1-D: one column), whether a pivot lies outside [0, n)
    (skipped, as the kernel does), whether b holds an inf or NaN."""
    b2 = np.asarray(b).reshape(len(piv), -1)
    n = b2.shape[0]
    piv = np.asarray(piv, np.int64)
    bad = bool(((piv < 0) | (piv >= n)).any())
    perm = laswp_reference(np.arange(n), np.where((piv < 0) | (piv >= n), np.arange(n), piv))
    if inverse:
        x = np.empty_like(b2)
        x[perm] = b2
    else:
        x = b2[perm]
    return np.ascontiguousarray(x), bad, not np.isfinite(b2).all()
