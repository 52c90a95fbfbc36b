"""Device properties, asked of the device once and cached: SM count, compute capability, the
shared memory a block may opt in to."""

import functools

from .backend import cupy, gpu_available


def _device_id(device_id):
    return cupy().cuda.runtime.getDevice() if device_id is None else int(device_id)


@functools.lru_cache(maxsize=None)
def _properties(device_id):
    props = cupy().cuda.runtime.getDeviceProperties(device_id)
    return (props["multiProcessorCount"], (props["major"], props["minor"]),
            props.get("sharedMemPerBlockOptin", props.get("sharedMemPerBlock", 48 * 1024)))


def sm_count(device_id=None):
    """Streaming multiprocessors of the current (or given) device."""
    return _properties(_device_id(device_id))[0]


def max_shared_per_block(device_id=None):
    """Bytes of shared memory one block of the current (or given) device may opt in to."""
    return _properties(_device_id(device_id))[2]


def capability(device_id=None):
    """(major, minor) of the current (or given) device; None without a GPU."""
    if device_id is None and not gpu_available():
        return None
    return _properties(_device_id(device_id))[1]


def has_wgmma(device_id=None):
    """Whether the device runs Hopper's wgmma kernels (sm_90 exactly: sm_90a code)."""
    return capability(device_id) == (9, 0)


def free_bytes(device_id=None):
    """Device memory free for a new allocation on the current (or given) device: the driver's
    free memory plus the blocks CuPy's pool holds unused (they are reused first)."""
    cp = cupy()
    if device_id is None:
        free, total = cp.cuda.Device().mem_info
        return free + cp.get_default_memory_pool().free_bytes(), total
    with cp.cuda.Device(device_id):
        free, total = cp.cuda.Device().mem_info
        return free + cp.get_default_memory_pool().free_bytes(), total


def require_memory(need, what, device_id=None):
    """Raise MemoryError, with the numbers, unless `need` bytes are free on the device.
    `what` says what needs them ("LU of a 1000x1000 float32 matrix needs"), or is a callable
    that returns it (formatted only for the error)."""
    free, total = free_bytes(device_id)
    if need > free:
        what = what() if callable(what) else what
        gib = 2.0 ** 30
        dev = cupy().cuda.runtime.getDevice() if device_id is None else device_id
        raise MemoryError(f"{what} {need / gib:.2f} GiB of GPU memory on GPU {dev}, but only "
                          f"{free / gib:.2f} GiB of {total / gib:.2f} GiB are free")
