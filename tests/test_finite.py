"""The finite check (core/finite.py, kernels/finite.cu) for float64 and complex: the lines and
kernels it reads them with (CPU); the kernel finds one inf or NaN anywhere, in either part of
a complex element, in any layout (GPU).  float32: test_gpu_finite_check in test_lu.py."""

import numpy as np
import pytest

from array_helpers import view_maker

from gpulinalg.core import finite as _finite


# ---------------------------------------------------------------- CPU

def test_kernel_names():
    assert set(_finite.KERNEL_NAMES) == {"all_finite<float>", "all_finite<double>",
                                         "all_finite<float2>", "all_finite<double2>"}


def test_lines_in_components():
    """Complex arrays are described in strides of their component type: adjacent elements
    are 2 apart (the launcher then reads them as one real line of twice the length)."""
    z = np.zeros((6, 10), np.complex128)
    assert _finite._lines(z, 8) == (1, 60, 0, 2)
    assert _finite._lines(np.asfortranarray(z), 8) == (1, 60, 0, 2)
    assert _finite._lines(z[:, 2:7], 8) == (6, 5, 20, 2)
    assert _finite._lines(z[::-2, ::3], 8) == (3, 4, -40, 6)
    assert _finite._lines(z[:, 3:4], 8) == (1, 6, 0, 20)
    assert _finite._lines(z) == (1, 60, 0, 1)                       # default unit: elements
    d = np.zeros((6, 10))
    assert _finite._lines(d[:, 2:7]) == (6, 5, 10, 1) == _finite._lines(d[:, 2:7], 8)


