"""Tensor-core SGEMM (3xTF32 / TF32): a NumPy model of the kernel's data path and of the split
(CPU), and the kernel against float64 and against the SIMT SGEMM (GPU)."""

import numpy as np
import pytest

from gemm_helpers import check_current_stream, check_edges_and_accuracy, orders_problem, rel_err, simt_err
from gpulinalg import tuning
from gpulinalg.gemm import mma



# ---------------------------------------------------------------- CPU: the split, in NumPy

def tf32_rna(x):
    """cvt.rna.tf32.f32: round float32 to 10 explicit mantissa bits, ties away from zero."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32)  # add half an ulp of tf32, truncate
    return u.view(np.float32)


def tc_product(a, b, mode):
    """Model of the kernel's sum: exact products of the TF32 parts, summed in float64 (the
    tensor cores' own accumulation error is left out: this checks the split alone)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ab, bb = tf32_rna(a), tf32_rna(b)
    big = ab.astype(np.float64) @ bb.astype(np.float64)
    if mode == "tf32":
        return big
    as_ = tf32_rna(a - ab).astype(np.float64)
    bs_ = tf32_rna(b - bb).astype(np.float64)
    return as_ @ bb.astype(np.float64) + ab.astype(np.float64) @ bs_ + big


def test_tf32_rounding_model():
    x = np.array([1.0, 1.0 + 2**-11, 1.0 + 2**-10 + 2**-11, -(1.0 + 2**-11), 3.0e-39, 0.0],
                 np.float32)
    r = tf32_rna(x)
    assert r[0] == 1.0
    assert r[1] == 1.0 + 2**-10                     # a tie rounds away from zero
    assert r[2] == 1.0 + 2**-9
    assert r[3] == -(1.0 + 2**-10)
    assert (r.view(np.uint32) & 0x1FFF == 0).all()  # 13 low bits cleared
    assert r[5] == 0.0
    rng = np.random.default_rng(0)
    y = rng.standard_normal(10000).astype(np.float32)
    assert np.abs(tf32_rna(y) / y - 1).max() <= 2**-11


