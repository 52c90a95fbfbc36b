"""Sweep of the wgmma SGEMM variants (tuning aid): per square size and variant, the full call
(pre-pass included), the pre-pass alone (GB/s against a device-to-device copy of the same
bytes) and the main kernel alone, cuBLAS SGEMM in the same run, errors against float64.

    python3 tools/wgmma_sweep.py [--sizes 4096,8192,16384] [--variants a,b] [--json F]
"""
import argparse
import json
import statistics
import sys

import cupy as cp

from gpulinalg.bench.common import time_gpu
from gpulinalg.gemm import simt
from gpulinalg.gemm import wgmma as wg
from gpulinalg.gemm.common import row_major_problem


def median_ms(fn, warmup=2, repeat=7):
    """Median ms of fn() between CUDA events (gpulinalg.bench.common.time_gpu)."""
    return time_gpu(fn, warmup=warmup, repeat=repeat)


def rel_err(c, ref):
    return float(cp.linalg.norm(c.astype(cp.float64) - ref) / cp.linalg.norm(ref))


def trace(reps, row, a, b, c, prob, flops):
    """Single-call times of the default 3xtf32 path, then of split + main reusing one
    preallocated workspace (no memory pool), each printed in order."""
    m_, n_, k_, alpha, a_, lda, akm, b_, ldb, bnm, beta, c_, ldc = prob
    v = wg.pick_variant(m_, n_, k_, "3xtf32")
    t = wg.VARIANTS[v]
    kt = -(-k_ // t.BK)
    full = [median_ms(lambda: wg.gemm_wgmma_into(1.0, a, b, 0.0, c, variant=v), 0, 1)
            for _ in range(reps)]
    work, wa, wb = wg.split_operands(v, "3xtf32", m_, n_, k_, a_, lda, akm, b_, ldb, bnm)

    def pre():
        wg._split(a_, lda, akm, m_, k_, t.BM, kt, "3xtf32", wa)
        wg._split(b_, ldb, not bnm, n_, k_, t.BN, kt, "3xtf32", wb)
        wg.multiply(v, "3xtf32", m_, n_, k_, alpha, wa, wb, beta, c_, ldc,
                    (a_, lda, akm, b_, ldb, bnm))
    fixed = [median_ms(pre, 0, 1) for _ in range(reps)]
    for name, ts in (("full", full), ("prealloc", fixed)):
        print(f"  trace {v} {name}: median {flops / statistics.median(ts) / 1e9:.1f} TF/s, "
              f"ms " + " ".join(f"{x:.2f}" for x in ts), flush=True)
    row["trace"] = {"full_ms": full, "prealloc_ms": fixed}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", default="2048,4096,8192,16384")
    p.add_argument("--variants", default=",".join(
        v for v, t in wg.VARIANTS.items() if wg.stages(t, "3xtf32")))
    p.add_argument("--tf32-variants", default=",".join(
        v for v, t in wg.VARIANTS.items() if wg.stages(t, "tf32")))
    p.add_argument("--err-max", type=int, default=8192, help="largest size with errors")
    p.add_argument("--trace", type=int, default=0,
                   help="also time this many single 3xtf32 calls of the default variant per "
                        "size, and split + main on a preallocated workspace")
    p.add_argument("--json")
    args = p.parse_args(argv)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(f"# {props['name'].decode()} sm_{dev.compute_capability}, "
          f"CuPy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}", flush=True)
    rows = []
    # copy bandwidth: 1 GiB read + 1 GiB written
    src = cp.ones(1 << 28, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = median_ms(lambda: cp.copyto(dst, src))
    copy_gbs = 2 * src.nbytes / ms / 1e6
    print(f"copy: {copy_gbs:.0f} GB/s (read + write)", flush=True)
    src = dst = None  # free the 2 GiB
    gen = cp.random.default_rng(0)
    for n in [int(x) for x in args.sizes.split(",")]:
        a = gen.standard_normal((n, n), dtype=cp.float32)
        b = gen.standard_normal((n, n), dtype=cp.float32)
        c = cp.empty((n, n), dtype=cp.float32)
        flops = 2.0 * n ** 3
        cub_ms = median_ms(lambda: cp.matmul(a, b, out=c))
        cub = flops / cub_ms / 1e9
        row = {"n": n, "cublas_ms": cub_ms, "cublas_tflops": cub}
        ref = None
        if n <= args.err_max:
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            cp.matmul(a, b, out=c)
            row["cublas_err"] = rel_err(c, ref)
            c[...] = cp.nan
            simt.gemm_into(1.0, a, b, 0.0, c)
            row["simt_err"] = rel_err(c, ref)
        print(f"n={n}: cuBLAS {cub:.1f} TF/s ({cub_ms:.2f} ms)"
              + (f", err {row['cublas_err']:.2e}, SIMT err {row['simt_err']:.2e}" if ref is not None else ""),
              flush=True)
        prob = row_major_problem(1.0, a, b, 0.0, c)
        m_, n_, k_, alpha, a_, lda, akm, b_, ldb, bnm, beta, c_, ldc = prob
        for mode, names in (("3xtf32", args.variants), ("tf32", args.tf32_variants)):
            for v in [x for x in names.split(",") if x]:
                try:
                    full = median_ms(lambda: wg.gemm_wgmma_into(1.0, a, b, 0.0, c, mode=mode, variant=v))
                    split = median_ms(lambda: wg.split_operands(v, mode, m_, n_, k_, a_, lda, akm,
                                                                b_, ldb, bnm))
                    work, wa, wb = wg.split_operands(v, mode, m_, n_, k_, a_, lda, akm, b_, ldb, bnm)
                    main_ms = median_ms(lambda: wg.multiply(v, mode, m_, n_, k_, alpha, wa, wb,
                                                            beta, c_, ldc, prob[4:10]))
                    moved = 4.0 * (a.size + b.size) + 4.0 * work.size
                    r = {"mode": mode, "variant": v, "full_ms": full, "split_ms": split,
                         "main_ms": main_ms, "full_tflops": flops / full / 1e9,
                         "main_tflops": flops / main_ms / 1e9, "ratio": cub_ms / full,
                         "main_ratio": cub_ms / main_ms,
                         "split_gbs": moved / split / 1e6, "split_of_copy": moved / split / 1e6 / copy_gbs}
                    work = wa = wb = None
                    if ref is not None:
                        c[...] = cp.nan
                        wg.gemm_wgmma_into(1.0, a, b, 0.0, c, mode=mode, variant=v)
                        r["err"] = rel_err(c, ref)
                        r["err_vs_simt"] = r["err"] / row["simt_err"]
                    print(f"  {mode:6} {v:11} full {r['full_tflops']:6.1f} TF/s ({r['ratio']:.3f}x)"
                          f"  main {r['main_tflops']:6.1f} ({r['main_ratio']:.3f}x)"
                          f"  split {split:6.2f} ms {r['split_gbs']:5.0f} GB/s ({r['split_of_copy']:.2f} of copy)"
                          + (f"  err {r['err']:.2e} ({r['err_vs_simt']:.2f} SIMT)" if "err" in r else ""),
                          flush=True)
                except Exception as e:  # report and go on with the next variant
                    r = {"mode": mode, "variant": v, "error": repr(e)[:300]}
                    print(f"  {mode:6} {v:11} FAILED {r['error']}", flush=True)
                row[f"{mode}:{v}"] = r
        del ref
        if args.trace:
            trace(args.trace, row, a, b, c, prob, flops)
        rows.append(row)
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props["name"].decode(), "copy_gbs": copy_gbs, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
