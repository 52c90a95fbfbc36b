"""gpulinalg-bench transpose: our tiled transpose against a device copy and CuPy, one run.

For each m x n float32 matrix: B = A^T (C-ordered) by our kernel (the automatic variant, and
the --variants named: by default the baseline, the first tile "32x8", so that the progression
baseline -> tuned -> copy shows), by cupy.ascontiguousarray(a.T), and a plain device-to-device
copy of an equally sized buffer (cudaMemcpyAsync, device to device).  Three timings of each,
all medians of CUDA-event intervals: "burst" (the headline) times --graph-calls back-to-back
calls with the copy and ours taking turns round by round (the steady-state bandwidth of a loop
of calls; ours through the internal entry point on CuPy arrays, "api" the same through the
public gpulinalg.transpose(a, out=out), whose argument checks can show below ~2048^2, where a
call's host path outlasts its kernel); "call" times one Python call with the GPU idle before it
(argument handling and launch latency included, what one isolated call costs); "graph" replays
the calls captured in a CUDA graph (kernel-only; a graph's memcpy node may run on a copy
engine, so the copy's graph figure is not always the SM copy's).  "queued" times the burst of
the copy, ours and CuPy's behind a kernel that holds the stream until every launch is enqueued
(device time of a loop of calls, host time excluded: what the GPU spends, the figure to compare
kernels by where the host path outlasts them).  The copy is timed every way, so each "% copy"
compares like with like.  GB/s counts bytes read + written (8 m n).  Every result is checked
against a.T on the device.  The summary gives per size the burst GB/s of ours and of CuPy,
their ratio, ours as % of the copy and the check; --wide adds every column.
With --tuning FIELD=v1,v2 (gpulinalg/tuning.py transpose_*) every size also runs under each
value, the table in force with that field replaced.
"""

import contextlib
import itertools

from .. import tuning
from ..layout.transpose import BASELINE, VARIANTS
from . import common

DEFAULT_SIZES = "1000,2000,4000,4096,6000x10000,8000,8192,12288,16384"


def sweep_shapes():
    """Square sizes every 512 up to 16384, plus their neighbours off the tile grid."""
    out = []
    for n in range(512, 16385, 512):
        out += [(n, n)] + ([(n + 1, n + 1)] if n % 2048 == 0 else [])
    return out


