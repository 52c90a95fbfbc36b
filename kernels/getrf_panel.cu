// getrf_panel.cu -- the leaf of the GPU panel factorization: LU with partial pivoting of a
// tall, narrow single-precision block (LAPACK sgetf2), one persistent launch per leaf, ONE
// barrier per column (grid-wide through L2 for getrf_leaf / getrf_leaf_row, a thread block
// cluster barrier for getrf_leaf_cluster).
//
// Computes, for a block A of mp rows and ncols <= LW columns, kk = min(mp, ncols) steps
// j = 0, 1, ..., kk-1 of right-looking unblocked LU (as LAPACK sgetf2):
//     p = first row i >= j of max |A(i, j)|          (ties -> smallest row, like isamax)
//     piv[j] = p;  swap rows j and p (all ncols columns)
//     if A(j, j) != 0:  A(j+1:, j) *= 1 / A(j, j)     (divides when |A(j,j)| < FLT_MIN, as
//                       A(j+1:, j+1:) -= A(j+1:, j) A(j, j+1:)           LAPACK does)
//     else if *info == 0: *info = col_base + j + 1   (1-based absolute column, as LAPACK)
// Pivots are 0-based (unlike LAPACK's 1-based ipiv) and relative to the block's first row.
// Unlike LAPACK, A is stored row-wise: A(i, j) = A[i*lda + j] (lda 64-bit), so the block is a
// column strip of a larger row-major matrix (gpulinalg/_panel_gpu.py recurses over the panel
// with our laswp, a triangular solve and SGEMM between leaves).  A column whose candidates are
// all NaN gets piv[j] = j and is left alone (the callers reject non-finite input).
//
// getrf_leaf<LW, RPT>: G blocks of THREADS = 256 threads (G = ceil(mp / (256*RPT)) <= GCAP,
// launched cooperatively so that all blocks are co-resident).  Block b owns rows
// b*256*RPT + q*256 + tid (q = 0..RPT-1) and keeps them in registers (x[RPT][LW], LW*RPT <= 128
// floats) from the first load to the final store; rows j < LW are always block 0, thread j,
// q = 0.  Per column j:
//   1. each thread takes the first max over its rows >= j, a warp butterfly (shuffles, ties to
//      the smaller row) and a shared-memory pass give the block's candidate (|v|, row);
//   2. the block publishes its record [row values (LW) | |v| | row] in the global slot
//      rec[j & 1][b]; block 0's thread j also publishes row j (rowj[j & 1]);
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
// Knobs: LW (leaf width, 32/16/8) and RPT (rows per thread, 4/8/16) are template parameters,
// THREADS = 256 and GCAP = 128 blocks are #defines checked by gpulinalg/_panel_gpu.py
// (THREADS, GCAP, LWMAX, the record layout).
// Bound: latency-bound by the one grid barrier per column (and its L2 round trips: the fenced
// record stores, the atomic, the acquire poll, the record loads), not by flops or bytes: the
// arithmetic per column is RPT*LW FMAs per thread (~0.1 us), the data never leaves registers.
// Expect ~2-3 us per column whatever mp (G <= 128): 32 columns in ~70-100 us per leaf; the
// panel of nb columns costs ~nb * 2.5 us plus the recursion's small SGEMM/laswp/trsm launches.
//
// getrf_leaf_row<LW, RPT, EARLY> ((LW, RPT) = (128, 1), (64, 2), (32, 4); EARLY 0 or 1, the
// launcher takes 1 for RPT <= 2): an LW-wide leaf of a tall block in ONE launch, RPT rows per
// thread.  G = ceil(mp / (256*RPT)) blocks (G <= GETRF_GMAX_ROW and co-resident: an H100 holds
// 132 such blocks, so mp <= 33792 * RPT) of 8 COMPUTE warps, one COMMUNICATION warp and, with
// EARLY, 3 idle warp slots (below).  Compute thread t (0..255) of block b owns the rows r(q) =
// (q*G + b)*256 + t, q < RPT, and keeps their LW floats in registers (x[RPT][LW]); the
// communication warp holds no rows.  More rows per thread leave SMs to a concurrent SGEMM
// (the grid is latency-bound: the SMs it holds mostly wait).
//   - lazy swaps: no data moves between threads.  Each thread carries its rows' current
//     positions pos[q] (initially r(q)); pivoting at column j exchanges the positions j and p
//     (pos == p -> j, pos == j -> p), the search runs over pos >= j (ties to the smaller pos,
//     as isamax), the update over pos > j, and the final store writes the row to A(pos, :).
//     A row exists iff its position is below mp (positions of existing rows are exchanged
//     among themselves), so no flag is kept for it;
//   - a flag barrier, no fence: a block's candidate (16-byte record keys[j & 1][b] = {tag,
//     key, tag, pos}, key = |v| bits + 1, 0 for none) and its row (rows[j & 1][b], tagged
//     64-bit words {tag, value bits}) are stored relaxed; every 64-bit word is single-copy
//     atomic and tag = epoch + j is a number the host never reuses (keys and rows start
//     zeroed, epochs at 1), so the tags, not a release/acquire pair, tell a fresh word from
//     an old one.  The communication warp polls the G records until all carry this column's
//     tag -- that IS the grid barrier, and it already holds every block's candidate.  Slots
//     are double-buffered by the parity of j: block b rewrites [j & 1][b] at column j+2 only
//     after seeing every block's column-(j+1) record, which each block wrote after its last
//     read of the column-j slots;
//   - a pipeline between the two kinds of warps, so that neither the rank-1 update nor the
//     pivot row's fetch waits on the grid.  Compute warps, column j (after named barrier P:
//     pivot j-1 and its row are in s_p / s_prow): exchange the positions of pivot j-1, its
//     multipliers, update column j only (one fmaf per row, on the copy xn of column j),
//     search column j, lane 0 puts the warp's candidate {key, pos} in s_wc[warp], arrive at
//     barrier C -- rolled code, the same for every column; THEN, through a switch on j
//     (register indices: comm_step<J>), the rest of pivot j-1's rank-1 update (columns > j)
//     and the copy of column j+1 for the next search; the owner of the warp's candidate
//     copies its row (now complete) to s_wrow[warp], arrive at barriers R and U.
//     Communication warp, column j: wait C, reduce the 8 warp candidates, store the block's
//     record; wait R, store the winner's row (two 16-byte tagged stores per lane); poll the G
//     records and, from the first arrivals on, fetch the row of the best candidate seen so far
//     (again if a later record beats it), so that the row fetch rides on the poll's round
//     trips; wait U, write s_prow / s_p, piv[j], info; arrive at barrier P.  So a block's
//     record leaves after one fmaf and the search, and the update, the jump into the column's
//     code and the row copy run while the records travel.  Per element the fmafs are those of
//     unblocked LU, in the same order (pivot j-1 reaches column j before the search of column
//     j and the columns > j right after it, before pivot j): bit-identical to the other leaves.
//   - EARLY: the row leaves before the update, too.  The compute warps wait at C (bar.sync),
//     reduce the 8 warp candidates themselves, and the owner of the block's candidate alone
//     copies its row to s_wrow[0] as it is: through pivot j-2, column j-1 holding its value
//     there (not yet its multiplier); arrive at R, then the update.  (One owner per warp
//     copying, 8 single-lane runs of 16-byte stores queued in the MIO pipe and held R: 2.14
//     against 1.92 us per column at 8192 rows.)  The communication warp computes the row's
//     multiplier for pivot j-1 from that column and applies pivot j-1's fmaf to the columns
//     >= j (s_prow still holds pivot j-1's row: it is rewritten only after U) -- the same
//     operations as the owner's, so the published row is the same bit for bit.  The block is
//     12 warp slots, slot w on SM sub-partition w % 4: slot 0 is the communication warp, alone
//     on its sub-partition (slots 4, 8, 11 idle), slots 1-3, 5-7, 9, 10 the compute warps, so
//     that its poll never waits behind a compute warp's update.
//   Named barriers C = 1, R = 2, P = 3, U = 4 (0, __syncthreads, is not used), each between the
//   256 compute threads (bar.arrive or bar.sync) and the 32 of the communication warp.  Shared
//   slots are single-buffered: s_wc / s_wrow are written before C / R of column j and
//   rewritten only after P of column j, which the communication warp arrives at after its
//   last read of them; s_prow / s_p are rewritten after U of that column, which every compute
//   warp arrives at after its last read of them (the update).  Three warps on one SM
//   sub-partition: at most 168 registers per thread (no spill at 128 panel floats; ptxas
//   spills at the margin: see how getrf_leaf_row computes its compute-thread index).
//   - the column loop is NOT unrolled: the barrier code exists once (it stays in the
//     instruction cache); only the register-indexed work sits behind the switch (a jump
//     table).  (Fully unrolled, LW = 128 came to 76,000 instructions.)
// Per column on the critical path: the position exchange, one fmaf, the search and two warp
// reductions, the record's trip through L2 and the poll, the pivot row's fetch where its record
// was the last to arrive, four named barriers.  H100, 128-wide panels alone: 1.9 / 2.1 / 2.3
// us per column at 8192 / 16384 / 32768 rows with EARLY, 2.4 / 2.7 / 2.9 without (2.7 / 2.8 /
// 3.2 with the earlier design, where warp 0 polled, then fetched the row, and every warp
// updated all columns before the search); one block alone (128-256 rows) 1.7-2.0, so the
// grid barrier costs ~0.1 us of it, the rest is the chain on the SM.
//
// getrf_leaf_cluster<LW, RPT, CS> ((LW, RPT) = (128, 1), (64, 2), (32, 4); CS = 16 or 8): the
// same contract and arithmetic as getrf_leaf_row (lazy swaps by positions, the same pivot
// rule, multiplier and fmaf update, so the results are bit-identical to getrf_leaf_row<LW>
// and getrf_leaf<LW, RPT> for the same LW), but the grid is ONE thread block cluster of CS
// CTAs of 256 threads (__cluster_dims__(CS); CS = 16 is non-portable: the launcher sets
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) and the column barrier is the cluster's
// hardware barrier, the candidates travel through distributed shared memory (DSMEM), never
// through global memory.  Capacity: mp <= CS*256*RPT rows (CS = 16: 4096 / 8192 / 16384).
//   Mapping: thread t of CTA c owns the RPT rows r(q) = (q*CS + c)*256 + t (interleaved, so a
//   short panel spreads its rows over all CTAs) and keeps x[RPT][LW] (LW*RPT <= 128 floats)
//   in registers from the first load to the final store; pos[q] as in getrf_leaf_row.
//   Per column j (one cluster barrier, one __syncthreads):
//   1. each thread's first max over its rows with pos >= j, then the WARP's candidate by two
//      redux.sync (max of key = |v| bits + 1, then min position among the lanes holding it;
//      no block-wide reduction here: it is folded into step 4);
//   2. the warp publishes it in its CTA's own shared memory: the owner thread stores the row
//      (LW floats) in s_row[j & 1][warp], lane 0 the record s_cand[j & 1][warp] = {key, pos};
//   3. barrier.cluster.arrive.release + barrier.cluster.wait.acquire (all threads);
//   4. warp 0 of every CTA reads the CS*8 records from all CTAs (mapa + ld.shared::cluster,
//      CS*8/32 per lane), reduces them (redux.sync again; ties to the smaller position; a
//      ballot finds the winner's record), fetches the winner's row
//      from its owner's slot (one float4 per lane) into its own s_prow, lane 0 sets s_p and
//      (CTA 0) piv[j] / info; __syncthreads;
//   5. every thread exchanges positions j and p and scales / updates its rows with pos > j:
//      the register-indexed work sits in leaf_step<J> behind a switch on j, as in
//      getrf_leaf_row (rolled column loop).
//   At the end: arrive, each thread stores its rows to A(pos, :), wait (a CTA must not exit
//   while another may still read its shared memory), piv[j] written by CTA 0's thread 0.
//   Race freedom of the double-buffered slots: CTA c writes s_row/s_cand[j & 1] at column j
//   before its arrival at barrier j; every CTA reads them after barrier j and before its own
//   arrival at barrier j+1 (program order, made visible to c by the release/acquire pair);
//   c writes the same slots again only at column j+2, after its wait at barrier j+1, which
//   completes only once every CTA has arrived there, i.e. finished reading.  Column j+1 uses
//   the other parity, so no reader of column j can see a column-(j+1) write.  The single-
//   buffered s_prow / s_p (local to the CTA): written by warp 0 after barrier j+1, read by all
//   threads between the __syncthreads of column j and their arrival at barrier j+1.  No CTA
//   reads another's memory before barrier 0, by which time all CTAs of the cluster run.
//   Per column: one cluster barrier (~0.2-0.4 us, hardware), two dependent DSMEM round trips
//   (records, then the row: ~0.2 us each), one __syncthreads, <= 128 FMAs per thread; no
//   global memory, no fence.  Expect ~0.8-1 us per column, ~0.1-0.13 ms per 128 columns.
// Bound: every leaf is latency-bound (the barrier and the dependent round trips per column),
// not flop- or bandwidth-bound: the data never leaves registers between load and store.

