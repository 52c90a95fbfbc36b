"""The LU's route, decided once: a `Plan`, then the small functions that run it.

`make_plan` looks at the input and the options once and records every decision in a frozen
`Plan` with a readable repr:

- the element type (`Plan.element`, core/element.py: the working dtype of SciPy's policy),
  the arithmetic: block size nb (`block_size`), the trailing updates' precision
  (`update_precision`) and where "auto" turns back to FP32 (`tail_cut`), the panel kind;
- the route: "graph" (one GPU, GPU panel: replayed from a CUDA graph once its key was seen,
  lu/graph.py, else the stream driver), "driver" (one GPU, GPU panel, the stream driver),
  "host panel" (one GPU, the panels factored on the host), "several GPUs" (lu/multi.py; a
  GPU-resident input with GPU panels replayed from a CUDA graph once its key was seen,
  lu/multi_graph.py),
  "cuSOLVER" (complex input: cuSOLVER's getrf through CuPy), "empty" (no pivot column:
  nothing to factor) or "emulated" (gpulinalg.testing.lu: the same driver on the NumPy
  emulation of the device steps);
- where the matrix is read from (`Plan.source`: the input factored in place, read in place
  into a new matrix, uploaded from the host, a converted copy, a transposed copy, a copy) and
  where the factors are written (`Plan.result`);
- the inf/NaN check (`Plan.finite`): none, on the host before any GPU work, on the device
  before the caller's own array is overwritten, a device flag enqueued before the work and
  read after it, the late flag of route "graph" (read by the replay) or beside the several
  GPUs' upload.

`run` then executes the plan on the current GPU.  Nothing here decides again.

Where a plan runs and what it records is its `Backend`: `DEVICE`, the library's (the GPU,
no timeline), or one the tests supply (gpulinalg.testing.lu: the NumPy emulation, a
per-step timeline, another threshold for the host panel's L11^{-1}); the public keywords alone
are `Options`.
"""

import functools
from dataclasses import dataclass, field

import numpy as np

from .. import tuning
from ..core import arrays, device, host_io
from ..core.element import F32, element as element_of
from ..core.backend import cupy, gpu_available
from ..core.finite import NONFINITE, device_all_finite, device_finite_flag
from . import graph
from .driver import INV_THRESHOLD, getrf
from .steps import CupyOps, workspace_bytes

__all__ = ["Options", "Backend", "DEVICE", "Matrix", "Plan", "make_plan", "run", "replayed",
           "block_size", "update_precision",
           "tail_cut", "finite_on_host", "count_devices", "resolve_devices", "make_panel",
           "check_memory", "host_matrix", "device_matrix"]

PANELS = ("auto", "cpu", "gpu")

# Plan.route
GRAPH, DRIVER, HOST_PANEL, MULTI, CUSOLVER, EMPTY, EMULATED = (
    "graph", "driver", "host panel", "several GPUs", "cuSOLVER", "empty", "emulated")
# Plan.source: how the factorization reads the input
IN_PLACE = "in place"            # the input itself is factored
READ_IN_PLACE = "read in place"  # read where it lies; the factors go to a new matrix
UPLOADED = "uploaded"            # host input through pinned staging (any layout and dtype)
CONVERTED = "converted"          # a C-ordered copy in the working dtype, factored in place
TRANSPOSED = "transposed"        # an F-ordered device input transposed into a new matrix
COPIED = "copied"                # a C-ordered copy into a new matrix
NOTHING = "not read"             # nothing to factor
# Plan.result: where the factors are
INPUT, COPY, NEW_HOST, NEW_DEVICE = "the input", "the copy", "new host array", "new device array"
# Plan.finite: the inf/NaN check
NONE = "none"
HOST = "host"                    # on the host, before any GPU work (the caller's)
WAIT = "device wait"             # on the device, waited for before the caller's array changes
FLAG = "device flag"             # enqueued before the factorization, read after it
LATE = "late flag"               # route "graph": read by the replay (enqueued before the driver)
BESIDE = "beside upload"         # several GPUs: beside the upload of an input read in place


