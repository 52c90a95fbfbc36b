"""One launch of each tensor-core GEMM mode, for Nsight Compute (tuning aid): the mma.sync
kernels (gpulinalg/gemm/mma.py) and, on sm_90, the wgmma kernels with their split pre-pass
(gpulinalg/gemm/wgmma.py, default variants; --all-wgmma: every variant of the table).

    ncu -k regex:sgemm_tc --metrics ... python3 tools/ncu_gemm_tc.py 4096
    ncu -k regex:sgemm_wgmma --set full python3 tools/ncu_gemm_tc.py 8192 --all-wgmma
"""
import sys

import cupy as cp

from gpulinalg.core import device
from gpulinalg.gemm import mma
from gpulinalg.gemm import wgmma as wg

args = [x for x in sys.argv[1:] if not x.startswith("--")]
n = int(args[0]) if args else 4096
gen = cp.random.default_rng(0)
a = gen.standard_normal((n, n), dtype=cp.float32)
b = gen.standard_normal((n, n), dtype=cp.float32)
c = cp.empty((n, n), dtype=cp.float32)
for mode in mma.MODES:
    mma.gemm_tc_into(1.0, a, b, 0.0, c, mode=mode)
if device.has_wgmma():
    for mode in wg.MODES:
        variants = ([v for v, t in wg.VARIANTS.items() if wg.stages(t, mode)]
                    if "--all-wgmma" in sys.argv else [None])
        for v in variants:
            wg.gemm_wgmma_into(1.0, a, b, 0.0, c, mode=mode, variant=v)
cp.cuda.Device().synchronize()
