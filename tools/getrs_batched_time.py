"""The stacked solve's kernels on the GPU: getrs_batched (solution in registers, orders up to
128) and getrs_tiled with R = 1 and 8 (solution in shared memory) on the same factors, CUDA
events per launch; then the whole stacked lu_solve and solve calls, wall time with a sync, and
the host's profile of solve.

    python3 tools/getrs_batched_time.py [--cases 10000x32x1,2000x128x128,200x512x1]
        [--dtype float32,float64] [--top 10]

A case is BATCHxNxNRHS.  Kernel columns where the kernel takes the order (registers: n <=
128; R = 8: nrhs >= 8).
"""

import argparse
import cProfile
import io
import pstats

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="10000x8x1,10000x32x1,2000x128x1,2000x128x8,"
                                      "2000x128x128,1000x256x1,200x512x1,200x512x512")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args()
    import cupy as cp

    import gpulinalg
    from gpulinalg.core import mapped
    from gpulinalg.core.element import exact
    from gpulinalg.lu import getrs_batched as gb
    from small_call_profile import events_ms, wall_ms
    rng = np.random.default_rng(0)
    for dtype in args.dtype.split(","):
        element = exact(np.dtype(dtype))
        for case in args.cases.split(","):
            count, n, nrhs = (int(v) for v in case.split("x"))
            a = cp.asarray(rng.standard_normal((count, n, n)).astype(dtype))
            b = cp.asarray(rng.standard_normal((count, n, nrhs)).astype(dtype))
            lu, piv = gpulinalg.lu_factor(a)
            piv32 = cp.ascontiguousarray(piv, dtype=np.int32)
            x = b.copy()
            dev = cp.cuda.runtime.getDevice()
            kernels = {}
            if n <= gb.REGISTER_ORDER:
                nmax = next(s for s in gb.NMAX_SHAPES if s >= n)
                kernels["registers"] = (gb._launcher(dev, "getrs_batched", element.ctype, nmax),
                                        count * nrhs, gb.WARPS)
            for r in gb.TILED_RHS:
                if r <= nrhs:
                    launch = gb._launcher(dev, "getrs_tiled", element.ctype, r,
                                          gb.tiled_shared_bytes(n, r, element))
                    kernels[f"tiled R={r}"] = (launch, count * -(-nrhs // r), 1)
            times = {}
            flags = mapped.flags()
            for name, (launch, warps, per_block) in kernels.items():
                times[name] = events_ms(lambda: launch(
                    (-(-warps // per_block), 1, 1), (32 * per_block, 1, 1), count, n, nrhs,
                    lu.data.ptr, piv32.data.ptr, x.data.ptr, 0, flags.ptr, flags.next_gen()))
            times["lu_solve call"] = wall_ms(lambda: gpulinalg.lu_solve((lu, piv), b), 20)
            times["solve call"] = wall_ms(lambda: gpulinalg.solve(a, b), 10)
            print(f"{dtype} {case}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in times.items()),
                  flush=True)
    if args.top:
        a = cp.asarray(rng.standard_normal((10000, 8, 8)))
        b = cp.asarray(rng.standard_normal((10000, 8, 1)))
        wall_ms(lambda: gpulinalg.solve(a, b), 5)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(100):
            gpulinalg.solve(a, b)
        cp.cuda.Device().synchronize()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print("solve 10000x8 float64, 100 calls:\n" + out.getvalue())


if __name__ == "__main__":
    main()
