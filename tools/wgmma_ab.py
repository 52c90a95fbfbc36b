"""A/B of the wgmma SGEMM main kernel against another version of kernels/sgemm_wgmma.cu, with
cuBLAS SGEMM and our SIMT pick in the same bursts (common.time_burst: candidates take turns
in shuffled rounds).  Rank-k updates C -= A B (m = n = --mn, k from --rankk) and square
products C = A B (--square).  Per shape: TF/s of cuBLAS, SIMT, the public 3xTF32 call (split
pre-pass included), its main kernel alone and the baseline's main kernel alone on the same
split workspace, the split pre-pass's time, and the public call's error against float64
beside cuBLAS's.  --queued: device time only (common.time_burst's stream-holding kernel).

    git show REV:kernels/sgemm_wgmma.cu > ab_old_wgmma.cu
    python3 tools/wgmma_ab.py --baseline ab_old_wgmma.cu --rankk 64,128,256 --square 4096

(The first wgmma kernel, kept as the baseline of the progression, is in benchmarks/baselines/.)
"""
import argparse
import pathlib
import sys

import cupy as cp

from gpulinalg.bench import common
from gpulinalg.bench.sgemm import cublas_gemm
from gpulinalg.core import device
from gpulinalg.core import kernels as _kernels
from gpulinalg.gemm import dispatch, simt
from gpulinalg.gemm import wgmma as wg
from gpulinalg.gemm.common import row_major_problem


