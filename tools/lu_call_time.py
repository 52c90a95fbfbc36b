"""Host and device time of one default `lu_factor` call (CuPy input), by
cupyx.profiler.benchmark: the host's share shows what the Python route costs per call.

    PYTHONPATH=<tree> python3 tools/lu_call_time.py 2048,4096 --repeat 200

Prints one line per size: n, median host ms, median device ms.  Run it for two trees in turn
(old and new) to compare the call's host cost.
"""

import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", help="comma-separated n")
    p.add_argument("--repeat", type=int, default=200)
    args = p.parse_args()
    import cupy as cp
    from cupyx.profiler import benchmark
    import gpulinalg
    for n in [int(x) for x in args.sizes.split(",")]:
        a = cp.asarray(np.random.default_rng(n).standard_normal((n, n), dtype=np.float32))
        res = benchmark(gpulinalg.lu_factor, (a,), n_repeat=args.repeat, n_warmup=10)
        print(f"{gpulinalg.__file__}  n={n}  host {np.median(res.cpu_times) * 1e3:.3f} ms  "
              f"device {np.median(res.gpu_times[0]) * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
