"""Input handling shared by the public API: array kinds, dtype policy, layouts, streams.

Every public routine accepts NumPy arrays (copied to the GPU, result copied back), CuPy arrays
(used in place, result stays on the GPU, the caller's current stream is honoured) and PyTorch
tensors (CUDA tensors are shared zero-copy through DLPack and the work runs on torch's current
stream; CPU tensors go through NumPy).  The result has the kind of the inputs.
"""

import contextlib
import sys

import numpy as np

from .backend import cupy
from .element import working_dtype

FLOAT32 = np.dtype(np.float32)


def is_float32(dtype):
    """dtype == float32, by identity first (the builtin dtype is a singleton): on launch paths."""
    return dtype is FLOAT32 or dtype == FLOAT32


def array_kind(x):
    """'cupy', 'torch', 'torch_cpu' or 'numpy' (anything else is converted with numpy.asarray)."""
    mod = type(x).__module__
    if mod.startswith("cupy") and (len(mod) == 4 or mod[4] == "."):
        return "cupy"
    if mod.startswith("torch") and (len(mod) == 5 or mod[5] == "."):
        return "torch" if x.is_cuda else "torch_cpu"
    return "numpy"


def common_kind(*arrays):
    """The kind shared by all non-None arrays; mixing host and device inputs is an error."""
    kinds = {array_kind(a) for a in arrays if a is not None}
    if len(kinds) > 1:
        raise TypeError(
            f"inputs must all be of one kind (NumPy, CuPy or torch), got {sorted(kinds)}; "
            "move them to one place first")
    return kinds.pop() if kinds else "numpy"


