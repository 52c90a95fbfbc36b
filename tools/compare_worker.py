"""One tree's side of tools/compare_trees.py: time the default LU and SGEMM, write JSON.

    PYTHONPATH=TREE python3 tools/compare_worker.py --tree TREE --label new --out FILE \
        [--sizes 2048,4096] [--devices 1,2] [--squares 4096] [--rank-k 64,128] [--repeat 5]
        [--hash]

Runs in a process of its own with `gpulinalg` imported from TREE (two trees' packages cannot
share a process), and uses only the public API that every tree has: `gpulinalg.lu_factor`,
`gpulinalg.matmul` and `gpulinalg.sgemm`, with their default options.  Inputs are seeded
standard-normal float32 CuPy matrices on the GPU (never zeros), the same in every process.

- LU, per n and per P of --devices: `lu_factor(a)` (P = 1) or `lu_factor(a, devices=P)` on
  an n x n matrix on the current GPU; two warm-up calls (compilation, and the CUDA
  graph a shape's second call captures where the LU replays one), then --repeat calls, each
  timed by the host clock between two device synchronisations (the LU runs on streams of its
  own: the wall time with the device drained is what a caller waits).
- SGEMM: squares C = A B (`matmul(a, b, out=c)`) and the rank-k updates C -= A B of
  16384 x 16384 x k (`sgemm(-1.0, a, b, 1.0, c, overwrite_c=True)`, the LU's trailing
  update); two warm-up calls, then --repeat bursts of --calls back-to-back calls between two
  CUDA events on the current stream (where sgemm runs), ms per call.
- --hash: the sha256 of the LU's factors (C-order bytes) and pivots of each n, and of one
  SGEMM result per case (C restored first), to check that two trees give the same bits.

Writes {"label", "tree", "gpulinalg_file", "environment", "lu": {n: ...}, "sgemm": {case:
...}} to --out; a case that fails records its error and the others still run.
"""

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import sys
import time

RANK_K_N = 16384   # the rank-k updates' C is RANK_K_N x RANK_K_N


def _matrix(cp, shape, seed):
    return cp.random.default_rng(seed).standard_normal(shape, dtype=cp.float32)


def _sha256(cp, *arrays):
    h = hashlib.sha256()
    for x in arrays:
        host = cp.asnumpy(x)
        h.update(str((host.dtype.str, host.shape)).encode())
        h.update(memoryview(host.copy(order="C") if not host.flags.c_contiguous else host))
    return h.hexdigest()


def _synchronize_all(cp):
    for d in range(cp.cuda.runtime.getDeviceCount()):
        with cp.cuda.Device(d):
            cp.cuda.Device().synchronize()


def time_lu(cp, gpulinalg, n, devices, repeat, hash_):
    a = _matrix(cp, (n, n), 1000 + n)
    kw = {} if devices == 1 else {"devices": devices}
    t = time.perf_counter()
    gpulinalg.lu_factor(a, **kw)
    _synchronize_all(cp)
    first_s = time.perf_counter() - t
    gpulinalg.lu_factor(a, **kw)
    times = []
    for _ in range(repeat):
        _synchronize_all(cp)
        t = time.perf_counter()
        gpulinalg.lu_factor(a, **kw)
        _synchronize_all(cp)
        times.append((time.perf_counter() - t) * 1e3)
    row = {"ms": statistics.median(times), "times_ms": times, "first_call_s": first_s}
    if hash_:
        lu, piv = gpulinalg.lu_factor(a, **kw)
        row["sha256"] = _sha256(cp, lu, piv)
        del lu, piv
    return row


def time_burst(cp, fn, repeat, calls):
    """(median ms per call over `repeat` bursts, [each burst's ms per call])."""
    for _ in range(2):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        cp.cuda.Device().synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / calls)
    return statistics.median(times), times