#include "async_copy.cuh"

#define GETRF_THREADS 256
#define GETRF_GCAP 128
#define GETRF_LWMAX 32
#define GETRF_REC (GETRF_LWMAX + 2)   // record: row values [LWMAX] | |v| | row (int bits)
#define GETRF_GMAX_ROW 160             // getrf_leaf_row: most blocks (workspace slots, poll width)

namespace {

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// (v, i) beats (bv, bi): larger |value|, ties to the smaller row (LAPACK isamax: first max).
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void warp_best(float& bv, int& bi, int& bb) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        const int ob = __shfl_xor_sync(0xffffffffu, bb, o);
        if (beats(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
            bb = ob;
        }
    }
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

// The block's best (|v|, row) over all its warps: warp_best within each warp, then every
// thread reduces the NW warp winners from shared memory (one barrier, marked (1) at the call).
template <int NW>
__device__ __forceinline__ void block_best(float& bv, int& bi, int& bb, int lane, int warp,
                                           float* s_wv, int* s_wi) {
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

// The block's first max over all its warps, from keys as warp_first_max takes them: the
// warps' winners through shared memory (one barrier, marked (1) at the call), then every
// thread reduces the NW of them.  Returns the position (INT_MAX: none) and its key.
template <int NW>
__device__ __forceinline__ int block_first_max(unsigned key, int pos, int warp, int lane,
                                               unsigned* s_wk, int* s_wi, unsigned& best_key) {
    unsigned wk;
    const int wi = warp_first_max(key, pos, wk);
    if (lane == 0) {
        s_wk[warp] = wk;
        s_wi[warp] = wi;
    }
    __syncthreads();
    unsigned bk = s_wk[0];
    int bi = s_wi[0];
#pragma unroll
    for (int w = 1; w < NW; ++w) {
        const unsigned k = s_wk[w];
        const int i = s_wi[w];
        if (k > bk || (k == bk && i < bi)) {
            bk = k;
            bi = i;
        }
    }
    best_key = bk;
    return bi;
}

}  // namespace

template <int LW, int RPT>
__global__ void __launch_bounds__(GETRF_THREADS, 1)
getrf_leaf(int mp, int ncols, float* A, long long lda, int* piv, int* info, int col_base,
           float* rec, float* rowj, unsigned* counter, unsigned base)
{
    constexpr int T = GETRF_THREADS;
    constexpr int NW = T / 32;
    constexpr int BR = T * RPT;                 // rows per block
    constexpr int REC = GETRF_REC;
    static_assert(LW <= GETRF_LWMAX && LW <= 32, "row j < LW is owned by block 0, thread j");
    static_assert(LW * RPT <= 128, "register budget: at most 128 panel floats per thread");
    static_assert(2 * LW <= T, "one thread per loaded row-j element");

    __shared__ float s_wv[NW];
    __shared__ int s_wi[NW];
    __shared__ float s_rec[GETRF_GCAP * REC];   // the G records of this column
    __shared__ float s_rowj[LW];                // row j before the swap

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x;
    const int kk = min(mp, ncols);
    const int row0 = b * BR + tid;              // row of q = 0; row(q) = row0 + q*T

    float x[RPT][LW];
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int r = row0 + q * T;
        const float* src = A + static_cast<long long>(r) * lda;
#pragma unroll
        for (int c = 0; c < LW; ++c)
            x[q][c] = (r < mp && c < ncols) ? src[c] : 0.f;
    }

#pragma unroll
    for (int j = 0; j < LW; ++j) {
        if (j >= kk) break;                     // uniform over the grid
        const int par = j & 1;

        // 1. This thread's first max over its rows j <= r < mp (q ascending = rows ascending).
        float bv = -1.f;
        int bi = 0x7fffffff, bb = 0;
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            const int r = row0 + q * T;
            const float v = fabsf(x[q][j]);
            if (r >= j && r < mp && v > bv) {   // NaN never wins
                bv = v;
                bi = r;
            }
        }
        block_best<NW>(bv, bi, bb, lane, warp, s_wv, s_wi);                 // (1)

        // 2. Publish the block's record and (block 0, thread j) row j.
        float* my = rec + (par * GETRF_GCAP + b) * REC;
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (row0 + q * T == bi)             // bi = INT_MAX (no candidate) matches no row
#pragma unroll
                for (int c = 0; c < LW; ++c)
                    my[c] = x[q][c];
        if (tid == 0) {
            my[GETRF_LWMAX] = bv;
            my[GETRF_LWMAX + 1] = __int_as_float(bi);
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
        const float* recs = rec + par * GETRF_GCAP * REC;
        for (int e = tid; e < G * REC; e += T)
            s_rec[e] = __ldcg(recs + e);
        if (tid < LW)
            s_rowj[tid] = __ldcg(rowj + par * GETRF_LWMAX + tid);
        __syncthreads();                                                    // (4)
        bv = -1.f;
        bi = 0x7fffffff;
        bb = 0;
        for (int g = lane; g < G; g += 32) {
            const float v = s_rec[g * REC + GETRF_LWMAX];
            const int i = __float_as_int(s_rec[g * REC + GETRF_LWMAX + 1]);
            if (beats(v, i, bv, bi)) {
                bv = v;
                bi = i;
                bb = g;
            }
        }
        warp_best(bv, bi, bb);
        const bool valid = bi != 0x7fffffff;    // false only for an all-NaN column
        const int p = valid ? bi : j;
        const float* prow = s_rec + bb * REC;   // the pivot row (row p before the swap)
        const float pv = valid ? prow[j] : 0.f;
        const bool nonzero = valid && pv != 0.f;
        if (b == 0 && tid == 0) {
            piv[j] = p;
            if (valid && pv == 0.f && *info == 0)
                *info = col_base + j + 1;
        }
        const bool by_recip = fabsf(pv) >= 1.17549435e-38f;   // FLT_MIN (LAPACK's sfmin)
        const float rinv = nonzero && by_recip ? 1.0f / pv : 0.f;

        // 5. Swap, scale, rank-1 update of this thread's rows.
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            const int r = row0 + q * T;
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
                const float l = by_recip ? x[q][j] * rinv : x[q][j] / pv;
                x[q][j] = l;
#pragma unroll
                for (int c = j + 1; c < LW; ++c)
                    x[q][c] = fmaf(-l, prow[c], x[q][c]);
            }
        }
    }

