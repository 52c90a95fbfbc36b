"""Run SciPy's own LU tests (the installed scipy/linalg/tests/test_decomp_lu.py) with SciPy's
lu, lu_factor and lu_solve replaced by gpulinalg's, on the GPU.

    python3 tools/scipy_lu_suite.py [--cupy PATH] [pytest options...]

The replacement happens before pytest imports the test module, so its `from scipy.linalg
import lu, lu_factor, lu_solve` binds ours.  With --cupy PATH, CuPy's
tests/cupyx_tests/scipy_tests/linalg_tests/test_decomp_lu.py (from a CuPy source checkout; the
wheel does not ship its tests) runs too, with cupyx.scipy.linalg's three functions replaced by
ours.  Prints pytest's summary (-rf lists each failure) and exits with pytest's status.
"""

import argparse
import os
import sys

import pytest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cupy", metavar="PATH", default=None,
                        help="CuPy's test_decomp_lu.py to run the same way")
    args, rest = parser.parse_known_args()

    import scipy.linalg
    import gpulinalg
    for name in ("lu", "lu_factor", "lu_solve"):
        setattr(scipy.linalg, name, getattr(gpulinalg, name))
    paths = [os.path.join(os.path.dirname(scipy.linalg.__file__), "tests",
                          "test_decomp_lu.py")]
    if args.cupy:
        import cupyx.scipy.linalg
        for name in ("lu", "lu_factor", "lu_solve"):
            setattr(cupyx.scipy.linalg, name, getattr(gpulinalg, name))
        paths.append(args.cupy)
    code = pytest.main(paths + ["-q", "-rf", "-p", "no:cacheprovider"] + rest)
    sys.exit(int(code))


if __name__ == "__main__":
    main()
