"""Transpose under several tuning tables beside a device copy, in one run.

    python3 tools/transpose_ab.py --tuning transpose_small_tiles_per_sm=2,4,8 --sizes 4000
    python3 tools/transpose_ab.py --variants 32x8,64x4-pair --sizes 4000,6000x10000

Per shape: B = A^T (both C-ordered) by each tile variant in `--variants` under each tuning
table (--tuning FIELD=v1,v2, fields of gpulinalg/tuning.py: each call under
`gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`), and a
device-to-device copy of as many bytes, all timed in bursts that take
turns round by round (gpulinalg.bench.common.time_burst), so that clock drift hits every
candidate alike.  A burst pays for the dirty lines its predecessor left in L2 (worth 1-5
points of copy bandwidth at 4000^2 between identical kernels), so each of `--rounds` rounds
rotates the order by one place; the summary is the mean over the rounds.  Prints GB/s
(bytes read + written) and % of the copy; every result is checked against a.T.
"""

import argparse
import statistics


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="4000,6000x10000,10000,12288,16384")
    p.add_argument("--variants", default="32x8,64x4-pair",
                   help="tile variants ('auto': the automatic choice)")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--chain", choices=["copy", "matmul"],
                   help="each transpose call is followed by a copy of as many bytes, or by "
                        "cupy.matmul of two 2048^2 matrices, timed with it (what a kernel "
                        "leaves in L2 for the next is charged to it)")
    p.add_argument("--rounds", type=int, default=4,
                   help="rounds per shape, each rotating the order by one place")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import tuning
    from gpulinalg.bench.common import (describe_tuning, environment, parse_shapes,
                                        random_matrix, time_burst, tuning_settings)
    from gpulinalg.layout import transpose as _transpose

    settings = tuning_settings(args.tuning)
    print(f"{environment()['device']}; varying {describe_tuning(args.tuning)}")
    for m, n in parse_shapes(args.sizes):
        a = random_matrix((m, n), 1, cp)
        out = cp.empty((n, m), dtype=cp.float32)
        buf = cp.empty_like(a)

        def ours(variant, table):
            def run():
                with tuning.override(table):
                    _transpose.transpose_into(a, out, variant)
                then()
            return run

        g = random_matrix((2048, 2048), 2, cp) if args.chain == "matmul" else None
        then = {"copy": lambda: cp.copyto(buf, a), "matmul": lambda: cp.matmul(g, g),
                None: lambda: None}[args.chain]
        fns = {"copy": lambda: cp.copyto(buf, a)}
        if args.chain == "matmul":
            fns["matmul"] = then
        for variant in [None if v == "auto" else v for v in args.variants.split(",")]:
            for label, table in settings:
                key = f"{variant or 'auto'}" + (f" {label}" if args.tuning else "")
                fns[key] = ours(variant, table)
                out.fill(cp.nan)
                fns[key]()
                if not bool(cp.array_equal(out, a.T)):
                    raise AssertionError(f"{m}x{n} {key}: wrong result")
        names, pct = list(fns), {k: [] for k in fns}
        for rnd in range(args.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            ms = time_burst({k: fns[k] for k in order}, warmup=2, repeat=args.repeat,
                            calls=args.calls)
            alone = ms.get(args.chain, 0.0)   # with --chain: its own time taken out
            for k in names:
                pct[k].append(100.0 * ms["copy"] / (ms[k] - (alone if k not in ("copy",
                                                             args.chain) else 0.0)))
            print(f"{m} x {n} round {rnd} (order {', '.join(order)}): copy "
                  f"{8.0 * m * n / ms['copy'] / 1e6:.0f} GB/s; % copy " +
                  " ".join(f"{k} {pct[k][-1]:.1f}" for k in names[1:]) +
                  (f"; {args.chain} alone {alone:.3f} ms" if args.chain else ""), flush=True)
        print(f"{m} x {n} mean % copy over {args.rounds} rounds: " +
              " | ".join(f"{k} {statistics.mean(pct[k]):.1f}" for k in names[1:]), flush=True)
        a = out = buf = None   # free the device memory before the next shape


if __name__ == "__main__":
    main()
