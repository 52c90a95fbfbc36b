"""Where the time of getrf_panel_cols goes: the kernel compiled with -DGETRF_COLS_TRACE
(clock64 and %globaltimer stamps by thread 0 of every block at every slab phase), one
launch per panel shape after warm-up, the phases of the critical path printed per slab.

    python3 benchmarks/panel_cols_trace.py 2048 4096 8192 [-DNAME=VALUE ...]

Block s is on the critical path at slab s: it waits for slab s-1 (poll), turns its pivots into
entries (entries), swaps rows (swaps), computes U12 while the multipliers are copied in (u12),
sets the U rows and waits for the copies (urows), applies the update (update), then factors
its own slab (factor) and publishes it (publish: both steps).  "handoff" is the globaltimer
gap from block s-1's first flag store (its own rows, pivots, mask) to block s seeing it.
Development tool: the stamps cost a few cycles each.  With several handoff groups per slab
(COLS_GROUPS) a slab's stamps are its last group's (factor and publish: the whole slab).
"""
import statistics
import sys

import cupy as cp
import numpy as np

from gpulinalg.core import kernels as _kernels
from gpulinalg.lu import panel_gpu as _panel_gpu

W = 128


def main(sizes, defines=()):
    names = [_panel_gpu.cols_kernel_name(*shape) for shape in _panel_gpu.COLS_SHAPES]
    mod = cp.RawModule(code=_kernels.source("getrf_panel"),
                       options=("--std=c++17", _kernels.arch_option(), "-DGETRF_COLS_TRACE")
                       + tuple(defines),
                       name_expressions=names, enable_cooperative_groups=True)
    print("defines:", " ".join(defines) or "-")
    mod.compile()
    ptr = mod.get_global("g_cols_trace")
    trace = cp.ndarray((2, 32, 32, 16), cp.uint64, ptr)
    ftrace = cp.ndarray((32, 16, 8), cp.uint64, mod.get_global("g_cols_ftrace"))
    ghz = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["clockRate"] / 1e6
    ws = _panel_gpu.PanelWorkspace()
    for mp in sizes:
        cw, rpt, nt = _panel_gpu.cols_shape(mp, 1 << 30)
        smem = _panel_gpu.cols_smem(cw, rpt, nt)
        kern = mod.get_function(_panel_gpu.cols_kernel_name(cw, rpt, nt))
        kern.max_dynamic_shared_size_bytes = smem
        a0 = cp.random.default_rng(mp).standard_normal((mp, W), dtype=cp.float32)
        a = a0.copy()
        piv = cp.empty(W, cp.int32)
        ns = -(-min(mp, W) // cw)
        times = []
        for it in range(8):
            a[...] = a0
            trace.fill(0)
            lbuf, masks, flag, tag0 = ws.cols_state(2 * min(mp, W))
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            kern((-(-W // cw),), (nt,),
                 (np.int32(mp), np.int32(W), a, np.int64(W), piv, ws.info, np.int32(0),
                  lbuf, masks, flag, np.uint32(tag0)), shared_mem=smem)
            e1.record()
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1))
        clk, gt = (cp.asnumpy(trace[0]).astype(np.int64), cp.asnumpy(trace[1]).astype(np.int64))
        us = lambda cycles: cycles / ghz / 1e3
        print(f"{mp} x {W}, CW={cw} RPT={rpt} T={nt}: kernel "
              f"{statistics.median(times) * 1e3:.1f} us (events), {ns} slabs; per slab s "
              f"(block s), us at {ghz:.2f} GHz:")
        print(f"{'s':>3s} {'poll':>7s} {'entries':>7s} {'swaps':>7s} {'u12':>7s} {'urows':>7s} "
              f"{'update':>7s} {'factor':>7s} {'publish':>7s} {'handoff':>7s} {'slab':>7s}")
        rows = []
        for s in range(1, ns):
            r = clk[s, s - 1]
            f = clk[s, s]
            poll, ent, swp, u12 = (us(r[1] - r[0]), us(r[8] - r[1]), us(r[9] - r[8]),
                                   us(r[2] - r[9]))
            urows, upd = us(r[3] - r[2]), us(r[4] - r[3])
            fac, pub = us(f[6] - f[5]), us(f[7] - f[6])
            handoff = (gt[s, s - 1, 1] - gt[s - 1, s - 1, 10]) / 1e3
            slab = (gt[s, s, 7] - gt[s - 1, s - 1, 7]) / 1e3
            rows.append((poll, ent, swp, u12, urows, upd, fac, pub, handoff, slab))
            if s <= 3 or s == ns - 1:
                print(f"{s:3d} " + " ".join(f"{v:7.2f}" for v in rows[-1]))
        med = [statistics.median(c) for c in zip(*rows)]
        print("med " + " ".join(f"{v:7.2f}" for v in med), flush=True)
        # Inside the factor (warp 0 of block 1, its columns): cycles between the points
        # start | candidate published | after the barrier | pivot chosen | swapped, multipliers
        # | step done | next column.
        ft = cp.asnumpy(ftrace).astype(np.int64)[1]
        print("  factor, block 1, cycles per column: publish / barrier / choose / swap+mult / "
              "step / to next")
        for jl in range(min(cw, 4)):
            f = ft[jl]
            nxt = ft[jl + 1][0] if jl + 1 < cw else f[5]
            print(f"  col {jl}: " + " / ".join(str(int(v)) for v in
                  (f[1] - f[0], f[2] - f[1], f[3] - f[2], f[4] - f[3], f[5] - f[4], nxt - f[5])))


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:] if not x.startswith("-D")] or [2048, 4096, 8192],
         [x for x in sys.argv[1:] if x.startswith("-D")])
