// sync_latency.cu -- probes of the inter-SM synchronisation the GPU panel's leaves pay once per
// column (benchmarks/sync_latency.py launches them and prints the floor per column).
//
// All kernels run `iters` rounds and are timed from the host (CUDA events around the launch,
// divided by iters); every block sits alone on its SM (the launcher asks for enough dynamic
// shared memory), as the row leaf's blocks do.  Latency-bound by construction: no arithmetic,
// one 16-byte record per block and round.
//
// pingpong(flags, iters, partner): blocks 0 and `partner` (thread 0 of each) bounce a counter
//   through two global words (st.relaxed.gpu / ld.relaxed.gpu polling): one round = two
//   one-way trips through L2.  Other blocks exit.
// allgather(keys, G, iters, epoch): the row leaf's barrier without its work.  Each round j,
//   lane 0 of each block stores its tagged record {tag|key, tag|pos} (tag = epoch + j) into
//   keys[j & 1][b]; the warp polls the G records (lane l reads records l, l + 32, ...) until all
//   carry the tag.  Block size 32 (one warp) or 288 (the leaf's 8 compute warps + the polling
//   warp handing over through named barriers C = 1 and P = 3, the compute warps doing no work
//   between them): the difference is the cost of the handoff.

#define SYNC_T 288

__device__ __forceinline__ unsigned long long ld_relaxed(const unsigned long long* p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed(unsigned long long* p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ ulonglong2 ld_relaxed_v2(const ulonglong2* p)
{
    ulonglong2 v;
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed_v2(ulonglong2* p, unsigned long long a,
                                              unsigned long long b)
{
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" :: "l"(p), "l"(a), "l"(b)
                 : "memory");
}

__device__ __forceinline__ void bar_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void bar_arrive(int id, int n)
{
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(n) : "memory");
}

extern "C" __global__ void pingpong(unsigned long long* flags, int iters, int partner)
{
    const int b = blockIdx.x;
    if (threadIdx.x != 0 || (b != 0 && b != partner))
        return;
    unsigned long long* mine = flags + (b == 0 ? 0 : 16);     // separate 128-byte lines
    const unsigned long long* theirs = flags + (b == 0 ? 16 : 0);
    for (int i = 1; i <= iters; ++i) {
        if (b == 0) {
            st_relaxed(mine, i);
            while (ld_relaxed(theirs) != static_cast<unsigned long long>(i)) {}
        } else {
            while (ld_relaxed(theirs) != static_cast<unsigned long long>(i)) {}
            st_relaxed(mine, i);
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
            bar_arrive(1, SYNC_T);
            bar_sync(3, SYNC_T);
            continue;
        }
        if (handoff)
            bar_sync(1, SYNC_T);
        const unsigned tag = epoch + static_cast<unsigned>(j);
        const unsigned long long t = static_cast<unsigned long long>(tag) << 32;
        ulonglong2* slot = keys + (j & 1) * G;
        if (lane == 0)
            st_relaxed_v2(slot + b, t | 1u, t | static_cast<unsigned>(b));
        for (int r = lane; r < G; r += 32) {
            ulonglong2 k;
            do {
                k = ld_relaxed_v2(slot + r);
            } while (static_cast<unsigned>(k.x >> 32) != tag ||
                     static_cast<unsigned>(k.y >> 32) != tag);
        }
        __syncwarp();
        if (handoff)
            bar_arrive(3, SYNC_T);
    }
}
