"""Profile one DGEMM launch of ours and one of cuBLAS's on the same product under Nsight
Compute (for tuning the FP64 tile picks):

    ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats \
        python3 tools/ncu_dgemm.py 16384 128x64sb 256      # n, our variant, k (C -= A B)

A is n x k row-major, B k x n row-major, C n x n (random, never zero); ours runs
dmma.gemm_into with alpha = -1, beta = 1, cuBLAS cupy.cublas.gemm with the same.  k omitted:
an n^3 product C = A B (beta = 0) against cupy.matmul.  Only the two measured launches run
between cudaProfilerStart and Stop (a warm-up call of each first compiles and caches).
"""
import sys

import cupy as cp
import cupy.cublas

from gpulinalg.gemm import dmma

n = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
variant = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "auto" else None
k = int(sys.argv[3]) if len(sys.argv) > 3 else n
gen = cp.random.default_rng(0)
a = gen.standard_normal((n, k))
b = gen.standard_normal((k, n))
c = gen.standard_normal((n, n))
alpha, beta = (-1.0, 1.0) if k != n else (1.0, 0.0)


def ours():
    dmma.gemm_into(alpha, a, b, beta, c, variant=variant)


def vendor():
    if beta == 0.0:
        cp.matmul(a, b, out=c)
    else:
        cupy.cublas.gemm("N", "N", a, b, out=c, alpha=alpha, beta=beta)


ours()
vendor()
cp.cuda.Device().synchronize()
cp.cuda.profiler.start()
ours()
vendor()
cp.cuda.Device().synchronize()
cp.cuda.profiler.stop()
