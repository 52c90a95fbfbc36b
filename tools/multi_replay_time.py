"""The several-GPU LU with and without its CUDA-graph replay (gpulinalg/lu/multi_graph.py),
beside our default one-GPU call, same run: wall time with a sync, and the ordinary driver's host enqueue.

    python3 tools/multi_replay_time.py 8192,16384 [--devices 0,1] [--repeat 5]

Per size: the default one-GPU `lu_factor` of a device-resident float32 matrix, and the
distributed factorization on `--devices` (a GPU may be named twice: "0,0" runs two column
shares on one GPU, to time the host's part where a second GPU is not at hand) run by the
ordinary driver (replay off) and replayed; alternating, after warm-up (a key's second call
captures), median of `--repeat`, wall time from the call to every GPU synchronised.  The
ordinary driver's host enqueue (from one call with its timeline; in all, and by GPU and
the home's collection) is printed beside: an enqueue as long as the driver's wall means the
host set the pace, which the replay (one small kernel launch, one graph launch, one
read-back) removes.
"""

import argparse
import statistics
import time

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", help="comma-separated n")
    p.add_argument("--devices", default="0,1", help="device ids of the distributed call")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()
    import cupy as cp
    from gpulinalg.lu import graph, multi_graph
    from gpulinalg.lu.driver import INV_THRESHOLD
    from gpulinalg.lu.multi import factor_devices
    from gpulinalg.lu.panel_gpu import GpuPanel
    from gpulinalg.lu.plan import Options, block_size, device_matrix, make_plan
    from gpulinalg import lu_factor, tuning
    from gpulinalg.core.element import element as element_of

    ids = tuple(int(x) for x in args.devices.split(","))
    el = element_of(np.dtype(args.dtype))
    table = tuning.current(element=el)
    print(f"devices {ids}, {args.dtype}, {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    print(f"{'n':>6} {'nb':>4} {'1 GPU ms':>9} {'driver ms':>10} {'enqueue ms':>10} "
          f"{'by GPU / home':>15} {'replay ms':>10} {'driver / replay':>15} "
          f"{'1 GPU / replay':>14}")
    for n in (int(x) for x in args.sizes.split(",")):
        a = cp.asarray(np.random.default_rng(n).standard_normal((n, n)).astype(el.dtype))
        plan = make_plan(device_matrix(a, a, "cupy"), Options())   # its update precision
        nb = block_size(n, n, "gpu", plan.precision, len(ids), table)   # as devices=P's
        make_panel = lambda: GpuPanel(devices=len(ids), table=table, element=el)  # noqa: E731
        out = cp.empty_like(a)
        common = (ids, nb, make_panel, 1, INV_THRESHOLD, plan.precision)

        def driver(timeline=None):
            factor_devices(a, *common, timeline=timeline, out=out, table=table)

        def replay():
            assert multi_graph.factor(a, out, *common, table) is not None

        def one_gpu():
            lu_factor(a)

        for _ in range(2):   # warm-up; the replay's key: counted, then captured
            one_gpu()
            driver()
            multi_graph.factor(a, out, *common, table)
        cp.cuda.runtime.deviceSynchronize()
        times = {"one": [], "driver": [], "replay": []}
        for _ in range(args.repeat):
            for name, fn in (("one", one_gpu), ("driver", driver), ("replay", replay)):
                cp.cuda.runtime.deviceSynchronize()
                t0 = time.perf_counter()
                fn()
                for d in set(ids) | {0}:
                    cp.cuda.Device(d).synchronize()
                times[name].append((time.perf_counter() - t0) * 1e3)
        tl = []
        driver(timeline=tl)
        med = {k: statistics.median(v) for k, v in times.items()}
        by = " / ".join(f"{d['enqueue_ms']:.1f}" for d in tl[-1]["devices"])
        by += f" / {tl[-1]['enqueue_home_ms']:.1f}"
        print(f"{n:>6} {nb:>4} {med['one']:>9.2f} {med['driver']:>10.2f} "
              f"{tl[-1]['enqueue_ms']:>10.2f} {by:>15} {med['replay']:>10.2f} "
              f"{med['driver'] / med['replay']:>15.2f} {med['one'] / med['replay']:>14.2f}",
              flush=True)
        graph.clear()
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
