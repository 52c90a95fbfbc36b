"""SGEMM: API validation, tile picks and dispatch (CPU); the kernels against float64 NumPy
(GPU)."""

import ast
import dataclasses
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

import gpulinalg
from gemm_helpers import orders_problem
from gpulinalg import tuning
from gpulinalg.bench import sgemm as bench_sgemm
from gpulinalg.core import arrays as _arrays
from gpulinalg.core import kernels as _kernels
from gpulinalg.gemm import dispatch, simt

SM90, SMS = tuning.SM90, 132   # the H100's table and SM count: the picks tested on the CPU


def rel_err(c, ref):
    return np.linalg.norm(np.asarray(c, dtype=np.float64) - ref) / max(np.linalg.norm(ref), 1e-300)


# ---------------------------------------------------------------- CPU: validation, layouts

def test_import_and_public_names():
    for name in ("sgemm", "matmul", "CudaUnavailableError"):
        assert hasattr(gpulinalg, name)
    from gpulinalg import blas
    assert gpulinalg.sgemm is blas.sgemm and gpulinalg.matmul is blas.matmul
    for name in ("PRECISIONS", "check_precision", "resolve_precision", "product_into",
                 "gemm_ptr", "gemm_into", "pick_variant"):
        assert hasattr(dispatch, name)


def _imports(path):
    """Modules a source file imports (relative ones as written: '.simt', '..core')."""
    names = set()
    for node in ast.walk(ast.parse(pathlib.Path(path).read_text())):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names |= {base} if node.module else {base + a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_gemm_kernel_modules_import_no_sibling():
    """simt, mma and wgmma share gemm/common.py and import neither each other nor dispatch
    (dispatch imports them); gemm/ and layout/ import no lu/ and layout/ no gemm/."""
    root = pathlib.Path(gpulinalg.__file__).parent
    for name in ("simt", "mma", "wgmma", "common"):
        imports = _imports(root / "gemm" / f"{name}.py")
        assert not imports & {".simt", ".mma", ".wgmma", ".dispatch"} - {f".{name}"}, name
    for path in list((root / "gemm").glob("*.py")) + list((root / "layout").glob("*.py")):
        for imp in _imports(path):
            assert not imp.startswith(("..lu", "gpulinalg.lu", "..testing")), (path, imp)
            if path.parent.name == "layout":
                assert not imp.startswith(("..gemm", ".gemm", "gpulinalg.gemm")), (path, imp)


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the no-GPU error")
def test_clear_error_without_gpu():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(gpulinalg.CudaUnavailableError, match="GPU|CUDA|CuPy"):
        gpulinalg.matmul(a, a)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32, np.int64])
def test_rejects_lossy_dtypes(dtype):
    a = np.ones((3, 3), dtype)
    with pytest.raises(TypeError, match="float32"):
        gpulinalg.sgemm(1.0, a, a)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.longdouble, object])
def test_dgemm_and_matmul_reject_what_they_cannot_compute(dtype):
    a = np.ones((3, 3)).astype(dtype)
    if a.dtype == np.float64:
        pytest.skip("long double is double on this platform")
    with pytest.raises(TypeError):
        gpulinalg.dgemm(1.0, a, a)
    with pytest.raises(TypeError):
        gpulinalg.matmul(a, a)


def test_matmul_precision_follows_the_dtype():
    a = np.ones((3, 3))
    with pytest.raises(ValueError, match="FP64"):
        gpulinalg.matmul(a, a, precision="3xtf32")
    with pytest.raises(ValueError, match="precision"):
        gpulinalg.matmul(a.astype(np.float32), a.astype(np.float32), precision="fp64")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int16, np.uint8, np.bool_])
def test_dtype_policy_accepts_exact_upcasts(dtype):
    _arrays.check_dtype(np.dtype(dtype), "a")


