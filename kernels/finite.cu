// finite.cu -- scipy's check_finite on the GPU: whether a strided float32 matrix holds an inf
// or a NaN, without a temporary of its size and without a host wait.
//
// all_finite(x, outer, inner, s_outer, s_inner, ok): *ok = 0 when some element
//   x[o * s_outer + i * s_inner], 0 <= o < outer, 0 <= i < inner, is not finite (strides in
//   elements, 64-bit, any sign; the caller sets *ok = 1 first and reads it after).  The caller
//   makes `inner` the dimension of the smaller stride (1 for a C- or F-ordered matrix, which it
//   passes as one line: outer = 1).
//   Tiling: a warp checks a segment of FIN_SEG = 1024 elements of one line, each lane 32 of
//   them at lane + 32 u (coalesced where s_inner = 1), eight loads in flight per batch; warps
//   stride over (line, segment) items; a warp that found one writes the byte once.  Block 256
//   threads (the launcher's grid: at most 8 blocks per SM).
//   Bound: bandwidth, 4 bytes read per element; judged against a device-to-device copy's read.

constexpr int FIN_SEG = 1024;   // elements of one line per warp item
constexpr int FIN_BATCH = 8;    // loads in flight per lane

extern "C" __global__ void __launch_bounds__(256) all_finite(
    const float* x, long long outer, long long inner, long long s_outer, long long s_inner,
    unsigned char* ok)
{
    const int lane = threadIdx.x & 31;
    const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
    const long long segs = (inner + FIN_SEG - 1) / FIN_SEG;
    const long long items = outer * segs;
    bool bad = false;
    for (long long it = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
         it < items; it += warps) {
        const long long o = it / segs;
        const long long i0 = (it % segs) * FIN_SEG;
        const float* line = x + o * s_outer;
        for (int b = 0; b < FIN_SEG; b += 32 * FIN_BATCH) {
            float v[FIN_BATCH];
#pragma unroll
            for (int u = 0; u < FIN_BATCH; ++u) {
                const long long i = i0 + b + 32 * u + lane;
                v[u] = i < inner ? line[i * s_inner] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < FIN_BATCH; ++u)
                bad |= !(fabsf(v[u]) <= 3.402823466e38f);   // NaN compares false
        }
    }
    if (__any_sync(0xffffffffu, bad) && lane == 0)
        *ok = 0;
}
