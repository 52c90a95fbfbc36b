"""solve, inv and det as gpulinalg's, with the LU's test hook: emulate=True runs them on the
NumPy emulation of the LU (`gpulinalg.testing.lu.backend`), the rest of the work on NumPy and
SciPy's triangular solves.  Needs no GPU; never a measure of speed."""

from .. import gesv as _solve
from . import lu as _lu

__all__ = ["solve", "inv", "det"]


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False, *, precision="auto", return_info=False,
          emulate=False):
    """gpulinalg.solve with the test hook (see the module docstring)."""
    return _solve._solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a,
                         transposed, precision, return_info, _lu.backend(emulate))


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False,
        emulate=False):
    """gpulinalg.inv with the test hook (see the module docstring)."""
    return _solve._inv(a, overwrite_a, check_finite, assume_a, lower, _lu.backend(emulate))


def det(a, overwrite_a=False, check_finite=True, *, emulate=False):
    """gpulinalg.det with the test hook (see the module docstring)."""
    return _solve._det(a, overwrite_a, check_finite, _lu.backend(emulate))