def measure(m, n, variants, repeat, seed=0, calls=10):
    import cupy as cp
    from ..blas import transpose
    from ..layout import transpose as _transpose
    a = common.random_matrix((m, n), seed)
    out = cp.empty((n, m), dtype=cp.float32)
    buf = cp.empty_like(a)
    nbytes = 2.0 * m * n * 4

    def gbs(ms):
        return nbytes / ms / 1e6

    def timed(prefix, fn):
        t = common.time_both(fn, repeat=repeat, calls=calls)
        row[f"{prefix}call_gbs"] = gbs(t["call_ms"])
        row[f"{prefix}graph_gbs"] = gbs(t["graph_ms"])
        row[f"{prefix}call_ms"], row[f"{prefix}graph_ms"] = t["call_ms"], t["graph_ms"]
        if t["graph_how"] != "graph":
            row["graph_how"] = t["graph_how"]
        return t

    row = {"m": m, "n": n, "graph_how": "graph", "graph_calls": calls}
    burst = {"copy_": lambda: cp.copyto(buf, a), "": lambda: _transpose.transpose_into(a, out),
             "api_": lambda: transpose(a, out=out),   # the public call's host path
             "cupy_": lambda: cp.ascontiguousarray(a.T)}
    for v in variants:
        burst[f"{v}_"] = lambda v=v: _transpose.transpose_into(a, out, variant=v)
    for prefix, ms in common.time_burst(burst, repeat=repeat, calls=calls).items():
        row[f"{prefix}burst_ms"], row[f"{prefix}burst_gbs"] = ms, gbs(ms)
    queued = {k: burst[k] for k in ("copy_", "", "cupy_")}
    for prefix, ms in common.time_burst(queued, repeat=repeat, calls=calls, queued=True).items():
        row[f"{prefix}queued_ms"], row[f"{prefix}queued_gbs"] = ms, gbs(ms)
    row["queued_pct_copy"] = 100.0 * row["queued_gbs"] / row["copy_queued_gbs"]
    row["queued_speedup"] = row["cupy_queued_ms"] / row["queued_ms"]
    timed("copy_", burst["copy_"])
    row["variant"] = _transpose.pick_variant(m, n)
    timed("", burst[""])
    row["burst_pct_copy"] = 100.0 * row["burst_gbs"] / row["copy_burst_gbs"]
    row["api_burst_pct_copy"] = 100.0 * row["api_burst_gbs"] / row["copy_burst_gbs"]
    row["pct_copy"] = 100.0 * row["call_gbs"] / row["copy_call_gbs"]
    row["graph_pct_copy"] = 100.0 * row["graph_gbs"] / row["copy_graph_gbs"]
    # the call timing also under the plain keys (benchmarks/make_docs.py reads them)
    row["ms"], row["gbs"], row["copy_gbs"] = row["call_ms"], row["call_gbs"], row["copy_call_gbs"]
    out.fill(cp.nan)
    _transpose.transpose_into(a, out)
    row["ok"] = bool(cp.array_equal(out, a.T))
    row["cupy_ms"] = common.time_gpu(lambda: cp.ascontiguousarray(a.T), repeat=repeat)
    row["cupy_gbs"] = gbs(row["cupy_ms"])
    row["speedup"] = row["cupy_ms"] / row["ms"]
    row["burst_speedup"] = row["cupy_burst_ms"] / row["burst_ms"]
    for v in variants:
        row[f"{v}_burst_pct_copy"] = 100.0 * row[f"{v}_burst_gbs"] / row["copy_burst_gbs"]
        timed(f"{v}_", lambda: _transpose.transpose_into(a, out, variant=v))
        row[f"{v}_gbs"] = row[f"{v}_call_gbs"]
        row[f"{v}_pct_copy"] = 100.0 * row[f"{v}_call_gbs"] / row["copy_call_gbs"]
        row[f"{v}_graph_pct_copy"] = 100.0 * row[f"{v}_graph_gbs"] / row["copy_graph_gbs"]
        out.fill(cp.nan)
        _transpose.transpose_into(a, out, variant=v)
        row["ok"] = row["ok"] and bool(cp.array_equal(out, a.T))
    del a, out, buf
    return row


