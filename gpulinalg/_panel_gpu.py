"""The LU panel factored on the GPU: launch wrapper for kernels/getrf_panel.cu, the recursive
panel (LAPACK sgetrf2's scheme with a register-resident leaf), its host emulation, and the
`GpuPanel` object the blocked driver (gpulinalg/_lu.py) plugs in.

Recursive panel, for an mp x w row-major block with k = min(mp, w) pivot columns:

    w <= LW:  the leaf kernel (one cooperative launch, one grid barrier per column)
    else:     w1 = half of k rounded up to whole leaves
              factor A[:, :w1]                        (recursively: pivots piv[:w1])
              A[:, w1:]      <- swaps piv[:w1]         (laswp)
              A12 = A[:w1, w1:] := L11^{-1} A12        (triangular solve, unit lower)
              A22 = A[w1:, w1:] -= A21 A12            (SGEMM)
              factor A22                              (recursively: pivots relative to row w1)
              A[w1:, :w1]    <- swaps of A22           (laswp), then piv[w1:k] += w1

Everything is enqueued on the caller's current stream (the driver's panel stream): no host
synchronisation; the first exactly zero pivot (LAPACK's info) stays in a device int32.
"""

import time

import numpy as np

from ._backend import cupy
from ._kernels import get_kernel
from ._lu import PanelResult

FAMILY = "getrf_panel"
THREADS = 256           # GETRF_THREADS: threads per block (__launch_bounds__(256, 1))
GCAP = 128              # GETRF_GCAP: most blocks per leaf (shared memory holds G records)
LWMAX = 32              # GETRF_LWMAX: widest leaf
REC = LWMAX + 2         # GETRF_REC: floats per block record (row | |v| | row index)
# (leaf width LW, rows per thread RPT), widest first: LW*RPT = 128 floats in registers.
LEAF_SHAPES = ((32, 4), (16, 8), (8, 16))
KERNEL_NAMES = tuple(f"getrf_leaf<{lw},{rpt}>" for lw, rpt in LEAF_SHAPES)
WORKSPACE_FLOATS = 2 * GCAP * REC + 2 * LWMAX   # rec[2][GCAP][REC] | rowj[2][LWMAX]


