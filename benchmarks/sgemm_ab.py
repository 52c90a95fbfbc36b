"""SGEMM: A/B of a module constant of gpulinalg on the LU's rank-k update, beside cuBLAS.

    python3 benchmarks/sgemm_ab.py --vary _blas.PREFETCH_C_L2=0,1 --ks 64,128,256

Per k: C (n x n) -= A (n x k) @ B (k x n), A and B row-major as in the LU's trailing update
(`--a-colmajor`: A column-major), for each tile variant in `--variants` and each value of the
constant, and cuBLAS (`cupy.cublas.gemm`, one fused call with beta), all timed in bursts that
take turns round by round (gpulinalg.bench.common.time_burst), so that clock drift hits every
candidate alike.  Prints TF/s (2 n^2 k / time) and the ratio to cuBLAS; the constant is
restored at the end.
"""

import argparse


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vary", required=True, help="MODULE.NAME=v1,v2: constant and its values")
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--ks", default="64,128,256")
    p.add_argument("--variants", default="dbuf128,pipe128")
    p.add_argument("--a-colmajor", action="store_true")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=5)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import _blas
    from gpulinalg.bench.common import parse_sizes, random_matrix, time_burst, varied_constant
    from gpulinalg.bench.sgemm import cublas_gemm

    n = args.n
    note = f"; n = {n}{', A column-major' if args.a_colmajor else ''}"
    with varied_constant(args.vary, note) as (mod, name, values):
        c = random_matrix((n, n), 1, cp)
        for k in parse_sizes(args.ks):
            a = random_matrix((k, n), 2, cp).T if args.a_colmajor else random_matrix((n, k), 2, cp)
            b = random_matrix((k, n), 3, cp)

            def ours(variant, v):
                def run():
                    setattr(mod, name, v)
                    _blas.gemm_into(-1.0, a, b, 1.0, c, variant)
                return run

            fns = {"cuBLAS": lambda: cublas_gemm(cp, a, b, c, -1.0, 1.0)}
            for variant in args.variants.split(","):
                for v in values:
                    fns[f"{variant} {name}={v}"] = ours(variant, v)
            ms = time_burst(fns, warmup=2, repeat=args.repeat, calls=args.calls)
            flop = 2.0 * n * n * k
            print(f"k = {k}:")
            for key, t in ms.items():
                print(f"  {key:<32} {t:7.3f} ms  {flop / t / 1e9:6.1f} TF/s  "
                      f"x{ms['cuBLAS'] / t:.3f} cuBLAS", flush=True)


if __name__ == "__main__":
    main()
