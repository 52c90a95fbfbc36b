"""First contact (issue 48): how long a new process waits for its first LU and GEMM.

Each run is a fresh Python process with an empty CuPy kernel cache (CUPY_CACHE_DIR: a new
temporary folder), which times, in this order,

  1. `import gpulinalg` + the first `lu_factor` of a 1000 x 1000 float32 NumPy matrix,
  2. the first `matmul` of two 4096 x 4096 float32 CuPy matrices (default precision),
  3. the first and the second `lu_factor` of a 16384 x 16384 float32 CuPy matrix,

each step synchronised at its end, the test matrices made before their timer starts.  It then
reports the kernels compiled at run time: the NVRTC modules gpulinalg built in the process and
the gpulinalg kernels CuPy's cache holds afterwards (none where the package's compiled
kernels serve the device), and the fallback warning if one was given.

    python benchmarks/first_call.py [--runs 2] [--n-large 16384] [--out first_call.json]

Targets (H100): step 1 <= 2.0 s, step 2 <= 0.5 s, step 3's first call <= its second + 1.0 s.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

TARGETS = {"import_lu_1000": 2.0, "matmul_4096": 0.5, "lu_large_extra": 1.0}


def _sync(cp):
    cp.cuda.Device().synchronize()


def child(n_large):
    """The measured process: the timings and what it compiled, as one JSON line."""
    import numpy as np
    a_small = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        import gpulinalg
        gpulinalg.lu_factor(a_small)
        out = {"import_lu_1000": time.perf_counter() - start}
        import cupy as cp
        rng = cp.random.default_rng(0)
        a, b = (rng.standard_normal((4096, 4096), dtype=cp.float32) for _ in range(2))
        _sync(cp)
        start = time.perf_counter()
        gpulinalg.matmul(a, b)
        _sync(cp)
        out["matmul_4096"] = time.perf_counter() - start
        del a, b
        big = rng.standard_normal((n_large, n_large), dtype=cp.float32)
        for key in ("lu_large_first", "lu_large_second"):
            _sync(cp)
            start = time.perf_counter()
            gpulinalg.lu_factor(big)
            _sync(cp)
            out[key] = time.perf_counter() - start
    out["lu_large_extra"] = out["lu_large_first"] - out["lu_large_second"]
    from gpulinalg.core import kernels
    out["nvrtc_modules"] = kernels._nvrtc_module.cache_info().currsize
    out["warnings"] = [str(w.message) for w in caught if "gpulinalg" in str(w.message)]
    out["device"] = _device(cp)
    print(json.dumps(out))


def _device(cp):
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props["name"]
    version = lambda v: f"{v // 1000}.{v % 1000 // 10}"
    return {"name": name.decode() if isinstance(name, bytes) else name,
            "capability": f"sm_{props['major']}{props['minor']}",
            "cuda_runtime": version(cp.cuda.runtime.runtimeGetVersion()),
            "cuda_driver": version(cp.cuda.runtime.driverGetVersion()),
            "cupy": cp.__version__}


def _our_kernels_in(cache):
    """The gpulinalg kernels in CuPy's cache, one entry per file that holds one: the family
    whose symbol a cubin names or whose source CuPy saved (CUPY_CACHE_SAVE_CUDA_SOURCE), or
    the name of a kernel named gpulinalg_* (a CuPy kernel defined by gpulinalg)."""
    from gpulinalg.core import kernels
    families = [p.stem for p in kernels.kernel_dir().glob("*.cu")]
    marks = {kernels.source(f)[:400].encode(): f for f in families}
    marks.update({b"\0" + s.encode() + b"\0": f for f in families
                  for s in ((kernels.manifest(f) or {}).get("symbols") or {}).values()})
    ours = []
    for path in sorted(Path(cache).iterdir()):
        data = path.read_bytes()
        named = re.search(rb"gpulinalg_\w+", data)
        found = [f for mark, f in marks.items() if mark in data]
        if named or found:
            ours.append(named.group().decode() if named else found[0])
    return ours


def run_once(n_large):
    """One fresh process with an empty CuPy cache: its record."""
    with tempfile.TemporaryDirectory(prefix="gpulinalg-first-call-") as cache:
        env = dict(os.environ, CUPY_CACHE_DIR=cache, CUPY_CACHE_SAVE_CUDA_SOURCE="1")
        env.pop("CUPY_CACHE_IN_MEMORY", None)
        proc = subprocess.run([sys.executable, __file__, "--child", "--n-large", str(n_large)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"the measured process failed:\n{proc.stderr[-3000:]}")
        record = json.loads(proc.stdout.strip().splitlines()[-1])
        record["cache_files"] = len(os.listdir(cache))
        record["gpulinalg_kernels_in_cache"] = _our_kernels_in(cache)
    return record


def report(runs, n_large):
    dev = runs[0]["device"]
    print(f"gpulinalg first call -- {dev['name']} ({dev['capability']}), CUDA runtime "
          f"{dev['cuda_runtime']}, driver {dev['cuda_driver']}, CuPy {dev['cupy']}")
    rows = [("import + lu_factor 1000^2 (NumPy)", "import_lu_1000"),
            ("first matmul 4096^2", "matmul_4096"),
            (f"lu_factor {n_large}^2: first call", "lu_large_first"),
            (f"lu_factor {n_large}^2: second call", "lu_large_second"),
            ("  first - second", "lu_large_extra")]
    print(f"{'step':40s}" + "".join(f"{'run ' + str(i + 1):>9s}" for i in range(len(runs)))
          + f"{'target':>9s}")
    for label, key in rows:
        target = f"{TARGETS[key]:.1f}" if key in TARGETS else ""
        print(f"{label:40s}" + "".join(f"{r[key]:9.2f}" for r in runs) + f"{target:>9s}")
    for i, r in enumerate(runs):
        ours = r["gpulinalg_kernels_in_cache"]
        print(f"run {i + 1}: NVRTC modules compiled by gpulinalg: {r['nvrtc_modules']}; "
              f"gpulinalg kernels in the CuPy cache: {len(ours)} of {r['cache_files']} files"
              + (f" ({', '.join(sorted(set(ours)))})" if ours else "")
              + (f"; warning: {r['warnings'][0]}" if r["warnings"] else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="fresh processes to time")
    parser.add_argument("--n-large", type=int, default=16384, help="order of the large LU")
    parser.add_argument("--out", default="first_call.json", help="JSON file of the records")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.n_large)
        return
    runs = [run_once(args.n_large) for _ in range(args.runs)]
    report(runs, args.n_large)
    passed = {k: all(r[k] <= t for r in runs) for k, t in TARGETS.items()}
    passed["no_run_time_compile"] = all(not r["nvrtc_modules"] and
                                        not r["gpulinalg_kernels_in_cache"] for r in runs)
    Path(args.out).write_text(json.dumps(
        {"date": datetime.datetime.now().isoformat(timespec="seconds"), "n_large": args.n_large,
         "targets_s": TARGETS, "passed": passed, "runs": runs}, indent=1))
    print(f"targets met: {passed}; written: {args.out}")


if __name__ == "__main__":
    main()
