"""laswp: the kernel's permutation model, validation and launch arguments (CPU); the kernel
against NumPy, float32 and float64, bit for bit (GPU)."""

import types

import numpy as np
import pytest

from array_helpers import bits, random_bits

import gpulinalg
from gpulinalg.core.element import F32, F64
from gpulinalg.layout import laswp as _laswp

DTYPES = [np.float32, np.float64]


def lu_like(rng, m, k):
    """piv[i] drawn uniformly from [i, m), as partial pivoting produces."""
    return np.array([rng.integers(i, m) for i in range(k)], dtype=np.int32)


def dependent(m, k, rng):
    """Pivots that name rows several times and point inside the swapped range."""
    piv = rng.integers(0, m, size=k).astype(np.int32)
    piv[1::3] = piv[0]                 # one row moves many times
    piv[2::5] = np.arange(2, k, 5) - 1  # swap with the previous row
    return piv


def apply_moves(a, moves):
    out = a.copy()
    for src, dst in moves:
        out[dst] = a[src]
    return out


# ---------------------------------------------------------------- CPU: model and validation

def test_public_name():
    assert hasattr(gpulinalg, "laswp")
    from gpulinalg import blas
    assert gpulinalg.laswp is blas.laswp


@pytest.mark.parametrize("inverse", [False, True])
def test_net_moves_model_equals_sequential_swaps(rng, inverse):
    for _ in range(200):
        m = int(rng.integers(1, 80))
        k = int(rng.integers(0, m + 1))
        offset = int(rng.integers(0, m - k + 1))
        piv = (dependent(m, k, rng) if rng.integers(2) and k > 2
               else rng.integers(0, m, size=k))
        piv = np.clip(piv, 0, m - 1)
        a = rng.standard_normal((m, 3))
        ref = _laswp.laswp_reference(a.copy(), piv, inverse, offset)
        moves = _laswp.net_moves(piv, offset, inverse)
        assert len({d for _, d in moves}) == len(moves)  # each row written once
        np.testing.assert_array_equal(apply_moves(a, moves), ref)


def test_model_with_launch_chunks_equals_one_pass(rng):
    m, k = 3000, 1300
    piv = lu_like(rng, m, k)
    a = rng.standard_normal((m, 2))
    for inverse in (False, True):
        ref = _laswp.laswp_reference(a.copy(), piv, inverse)
        out = a.copy()
        for start, count in _laswp.launch_plan(k, inverse):
            out = apply_moves(out, _laswp.net_moves(piv[start:start + count], start, inverse))
        np.testing.assert_array_equal(out, ref)


def test_inverse_undoes_forward(rng):
    a = rng.standard_normal((50, 4))
    piv = dependent(50, 40, rng)
    b = _laswp.laswp_reference(a.copy(), piv)
    np.testing.assert_array_equal(_laswp.laswp_reference(b, piv, inverse=True), a)


def test_launch_plan_and_kernel_names():
    assert _laswp.launch_plan(0) == []
    assert _laswp.launch_plan(512) == [(0, 512)]
    assert _laswp.launch_plan(1300) == [(0, 512), (512, 512), (1024, 276)]
    assert _laswp.launch_plan(1300, inverse=True) == [(1024, 276), (512, 512), (0, 512)]
    for k in range(1, _laswp.KMAX + 1):
        assert (1 << _laswp.hash_bits(k)) >= 2 * k
    assert set(_laswp.KERNEL_NAMES) == {"laswp_fused<float,4,512>", "laswp_fused<float,1,512>",
                                        "laswp_fused<double,2,512>",
                                        "laswp_fused<double,1,512>"}
    assert _laswp.vector_width(4) == 4 and _laswp.vector_width(8) == 2   # 16-byte copies