@dataclass(frozen=True, eq=False)
class Options:
    """lu_factor's keywords."""
    panel: str = "auto"
    block_size: object = None
    lookahead: int = 1
    precision: str = "auto"
    devices: object = None

    def is_default(self):
        """Whether every keyword is at its default."""
        return self.__dict__ == _DEFAULT_OPTIONS

    def check(self, element=F32):
        """Validate the keywords for a matrix of `element`; needs no GPU."""
        from ..gemm.dispatch import check_precision
        check_precision(self.precision, element)
        count_devices(self.devices)
        if element.is_complex:
            default = Options()
            changed = [f"{name}={getattr(self, name)!r}"
                       for name in ("panel", "block_size", "lookahead", "devices")
                       if getattr(self, name) != getattr(default, name)]
            if changed:
                raise ValueError(f"{element.name} input is factored by cuSOLVER (through "
                                 f"CuPy), which takes none of {', '.join(changed)}")
        if not isinstance(self.panel, str) or self.panel not in PANELS:
            raise ValueError(f"panel must be one of {PANELS}, got {self.panel!r}")
        nb = self.block_size
        if nb is not None and (isinstance(nb, bool) or not isinstance(nb, (int, np.integer))
                               or nb < 1):
            raise ValueError(f"block_size must be a positive integer or None, got {nb!r}")
        if self.lookahead not in (0, 1) or isinstance(self.lookahead, float):
            raise ValueError(f"lookahead must be 0 or 1, got {self.lookahead!r}")


_DEFAULT_OPTIONS = dict(Options().__dict__)


@dataclass(frozen=True, eq=False)
class Backend:
    """Where a plan runs and what it records.  `DEVICE` is the library's: the GPU, no
    timeline.  gpulinalg.testing.lu supplies others."""
    emulated: bool = False          # the driver on the NumPy emulation (route "emulated")
    timeline: object = None         # a list that receives the driver's per-step record
    inv_threshold: float = INV_THRESHOLD   # U12 by L11^{-1} while its norm is below this

    def run(self, plan, host=None, src=None):
        """Run `plan` (see the module's `run`)."""
        return run(plan, host, src)


DEVICE = Backend()


@dataclass(frozen=True)
class Matrix:
    """What the plan needs to know of the input: the host matrix (a NumPy view) or the device
    matrix (the CuPy array `to_device` gives for the input)."""
    shape: tuple
    dtype: np.dtype          # the input's
    kind: str                # arrays.array_kind of the input
    on_host: bool
    native: bool             # the matrix read is of the working dtype already
    c_contiguous: bool
    f_contiguous: bool
    writeable: bool = True
    owned: bool = False      # device: a converted copy of our own, not the caller's memory


def host_matrix(h, kind):
    """The Matrix of a host input h (NumPy) of array kind `kind`."""
    return Matrix(h.shape, h.dtype, kind, True, h.dtype == element_of(h.dtype).dtype,
                  h.flags.c_contiguous, h.flags.f_contiguous, h.flags.writeable)


def device_matrix(src, a, kind):
    """The Matrix of a device input `a` given as src = arrays.to_device(a): owned when the
    conversion made a copy (another dtype)."""
    owned = src.data.ptr != arrays.device_ptr(a, kind) or src.dtype != arrays.dtype_of(a)
    return Matrix(src.shape, arrays.dtype_of(a), kind, False, True, src.flags.c_contiguous,
                  src.flags.f_contiguous, True, owned)


