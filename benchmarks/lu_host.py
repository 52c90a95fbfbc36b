"""lu_factor on a NumPy matrix (host in, host out) against the same call on a CuPy matrix, and
the plain transfers of as many bytes, in one run.

    python3 benchmarks/lu_host.py 4096,8192,16384 [--scipy 8192] [--json FILE] \
        [--tuning staging_bytes_one=16777216,33554432]

Per size and tuning setting (--tuning FIELD=v1,v2, fields of gpulinalg/tuning.py: each value
under `gpulinalg.tuning.override(dataclasses.replace(current(), FIELD=v))`; none: the
defaults), median wall ms (host clock, the GPU synchronised) of:
lu_factor(CuPy matrix); lu_factor(NumPy matrix) (what a NumPy user calls: the upload and the
download inside); cp.asarray(NumPy matrix) and cp.asnumpy(CuPy matrix) (pageable copies);
gpulinalg/core/host_io.py's upload and download (pinned staging, what lu_factor uses); with
--scipy N, scipy.linalg.lu_factor on the host up to size N (once per size).  --json writes
the rows (benchmarks/make_docs.py turns them into a table of docs/performance.md).
"""

import argparse
import os
import statistics
import time


def wall(fn, repeat):
    import cupy as cp
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--scipy", type=int, default=0, help="largest n for SciPy (0: none)")
    p.add_argument("--json", help="write the rows to this file")
    from gpulinalg.bench.common import add_tuning_argument
    add_tuning_argument(p)
    args = p.parse_args()
    import cupy as cp
    import numpy as np
    import scipy.linalg

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.bench.common import (describe_tuning, environment, tuning_settings,
                                        write_json)
    from gpulinalg.core import host_io

    settings = tuning_settings(args.tuning)
    width = max(len(label) for label, _ in settings)
    print(f"{environment()['device']}, CuPy {cp.__version__}; {describe_tuning(args.tuning)}")
    rows = []
    print(f"{'setting':>{width}s} {'n':>6s} {'CuPy in ms':>10s} {'NumPy in ms':>11s} "
          f"{'upload ms':>9s} {'download ms':>11s} {'staged up':>9s} {'staged down':>11s} "
          f"{'SciPy ms':>9s}")
    for n in (int(x) for x in args.sizes.split(",")):
        host = np.random.default_rng(n).standard_normal((n, n), dtype=np.float32)
        dev = cp.asarray(host)
        t_sp = (wall(lambda: scipy.linalg.lu_factor(host, check_finite=False), 1)
                if n <= args.scipy else float("nan"))
        for label, table in settings:
            with tuning.override(table):
                t_dev = wall(lambda: gpulinalg.lu_factor(dev), args.repeat)
                t_host = wall(lambda: gpulinalg.lu_factor(host), args.repeat)
                t_up = wall(lambda: cp.asarray(host), args.repeat)
                t_down = wall(lambda: cp.asnumpy(dev), args.repeat)
                t_sup = wall(lambda: host_io.upload(cp, host), args.repeat)
                t_sdown = wall(lambda: host_io.download(cp, dev), args.repeat)
            print(f"{label:>{width}} {n:6d} {t_dev:10.2f} {t_host:11.2f} {t_up:9.2f} "
                  f"{t_down:11.2f} {t_sup:9.2f} {t_sdown:11.2f} {t_sp:9.1f}", flush=True)
            rows.append({"n": n, "setting": label, "cupy_ms": t_dev,
                         "numpy_ms": t_host, "pageable_up_ms": t_up,
                         "pageable_down_ms": t_down, "staged_up_ms": t_sup,
                         "staged_down_ms": t_sdown, "scipy_ms": t_sp if t_sp == t_sp else None,
                         "threads": table.pack_threads_one})
        dev = None
        cp.get_default_memory_pool().free_all_blocks()
    write_json(args.json, "lu_host", rows, {"cpu_count": os.cpu_count()})


if __name__ == "__main__":
    main()
