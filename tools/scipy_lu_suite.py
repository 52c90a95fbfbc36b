"""Run SciPy's own LU tests (the installed scipy/linalg/tests/test_decomp_lu.py) with SciPy's
lu, lu_factor and lu_solve replaced by gpulinalg's, on the GPU; with --basic, the classes
TestSolve, TestInv and TestDet of SciPy's test_basic.py with solve, inv and det replaced; or,
with --cupy PATH, CuPy's (tests/cupyx_tests/scipy_tests/linalg_tests/test_decomp_lu.py of a
CuPy source checkout: the wheel does not ship its tests) with cupyx.scipy.linalg's three
functions replaced by ours (SciPy's stay SciPy's: the reference those tests compare with).

    python3 tools/scipy_lu_suite.py [--basic | --cupy PATH] [pytest options...]

The replacement happens before pytest imports the test module, so its `from ... import lu,
lu_factor, lu_solve` binds ours.  Prints pytest's summary (-rf lists each failure) and exits
with pytest's status.
"""

import argparse
import functools
import os
import sys

import pytest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cupy", metavar="PATH", default=None,
                       help="run CuPy's test_decomp_lu.py at PATH instead of SciPy's")
    group.add_argument("--basic", action="store_true",
                       help="run SciPy's TestSolve, TestInv and TestDet (test_basic.py)")
    parser.add_argument("--emulate", action="store_true",
                        help="our functions on the NumPy emulation of the GPU (no GPU needed)")
    args, rest = parser.parse_known_args()

    import gpulinalg
    names = ("solve", "inv", "det") if args.basic else ("lu", "lu_factor", "lu_solve")
    if args.cupy:
        import cupyx.scipy.linalg as target
        paths = [args.cupy]
    else:
        import scipy.linalg as target
        folder = os.path.join(os.path.dirname(target.__file__), "tests")
        paths = ([os.path.join(folder, "test_basic.py") + f"::{c}"
                  for c in ("TestSolve", "TestInv", "TestDet")] if args.basic
                 else [os.path.join(folder, "test_decomp_lu.py")])
    for name in names:
        ours = getattr(gpulinalg, name)
        if args.emulate:
            from gpulinalg.testing import lu as testing_lu
            from gpulinalg.testing import solve as testing_solve
            module = testing_solve if args.basic else testing_lu
            ours = functools.partial(getattr(module, name), emulate=True)
        setattr(target, name, ours)
    sys.exit(int(pytest.main(paths + ["-q", "-rf", "-p", "no:cacheprovider"] + rest)))


if __name__ == "__main__":
    main()
