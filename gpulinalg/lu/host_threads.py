"""Process-wide host settings for the LU's threaded CPU panel, lowered while it runs.

The CPU-panel LU (gpulinalg/_lu.py, CpuPanel) factors each panel with SciPy's sgetrf on a
worker thread while the driver's thread enqueues the GPU's work.  Two defaults of the host
stand in the way, and `panel_worker_settings()` changes both for the duration of a `with`
block, then restores them:

* OpenBLAS splits sgetrf over one thread per core and meets at barriers, so a 17th busy
  thread (the driver's) on 16 cores stalls every barrier that waits for a descheduled one:
  OpenBLAS runs spare_cores() threads fewer than this process may use, a quarter of the cores
  (at least one).  On the H100 host (16 cores), 4 spare against 1: the 8192 LU's wall / sum
  of host panel time 1.030-1.065 in 8 calls against 1.049-1.116 (2 of 8 above 1.1), 16384's
  1.012-1.031 against 1.012-1.075 (benchmarks/lu_ab.py 8192,16384 --panel cpu --vary
  _host_threads.SPARE_SHARE=16,4 --rounds 8 --repeat 1; docs/performance_notes.md).  It is
  reached through ctypes (the library SciPy loaded, found in /proc/self/maps, with SciPy's `scipy_openblas_`
  symbol prefix or the plain `openblas_` one); where there is none (another LAPACK, another
  OS) this setting is left alone.
* A thread that wants the GIL while another runs Python waits up to the interpreter's switch
  interval (5 ms by default): the worker, back from sgetrf, would wait that long for the
  enqueuing thread.  sys.setswitchinterval(SWITCH_US microseconds) bounds the wait.

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

SPARE_SHARE = 4     # cores // SPARE_SHARE (at least 1) kept from OpenBLAS; 0: none kept
SWITCH_US = 50      # the interpreter's switch interval (microseconds) meanwhile; 0: unchanged
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
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def spare_cores():
    """Cores that OpenBLAS leaves to the driver's thread and the CUDA driver's own."""
    return max(1, usable_cores() // SPARE_SHARE) if SPARE_SHARE else 0


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
def panel_worker_settings():
    """Within the block: OpenBLAS at most usable_cores() - spare_cores() threads (at least 1),
    and the switch interval at most SWITCH_US microseconds."""
    with contextlib.ExitStack() as stack:
        api = openblas_threads()
        if api is not None and SPARE_SHARE:
            cap = max(1, usable_cores() - spare_cores())
            stack.enter_context(_override("blas", *api, lambda n: max(1, min(n, cap))))
        if SWITCH_US:
            stack.enter_context(_override("switch", sys.getswitchinterval,
                                          sys.setswitchinterval,
                                          lambda s: min(s, SWITCH_US * 1e-6)))
        yield
