"""LU on one GPU: A/B of a module constant of gpulinalg, against cuSOLVER in the same run.

    python3 benchmarks/lu_ab.py 8192,16384,32768 --vary _panel_gpu.ROW_BLOCK_CAP=160,64
    python3 benchmarks/lu_ab.py 16384x8192,24576x8192 --vary _lu_graph.NODE_PRIORITY=0,1

--vary MODULE.NAME=v1,v2,... sets the integer (or boolean: 0, 1) constant NAME of
gpulinalg/MODULE.py to each value in turn, dropping the captured CUDA graphs each time
(gpulinalg/_lu_graph.py: a replay keeps the launches it was captured with).  Per size:
cuSOLVER (`cupyx.scipy.linalg.lu_factor`) timed first, then `rounds` rounds that time every
value once each (alternating, so that clock drift hits all values alike).  Prints the
median ms of each value, its TF/s (LAPACK's flop count) and its ratio to cuSOLVER; the
constant is restored at the end.  With --panel cpu each round also makes one uninstrumented
call that reports the host's clock (_lu.HostClock): the wall over the sum of host panel
times, the look-ahead check of gpulinalg-bench lu.  --nb 256,1024 times each value with each block
size (0: the default rule) instead of, or beside, a constant:

    python3 benchmarks/lu_ab.py 32768 --nb 256,512,1024 --precision 3xtf32

--set MODULE.NAME=v (repeatable) fixes another constant for every value (e.g. a leaf turned
off while a threshold is varied).
"""

import argparse
import statistics


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sizes", help="n or MxN, comma-separated (random matrices)")
    p.add_argument("--vary", default="_panel_gpu.GPU_NB_SWITCH=8192",
                   help="MODULE.NAME=v1,v2: constant and its values (default: none varied)")
    p.add_argument("--nb", default="0", help="block sizes, comma-separated (0: the rule)")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=v",
                   help="a constant fixed for the whole run (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="timed calls per value and round")
    p.add_argument("--panel", default="auto", help="lu_factor's panel= (cpu, gpu, auto)")
    p.add_argument("--precision", default="auto", help="lu_factor's precision=")
    args = p.parse_args()
    import cupy as cp
    from cupyx.scipy import linalg as cpx_linalg

    import gpulinalg
    from gpulinalg.lu import driver as _lu
    from gpulinalg.lu import graph as _lu_graph
    from gpulinalg.layout import transpose as _transpose
    from gpulinalg.bench.common import (parse_shapes, random_matrix, set_constants, time_gpu,
                                        varied_constant)
    from gpulinalg.bench.lu import lu_flops

    nbs = [int(x) for x in args.nb.split(",")]
    set_constants(args.set)
    with varied_constant(args.vary) as (mod, name, values):
        for m, n in parse_shapes(args.sizes):
            a = random_matrix((m, n), n)
            flop = lu_flops(m, n)
            ref = time_gpu(lambda: cpx_linalg.lu_factor(a), warmup=1, repeat=args.repeat)
            cases = [(v, nb) for v in values for nb in nbs]
            times = {c: [] for c in cases}
            clocks = {c: _lu.HostClock() for c in cases}
            for _ in range(args.rounds):
                for v, nb in cases:
                    setattr(mod, name, v)
                    _lu_graph.clear()   # a captured graph holds the old value's launches
                    _transpose.pick_variant.cache_clear()   # a memoised tile choice too
                    _transpose._plan.cache_clear()
                    kw = dict(panel=args.panel, precision=args.precision, block_size=nb or None)
                    times[v, nb].append(time_gpu(lambda: gpulinalg.lu_factor(a, **kw),
                                                 warmup=2, repeat=args.repeat))
                    if args.panel == "cpu":
                        gpulinalg.lu_factor(a, _timeline=clocks[v, nb], **kw)
            print(f"{m}x{n}: cuSOLVER {ref:.2f} ms ({flop / ref / 1e9:.2f} TF/s)")
            for v, nb in cases:
                ms = statistics.median(times[v, nb])
                label = f"{name}={v}" + (f" nb={nb or 'rule'}" if len(nbs) > 1 else "")
                print(f"  {label}: {ms:.2f} ms ({flop / ms / 1e9:.2f} TF/s), "
                      f"x{ref / ms:.3f} cuSOLVER; rounds " +
                      " ".join(f"{t:.2f}" for t in times[v, nb]), flush=True)
                if clocks[v, nb]:
                    print("    host clock: wall / sum host panel " + " ".join(
                        f"{c['wall_ms']:.1f}/{c['host_panel_ms']:.1f}="
                        f"{c['wall_ms'] / c['host_panel_ms']:.3f}" for c in clocks[v, nb]))
            a = None
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