def test_fused_kernel_limits():
    for element in (F32, F64):                               # a strip of 8 always fits
        assert _laswp.fused_cap(element) >= 8 * 2 * _laswp.KMAX
        assert _laswp.fused_cap(element) * element.itemsize <= \
            _laswp.FUSED_SMEM - _laswp.FUSED_META
    assert _laswp.FUSED_CAP == _laswp.fused_cap(F32) == 2 * _laswp.fused_cap(F64)
    assert _laswp.FUSED_BLOCKS_PER_SM * (_laswp.FUSED_SMEM + 1024) <= 228 * 1024
    assert _laswp.FUSED_SMEM <= 227 * 1024
    assert _laswp.FUSED_META % 16 == 0                       # s_val 16-byte aligned
    assert 2 * _laswp.KMAX % _laswp.FUSED_THREADS == 0
    assert _laswp.fused_grid(16384, 132) == 264 and _laswp.fused_grid(100, 132) == 13
    # 16384^2 and 32768^2 with 128 pivots (256 slots): one / two rounds of 64-column strips
    assert _laswp.fused_strip_width(16384, 128, _laswp.fused_grid(16384, 132)) == 64
    assert _laswp.fused_strip_width(32768, 128, _laswp.fused_grid(32768, 132)) == 64


@pytest.mark.parametrize("element", [F32, F64])
@pytest.mark.parametrize("n", [1, 7, 8, 100, 1031, 16384, 32768, 100003])
@pytest.mark.parametrize("k", [1, 2, 128, 511, 512])
def test_fused_strip_width(n, k, element):
    grid = _laswp.fused_grid(n, 132)
    cap = _laswp.fused_cap(element)
    wc = _laswp.fused_strip_width(n, k, grid, element)
    assert wc >= 8 and wc % 8 == 0 and 2 * k * wc <= cap
    assert wc * element.itemsize % 16 == 0          # strip rows stay 16-byte aligned
    strips = -(-n // wc)
    rounds = -(-strips // grid)
    assert rounds == -(-n // (grid * ((cap // (2 * k)) & ~7)))   # fewest rounds
    if n >= 8 * grid:
        assert strips > grid * (rounds - 1)     # the last round is not nearly empty


def _record_launches(monkeypatch, module):
    """Fake the device of `module`'s launch path: returns the list that each launch's
    (kernel, grid, block, args) is appended to."""
    calls = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(module, "cupy", lambda: fake)
    return calls


@pytest.mark.parametrize("element,ap,lda,vw", [(F32, 1 << 20, 300, 4), (F32, (1 << 20) + 4, 300, 1),
                                               (F32, 1 << 20, 302, 1), (F64, 1 << 20, 300, 2),
                                               (F64, (1 << 20) + 8, 300, 1),
                                               (F64, 1 << 20, 301, 1)])
def test_laswp_ptr_launch_arguments(monkeypatch, element, ap, lda, vw):
    """laswp_ptr picks the instantiation of the element type (16-byte copies where the rows
    allow), passes that type's strip capacity, and offsets the pivots of each KMAX chunk by
    4-byte int32s (CPU: the launch is recorded, not run)."""
    calls = _record_launches(monkeypatch, _laswp)
    monkeypatch.setattr(_laswp, "_launcher", lambda dev, ctype, w: (
        lambda grid, block, *args: calls.append((_laswp._fused_name(ctype, w), grid, block,
                                                 args))))
    pp = 1 << 30
    _laswp.laswp_ptr(1000, ap, lda, 1100, pp, offset=3, inverse=True, sms=10, element=element)
    assert [c[0] for c in calls] == [f"laswp_fused<{element.ctype},{vw},512>"] * 3
    assert all(c[1] == (20, 1, 1) and c[2] == (512, 1, 1) for c in calls)
    # inverse: the chunks in reverse order; pivots int32, offsets absolute
    assert [c[3][:8] for c in calls] == [
        (1000, ap, lda, count, pp + 4 * start, 3 + start, 1, _laswp.hash_bits(count))
        for start, count in _laswp.launch_plan(1100, inverse=True)]
    assert all(c[3][8] == _laswp.fused_cap(element) for c in calls)


def test_row_leading_dim():
    ld = _laswp.row_leading_dim
    assert ld((10, 12), (12, 1)) == 12
    assert ld((10, 5), (12, 1)) == 12          # column block of a wider matrix
    assert ld((10, 12), (1, 10)) is None       # column-major
    assert ld((10, 12), (24, 3)) is None       # no unit column stride
    assert ld((10, 12), (-12, 1)) is None
    assert ld((10, 12), (6, 1)) is None        # overlapping rows
    assert ld((1, 12), (0, 1)) == 12
    assert ld((10, 1), (7, 3)) == 7


def _bad_calls():
    a = np.arange(60, dtype=np.float32).reshape(10, 6) + 1
    return a, [
        (np.ones((10, 6), np.complex64), [1], TypeError, "float32 or float64"),
        (a.astype(np.float16), [1], TypeError, "float32"),
        (np.ones(10, np.float32), [1], ValueError, "2-D"),
        (np.ones((2, 5, 6), np.float32), [1], ValueError, "2-D"),
        (np.asfortranarray(a), [1], ValueError, "unit column stride"),
        (a[:, ::2], [1], ValueError, "unit column stride"),
        (a, [0, 10], ValueError, r"piv\[1\] = 10"),
        (a, [-1], ValueError, r"piv\[0\] = -1"),
        (a, [1.0, 2.0], TypeError, "integers"),
        (a, np.array([True]), TypeError, "integers"),
        (a, [[1, 2]], ValueError, "1-D"),
        (a, list(range(10)) + [0], ValueError, "only 10 rows"),
    ]


def test_validation_errors_leave_a_unchanged():
    a, cases = _bad_calls()
    for x, piv, exc, match in cases:
        before = np.array(x, copy=True)
        with pytest.raises(exc, match=match):
            gpulinalg.laswp(x, piv)
        np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(a, np.arange(60, dtype=np.float32).reshape(10, 6) + 1)


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_clear_error_without_gpu():
    with pytest.raises(gpulinalg.CudaUnavailableError):
        gpulinalg.laswp(np.ones((3, 2), np.float32), [2, 2])


def test_empty_pivots_are_a_no_op():
    a = np.ones((3, 2), np.float32)
    assert gpulinalg.laswp(a, []) is a   # nothing to do: no GPU needed


# ---------------------------------------------------------------- GPU

PIV_CASES = ["identity", "reverse", "lu", "dependent", "random"]


def make_piv(kind, m, k, rng):
    if kind == "identity":
        return np.arange(k, dtype=np.int32)
    if kind == "reverse":
        return (m - 1 - np.arange(k)).astype(np.int32)
    if kind == "lu":
        return lu_like(rng, m, k)
    if kind == "dependent":
        return np.clip(dependent(m, k, rng), 0, m - 1).astype(np.int32)
    return rng.integers(0, m, size=k).astype(np.int32)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (2, 1, 1), (5, 3, 5), (33, 31, 17), (64, 65, 64),
                                   (97, 33, 96), (1031, 97, 128), (300, 1031, 128),
                                   (1000, 40, 512), (1200, 70, 1000), (700, 9, 700),
                                   (4096, 257, 513)])
@pytest.mark.parametrize("pk", PIV_CASES)
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_laswp_inplace_against_sequential(cp, rng, m, n, k, pk, inverse, dtype):
    a = rng.standard_normal((m, n)).astype(dtype)
    piv = make_piv(pk, m, k, rng)
    ref = _laswp.laswp_reference(a.copy(), piv, inverse)
    d = cp.asarray(a)
    _laswp.laswp_inplace(d, cp.asarray(piv), inverse)
    np.testing.assert_array_equal(d.get(), ref)




@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
# rows of 212 elements (16-byte multiples) from column j0: 16-byte copies at j0 = 0 (and 2 for
# double), one-element copies otherwise
@pytest.mark.parametrize("j0", [0, 1, 2])
def test_laswp_moves_bits_unchanged(cp, rng, dtype, j0):
    m, n, k = 300, 212, 128
    a = random_bits(rng, (m, n), dtype)
    piv = make_piv("dependent", m, k, rng)
    ref = a.copy()
    ref[:, j0:] = _laswp.laswp_reference(a[:, j0:].copy(), piv)
    d = cp.asarray(a)
    _laswp.laswp_inplace(d[:, j0:], cp.asarray(piv))
    np.testing.assert_array_equal(bits(d.get()), bits(ref))


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 128, 512, 1000])
@pytest.mark.parametrize("dtype", DTYPES)
def test_inverse_undoes_forward_on_gpu(cp, rng, k, dtype):
    m, n = 1500, 77
    a = rng.standard_normal((m, n)).astype(dtype)
    piv = cp.asarray(make_piv("dependent", m, k, rng))
    d = cp.asarray(a)
    _laswp.laswp_inplace(d, piv)
    _laswp.laswp_inplace(d, piv, inverse=True)
    np.testing.assert_array_equal(d.get(), a)