def measure_layouts(m, n, variants, repeat, seed=0, calls=10):
    """Where an off-grid size loses: each variant's burst % of copy on four layouts of the m x n
    transpose.  contig: as given; pitch64: the same m x n in buffers whose leading dimensions
    are rounded up to multiples of 64 (same partial tiles, row pitches multiples of 256
    bytes); interior: the 64-aligned mi x ni interior, the original pitches (no partial 64
    tiles); interior64: a contiguous mi x ni (neither).  The copy moves as many bytes."""
    import cupy as cp
    from ..layout import transpose as _transpose
    up, down = (lambda x: -(-x // 64) * 64), (lambda x: x // 64 * 64)
    mi, ni = down(m), down(n)
    a = common.random_matrix((m, n), seed)
    ap = common.random_matrix((m, up(n)), seed + 1)
    cases = {"contig": (a, cp.empty((n, m), cp.float32)),
             "pitch64": (ap[:, :n], cp.empty((n, up(m)), cp.float32)[:, :m]),
             "interior": (a[:mi, :ni], cp.empty((n, m), cp.float32)[:ni, :mi]),
             "interior64": (common.random_matrix((mi, ni), seed + 2),
                            cp.empty((ni, mi), cp.float32))}
    rows = []
    for layout, (src, dst) in cases.items():
        k = src.size
        csrc, cbuf = a.ravel()[:k], cp.empty(k, cp.float32)
        fns = {"copy": lambda: cp.copyto(cbuf, csrc)}
        for v in variants:
            fns[v] = lambda v=v: _transpose.transpose_into(src, dst, variant=v)
        t = common.time_burst(fns, repeat=repeat, calls=calls)
        row = {"m": m, "n": n, "layout": layout, "rows": src.shape[0], "cols": src.shape[1],
               "copy_burst_gbs": 8.0 * k / t["copy"] / 1e6, "ok": True}
        for v in variants:
            row[f"{v}_burst_pct_copy"] = 100.0 * t["copy"] / t[v]
            dst.fill(cp.nan)
            _transpose.transpose_into(src, dst, variant=v)
            row["ok"] = row["ok"] and bool(cp.array_equal(dst, src.T))
        rows.append(row)
    return rows


def add_arguments(p):
    """The options of `gpulinalg-bench transpose`."""
    p.add_argument("--sizes", default=DEFAULT_SIZES, type=common.shape_list,
                   help="comma-separated n (square) or MxN, e.g. 4096,6000x10000")
    p.add_argument("--sweep", action="store_true",
                   help="square sizes every 512 up to 16384 (and a few off-grid) instead")
    p.add_argument("--variants", default=BASELINE, type=common.name_list(VARIANTS, "all"),
                   help="kernel variants to time beside the automatic one ('all' for every "
                        "tile shape, '' for none; default: the baseline, %(default)s)")
    p.add_argument("--layouts", default="", type=common.shape_list,
                   help="sizes (as --sizes) to also time on padded-pitch and 64-aligned "
                        "interior layouts, to tell row pitch from partial tiles (default: none)")
    p.add_argument("--repeat", type=int, default=20, help="timing rounds per size")
    p.add_argument("--graph-calls", type=int, default=10,
                   help="calls captured per CUDA graph for the kernel-only timing")
    common.add_tuning_argument(p)


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    if not args.sweep and not args.sizes:
        return "no size to run: --sizes is empty"
    return None


def execute(args):
    """Run `gpulinalg-bench transpose` with the parsed options; the exit status (1 when a
    result is wrong)."""
    shapes = sweep_shapes() if args.sweep else args.sizes
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}", flush=True)
    settings = common.tuning_settings(args.tuning) if args.tuning else [("defaults", None)]
    rows = []
    with common.Progress(len(shapes) * len(settings), "transpose", args.quiet) as bar:
        for (m, n), (label, table) in itertools.product(shapes, settings):
            with tuning.override(table) if table else contextlib.nullcontext():
                rows.append(measure(m, n, args.variants, args.repeat, calls=args.graph_calls))
            if table:
                rows[-1]["tuning"] = label
            bar.done(progress(rows[-1]))
    if args.wide:
        print_rows(rows, args.variants, args.graph_calls)
    else:
        summary(rows)
    layout_rows = _layouts(args)
    extra = {"variants": args.variants, "tuning": args.tuning}
    if layout_rows:
        extra["layouts"] = layout_rows
    common.write_results(args, "transpose", rows, plot, extra)
    return 0 if all(r["ok"] for r in rows + layout_rows) else 1


def _layouts(args):
    """The --layouts rows (printed), each variant and the defaults' tiles."""
    lvariants = list(dict.fromkeys([BASELINE, tuning.current().transpose_variant]
                                   + args.variants))
    layout_rows = []
    for m, n in args.layouts:
        layout_rows += measure_layouts(m, n, lvariants, args.repeat, calls=args.graph_calls)
    if layout_rows:
        print_layouts(layout_rows, lvariants)
    return layout_rows


def progress(r):
    """One line on a finished row."""
    line = (f"{r['m']}x{r['n']}: ours burst {r['burst_gbs']:.0f} GB/s "
            f"({r['burst_pct_copy']:.1f}% of copy {r['copy_burst_gbs']:.0f}), call "
            f"{r['call_gbs']:.0f} GB/s ({r['pct_copy']:.1f}% of copy {r['copy_call_gbs']:.0f}), "
            f"graph {r['graph_gbs']:.0f} GB/s ({r['graph_pct_copy']:.1f}% of copy "
            f"{r['copy_graph_gbs']:.0f}), cupy {r['cupy_gbs']:.0f}, ok={r['ok']}")
    if r["graph_how"] != "graph":
        line += f"; graph timing: {r['graph_how']}"
    return line


def summary(rows):
    """The short table: each size, our and CuPy's GB/s (bursts of calls), their ratio, ours
    as % of a device copy, and whether the result is exact."""
    cols = [("size", "size", "{}"), ("burst_gbs", "ours GB/s", "{:.0f}"),
            ("cupy_burst_gbs", "CuPy GB/s", "{:.0f}"), ("burst_speedup", "ratio", "{:.2f}"),
            ("burst_pct_copy", "% of copy", "{:.1f}"), ("ok", "exact", "{}")]
    if common.varying(rows, "tuning"):
        cols.insert(1, ("tuning", "tuning", "{}"))
    print()
    common.print_table(cols, [dict(r, size=common.size_label(r["m"], r["n"])) for r in rows],
                       title="transpose B = A^T (float32), ours vs cupy.ascontiguousarray(a.T) "
                             "in the same run; GB/s = 8 m n / time of a call in a burst; "
                             "ratio: CuPy's time / ours")


def plot(rows, path):
    """GB/s of ours, CuPy's and a device copy at each size (bursts of calls)."""
    labels = [common.size_label(r["m"], r["n"]) + (f" {r['tuning']}" if "tuning" in r else "")
              for r in rows]
    common.plot_rows(path, rows, labels,
                     [("gpulinalg", "burst_gbs", "o-"), ("CuPy a.T copy", "cupy_burst_gbs", "s--"),
                      ("device copy", "copy_burst_gbs", "k:")],
                     "GB/s (read + written)", "transpose (float32)")


def print_rows(rows, variants, calls):
    print()
    print(f"burst: {calls} back-to-back calls between events, copy and ours in "
          "turns; queued: the same bursts enqueued behind a kernel that holds the stream "
          "(device time, host time excluded); call: one Python call between events; graph: "
          "the calls replayed from a CUDA graph (kernel-only); % copy against the copy timed "
          "the same way")
    cols = [("m", "m", "{}"), ("n", "n", "{}"),
            ("burst_gbs", "burst GB/s", "{:.0f}"), ("burst_pct_copy", "burst % copy", "{:.1f}"),
            ("api_burst_pct_copy", "api burst %", "{:.1f}"),
            ("copy_burst_gbs", "copy burst", "{:.0f}"),
            ("burst_speedup", "burst vs cupy", "{:.2f}"),
            ("queued_pct_copy", "queued % copy", "{:.1f}"),
            ("queued_speedup", "queued vs cupy", "{:.2f}"),
            ("call_gbs", "call GB/s", "{:.0f}"), ("pct_copy", "call % copy", "{:.1f}"),
            ("graph_gbs", "graph GB/s", "{:.0f}"), ("graph_pct_copy", "graph % copy", "{:.1f}"),
            ("copy_call_gbs", "copy call", "{:.0f}"), ("copy_graph_gbs", "copy graph", "{:.0f}"),
            ("cupy_gbs", "cupy .T call", "{:.0f}"), ("speedup", "vs cupy", "{:.2f}")]
    cols += [("variant", "tile", "{}"), ("ok", "ok", "{}")]
    if any("tuning" in r for r in rows):
        cols += [("tuning", "tuning", "{}")]
    common.print_table(cols, rows)
    if variants:
        print()
        vcols = [("m", "m", "{}"), ("n", "n", "{}")]
        for v in variants:
            vcols += [(f"{v}_burst_pct_copy", f"{v} burst%", "{:.1f}"),
                      (f"{v}_graph_pct_copy", f"{v} graph%", "{:.1f}"),
                      (f"{v}_pct_copy", f"{v} call%", "{:.1f}")]
        common.print_table(vcols, rows, title="variants, % of copy (graph = kernel-only)")
    if any(r["graph_how"] != "graph" for r in rows):
        print("NOTE: graph capture failed for some rows; their graph columns are event timings")


def print_layouts(layout_rows, lvariants):
    print()
    lcols = [("m", "m", "{}"), ("n", "n", "{}"), ("layout", "layout", "{}"),
             ("rows", "rows", "{}"), ("cols", "cols", "{}"),
             ("copy_burst_gbs", "copy burst", "{:.0f}")]
    lcols += [(f"{v}_burst_pct_copy", f"{v} burst%", "{:.1f}") for v in lvariants]
    common.print_table(lcols + [("ok", "ok", "{}")], layout_rows,
                       title="layouts (pitch64: leading dimensions rounded up to 64; "
                             "interior: the 64-aligned part, original pitch)")
