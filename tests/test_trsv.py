"""Triangular solves with few right-hand sides, X := op(T)^{-1} X (kernels/trsv.cu): kernel
names, shared memory, the launch path and argument validation, and a NumPy model of the
kernel's blocked algorithm (CPU); the kernel against SciPy's solve_triangular, float32 and
float64, the four cases, views, NaN in what is never read, back-to-back calls (GPU)."""

import functools
import re
import types

import numpy as np
import pytest
import scipy.linalg as sl

from gpulinalg import tuning
from gpulinalg.core import kernels as _kernels
from gpulinalg.core.element import F32, F64
from gpulinalg.lu import trsv as _trsv
from gpulinalg.lu.trsv import (MAX_RHS, NB_SHAPES_OF, RHS_STEPS, SUB, THREADS, nb_shape,
                               rhs_step, shared_bytes, solve_order)

ELEMENTS = [F32, F64]
CASES = [(True, False), (False, False), (True, True), (False, True)]   # (lower, trans)
NRHS = (1, 2, 3, 8, 16)
SIZES = (0, 1, 2, "NB-1", "NB", "NB+1", 257, 1000, 4099)
KIB = 1024


# ---------------------------------------------------------------- CPU: names and constants

def test_kernel_names_and_steps():
    assert _trsv.KERNEL_NAMES == tuple(
        f"trsv_few<{e.ctype},{nb},{r}>" for e in ELEMENTS for nb in NB_SHAPES_OF[e.ctype]
        for r in RHS_STEPS)
    assert RHS_STEPS == (1, 2, 4, 8, 16) and MAX_RHS == 16
    assert [rhs_step(k) for k in range(1, 17)] == [1, 2, 4, 4] + [8] * 4 + [16] * 8
    with pytest.raises(ValueError, match="16"):
        rhs_step(17)
    src = _kernels.source("trsv")
    assert "template <typename T, int NB, int R>" in src and "trsv_few(" in src


