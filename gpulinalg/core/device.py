"""Device properties, asked of the device once and cached: SM count, compute capability."""

import functools

from .backend import cupy, gpu_available


def _device_id(device_id):
    return cupy().cuda.runtime.getDevice() if device_id is None else int(device_id)


@functools.lru_cache(maxsize=None)
def _properties(device_id):
    props = cupy().cuda.runtime.getDeviceProperties(device_id)
    return props["multiProcessorCount"], (props["major"], props["minor"])


def sm_count(device_id=None):
    """Streaming multiprocessors of the current (or given) device."""
    return _properties(_device_id(device_id))[0]


def capability(device_id=None):
    """(major, minor) of the current (or given) device; None without a GPU."""
    if device_id is None and not gpu_available():
        return None
    return _properties(_device_id(device_id))[1]


def has_wgmma(device_id=None):
    """Whether the device runs Hopper's wgmma kernels (sm_90 exactly: sm_90a code)."""
    return capability(device_id) == (9, 0)
