// finite.cu -- scipy's check_finite on the GPU: whether a strided matrix holds an inf or a NaN,
// without a temporary of its size and without a host wait.  One source for every element
// type: all_finite<T> for T = float, double (real), float2, double2 (complex64, complex128:
// an element is finite when both its real and its imaginary part are).
//
// all_finite<T>(x, outer, inner, s_outer, s_inner, ok): *ok = 0 when some element at
//   x + o * s_outer + i * s_inner, 0 <= o < outer, 0 <= i < inner, is not finite.  x points at
//   the element type's real component (float or double), and the strides count components
//   (64-bit, any sign), so a complex element is the two components x[j], x[j + 1], read as two
//   loads of the component type: complex data need only the alignment of its parts.  The
//   caller sets *ok = 1 first and reads it after, and makes `inner` the dimension of the
//   smaller stride (1 for a C- or F-ordered matrix, which it passes as one line: outer = 1);
//   a complex line of adjacent elements (inner stride 2 components) it passes as a real line
//   of twice the length, so a contiguous complex matrix is read by the real kernel, coalesced.
//   Tiling: a warp checks a segment of FIN_SEG = 1024 elements of one line, each lane 32 of
//   them at lane + 32 u (coalesced where the inner stride is 1 element), eight loads (T) in
//   flight per batch; warps stride over (line, segment) items; a warp that found one writes
//   the byte once.  Block 256 threads (the launcher's grid: at most 8 blocks per SM).
//   Bound: bandwidth, sizeof(T) bytes read per element (float 4, double 8, complex64 8,
//   complex128 16); judged against a device-to-device copy's read.

constexpr int FIN_SEG = 1024;   // elements of one line per warp item
constexpr int FIN_BATCH = 8;    // loads in flight per lane

// Per element type: the component type R (what x points at), the element at p, and whether
// an element is finite (|v| <= the largest finite value: false for NaN and +-inf).
template <typename T> struct Finite;
template <> struct Finite<float> {
    using R = float;
    static __device__ __forceinline__ float load(const float* p) { return *p; }
    static __device__ __forceinline__ bool ok(float v)
    {
        return fabsf(v) <= 3.402823466e38f;
    }
};
template <> struct Finite<double> {
    using R = double;
    static __device__ __forceinline__ double load(const double* p) { return *p; }
    static __device__ __forceinline__ bool ok(double v)
    {
        return fabs(v) <= 1.7976931348623157e308;
    }
};
template <> struct Finite<float2> {
    using R = float;
    static __device__ __forceinline__ float2 load(const float* p)
    {
        return make_float2(p[0], p[1]);
    }
    static __device__ __forceinline__ bool ok(float2 v)
    {
        return Finite<float>::ok(v.x) & Finite<float>::ok(v.y);
    }
};
template <> struct Finite<double2> {
    using R = double;
    static __device__ __forceinline__ double2 load(const double* p)
    {
        return make_double2(p[0], p[1]);
    }
    static __device__ __forceinline__ bool ok(double2 v)
    {
        return Finite<double>::ok(v.x) & Finite<double>::ok(v.y);
    }
};

template <typename T>
__global__ void __launch_bounds__(256) all_finite(
    const typename Finite<T>::R* x, long long outer, long long inner, long long s_outer,
    long long s_inner, unsigned char* ok)
{
    using F = Finite<T>;
    const int lane = threadIdx.x & 31;
    const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
    const long long segs = (inner + FIN_SEG - 1) / FIN_SEG;
    const long long items = outer * segs;
    bool bad = false;
    for (long long it = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
         it < items; it += warps) {
        const long long o = it / segs;
        const long long i0 = (it % segs) * FIN_SEG;
        const typename F::R* line = x + o * s_outer;
        for (int b = 0; b < FIN_SEG; b += 32 * FIN_BATCH) {
            T v[FIN_BATCH];
#pragma unroll
            for (int u = 0; u < FIN_BATCH; ++u) {
                const long long i = i0 + b + 32 * u + lane;
                v[u] = i < inner ? F::load(line + i * s_inner) : T{};
            }
#pragma unroll
            for (int u = 0; u < FIN_BATCH; ++u)
                bad |= !F::ok(v[u]);   // NaN compares false
        }
    }
    if (__any_sync(0xffffffffu, bad) && lane == 0)
        *ok = 0;
}
