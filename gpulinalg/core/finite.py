"""scipy's check_finite: whether a matrix holds an inf or a NaN, on the host or on the GPU.

The GPU check is kernels/finite.cu, one read of the matrix in whatever layout it has, no
temporary of its size, for float32, float64, complex64 and complex128 (a complex element is
finite when both parts are); its answer stays on the device until the caller needs it, so a
factorization can be enqueued behind it without a host wait.
"""

import functools

import numpy as np

from .backend import cupy
from .device import sm_count
from .element import C64, C128, F32, F64, exact
from .kernels import Launcher, get_kernel

NONFINITE = "array must not contain infs or NaNs"   # SciPy's check_finite message
FAMILY = "finite"
# The element types checked; all_finite's template argument is the Element's C type (a complex
# element is two adjacent components, real and imaginary: float2, double2).
ELEMENTS = (F32, F64, C64, C128)
KERNEL_NAMES = tuple(f"all_finite<{e.ctype}>" for e in ELEMENTS)
_THREADS = 256          # all_finite's block (its __launch_bounds__)
_SEG = 1024             # elements of one line per warp item (FIN_SEG in kernels/finite.cu)


def host_all_finite(x, rows=None):
    """True when a 2-D host matrix holds no inf/NaN; in blocks of rows (about 16 MiB of
    temporaries at a time, never one the size of the matrix)."""
    rows = rows or max(1, (1 << 22) // max(1, x.shape[1]))
    return all(np.isfinite(x[i:i + rows]).all() for i in range(0, x.shape[0], rows))


def _lines(x, unit=None):
    """(outer, inner, outer stride, inner stride): x's elements as lines along its smaller
    stride (one line where x is contiguous or has one dimension longer than 1); strides in
    units of `unit` bytes (default: one element, x.itemsize)."""
    unit = unit or x.itemsize
    if x.flags.c_contiguous or x.flags.f_contiguous:
        return 1, x.size, 0, x.itemsize // unit
    dims = [(d, s // unit) for d, s in zip(x.shape, x.strides) if d != 1]
    if len(dims) == 1:
        return 1, x.size, 0, dims[0][1]
    (m, s0), (n, s1) = dims
    return (m, n, s0, s1) if abs(s1) <= abs(s0) else (n, m, s1, s0)


def _kernel_args(x):
    """(all_finite's template argument, outer, inner, outer stride, inner stride) that check
    the non-empty array x, strides in components (float or double: the kernel's unit, a
    complex element is two of them); TypeError for a dtype or shape it does not take."""
    el = exact(x.dtype, ELEMENTS)
    if el is None or x.ndim > 2:
        raise TypeError(f"the finite check takes float32, float64, complex64 or complex128 "
                        f"arrays of at most 2 dimensions, got {x.dtype} {x.shape}")
    name = el.ctype
    outer, inner, s_outer, s_inner = _lines(x, el.real.itemsize)
    if el.is_complex and s_inner == 2:   # adjacent complex elements: one real line, 2x long
        name, inner, s_inner = el.real.ctype, 2 * inner, 1
    return name, outer, inner, s_outer, s_inner


def device_finite_flag(x):
    """A 0-d device bool, true when x (a float32, float64, complex64 or complex128 CuPy array
    of at most 2 dimensions, any strides) holds no inf/NaN (complex: in neither part): one
    kernel on the current stream, no host wait."""
    cp = cupy()
    ok = cp.empty((), dtype=np.bool_)
    cp.cuda.runtime.memsetAsync(ok.data.ptr, 1, 1, cp.cuda.get_current_stream().ptr)
    if x.size == 0:
        return ok
    name, outer, inner, s_outer, s_inner = _kernel_args(x)
    items = outer * -(-inner // _SEG)
    grid = max(1, min(-(-items // (_THREADS // 32)), 8 * sm_count()))
    launch = _launcher(cp.cuda.runtime.getDevice(), name)
    launch((grid, 1, 1), (_THREADS, 1, 1), x.data.ptr, outer, inner, s_outer, s_inner,
           ok.data.ptr)
    return ok


def device_all_finite(x):
    """True when a float32, float64, complex64 or complex128 CuPy array holds no inf/NaN
    (waits for the check)."""
    return x.size == 0 or bool(device_finite_flag(x))


@functools.lru_cache(maxsize=None)
def _launcher(device_id, name):
    """all_finite<name>'s launcher on the device (current when called)."""
    return Launcher(get_kernel(FAMILY, f"all_finite<{name}>"), "PqqqqP")
