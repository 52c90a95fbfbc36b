"""LU: the public API and its plan (validation, the plan's decisions and results on the NumPy
emulation, CPU; the real kernels, GPU)."""

import inspect
from dataclasses import replace

import numpy as np
import pytest
import scipy.linalg as sl

from array_helpers import view_maker
from lu_helpers import EPS, assert_same_pivots, backward_error, wilkinson, with_cond
import gpulinalg
from gpulinalg import tuning
from gpulinalg.core.element import working_dtype
from gpulinalg.lu import plan as lu_plan
from gpulinalg.testing import lu as glt


# ---------------------------------------------------------------- CPU: public API

def test_public_names():
    for name in ("lu", "lu_factor", "lu_solve"):
        assert hasattr(gpulinalg, name)


def test_no_underscore_parameters_in_public_signatures():
    """The test hooks live in gpulinalg.testing; help() of a public function shows none."""
    for name in gpulinalg.__all__:
        obj = getattr(gpulinalg, name)
        if not callable(obj) or isinstance(obj, type):
            continue
        hidden = [p for p in inspect.signature(obj).parameters if p.startswith("_")]
        assert not hidden, (name, hidden)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (9, 9), (13, 6), (6, 13)])
@pytest.mark.parametrize("kw", [{}, {"permute_l": True}, {"p_indices": True}])
def test_lu_parity_host_backend(rng, shape, kw):
    a = rng.standard_normal(shape).astype(np.float32)
    ours = glt.lu(a, block_size=4, emulate=True, **kw)
    ref = sl.lu(a, **kw)
    assert len(ours) == len(ref)
    for x, y in zip(ours, ref):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (9, 9), (13, 6), (6, 13)])
def test_lu_factor_parity_host_backend(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    lu, piv = glt.lu_factor(np.asfortranarray(a), block_size=4, emulate=True)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert lu.shape == ref_lu.shape and piv.dtype == np.int32
    assert_same_pivots(piv, ref_lu, ref_piv)
    np.testing.assert_allclose(lu, ref_lu, atol=1e-5)


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("bshape", [(11,), (11, 3), (11, 0)])
def test_lu_solve_host_backend(rng, trans, bshape):
    a = rng.standard_normal((11, 11)).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    x = glt.lu_solve(glt.lu_factor(a, block_size=4, emulate=True), b, trans=trans,
                     emulate=True)
    ref = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
    assert x.shape == ref.shape
    np.testing.assert_allclose(x, ref, rtol=1e-3, atol=1e-4)


def test_singular_warning_host_backend():
    a = np.ones((4, 4), np.float32)
    with pytest.warns(sl.LinAlgWarning, match=r"^Diagonal number 2 is exactly zero\. "
                                               r"Singular matrix\.$"):
        lu, piv = glt.lu_factor(a, emulate=True)
    assert lu.shape == (4, 4)


def test_input_not_modified_host_backend(rng):
    a = rng.standard_normal((20, 20)).astype(np.float32)
    a0 = a.copy()
    glt.lu_factor(a, block_size=4, emulate=True)
    np.testing.assert_array_equal(a, a0)


def test_emulated_overwrite_a_in_place(rng):
    a = rng.standard_normal((20, 20)).astype(np.float32)
    keep = a.copy()
    lu, piv = glt.lu_factor(a, overwrite_a=True, block_size=4, emulate=True)
    assert np.shares_memory(lu, a)
    ref_lu, ref_piv = sl.lu_factor(keep)
    assert_same_pivots(piv, ref_lu, ref_piv)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0)])
def test_empty_host_input_needs_no_gpu(shape):
    lu, piv = gpulinalg.lu_factor(np.empty(shape, np.float32))
    assert isinstance(lu, np.ndarray) and lu.shape == shape and lu.dtype == np.float32
    assert piv.shape == (0,) and piv.dtype == np.int32


# Validation happens before the GPU is touched: these pass without CUDA.
@pytest.mark.parametrize("bad", [np.ones(3, np.float32), np.float32(2.0)])
def test_rejects_fewer_than_2_dims(bad):
    with pytest.raises(ValueError, match="at least two-dimensional"):
        gpulinalg.lu_factor(bad)
    with pytest.raises(ValueError, match="at least two-dimensional"):
        gpulinalg.lu(bad)


@pytest.mark.parametrize("dtype, working", [
    (np.float16, np.float32), (np.float32, np.float32), (np.bool_, np.float32),
    (np.int8, np.float32), (np.uint16, np.float32), (np.int32, np.float64),
    (np.uint64, np.float64), (np.float64, np.float64), (np.complex64, np.complex64),
    (np.complex128, np.complex128)])