def test_shape_and_argument_errors():
    a, b = np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match="inner"):
        gpulinalg.sgemm(1.0, a, b)
    with pytest.raises(ValueError, match="aligned"):
        gpulinalg.matmul(a, b)
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.matmul(np.ones(3, np.float32), a)
    with pytest.raises(ValueError, match="2-D"):
        gpulinalg.sgemm(1.0, np.ones((2, 2, 2), np.float32), a)
    with pytest.raises(ValueError, match="c has shape"):
        gpulinalg.sgemm(1.0, a, a, beta=1.0, c=np.ones((4, 4), np.float32), trans_b=True)
    with pytest.raises(ValueError, match="trans_a"):
        gpulinalg.sgemm(1.0, a, a, trans_a=3)
    with pytest.raises(TypeError, match="real"):
        gpulinalg.sgemm(1j, a, a.T)
    with pytest.raises(ValueError, match="out has shape"):
        gpulinalg.matmul(a, a.T, out=np.empty((4, 4), np.float32))
    with pytest.raises(TypeError, match="out must be float32"):
        gpulinalg.matmul(a, a.T, out=np.empty((3, 3), np.float64))


def test_matrix_layout_classifies_strides():
    base = np.zeros((10, 12), np.float32)
    assert _arrays.matrix_layout(base) == (12, True)
    assert _arrays.matrix_layout(np.asfortranarray(base)) == (10, False)
    assert _arrays.matrix_layout(base[2:7, 3:9]) == (12, True)     # block view: ld = 12
    assert _arrays.matrix_layout(base.T[1:5, :]) == (12, False)    # transposed view
    assert _arrays.matrix_layout(base[::2, ::3]) is None           # no unit stride: copy
    assert _arrays.matrix_layout(base[::-1]) is None               # negative stride: copy
    assert _arrays.matrix_layout(np.broadcast_to(base[:1], (10, 12))) is None
    assert _arrays.matrix_layout(base[:1, ::2]) == (2, False)      # one row: column-major, ld 2
    assert _arrays.matrix_layout(base[:, :1]) == (12, True)


def test_every_variant_divides_its_tile():
    for t in simt.VARIANTS.values():
        threads = simt.tile_threads(t)
        assert threads % 32 == 0 and threads <= 1024
        assert (t.BM * t.BK) % (4 * threads) == 0 and (t.BN * t.BK) % (4 * threads) == 0
    assert SM90.simt_split_variant in simt.VARIANTS
    assert simt.VARIANTS[SM90.simt_split_variant].KIND == "dbuf"
    for m, n, k in [(1, 1, 1), (16384, 16384, 64), (300, 100000, 5), (8192, 8192, 8192)]:
        for beta in (0.0, 1.0):
            assert simt.pick_variant(m, n, k, beta, sms=SMS, table=SM90) in simt.VARIANTS
    assert len(set(simt.KERNEL_NAMES)) == len(simt.KERNEL_NAMES)


