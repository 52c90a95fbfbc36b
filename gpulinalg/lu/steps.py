"""Device steps of the blocked LU driver (gpulinalg/lu/driver.py) on the GPU: `CupyOps`.

The matrix lies row-major (C-order) in device memory.  A `panel_stream` carries the panel
transfers (and, with the GPU panel, its factorization), an `update_stream` the swaps and
updates, a `comm` stream the copies between devices; CUDA events order them.  Pinned host
staging buffers and asynchronous copies serve the host panel.  Our kernels do the work:
`transpose_ptr` (panel <-> column-major buffer), `laswp_ptr` (row swaps), `gemm_ptr` and
`product_into` (U12 = L11^{-1} A12 and A22 -= L21 U12) and `trsm_ptr` (U12 by triangular
solve).  gpulinalg/testing/emulation.py's `NumpyOps` runs the same steps on the host for the
tests.

Conventions shared with NumpyOps:
- the matrix ``a`` is m x n, C-contiguous, of a real element type (core/element.py: float32 or
  float64; every buffer and byte offset follows it), factored in place;
- pivots on the "device" are 0-based and relative to the top row ``j0`` of their panel (what
  ``laswp`` takes on the view ``a[j0:, cols]``); the driver makes them absolute;
- host staging buffers: ``host_panel`` (the panel column-major, nb*m floats), ``host_linv``
  (by step parity: L11^{-1} and the unit lower L11, each row-major nb*nb, for the refined
  product), ``host_piv`` (k int32), ``host_flag`` (a uint32 the host raises and the gated
  streams wait on: `gate`, `signal`); the host panel writes them, the ops copy them;
- columns are global: ``cols.local_range(c0, c1)`` gives the columns of ``a`` that hold the
  global columns [c0, c1) (all of them on one device; on several devices, ``a`` is this
  device's share of a column-cyclic matrix, gpulinalg/lu/distribution.py, and the multi-GPU
  driver gpulinalg/lu/multi.py calls `receive` to copy another device's factored panel here);
- a device that does not hold the panel's columns reads L11, L21, the pivots and L11^{-1} from
  what `receive` copied (the buffer ``R``, double-buffered by step parity like ``linv``).
"""

import functools
import platform
import threading

import numpy as np

from .. import tuning
from ..core.backend import cupy
from ..core.device import sm_count
from ..core.element import F32, element as element_of
from .distribution import Identity

I32 = np.int32
_PIV = 4                  # bytes of a pivot (int32)
_H2D, _D2H, _D2D, _DEFAULT = 1, 2, 3, 4  # cudaMemcpyHostToDevice, ...DeviceToHost, ...


def workspace_bytes(m, n, nb, receive=False, element=F32):
    """Device bytes CupyOps allocates besides the matrix (n: its local columns): the
    transposed panel T, the column-major copy LT of L21, the copy W of A12, two pairs of
    nb x nb matrices (L11^{-1}, L11), with `receive` (several devices) the two received
    panels R, all of `element`; and the pivots (at most m)."""
    elements = 2 * nb * m + nb * n + 4 * nb * nb + (2 * nb * m if receive else 0)
    return element.itemsize * elements + _PIV * m


_ONCE_LOCK = threading.RLock()   # re-entrant: one such attribute may ask for another


def _once(method):
    """A lazily computed attribute that is computed once, also when two threads ask for it at
    the same time (the driver's and CpuPanel's worker, for the staging buffers).
    functools.cached_property has no lock since Python 3.12: two threads could each allocate
    a buffer and keep their own (the GPU would then wait on one flag word while the worker
    raises another)."""
    name = method.__name__

    @functools.wraps(method)
    def get(self):
        try:
            return self.__dict__[name]
        except KeyError:
            with _ONCE_LOCK:
                if name not in self.__dict__:
                    self.__dict__[name] = method(self)
                return self.__dict__[name]
    return property(get)


def _panel_buffer(buf, m, j0, j1):
    """The received panel of rows j0: as an (m - j0) x jb row-major view of buffer `buf`."""
    mp, jb = m - j0, j1 - j0
    return buf[:mp * jb].reshape(mp, jb)


