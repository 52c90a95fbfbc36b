"""Where an LU's GPU time goes, kernel by kernel, under Nsight Compute.

Profile one lu_factor call (after a warm-up call that compiles and caches everything):

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
        --log-file out/ncu_lu.csv python3 tools/ncu_lu.py 4096 [panel] [precision]

then sum the durations by kernel (Nsight Compute serialises the launches, so these are the
kernels' own times, without the overlap of the two streams):

    python3 tools/ncu_lu.py --summarize out/ncu_lu.csv
    python3 tools/ncu_lu.py --launches out/ncu_lu.csv > out/launches.txt   # in order
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


def durations(path):
    """[(row, ms)] of the profiled launches in launch order."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    out = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        ns = value * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(row["Metric Unit"], 1)
        out.append((row, ns / 1e6))
    return out


def launches(path):
    """One line per launch, in order: index, us, grid, block, stream, kernel (with its
    template arguments): which kernels make up a step."""
    for i, (row, ms) in enumerate(durations(path)):
        name = re.sub(r"^void ", "", row["Kernel Name"])
        print(f"{i:5d} {1e3 * ms:9.1f} {row.get('Grid Size', '?'):>14s} "
              f"{row.get('Block Size', '?'):>12s} {row.get('Stream', '?'):>4s} {name[:90]}")


def summarize(path):
    """Total ms, launches and mean us per kernel family (template arguments dropped)."""
    total = collections.defaultdict(float)
    count = collections.Counter()
    for row, ms in durations(path):
        name = re.sub(r"<.*", "", re.sub(r"^void ", "", row["Kernel Name"]))
        total[name] += ms
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
    elif sys.argv[1] == "--launches":
        launches(sys.argv[2])
    else:
        profile(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "gpu",
                sys.argv[3] if len(sys.argv) > 3 else "fp32")
