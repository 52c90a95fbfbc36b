"""Triangular solve B := L^{-1} B (gpulinalg/lu/trsm.py, kernels/trsm.cu): its latency per shape.

    python3 tools/trsm_latency.py --nbs 128,256 --ncols 128,256,1024,16128

L is the unit lower factor of a partially pivoted LU of a random matrix (|l| <= 1, as in the
LU), B random normal; both are blocks of one row-major matrix, as the LU passes them.  Two
timings, medians of --repeat over `--rounds` rounds:
- "call": one call between CUDA events (B restored before it, outside the timed region), the
  host's launch path included, as in the LU's first (eager) call;
- "graph": `--calls` calls, each after a copy that restores B, captured in one CUDA graph,
  less the same graph of copies alone, per call: the GPU's own latency, which the replayed
  LU's look-ahead chain waits on.
"""

import argparse
import statistics

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nbs", default="128,256")
    p.add_argument("--ncols", default="128,256,1024,4096,16128")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=20, help="solves per captured graph")
    args = p.parse_args()
    import cupy as cp
    import scipy.linalg as sl

    from gpulinalg.bench.common import environment, parse_sizes, time_gpu, time_graph
    from gpulinalg.lu import trsm

    env = environment()
    print(f"{env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}")
    rng = np.random.default_rng(0)
    for nb in parse_sizes(args.nbs):
        _, l, _ = sl.lu(rng.standard_normal((nb, nb)))
        for ncols in parse_sizes(args.ncols):
            big = rng.standard_normal((nb, nb + ncols + 3)).astype(np.float32)
            big[:, :nb] = np.tril(l, -1) + np.triu(np.full((nb, nb), np.nan), 0)
            d = cp.asarray(big)
            lv, bv = d[:, :nb], d[:, nb + 3:]
            b0 = bv.copy()
            restore = lambda: bv.__setitem__(Ellipsis, b0)
            solve = lambda: trsm.trsm_lower_unit(lv, bv)
            call = [time_gpu(solve, warmup=2, repeat=args.repeat, setup=restore)
                    for _ in range(args.rounds)]
            graph, hows = [], set()
            for _ in range(args.rounds):
                # time_graph: per call of the list's items taken in turn (restore, solve).
                pair, how = time_graph([restore, solve], repeat=args.repeat,
                                       calls=2 * args.calls)
                copy, how_copy = time_graph(restore, repeat=args.repeat, calls=args.calls)
                graph.append(2 * pair - copy)
                hows |= {how, how_copy}
            note = "" if hows == {"graph"} else f" ({'; '.join(sorted(hows - {'graph'}))})"
            print(f"nb {nb:4d} ncols {ncols:6d}: call {statistics.median(call) * 1e3:7.1f} us, "
                  f"graph {statistics.median(graph) * 1e3:7.1f} us{note}", flush=True)


if __name__ == "__main__":
    main()
