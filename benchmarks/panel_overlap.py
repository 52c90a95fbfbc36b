"""Does a panel leaf share the GPU with a running SGEMM?  Cooperative against plain launch.

    python3 benchmarks/panel_overlap.py 8192 16384 32768
    python3 benchmarks/panel_overlap.py 8064 --gemm 8064,7936,128 --precision 3xtf32 --coop-only

An SGEMM C -= A B (default 16384 x 16384 x 256, FP32, our kernel; --precision 3xtf32 takes the
LU's tensor-core update, one block per tile) is enqueued on a low-priority stream, then
a 128-wide row-leaf panel of mp rows on the device's highest-priority stream: once launched
cooperatively (as the LU does), once as a plain launch (same kernel; its grid fits the device,
and nothing else spins on it here, so all its blocks become resident as SGEMM blocks retire).
Prints the median (10 runs) of the panel's time alone and beside the SGEMM, of the SGEMM's
time alone and beside the panel, and of the pair's wall time (first start to last end).
"""

import argparse
import statistics

import numpy as np

from gpulinalg.gemm.simt import PRECISIONS


def main(sizes, shape, precision, kinds):
    import cupy as cp

    from gpulinalg.lu import panel_gpu as _panel_gpu
    from gpulinalg.gemm.simt import product_into
    from gpulinalg.core.kernels import get_kernel
    from gpulinalg.bench.common import random_matrix

    from gpulinalg.lu.steps import _priority_stream
    low = cp.cuda.Stream(non_blocking=True)
    high = _priority_stream(cp)     # the LU's panel stream
    m, n, k = shape
    a, b = random_matrix((m, k), 1), random_matrix((k, n), 2)
    c = random_matrix((m, n), 3)
    ws = _panel_gpu.PanelWorkspace()
    steps = ws.steps(("row", 128, 1))       # the LU's launcher of the 128-wide row leaf
    name = _panel_gpu.row_kernel_name(128, 1)
    kernels = {"coop": get_kernel(_panel_gpu.FAMILY, name, cooperative=True),
               "plain": get_kernel(_panel_gpu.FAMILY, name)}

    def panel(kind, p, piv):
        steps.kernel = kernels[kind]
        steps.leaf(p, piv, 0)

    def run(kind, p0, with_gemm, with_panel):
        p = p0.copy() if with_panel else None
        piv = cp.empty(128, dtype=np.int32)
        cp.cuda.Device().synchronize()
        ev = [cp.cuda.Event() for _ in range(4)]
        if with_gemm:
            with low:
                ev[0].record()
                product_into(-1.0, a, b, 1.0, c, precision, persistent=False)
                ev[1].record()
        if with_panel:
            with high:
                ev[2].record()
                panel(kind, p, piv)
                ev[3].record()
        cp.cuda.Device().synchronize()
        t = cp.cuda.get_elapsed_time
        g = t(ev[0], ev[1]) if with_gemm else None
        q = t(ev[2], ev[3]) if with_panel else None
        wall = (max(t(ev[0], ev[1]), t(ev[0], ev[3])) if with_gemm and with_panel
                else g if with_gemm else q)
        return g, q, wall

    def med(kind, p0, with_gemm, with_panel):
        runs = [run(kind, p0, with_gemm, with_panel) for _ in range(12)][2:]
        return [statistics.median(r[i] for r in runs) if runs[0][i] is not None else None
                for i in range(3)]

    gemm_alone = med("coop", None, True, False)[0]
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: SGEMM {m}x{n}x{k} "
          f"({precision}) alone {gemm_alone:.3f} ms ({2e-9 * m * n * k / gemm_alone:.1f} TF/s); "
          f"panel stream priority "
          f"{getattr(high, 'priority', '(not exposed)')}")
    print(f"{'rows':>6s} {'launch':>6s} {'panel alone':>12s} {'panel beside':>13s} "
          f"{'SGEMM beside':>13s} {'wall':>8s} {'serial':>8s}")
    for mp in sizes:
        p0 = random_matrix((mp, 128), mp)
        for kind in kinds:
            alone = med(kind, p0, False, True)[1]
            g, q, wall = med(kind, p0, True, True)
            print(f"{mp:6d} {kind:>6s} {alone:12.3f} {q:13.3f} {g:13.3f} {wall:8.3f} "
                  f"{alone + gemm_alone:8.3f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=int, nargs="*", default=[8192, 16384, 32768])
    ap.add_argument("--gemm", default="16384,16384,256", help="m,n,k of the SGEMM")
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS)
    ap.add_argument("--coop-only", action="store_true", help="only the LU's cooperative launch")
    args = ap.parse_args()
    main(args.rows, tuple(int(x) for x in args.gemm.split(",")), args.precision,
         ("coop",) if args.coop_only else ("coop", "plain"))
