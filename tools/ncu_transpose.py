"""DRAM and L2 traffic of the transpose kernels under Nsight Compute, against the ideal.

Profile one call per (shape, variant) after a warm-up call:

    ncu --profile-from-start off --csv --log-file out/ncu_tr.csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum \
        python3 tools/ncu_transpose.py 16385,16384 128x8-skew,64x4-pair

then print each kernel's bytes as multiples of the ideal m*n*4 read and m*n*4 written (an
excess of DRAM reads on the write side's misaligned units is a read-modify-write):

    python3 tools/ncu_transpose.py --summarize out/ncu_tr.csv
"""
import collections
import csv
import sys

UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1, "KB": 1e3, "MB": 1e6,
         "GB": 1e9, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "ns": 1e-9, "us": 1e-6,
         "ms": 1e-3, "sector": 32}


def profile(shapes, variants):
    import cupy as cp

    from gpulinalg.bench.common import parse_shapes, random_matrix
    from gpulinalg.layout import transpose as _transpose
    for m, n in parse_shapes(shapes):
        a = random_matrix((m, n), 1, cp)
        out = cp.empty((n, m), dtype=cp.float32)
        for v in variants.split(","):
            _transpose.transpose_into(a, out, variant=v)   # warm-up: compile, cache
            cp.cuda.Device().synchronize()
            cp.cuda.profiler.start()
            _transpose.transpose_into(a, out, variant=v)
            cp.cuda.Device().synchronize()
            cp.cuda.profiler.stop()
            assert (out == a.T).all()
            print(f"profiled {m}x{n} {v}", flush=True)


def summarize(path):
    """One line per profiled kernel: its grid, time and traffic over the ideal."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    kernels = collections.OrderedDict()
    for row in csv.DictReader(lines):
        key = (row["ID"], row["Kernel Name"], row.get("Grid Size", ""))
        value = float(row["Metric Value"].replace(",", ""))
        kernels.setdefault(key, {})[row["Metric Name"]] = value * UNITS.get(row["Metric Unit"], 1)
    print(f"{'kernel':44s} {'grid':>14s} {'us':>8s} {'dram rd':>8s} {'dram wr':>8s} "
          f"{'L2 rd':>8s} {'L2 wr':>8s}  (GB)")
    for (_, name, grid), m in kernels.items():
        print(f"{name[:44]:44s} {grid:>14s} {1e6 * m.get('gpu__time_duration.sum', 0):8.1f} "
              f"{m.get('dram__bytes_read.sum', 0) / 1e9:8.3f} "
              f"{m.get('dram__bytes_write.sum', 0) / 1e9:8.3f} "
              f"{m.get('lts__t_sectors_op_read.sum', 0) / 1e9:8.3f} "
              f"{m.get('lts__t_sectors_op_write.sum', 0) / 1e9:8.3f}")
    print("ideal: m*n*4 bytes read and as many written (16384^2: 1.074 GB each way)")


if __name__ == "__main__":
    if sys.argv[1] == "--summarize":
        summarize(sys.argv[2])
    else:
        profile(sys.argv[1], sys.argv[2])
