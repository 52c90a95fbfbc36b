"""gpulinalg-bench transpose: our tiled transpose against a device copy and CuPy, one run.

For each m x n float32 matrix: B = A^T (C-ordered) by our kernel (the automatic variant, and
optionally every variant), by cupy.ascontiguousarray(a.T), and a plain device-to-device copy
of an equally sized buffer, all timed with CUDA events.  GB/s counts bytes read + written
(8 m n); "% copy" is ours against the copy measured in the same run.  Every result is checked
against a.T on the device.
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


def measure(m, n, variants, repeat, seed=0):
    import cupy as cp
    from .. import _transpose
    a = common.random_matrix((m, n), seed)
    out = cp.empty((n, m), dtype=cp.float32)
    buf = cp.empty_like(a)
    nbytes = 2.0 * m * n * 4

    def gbs(ms):
        return nbytes / ms / 1e6

    row = {"m": m, "n": n}
    row["copy_ms"] = common.time_gpu(lambda: cp.copyto(buf, a), repeat=repeat)
    row["copy_gbs"] = gbs(row["copy_ms"])
    row["variant"] = _transpose.pick_variant(m, n)
    row["ms"] = common.time_gpu(lambda: _transpose.transpose_into(a, out), repeat=repeat)
    row["gbs"] = gbs(row["ms"])
    row["pct_copy"] = 100.0 * row["gbs"] / row["copy_gbs"]
    out.fill(cp.nan)
    _transpose.transpose_into(a, out)
    row["ok"] = bool(cp.array_equal(out, a.T))
    row["cupy_ms"] = common.time_gpu(lambda: cp.ascontiguousarray(a.T), repeat=repeat)
    row["cupy_gbs"] = gbs(row["cupy_ms"])
    row["speedup"] = row["cupy_ms"] / row["ms"]
    for v in variants:
        ms = common.time_gpu(lambda: _transpose.transpose_into(a, out, variant=v), repeat=repeat)
        row[f"{v}_gbs"] = gbs(ms)
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
        rows.append(measure(m, n, variants, args.repeat))
        r = rows[-1]
        print(f"{m}x{n}: ours {r['gbs']:.0f} GB/s ({r['pct_copy']:.1f}% of copy "
              f"{r['copy_gbs']:.0f}), cupy {r['cupy_gbs']:.0f}, ok={r['ok']}", flush=True)
    print()
    cols = [("m", "m", "{}"), ("n", "n", "{}"), ("gbs", "ours GB/s", "{:.0f}"),
            ("pct_copy", "% copy", "{:.1f}"), ("copy_gbs", "copy GB/s", "{:.0f}"),
            ("cupy_gbs", "cupy .T GB/s", "{:.0f}"), ("speedup", "speedup vs cupy", "{:.2f}")]
    cols += [(f"{v}_gbs", f"{v} GB/s", "{:.0f}") for v in variants]
    cols += [("variant", "tile", "{}"), ("ok", "ok", "{}")]
    common.print_table(cols, rows)
    common.write_json(args.json, "transpose", rows, {"variants": variants})
    return 0 if all(r["ok"] for r in rows) else 1