def _component_addresses(x):
    """Byte addresses of every component (real, imaginary) of every element of x."""
    part = x.itemsize // (2 if x.dtype.kind == "c" else 1)
    idx = np.indices(x.shape).reshape(x.ndim, -1)
    base = x.__array_interface__["data"][0] + (np.asarray(x.strides)[:, None] * idx).sum(0)
    return np.sort(np.concatenate([base + p * part for p in range(x.itemsize // part)]))


def _kernel_addresses(x):
    """The addresses all_finite reads for x with _kernel_args' arguments (host model of the
    kernel's loop: element (o, i) at x + o s_outer + i s_inner components, complex elements
    two components)."""
    name, outer, inner, s_outer, s_inner = _finite._kernel_args(x)
    part = np.dtype({"float": np.float32, "double": np.float64}[name.rstrip("2")]).itemsize
    o, i = np.meshgrid(np.arange(outer), np.arange(inner), indexing="ij")
    first = (o * s_outer + i * s_inner).ravel()
    parts = 2 if name.endswith("2") else 1
    comps = np.concatenate([first + p for p in range(parts)])
    return np.sort(x.__array_interface__["data"][0] + part * comps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_kernel_arguments_cover_every_component_once(dtype):
    """Host model: for every layout, the kernel's lines read each component (both parts of a
    complex element) exactly once, with the real kernel where complex elements are adjacent."""
    a = np.zeros((7, 12), dtype)
    views = [a, np.asfortranarray(a), a[1:6, 2:9], np.asfortranarray(a)[1:6, :5], a[::-1, ::-1],
             a[:, ::3], a[::2, 1::2], a[:, 3:4], a[:, 3], a[2, ::2], a[2], a.T[::2], a[:1, :1],
             a.reshape(-1)[::-5]]
    for v in views:
        got, want = _kernel_addresses(v), _component_addresses(v)
        np.testing.assert_array_equal(got, want)
        # the complex kernel only where the elements along the line are not adjacent
        complex_kernel = np.dtype(dtype).kind == "c" and _finite._lines(v)[3] != 1
        assert _finite._kernel_args(v)[0].endswith("2") == complex_kernel, v.strides
    with pytest.raises(TypeError):
        _finite._kernel_args(np.zeros((2, 2, 2), dtype))
    with pytest.raises(TypeError):
        _finite._kernel_args(np.zeros((2, 2), np.float16))


# ---------------------------------------------------------------- GPU

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
VIEWS = ["C", "F", "cols", "rows_f", "reversed", "strided", "column", "vector", "row"]



def _values(dtype):
    """The non-finite values to plant: NaN, +inf, -inf; for complex in the real part, in the
    imaginary part alone, and in both."""
    bad = (np.nan, np.inf, -np.inf)
    if np.dtype(dtype).kind != "c":
        return bad
    return ([complex(v, 0.5) for v in bad] + [complex(0.5, v) for v in bad]
            + [complex(np.nan, np.inf)])


@pytest.mark.gpu
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("shape", [(1, 1), (33, 31), (131, 1031), (2048, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_finite_check_dtypes(cp, rng, view, shape, dtype):
    """One inf or NaN at a corner or the middle of any layout is found, in either part of a
    complex element; a finite view whose parent holds NaNs outside it passes."""
    from gpulinalg.core.finite import device_all_finite
    m, n = shape
    base = rng.standard_normal((m + 3, 2 * n + 5))
    if np.dtype(dtype).kind == "c":
        base = base + 1j * rng.standard_normal(base.shape)
    base = base.astype(dtype)
    base[-1, -1] = np.nan                     # outside every view below
    base[-1, 0] = complex(0, np.inf) if np.dtype(dtype).kind == "c" else np.inf
    v = view_maker(cp, view, m, n)(cp.asarray(base))
    assert v.dtype == dtype
    assert device_all_finite(v)
    last = tuple(s - 1 for s in v.shape)
    cells = {(0,) * v.ndim, last, tuple(s // 2 for s in v.shape)}
    if v.ndim == 2:
        cells |= {(0, v.shape[1] - 1), (v.shape[0] - 1, 0)}
    for cell in cells:
        keep = v[cell].copy()
        for value in _values(dtype):
            v[cell] = value
            assert not device_all_finite(v), (cell, value)
        v[cell] = keep
        assert device_all_finite(v), cell
    assert device_all_finite(cp.empty((0, 5), dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_gpu_finite_check_complex_imaginary_nan_only(cp, dtype):
    """A NaN in the imaginary part alone, each element in turn of a small strided and a
    contiguous complex matrix (every lane and both kernels: strided and as a real line)."""
    from gpulinalg.core.finite import device_all_finite
    parent = cp.ones((9, 14), dtype)
    for v in (parent, parent[1:8, 1:13:3], parent.T):
        for i in range(v.shape[0]):
            for j in range(v.shape[1]):
                v[i, j] = complex(1.0, np.nan)
                assert not device_all_finite(v), (i, j)
                v[i, j] = 1.0
        assert device_all_finite(v)


@pytest.mark.gpu
def test_gpu_finite_check_complex_view_of_real_memory(cp):
    """A complex64 view that starts 4 bytes into a float32 buffer (aligned to its parts
    only): read part by part, so the check needs no 8-byte alignment."""
    from gpulinalg.core.finite import device_all_finite
    buf = cp.ones(2 * 300 + 2, cp.float32)
    try:
        z = buf[1:601].view(cp.complex64)
    except ValueError:
        pytest.skip("this CuPy does not view unaligned memory as complex")
    assert z.data.ptr % 8 == 4 and device_all_finite(z) and device_all_finite(z[::3])
    # buf[k] is part of z[(k - 1) // 2]: real for odd k, imaginary for even k
    for k in (1, 2 * 150 + 1, 600, 2 * 297 + 2):
        buf[k] = np.nan
        assert not device_all_finite(z)
        assert device_all_finite(z[::3]) == ((k - 1) // 2 % 3 != 0)
        buf[k] = 1.0


@pytest.mark.gpu
def test_gpu_finite_check_rejects_other_dtypes(cp):
    from gpulinalg.core.finite import device_finite_flag
    for x in (cp.zeros((3, 3), cp.float16), cp.zeros((3, 3), cp.int32),
              cp.zeros((2, 2, 2), cp.float64), cp.zeros((2, 2, 2), cp.complex64)):
        with pytest.raises(TypeError, match="float32, float64, complex64 or complex128"):
            device_finite_flag(x)
