"""gpulinalg-bench laswp: one-launch row interchanges against CuPy, one run.

For each m x n float32 matrix and npiv LU-like pivots (piv[i] uniform in [i, m), 0-based):
our kernels apply the npiv interchanges (the default variant, and with --variants each one
named, 'all' for every one: "planned" = plan kernel + bandwidth kernel, "strip" = the
one-launch laswp_rows); CuPy applies them one at a time with fancy indexing
(a[[i, p]] = a[[p, i]]) and, as a second baseline, as one gather + one scatter of the touched
rows (net permutation computed on the host, outside the timing).  GB/s counts the rows that
are actually touched: distinct rows * n * 4 bytes, read and written (x 2).  "% copy" is
against a device-to-device copy of the whole matrix and "copy same GB/s" a copy of as many
bytes as the rows moved, both measured in the same run.  The result is checked on the device
against the sequential CuPy reference.
"""

import argparse

import numpy as np

from . import common


def lu_like_pivots(m, k, seed):
    rng = np.random.default_rng(seed)
    return np.array([rng.integers(i, m) for i in range(k)], dtype=np.int32)


def swap_one_by_one(a, piv, inverse=False):
    """The reference: CuPy fancy indexing, one interchange at a time."""
    order = range(len(piv) - 1, -1, -1) if inverse else range(len(piv))
    for i in order:
        p = int(piv[i])
        if p != i:
            a[[i, p]] = a[[p, i]]


def measure(m, n, k, repeat, seed=0, variants=()):
    import cupy as cp
    from .. import _laswp
    piv = lu_like_pivots(m, k, seed)
    piv_dev = cp.asarray(piv)
    touched = len(set(range(k)) | set(piv.tolist()))
    moved_bytes = 2.0 * touched * n * 4
    a0 = common.random_matrix((m, n), seed + 1)
    row = {"m": m, "n": n, "npiv": k, "touched_rows": touched, "W": _laswp.strip_width(
        min(k, _laswp.KMAX))}

    # Correctness first, on fresh copies: ours against the one-by-one CuPy swaps.
    a = a0.copy()
    _laswp.laswp_inplace(a, piv_dev)
    ref = a0.copy()
    swap_one_by_one(ref, piv)
    row["ok"] = bool(cp.array_equal(a, ref))
    _laswp.laswp_inplace(a, piv_dev, inverse=True)
    row["ok_inverse"] = bool(cp.array_equal(a, a0))
    ref_fwd = ref

    # Device copy bandwidth: the whole matrix, and a buffer the size of the moved rows.
    buf = cp.empty_like(a0)
    ms = common.time_gpu(lambda: cp.copyto(buf, a0), repeat=repeat)
    row["copy_gbs"] = 2.0 * m * n * 4 / ms / 1e6
    del buf
    small = a0[:touched]
    sbuf = cp.empty_like(small)
    ms = common.time_gpu(lambda: cp.copyto(sbuf, small), repeat=repeat)
    row["copy_same_gbs"] = moved_bytes / ms / 1e6
    del sbuf, small

    # Ours (timing on the already-permuted matrix: the cost does not depend on the data).
    row["ms"] = common.time_gpu(lambda: _laswp.laswp_inplace(a, piv_dev), repeat=repeat)
    row["gbs"] = moved_bytes / row["ms"] / 1e6
    row["pct_copy"] = 100.0 * row["gbs"] / row["copy_gbs"]
    row["variant"] = _laswp.DEFAULT
    for v in variants:
        ms = common.time_gpu(lambda: _laswp.laswp_inplace(a, piv_dev, variant=v), repeat=repeat)
        row[f"{v}_ms"] = ms
        row[f"{v}_pct_copy"] = 100.0 * moved_bytes / ms / 1e6 / row["copy_gbs"]
        b = a0.copy()
        _laswp.laswp_inplace(b, piv_dev, variant=v)
        row["ok"] = row["ok"] and bool(cp.array_equal(b, ref_fwd))
        _laswp.laswp_inplace(b, piv_dev, inverse=True, variant=v)
        row["ok_inverse"] = row["ok_inverse"] and bool(cp.array_equal(b, a0))
        del b

    # CuPy baselines.
    row["cupy_ms"] = common.time_gpu(lambda: swap_one_by_one(a, piv), warmup=1,
                                     repeat=max(3, repeat // 4))
    row["speedup"] = row["cupy_ms"] / row["ms"]
    moves = _laswp.net_moves(piv)
    src = cp.asarray([s for s, _ in moves], dtype=cp.int64)
    dst = cp.asarray([d for _, d in moves], dtype=cp.int64)

    def gather_scatter():
        a[dst] = a[src]
    row["gather_scatter_ms"] = common.time_gpu(gather_scatter, repeat=repeat)
    del a, a0, ref_fwd
    return row


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpulinalg-bench laswp", description=__doc__)
    p.add_argument("--sizes", default="16384,32768", help="comma-separated n (square) or MxN")
    p.add_argument("--npiv", default="128", help="comma-separated pivot counts, e.g. 128,256,512")
    p.add_argument("--variants", default="",
                   help="kernel variants to time beside the default ('all' for every one)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--json", help="write rows + environment here")
    args = p.parse_args(argv)
    from .. import _laswp
    from .transpose import parse_shapes
    variants = (list(_laswp.VARIANTS) if args.variants == "all"
                else [v for v in args.variants.split(",") if v])
    unknown = [v for v in variants if v not in _laswp.VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {list(_laswp.VARIANTS)}")
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}")
    rows = []
    for m, n in parse_shapes(args.sizes):
        for k in common.parse_sizes(args.npiv):
            rows.append(measure(m, n, k, args.repeat, variants=variants))
            r = rows[-1]
            print(f"{m}x{n} npiv={k}: ours {r['ms']:.3f} ms, {r['gbs']:.0f} GB/s "
                  f"({r['pct_copy']:.1f}% of copy), cupy {r['cupy_ms']:.2f} ms, "
                  f"ok={r['ok']}/{r['ok_inverse']}", flush=True)
    print()
    cols = [("m", "m", "{}"), ("n", "n", "{}"), ("npiv", "npiv", "{}"),
            ("touched_rows", "rows", "{}"), ("ms", "ours ms", "{:.3f}"),
            ("gbs", "GB/s moved", "{:.0f}"), ("pct_copy", "% copy", "{:.1f}"),
            ("copy_gbs", "copy GB/s", "{:.0f}"), ("copy_same_gbs", "copy same GB/s", "{:.0f}"),
            ("cupy_ms", "cupy indexing ms", "{:.2f}"), ("speedup", "speedup", "{:.0f}"),
            ("gather_scatter_ms", "cupy gather/scatter ms", "{:.3f}"), ("W", "W", "{}")]
    for v in variants:
        cols += [(f"{v}_ms", f"{v} ms", "{:.3f}"), (f"{v}_pct_copy", f"{v} % copy", "{:.1f}")]
    cols += [("variant", "default", "{}"), ("ok", "ok", "{}")]
    common.print_table(cols, rows)
    common.write_json(args.json, "laswp", rows, {"variants": variants})
    return 0 if all(r["ok"] and r["ok_inverse"] for r in rows) else 1
