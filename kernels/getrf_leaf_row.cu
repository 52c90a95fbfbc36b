// getrf_leaf_row.cu -- getrf_leaf_row<T, LW, RPT, EARLY>: the GPU panel's row leaf, LU with
// partial pivoting of a tall block of up to LW = 128 float / 64 double columns (LAPACK sgetf2
// for T = float, dgetf2 for T = double) in ONE cooperative launch, one grid-wide flag barrier
// per column.  The panel recursion (gpulinalg/lu/panel_gpu.py) takes it for every panel whose
// grid is co-resident.
//
// Computes, for a block A of mp rows and ncols <= LW columns, kk = min(mp, ncols) steps of
// right-looking unblocked LU in T's arithmetic, exactly as getrf_leaf (getrf_leaf_tile.cu):
// first max |A(i, j)| over rows i >= j (ties to the smallest row, as i?amax), swap,
// multipliers by 1 / A(j, j) (by division when |A(j, j)| < sfmin: FLT_MIN / DBL_MIN, as
// LAPACK), rank-1 update by fused multiply-add (fmaf / fma); *info = col_base + j + 1 at the
// first exactly zero pivot.  Per element the multiply-adds are those of unblocked LU, in the
// same order, so the factors are bit-identical to getrf_leaf's for the same width and T.
// Unlike LAPACK, pivots are 0-based and relative to the block's first row, and A is stored
// row-wise: A(i, j) = A[i*lda + j] (lda 64-bit).  A column whose candidates are all NaN gets
// piv[j] = j and is left alone.
//
// Knobs: (LW, RPT) template parameters (ROW_SHAPES in gpulinalg/lu/panel_gpu.py: float (128,
// 1), (64, 2), (32, 4); double (64, 1), (24, 2), within LW*RPT*sizeof(T) <= 512); EARLY = 1
// for RPT <= the tuning field row_early_rpt (default 2), else 0 (the late block of 9 warps,
// below).  The plan takes the widest shape whose grid of G = ceil(mp / (256*RPT)) blocks is
// at most row_block_cap blocks (defaults: 32 on one GPU, 64 on each of two, 160 on each of
// more), else the one of fewest blocks.  Structural: GETRF_GMAX_ROW = 160 record slots
// (GMAX_ROW in gpulinalg/lu/panel_gpu.py).
//
// Bound: latency-bound by the per-column handoff, not by flops or bytes (the data never
// leaves registers between load and store).  Per column on the critical path: the position
// exchange, one fmaf, the search and two warp reductions, the record's trip through L2 and
// the poll, the pivot row's fetch where its record was the last to arrive, four named
// barriers.  H100, 128-wide panels alone: ~1.9 / 2.1 / 2.3 us per column at 8192 / 16384 /
// 32768 rows with EARLY, 2.4 / 2.7 / 2.9 late; one block alone (128-256 rows) 1.7-2.0 us,
// so the grid barrier costs ~0.1 us of it, the rest is the chain on the SM.
//
// Threads: G = ceil(mp / (256*RPT)) blocks (G <= GETRF_GMAX_ROW and co-resident: an H100
// holds 132 such blocks, so mp <= 33792 * RPT) of 8 COMPUTE warps, one COMMUNICATION warp
// and, with EARLY, 3 idle warp slots (below).  Compute thread t (0..255) of block b owns the
// rows r(q) = (q*G + b)*256 + t, q < RPT, and keeps their LW elements in registers
// (x[RPT][LW] of T); the communication warp holds no rows.  More rows
// per thread leave SMs to a concurrent SGEMM (the grid is latency-bound: the SMs it holds
// mostly wait).
//   - lazy swaps: no data moves between threads.  Each thread carries its rows' current
//     positions pos[q] (initially r(q)); pivoting at column j exchanges the positions j and p
//     (pos == p -> j, pos == j -> p), the search runs over pos >= j (ties to the smaller pos,
//     as isamax), the update over pos > j, and the final store writes the row to A(pos, :).
//     A row exists iff its position is below mp (positions of existing rows are exchanged
//     among themselves), so no flag is kept for it;
//   - a flag barrier, no fence: a block's candidate (record keys[j & 1][b] = {tag, key, tag,
//     pos}, key = |v| bits + 1, 0 for none) and its row (rows[j & 1][b], tagged 64-bit words
//     {tag, 32 bits}) are stored relaxed; every 64-bit word is single-copy atomic and tag =
//     epoch + j is a number the host never reuses (keys and rows start zeroed, epochs at 1),
//     so the tags, not a release/acquire pair, tell a fresh word from an old one.  A value
//     wider than 32 bits is split over several words (row_elem<T>): a double is two words
//     {tag, low half} {tag, high half}, its 64-bit key likewise ({tag, key high, tag, key
//     low} {tag, pos, tag, 0}: a 32-byte record), and a reader takes it only when every word
//     carries this column's tag.  That is as safe as one word: in column j a slot is written
//     once, by one block (its record and its row once each), and the tag names the column,
//     so words that all carry tag j were all written in column j by that block -- the halves
//     of one value, never halves of two (no torn read: each half is single-copy atomic on
//     its own, and a stale half carries an older tag).  The row moves in 16-byte chunks, four
//     words per lane, for either T.  The communication warp polls the G records until all
//     carry this column's tag -- that IS the grid barrier, and it already holds every block's
//     candidate.  Slots are double-buffered by the parity of j: block b rewrites [j & 1][b]
//     at column j+2 only after seeing every block's column-(j+1) record, which each block
//     wrote after its last read of the column-j slots;
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
//     code and the row copy run while the records travel.  Pivot j-1 reaches column j before
//     the search of column j and the columns > j right after it, before pivot j;
//   - EARLY: the row leaves before the update, too.  The compute warps wait at C (bar.sync),
//     reduce the 8 warp candidates themselves, and the owner of the block's candidate alone
//     copies its row to s_wrow[0] as it is: through pivot j-2, column j-1 holding its value
//     there (not yet its multiplier); arrive at R, then the update.  (One copy per block, not
//     per warp: eight owners' single-lane runs of 16-byte stores would queue in the MIO pipe
//     and hold R.)  The communication warp computes the row's multiplier for pivot j-1 from
//     that column and applies pivot j-1's fmaf to the columns >= j (s_prow still holds pivot
//     j-1's row: it is rewritten only after U) -- the same operations as the owner's, so the
//     published row is the same bit for bit.  The block is 12 warp slots, slot w on SM
//     sub-partition w % 4: slot 0 is the communication warp, alone on its sub-partition
//     (slots 4, 8, 11 idle), slots 1-3, 5-7, 9, 10 the compute warps, so that its poll never
//     waits behind a compute warp's update.
//   Named barriers C = 1, R = 2, P = 3, U = 4 (0, __syncthreads, is not used), each between the
//   256 compute threads (bar.arrive or bar.sync) and the 32 of the communication warp.  Shared
//   slots are single-buffered: s_wc / s_wrow are written before C / R of column j and
//   rewritten only after P of column j, which the communication warp arrives at after its
//   last read of them; s_prow / s_p are rewritten after U of that column, which every compute
//   warp arrives at after its last read of them (the update).  Three warps on one SM
//   sub-partition: at most 168 registers per thread (no spill at 128 panel floats or 64
//   doubles at one row per thread; ptxas spills at the margin: see how getrf_leaf_row computes
//   its compute-thread index; a double row's state (its column copies and multiplier) is
//   twice a float's, so at two rows per thread 48 doubles fit, not 64).
//   - the column loop is NOT unrolled: the barrier code exists once (it stays in the
//     instruction cache); only the register-indexed work sits behind the switch (a jump
//     table).  Fully unrolled, LW = 128 would be ~76,000 instructions.
//   The float code is the one this file had before T (the same SASS); row_elem<T> holds what
//   differs: the 16-byte chunk (float4 / double2), the key's width, the record's layout.

