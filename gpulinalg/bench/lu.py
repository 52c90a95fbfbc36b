"""gpulinalg-bench lu: our blocked LU against cuSOLVER (cupyx lu_factor) in the same run.

By default it runs what a user gets: lu_factor's defaults (panel="auto", precision="auto"),
square sizes 2048-32768 and two rectangular shapes of float32 matrices (--dtype float64 or
float32,float64 for NumPy's default dtype), each against cuSOLVER's getrf (sgetrf, dgetrf) on
the same matrix.  The summary gives per shape our TF/s, cuSOLVER's, their ratio (cuSOLVER's time over
ours: above 1, ours is faster) and our normwise backward error; --wide adds every column.

Per size: median time of --repeat calls after a warm-up (CUDA events on the current stream;
the driver synchronises at its end), TF/s as (m n^2 - n^3/3)/time (m >= n), a backward error
estimate ||PAx - L(Ux)|| / (||A||_F ||x|| n eps) for ours, cuSOLVER's and (n <= 4096)
SciPy's factors, and the look-ahead overlap check: the sum of GPU stage times (updates +
panel transfers) from the timeline of the median of three instrumented calls, and the wall
time and sum of host panel times of the median of three uninstrumented ones (the driver's own
perf_counter reads, no events), and wall / max(host, GPU), which the look-ahead keeps at or
below 1.1 for n = 8192, 16384, 32768 with the CPU panel.  The instrumented calls' own ratio
is reported beside it (their events cost the host time between panels).

With --devices 1,2 (,4) each configuration also runs on that many GPUs (lu_factor(...,
devices=P), the input and the result on the current GPU, the column scatter and gather
included in the time), and `scaling` is the time on one GPU over the time on P, same run.
The timed calls replay a CUDA graph where the call does (`no graph ms`: the same calls
without); the wide table adds, from one instrumented call of the ordinary driver, its
phases (scatter, factorization, gather), the host's enqueue of the steps (in all, per step,
and by GPU: the time spent issuing each GPU's operations, and the home's collection) beside
each GPU's update-stream time: an enqueue as long as the factorization means the host, not
the GPUs, set the pace.

With --tuning FIELD=v1,v2 (gpulinalg/tuning.py) every configuration also runs under each
value, the table in force with that field replaced.
"""

import contextlib
import json
import pathlib

import numpy as np

from ..gemm.dispatch import PRECISIONS
from ..lu.plan import PANELS
from .common import (Progress, add_tuning_argument, environment, figure, name_list, plot_path,
                     print_table, random_matrix, save_figure, shape_list, size_label, size_list,
                     time_gpu, tuning_settings, varying, write_json)

SCIPY_MAX_N = 4096  # the host factors at ~0.3 TF/s: skip SciPy above this
DTYPES = ("float32", "float64")


def backward_error(xp, a, lu, piv, x, block=4096):
    """||P A x - L (U x)|| / (||A||_F ||x|| n eps), float64 matrix-vector products in row blocks
    (eps of a's dtype).

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
    scale = anorm2 ** 0.5 * float(xp.linalg.norm(x)) * n * float(np.finfo(a.dtype).eps)
    return float(xp.linalg.norm(r)) / scale


def lu_flops(m, n):
    """LAPACK's count for getrf: m n^2 - n^3/3 (m >= n), and the transpose for wide."""
    m, n = max(m, n), min(m, n)
    return m * n * n - n ** 3 / 3.0