def plain_cupy(*arrays):
    """True when every array that is not None is a float32 CuPy array on the current device:
    the common GPU call, which a public routine can launch without the conversions and
    device switch of the general path (a small call is bound by its host time)."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return False
    device = None
    for x in arrays:
        if x is None:
            continue
        if type(x) is not cp.ndarray or x.dtype is not FLOAT32:
            return False
        if device is None:
            device = cp.cuda.runtime.getDevice()
        if x.data.device_id != device:
            return False
    return True


def check_dtype(dtype, name, target=None):
    """The dtype `name` is computed in: SciPy's policy (element.working_dtype: float16/float32
    in float32, float64/integers/bool in float64, complex in itself), or with `target` (a
    routine of one precision, e.g. sgemm) target itself when `dtype` converts to it exactly.
    TypeError otherwise: nothing is downcast silently."""
    if dtype is FLOAT32 and (target is None or target is FLOAT32):   # the common case first
        return FLOAT32
    dtype = np.dtype(dtype)
    if target is None:
        try:
            return working_dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"{name}: {exc}") from None
    target = np.dtype(target)
    if dtype == target or (dtype.kind in "biufc" and np.can_cast(dtype, target, "safe")):
        return target
    raise TypeError(
        f"{name} has dtype {dtype}; this routine computes in {target} and does not downcast "
        f"silently. Convert explicitly, e.g. {name}.astype(numpy.{target})")


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def dtype_of(x):
    """NumPy dtype of an array of any kind, without moving it (torch bfloat16 -> float32)."""
    if array_kind(x).startswith("torch"):
        name = _torch_dtype_name(x)
        return FLOAT32 if name == "bfloat16" else np.dtype(name)
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def check_matrix(x, name, target=None):
    """Validate ndim == 2 and the dtype policy (check_dtype's `target`) before any device
    work; return the shape."""
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {shape}")
    check_dtype(dtype_of(x), name, target)
    return shape


def host_view(x, name, target=None):
    """x (NumPy-like or CPU torch) as a NumPy array of its own dtype, checked against the
    policy (check_dtype's `target`), no copy when possible."""
    if array_kind(x) == "torch_cpu":
        x = x.detach().numpy() if _torch_dtype_name(x) != "bfloat16" else x.float().numpy()
    x = np.asarray(x)
    check_dtype(x.dtype, name, target)
    return x


def c_contiguous(x):
    """Whether x's strides are those of a C-contiguous array (NumPy's rule: dimensions of
    one element are free, an empty array is contiguous); reads only shape, strides, dtype."""
    if 0 in x.shape:
        return True
    want = x.dtype.itemsize
    for size, stride in zip(reversed(x.shape), reversed(x.strides)):
        if size != 1 and stride != want:
            return False
        want *= size
    return True


def check_device_array(x, name, dtype, shape):
    """TypeError / ValueError unless x is a C-contiguous CuPy array of `dtype` and `shape`
    (a kernel's by-pointer argument); reads only its kind, dtype, shape and strides."""
    if array_kind(x) != "cupy":
        raise TypeError(f"{name} must be a CuPy array, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{name} must be a {np.dtype(dtype).name} array, got {x.dtype}")
    if tuple(x.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}")
    if not c_contiguous(x):
        raise ValueError(f"{name} must be C-contiguous")


def check_on_device(named, dev):
    """ValueError unless every CuPy array of `named` ((array, name) pairs) lies on device
    `dev` (the current one)."""
    for x, name in named:
        if x.data.device_id != dev:
            raise ValueError(f"{name} is on device {x.data.device_id}, not the current "
                             f"device {dev}")


def device_of(arrays):
    """CUDA device id of the first device array in `arrays` (None: the current device)."""
    ids = set()
    for a in arrays:
        kind = array_kind(a) if a is not None else None
        if kind == "cupy":
            ids.add(a.device.id)
        elif kind == "torch":
            ids.add(a.device.index)
    if len(ids) > 1:
        raise ValueError(f"inputs live on different GPUs {sorted(ids)}")
    return ids.pop() if ids else None


def launch_context(kind, device_id):
    """Make `device_id` current; for torch inputs also make torch's current stream CuPy's.
    (A plain function: on the common path, CuPy arrays on the current device, it returns a
    context that does nothing, and small calls are bound by the host.)"""
    cp = cupy()
    current = cp.cuda.runtime.getDevice()
    if kind == "torch":
        return _torch_context(cp, current if device_id is None else device_id)
    if device_id is None or device_id == current:
        return contextlib.nullcontext()
    return cp.cuda.Device(device_id)


@contextlib.contextmanager
def _torch_context(cp, device_id):
    import torch
    with cp.cuda.Device(device_id):
        with _external_stream(cp, torch.cuda.current_stream(device_id), device_id):
            yield


def _external_stream(cp, torch_stream, device_id):
    """torch's stream as a CuPy stream (CuPy 14 prefers the CUDA stream protocol)."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None and hasattr(torch_stream, "__cuda_stream__"):
        return from_external(torch_stream)
    return cp.cuda.ExternalStream(torch_stream.cuda_stream, device_id)


def device_ptr(x, kind):
    """Device address of a CuPy array (kind "cupy") or a CUDA torch tensor (kind "torch")."""
    return x.data.ptr if kind == "cupy" else x.data_ptr()


def to_device(x, kind, name, target=None):
    """x as a CuPy array on the current device in the dtype it is computed in (check_dtype's
    policy, or `target`): a view for CuPy/torch CUDA input already of that dtype, else a
    converted copy."""
    cp = cupy()
    if kind == "cupy":
        if is_float32(x.dtype) and (target is None or target is FLOAT32):
            return x
        dtype = check_dtype(x.dtype, name, target)
        return x if x.dtype == dtype else x.astype(dtype)
    if kind == "torch":
        dname = _torch_dtype_name(x)
        if dname == "bfloat16":  # no NumPy/CuPy dtype: widen on the torch side (exact)
            x = x.float()
        y = cp.from_dlpack(x.detach())
        dtype = check_dtype(y.dtype, name, target)
        return y if y.dtype == dtype else y.astype(dtype)
    h = host_view(x, name, target)
    dtype = check_dtype(h.dtype, name, target)
    if h.ndim == 2:   # a large one through pinned staging (core/host_io.py)
        from .host_io import upload
        return upload(cp, h, layout=True, dtype=dtype)
    return cp.asarray(h, dtype=dtype)


def from_device(y, kind):
    """Return the CuPy result `y` in the caller's kind."""
    if kind == "cupy":
        return y
    if kind == "torch":
        import torch
        return torch.from_dlpack(y)
    from .host_io import download   # a large matrix through pinned staging
    h = download(cupy(), y)
    if kind == "torch_cpu":
        import torch
        return torch.from_numpy(h)
    return h


def matrix_layout(a):
    """(ld, row_major) describing a 2-D CuPy array, or None when it needs a copy.

    row_major: element (i, j) at i*ld + j.  Otherwise column-major: at i + j*ld.  Dimensions of
    length 1 have meaningless strides, so such arrays fit either layout.
    """
    m, n = a.shape
    if m == 0 or n == 0:  # nothing is ever accessed
        return max(n, 1), True
    size, (t0, t1) = a.itemsize, a.strides
    if t0 % size or t1 % size:   # not whole elements
        return None
    s0, s1 = t0 // size, t1 // size
    if n <= 1 or s1 == 1:
        if m <= 1:
            return max(n, 1), True
        if s0 >= max(n, 1):
            return s0, True
    if m <= 1 or s0 == 1:
        if n <= 1:
            return max(m, 1), False
        if s1 >= max(m, 1):
            return s1, False
    return None


def as_matrix(a, name):
    """Check a CuPy array is 2-D; return it with its layout (copying only odd strides)."""
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {a.ndim}-D with shape {a.shape}")
    layout = matrix_layout(a)
    if layout is None:  # both strides non-unit, negative, or overlapping: one explicit copy
        a = cupy().ascontiguousarray(a)
        layout = matrix_layout(a)
    return a, layout
