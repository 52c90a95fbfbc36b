"""Lazy access to CuPy and the CUDA device: importing gpulinalg never needs CUDA."""

import functools

INSTALL_HINT = ('Install CuPy with the extra of this checkout: pip install ".[cuda13]" '
                '(or ".[cuda12]" for a CUDA 12 driver), on a machine with an NVIDIA GPU.')

# CUDA runtime error codes whose cause can be said more plainly than their message says it.
_INSUFFICIENT_DRIVER = 35    # cudaErrorInsufficientDriver, also a machine without any driver
_NO_DEVICE = 100             # cudaErrorNoDevice


class CudaUnavailableError(RuntimeError):
    """Raised when a GPU routine is called but CuPy or a CUDA device is missing."""


CudaUnavailableError.__module__ = "gpulinalg"   # its public name in tracebacks


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _cuda_version(code):
    return f"{code // 1000}.{code % 1000 // 10}"


def _import_failure(exc):
    """Why `import cupy` failed, in a few words."""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "cupy":
        return "CuPy is not installed"
    if "libcuda" in str(exc):
        return "no NVIDIA driver was found (libcuda could not be loaded)"
    return f"CuPy could not be imported ({_first_line(exc)})"


def _device_failure(cupy, exc):
    """Why CuPy sees no device, in a few words.  The CUDA runtime reports a missing driver as
    an insufficient one; the driver's version (0: none installed) tells the two apart."""
    runtime = cupy.cuda.runtime
    try:
        driver = runtime.driverGetVersion()
    except Exception:  # noqa: BLE001 -- the driver's version is only a better reason
        driver = None
    if driver == 0:
        return "no NVIDIA driver was found"
    status = getattr(exc, "status", None)
    if status == _INSUFFICIENT_DRIVER and driver:
        try:
            needed = f"CUDA {_cuda_version(runtime.runtimeGetVersion())}"
        except Exception:  # noqa: BLE001
            needed = "a newer CUDA"
        return (f"the NVIDIA driver supports CUDA {_cuda_version(driver)}, "
                f"older than CuPy's {needed} runtime")
    if status == _NO_DEVICE:
        return "no CUDA device was found"
    return f"CuPy found no usable CUDA device ({_first_line(exc)})"


@functools.lru_cache(maxsize=None)
def _import_cupy():
    """(the cupy module, None) or (None, the reason it cannot be used)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library failing to load
        return None, _import_failure(exc)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- CuPy's CUDARuntimeError, among others
        return None, _device_failure(cupy, exc)
    if count == 0:
        return None, "no CUDA device was found"
    return cupy, None


def cupy():
    """Return the cupy module, or raise CudaUnavailableError with the reason (one line)."""
    mod, why = _import_cupy()
    if mod is None:
        raise CudaUnavailableError(f"gpulinalg needs an NVIDIA GPU and CuPy: {why}. "
                                   + INSTALL_HINT)
    return mod


def gpu_available():
    """True when CuPy imports and sees at least one CUDA device."""
    return _import_cupy()[0] is not None


def device_count():
    """Number of CUDA devices CuPy sees (0 without CuPy)."""
    mod = _import_cupy()[0]
    return 0 if mod is None else mod.cuda.runtime.getDeviceCount()