def test_dtype_policy_is_scipys(dtype, working):
    """The working dtype is scipy.linalg.lu_factor's result dtype, never a downcast."""
    import scipy.linalg
    assert working_dtype(dtype) == working
    a = np.eye(3, dtype=dtype)
    assert scipy.linalg.lu_factor(a)[0].dtype == working


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, object, "U3"])
def test_rejects_dtypes_without_working_precision(dtype):
    if np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128)):
        pytest.skip("long double is double on this platform")
    a = np.eye(3).astype(dtype)
    with pytest.raises(TypeError, match="float64|unsupported"):
        gpulinalg.lu_factor(a)
    with pytest.raises(TypeError, match="float64|unsupported"):
        gpulinalg.lu_solve((np.eye(3), np.arange(3)), np.ones(3).astype(dtype))


@pytest.mark.parametrize("precision", ["fp32", "3xtf32", "tf32"])
def test_float64_refuses_float32_arithmetic(precision):
    with pytest.raises(ValueError, match="float64 input computes in FP64"):
        gpulinalg.lu_factor(np.eye(3), precision=precision)


def test_complex_takes_no_driver_options():
    a = np.eye(3, dtype=np.complex64)
    for kw in ({"panel": "cpu"}, {"block_size": 64}, {"lookahead": 0}, {"devices": 2}):
        with pytest.raises(ValueError, match="cuSOLVER"):
            gpulinalg.lu_factor(a, **kw)
    with pytest.raises(ValueError, match="cuSOLVER"):
        gpulinalg.lu_factor(a, precision="fp32")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_rejects_non_finite(value):
    a = np.eye(3, dtype=np.float32)
    a[1, 2] = value
    with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
        gpulinalg.lu_factor(a)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu(a)
    with pytest.raises(ValueError, match="infs or NaNs"):   # several GPUs: on the host first
        gpulinalg.lu_factor(a, devices=2)
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_solve((np.eye(3, dtype=np.float32), np.arange(3, dtype=np.int32)),
                           a[:, 2])


def test_panel_and_option_validation():
    a = np.eye(3, dtype=np.float32)
    for kw in ({"panel": "tpu"}, {"block_size": 0}, {"block_size": 2.5}, {"lookahead": 2},
               {"precision": "fp16"}, {"precision": None}):
        with pytest.raises(ValueError):
            gpulinalg.lu_factor(a, **kw)


@pytest.mark.parametrize("wgmma", [True, False])
def test_auto_precision_rule(wgmma):
    """precision="auto": 3xTF32 updates for M*N >= lu_tc_min_mn where wgmma exists (one GPU
    or several), FP32 below and elsewhere; explicit precisions pass."""
    table = tuning.SM90
    big = table.lu_tc_min_mn
    tc = "3xtf32" if wgmma else "fp32"
    rule = lu_plan.update_precision
    assert rule("auto", 16384, 16384, table, wgmma) == tc
    assert rule("auto", big, 1, table, wgmma) == tc
    assert rule("auto", 8192, 8192, table, wgmma) == tc
    assert rule("auto", big - 1, 1, table, wgmma) == "fp32"
    assert rule("auto", 6144, 6144, table, wgmma) == "fp32"
    for p in ("fp32", "3xtf32", "tf32"):
        assert rule(p, 64, 64, table, wgmma) == p
    small = replace(table, lu_tc_min_mn=64 * 64)
    assert rule("auto", 64, 64, small, wgmma) == tc


def _update_precision_args(monkeypatch, **kw):
    """The wgmma argument lu_factor(eye(8), **kw) hands plan.update_precision (a spy stops
    it there)."""
    seen = []

    class Stop(Exception):
        pass

    def spy(precision, m, n, table, wgmma=None, element=None):
        seen.append((precision, m, n, wgmma))
        raise Stop

    monkeypatch.setattr(lu_plan, "update_precision", spy)
    factor = glt.lu_factor if "emulate" in kw else gpulinalg.lu_factor
    with pytest.raises(Stop):
        factor(np.eye(8, dtype=np.float32), **kw)
    return seen


@pytest.mark.parametrize("devices", [None, 1, 2])
def test_emulation_resolves_auto_as_fp32(monkeypatch, devices):
    assert _update_precision_args(monkeypatch, devices=devices, emulate=True) == [
        ("auto", 8, 8, False)]


@pytest.mark.gpu
@pytest.mark.parametrize("devices", [None, 1])
def test_gpu_resolves_auto_by_the_rule(cp, monkeypatch, devices):
    """On the GPU (one or several), "auto" asks the device whether it runs wgmma."""
    assert _update_precision_args(monkeypatch, devices=devices) == [("auto", 8, 8, None)]


# ---------------------------------------------------------------- CPU: the plan

