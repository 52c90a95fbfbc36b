"""Where the host's time goes in one LU call: cProfile of `lu_factor` on a GPU-resident
matrix, beside the call's GPU-timed length with and without the timeline, and cuSOLVER.

    python3 tools/lu_profile.py 2048,16384x8192 [--panel gpu] [--devices 1] [--top 30]

Per size: the median of `--repeat` calls timed with CUDA events (as gpulinalg-bench lu), the
same with a timeline (gpulinalg.testing.lu.lu_factor's `timeline`: what the benchmark's
one-GPU rows record), the driver's own wall time
(the timeline's), cuSOLVER's median, then the functions with the most own time over
`--calls` profiled calls (each synchronised).  A call whose host enqueue is longer than its
GPU work is bound by Python: the profile says which wrapper to slim.  `--methods` adds the
host's real time in each device-step method of CupyOps (no profiler inflating it), per call
and per step: what the CPU panel's gap between two panels is made of.  `--enqueue` adds, for
uninstrumented driver calls (graph replay off), when the host finished enqueueing the loop
against when the call returned (synchronised): equal means the call was bound by the host.
"""

import argparse
import cProfile
import io
import pstats
import statistics


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sizes", help="comma-separated n or MxN")
    p.add_argument("--panel", default="gpu")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--precision", default="auto", help="lu_factor's precision=")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=5, help="profiled calls (0: timings only)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--chars", type=int, default=12000, help="print at most this much profile")
    p.add_argument("--enqueue", action="store_true",
                   help="also the driver's host enqueue time against the call's (no graph)")
    p.add_argument("--methods", action="store_true",
                   help="also the host's real time in each device-step method (no profiler)")
    args = p.parse_args(argv)
    import cupy as cp
    from cupyx.scipy.linalg import lu_factor as cusolver_lu_factor

    from gpulinalg import lu_factor
    from gpulinalg.bench.common import environment, parse_shapes, random_matrix, time_gpu
    from gpulinalg.testing.lu import lu_factor as lu_factor_hooks

    env = environment()
    print(f"{env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}")
    kw = dict(panel=args.panel, devices=None if args.devices == 1 else args.devices,
              precision=args.precision)
    for m, n in parse_shapes(args.sizes):
        a = random_matrix((m, n), n, cp)
        ms_cus = time_gpu(lambda: cusolver_lu_factor(a), warmup=1, repeat=args.repeat)
        ms = time_gpu(lambda: lu_factor(a, **kw), warmup=2, repeat=args.repeat)
        tls = []
        ms_tl = time_gpu(lambda: lu_factor_hooks(a, timeline=tls, **kw), warmup=1,
                         repeat=args.repeat)
        med = lambda key: (statistics.median(t.get(key) or 0.0 for t in tls) if tls
                           else float("nan"))
        print(f"\n== {m} x {n}, panel {args.panel}, {args.devices} GPU(s): ours {ms:.3f} ms "
              f"(with timeline {ms_tl:.3f}; driver wall {med('wall_ms'):.3f}, host gaps "
              f"{med('gap_ms'):.3f}, panels {med('transfer_ms'):.3f}, look-ahead chain "
              f"{med('next_ms'):.3f}), cuSOLVER {ms_cus:.3f} ms, ratio {ms_cus / ms:.3f}")
        if args.enqueue:
            enqueue_times(lambda: lu_factor(a, **kw), args.repeat)
        if args.methods:
            method_times(lambda: lu_factor(a, **kw), args.calls or 1, n)
        if not args.calls:
            continue
        prof = cProfile.Profile()
        for _ in range(args.calls):
            prof.enable()
            lu_factor(a, **kw)
            prof.disable()
            cp.cuda.Device().synchronize()
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s).sort_stats("tottime")
        st.print_stats(args.top)
        st.sort_stats("cumulative").print_stats("gpulinalg", args.top)
        st.sort_stats("cumulative").print_callees(
            r"\(lu_factor\)|steps.py:\d+\(__init__\)|\(getrf\)")
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:args.chars])
        a = None
        cp.get_default_memory_pool().free_all_blocks()


