"""A matrix too large for one GPU, factored on several (issue 6), checked like HPL.

    python3 benchmarks/lu_large.py --devices 4 [--n N] [--json FILE]

n defaults to the smallest multiple of 4096 whose matrix alone exceeds the memory of one of
the GPUs.  The matrix lives in host memory (NumPy, float32, C order): it is generated on the
GPUs in row blocks of a seeded generator (block b on GPU b mod P, every time) and copied
down, b = A x (float64) is formed on the way.
`lu_factor(A, overwrite_a=True, check_finite=False, devices=P)` factors it in place: every
GPU receives only its own columns from the host, and the factors come back into A.  The
check needs no second copy of A: x^ = U^{-1} L^{-1} P b with LAPACK's triangular solves on
the host (strtrs on the C-ordered factors, read as their transposes: no copy), then A is
regenerated block by block on the GPU for r = A x^ - b and HPL's scaled residual

    ||r||_inf / (eps (||A||_inf ||x^||_inf + ||b||_inf) n)      (HPL accepts < 16).

Times are wall clock (perf_counter) around each phase, the factorization with the devices
synchronised at its end; TF/s = (2/3 n^3) / time.
"""

import argparse
import json
import time

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)
ROWS = 2048   # rows per generated block


def _block(cp, i0, i1, n, seed):
    """Rows i0:i1 of the test matrix, N(0, 1) float32, on the current GPU; the same numbers
    every time (one generator per block of ROWS rows, always on the same GPU)."""
    rng = cp.random.default_rng(seed + i0 // ROWS)
    return rng.standard_normal((i1 - i0, n), dtype=cp.float32)


def _on_gpus(cp, n, ngpu, work):
    """work(i0, i1) for every block of ROWS rows, block b on GPU b % ngpu, the GPUs at once
    (a thread each); returns the results in block order."""
    from concurrent.futures import ThreadPoolExecutor
    starts = list(range(0, n, ROWS))

    def run(g):
        with cp.cuda.Device(g):
            return [(i0, work(i0, min(i0 + ROWS, n))) for i0 in starts[g::ngpu]]

    with ThreadPoolExecutor(ngpu) as pool:
        done = [r for rs in pool.map(run, range(ngpu)) for r in rs]
    return [r for _, r in sorted(done, key=lambda t: t[0])]


def generate(cp, n, seed, x, ngpu):
    """(A on the host, b = A x in float64, ||A||_inf)."""
    a = np.empty((n, n), np.float32)

    def work(i0, i1):
        blk = _block(cp, i0, i1, n, seed)
        bx = (blk.astype(cp.float64) @ cp.asarray(x)).get()
        rownorm = float(cp.abs(blk).sum(axis=1, dtype=cp.float64).max())
        blk.get(out=a[i0:i1])
        return bx, rownorm

    parts = _on_gpus(cp, n, ngpu, work)
    return a, np.concatenate([bx for bx, _ in parts]), max(r for _, r in parts)

def solve_host(lu, piv, b):
    """x = A^{-1} b from getrf's factors, on the host, without copying the C-ordered lu:
    lu.T is Fortran-ordered, so L y = c is lu.T^T y = c (upper, transposed) for LAPACK."""
    from scipy.linalg.lapack import strtrs
    c = b.astype(np.float32)
    for i, p in enumerate(piv):          # P b: LAPACK's interchanges, in order
        if p != i:
            c[i], c[p] = c[p], c[i]
    y, info = strtrs(lu.T, c, lower=0, trans=1, unitdiag=1)
    assert info == 0, info
    x, info = strtrs(lu.T, y, lower=1, trans=1, unitdiag=0)
    assert info == 0, info
    return x


def residual(cp, n, seed, x, b, ngpu):
    """||A x - b||_inf with A regenerated block by block (float64 products)."""
    def work(i0, i1):
        r = (_block(cp, i0, i1, n, seed).astype(cp.float64) @ cp.asarray(x, dtype=cp.float64)
             - cp.asarray(b[i0:i1]))
        return float(cp.abs(r).max())

    return max(_on_gpus(cp, n, ngpu, work))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import cupy as cp

    from gpulinalg.bench.common import environment
    from gpulinalg.testing.lu import lu_factor   # the public lu_factor plus its timeline

    one_gpu = cp.cuda.Device(0).mem_info[1]
    n = args.n or int(np.ceil(np.sqrt(one_gpu / 4) / 4096 + 1e-9)) * 4096
    row = {"n": n, "devices": args.devices, "precision": args.precision,
           "matrix_gib": 4 * n * n / 2**30, "one_gpu_gib": one_gpu / 2**30}
    print(f"n = {n}: {row['matrix_gib']:.1f} GiB matrix, {row['one_gpu_gib']:.1f} GiB per GPU",
          flush=True)
    x = np.random.default_rng(args.seed).standard_normal(n)
    t = time.perf_counter()
    a, b, anorm = generate(cp, n, args.seed, x, args.devices)
    row["generate_s"] = time.perf_counter() - t
    for g in range(args.devices):
        with cp.cuda.Device(g):
            cp.get_default_memory_pool().free_all_blocks()
    tl = []
    t = time.perf_counter()
    lu, piv = lu_factor(a, overwrite_a=True, check_finite=False, devices=args.devices,
                        precision=args.precision, timeline=tl)
    row["factor_s"] = time.perf_counter() - t
    row["tflops"] = 2 / 3 * n ** 3 / row["factor_s"] / 1e12
    row["in_place"] = bool(np.shares_memory(lu, a))
    row.update({k: tl[-1][k] for k in ("scatter_ms", "factor_ms", "gather_ms") if tl})
    print(f"factored in {row['factor_s']:.1f} s ({row['tflops']:.1f} TF/s)", flush=True)
    t = time.perf_counter()
    xs = solve_host(lu, piv, b)
    row["solve_s"] = time.perf_counter() - t
    r = residual(cp, n, args.seed, xs, b, args.devices)
    xnorm, bnorm = float(np.abs(xs).max()), float(np.abs(b).max())
    row["hpl_residual"] = r / (EPS32 * (anorm * xnorm + bnorm) * n)
    row["passed"] = bool(row["hpl_residual"] < 16)
    print(json.dumps(row, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "rows": [row]}, f, indent=1)
    return 0 if row["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
