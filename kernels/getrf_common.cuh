// getrf_common.cuh -- device code shared by the GPU panel's leaf kernels (getrf_leaf_tile.cu,
// getrf_leaf_row.cu), pasted into each family's source by gpulinalg/core/kernels.py.
//
// The leaves' common contract (LAPACK sgetf2's / dgetf2's pivot rule): the first max |A(i, j)|
// over the candidate rows, ties to the smallest row, as isamax / idamax; a column whose
// candidates are all NaN has no pivot.  getrf_elem<T>: what differs between float and
// double.  GETRF_THREADS is the block's row-holding threads (THREADS in
// gpulinalg/lu/panel_gpu.py, which tests/test_panel_gpu.py checks against it).
#pragma once

#include "async_copy.cuh"

#define GETRF_THREADS 256

namespace {

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// (v, i) beats (bv, bi): larger |value|, ties to the smaller row (LAPACK i?amax: first max).
template <typename T>
__device__ __forceinline__ bool beats(T v, int i, T bv, int bi) {
    return v > bv || (v == bv && i < bi);
}

// The warp's first max in two redux.sync steps (instead of a 5-round shuffle butterfly): the
// largest key, then the smallest position among the lanes holding it.  key = |v| bits + 1 for
// a candidate (|v| >= 0 and not NaN: its bits order as the value), 0 for none; positions are
// distinct, so the winner is unique.  Returns the position, INT_MAX when no lane has one.
__device__ __forceinline__ int warp_first_max(unsigned key, int pos, unsigned& best_key) {
    best_key = __reduce_max_sync(0xffffffffu, key);
    const unsigned p = __reduce_min_sync(0xffffffffu, key == best_key && key != 0u
                                                          ? static_cast<unsigned>(pos)
                                                          : 0x7fffffffu);
    return static_cast<int>(p);
}

// The same for 64-bit keys (float64's |v| bits + 1): the largest high half, the largest low
// half among the lanes holding it, then the smallest position among the lanes holding both.
__device__ __forceinline__ int warp_first_max(unsigned long long key, int pos,
                                              unsigned long long& best_key) {
    const unsigned hi = static_cast<unsigned>(key >> 32), lo = static_cast<unsigned>(key);
    const unsigned best_hi = __reduce_max_sync(0xffffffffu, hi);
    const unsigned best_lo = __reduce_max_sync(0xffffffffu, hi == best_hi ? lo : 0u);
    best_key = (static_cast<unsigned long long>(best_hi) << 32) | best_lo;
    const unsigned p = __reduce_min_sync(0xffffffffu, key == best_key && key != 0ull
                                                          ? static_cast<unsigned>(pos)
                                                          : 0x7fffffffu);
    return static_cast<int>(p);
}

// What the leaves' arithmetic needs of their element type T (float, double): LAPACK's sfmin
// (?lamch('S') = the smallest normal number: below it a multiplier is formed by division, not
// by the reciprocal), |v|, the fused multiply-add, and a row index carried exactly in a T slot
// of a record by bit pattern (never by arithmetic: the slot is only moved, never computed on).
template <typename T>
struct getrf_elem;

template <>
struct getrf_elem<float> {
    static constexpr float sfmin = 1.17549435e-38f;             // FLT_MIN
    static __device__ __forceinline__ float abs(float v) { return fabsf(v); }
    static __device__ __forceinline__ float fma(float a, float b, float c) {
        return fmaf(a, b, c);
    }
    static __device__ __forceinline__ float from_index(int i) { return __int_as_float(i); }
    static __device__ __forceinline__ int to_index(float v) { return __float_as_int(v); }
};

template <>
struct getrf_elem<double> {
    static constexpr double sfmin = 2.2250738585072014e-308;    // DBL_MIN
    static __device__ __forceinline__ double abs(double v) { return fabs(v); }
    static __device__ __forceinline__ double fma(double a, double b, double c) {
        return ::fma(a, b, c);
    }
    static __device__ __forceinline__ double from_index(int i) {
        return __longlong_as_double(static_cast<long long>(i));
    }
    static __device__ __forceinline__ int to_index(double v) {
        return static_cast<int>(__double_as_longlong(v));
    }
};

}  // namespace

// The cases of a switch on a column index: case J: STEP(J) for the J < N (the leaves keep
// their column loops rolled and reach the register-indexed work of column J through it).
#define GETRF_CASE(J, N, STEP)                                                            \
    case J:                                                                                \
        if constexpr ((J) < (N))                                                           \
            STEP(J);                                                                       \
        break;
#define GETRF_CASES4(J, N, STEP) GETRF_CASE(J, N, STEP) GETRF_CASE(J + 1, N, STEP)         \
    GETRF_CASE(J + 2, N, STEP) GETRF_CASE(J + 3, N, STEP)
#define GETRF_CASES16(J, N, STEP) GETRF_CASES4(J, N, STEP) GETRF_CASES4(J + 4, N, STEP)   \
    GETRF_CASES4(J + 8, N, STEP) GETRF_CASES4(J + 12, N, STEP)
#define GETRF_CASES64(J, N, STEP) GETRF_CASES16(J, N, STEP) GETRF_CASES16(J + 16, N, STEP) \
    GETRF_CASES16(J + 32, N, STEP) GETRF_CASES16(J + 48, N, STEP)
