// getrf_batched_blocked.cu -- batched LU with partial pivoting of stacks of medium matrices
// (orders 129 .. 1024) in one launch, one thread block per matrix: for each matrix A_b
// (b < batch), LAPACK xgetrf's result by a blocked right-looking LU within the block, read from
// src and written to dst (the same stack or another).  One source for T = float and double,
// all arithmetic in T.
//
// Computes, per m x n matrix (1 <= m, n <= 1024), for each panel of NB columns j0 ..
// j0+nb-1 (nb = min(NB, K - j0), K = min(m, n)): (1) the panel's unblocked LU, for
// k = j0 .. j0+nb-1: the pivot p = the FIRST row of max |A(i, k)| over rows i >= k (LAPACK
// i?amax: a scan in row order with a strict >, so a NaN below row k never wins, and a NaN in
// row k itself -- where the scan starts -- keeps p = k); interchange rows k and p; the
// multipliers A(i, k) *= r, i > k, r = 1 / A(k, k) rounded once (an exactly zero pivot
// scales nothing and sets info); the rank-1 update of the panel's columns
// A(i, j) = fma(-A(i, k), A(k, j), A(i, j)); (2) the panel's interchanges applied to the
// columns left and right of it; (3) U12 = L11^-1 A12 (unit lower L11) by forward
// substitution; (4) A22 = A22 - L21 U12.  Every element gets its updates by fma in increasing
// k, one rounding each, as in the unblocked algorithm: the factors are those of
// gpulinalg/lu/batched.py's `reference` bit for bit (but for float subnormals, which the
// build's -ftz=true flushes).  info_b = the 1-based column of the first exactly zero pivot,
// else 0.  Scaling, LAPACK's rule against ours: xgetf2 divides by a pivot below sfmin (a
// subnormal) instead of multiplying by its reciprocal, which may overflow; here a double
// pivot below DBL_MIN gets the reciprocal of pivot * 2^64 and its products are multiplied by
// 2^64, and a float pivot always its reciprocal (as kernels/getrf_batched.cu).
// Storage: unlike LAPACK (column-major), src and dst are ROW-MAJOR and packed: element
// (b, i, j) at [(b*m + i)*n + j] (64-bit offsets), C-contiguous (batch, m, n) arrays; src ==
// dst factors in place (else the block first copies its matrix to dst; partly overlapping
// stacks are not allowed).  Pivots are 0-BASED, as scipy.linalg.lu_factor's: piv[b*K + k] =
// p (row k was interchanged with row p); info[b] as LAPACK's.  flags: two ints of
// host-mapped memory: a block stores the call's `gen` to flags[0] when its matrix has
// info != 0 and to flags[1] when its input holds an inf or NaN (plain stores, at most one per
// flag and block, so nothing needs resetting and no atomics cross the bus).
//
// Bound: per matrix ~(2/3) n^3 flops, as FMAs from registers in the trailing update.  With
// >= 132 matrices of n = 256 .. 512 every SM is busy and the bound is the SM's FMA rate
// (H100/H200: 128 FP32 or 64 FP64 FMAs per clock per SM) times the micro-tile's issue
// efficiency (~75-85%: 16 FMAs per two 16-byte shared loads per k, plus the tile's global
// loads and stores and the loop), and the traffic of A22: right-looking with a panel of NB
// columns reads and writes each trailing element once per panel, NB/(2 sizeof(T)) FMAs per
// byte (float 4, double 1), from L2 while the resident matrices fit it, else from HBM; double
// is bound by that traffic.  The panel itself is a chain of one block barrier, two warp
// reductions and one division per column (a few hundred cycles), hidden only by the other
// resident block (registers allow two per SM at 256 threads; m > 512 takes one block of 512).
// At that bound (H200, ~1.75 GHz, 4.8 TB/s): 1000 x 256^2 float ~0.4 ms, double ~1.1 ms
// (traffic); 200 x 512^2 float ~0.6 ms, double ~2 ms; 50 x 1024^2 (50 of 132 SMs busy, one
// block each) float ~2.7 ms, double ~5 ms.  The kernel runs 2-5x above these (its profiles:
// docs/journal/batched.md): the warps wait at the barrier after each chunk's interchanges and
// forward substitution, which only the chunk's columns' threads do, and on the panel's chain.
//
// getrf_batched_blocked<T, NB, THREADS, RPT>(batch, m, n, src, dst, piv, info, flags, gen):
//   Threads.  Block b factors matrix b with THREADS threads (WARPS warps); m <= THREADS*RPT.
//   Panel: staged in shared memory, column-major P(i, c) = P[c*LD + i], local row i = global
//   row j0 + i, by cp.async, a warp taking GR rows x GC columns (32 bytes of each row: whole
//   sectors; LD = m rounded up to 4 mod 128/sizeof(T), which makes the staging and write-back
//   conflict-free and the columns 16-byte aligned); then factored in registers: thread t
//   holds the panel rows t + THREADS*s (s < RPT), all NB columns.  Interchanges within the
//   panel are virtual: a row stays with its thread and the thread keeps its position pos[s]
//   (the row order after the interchanges so far).  Column k (k unrolled): every thread scales
//   its rows at positions > k and updates their later columns with the pivot row (16-byte
//   broadcast loads from shared memory), then forms the search key of column k+1 (|value|'s
//   bits + 1; the largest key for a NaN at position k+1, 0 for a NaN below it and for
//   non-candidates, the tag position << 10 | row breaking ties to the smallest position);
//   each warp reduces its 32 by redux.sync, lane 0 stores the warp's winner and the winning
//   lane its row's later columns to the warp's slot (both double-buffered by k's parity);
//   ONE __syncthreads per column; then every warp reduces the WARPS winners again and knows
//   the pivot row, its position, and reads the row from the winning warp's slot.  Thread 0
//   stores the pivots and info.  The factored rows go back to the staged panel.
//   After the panel: the moves it made (position r < nb <- row invp[r]; row i < nb ->
//   position disp[i] >= nb, where i was displaced) go to shared tables, the panel is put in
//   position order through a scratch buffer and written back to dst.
//   Columns outside the panel: thread t takes column c = t (+ THREADS ...) of the left part
//   and c = c0 + t of each chunk of THREADS columns of the right part, and applies the
//   panel's interchanges to it alone (the rows to positions < nb read into the thread's own
//   slots of the U12 buffer, then the displaced rows moved, then positions < nb written: no
//   other thread touches the column); each batch of IB rows is loaded before any is stored,
//   so its loads are in flight together.  On the right the slots hold A12(:, c), which the
//   thread solves in registers (L11 x = A12(:, c), L11 from the panel) and writes back as
//   U12(:, c), to the slots and to dst.  __syncthreads.
//   Trailing update of the chunk: THREADS/16 x 16 threads, a thread a micro-tile of TM
//   consecutive rows x TN columns 16 apart (consecutive lanes on consecutive columns:
//   coalesced scalar loads and stores of A22 in dst, any n), BM x BN = (THREADS/16)*TM x
//   16*TN per block tile; per k: TM values of L21 (16-byte loads of the panel's column),
//   TN of U12 (16-byte loads: the buffer stores each thread's columns side by side), TM*TN
//   FMAs on the tile held in registers; the next tile's loads are issued before the current
//   tile's FMAs.  __syncthreads; next chunk.
//   The input is checked for infs and NaNs where the first panel step reads it: every
//   element is read there once before it changes.
//
// Knobs: NB (panel width; float 32, double 16: the panel of m = 1024 rows takes 128 KB of
// shared memory), THREADS and RPT (template parameters: the instances are
// gpulinalg/lu/batched_blocked.py's CANDIDATES, the tuning table's batched_blocked_shapes
// picks per order class); IB = 32 bytes of rows per interchange batch (registers: more spill);
// per element type (gbb_tile) the micro-tile TM x TN = 4 x 4 (every element of A22 gets NB
// FMAs per load and store whatever the tile: a larger one saves shared loads only, and its
// registers are not there) and KU, the k-steps unrolled (float 8, double 1); GBB_REGS = 128
// registers per thread (__launch_bounds__: two blocks of 256 threads per SM, one of 512),
// GBB_MAXM = 1024.  Dynamic shared memory (bytes): sizeof(T) * (LD*NB panel + NB*THREADS
// U12 chunk, which also holds the 2*NB*NB scratch of the panel's reordering and the
// 2*WARPS*NB pivot-row slots) + 16*WARPS search keys + 8*WARPS search tags + 8*NB
// interchange tables: float m = 129, 256 threads: 49 KB, 512: 97 KB, 1024 with 512 threads:
// 193 KB; double the same (sm_90, sm_100; sm_80 up to m = 512).

