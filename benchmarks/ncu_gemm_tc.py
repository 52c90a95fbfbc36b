"""One launch of each tensor-core GEMM mode, for Nsight Compute (tuning aid).

    ncu -k regex:sgemm_tc --metrics ... python3 benchmarks/ncu_gemm_tc.py 4096
"""
import sys

import cupy as cp

from gpulinalg import _gemm_tc

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
gen = cp.random.default_rng(0)
a = gen.standard_normal((n, n), dtype=cp.float32)
b = gen.standard_normal((n, n), dtype=cp.float32)
c = cp.empty((n, n), dtype=cp.float32)
for mode in _gemm_tc.MODES:
    _gemm_tc.gemm_tc_into(1.0, a, b, 0.0, c, mode=mode)
cp.cuda.Device().synchronize()