#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int r = row0 + q * T;
        if (r < mp) {
            float* dst = A + static_cast<long long>(r) * lda;
#pragma unroll
            for (int c = 0; c < LW; ++c)
                if (c < ncols)
                    dst[c] = x[q][c];
        }
    }
}


// ---------------------------------------------- shared by getrf_leaf_row and getrf_leaf_cluster
// (lazy swaps: each thread keeps RPT rows in registers, x[q] the row at position pos[q])

// Whether a block's rows move in 16-byte pieces: ncols == LW, A and lda aligned (the LU's
// panels, n % 4 == 0).
template <int LW>
__device__ __forceinline__ bool whole_rows(const float* A, long long lda, int ncols) {
    return ncols == LW && (reinterpret_cast<unsigned long long>(A) & 15) == 0 && (lda & 3) == 0;
}

// Rows pos[q] of A into x[q] (mine[q]: the row exists; zeros else) and their first values into
// xj[q].  Returns `vec`: whole rows in 16-byte pieces (ncols == LW, A and lda aligned: the
// LU's panels, n % 4 == 0), as store_rows must write them back.
template <int LW, int RPT>
__device__ __forceinline__ bool load_rows(float (&x)[RPT][LW], float (&xj)[RPT], const float* A,
                                          long long lda, int ncols, const int (&pos)[RPT],
                                          const bool (&mine)[RPT])
{
    const bool vec = whole_rows<LW>(A, lda, ncols);
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const float* src = A + static_cast<long long>(mine[q] ? pos[q] : 0) * lda;
        if (vec) {
#pragma unroll
            for (int c = 0; c < LW; c += 4) {
                const float4 v = mine[q] ? *reinterpret_cast<const float4*>(src + c)
                                         : make_float4(0.f, 0.f, 0.f, 0.f);
                x[q][c] = v.x;
                x[q][c + 1] = v.y;
                x[q][c + 2] = v.z;
                x[q][c + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int c = 0; c < LW; ++c)
                x[q][c] = (mine[q] && c < ncols) ? src[c] : 0.f;
        }
    }
#pragma unroll
    for (int q = 0; q < RPT; ++q)
        xj[q] = x[q][0];
    return vec;
}

// x[q] back to row pos[q] of A (the final positions), as load_rows read them.
template <int LW, int RPT>
__device__ __forceinline__ void store_rows(const float (&x)[RPT][LW], float* A, long long lda,
                                           int ncols, const int (&pos)[RPT],
                                           const bool (&mine)[RPT], bool vec)
{
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        if (!mine[q])
            continue;
        float* dst = A + static_cast<long long>(pos[q]) * lda;
        if (vec) {
#pragma unroll
            for (int c = 0; c < LW; c += 4)
                *reinterpret_cast<float4*>(dst + c) = make_float4(x[q][c], x[q][c + 1],
                                                                  x[q][c + 2], x[q][c + 3]);
        } else {
#pragma unroll
            for (int c = 0; c < LW; ++c)
                if (c < ncols)
                    dst[c] = x[q][c];
        }
    }
}

// This thread's candidate for column j: the first max |A(pos, j)| over its positions pos >= j
// (xj[q] = A(pos[q], j)); returns the position (INT_MAX: none) and its key for warp_first_max.
template <int RPT>
__device__ __forceinline__ int thread_first_max(const float (&xj)[RPT], const int (&pos)[RPT],
                                                const bool (&mine)[RPT], int j, unsigned& key)
{
    float bv = -1.f;
    int bi = 0x7fffffff;
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const float a = fabsf(xj[q]);
        if (mine[q] && pos[q] >= j && beats(a, pos[q], bv, bi)) {   // NaN never wins
            bv = a;
            bi = pos[q];
        }
    }
    key = bi != 0x7fffffff ? __float_as_uint(bv) + 1u : 0u;
    return bi;
}

// The rank-1 update of the columns > J by pivot row s_prow for the RPT rows of this thread
// with upd[q] (J constant: x[][] stays in registers), then column J+1 into x_next.  Pivot-row
// element outer, rows inner: one shared load per element.
template <int J, int LW, int RPT>
__device__ __forceinline__ void update_right(float (&x)[RPT][LW], const bool (&upd)[RPT],
                                             const float (&l)[RPT], const float* s_prow,
                                             float (&x_next)[RPT])
{
#pragma unroll
    for (int c = J + 1; c < LW; ++c) {
        const float pc = s_prow[c];
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (upd[q])
                x[q][c] = fmaf(-l[q], pc, x[q][c]);
    }
    if constexpr (J + 1 < LW) {
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            x_next[q] = x[q][J + 1];
    }
}

// Column J's register work of getrf_leaf_cluster: the multipliers, then update_right.
template <int J, int LW, int RPT>
__device__ __forceinline__ void leaf_step(float (&x)[RPT][LW], const bool (&upd)[RPT],
                                          const float (&l)[RPT], const float* s_prow,
                                          float (&x_next)[RPT])
{
#pragma unroll
    for (int q = 0; q < RPT; ++q)
        if (upd[q])
            x[q][J] = l[q];
    update_right<J, LW, RPT>(x, upd, l, s_prow, x_next);
}

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
#define GETRF_STEP(J) leaf_step<(J), LW, RPT>(x, upd, l, s_prow, xj)

// The multiplier of a row whose pivot-column value is xj, for the nonzero pivot pv: by the
// reciprocal rinv = reciprocal(pv) unless |pv| < FLT_MIN (LAPACK's sfmin), as LAPACK.
__device__ __forceinline__ float reciprocal(float pv) {
    return fabsf(pv) >= 1.17549435e-38f ? 1.0f / pv : 0.f;
}
__device__ __forceinline__ float multiplier(float xj, float pv, float rinv) {
    return fabsf(pv) >= 1.17549435e-38f ? xj * rinv : xj / pv;
}

// Column j's pivot chosen (sp: its position, -1 when the column has none; s_prow: its row):
// exchange the positions j and p; this thread's rows below it (pos > j; a row exists iff its
// position is below mp) get upd[q] and their multipliers l[q] from their column-j values xj[q]
// (by the reciprocal unless |pivot| < FLT_MIN, as LAPACK).
template <int RPT>
__device__ __forceinline__ void pivot_multipliers(const float (&xj)[RPT], int (&pos)[RPT],
                                                  int mp, int j, int sp, const float* s_prow,
                                                  bool (&upd)[RPT], float (&l)[RPT])
{
    const bool valid = sp >= 0;
    const int p = valid ? sp : j;
    const float pv = valid ? s_prow[j] : 0.f;
    const bool nonzero = valid && pv != 0.f;
    const float rinv = nonzero ? reciprocal(pv) : 0.f;
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        if (pos[q] == p)
            pos[q] = j;
        else if (pos[q] == j)
            pos[q] = p;
        upd[q] = nonzero && pos[q] < mp && pos[q] > j;
        l[q] = upd[q] ? multiplier(xj[q], pv, rinv) : 0.f;
    }
}

// pivot_multipliers, then the rank-1 update of this thread's rows, handing out the next
// column's values in xj.
template <int LW, int RPT>
__device__ __forceinline__ void apply_pivot(float (&x)[RPT][LW], float (&xj)[RPT],
                                            int (&pos)[RPT], int mp, int j, int sp,
                                            const float* s_prow)
{
    bool upd[RPT];
    float l[RPT];
    pivot_multipliers<RPT>(xj, pos, mp, j, sp, s_prow, upd, l);
    switch (j) {
        GETRF_CASES64(0, LW, GETRF_STEP)
        GETRF_CASES64(64, LW, GETRF_STEP)
    }
}

// ------------------------------------------------------------------ getrf_leaf_row
// (the design: at the top of this file)

namespace {

// One row of LW floats from registers to shared memory (16-byte stores).
template <int LW>
__device__ __forceinline__ void store_row(float* dst, const float (&x)[LW]) {
#pragma unroll
    for (int c = 0; c < LW; c += 4)
        *reinterpret_cast<float4*>(dst + c) = make_float4(x[c], x[c + 1], x[c + 2], x[c + 3]);
}

// Column J's register work of a compute warp (J = 0..LW; after the search of column J):
// pivot J-1's multipliers into column J-1, the updated column J (xn) back into x, pivot
// J-1's update of the columns > J, and column J+1 (not yet updated by pivot J) into xn.
template <int J, int LW, int RPT>
__device__ __forceinline__ void comm_step(float (&x)[RPT][LW], const bool (&upd)[RPT],
                                          const float (&l)[RPT], const float* s_prow,
                                          float (&xn)[RPT])
{
    if constexpr (J > 0) {
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            if (upd[q])
                x[q][J - 1] = l[q];
            if constexpr (J < LW)
                x[q][J] = xn[q];
        }
        update_right<J, LW, RPT>(x, upd, l, s_prow, xn);
    } else {                                    // no pivot yet: only the next column
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            xn[q] = x[q][1];
    }
}