def test_split_recovers_fp32_accuracy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 512)).astype(np.float32)
    b = rng.standard_normal((512, 48)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    e3 = rel_err(tc_product(a, b, "3xtf32"), ref)
    e1 = rel_err(tc_product(a, b, "tf32"), ref)
    fp32 = rel_err(a @ b, ref)                  # float32 BLAS on the host
    assert e3 < 2**-21                          # the dropped small*small term and the split
    assert e3 < fp32                            # representation error alone: below fp32 sums
    assert e1 > 100 * e3                        # one TF32 product: ~2^-11 per element
    # wide dynamic range: rows of a and columns of b scaled by 2^-20 .. 2^20
    sa = np.exp2(rng.integers(-20, 21, 64)).astype(np.float32)[:, None]
    sb = np.exp2(rng.integers(-20, 21, 48)).astype(np.float32)[None, :]
    a2, b2 = a * sa, b * sb
    ref2 = a2.astype(np.float64) @ b2.astype(np.float64)
    assert rel_err(tc_product(a2, b2, "3xtf32"), ref2) < 2**-21


def _rz32(x):
    """float64 -> float32 rounded toward zero (the tensor cores' accumulation, as modelled)."""
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def _tc_rz_model(a, b, split_acc):
    """3xTF32 with each m16n8k8 mma modelled as D = RZ(C + exact 8-term sum); split_acc: each
    32-k slice accumulated from zero and added to the sum in FP32 round-to-nearest."""
    ab, bb = tf32_rna(a), tf32_rna(b)
    as_, bs_ = tf32_rna(a - ab), tf32_rna(b - bb)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    part = np.zeros_like(acc)
    for k0 in range(0, a.shape[1], 8):
        for x, y in ((as_, bb), (ab, bs_), (ab, bb)):   # small products first
            s = x[:, k0:k0 + 8].astype(np.float64) @ y[k0:k0 + 8].astype(np.float64)
            if split_acc:
                part = _rz32(part.astype(np.float64) + s)
            else:
                acc = _rz32(acc.astype(np.float64) + s)
        if split_acc and (k0 + 8) % 32 == 0:
            acc, part = acc + part, np.zeros_like(part)
    return acc + part if split_acc else acc


def test_split_accumulation_model():
    """Why SPLIT_ACC: with truncating accumulation inside the mma the error grows with k;
    accumulating 32-k slices from zero and adding them with RN stays at the FP32 level."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 32)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    acc = np.zeros((32, 32), np.float32)
    for k in range(1024):                     # the SIMT kernel: one FMA per k, in order
        acc = (acc.astype(np.float64) + np.outer(a[:, k], b[k])).astype(np.float32)
    simt = rel_err(acc, ref)
    assert rel_err(_tc_rz_model(a, b, True), ref) <= 1.5 * simt
    assert rel_err(_tc_rz_model(a, b, False), ref) > 3 * simt


# ---------------------------------------------------------------- CPU: the kernel's data path

def kswz(r):
    return ((r & 1) << 2) | ((r >> 1) & 3)


def mnswz(k):
    return ((k >> 2) & 3) << 1


def loader_positions(rows, bk, threads, km):
    """(shared-memory offset, operand row, k) of every float the TcLoader copies of one slice,
    in the order (pass, thread, q): a model of TcLoader's constructor + issue()."""
    cpr = bk // 4 if km else rows // 4
    step = threads // cpr
    passes = rows * bk // 4 // threads
    out = []
    for l in range(passes):
        for tid in range(threads):
            r, c = tid // cpr, tid % cpr
            for q in range(4):
                if km:
                    soff = r * bk + ((c ^ kswz(r)) << 2)
                    out.append((soff + l * step * bk + q, r + l * step, 4 * c + q))
                else:
                    k = r + l * step
                    out.append((k * rows + ((c << 2) ^ (mnswz(k) << 2)) + q, 4 * c + q, k))
    return out


def fragment_offsets(base, rows, km, t, g, kb, q, j):
    """Shared-memory offset the kernel reads for row base + 8q + g, k = kb + 4t + j."""
    if km:
        koff0 = (base + g) * 32 + ((t ^ kswz(g)) << 2)
        return (koff0 ^ (16 if kb == 16 else 0)) + 256 * q + j
    moff = 4 * t * rows + base + g + 8 * ((q % 4) ^ t)
    return (kb + j) * rows + 32 * (q // 4) + moff


@pytest.mark.parametrize("variant", sorted(mma.VARIANTS))
@pytest.mark.parametrize("a_km,b_nm", [(True, True), (True, False), (False, True), (False, False)])
def test_data_path_model_reproduces_the_product(variant, a_km, b_nm):
    """Copies -> swizzled shared memory -> fragments -> m16n8k8 (PTX fragment layouts) gives
    the warp tiles of A @ B for one k-slice, and every shared-memory slot is written once."""
    t_ = mma.VARIANTS[variant]
    BM, BN, BK, WM, WN = t_.BM, t_.BN, t_.BK, t_.WM, t_.WN
    threads = mma.tile_threads(t_)
    rng = np.random.default_rng(2)
    A = rng.integers(-8, 8, (BM, BK)).astype(np.float64)
    Bt = rng.integers(-8, 8, (BN, BK)).astype(np.float64)      # B^T: N x K
    smem = {}
    for name, X, rows, km in (("a", A, BM, a_km), ("b", Bt, BN, not b_nm)):
        buf = np.full(rows * BK, np.nan)
        pos = loader_positions(rows, BK, threads, km)
        offs = [p[0] for p in pos]
        assert sorted(offs) == list(range(rows * BK)), "each slot written exactly once"
        for off, r, k in pos:
            buf[off] = X[r, k]
        smem[name] = buf
    warps_n = BN // WN
    for warp in range(threads // 32):
        wm0, wn0 = (warp // warps_n) * WM, (warp % warps_n) * WN
        acc = np.zeros((WM, WN))
        for kb in (0, 16):
            fa = np.zeros((32, WM // 16, 2, 4))
            fb = np.zeros((32, WN // 8, 4))
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for i in range(WM // 16):
                    for h in range(2):
                        for j in range(4):
                            fa[lane, i, h, j] = smem["a"][fragment_offsets(
                                wm0, BM, a_km, t, g, kb, 2 * i + h, j)]
                for n in range(WN // 8):
                    for j in range(4):
                        fb[lane, n, j] = smem["b"][fragment_offsets(
                            wn0, BN, not b_nm, t, g, kb, n, j)]
            for s in range(2):
                for i in range(WM // 16):
                    for n in range(WN // 8):
                        # assemble the 16x8 A and 8x8 B operands from the lanes' registers
                        Am, Bm = np.zeros((16, 8)), np.zeros((8, 8))
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            a = (fa[lane, i, 0, 2 * s], fa[lane, i, 1, 2 * s],
                                 fa[lane, i, 0, 2 * s + 1], fa[lane, i, 1, 2 * s + 1])
                            Am[g, t], Am[g + 8, t], Am[g, t + 4], Am[g + 8, t + 4] = a
                            Bm[t, g], Bm[t + 4, g] = fb[lane, n, 2 * s], fb[lane, n, 2 * s + 1]
                        D = Am @ Bm
                        # C fragment: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            for q, (rr, cc) in enumerate(((g, 2 * t), (g, 2 * t + 1),
                                                          (g + 8, 2 * t), (g + 8, 2 * t + 1))):
                                acc[16 * i + rr, 8 * n + cc] += D[rr, cc]
        want = A[wm0:wm0 + WM] @ Bt[wn0:wn0 + WN].T
        np.testing.assert_array_equal(acc, want)


def _wavefronts(addrs, width):
    """Shared-memory wavefronts of one warp access of `width` floats per lane (bank model:
    32 banks of 4 bytes; 16-byte accesses are served a quarter warp at a time, 8-byte ones
    a half warp, 4-byte ones the whole warp)."""
    per_phase = {1: 32, 2: 16, 4: 8}[width]
    total = 0
    for p in range(0, 32, per_phase):
        banks = {}
        for a in addrs[p:p + per_phase]:
            for w in range(width):
                banks.setdefault((a + w) % 32, set()).add((a + w) // 32)
        total += max(len(v) for v in banks.values())
    return total


@pytest.mark.parametrize("rows", [64, 128])
def test_fragment_reads_and_copies_are_bank_conflict_free(rows):
    for base in (0, 32, 64):
        if base + 32 > rows:
            continue
        for kb in (0, 16):
            for q in range(4):
                # K-major: one float4 per lane, 4 wavefronts (the minimum for 512 bytes)
                addrs = [fragment_offsets(base, rows, True, l % 4, l // 4, kb, q, 0)
                         for l in range(32)]
                assert _wavefronts(addrs, 4) == 4
                # MN-major: one word per lane, 1 wavefront
                for j in range(4):
                    addrs = [fragment_offsets(base, rows, False, l % 4, l // 4, kb, q, j)
                             for l in range(32)]
                    assert _wavefronts(addrs, 1) == 1
    for km in (True, False):  # 16-byte cp.async writes of each warp: 4 wavefronts
        pos = loader_positions(rows, 32, 256, km)[::4]
        for w in range(0, len(pos), 32):
            assert _wavefronts([p[0] for p in pos[w:w + 32]], 4) == 4


def test_variants_and_names():
    for t in mma.VARIANTS.values():
        assert t.BK == 32 and t.BM % t.WM == 0 and t.BN % t.WN == 0
        assert mma.tile_threads(t) % 32 == 0
        assert mma.dynamic_smem(t) <= 227 * 1024
    assert set(mma.MODES) == {"3xtf32", "tf32"}
    assert len(set(mma.KERNEL_NAMES)) == len(mma.KERNEL_NAMES)
    table = tuning.SM90
    for m, n, k in [(1, 1, 1), (8192, 8192, 8192), (300, 100000, 5)]:
        for mode in mma.MODES:
            assert mma.pick_variant(m, n, k, mode, sms=132, table=table) in mma.VARIANTS
    for i, mode in enumerate(mma.MODES):
        assert table.mma_variant[i] in mma.VARIANTS
        assert mma.VARIANTS[table.mma_variant[i]].SPLIT or mode == "tf32"
        # the 64-row tile while 128 x 128 tiles leave half the SMs idle (66 on 132)
        assert mma.pick_variant(128, 8320, 64, mode, sms=132, table=table) == \
            table.mma_small_variant
        assert mma.pick_variant(128, 8448, 64, mode, sms=132, table=table) == \
            table.mma_variant[i]
    with pytest.raises(ValueError, match="mode"):
        mma.pick_variant(8, 8, 8, "fp16", sms=132, table=table)


# ---------------------------------------------------------------- GPU: the kernel

SIZES = [(0, 5, 3), (5, 0, 3), (4, 5, 0), (1, 1, 1), (15, 16, 17), (16, 15, 16), (17, 17, 15),
         (127, 129, 128), (128, 128, 128), (129, 127, 129), (97, 1031, 61), (257, 255, 513),
         (131, 67, 1), (64, 64, 33)]




def _tc(cp, a, b, mode, variant=None, alpha=1.0, beta=0.0, c=None):
    if c is None:
        c = cp.full((a.shape[0], b.shape[1]), np.nan, dtype=np.float32)
    mma.gemm_tc_into(alpha, cp.asarray(a), cp.asarray(b), beta, c, mode=mode,
                          variant=variant)
    return c


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(mma.VARIANTS))
@pytest.mark.parametrize("mode", mma.MODES)
@pytest.mark.parametrize("shape", SIZES)
def test_edges_and_accuracy(cp, rng, variant, mode, shape):
    if mode == "3xtf32" and not mma.VARIANTS[variant].SPLIT:
        with pytest.raises(ValueError, match="SPLIT_ACC"):
            _tc(cp, np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), mode, variant)
        return
    check_edges_and_accuracy(cp, rng, shape, mode,
                             lambda a, b: _tc(cp, a, b, mode, variant))  # NaN-poisoned c, beta = 0


@pytest.mark.gpu
@pytest.mark.parametrize("mode", mma.MODES)
@pytest.mark.parametrize("orders", ["CCC", "FCC", "CFC", "FFC", "CCF", "FCF", "CFF", "FFF"])
@pytest.mark.parametrize("vec", [True, False])
def test_memory_orders_alpha_beta(cp, rng, mode, orders, vec):
    A, B, C, ref = orders_problem(cp, rng, orders, vec)
    mma.gemm_tc_into(1.5, A, B, -0.5, C, mode=mode)
    assert rel_err(cp.asnumpy(C), ref) < (1e-5 if mode == "3xtf32" else 3e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", mma.MODES)
def test_strided_views_in_place(cp, rng, mode):
    big = cp.asarray(rng.standard_normal((300, 400), dtype=np.float32))
    keep = big.copy()
    a = big[10:110, 5:70]           # row-major view, ld = 400
    b = big.T[20:85, 100:237]       # column-major view
    c = big[150:250, 200:337]       # output block of the same matrix, ld = 400
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b) + cp.asnumpy(c)
    mma.gemm_tc_into(1.0, a.copy(), b.copy(), 1.0, c, mode=mode)
    assert rel_err(cp.asnumpy(c), ref) < (1e-5 if mode == "3xtf32" else 3e-3)
    outside = cp.ones(big.shape, dtype=bool)
    outside[150:250, 200:337] = False
    assert bool((big[outside] == keep[outside]).all())  # nothing else written
    odd = big[::2, ::3][:50, :40]    # no unit stride: copied once, still right
    r = cp.empty((50, 50), dtype=cp.float32)
    mma.gemm_tc_into(1.0, odd, odd.T, 0.0, r, mode=mode)
    o = cp.asnumpy(odd).astype(np.float64)
    assert rel_err(cp.asnumpy(r), o @ o.T) < (1e-5 if mode == "3xtf32" else 3e-3)


@pytest.mark.gpu
def test_argument_errors(cp):
    a = cp.ones((4, 3), dtype=cp.float32)
    with pytest.raises(ValueError, match="mode"):
        mma.gemm_tc_into(1.0, a, a.T, 0.0, cp.empty((4, 4), cp.float32), mode="fp16")
    with pytest.raises(ValueError, match="do not match"):
        mma.gemm_tc_into(1.0, a, a, 0.0, cp.empty((4, 4), cp.float32))
    with pytest.raises(ValueError, match="unit stride"):
        mma.gemm_tc_into(1.0, a, a.T, 0.0, cp.empty((8, 8), cp.float32)[::2, ::2])


def _accuracy_case(cp, rng, m, n, k, wide):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    if wide:  # rows of a and columns of b scaled by 2^-20 .. 2^20
        a *= np.exp2(rng.integers(-20, 21, m)).astype(np.float32)[:, None]
        b *= np.exp2(rng.integers(-20, 21, n)).astype(np.float32)[None, :]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    simt = simt_err(cp, a, b, ref)
    e3 = rel_err(cp.asnumpy(_tc(cp, a, b, "3xtf32")), ref)
    e1 = rel_err(cp.asnumpy(_tc(cp, a, b, "tf32")), ref)
    return simt, e3, e1


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,wide", [(512, 512, 512, False), (1024, 1024, 2048, False),
                                        (512, 512, 1024, True), (256, 256, 16384, False),
                                        (256, 256, 16384, True)])
def test_accuracy_against_simt(cp, rng, m, n, k, wide):
    """The issue's acceptance: 3xTF32 within 1.5x the SIMT SGEMM's error on N(0,1), wide
    dynamic range and k = 16384; plain TF32 at least 10x worse (the split does the work)."""
    simt, e3, e1 = _accuracy_case(cp, rng, m, n, k, wide)
    assert e3 <= 1.5 * simt, (simt, e3, e1)
    assert e1 >= 10 * e3, (simt, e3, e1)


@pytest.mark.gpu
def test_current_stream(cp, rng):
    check_current_stream(cp, rng, mma.gemm_tc_into)