#include "async_copy.cuh"
#include "getrf_pivot.cuh"

#define GBB_MAXM 1024           // the largest m (THREADS * RPT at most): positions and rows
                                // fit the search tag's 10-bit fields
#define GBB_REGS 128            // registers per thread the compiler may use: __launch_bounds__'
                                // blocks per SM GBB_MIN_BLOCKS = 65536 / (GBB_REGS * THREADS)
#define GBB_MIN_BLOCKS(THREADS) (65536 / (GBB_REGS * (THREADS)))
#define GBB_TC 16               // thread columns of the trailing update's block tile

// The trailing update's micro-tile per element type (the search key, the fused multiply-add,
// the tiny-pivot scaling and the finiteness test: getrf_pivot.cuh's lu_elem).
template <typename T>
struct gbb_tile;

template <>
struct gbb_tile<float> {
    static constexpr int TM = 4;    // micro-tile rows (consecutive) per thread
    static constexpr int TN = 4;    // micro-tile columns (16 apart) per thread
    static constexpr int KU = 8;    // k-steps of the micro-tile unrolled (registers: the
                                    // compiler hoists the shared loads of the unrolled steps)
};

template <>
struct gbb_tile<double> {
    static constexpr int TM = 4;
    static constexpr int TN = 4;
    static constexpr int KU = 1;    // none: a warp's DFMA holds the FP64 pipe two cycles,
                                    // which hides the loop's own instructions
};

