"""Where a small lu_factor call's time goes: wall time with a sync, the batched kernel alone
(CUDA events around back-to-back launches), and the host's Python profile of the call.

    python3 tools/small_call_profile.py --stacks 100000x8,20000x32 --sizes 32,128,512
        [--dtype float32,float64] [--calls 200] [--top 12]

Per case one line of times (wall ms, kernel ms where the batched kernel takes the order), then
cProfile's `--top` functions by own time over `--calls` calls.
"""

import argparse
import cProfile
import pstats
import time

import numpy as np


def wall_ms(fn, calls):
    import cupy as cp
    for _ in range(3):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def kernel_ms(a, reps=20):
    """The batched kernel alone on the square stack a (B, n, n), src -> dst, per launch (ms),
    or None where no batched kernel takes the order."""
    import cupy as cp

    from batched_shapes_sweep import time_route
    from gpulinalg.core import mapped
    from gpulinalg.core.element import exact
    from gpulinalg.lu import stacked
    found = stacked.kernel_route(cp.cuda.runtime.getDevice(), exact(a.dtype), *a.shape[1:])
    return None if found is None else time_route(cp, found, a, mapped.flags(), reps)[0]


def events_ms(fn, reps=20):
    """fn's time per call (ms) by CUDA events around `reps` back-to-back calls, after one."""
    import cupy as cp
    fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / reps


def triangles_ms(lu, b, reps=10):
    """The few-column triangular solves of lu_solve (L, then U) alone, by CUDA events."""
    import cupy as cp

    from gpulinalg.lu import trsv
    x = cp.array(b.reshape(-1, 1), order="C")

    def both():
        trsv.solve_triangular_few(lu, x, lower=True)
        trsv.solve_triangular_few(lu, x, lower=False)
    return events_ms(both, reps)


def stages(factors, b, calls=30):
    """lu_solve's steps one by one, each timed by wall clock up to a synchronisation (median
    ms): argument checks (the pivots to the host), b to the device with its finiteness check,
    the row-major copy of b, the getrs steps."""
    import cupy as cp

    from gpulinalg import linalg
    from gpulinalg.core import arrays, finite
    from gpulinalg.lu import getrs
    times = {k: [] for k in ("checks", "b + finite", "copy", "getrs")}
    for _ in range(calls):
        t = [time.perf_counter()]
        kind, lu, bb, piv, n, bshape, dtype = linalg._solve_inputs(factors, b, 0)
        cp.cuda.Device().synchronize()
        t.append(time.perf_counter())
        B = arrays.to_device(bb, kind, "b", dtype)
        finite.device_all_finite(B)
        cp.cuda.Device().synchronize()
        t.append(time.perf_counter())
        X = cp.array(B.reshape(n, -1), dtype=dtype, order="C")
        cp.cuda.Device().synchronize()
        t.append(time.perf_counter())
        getrs.getrs(cp, lu, X, cp.asarray(piv), 0)
        cp.cuda.Device().synchronize()
        t.append(time.perf_counter())
        for key, t0, t1 in zip(times, t, t[1:]):
            times[key].append(t1 - t0)
    print("   stages (ms): " + ", ".join(f"{k} {1e3 * np.median(v):.3f}"
                                         for k, v in times.items()), flush=True)


def profile(fn, calls, top):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stacks", default="1x8,100000x8,20000x32,10000x64,2000x128")
    p.add_argument("--sizes", default="32,64,128,256,512,1024")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--solve", default="", help="orders n: lu_solve of one right-hand side with "
                                               "factors of n x n on the GPU")
    args = p.parse_args()
    import cupy as cp

    import gpulinalg
    rng = np.random.default_rng(0)
    cases = [tuple(int(x) for x in s.split("x")) for s in args.stacks.split(",") if s]
    cases += [(None, int(n)) for n in args.sizes.split(",") if n]
    for dtype in args.dtype.split(","):
        for b, n in cases:
            shape = (n, n) if b is None else (b, n, n)
            a = cp.asarray(rng.standard_normal(shape).astype(dtype))
            fn = lambda: gpulinalg.lu_factor(a)     # noqa: E731
            wall = wall_ms(fn, 50)
            kern = kernel_ms(a if b is not None else a[None])
            print(f"== {dtype} {'one' if b is None else b}x{n}: wall {wall:.3f} ms, kernel "
                  f"{'-' if kern is None else f'{kern:.3f} ms'}", flush=True)
            profile(fn, args.calls if n <= 512 else 20, args.top)
        for n in [int(x) for x in args.solve.split(",") if x]:
            a = cp.asarray(rng.standard_normal((n, n)).astype(dtype))
            b = cp.asarray(rng.standard_normal(n).astype(dtype))
            factors = gpulinalg.lu_factor(a)
            fn = lambda: gpulinalg.lu_solve(factors, b)     # noqa: E731
            print(f"== {dtype} lu_solve n={n}, one right-hand side: wall {wall_ms(fn, 30):.3f} "
                  f"ms, the two triangle kernels {triangles_ms(factors[0], b):.3f} ms",
                  flush=True)
            stages(factors, b)
            profile(fn, 30, args.top)


if __name__ == "__main__":
    main()
