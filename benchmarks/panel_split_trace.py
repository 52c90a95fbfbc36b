"""Where the time of getrf_leaf_split goes: the kernel compiled with -DGETRF_SPLIT_TRACE
(clock64 stamps by lane 0 of the critical warp per column and per sub-block, and by bulk
thread 0 per sub-block), one launch per panel height after warm-up, medians printed.

    python3 benchmarks/panel_split_trace.py 1024 4096 8192 [-DNAME=VALUE ...]

Per column (critical warp): search + record stores (publish), the poll of the G records
(poll), the choice, positions, multipliers and the sub-block's fmafs (apply).  Per sub-block:
the critical warp's wait for the bulk (N wait) and, for bulk thread 0: its wait for the
critical warp (F: from the previous sub-block's end), the pivot rows' publication, the
gather of U12 (poll + substitution), the bulk barrier, the next sub-block's columns, the rest.
Development tool: -DSPLIT_NO_REST skips the rest of each update (wrong factors, timing only).
"""
import statistics
import sys

import cupy as cp
import numpy as np

from gpulinalg import _kernels, _panel_gpu

W = 128


def main(sizes, defines=()):
    name = f"getrf_leaf_split<{_panel_gpu.SPLIT_KB}>"
    mod = cp.RawModule(code=_kernels.source("getrf_panel"),
                       options=("--std=c++17", _kernels.arch_option(), "-DGETRF_SPLIT_TRACE")
                       + tuple(defines), name_expressions=[name],
                       enable_cooperative_groups=True)
    print("defines:", " ".join(defines) or "-")
    mod.compile()
    ctrace = cp.ndarray((32, 128, 4), cp.uint64, mod.get_global("g_split_ctrace"))
    strace = cp.ndarray((32, 16, 8), cp.uint64, mod.get_global("g_split_strace"))
    ghz = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["clockRate"] / 1e6
    kern = mod.get_function(name)
    kern.max_dynamic_shared_size_bytes = _panel_gpu.SPLIT_SMEM
    ws = _panel_gpu.PanelWorkspace()
    us = lambda cycles: cycles / ghz / 1e3
    for mp in sizes:
        g = _panel_gpu.split_blocks(mp)
        a0 = cp.random.default_rng(mp).standard_normal((mp, W), dtype=cp.float32)
        a = a0.copy()
        piv = cp.empty(W, cp.int32)
        times = []
        for _ in range(8):
            a[...] = a0
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            kern((g,), (_panel_gpu.SPLIT_THREADS,),
                 (np.int32(mp), np.int32(W), a, np.int64(W), piv, ws.info, np.int32(0),
                  ws.keys, ws.rows, ws.rows[_panel_gpu.SPLIT_UBUF:],
                  np.uint32(ws.next_tags(min(mp, W)))), shared_mem=_panel_gpu.SPLIT_SMEM)
            e1.record()
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1))
        c = cp.asnumpy(ctrace).astype(np.int64)
        s = cp.asnumpy(strace).astype(np.int64)
        b = min(1, g - 1)
        cols = [(us(c[b, j, 1] - c[b, j, 0]), us(c[b, j, 2] - c[b, j, 1]),
                 us(c[b, j, 3] - c[b, j, 2]),
                 us(c[b, j + 1, 0] - c[b, j, 0]) if j % 8 != 7 else float("nan"))
                for j in range(W - 1)]
        med = [statistics.median(v for v in col if v == v) for col in zip(*cols)]
        print(f"{mp} x {W}, G = {g}: kernel {statistics.median(times) * 1e3:.1f} us "
              f"({statistics.median(times) * 1e3 / W:.2f} us a column); block {b}, us at "
              f"{ghz:.2f} GHz")
        print(f"  column (median): publish {med[0]:.2f}  poll {med[1]:.2f}  apply {med[2]:.2f}"
              f"  column-to-column {med[3]:.2f}")
        subs = []
        for k in range(1, W // 8 - 1):
            r = s[b, k]
            prev = s[b, k - 1]
            subs.append((us(r[1] - r[0]),                      # critical: N wait
                         us(c[b, 8 * k + 7, 3] - c[b, 8 * k, 0]),  # critical: 8 columns
                         us(r[2] - prev[7]),                   # bulk: F wait after the rest
                         us(r[3] - r[2]), us(r[4] - r[3]), us(r[5] - r[4]), us(r[6] - r[5]),
                         us(r[7] - r[6]),
                         us(s[b, k + 1, 1] - r[1])))           # sub-block period (critical)
        med = [statistics.median(col) for col in zip(*subs)]
        print("  sub-block (median): " + "  ".join(
            f"{n} {v:.2f}" for n, v in zip(("N-wait", "8 cols", "F-wait", "publish", "gather",
                                            "bar", "next", "rest", "period"), med)), flush=True)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:] if not x.startswith("-D")] or [1024, 4096, 8192],
         [x for x in sys.argv[1:] if x.startswith("-D")])
