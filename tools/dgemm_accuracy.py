"""Accuracy of the FP64 tensor-core DGEMM tiles against an extended-precision reference.

    python3 tools/dgemm_accuracy.py [--n 1024] [--ks 16,64,256,1024]

For C0 - A B (A n x k, B k x n, C0 n x n; standard normal, seeded) computes the reference
in NumPy long double (x86: 64-bit significand) and reports, per candidate, the relative
Frobenius error ||C - ref|| / ||ref|| in units of float64's eps and the mean signed error over
its RMS (|bias| near 0: round-to-nearest errors; near 1: one-sided rounding).  Candidates:
NumPy float64 (the host BLAS), cuBLAS (cupy.cublas.gemm, alpha -1, beta 1), and ours for
each tile of gpulinalg.gemm.dmma.VARIANTS plus an m16n8k8 and an m8n8k4-shaped instantiation
(named dgemm_mma templates, compiled by NVRTC when the build has none).
"""
import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--ks", default="16,64,256,1024")
    args = p.parse_args()
    import cupy as cp
    import cupy.cublas

    from gpulinalg.core.kernels import Launcher, get_kernel
    from gpulinalg.gemm import dmma

    tiles = dict(dmma.VARIANTS)
    tiles["128x128k32 mk8"] = tiles["128x128k32"]._replace(MK=8)
    eps = np.finfo(np.float64).eps
    n = args.n
    rng = np.random.default_rng(0)
    c0 = rng.standard_normal((n, n))
    for k in (int(x) for x in args.ks.split(",")):
        a = rng.standard_normal((n, k))
        b = rng.standard_normal((k, n))
        ref = c0.astype(np.longdouble) - a.astype(np.longdouble) @ b.astype(np.longdouble)
        norm = float(np.sqrt(np.sum(ref * ref)))

        def report(label, c):
            d = (np.asarray(c, dtype=np.longdouble) - ref).astype(np.float64)
            rms = float(np.sqrt(np.mean(d * d)))
            print(f"k={k:5d} {label:22s} err {float(np.sqrt(np.sum(d * d))) / norm / eps:8.3f} eps"
                  f"   bias {float(np.mean(d)) / rms if rms else 0.0:+.3f}", flush=True)

        report("numpy (host BLAS)", c0 - a @ b)
        ga, gb = cp.asarray(a), cp.asarray(b)
        gc = cp.asarray(c0)
        cupy.cublas.gemm("N", "N", ga, gb, out=gc, alpha=-1.0, beta=1.0)
        report("cuBLAS", gc.get())
        for name, t in tiles.items():
            kname = dmma._kernel_name(t, True, True, True)
            smem = dmma.dynamic_smem(t)
            launch = Launcher(get_kernel(dmma.FAMILY, kname, dynamic_smem=smem), "iiidPqPqdPq",
                              smem)
            gc = cp.asarray(c0)
            launch((-(-n // t.BM) * -(-n // t.BN), 1, 1), (dmma.tile_threads(t), 1, 1), n, n, k,
                   -1.0, ga.data.ptr, k, gb.data.ptr, n, 1.0, gc.data.ptr, n)
            report(f"ours {name}", gc.get())


if __name__ == "__main__":
    main()