#include "getrf_common.cuh"

#define GETRF_GMAX_ROW 160             // most blocks (workspace slots, poll width)
#define GETRF_ROW_BYTES 512            // bytes of a row in the exchange (128 floats, 64 doubles)

// ---- lazy swaps: each thread keeps RPT rows in registers, x[q] the row at position pos[q]


// The row leaf per element type T: rows move in 16-byte chunks (Vec: V elements), through
// registers, shared memory and the exchange, where a chunk is four 32-bit pieces (bits), each
// in a tagged 64-bit word {tag, piece}; the block's candidate key orders as |v| (Key: |v|
// bits + 1, 0 for none; 32 bits for float, 64 for double), its record is {key, position} in
// RW 16-byte pieces of tagged words (float: {tag, key, tag, pos}; double: {tag, key high,
// tag, key low} {tag, pos, tag, 0}).
template <typename T>
struct row_elem;

template <>
struct row_elem<float> {
    using Vec = float4;
    using Key = unsigned;
    using Cand = uint2;                         // a warp's candidate {key, position}
    static constexpr int V = 4;
    static constexpr int RW = 1;
    static __device__ __forceinline__ uint2 cand(unsigned key, unsigned pos) {
        return make_uint2(key, pos);
    }
    template <int LW>
    static __device__ __forceinline__ void put(float (&x)[LW], int c, const float4& v) {
        x[c] = v.x;
        x[c + 1] = v.y;
        x[c + 2] = v.z;
        x[c + 3] = v.w;
    }
    template <int LW>
    static __device__ __forceinline__ float4 get(const float (&x)[LW], int c) {
        return make_float4(x[c], x[c + 1], x[c + 2], x[c + 3]);
    }
    static __device__ __forceinline__ float4 zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    static __device__ __forceinline__ unsigned key(float a) { return __float_as_uint(a) + 1u; }
    static __device__ __forceinline__ uint4 bits(const float4& v) {
        return make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z),
                          __float_as_uint(v.w));
    }
    static __device__ __forceinline__ float4 from_bits(unsigned a, unsigned b, unsigned c,
                                                       unsigned d) {
        return make_float4(__uint_as_float(a), __uint_as_float(b), __uint_as_float(c),
                           __uint_as_float(d));
    }
    // Pivot j-1's fmaf (multiplier l, pivot row chunk pr) on the elements c >= j of chunk v,
    // whose first element is column c0.
    static __device__ __forceinline__ void update_from(float4& v, const float4& pr, float l,
                                                       int c0, int j) {
        v.x = c0 >= j ? fmaf(-l, pr.x, v.x) : v.x;
        v.y = c0 + 1 >= j ? fmaf(-l, pr.y, v.y) : v.y;
        v.z = c0 + 2 >= j ? fmaf(-l, pr.z, v.z) : v.z;
        v.w = c0 + 3 >= j ? fmaf(-l, pr.w, v.w) : v.w;
    }
    struct Rec {
        ulonglong2 a;
    };
    static __device__ __forceinline__ void store_rec(ulonglong2* p, unsigned long long t,
                                                     unsigned key, int pos) {
        st_relaxed_gpu_v2(p, t | key, t | static_cast<unsigned>(pos));
    }
    static __device__ __forceinline__ Rec load_rec(const ulonglong2* p) {
        return {ld_relaxed_gpu_v2(p)};
    }
    // Whether a record whose first two words carry `tag` is fresh (all its words do).
    static __device__ __forceinline__ constexpr bool fresh_rest(const Rec&, unsigned) {
        return true;
    }
    static __device__ __forceinline__ unsigned rec_key(const Rec& r) {
        return static_cast<unsigned>(r.a.x);
    }
    static __device__ __forceinline__ int rec_pos(const Rec& r) {
        return static_cast<int>(static_cast<unsigned>(r.a.y));
    }
    static __device__ __forceinline__ unsigned cand_key(const uint2& c) { return c.x; }
    static __device__ __forceinline__ unsigned cand_pos(const uint2& c) { return c.y; }
};

