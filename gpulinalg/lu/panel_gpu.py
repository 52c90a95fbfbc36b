"""The LU panel factored on the GPU: the recursive panel (LAPACK sgetrf2's scheme with a
register-resident leaf kernel), the launch wrappers of its leaves, and `GpuPanel`, the panel
object the blocked driver (gpulinalg/lu/driver.py) plugs in.

Recursive panel (`factor_panel`), for an mp x w row-major block with k = min(mp, w) pivot
columns (the products in the element's GEMM: SGEMM, or the FP64 tensor-core DGEMM):

    w <= LW:  the leaf kernel (one cooperative launch)
    else:     w1 = half of k rounded up to whole leaves
              factor A[:, :w1]                        (recursively: pivots piv[:w1])
              A[:, w1:]      <- swaps piv[:w1]         (laswp)
              A12 = A[:w1, w1:] := L11^{-1} A12        (triangular solve, unit lower: trsm.cu)
              A22 = A[w1:, w1:] -= A21 A12            (GEMM)
              factor A22                              (recursively: pivots relative to row w1)
              A[w1:, :w1]    <- swaps of A22           (laswp), then piv[w1:k] += w1

The leaves (`leaf_plan` takes the first that fits), per element type (float32, float64; the
arithmetic is the element's, LAPACK sgetf2's or dgetf2's):
- "row" (getrf_leaf_row<T, LW, RPT, EARLY>, kernels/getrf_leaf_row.cu): every panel up to
  33792 * 4 rows (float32) or 33792 * 2 (float64) on an H100.  RPT rows per thread, LW
  columns in registers, (LW, RPT) = (128, 1), (64, 2), (32, 4) for float32 and (64, 1),
  (24, 2) for float64, one flag barrier per column: the widest whose grid of
  ceil(mp / (256 RPT)) blocks is co-resident and at most `row_block_cap` blocks (tuning;
  else the fewest co-resident blocks).  A float32 panel of nb <= 128 columns is one launch;
  nb = 256 recurses once.
- "tile" (getrf_leaf<T, LW, RPT>, kernels/getrf_leaf_tile.cu): panels too tall for the row
  leaf's co-resident grid (float32: 4-16 rows per thread, float64: 2-8), with the recursion
  down to 32-wide leaves.

Every leaf of one element type has the same arithmetic per element, so a leaf of the same
width gives the same factors bit for bit.  Everything is enqueued on the caller's current
stream (the driver's panel stream): no host synchronisation; the first exactly zero pivot
(LAPACK's info) stays in a device int32.  The host models of the leaves and the recursion
on the host (for the NumPy emulation of the driver) are in gpulinalg/testing/panel_models.py.
"""

import functools
import contextlib
import time

import numpy as np

from .. import tuning
from ..core import device
from ..core.backend import cupy
from ..core.element import F32, F64
from ..core.kernels import Launcher, get_kernel
from .driver import PanelResult, mark

TILE_FAMILY = "getrf_leaf_tile"         # kernels/<family>.cu
ROW_FAMILY = "getrf_leaf_row"

THREADS = 256           # GETRF_THREADS: row-holding threads per block (getrf_common.cuh)
# Tile leaf (getrf_leaf_tile.cu's #defines).
GCAP = 128              # GETRF_GCAP: most blocks (shared memory holds G records)
LWMAX = 32              # GETRF_LWMAX: widest tile leaf
REC = LWMAX + 2         # GETRF_REC: elements of T per block record (row | |v| | row index)
# (LW, RPT) per element, widest first: LW*RPT*itemsize = 512 bytes of panel registers.
LEAF_SHAPES = {F32: ((32, 4), (16, 8), (8, 16)),        # 128 floats
               F64: ((32, 2), (16, 4), (8, 8))}         # 64 doubles
WORKSPACE_ELEMENTS = 2 * GCAP * REC + 2 * LWMAX   # rec[2][GCAP][REC] | rowj[2][LWMAX], of T
# Row leaf (getrf_leaf_row.cu): (LW, RPT) per element, widest first.  float64: 64 doubles at
# one row per thread; at two, 24 columns (32 would spill: each row's state is wider).
GMAX_ROW = 160          # GETRF_GMAX_ROW: most blocks (record slots; 5 polled per lane)
ROW_SHAPES = {F32: ((128, 1), (64, 2), (32, 4)),        # 128 floats
              F64: ((64, 1), (24, 2))}                  # 64, 48 doubles