def time_square(cp, gpulinalg, s, repeat, calls, hash_):
    a, b = _matrix(cp, (s, s), 1), _matrix(cp, (s, s), 2)
    c = cp.empty((s, s), dtype=cp.float32)
    ms, times = time_burst(cp, lambda: gpulinalg.matmul(a, b, out=c), repeat, calls)
    row = {"ms": ms, "times_ms": times, "tflops": 2.0 * s ** 3 / ms / 1e9}
    if hash_:
        c.fill(cp.nan)
        gpulinalg.matmul(a, b, out=c)
        row["sha256"] = _sha256(cp, c)
    return row


def time_rank_k(cp, gpulinalg, k, repeat, calls, hash_):
    n = RANK_K_N
    a, b, c0 = _matrix(cp, (n, k), 3), _matrix(cp, (k, n), 4), _matrix(cp, (n, n), 5)
    c = c0.copy()
    ms, times = time_burst(cp, lambda: gpulinalg.sgemm(-1.0, a, b, 1.0, c, overwrite_c=True),
                           repeat, calls)
    row = {"ms": ms, "times_ms": times, "tflops": 2.0 * n * n * k / ms / 1e9}
    if hash_:
        c[...] = c0
        gpulinalg.sgemm(-1.0, a, b, 1.0, c, overwrite_c=True)
        row["sha256"] = _sha256(cp, c)
    return row


def _environment(cp):
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return {"device": name.decode() if isinstance(name, bytes) else name,
            "compute_capability": cp.cuda.Device().compute_capability,
            "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "python": sys.version.split()[0], "pid": os.getpid()}


def _cases(args):
    sizes = [int(x) for x in args.sizes.split(",") if x]
    squares = [int(x) for x in args.squares.split(",") if x]
    ks = [int(x) for x in args.rank_k.split(",") if x]
    devices = [int(x) for x in args.devices.split(",") if x]
    return ([("lu", str(n) + ("" if p == 1 else f" on {p} GPUs"),
              lambda cp, g, n=n, p=p: time_lu(cp, g, n, p, args.repeat, args.hash))
             for n in sizes for p in devices]
            + [("sgemm", f"{s}^3", lambda cp, g, s=s: time_square(
                cp, g, s, args.repeat, args.calls, args.hash)) for s in squares]
            + [("sgemm", f"{RANK_K_N}^2 x {k}", lambda cp, g, k=k: time_rank_k(
                cp, g, k, args.repeat, args.calls, args.hash)) for k in ks])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", required=True, help="the tree gpulinalg must come from")
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--sizes", default="2048,4096,8192,16384,32768", help="LU sizes")
    p.add_argument("--devices", default="1", help="GPU counts of the LU (1: no devices=)")
    p.add_argument("--squares", default="4096,8192,16384", help="SGEMM squares")
    p.add_argument("--rank-k", default="64,128,256,512", help="k of the rank-k updates")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--calls", type=int, default=3, help="SGEMM calls per timed burst")
    p.add_argument("--hash", action="store_true", help="also hash the results")
    args = p.parse_args(argv)
    import cupy as cp

    import gpulinalg
    tree = pathlib.Path(args.tree).resolve()
    where = pathlib.Path(gpulinalg.__file__).resolve()
    if tree not in where.parents:
        sys.exit(f"gpulinalg comes from {where}, not from {tree}: set PYTHONPATH={tree}")
    doc = {"label": args.label, "tree": str(tree), "gpulinalg_file": str(where),
           "environment": _environment(cp), "lu": {}, "sgemm": {}}
    for routine, case, run in _cases(args):
        try:
            doc[routine][case] = run(cp, gpulinalg)
        except Exception as exc:   # noqa: BLE001 -- record it, go on with the other cases
            doc[routine][case] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        cp.get_default_memory_pool().free_all_blocks()
        r = doc[routine][case]
        print(f"{args.label} {routine} {case}: " + (f"{r['ms']:.3f} ms" if "ms" in r
                                                    else r["error"]), flush=True)
    path = pathlib.Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