@pytest.mark.gpu
# float32: one-element (37) and 16-byte paths; float64: one-element (37) and 16-byte (4, 8)
@pytest.mark.parametrize("j0,j1", [(37, 201), (4, 300), (8, 263)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_offset_and_column_block_views(cp, rng, j0, j1, dtype):
    m, n = 400, 300
    a = rng.standard_normal((m, n)).astype(dtype)
    d = cp.asarray(a)
    off, k = 64, 128
    piv = lu_like(rng, m, off + k)[off:]       # absolute rows >= off + i
    view = d[:, j0:j1]                          # ld 300, offset pointer
    _laswp.laswp_inplace(view, cp.asarray(piv), offset=off)
    ref = a.copy()
    ref[:, j0:j1] = _laswp.laswp_reference(a[:, j0:j1].copy(), piv, offset=off)
    np.testing.assert_array_equal(d.get(), ref)   # columns outside the block untouched


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_pivot_dtypes_are_converted(cp, rng, dtype):
    a = rng.standard_normal((90, 50)).astype(dtype)
    piv = make_piv("dependent", 90, 60, rng)
    ref = _laswp.laswp_reference(a.copy(), piv)
    for p in (cp.asarray(piv, dtype=cp.int64), cp.asarray(np.repeat(piv, 2))[::2]):
        d = cp.asarray(a)
        _laswp.laswp_inplace(d, p)
        np.testing.assert_array_equal(d.get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("pk", PIV_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_public_numpy_in_place(rng, pk, dtype):
    big = rng.standard_normal((130, 90)).astype(dtype)
    piv = make_piv(pk, 130, 100, rng)
    for a in (big.copy(), big.copy()[::1, 3:50], big.copy()[5:, :]):
        ref = _laswp.laswp_reference(a.copy(), piv[: a.shape[0]] % a.shape[0])
        assert gpulinalg.laswp(a, piv[: a.shape[0]] % a.shape[0]) is a
        np.testing.assert_array_equal(a, ref)
    base = big.copy()
    gpulinalg.laswp(base[:, 10:20], list(piv))  # writes through the view into base
    ref = big.copy()
    ref[:, 10:20] = _laswp.laswp_reference(big[:, 10:20].copy(), piv)
    np.testing.assert_array_equal(base, ref)


@pytest.mark.gpu
def test_public_cupy_in_place_and_device_pivots(cp, rng):
    big = rng.standard_normal((200, 150), dtype=np.float32)
    piv = make_piv("dependent", 200, 128, rng)
    d = cp.asarray(big)
    v = d[:, 3:50]
    assert gpulinalg.laswp(v, cp.asarray(piv)) is v
    ref = big.copy()
    ref[:, 3:50] = _laswp.laswp_reference(big[:, 3:50].copy(), piv)
    np.testing.assert_array_equal(d.get(), ref)
    gpulinalg.laswp(v, piv, inverse=True)
    np.testing.assert_array_equal(d.get(), big)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,inverse", [(4096, 40000, 128, False), (3000, 40000, 512, True),
                                           (2000, 5001, 300, False), (700, 100003, 37, True)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_wide_matrices_several_strips(cp, m, n, k, inverse, dtype):
    # every block walks several strips (the later ones gather only the moved slots)
    rng = np.random.default_rng(8)
    piv = lu_like(rng, m, k)
    a = cp.random.default_rng(4).standard_normal((m, n), dtype=dtype)
    ref = a.copy()
    src, dst = zip(*_laswp.net_moves(piv, inverse=inverse))
    ref[cp.asarray(dst)] = a[cp.asarray(src)]
    _laswp.laswp_inplace(a, cp.asarray(piv), inverse)
    assert bool(cp.array_equal(a, ref))


@pytest.mark.gpu
@pytest.mark.parametrize("element", [F32, F64])
def test_laswp_ptr_chunks_and_sm_count(cp, rng, element):
    """laswp_ptr with more than KMAX pivots (launches applied in order) and an explicit SM
    count (a smaller grid: each block walks more strips) gives the sequential result."""
    m, n, k = 1500, 3001, 1100
    a = rng.standard_normal((m, n)).astype(element.dtype)
    piv = make_piv("dependent", m, k, rng)
    for inverse in (False, True):
        ref = _laswp.laswp_reference(a.copy(), piv, inverse)
        d = cp.asarray(a)
        p = cp.asarray(piv)
        _laswp.laswp_ptr(n, d.data.ptr, n, k, p.data.ptr, 0, inverse, sms=3, element=element)
        np.testing.assert_array_equal(d.get(), ref)


@pytest.mark.gpu
def test_laswp_inplace_rejects_other_dtypes(cp):
    piv = cp.asarray([1], dtype=cp.int32)
    for dtype in (cp.float16, cp.complex64, cp.int32):
        with pytest.raises(TypeError, match="float32 or float64"):
            _laswp.laswp_inplace(cp.zeros((3, 2), dtype), piv)


@pytest.mark.gpu
def test_public_errors_on_gpu_leave_a_unchanged(cp, rng):
    a = rng.standard_normal((20, 8), dtype=np.float32)
    d = cp.asarray(a)
    for x, piv, exc in ((d, cp.asarray([0, 20]), ValueError),
                        (d, cp.asarray([1.0]), TypeError),
                        (d.astype(cp.float16), [1], TypeError),
                        (cp.asfortranarray(d), [1], ValueError),
                        (d[:, ::2], [1], ValueError)):
        with pytest.raises(exc):
            gpulinalg.laswp(x, piv)
    np.testing.assert_array_equal(d.get(), a)


@pytest.mark.gpu
def test_public_torch(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    big = rng.standard_normal((150, 70), dtype=np.float32)
    piv = make_piv("dependent", 150, 128, rng)
    ref = _laswp.laswp_reference(big.copy(), piv)
    t = torch.from_numpy(big.copy()).cuda()
    assert gpulinalg.laswp(t, torch.from_numpy(piv).cuda()) is t
    np.testing.assert_array_equal(t.cpu().numpy(), ref)
    t2 = torch.from_numpy(big.copy()).cuda()
    gpulinalg.laswp(t2[:, 5:40], piv)
    ref2 = big.copy()
    ref2[:, 5:40] = _laswp.laswp_reference(big[:, 5:40].copy(), piv)
    np.testing.assert_array_equal(t2.cpu().numpy(), ref2)
    tc = torch.from_numpy(big.copy())
    assert gpulinalg.laswp(tc, piv) is tc
    np.testing.assert_array_equal(tc.numpy(), ref)
    with pytest.raises(TypeError):
        gpulinalg.laswp(t.half(), piv)