def test_kernel_constants_match():
    src = _kernels.source("trsv")
    assert re.search(r"#define TRSV_THREADS (\d+)", src).group(1) == str(THREADS) == "256"
    assert re.search(r"#define TRSV_SUB (\d+)", src).group(1) == str(SUB)
    for ctype, shapes in NB_SHAPES_OF.items():
        size = 4 if ctype == "float" else 8
        for nb in shapes:
            assert nb % 32 == 0 and (nb // 8) % (16 // size) == 0 and nb % SUB == 0
    # the kernel's parameter list, in the launcher's struct format
    params = re.search(r"trsv_few\(([^)]*)\)", src).group(1)
    kinds = [p.split()[-2] if "*" not in p else "P" for p in params.split(",")]
    code = {"int": "i", "unsigned": "I", "long": "q", "P": "P"}
    assert "".join(code[k] for k in kinds) == _trsv._SPECS


def test_header_states_storage_and_bound():
    head = (_kernels.kernel_dir() / "trsv.cu").read_text()[:6000]
    assert head.startswith("// trsv.cu")
    assert "ROW-MAJOR" in head and "Bound:" in head and "TRSV_THREADS" in head


@pytest.mark.parametrize("element", ELEMENTS)
def test_shared_memory(element):
    shapes = NB_SHAPES_OF[element.ctype]
    for r in RHS_STEPS:
        for nb in shapes:
            assert shared_bytes(nb, r, element) % 16 == 0
        # every device from sm_80 on (99 KB a block on sm_86/89/120) has the smallest NB
        assert shared_bytes(shapes[0], r, element) + _trsv.STATIC_SHARED <= 99 * KIB
        # sm_90's 227 KB take the largest
        assert nb_shape(r, element, limit=227 * KIB, wanted=shapes[-1]) == shapes[-1]
        assert nb_shape(r, element, limit=227 * KIB, wanted=shapes[0]) == shapes[0]
        assert nb_shape(r, element, limit=99 * KIB, wanted=shapes[-1]) == shapes[0]
    assert nb_shape(1, F32, limit=163 * KIB, wanted=128) == 64   # sm_80: float 128 needs 199 KB
    assert nb_shape(16, F64, limit=163 * KIB, wanted=64) == 64
    for element in (F32, F64):   # the tables' values are kernels this module instantiates
        assert tuning.current(element=element).trsv_nb in NB_SHAPES_OF[element.ctype]
    assert shared_bytes(128, 16, F32) == 4 * (2 * 128 * 132 + 128 * 132 + 128 * 16)
    assert shared_bytes(32, 16, F64) == 8 * (8 * 16 * 32 + 32 * 34 + 32 * 16)  # sums > ring
    with pytest.raises(ValueError, match="shared memory"):
        nb_shape(1, element, limit=16 * KIB)


def test_solve_order_and_grid():
    fwd = [(0, 128), (128, 256), (256, 300)]
    assert solve_order(300, 128, lower=True, trans=False) == fwd       # L x = b
    assert solve_order(300, 128, lower=False, trans=True) == fwd       # U^T x = b
    assert solve_order(300, 128, lower=False, trans=False) == fwd[::-1]
    assert solve_order(300, 128, lower=True, trans=True) == fwd[::-1]
    assert solve_order(0, 64, True, False) == []
    assert _trsv.grid_size(8192, 128, 132) == 64
    assert _trsv.grid_size(100000, 64, 132) == 132 * _trsv.CTAS_PER_SM


# ---------------------------------------------------------------- CPU: validation

class FakeDeviceArray:
    """What the validation reads of a CuPy array (kind, ndim, shape, strides, dtype, size),
    over a NumPy array: argument checks run without a GPU."""

    __module__ = "cupy._fake"

    def __init__(self, a):
        self._a = a
        self.ndim, self.shape, self.strides = a.ndim, a.shape, a.strides
        self.dtype, self.size = a.dtype, a.size

    def __getitem__(self, key):
        return FakeDeviceArray(self._a[key])

    @property
    def T(self):
        return FakeDeviceArray(self._a.T)


def fake(shape, dtype=np.float32):
    return FakeDeviceArray(np.zeros(shape, dtype))


def test_check_arguments_accepts_views():
    big_t, big_x = fake((40, 50)), fake((40, 20))
    assert _trsv.check_arguments(big_t[3:33, 5:35], big_x[3:33, 1:4]) == (F32, 30, 3, 50, 20)
    assert _trsv.check_arguments(fake((7, 7), np.float64),
                                 fake((7, 16), np.float64)) == (F64, 7, 16, 7, 16)
    assert _trsv.check_arguments(big_t[:30, :30], big_x[:30, 2]) == (F32, 30, 1, 50, 20)
    assert _trsv.check_arguments(big_t[:30, :30], big_x[:30, 5:6]) == (F32, 30, 1, 50, 20)
    assert _trsv.check_arguments(fake((0, 0)), fake((0, 3)))[1:3] == (0, 3)
    assert _trsv.check_arguments(fake((5, 5)), fake((5, 0)))[1:3] == (5, 0)


def test_check_arguments_rejects():
    t, x = fake((6, 6)), fake((6, 2))
    with pytest.raises(TypeError, match="CuPy"):
        _trsv.check_arguments(np.zeros((6, 6), np.float32), x)
    with pytest.raises(TypeError, match="CuPy"):
        _trsv.check_arguments(t, np.zeros((6, 2), np.float32))
    with pytest.raises(TypeError, match="CuPy"):
        _trsv.solve_triangular_few(np.zeros((6, 6), np.float32), x, lower=True)
    with pytest.raises(ValueError, match="float32 or float64"):
        _trsv.check_arguments(fake((6, 6), np.float16), fake((6, 2), np.float16))
    with pytest.raises(ValueError, match="float32"):
        _trsv.check_arguments(t, fake((6, 2), np.float64))
    with pytest.raises(ValueError, match="square"):
        _trsv.check_arguments(fake((6, 5)), x)
    with pytest.raises(ValueError, match="rows"):
        _trsv.check_arguments(t, fake((5, 2)))
    with pytest.raises(ValueError, match="at most 16"):
        _trsv.check_arguments(t, fake((6, 17)))
    with pytest.raises(ValueError, match="row-major"):
        _trsv.check_arguments(t.T[:, :], x)                 # a column-major view: fine as
    with pytest.raises(ValueError, match="row-major"):     # a transpose, not as storage
        _trsv.check_arguments(t, fake((2, 6)).T)
    with pytest.raises(ValueError, match="row-major"):
        _trsv.check_arguments(t[::-1], x)
    with pytest.raises(ValueError, match="2-D"):
        _trsv.check_arguments(fake((6, 6, 1)), x)
    with pytest.raises(ValueError, match="2-D"):
        _trsv.check_arguments(fake(36), x)
    with pytest.raises(ValueError, match="2-D"):
        _trsv.check_arguments(t, fake((6, 2, 1)))
    with pytest.raises(ValueError, match="stride"):
        _trsv.check_arguments(t, fake(6)[::-1])


# ---------------------------------------------------------------- CPU: launch path

class _FakeBuffer:
    def __init__(self, size, log):
        self.size, self.log = size, log
        self.data = types.SimpleNamespace(ptr=(1 << 40) + (len(log) << 20))
        log.append(("zeros", size))

    def fill(self, value):
        self.log.append(("fill", value))


@pytest.fixture
def fake_launch(monkeypatch):
    """trsv_ptr without a GPU: device 0 of 132 SMs and 227 KB per block, one stream;
    returns (launches, buffer log, stream)."""
    launches, log = [], []
    stream = types.SimpleNamespace(ptr=7, capturing=False)
    stream.is_capturing = lambda: stream.capturing
    cp = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                   get_current_stream=lambda: stream),
        zeros=lambda size, dtype: _FakeBuffer(size, log))
    monkeypatch.setattr(_trsv, "cupy", lambda: cp)
    monkeypatch.setattr(_trsv.device, "max_shared_per_block", lambda *a: 227 * KIB)
    monkeypatch.setattr(_trsv.device, "sm_count", lambda *a: 132)
    monkeypatch.setattr(_trsv, "_workspaces", {})
    _trsv._plan.cache_clear()
    monkeypatch.setattr(_trsv, "_kernel", lambda dev, ctype, nb, r: (
        lambda grid, block, *args: launches.append((_trsv._name(ctype, nb, r), grid, block,
                                                    args))))
    yield launches, log, stream
    _trsv._plan.cache_clear()


