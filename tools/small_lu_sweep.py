"""One matrix of order 256-2048: lu_factor's wall time with a sync under tables of other
block sizes and both panels, against cuSOLVER, in one run (the evidence for the small-matrix
fields of the tuning table).

    python3 tools/small_lu_sweep.py --sizes 256,512,1024 --nb 32,64,128,256 [--dtype float32]

One line per order: each configuration's median wall ms of --repeat calls, alternating with
cuSOLVER's (in brackets), one configuration at a time.
"""

import argparse
import dataclasses

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="256,512,1024")
    p.add_argument("--nb", default="32,64,128,256")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()
    import cupy as cp
    import cupyx.scipy.linalg as cxl

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.bench import common
    from gpulinalg.core.element import element
    for dtype in args.dtype.split(","):
        for n in [int(x) for x in args.sizes.split(",")]:
            a = cp.asarray(np.random.default_rng(n).standard_normal((n, n)).astype(dtype))
            table = tuning.current(element=element(np.dtype(dtype)))
            configs = {"default": lambda: gpulinalg.lu_factor(a),
                       "cpu panel": lambda: gpulinalg.lu_factor(a, panel="cpu")}
            for nb in [int(x) for x in args.nb.split(",")]:
                t = dataclasses.replace(table, gpu_nb=nb, gpu_nb_steps_fp32=(),
                                        gpu_nb_steps_tc=())

                def run(t=t):
                    with tuning.override(t):
                        return gpulinalg.lu_factor(a)
                configs[f"gpu nb={nb}"] = run
            # each configuration alternates with cuSOLVER on its own: configurations sharing
            # rounds evict each other's CUDA graphs (lu_factor's replay cache)
            parts = []
            for name, fn in configs.items():
                ms = common.time_wall({"cusolver": lambda: cxl.lu_factor(a), name: fn},
                                      warmup=2, repeat=args.repeat)
                parts.append(f"{name} {ms[name]:.3f} (cuSOLVER {ms['cusolver']:.3f})")
                common.free_pool()
            print(f"{dtype} n={n}: " + ", ".join(parts), flush=True)


if __name__ == "__main__":
    main()
