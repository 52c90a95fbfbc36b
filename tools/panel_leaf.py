"""Time the GPU panel factorization alone, per leaf kind (for tuning the LU panel).

    python3 tools/panel_leaf.py 2048x128 4096x128 8192x128 8192x256
    python3 tools/panel_leaf.py 8192x128 --leaves auto,row128 --tuning row_block_cap=16,32,64

For each mp x w panel (row-major, random normal): median of CUDA-event timings of
gpulinalg.lu.panel_gpu.getrf_panel_device with the automatic plan and with each forced leaf
that fits (("row", LW) and (LW, RPT) for the tile leaf), and the
microseconds per pivot column.  The panel is restored from a copy before every call (outside
the timed region).  With --tuning FIELD=v1,v2 (fields of gpulinalg/tuning.py) every leaf runs
under each value, `gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`, with a
workspace of its own (a workspace keeps the plans it made), the settings alternating over
--rounds rounds.
"""
import argparse
import statistics

LEAVES = {"auto": None, "row128": ("row", 128), "row64": ("row", 64), "row32": ("row", 32),
          "tile32": (32, 4)}


def time_panel(a0, leaf, ws, repeat=20):
    import cupy as cp

    from gpulinalg.lu.panel_gpu import getrf_panel_device
    a = a0.copy()
    piv = cp.empty(min(a.shape), dtype=cp.int32)
    times = []
    for i in range(repeat + 3):
        a[...] = a0
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        getrf_panel_device(a, piv, ws, leaf=leaf)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("shapes", nargs="*",
                   default=["2048x128", "4096x128", "8192x128", "8192x256", "16384x256"])
    p.add_argument("--leaves", default=",".join(LEAVES),
                   help=f"leaves, comma-separated, of {', '.join(LEAVES)}")
    p.add_argument("--rounds", type=int, default=3)
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import tuning
    from gpulinalg.bench.common import describe_tuning, tuning_settings
    from gpulinalg.lu.panel_gpu import PanelWorkspace

    leaves = [x for x in args.leaves.split(",") if x]
    for x in leaves:
        if x not in LEAVES:
            p.error(f"unknown leaf {x!r}")
    settings = tuning_settings(args.tuning)
    print(describe_tuning(args.tuning))
    print(f"{'panel':>10s} {'leaf':>8s} {'tuning':>24s} {'ms':>8s} {'us/column':>10s}")
    for s in args.shapes:
        mp, w = (int(x) for x in s.split("x"))
        a0 = cp.random.default_rng(mp + w).standard_normal((mp, w), dtype=cp.float32)
        cases = {}
        for leaf in leaves:
            for label, table in settings:
                with tuning.override(table):
                    ws = PanelWorkspace()
                    try:
                        time_panel(a0, LEAVES[leaf], ws, repeat=1)
                    except (ValueError, RuntimeError) as exc:   # the leaf does not fit
                        print(f"{s:>10s} {leaf:>8s} {label:>24s}   -- {str(exc)[:60]}")
                        continue
                cases[leaf, label] = (table, ws, [])
        for _ in range(args.rounds):
            for (leaf, _), (table, ws, times) in cases.items():
                with tuning.override(table):
                    times.append(time_panel(a0, LEAVES[leaf], ws))
        for (leaf, label), (_, ws, times) in cases.items():
            ms = statistics.median(times)
            print(f"{s:>10s} {leaf:>8s} {label:>24s} {ms:8.3f} {1e3 * ms / min(mp, w):10.2f}"
                  f"   (rounds {' / '.join(f'{t:.3f}' for t in times)})", flush=True)


if __name__ == "__main__":
    main()
