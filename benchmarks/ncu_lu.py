"""Where an LU's GPU time goes, kernel by kernel, under Nsight Compute.

Profile one lu_factor call (after a warm-up call that compiles and caches everything):

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
        --log-file out/ncu_lu.csv python3 benchmarks/ncu_lu.py 4096 [panel] [precision]

then sum the durations by kernel (Nsight Compute serialises the launches, so these are the
kernels' own times, without the overlap of the two streams):

    python3 benchmarks/ncu_lu.py --summarize out/ncu_lu.csv
"""
import collections
import csv
import re
import sys


def profile(n, panel, precision):
    import cupy as cp

    import gpulinalg
    a = cp.random.default_rng(0).standard_normal((n, n), dtype=cp.float32)
    gpulinalg.lu_factor(a, panel=panel, precision=precision)      # warm-up: compile, cache
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    gpulinalg.lu_factor(a, panel=panel, precision=precision)
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()


def summarize(path):
    """Total ms, launches and mean us per kernel family (template arguments dropped)."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    total = collections.defaultdict(float)
    count = collections.Counter()
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        ns = value * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(row["Metric Unit"], 1)
        name = re.sub(r"<.*", "", re.sub(r"^void ", "", row["Kernel Name"]))
        total[name] += ns / 1e6
        count[name] += 1
    grand = sum(total.values())
    print(f"{'kernel':40s} {'ms':>9s} {'%':>6s} {'launches':>9s} {'us each':>9s}")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{name[:40]:40s} {ms:9.3f} {100 * ms / grand:6.1f} {count[name]:9d} "
              f"{1e3 * ms / count[name]:9.1f}")
    print(f"{'all kernels':40s} {grand:9.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "--summarize":
        summarize(sys.argv[2])
    else:
        profile(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "gpu",
                sys.argv[3] if len(sys.argv) > 3 else "fp32")