// One element global -> shared by cp.async (a double as its two halves).
__device__ __forceinline__ void gbb_copy_async(float* d, const float* s)
{
    cp_async4(d, s, true);
}
__device__ __forceinline__ void gbb_copy_async(double* d, const double* s)
{
    float* d4 = reinterpret_cast<float*>(d);
    const float* s4 = reinterpret_cast<const float*>(s);
    cp_async4(d4, s4, true);
    cp_async4(d4 + 1, s4 + 1, true);
}

template <typename T, int NB, int THREADS, int RPT>
__global__ void __launch_bounds__(THREADS, GBB_MIN_BLOCKS(THREADS))
getrf_batched_blocked(int batch, int m, int n, const T* src, T* dst, int* piv, int* info,
                      int* flags, int gen)
{
    typedef lu_elem<T> E;
    typedef gbb_tile<T> Tile;
    typedef typename E::key_t key_t;
    constexpr int WARPS = THREADS / 32;
    constexpr int V = 16 / static_cast<int>(sizeof(T));     // elements per 16 bytes
    constexpr int GC = 32 / static_cast<int>(sizeof(T));    // staging: columns per warp row
    constexpr int GR = 32 / GC;                             // staging: rows per warp
    constexpr int TM = Tile::TM, TN = Tile::TN;
    constexpr int TC = GBB_TC, TR = THREADS / TC;           // trailing update: thread grid
    constexpr int BM = TR * TM, BN = TC * TN;               // trailing update: block tile
    constexpr int MODLD = 128 / static_cast<int>(sizeof(T));
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    static_assert(THREADS % 32 == 0 && WARPS <= 32, "whole warps");
    static_assert(THREADS * RPT <= GBB_MAXM, "positions and rows in 10-bit fields");
    static_assert(NB % GC == 0 && NB % V == 0, "the panel: whole 32-byte row segments");
    static_assert(THREADS % BN == 0 && TM % V == 0 && TN % V == 0, "whole tiles per chunk");
    static_assert(THREADS >= 2 * NB, "the U12 buffer holds the panel's reordering scratch");
    static_assert(GBB_MAXM <= 1024, "positions and rows in 10-bit fields");

    const int b = static_cast<int>(blockIdx.x);
    if (b >= batch)
        return;
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    const int K = min(m, n);
    const int mn = m * n;                                   // <= 2^20
    const int LD = m + ((4 - m) % MODLD + MODLD) % MODLD;   // panel pitch: 4 mod MODLD, >= m

    extern __shared__ float4 gbb_smem[];
    T* const P = reinterpret_cast<T*>(gbb_smem);            // panel: LD x NB, column-major
    T* const U = P + LD * NB;                               // U12 chunk: NB x THREADS
    T* const scratch = U;                                   // the panel's reordering
    T* const rows = U;                                      // the panel's 2 x WARPS pivot rows
    key_t* const skey = reinterpret_cast<key_t*>(U + NB * THREADS);   // 2 x WARPS winners
    unsigned* const stag = reinterpret_cast<unsigned*>(
        reinterpret_cast<unsigned long long*>(skey) + 2 * WARPS);
    int* const invp = reinterpret_cast<int*>(stag + 2 * WARPS);       // NB: row at position r
    int* const disp = invp + NB;                            // NB: position of row i, or -1
    T* const A = dst + static_cast<long long>(b) * mn;
    int* const bpiv = piv + static_cast<long long>(b) * K;

    // 0. src -> dst (16-byte pieces where both are aligned).
    if (src != dst) {
        const T* const S = src + static_cast<long long>(b) * mn;
        int done = 0;
        if (((reinterpret_cast<unsigned long long>(S) | reinterpret_cast<unsigned long long>(A))
             & 15ull) == 0) {
            const int vecs = mn / V;
            const uint4* s4 = reinterpret_cast<const uint4*>(S);
            uint4* d4 = reinterpret_cast<uint4*>(A);
#pragma unroll 4
            for (int e = tid; e < vecs; e += THREADS)
                d4[e] = s4[e];
            done = vecs * V;
        }
        for (int e = done + tid; e < mn; e += THREADS)
            A[e] = S[e];
        __syncthreads();
    }

    bool nonfinite = false;                                 // this thread's reads of the input
    int info0 = 0;                                          // thread 0: the first zero pivot

    for (int j0 = 0; j0 < K; j0 += NB) {
        const int nb = min(NB, K - j0);
        const int R = m - j0;                               // panel rows
        const bool first = j0 == 0;                         // reads see the input

        // 1. The panel to shared memory, column-major (warp: GR rows x GC columns).
        {
            const int lr = lane / GC, lc = lane % GC;
            constexpr int CB = NB / GC;
            const int tiles = (R + GR - 1) / GR * CB;
            const T* const g = A + static_cast<long long>(j0) * n + j0;
            for (int tt = warp; tt < tiles; tt += WARPS) {
                const int i = tt / CB * GR + lr, c = tt % CB * GC + lc;
                if (i < R && c < nb)
                    gbb_copy_async(P + c * LD + i, g + i * n + c);
            }
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
        }

        // 2. The panel's LU, its rows in registers: thread t holds the panel rows
        // t + THREADS*s (s < RPT), all NB columns (x[s][c]; columns >= nb and rows >= R are
        // zeros, never stored).  Each warp's search winner publishes its row (columns from
        // the searched one on) to the warp's slot of `rows` (double-buffered by the step's
        // parity), so that after the step's one barrier every thread reads the pivot row from
        // the winning warp's slot.
        T x[RPT][NB];
        int pos[RPT];
        // The warp's winner of column kk among this thread's candidates: its key and tag
        // reduced over the warp; the winning lane writes its row's columns kk.. to slot `par`.
        auto search = [&](const int kk, const int par) {
            key_t bk = 0;
            unsigned bt = 0xffffffffu;
#pragma unroll
            for (int s = 0; s < RPT; ++s) {
                const int i = tid + THREADS * s;
                if (i < R && pos[s] >= kk) {
                    const key_t key = E::key(x[s][kk], true, pos[s] == kk);
                    const unsigned tag = (static_cast<unsigned>(pos[s]) << 10) | i;
                    if (key > bk || (key != 0 && key == bk && tag < bt)) {
                        bk = key;
                        bt = tag;
                    }
                }
            }
            key_t wk;
            unsigned wt;
            lu_first_max<32>(bk, bt, wk, wt);
            if (lane == 0) {
                skey[par * WARPS + warp] = wk;
                stag[par * WARPS + warp] = wt;
            }
            T* const slot = rows + (par * WARPS + warp) * NB;
#pragma unroll
            for (int s = 0; s < RPT; ++s)
                if (wk != 0 && static_cast<int>(wt & 1023u) == tid + THREADS * s) {
#pragma unroll
                    for (int h = kk / V * V; h < NB; h += V)
                        lu_st16(slot + h, x[s], h);
                }
        };
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = tid + THREADS * s;
            pos[s] = i;
#pragma unroll
            for (int c = 0; c < NB; ++c) {
                x[s][c] = i < R && c < nb ? P[c * LD + i] : T(0);
                if (first)
                    nonfinite |= !E::finite(x[s][c]);
            }
        }
        search(0, 0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < NB; ++k) {
            if (k >= nb)
                break;                                      // uniform in the block
            const int par = k & 1;
            key_t wkey;
            unsigned wtag;
            lu_first_max<32>(lane < WARPS ? skey[par * WARPS + lane] : key_t(0),
                             lane < WARPS ? stag[par * WARPS + lane] : 0xffffffffu, wkey, wtag);
            const int pp = static_cast<int>(wtag & 1023u);  // the pivot's row
            const int q = static_cast<int>(wtag >> 10);     // its position
            const bool zero = wkey == key_t(1);
            const T* const u = rows + (par * WARPS + pp % THREADS / 32) * NB;  // the pivot row
            const T pv = u[k];
            // One division per column: 1 / pivot, for a tiny double pivot of the pivot
            // scaled by 2^64 (the reciprocal stays finite), the products scaled back.
            const bool tiny = E::tiny(pv);
            const T rinv = T(1) / (tiny ? pv * E::up : pv);
            const T back = tiny ? E::up : T(1);
            if (tid == 0) {
                bpiv[j0 + k] = j0 + q;
                if (zero && info0 == 0)
                    info0 = j0 + k + 1;
            }
            bool act[RPT];
            T l[RPT];
#pragma unroll
            for (int s = 0; s < RPT; ++s) {
                const int i = tid + THREADS * s;
                pos[s] = i == pp ? k : (pos[s] == k ? q : pos[s]);
                act[s] = i < R && pos[s] > k;
                const T v = x[s][k];
                l[s] = zero ? v : (v * rinv) * back;
                if (act[s])
                    x[s][k] = l[s];
            }
            // The rank-1 update of the later columns (the pivot row by 16-byte broadcasts).
#pragma unroll
            for (int h = (k + 1) / V * V; h < NB; h += V) {
                T uv[V];
                lu_ld16(uv, 0, u + h);
#pragma unroll
                for (int e = 0; e < V; ++e)
                    if (h + e > k) {
#pragma unroll
                        for (int s = 0; s < RPT; ++s)
                            if (act[s])
                                x[s][h + e] = E::fma(-l[s], uv[e], x[s][h + e]);
                    }
            }
            if (k + 1 < nb)
                search(k + 1, par ^ 1);
            __syncthreads();
        }
        // The factored panel back to shared memory (physical rows; step 3 orders them).
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = tid + THREADS * s;
            if (i < R) {
#pragma unroll
                for (int c = 0; c < NB; ++c)
                    if (c < nb)
                        P[c * LD + i] = x[s][c];
            }
        }
        __syncthreads();
        // 3. The panel's moves: position r < nb holds row invp[r]; row i < nb went to
        // position disp[i] >= nb (or -1).  Every other row stays.
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = tid + THREADS * s;
            if (i < R) {
                if (pos[s] < nb)
                    invp[pos[s]] = i;
                if (i < nb)
                    disp[i] = pos[s] >= nb ? pos[s] : -1;
            }
        }
        __syncthreads();
        // The panel in position order, through the scratch: slot r < NB the row moved to
        // position r, slot NB + i the displaced row i; (from, to) of a slot, from < 0: none.
        auto move = [&](int slot, int& from, int& to) {
            from = to = -1;
            if (slot < NB) {
                if (slot < nb && invp[slot] != slot) {
                    from = invp[slot];
                    to = slot;
                }
            } else if (slot - NB < nb && disp[slot - NB] >= 0) {
                from = slot - NB;
                to = disp[slot - NB];
            }
        };
        for (int e = tid; e < 2 * NB * NB; e += THREADS) {
            int from, to;
            move(e / NB, from, to);
            if (e % NB < nb && from >= 0)
                scratch[e] = P[e % NB * LD + from];
        }
        __syncthreads();
        for (int e = tid; e < 2 * NB * NB; e += THREADS) {
            int from, to;
            move(e / NB, from, to);
            if (e % NB < nb && from >= 0)
                P[e % NB * LD + to] = scratch[e];
        }
        __syncthreads();
        // The panel back to dst (the staging's pattern).
        {
            const int lr = lane / GC, lc = lane % GC;
            constexpr int CB = NB / GC;
            const int tiles = (R + GR - 1) / GR * CB;
            T* const g = A + static_cast<long long>(j0) * n + j0;
            for (int tt = warp; tt < tiles; tt += WARPS) {
                const int i = tt / CB * GR + lr, c = tt % CB * GC + lc;
                if (i < R && c < nb)
                    g[i * n + c] = P[c * LD + i];
            }
        }

        // 4. The columns outside the panel get its interchanges, a column per thread, through
        // the thread's own slots of the U12 buffer (the trailing update's column order; no
        // other thread touches the column): the rows going to positions r < nb to slots r,
        // then the panel's displaced rows i < nb moved to their positions >= nb; the caller
        // writes the slots back.  Each batch of IB rows is loaded before any is stored (the
        // compiler cannot move a load above a store it may alias), so its loads are in
        // flight together.  Left of the panel, columns tid, tid + THREADS, ...
        T* const Aj = A + static_cast<long long>(j0) * n;  // row j0
        T* const ub = U + tid / BN * BN + tid % BN / TC / V * (TC * V) + tid % TC * V
                      + tid % BN / TC % V;                  // this thread's column of U12
        constexpr int IB = 32 / sizeof(T) < NB ? 32 / sizeof(T) : NB;  // rows loaded at once
        auto interchange = [&](T* const col, const bool check) {
#pragma unroll 1
            for (int r0 = 0; r0 < nb; r0 += IB) {
                T v[IB];
#pragma unroll
                for (int r = 0; r < IB; ++r)
                    v[r] = r0 + r < nb ? col[invp[r0 + r] * n] : T(0);
#pragma unroll
                for (int r = 0; r < IB; ++r) {
                    if (check)
                        nonfinite |= !E::finite(v[r]);
                    ub[(r0 + r) * THREADS] = v[r];
                }
            }
#pragma unroll 1
            for (int i0 = 0; i0 < nb; i0 += IB) {
                T v[IB];
#pragma unroll
                for (int i = 0; i < IB; ++i)
                    v[i] = i0 + i < nb ? col[(i0 + i) * n] : T(0);
#pragma unroll
                for (int i = 0; i < IB; ++i) {
                    if (check)
                        nonfinite |= !E::finite(v[i]);
                    if (i0 + i < nb && disp[i0 + i] >= 0)
                        col[disp[i0 + i] * n] = v[i];
                }
            }
        };