@dataclass(frozen=True, repr=False)
class Plan:
    """Every decision of one factorization (see the module docstring)."""
    m: int
    n: int
    dtype: np.dtype          # the input's
    element: object          # the working element type (core/element.py): the factors' dtype
    nb: int
    precision: str           # the trailing updates' arithmetic ("auto" resolved)
    tc_min: int              # tensor-core updates while the trailing matrix has this many
                             # rows or columns, FP32 after (0: throughout)
    panel: str               # "gpu" or "cpu"
    lookahead: int
    devices: int             # GPUs (or virtual devices) asked for
    device_ids: tuple        # route "several GPUs": their ids; else None
    route: str
    input: str               # "host" or "device"
    source: str
    result: str
    finite: str
    inv_threshold: float = INV_THRESHOLD
    timeline: object = field(default=None, compare=False)
    table: tuning.Tuning = field(default=None, compare=False)

    def __repr__(self):
        precision = self.precision
        if self.tc_min:
            precision += f" (fp32 below {self.tc_min} trailing)"
        route = self.route
        if self.route == MULTI:
            route += f" {self.device_ids}"
        elif self.route == EMULATED and self.devices > 1:
            route += f" ({self.devices} virtual devices)"
        extra = "" if self.lookahead == 1 else f", lookahead={self.lookahead}"
        dtype = np.dtype(self.dtype).name
        if dtype != self.element.name:
            dtype += f" as {self.element.name}"
        return (f"Plan({self.m}x{self.n} {dtype}, nb={self.nb}, "
                f"precision={precision}, panel={self.panel}{extra}, route={route}, "
                f"source={self.input} input {self.source}, result={self.result}, "
                f"finite check={self.finite})")

    def check_memory(self):
        """MemoryError with the numbers unless the current GPU holds the working matrix (when
        it is not the input itself) and the driver's workspace."""
        check_memory(self.m, self.n, self.nb, self.source not in (IN_PLACE, CONVERTED),
                     self.element)


# ------------------------------------------------------------------------ the rules

def _stepped(nb, steps, k):
    """nb, or the nb of the last step (above, nb) of `steps` with k > above."""
    for above, wider in steps:
        if k > above:
            nb = wider
    return nb


def block_size(m, n, panel, precision, devices, table):
    """The panel width nb of an m x n LU when the caller gives none: the host panel's steps,
    or the GPU panel's for `devices` GPUs and updates in `precision` ("auto" resolved)."""
    k = min(m, n)
    if panel == "cpu":
        return _stepped(table.cpu_nb, table.cpu_nb_steps, k)
    steps = (table.gpu_nb_steps_multi if devices > 2
             else table.gpu_nb_steps_2gpu if devices == 2
             else table.gpu_nb_steps_fp32 if precision == "fp32"
             else table.gpu_nb_steps_tc)
    return _stepped(table.gpu_nb, steps, k)


def update_precision(precision, m, n, table, wgmma=None, element=F32):
    """The trailing updates' arithmetic `precision` means for an m x n LU of `element`:
    float64 "fp64" (the FP64 tensor cores), complex "cusolver"; float32 "auto" is "3xtf32"
    from table.lu_tc_min_mn elements where the device runs wgmma (`wgmma`: that fact, or None
    to ask the device), else "fp32"."""
    if element.is_complex:
        return "cusolver"
    if element.name == "float64":
        return "fp64"
    if precision != "auto":
        return precision
    if m * n < table.lu_tc_min_mn:
        return "fp32"
    has = device.has_wgmma() if wgmma is None else wgmma
    return "3xtf32" if has else "fp32"


def tail_cut(requested, precision, panel, nb, table):
    """tc_min of CupyOps: with precision "auto" on tensor cores, the GPU panel and panels of
    at most table.lu_tc_tail_nb columns, FP32 updates once the trailing matrix has fewer than
    table.lu_tc_min_trailing rows and columns (there the panels' chain paces the steps, and
    the tensor-core product's split pre-pass would lengthen it); 0 otherwise."""
    if (requested == "auto" and precision in ("3xtf32", "tf32") and panel == "gpu"
            and nb <= table.lu_tc_tail_nb):
        return table.lu_tc_min_trailing
    return 0


def finite_on_host(options, gpu=None, backend=DEVICE):
    """Whether a host matrix is checked for inf/NaN on the host: when emulated, on several
    GPUs (the matrix is never whole on one) and without a GPU (checked before anything needs
    one).  One GPU checks the copy it uploads instead (on the host the check costs more than
    the LU at large sizes).  gpu: whether a GPU is available (None: ask)."""
    if backend.emulated or options.devices is not None:
        return True
    return not (gpu_available() if gpu is None else gpu)