class _Columns:
    """Column addressing shared by both backends (needs .a, .piv, .cols, .shape, .R)."""

    def _local(self, c0, c1):
        """The columns of `a` holding global columns [c0, c1), as a slice."""
        return slice(*self.cols.local_range(c0, c1))

    def panel_view(self, j0, j1):
        """(rows j0: of the panel's columns, its pivot slots) -- on the device that holds the
        panel's columns."""
        return self.a[j0:, self._local(j0, j1)], self.piv[j0:j1]

    def factors(self, step, j0, j1):
        """(L11, L21) of panel `step`: in `a` where this device holds the panel's columns,
        else in the buffer `receive` copied it into."""
        lc = self._local(j0, j1)
        if lc.stop > lc.start:
            return self.a[j0:j1, lc], self.a[j1:, lc]
        p = _panel_buffer(self.R[step % 2], self.shape[0], j0, j1)
        return p[:j1 - j0], p[j1 - j0:]


# ------------------------------------------------------------------------------------ GPU

_GREATEST = -(1 << 16)   # beyond any device's range: CUDA clamps it to the greatest priority


def _update_priority(panel):
    """The update stream's priority on a device of a multi-GPU factorization, given its
    `panel` stream: one above the default where that is still below the panel stream's (the
    home's streams keep the default: its left swaps and takes are never on the chain to the
    next panel), else the default."""
    return -1 if panel.priority <= -2 else 0


def _priority_stream(cp):
    """A non-blocking stream of the device's greatest priority: the panel is the critical
    path, so its blocks go to SMs before those of an SGEMM already running.  Without a query
    for the range (cudaDeviceGetStreamPriorityRange; CuPy 14 has none) the stream asks for a
    priority beyond it, which cudaStreamCreateWithPriority clamps."""
    query = getattr(cp.cuda.runtime, "deviceGetStreamPriorityRange", None)
    return cp.cuda.Stream(non_blocking=True, priority=query()[1] if query else _GREATEST)