#pragma unroll 1
        for (int c = tid; c < j0; c += THREADS) {
            interchange(Aj + c, false);
#pragma unroll
            for (int r = 0; r < NB; ++r)
                if (r < nb && invp[r] != r)
                    Aj[r * n + c] = ub[r * THREADS];
        }

        // 5. The right part in chunks of THREADS columns, column c0 + tid to this thread:
        // interchanges as on the left, U12 = L11^-1 A12 in registers, the trailing update.
#pragma unroll 1
        for (int c0 = j0 + nb; c0 < n; c0 += THREADS) {
            const int wc = min(THREADS, n - c0);
            if (tid < wc) {
                const int c = c0 + tid;
                interchange(Aj + c, first);
                // Forward substitution (x[r], r >= nb, is never stored: no masks needed).
                T x[NB];
#pragma unroll
                for (int r = 0; r < NB; ++r)
                    x[r] = ub[r * THREADS];
#pragma unroll
                for (int k = 0; k < NB - 1; ++k) {
#pragma unroll
                    for (int i0 = (k + 1) / V * V; i0 < NB; i0 += V) {
                        T lk[V];
                        lu_ld16(lk, 0, P + k * LD + i0);
#pragma unroll
                        for (int h = 0; h < V; ++h)
                            if (i0 + h > k)
                                x[i0 + h] = E::fma(-lk[h], x[k], x[i0 + h]);
                    }
                }
#pragma unroll
                for (int r = 0; r < NB; ++r)
                    if (r < nb) {
                        ub[r * THREADS] = x[r];
                        Aj[r * n + c] = x[r];
                    }
            }
            __syncthreads();

            // A22 -= L21 U12 over this chunk (rows j0 + NB .., here nb == NB).
            const int M2 = R - nb;
            if (M2 > 0) {
                const int tr = tid / TC, tc = tid % TC;
                const int mine = M2 - tr * TM;              // rows from this thread's first
                const int rtiles = mine > 0 ? (mine + BM - 1) / BM : 0;
                const int ctiles = (wc + BN - 1) / BN;
                const int tiles = rtiles * ctiles;
                T* const C = A + static_cast<long long>(j0 + NB) * n + c0;
                const T* const L = P + NB + tr * TM;
                // A tile's loads, unmasked: rows and columns past the edge read the last
                // row or column (elements of the input too), their results are not stored.
                auto load = [&](int t, T (&v)[TM][TN]) {
                    const int r = t / ctiles * BM + tr * TM, cc = t % ctiles * BN + tc;
#pragma unroll
                    for (int s = 0; s < TM; ++s) {
                        const T* const row = C + min(r + s, M2 - 1) * n;
#pragma unroll
                        for (int j = 0; j < TN; ++j) {
                            v[s][j] = row[min(cc + TC * j, wc - 1)];
                            if (first)
                                nonfinite |= !E::finite(v[s][j]);
                        }
                    }
                };
                // The tiles; cur and nxt are defined before every use: a use the compiler
                // cannot prove defined keeps their registers through the whole kernel.
                if (tiles > 0) {
                    T cur[TM][TN], nxt[TM][TN] = {};
                    load(0, cur);
#pragma unroll 1
                    for (int t = 0; t < tiles; ++t) {
                        if (t + 1 < tiles)
                            load(t + 1, nxt);
                        const int r = t / ctiles * BM, cu = t % ctiles * BN;
                        // Rows of L21 past M2 (up to TM - 1 of the last tile) read the panel's
                        // next column or the U12 buffer: their results are not stored.
#pragma unroll (Tile::KU)
                        for (int k = 0; k < NB; ++k) {
                            T a[TM], u[TN];
#pragma unroll
                            for (int s = 0; s < TM; s += V)
                                lu_ld16(a, s, L + k * LD + r + s);
#pragma unroll
                            for (int j = 0; j < TN; j += V)
                                lu_ld16(u, j, U + k * THREADS + cu + j / V * (TC * V) + tc * V);
#pragma unroll
                            for (int s = 0; s < TM; ++s)
#pragma unroll
                                for (int j = 0; j < TN; ++j)
                                    cur[s][j] = E::fma(-a[s], u[j], cur[s][j]);
                        }
                        const int rr = r + tr * TM, cc = cu + tc;
#pragma unroll
                        for (int s = 0; s < TM; ++s)
#pragma unroll
                            for (int j = 0; j < TN; ++j)
                                if (rr + s < M2 && cc + TC * j < wc)
                                    C[(rr + s) * n + cc + TC * j] = cur[s][j];
#pragma unroll
                        for (int s = 0; s < TM; ++s)
#pragma unroll
                            for (int j = 0; j < TN; ++j)
                                cur[s][j] = nxt[s][j];
                    }
                }
            }
            __syncthreads();        // also frees the panel buffer: every step but the last
        }                           // has a right part
    }

    // The block's summary: info, and for the host (flags in host-mapped memory, plain stores
    // of the call's gen: none needs resetting) a singular matrix, an inf or NaN in the input.
    const int bad = __syncthreads_or(nonfinite);
    if (tid == 0) {
        info[b] = info0;
        if (info0 != 0)
            flags[0] = gen;
        if (bad)
            flags[1] = gen;
    }
}