def count_devices(devices):
    """The number of devices `devices` asks for (1 for None), validated: None, a count >= 1,
    or distinct device ids."""
    if devices is None:
        return 1

    def is_int(x):
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)

    if is_int(devices):
        if devices < 1:
            raise ValueError(f"devices must be at least 1, got {devices}")
        return int(devices)
    try:
        ids = list(devices)
    except TypeError:
        raise TypeError(f"devices must be None, a count or a sequence of device ids, "
                        f"got {devices!r}") from None
    if not ids or not all(is_int(i) and i >= 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"devices must be distinct non-negative device ids, got {devices!r}")
    return len(ids)


def resolve_devices(devices, count=None, current=None):
    """The GPUs of a factorization on several devices (a count n: devices 0..n-1), checked
    against the machine's `count` GPUs; None where the one-GPU route applies (no `devices`,
    or the `current` GPU alone).  count, current: asked of the machine when None."""
    if devices is None:
        return None
    if count is None:
        cp = cupy()
        count, current = cp.cuda.runtime.getDeviceCount(), cp.cuda.Device().id
    ids = (tuple(range(devices)) if isinstance(devices, (int, np.integer))
           else tuple(int(i) for i in devices))
    if max(ids) >= count:
        raise ValueError(f"devices {ids} asked for, but this machine has {count} GPU(s)")
    return None if ids == (current,) else ids


def check_memory(m, n, nb, copy_matrix, element=F32):
    """MemoryError with the numbers unless the current GPU has room for an m x n LU's
    workspace and (copy_matrix) its working copy of the matrix, of `element`."""
    gib = 2.0 ** 30
    matrix = element.itemsize * m * n if copy_matrix else 0
    work = workspace_bytes(m, n, nb, element=element)
    device.require_memory(matrix + work, lambda: f"LU of a {m}x{n} {element.name} matrix "
                                                 f"(matrix copy {matrix / gib:.2f} GiB + "
                                                 f"workspace {work / gib:.2f} GiB) needs")


def make_panel(name, devices=1, table=None, element=F32):
    """The driver's panel object: "gpu" or "cpu", for a factorization of `element` on
    `devices` GPUs (table: the tuning table; None: the table in force)."""
    if name == "gpu":
        from .panel_gpu import GpuPanel
        return GpuPanel(devices=devices, table=table, element=element)
    from .panel_cpu import CpuPanel
    # Several GPUs: the host work on the driver's thread (the gated chain is the one-GPU
    # driver's; a worker alone does not shorten the several GPUs' steps).
    return CpuPanel(threaded=devices <= 1, table=table)


# ------------------------------------------------------------------------ the plan

def make_plan(x, options, *, overwrite_a=False, check_finite=True, to_host=False,
              device_ids=None, wgmma=None, table=None, backend=DEVICE):
    """The Plan of factoring the Matrix x with `options` (validated) on `backend`.

    to_host: a host input's factors go back to the host (lu_factor; lu forms L and U on the
    device first).  device_ids: `resolve_devices(options.devices)`.  wgmma: whether the
    device runs Hopper's wgmma kernels (None: asked, where "auto" needs it).  table: the
    tuning table (None: tuning.current() of the working element).  Needs no GPU when wgmma is
    given.
    """
    el = element_of(x.dtype)
    table = tuning.current(element=el) if table is None else table
    m, n = x.shape
    k = min(m, n)
    panel = "cpu" if options.panel == "cpu" else "gpu"
    ndev = count_devices(options.devices)
    precision = update_precision(options.precision, m, n, table,
                                 False if backend.emulated else wgmma, el)
    nb = options.block_size
    if nb is None:
        nb = block_size(m, n, panel, precision, ndev, table)
    nb = max(1, min(int(nb), k))
    route = _route(x, el, options, panel, device_ids, table, backend)
    if x.on_host:
        source, result, finite = _host_placement(x, options, route, overwrite_a,
                                                 check_finite, to_host, backend)
    else:
        source, result, finite = _device_placement(x, route, overwrite_a, check_finite)
    return Plan(m=m, n=n, dtype=x.dtype, element=el, nb=nb, precision=precision,
                tc_min=tail_cut(options.precision, precision, panel, nb, table),
                panel=panel, lookahead=options.lookahead, devices=ndev,
                device_ids=device_ids if route == MULTI else None, route=route,
                input="host" if x.on_host else "device", source=source, result=result,
                finite=finite, inv_threshold=backend.inv_threshold,
                timeline=backend.timeline, table=table)