#define GETRF_COMM_STEP(J) comm_step<(J), LW, RPT>(x, upd, l, s_prow, xn)

// The communication warp's column loop; SPL record slots polled per lane (G <= 32 * SPL).
// EARLY: the block's candidate row (s_wrow[0]) arrives before pivot j-1's update of its
// columns >= j, which this warp applies (pivot j-1's row is still in s_prow).
template <int SPL, int LW, int NW, bool EARLY>
__device__ __forceinline__ void comm_loop(int kk, int* piv, int* info, int col_base,
                                          ulonglong2* keys, ulonglong2* rows, unsigned epoch,
                                          const uint2* s_wc, const float (*s_wrow)[LW],
                                          float* s_prow, int* s_p,
                                          int G, int b, int lane)
{
    constexpr int T = GETRF_THREADS + 32;
    bool pvalid = false;                        // pivot j-1 exists (EARLY)
#pragma unroll 1
    for (int j = 0; j < kk; ++j) {
        const int par = j & 1;
        const unsigned tag = epoch + static_cast<unsigned>(j);
        const unsigned long long t = static_cast<unsigned long long>(tag) << 32;

        // The block's candidate from the warps' (lane w holds warp w's), its record.
        named_sync(1, T);                                                    // C
        const uint2 c0 = lane < NW ? s_wc[lane] : make_uint2(0u, 0x7fffffffu);
        const unsigned k0 = c0.x;
        const int i0 = static_cast<int>(c0.y);
        unsigned bkey;
        const int bi = warp_first_max(k0, i0, bkey);
        const unsigned mw = __ballot_sync(0xffffffffu, lane < NW && bkey != 0u && k0 == bkey &&
                                                            i0 == bi);
        if (lane == 0)
            st_relaxed_gpu_v2(keys + par * G + b, t | bkey, t | static_cast<unsigned>(bi));
        // Its row: complete (late), or through pivot j-2 beyond column j (EARLY).
        named_sync(2, T);                                                    // R
        if (mw && lane < LW / 4) {
            const float* row = s_wrow[EARLY ? 0 : __ffs(mw) - 1];   // EARLY: the block's
            float4 v = reinterpret_cast<const float4*>(row)[lane];
            if constexpr (EARLY) {
                // Pivot j-1's multiplier and fmaf on the columns >= j, as the owner applies
                // them (s_prow: pivot j-1's row; column j-1 of the row: its value there).
                const float pv = j > 0 && pvalid ? s_prow[j - 1] : 0.f;
                if (pv != 0.f) {
                    const float l = multiplier(row[j - 1], pv, reciprocal(pv));
                    const float4 pr = reinterpret_cast<const float4*>(s_prow)[lane];
                    const int c = 4 * lane;
                    v.x = c >= j ? fmaf(-l, pr.x, v.x) : v.x;
                    v.y = c + 1 >= j ? fmaf(-l, pr.y, v.y) : v.y;
                    v.z = c + 2 >= j ? fmaf(-l, pr.z, v.z) : v.z;
                    v.w = c + 3 >= j ? fmaf(-l, pr.w, v.w) : v.w;
                }
            }
            ulonglong2* dst = rows + (par * G + b) * (LW / 2) + 2 * lane;
            st_relaxed_gpu_v2(dst, t | __float_as_uint(v.x), t | __float_as_uint(v.y));
            st_relaxed_gpu_v2(dst + 1, t | __float_as_uint(v.z), t | __float_as_uint(v.w));
        }

        // Poll the G records until all carry the tag; meanwhile fetch the row of the best
        // record seen so far (`spec`) until its words carry the tag too.
        const ulonglong2* slot = keys + par * G;
        unsigned ckey = 0u;                     // this lane's first max of its records
        int ci = 0x7fffffff, cb = 0;
        unsigned pending = 0;
#pragma unroll
        for (int s = 0; s < SPL; ++s)
            if (lane + 32 * s < G)
                pending |= 1u << s;
        int spec = -1, wi = 0x7fffffff;
        bool row_ok = false;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        while (true) {
            const bool polling = __any_sync(0xffffffffu, pending != 0);
            const int fetch = row_ok ? -1 : spec;   // warp-uniform
            if (!polling && fetch < 0)
                break;
            ulonglong2 k[SPL], w0, w1;
#pragma unroll
            for (int s = 0; s < SPL; ++s)
                if (pending & (1u << s))
                    k[s] = ld_relaxed_gpu_v2(slot + lane + 32 * s);
            if (fetch >= 0 && lane < LW / 4) {
                const ulonglong2* src = rows + (par * G + fetch) * (LW / 2) + 2 * lane;
                w0 = ld_relaxed_gpu_v2(src);
                w1 = ld_relaxed_gpu_v2(src + 1);
            }
            bool fresh = false;                 // a record arrived in this round
#pragma unroll
            for (int s = 0; s < SPL; ++s)
                if ((pending & (1u << s)) && static_cast<unsigned>(k[s].x >> 32) == tag &&
                    static_cast<unsigned>(k[s].y >> 32) == tag) {
                    pending &= ~(1u << s);
                    fresh = true;
                    const unsigned kk_ = static_cast<unsigned>(k[s].x);
                    const int i = static_cast<int>(static_cast<unsigned>(k[s].y));
                    if (kk_ > ckey || (kk_ == ckey && kk_ != 0u && i < ci)) {
                        ckey = kk_;
                        ci = i;
                        cb = lane + 32 * s;
                    }
                }
            if (fetch >= 0) {
                const bool ok = lane >= LW / 4 ||
                    (static_cast<unsigned>(w0.x >> 32) == tag &&
                     static_cast<unsigned>(w0.y >> 32) == tag &&
                     static_cast<unsigned>(w1.x >> 32) == tag &&
                     static_cast<unsigned>(w1.y >> 32) == tag);
                if (lane < LW / 4)
                    v = make_float4(__uint_as_float(static_cast<unsigned>(w0.x)),
                                    __uint_as_float(static_cast<unsigned>(w0.y)),
                                    __uint_as_float(static_cast<unsigned>(w1.x)),
                                    __uint_as_float(static_cast<unsigned>(w1.y)));
                row_ok = __all_sync(0xffffffffu, ok);
            }
            if (__any_sync(0xffffffffu, fresh)) {
                // The best record so far; a new one restarts the row fetch.
                unsigned wkey;
                wi = warp_first_max(ckey, ci, wkey);
                if (wi != 0x7fffffff) {
                    const unsigned from = __ballot_sync(0xffffffffu, ci == wi && ckey == wkey);
                    const int best = __shfl_sync(0xffffffffu, cb, __ffs(from) - 1);
                    if (best != spec) {
                        spec = best;
                        row_ok = false;
                    }
                }
            }
        }
        const bool valid = wi != 0x7fffffff;
        pvalid = valid;
        named_sync(4, T);               // U: the compute warps' last read of s_prow is done
        if (lane < LW / 4)
            reinterpret_cast<float4*>(s_prow)[lane] = valid ? v : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncwarp();
        if (lane == 0) {
            *s_p = valid ? wi : -1;
            if (b == 0) {
                piv[j] = valid ? wi : j;
                if (valid && s_prow[j] == 0.f && *info == 0)
                    *info = col_base + j + 1;
            }
        }
        named_arrive(3, T);                                                  // P
    }
}

}  // namespace

// getrf_leaf_row's block.  Late (EARLY = 0): 9 warps, the compute warps 0..7 and the
// communication warp 8.  EARLY: 12 warp slots, slot w on SM sub-partition w % 4; slot 0 is
// the communication warp, alone on its sub-partition (slots 4, 8 and 11 stay idle), slots
// 1-3, 5-7, 9, 10 the compute warps 0..7.  (The late leaf loses 3% with that layout.)
template <int EARLY>
constexpr int row_block_threads() { return EARLY ? 12 * 32 : GETRF_THREADS + 32; }

template <int LW, int RPT, int EARLY>
__global__ void __launch_bounds__(row_block_threads<EARLY>(), 1)
getrf_leaf_row(int mp, int ncols, float* A, long long lda, int* piv, int* info, int col_base,
                ulonglong2* keys, ulonglong2* rows, unsigned epoch)
{
    constexpr int TC = GETRF_THREADS;           // compute threads (rows), warps 0..NW-1
    constexpr int NW = TC / 32;
    constexpr int T = TC + 32;                  // and the communication warp
    constexpr int SPL = (GETRF_GMAX_ROW + 31) / 32;   // most record slots polled per lane
    static_assert(LW % 4 == 0 && LW / 4 <= 32, "a row is one float4 per lane");
    static_assert(LW <= 128, "the column switch has 129 cases");
    static_assert(LW * RPT <= 128, "register budget: at most 128 panel floats per thread");
    static_assert(SPL <= 32 && NW <= 32, "pending-slot bit mask; one warp candidate per lane");
    static_assert(NW == 8, "the slot layouts above");

    __shared__ uint2 s_wc[NW];                  // the warps' candidates {key, position}
    __shared__ __align__(16) float s_wrow[NW][LW];   // and their rows
    __shared__ __align__(16) float s_prow[LW];  // the pivot row of the previous column
    __shared__ int s_p;                         // its position, or -1 (no candidate: all NaN)

    const int slot = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, b = blockIdx.x;
    const int kk = min(mp, ncols);

    if (slot == (EARLY ? 0 : NW)) {             // the communication warp
        if (G <= 32)
            comm_loop<1, LW, NW, EARLY>(kk, piv, info, col_base, keys, rows, epoch, s_wc,
                                        s_wrow, s_prow, &s_p, G, b, lane);
        else
            comm_loop<SPL, LW, NW, EARLY>(kk, piv, info, col_base, keys, rows, epoch, s_wc,
                                          s_wrow, s_prow, &s_p, G, b, lane);
        return;
    }
    if (EARLY && ((slot & 3) == 0 || slot == 11))
        return;                                 // idle
    // The compute thread's index (EARLY: slot - 1 - slot / 4 is its warp); computed from
    // threadIdx.x directly (as slot * 32 + lane, ptxas spilled 8 bytes in the EARLY loop).
    const int tid = EARLY ? threadIdx.x - 32 - ((threadIdx.x >> 7) << 5) : threadIdx.x;
    const int warp = tid >> 5;

    // The compute warps: rows interleaved over the blocks.  A thread's
    // row exists iff its position is below mp (swaps exchange positions of existing rows
    // only), so `mine` is recomputed where needed rather than kept in registers.
    int pos[RPT];
    bool mine[RPT];
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        pos[q] = (q * G + b) * TC + tid;
        mine[q] = pos[q] < mp;
    }
    float x[RPT][LW];
    float xn[RPT];                              // column j, updated through pivot j-1
    float xc[RPT];                              // column j-1 (for pivot j-1's multipliers)
    load_rows<LW, RPT>(x, xn, A, lda, ncols, pos, mine);