template <>
struct row_elem<double> {
    using Vec = double2;
    using Key = unsigned long long;
    struct alignas(16) Cand {
        unsigned long long key;
        unsigned pos;
    };
    static constexpr int V = 2;
    static constexpr int RW = 2;
    static __device__ __forceinline__ Cand cand(unsigned long long key, unsigned pos) {
        return {key, pos};
    }
    template <int LW>
    static __device__ __forceinline__ void put(double (&x)[LW], int c, const double2& v) {
        x[c] = v.x;
        x[c + 1] = v.y;
    }
    template <int LW>
    static __device__ __forceinline__ double2 get(const double (&x)[LW], int c) {
        return make_double2(x[c], x[c + 1]);
    }
    static __device__ __forceinline__ double2 zero() { return make_double2(0.0, 0.0); }
    static __device__ __forceinline__ unsigned long long key(double a) {
        return static_cast<unsigned long long>(__double_as_longlong(a)) + 1ull;
    }
    static __device__ __forceinline__ uint4 bits(const double2& v) {
        return make_uint4(static_cast<unsigned>(__double2loint(v.x)),
                          static_cast<unsigned>(__double2hiint(v.x)),
                          static_cast<unsigned>(__double2loint(v.y)),
                          static_cast<unsigned>(__double2hiint(v.y)));
    }
    static __device__ __forceinline__ double2 from_bits(unsigned a, unsigned b, unsigned c,
                                                        unsigned d) {
        return make_double2(__hiloint2double(static_cast<int>(b), static_cast<int>(a)),
                            __hiloint2double(static_cast<int>(d), static_cast<int>(c)));
    }
    static __device__ __forceinline__ void update_from(double2& v, const double2& pr, double l,
                                                       int c0, int j) {
        v.x = c0 >= j ? fma(-l, pr.x, v.x) : v.x;
        v.y = c0 + 1 >= j ? fma(-l, pr.y, v.y) : v.y;
    }
    struct Rec {
        ulonglong2 a, b;
    };
    static __device__ __forceinline__ void store_rec(ulonglong2* p, unsigned long long t,
                                                     unsigned long long key, int pos) {
        st_relaxed_gpu_v2(p, t | (key >> 32), t | (key & 0xffffffffull));
        st_relaxed_gpu_v2(p + 1, t | static_cast<unsigned>(pos), t);
    }
    static __device__ __forceinline__ Rec load_rec(const ulonglong2* p) {
        return {ld_relaxed_gpu_v2(p), ld_relaxed_gpu_v2(p + 1)};
    }
    static __device__ __forceinline__ bool fresh_rest(const Rec& r, unsigned tag) {
        return static_cast<unsigned>(r.b.x >> 32) == tag;
    }
    static __device__ __forceinline__ unsigned long long rec_key(const Rec& r) {
        return (r.a.x << 32) | (r.a.y & 0xffffffffull);
    }
    static __device__ __forceinline__ int rec_pos(const Rec& r) {
        return static_cast<int>(static_cast<unsigned>(r.b.x));
    }
    static __device__ __forceinline__ unsigned long long cand_key(const Cand& c) {
        return c.key;
    }
    static __device__ __forceinline__ unsigned cand_pos(const Cand& c) { return c.pos; }
};

