// permute.cu -- the row interchanges of a whole LU's pivots applied to a few columns in one
// launch, as one gather: for i = 0 .. n-1 in order swap rows i and piv[i] (LAPACK xlaswp
// with k1 = 1, k2 = n, incx = 1; 0-based pivots, any order), i.e.
//     X(i, c) = B(perm[i], c),   perm = the interchanges applied to the identity,
// for n x nrhs right-hand sides (lu_solve's few-column path).  One source for T = float and
// double; values are moved as they are (no arithmetic).
// Storage: B is read with any strides (rs between rows, cs between columns, in elements: the
// caller's right-hand sides where they lie, so the gather is also lu_solve's copy of b); X is
// written ROW-MAJOR, X(i, c) = X[i*ldx + c] (the layout the triangular solves read).
// Checks, reported through two ints of host-mapped memory (gpulinalg/core/mapped.py: a
// store of the call's `gen`, so nothing needs resetting): flags[0] where a pivot lies outside
// [0, n) (that interchange is skipped, so no access leaves the arrays), flags[1] where B holds
// an inf or NaN.
// permute_rows<T>(n, nrhs, piv, B, rs, cs, X, ldx, flags, gen): one block of PERM_THREADS
// threads.  The permutation lives in shared memory (n ints: the launcher takes n up to the
// device's opt-in limit / 4): every thread writes the identity; thread 0 applies the n
// interchanges in order, reading the pivots from global memory 32 at a time one chunk ahead
// (independent loads: one L2 round trip per 32 pivots); then every thread gathers rows
// i = tid, tid + PERM_THREADS, ...
// Bound: the chain of n dependent shared-memory swaps of one thread (two loads, two stores:
// ~30 cycles each, ~0.13 ms at n = 8192 on an H200; estimate, not measured), then n * nrhs
// elements read and written once.

#define PERM_THREADS 512
#define PERM_CHUNK 32           // pivots thread 0 loads at a time

template <typename T>
__device__ __forceinline__ bool perm_finite(T v)
{
    return v - v == T(0);       // false for an inf or NaN; 0 for any number (-ftz included)
}

template <typename T>
__global__ void __launch_bounds__(PERM_THREADS)
permute_rows(int n, int nrhs, const int* __restrict__ piv, const T* __restrict__ B, long long rs,
             long long cs, T* __restrict__ X, long long ldx, int* flags, int gen)
{
    extern __shared__ float4 perm_smem[];
    int* perm = reinterpret_cast<int*>(perm_smem);
    const int tid = static_cast<int>(threadIdx.x);
    for (int i = tid; i < n; i += PERM_THREADS)
        perm[i] = i;
    __syncthreads();
    if (tid == 0) {
        bool bad = false;
        int cur[PERM_CHUNK], nxt[PERM_CHUNK];
#pragma unroll
        for (int j = 0; j < PERM_CHUNK; ++j)
            cur[j] = j < n ? piv[j] : 0;
        for (int k0 = 0; k0 < n; k0 += PERM_CHUNK) {
#pragma unroll
            for (int j = 0; j < PERM_CHUNK; ++j)        // the next chunk, in flight meanwhile
                nxt[j] = k0 + PERM_CHUNK + j < n ? piv[k0 + PERM_CHUNK + j] : 0;
#pragma unroll
            for (int j = 0; j < PERM_CHUNK; ++j) {
                const int k = k0 + j;
                if (k < n) {
                    int q = cur[j];
                    if (q < 0 || q >= n) {
                        bad = true;
                        q = k;
                    }
                    const int held = perm[k];
                    perm[k] = perm[q];
                    perm[q] = held;
                }
            }
#pragma unroll
            for (int j = 0; j < PERM_CHUNK; ++j)
                cur[j] = nxt[j];
        }
        if (bad)
            flags[0] = gen;
    }
    __syncthreads();
    bool nonfinite = false;
    for (int i = tid; i < n; i += PERM_THREADS) {
        const T* src = B + static_cast<long long>(perm[i]) * rs;
        T* dst = X + static_cast<long long>(i) * ldx;
        for (int c = 0; c < nrhs; ++c) {
            const T v = src[c * cs];
            nonfinite |= !perm_finite(v);
            dst[c] = v;
        }
    }
    if (__syncthreads_or(nonfinite) && tid == 0)
        flags[1] = gen;
}
