"""gpulinalg-bench laswp: one-launch row interchanges against CuPy, one run.

For each m x n float32 matrix and npiv LU-like pivots (piv[i] uniform in [offset+i, m),
0-based, absolute): our kernel applies the npiv interchanges in one launch (laswp_fused: each
block plans the net permutation while its first strip is in flight); CuPy applies them one at
a time with fancy indexing (a[[i, p]] = a[[p, i]]) and, as a second baseline, as one gather
+ one scatter of the touched rows (net permutation computed on the host, outside the timing).

Two timings, both medians of CUDA-event intervals: "call" times one Python call (argument
handling, launches and their gaps included); "graph" replays --graph-calls calls captured in
a CUDA graph and divides (kernel-only).
The calls rotate among --rotate pivot sets at offsets 0, npiv, 2 npiv, ... (the LU's
successive steps) so that the moved rows do not all sit in L2 between calls (--rotate 1:
the same rows every call).  GB/s counts the rows that are actually touched:
distinct rows * n * 4 bytes, read and written (x 2), averaged over the sets.  "% copy" is
against a device-to-device copy of the whole matrix timed the same way (call / graph) and
"copy same GB/s" a copy of as many bytes as the rows moved (L2-resident at these sizes).
The result is checked on the device against the sequential CuPy reference.  The summary gives
per configuration the call time of ours and of CuPy's indexing, their ratio and the check;
--wide adds every column.
"""

import numpy as np

from . import common
from ..layout.laswp import laswp_reference


def lu_like_pivots(m, k, seed, offset=0):
    rng = np.random.default_rng(seed)
    return np.array([rng.integers(offset + i, m) for i in range(k)], dtype=np.int32)