def replayed(plan):
    """Whether the plan's calls replay a CUDA graph once their key was seen (route "graph";
    route "several GPUs" for a GPU-resident input with GPU panels, lu/multi_graph.py)."""
    if plan.route == GRAPH:
        return True
    from . import multi_graph
    return (plan.route == MULTI and plan.input == "device"
            and multi_graph.eligible(plan.m, plan.n, plan.panel, plan.timeline, plan.table))


def _route(x, el, options, panel, device_ids, table, backend):
    m, n = x.shape
    if backend.emulated:
        return EMULATED
    if min(m, n) == 0:
        return EMPTY
    if el.is_complex:
        return CUSOLVER
    if device_ids is not None:
        return MULTI
    if graph.eligible(m, n, panel, backend.timeline, options.devices, table):
        return GRAPH
    return DRIVER if panel == "gpu" else HOST_PANEL


def _host_placement(x, options, route, overwrite_a, check_finite, to_host, backend):
    """(source, result, finite) of a host input.  It is factored where it lies only when
    allowed and already row-major NumPy of the working dtype."""
    in_place = (overwrite_a and x.kind == "numpy" and x.native and x.c_contiguous
                and x.writeable)
    finite = HOST if check_finite and finite_on_host(options, True, backend) else (
        FLAG if check_finite else NONE)
    if route == EMPTY:
        return NOTHING, NEW_HOST, NONE
    if route == EMULATED:
        return (IN_PLACE, INPUT, finite) if in_place else (CONVERTED, COPY, finite)
    if route == MULTI:   # each GPU receives its columns from the host; the factors come back
        if in_place:
            return IN_PLACE, INPUT, finite
        return (READ_IN_PLACE, NEW_HOST, finite) if x.c_contiguous else (CONVERTED, COPY, finite)
    # One GPU: uploaded (converted on the way); the factors come back into the input itself
    # where allowed, else into a new array faulted in while the GPU works.
    result = (INPUT if in_place else NEW_HOST) if to_host else NEW_DEVICE
    return UPLOADED, result, finite


def _device_placement(x, route, overwrite_a, check_finite):
    """(source, result, finite) of a device input (x: the array `to_device` gave)."""
    if route == EMPTY:
        return COPIED, NEW_DEVICE, NONE
    in_place = x.c_contiguous and (overwrite_a or x.owned)
    # Several GPUs or a replay, a C-ordered input to keep: read where it lies, the factors
    # into a fresh matrix (the driver, when a replay does not run, copies it there first).
    read_in_place = not in_place and x.c_contiguous and route in (MULTI, GRAPH)
    if in_place:
        source, result = (CONVERTED, COPY) if x.owned else (IN_PLACE, INPUT)
    elif read_in_place:
        source, result = READ_IN_PLACE, NEW_DEVICE
    else:
        source, result = (TRANSPOSED if x.f_contiguous else COPIED), NEW_DEVICE
    if not check_finite:
        finite = NONE
    elif in_place and not x.owned:
        finite = WAIT        # the caller's array is factored: non-finite input raises first
    elif route == GRAPH:
        finite = LATE
    elif read_in_place:
        finite = BESIDE      # (route "several GPUs")
    else:
        finite = FLAG        # a copy is factored: no host wait before it starts
    return source, result, finite