def enqueue_times(call, calls):
    """Per driver call (graph replay off, no timeline): ms until
    `gpulinalg.lu.driver.enqueue_steps` returned (the host has issued the whole loop) and until
    the call returned, synchronised.  The function is wrapped (a spy) for these calls."""
    import time

    import cupy as cp

    from gpulinalg.lu import driver
    from gpulinalg.lu import graph
    enqueue_steps, stamps = driver.enqueue_steps, []

    def stamped(*args, **kwargs):
        try:
            return enqueue_steps(*args, **kwargs)
        finally:
            stamps.append(time.perf_counter())

    driver.enqueue_steps = stamped
    rows = []
    try:
        with graph.disabled():
            call()   # warm-up
            for _ in range(calls):
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                call()
                cp.cuda.Device().synchronize()
                rows.append(((stamps[-1] - t0) * 1e3, (time.perf_counter() - t0) * 1e3))
    finally:
        driver.enqueue_steps = enqueue_steps
    print("-- driver calls, host ms: enqueued / returned " +
          "  ".join(f"{e:.1f}/{r:.1f}" for e, r in rows))


METHODS = ("record", "wait", "host_sync", "panel_to_host", "panel_to_device", "swap", "update",
           "receive", "take", "end_step", "panel_view")


def method_times(call, calls, n):
    """Host wall time spent inside each CupyOps method over `calls` calls (perf_counter around
    each call, no profiler inflating Python), per call and per step: what the enqueue between
    two panels is made of.  host_sync is the host's wait for the next panel, not enqueue."""
    import time

    import cupy as cp

    from gpulinalg.gemm import dispatch
    from gpulinalg.layout import laswp, transpose
    from gpulinalg.lu import multi, panel_gpu, steps, trsm
    # The methods, and inside them the launchers by pointer and the copies, wrapped (spies)
    # where they are looked up at call time; a name a module no longer has is skipped.
    owners = dict.fromkeys(METHODS, steps.CupyOps)
    owners.update({"_copy": steps.CupyOps, "gemm_ptr": dispatch, "laswp_ptr": laswp,
                   "transpose_ptr": transpose, "trsm_ptr": trsm,
                   # the GPU panel (enqueue of its recursion) and the multi-GPU driver's home
                   "factor": panel_gpu.GpuPanel, "send": panel_gpu.GpuPanel,
                   "_collect": multi})
    missing = sorted(name for name, owner in owners.items() if not hasattr(owner, name))
    if missing:
        print(f"-- not timed (no such name): {', '.join(missing)}")
        owners = {name: owner for name, owner in owners.items() if name not in missing}
    totals = {name: [0.0, 0] for name in owners}
    saved = {name: getattr(owner, name) for name, owner in owners.items()}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                totals[name][0] += time.perf_counter() - t
                totals[name][1] += 1
        return wrapper

    try:
        for name, fn in saved.items():
            setattr(owners[name], name, timed(name, fn))
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
            cp.cuda.Device().synchronize()
        wall = (time.perf_counter() - t0) / calls
    finally:
        for name, fn in saved.items():
            setattr(owners[name], name, fn)
    # one wait per panel (CPU panel), else one factor per panel (GPU panel)
    count = lambda name: totals.get(name, (0.0, 0))[1]
    nsteps = max(1, (count("host_sync") or count("factor")) // calls)
    print(f"-- host time per call in CupyOps methods (n = {n}, {calls} calls, wall "
          f"{wall * 1e3:.2f} ms, {nsteps} waits per call)")
    print(f"{'method':>16} {'calls/call':>10} {'ms/call':>9} {'us/step':>9} {'us each':>9}")
    enqueue = 0.0
    for name, (sec, cnt) in totals.items():
        if cnt:
            per_call = sec / calls
            enqueue += (per_call if name in METHODS + ("factor", "send")
                        and name not in ("host_sync", "panel_view") else 0.0)
            print(f"{name:>16} {cnt / calls:10.1f} {per_call * 1e3:9.3f} "
                  f"{per_call / nsteps * 1e6:9.1f} {sec / cnt * 1e6:9.2f}")
    print(f"{'enqueue (the methods but host_sync)':>38}: {enqueue * 1e3:.3f} ms/call, "
          f"{enqueue / nsteps * 1e6:.1f} us/step")


if __name__ == "__main__":
    main()
