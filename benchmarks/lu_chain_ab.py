"""The CPU panel's chain (gpulinalg/_lu.py, CpuPanel.chain), variant against variant in one run.

Per size, each variant (chunks, pre_enqueue) factors the same random matrix `repeat` times,
round-robin over the variants after one warm-up each; per variant the median call's
timeline gives wall / max(sum host panel, sum GPU), the wall time, the host panel sum, the
host's idle time between panels (gap) and how long the host spends after each panel before
it waits for the next one (after).  Variant "0" is the unpipelined path (chunks=0).

    python3 benchmarks/lu_chain_ab.py --sizes 8192,16384,32768 --json out.json
"""

import argparse
import json
import statistics

VARIANTS = {"0": (0, False), "s1": (1, False), "s2": (2, False), "s4": (4, False),
            "p1": (1, True), "p2": (2, True), "p4": (4, True), "p8": (8, True),
            "auto": (None, True)}


def run_variant(a, chunks, pre, tl):
    import gpulinalg
    from gpulinalg import _lu
    _lu.CHAIN_CHUNKS, _lu.PRE_ENQUEUE = chunks, pre
    gpulinalg.lu_factor(a, panel="cpu", _timeline=tl)


def summary(tl):
    steps = tl["steps"]
    after = [s["enqueued"] - s["host_end"] for s in steps]
    wait = [s["sync_end"] - s["sync_start"] for s in steps]
    gaps = [s["gap_ms"] for s in steps[:-1]]
    return {"wall_over_max": tl["wall_over_max"], "wall_ms": tl["wall_ms"],
            "host_panel_ms": tl["host_panel_ms"], "gpu_ms": tl["gpu_ms"],
            "gap_ms": tl["gap_ms"], "gap_step_ms": statistics.mean(gaps) if gaps else 0.0,
            "gap_step_median_ms": statistics.median(gaps) if gaps else 0.0,
            "after_step_ms": statistics.median(after), "wait_step_ms": statistics.median(wait),
            "recv_step_ms": statistics.median(s["recv_ms"] for s in steps),
            "send_step_ms": statistics.median(s["send_ms"] for s in steps[1:] or steps),
            "steps": len(steps)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="8192,16384,32768")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("--profile", default=None, help="cProfile one call per variant at the "
                   "first size into this text file")
    args = p.parse_args(argv)
    import cupy as cp

    from gpulinalg._lu_ops import _HostGate
    names = [v for v in args.variants.split(",") if v]
    out = {"rows": [], "timelines": []}
    for n in [int(x) for x in args.sizes.split(",") if x]:
        a = cp.random.default_rng(n).standard_normal((n, n), dtype=cp.float32)
        runs = {v: [] for v in names}
        for v in names:                       # warm-up (compilation, pinned buffers)
            run_variant(a, *VARIANTS[v], [])
        for _ in range(args.repeat):
            for v in names:
                tl = []
                run_variant(a, *VARIANTS[v], tl)
                runs[v].append(tl[0])
        for v in names:
            tl = sorted(runs[v], key=lambda t: t["wall_ms"])[len(runs[v]) // 2]
            row = {"n": n, "variant": v, "chunks": VARIANTS[v][0], "pre_enqueue": VARIANTS[v][1],
                   "walls_ms": [t["wall_ms"] for t in runs[v]], **summary(tl)}
            out["rows"].append(row)
            out["timelines"].append({"variant": v, **tl})
            print(f"{n:6d} {v:5s} wall/max {row['wall_over_max']:.3f} wall {row['wall_ms']:8.1f}"
                  f" host {row['host_panel_ms']:8.1f} gpu {row['gpu_ms']:7.1f} gap/step "
                  f"{row['gap_step_ms']:.3f} after {row['after_step_ms']:.3f} wait "
                  f"{row['wait_step_ms']:.3f} recv {row['recv_step_ms']:.3f} send "
                  f"{row['send_step_ms']:.3f}", flush=True)
        if args.profile and n == int(args.sizes.split(",")[0]):
            import cProfile
            import io
            import pstats
            with open(args.profile, "w") as f:
                for v in names:
                    pr = cProfile.Profile()
                    pr.enable()
                    run_variant(a, *VARIANTS[v], [])
                    pr.disable()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
                    f.write(f"==== n={n} variant {v}\n{s.getvalue()}\n")
        del a
        cp.get_default_memory_pool().free_all_blocks()
    out["host_gate"] = {str(k): v for k, v in _HostGate._probed.items()}
    print("host gate works:", out["host_gate"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
