"""LU on one GPU under several tuning tables (or block sizes), against cuSOLVER in the same run.

    python3 tools/lu_ab.py 8192,16384,32768 --tuning row_block_cap=32,64
    python3 tools/lu_ab.py 16384x8192,24576x8192 --tuning lu_tc_min_trailing=4096,8192
    python3 tools/lu_ab.py 32768 --nb 256,512,1024 --precision 3xtf32

--tuning FIELD=v1,v2 (a field of gpulinalg/tuning.py's Tuning; repeatable: every combination)
runs each value under `gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`
(the LU keeps its captured CUDA graphs per table: gpulinalg/lu/graph.py).  --nb 256,1024
times each setting with each block size (0: the default rule).  Per size: cuSOLVER
(`cupyx.scipy.linalg.lu_factor`) timed first, then `rounds` rounds that time every setting
once each (alternating, so that clock drift hits all settings alike).  Prints the median ms
of each setting, its TF/s (LAPACK's flop count) and its ratio to cuSOLVER.  With --panel cpu
each round also makes one uninstrumented call that reports the host's clock
(gpulinalg.lu.driver.HostClock): the wall over the sum of host panel times, the look-ahead
check of gpulinalg-bench lu.
"""

import argparse
import statistics


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sizes", help="n or MxN, comma-separated (random matrices)")
    p.add_argument("--nb", default="0", help="block sizes, comma-separated (0: the rule)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="timed calls per setting and round")
    p.add_argument("--panel", default="auto", help="lu_factor's panel= (cpu, gpu, auto)")
    p.add_argument("--precision", default="auto", help="lu_factor's precision=")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp
    from cupyx.scipy import linalg as cpx_linalg

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.bench.common import (describe_tuning, environment, parse_shapes,
                                        random_matrix, time_gpu, tuning_settings)
    from gpulinalg.bench.lu import lu_flops
    from gpulinalg.lu.driver import HostClock
    from gpulinalg.testing.lu import lu_factor as lu_factor_hooks

    env = environment()
    print(f"{env['device']}, CuPy {env['cupy']}; varying {describe_tuning(args.tuning)}")
    nbs = [int(x) for x in args.nb.split(",")]
    settings = tuning_settings(args.tuning)
    for m, n in parse_shapes(args.sizes):
        a = random_matrix((m, n), n)
        flop = lu_flops(m, n)
        ref = time_gpu(lambda: cpx_linalg.lu_factor(a), warmup=1, repeat=args.repeat)
        cases = [(label, table, nb) for label, table in settings for nb in nbs]
        times = {(label, nb): [] for label, _, nb in cases}
        clocks = {(label, nb): HostClock() for label, _, nb in cases}
        for _ in range(args.rounds):
            for label, table, nb in cases:
                kw = dict(panel=args.panel, precision=args.precision, block_size=nb or None)
                with tuning.override(table):
                    times[label, nb].append(time_gpu(lambda: gpulinalg.lu_factor(a, **kw),
                                                     warmup=2, repeat=args.repeat))
                    if args.panel == "cpu":
                        lu_factor_hooks(a, timeline=clocks[label, nb], **kw)
        print(f"{m}x{n}: cuSOLVER {ref:.2f} ms ({flop / ref / 1e9:.2f} TF/s)")
        for label, _, nb in cases:
            ms = statistics.median(times[label, nb])
            name = label + (f" nb={nb or 'rule'}" if len(nbs) > 1 else "")
            print(f"  {name}: {ms:.2f} ms ({flop / ms / 1e9:.2f} TF/s), "
                  f"x{ref / ms:.3f} cuSOLVER; rounds " +
                  " ".join(f"{t:.2f}" for t in times[label, nb]), flush=True)
            if clocks[label, nb]:
                print("    host clock: wall / sum host panel " + " ".join(
                    f"{c['wall_ms']:.1f}/{c['host_panel_ms']:.1f}="
                    f"{c['wall_ms'] / c['host_panel_ms']:.3f}" for c in clocks[label, nb]))
        a = None
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