ROW_WIDTHS = {el: tuple(lw for lw, _ in shapes) for el, shapes in ROW_SHAPES.items()}
ROW_LW = 128            # the most columns of a row-leaf launch (its column tags)
ROW_WORDS = 128         # GETRF_ROW_BYTES / 4: tagged words of an exchanged row (512 bytes)
KEY_WORDS = 4           # 64-bit words of a record slot (float: 2, double: 4; sized for both)
TAG_LIMIT = 2**32 - 2 * ROW_LW          # column tags are uint32; reset before a wrap
ELEMENTS = {el.dtype: el for el in LEAF_SHAPES}    # the panel's element by dtype


def row_block_cap(devices, table):
    """The row leaf's block cap on one of `devices` GPUs factoring one matrix."""
    return (table.row_block_cap if devices <= 1 else table.row_block_cap_2gpu if devices == 2
            else table.row_block_cap_multi)


def row_threads(early):
    """Threads of a getrf_leaf_row block: 12 warp slots with EARLY, else 8 + 1 warps."""
    return THREADS + (4 if early else 1) * 32


def row_kernel_name(lw, rpt, early, element=F32):
    return f"getrf_leaf_row<{element.ctype},{lw},{rpt},{int(bool(early))}>"


def tile_kernel_name(lw, rpt, element=F32):
    return f"getrf_leaf<{element.ctype},{lw},{rpt}>"


def _kernel_names(tables):
    """Every instantiation that `tables` (per element) launch, and the late row leaves (the
    reference the EARLY ones are tested against): tests/test_kernels_compile.py compiles
    them."""
    row = (row_kernel_name(lw, rpt, early, el) for el, shapes in ROW_SHAPES.items()
           for lw, rpt in shapes
           for early in (False,) + tuple(rpt <= t.row_early_rpt for t in tables[el]))
    return {TILE_FAMILY: tuple(tile_kernel_name(lw, rpt, el)
                               for el, shapes in LEAF_SHAPES.items() for lw, rpt in shapes),
            ROW_FAMILY: tuple(dict.fromkeys(row))}


KERNEL_NAMES = _kernel_names({F32: (tuning.SM90, tuning.DEFAULT),
                              F64: (tuning.SM90_F64, tuning.DEFAULT_F64)})


def leaf_key(plan):
    """The part of a leaf_plan that names the kernel and its launch shape: ("tile", LW, RPT)
    or ("row", LW, RPT) (the plan less its grid size)."""
    return plan[:3]


