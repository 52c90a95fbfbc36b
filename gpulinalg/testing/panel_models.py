"""Host models of the GPU panel's leaf kernels and GpuPanel's recursion on the host.

`EmulatedGpuPanel` is `GpuPanel` (gpulinalg/lu/panel_gpu.py) for the NumPy emulation of the
driver (gpulinalg/testing/emulation.py's NumpyOps): the same recursion (`factor_panel`), with
getf2_host leaves, queued on the emulated panel stream.  The models:

- getf2_host: the leaf kernels' unblocked LU (getrf_leaf, and every leaf's pivot rule);
- getf2_rows_host: getrf_leaf_row's lazy swaps (positions move, rows stay);
- getrf_cols_host: getrf_panel_cols' column slabs handed over in groups;
- getrf_panel_host: factor_panel with getf2_host leaves (`HostSteps`).

Their element operations are getf2_host's, in its order, so their factors agree bit for bit
(the kernels fuse the multiply-adds, so they agree with these to rounding).
"""

import numpy as np

from .. import tuning
from ..layout.laswp import laswp_reference
from ..lu.panel_gpu import (GCAP, GMAX_ROW, LWMAX, GpuPanel, cols_group, cols_max_rows,
                            factor_panel, leaf_plan, row_block_cap)

__all__ = ["EmulatedGpuPanel", "HostSteps", "emulated_leaf_width", "getf2_host",
           "getf2_rows_host", "getrf_cols_host", "getrf_panel_host"]

H100_SMS = 132          # the SM count the emulation assumes unless told