# ------------------------------------------------------------------------ running it

def run(plan, host=None, src=None):
    """Run `plan` on the current GPU, for the host input `host` (a NumPy view) or the device
    input `src` (as arrays.to_device gives it).  Returns (xp, lu, piv, info): lu row-major
    of the plan's element in xp (numpy or cupy), piv 0-based absolute int32 NumPy, info as
    LAPACK's."""
    if plan.route == EMULATED:
        raise ValueError("the emulated route runs through gpulinalg.testing.lu")
    if plan.input == "host":
        if plan.route == EMPTY:
            return (np, np.empty((plan.m, plan.n), plan.element.dtype), np.zeros(0, np.int32),
                    0)
        if plan.route == MULTI:
            return _several_gpus_from_host(plan, host)
        return _one_gpu_from_host(plan, host)
    return _from_device(plan, src)


def _require_finite(flag):
    if flag is not None and not bool(flag):
        raise ValueError(NONFINITE)


def _one_gpu_from_host(plan, host):
    cp = cupy()
    plan.check_memory()
    # Layout: any host layout and dtype -> row-major in the working dtype on the GPU, converted
    # on the way through pinned staging (core/host_io.py); the check runs on that copy, its
    # flag read last.
    A = host_io.upload(cp, host, dtype=plan.element.dtype)
    flag = device_finite_flag(A) if plan.finite == FLAG else None
    dest, ready = None, None
    if plan.result == INPUT:
        dest = host
    elif plan.result == NEW_HOST:   # its pages are faulted in while the GPU works
        dest, ready = host_io.result_array((plan.m, plan.n), plan.element.dtype)
    piv, info, _ = _one_gpu(plan, A, None)
    if ready is not None:
        ready()   # dest's pages in memory (and no pool job left on it if we raise)
    _require_finite(flag)
    if dest is None:
        return cp, A, piv, info
    return np, host_io.download(cp, A, out=dest), piv, info


def _one_gpu(plan, A, src):
    """Routes "graph", "driver", "host panel" and "cuSOLVER": (piv, info, late finite flag or
    None).  A is factored in place; where the source is read in place, A is a fresh matrix
    that receives the factors of src."""
    read_in_place = plan.source == READ_IN_PLACE
    if plan.route == CUSOLVER:
        if read_in_place:
            A[...] = src
        return _cusolver(A) + (None,)
    if plan.route == GRAPH:   # a shape seen before: replayed from a CUDA graph
        res = graph.factor(A, plan.nb, plan.precision, plan.lookahead, plan.inv_threshold,
                           plan.tc_min, src=src if read_in_place else None, table=plan.table)
        if res is not None:
            piv, info, finite = res
            return piv, info, finite if plan.finite == LATE else None
    # Enqueued before anything overwrites what it reads.
    late = device_finite_flag(src) if plan.finite == LATE else None
    if read_in_place:
        A[...] = src
    ops = CupyOps(A, plan.nb, plan.precision, tc_min=plan.tc_min, table=plan.table)
    panel = make_panel(plan.panel, table=plan.table, element=plan.element)
    piv, info = getrf(ops, panel, plan.nb, plan.lookahead, plan.inv_threshold, plan.timeline)
    return piv, info, late


def _cusolver(A):
    """(piv, info) of the C-ordered complex CuPy matrix A factored in place by cuSOLVER's
    getrf, through cupyx.scipy.linalg.lu_factor (its own column-major copy, copied back)."""
    import warnings
    # CuPy's implementation module, not the public name: a caller that rebinds
    # cupyx.scipy.linalg.lu_factor to ours (as tools/scipy_lu_suite.py does) must not recurse.
    from cupyx.scipy.linalg._decomp_lu import lu_factor
    cp = cupy()
    with warnings.catch_warnings():
        # Its singular-matrix warning: the caller warns once, from `info` below.
        warnings.simplefilter("ignore")
        lu, piv = lu_factor(A, overwrite_a=False, check_finite=False)
    A[...] = lu
    # LAPACK's info: the first exactly zero diagonal element of U (1-based), else 0.
    zeros = cp.flatnonzero(cp.diagonal(lu) == 0)
    info = int(zeros[0]) + 1 if zeros.size else 0
    return cp.asnumpy(piv).astype(np.int32), info