def test_trsv_ptr_launch_arguments(fake_launch):
    launches, log, stream = fake_launch
    tp, xp = 1 << 30, 1 << 31
    _trsv.trsv_ptr(8192, 1, tp, 8192, xp, 1, lower=True, trans=False)
    _trsv.trsv_ptr(8192, 3, tp, 8192, xp, 5, lower=False, trans=True, element=F64)
    _trsv.trsv_ptr(0, 3, tp, 8192, xp, 5, lower=False)          # nothing to do
    _trsv.trsv_ptr(10, 0, tp, 8192, xp, 5, lower=False)
    (n1, g1, b1, a1), (n2, g2, b2, a2) = launches
    assert n1 == "trsv_few<float,128,1>" and g1 == (64, 1, 1) and b1 == (THREADS, 1, 1)
    assert n2 == "trsv_few<double,64,4>" and g2 == (128, 1, 1)
    head = (1 << 40)
    assert a1 == (8192, 1, tp, 8192, xp, 1, 1, 0, 1, head, head + 4 * _trsv.WORKSPACE_HEAD)
    assert a2[:9] == (8192, 3, tp, 8192, xp, 5, 0, 1, 2)        # the next epoch
    # one stream, one workspace: zeroed when it grows (64, then 128 flags), epochs go on
    assert log == [("zeros", _trsv.WORKSPACE_HEAD + 64), ("zeros", _trsv.WORKSPACE_HEAD + 128)]
    _trsv.trsv_ptr(100000, 16, tp, 100000, xp, 16, lower=True)
    assert log[-1] == ("zeros", _trsv.WORKSPACE_HEAD + 782)
    assert launches[-1][0] == "trsv_few<float,128,16>" and launches[-1][1] == (132, 1, 1)
    assert launches[-1][3][8] == 3


