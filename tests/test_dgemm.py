"""FP64 tensor-core DGEMM (gemm/dmma.py, kernels/dgemm.cu): tile table, pick and the kernel's
data path (CPU); the kernel against NumPy float64 with a scaled error bound (GPU)."""

import inspect

import numpy as np
import pytest

from gpulinalg import tuning
from gpulinalg.core.element import F64
from gpulinalg.gemm import dispatch, dmma, simt

SMS = 132          # the H100/H200's SM count: the picks tested on the CPU
EPS = F64.eps      # 2.2e-16


# ---------------------------------------------------------------- CPU: table, names, picks

def test_variants_and_names():
    """Every variant's tile divides as the kernel's static_asserts demand, fits in shared
    memory, and has all its instantiations (majors x VEC) in KERNEL_NAMES."""
    assert len(set(dmma.KERNEL_NAMES)) == len(dmma.KERNEL_NAMES)
    for name, t in dmma.VARIANTS.items():
        threads = dmma.tile_threads(t)
        assert threads % 32 == 0 and threads <= 1024, name
        assert t.BK in (16, 32) and t.MK in (16, 8) and t.STAGES >= 3, name
        assert t.BM % t.WM == 0 and t.BN % t.WN == 0 and t.WM % 16 == 0 and t.WN % 16 == 0
        for rows in (t.BM, t.BN):
            assert (rows * t.BK) % (2 * threads) == 0, "loader passes cover the slice"
            # K-major: whole rows per pass, 4 | STEP (the row swizzle); MN-major: whole k-rows
            assert threads % (t.BK // 2) == 0 and (threads // (t.BK // 2)) % 4 == 0
            assert threads % (rows // 2) == 0
        assert dmma.dynamic_smem(t) <= 227 * 1024, name
        for am in (True, False):
            for bn in (True, False):
                for vec in (True, False):
                    assert dmma._kernel_name(t, am, bn, vec) in dmma.KERNEL_NAMES
    assert len(dmma.KERNEL_NAMES) == 8 * len(dmma.VARIANTS)


def test_tuning_fields_name_variants():
    for table in (tuning.SM90_F64, tuning.DEFAULT_F64):
        assert table.dtype == "float64"
        assert table.dmma_variant in dmma.VARIANTS
        assert table.dmma_small_variant in dmma.VARIANTS
        assert table.dmma_update_variant in dmma.VARIANTS


def test_pick_variant():
    table = tuning.SM90_F64
    pick = lambda m, n, k: dmma.pick_variant(m, n, k, sms=SMS, table=table)
    for m, n, k in [(1, 1, 1), (1, 100000, 5), (16384, 16384, 64), (8192, 8192, 8192),
                    (4096, 64, 4096), (97, 131, 0)]:
        assert pick(m, n, k) in dmma.VARIANTS
    big = dmma.VARIANTS[table.dmma_variant]
    # rank-k updates (k <= 512) of a large C: the update tile; longer k: the large tile
    for k in (64, 128, 256, 512):
        assert pick(16384, 16384, k) == table.dmma_update_variant
    assert pick(16384, 16384, 513) == table.dmma_variant
    assert pick(4096, 4096, 4096) == table.dmma_variant
    # the small tile while the large one leaves more than half the SMs idle
    assert pick(big.BM, big.BN * (SMS // 2 - 1), 256) == table.dmma_small_variant
    assert pick(big.BM, big.BN * (SMS // 2), 256) == table.dmma_update_variant
    assert pick(big.BM, big.BN * (SMS // 2), 1024) == table.dmma_variant
    assert pick(1, 1, 1) == table.dmma_small_variant


def test_by_pointer_entry_matches_simt():
    """The LU's steps call gemm_ptr_for(F64) with simt.gemm_ptr's arguments."""
    assert dispatch.gemm_ptr_for(F64) is dmma.gemm_ptr
    ours = inspect.signature(dmma.gemm_ptr).parameters
    theirs = inspect.signature(simt.gemm_ptr).parameters
    assert list(ours) == list(theirs)
    assert all(ours[p].default == theirs[p].default for p in ours)


def test_rejects_other_dtypes():
    a = np.ones((3, 3), np.float32)
    with pytest.raises(TypeError, match="float64"):
        dmma.gemm_into(1.0, a, a, 0.0, a)


# ---------------------------------------------------------------- CPU: the kernel's data path
# A model of kernels/dgemm.cu's index arithmetic (DgLoader, DgFrag, the fragment layouts of
# the header): copies -> swizzled shared memory -> fragments -> mma -> accumulator tiles.

def loader_slots(rows, bk, threads, km):
    """(shared-memory offset, operand row, k) of every double DgLoader copies of one slice."""
    cpr = bk // 2 if km else rows // 2
    step, passes = threads // cpr, rows * bk // 2 // threads
    tid = np.arange(threads)
    r, c = tid // cpr, tid % cpr
    out = []
    for l in range(passes):
        for q in range(2):
            if km:
                off = r * bk + ((c ^ (r & 3)) << 1) + l * step * bk + q
                out.append((off, r + l * step, 2 * c + q))
            else:
                k = r + l * step
                off = k * rows + ((2 * c) ^ ((((k >> 2) & 3) << 1) << 1)) + q
                out.append((off, 2 * c + q, k))
    return [np.concatenate(x) for x in zip(*out)]


def frag_offset(rows, bk, km, base, g, t, u, j, kb):
    """The offset DgFrag::load reads: row base + 8u + g, logical k t + 4j of block kb."""
    if km:
        off = ((base + g) * bk + 2 * ((2 * t) ^ (g & 3)) + (t & 1)) ^ j
        return off + 8 * u * bk + kb
    e, p = u & 1, j & 1
    off = (4 * t + (t & 1) * (1 - 2 * p)) * rows + ((base + 4 * ((g >> 2) ^ t) + (g & 3))
                                                    ^ (8 * e))
    return off + j * rows + 16 * (u >> 1) + kb * rows


LANE = np.arange(32)
G, T = LANE >> 2, LANE & 3


@pytest.mark.parametrize("variant", sorted(dmma.VARIANTS))
@pytest.mark.parametrize("a_km,b_nm", [(True, True), (True, False), (False, True),
                                       (False, False)])
def test_data_path_model_reproduces_the_product(variant, a_km, b_nm):
    """Each shared-memory slot is written once, and the fragments read back (PTX layouts:
    A a_i = (g + 8(i%2), t + 4(i/2)), B b_i = (t + 4i, g), C c_i = (g + 8(i/2), 2t + i%2))
    multiply to each warp's tile of A @ B for one slice."""
    tl = dmma.VARIANTS[variant]
    bm, bn, bk, wm, wn = tl.BM, tl.BN, tl.BK, tl.WM, tl.WN
    threads = dmma.tile_threads(tl)
    rng = np.random.default_rng(3)
    A = rng.integers(-8, 8, (bm, bk)).astype(np.float64)
    Bt = rng.integers(-8, 8, (bn, bk)).astype(np.float64)       # B^T: N x K
    smem = {}
    for name, X, rows, km in (("a", A, bm, a_km), ("b", Bt, bn, not b_nm)):
        off, r, k = loader_slots(rows, bk, threads, km)
        assert np.array_equal(np.sort(off), np.arange(rows * bk)), "each slot written once"
        buf = np.empty(rows * bk)
        buf[off] = X[r, k]
        smem[name] = buf
    for warp in range(threads // 32):
        wm0, wn0 = (warp // (bn // wn)) * wm, (warp % (bn // wn)) * wn
        acc = np.zeros((wm, wn))
        for kb in range(0, bk, 16):
            # logical operand tiles assembled from every lane's registers
            Al = np.zeros((wm, 16))
            Bl = np.zeros((16, wn))
            for j in range(4):
                for u in range(wm // 8):
                    Al[8 * u + G, T + 4 * j] = smem["a"][
                        frag_offset(bm, bk, a_km, wm0, G, T, u, j, kb)]
                for u in range(wn // 8):
                    Bl[T + 4 * j, 8 * u + G] = smem["b"][
                        frag_offset(bn, bk, not b_nm, wn0, G, T, u, j, kb)]
            for i in range(wm // 16):
                for n in range(wn // 8):
                    D = Al[16 * i:16 * i + 16] @ Bl[:, 8 * n:8 * n + 8]
                    for q in range(4):     # lane's c_q, written back to its tile position
                        rr, cc = G + 8 * (q // 2), 2 * T + q % 2
                        acc[16 * i + rr, 8 * n + cc] += D[rr, cc]
        np.testing.assert_array_equal(acc, A[wm0:wm0 + wm] @ Bt[wn0:wn0 + wn].T)


def ring_events(stages, kb_per_slice, mt, ktiles):
    """dgemm_mma's main loop in program order (every warp runs the same): ("copy", slice,
    buffer), ("commit",), ("wait", n) (cp.async.wait_group n), ("bar",), ("read", slice,
    buffer) (fragment reads)."""
    ev = []
    for s in range(stages - 1):
        if s < ktiles:
            ev.append(("copy", s, s))
        ev.append(("commit",))
    rd = 0
    if ktiles > 0:
        ev += [("wait", stages - 2), ("bar",), ("read", 0, 0)]
    for kt in range(ktiles):
        nx = (rd + 1) % stages
        for kb in range(kb_per_slice):
            for i in range(mt):
                if i + 1 == mt and kb + 1 == kb_per_slice:
                    ev += [("wait", stages - 3), ("bar",)]
                    if mt > 1:
                        ev.append(("read", kt, rd))
                    if kt + stages - 1 < ktiles:
                        ev.append(("copy", kt + stages - 1, (rd - 1) % stages))
                    ev.append(("commit",))
                if i + 1 < mt and not (i + 2 == mt and kb + 1 == kb_per_slice):
                    ev.append(("read", kt, rd))
            if kb + 1 < kb_per_slice:
                ev.append(("read", kt, rd))
            elif kt + 1 < ktiles:
                ev.append(("read", kt + 1, nx))
        rd = nx
    return ev


@pytest.mark.parametrize("variant", sorted(dmma.VARIANTS))
@pytest.mark.parametrize("ktiles", [0, 1, 2, 3, 4, 5, 9])
def test_ring_schedule_has_no_races(variant, ktiles):
    """Each fragment read finds its slice in the buffer, landed (a wait_group covering its
    copy, then a barrier, before the read) and not yet overwritten (a copy into a buffer is
    issued only after a barrier that follows every read of its previous slice: warps are at
    most one barrier apart)."""
    tl = dmma.VARIANTS[variant]
    ev = ring_events(tl.STAGES, tl.BK // 16, tl.WM // 16, ktiles)
    interval = 0                 # barriers passed
    groups, open_copies = [], []  # committed groups (lists of slices); copies not yet committed
    landed_at = {}               # slice -> interval in which its wait happened
    content, last_read = {}, {}  # buffer -> slice; buffer -> interval of its last read
    read = set()
    for e in ev:
        if e[0] == "copy":
            _, sl, buf = e
            assert last_read.get(buf, -1) < interval, f"slice {sl} overwrites a buffer in use"
            content[buf] = sl
            open_copies.append(sl)
        elif e[0] == "commit":
            groups.append(open_copies)
            open_copies = []
        elif e[0] == "wait":
            for grp in groups[:max(len(groups) - e[1], 0)]:
                for sl in grp:
                    landed_at.setdefault(sl, interval)
        elif e[0] == "bar":
            interval += 1
        else:
            _, sl, buf = e
            assert content.get(buf) == sl, f"slice {sl} not in buffer {buf}"
            assert landed_at.get(sl, interval) < interval, f"slice {sl} read before it landed"
            last_read[buf] = interval
            read.add(sl)
    assert read == set(range(ktiles))


def _wavefronts(offs, width):
    """Shared-memory wavefronts of one warp access of `width` doubles per lane at double
    offsets `offs` (32 banks of 4 bytes; 16-byte accesses served a quarter warp at a time,
    8-byte ones a half warp)."""
    per_phase = {1: 16, 2: 8}[width]
    total = 0
    for p in range(0, 32, per_phase):
        banks = {}
        for o in offs[p:p + per_phase]:
            for w in range(2 * width):
                word = 2 * int(o) + w
                banks.setdefault(word % 32, set()).add(word // 32)
        total += max(len(v) for v in banks.values())
    return total


@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("bk", [16, 32])
def test_fragment_reads_and_copies_are_bank_conflict_free(rows, bk):
    for km in (True, False):
        for base in range(0, rows, 32):
            for kb in range(0, bk, 16):
                for u in range(4):
                    for j in range(4):
                        offs = frag_offset(rows, bk, km, base, G, T, u, j, kb)
                        assert _wavefronts(offs, 1) == 2, (km, base, kb, u, j)
        for threads in (128, 256):   # 16-byte cp.async writes of each warp: 4 wavefronts
            off = loader_slots(rows, bk, threads, km)[0]
            per_pass = len(off) // 2    # the q = 0 halves: one chunk start per thread
            starts = np.concatenate([off[i:i + threads] for i in range(0, len(off), 2 * threads)])
            assert len(starts) == per_pass
            for w in range(0, len(starts), 32):
                assert _wavefronts(starts[w:w + 32], 2) == 4


# ---------------------------------------------------------------- GPU: the kernel

def ref_and_scale(a, b, alpha, beta, c0):
    """(alpha a b + beta c0, |alpha| |a| |b| + |beta| |c0|) in float64 NumPy."""
    ref = alpha * (a @ b) + (beta * c0 if beta != 0.0 else 0.0)
    scale = abs(alpha) * (np.abs(a) @ np.abs(b)) + (abs(beta) * np.abs(c0) if beta else 0.0)
    return ref, scale


def check(c, a, b, alpha=1.0, beta=0.0, c0=None):
    """c holds alpha a b + beta c0 within (k + 2) eps of its scale, element by element (FP64
    tensor cores are IEEE fp64 FMAs: the bound a dot product of length k meets), every
    element written and finite."""
    c = np.asarray(c)
    k = a.shape[1]
    ref, scale = ref_and_scale(a, b, alpha, beta, c0)
    assert np.isfinite(c).all(), "unwritten (NaN-poisoned) or non-finite elements"
    err = np.abs(c - ref) / ((k + 2) * EPS * scale + 1e-300)
    worst = np.unravel_index(err.argmax(), err.shape)
    assert err.max() <= 1.0, f"scaled error {err.max():.3g} at {worst}"


def rand(rng, shape):
    """Standard normal float64, never zero."""
    x = rng.standard_normal(shape)
    x[x == 0] = 1.0
    return x


SIZES = [(1, 1, 1), (1, 200, 3), (200, 1, 4), (63, 65, 5), (64, 64, 64), (65, 63, 0),
         (127, 129, 128), (128, 128, 1), (129, 127, 129), (97, 257, 131), (131, 97, 1000),
         (257, 255, 513), (256, 129, 127)]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(dmma.VARIANTS))
@pytest.mark.parametrize("shape", SIZES)
def test_edges_every_variant(cp, rng, variant, shape):
    """Tile edges +- 1, primes, k = 0 .. 1000: beta = 0 over a NaN-poisoned C (never read,
    every element written)."""
    m, n, k = shape
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    c = cp.full((m, n), cp.nan)
    dmma.gemm_into(1.0, cp.asarray(a), cp.asarray(b), 0.0, c, variant=variant)
    out = cp.asnumpy(c)
    if k == 0:
        assert (out == 0).all()
    check(out, a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("orders", ["CCC", "FCC", "CFC", "FFC", "CCF", "FCF", "CFF", "FFF"])
@pytest.mark.parametrize("vec", [True, False])
def test_memory_orders_alpha_beta(cp, rng, orders, vec):
    """All four operand majors, row- and column-major C, 16-byte and 8-byte paths (odd
    leading dimensions and misaligned starts), alpha/beta incl. beta = 0 over NaN."""
    m, n, k = (132, 76, 44) if vec else (131, 77, 45)

    def put(x, order):
        if vec:
            return cp.asarray(np.asarray(x, order=order))
        # one element of slack: odd leading dimension and an 8-byte aligned start
        rows, cols = x.shape
        if order == "C":
            buf = cp.empty((rows, cols + 1))
            v = buf[:, 1:]
        else:
            buf = cp.empty((cols, rows + 1))
            v = buf[:, 1:].T
        v[...] = cp.asarray(x)
        return v

    a, b, c0 = rand(rng, (m, k)), rand(rng, (k, n)), rand(rng, (m, n))
    A, B = put(a, orders[0]), put(b, orders[1])
    for alpha, beta in [(1.0, 0.0), (-1.0, 1.0), (1.5, -0.5), (0.25, 2.0)]:
        C = put(np.full((m, n), np.nan) if beta == 0.0 else c0, orders[2])
        dmma.gemm_into(alpha, A, B, beta, C)
        check(cp.asnumpy(C), a, b, alpha, beta, c0)


@pytest.mark.gpu
def test_k_zero_scales_c(cp, rng):
    c0 = rand(rng, (70, 90))
    a, b = cp.empty((70, 0)), cp.empty((0, 90))
    c = cp.asarray(c0)
    dmma.gemm_into(1.0, a, b, -2.0, c)
    assert (cp.asnumpy(c) == -2.0 * c0).all()
    c = cp.full((70, 90), cp.nan)
    dmma.gemm_into(1.0, a, b, 0.0, c)
    assert (cp.asnumpy(c) == 0.0).all()
    assert dmma.gemm_into(1.0, cp.empty((0, 5)), cp.empty((5, 3)), 0.0, cp.empty((0, 3))).size == 0


@pytest.mark.gpu
def test_strided_views_in_place(cp, rng):
    big = cp.asarray(rand(rng, (300, 400)))
    keep = big.copy()
    a = big[10:110, 5:70]           # row-major view, ld = 400
    b = big.T[20:85, 100:237]       # column-major view
    c = big[150:250, 201:338]       # output block of the same matrix, ld = 400, odd start
    an, bn, cn = (cp.asnumpy(x) for x in (a, b, c))
    dmma.gemm_into(1.0, a.copy(), b.copy(), 1.0, c)
    check(cp.asnumpy(c), an, bn, 1.0, 1.0, cn)
    outside = cp.ones(big.shape, dtype=bool)
    outside[150:250, 201:338] = False
    assert bool((big[outside] == keep[outside]).all())   # nothing else written
    odd = big[::2, ::3][:50, :40]    # no unit stride: copied once, still right
    r = cp.full((50, 50), cp.nan)
    dmma.gemm_into(1.0, odd, odd.T, 0.0, r)
    o = cp.asnumpy(odd)
    check(cp.asnumpy(r), o, o.T)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(dmma.VARIANTS))
def test_gemm_ptr_rank_k_update(cp, rng, variant):
    """The LU's trailing update by pointer: C -= A B on blocks of one row-major matrix (A
    K-major, B N-major), with the other blocks untouched; also A M-major from a transposed
    copy."""
    n, k, off = 300, 67, 37
    big = cp.asarray(rand(rng, (n, n)))
    keep = cp.asnumpy(big)
    m2, n2 = n - off - k, n - off - k
    a_view = big[off + k:, off:off + k]            # m2 x k
    b_view = big[off:off + k, off + k:]            # k x n2
    c_view = big[off + k:, off + k:]               # m2 x n2
    ptr = lambda v: v.data.ptr
    dmma.gemm_ptr(m2, n2, k, -1.0, ptr(a_view), n, True, ptr(b_view), n, True, 1.0,
                  ptr(c_view), n, variant=variant)
    a, b, c0 = keep[off + k:, off:off + k], keep[off:off + k, off + k:], keep[off + k:, off + k:]
    out = cp.asnumpy(big)
    check(out[off + k:, off + k:], a, b, -1.0, 1.0, c0)
    mask = np.ones_like(out, dtype=bool)
    mask[off + k:, off + k:] = False
    assert (out[mask] == keep[mask]).all()
    # A M-major (its transpose stored row-major), beta 0 over NaN, split=1 accepted
    at = cp.asarray(np.ascontiguousarray(a.T))      # k x m2: A[i, kk] at at[kk, i]
    c = cp.full((m2, n2 + 3), cp.nan)
    dmma.gemm_ptr(m2, n2, k, 2.0, ptr(at), m2, False, ptr(b_view), n, True, 0.0, ptr(c),
                  n2 + 3, variant=variant, split=1)
    check(cp.asnumpy(c)[:, :n2], a, b, 2.0)
    assert np.isnan(cp.asnumpy(c)[:, n2:]).all()
    with pytest.raises(ValueError, match="split"):
        dmma.gemm_ptr(m2, n2, k, 1.0, ptr(at), m2, False, ptr(b_view), n, True, 0.0, ptr(c),
                      n2 + 3, split=2)


@pytest.mark.gpu
def test_large_and_deterministic(cp, rng):
    """A square product at the default tile: within the bound, and bit-identical on a rerun
    (no atomics, fixed order)."""
    a, b = rand(rng, (1000, 1031)), rand(rng, (1031, 997))
    A, B = cp.asarray(a), cp.asarray(b)
    c1, c2 = cp.full((1000, 997), cp.nan), cp.full((1000, 997), cp.nan)
    dmma.gemm_into(1.0, A, B, 0.0, c1)
    dmma.gemm_into(1.0, A, B, 0.0, c2)
    r1 = cp.asnumpy(c1)
    check(r1, a, b)
    assert (r1 == cp.asnumpy(c2)).all()
    # normwise, as the benchmark reports it: ~1e-16, far below FP32's 1e-7
    ref = a @ b
    assert np.abs(r1 - ref).max() / np.abs(ref).max() < 1e-14


@pytest.mark.gpu
def test_argument_errors(cp):
    a = cp.ones((4, 3))
    with pytest.raises(ValueError, match="do not match"):
        dmma.gemm_into(1.0, a, a, 0.0, cp.empty((4, 4)))
    with pytest.raises(ValueError, match="unit stride"):
        dmma.gemm_into(1.0, a, a.T, 0.0, cp.empty((8, 8))[::2, ::2])
    with pytest.raises(TypeError, match="float64"):
        dmma.gemm_into(1.0, a, a.T, 0.0, cp.empty((4, 4), cp.float32))


@pytest.mark.gpu
def test_current_stream(cp, rng):
    a = cp.asarray(rand(rng, (300, 200)))
    b = cp.asarray(rand(rng, (200, 100)))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = cp.full((300, 100), cp.nan)
        dmma.gemm_into(1.0, a, b, 0.0, c)
        r = cp.asnumpy(c, stream=s)
    s.synchronize()
    check(r, cp.asnumpy(a), cp.asnumpy(b))