def test_block_size_rule():
    """plan.block_size: the tuning table's steps by min(m, n), panel, precision and GPUs."""
    t = tuning.SM90
    bs = lu_plan.block_size
    assert bs(8192, 8192, "gpu", "fp32", 1, t) == 128
    assert bs(8193, 20000, "gpu", "fp32", 1, t) == 256
    assert bs(16384, 16384, "gpu", "fp32", 1, t) == 256
    assert bs(16385, 40000, "gpu", "fp32", 1, t) == 512
    assert bs(4096, 4096, "gpu", "fp32", 1, t) == 128
    assert bs(100, 100, "gpu", "fp32", 1, t) == 128
    assert bs(8192, 8192, "gpu", "3xtf32", 1, t) == 128
    assert bs(8193, 20000, "gpu", "3xtf32", 1, t) == 512
    assert bs(24576, 24576, "gpu", "tf32", 1, t) == 512
    assert bs(32768, 32768, "gpu", "3xtf32", 1, t) == 1024
    assert bs(32768, 32768, "gpu", "3xtf32", 2, t) == 512
    assert bs(16384, 16384, "gpu", "3xtf32", 2, t) == 256
    assert bs(4096, 9000, "gpu", "fp32", 2, t) == 128
    assert bs(4097, 4097, "gpu", "fp32", 2, t) == 128
    assert bs(4096, 4096, "gpu", "fp32", 4, t) == 128
    assert bs(4097, 4097, "gpu", "fp32", 4, t) == 256
    assert bs(32768, 32768, "gpu", "3xtf32", 3, t) == 256
    assert bs(8192, 8192, "gpu", "fp32", 4, t) == 256
    assert bs(8193, 8193, "gpu", "fp32", 4, t) == 512
    assert bs(28672, 28672, "gpu", "fp32", 4, t) == 512
    assert bs(28673, 28673, "gpu", "fp32", 4, t) == 256
    assert bs(40960, 40960, "gpu", "fp32", 4, t) == 256
    assert bs(40961, 40961, "gpu", "3xtf32", 4, t) == 512
    assert bs(8192, 8192, "cpu", "fp32", 1, t) == 128
    assert bs(8193, 8193, "cpu", "3xtf32", 2, t) == 256
    assert bs(8193, 8193, "gpu", "fp32", 1, replace(t, gpu_nb_steps_fp32=())) == t.gpu_nb


def _host(shape, dtype=np.float32, order="C", kind="numpy"):
    """The plan's Matrix of a host input (no array of that size is made)."""
    a = np.empty((2, 3), dtype=dtype, order=order)
    return lu_plan.Matrix(shape, a.dtype, kind, True, a.dtype == np.float32,
                          a.flags.c_contiguous, a.flags.f_contiguous, True)


def _device(shape, order="C", owned=False, dtype=np.float32):
    """The plan's Matrix of a device input as to_device gives it (no GPU needed)."""
    return lu_plan.Matrix(shape, np.dtype(dtype), "cupy", False, True, order == "C",
                          order == "F", True, owned)


def _plan(x, overwrite_a=False, check_finite=True, to_host=True, device_ids=None, wgmma=False,
          table=None, emulate=False, timeline=None, **options):
    """make_plan without a GPU: the device's facts (wgmma, device_ids) given; the table in
    force (an override, else the device's; without a GPU: tuning.DEFAULT); emulate and
    timeline: the test backend's (gpulinalg.testing.lu.backend)."""
    return lu_plan.make_plan(x, lu_plan.Options(**options), overwrite_a=overwrite_a,
                             check_finite=check_finite, to_host=to_host,
                             device_ids=device_ids, wgmma=wgmma, table=table,
                             backend=glt.backend(emulate, timeline))


def _placement(plan):
    return plan.route, plan.input, plan.source, plan.result, plan.finite


def test_plan_host_c_float32_overwrite():
    """NumPy C-ordered float32 with overwrite_a: uploaded, the factors back into the input;
    checked on the device copy; lu (to_host=False) keeps them on the device."""
    x = _host((1000, 1000))
    plan = _plan(x, overwrite_a=True)
    assert _placement(plan) == ("graph", "host", "uploaded", "the input", "device flag")
    assert (plan.nb, plan.precision, plan.tc_min, plan.panel) == (128, "fp32", 0, "gpu")
    assert _plan(x, overwrite_a=True, to_host=False).result == "new device array"
    assert _plan(x).result == "new host array"
    assert _plan(x, check_finite=False).finite == "none"
    assert _plan(x, overwrite_a=True, devices=1).finite == "host"   # devices=1: no graph
    assert _plan(x, overwrite_a=True, devices=1).route == "driver"


@pytest.mark.parametrize("shape", [(300, 200), (200, 300)])
def test_plan_host_f_order_and_other_kinds(shape):
    """F-ordered, float16 or torch CPU input is never factored in place."""
    for x in (_host(shape, order="F"), _host(shape, dtype=np.float16),
              _host(shape, kind="torch_cpu")):
        plan = _plan(x, overwrite_a=True)
        assert _placement(plan) == ("graph", "host", "uploaded", "new host array",
                                    "device flag")
    assert "300x200 float16" in repr(_plan(_host((300, 200), dtype=np.float16)))