def test_trsv_ptr_epoch_wrap_and_capture(fake_launch):
    launches, log, stream = fake_launch
    _trsv.trsv_ptr(100, 1, 0, 100, 0, 1, lower=True)
    ws = next(iter(_trsv._workspaces.values()))
    ws.epoch = 0xFFFFFFFE
    _trsv.trsv_ptr(100, 1, 0, 100, 0, 1, lower=True)
    assert launches[-1][3][8] == 0xFFFFFFFF and log[-1] == ("zeros", _trsv.WORKSPACE_HEAD + 1)
    _trsv.trsv_ptr(100, 1, 0, 100, 0, 1, lower=True)            # wrapped: zeroed, epoch 1
    assert launches[-1][3][8] == 1 and log[-1] == ("fill", 0)
    stream.capturing = True
    with pytest.raises(RuntimeError, match="graph"):
        _trsv.trsv_ptr(100, 1, 0, 100, 0, 1, lower=True)
    assert len(launches) == 3


def test_workspace_per_stream_and_thread():
    a = _trsv._workspace(0, 12345)
    assert _trsv._workspace(0, 12345) is a
    assert _trsv._workspace(0, 54321) is not a and _trsv._workspace(1, 12345) is not a
    ptds = _trsv._workspace(0, _trsv._PER_THREAD_STREAM)
    import threading
    other = []
    th = threading.Thread(target=lambda: other.append(
        _trsv._workspace(0, _trsv._PER_THREAD_STREAM)))
    th.start()
    th.join()
    assert other[0] is not ptds


# ---------------------------------------------------------------- CPU: the algorithm's model

def canonical(d, nb, lower, trans):
    """The kernel's trsv_canonical on a NumPy tile, in place (same index formulas)."""
    if lower and not trans:
        return
    nbt = d.shape[0]
    for e in range(nbt * nbt):
        p, q = divmod(e, nbt)
        if q >= p or p >= nb:
            continue
        if not lower:
            sr, sc = (q, p) if trans else (nb - 1 - p, nb - 1 - q)
            dq = q if trans else nb - 1 - q
            d[p, q] = d[sr, sc] / d[dq, dq]
        else:
            pr, pc = nb - 1 - q, nb - 1 - p
            if p < pr or (p == pr and q < pc):
                d[p, q], d[pr, pc] = d[pr, pc], d[p, q]