def test_pick_variant_follows_k_and_the_major_of_a():
    pick = lambda *a, **kw: simt.pick_variant(*a, **kw, sms=SMS, table=SM90)
    chosen = lambda *a, **kw: simt.chosen_variant(*a, **kw, sms=SMS, table=SM90)
    # the LU's rank-k updates: short k stages C in shared memory (pipe128), also k = 128 when
    # A is M-contiguous (its cp.async copies need no transposing); longer k: dbuf128
    assert pick(16384, 16384, 64, 1.0) == "pipe128"
    assert pick(16384, 16384, 128, 1.0) == "dbuf128"
    assert pick(16384, 16384, 128, 1.0, a_kmajor=False) == "pipe128"
    assert pick(16384, 16384, 256, 1.0, a_kmajor=False) == "dbuf128"
    assert pick(16384, 16384, 64, 0.0) == "dbuf128"   # no C to read
    assert pick(8192, 8192, 8192) == "dbuf256x128"
    assert pick(2048, 2048, 2048) == "dbuf256x128"   # 128 tiles, 132 SMs
    assert pick(2048, 2048, 256, 1.0) == "dbuf128"    # short k: not the big tile
    a = np.empty((4096, 128), np.float32)          # row-major: K-contiguous
    c = np.empty((4096, 4096), np.float32)
    assert chosen(a, a.T, 1.0, c) == "dbuf128"
    assert chosen(np.asfortranarray(a), a.T, 1.0, c) == "pipe128"
    # a column-major C is computed as C^T = B^T A^T: B's major decides (row-major B: its
    # transpose, the new A, is M-contiguous)
    assert chosen(a, a.T, 1.0, c.T) == "dbuf128"
    assert chosen(a, np.asfortranarray(a).T, 1.0, c.T) == "pipe128"
    assert chosen(np.zeros((8, 0), np.float32), np.zeros((0, 0), np.float32),
                                1.0, np.zeros((8, 0), np.float32)) is None
    # the public sgemm stages a K-contiguous A (transposes it first) where the M-contiguous
    # A gets the faster tile, and only there
    assert chosen(a, a.T, 1.0, c, stage_a=True) == "pipe128 (A staged)"
    assert chosen(np.asfortranarray(a), a.T, 1.0, c, stage_a=True) == "pipe128"
    assert chosen(a, a.T, 0.0, c, stage_a=True) == "dbuf128"     # beta = 0
    assert chosen(a, a.T, 1.0, c.T, stage_a=True) == "dbuf128"   # C col-major
    wide = np.empty((4096, 256), np.float32)
    assert chosen(wide, wide.T, 1.0, c, stage_a=True) == "dbuf128"   # k = 256
    short = np.empty((4096, 64), np.float32)   # pipe128 either way: staged for its copies
    assert chosen(short, short.T, 1.0, c) == "pipe128"
    assert chosen(short, short.T, 1.0, c, stage_a=True) == "pipe128 (A staged)"
    small = np.empty((512, 64), np.float32)    # one wave of tiles: not worth a launch
    assert chosen(small, small.T, 1.0, c[:512, :512], stage_a=True) == \
        pick(512, 512, 64, 1.0)


def test_picks_read_the_tuning_table_in_force():
    """An experiment replaces a field of the table (gpulinalg.tuning.override) instead of a
    module constant; explicit tables and SM counts are honoured."""
    assert simt.pick_variant(16384, 16384, 128, 1.0, a_kmajor=False, sms=SMS) == "pipe128"
    with tuning.override(dataclasses.replace(tuning.current(), simt_pipe_max_k_mmajor=0)):
        assert simt.pick_variant(16384, 16384, 128, 1.0, a_kmajor=False, sms=SMS) == "dbuf128"
    no_split = dataclasses.replace(SM90, simt_split_max=1)
    assert simt.pick_split(1024, 1024, 1024, sms=SMS, table=no_split) == 1
    # 2048^2 is 128 tiles of 256 x 128: the big tile on 132 SMs (0.97 of a wave), not on 150
    assert simt.pick_variant(2048, 2048, 2048, sms=132, table=SM90) == "dbuf256x128"
    assert simt.pick_variant(2048, 2048, 2048, sms=150, table=SM90) == "dbuf128"


def test_pick_split_only_for_few_tiles_and_long_k():
    split = lambda *a: simt.pick_split(*a, sms=SMS, table=SM90)
    chosen = lambda *a: simt.chosen_variant(*a, sms=SMS, table=SM90)
    # the cost model's best power-of-two splits on 132 SMs
    assert split(1024, 1024, 1024) == 4              # 64 tiles of 128 x 128
    assert split(1280, 1280, 1280) == 2
    assert split(1024, 1024, 4096) == 4
    assert split(512, 512, 8192) == 16
    assert split(256, 256, 16384) == 64             # k / S >= simt_split_min_part
    assert split(2048, 2048, 2048) == 1             # 256 tiles: enough blocks
    assert split(16384, 16384, 16384) == 1
    assert split(1024, 1024, 256) == 1              # k too short to split
    assert split(64, 64, 1 << 20) == SM90.simt_split_max
    a = np.empty((1024, 1024), np.float32)
    assert chosen(a, a, 0.0, a) == f"{SM90.simt_split_variant} (k split 4)"
    assert chosen(a, a, 1.0, a.T) == f"{SM90.simt_split_variant} (k split 4)"
    big = np.empty((4096, 4096), np.float32)
    assert "split" not in chosen(big, big, 0.0, big)