#pragma unroll 1
    for (int j = 0; j <= kk; ++j) {
        bool upd[RPT];
        float l[RPT];
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            upd[q] = false;
            l[q] = 0.f;
        }
        if (j > 0) {
            // Pivot j-1: positions, multipliers, column j.
            named_sync(3, T);                                                // P
            pivot_multipliers<RPT>(xc, pos, mp, j - 1, s_p, s_prow, upd, l);
            if (j < LW) {
                const float pc = s_prow[j];
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    if (upd[q])
                        xn[q] = fmaf(-l[q], pc, xn[q]);
            }
        }
        int cand = 0x7fffffff;
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            mine[q] = pos[q] < mp;
        if (j < kk) {
            // The warp's candidate for column j.
            unsigned tkey, wkey;
            const int ti = thread_first_max<RPT>(xn, pos, mine, j, tkey);
            cand = warp_first_max(tkey, ti, wkey);
            if (lane == 0)
                s_wc[warp] = make_uint2(wkey, static_cast<unsigned>(cand));
            if constexpr (EARLY) {
                // The block's candidate row as it is, by its owner alone (eight owners'
                // 16-byte stores at once queue up behind each other): pivot j-1 has reached
                // column j only (xn); the communication warp applies it to the columns >= j.
                named_sync(1, T);                                            // C
                const uint2 c = lane < NW ? s_wc[lane] : make_uint2(0u, 0x7fffffffu);
                unsigned bkey;
                const int best = warp_first_max(c.x, static_cast<int>(c.y), bkey);
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    if (pos[q] == best)     // best < mp, or INT_MAX: no candidate
                        store_row<LW>(s_wrow[0], x[q]);
                named_arrive(2, T);                                          // R
            } else {
                named_arrive(1, T);                                          // C
            }
        }
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            xc[q] = xn[q];
        switch (j) {
            GETRF_CASES64(0, LW + 1, GETRF_COMM_STEP)
            GETRF_CASES64(64, LW + 1, GETRF_COMM_STEP)
            GETRF_CASE(128, LW + 1, GETRF_COMM_STEP)
        }
        if (j < kk) {
            if constexpr (!EARLY) {
                // The warp's candidate row (complete through pivot j-1).
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    if (pos[q] == cand)
                        store_row<LW>(s_wrow[warp], x[q]);
                named_arrive(2, T);                                          // R
            }
            named_arrive(4, T);                         // U: done reading s_prow
        }
    }

    // (mine as the last column left it; load_rows' test made again, not kept live in the loop)
    store_rows<LW, RPT>(x, A, lda, ncols, pos, mine, whole_rows<LW>(A, lda, ncols));
}


// ------------------------------------------------------------------ getrf_leaf_cluster

namespace {

// Distributed shared memory (sm_90 thread block clusters), in PTX (smem_u32: async_copy.cuh).

// The address of this CTA's shared variable at `addr` in the CTA of cluster rank `rank`.
__device__ __forceinline__ unsigned map_cta(unsigned addr, unsigned rank) {
    unsigned d;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(addr), "r"(rank));
    return d;
}

__device__ __forceinline__ float2 ld_cluster_v2(unsigned addr) {
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr)
                 : "memory");
    return v;
}

__device__ __forceinline__ float4 ld_cluster_v4(unsigned addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
    return v;
}

// The cluster barrier in two halves: arrive (release: this thread's earlier shared-memory
// writes become visible to the cluster) and wait (acquire: every thread of the cluster has
// arrived, their writes are visible).  Executed by all threads, convergently (.aligned).
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}


}  // namespace

template <int LW, int RPT, int CS>
__global__ void __cluster_dims__(CS, 1, 1) __launch_bounds__(GETRF_THREADS, 1)
getrf_leaf_cluster(int mp, int ncols, float* A, long long lda, int* piv, int* info, int col_base)
{
    constexpr int T = GETRF_THREADS;
    constexpr int NW = T / 32;
    constexpr int NREC = CS * NW;               // candidates per column: one per warp
    constexpr int RPL = (NREC + 31) / 32;       // candidate records read per lane of warp 0
    static_assert(LW % 4 == 0 && LW / 4 <= 32, "warp 0 fetches a row as one float4 per lane");
    static_assert(LW <= 128, "the column switch has 128 cases");
    static_assert(LW * RPT <= 128, "register budget: at most 128 panel floats per thread");
    static_assert(CS >= 1 && CS <= 16, "one cluster: at most 16 CTAs (H100, non-portable)");

    __shared__ __align__(16) float s_row[2][NW][LW];   // each warp's candidate row, by parity
    __shared__ __align__(8) float2 s_cand[2][NW];      // each warp's {|v|, pos bits}, by parity
    __shared__ __align__(16) float s_prow[LW];         // the pivot row of this column
    __shared__ int s_p;                                // its position, or -1 (all NaN)

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cta = blockIdx.x;                 // = the rank in the cluster: the grid is one
    const int kk = min(mp, ncols);

    // Rows interleaved over the CTAs: r(q) = (q*CS + cta)*T + tid.
    int pos[RPT];
    bool mine[RPT];
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        pos[q] = (q * CS + cta) * T + tid;
        mine[q] = pos[q] < mp;
    }

    float x[RPT][LW], xj[RPT];                  // xj[q] = A(pos[q], j), the current column j
    const bool vec = load_rows<LW, RPT>(x, xj, A, lda, ncols, pos, mine);
    const unsigned cand0 = smem_u32(&s_cand[0][0]);
    const unsigned row0 = smem_u32(&s_row[0][0][0]);
    bool zero_seen = false;                     // (CTA 0, thread 0) info already settled

    // Rolled column loop, as getrf_leaf_row: only the register-indexed step is per column.
#pragma unroll 1
    for (int j = 0; j < kk; ++j) {
        const int par = j & 1;

        // 1. The warp's candidate: first max |A(pos, j)| over its positions pos >= j.
        unsigned tkey, wkey;
        int bi = thread_first_max<RPT>(xj, pos, mine, j, tkey);
        bi = warp_first_max(tkey, bi, wkey);

        // 2. Publish it in this CTA's slot [par][warp]: the owner stores its row, lane 0 the
        //    record (bi = INT_MAX: no candidate, matches no row, never wins).
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (mine[q] && pos[q] == bi) {
                float4* dst = reinterpret_cast<float4*>(&s_row[par][warp][0]);
#pragma unroll
                for (int c = 0; c < LW; c += 4)
                    dst[c / 4] = make_float4(x[q][c], x[q][c + 1], x[q][c + 2], x[q][c + 3]);
            }
        if (lane == 0)
            s_cand[par][warp] = make_float2(__uint_as_float(wkey), __int_as_float(bi));

        // 3. The column's one cluster barrier.
        cluster_arrive();
        cluster_wait();

        // 4. Warp 0: the NREC candidates from the CTAs' shared memory (record g: CTA g / NW,
        //    warp g % NW), the pivot, its row from the owner's slot into s_prow.
        if (warp == 0) {
            float2 k[RPL];
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int g = lane + 32 * s;
                k[s] = make_float2(0.f, __int_as_float(0x7fffffff));   // key 0: no candidate
                if (g < NREC)
                    k[s] = ld_cluster_v2(map_cta(cand0 + (par * NW + g % NW) * 8, g / NW));
            }
            unsigned lkey = 0u;                 // this lane's first max of its RPL records
            int li = 0x7fffffff;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const unsigned kk_ = __float_as_uint(k[s].x);
                const int ki = __float_as_int(k[s].y);
                if (kk_ > lkey || (kk_ == lkey && kk_ != 0u && ki < li)) {
                    lkey = kk_;
                    li = ki;
                }
            }
            unsigned ckey;
            const int ci = warp_first_max(lkey, li, ckey);
            const bool valid = ci != 0x7fffffff;
            int cb = 0;                          // the winner's record: CTA cb / NW, warp cb % NW
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const unsigned m = __ballot_sync(0xffffffffu, valid && __float_as_int(k[s].y) == ci);
                if (m)
                    cb = 32 * s + __ffs(m) - 1;
            }
            if (lane < LW / 4) {
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                if (valid)
                    v = ld_cluster_v4(map_cta(row0 + ((par * NW + cb % NW) * LW + 4 * lane) * 4,
                                              cb / NW));
                reinterpret_cast<float4*>(s_prow)[lane] = v;
            }
            __syncwarp();
            if (lane == 0) {
                s_p = valid ? ci : -1;
                if (cta == 0) {
                    piv[j] = valid ? ci : j;
                    if (valid && s_prow[j] == 0.f && !zero_seen) {
                        zero_seen = true;
                        if (*info == 0)
                            *info = col_base + j + 1;
                    }
                }
            }
        }
        __syncthreads();

        // 5. Exchange positions j and p; scale and update the rows below (pos > j).
        apply_pivot<LW, RPT>(x, xj, pos, mp, j, s_p, s_prow);
    }

    // Arrive: this CTA's last reads of other CTAs' shared memory are done.  Wait (after the
    // stores): no CTA exits while another may still read its slots.
    cluster_arrive();
    store_rows<LW, RPT>(x, A, lda, ncols, pos, mine, vec);
    cluster_wait();
}

