"""Host time of one transpose call, and of its parts, next to cupy.copyto's.

    python3 benchmarks/launch_overhead.py --sizes 1024,1536,2048

At 1024-2048 a burst of transposes is bound by the host: each call's Python path costs more
than its kernel (2.5-8 us), so the burst's % of copy is the ratio of two host paths.  This
times, per call (median over --rounds rounds of --calls calls, time.perf_counter, the stream
synchronised between rounds so the launch queue never fills):
- copyto: cupy.copyto(buf, a), the copy the transpose is measured against;
- transpose_into / transpose: gpulinalg's internal and public paths;
- CuPy launch: the same kernel through CuPy's RawKernel call, arguments prebuilt or converted
  per call (how gpulinalg launched it before gpulinalg.core.kernels.Launcher);
- Launcher: gpulinalg's struct-packed cuLaunchKernel (what transpose_into now uses);
- driver launch: cuLaunchKernel through cupy.cuda.driver with prebuilt parameters, as
  pointers to each value (kernelParams) or one packed block (extra): the floor of any launch
  from Python;
- the pieces of the path (device id, pointers, strides, dtype test, memoised lookups).
"""

import argparse
import ctypes
import statistics
import time


def per_call_us(cases, calls, rounds, sync, seed=0):
    """{name: median over rounds of the host microseconds one call takes} for a dict of
    callables.  Every round runs each case for `calls` calls, in an order shuffled each round
    (seeded), the stream synchronised after each, so that drift, the allocator's and the
    collector's state hit every case alike."""
    import random
    for fn in cases.values():
        for _ in range(3):
            fn()
    sync()
    out = {name: [] for name in cases}
    names, rng = list(cases), random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            fn = cases[name]
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[name].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    return {name: statistics.median(v) for name, v in out.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1024,1536,2048")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=21)
    args = p.parse_args()
    import cupy as cp
    import numpy as np

    from gpulinalg import transpose
    from gpulinalg.core import arrays as _arrays
    from gpulinalg.layout import transpose as _transpose
    from gpulinalg.bench.common import environment, parse_sizes, print_table, random_matrix

    env = environment()
    print(f"{env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, "
          f"Python {env.get('python', '')}")
    sync = cp.cuda.get_current_stream().synchronize
    rows = []
    for n in parse_sizes(args.sizes):
        a = random_matrix((n, n), 0)
        out, buf = cp.empty((n, n), cp.float32), cp.empty_like(a)
        variant = _transpose.pick_variant(n, n, n, n, True, True)
        launcher, grid, block, skew = _transpose._transpose_launch(
            _transpose._device_id(), n, n, variant, True)
        kernel = launcher.kernel   # the CuPy RawKernel
        extra = (0,) if skew else ()
        raw_args = (np.int32(n), np.int32(n), a, np.int64(n), out, np.int64(n))
        raw_args += tuple(np.uint32(x) for x in extra)
        sp, dp = a.data.ptr, out.data.ptr
        # the kernel's parameters as cuLaunchKernel takes them: an array of pointers to values
        values = [ctypes.c_int32(n), ctypes.c_int32(n), ctypes.c_void_p(sp),
                  ctypes.c_int64(n), ctypes.c_void_p(dp), ctypes.c_int64(n)]
        values += [ctypes.c_uint32(x) for x in extra]
        params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        stream = cp.cuda.get_current_stream().ptr
        # the same values as one packed block named by cuLaunchKernel's `extra` list
        # (CU_LAUNCH_PARAM_BUFFER_POINTER = 1, _SIZE = 2, _END = 0)
        block_bytes = launcher.pack.pack(n, n, sp, n, dp, n, *extra)
        packed = ctypes.create_string_buffer(block_bytes, len(block_bytes))
        size = ctypes.c_size_t(len(block_bytes))
        extra_list = (ctypes.c_void_p * 5)(1, ctypes.addressof(packed), 2,
                                           ctypes.addressof(size), 0)

        def driver_launch():
            cp.cuda.driver.launchKernel(launcher.func, *grid, *block, 0, stream,
                                        ctypes.addressof(params), 0)

        def driver_launch_extra():
            cp.cuda.driver.launchKernel(launcher.func, *grid, *block, 0, stream, 0,
                                        ctypes.addressof(extra_list))

        cases = {
            "copyto": lambda: cp.copyto(buf, a),
            "cupy.ascontiguousarray(a.T)": lambda: cp.ascontiguousarray(a.T),
            "cupy.empty((n, n))": lambda: cp.empty((n, n), cp.float32),
            "cupy.ndarray((n, n), float32)": lambda: cp.ndarray((n, n), np.float32),
            "transpose_into": lambda: _transpose.transpose_into(a, out),
            "transpose(out=)": lambda: transpose(a, out=out),
            "transpose(a)": lambda: transpose(a),
            "CuPy launch, prebuilt args": lambda: kernel(grid, block, raw_args),
            "CuPy launch, np.int32 args": lambda: kernel(grid, block, (
                np.int32(n), np.int32(n), a, np.int64(n), out, np.int64(n)) + tuple(
                np.uint32(x) for x in extra)),
            "Launcher (struct-packed)": lambda: launcher(grid, block, n, n, sp, n, dp, n, *extra),
            "driver launch, prebuilt params": driver_launch if launcher.func else None,
            "driver launch, prebuilt extra": driver_launch_extra if launcher.func else None,
            "getDevice": _transpose._device_id,
            "plain_cupy(a, out)": lambda: _arrays.plain_cupy(a, out),
            "current stream ptr": lambda: cp.cuda.get_current_stream().ptr,
            "a.data.ptr": lambda: a.data.ptr,
            "a.strides == ...": lambda: a.strides == (4 * n, 4),
            "a.flags.c_contiguous": lambda: a.flags.c_contiguous,
            "dtype test": lambda: _arrays.is_float32(a.dtype),
            "pick_variant (cached)": lambda: _transpose.pick_variant(n, n, n, n, True, True),
            "_transpose_launch (cached)": lambda: _transpose._transpose_launch(
                _transpose._device_id(), n, n, variant, True),
            "_plan (cached)": lambda: _transpose._plan(_transpose._device_id(), n, n, n, n,
                                                       True, True, True, None),
            "_launch_ptr (no checks)": lambda: _transpose._launch_ptr(n, n, sp, n, dp, n),
            "empty lambda": lambda: None,
        }
        missing = [name for name, fn in cases.items() if fn is None]
        for name in missing:
            print(f"{name}: not available with this CuPy")
            del cases[name]
        for name, us in per_call_us(cases, args.calls, args.rounds, sync).items():
            rows.append({"n": n, "what": name, "us": us})
    print_table([("n", "n", "{}"), ("what", "what", "{}"), ("us", "host us/call", "{:.2f}")],
                rows, title="host time per call (median of rounds)")


if __name__ == "__main__":
    main()
