"""Where the host's time goes in one LU call: cProfile of `lu_factor` on a GPU-resident
matrix, beside the call's GPU-timed length with and without the timeline, and cuSOLVER.

    python3 benchmarks/lu_profile.py 2048,4096 [--panel gpu] [--devices 1] [--top 30]

Per size: the median of `--repeat` calls timed with CUDA events (as gpulinalg-bench lu), the
same with `_timeline` (what the benchmark's one-GPU rows record), the driver's own wall time
(the timeline's), cuSOLVER's median, then the functions with the most own time over
`--calls` profiled calls (each synchronised).  A call whose host enqueue is longer than its
GPU work is bound by Python: the profile says which wrapper to slim.
"""

import argparse
import cProfile
import io
import pstats
import statistics


def main(argv=None):
    import cupy as cp
    from cupyx.scipy.linalg import lu_factor as cusolver_lu_factor

    from gpulinalg import lu_factor
    from gpulinalg.bench.common import environment, random_matrix, time_gpu

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sizes", help="comma-separated n (square matrices)")
    p.add_argument("--panel", default="gpu")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=5, help="profiled calls (0: timings only)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--chars", type=int, default=12000, help="print at most this much profile")
    args = p.parse_args(argv)
    env = environment()
    print(f"{env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}")
    kw = dict(panel=args.panel, devices=None if args.devices == 1 else args.devices)
    for n in (int(s) for s in args.sizes.split(",")):
        a = random_matrix((n, n), n, cp)
        ms_cus = time_gpu(lambda: cusolver_lu_factor(a), warmup=1, repeat=args.repeat)
        ms = time_gpu(lambda: lu_factor(a, **kw), warmup=2, repeat=args.repeat)
        tls = []
        ms_tl = time_gpu(lambda: lu_factor(a, _timeline=tls, **kw), warmup=1,
                         repeat=args.repeat)
        med = lambda key: (statistics.median(t.get(key) or 0.0 for t in tls) if tls
                           else float("nan"))
        print(f"\n== n = {n}, panel {args.panel}, {args.devices} GPU(s): ours {ms:.3f} ms "
              f"(with timeline {ms_tl:.3f}; driver wall {med('wall_ms'):.3f}, host gaps "
              f"{med('gap_ms'):.3f}, panels {med('transfer_ms'):.3f}, look-ahead chain "
              f"{med('next_ms'):.3f}), cuSOLVER {ms_cus:.3f} ms, ratio {ms_cus / ms:.3f}")
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
        st.sort_stats("cumulative").print_callees(r"\(_factor\)|_lu_ops.py:\d+\(__init__\)|\(getrf\)")
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:args.chars])
        del a
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