def model(t, x, lower, trans, nb):
    """NumPy model of trsv_few (float64): the blocks in solve order, each block's products
    with the solved blocks, the canonical diagonal tile and its solve in sub-blocks of SUB
    rows, x = z / d for U.  Index for index the kernel's algorithm (not its threads)."""
    n, nrhs = x.shape
    fwd = bool(lower) != bool(trans)
    nblk = -(-n // nb)
    x = x.astype(np.float64).copy()
    tt = np.nan_to_num(t.astype(np.float64), nan=np.inf)   # the unused parts must not leak
    for s in range(nblk):
        b = s if fwd else nblk - 1 - s
        r0 = b * nb
        nbb = min(nb, n - r0)
        d = np.zeros((nb, nb))
        d[:nbb, :nbb] = tt[r0:r0 + nbb, r0:r0 + nbb]
        canonical(d, nbb, lower, trans)
        acc = x[r0:r0 + nbb].copy()
        for q in range(s):
            j = q if fwd else nblk - 1 - q
            c0, c1 = j * nb, min(n, j * nb + nb)
            tile = tt[r0:r0 + nbb, c0:c1] if not trans else tt[c0:c1, r0:r0 + nbb].T
            acc -= tile @ x[c0:c1]
        idx = np.arange(nb) if fwd else nbb - 1 - np.arange(nb)   # solve position -> row
        y = np.zeros((nb, nrhs))
        y[:nbb] = acc[idx[:nbb]]
        for p0 in range(0, nb, SUB):
            for q2 in range(1, SUB):
                for q in range(q2):
                    y[p0 + q2] -= d[p0 + q2, p0 + q] * y[p0 + q]
            later = slice(p0 + SUB, nb)
            y[later] -= d[later, p0:p0 + SUB] @ y[p0:p0 + SUB]
        for p in range(nbb):
            i = idx[p]
            x[r0 + i] = y[p] if lower else y[p] / d[i, i]
    return x


def poisoned(rng, n, lower, dtype=np.float64):
    """A well-conditioned lu_factor-style matrix (|L| <= 1, U of a diagonally weighted
    matrix) whose unused part is NaN: the diagonal and upper triangle for L, the strict lower
    triangle for U."""
    a = rng.standard_normal((n, n)) + n * np.eye(n) * 0.5
    lu, _ = sl.lu_factor(a)
    lu = np.ascontiguousarray(lu, dtype=dtype)   # row-major, as lu_factor's and the kernel's
    if lower:
        lu[np.triu_indices(n)] = np.nan
    else:
        lu[np.tril_indices(n, -1)] = np.nan
    return lu


def triangle(t, lower):
    """The triangle the solve uses, clean (float64)."""
    t = np.nan_to_num(np.asarray(t, np.float64))
    return np.tril(t, -1) + np.eye(t.shape[0]) if lower else np.triu(t)


def scaled_residual(t, x, b, lower, trans, eps):
    """||op(T) x - b|| / (||T|| ||x|| n eps) in float64, T the used triangle of t (L with its
    unit diagonal added without forming it: n = 8192 stays cheap)."""
    n = t.shape[0]
    t64 = np.asarray(t, np.float64)
    part = np.where(np.tri(n, k=-1, dtype=bool), t64, 0.0) if lower else \
        np.where(np.tri(n, k=-1, dtype=bool), 0.0, t64)
    x64 = np.asarray(x, np.float64)
    ax = (part.T if trans else part) @ x64 + (x64 if lower else 0.0)
    res = np.linalg.norm(ax - np.asarray(b, np.float64))
    norm_t = np.sqrt(np.linalg.norm(part) ** 2 + (n if lower else 0.0))
    return res / (norm_t * max(np.linalg.norm(x64), 1e-300) * max(n, 1) * eps)


@pytest.mark.parametrize("lower,trans", CASES)
@pytest.mark.parametrize("n,nb", [(1, 32), (31, 32), (32, 32), (33, 32), (100, 32), (70, 64)])
def test_model_matches_reference(rng, lower, trans, n, nb):
    t = poisoned(rng, n, lower)
    b = rng.standard_normal((n, 3))
    x = model(t, b, lower, trans, nb)
    ref = _trsv.reference(t, b, lower, trans)
    assert np.isfinite(x).all()
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    assert scaled_residual(t, x, b, lower, trans, np.finfo(np.float64).eps) <= 10


def test_reference_ignores_unused_parts(rng):
    n = 6
    lo = np.tril(rng.uniform(-1, 1, (n, n)), -1) + np.eye(n)
    up = np.triu(rng.uniform(-1, 1, (n, n))) + 3 * np.eye(n)
    b = rng.standard_normal((n, 2))
    np.testing.assert_allclose(_trsv.reference(lo + np.triu(np.full((n, n), np.nan)), b, True),
                               np.linalg.solve(lo, b))
    np.testing.assert_allclose(
        _trsv.reference(up + np.tril(np.full((n, n), np.nan), -1), b, False, trans=True),
        np.linalg.solve(up.T, b))


# ---------------------------------------------------------------- GPU

@functools.lru_cache(maxsize=None)
def _factors(n):
    """lu_factor's combined matrix of a seeded random matrix (float64; cached per n)."""
    rng = np.random.default_rng(n)
    # C-ordered: lu_factor's own order, the row-major layout the kernel reads
    return np.ascontiguousarray(
        sl.lu_factor(rng.standard_normal((n, n)) if n else np.zeros((0, 0)))[0])


def factor_with_nan(n, lower, dtype):
    lu = _factors(n).astype(dtype)
    if lower:
        lu[np.triu_indices(n)] = np.nan
    else:
        lu[np.tril_indices(n, -1)] = np.nan
    return lu


def solve_and_check(cp, rng, element, n, nrhs, lower, trans):
    """One solve of a NaN-poisoned factor of order n with nrhs random columns, checked."""
    t = factor_with_nan(n, lower, element.dtype)
    b = rng.standard_normal((n, nrhs)).astype(element.dtype)
    dx = cp.asarray(b)
    _trsv.solve_triangular_few(cp.asarray(t), dx, lower=lower, trans=trans)
    check(t, b, cp.asnumpy(dx), lower, trans, element)


def resolve(size, nrhs, element):
    """A size of SIZES for the NB the device uses at nrhs columns."""
    if isinstance(size, int):
        return size
    nb = nb_shape(rhs_step(nrhs), element)
    return eval(size, {"NB": nb})          # "NB-1", "NB", "NB+1"


def check(t, b, x, lower, trans, element, bound=10.0):
    assert np.isfinite(x).all()
    if t.shape[0]:
        assert scaled_residual(t, x, b, lower, trans, element.eps) <= bound


def place(cp, a, rows_off, cols_off, extra_cols, extra_rows=2, fill=np.nan):
    """a inside a larger device array at (rows_off, cols_off), the rest `fill`: (big, view)."""
    m, k = a.shape
    big = np.full((m + rows_off + extra_rows, k + cols_off + extra_cols), fill, a.dtype)
    big[rows_off:rows_off + m, cols_off:cols_off + k] = a
    d = cp.asarray(big)
    return big, d, d[rows_off:rows_off + m, cols_off:cols_off + k]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["aligned", "offset"])
