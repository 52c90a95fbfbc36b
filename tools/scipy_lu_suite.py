"""Run SciPy's own LU tests (the installed scipy/linalg/tests/test_decomp_lu.py) with SciPy's
lu, lu_factor and lu_solve replaced by gpulinalg's, on the GPU; or, with --cupy PATH, CuPy's
(tests/cupyx_tests/scipy_tests/linalg_tests/test_decomp_lu.py of a CuPy source checkout: the
wheel does not ship its tests) with cupyx.scipy.linalg's three functions replaced by ours
(SciPy's stay SciPy's: the reference those tests compare with).

    python3 tools/scipy_lu_suite.py [--cupy PATH] [pytest options...]

The replacement happens before pytest imports the test module, so its `from ... import lu,
lu_factor, lu_solve` binds ours.  Prints pytest's summary (-rf lists each failure) and exits
with pytest's status.
"""

import argparse
import os
import sys

import pytest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cupy", metavar="PATH", default=None,
                        help="run CuPy's test_decomp_lu.py at PATH instead of SciPy's")
    args, rest = parser.parse_known_args()

    import gpulinalg
    if args.cupy:
        import cupyx.scipy.linalg as target
        path = args.cupy
    else:
        import scipy.linalg as target
        path = os.path.join(os.path.dirname(target.__file__), "tests", "test_decomp_lu.py")
    for name in ("lu", "lu_factor", "lu_solve"):
        setattr(target, name, getattr(gpulinalg, name))
    sys.exit(int(pytest.main([path, "-q", "-rf", "-p", "no:cacheprovider"] + rest)))


if __name__ == "__main__":
    main()