#undef GETRF_STEP

// ------------------------------------------------------------------ getrf_panel_cols
//
// getrf_panel_cols<CW, RPT, T, GW> ((CW, RPT, T) = (16, 4, 512), (8, 8, 512), (4, 16, 512);
// GW columns per handoff group, CW % GW == 0): the same contract as the leaves above for a
// panel of w columns (w/CW co-resident blocks; the host gives at most 256) and mp <= T*RPT
// rows (2048 / 4096 / 8192), in ONE launch with one cross-block handoff per GW columns instead
// of one barrier per column.  The panel is distributed by COLUMNS: block b (of NB =
// ceil(w / CW), T threads, co-resident: cooperative launch) owns columns [b*CW, b*CW + CW) of
// ALL mp rows and keeps them in registers x[RPT][CW] from the first load to the final store;
// thread t holds the rows at positions i = q*T + t (q < RPT).  Swaps are real (a row moves to
// the thread of its new position), so each column's pivot search stays inside one block.
//   The kk = min(mp, w) pivot columns form ns = ceil(kk / CW) slabs; slab s = block s's
// columns, handed over in groups of GW columns (unit u = s*NG + g, NG = CW / GW).  Every
// block walks the groups in order:
//   - s == b: factor the slab (unblocked, exactly getf2: first max |x| over the positions
//     >= j, ties to the smaller position, swap, multiplier x * (1/pv) or x / pv below FLT_MIN,
//     rank-1 update x = fmaf(-l, u, x)) with ONE __syncthreads per column: every warp
//     publishes its candidate's row (and the owner of position j row j) in shared memory
//     slots double-buffered by the column's parity, then every warp reduces the 16
//     candidates itself.  The column loop is rolled; the register-indexed work of column J
//     (cols_step<J>) sits behind a switch, as in getrf_leaf_row.  After each group of GW
//     columns, publish it (cols_publish), column-major in lbuf[(s*CW + k)*ldl + i] (ldl = mp
//     rounded up to 4), in two steps: (A) the group's own rows (L11 / U11), the mask of the
//     slab's columns so far that had a nonzero pivot (masks[s]) and the pivots,
//     __syncthreads, flag = tag0 + 2u + 1 by thread 0 (st.release.gpu: cumulative over the
//     block's stores); (B) the multipliers of the rows below, flag = tag0 + 2u + 2.  The
//     later groups' swaps move rows already published; the other blocks' columns move with
//     them, so each group's update is applied in the row order it was published in.
//   - s != b: per group, wait for (A) (thread 0 polls flag with ld.acquire.gpu,
//     __syncthreads); apply the group's interchanges to this block's columns: warp 0 turns
//     the pivots into at most 2*GW (destination, source) entries (the touched positions, each
//     followed back through the transpositions in reverse order) and two position -> entry
//     tables in shared memory, and the source rows go through a staging buffer (two
//     __syncthreads).  Blocks right of the slab (b > s) then: thread 32 waits for (B) and
//     starts the multipliers below the group on their way into shared memory (s_L, dynamic:
//     one bulk copy per column, bytes counted on an mbarrier) while CW threads compute U12 =
//     L11^{-1} A12 for the block's columns (forward substitution); once the copies have
//     landed, the rows below take x -= L21 U12 (one fmaf per element and pivot column, in
//     pivot order, skipping the columns without a pivot).  That is the same sequence of fmaf
//     on every element as the unblocked leaf, so the results are bit-identical to
//     getrf_leaf_row<128> and getrf_leaf_cluster<128, 1, CS> (tests check it).
//   So block s+1 applies slab s's first groups while block s still factors the last one, and
//   waits at the slab's end for one group's swaps, U12 and update (mp*CW*GW FMAs), not the
//   whole slab's.  At the end every block stores its columns (final positions) to A.  A is
//   read only at the start and written only at the end, by the block owning the columns;
//   the other blocks read a group's multipliers, pivots and mask after its flag, through L2
//   (ld.cg, bulk copies: never a stale L1 line).  The flag only grows (at most 2*kk tags from
//   tag0 + 1 per launch, from the host, which resets it before the tags would wrap).
// Bound: latency-bound, like the other leaves, but with one cross-block handoff per GW
// columns.  Per slab on the critical path with whole-slab groups (GW = CW; block s+1; H100,
// 2048 x 128, CW = 16, measured with benchmarks/panel_cols_trace.py): entries 2.0 us, swaps
// 0.5, U12 and the copies' wait ~1.8, update 4.9 (mp*CW*CW FMAs on one SM), factor 17.6 (~1.1
// us a column: 16 warps issue its reductions and updates, ~2200 cycles), publish (A) ~0.5:
// ~28 us per 16 columns, 0.24 ms per 2048 x 128 panel (cluster<128>: 0.32).  Registers:
// RPT*CW = 64 floats of panel per thread (__launch_bounds__(T, 1)); shared memory: the two
// position -> entry tables (2 * T*RPT shorts), small slots, and s_L (CW * T*RPT floats = 128
// KiB, dynamic; a group uses GW * T*RPT of them).

#ifdef GETRF_COLS_TRACE   // development only: clock64 stamps per (block, slab, point)
__device__ unsigned long long g_cols_trace[2 * 32 * 32 * 16];   // [clock64 | globaltimer]
__device__ __forceinline__ unsigned long long cols_gtime() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(v));
    return v;
}
__device__ unsigned long long g_cols_ftrace[32 * 16 * 8];   // factor: [block][column][point]
#define COLS_FTRACE(k_)                                                          \
    do { if (t == 0) g_cols_ftrace[(b * 16 + jl) * 8 + (k_)] = clock64(); } while (0)
#define COLS_TRACE(s_, k_)                                                       \
    do {                                                                         \
        if (t == 0) {                                                            \
            g_cols_trace[(b * 32 + (s_)) * 16 + (k_)] = clock64();               \
            g_cols_trace[32 * 32 * 16 + (b * 32 + (s_)) * 16 + (k_)] = cols_gtime(); \
        }                                                                        \
    } while (0)
#else
#define COLS_TRACE(s_, k_) do {} while (0)
#define COLS_FTRACE(k_) do {} while (0)
#endif

namespace {

__device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// Row x[q] (q a run-time index < RPT) to / from CW floats of shared memory: a predicated
// copy per candidate q, so that x stays in registers.
template <int RPT, int CW>
__device__ __forceinline__ void row_out(const float (&x)[RPT][CW], int q, float* dst) {
#pragma unroll
    for (int Q = 0; Q < RPT; ++Q)
        if (Q == q)
#pragma unroll
            for (int c = 0; c < CW; c += 4)
                *reinterpret_cast<float4*>(dst + c) =
                    make_float4(x[Q][c], x[Q][c + 1], x[Q][c + 2], x[Q][c + 3]);
}

template <int RPT, int CW>
__device__ __forceinline__ void row_in(float (&x)[RPT][CW], int q, const float* src) {
#pragma unroll
    for (int Q = 0; Q < RPT; ++Q)
        if (Q == q)
#pragma unroll
            for (int c = 0; c < CW; c += 4) {
                const float4 v = *reinterpret_cast<const float4*>(src + c);
                x[Q][c] = v.x;
                x[Q][c + 1] = v.y;
                x[Q][c + 2] = v.z;
                x[Q][c + 3] = v.w;
            }
}

template <int RPT>
__device__ __forceinline__ void set_q(float (&v)[RPT], int q, float value) {
#pragma unroll
    for (int Q = 0; Q < RPT; ++Q)
        if (Q == q)
            v[Q] = value;
}

// Columns k0..k1 of this thread's rows at positions i0 <= i < i1, column-major into ls.
template <int CW, int RPT, int T>
__device__ __forceinline__ void cols_store(const float (&x)[RPT][CW], float* ls, long long ldl,
                                           int i0, int i1, int k0, int k1)
{
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int i = q * T + static_cast<int>(threadIdx.x);
        if (i >= i0 && i < i1)
#pragma unroll
            for (int k = 0; k < CW; ++k)
                if (k >= k0 && k <= k1)
                    ls[static_cast<long long>(k) * ldl + i] = x[q][k];
    }
}

