"""Lazy access to CuPy and the CUDA device: importing gpulinalg never needs CUDA."""

import functools


class CudaUnavailableError(RuntimeError):
    """Raised when a GPU routine is called but CuPy or a CUDA device is missing."""


@functools.lru_cache(maxsize=None)
def _import_cupy():
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library failing to load
        return None, f"CuPy could not be imported ({exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"CuPy found no CUDA device ({exc})"
    if count == 0:
        return None, "CuPy found no CUDA device"
    return cupy, None


def cupy():
    """Return the cupy module, or raise CudaUnavailableError with the reason."""
    mod, why = _import_cupy()
    if mod is None:
        raise CudaUnavailableError(
            f"gpulinalg needs an NVIDIA GPU and CuPy: {why}. "
            "Install with `pip install gpulinalg[cuda13]` (or [cuda12]) on a machine with CUDA.")
    return mod


def gpu_available():
    """True when CuPy imports and sees at least one CUDA device."""
    return _import_cupy()[0] is not None


def device_count():
    """Number of CUDA devices CuPy sees (0 without CuPy)."""
    mod = _import_cupy()[0]
    return 0 if mod is None else mod.cuda.runtime.getDeviceCount()