def test_plan_cpu_panel_and_timeline():
    x = _host((3000, 3000))
    plan = _plan(x, panel="cpu")
    assert (plan.route, plan.panel, plan.nb) == ("host panel", "cpu", 128)
    assert _plan(_host((9000, 9000)), panel="cpu").nb == 256
    assert _plan(x, timeline=[]).route == "driver"    # a timeline runs the stream driver
    assert _plan(x, block_size=64).nb == 64
    assert _plan(_host((40, 30)), block_size=64).nb == 30


def test_plan_beyond_graph_max_elements():
    """A matrix over graph_max_elements runs the stream driver (no graph of it is kept)."""
    big = tuning.current().graph_max_elements
    assert _plan(_host((big // 16384 + 1, 16384))).route == "driver"
    assert _plan(_host((big // 16384, 16384))).route == "graph"
    with tuning.override(replace(tuning.current(), graph_max_elements=100)):
        assert _plan(_host((10, 10))).route == "graph"
        assert _plan(_host((10, 11))).route == "driver"


def test_plan_precision_auto_by_the_table():
    x = _host((16384, 16384))
    plan = _plan(x, wgmma=True)
    assert (plan.precision, plan.nb, plan.tc_min) == ("3xtf32", 512, 0)
    assert (_plan(x, wgmma=False).precision, _plan(x, wgmma=False).nb) == ("fp32", 256)
    plan = _plan(_host((8192, 8192)), wgmma=True)
    assert (plan.precision, plan.nb, plan.tc_min) == ("3xtf32", 128, 4096)
    assert "precision=3xtf32 (fp32 below 4096 trailing)" in repr(plan)
    assert _plan(_host((8192, 8192)), wgmma=True, panel="cpu").tc_min == 0
    assert _plan(_host((8192, 8192)), wgmma=True, precision="3xtf32").tc_min == 0
    assert _plan(_host((8191, 8192)), wgmma=True).precision == "fp32"
    assert _plan(x, wgmma=True, devices=2, device_ids=(0, 1)).precision == "3xtf32"
    table = replace(tuning.SM90, lu_tc_min_mn=1, lu_tc_min_trailing=512, lu_tc_tail_nb=64)
    plan = _plan(_host((300, 300)), wgmma=True, table=table, block_size=64)
    assert (plan.precision, plan.tc_min, plan.table) == ("3xtf32", 512, table)
    assert _plan(_host((300, 300)), wgmma=True, table=table, block_size=65).tc_min == 0


def test_plan_several_gpus_host_input():
    x = _host((1000, 1000))
    plan = _plan(x, devices=2, device_ids=(0, 1))
    assert _placement(plan) == ("several GPUs", "host", "read in place", "new host array",
                                "host")
    assert (plan.nb, plan.devices, plan.device_ids) == (128, 2, (0, 1))
    assert _plan(x, overwrite_a=True, devices=2, device_ids=(0, 1)).source == "in place"
    plan = _plan(_host((1000, 1000), order="F"), devices=2, device_ids=(0, 1))
    assert (plan.source, plan.result) == ("converted", "the copy")
    plan = _plan(x, devices=[1], device_ids=(1,))    # one GPU, not the current one
    assert (plan.route, plan.devices, plan.nb) == ("several GPUs", 1, 128)
    assert _plan(x, devices=1).route == "driver"      # resolve_devices: the current GPU


def test_plan_device_input():
    """Device input: in place where allowed (the caller's array checked first), read in
    place by a replay or on several GPUs, transposed when F-ordered, else copied."""
    c, f = _device((500, 500)), _device((500, 500), order="F")
    assert _placement(_plan(c)) == ("graph", "device", "read in place", "new device array",
                                    "late flag")
    assert _placement(_plan(c, overwrite_a=True)) == ("graph", "device", "in place",
                                                      "the input", "device wait")
    assert _placement(_plan(c, panel="cpu")) == ("host panel", "device", "copied",
                                                 "new device array", "device flag")
    assert _placement(_plan(f)) == ("graph", "device", "transposed", "new device array",
                                    "late flag")
    assert _placement(_plan(f, overwrite_a=True, timeline=[])) == (
        "driver", "device", "transposed", "new device array", "device flag")
    owned = _device((500, 500), owned=True, dtype=np.float16)   # to_device's float32 copy
    assert _placement(_plan(owned)) == ("graph", "device", "converted", "the copy",
                                        "late flag")
    assert _placement(_plan(owned, panel="cpu")) == ("host panel", "device", "converted",
                                                     "the copy", "device flag")
    two = dict(devices=2, device_ids=(0, 1))
    assert _placement(_plan(c, **two)) == ("several GPUs", "device", "read in place",
                                           "new device array", "beside upload")
    assert _placement(_plan(c, overwrite_a=True, **two)) == ("several GPUs", "device",
                                                             "in place", "the input",
                                                             "device wait")
    assert _placement(_plan(f, **two)) == ("several GPUs", "device", "transposed",
                                           "new device array", "device flag")
    assert _plan(_device((0, 5))).route == "empty"
    assert _plan(c, check_finite=False).finite == "none"


def test_plan_emulated_and_empty():
    x = _host((16384, 16384))
    plan = _plan(x, emulate=True, wgmma=True)
    assert (plan.route, plan.precision, plan.source, plan.result, plan.finite) == (
        "emulated", "fp32", "converted", "the copy", "host")
    assert _plan(x, emulate=True, overwrite_a=True).source == "in place"
    assert _plan(x, emulate=True, devices=3).devices == 3
    assert "3 virtual devices" in repr(_plan(x, emulate=True, devices=3))
    plan = _plan(_host((0, 7)))
    assert _placement(plan) == ("empty", "host", "not read", "new host array", "none")
    assert plan.nb == 1


def test_plan_repr():
    plan = _plan(_device((16384, 16384)), wgmma=True)
    assert repr(plan) == (
        "Plan(16384x16384 float32, nb=512, precision=3xtf32, panel=gpu, route=graph, "
        "source=device input read in place, result=new device array, finite check=late flag)")
    plan = _plan(_host((100, 50)), devices=2, device_ids=(0, 1), lookahead=0)
    assert "route=several GPUs (0, 1)" in repr(plan) and "lookahead=0" in repr(plan)


def test_resolve_devices():
    assert lu_plan.resolve_devices(None) is None
    assert lu_plan.resolve_devices(2, count=4, current=0) == (0, 1)
    assert lu_plan.resolve_devices([2, 3], count=4, current=0) == (2, 3)
    assert lu_plan.resolve_devices(1, count=4, current=0) is None
    assert lu_plan.resolve_devices([1], count=4, current=1) is None
    assert lu_plan.resolve_devices([1], count=4, current=0) == (1,)
    with pytest.raises(ValueError, match="this machine has 2 GPU"):
        lu_plan.resolve_devices(3, count=2, current=0)


def test_finite_rules():
    from gpulinalg.core.finite import host_all_finite
    a = np.ones((10, 6), np.float32)
    assert host_all_finite(a, rows=3)
    a[9, 5] = np.inf
    assert not host_all_finite(a, rows=3) and not host_all_finite(a)
    opts = lu_plan.Options
    assert lu_plan.finite_on_host(opts(), gpu=True, backend=glt.backend(emulate=True))
    assert lu_plan.finite_on_host(opts(devices=1), gpu=True)
    assert not lu_plan.finite_on_host(opts(), gpu=True)
    assert lu_plan.finite_on_host(opts(), gpu=False)


def test_lu_solve_validation():
    lu, piv = np.eye(3, dtype=np.float32), np.arange(3, dtype=np.int32)
    with pytest.raises(ValueError, match="incompatible"):
        gpulinalg.lu_solve((lu, piv), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="trans"):
        gpulinalg.lu_solve((lu, piv), np.ones(3, np.float32), trans=3)
    with pytest.raises(ValueError, match="piv"):
        gpulinalg.lu_solve((lu, piv + 5), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="unsupported"):
        gpulinalg.lu_solve((lu, piv), np.ones(3, object))


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_clear_error_without_gpu():
    with pytest.raises(gpulinalg.CudaUnavailableError):
        gpulinalg.lu_factor(np.eye(3, dtype=np.float32))


# ---------------------------------------------------------------- GPU: the real kernels

GPU_SIZES = [0, 1, 127, 129, 257, 1000, 1031, 2049]


def _np(x):
    if hasattr(x, "get"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    return np.asarray(x)


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_lu_factor_square(rng, n):
    a = rng.standard_normal((n, n)).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(a)
    assert isinstance(lu, np.ndarray) and lu.shape == (n, n) and piv.dtype == np.int32
    if n == 0:
        return
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1000, 300), (300, 1000), (1031, 129), (129, 1031),
                                   (4096, 512), (1, 7), (7, 1)])
def test_gpu_rectangular(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    lu, piv = gpulinalg.lu_factor(a)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("threshold", [0.0, np.inf])
@pytest.mark.parametrize("lookahead", [0, 1])
def test_gpu_paths(rng, threshold, lookahead):
    a = rng.standard_normal((1031, 1031)).astype(np.float32)
    tl = []
    lu, piv = glt.lu_factor(a, panel="cpu", block_size=64, lookahead=lookahead,
                            inv_threshold=threshold, timeline=tl)
    assert {r["use_inverse"] for r in tl[0]["steps"]} == {threshold == np.inf}
    ref_lu, ref_piv = sl.lu_factor(a)
    assert_same_pivots(piv, ref_lu, ref_piv)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("shape", [(1031, 1031), (1031, 517), (517, 1031), (2049, 2049)])
def test_gpu_l21_column_major(rng, panel, shape):
    """The trailing update reading L21 through its column-major copy (forced on every update,
    look-ahead ones included) gives the factors of the row-major path: the same pivots,
    entries equal to rounding, LAPACK's backward error class."""
    a = rng.standard_normal(shape).astype(np.float32)
    out = {}
    for cols in (0, 1):
        with tuning.override(replace(tuning.current(), l21_colmajor_min_cols=cols)):
            out[cols] = gpulinalg.lu_factor(a, panel=panel, block_size=128)
    np.testing.assert_array_equal(out[1][1], out[0][1])
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-5)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert backward_error(a, *out[1]) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["wilkinson", "cond1e6", "rank_deficient"])
def test_gpu_hard_matrices(rng, kind):
    n = 300
    a = {"wilkinson": lambda: wilkinson(100),  # growth 2^99: float32 overflows past n = 128
         "cond1e6": lambda: with_cond(rng, n, 1e6),
         "rank_deficient": lambda: (rng.standard_normal((n, 40)) @ rng.standard_normal(
             (40, n))).astype(np.float32)}[kind]()
    lu, piv = gpulinalg.lu_factor(a, block_size=32)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("kind", ["random", "wilkinson", "cond1e6", "rank_deficient"])
def test_gpu_tensor_core_updates(rng, kind, panel):
    """precision="3xtf32": the trailing updates on the tensor cores keep LAPACK's backward
    error class (within 2x); plain "tf32" is shown to be what it is (much larger errors)."""
    n = 1031
    a = {"random": lambda: rng.standard_normal((n, n)).astype(np.float32),
         "wilkinson": lambda: wilkinson(100),
         "cond1e6": lambda: with_cond(rng, n, 1e6),
         "rank_deficient": lambda: (rng.standard_normal((n, 40)) @ rng.standard_normal(
             (40, n))).astype(np.float32)}[kind]()
    ref = backward_error(a, *sl.lu_factor(a))
    lu, piv = gpulinalg.lu_factor(a, block_size=128, panel=panel, precision="3xtf32")
    assert backward_error(a, lu, piv) <= 2 * ref + 1e-3
    if kind == "random":
        lu, piv = gpulinalg.lu_factor(a, block_size=128, panel=panel, precision="tf32")
        assert backward_error(a, lu, piv) > 20 * ref


@pytest.mark.gpu
def test_gpu_auto_precision_fp32_tail(rng):
    """precision="auto" with 3xTF32 updates turns to FP32 once the trailing matrix is below
    the table's lu_tc_min_trailing rows and columns: rows factored before the switch equal the
    pure-3xTF32 run's bit for bit, the rest differ from it, and the error stays LAPACK's
    class."""
    from gpulinalg.core.device import has_wgmma
    if not has_wgmma():
        pytest.skip("precision='auto' takes 3xTF32 only where wgmma exists (Hopper)")
    n, nb = 1031, 128
    a = rng.standard_normal((n, n)).astype(np.float32)
    kw = dict(block_size=nb, panel="gpu")
    table = replace(tuning.current(), lu_tc_min_mn=1, lu_tc_min_trailing=512)
    with tuning.override(table):
        lu, piv = gpulinalg.lu_factor(a, precision="auto", **kw)
    lu3, piv3 = gpulinalg.lu_factor(a, precision="3xtf32", **kw)
    lu1, _ = gpulinalg.lu_factor(a, precision="fp32", **kw)
    # Updates of steps ending at column j1 with n - j1 >= 512 (j1 <= 512) on the tensor
    # cores: rows 0..639 (panels 0-4) saw only those.
    np.testing.assert_array_equal(piv[:640], piv3[:640])
    np.testing.assert_array_equal(lu[:640], lu3[:640])
    assert not np.array_equal(lu[640:], lu3[640:])
    assert not np.array_equal(lu[:640], lu1[:640])
    assert backward_error(a, lu, piv) <= 2 * backward_error(a, *sl.lu_factor(a)) + 1e-3


@pytest.mark.gpu
def test_gpu_singular_warning():
    a = np.ones((200, 200), np.float32)
    with pytest.warns(sl.LinAlgWarning, match="Diagonal number 2 is exactly zero"):
        lu, piv = gpulinalg.lu_factor(a, block_size=32)
    assert lu.shape == (200, 200)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_gpu_cupy_layouts_and_no_modification(cp, rng, order):
    h = rng.standard_normal((600, 1000)).astype(np.float32)
    if order == "strided":
        d = cp.asarray(h)[:, ::2][:, :300]
        h = h[:, ::2][:, :300]
    else:
        d = cp.asarray(np.asarray(h, order=order))
    d0 = d.copy()
    lu, piv = gpulinalg.lu_factor(d)
    assert isinstance(lu, cp.ndarray) and isinstance(piv, cp.ndarray)
    assert bool((d == d0).all())
    ref_lu, ref_piv = sl.lu_factor(h)
    assert_same_pivots(_np(piv), ref_lu, ref_piv)
    assert backward_error(h, _np(lu), _np(piv)) <= 2 * backward_error(h, ref_lu, ref_piv) + 1e-3


@pytest.mark.gpu
def test_gpu_overwrite_in_place(cp, rng):
    h = rng.standard_normal((513, 513)).astype(np.float32)
    d = cp.asarray(h)
    lu, piv = gpulinalg.lu_factor(d, overwrite_a=True)
    assert lu.data.ptr == d.data.ptr
    h2 = np.asfortranarray(h)
    lu2, _ = gpulinalg.lu_factor(h2, overwrite_a=True)  # NumPy input: never modified
    np.testing.assert_array_equal(h2, h)
    np.testing.assert_allclose(_np(lu), lu2, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_torch(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA torch")
    h = rng.standard_normal((700, 700)).astype(np.float32)
    t = torch.from_numpy(h).cuda()
    lu, piv = gpulinalg.lu_factor(t)
    assert isinstance(lu, torch.Tensor) and lu.is_cuda
    ref_lu, ref_piv = sl.lu_factor(h)
    assert_same_pivots(_np(piv), ref_lu, ref_piv)
    assert backward_error(h, _np(lu), _np(piv)) <= 2 * backward_error(h, ref_lu, ref_piv) + 1e-3
    np.testing.assert_array_equal(t.cpu().numpy(), h)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(257, 257), (300, 1031), (1031, 300), (1, 1), (0, 5)])
@pytest.mark.parametrize("kw", [{}, {"permute_l": True}, {"p_indices": True}])
def test_gpu_lu_parity(rng, shape, kw):
    a = rng.standard_normal(shape).astype(np.float32)
    ours, ref = gpulinalg.lu(a, **kw), sl.lu(a, **kw)
    for x, y in zip(ours, ref):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=1e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("nrhs", [None, 1, 7, 17, 200, 1100])
def test_gpu_lu_solve(cp, rng, trans, nrhs):
    n = 1031
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n,) if nrhs is None else (n, nrhs)).astype(np.float32)
    f = gpulinalg.lu_factor(a)
    x = gpulinalg.lu_solve(f, b, trans=trans)
    assert x.shape == b.shape and isinstance(x, np.ndarray)
    op = a.T if trans else a

    def resid(x):
        x = np.asarray(x, np.float64).reshape(n, -1)
        r = op.astype(np.float64) @ x - b.reshape(n, -1)
        return np.linalg.norm(r) / (np.linalg.norm(a) * np.linalg.norm(x) * n * EPS)
    ref = sl.lu_solve(sl.lu_factor(a), b, trans=trans)
    assert resid(x) <= 2 * resid(ref) + 1e-3
    xd = gpulinalg.lu_solve((cp.asarray(f[0]), cp.asarray(f[1])), cp.asarray(b), trans=trans)
    assert isinstance(xd, cp.ndarray)
    np.testing.assert_allclose(_np(xd), x, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_lu_solve_checks_on_the_device(cp, rng, dtype):
    """The few-column path checks the pivots' range and b's values on the device: the same
    errors as the host checks; strided and F-ordered right-hand sides read where they lie."""
    n = 300
    a = rng.standard_normal((n, n)).astype(dtype)
    lu, piv = gpulinalg.lu_factor(cp.asarray(a))
    ref_lu, ref_piv = sl.lu_factor(a)
    b = rng.standard_normal((n, 7)).astype(dtype)
    def check(x, rhs):
        # normwise backward error within a small multiple of LAPACK's bound n eps
        x, rhs = cp.asnumpy(x).astype(np.float64), rhs.astype(np.float64)
        r = np.linalg.norm(rhs - a.astype(np.float64) @ x, 1)
        scale = np.linalg.norm(a, 1) * np.linalg.norm(x, 1) + np.linalg.norm(rhs, 1)
        assert r / scale <= 4 * n * np.finfo(dtype).eps
        assert x.shape == sl.lu_solve((ref_lu, ref_piv), rhs).shape

    for rhs in (b[:, 0], b[:, ::2], np.asfortranarray(b[:, :3])):
        check(gpulinalg.lu_solve((lu, piv), cp.asarray(rhs)), rhs)
    strided = cp.asarray(b)[:, ::3]                     # a view, not copied first
    check(gpulinalg.lu_solve((lu, piv), strided), b[:, ::3])
    for value in (-1, n, 10**6):
        bad = piv.copy()
        bad[17] = value
        with pytest.raises(ValueError, match="piv must hold"):
            gpulinalg.lu_solve((lu, bad), cp.asarray(b[:, 0]))
    c = cp.asarray(b[:, 0])
    c[5] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        gpulinalg.lu_solve((lu, piv), c)
    assert cp.isnan(gpulinalg.lu_solve((lu, piv), c, check_finite=False)).any()


@pytest.mark.gpu
@pytest.mark.parametrize("panel", ["gpu", "cpu"])
@pytest.mark.parametrize("overwrite_a,order", [(False, "C"), (True, "C"), (False, "F"),
                                               (True, "F")])
def test_gpu_rejects_non_finite_device_input(cp, rng, panel, overwrite_a, order):
    """Device input with a NaN or inf: ValueError, whether the check waits before the
    factorization (the caller's array factored in place) or is read after it (a copy is
    factored), and the caller's array is never changed."""
    for value in (np.nan, np.inf):
        a = np.asarray(rng.standard_normal((300, 300)), dtype=np.float32, order=order)
        a[150, 7] = value
        d = cp.asarray(a, order=order)
        with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
            gpulinalg.lu_factor(d, overwrite_a=overwrite_a, panel=panel)
        np.testing.assert_array_equal(cp.asnumpy(d), a)
        lu, piv = gpulinalg.lu_factor(d, check_finite=False, panel=panel)   # no hang, no error
        assert lu.shape == a.shape


def test_finite_check_lines():
    """The GPU check reads x as lines along its smaller stride (one line when contiguous)."""
    from gpulinalg.core.finite import _lines
    a = np.zeros((6, 10), np.float32)
    assert _lines(a) == (1, 60, 0, 1) and _lines(np.asfortranarray(a)) == (1, 60, 0, 1)
    assert _lines(a[:, 2:7]) == (6, 5, 10, 1)
    assert _lines(np.asfortranarray(a)[1:4]) == (10, 3, 6, 1)
    assert _lines(a[::-2, ::3]) == (3, 4, -20, 3)
    assert _lines(a[1, ::2]) == (1, 5, 0, 2)
    assert _lines(a[:, 3:4]) == (1, 6, 0, 10) and _lines(a[::-1, 3]) == (1, 6, 0, -10)


@pytest.mark.gpu
@pytest.mark.parametrize("view", ["C", "F", "cols", "rows_f", "reversed", "strided", "column",
                                  "vector"])
@pytest.mark.parametrize("shape", [(1, 1), (33, 31), (131, 1031), (2048, 3)])
def test_gpu_finite_check(cp, rng, view, shape):
    """core.finite's kernel finds one inf or NaN anywhere in any layout, and nothing in a
    finite view whose parent holds NaNs outside it."""
    from gpulinalg.core.finite import device_all_finite
    m, n = shape
    base = rng.standard_normal((m + 3, 2 * n + 5)).astype(np.float32)
    base[-1, -1] = np.nan                     # outside every view below
    make = view_maker(cp, view, m, n)
    view_of = make(cp.asarray(base))
    assert device_all_finite(view_of)
    cells = {(0, 0), (view_of.shape[0] - 1, 0), (view_of.shape[0] // 2, 0)}
    if view_of.ndim == 2:
        cells |= {(0, view_of.shape[1] - 1), (view_of.shape[0] - 1, view_of.shape[1] - 1)}
    for cell in cells:
        for value in (np.nan, np.inf, -np.inf):
            v = make(cp.asarray(base))
            v[cell if v.ndim == 2 else cell[0]] = value
            assert not device_all_finite(v), (cell, value)
    assert device_all_finite(cp.empty((0, 5), cp.float32))


@pytest.mark.gpu
def test_gpu_memory_error_message(cp):
    free = cp.cuda.Device().mem_info[1]
    n = int((free / 4) ** 0.5) + 1024
    with pytest.raises(MemoryError, match="GiB"):
        lu_plan.check_memory(n, n, 256, copy_matrix=True)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_n50000_64bit_indexing(cp):
    # 50000^2 floats = 10 GB: offsets pass 2**31 elements (and 2**32 bytes) many times over.
    from gpulinalg.bench.lu import backward_error as estimate
    n = 50000
    if cp.cuda.Device().mem_info[0] < 3 * 4 * n * n:
        pytest.skip("needs ~30 GB of free GPU memory")
    a = cp.random.default_rng(11).standard_normal((n, n), dtype=cp.float32)
    lu, piv = gpulinalg.lu_factor(a)
    p = cp.asnumpy(piv)
    assert p.shape == (n,) and (p >= np.arange(n)).all() and (p < n).all()
    assert bool(cp.isfinite(lu[-1]).all()) and bool(cp.isfinite(lu[:, -1]).all())
    x = cp.random.default_rng(12).standard_normal(n)
    # A wrong block (bad offset, unwritten tile) gives an error of order 1/(n eps) ~ 1e3.
    assert estimate(cp, a, lu, piv, x) < 0.05
