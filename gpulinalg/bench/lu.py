"""gpulinalg-bench lu: our blocked LU against cuSOLVER (cupyx lu_factor) in the same run.

Per size: median time of `repeat` calls after a warm-up (CUDA events on the current stream;
the driver synchronises at its end), TF/s as (2/3 n^3)/time, a normwise backward error
estimate for ours, cuSOLVER's and (n <= 4096) SciPy's factors, and the look-ahead overlap
check from the driver's timeline of the median call: sum of host panel times, sum of GPU stage
times (updates + panel transfers), wall time and wall / max(host, GPU) -- the acceptance
criterion is <= 1.1 for n = 8192, 16384, 32768 with the CPU panel.
"""

import argparse
import json
import pathlib

import numpy as np

from .common import environment, parse_sizes, print_table, random_matrix, time_gpu, write_json

EPS32 = float(np.finfo(np.float32).eps)
SCIPY_MAX_N = 4096  # the host factors at ~0.3 TF/s: skip SciPy above this


def backward_error(xp, a, lu, piv, x, block=4096):
    """||P A x - L (U x)|| / (||A||_F ||x|| n eps), float64 matrix-vector products in row blocks.

    A cheap estimate of ||PA - LU|| / (||A|| n eps) for a random x; works for CuPy and NumPy,
    any memory order of lu (ours is C-ordered, cuSOLVER's F-ordered).  Square matrices.
    """
    n = a.shape[0]
    f64 = np.float64
    ax, ux, lux = xp.empty(n, f64), xp.empty(n, f64), xp.empty(n, f64)
    anorm2 = 0.0
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        ab = a[i0:i1].astype(f64)
        anorm2 += float((ab * ab).sum())
        ax[i0:i1] = ab @ x
        ux[i0:i1] = xp.triu(lu[i0:i1].astype(f64), i0) @ x      # rows of U
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        lb = xp.tril(lu[i0:i1].astype(f64), i0 - 1)              # rows of L, unit diagonal apart
        lux[i0:i1] = lb @ ux + ux[i0:i1]
    # Pivot base: LAPACK interchanges (row i <-> piv[i], 0-based) -> (P A)[i] = A[perm[i]].
    perm = np.arange(n)
    for i, p in enumerate(np.asarray(piv.get() if hasattr(piv, "get") else piv)):
        perm[i], perm[p] = perm[p], perm[i]
    r = ax[xp.asarray(perm)] - lux
    scale = anorm2 ** 0.5 * float(xp.linalg.norm(x)) * n * EPS32
    return float(xp.linalg.norm(r)) / scale


def run(sizes, panel, repeat, seed=0):
    import cupy as cp
    from cupyx.scipy.linalg import lu_factor as cusolver_lu_factor

    from .. import lu_factor

    rows, timelines = [], []
    for n in sizes:
        a = random_matrix((n, n), seed + n, cp)
        x = cp.asarray(np.random.default_rng(seed).standard_normal(n))
        flops = 2.0 * n ** 3 / 3.0
        tls = []

        def ours():
            lu_factor(a, panel=panel, _timeline=tls)

        ms = time_gpu(ours, warmup=1, repeat=repeat)
        runs = tls[1:]  # the warm-up's timeline is not counted
        tl = sorted(runs, key=lambda t: t["wall_ms"])[len(runs) // 2]
        lu, piv = lu_factor(a, panel=panel)
        err = backward_error(cp, a, lu, piv, x)
        del lu
        cp.get_default_memory_pool().free_all_blocks()
        ms_cus = time_gpu(lambda: cusolver_lu_factor(a), warmup=1, repeat=repeat)
        lu_c, piv_c = cusolver_lu_factor(a)
        err_cus = backward_error(cp, a, lu_c, piv_c, x)
        del lu_c, piv_c
        cp.get_default_memory_pool().free_all_blocks()
        err_sp = None
        if n <= SCIPY_MAX_N:
            import scipy.linalg
            ah = cp.asnumpy(a)
            lu_s, piv_s = scipy.linalg.lu_factor(ah)
            err_sp = backward_error(np, ah, lu_s, piv_s, cp.asnumpy(x))
        row = {"n": n, "panel": panel, "nb": tl["nb"], "ms": ms, "tflops": flops / ms / 1e9,
               "cusolver_ms": ms_cus, "cusolver_tflops": flops / ms_cus / 1e9,
               "ratio": ms_cus / ms, "err": err, "err_cusolver": err_cus, "err_scipy": err_sp,
               "host_panel_ms": tl["host_panel_ms"], "gpu_ms": tl["gpu_ms"],
               "update_ms": tl["update_ms"], "transfer_ms": tl["transfer_ms"],
               "wall_ms": tl["wall_ms"], "wall_over_max": tl["wall_over_max"],
               "inverse_steps": sum(s["use_inverse"] for s in tl["steps"]),
               "steps": len(tl["steps"])}
        rows.append(row)
        timelines.append(tl)
        del a
        cp.get_default_memory_pool().free_all_blocks()
    return rows, timelines


COLUMNS = [("n", "n", "{}"), ("ms", "ours ms", "{:.2f}"), ("tflops", "ours TF/s", "{:.2f}"),
           ("cusolver_tflops", "cuSOLVER TF/s", "{:.2f}"), ("ratio", "ratio", "{:.2f}"),
           ("err", "err ours", "{:.3f}"), ("err_cusolver", "err cuSOLVER", "{:.3f}"),
           ("err_scipy", "err SciPy", "{:.3f}"), ("host_panel_ms", "sum host ms", "{:.1f}"),
           ("gpu_ms", "sum GPU ms", "{:.1f}"), ("wall_ms", "wall ms", "{:.1f}"),
           ("wall_over_max", "wall/max", "{:.3f}")]


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpulinalg-bench lu", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="2048,4096,8192,16384,32768")
    p.add_argument("--panel", default="cpu", choices=("cpu", "gpu", "auto"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None, help="write the rows (and environment) here")
    p.add_argument("--timeline", default=None, help="write the per-step timelines here")
    args = p.parse_args(argv)
    env = environment()
    print(f"{env['device']} (cc {env['compute_capability']}), CUDA {env['cuda_runtime']}, "
          f"CuPy {env['cupy']}, panel={args.panel}; TF/s = (2/3 n^3)/time; errors are "
          "||PAx - L(Ux)|| / (||A||_F ||x|| n eps)")
    rows, timelines = run(parse_sizes(args.sizes), args.panel, args.repeat)
    print_table(COLUMNS, rows, title="LU (sgetrf), ours vs cuSOLVER in the same run")
    write_json(args.json, "lu", rows, {"panel": args.panel})
    if args.timeline:
        path = pathlib.Path(args.timeline)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"environment": env, "timelines": timelines}, indent=1))
        print(f"wrote {path}")
    return 0