def baseline_main(path, variant, mode, m, n, k, alpha, wa, wb, beta, c, ldc, operands):
    """The main kernel of the sgemm_wgmma.cu at `path` on a split workspace; older files
    take a trailing VEC template argument (C 8-byte aligned with an even ldc) and no
    original operands.  path@tiles: one block per tile even for a persistent variant."""
    path, _, grid_kind = path.partition("@")
    t = wg.VARIANTS[variant]
    name = wg._kernel_name(t, mode)
    src = pathlib.Path(path).read_text()
    if "bool SPLIT, bool VEC>" in src:
        vec = c.data.ptr % 8 == 0 and ldc % 2 == 0
        name = name.rsplit(",", 1)[0] + f",{str(vec).lower()}>"
    elif t.PIPE == "tma" and "bool SPLIT, bool PERSIST>" not in src:
        name = name.rsplit(",", 1)[0] + ">"   # before PERSIST: one block per tile
    mod = cp.RawModule(code=src, name_expressions=[name],
                       options=("--std=c++17", _kernels.arch_option(specific=True),
                                f"-I{_kernels.kernel_dir()}"))
    smem = wg.dynamic_smem(t, mode)
    kernel = mod.get_function(name)
    kernel.max_dynamic_shared_size_bytes = smem
    grid = (-(-m // t.BM) * -(-n // t.BN),)
    if t.PIPE == "tma" and t.PERSIST and "bool PERSIST>" in src and grid_kind != "tiles":
        grid = (min(grid[0], device.sm_count()),)
    ktiles = -(-k // t.BK)
    args = (cp.int32(m), cp.int32(n), cp.int32(ktiles), cp.float32(alpha), wa, wb,
            cp.float32(beta), c, cp.int64(ldc))
    if "int layout)" in src:
        a, lda, akm, b, ldb, bnm = operands
        args += (a, cp.int64(lda), b, cp.int64(ldb), cp.int32(k), cp.int32(int(akm) | 2 * int(bnm)))
    return lambda: kernel(grid, (wg.tile_threads(t),), args, shared_mem=smem)


def case(title, m, n, k, update, args):
    a = common.random_matrix((m, k), 0)
    b = common.random_matrix((k, n), 1)
    c0 = common.random_matrix((m, n), 2) if update else None
    alpha, beta = (-1.0, 1.0) if update else (1.0, 0.0)
    c = c0.copy() if update else cp.empty((m, n), dtype=cp.float32)
    prob = row_major_problem(alpha, a, b, beta, c)
    m_, n_, k_, al, a_, lda, akm, b_, ldb, bnm, be, c_, ldc = prob
    v = wg.pick_variant(m_, n_, k_, "3xtf32")
    work, wa, wb = wg.split_operands(v, "3xtf32", m_, n_, k_, a_, lda, akm, b_, ldb, bnm)
    fns = {"cublas": lambda: cublas_gemm(cp, a, b, c, alpha, beta),
           "simt": lambda: simt.gemm_into(alpha, a, b, beta, c, stage_a=True),
           "3xtf32": lambda: dispatch.product_into(alpha, a, b, beta, c, "3xtf32"),
           "main": lambda: wg.multiply(v, "3xtf32", m_, n_, k_, al, wa, wb, be, c_, ldc, prob[4:10]),
           "split": lambda: wg.split_operands(v, "3xtf32", m_, n_, k_, a_, lda, akm, b_, ldb, bnm)}
    other = args.also if args.also and args.also != v else None
    if other:   # another variant of this file, on a workspace split for it
        wo_ = wg.split_operands(other, "3xtf32", m_, n_, k_, a_, lda, akm, b_, ldb, bnm)
        fns[f"main_{other}"] = lambda: wg.multiply(other, "3xtf32", m_, n_, k_, al, wo_[1], wo_[2],
                                                   be, c_, ldc, prob[4:10])
    for i, path in enumerate(args.baseline.split(",") if args.baseline else []):
        fns[f"main_old{i or ''}"] = baseline_main(path, v, "3xtf32", m_, n_, k_, al, wa, wb, be,
                                                  c_, ldc, prob[4:10])
    ms = common.time_burst(fns, repeat=args.repeat, calls=3, queued=args.queued)
    flops = 2.0 * m * n * k
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    if update:
        ref = c0.astype(cp.float64) - ref
    errs = {}
    for key in ("cublas", "3xtf32", "main_old"):
        if key not in fns:
            continue
        out = c0.copy() if update else cp.full((m, n), cp.nan, dtype=cp.float32)
        if key == "main_old":   # the baseline on this output, from a fresh split
            wo = wg.split_operands(v, "3xtf32", m_, n_, k_, a_, lda, akm, b_, ldb, bnm)
            baseline_main(args.baseline.split(",")[0], v, "3xtf32", m_, n_, k_, al, wo[1], wo[2], be,
                          out, ldc, prob[4:10])()
        elif key == "cublas":
            cublas_gemm(cp, a, b, out, alpha, beta)
        else:
            dispatch.product_into(alpha, a, b, beta, out, "3xtf32")
        errs[key] = float(cp.linalg.norm(out.astype(cp.float64) - ref) / cp.linalg.norm(ref))
    tf = {key: flops / t / 1e9 for key, t in ms.items() if key != "split"}
    print(f"{title:22} {v:9} " + "  ".join(f"{key} {tf[key]:6.1f}" for key in tf)
          + f"  split {1e3 * ms['split']:.1f} us"
          + f"  | 3xtf32/cuBLAS {ms['cublas'] / ms['3xtf32']:.3f}"
          + "".join(f"  err {key} {e:.2e}" for key, e in errs.items()), flush=True)
    del work
    ref = wa = wb = None
    cp.get_default_memory_pool().free_all_blocks()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", help="other kernels/sgemm_wgmma.cu files (comma-separated; "
                                      "FILE@tiles: one block per tile) to time beside this one")
    p.add_argument("--mn", type=int, default=16384)
    p.add_argument("--rankk", default="64,128,256,512")
    p.add_argument("--square", default="2048,4096,8192")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--also", help="another variant of this file's main kernel to time")
    p.add_argument("--queued", action="store_true",
                   help="device time only: bursts enqueued behind a stream-holding kernel")
    args = p.parse_args(argv)
    env = common.environment()
    print(f"# {env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}; TF/s", flush=True)
    for k in [int(x) for x in args.rankk.split(",") if x]:
        case(f"C-=AB {args.mn}^2 k={k}", args.mn, args.mn, k, True, args)
    for n in [int(x) for x in args.square.split(",") if x]:
        case(f"C=AB {n}^3", n, n, n, False, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
