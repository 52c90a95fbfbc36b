"""The distributed LU (gpulinalg/lu/multi.py) on virtual devices: several NumpyOps with
emulated streams and events, for the CPU tests."""

import functools

import numpy as np

from .. import tuning
from ..lu.distribution import ColumnCyclic, gather
from ..lu.multi import getrf_multi
from ..lu.transfers import pipelined_upload
from .emulation import NumpyOps

__all__ = ["factor_host"]


def factor_host(a, nb, ndev, make_panel, lookahead, inv_threshold, collect=True, out=None,
                table=None, final=None):
    """The distributed LU on `ndev` virtual devices (NumpyOps): a is factored in place
    (float32 or float64, C-order), or into `out` (same shape, any content; `a` is then only read);
    returns (piv, info).  The CPU tests' model of lu/multi.factor_devices: the devices'
    columns arrive chunk by chunk on emulated streams (a missing wait reads NaN; the first
    table.scatter_first chunks at once, the rest after step 0's panel copies), and with
    `collect` (as for a GPU-resident matrix) `out` (default `a`) is the home that takes the
    finished blocks and the left swaps; without, the devices swap and are gathered into it.
    make_panel() makes each device's panel object; `table`: the tuning table (default: the
    one in force); `final`: getrf_multi's (with `collect`)."""
    table = tuning.current() if table is None else table
    m, n = a.shape
    dist = ColumnCyclic(n, nb, ndev)
    devs, arrivals, rests = [], [], []

    def copier(d):   # copy(i, chunk, ev) for pipelined_upload, on d's emulated scatter stream
        def copy(i, chunk, ev):
            for c0, c1 in chunk:
                l0, l1 = dist.local_range(d, c0, c1)
                devs[d].copy_in(devs[d].a[:, l0:l1], a[:, c0:c1])
            devs[d].record("scatter", ev)
        return copy

    for d in range(ndev):
        devs.append(NumpyOps(np.full((m, dist.local_width(d)), np.nan, a.dtype), nb,
                             cols=dist.bound(d), receive=True, npiv=min(m, n)))
        event = functools.partial(devs[d].event, "scatter")
        got, rest = pipelined_upload(dist.chunks(d), event, copier(d), table.scatter_first)
        arrivals.append(got)
        rests.append(rest)

    out = a if out is None else out
    home = NumpyOps(out, nb, npiv=min(m, n)) if collect else None
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold, arrivals=arrivals, home=home,
                            received=lambda: [rest() for rest in rests], table=table,
                            final=final)
    if home is not None:
        home.finish()
    else:
        gather([dev.a for dev in devs], dist, out)
    return piv, info
