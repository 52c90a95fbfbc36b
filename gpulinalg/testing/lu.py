"""The LU's test hooks: `lu_factor`, `lu` and `lu_solve` as gpulinalg's, run on a plan
`Backend` built from

- emulate=True: the same plan run on the host, on the NumPy emulation of the device steps
  (gpulinalg/testing/emulation.py: `NumpyOps`), with the CPU panel (`CpuPanel`) or the GPU
  panel's recursion on the host (`EmulatedGpuPanel`); `devices` then counts virtual devices
  (gpulinalg/testing/multi.py: `factor_host`).  Needs no GPU; never a measure of speed.
  precision="auto" means "fp32" there.
- timeline: a list that receives the driver's per-step record (a `driver.HostClock` for the
  host's clock only);
- inv_threshold: the norm of L11^{-1} below which U12 is a product with it (CPU panel).
"""

import functools

import numpy as np

from .. import linalg
from ..core import arrays, finite
from ..lu import plan as lu_plan
from ..lu.driver import INV_THRESHOLD, getrf

__all__ = ["lu_factor", "lu", "lu_solve", "emulated_panel", "run", "HookBackend", "backend"]


class HookBackend(lu_plan.Backend):
    """A plan backend with the test hooks: `run` also runs the route "emulated"."""

    def run(self, plan, host=None, src=None):
        return run(plan, host, src)


def backend(emulate=False, timeline=None, inv_threshold=None):
    """The plan backend of the hooks (see the module docstring)."""
    return HookBackend(bool(emulate), timeline,
                       INV_THRESHOLD if inv_threshold is None else inv_threshold)


def lu_factor(a, overwrite_a=False, check_finite=True, *, panel="auto", block_size=None,
              lookahead=1, precision="auto", devices=None, emulate=False, timeline=None,
              inv_threshold=None):
    """gpulinalg.lu_factor with the test hooks (see the module docstring)."""
    options = lu_plan.Options(panel, block_size, lookahead, precision, devices)
    return linalg._lu_factor(a, overwrite_a, check_finite, options,
                             backend(emulate, timeline, inv_threshold))


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False, *,
       panel="auto", block_size=None, lookahead=1, precision="auto", devices=None,
       emulate=False, timeline=None, inv_threshold=None):
    """gpulinalg.lu with the test hooks (see the module docstring)."""
    options = lu_plan.Options(panel, block_size, lookahead, precision, devices)
    return linalg._lu(a, permute_l, overwrite_a, check_finite, p_indices, options,
                      backend(emulate, timeline, inv_threshold))


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True, *, emulate=False):
    """gpulinalg.lu_solve; with emulate, the same steps on the host (SciPy's triangular
    solves, the reference laswp), inputs taken as NumPy."""
    if not emulate:
        return linalg.lu_solve(lu_and_piv, b, trans, overwrite_b, check_finite)
    if linalg._stacked_solve(lu_and_piv, b):
        return linalg._lu_solve_stack(lu_and_piv, b, trans, check_finite,
                                      functools.partial(lu_solve, emulate=True), emulated=True)
    from ..lu.getrs import getrs
    _, lu_, b, piv, n, bshape, dtype = linalg._solve_inputs(lu_and_piv, b, trans,
                                                            kind="numpy")
    bh = arrays.host_view(b, "b")
    if check_finite and not np.isfinite(bh).all():
        raise ValueError(finite.NONFINITE)
    if 0 in bshape:
        return np.empty(bshape, dtype)
    LU = np.asarray(arrays.host_view(lu_, "lu"), dtype=dtype)
    X = np.array(bh, dtype=dtype, order="C").reshape(n, -1)
    X = getrs(np, LU, X, piv, trans)
    return linalg._solution(np, X, bshape)


def emulated_panel(name, devices=1, table=None, element=None):
    """The panel object of the emulated route: "gpu" or "cpu", on `devices` virtual devices,
    for a matrix of `element` (default float32) (as lu.plan.make_panel builds them on the
    GPU)."""
    if name == "gpu":
        from ..core.element import F32
        from .panel_models import EmulatedGpuPanel
        return EmulatedGpuPanel(devices=devices, table=table, element=element or F32)
    from ..lu.panel_cpu import CpuPanel
    return CpuPanel(threaded=devices <= 1, table=table)


def run(plan, host=None, src=None):
    """lu.plan.run, and the route "emulated": the plan's driver on NumpyOps, the host matrix
    factored in place or in a C-ordered copy of the working dtype.  Returns (numpy, lu, piv,
    info)."""
    if plan.route != lu_plan.EMULATED:
        return lu_plan.run(plan, host, src)
    from .emulation import NumpyOps
    A = host if plan.source == lu_plan.IN_PLACE else np.array(host, dtype=plan.element.dtype,
                                                               order="C")
    if plan.devices > 1:   # the several-GPU driver on virtual devices
        from .multi import factor_host
        panels = functools.partial(emulated_panel, plan.panel, devices=plan.devices,
                                   table=plan.table, element=plan.element)
        piv, info = factor_host(A, plan.nb, plan.devices, panels, plan.lookahead,
                                plan.inv_threshold, table=plan.table)
    else:
        panel = emulated_panel(plan.panel, table=plan.table, element=plan.element)
        piv, info = getrf(NumpyOps(A, plan.nb), panel, plan.nb, plan.lookahead,
                          plan.inv_threshold, plan.timeline)
    return np, A, piv, info
