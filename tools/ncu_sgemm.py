"""Profile one SGEMM launch of ours and cuBLAS's under Nsight Compute (for tuning).

    ncu --section ComputeWorkloadAnalysis --section WarpStateStats \
        python3 tools/ncu_sgemm.py 4096 dbuf256x128 [k]
"""
import sys

import cupy as cp

from gpulinalg.gemm import simt

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
variant = sys.argv[2] if len(sys.argv) > 2 else None
k = int(sys.argv[3]) if len(sys.argv) > 3 else n
gen = cp.random.default_rng(0)
a = gen.standard_normal((n, k), dtype=cp.float32)
b = gen.standard_normal((k, n), dtype=cp.float32)
c = gen.standard_normal((n, n), dtype=cp.float32)
simt.gemm_into(-1.0, a, b, 1.0, c, variant=variant)
import cupy.cublas
cupy.cublas.gemm("N", "N", a, b, out=c, alpha=-1.0, beta=1.0)
cp.cuda.Device().synchronize()
