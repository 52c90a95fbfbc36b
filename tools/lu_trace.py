"""The kernels of one LU call as the GPU ran them (CUPTI, through torch.profiler).

    python3 tools/lu_trace.py 8192 --tuning row_block_cap=32,64 --out DIR

The driver's own timeline (`gpulinalg-bench lu --timeline`, tools/lu_steps.py) stamps
events between its launches, so it runs the host-paced driver, not the graph replay that
ordinary calls take; Nsight Compute serialises the kernels.  This records every kernel of
one replayed call with its start, end and stream (CUPTI's concurrent-kernel activity, which
torch.profiler turns on), after two warm-up calls, once per tuning setting (--tuning
FIELD=v1,v2, fields of gpulinalg/tuning.py: each value under
`gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`; the captured graphs
are kept per table).  Printed per group of --group steps (a step = the span from one panel leaf's
start to the next one's): the leaf's time, the time between two leaves (the look-ahead
chain: swaps, U12, the next panel's product, and the launch gaps), the busy time of the
kernels that run wholly inside that gap, and the busy time of the other kernels beside the
leaf (the trailing update).  With --out, every kernel as JSON (name,
stream, start and end in microseconds from the call's first kernel, grid, block, registers).
"""

import argparse
import itertools
import json
import os
import statistics
import tempfile

LEAF_PREFIXES = ("void getrf_leaf", "void getrf_panel", "getrf_leaf", "getrf_panel")
GEMM_MARKS = ("sgemm", "wgmma")


def kernels_of(call):
    """[(name, stream, start_us, end_us, extra)] of the kernels `call` ran, sorted by start."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        for i in range(torch.cuda.device_count()):   # a distributed call ends on every GPU
            torch.cuda.synchronize(i)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = e.get("args", {})
        out.append({"name": e["name"], "stream": args.get("stream"), "start": float(e["ts"]),
                    "end": float(e["ts"]) + float(e["dur"]), "grid": args.get("grid"),
                    "block": args.get("block"), "regs": args.get("registers per thread"),
                    "smem": args.get("shared memory"), "device": args.get("device"),
                    "copy": e.get("cat") != "kernel"})
    out.sort(key=lambda k: k["start"])
    if out:
        t0 = out[0]["start"]
        for k in out:
            k["start"] -= t0
            k["end"] -= t0
    return out


def busy(intervals):
    """Length of the union of [start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0.0)


