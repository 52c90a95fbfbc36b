"""Per-step times of a one-GPU LU (the driver's timeline) under each of several tuning tables.

    python3 tools/lu_steps.py 8192 --tuning row_block_cap=32,64 --group 8

Per setting (--tuning FIELD=v1,v2, fields of gpulinalg/tuning.py: each value under
`gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`), --repeat instrumented
calls on one random matrix (a call with a timeline runs the
ordinary driver, never a graph replay), then per group of --group steps the medians over the
calls of: the panel's time (recv_ms: from the panel stream reaching the factorization to its
end), the look-ahead chain (next_ms), the update of the rest, and the group's wall (first
update start to the next group's); the panel's row count at the group's first step.  Where
the LU spends its steps and which of the three bounds each group; `gpulinalg-bench lu`
times the uninstrumented calls.
"""

import argparse
import statistics


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("n", type=int)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--group", type=int, default=8, help="steps per printed row")
    p.add_argument("--precision", default="auto")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import tuning
    from gpulinalg.bench.common import describe_tuning, random_matrix, tuning_settings
    from gpulinalg.testing.lu import lu_factor

    a = random_matrix((args.n, args.n), 0, cp)
    print(f"n = {args.n}, precision {args.precision}, {args.repeat} instrumented calls; "
          f"{describe_tuning(args.tuning)}")
    for label, table in tuning_settings(args.tuning):
        with tuning.override(table):
            lu_factor(a, precision=args.precision)   # compile, warm up
            tls = []
            for _ in range(args.repeat):
                lu_factor(a, precision=args.precision, timeline=tls)
            steps = len(tls[0]["steps"])
            print(f"\n{label}: wall {statistics.median(t['wall_ms'] for t in tls):.2f} "
                  f"ms (median), {steps} steps of nb = {tls[0]['nb']}")
            print("steps     rows   panel ms  next ms  update ms  wall ms")
            for g0 in range(0, steps, args.group):
                g1 = min(g0 + args.group, steps)

                def med(f):
                    return statistics.median(f(t["steps"]) for t in tls)

                panel = med(lambda s: sum(r["recv_ms"] or 0.0 for r in s[g0:g1]))
                nxt = med(lambda s: sum(r["next_ms"] or 0.0 for r in s[g0:g1]))
                upd = med(lambda s: sum(r["update_ms"] for r in s[g0:g1]))
                span = med(lambda s: (s[g1]["update_start"] if g1 < steps else s[-1]["update_end"])
                           - s[g0]["update_start"])
                rows = args.n - tls[0]["steps"][g0]["j0"]
                print(f"{g0:3d}-{g1 - 1:<3d} {rows:7d} {panel:10.3f} {nxt:8.3f} {upd:10.3f} "
                      f"{span:8.3f}")


if __name__ == "__main__":
    main()
