// getrf_leaf_tile.cu -- getrf_leaf<T, LW, RPT>: the GPU panel's tile leaf, LU with partial
// pivoting of a tall block of at most LW = 32 columns (LAPACK sgetf2 for T = float, dgetf2 for
// T = double) in one cooperative launch, one grid barrier per column.  The panel recursion
// (gpulinalg/lu/panel_gpu.py) takes it for panels too tall for the row leaf
// (getrf_leaf_row.cu), with 32-wide leaves.
//
// Computes, for a block A of mp rows and ncols <= LW columns, kk = min(mp, ncols) steps
// j = 0, 1, ..., kk-1 of right-looking unblocked LU in T's arithmetic (as LAPACK ?getf2):
//     p = first row i >= j of max |A(i, j)|          (ties -> smallest row, like i?amax)
//     piv[j] = p;  swap rows j and p (all ncols columns)
//     if A(j, j) != 0:  A(j+1:, j) *= 1 / A(j, j)     (divides when |A(j,j)| < sfmin:
//                       A(j+1:, j+1:) -= A(j+1:, j) A(j, j+1:)      FLT_MIN / DBL_MIN, as LAPACK)
//     else if *info == 0: *info = col_base + j + 1   (1-based absolute column, as LAPACK)
// The update is one fused multiply-add per element (fmaf / fma).  Unlike LAPACK, pivots are
// 0-based and relative to the block's first row, and A is stored row-wise: A(i, j) =
// A[i*lda + j] (lda 64-bit, in elements), a column strip of a larger row-major matrix.  A
// column whose candidates are all NaN gets piv[j] = j and is left alone (the callers reject
// non-finite input).
//
// Knobs: (LW, RPT) template parameters, LW*RPT*sizeof(T) <= 512 bytes of panel registers per
// thread: float (32, 4), (16, 8), (8, 16) (128 floats); double (32, 2), (16, 4), (8, 8) (64
// doubles).  LEAF_SHAPES in gpulinalg/lu/panel_gpu.py: the plan takes the widest whose grid
// fits GCAP blocks.  Structural: GETRF_THREADS = 256 (getrf_common.cuh), GCAP = 128 blocks,
// LWMAX = 32 and the record layout are #defines that gpulinalg/lu/panel_gpu.py mirrors
// (THREADS, GCAP, LWMAX, REC); no tuning table field.  Static shared memory: the G records,
// GCAP * REC elements of T (17.4 KB float, 34.8 KB double: under the 48 KB static limit).
//
// Bound: latency-bound by the one grid barrier per column (and its L2 round trips: the fenced
// record stores, the atomic, the acquire poll, the record loads), not by flops or bytes: the
// arithmetic per column is RPT*LW FMAs per thread (~0.1 us; FP64 FMAs run at half the FP32
// rate on an H100, still far below the barrier), the data never leaves registers.  Expect
// ~2-3 us per column whatever mp (G <= 128): 32 columns in ~70-100 us per leaf; the panel of
// nb columns costs ~nb * 2.5 us plus the recursion's small GEMM/laswp/trsm launches.
//
// Threads: G blocks of THREADS = 256 threads (G = ceil(mp / (256*RPT)) <= GCAP, launched
// cooperatively so that all blocks are co-resident).  Block b owns rows b*256*RPT + q*256 +
// tid (q = 0..RPT-1) and keeps them in registers (x[RPT][LW] of T) from the first load to the
// final store; rows j < LW are always block 0, thread j, q = 0.  Per column j:
//   1. each thread takes the first max over its rows >= j, a warp butterfly (shuffles, ties to
//      the smaller row) and a shared-memory pass give the block's candidate (|v|, row);
//   2. the block publishes its record [row values (LW) | |v| | row] (REC elements of T; the
//      row index in the last slot by bit pattern: getrf_elem<T>::from_index) in the global
//      slot rec[j & 1][b]; block 0's thread j also publishes row j (rowj[j & 1]);
//   3. grid barrier: __syncthreads, thread 0: __threadfence, atomicAdd(counter), spin with
//      ld.acquire.gpu until counter reaches base + G*(j+1), __threadfence, __syncthreads
//      (the cooperative-groups grid.sync pattern).  The counter only grows: the host passes the
//      count of all earlier arrivals as `base` (wrap-safe comparison), so it is never reset;
//   4. every block loads all G records and row j into shared memory in one round trip (ld.cg:
//      L2, never a stale L1 line), every warp reduces the G candidates redundantly to the pivot
//      row p and its block; the owner of row p takes old row j, the owner of row j takes the
//      pivot row, rows > j are scaled and updated by the rank-1 product.
//   The slots are double-buffered by the parity of j: a block writes rec[j & 1] again only at
//   column j+2, after barrier j+1, which every block passes only after it finished reading
//   rec[j & 1] (before its arrival at j+1).  Shared memory is single-buffered: between the
//   last read of column j and the first write of column j+1 lie __syncthreads (1)-(3).

