"""Time the GPU panel factorization alone, per leaf kind (for tuning the LU panel).

    python3 benchmarks/panel_leaf.py 2048x128 4096x128 8192x128 8192x256
    python3 benchmarks/panel_leaf.py 2048x128 4096x128 --groups 1,2,4


For each mp x w panel (row-major, random normal): median of CUDA-event timings of
getrf_panel_device with the automatic plan and with each forced leaf that fits (("cols",),
("row", LW), ("cluster", LW), and (LW, RPT) for the tile leaf), and the
microseconds per pivot column.  The panel is restored from a copy before every call (outside
the timed region).
"""
import statistics
import sys

import cupy as cp

from gpulinalg.lu import panel_gpu as _panel_gpu

LEAVES = [None, ("cols", 16, 4, 512), ("cols", 8, 8, 512), ("cols", 4, 16, 512),
          ("row", 128), ("row", 64), ("row", 32), ("cluster", 128), ("cluster", 64),
          ("cluster", 32), (32, 4)]


def time_panel(a0, leaf, ws, repeat=20):
    a = a0.copy()
    piv = cp.empty(min(a.shape), dtype=cp.int32)
    times = []
    for i in range(repeat + 3):
        a[...] = a0
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        _panel_gpu.getrf_panel_device(a, piv, ws, leaf=leaf)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main(shapes):
    ws = _panel_gpu.PanelWorkspace()
    print(f"{'panel':>10s} {'leaf':>16s} {'ms':>8s} {'us/column':>10s}")
    for s in shapes:
        mp, w = (int(x) for x in s.split("x"))
        a0 = cp.random.default_rng(mp + w).standard_normal((mp, w), dtype=cp.float32)
        for leaf in LEAVES:
            try:
                ms = time_panel(a0, leaf, ws)
            except (ValueError, RuntimeError) as exc:   # the leaf does not fit this panel
                print(f"{s:>10s} {str(leaf):>16s}   -- {str(exc)[:60]}")
                continue
            print(f"{s:>10s} {str(leaf or 'auto ' + str(ws.plan(mp)[:2])):>16s} "
                  f"{ms:8.3f} {1e3 * ms / min(mp, w):10.2f}", flush=True)


def main_groups(shapes, groups, rounds=3):
    ws = _panel_gpu.PanelWorkspace()
    saved = _panel_gpu.COLS_GROUPS
    print(f"{'panel':>10s} {'leaf':>16s} {'groups':>6s} {'ms':>8s} {'us/column':>10s}")
    try:
        for s in shapes:
            mp, w = (int(x) for x in s.split("x"))
            a0 = cp.random.default_rng(mp + w).standard_normal((mp, w), dtype=cp.float32)
            leaf = ("cols",) + _panel_gpu.cols_shape(mp, 1 << 30)
            times = {g: [] for g in groups}
            for _ in range(rounds):
                for g in groups:
                    _panel_gpu.COLS_GROUPS = g
                    times[g].append(time_panel(a0, leaf, ws))
            for g in groups:
                ms = statistics.median(times[g])
                print(f"{s:>10s} {str(leaf):>16s} {g:6d} {ms:8.3f} {1e3 * ms / min(mp, w):10.2f}"
                      f"   (rounds {' / '.join(f'{t:.3f}' for t in times[g])})", flush=True)
    finally:
        _panel_gpu.COLS_GROUPS = saved


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--groups" in args:
        i = args.index("--groups")
        values = [int(v) for v in args[i + 1].split(",")]
        main_groups(args[:i] + args[i + 2:] or ["2048x128", "4096x128"], values)
    else:
        main(args or ["2048x128", "4096x128", "8192x128", "8192x256", "16384x256"])
