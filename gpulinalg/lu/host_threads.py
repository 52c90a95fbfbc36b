"""Process-wide host settings lowered while the threaded host panel runs (CpuPanel.running).

The host panel (gpulinalg/lu/panel_cpu.py) factors each panel with SciPy's sgetrf on a worker
thread while the driver's thread enqueues the GPU's work.  Two defaults of the host stand in
the way, and `panel_worker_settings` changes both for the duration of a `with` block:

* OpenBLAS splits sgetrf over one thread per core and meets at barriers, so one more busy
  thread (the driver's) stalls every barrier that waits for a descheduled one: OpenBLAS runs
  `spare_cores` threads fewer than this process may use.  It is reached through ctypes (the
  library SciPy loaded, found in /proc/self/maps, with SciPy's `scipy_openblas_` symbol prefix
  or the plain `openblas_` one); where there is none (another LAPACK, another OS) this setting
  is left alone.
* A thread that wants the GIL while another runs Python waits up to the interpreter's switch
  interval (5 ms by default): the worker, back from sgetrf, would wait that long for the
  enqueuing thread.  A shorter switch interval bounds the wait.

Both settings are process-wide: other threads see them inside the block too.  Nested and
concurrent blocks share one saved value per setting; the last to leave restores it.
"""

import contextlib
import ctypes
import functools
import importlib
import os
import sys
import threading

_LOCK = threading.Lock()
_saved = {}         # setting -> [depth, saved value]


@functools.lru_cache(maxsize=None)
def openblas_threads():
    """(get, set) of the thread count of the OpenBLAS that SciPy's LAPACK uses, or None."""
    importlib.import_module("scipy.linalg.lapack")   # loads SciPy's BLAS into the process
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    # SciPy's own wheel copy (scipy.libs) first: NumPy ships another OpenBLAS, which SciPy's
    # LAPACK does not call.
    for path in sorted(libs, key=lambda p: "scipy.libs" not in p):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            get = getattr(lib, prefix + "get_num_threads", None)
            put = getattr(lib, prefix + "set_num_threads", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


def usable_cores():
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def spare_cores(spare_share):
    """Cores that OpenBLAS leaves to the driver's thread and the CUDA driver's own:
    usable_cores() // spare_share, at least 1 (0 where spare_share is 0)."""
    return max(1, usable_cores() // spare_share) if spare_share else 0


@contextlib.contextmanager
def _override(key, get, put, value):
    """put(value(saved)) for the block, the saved get() back after the last nested block."""
    with _LOCK:
        entry = _saved.setdefault(key, [0, None])
        if entry[0] == 0:
            entry[1] = get()
            put(value(entry[1]))
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                put(entry[1])


@contextlib.contextmanager
def panel_worker_settings(spare_share, switch_us):
    """Within the block: OpenBLAS at most usable_cores() - spare_cores(spare_share) threads
    (at least 1; spare_share 0: unchanged), and the switch interval at most switch_us
    microseconds (0: unchanged).  The tuning table gives both (`openblas_spare_share`,
    `switch_interval_us`)."""
    with contextlib.ExitStack() as stack:
        api = openblas_threads()
        if api is not None and spare_share:
            cap = max(1, usable_cores() - spare_cores(spare_share))
            stack.enter_context(_override("blas", *api, lambda n: max(1, min(n, cap))))
        if switch_us:
            stack.enter_context(_override("switch", sys.getswitchinterval,
                                          sys.setswitchinterval,
                                          lambda s: min(s, switch_us * 1e-6)))
        yield
