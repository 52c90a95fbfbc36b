"""The host panel: LAPACK's xgetrf factors each panel on the CPU (sgetrf for float32, dgetrf
for float64: the matrix's element type), xtrtri inverts L11.

`getrf` (gpulinalg/lu/driver.py) drives a panel object through one protocol, which `GpuPanel`
(gpulinalg/lu/panel_gpu.py) follows too:

    name                 "cpu" or "gpu": the timeline's label
    host_wait            whether factoring a panel waits on the host for the panel to arrive
    gated                whether getrf runs the gated loop (`enqueue_gated`) with this panel
    send(ops, step, j0, j1, after)                -> (start, sent): the panel on its way
    factor(ops, step, j0, j1, sent, inv_threshold) -> PanelResult: the panel factored, in place
    running()            the context manager getrf runs in
    final_info(ops)      LAPACK's info where the panel keeps it on the device (here 0)

`CpuPanel` ships the panel column-major to pinned host memory, factors it there, and ships it
back with its pivots and, where usable, L11^{-1} (the update then multiplies by the inverse,
with one step of refinement; else it solves with L11).  With `threaded` the host's work (the
wait for the panel, xgetrf, xtrtri: all release the GIL) runs on a worker thread, so that the
driver's thread enqueues the GPU's work meanwhile.  With `gated` as well, getrf enqueues the
GPU's whole chain from one panel to the next (the return trip, the swaps, U12 and the update
of the next panel's columns, the next panel's trip out) before the worker has factored the
panel: the chain waits on the GPU for a host flag that the worker raises (`upload`), so no
Python enqueue lies between two panels.  While a threaded panel runs, OpenBLAS leaves some
cores to the driver's thread and the interpreter switches threads sooner
(gpulinalg/lu/host_threads.py).
"""

import contextlib
import functools
import threading
import time
from dataclasses import replace

import numpy as np

from .. import tuning
from . import host_threads
from .driver import PanelResult, mark, unit_lower_inverse

__all__ = ["CpuPanel"]


class CpuPanel:
    """Panel factored on the host with LAPACK xgetrf, L11 inverted with xtrtri.

    Parameters
    ----------
    threaded : bool
        Run the host's work on a worker thread (`send` hands it the job "wait for the panel,
        factor it, invert L11"; `factor` or `result` collects it).  The multi-GPU driver
        passes False: the host's work then runs on the driver's thread when collected.
    gated : bool
        With `threaded`: let getrf run `enqueue_gated` (on ops that can gate a stream).
    table : gpulinalg.tuning.Tuning, optional
        The tuning table of the host settings (`openblas_spare_share`, `switch_interval_us`);
        default: the table in force when getrf starts.
    """

    name = "cpu"
    host_wait = True    # the panel's factorization waits on the host for the panel to arrive

    def __init__(self, threaded=True, gated=True, table=None):
        self.threaded = bool(threaded)
        self.gated = self.threaded and bool(gated)
        self.table = table
        self._jobs = {}    # step -> future (threaded) or callable: the host work of the panel

    def running(self):
        """The context getrf runs in: with a worker thread, OpenBLAS short of some cores (the
        driver's thread enqueues beside it) and a short switch interval."""
        if not self.threaded:
            return contextlib.nullcontext()
        table = self.table if self.table is not None else tuning.current()
        return host_threads.panel_worker_settings(table.openblas_spare_share,
                                                  table.switch_interval_us)

    def final_info(self, ops):
        """0: the host saw every pivot, and the results carry the info."""
        return 0

    def send(self, ops, step, j0, j1, after):
        """Once `after` (update stream) fires: transpose the panel, copy it to pinned memory
        (panel stream); the worker (threaded) waits for it and factors it.  Returns the events
        (start, sent)."""
        ops.wait("panel", after)
        start = mark(ops, "panel")
        ops.panel_to_host(step, j0, j1)
        sent = start, ops.record("panel")
        args = (ops, step, j0, j1, sent[1])
        self._jobs[step] = (_worker().submit(_host_work, *args) if self.threaded
                            else functools.partial(_host_work, *args))
        return sent

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        """Panel `step` factored (its host work collected) and shipped back: a PanelResult
        whose `done` event (panel stream) follows the panel, its pivots and L11^{-1}."""
        res = self.result(step, j0, inv_threshold)
        recv_start = mark(ops, "panel")
        ops.panel_to_device(step, j0, j1, res.use_inverse)
        return replace(res, done=ops.record("panel"), recv_start=recv_start)

    # -- the gated chain (enqueue_gated)
    def upload(self, ops, step, j0, j1):
        """Panel stream, held until the host flag reaches step + 1: the factored panel and its
        pivots back into place.  Returns the events (start, done)."""
        ops.gate("panel", step + 1)
        start = mark(ops, "panel")
        ops.panel_to_device(step, j0, j1, False)
        return start, ops.record("panel")

    def result(self, step, j0, inv_threshold):
        """Panel `step`'s host work, once it is done, as a PanelResult without its events
        (done and recv_start None: the caller fills them in with `replace`)."""
        job = self._jobs.pop(step, None)
        if job is None:
            raise RuntimeError(f"panel {step} was not sent to the host")
        info, norm, t_sync, t0, t1 = job.result() if self.threaded else job()
        return PanelResult(j0 + info if info > 0 else 0, norm < inv_threshold, None, None,
                           t0, t1, norm, t_sync, t0)


def _host_work(ops, step, j0, j1, arrived):
    """Wait for the panel, factor it in the pinned buffer, write its pivots, raise the host
    flag to step + 1 (the factored panel and its pivots are staged), then write (where usable)
    L11^{-1} and L11 to host_linv[step % 2].  Returns (info, linv_norm, sync_start,
    host_start, host_end); linv_norm is inf where L11^{-1} is not usable."""
    jb = j1 - j0
    t_sync = time.perf_counter()
    ops.host_sync(arrived)                 # the only host wait: the panel has arrived
    t0 = time.perf_counter()
    panel = ops.host_panel_view(j0, j1)    # F-ordered (m-j0) x jb view of pinned memory
    lu, ipiv, info = ops.element.lapack_func("getrf")(panel, overwrite_a=True)
    if not np.shares_memory(lu, panel):    # f2py copied after all: keep the staging valid
        panel[...] = lu
    # Pivots: SciPy's xgetrf returns them 0-based (LAPACK's are 1-based), relative to the
    # panel's first row j0: exactly what laswp takes on the view a[j0:, :].
    ops.host_piv[j0:j1] = ipiv[:jb]
    # Once the flag is up the staging may take the next panel: keep L11 (and U11) aside.
    l11 = np.array(panel[:jb, :jb], order="F")
    ops.signal(step + 1)
    linv, usable, norm = unit_lower_inverse(l11, np.inf)
    if usable:   # row-major jb x jb, as the update reads them: L11^{-1}, then L11
        staged = ops.host_linv[step % 2]
        staged[0, :jb * jb] = linv.ravel()
        staged[1, :jb * jb] = (np.tril(l11, -1) + np.eye(jb, dtype=l11.dtype)).ravel()
    return int(info), (norm if usable else np.inf), t_sync, t0, time.perf_counter()


_WORKER = None
_WORKER_LOCK = threading.Lock()


def _worker():
    """The one thread that runs the host panels' jobs, made at the first threaded panel;
    several factorizations at once queue their panels on it."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            from concurrent.futures import ThreadPoolExecutor
            _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpulinalg-panel")
        return _WORKER
