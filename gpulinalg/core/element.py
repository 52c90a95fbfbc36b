"""Element types: the one map from a dtype to everything that depends on it.

An `Element` names, for one working dtype, what the code around a kernel needs: the NumPy
dtype, the size of one element in bytes (pointer arithmetic), the C type and the template
argument of the kernels' instantiations, the LAPACK prefix (``sgetrf`` / ``dgetrf``), the
`struct` format of a scalar kernel argument, and the machine epsilon of error bounds.  The
LU's plan carries one from the public call to the steps, panels and launchers; nothing else
spells ``float32`` or ``4 *``.

The dtype policy is SciPy's (`working_dtype`): float16, float32, bool and 8- and 16-bit
integers compute in float32; float64 and wider integers in float64; complex64 and complex128 in
themselves.  Nothing is downcast.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["Element", "F32", "F64", "C64", "C128", "element", "exact", "working_dtype",
           "REAL_KERNEL",
           "describe_policy"]


@dataclass(frozen=True)
class Element:
    dtype: np.dtype      # the NumPy dtype of the matrix
    itemsize: int        # bytes per element (device pointer arithmetic)
    ctype: str           # C type of the kernels' template argument ("float", "double";
                         # complex: "float2", "double2", real and imaginary adjacent)
    lapack: str          # LAPACK prefix: "s", "d", "c", "z"
    fmt: str             # struct format of a scalar kernel argument (Launcher): "f", "d"
    eps: float           # machine epsilon (error bounds of the tests)

    @property
    def name(self):
        return self.dtype.name

    @property
    def is_complex(self):
        return self.dtype.kind == "c"

    @property
    def real(self):
        """The Element of one component: itself for a real type, F32 / F64 for complex."""
        return _BY_DTYPE[np.finfo(self.dtype).dtype]

    def lapack_func(self, name):
        """SciPy's LAPACK routine `name` without its prefix ("getrf") for this element."""
        from scipy.linalg import lapack
        return getattr(lapack, self.lapack + name)

    def __repr__(self):
        return f"Element({self.name})"


F32 = Element(np.dtype(np.float32), 4, "float", "s", "f", float(np.finfo(np.float32).eps))
F64 = Element(np.dtype(np.float64), 8, "double", "d", "d", float(np.finfo(np.float64).eps))
C64 = Element(np.dtype(np.complex64), 8, "float2", "c", "", float(np.finfo(np.float32).eps))
C128 = Element(np.dtype(np.complex128), 16, "double2", "z", "", float(np.finfo(np.float64).eps))

_BY_DTYPE = {e.dtype: e for e in (F32, F64, C64, C128)}

# The element types our own kernels compute in (complex goes to cuSOLVER through CuPy).
REAL_KERNEL = (F32, F64)


def working_dtype(dtype):
    """The dtype a matrix of `dtype` is factored in, as SciPy's lu_factor picks it and never a
    downcast: the narrower of float32 and float64 that holds every value exactly (float16,
    bool, 8- and 16-bit integers: float32; 32- and 64-bit integers, float64: float64), and
    complex64 / complex128 for complex input.  TypeError for anything else (objects, strings,
    long double, which SciPy would round to float64)."""
    dtype = np.dtype(dtype)
    if dtype in _BY_DTYPE:
        return dtype
    if dtype.kind in "biuf" and dtype.itemsize <= 8:
        return np.promote_types(dtype, F32.dtype)
    if dtype.kind in "fc":
        raise TypeError(f"dtype {dtype} has no GPU working precision (float32, float64, "
                        f"complex64, complex128); gpulinalg does not round it silently. "
                        f"Convert explicitly, e.g. a.astype(numpy.float64)")
    raise TypeError(f"unsupported dtype {dtype}: it cannot be cast to float(32, 64) or "
                    f"complex(64, 128); {describe_policy()}")


def element(dtype):
    """The Element of a working dtype (working_dtype's result, or any dtype it maps)."""
    return _BY_DTYPE[working_dtype(dtype)]


def exact(dtype, among=REAL_KERNEL):
    """The Element of `among` whose dtype is `dtype` itself (no policy, no conversion: an
    in-place kernel's operand), or None."""
    el = _BY_DTYPE.get(dtype)
    return el if el in among else None


def describe_policy():
    return ("gpulinalg computes float16, float32, bool and 8/16-bit integer input in float32, "
            "float64 and 32/64-bit integer input in float64, complex64 and complex128 in "
            "themselves, as SciPy does")