@pytest.mark.parametrize("nrhs", NRHS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lower,trans", CASES)
@pytest.mark.parametrize("element", ELEMENTS)
def test_matches_scipy(cp, rng, element, lower, trans, size, nrhs, layout):
    """The four cases against the float64 residual bound, T and X as views into larger
    arrays (ldt > n, ldx > nrhs): 'aligned' with a 16-byte aligned T and ldt (the 16-byte
    copies), 'offset' one element off (element copies).  The unused triangle is NaN; nothing
    outside x's view is written and T is not modified."""
    n = resolve(size, nrhs, element)
    t = factor_with_nan(n, lower, element.dtype)
    b = rng.standard_normal((n, nrhs)).astype(element.dtype)
    vk = 16 // element.itemsize
    if layout == "aligned":
        tbig, dt_big, dt = place(cp, t, 0, 0, vk)          # ldt = n + vk
        if (n + vk) % vk:
            tbig, dt_big, dt = place(cp, t, 0, 0, vk + (-(n + vk)) % vk)
    else:
        tbig, dt_big, dt = place(cp, t, 1, 1, 2)
    xbig, dx_big, dx = place(cp, b, 1, 1, 3, fill=7.0)
    out = _trsv.solve_triangular_few(dt, dx, lower=lower, trans=trans)
    assert out is dx
    xs = cp.asnumpy(dx_big)
    mask = np.ones(xbig.shape, bool)
    mask[1:1 + n, 1:1 + nrhs] = False
    np.testing.assert_array_equal(xs[mask], xbig[mask])          # nothing else written
    np.testing.assert_array_equal(cp.asnumpy(dt_big), tbig)      # T untouched, NaN included
    check(t, b, xs[1:1 + n, 1:1 + nrhs], lower, trans, element)


@pytest.mark.gpu
@pytest.mark.parametrize("element", ELEMENTS)
def test_lu_solve_pair_and_back_to_back(cp, rng, element):
    """L then U (lu_solve's order) and U^T then L^T, queued back to back on one stream with
    no synchronisation between (the epochs), on two right-hand sides of different widths."""
    n = 1000
    lu = _factors(n).astype(element.dtype)
    d = cp.asarray(lu)
    b1 = rng.standard_normal((n, 1)).astype(element.dtype)
    b2 = rng.standard_normal((n, 5)).astype(element.dtype)
    x1, x2 = cp.asarray(b1), cp.asarray(b2)
    for _ in range(3):                                   # repeat: later epochs, same flags
        x1[...] = cp.asarray(b1)
        x2[...] = cp.asarray(b2)
        _trsv.solve_triangular_few(d, x1, lower=True)
        _trsv.solve_triangular_few(d, x2, lower=False, trans=True)
        _trsv.solve_triangular_few(d, x1, lower=False)
        _trsv.solve_triangular_few(d, x2, lower=True, trans=True)
        lo, up = triangle(lu, True), triangle(lu, False)
        a = lo @ up
        for x, b, tr in ((x1, b1, False), (x2, b2, True)):
            xh = cp.asnumpy(x).astype(np.float64)
            res = np.linalg.norm((a.T if tr else a) @ xh - b)
            scale = np.linalg.norm(lo) * np.linalg.norm(up) * np.linalg.norm(xh) * n
            assert res <= 10 * scale * element.eps, res / (scale * element.eps)


@pytest.mark.gpu
@pytest.mark.parametrize("element", ELEMENTS)
@pytest.mark.parametrize("lower,trans", CASES)
def test_large_n_flag_chain(cp, rng, element, lower, trans):
    """n = 8192: a chain of 64 to 256 blocks, more blocks than some devices have SMs."""
    solve_and_check(cp, rng, element, 8192, 1, lower, trans)


@pytest.mark.gpu
@pytest.mark.parametrize("element", ELEMENTS)
def test_more_blocks_than_grid(cp, rng, element, monkeypatch):
    """A grid of 2 CTAs for dozens of blocks: the tickets hand each CTA block after block."""
    monkeypatch.setattr(_trsv, "CTAS_PER_SM", 1)
    monkeypatch.setattr(_trsv, "grid_size", lambda n, nb, sms: min(-(-n // nb), 2))
    for lower, trans in CASES:
        solve_and_check(cp, rng, element, 3000, 2, lower, trans)


@pytest.mark.gpu
@pytest.mark.parametrize("element", ELEMENTS)
@pytest.mark.parametrize("nrhs", [1, 3, 16])
def test_smaller_nb_shapes(cp, rng, element, nrhs):
    """The smaller NB of each element type (what devices with less shared memory per block
    run), forced by a table with that trsv_nb: partial blocks, every case, aligned and
    one-element-off views."""
    import dataclasses

    from gpulinalg import tuning
    nb = NB_SHAPES_OF[element.ctype][0]
    small = dataclasses.replace(tuning.current(element=element), trsv_nb=nb)
    with tuning.override(small):
        _smaller_nb_cases(cp, rng, element, nrhs, nb)


def _smaller_nb_cases(cp, rng, element, nrhs, nb):
    for n in (nb - 1, 2 * nb + 5, 1000):
        for lower, trans in CASES:
            t = factor_with_nan(n, lower, element.dtype)
            b = rng.standard_normal((n, nrhs)).astype(element.dtype)
            for off in (0, 1):
                _, _, dt = place(cp, t, off, off, 2 + off)
                dx = cp.asarray(b)
                _trsv.solve_triangular_few(dt, dx, lower=lower, trans=trans)
                check(t, b, cp.asnumpy(dx), lower, trans, element)


@pytest.mark.gpu
def test_vector_and_streams(cp, rng):
    """A 1-D x with a stride, and solves on two streams at once (a workspace each)."""
    n = 700
    t = poisoned(rng, n, True, np.float32)
    dt = cp.asarray(t)
    b = rng.standard_normal((n, 3)).astype(np.float32)
    db = cp.asarray(b)
    _trsv.solve_triangular_few(dt, db[:, 1], lower=True)
    xs = cp.asnumpy(db)
    np.testing.assert_array_equal(xs[:, [0, 2]], b[:, [0, 2]])
    check(t, b[:, 1:2], xs[:, 1:2], True, False, F32)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    xa, xb = cp.asarray(b), cp.asarray(b[:, :2])
    cp.cuda.Device().synchronize()
    with s1:
        _trsv.solve_triangular_few(dt, xa, lower=True)
    with s2:
        _trsv.solve_triangular_few(dt, xb, lower=True, trans=True)
    s1.synchronize()
    s2.synchronize()
    check(t, b, cp.asnumpy(xa), True, False, F32)
    check(t, b[:, :2], cp.asnumpy(xb), True, True, F32)


@pytest.mark.gpu
def test_bad_inputs_on_device(cp):
    t = cp.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="float32"):
        _trsv.solve_triangular_few(t, cp.zeros((4, 2), np.float64), lower=True)
    with pytest.raises(ValueError, match="at most"):
        _trsv.solve_triangular_few(t, cp.zeros((4, 17), np.float32), lower=True)
    with pytest.raises(ValueError, match="row-major"):
        _trsv.solve_triangular_few(t, cp.asfortranarray(cp.zeros((4, 2), np.float32)),
                                   lower=True)
    x = cp.ones((4, 0), np.float32)
    assert _trsv.solve_triangular_few(t, x, lower=False) is x
