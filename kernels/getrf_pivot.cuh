// getrf_pivot.cuh -- what the batched LU kernels (getrf_batched.cu, getrf_batched_blocked.cu)
// share: per element type (lu_elem<T>: float, double) the pivot search's key, the fused
// multiply-add, the tiny-pivot scaling and the finiteness test; the first maximum of a group
// of lanes (lu_first_max<G>: LAPACK i?amax's pivot, the smallest position among equal
// magnitudes); 16-byte shared-memory loads into registers and stores from them (lu_ld16,
// lu_st16).  Pasted into each family's source by gpulinalg/core/kernels.py.
#pragma once

// Per element type: its bits as the unsigned integer of the same width (the search key's
// type), the fused multiply-add, and the scaling of a pivot below sfmin, whose reciprocal is
// formed from pivot * up and its products multiplied by up (none for a float: -ftz flushes a
// subnormal pivot to zero whatever the scaling).
template <typename T>
struct lu_type;

template <>
struct lu_type<float> {
    typedef unsigned key_t;
    static __device__ __forceinline__ key_t bits(float v) { return __float_as_uint(v); }
    static __device__ __forceinline__ float fma(float a, float b, float c) {
        return fmaf(a, b, c);
    }
    static __device__ __forceinline__ bool tiny(float) { return false; }
    static constexpr float up = 1.0f;
};

template <>
struct lu_type<double> {
    typedef unsigned long long key_t;
    static constexpr double sfmin = 2.2250738585072014e-308;    // DBL_MIN, dlamch('S')
    static __device__ __forceinline__ key_t bits(double v) {
        return static_cast<unsigned long long>(__double_as_longlong(v));
    }
    static __device__ __forceinline__ double fma(double a, double b, double c) {
        return ::fma(a, b, c);
    }
    static __device__ __forceinline__ bool tiny(double pv) { return fabs(pv) < sfmin; }
    static constexpr double up = 18446744073709551616.0;          // 2^64
};

// The pivot search's key and the finiteness test, from the bits: the sign bit off, the
// exponent field all ones for an inf or NaN.
template <typename T>
struct lu_elem : lu_type<T> {
    typedef typename lu_type<T>::key_t key_t;
    static constexpr key_t SIGN = key_t(1) << (8 * sizeof(T) - 1);
    static constexpr key_t INF = sizeof(T) == 4 ? key_t(0x7f800000u)
                                                : key_t(0x7ff0000000000000ull);
    // |v|'s bits + 1 for a candidate number, the largest key for a NaN at position k
    // (`first`), 0 for a NaN below it and for non-candidates.
    static __device__ __forceinline__ key_t key(T v, bool cand, bool first) {
        const key_t bits = lu_type<T>::bits(v) & ~SIGN;
        if (!cand)
            return key_t(0);
        if (bits > INF)
            return first ? ~key_t(0) : key_t(0);
        return bits + key_t(1);
    }
    static __device__ __forceinline__ bool finite(T v) {
        return (lu_type<T>::bits(v) & INF) != INF;
    }
};

// The group's first maximum: the largest key of its G lanes (aligned lanes of one warp) and
// the smallest tag among the lanes holding it (tags are distinct where key > 0).  G = 32:
// redux.sync; else a butterfly over xor distances < G, which stays in the group.  Every lane
// of the warp calls it (the warp's groups in step).
template <int G>
__device__ __forceinline__ void lu_first_max(unsigned key, unsigned tag, unsigned& wkey,
                                                 unsigned& wtag)
{
    if constexpr (G == 32) {
        wkey = __reduce_max_sync(0xffffffffu, key);
        wtag = __reduce_min_sync(0xffffffffu, key == wkey ? tag : 0xffffffffu);
    } else {
        // key in the high word, the complemented tag below it: one maximum orders both
        unsigned long long x = (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - tag);
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) {
            const unsigned long long y = __shfl_xor_sync(0xffffffffu, x, off, G);
            x = y > x ? y : x;
        }
        wkey = static_cast<unsigned>(x >> 32);
        wtag = 0xffffffffu - static_cast<unsigned>(x);
    }
}

template <int G>
__device__ __forceinline__ void lu_first_max(unsigned long long key, unsigned tag,
                                                 unsigned long long& wkey, unsigned& wtag)
{
    if constexpr (G == 32) {
        const unsigned hi = static_cast<unsigned>(key >> 32), lo = static_cast<unsigned>(key);
        const unsigned bhi = __reduce_max_sync(0xffffffffu, hi);
        const unsigned blo = __reduce_max_sync(0xffffffffu, hi == bhi ? lo : 0u);
        wkey = (static_cast<unsigned long long>(bhi) << 32) | blo;
        wtag = __reduce_min_sync(0xffffffffu, key == wkey ? tag : 0xffffffffu);
    } else {
        unsigned long long x = key;
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) {
            const unsigned long long y = __shfl_xor_sync(0xffffffffu, x, off, G);
            x = y > x ? y : x;
        }
        unsigned t = key == x ? tag : 0xffffffffu;
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) {
            const unsigned y = __shfl_xor_sync(0xffffffffu, t, off, G);
            t = y < t ? y : t;
        }
        wkey = x;
        wtag = t;
    }
}

// x[off .. off+VK) = p[0 .. VK) from shared memory in one 16-byte load (p 16-byte aligned);
// off is a constant once the caller's loops are unrolled.
template <int N>
__device__ __forceinline__ void lu_ld16(float (&x)[N], int off, const float* p)
{
    const float4 v = *reinterpret_cast<const float4*>(p);
    x[off] = v.x; x[off + 1] = v.y; x[off + 2] = v.z; x[off + 3] = v.w;
}
template <int N>
__device__ __forceinline__ void lu_ld16(double (&x)[N], int off, const double* p)
{
    const double2 v = *reinterpret_cast<const double2*>(p);
    x[off] = v.x; x[off + 1] = v.y;
}

// p[0 .. VK) = x[off .. off+VK) to shared memory in one 16-byte store (p 16-byte aligned).
template <int N>
__device__ __forceinline__ void lu_st16(float* p, const float (&x)[N], int off)
{
    *reinterpret_cast<float4*>(p) = make_float4(x[off], x[off + 1], x[off + 2], x[off + 3]);
}
template <int N>
__device__ __forceinline__ void lu_st16(double* p, const double (&x)[N], int off)
{
    *reinterpret_cast<double2*>(p) = make_double2(x[off], x[off + 1]);
}