# ---------------------------------------------------------------- GPU: the kernels

SHAPES = [(0, 5, 3), (5, 0, 3), (4, 5, 0), (1, 1, 1), (1, 300, 7), (300, 1, 7), (127, 129, 65),
          (128, 128, 128), (129, 127, 8), (97, 1031, 61), (257, 255, 513), (64, 64, 1)]


def _cublas_err(cp, a, b, ref):
    return rel_err(cp.asnumpy(cp.asarray(a) @ cp.asarray(b)), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(simt.VARIANTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_variants_edges_and_accuracy(cp, rng, variant, shape):
    m, n, k = shape
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = cp.full((m, n), np.nan, dtype=np.float32)  # poison: every element must be written
    simt.gemm_into(1.0, cp.asarray(a), cp.asarray(b), 0.0, c, variant=variant)
    out = cp.asnumpy(c)
    assert np.isfinite(out).all()
    if m * n and k:
        assert rel_err(out, ref) <= max(2 * _cublas_err(cp, a, b, ref), 2e-6)
    else:
        assert not out.any()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(simt.VARIANTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_variants_beta_update_edges(cp, rng, variant, shape):
    """C -= A B with beta = 1 (the LU's update) inside a NaN frame: every edge tile reads and
    writes exactly its own elements, whether beta*C comes from the tile the pipelined kernels
    stage in shared memory or from global memory."""
    m, n, k = shape
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c0 = rng.standard_normal((m, n), dtype=np.float32)
    ref = c0.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64)
    big = cp.full((m + 2, n + 3), np.nan, dtype=np.float32)   # NaN frame: nothing else written
    c = big[1:m + 1, 2:n + 2]
    c[...] = cp.asarray(c0)
    simt.gemm_into(-1.0, cp.asarray(a), cp.asarray(b), 1.0, c, variant=variant)
    assert rel_err(cp.asnumpy(c), ref) <= 2e-6 * max(1, np.sqrt(k))
    frame = cp.asnumpy(big).copy()
    frame[1:m + 1, 2:n + 2] = np.nan
    assert np.isnan(frame).all()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [v for v, t in simt.VARIANTS.items() if t.KIND == "dbuf"])
@pytest.mark.parametrize("split", [2, 3, 8])
@pytest.mark.parametrize("shape", [(1, 1, 513), (97, 131, 1000), (128, 256, 4096),
                                   (257, 65, 77), (3, 300, 9)])
@pytest.mark.parametrize("beta", [0.0, -0.5])
@pytest.mark.parametrize("orders", ["CCC", "FFC", "CCF"])
def test_split_k(cp, rng, variant, split, shape, beta, orders):
    """k in `split` parts (some short or empty when k is small), partials summed with beta*C:
    float64 accuracy class, every element written once, NaN C untouched by beta = 0."""
    m, n, k = shape
    order = lambda x, o: cp.asarray(x if o == "C" else np.asfortranarray(x))
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c0 = rng.standard_normal((m, n), dtype=np.float32)
    ref = 1.5 * (a.astype(np.float64) @ b) + beta * c0.astype(np.float64)
    # C inside a NaN frame with an odd leading dimension (the sum's scalar path): row-major,
    # or column-major (a block of a transposed buffer)
    big = cp.full((m + 2, n + 3) if orders[2] == "C" else (n + 3, m + 2), np.nan,
                  dtype=np.float32)
    c = big[1:m + 1, 2:n + 2] if orders[2] == "C" else big[2:n + 2, 1:m + 1].T
    c[...] = cp.asarray(c0) if beta else cp.nan
    simt.gemm_into(1.5, order(a, orders[0]), order(b, orders[1]), beta, c, variant=variant,
                    split=split)
    out = cp.asnumpy(c)
    assert np.isfinite(out).all()
    assert rel_err(out, ref) <= 2e-6 * max(1, np.sqrt(k))
    frame = cp.asnumpy(big).copy()
    if orders[2] == "C":
        frame[1:m + 1, 2:n + 2] = np.nan
    else:
        frame[2:n + 2, 1:m + 1] = np.nan
    assert np.isnan(frame).all()


@pytest.mark.gpu
def test_public_sgemm_splits_k(cp, rng):
    """The public path splits k where pick_split says so (1024^3: 4 parts), beta and all."""
    a, b, c0 = (rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(3))
    split_variant = tuning.current().simt_split_variant
    assert simt.chosen_variant(a, b, 0.5, c0) == f"{split_variant} (k split 4)"
    ab = a.astype(np.float64) @ b
    c = cp.asarray(c0)
    gpulinalg.sgemm(2.0, cp.asarray(a), cp.asarray(b), beta=0.5, c=c, overwrite_c=True)
    err = rel_err(cp.asnumpy(c), 2.0 * ab + 0.5 * c0)
    assert err <= max(2 * _cublas_err(cp, a, b, ab), 2e-6)
    with pytest.raises(ValueError, match="does not split"):
        simt.gemm_into(1.0, cp.asarray(a), cp.asarray(b), 0.0, c, variant="pipe128", split=2)


@pytest.mark.gpu
def test_split_k_is_deterministic_and_close_to_unsplit(cp, rng):
    a = cp.asarray(rng.standard_normal((512, 4096), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((4096, 384), dtype=np.float32))
    one, two, again = (cp.empty((512, 384), dtype=np.float32) for _ in range(3))
    simt.gemm_into(1.0, a, b, 0.0, one, variant="dbuf128", split=1)
    simt.gemm_into(1.0, a, b, 0.0, two, variant="dbuf128", split=4)
    simt.gemm_into(1.0, a, b, 0.0, again, variant="dbuf128", split=4)
    assert bool((two == again).all())
    assert float(cp.abs(one - two).max()) <= 1e-5 * float(cp.abs(one).max())


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 64, 127, 128])
@pytest.mark.parametrize("view", ["contiguous", "block", "strided"])
def test_public_rank_k_update_stages_a(cp, rng, k, view):
    """sgemm(-1, a, b, 1, c) with a K-contiguous a: transposed into a temporary and run with
    pipe128's M-contiguous copies (2 waves of 128 x 128 tiles); a is left as it was."""
    m, n = 2177, 2200
    big = cp.asarray(rng.standard_normal((m + 5, 2 * k + 3), dtype=np.float32))
    a = {"contiguous": big[:m, :k].copy(), "block": big[3:m + 3, 1:k + 1],
         "strided": big[:m, ::2][:, :k]}[view]
    keep = big.copy()
    b = cp.asarray(rng.standard_normal((k, n), dtype=np.float32))
    c = cp.asarray(rng.standard_normal((m, n), dtype=np.float32))
    assert simt.chosen_variant(a, b, 1.0, c, stage_a=True) == "pipe128 (A staged)"
    ref = cp.asnumpy(c).astype(np.float64) - cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b)
    got = gpulinalg.sgemm(-1.0, a, b, beta=1.0, c=c, overwrite_c=True, precision="fp32")
    assert got is c
    assert rel_err(cp.asnumpy(c), ref) <= 2e-6 * np.sqrt(k)
    assert bool((big == keep).all())