// A factored group of the slab starting at column j0 (slab columns k0..k1, positions j0+k0 ..
// j0+k1), published in two steps by getrf_panel_cols' owner block: (A) the group's own rows
// (L11 / U11), the slab's mask so far and (already stored) pivots, flag = tag + 1; (B) the
// multipliers below, flag = tag + 2.  The readers' swaps and U12 need only (A) and overlap
// the stores of (B).  Multipliers column-major, ls[k*ldl + i] (ls: the slab's first column),
// at the positions the rows have now: the later groups' swaps move them in the owner and in
// the readers' columns alike, so a reader applies this group's update in that state.
template <int CW, int RPT, int T>
__device__ __forceinline__ void cols_publish(const float (&x)[RPT][CW], float* lbuf,
                                             long long ldl, int mp, int j0, int k0, int k1,
                                             unsigned* masks, unsigned mask, unsigned* flag,
                                             unsigned tag0, int unit, int s)
{
    float* ls = lbuf + static_cast<long long>(j0) * ldl;
    const unsigned tag = tag0 + 2u * static_cast<unsigned>(unit);
    const int t = threadIdx.x, lo = j0 + k0, hi = j0 + k1 + 1;
    [[maybe_unused]] const int b = blockIdx.x;   // for COLS_TRACE
    COLS_TRACE(s, 6);
    cols_store<CW, RPT, T>(x, ls, ldl, lo, hi, k0, k1);
    __syncthreads();   // every thread's stores happen before thread 0's release
    if (t == 0) {
        masks[s] = mask;
        st_release_gpu(flag, tag + 1u);
    }
    COLS_TRACE(s, 10);
    cols_store<CW, RPT, T>(x, ls, ldl, hi, mp, k0, k1);
    __syncthreads();
    if (t == 0)
        st_release_gpu(flag, tag + 2u);
    COLS_TRACE(s, 7);
}

// Column J's register work of getrf_panel_cols (J constant: x stays in registers): the rows
// qlo <= q < nq (below the pivot) take their multiplier xj[q] into column J and the rank-1
// update of columns J+1.. with the pivot row; then xj = column J+1.  Loop order by shape:
// pivot-row element outer when RPT <= CW (RPT multipliers live), rows outer otherwise.
template <int J, int CW, int RPT>
__device__ __forceinline__ void cols_step(float (&x)[RPT][CW], float (&xj)[RPT], int qlo, int nq,
                                          const float* prow)
{
#pragma unroll
    for (int q = 0; q < RPT; ++q)
        if (q >= qlo && q < nq)
            x[q][J] = xj[q];
    if constexpr (RPT <= CW) {
#pragma unroll
        for (int c = J + 1; c < CW; ++c) {
            const float pc = prow[c];
#pragma unroll
            for (int q = 0; q < RPT; ++q)
                if (q >= qlo && q < nq)
                    x[q][c] = fmaf(-xj[q], pc, x[q][c]);
        }
    } else {
        float pc[CW];
#pragma unroll
        for (int c = J + 1; c < CW; ++c)
            pc[c] = prow[c];
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (q >= qlo && q < nq)
#pragma unroll
                for (int c = J + 1; c < CW; ++c)
                    x[q][c] = fmaf(-xj[q], pc[c], x[q][c]);
    }
    if constexpr (J + 1 < CW) {
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            xj[q] = x[q][J + 1];
    }
}

#define COLS_STEP(J) cols_step<(J), CW, RPT>(x, xj, qlo, nq, prow)

}  // namespace

template <int CW, int RPT, int T, int GW>
__global__ void __launch_bounds__(T, 1)
getrf_panel_cols(int mp, int w, float* A, long long lda, int* piv, int* info, int col_base,
                 float* lbuf, unsigned* masks, unsigned* flag, unsigned tag0)
{
    constexpr int NW = T / 32;
    constexpr int ROWS = T * RPT;               // most rows (positions) of a panel
    constexpr int NG = CW / GW;                 // groups (handoff units) per slab
    constexpr int NE = 2 * GW;                  // most positions one group's swaps touch
    constexpr unsigned FULL = 0xffffffffu;
    static_assert(CW % 4 == 0 && NE <= 32, "float4 rows; one lane of warp 0 per entry");
    static_assert(GW >= 1 && CW % GW == 0, "whole groups per slab");
    static_assert(CW <= 16, "the column switch has 16 cases");
    static_assert(T % 32 == 0 && T >= 64 && T <= 1024, "whole warps; thread 32 copies");
    static_assert(CW * RPT <= 64, "register budget: at most 64 panel floats per thread");
    static_assert(NW <= 32, "one lane per warp candidate");

    __shared__ short s_dslot[ROWS];             // position -> entry whose destination it is
    __shared__ short s_sslot[ROWS];             // position -> entry whose source it is
    __shared__ __align__(16) float s_stage[NE][CW];   // the moved rows, by entry
    __shared__ __align__(16) float s_u[GW][CW];       // U12 of a group for this block's columns
    __shared__ float s_l11[GW][GW];                   // its unit lower L11 (strictly lower)
    __shared__ __align__(16) float s_cand[2][NW][CW]; // factor: each warp's candidate row
    __shared__ __align__(16) float s_diag[2][CW];     // factor: row j before the swap
    __shared__ unsigned s_ck[2][NW];
    __shared__ int s_cp[2][NW];
    __shared__ unsigned s_mask;
    __shared__ int s_pv[GW];                    // a group's pivots (warp 0)
    __shared__ __align__(8) unsigned long long s_bar;   // s_L's bulk copies (one phase a group)

    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int b = blockIdx.x, c0 = b * CW, ncol = min(CW, w - c0);
    const int kk = min(mp, w), ns = (kk + CW - 1) / CW;
    const int nq = mp > t ? (mp - t + T - 1) / T : 0;   // this thread's rows: q < nq
    const long long ldl = (mp + 3) & ~3;        // lbuf's column stride (16-byte aligned)
    extern __shared__ __align__(16) float s_L[];   // [GW][ROWS]: a group's multipliers

    for (int i = t; i < ROWS; i += T) {
        s_dslot[i] = -1;
        s_sslot[i] = -1;
    }
    const unsigned bar = smem_u32(&s_bar);
    unsigned phase = 0u;                        // parity of s_bar's next phase
    if (t == 0) {
        mbar_init(bar, 1);
        fence_mbar_init();
    }

    float x[RPT][CW];
    const bool vec = ncol == CW && (reinterpret_cast<unsigned long long>(A) & 15) == 0 &&
                     (lda & 3) == 0;
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int i = q * T + t;
        const float* src = A + static_cast<long long>(i < mp ? i : 0) * lda + c0;
#pragma unroll
        for (int c = 0; c < CW; c += 4) {
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (i < mp) {
                if (vec) {
                    v = *reinterpret_cast<const float4*>(src + c);
                } else {
                    v.x = c < ncol ? src[c] : 0.f;
                    v.y = c + 1 < ncol ? src[c + 1] : 0.f;
                    v.z = c + 2 < ncol ? src[c + 2] : 0.f;
                    v.w = c + 3 < ncol ? src[c + 3] : 0.f;
                }
            }
            x[q][c] = v.x;
            x[q][c + 1] = v.y;
            x[q][c + 2] = v.z;
            x[q][c + 3] = v.w;
        }
    }
    __syncthreads();

    int e_dest = -1, e_src = -1;                // warp 0: this lane's entry of the last slab
