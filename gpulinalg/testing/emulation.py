"""The NumPy emulation of the LU's device steps (`NumpyOps`).

The same steps as gpulinalg/lu/steps.py's `CupyOps`, with the same buffers, on the host with
NumPy: queued per stream and run lazily (only when the host waits on an event, or at
`finish`) in stream order, honouring the recorded waits; with ``eager=True`` every stream
instead runs as far as its waits allow after each call (a device that never idles).  A
missing wait in the driver therefore shows up as a wrong result, and `log` lists (stream,
operation, step) in execution order, so tests can check the look-ahead order.  A test
backend: never a measure of GPU speed.
"""

import collections
import functools
import threading
import time

import numpy as np

from ..lu.distribution import Identity
from ..core.element import element as element_of
from ..lu.steps import I32, _Columns, _panel_buffer
from ..layout.laswp import laswp_reference

# The emulated streams are shared by two host threads (the driver's, and CpuPanel's worker,
# which waits on events): one lock over every queue of every NumpyOps, re-entrant because an
# event's wait runs other streams (and other NumpyOps) that far.
_EMULATION_LOCK = threading.RLock()


def _locked(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _EMULATION_LOCK:
            return method(*args, **kwargs)
    return wrapper


class _Token:
    """A host-emulated CUDA event: recorded on one stream of one NumpyOps, done once executed."""

    __slots__ = ("ops", "stream", "done", "time")

    def __init__(self, ops, stream):
        self.ops, self.stream, self.done, self.time = ops, stream, False, None

    def wait(self):
        """Run the recording stream up to this event (the emulation's cudaEventSynchronize)."""
        if not self.done:
            self.ops._run(self.stream, self)


class NumpyOps(_Columns):
    """The same device steps with NumPy on the host, lazily (or eagerly) in stream order
    (test backend).

    Several NumpyOps act as several devices (the CPU tests of gpulinalg/lu/multi.py): an
    event carries its ops, so a stream of one waits on a stream of another.
    """

    def __init__(self, a, nb, cols=None, receive=False, npiv=None, eager=False):
        """eager: run every stream as far as its waits allow after each call, not only when
        the host waits, so that work runs as early as a device could run it."""
        m, n = a.shape
        self.a, self.shape, self.nb, self.eager = a, (m, n), nb, eager
        self.element = el = element_of(a.dtype)
        self.cols = cols if cols is not None else Identity()
        self.npiv = k = min(m, n) if npiv is None else npiv
        self.log = []
        # Streams: panel, update, comm, and scatter (the CPU tests' emulated column upload).
        self._queues = collections.defaultdict(collections.deque)
        self._running = set()
        # "Device" buffers and host staging buffers, as in CupyOps.
        f = el.dtype
        self.T = np.full(max(nb * m, 1), np.nan, f)
        self.W = np.full((nb, max(n, 1)), np.nan, f)
        self.linv = np.full((2, 2, nb * nb), np.nan, f)
        self.piv = np.zeros(max(k, 1), I32)
        if receive:
            self.R = np.full((2, max(nb * m, 1)), np.nan, f)
        self.host_panel = np.full(max(nb * m, 1), np.nan, f)
        self.host_linv = np.full((2, 2, nb * nb), np.nan, f)
        self.host_piv = np.zeros(max(k, 1), I32)
        self.host_flag = np.zeros(1, np.uint32)
        self.can_gate = True     # the emulated streams honour the host flag (`gate`)
        self.timed = True        # events for the timeline (getrf sets it per call)
        self._step_end = [None, None]

    # -- emulated streams and events
    @_locked
    def _enqueue(self, stream, label, step, fn):
        self._queues[stream].append(("op", fn, label, step))
        self._pump()

    @_locked
    def record(self, stream, tok=None):
        """An event recorded on `stream` (tok: a token made earlier with `event`, recorded now,
        as a CUDA event is created first and recorded later)."""
        tok = tok or _Token(self, stream)
        self._queues[stream].append(("record", tok, None, None))
        self._pump()
        return tok

    @_locked
    def wait(self, stream, tok):
        self._queues[stream].append(("wait", tok, None, None))
        self._pump()

    def _pump(self):
        """Eager mode: run each stream until its head must wait; repeat while any moves."""
        if not self.eager or self._running:
            return
        moved = True
        while moved:
            moved = False
            for stream, q in list(self._queues.items()):
                while q:
                    kind, obj, label, step = q[0]
                    if kind == "wait" and not obj.done:
                        break
                    if kind == "gate" and self.host_flag[0] < obj:
                        break
                    q.popleft()
                    moved = True
                    if kind == "record":
                        obj.done, obj.time = True, time.perf_counter()
                    elif kind == "op":
                        self._running.add(stream)
                        try:
                            obj()
                        finally:
                            self._running.discard(stream)
                        self.log.append((stream, label, step))

    @_locked
    def _run(self, stream, until=None):
        if stream in self._running:
            raise RuntimeError(f"stream {stream!r} waits on its own later work: deadlock")
        self._running.add(stream)
        q = self._queues[stream]
        try:
            while q and not (until is not None and until.done):
                kind, obj, label, step = q.popleft()
                if kind == "wait":
                    obj.wait()
                elif kind == "gate":
                    if self.host_flag[0] < obj:
                        raise RuntimeError(f"stream {stream!r} waits on a host flag >= {obj} "
                                           "that was never raised: deadlock")
                elif kind == "record":
                    obj.done, obj.time = True, time.perf_counter()
                else:
                    obj()
                    self.log.append((stream, label, step))
        finally:
            self._running.discard(stream)
        if until is not None and not until.done:
            raise RuntimeError("waited on an event that was never recorded")

    def host_sync(self, tok):
        tok.wait()

    @_locked
    def gate(self, stream, value):
        self._queues[stream].append(("gate", value, None, None))
        self._pump()

    @_locked
    def signal(self, value):
        self.host_flag[0] = value
        self._pump()

    def elapsed_ms(self, t0, t1):
        return (t1.time - t0.time) * 1e3


    # -- panel transfers
    def panel_to_host(self, step, j0, j1):
        mp, jb = self.shape[0] - j0, j1 - j0

        def transpose():
            self.T[:jb * mp].reshape(jb, mp)[...] = self.panel_view(j0, j1)[0].T

        def d2h():
            self.host_panel[:jb * mp] = self.T[:jb * mp]

        self._enqueue("panel", "transpose", step, transpose)
        self._enqueue("panel", "d2h", step, d2h)

    def host_panel_view(self, j0, j1):
        """CupyOps' view; the host's factorization of the panel starting at j0 is logged as
        ("host", "getrf", step) (the host panel takes this view to factor it)."""
        self.log.append(("host", "getrf", j0 // self.nb))
        mp, jb = self.shape[0] - j0, j1 - j0
        return self.host_panel[:jb * mp].reshape(jb, mp).T

    def panel_to_device(self, step, j0, j1, use_inverse):
        mp, jb = self.shape[0] - j0, j1 - j0

        def h2d():
            self.T[:jb * mp] = self.host_panel[:jb * mp]
            self.piv[j0:j1] = self.host_piv[j0:j1]

        def transpose():
            self.panel_view(j0, j1)[0][...] = self.T[:jb * mp].reshape(jb, mp).T

        self._enqueue("panel", "h2d", step, h2d)
        self._enqueue("panel", "transpose_back", step, transpose)
        if use_inverse:
            self.linv_to_device(step, "panel")

    def linv_to_device(self, step, stream="update"):
        def h2d():
            self.linv[step % 2] = self.host_linv[step % 2]

        self._enqueue(stream, "linv_h2d", step, h2d)

    # -- swaps and updates
    def swap(self, step, j0, j1, c0, c1, label="swap"):
        lc = self._local(c0, c1)
        if lc.stop <= lc.start or j1 <= j0:
            return
        self._enqueue("update", label, step,
                      lambda: laswp_reference(self.a[j0:, lc], self.piv[j0:j1]))

    def update(self, step, j0, j1, c0, c1, use_inverse, label="update"):
        lc = self._local(c0, c1)
        if lc.stop <= lc.start:
            return
        import scipy.linalg
        m = self.shape[0]
        jb, a = j1 - j0, self.a
        l11, l21 = self.factors(step, j0, j1)

        def run():
            u12 = a[j0:j1, lc]
            if use_inverse:
                w = self.W[:jb, lc]
                w[...] = u12
                linv, l11u = (x[:jb * jb].reshape(jb, jb) for x in self.linv[step % 2])
                np.matmul(linv, w, out=u12)
                w -= l11u @ u12
                u12 += linv @ w
            else:
                u12[...] = scipy.linalg.solve_triangular(l11, u12, lower=True,
                                                         unit_diagonal=True)
            if j1 < m:
                a[j1:, lc] -= l21 @ u12

        self._enqueue("update", label, step, run)

    # -- several devices
    def end_step(self, step):
        tok = self.record("update")
        self._step_end[step % 2] = tok
        return tok

    def receive(self, step, j0, j1, src, after, use_inverse):
        """As CupyOps.receive; `src` another NumpyOps (emulated peer copy)."""
        self.wait("comm", after)
        if self._step_end[step % 2] is not None:
            self.wait("comm", self._step_end[step % 2])
        dst = _panel_buffer(self.R[step % 2], self.shape[0], j0, j1)

        def copy():
            panel, piv = src.panel_view(j0, j1)
            dst[...] = panel
            self.piv[j0:j1] = piv
            if use_inverse:
                self.linv[step % 2] = src.linv[step % 2]

        self._enqueue("comm", "receive", step, copy)
        return self.record("comm")

    def take(self, c0, c1, src, after, piv=None):
        """As CupyOps.take; `src` another NumpyOps."""
        self.wait("comm", after)

        def copy():
            self.a[:, self._local(c0, c1)] = src.a[:, src._local(c0, c1)]
            if piv is not None:
                self.piv[piv[0]:piv[1]] = src.piv[piv[0]:piv[1]]

        self._enqueue("comm", "take", None, copy)
        tok = self.record("comm")
        # Eager, unlike the other emulated streams: the copy runs as soon as `after` allows
        # (forcing its stream that far), so a `take` ordered too early reads unfinished data.
        tok.wait()
        return tok

    def event(self, stream):
        """An event of `stream` not recorded yet (`record(stream, tok)` records it); waiting on
        it before then fails when the waiting stream runs."""
        return _Token(self, stream)

    def copy_in(self, dst, src, label="scatter"):
        """Emulation only: dst[...] = src on stream `label` (its own queue); returns the event.
        The CPU tests upload the virtual devices' columns this way, chunk by chunk."""
        self._enqueue(label, label, None, lambda: dst.__setitem__(Ellipsis, src))
        return self.record(label)

    def finish(self):
        # Drain the update stream first: a missing wait on the panel stream then breaks results.
        for stream in ("update", "comm", "panel", *self._queues):
            self._run(stream)
        return self.piv[:self.npiv].astype(I32)
