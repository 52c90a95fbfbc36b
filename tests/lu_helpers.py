"""Shared checks for the LU tests."""

import numpy as np


def assert_same_pivots(piv, ref_lu, ref_piv, rtol=1e-4):
    """Pivots equal LAPACK's, or first differ at a column where LAPACK's choice was a near-tie.

    Our updates sum in another order than LAPACK's, so a candidate within rounding of the
    maximum (|l_ij| >= 1 - rtol in LAPACK's L) may win instead; after that the two
    factorizations legitimately part ways.  Anything else is a wrong pivot.
    """
    piv, ref_piv, ref_lu = np.asarray(piv), np.asarray(ref_piv), np.asarray(ref_lu)
    assert piv.shape == ref_piv.shape
    diff = np.nonzero(piv != ref_piv)[0]
    if diff.size == 0:
        return
    j = int(diff[0])
    below = np.abs(ref_lu[j + 1:, j])
    runner_up = float(below.max()) if below.size else 0.0
    assert runner_up >= 1 - rtol, (
        f"pivot {j} is {piv[j]}, LAPACK's {ref_piv[j]}, and no other candidate was within "
        f"{rtol} of the maximum (runner-up |l| = {runner_up:.7f})")
