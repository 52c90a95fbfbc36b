"""solve and inv of device stacks: ours against torch.linalg.solve / inv and cupy.linalg.solve
/ inv on the same CuPy stack, wall time with a sync (median of --repeat, candidates
alternating).

    python3 tools/stack_solve_time.py [--stacks 10000x32,2000x128,200x512] [--dtype float32]
"""

import argparse
import time

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stacks", default="10000x8,10000x32,2000x128,200x512")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    import cupy as cp
    import torch

    import gpulinalg
    rng = np.random.default_rng(0)
    for dtype in args.dtype.split(","):
        for case in args.stacks.split(","):
            count, n = (int(v) for v in case.split("x"))
            a = cp.asarray(rng.standard_normal((count, n, n)).astype(dtype))
            b = cp.asarray(rng.standard_normal((count, n, 1)).astype(dtype))
            ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
            calls = {"ours solve": lambda: gpulinalg.solve(a, b),
                     "torch solve": lambda: torch.linalg.solve(ta, tb),
                     "cupy solve": lambda: cp.linalg.solve(a, b),
                     "ours inv": lambda: gpulinalg.inv(a),
                     "torch inv": lambda: torch.linalg.inv(ta),
                     "cupy inv": lambda: cp.linalg.inv(a)}
            times = {k: [] for k in calls}
            for _ in range(args.repeat + 1):
                for k, fn in calls.items():
                    cp.cuda.Device().synchronize()
                    t = time.perf_counter()
                    fn()
                    cp.cuda.Device().synchronize()
                    times[k].append(time.perf_counter() - t)
            ms = {k: 1e3 * float(np.median(v[1:])) for k, v in times.items()}
            print(f"{dtype} {count}x{n}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
                  + f"; torch/ours solve {ms['torch solve'] / ms['ours solve']:.2f}, inv "
                  f"{ms['torch inv'] / ms['ours inv']:.2f}", flush=True)


if __name__ == "__main__":
    main()