#include "getrf_common.cuh"

#define GETRF_GCAP 128
#define GETRF_LWMAX 32
#define GETRF_REC (GETRF_LWMAX + 2)   // record (elements of T): row [LWMAX] | |v| | row index

namespace {

template <typename T>
__device__ __forceinline__ void warp_best(T& bv, int& bi, int& bb) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const T ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        const int ob = __shfl_xor_sync(0xffffffffu, bb, o);
        if (beats(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
            bb = ob;
        }
    }
}

// The block's best (|v|, row) over all its warps: warp_best within each warp, then every
// thread reduces the NW warp winners from shared memory (one barrier, marked (1) at the call).
template <int NW, typename T>
__device__ __forceinline__ void block_best(T& bv, int& bi, int& bb, int lane, int warp,
                                           T* s_wv, int* s_wi) {
    warp_best(bv, bi, bb);
    if (lane == 0) {
        s_wv[warp] = bv;
        s_wi[warp] = bi;
    }
    __syncthreads();
    bv = s_wv[0];
    bi = s_wi[0];
#pragma unroll
    for (int w = 1; w < NW; ++w)
        if (beats(s_wv[w], s_wi[w], bv, bi)) {
            bv = s_wv[w];
            bi = s_wi[w];
        }
}

}  // namespace

template <typename T, int LW, int RPT>
__global__ void __launch_bounds__(GETRF_THREADS, 1)
getrf_leaf(int mp, int ncols, T* A, long long lda, int* piv, int* info, int col_base,
           T* rec, T* rowj, unsigned* counter, unsigned base)
{
    using E = getrf_elem<T>;
    constexpr int NT = GETRF_THREADS;
    constexpr int NW = NT / 32;
    constexpr int BR = NT * RPT;                // rows per block
    constexpr int REC = GETRF_REC;
    static_assert(LW <= GETRF_LWMAX && LW <= 32, "row j < LW is owned by block 0, thread j");
    static_assert(LW * RPT * sizeof(T) <= 512,
                  "register budget: at most 128 panel floats or 64 doubles per thread");
    static_assert(2 * LW <= NT, "one thread per loaded row-j element");
    static_assert(sizeof(T) * (GETRF_GCAP * REC + LW + NW) + sizeof(int) * NW <= 48 * 1024,
                  "static shared memory");

    __shared__ T s_wv[NW];
    __shared__ int s_wi[NW];
    __shared__ T s_rec[GETRF_GCAP * REC];       // the G records of this column
    __shared__ T s_rowj[LW];                    // row j before the swap

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x;
    const int kk = min(mp, ncols);
    const int row0 = b * BR + tid;              // row of q = 0; row(q) = row0 + q*NT

    T x[RPT][LW];
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int r = row0 + q * NT;
        const T* src = A + static_cast<long long>(r) * lda;
#pragma unroll
        for (int c = 0; c < LW; ++c)
            x[q][c] = (r < mp && c < ncols) ? src[c] : T(0);
    }

