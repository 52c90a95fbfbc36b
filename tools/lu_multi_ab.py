"""LU on several GPUs: the phases (scatter, factorization, gather) and the per-device busy
times for a few settings, against one GPU in the same run.

    python3 tools/lu_multi_ab.py 32768 --devices 2,4 --nb 256,384 \
        --tuning scatter_streams=1,2 --tuning row_block_cap_multi=160,32

--tuning FIELD=v1,v2 (a field of gpulinalg/tuning.py's Tuning) runs each value under
`gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))` (e.g. scatter_streams=1,2,
panel_first_columns=16384,0); several --tuning run every combination, each against the one-GPU
time under the same table.

Prints per setting the one-GPU time, then per device count the median wall ms of
lu_factor(cupy array, devices=P) (3 calls after a warm-up; --host DTYPE: a NumPy array), its
ratio to the one-GPU time, and from one synchronised call the phase times and, per device,
the update stream's busy time and its own panels' time.  --steps FILE also writes that
call's per-step timeline (JSON) and prints it in 8 groups of steps: the group's wall (from
the previous group's end on the slowest device), the busiest device's update time and the
panels' time in it.
"""

import argparse
import itertools
import json
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("n", type=int)
    p.add_argument("--devices", default="2")
    p.add_argument("--nb", default="256",
                   help="block sizes, comma-separated (0: lu_factor's rule for each GPU count)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--precision", default="auto", help="lu_factor's precision=")
    p.add_argument("--steps", help="write the per-step timelines (JSON) to this file")
    p.add_argument("--host", help="the input as a host NumPy array of this dtype (float32, "
                                  "float16) instead of a CuPy array")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.bench.common import random_matrix, tuning_settings
    from gpulinalg.testing.lu import lu_factor as lu_factor_hooks

    settings = tuning_settings(args.tuning)

    a = random_matrix((args.n, args.n), 1, cp)
    if args.host:
        a = cp.asnumpy(a).astype(args.host)

    def wall(**kw):
        times = []
        for i in range(args.repeat + 1):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            gpulinalg.lu_factor(a, precision=args.precision, **kw)
            cp.cuda.Device().synchronize()
            if i:
                times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    recorded = []
    for nb, (label, table) in itertools.product((int(x) for x in args.nb.split(",")), settings):
        bs = nb or None
        with tuning.override(table):
            one = wall(block_size=bs)
            print(f"n={args.n} nb={nb} {label}: 1 GPU {one:.1f} ms", flush=True)
            for ndev in (int(x) for x in args.devices.split(",")):
                ms = wall(block_size=bs, devices=ndev)
                tl = []
                lu_factor_hooks(a, block_size=bs, devices=ndev, precision=args.precision,
                                timeline=tl)
                t = tl[-1]
                per = " ".join(f"[{d['update_ms']:.0f}/{d['panel_ms']:.0f}]" for d in t["devices"])
                print(f"  {ndev} GPUs: {ms:.1f} ms, x{one / ms:.2f}; "
                      f"scatter {t['scatter_ms']:.1f} factor {t['factor_ms']:.1f} gather "
                      f"{t['gather_ms']:.1f} (host enqueue {t['enqueue_ms']:.1f}); "
                      f"per device [update/panel ms] {per}", flush=True)
                if args.steps:
                    print_groups(t)
                    recorded.append(dict(t, setting=label))
    if args.steps:
        with open(args.steps, "w") as f:
            json.dump(recorded, f)


def print_groups(t, groups=8):
    """The timeline's steps in `groups` groups: wall, busiest update stream, panels (ms)."""
    devs = t["devices"]
    nsteps = 1 + max(s for d in devs for s, _, _ in d["steps"])
    ends = {}
    for d in devs:
        for s, _, b in d["steps"]:
            ends[s] = max(ends.get(s, 0.0), b)
    prev = 0.0
    for g in range(groups):
        lo, hi = g * nsteps // groups, (g + 1) * nsteps // groups
        if lo == hi:
            continue
        inside = lambda rows: sum(b - a for s, a, b in rows if lo <= s < hi)
        busy = max(inside(d["steps"]) for d in devs)
        panels = sum(inside(d["panel_steps"]) for d in devs)
        end = max(ends[s] for s in range(lo, hi) if s in ends)
        print(f"    steps {lo:3d}-{hi - 1:3d}: wall {end - prev:7.1f} ms, busiest update "
              f"{busy:7.1f}, panels {panels:6.1f}", flush=True)
        prev = end


if __name__ == "__main__":
    main()