// Whether a block's rows move in 16-byte pieces: ncols == LW, A and lda aligned (the LU's
// panels, n % 4 == 0 for float, n % 2 == 0 for double).
template <typename T, int LW>
__device__ __forceinline__ bool whole_rows(const T* A, long long lda, int ncols) {
    return ncols == LW && (reinterpret_cast<unsigned long long>(A) & 15) == 0 &&
           (lda & (row_elem<T>::V - 1)) == 0;
}

// Rows pos[q] of A into x[q] (mine[q]: the row exists; zeros else) and their first values into
// xj[q].  Returns `vec`: whole rows in 16-byte pieces (ncols == LW, A and lda aligned: the
// LU's panels, n % 4 == 0), as store_rows must write them back.
template <typename T, int LW, int RPT>
__device__ __forceinline__ bool load_rows(T (&x)[RPT][LW], T (&xj)[RPT], const T* A,
                                          long long lda, int ncols, const int (&pos)[RPT],
                                          const bool (&mine)[RPT])
{
    using R = row_elem<T>;
    using Vec = typename R::Vec;
    const bool vec = whole_rows<T, LW>(A, lda, ncols);
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const T* src = A + static_cast<long long>(mine[q] ? pos[q] : 0) * lda;
        if (vec) {
#pragma unroll
            for (int c = 0; c < LW; c += R::V) {
                const Vec v = mine[q] ? *reinterpret_cast<const Vec*>(src + c) : R::zero();
                R::put(x[q], c, v);
            }
        } else {
#pragma unroll
            for (int c = 0; c < LW; ++c)
                x[q][c] = (mine[q] && c < ncols) ? src[c] : T(0);
        }
    }
#pragma unroll
    for (int q = 0; q < RPT; ++q)
        xj[q] = x[q][0];
    return vec;
}

