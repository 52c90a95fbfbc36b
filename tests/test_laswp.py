"""laswp: the kernel's permutation model and validation (CPU); the kernel against NumPy (GPU)."""

import numpy as np
import pytest

import gpulinalg
from gpulinalg.layout import laswp as _laswp


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
    assert set(_laswp.KERNEL_NAMES) == {"laswp_fused<4,512>", "laswp_fused<1,512>"}


def test_fused_kernel_limits():
    assert _laswp.FUSED_CAP >= 8 * 2 * _laswp.KMAX          # a strip of 8 always fits
    assert _laswp.FUSED_BLOCKS_PER_SM * (_laswp.FUSED_SMEM + 1024) <= 228 * 1024
    assert _laswp.FUSED_SMEM <= 227 * 1024
    assert _laswp.FUSED_META % 16 == 0                       # s_val 16-byte aligned
    assert 2 * _laswp.KMAX % _laswp.FUSED_THREADS == 0
    assert _laswp.fused_grid(16384, 132) == 264 and _laswp.fused_grid(100, 132) == 13
    # 16384^2 and 32768^2 with 128 pivots (256 slots): one / two rounds of 64-column strips
    assert _laswp.fused_strip_width(16384, 128, _laswp.fused_grid(16384, 132)) == 64
    assert _laswp.fused_strip_width(32768, 128, _laswp.fused_grid(32768, 132)) == 64


@pytest.mark.parametrize("n", [1, 7, 8, 100, 1031, 16384, 32768, 100003])
@pytest.mark.parametrize("k", [1, 2, 128, 511, 512])
def test_fused_strip_width(n, k):
    grid = _laswp.fused_grid(n, 132)
    wc = _laswp.fused_strip_width(n, k, grid)
    assert wc >= 8 and wc % 8 == 0 and 2 * k * wc <= _laswp.FUSED_CAP
    strips = -(-n // wc)
    rounds = -(-strips // grid)
    assert rounds == -(-n // (grid * ((_laswp.FUSED_CAP // (2 * k)) & ~7)))   # fewest rounds
    if n >= 8 * grid:
        assert strips > grid * (rounds - 1)     # the last round is not nearly empty


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
        (np.ones((10, 6)), [1], TypeError, "float32"),
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
def test_laswp_inplace_against_sequential(cp, rng, m, n, k, pk, inverse):
    a = rng.standard_normal((m, n), dtype=np.float32)
    piv = make_piv(pk, m, k, rng)
    ref = _laswp.laswp_reference(a.copy(), piv, inverse)
    d = cp.asarray(a)
    _laswp.laswp_inplace(d, cp.asarray(piv), inverse)
    np.testing.assert_array_equal(d.get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 128, 512, 1000])
def test_inverse_undoes_forward_on_gpu(cp, rng, k):
    m, n = 1500, 77
    a = rng.standard_normal((m, n), dtype=np.float32)
    piv = cp.asarray(make_piv("dependent", m, k, rng))
    d = cp.asarray(a)
    _laswp.laswp_inplace(d, piv)
    _laswp.laswp_inplace(d, piv, inverse=True)
    np.testing.assert_array_equal(d.get(), a)


@pytest.mark.gpu
@pytest.mark.parametrize("j0,j1", [(37, 201), (4, 300), (8, 263)])   # 4-byte and 16-byte paths
def test_offset_and_column_block_views(cp, rng, j0, j1):
    m, n = 400, 300
    a = rng.standard_normal((m, n), dtype=np.float32)
    d = cp.asarray(a)
    off, k = 64, 128
    piv = lu_like(rng, m, off + k)[off:]       # absolute rows >= off + i
    view = d[:, j0:j1]                          # ld 300, offset pointer
    _laswp.laswp_inplace(view, cp.asarray(piv), offset=off)
    ref = a.copy()
    ref[:, j0:j1] = _laswp.laswp_reference(a[:, j0:j1].copy(), piv, offset=off)
    np.testing.assert_array_equal(d.get(), ref)   # columns outside the block untouched


@pytest.mark.gpu
def test_pivot_dtypes_are_converted(cp, rng):
    a = rng.standard_normal((90, 50), dtype=np.float32)
    piv = make_piv("dependent", 90, 60, rng)
    ref = _laswp.laswp_reference(a.copy(), piv)
    for p in (cp.asarray(piv, dtype=cp.int64), cp.asarray(np.repeat(piv, 2))[::2]):
        d = cp.asarray(a)
        _laswp.laswp_inplace(d, p)
        np.testing.assert_array_equal(d.get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("pk", PIV_CASES)
def test_public_numpy_in_place(rng, pk):
    big = rng.standard_normal((130, 90), dtype=np.float32)
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
def test_fused_wide_matrices_several_strips(cp, m, n, k, inverse):
    # every block walks several strips (the later ones gather only the moved slots)
    rng = np.random.default_rng(8)
    piv = lu_like(rng, m, k)
    a = cp.random.default_rng(4).standard_normal((m, n), dtype=cp.float32)
    ref = a.copy()
    src, dst = zip(*_laswp.net_moves(piv, inverse=inverse))
    ref[cp.asarray(dst)] = a[cp.asarray(src)]
    _laswp.laswp_inplace(a, cp.asarray(piv), inverse)
    assert bool(cp.array_equal(a, ref))


@pytest.mark.gpu
def test_laswp_ptr_chunks_and_sm_count(cp, rng):
    """laswp_ptr with more than KMAX pivots (launches applied in order) and an explicit SM
    count (a smaller grid: each block walks more strips) gives the sequential result."""
    m, n, k = 1500, 3001, 1100
    a = rng.standard_normal((m, n), dtype=np.float32)
    piv = make_piv("dependent", m, k, rng)
    for inverse in (False, True):
        ref = _laswp.laswp_reference(a.copy(), piv, inverse)
        d = cp.asarray(a)
        p = cp.asarray(piv)
        _laswp.laswp_ptr(n, d.data.ptr, n, k, p.data.ptr, 0, inverse, sms=3)
        np.testing.assert_array_equal(d.get(), ref)


@pytest.mark.gpu
def test_public_errors_on_gpu_leave_a_unchanged(cp, rng):
    a = rng.standard_normal((20, 8), dtype=np.float32)
    d = cp.asarray(a)
    for x, piv, exc in ((d, cp.asarray([0, 20]), ValueError),
                        (d, cp.asarray([1.0]), TypeError),
                        (d.astype(cp.float64), [1], TypeError),
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
        gpulinalg.laswp(t.double(), piv)