def leaf_shape(mp, max_blocks=GCAP, element=F32):
    """(LW, RPT, G) for a panel of mp rows: the widest tile leaf of `element` whose rows fit
    max_blocks blocks."""
    shapes = LEAF_SHAPES[element]
    for lw, rpt in shapes:
        g = max(1, -(-mp // (THREADS * rpt)))
        if g <= max_blocks:
            return lw, rpt, g
    raise ValueError(f"a {element.name} panel of {mp} rows exceeds the GPU panel's register "
                     f"capacity ({max_blocks * THREADS * shapes[-1][1]} rows); use panel='cpu'")


def leaf_plan(mp, row_blocks, row_cap, tile_blocks=GCAP, row_lw=None, element=F32):
    """The leaf for a panel of mp rows of `element`, given the co-resident blocks of the row
    leaf (row_blocks) and of the tile leaf (tile_blocks):

    ("row", LW, RPT, G) when the element has a row leaf and some shape of its ROW_SHAPES
    (only LW = row_lw when given) fits: its G blocks at most row_blocks and GMAX_ROW.  Of
    those, the widest whose G is at most row_cap (not applied to a given row_lw), else the
    one of fewest blocks.  Else ("tile", LW, RPT, G) of leaf_shape (the recursion with narrow
    leaves).
    """
    fits = [("row", lw, rpt, max(1, -(-mp // (THREADS * rpt))))
            for lw, rpt in ROW_SHAPES.get(element, ()) if row_lw is None or lw == row_lw]
    fits = [plan for plan in fits if plan[3] <= min(row_blocks, GMAX_ROW)]
    if fits:
        return next((plan for plan in fits if row_lw is not None or plan[3] <= row_cap),
                    fits[-1])
    return ("tile",) + leaf_shape(mp, tile_blocks, element)


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

_MAX_BLOCKS = {}        # (device id, kernel name) -> co-resident blocks (PanelWorkspace)


class PanelWorkspace:
    """Device state of the leaf kernels, one per factorization (and per stream: the counter's
    arrivals and the row leaf's column tags are tracked on the host, in stream order).

    tile leaf: records (elements of the element type), barrier counter.  row leaf: `keys`
    (records of tagged words: float {tag, key, tag, pos}, double {tag, key high, tag, key
    low, tag, pos, tag, 0}) and `rows` (the candidates' rows as tagged words {tag, 32 bits}),
    zeroed once: tags start at 1.  Both: info.  Also the laswp workspace of
    the recursion and the per-shape launch parameters (cached).  devices: how many GPUs
    factor the matrix (row_block_cap).  table: the tuning table, read here once (default:
    tuning.current(element=element)).  element: the panels' element type (F32, F64).
    """

    def __init__(self, devices=1, table=None, element=F32):
        cp = cupy()
        if element not in LEAF_SHAPES:
            raise TypeError(f"the GPU panel computes in {', '.join(e.name for e in LEAF_SHAPES)}"
                            f", not {element.name}")
        self.devices = devices
        self.element = element
        self.tuning = tuning.current(element=element) if table is None else table
        self.row_cap = row_block_cap(devices, self.tuning)
        self.rec = cp.empty(WORKSPACE_ELEMENTS, dtype=element.dtype)
        self.rec_ptr = self.rec.data.ptr                     # rec[2][GCAP][REC]
        self.rowj_ptr = self.rec_ptr + 2 * GCAP * REC * element.itemsize   # rowj[2][LWMAX]
        self.counter = cp.zeros(1, dtype=np.uint32)
        self.info = cp.zeros(1, dtype=np.int32)
        self.arrivals = 0                       # counter value after all enqueued launches
        self.keys = cp.zeros(2 * GMAX_ROW * KEY_WORDS, dtype=np.uint64)   # [2][GMAX_ROW]
        # Tagged words {tag, 32 bits} [2][GMAX_ROW][ROW_WORDS]; zeroed like the keys (no tag
        # is 0).
        self.rows = cp.zeros(2 * GMAX_ROW * ROW_WORDS, dtype=np.uint64)
        self.epoch = 1                          # tag of the next row-leaf column
        self.device = cp.cuda.runtime.getDevice()
        self.sms = device.sm_count(self.device)
        self._steps = {}
        self._plans = {}

    def row_early(self, rpt):
        """Whether the row leaf of rpt rows per thread publishes early (getrf_leaf_row.cu)."""
        return rpt <= self.tuning.row_early_rpt

    def max_blocks(self, kernel, cap, threads=THREADS):
        """Co-resident blocks of `kernel` (blocks of `threads`) on this device (what a
        cooperative launch allows); queried once per device and kernel (a factorization
        starts without driver queries)."""
        key = (self.device, kernel.name)
        if key not in _MAX_BLOCKS:
            per_sm = 1
            try:  # RawKernel.kernel is the driver Function (its ptr the CUfunction handle)
                per_sm = max(1, cupy().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    kernel.kernel.ptr, threads, 0))
            except Exception:  # no occupancy query: __launch_bounds__(..., 1) promises one
                pass
            _MAX_BLOCKS[key] = self.sms * per_sm
        return min(cap, _MAX_BLOCKS[key])

    def plan(self, mp, row_lw=None):
        """leaf_plan for mp rows on this device (cached per (mp, row_lw))."""
        key = (mp, row_lw)
        plan = self._plans.get(key)
        if plan is None:   # every leaf is __launch_bounds__(..., 1): one block per SM
            el = self.element
            row_blocks = 0
            if el in ROW_SHAPES:
                lw, rpt = ROW_SHAPES[el][0]
                early = self.row_early(rpt)
                row = get_kernel(ROW_FAMILY, row_kernel_name(lw, rpt, early, el),
                                 cooperative=True)
                row_blocks = self.max_blocks(row, GMAX_ROW, row_threads(early))
            tile = get_kernel(TILE_FAMILY, tile_kernel_name(*LEAF_SHAPES[el][0], el),
                              cooperative=True)
            plan = leaf_plan(mp, row_blocks, self.row_cap, self.max_blocks(tile, GCAP),
                             row_lw, el)
            self._plans[key] = plan
        return plan

    def steps(self, plan):
        """The _DeviceSteps for a plan's leaf (cached: kernels looked up once)."""
        key = leaf_key(plan)
        st = self._steps.get(key)
        if st is None:
            st = self._steps[key] = _DeviceSteps(self, key)
        return st

    def reset(self):
        """Back to a fresh workspace's state, stream-ordered on the current stream: a CUDA
        graph of a factorization starts with it, so that each replay finds the counters, tags
        and info that its captured launches were issued against."""
        for x in (self.counter, self.info, self.keys, self.rows):
            x.fill(0)
        self.arrivals, self.epoch = 0, 1

    def next_tags(self, kk):
        """First tag of a row-leaf launch of kk columns; zeroes keys and rows (stream-ordered)
        before the uint32 tags would wrap."""
        if self.epoch + kk >= TAG_LIMIT:
            self.keys.fill(0)
            self.rows.fill(0)
            self.epoch = 1
        tag = self.epoch
        self.epoch += kk
        return tag


class _DeviceSteps:
    """factor_panel's steps with our kernels, on the current stream, in the workspace's
    element type."""

    def __init__(self, ws, leaf):
        from ..gemm.dispatch import gemm_ptr_for
        from ..layout.laswp import laswp_ptr
        from .trsm import trsm_ptr
        self.ws = ws
        el = ws.element
        # The recursion's steps by device pointer (its blocks are row-major views of the
        # panel, unit column stride, leading dimension strides[0] / itemsize): no validation,
        # no conversion of the arguments -- a panel is several launches on the look-ahead
        # chain, and with several GPUs the host's enqueue is what bounds mid-size
        # factorizations.  The SM count and the table, read once with the workspace, go with
        # every launch.
        self.itemsize = el.itemsize
        self._trsm = functools.partial(trsm_ptr, sms=ws.sms, table=ws.tuning, element=el)
        self._gemm = functools.partial(gemm_ptr_for(el), sms=ws.sms, table=ws.tuning)
        self._laswp = functools.partial(laswp_ptr, sms=ws.sms, element=el)
        if leaf[0] == "row":
            self._init_row(*leaf[1:3])
        else:
            self.lw, self.rpt = leaf[1], leaf[2]
            self.kernel = get_kernel(TILE_FAMILY, tile_kernel_name(self.lw, self.rpt, el),
                                     cooperative=True)
            # (mp, ncols, A, lda, piv, info, col_base, rec, rowj, counter, base)
            self.launch = Launcher(self.kernel, "iiPqPPiPPPI", cooperative=True)
            self.leaf = self._leaf_tile

    def _init_row(self, lw, rpt):
        self.lw, self.rpt = lw, rpt
        el = self.ws.element
        early = self.ws.row_early(rpt)
        self.threads = row_threads(early)
        self.kernel = get_kernel(ROW_FAMILY, row_kernel_name(lw, rpt, early, el),
                                 cooperative=True)
        # (mp, ncols, A, lda, piv, info, col_base, keys, rows, epoch)
        self.launch = Launcher(self.kernel, "iiPqPPiPPI", cooperative=True)
        self.leaf = self._leaf_row

    def _leaf_row(self, a, piv, col_base):
        mp, w = a.shape
        ws = self.ws
        g = -(-mp // (THREADS * self.rpt))
        # The rows' positions are 0-based relative to a's first row: the pivots' base.
        self.launch((g, 1, 1), (self.threads, 1, 1), mp, w, a.data.ptr,
                    a.strides[0] // self.itemsize, piv.data.ptr, ws.info.data.ptr, col_base,
                    ws.keys.data.ptr, ws.rows.data.ptr, ws.next_tags(min(mp, w)))

    def _leaf_tile(self, a, piv, col_base):
        mp, w = a.shape
        ws = self.ws
        g = -(-mp // (THREADS * self.rpt))
        self.launch((g, 1, 1), (THREADS, 1, 1), mp, w, a.data.ptr,
                    a.strides[0] // self.itemsize, piv.data.ptr, ws.info.data.ptr, col_base,
                    ws.rec_ptr, ws.rowj_ptr, ws.counter.data.ptr, ws.arrivals)
        ws.arrivals = (ws.arrivals + g * min(mp, w)) % 2**32

    def laswp(self, a, piv):
        n, k = a.shape[1], piv.shape[0]
        if n and k:   # piv: a contiguous int32 slice of the panel's pivots
            self._laswp(n, a.data.ptr, a.strides[0] // self.itemsize, k, piv.data.ptr)

    def trsm(self, l11, b):
        if b.shape[1]:
            s = self.itemsize
            self._trsm(b.shape[0], b.shape[1], l11.data.ptr, l11.strides[0] // s, b.data.ptr,
                       b.strides[0] // s)

    def gemm_sub(self, a, b, c):
        """c -= a b, all three row-major (as gemm_into picks: split K where it would)."""
        (m, k), n = a.shape, b.shape[1]
        s = self.itemsize
        self._gemm(m, n, k, -1.0, a.data.ptr, a.strides[0] // s, True, b.data.ptr,
                   b.strides[0] // s, True, 1.0, c.data.ptr, c.strides[0] // s)

    def add(self, piv, off):
        piv += np.int32(off)


def _forced_plan(ws, mp, leaf):
    """The plan of getrf_panel_device's `leaf` for mp rows (see there)."""
    el = ws.element
    if leaf[0] == "row":
        widths = ROW_WIDTHS.get(el, ())
        if leaf[1] not in widths:
            raise ValueError(f"row leaf width {leaf[1]} is not one of {widths} ({el.name})")
        plan = ws.plan(mp, leaf[1])
        if plan[0] != "row":
            raise ValueError(f"{mp} rows do not fit the row leaf's co-resident grid")
        return plan
    shapes = LEAF_SHAPES[el]
    if tuple(leaf[:2]) not in shapes or -(-mp // (THREADS * leaf[1])) > GCAP:
        raise ValueError(f"leaf {leaf} is not one of {shapes} ({el.name}) or too small for "
                         f"{mp} rows")
    return ("tile", leaf[0], leaf[1])


def getrf_panel_device(a, piv=None, ws=None, col_base=0, leaf=None):
    """Factor the row-major CuPy view a (mp x w, unit column stride; float32 or float64) in
    place on the current stream, in a's precision; returns (piv, ws): piv int32 (min(mp, w),)
    0-based relative to a's first row, and the workspace (of a's element type; made when None)
    whose ws.info (device int32) holds col_base + the first zero column (1-based) or 0.  No
    host synchronisation.  `leaf` forces a leaf (tests, benchmarks): ("row", LW) with LW in
    ROW_WIDTHS[element], or (LW, RPT) of LEAF_SHAPES[element] (the tile leaf)."""
    cp = cupy()
    mp, w = a.shape
    el = ELEMENTS.get(a.dtype)
    if el is None or (w > 1 and a.strides[1] != el.itemsize) or a.strides[0] % el.itemsize:
        raise ValueError("a must be a float32 or float64 row-major view (unit column stride)")
    if piv is None:
        piv = cp.empty(min(mp, w), dtype=np.int32)
    if ws is None:
        ws = PanelWorkspace(element=el)
    elif ws.element.dtype != a.dtype:
        raise ValueError(f"a {a.dtype} panel with a workspace of {ws.element.name}")
    if min(mp, w) == 0:
        return piv, ws
    plan = ws.plan(mp) if leaf is None else _forced_plan(ws, mp, leaf)
    factor_panel(ws.steps(plan), a, piv, plan[1], col_base)
    return piv, ws


# ------------------------------------------------------------------------------------ driver

class GpuPanel:
    """Panel factored on the GPU, on the driver's panel stream, with no host wait.

    `factor` returns at once with use_inverse=False (the update uses the triangular solve, so
    no L11^{-1} is needed) and info=0; the first exactly zero pivot is kept on the device and
    read once by `final_info` after the driver's `ops.finish()`.  `devices`: how many GPUs
    factor the matrix (the leaves' plan: row_block_cap).  `table`: the tuning
    table of the leaves' plan (None: the one in force for `element` when the workspace is
    made, on the panel's device).  `element`: the matrix's element type (F32, F64).  The
    panel protocol is gpulinalg/lu/panel_cpu.py's.
    """

    name = "gpu"
    host_wait = False   # factor() only enqueues
    gated = False       # nothing on the host to gate on

    def __init__(self, devices=1, table=None, element=F32):
        self.devices = devices
        self.table = table
        self.element = element
        self._ws = None

    def running(self):
        """No host work runs beside the driver."""
        return contextlib.nullcontext()

    def send(self, ops, step, j0, j1, after):
        """Nothing to ship: the panel stream waits until the panel's columns are updated.
        Returns the timeline's pair of events (None unless ops.timed: `mark`)."""
        ops.wait("panel", after)
        start = mark(ops, "panel")
        return start, mark(ops, "panel")

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        t = time.perf_counter()
        start = mark(ops, "panel")
        panel, piv = ops.panel_view(j0, j1)
        self._enqueue(ops, step, panel, piv, j0)
        done = ops.record("panel")
        return PanelResult(0, False, done, start, t, t, float("nan"))

    def _enqueue(self, ops, step, panel, piv, col_base):
        """The panel's kernels on the panel stream.  Pivots: written on the device, 0-based
        relative to the panel's first row (CupyOps.piv)."""
        with ops.device, ops.streams["panel"]:
            getrf_panel_device(panel, piv, self.workspace(), col_base=col_base)

    def workspace(self):
        """The leaves' device state (created at the first use, on the current device)."""
        if self._ws is None:
            self._ws = PanelWorkspace(self.devices, self.table, self.element)
        return self._ws

    def final_info(self, ops):
        """LAPACK's info for the whole factorization (call after ops.finish())."""
        if self._ws is None:
            return 0
        with ops.device:
            return int(self._ws.info.get()[0])
