"""Our FP64 tensor-core DGEMM (gpulinalg/gemm/dmma.py) beside cuBLAS DGEMM, in one run.

    python3 tools/dgemm_bench.py [--variants auto,128x128k32,128x64sb,...|all] [--json PATH]

Cases: C = A B for each --square size s (all s x s, row-major); and the LU's trailing update
C -= A B with A n x k row-major (K-contiguous), B k x n row-major, C n x n, for each k of --ks.
cuBLAS: `cupy.matmul` for C = A B, and for the update one fused call with alpha = -1, beta = 1
(`cupy.cublas.gemm('N', 'N', a, b, out=c, alpha=-1, beta=1)`), as the LU needs it; where this
CuPy has no `cupy.cublas.gemm` it times matmul into a temporary plus a subtraction, and the row
says so.  Ours runs `dmma.gemm_into` with each --variants entry ("auto": its own pick).  All
candidates of a case are timed in bursts that take turns round by round, in shuffled order
(gpulinalg.bench.common.time_burst: CUDA events, warm-up, median of --repeat rounds), inputs
random (standard normal, never zero).  Error: max |ours - cuBLAS| / max |cuBLAS| on the same
inputs (both FP64: ~1e-16).  Prints the device, CUDA and CuPy versions, a line per timing as
it goes and the table last; --json writes the rows and the environment.
"""

import argparse
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--square", default="4096,8192,16384", help="square sizes ('' for none)")
    p.add_argument("--n", type=int, default=16384, help="rank-k updates: n x n C")
    p.add_argument("--ks", default="64,128,256,512", help="rank-k updates' k ('' for none)")
    p.add_argument("--variants", default="auto",
                   help="our tiles to time, comma-separated: names of dmma.VARIANTS, 'auto' "
                        "(pick_variant's choice) or 'all' (auto and every variant)")
    p.add_argument("--repeat", type=int, default=10, help="timed rounds (median reported)")
    p.add_argument("--json", metavar="PATH", help="write the rows and the environment here")
    args = p.parse_args()

    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- one line saying why, as gpulinalg-bench does
        print(f"dgemm_bench: needs CuPy and an NVIDIA GPU ({type(exc).__name__}: {exc})")
        sys.exit(2)
    from gpulinalg.bench.common import (environment, parse_sizes, print_table, random_matrix,
                                        time_burst, write_json)
    from gpulinalg.gemm import dmma

    variants = args.variants.split(",")
    if variants == ["all"]:
        variants = ["auto", *dmma.VARIANTS]
    unknown = [v for v in variants if v != "auto" and v not in dmma.VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: auto, all, {', '.join(dmma.VARIANTS)}")
    try:
        import cupy.cublas as cublas
        fused = hasattr(cublas, "gemm")
    except ImportError:
        cublas, fused = None, False

    env = environment()
    print(f"{env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs); CUDA "
          f"runtime {env['cuda_runtime']}, driver {env['cuda_driver']}; CuPy {env['cupy']}; "
          f"{env['date']}", flush=True)
    rows = []

    def ours(variant, a, b, c, alpha, beta):
        v = None if variant == "auto" else variant
        return lambda: dmma.gemm_into(alpha, a, b, beta, c, variant=v)

    def vendor(a, b, c, alpha, beta):
        if beta == 0.0:
            return lambda: cp.matmul(a, b, out=c), "cupy.matmul"
        if fused:
            return (lambda: cublas.gemm("N", "N", a, b, out=c, alpha=alpha, beta=beta),
                    "cupy.cublas.gemm (fused alpha, beta)")
        return (lambda: c.__isub__(cp.matmul(a, b)),
                "cupy.matmul into a temporary, then c -= (no cupy.cublas.gemm)")

    def run_case(label, a, b, alpha, beta, c0=None):
        """Time every candidate on one product (C starts as c0, or uninitialised with beta =
        0); one row per variant of ours."""
        (m, k), n = a.shape, b.shape[1]
        flop = 2.0 * m * n * k
        calls = 1 if flop > 2e12 else 3
        fresh = (lambda: cp.empty((m, n))) if c0 is None else c0.copy
        c_ours, c_ref = fresh(), fresh()
        fn_vendor, how = vendor(a, b, c_ref, alpha, beta)
        fns = {"cuBLAS": fn_vendor}
        for v in variants:
            fns[v] = ours(v, a, b, c_ours, alpha, beta)
        ms = time_burst(fns, warmup=2, repeat=args.repeat, calls=calls)
        # error: one call of each on the same C
        if c0 is not None:
            c_ref[...] = c0
        fn_vendor()
        ref_max = float(cp.abs(c_ref).max())
        for v in variants:
            if c0 is not None:
                c_ours[...] = c0
            ours(v, a, b, c_ours, alpha, beta)()
            err = float(cp.abs(c_ours - c_ref).max()) / ref_max
            row = {"case": label, "m": m, "n": n, "k": k, "alpha": alpha, "beta": beta,
                   "variant": v if v != "auto" else f"auto={dmma.pick_variant(m, n, k)}",
                   "ours_ms": ms[v], "ours_tflops": flop / ms[v] / 1e9,
                   "cublas_ms": ms["cuBLAS"], "cublas_tflops": flop / ms["cuBLAS"] / 1e9,
                   "ratio": ms["cuBLAS"] / ms[v], "max_rel_err": err, "cublas_call": how}
            rows.append(row)
            print(f"  {label:<22} {row['variant']:<16} {row['ours_ms']:9.3f} ms "
                  f"{row['ours_tflops']:6.2f} TF/s   cuBLAS {row['cublas_ms']:9.3f} ms "
                  f"{row['cublas_tflops']:6.2f} TF/s   x{row['ratio']:.3f}   err "
                  f"{err:.1e}", flush=True)
        del c_ours, c_ref
        cp.get_default_memory_pool().free_all_blocks()

    for s in parse_sizes(args.square):
        a = random_matrix((s, s), 1, cp, dtype=cp.float64)
        b = random_matrix((s, s), 2, cp, dtype=cp.float64)
        run_case(f"C = A B {s}^3", a, b, 1.0, 0.0)
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
    n = args.n
    if parse_sizes(args.ks):
        c0 = random_matrix((n, n), 3, cp, dtype=cp.float64)
    for k in parse_sizes(args.ks):
        a = random_matrix((n, k), 4, cp, dtype=cp.float64)   # row-major: K-contiguous
        b = random_matrix((k, n), 5, cp, dtype=cp.float64)   # row-major: N-contiguous
        run_case(f"C -= A B {n}^2 x {k}", a, b, -1.0, 1.0, c0)

    print()
    print_table([("case", "case", "{}"), ("variant", "variant", "{}"),
                 ("ours_ms", "ours ms", "{:.3f}"), ("ours_tflops", "TF/s", "{:.2f}"),
                 ("cublas_ms", "cuBLAS ms", "{:.3f}"), ("cublas_tflops", "TF/s", "{:.2f}"),
                 ("ratio", "vs cuBLAS", "{:.3f}"), ("max_rel_err", "max rel err", "{:.1e}")],
                rows, title=f"DGEMM, {env['device']}; cuBLAS update call: "
                            f"{rows[-1]['cublas_call'] if rows else '-'}")
    if args.json:
        write_json(args.json, "dgemm", rows, {"variants": variants})


if __name__ == "__main__":
    main()