def leaf_shape(mp, max_blocks=GCAP):
    """(LW, RPT, G) for a panel of mp rows: the widest leaf whose rows fit max_blocks blocks."""
    for lw, rpt in LEAF_SHAPES:
        g = max(1, -(-mp // (THREADS * rpt)))
        if g <= max_blocks:
            return lw, rpt, g
    raise ValueError(f"a panel of {mp} rows exceeds the GPU panel's register capacity "
                     f"({max_blocks * THREADS * LEAF_SHAPES[-1][1]} rows); use panel='cpu'")


def split(k, lw):
    """Left width of a panel with k > lw pivot columns: half of k in whole leaves."""
    leaves = -(-k // lw)
    return lw * (-(-leaves // 2))


def factor_panel(steps, a, piv, lw, col_base):
    """LU with partial pivoting of the mp x w block `a` in place (the recursion above).

    piv: the k = min(mp, w) pivot slots, written 0-based relative to a's first row.
    col_base: absolute column of a's first column (for info).
    """
    mp, w = a.shape
    k = min(mp, w)
    if k == 0:
        return
    if w <= lw:
        steps.leaf(a, piv, col_base)
        return
    w1 = k if k <= lw else split(k, lw)      # w1 <= k <= mp
    factor_panel(steps, a[:, :w1], piv[:w1], lw, col_base)
    steps.laswp(a[:, w1:], piv[:w1])
    steps.trsm(a[:w1, :w1], a[:w1, w1:])
    if mp > w1:
        steps.gemm_sub(a[w1:, :w1], a[:w1, w1:], a[w1:, w1:])
        factor_panel(steps, a[w1:, w1:], piv[w1:k], lw, col_base + w1)
        steps.laswp(a[w1:, :w1], piv[w1:k])   # pivots still relative to row w1
        steps.add(piv[w1:k], w1)                # pivot base: relative to row w1 -> row 0


# ------------------------------------------------------------------------------------ GPU

class PanelWorkspace:
    """Device state of the leaf kernel: records, barrier counter, info; one per factorization.

    Not shared between streams: the counter's arrival count is tracked on the host.
    """

    def __init__(self):
        cp = cupy()
        self.rec = cp.empty(WORKSPACE_FLOATS, dtype=np.float32)
        self.counter = cp.zeros(1, dtype=np.uint32)
        self.info = cp.zeros(1, dtype=np.int32)
        self.arrivals = 0                       # counter value after all enqueued launches
        dev = cp.cuda.Device()
        self.sms = int(dev.attributes["MultiProcessorCount"])
        self._max_blocks = {}

    def max_blocks(self, kernel):
        """Co-resident blocks of `kernel` on this device (what a cooperative launch allows)."""
        key = kernel.name
        if key not in self._max_blocks:
            per_sm = 1
            try:  # RawKernel.kernel is the driver Function (its ptr the CUfunction handle)
                per_sm = max(1, cupy().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    kernel.kernel.ptr, THREADS, 0))
            except Exception:  # no occupancy query: __launch_bounds__(256, 1) promises one
                pass
            self._max_blocks[key] = min(GCAP, self.sms * per_sm)
        return self._max_blocks[key]


class _DeviceSteps:
    """factor_panel's steps with our kernels, on the current stream."""

    def __init__(self, ws, leaf):
        from cupyx.scipy.linalg import solve_triangular

        from ._blas import gemm_into
        from ._laswp import laswp_inplace
        self.ws, self.lw, self.rpt, self.g_max = ws, leaf[0], leaf[1], None
        self._trsm, self._gemm, self._laswp = solve_triangular, gemm_into, laswp_inplace
        self.kernel = get_kernel(FAMILY, f"getrf_leaf<{self.lw},{self.rpt}>", cooperative=True)

    def leaf(self, a, piv, col_base):
        mp, w = a.shape
        kk = min(mp, w)
        g = -(-mp // (THREADS * self.rpt))
        lda = a.strides[0] // 4
        ws = self.ws
        self.kernel((g,), (THREADS,),
                    (np.int32(mp), np.int32(w), a, np.int64(lda), piv, ws.info,
                     np.int32(col_base), ws.rec, ws.rec[2 * GCAP * REC:], ws.counter,
                     np.uint32(ws.arrivals)))
        ws.arrivals = (ws.arrivals + g * kk) % 2**32

    def laswp(self, a, piv):
        if a.shape[1]:
            self._laswp(a, piv)

    def trsm(self, l11, b):
        if b.shape[1]:
            b[...] = self._trsm(l11, b, lower=True, unit_diagonal=True)

    def gemm_sub(self, a, b, c):
        self._gemm(-1.0, a, b, 1.0, c)

    def add(self, piv, off):
        piv += np.int32(off)


def getrf_panel_device(a, piv=None, ws=None, col_base=0, leaf=None):
    """Factor the row-major CuPy view a (mp x w, unit column stride) in place on the current
    stream; returns (piv, ws): piv int32 (min(mp, w),) 0-based relative to a's first row, and
    the workspace whose ws.info (device int32) holds col_base + the first zero column (1-based)
    or 0.  No host synchronisation.  `leaf` forces one of LEAF_SHAPES (tests)."""
    cp = cupy()
    mp, w = a.shape
    if a.dtype != np.float32 or (w > 1 and a.strides[1] != 4) or a.strides[0] % 4:
        raise ValueError("a must be a float32 row-major view (unit column stride)")
    if piv is None:
        piv = cp.empty(min(mp, w), dtype=np.int32)
    if ws is None:
        ws = PanelWorkspace()
    if min(mp, w) == 0:
        return piv, ws
    probe = get_kernel(FAMILY, KERNEL_NAMES[0], cooperative=True)
    if leaf is None:
        leaf = leaf_shape(mp, ws.max_blocks(probe))
    elif tuple(leaf[:2]) not in LEAF_SHAPES or -(-mp // (THREADS * leaf[1])) > GCAP:
        raise ValueError(f"leaf {leaf} is not one of {LEAF_SHAPES} or too small for {mp} rows")
    factor_panel(_DeviceSteps(ws, leaf), a, piv, leaf[0], col_base)
    return piv, ws


# ------------------------------------------------------------------------------------ host

def getf2_host(a, piv, col_base=0):
    """Host model of the leaf kernel (same pivot rule, swaps, scaling); returns info or 0."""
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


class _HostSteps:
    """factor_panel's steps in NumPy (the CPU tests' model of the device recursion)."""

    def __init__(self):
        self.info = 0

    def leaf(self, a, piv, col_base):
        info = getf2_host(a, piv, col_base)
        self.info = self.info or info

    def laswp(self, a, piv):
        from ._lu_ops import laswp_host
        laswp_host(a, piv)

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
    steps = _HostSteps()
    factor_panel(steps, a, piv, leaf_width, col_base)
    return piv, steps.info


# ------------------------------------------------------------------------------------ driver

class GpuPanel:
    """Panel factored on the GPU, on the driver's panel stream, with no host wait.

    `factor` returns at once with use_inverse=False (the update uses the triangular solve, so
    no L11^{-1} is needed) and info=0; the first exactly zero pivot is kept on the device and
    read once by `final_info` after the driver's `ops.finish()`.  With NumpyOps the same
    recursion runs on the host (getf2_host leaves), queued on the emulated panel stream.
    `leaf_width` overrides the leaf width (host emulation only: the kernels are 32/16/8 wide).
    """

    name = "gpu"

    def __init__(self, leaf_width=None):
        self.leaf_width = leaf_width
        self._ws = None
        self._host = None

    @staticmethod
    def _is_host(ops):
        return not hasattr(ops, "streams")     # NumpyOps emulates streams with queues

    def send(self, ops, step, j0, j1, after):
        """Nothing to ship: the panel stream waits until the panel's columns are updated."""
        ops.wait("panel", after)
        start = ops.record("panel")
        return start, ops.record("panel")

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        t = time.perf_counter()
        start = ops.record("panel")
        panel, piv = ops.a[j0:, j0:j1], ops.piv[j0:j1]
        if self._is_host(ops):
            if self._host is None:
                self._host = _HostSteps()
            lw = self.leaf_width or leaf_shape(panel.shape[0])[0]
            steps = self._host
            ops._enqueue("panel", "getrf_gpu", step,
                         lambda: factor_panel(steps, panel, piv, lw, j0))
        else:
            with ops.streams["panel"]:
                if self._ws is None:
                    self._ws = PanelWorkspace()
                # Pivots: written on the device, 0-based relative to row j0 (CupyOps.piv).
                getrf_panel_device(panel, piv, self._ws, col_base=j0)
        done = ops.record("panel")
        return PanelResult(0, False, done, start, t, t, float("nan"))

    def final_info(self, ops):
        """LAPACK's info for the whole factorization (call after ops.finish())."""
        if self._host is not None:
            return int(self._host.info)
        if self._ws is not None:
            return int(self._ws.info.get()[0])
        return 0