def getf2_host(a, piv, col_base=0):
    """Host model of the leaf kernels (getrf_leaf: same pivot rule, swaps, scaling) on the
    float32 block a, in place; piv gets the pivots (0-based relative to a's first row);
    returns info (col_base + the first zero column, 1-based) or 0."""
    mp, w = a.shape
    info = 0
    tiny = np.finfo(np.float32).tiny
    for j in range(min(mp, w)):
        col = np.abs(a[j:, j])
        col = np.where(np.isnan(col), -1.0, col)
        p = j + int(np.argmax(col))            # first max, as isamax and the kernel
        piv[j] = p
        if p != j:
            a[[j, p]] = a[[p, j]]
        pv = a[j, j]
        if pv != 0:
            if abs(pv) >= tiny:
                a[j + 1:, j] *= np.float32(1) / pv
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
    operations are getf2_host's, so the results agree bit for bit.
    """
    mp, w = a.shape
    x = a.copy()
    pos = np.arange(mp)
    info = 0
    tiny = np.finfo(np.float32).tiny
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
                x[below, j] *= np.float32(1) / pv
            else:
                x[below, j] /= pv
            x[np.ix_(below, np.arange(j + 1, w))] -= np.outer(x[below, j], prow[j + 1:])
        elif info == 0:
            info = col_base + j + 1
    a[pos] = x
    return info


def getrf_cols_host(a, cw, col_base=0, gw=None):
    """Host model of getrf_panel_cols (w <= COLS_LW columns in CW-wide slabs, handed over in
    groups of gw columns, default cols_group(cw, groups) with the cols_groups of the tuning
    table in force), in place; returns (piv, info).

    Slab s is factored by getf2_host's rules on its own columns; after each group of gw of
    them, every other column block applies the group's interchanges as the kernel does (the
    touched positions followed back through the transpositions), and the blocks right of it
    take U12 = L11^{-1} A12 by forward substitution and A22 -= L21 U12, one pivot column at a
    time and skipping the columns without a pivot.  Element operations and their order are
    getf2_host's, so the results agree bit for bit (the kernel's are getrf_leaf_row's: the
    same with fused multiply-adds).  A column whose candidates are all NaN gets piv[j] = j
    and is left alone (as the kernels).
    """
    mp, w = a.shape
    kk = min(mp, w)
    gw = cols_group(cw, tuning.current().cols_groups) if gw is None else gw
    piv = np.zeros(kk, dtype=np.int32)
    info = 0
    tiny = np.finfo(np.float32).tiny
    blocks = [a[:, c:c + cw].copy() for c in range(0, w, cw)]
    for s in range(-(-kk // cw)):
        x = blocks[s]
        mask = 0
        for k0 in range(0, min(cw, kk - s * cw), gw):   # group: slab columns k0 .. k0 + gs - 1
            j0 = s * cw + k0
            gs = min(gw, kk - j0, cw - k0)
            for jl in range(k0, k0 + gs):
                j = s * cw + jl
                col = np.abs(x[j:, jl])
                if np.isnan(col).all():
                    piv[j] = j
                    continue
                p = j + int(np.nanargmax(col))     # first max
                piv[j] = p
                x[[j, p]] = x[[p, j]]
                pv = x[j, jl]
                if pv != 0:
                    x[j + 1:, jl] = x[j + 1:, jl] * (np.float32(1) / pv) if abs(pv) >= tiny \
                        else x[j + 1:, jl] / pv
                    x[j + 1:, jl + 1:] -= np.outer(x[j + 1:, jl], x[j, jl + 1:])
                    mask |= 1 << jl
                elif info == 0:
                    info = col_base + j + 1
            ps = [int(p) for p in piv[j0:j0 + gs]]
            dests = [j0 + k for k in range(gs)] + [
                p for k, p in enumerate(ps) if p >= j0 + gs and p not in ps[:k]]
            srcs = []
            for d in dests:
                for m in reversed(range(gs)):
                    d = ps[m] if d == j0 + m else (j0 + m if d == ps[m] else d)
                srcs.append(d)
            for b, y in enumerate(blocks):
                if b == s:
                    continue
                y[dests] = y[srcs]
                if b > s:
                    u = y[j0:j0 + gs].copy()
                    for k in range(gs):
                        for m in range(k):
                            if mask >> (k0 + m) & 1:
                                u[k] -= x[j0 + k, k0 + m] * u[m]
                    y[j0:j0 + gs] = u
                    for k in range(gs):
                        if mask >> (k0 + k) & 1:
                            y[j0 + gs:] -= np.outer(x[j0 + gs:, k0 + k], u[k])
    a[...] = np.concatenate(blocks, axis=1) if blocks else a
    return piv, info


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
    """factor_panel with the NumPy steps on a float32 array (in place); returns (piv, info)."""
    piv = np.zeros(min(a.shape), dtype=np.int32)
    steps = HostSteps()
    factor_panel(steps, a, piv, leaf_width, col_base)
    return piv, steps.info


def emulated_leaf_width(mp, devices=1, sm_count=H100_SMS, table=None):
    """The leaf width the device's plan takes for a panel of mp rows on one of `devices`
    GPUs of sm_count SMs (one block of each leaf per SM) under `table` (default: the tuning
    table in force)."""
    table = tuning.current() if table is None else table
    plan = leaf_plan(mp, min(GMAX_ROW, sm_count), row_block_cap(devices, table),
                     tile_blocks=min(GCAP, sm_count), cols_rows=cols_max_rows(devices, table))
    return plan[1]


class EmulatedGpuPanel(GpuPanel):
    """GpuPanel's recursion on the host, for NumpyOps: getf2_host leaves, queued on the
    emulated panel stream; info is kept on the host and returned by `final_info`.

    leaf_width: the recursion's leaf width; default, per panel, the width of the device's
    plan (`emulated_leaf_width`) on a GPU of sm_count SMs (132: the H100's) under `table`
    (None: the tuning table in force when the panel is made).
    """

    def __init__(self, devices=1, leaf_width=None, sm_count=H100_SMS, table=None):
        super().__init__(devices, tuning.current() if table is None else table)
        self.leaf_width = leaf_width
        self.sm_count = sm_count
        self.host_steps = HostSteps()

    def _enqueue(self, ops, step, panel, piv, col_base):
        lw = self.leaf_width or emulated_leaf_width(panel.shape[0], self.devices,
                                                    self.sm_count, self.table)
        steps = self.host_steps
        ops._enqueue("panel", "getrf_gpu", step,
                     lambda: factor_panel(steps, panel, piv, lw, col_base))

    def workspace(self):
        raise TypeError("EmulatedGpuPanel has no device workspace")

    def final_info(self, ops):
        return int(self.host_steps.info)