#pragma unroll
    for (int j = 0; j < LW; ++j) {
        if (j >= kk) break;                     // uniform over the grid
        const int par = j & 1;

        // 1. This thread's first max over its rows j <= r < mp (q ascending = rows ascending).
        T bv = T(-1);
        int bi = 0x7fffffff, bb = 0;
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            const int r = row0 + q * NT;
            const T v = E::abs(x[q][j]);
            if (r >= j && r < mp && v > bv) {   // NaN never wins
                bv = v;
                bi = r;
            }
        }
        block_best<NW>(bv, bi, bb, lane, warp, s_wv, s_wi);                 // (1)

        // 2. Publish the block's record and (block 0, thread j) row j.
        T* my = rec + (par * GETRF_GCAP + b) * REC;
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (row0 + q * NT == bi)            // bi = INT_MAX (no candidate) matches no row
#pragma unroll
                for (int c = 0; c < LW; ++c)
                    my[c] = x[q][c];
        if (tid == 0) {
            my[GETRF_LWMAX] = bv;
            my[GETRF_LWMAX + 1] = E::from_index(bi);
        }
        if (b == 0 && tid == j)
#pragma unroll
            for (int c = 0; c < LW; ++c)
                rowj[par * GETRF_LWMAX + c] = x[0][c];

        // 3. Grid barrier (arrival j+1 of every block since `base`).
        __syncthreads();                                                    // (2)
        if (tid == 0) {
            __threadfence();
            atomicAdd(counter, 1u);
            const unsigned target = base + static_cast<unsigned>(G) * static_cast<unsigned>(j + 1);
            while (static_cast<int>(ld_acquire_gpu(counter) - target) < 0) {
            }
            __threadfence();
        }
        __syncthreads();                                                    // (3)

        // 4. All records and row j into shared memory (one L2 round trip), then the pivot.
        const T* recs = rec + par * GETRF_GCAP * REC;
        for (int e = tid; e < G * REC; e += NT)
            s_rec[e] = __ldcg(recs + e);
        if (tid < LW)
            s_rowj[tid] = __ldcg(rowj + par * GETRF_LWMAX + tid);
        __syncthreads();                                                    // (4)
        bv = T(-1);
        bi = 0x7fffffff;
        bb = 0;
        for (int g = lane; g < G; g += 32) {
            const T v = s_rec[g * REC + GETRF_LWMAX];
            const int i = E::to_index(s_rec[g * REC + GETRF_LWMAX + 1]);
            if (beats(v, i, bv, bi)) {
                bv = v;
                bi = i;
                bb = g;
            }
        }
        warp_best(bv, bi, bb);
        const bool valid = bi != 0x7fffffff;    // false only for an all-NaN column
        const int p = valid ? bi : j;
        const T* prow = s_rec + bb * REC;       // the pivot row (row p before the swap)
        const T pv = valid ? prow[j] : T(0);
        const bool nonzero = valid && pv != T(0);
        if (b == 0 && tid == 0) {
            piv[j] = p;
            if (valid && pv == T(0) && *info == 0)
                *info = col_base + j + 1;
        }
        const bool by_recip = E::abs(pv) >= E::sfmin;        // LAPACK's sfmin
        const T rinv = nonzero && by_recip ? T(1) / pv : T(0);

        // 5. Swap, scale, rank-1 update of this thread's rows.
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            const int r = row0 + q * NT;
            if (valid && p != j) {
                if (r == p) {
#pragma unroll
                    for (int c = 0; c < LW; ++c)
                        x[q][c] = s_rowj[c];
                } else if (r == j) {
#pragma unroll
                    for (int c = 0; c < LW; ++c)
                        x[q][c] = prow[c];
                }
            }
            if (nonzero && r > j && r < mp) {
                const T l = by_recip ? x[q][j] * rinv : x[q][j] / pv;
                x[q][j] = l;
#pragma unroll
                for (int c = j + 1; c < LW; ++c)
                    x[q][c] = E::fma(-l, prow[c], x[q][c]);
            }
        }
    }

#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int r = row0 + q * NT;
        if (r < mp) {
            T* dst = A + static_cast<long long>(r) * lda;
#pragma unroll
            for (int c = 0; c < LW; ++c)
                if (c < ncols)
                    dst[c] = x[q][c];
        }
    }
}