// x[q] back to row pos[q] of A (the final positions), as load_rows read them.
template <typename T, int LW, int RPT>
__device__ __forceinline__ void store_rows(const T (&x)[RPT][LW], T* A, long long lda,
                                           int ncols, const int (&pos)[RPT],
                                           const bool (&mine)[RPT], bool vec)
{
    using R = row_elem<T>;
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        if (!mine[q])
            continue;
        T* dst = A + static_cast<long long>(pos[q]) * lda;
        if (vec) {
#pragma unroll
            for (int c = 0; c < LW; c += R::V)
                *reinterpret_cast<typename R::Vec*>(dst + c) = R::get(x[q], c);
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
template <typename T, int RPT>
__device__ __forceinline__ int thread_first_max(const T (&xj)[RPT], const int (&pos)[RPT],
                                                const bool (&mine)[RPT], int j,
                                                typename row_elem<T>::Key& key)
{
    T bv = T(-1);
    int bi = 0x7fffffff;
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        const T a = getrf_elem<T>::abs(xj[q]);
        if (mine[q] && pos[q] >= j && beats(a, pos[q], bv, bi)) {   // NaN never wins
            bv = a;
            bi = pos[q];
        }
    }
    key = bi != 0x7fffffff ? row_elem<T>::key(bv) : 0u;
    return bi;
}

// The rank-1 update of the columns > J by pivot row s_prow for the RPT rows of this thread
// with upd[q] (J constant: x[][] stays in registers), then column J+1 into x_next.  Pivot-row
// element outer, rows inner: one shared load per element.
template <int J, typename T, int LW, int RPT>
__device__ __forceinline__ void update_right(T (&x)[RPT][LW], const bool (&upd)[RPT],
                                             const T (&l)[RPT], const T* s_prow,
                                             T (&x_next)[RPT])
{
#pragma unroll
    for (int c = J + 1; c < LW; ++c) {
        const T pc = s_prow[c];
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            if (upd[q])
                x[q][c] = getrf_elem<T>::fma(-l[q], pc, x[q][c]);
    }
    if constexpr (J + 1 < LW) {
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            x_next[q] = x[q][J + 1];
    }
}

// The multiplier of a row whose pivot-column value is xj, for the nonzero pivot pv: by the
// reciprocal rinv = reciprocal(pv) unless |pv| < sfmin (FLT_MIN / DBL_MIN), as LAPACK.
template <typename T>
__device__ __forceinline__ T reciprocal(T pv) {
    using E = getrf_elem<T>;
    return E::abs(pv) >= E::sfmin ? T(1) / pv : T(0);
}
template <typename T>
__device__ __forceinline__ T multiplier(T xj, T pv, T rinv) {
    using E = getrf_elem<T>;
    return E::abs(pv) >= E::sfmin ? xj * rinv : xj / pv;
}

// Column j's pivot chosen (sp: its position, -1 when the column has none; s_prow: its row):
// exchange the positions j and p; this thread's rows below it (pos > j; a row exists iff its
// position is below mp) get upd[q] and their multipliers l[q] from their column-j values xj[q]
// (by the reciprocal unless |pivot| < sfmin, as LAPACK).
template <typename T, int RPT>
__device__ __forceinline__ void pivot_multipliers(const T (&xj)[RPT], int (&pos)[RPT],
                                                  int mp, int j, int sp, const T* s_prow,
                                                  bool (&upd)[RPT], T (&l)[RPT])
{
    const bool valid = sp >= 0;
    const int p = valid ? sp : j;
    const T pv = valid ? s_prow[j] : T(0);
    const bool nonzero = valid && pv != T(0);
    const T rinv = nonzero ? reciprocal(pv) : T(0);
#pragma unroll
    for (int q = 0; q < RPT; ++q) {
        if (pos[q] == p)
            pos[q] = j;
        else if (pos[q] == j)
            pos[q] = p;
        upd[q] = nonzero && pos[q] < mp && pos[q] > j;
        l[q] = upd[q] ? multiplier(xj[q], pv, rinv) : T(0);
    }
}

namespace {

// One row of LW elements from registers to shared memory (16-byte stores).
template <typename T, int LW>
__device__ __forceinline__ void store_row(T* dst, const T (&x)[LW]) {
    using R = row_elem<T>;
#pragma unroll
    for (int c = 0; c < LW; c += R::V)
        *reinterpret_cast<typename R::Vec*>(dst + c) = R::get(x, c);
}

// Column J's register work of a compute warp (J = 0..LW; after the search of column J):
// pivot J-1's multipliers into column J-1, the updated column J (xn) back into x, pivot
// J-1's update of the columns > J, and column J+1 (not yet updated by pivot J) into xn.
template <int J, typename T, int LW, int RPT>
__device__ __forceinline__ void comm_step(T (&x)[RPT][LW], const bool (&upd)[RPT],
                                          const T (&l)[RPT], const T* s_prow, T (&xn)[RPT])
{
    if constexpr (J > 0) {
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            if (upd[q])
                x[q][J - 1] = l[q];
            if constexpr (J < LW)
                x[q][J] = xn[q];
        }
        update_right<J>(x, upd, l, s_prow, xn);
    } else {                                    // no pivot yet: only the next column
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            xn[q] = x[q][1];
    }
}

#define GETRF_COMM_STEP(J) comm_step<(J)>(x, upd, l, s_prow, xn)

// The communication warp's column loop; SPL record slots polled per lane (G <= 32 * SPL).
// EARLY: the block's candidate row (s_wrow[0]) arrives before pivot j-1's update of its
// columns >= j, which this warp applies (pivot j-1's row is still in s_prow).
template <int SPL, typename T, int LW, int NW, bool EARLY>
__device__ __forceinline__ void comm_loop(int kk, int* piv, int* info, int col_base,
                                          ulonglong2* keys, ulonglong2* rows, unsigned epoch,
                                          const typename row_elem<T>::Cand* s_wc,
                                          const T (*s_wrow)[LW], T* s_prow, int* s_p,
                                          int G, int b, int lane)
{
    using R = row_elem<T>;
    using Key = typename R::Key;
    using Vec = typename R::Vec;
    constexpr int NT = GETRF_THREADS + 32;
    constexpr int NL = LW / R::V;               // lanes holding a 16-byte chunk of a row
    bool pvalid = false;                        // pivot j-1 exists (EARLY)
#pragma unroll 1
    for (int j = 0; j < kk; ++j) {
        const int par = j & 1;
        const unsigned tag = epoch + static_cast<unsigned>(j);
        const unsigned long long t = static_cast<unsigned long long>(tag) << 32;

        // The block's candidate from the warps' (lane w holds warp w's), its record.
        named_sync(1, NT);                                                   // C
        const typename R::Cand c0 = lane < NW ? s_wc[lane] : R::cand(0u, 0x7fffffffu);
        const Key k0 = R::cand_key(c0);
        const int i0 = static_cast<int>(R::cand_pos(c0));
        Key bkey;
        const int bi = warp_first_max(k0, i0, bkey);
        const unsigned mw = __ballot_sync(0xffffffffu, lane < NW && bkey != 0u && k0 == bkey &&
                                                            i0 == bi);
        if (lane == 0)
            R::store_rec(keys + R::RW * par * G + R::RW * b, t, bkey, bi);
        // Its row: complete (late), or through pivot j-2 beyond column j (EARLY).
        named_sync(2, NT);                                                   // R
        if (mw && lane < NL) {
            const T* row = s_wrow[EARLY ? 0 : __ffs(mw) - 1];       // EARLY: the block's
            Vec v = reinterpret_cast<const Vec*>(row)[lane];
            if constexpr (EARLY) {
                // Pivot j-1's multiplier and fma on the columns >= j, as the owner applies
                // them (s_prow: pivot j-1's row; column j-1 of the row: its value there).
                const T pv = j > 0 && pvalid ? s_prow[j - 1] : T(0);
                if (pv != T(0)) {
                    const T l = multiplier(row[j - 1], pv, reciprocal(pv));
                    const Vec pr = reinterpret_cast<const Vec*>(s_prow)[lane];
                    R::update_from(v, pr, l, R::V * lane, j);
                }
            }
            // The chunk's four 32-bit pieces, each in a tagged word.
            ulonglong2* dst = rows + (par * G + b) * (2 * NL) + 2 * lane;
            const uint4 w = R::bits(v);
            st_relaxed_gpu_v2(dst, t | w.x, t | w.y);
            st_relaxed_gpu_v2(dst + 1, t | w.z, t | w.w);
        }

        // Poll the G records until all carry the tag; meanwhile fetch the row of the best
        // record seen so far (`spec`) until its words carry the tag too.
        const ulonglong2* slot = keys + R::RW * par * G;
        Key ckey = 0u;                          // this lane's first max of its records
        int ci = 0x7fffffff, cb = 0;
        unsigned pending = 0;
#pragma unroll
        for (int s = 0; s < SPL; ++s)
            if (lane + 32 * s < G)
                pending |= 1u << s;
        int spec = -1, wi = 0x7fffffff;
        bool row_ok = false;
        Vec v = R::zero();
        while (true) {
            const bool polling = __any_sync(0xffffffffu, pending != 0);
            const int fetch = row_ok ? -1 : spec;   // warp-uniform
            if (!polling && fetch < 0)
                break;
            typename R::Rec k[SPL];
            ulonglong2 w0, w1;
#pragma unroll
            for (int s = 0; s < SPL; ++s)
                if (pending & (1u << s))
                    k[s] = R::load_rec(slot + R::RW * lane + R::RW * 32 * s);
            if (fetch >= 0 && lane < NL) {
                const ulonglong2* src = rows + (par * G + fetch) * (2 * NL) + 2 * lane;
                w0 = ld_relaxed_gpu_v2(src);
                w1 = ld_relaxed_gpu_v2(src + 1);
            }
            bool fresh = false;                 // a record arrived in this round
#pragma unroll
            for (int s = 0; s < SPL; ++s)
                if ((pending & (1u << s)) && static_cast<unsigned>(k[s].a.x >> 32) == tag &&
                    static_cast<unsigned>(k[s].a.y >> 32) == tag && R::fresh_rest(k[s], tag)) {
                    pending &= ~(1u << s);
                    fresh = true;
                    const Key kk_ = R::rec_key(k[s]);
                    const int i = R::rec_pos(k[s]);
                    if (kk_ > ckey || (kk_ == ckey && kk_ != 0u && i < ci)) {
                        ckey = kk_;
                        ci = i;
                        cb = lane + 32 * s;
                    }
                }
            if (fetch >= 0) {
                const bool ok = lane >= NL ||
                    (static_cast<unsigned>(w0.x >> 32) == tag &&
                     static_cast<unsigned>(w0.y >> 32) == tag &&
                     static_cast<unsigned>(w1.x >> 32) == tag &&
                     static_cast<unsigned>(w1.y >> 32) == tag);
                if (lane < NL)
                    v = R::from_bits(static_cast<unsigned>(w0.x), static_cast<unsigned>(w0.y),
                                     static_cast<unsigned>(w1.x), static_cast<unsigned>(w1.y));
                row_ok = __all_sync(0xffffffffu, ok);
            }
            if (__any_sync(0xffffffffu, fresh)) {
                // The best record so far; a new one restarts the row fetch.
                Key wkey;
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
        named_sync(4, NT);              // U: the compute warps' last read of s_prow is done
        if (lane < NL)
            reinterpret_cast<Vec*>(s_prow)[lane] = valid ? v : R::zero();
        __syncwarp();
        if (lane == 0) {
            *s_p = valid ? wi : -1;
            if (b == 0) {
                piv[j] = valid ? wi : j;
                if (valid && s_prow[j] == T(0) && *info == 0)
                    *info = col_base + j + 1;
            }
        }
        named_arrive(3, NT);                                                 // P
    }
}

}  // namespace

// getrf_leaf_row's block.  Late (EARLY = 0): 9 warps, the compute warps 0..7 and the
// communication warp 8.  EARLY: 12 warp slots, slot w on SM sub-partition w % 4; slot 0 is
// the communication warp, alone on its sub-partition (slots 4, 8 and 11 stay idle), slots
// 1-3, 5-7, 9, 10 the compute warps 0..7.  (The late leaf is faster in 9 warps.)
// (__host__ __device__: NVRTC 13.5 rejects an unannotated function in JIT mode.)
template <int EARLY>
__host__ __device__ constexpr int row_block_threads() {
    return EARLY ? 12 * 32 : GETRF_THREADS + 32;
}

template <typename T, int LW, int RPT, int EARLY>
__global__ void __launch_bounds__(row_block_threads<EARLY>(), 1)
getrf_leaf_row(int mp, int ncols, T* A, long long lda, int* piv, int* info, int col_base,
               ulonglong2* keys, ulonglong2* rows, unsigned epoch)
{
    using R = row_elem<T>;
    using Key = typename R::Key;
    constexpr int TC = GETRF_THREADS;           // compute threads (rows), warps 0..NW-1
    constexpr int NW = TC / 32;
    constexpr int NT = TC + 32;                 // and the communication warp
    constexpr int SPL = (GETRF_GMAX_ROW + 31) / 32;   // most record slots polled per lane
    static_assert(LW % R::V == 0 && LW / R::V <= 32, "a row is one 16-byte chunk per lane");
    static_assert(LW * sizeof(T) <= GETRF_ROW_BYTES, "a row fits its exchange slot");
    static_assert(LW <= 128, "the column switch has 129 cases");
    static_assert(LW * RPT * sizeof(T) <= 512,
                  "register budget: at most 128 panel floats or 64 doubles per thread");
    static_assert(SPL <= 32 && NW <= 32, "pending-slot bit mask; one warp candidate per lane");
    static_assert(NW == 8, "the slot layouts above");

    __shared__ typename R::Cand s_wc[NW];       // the warps' candidates {key, position}
    __shared__ __align__(16) T s_wrow[NW][LW];  // and their rows
    __shared__ __align__(16) T s_prow[LW];      // the pivot row of the previous column
    __shared__ int s_p;                         // its position, or -1 (no candidate: all NaN)

    const int slot = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, b = blockIdx.x;
    const int kk = min(mp, ncols);

    if (slot == (EARLY ? 0 : NW)) {             // the communication warp
        if (G <= 32)
            comm_loop<1, T, LW, NW, EARLY>(kk, piv, info, col_base, keys, rows, epoch, s_wc,
                                           s_wrow, s_prow, &s_p, G, b, lane);
        else
            comm_loop<SPL, T, LW, NW, EARLY>(kk, piv, info, col_base, keys, rows, epoch, s_wc,
                                             s_wrow, s_prow, &s_p, G, b, lane);
        return;
    }
    if (EARLY && ((slot & 3) == 0 || slot == 11))
        return;                                 // idle
    // The compute thread's index (EARLY: slot - 1 - slot / 4 is its warp); computed from
    // threadIdx.x directly (as slot * 32 + lane, ptxas spills 8 bytes in the EARLY loop).
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
    T x[RPT][LW];
    T xn[RPT];                                  // column j, updated through pivot j-1
    T xc[RPT];                                  // column j-1 (for pivot j-1's multipliers)
    load_rows<T, LW, RPT>(x, xn, A, lda, ncols, pos, mine);

#pragma unroll 1
    for (int j = 0; j <= kk; ++j) {
        bool upd[RPT];
        T l[RPT];
#pragma unroll
        for (int q = 0; q < RPT; ++q) {
            upd[q] = false;
            l[q] = T(0);
        }
        if (j > 0) {
            // Pivot j-1: positions, multipliers, column j.
            named_sync(3, NT);                                               // P
            pivot_multipliers<T, RPT>(xc, pos, mp, j - 1, s_p, s_prow, upd, l);
            if (j < LW) {
                const T pc = s_prow[j];
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    if (upd[q])
                        xn[q] = getrf_elem<T>::fma(-l[q], pc, xn[q]);
            }
        }
        int cand = 0x7fffffff;
#pragma unroll
        for (int q = 0; q < RPT; ++q)
            mine[q] = pos[q] < mp;
        if (j < kk) {
            // The warp's candidate for column j.
            Key tkey, wkey;
            const int ti = thread_first_max<T, RPT>(xn, pos, mine, j, tkey);
            cand = warp_first_max(tkey, ti, wkey);
            if (lane == 0)
                s_wc[warp] = R::cand(wkey, static_cast<unsigned>(cand));
            if constexpr (EARLY) {
                // The block's candidate row as it is, by its owner alone (eight owners'
                // 16-byte stores at once queue up behind each other): pivot j-1 has reached
                // column j only (xn); the communication warp applies it to the columns >= j.
                named_sync(1, NT);                                           // C
                const typename R::Cand c = lane < NW ? s_wc[lane] : R::cand(0u, 0x7fffffffu);
                Key bkey;
                const int best = warp_first_max(R::cand_key(c), static_cast<int>(R::cand_pos(c)),
                                                bkey);
#pragma unroll
                for (int q = 0; q < RPT; ++q)
                    if (pos[q] == best)     // best < mp, or INT_MAX: no candidate
                        store_row<T, LW>(s_wrow[0], x[q]);
                named_arrive(2, NT);                                         // R
            } else {
                named_arrive(1, NT);                                         // C
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
                        store_row<T, LW>(s_wrow[warp], x[q]);
                named_arrive(2, NT);                                         // R
            }
            named_arrive(4, NT);                        // U: done reading s_prow
        }
    }

    // (mine as the last column left it; load_rows' test made again, not kept live in the loop)
    store_rows<T, LW, RPT>(x, A, lda, ncols, pos, mine, whole_rows<T, LW>(A, lda, ncols));
}