def summarize(kernels, group):
    """Per group of steps: mean leaf us, mean panel-stream gap between leaves (the chain), mean
    busy us of the other streams per step, and the kernels between two leaves (names)."""
    leaves = [k for k in kernels if k["name"].startswith(LEAF_PREFIXES)]
    if not leaves:
        print("  no panel leaf kernel found (CPU panel, or a name this script does not know)")
        return
    pstream = leaves[0]["stream"]
    wall = max(k["end"] for k in kernels)
    print(f"  kernels {len(kernels)}, span {wall / 1e3:.3f} ms, leaves {len(leaves)} on stream "
          f"{pstream}, leaf time {sum(k['end'] - k['start'] for k in leaves) / 1e3:.3f} ms")
    bounds = [k["start"] for k in leaves] + [wall]
    rows = []
    for i, leaf in enumerate(leaves):
        s0, s1 = bounds[i], bounds[i + 1]
        # CUPTI may report a graph's other branches on one stream: the chain is what runs
        # wholly between this leaf's end and the next one's start, on any stream
        chain = [k for k in kernels if leaf["end"] <= k["start"] and k["end"] <= s1]
        others = [(max(k["start"], s0), min(k["end"], leaf["end"])) for k in kernels
                  if k["stream"] != pstream and k["end"] > s0 and k["start"] < leaf["end"]]
        rows.append({"step": s1 - s0, "leaf": leaf["end"] - leaf["start"],
                     "gap": (s1 - leaf["end"]) if i + 1 < len(leaves) else 0.0,
                     "chain_busy": busy([(k["start"], k["end"]) for k in chain]),
                     "update_busy": busy(others), "chain": [k["name"][:28] for k in chain],
                     "grid": leaf["grid"]})
    print(f"  {'steps':>7s} {'step us':>8s} {'leaf us':>8s} {'gap us':>7s} {'chain busy':>10s} "
          f"{'beside leaf':>11s}  leaf grid")
    for g in range(0, len(rows), group):
        part = rows[g:g + group]
        mean = lambda key: statistics.mean(r[key] for r in part)
        print(f"  {g:3d}-{g + len(part) - 1:<3d} {mean('step'):8.1f} {mean('leaf'):8.1f} "
              f"{mean('gap'):7.1f} {mean('chain_busy'):10.1f} {mean('update_busy'):11.1f}  "
              f"{part[0]['grid']}")
    mid = rows[len(rows) // 2]
    print("  chain kernels of step", len(rows) // 2, ":", ", ".join(mid["chain"]))


def kind(k):
    """'copy', 'leaf', 'gemm' or 'other' for a record of kernels_of."""
    if k["copy"]:
        return "copy"
    if k["name"].startswith(LEAF_PREFIXES):
        return "leaf"
    return "gemm" if any(mark in k["name"] for mark in GEMM_MARKS) else "other"


def summarize_devices(kernels, windows=8):
    """Per device: busy ms of each kind of record (union of its intervals), the sum of the
    SGEMMs' durations, the idle ms (no kernel running) over the call's span, and the idle ms
    in each of `windows` equal parts of the span."""
    wall = max(k["end"] for k in kernels)
    edges = [wall * i / windows for i in range(windows + 1)]
    print(f"  span {wall / 1e3:.2f} ms; per device busy ms by kind (union), Σ SGEMM ms, idle ms"
          f" (no kernel), idle ms per 1/{windows} of the span")
    for dev in sorted({k["device"] for k in kernels}, key=str):
        mine = [k for k in kernels if k["device"] == dev]
        spans = lambda ks: [(k["start"], k["end"]) for k in ks]
        by = {c: busy(spans([k for k in mine if kind(k) == c]))
              for c in ("gemm", "leaf", "other", "copy")}
        work = spans([k for k in mine if not k["copy"]])
        parts = []
        for lo, hi in zip(edges, edges[1:]):
            inside = [(max(a, lo), min(b, hi)) for a, b in work if b > lo and a < hi]
            parts.append((hi - lo - busy(inside)) / 1e3)
        gemm_sum = sum(k["end"] - k["start"] for k in mine if kind(k) == "gemm")
        print(f"  device {dev}: " + " ".join(f"{c} {v / 1e3:.1f}" for c, v in by.items())
              + f"; Σ SGEMM {gemm_sum / 1e3:.1f}; idle {(wall - busy(work)) / 1e3:.1f}: "
              + " ".join(f"{x:.1f}" for x in parts))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", help="n or MxN, comma-separated (random matrices)")
    p.add_argument("--panel", default="gpu")
    p.add_argument("--precision", default="auto")
    p.add_argument("--group", type=int, default=8, help="steps per printed row")
    p.add_argument("--out", help="folder for the kernels of each call as JSON")
    p.add_argument("--devices", default="1",
                   help="GPU counts, comma-separated (> 1: a CuPy input, the distributed LU)")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp
    import torch

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.bench.common import parse_shapes, random_matrix, time_gpu, tuning_settings

    torch.cuda.init()
    counts = [int(x) for x in args.devices.split(",")]
    settings = tuning_settings(args.tuning)
    for m, n in parse_shapes(args.sizes):
        a = random_matrix((m, n), n)
        for (label, table), ndev in itertools.product(settings, counts):
            kw = {"devices": ndev} if ndev > 1 else {}

            def call():
                with tuning.override(table):
                    gpulinalg.lu_factor(a, panel=args.panel, precision=args.precision,
                                        **kw)
            ms = time_gpu(call, warmup=2, repeat=5)
            kernels = kernels_of(call)
            print(f"{m}x{n} {label} on {ndev} GPU(s): {ms:.2f} ms a call (events, "
                  f"median of 5)")
            if ndev > 1 or len(counts) > 1:
                summarize_devices(kernels)
            if ndev == 1:
                summarize(kernels, args.group)
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                tag = "".join(c if c.isalnum() or c in "=-" else "_" for c in label)
                with open(os.path.join(args.out, f"lu_trace_{m}x{n}_{tag}_{ndev}gpu.json"),
                          "w") as f:
                    json.dump({"m": m, "n": n, "tuning": label, "ms": ms,
                               "devices": ndev, "kernels": kernels}, f)
        a = None
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