@pytest.mark.gpu
@pytest.mark.parametrize("variant", sorted(simt.VARIANTS))
@pytest.mark.parametrize("orders", ["CCC", "FCC", "CFC", "FFF", "CCF", "FCF"])
@pytest.mark.parametrize("vec", [True, False])
def test_memory_orders_and_alignment(cp, rng, variant, orders, vec):
    A, B, C, ref = orders_problem(cp, rng, orders, vec)
    simt.gemm_into(1.5, A, B, -0.5, C, variant=variant)
    assert rel_err(cp.asnumpy(C), ref) < 1e-5


@pytest.mark.gpu
def test_strided_views_in_place(cp, rng):
    big = cp.asarray(rng.standard_normal((300, 400), dtype=np.float32))
    keep = big.copy()
    a = big[10:110, 5:70]           # row-major view, ld = 400
    b = big.T[20:85, 100:237]       # column-major view
    c = big[150:250, 200:337]       # output block of the same matrix, ld = 400
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b) + cp.asnumpy(c)
    simt.gemm_into(1.0, a.copy(), b.copy(), 1.0, c)
    assert rel_err(cp.asnumpy(c), ref) < 1e-5
    outside = cp.ones(big.shape, dtype=bool)
    outside[150:250, 200:337] = False
    assert bool((big[outside] == keep[outside]).all())  # nothing else written
    odd = big[::2, ::3][:50, :40]    # no unit stride: copied once, still right
    r = gpulinalg.matmul(odd, odd.T)
    o = cp.asnumpy(odd).astype(np.float64)
    assert rel_err(cp.asnumpy(r), o @ o.T) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1), (2, 2)])