def measure(m, n, k, repeat, seed=0, rotate=8, calls=10):
    import cupy as cp
    from ..layout import laswp as _laswp
    piv = lu_like_pivots(m, k, seed)
    piv_dev = cp.asarray(piv)
    sets = [(0, piv)] + [(j * k, lu_like_pivots(m, k, seed + j, j * k))
                         for j in range(1, rotate) if (j + 1) * k <= m]
    sets_dev = [(off, cp.asarray(p)) for off, p in sets]
    touched = float(np.mean([len(set(range(off, off + k)) | set(p.tolist())) for off, p in sets]))
    moved_bytes = 2.0 * touched * n * 4
    a0 = common.random_matrix((m, n), seed + 1)
    row = {"m": m, "n": n, "npiv": k, "touched_rows": touched, "pivot_sets": len(sets),
           "graph_calls": calls, "graph_how": "graph"}

    # Correctness first, on fresh copies: ours against the one-by-one CuPy swaps.
    a = a0.copy()
    _laswp.laswp_inplace(a, piv_dev)
    ref = laswp_reference(a0.copy(), piv)
    row["ok"] = bool(cp.array_equal(a, ref))
    _laswp.laswp_inplace(a, piv_dev, inverse=True)
    row["ok_inverse"] = bool(cp.array_equal(a, a0))
    del ref
    _copy_rates(row, a0, touched, moved_bytes, repeat, calls)

    # Ours (timing on the already-permuted matrix: the cost does not depend on the data).
    t = common.time_both([lambda off=off, p=p: _laswp.laswp_inplace(a, p, offset=off)
                          for off, p in sets_dev], repeat=repeat, calls=calls)
    if t["graph_how"] != "graph":
        row["graph_how"] = t["graph_how"]
    for how in ("call", "graph"):
        ms = t[f"{how}_ms"]
        row[f"{how}_ms"] = ms
        row[f"{how}_pct_copy"] = 100.0 * moved_bytes / ms / 1e6 / row[f"copy_{how}_gbs"]
    row["variant"] = "fused"
    row["ms"], row["pct_copy"] = row["call_ms"], row["call_pct_copy"]   # plain keys: call
    row["gbs"] = moved_bytes / row["ms"] / 1e6
    row["graph_gbs"] = moved_bytes / row["graph_ms"] / 1e6

    # CuPy baselines (first pivot set, call timing).
    row["cupy_ms"] = common.time_gpu(lambda: laswp_reference(a, piv), warmup=1,
                                     repeat=max(3, repeat // 4))
    row["speedup"] = row["cupy_ms"] / row["ms"]
    moves = _laswp.net_moves(piv)
    src = cp.asarray([s for s, _ in moves], dtype=cp.int64)
    dst = cp.asarray([d for _, d in moves], dtype=cp.int64)

    def gather_scatter():
        a[dst] = a[src]
    row["gather_scatter_ms"] = common.time_gpu(gather_scatter, repeat=repeat)
    del a, a0
    return row


def _copy_rates(row, a0, touched, moved_bytes, repeat, calls):
    """Device copy bandwidth into `row`: the whole matrix (call and graph timing, the
    yardsticks of "% copy"), and a buffer the size of the moved rows."""
    import cupy as cp
    m, n = a0.shape
    buf = cp.empty_like(a0)
    t = common.time_both(lambda: cp.copyto(buf, a0), repeat=repeat, calls=calls)
    if t["graph_how"] != "graph":
        row["graph_how"] = t["graph_how"]
    row["copy_call_gbs"] = 2.0 * m * n * 4 / t["call_ms"] / 1e6
    row["copy_graph_gbs"] = 2.0 * m * n * 4 / t["graph_ms"] / 1e6
    row["copy_gbs"] = row["copy_call_gbs"]
    del buf
    small = a0[:int(round(touched))]
    sbuf = cp.empty_like(small)
    ms = common.time_gpu(lambda: cp.copyto(sbuf, small), repeat=repeat)
    row["copy_same_gbs"] = moved_bytes / ms / 1e6


def add_arguments(p):
    """The options of `gpulinalg-bench laswp`."""
    p.add_argument("--sizes", default="16384,32768", type=common.shape_list,
                   help="comma-separated n (square) or MxN")
    p.add_argument("--npiv", default="128", type=common.size_list,
                   help="comma-separated pivot counts, e.g. 128,256,512")
    p.add_argument("--repeat", type=int, default=20, help="timing rounds per configuration")
    p.add_argument("--graph-calls", type=int, default=16,
                   help="calls captured per CUDA graph for the kernel-only timing")
    p.add_argument("--rotate", type=int, default=8,
                   help="pivot sets (offsets 0, npiv, ...) the timed calls rotate among")


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    if not args.sizes or not args.npiv:
        return "nothing to run: --sizes or --npiv is empty"
    return None


def execute(args):
    """Run `gpulinalg-bench laswp` with the parsed options; the exit status (1 when a result
    is wrong)."""
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}", flush=True)
    configs = [(m, n, k) for m, n in args.sizes for k in args.npiv]
    rows = []
    with common.Progress(len(configs), "laswp", args.quiet) as bar:
        for m, n, k in configs:
            rows.append(measure(m, n, k, args.repeat, rotate=args.rotate,
                                calls=args.graph_calls))
            bar.done(progress(rows[-1]))
    if args.wide:
        print_rows(rows, args)
    else:
        summary(rows)
    common.write_results(args, "laswp", rows, plot)
    return 0 if all(r["ok"] and r["ok_inverse"] for r in rows) else 1


def progress(r):
    """One line on a finished row."""
    line = (f"{r['m']}x{r['n']} npiv={r['npiv']}: ours call {r['call_ms']:.4f} ms "
            f"({r['call_pct_copy']:.1f}% of copy), graph {r['graph_ms']:.4f} ms "
            f"({r['graph_pct_copy']:.1f}% of copy), cupy {r['cupy_ms']:.2f} ms, "
            f"ok={r['ok']}/{r['ok_inverse']}")
    if r["graph_how"] != "graph":
        line += f"; graph timing: {r['graph_how']}"
    return line


def summary(rows):
    """The short table: each size and pivot count, our and CuPy's time of one call, their
    ratio, and whether the result is exact."""
    cols = [("size", "size", "{}"), ("npiv", "npiv", "{}"), ("call_ms", "ours ms", "{:.4f}"),
            ("cupy_ms", "CuPy ms", "{:.2f}"), ("speedup", "ratio", "{:.0f}"),
            ("ok", "exact", "{}")]
    print()
    common.print_table(cols, [dict(r, size=common.size_label(r["m"], r["n"]), ok=r["ok"]
                                   and r["ok_inverse"]) for r in rows],
                       title="laswp, ours (one launch) vs CuPy fancy indexing (one swap at a "
                             "time) in the same run; ratio: CuPy's time / ours")


def print_rows(rows, args):
    """Every column."""
    print()
    print(f"call: one Python call between events; graph: {args.graph_calls} calls replayed "
          "from a CUDA graph, per call (kernel-only); calls rotate among "
          f"{args.rotate} pivot sets; % copy against the whole-matrix copy timed the same way")
    cols = [("m", "m", "{}"), ("n", "n", "{}"), ("npiv", "npiv", "{}"),
            ("touched_rows", "rows", "{:.0f}"), ("call_ms", "call ms", "{:.4f}"),
            ("call_pct_copy", "call % copy", "{:.1f}"), ("graph_ms", "graph ms", "{:.4f}"),
            ("graph_pct_copy", "graph % copy", "{:.1f}"),
            ("copy_call_gbs", "copy call", "{:.0f}"), ("copy_graph_gbs", "copy graph", "{:.0f}"),
            ("copy_same_gbs", "copy same GB/s", "{:.0f}"),
            ("cupy_ms", "cupy indexing ms", "{:.2f}"), ("speedup", "speedup", "{:.0f}"),
            ("gather_scatter_ms", "cupy gather/scatter ms", "{:.3f}"), ("ok", "ok", "{}")]
    common.print_table(cols, rows)
    if any(r["graph_how"] != "graph" for r in rows):
        print("NOTE: graph capture failed for some rows; their graph columns are event timings")


def plot(rows, path):
    """Milliseconds of one call at each size and pivot count: ours (call and graph replay)
    and CuPy's two baselines, on a log scale."""
    labels = [f"{common.size_label(r['m'], r['n'])}/{r['npiv']}" for r in rows]
    common.plot_rows(path, rows, labels,
                     [("gpulinalg, call", "call_ms", "o-"), ("gpulinalg, graph", "graph_ms", "d-"),
                      ("CuPy indexing", "cupy_ms", "s--"),
                      ("CuPy gather/scatter", "gather_scatter_ms", "^:")],
                     "ms per call", "laswp (float32): size/npiv", logy=True)
