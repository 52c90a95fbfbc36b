// graph_io.cu -- copies between a captured LU's own matrix buffer and the caller's matrices,
// the caller's addresses read from device memory, so that one CUDA graph serves every call
// (gpulinalg/lu/graph.py, one GPU: the copy in is the graph's first kernel and the copy out
// follows the factorization row block by row block, rows j0..j1 being final once step s's left
// swaps ran; gpulinalg/lu/multi_graph.py, several GPUs: the copy in goes column block by column
// block ahead of the scatter to the devices, the copy out follows the home's collection).
//
// graph_io_set(slot, src, dst): slot[0] = src, slot[1] = dst.  One thread; launched before each
//   replay on the replay's stream (a kernel's arguments are taken at launch, so two calls on one
//   stream never see each other's addresses).
// graph_copy<T, IN>(slot, buf, r0, r1, c0, c1, ld, flag), T = float or double, for rows
//   r0 <= r < r1 and columns c0 <= c < c1 of two C-contiguous matrices of T with ld columns:
//     IN:  buf[r, c] = src[r, c], src = slot[0]; *flag = 1 when a copied value is not finite
//          (the caller zeroes the flag first: scipy's check_finite, read after the replay);
//     OUT: dst[r, c] = buf[r, c], dst = slot[1].
//   Tiling: a warp copies a segment of IO_SEG_BYTES = 2048 bytes of one row (512 floats or 256
//   doubles), lanes over its 16-byte vectors (float4 / double2), four 16-byte loads in flight
//   per lane before the stores (element-wide accesses when an address or the row length in
//   bytes, the first column's offset or the window's width is not 16-byte aligned: the caller's
//   array may be any C-contiguous view); warps
//   stride over (row, segment) items.  Block 256 threads (the launcher's grid: at most 8 blocks
//   per SM).
//   Bound: bandwidth; 2 * sizeof(T) bytes moved per element, judged against a device-to-device
//   cudaMemcpy.

constexpr int IO_SEG_BYTES = 2048;   // bytes of one row per warp item: 32 lanes x 4 x 16 bytes

extern "C" __global__ void graph_io_set(unsigned long long* slot, unsigned long long src,
                                        unsigned long long dst)
{
    slot[0] = src;
    slot[1] = dst;
}

namespace {

template <typename T> struct Vec16;                       // the 16-byte vector of T
template <> struct Vec16<float> { using type = float4; };
template <> struct Vec16<double> { using type = double2; };

__device__ __forceinline__ bool finite_io(float x) { return fabsf(x) <= 3.402823466e38f; }
__device__ __forceinline__ bool finite_io(double x) { return fabs(x) <= 1.7976931348623157e308; }
__device__ __forceinline__ bool finite_io(float4 v)          // NaN: false
{
    return finite_io(v.x) && finite_io(v.y) && finite_io(v.z) && finite_io(v.w);
}
__device__ __forceinline__ bool finite_io(double2 v) { return finite_io(v.x) && finite_io(v.y); }

}  // namespace

template <typename T, bool IN>
__global__ void __launch_bounds__(256) graph_copy(const unsigned long long* slot, T* buf,
                                                  int r0, int r1, long long c0, long long c1,
                                                  long long ld, int* flag)
{
    using V = typename Vec16<T>::type;
    constexpr int VN = 16 / sizeof(T);                    // elements per vector
    constexpr int SEG = IO_SEG_BYTES / sizeof(T);         // elements per warp item
    constexpr int UNROLL = VN;                            // scalar path: 16 bytes in flight
    const T* src = IN ? reinterpret_cast<const T*>(slot[0]) : buf;
    T* dst = IN ? buf : reinterpret_cast<T*>(slot[1]);
    const int lane = threadIdx.x & 31;
    const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
    const long long n = c1 - c0;                            // the window's width
    const int segs = static_cast<int>((n + SEG - 1) / SEG);
    const long long items = static_cast<long long>(r1 - r0) * segs;
    const bool vec = (((reinterpret_cast<unsigned long long>(src)
                        | reinterpret_cast<unsigned long long>(dst)) & 15)
                      | (ld % VN) | (c0 % VN) | (n % VN)) == 0;
    bool bad = false;
    for (long long it = ((static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
         it < items; it += warps) {
        const long long r = r0 + it / segs;
        const long long cs = (it % segs) * SEG;             // the segment's first column
        const int len = static_cast<int>(min(static_cast<long long>(SEG), n - cs));
        const T* s = src + r * ld + c0 + cs;
        T* d = dst + r * ld + c0 + cs;
        if (vec) {
            const int lenv = len / VN;
            V v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (lane + 32 * u < lenv)
                    v[u] = __ldg(reinterpret_cast<const V*>(s) + lane + 32 * u);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (lane + 32 * u < lenv) {
                    if (IN)
                        bad |= !finite_io(v[u]);
                    reinterpret_cast<V*>(d)[lane + 32 * u] = v[u];
                }
        } else {   // (vec: the width and so every segment's length is a multiple of VN)
#pragma unroll UNROLL
            for (int c = lane; c < len; c += 32) {
                const T x = s[c];
                if (IN)
                    bad |= !finite_io(x);
                d[c] = x;
            }
        }
    }
    if (IN && bad)
        *flag = 1;   // every writer stores the same value: no atomic needed
}