#pragma unroll 1
    for (int s = 0; s < ns; ++s) {
        const int j0 = s * CW, cs = min(CW, kk - j0);
        if (s == b) {
            // ---- factor this block's slab: cs pivot columns, one __syncthreads each
            COLS_TRACE(s, 5);
            unsigned mask = 0u;
            float xj[RPT];                      // this thread's values of column jl
#pragma unroll
            for (int q = 0; q < RPT; ++q)
                xj[q] = x[q][0];
            // The column loop stays rolled (its code once, warm in the instruction cache after
            // the first column); only the register-indexed step is per column (cols_step<J>
            // behind a switch), as in getrf_leaf_row.
#pragma unroll 1
            for (int jl = 0; jl < cs; ++jl) {
                const int j = j0 + jl, par = jl & 1;
                COLS_FTRACE(0);
                unsigned key = 0u;              // this thread's first max over positions >= j
                int bp = 0x7fffffff, bq = 0;
#pragma unroll
                for (int q = 0; q < RPT; ++q) {
                    const int i = q * T + t;
                    const float a = fabsf(xj[q]);
                    const unsigned kq = __float_as_uint(a) + 1u;
                    if (i < mp && i >= j && !(a != a) && kq > key) {   // NaN never wins
                        key = kq;
                        bp = i;
                        bq = q;
                    }
                }
                unsigned wk;
                const int wp = warp_first_max(key, bp, wk);
                if (key != 0u && bp == wp)
                    row_out<RPT, CW>(x, bq, s_cand[par][warp]);
                if (lane == 0) {
                    s_ck[par][warp] = wk;
                    s_cp[par][warp] = wp;
                }
                if (t == j % T)
                    row_out<RPT, CW>(x, j / T, s_diag[par]);
                COLS_FTRACE(1);
                __syncthreads();
                COLS_FTRACE(2);
                const unsigned ck = lane < NW ? s_ck[par][lane] : 0u;
                const int cp = lane < NW ? s_cp[par][lane] : 0x7fffffff;
                unsigned bk;
                int p = warp_first_max(ck, cp, bk);
                const bool valid = bk != 0u;
                const unsigned from = __ballot_sync(FULL, valid && ck == bk && cp == p);
                const float* prow = s_cand[par][from ? __ffs(from) - 1 : 0];
                if (!valid)
                    p = j;                      // all NaN: no pivot, nothing moves
                const float pv = valid ? prow[jl] : 0.f;
                const bool nonzero = valid && pv != 0.f;
                COLS_FTRACE(3);
                if (p != j) {                   // rows j and p trade places (and column values)
                    if (t == p % T) {
                        row_in<RPT, CW>(x, p / T, s_diag[par]);
                        set_q<RPT>(xj, p / T, s_diag[par][jl]);
                    }
                    if (t == j % T) {
                        row_in<RPT, CW>(x, j / T, prow);
                        set_q<RPT>(xj, j / T, pv);
                    }
                }
                // This thread's rows below j (i = q*T + t > j, i < mp): qlo <= q < nq; their
                // multipliers into xj (a uniform branch: the division only below FLT_MIN).
                const int qlo = nonzero ? (j >= t ? (j - t) / T + 1 : 0) : RPT;
                const bool by_recip = fabsf(pv) >= 1.17549435e-38f;   // FLT_MIN (sfmin)
                if (nonzero && by_recip) {
                    const float rinv = 1.0f / pv;
#pragma unroll
                    for (int q = 0; q < RPT; ++q)
                        xj[q] *= rinv;
                } else if (nonzero) {
#pragma unroll
                    for (int q = 0; q < RPT; ++q)
                        xj[q] = xj[q] / pv;
                }
                COLS_FTRACE(4);
                switch (jl) {
                    GETRF_CASES16(0, CW, COLS_STEP)
                }
                COLS_FTRACE(5);
                if (t == 0) {
                    piv[j] = p;
                    if (nonzero)
                        mask |= 1u << jl;
                    else if (valid && *info == 0)
                        *info = col_base + j + 1;
                }
                // Publish each group as it completes; a whole-slab group after the loop (in the
                // loop, ptxas spills the one-group kernel at CW = 16).
                if constexpr (GW < CW) {
                    if (jl % GW != GW - 1 && jl + 1 != cs)
                        continue;
                    cols_publish<CW, RPT, T>(x, lbuf, ldl, mp, j0, jl - jl % GW, jl, masks, mask,
                                             flag, tag0, s * NG + jl / GW, s);
                }
            }
            if constexpr (GW == CW)
                cols_publish<CW, RPT, T>(x, lbuf, ldl, mp, j0, 0, cs - 1, masks, mask, flag,
                                         tag0, s * NG, s);
            continue;
        }

        // ---- another block's slab, group by group: wait for the group, apply its
        // interchanges (and its update)
#pragma unroll 1
        for (int g = 0; g * GW < cs; ++g) {
            const int ju = j0 + g * GW, cu = min(GW, cs - g * GW);
            const unsigned tag = tag0 + 2u * static_cast<unsigned>(s * NG + g);
            COLS_TRACE(s, 0);
            if (t == 0) {                           // (A): pivots, L11, mask
                while (static_cast<int>(ld_acquire_gpu(flag) - (tag + 1u)) < 0) {
                }
            }
            __syncthreads();
            COLS_TRACE(s, 1);
            const bool right = b > s;               // columns right of the slab: U12 and update
            if (warp == 0) {
                // Reset the last group's entries, then this group's: lanes k < GW the positions
                // ju + k, lanes GW + k the pivot p_k when below the group and not an earlier p.
                if (e_dest >= 0) {
                    s_dslot[e_dest] = -1;
                    s_sslot[e_src] = -1;
                }
                __syncwarp();
                if (lane < cu)                      // the group's pivots, for every lane
                    s_pv[lane] = __ldcg(piv + ju + lane);
                __syncwarp();
                const int* pm = s_pv;
                const int k = lane % GW;
                int dest = -1;
                if (lane < GW) {
                    dest = k < cu ? ju + k : -1;
                } else if (lane < NE && k < cu) {
#pragma unroll
                    for (int m = 0; m < GW; ++m)
                        if (m == k)
                            dest = pm[m] >= ju + cu ? pm[m] : -1;
#pragma unroll
                    for (int m = 0; m < GW; ++m)
                        if (m < k && pm[m] == dest)
                            dest = -1;              // the same row as an earlier pivot's entry
                }
                // Row now at dest = row at tau_0(tau_1(...tau_{cu-1}(dest))) before the swaps.
                int src = dest;
#pragma unroll
                for (int m = GW - 1; m >= 0; --m) {
                    if (m < cu && src >= 0) {
                        if (src == ju + m)
                            src = pm[m];
                        else if (src == pm[m])
                            src = ju + m;
                    }
                }
                e_dest = dest;
                e_src = src;
                if (dest >= 0) {
                    s_dslot[dest] = static_cast<short>(lane);
                    s_sslot[src] = static_cast<short>(lane);
                }
            }
            if (right) {
                for (int e = t; e < GW * GW; e += T) {
                    const int k = e / GW, m = e % GW;
                    s_l11[k][m] = m < k && k < cu
                                  ? __ldcg(lbuf + static_cast<long long>(ju + m) * ldl + ju + k)
                                  : 0.f;
                }
                if (t == 0)
                    s_mask = (__ldcg(masks + s) >> (g * GW)) & ((2u << (cu - 1)) - 1u);
            }
            __syncthreads();
            COLS_TRACE(s, 8);
#pragma unroll
            for (int q = 0; q < RPT; ++q) {
                const int i = q * T + t;
                const int e = i < mp ? s_sslot[i] : -1;
                if (e >= 0)
                    row_out<RPT, CW>(x, q, s_stage[e]);
            }
            __syncthreads();
#pragma unroll
            for (int q = 0; q < RPT; ++q) {
                const int i = q * T + t;
                const int e = i < mp ? s_dslot[i] : -1;
                if (e >= 0)
                    row_in<RPT, CW>(x, q, s_stage[e]);
            }
            COLS_TRACE(s, 9);
            if (!right)
                continue;
            if (t == 32) {   // (B), then the multipliers below the group into s_L while U12 runs:
                // one bulk copy (TMA) per column, bytes counted on s_bar
                while (static_cast<int>(ld_acquire_gpu(flag) - (tag + 2u)) < 0) {
                }
                const int r0 = (ju + cu) & ~3;
                const unsigned bytes = 4u * static_cast<unsigned>(ldl - r0);
                mbar_expect_tx(bar, bytes * static_cast<unsigned>(cu));
                if (bytes)
                    for (int k = 0; k < cu; ++k)
                        bulk_g2s(smem_u32(s_L + k * ROWS + r0),
                                 lbuf + static_cast<long long>(ju + k) * ldl + r0, bytes, bar);
            }
            const unsigned mask = s_mask;
            if (t < CW) {   // U12(:, t) = L11^{-1} A12(:, t); A12 row k is entry k (position ju+k)
                // Fully unrolled, u through shared memory (registers are short here); the mask
                // has no bit >= cu, rows k >= cu are computed but unused.
#pragma unroll
                for (int k = 0; k < GW; ++k) {
                    float a = s_stage[k][t];
#pragma unroll
                    for (int m = 0; m < k; ++m)
                        if ((mask >> m) & 1u)
                            a = fmaf(-s_l11[k][m], s_u[m][t], a);
                    s_u[k][t] = a;
                }
            }
            COLS_TRACE(s, 2);
            __syncthreads();
#pragma unroll
            for (int q = 0; q < RPT; ++q) {
                const int i = q * T + t;
                if (i >= ju && i < ju + cu)
                    row_in<RPT, CW>(x, q, s_u[i - ju]);
            }
            COLS_TRACE(s, 3);
            mbar_wait(bar, phase);                  // the multipliers have landed in s_L
            phase ^= 1u;
            // Rows below the group: pivot column k outer (its multipliers from s_L), this
            // thread's rows inner, U12's row k 4 values at a time.
#pragma unroll (RPT >= 8 ? 2 : 1)
            for (int k = 0; k < cu; ++k) {
                if (!((mask >> k) & 1u))
                    continue;
                float lk[RPT];
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    lk[q] = s_L[k * ROWS + q * T + t];
#pragma unroll
                for (int c = 0; c < CW; c += 4) {
                    const float4 u = *reinterpret_cast<const float4*>(&s_u[k][c]);
#pragma unroll
                    for (int q = 0; q < RPT; ++q) {
                        const int i = q * T + t;
                        if (i >= ju + cu && i < mp) {
                            x[q][c] = fmaf(-lk[q], u.x, x[q][c]);
                            x[q][c + 1] = fmaf(-lk[q], u.y, x[q][c + 1]);
                            x[q][c + 2] = fmaf(-lk[q], u.z, x[q][c + 2]);
                            x[q][c + 3] = fmaf(-lk[q], u.w, x[q][c + 3]);
                        }
                    }
                }
            }
            COLS_TRACE(s, 4);
        }
    }

#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const int i = q * T + t;
        if (i >= mp)
            continue;
        float* dst = A + static_cast<long long>(i) * lda + c0;
#pragma unroll
        for (int c = 0; c < CW; c += 4) {
            if (vec) {
                *reinterpret_cast<float4*>(dst + c) =
                    make_float4(x[q][c], x[q][c + 1], x[q][c + 2], x[q][c + 3]);
            } else {
#pragma unroll
                for (int d = 0; d < 4; ++d)
                    if (c + d < ncol)
                        dst[c + d] = x[q][c + d];
            }
        }
    }
}

#undef COLS_STEP
#undef GETRF_CASES64
#undef GETRF_CASES16
#undef GETRF_CASES4
#undef GETRF_CASE
