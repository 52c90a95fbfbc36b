"""The thread count of SciPy's LAPACK (OpenBLAS), lowered while the LU's host panels run.

The CPU-panel LU (gpulinalg/_lu.py, CpuPanel) factors each panel with SciPy's sgetrf on a
worker thread while the driver's thread enqueues the GPU's work.  OpenBLAS splits sgetrf over
one thread per core and meets at barriers, so a 17th busy thread (the driver's) on 16 cores
stalls every barrier that waits for the descheduled one.  `spare_cores()` lowers OpenBLAS to
SPARE_CORES threads fewer than this process may use for the duration of a `with` block, and
restores it.

OpenBLAS is reached through ctypes (the library SciPy loaded, found in /proc/self/maps, with
SciPy's `scipy_openblas_` symbol prefix or the plain `openblas_` one).  Where there is none
(another LAPACK, another OS) the block runs unchanged.  The setting is process-wide: other
threads' SciPy BLAS calls inside the block also see one thread fewer.
"""

import contextlib
import ctypes
import functools
import importlib
import os
import threading

SPARE_CORES = 1     # cores left to the driver's thread while OpenBLAS factors a panel
_LOCK = threading.Lock()
_state = {"depth": 0, "saved": None}


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


@contextlib.contextmanager
def spare_cores():
    """Within the block, OpenBLAS runs at most usable_cores() - SPARE_CORES threads (at
    least 1).
    Nested and concurrent blocks share one saved value; the last to leave restores it."""
    api = openblas_threads()
    if api is None:
        yield
        return
    get, put = api
    with _LOCK:
        if _state["depth"] == 0:
            _state["saved"] = get()
            put(max(1, min(_state["saved"], usable_cores() - SPARE_CORES)))
        _state["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                put(_state["saved"])