def _from_device(plan, src):
    if plan.finite == WAIT and not device_all_finite(src):
        raise ValueError(NONFINITE)
    flag = device_finite_flag(src) if plan.finite == FLAG else None
    plan.check_memory()
    A = _working_matrix(plan, src)
    if plan.route == EMPTY:
        return cupy(), A, np.zeros(0, np.int32), 0
    if plan.route == MULTI:
        piv, info, late = _several_gpus_from_device(plan, A, src)
    else:
        piv, info, late = _one_gpu(plan, A, src)
    _require_finite(flag if late is None else late)
    return cupy(), A, piv, info


def _working_matrix(plan, src):
    """The C-ordered matrix in the working dtype that the device route factors (or fills:
    read in place)."""
    cp = cupy()
    dtype = plan.element.dtype
    if plan.source in (IN_PLACE, CONVERTED):
        return src
    if plan.source == READ_IN_PLACE:
        return cp.empty((plan.m, plan.n), dtype=dtype)   # every element written
    if plan.source == TRANSPOSED and not plan.element.is_complex:
        # Layout: an F-ordered m x n array is the C-ordered n x m array src.T; transposed
        # into a fresh row-major matrix with our kernel.
        from ..layout.transpose import transpose_into
        A = cp.empty((plan.m, plan.n), dtype=dtype)
        transpose_into(src.T, A)
        return A
    # Other strides (or C-order to keep): one explicit copy (ascontiguousarray would hand
    # back the caller's C-contiguous array itself).
    return cp.array(src, dtype=dtype, order="C", copy=True)


def _panels(plan):
    return functools.partial(make_panel, plan.panel, devices=len(plan.device_ids),
                             table=plan.table, element=plan.element)


def _several_gpus_from_device(plan, A, src):
    """Route "several GPUs", device input: the columns go to the devices (from src where it
    is read in place, else from A) and the factors come back into A."""
    from . import multi_graph
    from .multi import factor_devices
    read_in_place = plan.source == READ_IN_PLACE
    if replayed(plan):
        res = multi_graph.factor(src if read_in_place else A, A, plan.device_ids, plan.nb,
                                 _panels(plan), plan.lookahead, plan.inv_threshold,
                                 plan.precision, plan.table)
        if res is not None:   # a shape seen before: replayed from a CUDA graph
            piv, info, finite = res
            return piv, info, (finite if plan.finite == BESIDE else None)
    late = []

    def beside():   # the finite check of an input read in place, beside the upload
        late.append(device_finite_flag(src))

    piv, info = factor_devices(src if read_in_place else A, plan.device_ids, plan.nb,
                               _panels(plan), plan.lookahead, plan.inv_threshold,
                               plan.precision, plan.timeline, out=A,
                               beside=beside if plan.finite == BESIDE else None,
                               table=plan.table)
    return piv, info, (late[0] if late else None)


def _several_gpus_from_host(plan, host):
    """Route "several GPUs", host input: each device receives its columns from the host (the
    whole matrix never sits on one GPU) and the factors come back into a host array; a
    C-ordered input is read where it lies (other exact dtypes converted chunk by chunk in
    the pinned staging), no host copy first."""
    from .multi import factor_devices
    if plan.source == IN_PLACE:
        A = src = host
    elif plan.source == READ_IN_PLACE:
        A, src = np.empty((plan.m, plan.n), plan.element.dtype), host
    else:
        A = src = np.array(host, dtype=plan.element.dtype, order="C")
    piv, info = factor_devices(src, plan.device_ids, plan.nb, _panels(plan), plan.lookahead,
                               plan.inv_threshold, plan.precision, plan.timeline, out=A,
                               table=plan.table)
    return np, A, piv, info
