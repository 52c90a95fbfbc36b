// permute.cu -- the row interchanges of a whole LU's pivots applied to a few columns in one
// launch, as one gather: for i = 0 .. n-1 in order swap rows i and piv[i] (LAPACK xlaswp
// with k1 = 1, k2 = n, incx = 1; 0-based pivots, any order), i.e.
//     X(i, c) = B(perm[i], c),   perm = the interchanges applied to the identity,
// or with `inverse` the interchanges in reverse order (xlaswp with incx = -1), one scatter:
//     X(perm[i], c) = B(i, c),
// for n x nrhs right-hand sides (the few-column solves with A and with A^T).  One source for T = float and
// double; values are moved as they are (no arithmetic).
// Storage: B is read with any strides (rs between rows, cs between columns, in elements: the
// caller's right-hand sides where they lie, so the gather is also lu_solve's copy of b); X is
// written ROW-MAJOR, X(i, c) = X[i*ldx + c] (the layout the triangular solves read).
// Checks, reported through two ints of host-mapped memory (gpulinalg/core/mapped.py: a
// store of the call's `gen`, so nothing needs resetting): flags[0] where a pivot lies outside
// [0, n) (that interchange is skipped, so no access leaves the arrays), flags[1] where B holds
// an inf or NaN.
// permute_rows<T>(n, nrhs, piv, B, rs, cs, X, ldx, flags, gen, inverse): one block of PERM_THREADS
// threads.  The permutation lives in shared memory (n ints: the launcher takes n up to the
// device's opt-in limit / 4): every thread writes the identity; warp 0 applies the n
// interchanges in order, 32 at a time: lane l takes interchange k = k0 + l (rows k and q) of
// the chunk.  Interchanges that touch disjoint rows commute, so a chunk runs in rounds: a
// pending lane swaps in the current round unless an earlier pending lane of the chunk touches
// one of its rows: the same q (__match_any_sync on q), q_j = k (a bit set in a warp OR of
// the chunk's forward targets) or k_j = q (q an earlier lane's row, for pivots below k).  The
// first pending lane is always free, so a chunk takes 1 round when its 32 interchanges touch
// distinct rows (most of a random matrix's) and at most 32.  Lanes with q = k swap nothing.  The pivots are read from global memory PERM_AHEAD chunks ahead of use
// (independent loads in registers: one L2 round trip per PERM_AHEAD chunks).  Then every
// thread moves rows i = tid, tid + PERM_THREADS, ... (B's row perm[i] to X's row i; inverse:
// B's row i to X's row perm[i]).
// Bound: the chain of n/32 chunks of warp 0, each a match, an OR reduction, two shared loads
// and stores and a ballot per round: 0.10 ms at n = 8192 on an H200 (CUDA events), most of
// it in the last chunks, whose pivots fall in few rows and take many rounds; then n * nrhs
// elements read and written once.

#include "getrf_pivot.cuh"

#define PERM_THREADS 512
#define PERM_AHEAD 8            // chunks of 32 pivots warp 0 holds in flight

template <typename T>
__global__ void __launch_bounds__(PERM_THREADS)
permute_rows(int n, int nrhs, const int* __restrict__ piv, const T* __restrict__ B, long long rs,
             long long cs, T* __restrict__ X, long long ldx, int* flags, int gen, int inverse)
{
    extern __shared__ float4 perm_smem[];
    int* perm = reinterpret_cast<int*>(perm_smem);
    const int tid = static_cast<int>(threadIdx.x);
    for (int i = tid; i < n; i += PERM_THREADS)
        perm[i] = i;
    __syncthreads();
    if (tid < 32) {
        const int lane = tid;
        const unsigned earlier = (1u << lane) - 1u;
        bool bad = false;
        int cur[PERM_AHEAD], nxt[PERM_AHEAD];
#pragma unroll
        for (int j = 0; j < PERM_AHEAD; ++j)
            cur[j] = 32 * j + lane < n ? piv[32 * j + lane] : 0;
        for (int g0 = 0; g0 < n; g0 += 32 * PERM_AHEAD) {
#pragma unroll
            for (int j = 0; j < PERM_AHEAD; ++j) {      // the next group, in flight meanwhile
                const int k = g0 + 32 * (PERM_AHEAD + j) + lane;
                nxt[j] = k < n ? piv[k] : 0;
            }
#pragma unroll
            for (int j = 0; j < PERM_AHEAD; ++j) {
                const int k0 = g0 + 32 * j;
                const int k = k0 + lane;
                int q = cur[j];
                if (k < n && (q < 0 || q >= n)) {
                    bad = true;
                    q = k;
                }
                unsigned pending = __ballot_sync(0xffffffffu, k < n && q != k);
                while (pending) {
                    const bool mine = (pending >> lane) & 1u;
                    const int t = q - k0;               // the lane of row q, if in the chunk
                    const bool near = mine && t >= 0 && t < 32;
                    const unsigned same = __match_any_sync(0xffffffffu, mine ? q : -1 - lane);
                    const unsigned hits = __reduce_or_sync(0xffffffffu,
                                                           near && t > lane ? 1u << t : 0u);
                    const bool ready = mine && !(same & earlier) && !((hits >> lane) & 1u)
                                       && !(near && t < lane && ((pending >> t) & 1u));
                    if (ready) {
                        const int held = perm[k];
                        perm[k] = perm[q];
                        perm[q] = held;
                    }
                    __syncwarp();
                    pending &= ~__ballot_sync(0xffffffffu, ready);
                }
            }
#pragma unroll
            for (int j = 0; j < PERM_AHEAD; ++j)
                cur[j] = nxt[j];
        }
        if (__any_sync(0xffffffffu, bad) && lane == 0)
            flags[0] = gen;
    }
    __syncthreads();
    bool nonfinite = false;
    for (int i = tid; i < n; i += PERM_THREADS) {
        const long long from = inverse ? i : perm[i], to = inverse ? perm[i] : i;
        const T* src = B + from * rs;
        T* dst = X + to * ldx;
        for (int c = 0; c < nrhs; ++c) {
            const T v = src[c * cs];
            nonfinite |= !lu_elem<T>::finite(v);
            dst[c] = v;
        }
    }
    if (__syncthreads_or(nonfinite) && tid == 0)
        flags[1] = gen;
}