class CupyOps(_Columns):
    """The device steps on the GPU (see the module docstring); ``a`` a C-contiguous CuPy array."""

    def __init__(self, a, nb, precision="fp32", cols=None, device=None, receive=False,
                 npiv=None, tc_min=0, table=None):
        """a: the matrix (or, on several devices, this device's columns), C-contiguous on
        `device` (default: the current one); cols: the column map (default: all columns
        here); receive: allocate the buffers that `receive` copies other devices' panels into;
        npiv: pivot slots, min(m, n) of the whole matrix (default: of `a`); tc_min: a
        tensor-core `precision` updates on the tensor cores only while the trailing matrix
        has at least tc_min rows or columns, the FP32 kernels after (0: always); table: the
        tuning table (default: the one in force for `device`), read here once.
        """
        from ..gemm.dispatch import gemm_ptr_for, pick_variant, product_into
        from ..layout.laswp import laswp_ptr
        from ..layout.transpose import transpose_ptr
        from .trsm import trsm_ptr

        cp = cupy()
        # The steps address their blocks by device pointer (the *_ptr launchers: no views, no
        # validation), since the CPU panel's host enqueues them between two panels; no split
        # K (its workspace would be allocated during a graph capture).  The table and the SM
        # count that the tile picks read are asked for once, here.
        # The element type (float32 or float64) is a's: every buffer, byte offset and kernel
        # below follows it, and the table is that of the device and the element.
        self.element = el = element_of(a.dtype)
        self._size = el.itemsize
        self.table = table = tuning.current(device, el) if table is None else table
        self._sms = sms = sm_count(device)
        self._lookahead_fp32_cols = table.lookahead_fp32_cols
        self._l21_colmajor_min_cols = table.l21_colmajor_min_cols
        self._cp, self._laswp = cp, functools.partial(laswp_ptr, sms=sms, element=el)
        self._gemm = functools.partial(gemm_ptr_for(el), split=1, sms=sms, table=table)
        self._product, self.precision = product_into, precision   # the trailing update
        self.tc_min = tc_min
        # The SIMT SGEMM's tile is picked here (the update's own rule); the DGEMM picks its.
        self._pick = pick_variant if el is F32 else None
        self._transpose = functools.partial(transpose_ptr, table=table, element=el)
        self._trsm = functools.partial(trsm_ptr, element=el)
        self.device = cp.cuda.Device(device)     # every method runs in this device's context
        self.cols = cols if cols is not None else Identity()
        self.a = a
        m, n = a.shape
        self.shape, self.nb = (m, n), nb
        k = self.npiv = min(m, n) if npiv is None else npiv   # one per panel column
        with self.device:
            panel = _priority_stream(cp)
            self.streams = {"panel": panel,
                            "update": cp.cuda.Stream(
                                non_blocking=True,
                                priority=_update_priority(panel) if receive else 0),
                            # Copies between devices (received panels, the home's blocks).
                            "comm": cp.cuda.Stream(non_blocking=True)}
            # Device workspace: the transposed panel, L21 column-major (_trailing), the
            # copy of A12, two L11^{-1}, pivots.
            f = el.dtype
            self.T = cp.empty(max(nb * m, 1), dtype=f)
            self.LT = cp.empty(max(nb * m, 1), dtype=f)
            self.W = cp.empty((nb, max(n, 1)), dtype=f)
            # L11^{-1} and L11, double-buffered: step s uses linv[s % 2] (the previous step's
            # update may still read the other one).
            self.linv = cp.empty((2, 2, nb * nb), dtype=f)
            self.piv = cp.zeros(max(k, 1), dtype=I32)
            if receive:   # other devices' panels arrive here
                self.R = cp.empty((2, max(nb * m, 1)), dtype=f)
            # Our streams start after the caller's pending work (e.g. the upload of a, the
            # zeroing of piv).
            self.fork(cp.cuda.get_current_stream())
        self._step_end = [None, None]            # update stream done with step s (by parity)
        self.timed = True                        # events that can be timed (a timeline reads)

    # Pinned host staging buffers (asynchronous copies need page-locked memory), allocated on
    # first use (only the host panel, CpuPanel, stages anything), once: `_once`.
    def _pinned(self, shape, dtype):
        import cupyx
        with self.device:
            return cupyx.empty_pinned(shape, dtype=dtype)

    @_once
    def host_panel(self):
        return self._pinned((max(self.nb * self.shape[0], 1),), self.element.dtype)

    @_once
    def host_linv(self):   # by step parity: (L11^{-1}, L11), as linv
        return self._pinned((2, 2, self.nb * self.nb), self.element.dtype)

    @_once
    def host_flag(self):   # the gate's word (UVA: the GPU reads it at its host address)
        flag = self._pinned((1,), np.uint32)
        flag[0] = 0
        return flag

    @_once
    def host_piv(self):
        return self._pinned((max(self.npiv, 1),), I32)

    @_once
    def _host_addr(self):
        """Addresses of host_panel, host_linv, host_piv, host_flag (NumPy's .ctypes builds an
        object on every access)."""
        return tuple(x.ctypes.data for x in (self.host_panel, self.host_linv, self.host_piv,
                                             self.host_flag))

    # -- the caller's stream
    def fork(self, caller, start=None):
        """Make every stream of ours wait for the work enqueued so far on `caller` (a CuPy
        stream), which `join` and `finish` later wait for ours.  start: an event already
        recorded on `caller` at that point (needed when caller is another device's stream:
        an event is recorded on a stream of its own device)."""
        self._caller = caller
        with self.device:
            if start is None:
                start = self._cp.cuda.Event(disable_timing=True)
                start.record(caller)
            for st in self.streams.values():
                st.wait_event(start)

    def join(self):
        """Make the caller's stream wait for everything enqueued on our streams (no host
        wait: also inside a CUDA graph capture)."""
        with self.device:
            for st in self.streams.values():
                ev = self._cp.cuda.Event(disable_timing=True)
                ev.record(st)
                self._caller.wait_event(ev)

    # -- events
    def record(self, stream):
        with self.device:   # timing only for the timeline (getrf sets `timed`)
            ev = self._cp.cuda.Event(disable_timing=not self.timed)
            ev.record(self.streams[stream])
        return ev

    def wait(self, stream, ev):
        self.streams[stream].wait_event(ev)

    def host_sync(self, ev):
        with self.device:   # also from CpuPanel's worker thread (the GIL is released)
            ev.synchronize()

    # -- the host flag (CpuPanel's gated chain, driver.enqueue_gated)
    @functools.cached_property
    def can_gate(self):
        """A driver with stream memory waits, on a host whose stores are seen in program
        order (x86-64, `signal`).  Elsewhere the host panel does not gate (driver.getrf)."""
        return _ORDERED_STORES and _stream_wait_value32() is not None

    def gate(self, stream, value):
        """`stream` waits until the host flag is >= value (cuStreamWaitValue32)."""
        wait = _stream_wait_value32()
        rc = wait(self.streams[stream].ptr, self._host_addr[3], value, 0)  # GEQ
        if rc:
            raise RuntimeError(f"cuStreamWaitValue32 failed with CUresult {rc}")

    def signal(self, value):
        """The host flag := value.  The gated copies read the host's earlier writes (the
        factored panel, its pivots) once the GPU has seen the flag: a plain store suffices
        where stores become visible in program order (x86-64's TSO; `can_gate`), which a
        weakly ordered host (aarch64) would need a release fence for."""
        self.host_flag[0] = value

    def elapsed_ms(self, ev0, ev1):
        return self._cp.cuda.get_elapsed_time(ev0, ev1)

    # -- panel transfers (panel_stream)
    def _copy(self, dst, src, nbytes, kind, stream="panel"):
        if nbytes:
            rt = self._cp.cuda.runtime
            rt.memcpyAsync(dst, src, nbytes, kind, self.streams[stream].ptr)

    def _ptr(self, r, c):
        """Device address of a[r, c] (c a local column)."""
        return self.a.data.ptr + self._size * (r * self.shape[1] + c)

    # Buffers by step parity, by address (indexing a CuPy array builds a view: ~5 us of host)
    def _linv_ptr(self, step):
        """Device address of linv[step % 2]: L11^{-1}, then L11 (row-major, nb*nb each)."""
        return self.linv.data.ptr + (self.linv.nbytes // 2) * (step % 2)

    def _received_ptr(self, step):
        """Device address of R[step % 2]: a received panel, (m - j0) x jb row-major."""
        return self.R.data.ptr + self._size * self.R.shape[1] * (step % 2)

    def panel_to_host(self, step, j0, j1):
        """Transpose a[j0:, j0:j1] into T (= the panel column-major, ld m-j0), copy it to host."""
        mp, jb = self.shape[0] - j0, j1 - j0
        tp = self.T.data.ptr
        with self.device, self.streams["panel"]:
            # Layout: the row-major panel's transpose is the column-major panel LAPACK wants.
            self._transpose(mp, jb, self._ptr(j0, self._local(j0, j1).start), self.shape[1],
                            tp, mp)
            self._copy(self._host_addr[0], tp, self._size * jb * mp, _D2H)

    def host_panel_view(self, j0, j1):
        """The staged panel as an F-ordered (m-j0) x jb view of the pinned buffer (no copy)."""
        mp, jb = self.shape[0] - j0, j1 - j0
        return self.host_panel[:jb * mp].reshape(jb, mp).T

    def panel_to_device(self, step, j0, j1, use_inverse):
        """Copy the factored panel, its pivots and L11^{-1} back; transpose the panel in place."""
        mp, jb = self.shape[0] - j0, j1 - j0
        tp = self.T.data.ptr
        h2d = _H2D
        with self.device, self.streams["panel"]:
            self._copy(tp, self._host_addr[0], self._size * jb * mp, h2d)
            # Layout: column-major panel (= row-major jb x mp) back to the row-major matrix.
            self._transpose(jb, mp, tp, mp, self._ptr(j0, self._local(j0, j1).start),
                            self.shape[1])
            # Pivots stay 0-based, relative to row j0 (laswp's convention on a[j0:, :]).
            self._copy(self.piv.data.ptr + _PIV * j0, self._host_addr[2] + _PIV * j0, _PIV * jb,
                       h2d)
            if use_inverse:
                self.linv_to_device(step, "panel")

    def linv_to_device(self, step, stream="update"):
        """linv[step % 2] <- host_linv[step % 2] (L11^{-1} and L11, 2 x nb*nb each)."""
        nbytes = self.host_linv.nbytes // 2
        self._copy(self._linv_ptr(step), self._host_addr[1] + (step % 2) * nbytes, nbytes,
                   _H2D, stream)

    # -- swaps and updates (update_stream)
    def swap(self, step, j0, j1, c0, c1, label="swap"):
        """Apply the panel's row interchanges to rows j0: of (global) columns c0:c1."""
        lc = self._local(c0, c1)
        if lc.stop <= lc.start or j1 <= j0:
            return
        with self.device, self.streams["update"]:
            self._laswp(lc.stop - lc.start, self._ptr(j0, lc.start), self.shape[1], j1 - j0,
                        self.piv.data.ptr + _PIV * j0)

    def _factors_ptr(self, step, j0, j1):
        """(address of L11, address of L21, their leading dimension) of panel `step`, where
        `factors` finds them."""
        lc, jb = self._local(j0, j1), j1 - j0
        if lc.stop > lc.start:
            return self._ptr(j0, lc.start), self._ptr(j1, lc.start), self.shape[1]
        p = self._received_ptr(step)
        return p, p + self._size * jb * jb, jb

    def update(self, step, j0, j1, c0, c1, use_inverse, label="update"):
        """U12 = L11^{-1} A12 on (global) columns c0:c1 (c0 >= j1), then A22 -= L21 U12."""
        lc = self._local(c0, c1)
        if lc.stop <= lc.start:
            return
        (m, lda), gemm, size = self.shape, self._gemm, self._size
        jb, width = j1 - j0, lc.stop - lc.start
        u12 = self._ptr(j0, lc.start)                    # A12, then U12, in place
        l11, l21, ldl = self._factors_ptr(step, j0, j1)
        with self.device, self.streams["update"]:
            if use_inverse:
                w, ldw = self.W.data.ptr + size * lc.start, self.W.shape[1]
                # A12 -> workspace: one 2-D copy (an elementwise kernel costs the host more).
                self._cp.cuda.runtime.memcpy2DAsync(w, size * ldw, u12, size * lda,
                                                    size * width, jb, _D2D,
                                                    self.streams["update"].ptr)
                # L11^{-1} and L11, row-major jb x jb (panel_to_device, receive).
                linv = self._linv_ptr(step)
                l11r = linv + size * self.linv.shape[2]
                gemm(jb, width, jb, 1.0, linv, jb, True, w, ldw, True, 0.0, u12, lda)
                # X = L11^{-1} A12, R = A12 - L11 X, U12 = X + L11^{-1} R
                gemm(jb, width, jb, -1.0, l11r, jb, True, u12, lda, True, 1.0, w, ldw)
                gemm(jb, width, jb, 1.0, linv, jb, True, w, ldw, True, 1.0, u12, lda)
            else:
                # Triangular solve with the unit lower L11 (the GPU panel's path, and the
                # stable fallback of the CPU panel), in place: kernels/trsm.cu.
                self._trsm(jb, width, l11, ldl, u12, lda, self._sms, self.table)
            if j1 < m:   # A22 -= L21 U12, in the arithmetic `precision` names, except that
                # a narrow look-ahead product (on the chain every panel waits for) runs in FP32:
                # a tensor-core product would add its two split kernels to that chain.
                narrow = label == "update_next" and width <= self._lookahead_fp32_cols
                self._trailing(step, j0, j1, lc, l21, ldl, u12, fp32=narrow)

    def _trailing(self, step, j0, j1, lc, l21, ldl, u12, fp32=False):
        """A22 -= L21 U12 on local columns lc, L21 at l21 (leading dimension ldl), U12 at u12;
        fp32: with the FP32 kernels whatever the precision."""
        (m, lda), jb, width = self.shape, j1 - j0, lc.stop - lc.start
        if (not fp32 and self.precision in ("3xtf32", "tf32")
                and max(m - j1, lda - j1) >= self.tc_min):
            # The tensor-core products, on views; one block per tile (persistent=False), so
            # the look-ahead panel finds SMs as the update's blocks finish.
            self._product(-1.0, self.factors(step, j0, j1)[1], self.a[j0:j1, lc], 1.0,
                          self.a[j1:, lc], self.precision, persistent=False, table=self.table)
            return
        mp2 = m - j1
        # The tile of a K-major L21, also for its column-major copy (the public pick's pipe128
        # for an M-major A is slower here, beside the panel).
        variant = (self._pick(mp2, width, jb, 1.0, True, self._sms, self.table)
                   if self._pick is not None else None)
        a, ld, kmajor = l21, ldl, True
        cols = self._l21_colmajor_min_cols
        if cols and width >= cols:
            # Wide updates read L21 column-major (faster SGEMM; the copy is paid once per
            # update): transposed into LT (update stream; the previous reader of LT is an
            # earlier update on the same stream).
            a, ld, kmajor = self.LT.data.ptr, mp2, False
            self._transpose(mp2, jb, l21, ldl, a, ld)
        self._gemm(mp2, width, jb, -1.0, a, ld, kmajor, u12, lda, True, 1.0,
                   self._ptr(j1, lc.start), lda, variant)

    # -- several devices (gpulinalg/lu/multi.py)
    def end_step(self, step):
        """Mark the end of step `step` on the update stream; returns the event."""
        ev = self.record("update")
        self._step_end[step % 2] = ev
        return ev

    def receive(self, step, j0, j1, src, after, use_inverse):
        """Copy panel `step` (rows j0:, its pivots, L11^{-1} when use_inverse) from device
        `src`'s ops, once `after` (src's panel stream) has fired, into R[step % 2]; on this
        device's comm stream, after this device's update stream is done with step - 2 (the
        last user of the buffers of this parity).  Returns the copy's event."""
        mp, jb = self.shape[0] - j0, j1 - j0
        rt = self._cp.cuda.runtime
        # By address, not through views (this runs P - 1 times a step): rows j0: of src's
        # panel columns (what panel_view would give) into this device's R[step % 2].
        panel = src._ptr(j0, src._local(j0, j1).start)
        dst = self._received_ptr(step)
        comm = self.streams["comm"]
        with self.device:
            comm.wait_event(after)
            if self._step_end[step % 2] is not None:
                comm.wait_event(self._step_end[step % 2])
            # Peer copy (cudaMemcpyDefault: unified addressing finds both devices): the
            # panel's rows are strided in src's matrix, contiguous here.
            size = self._size
            rt.memcpy2DAsync(dst, size * jb, panel, size * src.shape[1], size * jb, mp,
                             _DEFAULT, comm.ptr)
            self._copy(self.piv.data.ptr + _PIV * j0, src.piv.data.ptr + _PIV * j0, _PIV * jb,
                       _DEFAULT, "comm")
            if use_inverse:
                self._copy(self._linv_ptr(step), src._linv_ptr(step), self.linv.nbytes // 2,
                           _DEFAULT, "comm")
        return self.record("comm")

    def take(self, c0, c1, src, after, piv=None):
        """Copy every row of the global columns [c0, c1) (one column block of `src`) from
        device `src`'s ops into this matrix, and src's pivots piv = (j0, j1) when given, once
        `after` has fired; on the comm stream.  The home of a multi-device factorization
        (gpulinalg/lu/multi.py) collects finished blocks this way.  Returns the event."""
        lc, sc = self._local(c0, c1), src._local(c0, c1)
        m, rt = self.shape[0], self._cp.cuda.runtime
        comm = self.streams["comm"]
        with self.device:
            comm.wait_event(after)
            size = self._size
            rt.memcpy2DAsync(self._ptr(0, lc.start), size * self.shape[1],
                             src._ptr(0, sc.start), size * src.shape[1], size * (c1 - c0), m,
                             _DEFAULT, comm.ptr)
            if piv is not None:
                j0, j1 = piv
                self._copy(self.piv.data.ptr + _PIV * j0, src.piv.data.ptr + _PIV * j0,
                           _PIV * (j1 - j0), _DEFAULT, "comm")
        return self.record("comm")

    def finish(self):
        """Wait for all streams (the caller's stream too); return the relative pivots."""
        self.join()
        with self.device:
            for st in self.streams.values():
                st.synchronize()
            return self._cp.asnumpy(self.piv[:self.npiv]).astype(I32)


# x86-64 hosts see a thread's stores in program order (the flag after the panel); see `signal`.
_ORDERED_STORES = platform.machine().lower() in ("x86_64", "amd64")


@functools.lru_cache(maxsize=None)
def _stream_wait_value32():
    """The driver's cuStreamWaitValue32 (ctypes; 32-bit waits are part of every CUDA 12+
    driver), or None where there is no such driver (then the LU does not gate: getrf)."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    fn = getattr(lib, "cuStreamWaitValue32_v2", None)
    if fn is not None:
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    return fn
