"""SGEMM under several tuning tables, or the kernel source against another version of
kernels/sgemm.cu, beside cuBLAS, on the LU's rank-k update and on square products.

    python3 tools/sgemm_ab.py --tuning simt_pipe_max_k_mmajor=0,128 --ks 64,128,256 --a-colmajor
    python3 tools/sgemm_ab.py --baseline old_sgemm.cu --square 4096,8192 \\
        --variants dbuf256x128,dbuf128

Per k: C (n x n) -= A (n x k) @ B (k x n), A and B row-major as in the LU's trailing update
(`--a-colmajor`: A column-major); per square size s: C = A @ B, all s x s and row-major; per
`--shapes` entry MxNxK: C = A @ B of those sizes.  A variant written NAME/S runs tile NAME
with k split in S parts (gemm_into's split; NAME alone: split 1); "auto" is gemm_into's own
choice of tile and split.  Each tile variant in `--variants` runs under each tuning table
(--tuning FIELD=v1,v2, fields of gpulinalg/tuning.py: each call under
`gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`) and, with
`--baseline FILE`, also compiled from FILE (e.g. `git show REV:kernels/sgemm.cu > FILE`, or
a file of benchmarks/baselines/; its `#include`s are looked up in kernels/), and cuBLAS
(`cupy.cublas.gemm`, one fused call with beta) beside them, all timed in bursts that take
turns round by round (gpulinalg.bench.common.time_burst), so that clock drift hits every
candidate alike.  Prints TF/s and the ratio to cuBLAS.
"""

import argparse
import pathlib


def baseline_gemm(path, variant, a, b, beta, c, alpha):
    """A callable running tile `variant` of the kernels in `path` (same kernel names and
    parameters as kernels/sgemm.cu) on c = alpha a @ b + beta c, all row-major CuPy arrays."""
    import cupy as cp

    from gpulinalg.core import kernels as _kernels
    from gpulinalg.gemm import simt as _blas

    t = _blas.VARIANTS[variant]
    (m, k), n = a.shape, b.shape[1]
    a_kmajor = a.strides[1] == 4
    lda = a.strides[0] // 4 if a_kmajor else a.strides[1] // 4
    prefetch_c = t.KIND == "pipe" and beta != 0.0
    name = _blas._kernel_name(t, a_kmajor, True, True, prefetch_c)
    mod = cp.RawModule(code=pathlib.Path(path).read_text(), name_expressions=[name],
                       options=("--std=c++17", _kernels.arch_option(),
                                f"-I{_kernels.kernel_dir()}"))
    smem = _blas._dynamic_smem(t, prefetch_c)
    kernel = mod.get_function(name)
    if smem > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = smem
    launch = _kernels.Launcher(kernel, _blas._GEMM_ARGS, smem)
    grid = (-(-m // t.BM) * -(-n // t.BN), 1, 1)
    block = (_blas.tile_threads(t), 1, 1)
    return lambda: launch(grid, block, m, n, k, alpha, a.data.ptr, lda, b.data.ptr,
                          b.strides[0] // 4, beta, c.data.ptr, c.strides[0] // 4)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", help="another kernels/sgemm.cu to time beside this one")
    p.add_argument("--n", type=int, default=16384, help="rank-k updates: n x n C")
    p.add_argument("--ks", default="64,128,256", help="rank-k updates' k ('' for none)")
    p.add_argument("--square", default="", help="square sizes, e.g. 4096,8192")
    p.add_argument("--shapes", default="", help="products MxNxK, e.g. 1024x1024x4096")
    p.add_argument("--variants", default="dbuf128,pipe128")
    p.add_argument("--a-colmajor", action="store_true")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=5)
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import tuning
    from gpulinalg.bench.common import (describe_tuning, environment, parse_sizes,
                                        random_matrix, time_burst, tuning_settings)
    from gpulinalg.bench.sgemm import cublas_gemm
    from gpulinalg.gemm import simt

    settings = tuning_settings(args.tuning)

    def ours(spec, table, a, b, c, alpha, beta):
        variant, _, split = spec.partition("/")
        variant, split = (None, None) if variant == "auto" else (variant, int(split or 1))

        def run():
            with tuning.override(table):
                simt.gemm_into(alpha, a, b, beta, c, variant, split=split)
        return run

    def run_case(title, a, b, c, alpha, beta, flop):
        fns = {"cuBLAS": lambda: cublas_gemm(cp, a, b, c, alpha, beta)}
        for variant in args.variants.split(","):
            for label, table in settings:
                key = variant + (f" {label}" if args.tuning else "")
                fns[key] = ours(variant, table, a, b, c, alpha, beta)
            if args.baseline and "/" not in variant and variant != "auto":
                try:
                    fns[f"{variant} baseline"] = baseline_gemm(args.baseline, variant, a, b,
                                                               beta, c, alpha)
                except Exception as e:   # a variant the baseline does not have
                    print(f"  ({variant}: no baseline: {type(e).__name__})")
        ms = time_burst(fns, warmup=2, repeat=args.repeat, calls=args.calls)
        print(f"{title}:")
        for key, t in ms.items():
            print(f"  {key:<32} {t:8.3f} ms  {flop / t / 1e9:6.1f} TF/s  "
                  f"x{ms['cuBLAS'] / t:.3f} cuBLAS", flush=True)

    n = args.n
    print(f"{environment()['device']}; varying {describe_tuning(args.tuning)}; n = {n}"
          f"{', A column-major' if args.a_colmajor else ''}")
    if parse_sizes(args.ks):
        c = random_matrix((n, n), 1, cp)
    for k in parse_sizes(args.ks):
        a = random_matrix((k, n), 2, cp).T if args.a_colmajor else random_matrix((n, k), 2, cp)
        b = random_matrix((k, n), 3, cp)
        run_case(f"C -= A B, {n} x {n} x {k}", a, b, c, -1.0, 1.0, 2.0 * n * n * k)
    for s in parse_sizes(args.square):
        a, b = random_matrix((s, s), 4, cp), random_matrix((s, s), 5, cp)
        c = cp.empty((s, s), dtype=cp.float32)
        run_case(f"C = A B, {s}^3", a, b, c, 1.0, 0.0, 2.0 * s ** 3)
    for shape in filter(None, args.shapes.split(",")):
        m, n_, k = (int(x) for x in shape.split("x"))
        a, b = random_matrix((m, k), 6, cp), random_matrix((k, n_), 7, cp)
        c = cp.empty((m, n_), dtype=cp.float32)
        run_case(f"C = A B, {m} x {n_} x {k}", a, b, c, 1.0, 0.0, 2.0 * m * n_ * k)


if __name__ == "__main__":
    main()
