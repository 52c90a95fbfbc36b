// graph_io.cu -- copies between a captured LU's own matrix buffer and the caller's matrices,
// the caller's addresses read from device memory, so that one CUDA graph (gpulinalg/lu/graph.py)
// serves every call: the copy in is the graph's first kernel and the copy out follows the
// factorization row block by row block (rows j0..j1 are final once step s's left swaps ran).
//
// graph_io_set(slot, src, dst): slot[0] = src, slot[1] = dst.  One thread; launched before each
//   replay on the replay's stream (a kernel's arguments are taken at launch, so two calls on one
//   stream never see each other's addresses).
// graph_copy<IN>(slot, buf, r0, r1, n, flag), for rows r0 <= r < r1 (all n columns) of two
//   C-contiguous float32 matrices with n columns:
//     IN:  buf[r, :] = src[r, :], src = slot[0]; *flag = 1 when a copied value is not finite
//          (the caller zeroes the flag first: scipy's check_finite, read after the replay);
//     OUT: dst[r, :] = buf[r, :], dst = slot[1].
//   Tiling: a warp copies a segment of IO_SEG = 512 floats of one row, lanes over its float4s,
//   four 16-byte loads in flight per lane before the stores (4-byte accesses when an address or
//   n is not 16-byte aligned: the caller's array may be any C-contiguous view); warps stride
//   over (row, segment) items.  Block 256 threads (the launcher's grid: at most 8 blocks per
//   SM).
//   Bound: bandwidth; 8 bytes moved per element, judged against a device-to-device cudaMemcpy.

constexpr int IO_SEG = 512;   // floats of one row per warp item: 32 lanes x 4 float4

extern "C" __global__ void graph_io_set(unsigned long long* slot, unsigned long long src,
                                        unsigned long long dst)
{
    slot[0] = src;
    slot[1] = dst;
}

__device__ __forceinline__ bool finite4(float4 v)
{
    return fabsf(v.x) <= 3.402823466e38f && fabsf(v.y) <= 3.402823466e38f
        && fabsf(v.z) <= 3.402823466e38f && fabsf(v.w) <= 3.402823466e38f;   // NaN: false
}

template <bool IN>
__global__ void __launch_bounds__(256) graph_copy(const unsigned long long* slot, float* buf,
                                                  int r0, int r1, long long n, int* flag)
{
    const float* src = IN ? reinterpret_cast<const float*>(slot[0]) : buf;
    float* dst = IN ? buf : reinterpret_cast<float*>(slot[1]);
    const int lane = threadIdx.x & 31;
    const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
    const int segs = static_cast<int>((n + IO_SEG - 1) / IO_SEG);
    const long long items = static_cast<long long>(r1 - r0) * segs;
    const bool vec = (((reinterpret_cast<unsigned long long>(src)
                        | reinterpret_cast<unsigned long long>(dst)) & 15) | (n & 3)) == 0;
    bool bad = false;
    for (long long it = ((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
         it < items; it += warps) {
        const long long r = r0 + it / segs;
        const long long cs = (it % segs) * IO_SEG;          // the segment's first column
        const int len = static_cast<int>(min(static_cast<long long>(IO_SEG), n - cs));
        const float* s = src + r * n + cs;
        float* d = dst + r * n + cs;
        if (vec) {
            const int len4 = len >> 2;
            float4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (lane + 32 * u < len4)
                    v[u] = __ldg(reinterpret_cast<const float4*>(s) + lane + 32 * u);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (lane + 32 * u < len4) {
                    if (IN)
                        bad |= !finite4(v[u]);
                    reinterpret_cast<float4*>(d)[lane + 32 * u] = v[u];
                }
        } else {   // (vec: n and so every segment's length is a multiple of 4)
#pragma unroll 4
            for (int c = lane; c < len; c += 32) {
                const float x = s[c];
                if (IN)
                    bad |= !(fabsf(x) <= 3.402823466e38f);
                d[c] = x;
            }
        }
    }
    if (IN && bad)
        *flag = 1;   // every writer stores the same value: no atomic needed
}
