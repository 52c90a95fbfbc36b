"""Bandwidth of the multi-GPU LU's peer copies: column blocks of a row-major matrix on GPU 0
(rows of 1-2 KiB at the matrix's pitch) copied into contiguous buffers on the other GPUs.

    python3 benchmarks/peer_copy.py --rows 32768 --widths 256,512 --blocks 16,32,64,132

For each width: the copy engines (cudaMemcpy2DAsync issued on the receiving GPU's stream, as
the LU's receive and upload do) and copy2d_v4 on grids of --blocks blocks (gpulinalg.
_transpose.copy_rows_ptr, the receiving GPU reading GPU 0 over peer access), first one
receiver (GPU 1), then every other GPU at once.  Prints GB/s (bytes received per second,
all receivers together), median of --trials trials of --reps copies per receiver.
"""

import argparse
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=32768)
    p.add_argument("--widths", default="256,512")
    p.add_argument("--blocks", default="16,32,64,132")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--trials", type=int, default=5)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg._lu_multi import _enable_peer_access
    from gpulinalg._transpose import copy_rows_ptr
    from gpulinalg.bench.common import random_matrix

    ndev = cp.cuda.runtime.getDeviceCount()
    if ndev < 2:
        raise SystemExit("needs two GPUs at least")
    ids = list(range(ndev))
    _enable_peer_access(cp, ids)
    n = args.rows
    with cp.cuda.Device(0):
        a = random_matrix((n, n), 0, cp)
    widths = [int(w) for w in args.widths.split(",")]
    bufs, streams = {}, {}
    for d in ids[1:]:
        with cp.cuda.Device(d):
            bufs[d] = cp.empty(n * max(widths), dtype=cp.float32)   # (n, w) at pitch w
            streams[d] = cp.cuda.Stream(non_blocking=True)
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} x {ndev}, "
          f"{n} rows at a pitch of {n} floats", flush=True)

    def run(receivers, w, blocks):
        def once():
            for d in receivers:
                with cp.cuda.Device(d), streams[d]:
                    for r in range(args.reps):
                        c0 = (r * w) % (n - w + 1)
                        sp, dp = a.data.ptr + 4 * c0, bufs[d].data.ptr
                        if blocks:
                            assert copy_rows_ptr(n, w, sp, n, dp, w, blocks)
                        else:
                            cp.cuda.runtime.memcpy2DAsync(dp, 4 * w, sp, 4 * n, 4 * w, n, 4,
                                                          streams[d].ptr)
            for d in receivers:
                streams[d].synchronize()

        once()
        times = []
        for _ in range(args.trials):
            t = time.perf_counter()
            once()
            times.append(time.perf_counter() - t)
        return 4.0 * n * w * args.reps * len(receivers) / statistics.median(times) / 1e9

    kinds = [0] + [int(b) for b in args.blocks.split(",")]
    for w in widths:
        for receivers in ([1], ids[1:]) if ndev > 2 else ([1],):
            row = []
            for blocks in kinds:
                row.append(f"{'engines' if not blocks else f'v4/{blocks}'} "
                           f"{run(receivers, w, blocks):6.1f}")
            for d in receivers:   # the last copy landed where it should
                with cp.cuda.Device(d):
                    c0 = ((args.reps - 1) * w) % (n - w + 1)
                    ok = bool(cp.array_equal(bufs[d][:n * w].reshape(n, w),
                                             cp.asarray(a[:, c0:c0 + w].get())))
                    assert ok, f"GPU {d}: copy mismatch"
            print(f"width {w}, {len(receivers)} receiver(s): GB/s " + ", ".join(row),
                  flush=True)


if __name__ == "__main__":
    main()
