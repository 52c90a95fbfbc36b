// getrf_panel_cols.cu -- getrf_panel_cols<CW, RPT, T, GW>: the GPU panel's column-slab leaf,
// LU with partial pivoting of a panel of up to 256 columns and T*RPT rows (LAPACK sgetf2's
// operations) in ONE cooperative launch, the panel distributed by columns, one cross-block
// handoff per GW columns instead of one barrier per column.  The plan of an LU on several
// GPUs takes it for panels of at most `cols_max_rows_multi` rows; one GPU never takes it.
//
// Computes, for a block A of mp rows and w <= 256 columns, kk = min(mp, w) steps of
// right-looking unblocked LU, as getrf_leaf (getrf_leaf_tile.cu): first max |A(i, j)| over
// rows i >= j (ties to the smallest row, as isamax), swap, multipliers by 1 / A(j, j) (by
// division when |A(j, j)| < FLT_MIN, as LAPACK), rank-1 update by fmaf; *info = col_base +
// j + 1 at the first exactly zero pivot.  Per element the same fmafs in the same order as
// the unblocked leaf, so the factors are bit-identical to getrf_leaf_row<128>'s on panels of
// up to 128 columns (tests check it).  Unlike LAPACK, pivots are 0-based and relative to the
// block's first row, and A is stored row-wise: A(i, j) = A[i*lda + j] (lda 64-bit).  A
// column whose candidates are all NaN gets piv[j] = j and is left alone.
//
// Knobs: (CW, RPT, T) template parameters (COLS_SHAPES in gpulinalg/lu/panel_gpu.py: the
// widest whose T*RPT rows hold the panel); GW = max(1, CW / cols_groups) (tuning field, 2
// groups per slab); the plan gives it panels of at most cols_max_rows_multi rows (default
// 4096) on several GPUs.
//
// Bound: latency-bound, like the other leaves, but with one cross-block handoff per GW
// columns.  Per slab on the critical path with whole-slab groups (GW = CW; block s+1; H100,
// 2048 x 128, CW = 16): entries ~2 us, swaps ~0.5, U12 and the copies' wait ~1.8, update
// ~4.9 (mp*CW*CW FMAs on one SM), factor ~17.6 (~1.1 us a column: 16 warps issue its
// reductions and updates), publish (A) ~0.5: ~28 us per 16 columns, ~0.24 ms per 2048 x 128
// panel.
//
// Threads: (CW, RPT, T) = (16, 4, 512), (8, 8, 512), (4, 16, 512) (mp <= 2048 / 4096 / 8192
// rows).  Block b (of NB = ceil(w / CW), T threads, co-resident: cooperative launch) owns
// columns [b*CW, b*CW + CW) of ALL mp rows and keeps them in registers x[RPT][CW] from the
// first load to the final store; thread t holds the rows at positions i = q*T + t (q < RPT).
// Swaps are real (a row moves to the thread of its new position), so each column's pivot
// search stays inside one block.
//   The kk pivot columns form ns = ceil(kk / CW) slabs; slab s = block s's columns, handed
// over in groups of GW columns (unit u = s*NG + g, NG = CW / GW).  Every block walks the
// groups in order:
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
//     pivot order, skipping the columns without a pivot).
//   So block s+1 applies slab s's first groups while block s still factors the last one, and
//   waits at the slab's end for one group's swaps, U12 and update (mp*CW*GW FMAs), not the
//   whole slab's.  At the end every block stores its columns (final positions) to A.  A is
//   read only at the start and written only at the end, by the block owning the columns;
//   the other blocks read a group's multipliers, pivots and mask after its flag, through L2
//   (ld.cg, bulk copies: never a stale L1 line).  The flag only grows (at most 2*kk tags from
//   tag0 + 1 per launch, from the host, which resets it before the tags would wrap).
//   Registers: RPT*CW = 64 floats of panel per thread (__launch_bounds__(T, 1)); shared
//   memory: the two position -> entry tables (2 * T*RPT shorts), small slots, and s_L (CW *
//   T*RPT floats = 128 KiB, dynamic; a group uses GW * T*RPT of them).

#include "getrf_common.cuh"

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
    cols_store<CW, RPT, T>(x, ls, ldl, lo, hi, k0, k1);
    __syncthreads();   // every thread's stores happen before thread 0's release
    if (t == 0) {
        masks[s] = mask;
        st_release_gpu(flag, tag + 1u);
    }
    cols_store<CW, RPT, T>(x, ls, ldl, hi, mp, k0, k1);
    __syncthreads();
    if (t == 0)
        st_release_gpu(flag, tag + 2u);
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
                __syncthreads();
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
                switch (jl) {
                    GETRF_CASES16(0, CW, COLS_STEP)
                }
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
            if (t == 0) {                           // (A): pivots, L11, mask
                while (static_cast<int>(ld_acquire_gpu(flag) - (tag + 1u)) < 0) {
                }
            }
            __syncthreads();
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
            __syncthreads();
#pragma unroll
            for (int q = 0; q < RPT; ++q) {
                const int i = q * T + t;
                if (i >= ju && i < ju + cu)
                    row_in<RPT, CW>(x, q, s_u[i - ju]);
            }
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
