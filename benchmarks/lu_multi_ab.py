"""LU on several GPUs: the phases (scatter, factorization, gather) and the per-device busy
times for a few settings, against one GPU in the same run.

    python3 benchmarks/lu_multi_ab.py 32768 --devices 2,4 --nb 256,384 \
        --vary SCATTER_STREAMS=1,2

--vary NAME=v1,v2 sets the integer constant NAME of gpulinalg/_lu_multi.py to each value in
turn (e.g. SCATTER_STREAMS=1,2, PANEL_FIRST=1,0).

Prints one line per setting: median wall ms of lu_factor(cupy array, devices=P) (3 calls
after a warm-up), the one-GPU time, their ratio, and from one synchronised call the phase
times and, per device, the update stream's busy time and its own panels' time.
"""

import argparse
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("--devices", default="2")
    p.add_argument("--nb", default="256")
    p.add_argument("--vary", default="SCATTER_STREAMS=2",
                   help="NAME=v1,v2: a constant of gpulinalg/_lu_multi.py and its values")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    import cupy as cp

    import gpulinalg
    from gpulinalg import _lu_multi
    from gpulinalg.bench.common import random_matrix

    a = random_matrix((args.n, args.n), 1, cp)

    def wall(**kw):
        times = []
        for i in range(args.repeat + 1):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            gpulinalg.lu_factor(a, **kw)
            cp.cuda.Device().synchronize()
            if i:
                times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    for nb in (int(x) for x in args.nb.split(",")):
        one = wall(block_size=nb)
        print(f"n={args.n} nb={nb} 1 GPU: {one:.1f} ms", flush=True)
        for ndev in (int(x) for x in args.devices.split(",")):
            name, values = args.vary.split("=")
            for value in (int(x) for x in values.split(",")):
                setattr(_lu_multi, name, type(getattr(_lu_multi, name))(value))
                ms = wall(block_size=nb, devices=ndev)
                tl = []
                gpulinalg.lu_factor(a, block_size=nb, devices=ndev, _timeline=tl)
                t = tl[-1]
                per = " ".join(f"[{d['update_ms']:.0f}/{d['panel_ms']:.0f}]" for d in t["devices"])
                print(f"  {ndev} GPUs {name}={value}: {ms:.1f} ms, x{one / ms:.2f}; "
                      f"scatter {t['scatter_ms']:.1f} factor {t['factor_ms']:.1f} gather "
                      f"{t['gather_ms']:.1f} (host enqueue {t['enqueue_ms']:.1f}); "
                      f"per device [update/panel ms] {per}", flush=True)


if __name__ == "__main__":
    main()
