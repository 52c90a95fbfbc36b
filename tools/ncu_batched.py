"""Nsight Compute target: lu_factor of a random (B, n, n) stack three times.

    ncu --kernel-name regex:getrf_batched --launch-skip 2 --launch-count 1 --set detailed \
        python3 tools/ncu_batched.py B N DTYPE
"""
import sys

import cupy as cp
import numpy as np

import gpulinalg

b, n, dt = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
a = cp.asarray(np.random.default_rng(0).standard_normal((b, n, n)).astype(dt))
for _ in range(3):
    gpulinalg.lu_factor(a)
cp.cuda.Device().synchronize()
