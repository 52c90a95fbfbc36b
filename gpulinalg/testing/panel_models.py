"""Host models of the GPU panel's leaf kernels and GpuPanel's recursion on the host.

`EmulatedGpuPanel` is `GpuPanel` (gpulinalg/lu/panel_gpu.py) for the NumPy emulation of the
driver (gpulinalg/testing/emulation.py's NumpyOps): the same recursion (`factor_panel`), with
getf2_host leaves, queued on the emulated panel stream.  The models:

- getf2_host: the leaf kernels' unblocked LU (getrf_leaf, and every leaf's pivot rule);
- getf2_rows_host: getrf_leaf_row's lazy swaps (positions move, rows stay);
- getrf_panel_host: factor_panel with getf2_host leaves (`HostSteps`).

Each computes in its input's dtype, float32 (LAPACK sgetf2's arithmetic) or float64
(dgetf2's), with that dtype's sfmin (its smallest normal number) as the reciprocal's
threshold.  Their element operations are getf2_host's, in its order, so their factors agree
bit for bit (the kernels fuse the multiply-adds, so they agree with these to rounding).
"""

import numpy as np

from .. import tuning
from ..core.element import F32
from ..layout.laswp import laswp_reference
from ..lu.panel_gpu import GCAP, GMAX_ROW, LWMAX, GpuPanel, factor_panel, leaf_plan, row_block_cap

__all__ = ["EmulatedGpuPanel", "HostSteps", "emulated_leaf_width", "getf2_host",
           "getf2_rows_host", "getrf_panel_host"]

H100_SMS = 132          # the SM count the emulation assumes unless told


def getf2_host(a, piv, col_base=0):
    """Host model of the leaf kernels (getrf_leaf: same pivot rule, swaps, scaling) on the
    float32 or float64 block a, in place, in a's dtype; piv gets the pivots (0-based relative
    to a's first row); returns info (col_base + the first zero column, 1-based) or 0.  A
    column whose candidates are all NaN gets piv[j] = j and is left alone, as in the kernels."""
    mp, w = a.shape
    info = 0
    tiny, one = np.finfo(a.dtype).tiny, a.dtype.type(1)    # LAPACK's sfmin of the dtype
    for j in range(min(mp, w)):
        col = np.abs(a[j:, j])
        if np.isnan(col).all():                 # no candidate: no pivot, nothing moves
            piv[j] = j
            continue
        col = np.where(np.isnan(col), -1.0, col)
        p = j + int(np.argmax(col))            # first max, as i?amax and the kernel
        piv[j] = p
        if p != j:
            a[[j, p]] = a[[p, j]]
        pv = a[j, j]
        if pv != 0:
            if abs(pv) >= tiny:
                a[j + 1:, j] *= one / pv
            else:
                a[j + 1:, j] /= pv
            a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
        elif info == 0:
            info = col_base + j + 1
    return info


def getf2_rows_host(a, piv, col_base=0):
    """Host model of getrf_leaf_row: rows never move, positions do (lazy swaps).

    Row t keeps its values; pos[t] is where it belongs.  Column j: the first max |x| over the
    rows with pos >= j (ties to the smaller position), positions j and p exchange, the rows
    with pos > j are scaled and updated; at the end row t is written to a[pos[t]].  Element
    operations are getf2_host's (in a's dtype), so the results agree bit for bit.
    """
    mp, w = a.shape
    x = a.copy()
    pos = np.arange(mp)
    info = 0
    tiny, one = np.finfo(a.dtype).tiny, a.dtype.type(1)
    for j in range(min(mp, w)):
        v = np.abs(x[:, j])
        ok = (pos >= j) & ~np.isnan(v)
        if ok.any():
            best = v[ok].max()
            t = int(np.flatnonzero(ok & (v == best))[np.argmin(pos[ok & (v == best)])])
            p = int(pos[t])
        else:                                   # all NaN: no pivot, nothing moves
            piv[j] = j
            continue
        piv[j] = p
        tj = int(np.flatnonzero(pos == j)[0])
        pos[tj], pos[t] = p, j
        prow = x[t].copy()
        pv = prow[j]
        if pv != 0:
            below = pos > j
            if abs(pv) >= tiny:
                x[below, j] *= one / pv
            else:
                x[below, j] /= pv
            x[np.ix_(below, np.arange(j + 1, w))] -= np.outer(x[below, j], prow[j + 1:])
        elif info == 0:
            info = col_base + j + 1
    a[pos] = x
    return info


class HostSteps:
    """factor_panel's steps in NumPy (the CPU tests' model of the device recursion)."""

    def __init__(self):
        self.info = 0

    def leaf(self, a, piv, col_base):
        info = getf2_host(a, piv, col_base)
        self.info = self.info or info

    def laswp(self, a, piv):
        laswp_reference(a, piv)

    def trsm(self, l11, b):
        import scipy.linalg
        b[...] = scipy.linalg.solve_triangular(l11, b, lower=True, unit_diagonal=True)

    def gemm_sub(self, a, b, c):
        c -= a @ b

    def add(self, piv, off):
        piv += off


def getrf_panel_host(a, leaf_width=LWMAX, col_base=0):
    """factor_panel with the NumPy steps on a float32 or float64 array (in place, in its
    dtype); returns (piv, info)."""
    piv = np.zeros(min(a.shape), dtype=np.int32)
    steps = HostSteps()
    factor_panel(steps, a, piv, leaf_width, col_base)
    return piv, steps.info


def emulated_leaf_width(mp, devices=1, sm_count=H100_SMS, table=None, element=F32):
    """The leaf width the device's plan takes for a panel of mp rows of `element` on one of
    `devices` GPUs of sm_count SMs (one block of each leaf per SM) under `table` (default:
    the tuning table in force for `element`)."""
    table = tuning.current(element=element) if table is None else table
    plan = leaf_plan(mp, min(GMAX_ROW, sm_count), row_block_cap(devices, table),
                     tile_blocks=min(GCAP, sm_count), element=element)
    return plan[1]


class EmulatedGpuPanel(GpuPanel):
    """GpuPanel's recursion on the host, for NumpyOps: getf2_host leaves, queued on the
    emulated panel stream; info is kept on the host and returned by `final_info`.

    leaf_width: the recursion's leaf width; default, per panel, the width of the device's
    plan (`emulated_leaf_width`) on a GPU of sm_count SMs (132: the H100's) under `table`
    (None: the tuning table of `element` in force when the panel is made).  element: the
    matrix's element type, as GpuPanel's (a panel of another dtype is an error, as a
    workspace of another element is on the device).
    """

    def __init__(self, devices=1, leaf_width=None, sm_count=H100_SMS, table=None, element=F32):
        super().__init__(devices, tuning.current(element=element) if table is None else table,
                         element)
        self.leaf_width = leaf_width
        self.sm_count = sm_count
        self.host_steps = HostSteps()

    def _enqueue(self, ops, step, panel, piv, col_base):
        if panel.dtype != self.element.dtype:
            raise ValueError(f"a {panel.dtype} panel for an EmulatedGpuPanel of "
                             f"{self.element.name} (pass element=)")
        lw = self.leaf_width or emulated_leaf_width(panel.shape[0], self.devices,
                                                    self.sm_count, self.table, self.element)
        steps = self.host_steps
        ops._enqueue("panel", "getrf_gpu", step,
                     lambda: factor_panel(steps, panel, piv, lw, col_base))

    def workspace(self):
        raise TypeError("EmulatedGpuPanel has no device workspace")

    def final_info(self, ops):
        return int(self.host_steps.info)