def test_sgemm_api_matches_scipy(cp, rng, ta, tb):
    from scipy.linalg.blas import sgemm as host_sgemm
    a = rng.standard_normal((45, 70) if ta else (70, 45), dtype=np.float32)
    b = rng.standard_normal((33, 45) if tb else (45, 33), dtype=np.float32)
    c = rng.standard_normal((70, 33), dtype=np.float32)
    want = host_sgemm(0.7, a, b, beta=0.3, c=c, trans_a=ta, trans_b=tb)
    got = gpulinalg.sgemm(0.7, a, b, beta=0.3, c=c, trans_a=ta, trans_b=tb)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    got_cp = gpulinalg.sgemm(0.7, cp.asarray(a), cp.asarray(b), 0.3, cp.asarray(c), ta, tb)
    assert isinstance(got_cp, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(got_cp), want, rtol=2e-5, atol=2e-5)


@pytest.mark.gpu
def test_beta_zero_never_reads_c_and_overwrite(cp, rng):
    a = cp.asarray(rng.standard_normal((40, 30), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((30, 20), dtype=np.float32))
    c = cp.full((40, 20), cp.nan, dtype=cp.float32)
    r = gpulinalg.sgemm(1.0, a, b, beta=0.0, c=c, overwrite_c=True)
    assert r is c and bool(cp.isfinite(c).all())
    c2 = cp.full((40, 20), 2.0, dtype=cp.float32)
    r2 = gpulinalg.sgemm(1.0, a, b, beta=1.0, c=c2)     # no overwrite: c2 untouched
    assert r2 is not c2 and bool((c2 == 2.0).all())
    np.testing.assert_allclose(cp.asnumpy(r2), cp.asnumpy(a @ b + 2.0), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_matmul_out_and_kinds(cp, rng):
    a = rng.standard_normal((65, 33), dtype=np.float32)
    b = rng.standard_normal((33, 17), dtype=np.float32)
    ref = a.astype(np.float64) @ b
    out = np.full((65, 17), np.nan, np.float32)
    assert gpulinalg.matmul(a, b, out=out) is out
    assert rel_err(out, ref) < 1e-5
    big = cp.full((140, 100), cp.nan, dtype=cp.float32)
    view = big[:130:2, 3:20]                                 # no unit stride: via a temporary
    gpulinalg.matmul(cp.asarray(a), cp.asarray(b), out=view)
    assert rel_err(cp.asnumpy(view), ref) < 1e-5
    half = gpulinalg.matmul(a.astype(np.float16), b.astype(np.float16))  # exact upcast
    assert half.dtype == np.float32


@pytest.mark.gpu
def test_torch_tensors_zero_copy_on_torch_stream(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    a = torch.randn(70, 50, device="cuda")
    b = torch.randn(50, 30, device="cuda")
    ref = (a.double() @ b.double()).cpu().numpy()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = gpulinalg.matmul(a, b)
        c = torch.full((70, 30), float("nan"), device="cuda")
        r2 = gpulinalg.sgemm(1.0, a.T, b, c=c, trans_a=True, overwrite_c=True)
    s.synchronize()
    assert isinstance(r, torch.Tensor) and r.is_cuda
    assert rel_err(r.cpu().numpy(), ref) < 1e-5
    assert r2 is c and rel_err(c.cpu().numpy(), ref) < 1e-5
    rc = gpulinalg.matmul(a.cpu(), b.cpu())               # CPU tensors: torch CPU out
    assert isinstance(rc, torch.Tensor) and not rc.is_cuda


needs_baselines = pytest.mark.skipif(bench_sgemm.baselines_dir() is None,
                                     reason="benchmarks/baselines: not a repository checkout")


@pytest.mark.gpu
@needs_baselines
def test_volkov_baseline(cp, rng):
    """The benchmark's baseline (benchmarks/baselines/sgemm_volkov2008.cu) still computes."""
    a = rng.standard_normal((128, 64), dtype=np.float32)
    b = rng.standard_normal((64, 192), dtype=np.float32)
    c = cp.full((128, 192), cp.nan, dtype=cp.float32)
    bench_sgemm.volkov2008(1.0, cp.asarray(a), cp.asarray(b), 0.0, c)
    assert rel_err(cp.asnumpy(c), a.astype(np.float64) @ b) < 1e-5
    with pytest.raises(ValueError):
        bench_sgemm.volkov2008(1.0, cp.asarray(a[:100]), cp.asarray(b), 0.0, c[:100])


@needs_baselines
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("file,name,after,arch", [
    ("sgemm_volkov2008.cu", "sgemm_volkov2008", None, "sm_90"),
    ("sgemm_wgmma_cpasync.cu", "sgemm_wgmma<128,256,128,2,2,true>", "sgemm_wgmma", "sm_90a")])
def test_baselines_compile(tmp_path, file, name, after, arch):
    """The benchmark's baselines compile as it compiles them (after the production source
    whose helpers they use) without register spills."""
    text = (bench_sgemm.baselines_dir() / file).read_text()
    assert text.startswith("//") and "bound" in text[:4000].lower()
    src = tmp_path / "baseline.cu"
    src.write_text((_kernels.source(after) + "\n" if after else "") + text +
                   f"\nstatic void* const instantiate[] = {{ (void*)&{name} }};\n")
    proc = subprocess.run([shutil.which("nvcc"), "-std=c++17", f"-arch={arch}", "-cubin",
                           "-Xptxas", "-v", "-o", str(tmp_path / "b.cubin"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores", proc.stderr)
    assert frames and not any(int(x) for f in frames for x in f), proc.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "3xtf32"])
def test_large_output_64bit_offsets(cp, precision):
    # 40000 x 60000 output: offsets past 2**31 elements exercise the 64-bit index arithmetic.
    m, n, k = 40000, 60000, 40
    gen = cp.random.default_rng(7)
    a = gen.standard_normal((m, k), dtype=cp.float32)
    b = gen.standard_normal((k, n), dtype=cp.float32)
    c = cp.full((m, n), cp.nan, dtype=cp.float32)
    dispatch.product_into(1.0, a, b, 0.0, c, precision)
    rows = cp.asarray([0, 1, m // 2, m - 2, m - 1])
    ref = cp.asnumpy(a[rows].astype(cp.float64) @ b.astype(cp.float64))
    assert rel_err(cp.asnumpy(c[rows]), ref) < 1e-5
    assert bool(cp.isfinite(c[-1]).all())
    # and an A view with ld = 60000: row offsets of A past 2**31 elements
    a2 = c[:, 17:57]
    c2 = cp.full((m, 64), cp.nan, dtype=cp.float32)
    dispatch.product_into(1.0, a2, b[:, :64], 0.0, c2, precision)
    ref2 = cp.asnumpy(a2[rows].astype(cp.float64) @ b[:, :64].astype(cp.float64))
    assert rel_err(cp.asnumpy(c2[rows]), ref2) < 1e-5


def test_precision_keyword_validated():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="precision"):
        gpulinalg.matmul(a, a, precision="fp16")
    with pytest.raises(ValueError, match="precision"):
        gpulinalg.sgemm(1.0, a, a, precision="bf16")


@pytest.mark.parametrize("wgmma", [True, False])
def test_auto_precision_rule(monkeypatch, wgmma):
    """"auto": 3xTF32 for k >= gemm_tc_min_k and m*n >= gemm_tc_min_mn or m*n*k >=
    gemm_tc_min_mnk where wgmma exists, else the SIMT kernel; explicit precisions pass
    through."""
    from gpulinalg.core import device
    monkeypatch.setattr(device, "has_wgmma", lambda device_id=None: wgmma)
    big, k, mnk = SM90.gemm_tc_min_mn, SM90.gemm_tc_min_k, SM90.gemm_tc_min_mnk
    tc = "3xtf32" if wgmma else "fp32"
    resolve = lambda *a: dispatch.resolve_precision(*a, table=SM90)
    assert resolve("auto", big, 1, k) == tc
    assert resolve("auto", big - 1, 1, k) == "fp32"
    assert mnk % 4000 == 0
    assert resolve("auto", 1, mnk // 4000, 4000) == tc
    assert resolve("auto", 1, mnk // 4000 - 1, 4000) == "fp32"
    assert resolve("auto", 16384, 16384, 64) == tc      # LU-like rank-k
    assert resolve("auto", 1536, 1536, 1536) == tc
    assert resolve("auto", 16384, 16384, k - 1) == "fp32"
    assert resolve("auto", 2048, 2048, 256) == "fp32"
    assert resolve("auto", 1024, 1024, 1024) == "fp32"
    for p in ("fp32", "3xtf32", "tf32"):
        assert resolve(p, 16384, 16384, 16384) == p
    assert "auto" in dispatch.PRECISIONS
    with tuning.override(dataclasses.replace(SM90, gemm_tc_min_k=1 << 30)):
        assert dispatch.resolve_precision("auto", 16384, 16384, 64) == "fp32"


@pytest.mark.gpu
def test_auto_precision_runs_the_rule(cp, rng):
    """The public default gives exactly the output of the precision the rule names."""
    for m, n, k in [(3100, 3100, 64), (3100, 3100, 63), (1300, 1300, 1300), (300, 200, 700)]:
        a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
        b = cp.asarray(rng.standard_normal((k, n), dtype=np.float32))
        want = cp.full((m, n), cp.nan, dtype=cp.float32)
        dispatch.product_into(1.0, a, b, 0.0, want, dispatch.resolve_precision("auto", m, n, k))
        assert bool((gpulinalg.matmul(a, b) == want).all())
        assert bool((gpulinalg.sgemm(1.0, a, b) == want).all())


@pytest.mark.gpu
def test_precision_modes_through_the_api(cp, rng):
    a = rng.standard_normal((300, 700), dtype=np.float32)
    b = rng.standard_normal((700, 200), dtype=np.float32)
    ref = a.astype(np.float64) @ b
    fp32 = rel_err(gpulinalg.matmul(a, b, precision="fp32"), ref)
    x3 = rel_err(gpulinalg.matmul(a, b, precision="3xtf32"), ref)
    tf32 = rel_err(gpulinalg.sgemm(1.0, a, b, precision="tf32"), ref)
    assert x3 <= 1.5 * fp32 + 1e-7
    assert tf32 > 10 * x3  # the split is what buys the accuracy