def _timeline_fields(tls, clock=()):
    """The look-ahead columns from the median call's timeline (one GPU), or the phases of a
    separate, synchronised call (several GPUs); the calls are not the timed ones.

    One GPU: wall_over_max is the median uninstrumented call's (a HostClock: perf_counter
    only) wall over the larger of its own host panel time and the timeline's GPU time (device
    time, which the events do not change); the instrumented call's own ratio, whose events
    cost the host time between panels, is wall_over_max_timeline."""
    runs = tls
    if not runs:
        return {}
    if "devices" in runs[0]:
        tl = runs[-1]
        devs = tl["devices"]
        return {"nb": tl["nb"], "scatter_ms": tl["scatter_ms"], "factor_ms": tl["factor_ms"],
                "gather_ms": tl["gather_ms"], "enqueue_ms": tl["enqueue_ms"],
                "enqueue_step_us": tl["enqueue_ms"] * 1e3 / max(1, *(len(d["steps"])
                                                                     for d in devs)),
                "enqueue_by_gpu": " / ".join(f"{d['enqueue_ms']:.1f}" for d in devs),
                "enqueue_home_ms": tl["enqueue_home_ms"],
                "update_by_gpu": " / ".join(f"{d['update_ms']:.1f}" for d in devs),
                "update_ms": max(d["update_ms"] for d in devs),
                "panel_ms": sum(d["panel_ms"] for d in devs), "timeline": tl}
    median = lambda ts: sorted(ts, key=lambda t: t["wall_ms"])[len(ts) // 2]
    tl = median(runs)
    plain = median(clock) if clock else tl
    return {"nb": tl["nb"], "host_panel_ms": plain["host_panel_ms"], "gpu_ms": tl["gpu_ms"],
            "update_ms": tl["update_ms"], "transfer_ms": tl["transfer_ms"],
            "wall_ms": plain["wall_ms"],
            "wall_over_max": plain["wall_ms"] / max(plain["host_panel_ms"], tl["gpu_ms"], 1e-9),
            "wall_ms_timeline": tl["wall_ms"], "host_panel_ms_timeline": tl["host_panel_ms"],
            "wall_over_max_timeline": tl["wall_over_max"],
            "next_ms": tl.get("next_ms"),
            "inverse_steps": sum(s["use_inverse"] for s in tl["steps"]),
            "steps": len(tl["steps"]), "timeline": tl}


def _cusolver(a, x, repeat):
    """(ms, backward error or None) of cuSOLVER's getrf (cupyx lu_factor) on a."""
    import cupy as cp
    from cupyx.scipy.linalg import lu_factor as cusolver_lu_factor
    ms = time_gpu(lambda: cusolver_lu_factor(a), warmup=1, repeat=repeat)
    err = None
    if x is not None:
        lu, piv = cusolver_lu_factor(a)
        err = backward_error(cp, a, lu, piv, x)
        del lu, piv
    cp.get_default_memory_pool().free_all_blocks()
    return ms, err


def _scipy_error(a, x):
    """SciPy's backward error on the host copy of a (square, n <= SCIPY_MAX_N), else None."""
    import cupy as cp
    if x is None or a.shape[0] > SCIPY_MAX_N:
        return None
    import scipy.linalg
    ah = cp.asnumpy(a)
    lu, piv = scipy.linalg.lu_factor(ah)
    return backward_error(np, ah, lu, piv, cp.asnumpy(x))


def _ours(a, x, kw, repeat):
    """Timed calls, calls without graph replay, instrumented calls and the error of lu_factor
    on a with the options kw: a row's fields (the timeline under "timeline")."""
    import cupy as cp

    from .. import lu_factor
    from ..lu import graph
    from ..lu.driver import HostClock
    from ..lu.plan import Options, device_matrix, make_plan, replayed
    from ..testing.lu import lu_factor as lu_factor_hooks

    m, n = a.shape
    # Two warm-up calls: a shape's second call captures its CUDA graph where the driver
    # replays one (gpulinalg/lu/graph.py, multi_graph.py); the timed calls are replays.
    ms = time_gpu(lambda: lu_factor(a, **kw), warmup=2, repeat=repeat)
    ms_driver = None
    if replayed(make_plan(device_matrix(a, a, "cupy"), Options(**kw))):
        # the same calls without replay: what a shape's first call costs (no compile)
        with graph.disabled():
            ms_driver = time_gpu(lambda: lu_factor(a, **kw), warmup=1, repeat=repeat)
    # The timeline (its events and their reading cost time of their own) from more calls,
    # apart from the timed ones: the median of three on one GPU, the phases of one
    # synchronised call on several; and the host's clock of as many uninstrumented calls.
    tls, clock = [], HostClock()
    one_gpu = kw["devices"] is None
    for _ in range(3 if one_gpu else 1):
        lu_factor_hooks(a, timeline=tls, **kw)
        if one_gpu:
            lu_factor_hooks(a, timeline=clock, **kw)
    err = None
    if x is not None:
        lu, piv = lu_factor(a, **kw)
        err = backward_error(cp, a, lu, piv, x)
        del lu, piv
    cp.get_default_memory_pool().free_all_blocks()
    row = {"ms": ms, "ms_no_graph": ms_driver, "err": err}
    row.update(_timeline_fields(tls, clock))
    return row


def _precisions(precisions, dtype):
    """The update precisions run for `dtype`: float64 has one arithmetic, FP64 ("auto")."""
    return precisions if dtype == "float32" else ("auto",)


def run(shapes, panels, repeat, seed=0, block_size=None, precisions=("auto",), devices=(1,),
        tuning=(("defaults", None),), quiet=False, dtypes=("float32",)):
    """Rows for every dtype, shape, tuning setting, panel kind, update precision and device
    count, cuSOLVER measured once per shape and dtype (same run); and the timelines, in the
    rows' order.  tuning: (label, table) pairs (common.tuning_settings); a table None is the
    one in force.  Progress goes to stderr (common.Progress) unless quiet."""
    import cupy as cp

    configs = {dt: [(label, table, d, p, q) for label, table in tuning for d in devices
                    for q in _precisions(precisions, dt) for p in panels] for dt in dtypes}
    rows, timelines = [], []
    total = len(shapes) * sum(len(c) for c in configs.values())
    with Progress(total, "lu", quiet) as progress:
        for dtype in dtypes:
            for m, n in shapes:
                a = random_matrix((m, n), seed + m + 7 * n, cp, dtype)
                x = (cp.asarray(np.random.default_rng(seed).standard_normal(n)) if m == n
                     else None)
                vendor = _cusolver(a, x, repeat) + (_scipy_error(a, x),)
                one_gpu = {}
                for config in configs[dtype]:
                    row, tl = _config_row(a, x, config, block_size, repeat, vendor, one_gpu)
                    rows.append(row)
                    if tl is not None:
                        timelines.append(tl)
                    progress.done(f"{dtype} {size_label(m, n)} GPUs={row['devices']} "
                                  f"panel={row['panel']} {row['precision']} {row['tuning']}: "
                                  f"{row['tflops']:.2f} TF/s, "
                                  f"cuSOLVER {row['cusolver_tflops']:.2f}")
                del a
                cp.get_default_memory_pool().free_all_blocks()
    return rows, timelines


def _config_row(a, x, config, block_size, repeat, vendor, one_gpu):
    """(row, timeline or None) of one configuration (label, table, devices, panel,
    precision) on a; vendor: cuSOLVER's (ms, error) and SciPy's error; one_gpu: the one-GPU
    times by (label, panel, precision), filled and read for `scaling`."""
    from .. import tuning as _tuning
    label, table, ndev, panel, prec = config
    m, n = a.shape
    flops = lu_flops(m, n)
    ms_cus, err_cus, err_sp = vendor
    kw = dict(panel=panel, block_size=block_size, precision=prec,
              devices=None if ndev == 1 else ndev)
    with _tuning.override(table) if table else contextlib.nullcontext():
        row = _ours(a, x, kw, repeat)
    if ndev == 1:
        one_gpu[label, panel, prec] = row["ms"]
    base = one_gpu.get((label, panel, prec))
    tl = row.pop("timeline", None)
    return dict(
        {"m": m, "n": n, "dtype": a.dtype.name, "devices": ndev, "panel": panel,
         "precision": prec,
         "tuning": label, "nb": block_size, "tflops": flops / row["ms"] / 1e9,
         "cusolver_ms": ms_cus, "cusolver_tflops": flops / ms_cus / 1e9,
         "ratio": ms_cus / row["ms"],
         "scaling": base / row["ms"] if base else None,
         "err_cusolver": err_cus, "err_scipy": err_sp}, **row), tl


COLUMNS = [("m", "m", "{}"), ("n", "n", "{}"), ("dtype", "dtype", "{}"),
           ("devices", "GPUs", "{}"),
           ("panel", "panel", "{}"),
           ("precision", "updates", "{}"), ("tuning", "tuning", "{}"),
           ("ms", "ours ms", "{:.2f}"), ("ms_no_graph", "no graph ms", "{:.2f}"),
           ("tflops", "ours TF/s", "{:.2f}"),
           ("cusolver_tflops", "cuSOLVER TF/s", "{:.2f}"), ("ratio", "ratio", "{:.2f}"),
           ("scaling", "vs 1 GPU", "{:.2f}"),
           ("err", "err ours", "{:.3f}"), ("err_cusolver", "err cuSOLVER", "{:.3f}"),
           ("err_scipy", "err SciPy", "{:.3f}"), ("host_panel_ms", "sum host ms", "{:.1f}"),
           ("gpu_ms", "sum GPU ms", "{:.1f}"), ("wall_ms", "wall ms", "{:.1f}"),
           ("wall_over_max", "wall/max", "{:.3f}"),
           ("wall_over_max_timeline", "wall/max (timeline call)", "{:.3f}"),
           ("scatter_ms", "scatter ms", "{:.1f}"),
           ("factor_ms", "factor ms", "{:.1f}"), ("gather_ms", "gather ms", "{:.1f}"),
           ("enqueue_ms", "host enqueue ms", "{:.1f}"),
           ("enqueue_step_us", "host us/step", "{:.0f}"),
           ("enqueue_by_gpu", "host ms by GPU", "{}"),
           ("enqueue_home_ms", "host ms home", "{:.1f}"),
           ("update_by_gpu", "update ms by GPU", "{}"),
           ("panel_ms", "sum panel ms", "{:.1f}")]


SHORT = [("size", "size", "{}"), ("dtype", "dtype", "{}"), ("devices", "GPUs", "{}"),
         ("panel", "panel", "{}"),
         ("precision", "updates", "{}"), ("tuning", "tuning", "{}"),
         ("tflops", "ours TF/s", "{:.2f}"), ("cusolver_tflops", "cuSOLVER TF/s", "{:.2f}"),
         ("ratio", "ratio", "{:.2f}"), ("scaling", "vs 1 GPU", "{:.2f}"),
         ("err", "error", "{:.3f}")]
# Columns of the short table shown only where the rows differ in them.
_VARYING = ("dtype", "devices", "panel", "precision", "tuning", "scaling")


def summary(rows, wide=False):
    """Print the rows: every column with wide, else the short table (SHORT; the settings
    that are the same for every row in the title)."""
    rows = [dict({"dtype": "float32"}, **r) for r in rows]   # rows of runs before --dtype
    if wide:
        columns = [c for c in COLUMNS if c[0] != "tuning" or varying(rows, "tuning")]
        print_table(columns, rows, title="LU (getrf), ours vs cuSOLVER in the same run")
        return
    shown = [c for c in SHORT if c[0] not in _VARYING or varying(rows, c[0])]
    same = [f"{head} {rows[0][key]}" for key, head, _ in SHORT
            if key in ("dtype", "panel", "precision") and rows and not varying(rows, key)]
    if rows and not varying(rows, "devices") and rows[0]["devices"] > 1:
        same.append(f"{rows[0]['devices']} GPUs")
    print_table(shown, [dict(r, size=size_label(r["m"], r["n"])) for r in rows],
                title="LU (getrf), ours vs cuSOLVER in the same run"
                      + (f" ({', '.join(same)})" if same else "")
                      + "; ratio: cuSOLVER's time / ours; error: ||PAx - L(Ux)|| / "
                        "(||A|| ||x|| n eps)")


def plot(rows, path):
    """TF/s against n of the square shapes: each configuration of ours, and cuSOLVER."""
    fig, (ax,) = figure()
    rows = [r for r in rows if r["m"] == r["n"]]
    key = lambda r: (r.get("dtype", "float32"), r["devices"], r["panel"], r["precision"],
                     r["tuning"])
    for config in sorted({key(r) for r in rows}):
        sel = [r for r in rows if key(r) == config]
        dtype, devices, panel, prec, label = config
        name = f"gpulinalg {dtype}, panel {panel}, updates {prec}" + (
            f", {devices} GPUs" if devices > 1 else "") + (
            "" if label == "defaults" else f", {label}")
        ax.plot([r["n"] for r in sel], [r["tflops"] for r in sel], "o-", label=name)
    for dtype in sorted({r.get("dtype", "float32") for r in rows}):
        cus = {r["n"]: r["cusolver_tflops"] for r in rows if r.get("dtype", "float32") == dtype}
        ax.plot(sorted(cus), [cus[n] for n in sorted(cus)], "s--", label=f"cuSOLVER {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_ylabel("TFLOP/s (2/3 n^3 / time)")
    ax.set_title("LU factorization")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)


def add_arguments(p):
    """The options of `gpulinalg-bench lu`; the defaults are lu_factor's."""
    p.add_argument("--sizes", default="2048,4096,8192,16384,32768", type=size_list,
                   help="square sizes n, comma-separated ('' for none)")
    p.add_argument("--rect", default="16384x8192,8192x16384", type=shape_list,
                   help="rectangular m x n shapes ('' for none)")
    p.add_argument("--panel", default="auto", type=name_list(PANELS),
                   help="panel kinds, comma-separated: " + ", ".join(PANELS)
                        + " (auto: lu_factor's default, the GPU panel)")
    p.add_argument("--nb", type=int, default=None,
                   help="block size (default: lu_factor's, by size)")
    p.add_argument("--precision", default="auto", type=name_list(PRECISIONS),
                   help="trailing-update arithmetic(s), comma-separated: "
                        + ", ".join(PRECISIONS) + " (auto: lu_factor's default)")
    p.add_argument("--dtype", default="float32", type=name_list(DTYPES),
                   help="matrix dtypes, comma-separated: " + ", ".join(DTYPES)
                        + " (float64 runs its one arithmetic, FP64: --precision applies to "
                          "float32)")
    p.add_argument("--devices", default="1", type=size_list,
                   help="GPU counts, comma-separated (e.g. 1,2: the same run on 1 and 2 GPUs)")
    p.add_argument("--repeat", type=int, default=3, help="timed calls per configuration")
    p.add_argument("--timeline", default=None, metavar="PATH",
                   help="write the per-step timelines to this JSON file")
    add_tuning_argument(p)


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    for name in ("panel", "precision", "devices", "dtype"):
        if not getattr(args, name):
            return f"--{name} names none"
    if not args.sizes and not args.rect:
        return "no shape to run: --sizes and --rect are both empty"
    return None


def execute(args):
    """Run `gpulinalg-bench lu` with the parsed options; the exit status."""
    shapes = [(n, n) for n in args.sizes] + args.rect
    settings = tuning_settings(args.tuning) if args.tuning else [("defaults", None)]
    env = environment()
    print(f"{env['device']} (cc {env['compute_capability']}), CUDA {env['cuda_runtime']}, "
          f"CuPy {env['cupy']}; TF/s = (m n^2 - n^3/3)/time (m >= n)", flush=True)
    rows, timelines = run(shapes, args.panel, args.repeat, block_size=args.nb,
                          precisions=args.precision, devices=args.devices, tuning=settings,
                          quiet=args.quiet, dtypes=args.dtype)
    summary(rows, args.wide)
    write_json(args.json, "lu", rows, {"panels": args.panel, "precisions": args.precision,
                                       "devices": args.devices, "tuning": args.tuning,
                                       "dtypes": args.dtype})
    if args.timeline:
        path = pathlib.Path(args.timeline)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"environment": env, "timelines": timelines}, indent=1))
        print(f"wrote {path}")
    if args.plot:
        path = plot_path(args.json, "lu")
        plot(rows, path)
        print(f"wrote {path}")
    return 0
