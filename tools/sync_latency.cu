// sync_latency.cu -- probes of the inter-SM synchronisation the GPU panel's leaves pay once per
// column (tools/sync_latency.py launches them and prints the floor per column).
//
// All kernels run `iters` rounds and are timed from the host (CUDA events around the launch,
// divided by iters); every block sits alone on its SM (the launcher asks for enough dynamic
// shared memory), as the row leaf's blocks do.  Latency-bound by construction: no arithmetic,
// one 16-byte record per block and round.
//
// pingpong(flags, iters, partner): blocks 0 and `partner` (thread 0 of each) bounce a counter
//   through two 16-byte global slots (st.relaxed.gpu / ld.relaxed.gpu polling, as the row
//   leaf's records): one round = two one-way trips through L2.  Other blocks exit.
// allgather(keys, G, iters, epoch): the row leaf's barrier without its work.  Each round j,
//   lane 0 of each block stores its tagged record {tag|key, tag|pos} (tag = epoch + j) into
//   keys[j & 1][b]; the warp polls the G records (lane l reads records l, l + 32, ...) until all
//   carry the tag.  Block size 32 (one warp) or 288 (the leaf's 8 compute warps + the polling
//   warp handing over through named barriers C = 1 and P = 3, the compute warps doing no work
//   between them): the difference is the cost of the handoff.

#include "async_copy.cuh"   // named barriers, relaxed 16-byte accesses: the row leaf's own

#define SYNC_T 288

extern "C" __global__ void pingpong(ulonglong2* flags, int iters, int partner)
{
    const int b = blockIdx.x;
    if (threadIdx.x != 0 || (b != 0 && b != partner))
        return;
    ulonglong2* mine = flags + (b == 0 ? 0 : 8);              // separate 128-byte lines
    const ulonglong2* theirs = flags + (b == 0 ? 8 : 0);
    for (unsigned long long i = 1; i <= static_cast<unsigned long long>(iters); ++i) {
        if (b == 0) {
            st_relaxed_gpu_v2(mine, i, i);
            while (ld_relaxed_gpu_v2(theirs).x != i) {}
        } else {
            while (ld_relaxed_gpu_v2(theirs).x != i) {}
            st_relaxed_gpu_v2(mine, i, i);
        }
    }
}

extern "C" __global__ void allgather(ulonglong2* keys, int G, int iters, unsigned epoch)
{
    const int b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool handoff = blockDim.x == SYNC_T;
    const bool poller = !handoff || warp == SYNC_T / 32 - 1;
    for (int j = 0; j < iters; ++j) {
        if (!poller) {                        // compute warps: hand over, wait for the pivot
            named_arrive(1, SYNC_T);
            named_sync(3, SYNC_T);
            continue;
        }
        if (handoff)
            named_sync(1, SYNC_T);
        const unsigned tag = epoch + static_cast<unsigned>(j);
        const unsigned long long t = static_cast<unsigned long long>(tag) << 32;
        ulonglong2* slot = keys + (j & 1) * G;
        if (lane == 0)
            st_relaxed_gpu_v2(slot + b, t | 1u, t | static_cast<unsigned>(b));
        for (int r = lane; r < G; r += 32) {
            ulonglong2 k;
            do {
                k = ld_relaxed_gpu_v2(slot + r);
            } while (static_cast<unsigned>(k.x >> 32) != tag ||
                     static_cast<unsigned>(k.y >> 32) != tag);
        }
        __syncwarp();
        if (handoff)
            named_arrive(3, SYNC_T);
    }
}
