"""Where a solve's time goes, step by step on the GPU.

    python3 tools/solve_profile.py [--lu-solve 8192] [--solve 16384] [--kappa 4096:1e9]
        [--dtype float32,float64]

--lu-solve N: lu_solve of one right-hand side with N x N factors on the GPU: its wall time
with a sync, then its steps (the argument checks, the gather, the L and U solves, the
synchronisation that reads the checks) each by CUDA events, with back-to-back repeats.
--solve N (and --kappa N:K, a matrix of condition number K): float64 `solve` at its defaults:
the wall time, then the refined path's steps replayed one by one, each timed up to a
synchronisation (median of --repeat).
"""

import argparse

import numpy as np

from small_call_profile import events_ms
from small_call_profile import wall_ms as sync_ms     # wall time with a sync, median


def lu_solve_steps(n, dtype):
    import cupy as cp

    import gpulinalg
    from gpulinalg import linalg
    from gpulinalg.core import mapped
    from gpulinalg.core.element import exact
    from gpulinalg.layout import permute
    from gpulinalg.lu import trsv
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((n, n)).astype(dtype))
    b = cp.asarray(rng.standard_normal(n).astype(dtype))
    lu, piv = gpulinalg.lu_factor(a)
    del a
    wall = sync_ms(lambda: gpulinalg.lu_solve((lu, piv), b), 30)
    x = cp.empty((n, 1), dtype)
    flags = mapped.flags()
    el = exact(np.dtype(dtype))

    def gather():
        permute.permute_rows_ptr(n, 1, piv.data.ptr, b.data.ptr, 1, 1, x.data.ptr, 1,
                                 flags.ptr, flags.next_gen(), el)
    steps = {
        "checks (host)": sync_ms(lambda: linalg._solve_inputs((lu, piv), b, 0,
                                                              device_pivots=True), 30),
        "gather": events_ms(gather),
        "L": events_ms(lambda: trsv.solve_triangular_few(lu, x, lower=True)),
        "U": events_ms(lambda: trsv.solve_triangular_few(lu, x, lower=False)),
        "empty launch + sync": sync_ms(lambda: cp.empty(1, dtype).fill(0), 30),
    }
    print(f"lu_solve {np.dtype(dtype).name} n={n} nrhs=1: wall {wall:.3f} ms; "
          + ", ".join(f"{k} {v:.3f}" for k, v in steps.items()), flush=True)


def solve_steps(n, kappa, repeat):
    import cupy as cp

    import gpulinalg
    from gpulinalg import gesv
    from gpulinalg.bench.solve import conditioned
    from gpulinalg.bench import common
    from gpulinalg.lu import getrs
    from gpulinalg.lu.plan import DEVICE
    a = (common.random_matrix((n, n), 4, cp, dtype="float64") if kappa is None
         else conditioned(cp, n, kappa, 5))
    b = cp.asarray(np.random.default_rng(1).standard_normal(n))
    info = gpulinalg.solve(a, b, return_info=True)[1]
    wall = sync_ms(lambda: gpulinalg.solve(a, b), repeat)
    fp64 = sync_ms(lambda: gpulinalg.solve(a, b, precision="fp64"), repeat)
    steps = {}

    def step(name, fn):
        steps[name] = sync_ms(fn, repeat)
        return fn()
    M = step("working copy + finite", lambda: gesv._working_matrix(cp, a, "cupy", np.float64,
                                                                   "general", False, True))
    A32 = step("to float32", lambda: M.astype(np.float32, order="C"))
    _, LU, piv, _ = step("float32 LU", lambda: gesv._factors(A32.copy(), DEVICE))
    piv = cp.asarray(piv)
    step("||A||_inf", lambda: float(cp.abs(M).sum(axis=1).max()))
    B = b.reshape(n, 1)
    X = step("solve (float32 factors)",
             lambda: getrs.getrs(cp, LU, B.astype(np.float32), piv, 0).astype(np.float64))
    step("residual (float64)", lambda: B - M @ X)
    step("||A||_1", lambda: getrs.norm1(cp, M))
    step("float64 LU", lambda: gesv._factors(M.copy(), DEVICE))
    step("rcond (float32 factors)", lambda: getrs.rcond(cp, LU, piv, 1.0))
    print(f"solve float64 n={n}" + (f" kappa={kappa:.0e}" if kappa else "")
          + f": wall {wall:.3f} ms ({info.path}, {info.iterations} steps), fp64 path "
          f"{fp64:.3f} ms; " + ", ".join(f"{k} {v:.3f}" for k, v in steps.items()), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lu-solve", default="8192")
    p.add_argument("--solve", default="16384")
    p.add_argument("--kappa", default="4096:1e9")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    for n in [int(x) for x in args.lu_solve.split(",") if x]:
        for dtype in args.dtype.split(","):
            lu_solve_steps(n, dtype)
    for n in [int(x) for x in args.solve.split(",") if x]:
        solve_steps(n, None, args.repeat)
    for case in [x for x in args.kappa.split(",") if x]:
        n, kappa = case.split(":")
        solve_steps(int(n), float(kappa), args.repeat)


if __name__ == "__main__":
    main()
