"""gpulinalg-bench transpose: our tiled transpose against a device copy and CuPy, one run.

For each m x n float32 matrix: B = A^T (C-ordered) by our kernel (the automatic variant, and
optionally every variant), by cupy.ascontiguousarray(a.T), and a plain device-to-device copy
of an equally sized buffer.  Two timings of each, both medians of CUDA-event intervals:
"call" times one Python call (argument handling and launch included, what a caller pays
per call); "graph" replays --graph-calls calls captured in a CUDA graph and divides
(kernel-only: the Python and launch overhead that dominates at small sizes is gone).  The
copy is timed both ways too, so each "% copy" compares like with like.  GB/s counts bytes
read + written (8 m n).  Every result is checked against a.T on the device.
"""

import argparse

from . import common

DEFAULT_SIZES = "1000,2000,4000,4096,6000x10000,8000,8192,12288,16384"


def parse_shapes(text):
    """'1000,6000x10000' -> [(1000, 1000), (6000, 10000)]."""
    shapes = []
    for s in text.split(","):
        if s:
            m, _, n = s.partition("x")
            shapes.append((int(m), int(n or m)))
    return shapes


def sweep_shapes():
    """Square sizes every 512 up to 16384, plus their neighbours off the tile grid."""
    out = []
    for n in range(512, 16385, 512):
        out += [(n, n)] + ([(n + 1, n + 1)] if n % 2048 == 0 else [])
    return out


def measure(m, n, variants, repeat, seed=0, calls=10):
    import cupy as cp
    from .. import _transpose
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
    timed("copy_", lambda: cp.copyto(buf, a))
    row["variant"] = _transpose.pick_variant(m, n)
    timed("", lambda: _transpose.transpose_into(a, out))
    row["pct_copy"] = 100.0 * row["call_gbs"] / row["copy_call_gbs"]
    row["graph_pct_copy"] = 100.0 * row["graph_gbs"] / row["copy_graph_gbs"]
    # earlier keys, kept for make_docs and older JSON readers: the call timing
    row["ms"], row["gbs"], row["copy_gbs"] = row["call_ms"], row["call_gbs"], row["copy_call_gbs"]
    out.fill(cp.nan)
    _transpose.transpose_into(a, out)
    row["ok"] = bool(cp.array_equal(out, a.T))
    row["cupy_ms"] = common.time_gpu(lambda: cp.ascontiguousarray(a.T), repeat=repeat)
    row["cupy_gbs"] = gbs(row["cupy_ms"])
    row["speedup"] = row["cupy_ms"] / row["ms"]
    for v in variants:
        timed(f"{v}_", lambda: _transpose.transpose_into(a, out, variant=v))
        row[f"{v}_gbs"] = row[f"{v}_call_gbs"]
        row[f"{v}_pct_copy"] = 100.0 * row[f"{v}_call_gbs"] / row["copy_call_gbs"]
        row[f"{v}_graph_pct_copy"] = 100.0 * row[f"{v}_graph_gbs"] / row["copy_graph_gbs"]
        out.fill(cp.nan)
        _transpose.transpose_into(a, out, variant=v)
        row["ok"] = row["ok"] and bool(cp.array_equal(out, a.T))
    del a, out, buf
    return row


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpulinalg-bench transpose", description=__doc__)
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help="comma-separated n (square) or MxN, e.g. 4096,6000x10000")
    p.add_argument("--sweep", action="store_true",
                   help="square sizes every 512 up to 16384 (and a few off-grid) instead")
    p.add_argument("--variants", default="",
                   help="extra kernel variants to time ('all' for every tile shape)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--graph-calls", type=int, default=10,
                   help="calls captured per CUDA graph for the kernel-only timing")
    p.add_argument("--json", help="write rows + environment here")
    args = p.parse_args(argv)
    from .. import _transpose
    variants = (list(_transpose.VARIANTS) if args.variants == "all"
                else [v for v in args.variants.split(",") if v])
    unknown = [v for v in variants if v not in _transpose.VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {list(_transpose.VARIANTS)}")
    shapes = sweep_shapes() if args.sweep else parse_shapes(args.sizes)
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}")
    rows = []
    for m, n in shapes:
        rows.append(measure(m, n, variants, args.repeat, calls=args.graph_calls))
        r = rows[-1]
        print(f"{m}x{n}: ours call {r['call_gbs']:.0f} GB/s ({r['pct_copy']:.1f}% of copy "
              f"{r['copy_call_gbs']:.0f}), graph {r['graph_gbs']:.0f} GB/s "
              f"({r['graph_pct_copy']:.1f}% of copy {r['copy_graph_gbs']:.0f}), "
              f"cupy {r['cupy_gbs']:.0f}, ok={r['ok']}", flush=True)
        if r["graph_how"] != "graph":
            print(f"  graph timing: {r['graph_how']}", flush=True)
    print()
    print(f"call: one Python call between events; graph: {args.graph_calls} calls replayed "
          "from a CUDA graph, per call (kernel-only); % copy against the copy timed the same way")
    cols = [("m", "m", "{}"), ("n", "n", "{}"),
            ("call_gbs", "call GB/s", "{:.0f}"), ("pct_copy", "call % copy", "{:.1f}"),
            ("graph_gbs", "graph GB/s", "{:.0f}"), ("graph_pct_copy", "graph % copy", "{:.1f}"),
            ("copy_call_gbs", "copy call", "{:.0f}"), ("copy_graph_gbs", "copy graph", "{:.0f}"),
            ("cupy_gbs", "cupy .T call", "{:.0f}"), ("speedup", "vs cupy", "{:.2f}")]
    cols += [("variant", "tile", "{}"), ("ok", "ok", "{}")]
    common.print_table(cols, rows)
    if variants:
        print()
        vcols = [("m", "m", "{}"), ("n", "n", "{}")]
        for v in variants:
            vcols += [(f"{v}_graph_pct_copy", f"{v} graph%", "{:.1f}"),
                      (f"{v}_pct_copy", f"{v} call%", "{:.1f}")]
        common.print_table(vcols, rows, title="variants, % of copy (graph = kernel-only)")
    if any(r["graph_how"] != "graph" for r in rows):
        print("NOTE: graph capture failed for some rows; their graph columns are event timings")
    common.write_json(args.json, "transpose", rows, {"variants": variants})
    return 0 if all(r["ok"] for r in rows) else 1
