"""The floor under the GPU panel's per-column time: inter-SM synchronisation alone.

    python3 tools/sync_latency.py [--iters 20000]

Times the probes of tools/sync_latency.cu (CUDA events around one launch of `iters`
rounds, median of 5 launches after a warm-up) and prints microseconds per round:
  - pingpong: one counter bounced between block 0 and block k through L2 (a round = two
    one-way trips), for several k (the SM, hence the L2 partition, varies with k);
  - allgather: the row leaf's per-column barrier without its work (tagged 16-byte records,
    polled until all G carry the round's tag), one polling warp per block, then with the
    leaf's 8 compute warps handing over through named barriers.
Compare with `tools/panel_leaf.py 8192x128` (the row leaf, µs per column, G = 32).
"""
import argparse
import pathlib
import statistics

import cupy as cp

from gpulinalg.core import kernels as _kernels

SMEM = 120 * 1024    # one block per SM, as the row leaf's 288 x 168-register blocks


def timed(kernel, grid, block, args, iters, repeat=5):
    """µs per round; args(i) gives launch i's arguments."""
    times = []
    for i in range(repeat + 1):
        launch_args = args(i)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        kernel((grid,), (block,), launch_args, shared_mem=SMEM)
        stop.record()
        stop.synchronize()
        if i:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return 1e3 * statistics.median(times) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20000)
    args = p.parse_args()
    src = (pathlib.Path(__file__).parent / "sync_latency.cu").read_text()
    mod = cp.RawModule(code=src, options=("--std=c++17", f"-I{_kernels.kernel_dir()}"),
                       enable_cooperative_groups=True)
    ping, gather = mod.get_function("pingpong"), mod.get_function("allgather")
    for k in (ping, gather):
        k.max_dynamic_shared_size_bytes = SMEM
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    print(f"device: {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}, {sms} SMs")

    flags = cp.zeros((16, 2), dtype=cp.uint64)
    print(f"{'pingpong partner':>18s} {'us/round':>9s} {'one-way us':>11s}")
    for partner in sorted({1, 2, 3, 33, sms // 2, sms // 2 + 1, sms - 1}):
        def ping_args(i):
            flags[...] = 0
            return flags, cp.int32(args.iters), cp.int32(partner)
        us = timed(ping, sms, 32, ping_args, args.iters)
        print(f"{partner:18d} {us:9.3f} {us / 2:11.3f}")

    keys = cp.zeros((2, sms, 2), dtype=cp.uint64)
    epoch = [1]

    def gather_args(g):
        def launch(i):      # tags never reused: each launch starts past the last one's
            epoch[0] += args.iters + 2
            return keys, cp.int32(g), cp.int32(args.iters), cp.uint32(epoch[0])
        return launch
    print(f"{'allgather G':>12s} {'warps':>6s} {'us/round':>9s}")
    for block in (32, 288):
        for g in (2, 8, 16, 32, 64, sms):
            if g > sms:
                continue
            us = timed(gather, g, block, gather_args(g), args.iters)
            print(f"{g:12d} {block // 32:6d} {us:9.3f}")


if __name__ == "__main__":
    main()
