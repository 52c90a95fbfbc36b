// getrf_batched.cu -- batched LU with partial pivoting of many small matrices in one launch:
// for each matrix A_b (b < batch) of a stack, LAPACK xgetrf's result computed by xgetf2's
// unblocked algorithm, read from src and written to dst (the same stack or another), every
// matrix held in registers from its load to its store
// (pivot search, interchange, scaling and rank-1 update fused; nothing goes back to global
// memory before the matrix is done).  One source for T = float and double, all in T.
//
// Computes, per m x n matrix (m, n <= NMAX), for k = 0 .. min(m, n)-1: the pivot p = the
// FIRST row of max |A(i, k)| over rows i >= k (LAPACK i?amax: a scan in row order with a
// strict >, so a NaN below row k never wins, and a NaN in row k itself -- where the scan
// starts -- keeps p = k); interchange rows k and p; the multipliers A(i, k) *= r, i > k,
// r = 1 / A(k, k) rounded once (an exactly zero pivot scales nothing and sets info); the
// rank-1 update A(i, j) = fma(-A(i, k), A(k, j), A(i, j)), i, j > k, one rounding (fmaf /
// fma).  info_b = the 1-based column of the first exactly zero pivot, else 0.  Scaling,
// LAPACK's rule against ours: xgetf2 divides by a pivot below sfmin (a subnormal) instead of
// multiplying by its reciprocal, which may overflow; here a double pivot below DBL_MIN gets
// the reciprocal of pivot * 2^64 and its products are multiplied by 2^64 (finite, within an
// ulp of LAPACK's quotient), and a float pivot always its reciprocal: the build's -ftz=true
// flushes float subnormals, so such a pivot, or a product below FLT_MIN, behaves as zero
// (LAPACK and gpulinalg/lu/batched.py's reference keep subnormals).
// Storage: unlike LAPACK (column-major), src and dst are ROW-MAJOR and packed: element
// (b, i, j) at [(b*m + i)*n + j] (64-bit offsets), C-contiguous (batch, m, n) arrays; src ==
// dst factors in place.  Pivots are 0-BASED, as scipy.linalg.lu_factor's: piv[b*K + k] = p
// (row k was interchanged with row p), K = min(m, n); info[b] as LAPACK's.  flags: two ints
// of host-mapped memory the host reads after the launch without a copy: a block stores the
// call's `gen` to flags[0] when one of its matrices has info != 0 and to flags[1] when one
// of its inputs holds an inf or NaN (plain stores of one value, so nothing needs resetting
// between calls and no atomics cross the bus).
//
// Bound: small n: memory bandwidth -- each matrix is read once and written once (100000 x
// 8^2 float: 51 MB, ~11 us at 4.8 TB/s; 20000 x 32^2: 164 MB, ~34 us) -- as long as the
// per-column work of a warp (~100 instructions: search, division, pivot row, plus RA*(n-k)
// FMAs per lane) for its 32/G matrices hides under the copies; at n = 32 the two are about
// equal (estimate, not measured).  Larger n (C > 1): the chain of n dependent steps per
// matrix (search, division, one block barrier, the pivot row through shared memory: a few
// hundred cycles per column), hidden only across the blocks resident on an SM (registers
// allow 2-4), then the issue rate of the update (~n^3/2 FMAs per matrix: rows at earlier
// positions are masked, not skipped).
//
// getrf_batched<T, NMAX, G, C>(batch, m, n, src, dst, piv, info, flags, gen):
//   Threads.  A matrix has G*C threads: C groups of G lanes, a group within one warp.  Lane
//   l of group g owns the rows l + G*a (a < RA = NMAX/G) and, of those rows, the columns of
//   g's chunks: 16-byte chunks of VK = 16/sizeof(T) columns dealt round-robin, chunk h to
//   group h % C, so group g holds columns (c*C + g)*VK + q (c < NCH = NMAX/(C*VK), q < VK):
//   CW = NMAX/C columns of RA rows, RA*CW elements of T in registers (x[a][c*VK + q]).
//   C = 1: the group holds the whole matrix, 32/G matrices per warp, GBATCH_WARPS warps per
//   block; C > 1 (G = 32): one matrix per block of C warps.  Interchanges are virtual: a row
//   never moves between threads; each thread keeps the position pos[a] of each of its rows
//   (the row order after the interchanges so far) and updates it from each step's (pivot
//   row, its position); rows are stored at their final positions at the end.
//   Column k (owner group gk = (k/VK) % C, register slot (k/(VK*C))*VK + k%VK):
//     1. The owner group's pivot search: each lane the best of its candidate rows (position
//        >= k), then the group's best by key: |value|'s bits + 1 (the bits of a magnitude
//        order as the magnitude), the largest key for a NaN at position k, 0 for a NaN below
//        k and for non-candidates; ties to the smallest position (LAPACK's first maximum),
//        the tag (position << 8 | row) breaking them.  G = 32: redux.sync (two, double:
//        three); G < 32: a shuffle butterfly within the group.  The winner's value is
//        shuffled to the group, one division forms the reciprocal, and the owner scales its
//        rows at positions > k in place.
//     2. C > 1: the owner writes the multipliers (by row) and (pivot row, position) to shared
//        memory, double-buffered by k's parity; one __syncthreads per column; every group
//        reads them.  C = 1: the group has them in registers: no block barrier at all.
//     3. Every group: the lane holding the pivot row writes that row's chunks from k's chunk
//        on to the group's pivot-row buffer (shared, double-buffered); __syncwarp; each lane
//        reads them by 16-byte broadcast loads and updates its rows at positions > k,
//        columns > k.  The chunk loop is unrolled, so chunks before k's are skipped at
//        compile time; C > 1: the loop over the C owners of a chunk slot is not unrolled.
//   The warp's groups run in step (a group past the batch factors zeros and stores nothing),
//   so every shuffle and barrier names the full warp.
//   Load and store: a block's matrices are one contiguous run of memory, copied by cp.async
//   in 16-byte pieces (src and dst 16-byte aligned and n % VK == 0; else one element per
//   copy),
//   consecutive threads on consecutive addresses, into shared staging rows of pitch
//   P = NMAX + VK (16 bytes mod 128: the 8 lanes of a 16-byte shared access hit distinct
//   banks); lanes read their rows' chunks by 16-byte loads.  The factors go back the same
//   way, each row from its final position; pivots and info beside them.
//
// Knobs: NMAX, G, C (template parameters; the instances and the choice by size are
// gpulinalg/lu/batched.py's SHAPES_OF): NMAX in 8, 16, 32, 64, 128, a call taking the
// smallest >= max(m, n); (G, C) = float (4, 1), (8, 1), (16, 1), (32, 2), (32, 8), double
// (4, 1), (8, 1), (32, 1), (32, 4), (32, 16): RA*CW <= 64 floats or 32 doubles of data per
// thread, and the fewer lanes per matrix the more matrices share a warp's per-column work.
// GBATCH_WARPS = 4 (128 threads per block where C = 1: 32, 16, 8 or 4 matrices);
// GBATCH_REGS = 128 registers per thread at most (__launch_bounds__).  Dynamic shared memory
// (bytes): sizeof(T) * (MPB*NMAX*P staging + MPB*2*NMAX pivot rows + (C > 1: 2*NMAX
// multipliers)) + 4 * (8 + (C > 1: NMAX) + 1), MPB matrices per block: 14-41 KB for C = 1,
// float 64 18 KB, float 128 69 KB, double 64 35 KB, double 128 135 KB (sm_80, sm_90, sm_100).

#include "async_copy.cuh"
#include "getrf_pivot.cuh"

#define GBATCH_WARPS 4          // warps per block of the C = 1 shapes (groups within warps)
#define GBATCH_REGS 128         // registers per thread the compiler may use (blocks per SM:
                                // __launch_bounds__' 65536 / (GBATCH_REGS * threads))
#define GBATCH_THREADS(G, C) ((C) == 1 ? 32 * GBATCH_WARPS : (G) * (C))   // threads per block
#define GBATCH_NONE (1 << 16)   // position of a row past m: never a candidate, never stored

// The position of a row after step k's interchange of positions k and q (the pivot row,
// physical row pp, moves to k; the row at k to q).
__device__ __forceinline__ int gbatch_moved(int pos, int phys, int k, int q, int pp)
{
    return phys == pp ? k : (pos == k ? q : pos);
}

template <typename T, int NMAX, int G, int C>
__global__ void
__launch_bounds__(GBATCH_THREADS(G, C), 65536 / (GBATCH_REGS * GBATCH_THREADS(G, C)))
getrf_batched(int batch, int m, int n, const T* src, T* dst, int* __restrict__ piv,
              int* __restrict__ info, int* flags, int gen)
{
    typedef lu_elem<T> E;
    typedef typename E::key_t key_t;
    constexpr int VK = 16 / static_cast<int>(sizeof(T));   // elements per 16 bytes
    constexpr int TPM = G * C;                              // threads per matrix
    constexpr int THREADS = GBATCH_THREADS(G, C);
    constexpr int MPB = THREADS / TPM;                      // matrices per block
    constexpr int RA = NMAX / G;                            // rows per lane
    constexpr int CW = NMAX / C;                            // columns per group
    constexpr int NCH = CW / VK;                            // chunks per group
    constexpr int P = NMAX + VK;                            // staging row pitch
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    static_assert(G == 2 || G == 4 || G == 8 || G == 16 || G == 32, "a group: 2-32 lanes");
    static_assert(C == 1 || G == 32, "C > 1: whole warps as groups");
    static_assert(NMAX % G == 0 && NMAX % (C * VK) == 0 && NMAX <= 128,
                  "whole chunks per group; positions and rows fit a tag's 8-bit fields");

    extern __shared__ float4 gbatch_smem[];
    T* stage = reinterpret_cast<T*>(gbatch_smem);           // MPB * NMAX rows of pitch P
    T* ubuf = stage + MPB * NMAX * P;                       // per group: 2 x CW (pivot row)
    T* lbuf = ubuf + MPB * C * 2 * CW;                      // C > 1: 2 x NMAX (multipliers)
    int* meta = reinterpret_cast<int*>(lbuf + (C > 1 ? 2 * NMAX : 0));  // 2 x (pp, q, -, -)
    int* spiv = meta + 8;                                   // C > 1: the pivots
    int* sinfo = spiv + (C > 1 ? NMAX : 0);                 // C > 1: info

    const int tid = threadIdx.x;
    const int mb = tid / TPM, t = tid % TPM;                // matrix of the block, its thread
    const int g = t / G, lg = t % G;                        // group, lane in the group
    const int b0 = static_cast<int>(blockIdx.x) * MPB;      // batch < 2^31: no overflow
    const int b = b0 + mb;
    const int mn = m * n;                                   // <= NMAX^2
    const int kmax = min(m, n);
    const int total = min(MPB, batch - b0) * mn;            // <= MPB * NMAX^2 elements
    const T* const sbase = src + static_cast<long long>(b0) * mn;
    T* const dbase = dst + static_cast<long long>(b0) * mn;
    const bool vec = ((reinterpret_cast<unsigned long long>(src)
                       | reinterpret_cast<unsigned long long>(dst)) & 15ull) == 0 && n % VK == 0;

    // 1. The block's matrices to the staging rows (row r = element / n of the run).
    if (vec) {
#pragma unroll 4
        for (int e = tid * VK; e < total; e += THREADS * VK) {
            const int row = e / n, col = e - row * n;
            cp_async16(reinterpret_cast<float*>(stage + row * P + col),
                       reinterpret_cast<const float*>(sbase + e));
        }
    } else {
#pragma unroll 4
        for (int e = tid; e < total; e += THREADS) {
            const int row = e / n, col = e - row * n;
            float* d = reinterpret_cast<float*>(stage + row * P + col);
            const float* s = reinterpret_cast<const float*>(sbase + e);
            cp_async4(d, s, true);
            if constexpr (sizeof(T) == 8)
                cp_async4(d + 1, s + 1, true);              // a double as its two halves
        }
    }
    cp_async_commit();
    cp_async_wait<0>();
    if (C > 1 && tid == 0)
        *sinfo = 0;
    __syncthreads();

    // 2. Registers: rows lg + G*a, the group's chunks; whether any of their n columns holds an
    // inf or NaN.
    T x[RA][CW];
    int pos[RA];
    bool nonfinite = false;
#pragma unroll
    for (int a = 0; a < RA; ++a) {
        const int i = lg + G * a;
        pos[a] = i < m ? i : GBATCH_NONE;
        if (i < m && b < batch) {
            const T* row = stage + (mb * m + i) * P;
#pragma unroll
            for (int c = 0; c < NCH; ++c) {
                lu_ld16(x[a], c * VK, row + (c * C + g) * VK);
#pragma unroll
                for (int q = 0; q < VK; ++q)
                    nonfinite |= (c * C + g) * VK + q < n && !E::finite(x[a][c * VK + q]);
            }
        } else {
#pragma unroll
            for (int j = 0; j < CW; ++j)
                x[a][j] = T(0);
        }
    }

    // 3. The columns.
    int my_piv[RA];                         // C = 1: the pivots of steps lg + G*a
    int my_info = 0;                        // C = 1: the group's info
#pragma unroll
    for (int a = 0; a < RA; ++a)
        my_piv[a] = 0;
    T* const ub = ubuf + (mb * C + g) * 2 * CW;

#pragma unroll
    for (int c = 0; c < NCH; ++c) {
        // Step k = (c*C + gk)*VK + q: column slot c*VK + q of owner group gk.
        auto step = [&](const int gk, const int q) {
            const int k = (c * C + gk) * VK + q;
            const int sk = c * VK + q;
            if (k >= kmax)
                return;                     // uniform in the block
            const int buf = k & 1;
            int pp = 0, ql = 0;             // the pivot's physical row, its position
            T l[RA];                        // the multipliers of this lane's rows
#pragma unroll
            for (int a = 0; a < RA; ++a)
                l[a] = T(0);
            if (C == 1 || g == gk) {        // the owner group: search, pivot, multipliers
                key_t bk = 0;
                unsigned bt = 0xffffffffu;
                T bv = T(0);
#pragma unroll
                for (int a = 0; a < RA; ++a) {
                    const key_t key = E::key(x[a][sk], pos[a] >= k && pos[a] < m, pos[a] == k);
                    const unsigned tag = (static_cast<unsigned>(pos[a]) << 8) | (lg + G * a);
                    if (key > bk || (key != 0 && key == bk && tag < bt)) {
                        bk = key;
                        bt = tag;
                        bv = x[a][sk];
                    }
                }
                key_t wkey;
                unsigned wtag;
                lu_first_max<G>(bk, bt, wkey, wtag);
                const int wp = static_cast<int>(wtag & 0xffu);
                const int wq = static_cast<int>(wtag >> 8);
                const T pv = __shfl_sync(0xffffffffu, bv, wp % G, G);   // the winner lane's best
                const bool zero = wkey == key_t(1);
                // One division per column: 1 / pivot, for a tiny double pivot of the pivot
                // scaled by 2^64 (the reciprocal stays finite), the products scaled back.
                const bool tiny = E::tiny(pv);
                const T rinv = T(1) / (tiny ? pv * E::up : pv);
                const T back = tiny ? E::up : T(1);
#pragma unroll
                for (int a = 0; a < RA; ++a) {
                    const int phys = lg + G * a;
                    if (gbatch_moved(pos[a], phys, k, wq, wp) > k) {
                        const T v = x[a][sk];
                        const T lv = zero ? v : (v * rinv) * back;
                        x[a][sk] = lv;
                        l[a] = lv;
                        if constexpr (C > 1)
                            lbuf[buf * NMAX + phys] = lv;
                    }
                }
                if constexpr (C == 1) {
                    pp = wp;
                    ql = wq;
                    if (lg == k % G)
                        my_piv[k / G] = wq;
                    if (zero && my_info == 0)
                        my_info = k + 1;
                } else if (lg == 0) {
                    meta[buf * 4] = wp;
                    meta[buf * 4 + 1] = wq;
                    spiv[k] = wq;
                    if (zero && *sinfo == 0)
                        *sinfo = k + 1;
                }
            }
            if constexpr (C > 1) {
                __syncthreads();            // the owner's (p, q) and multipliers
                pp = meta[buf * 4];
                ql = meta[buf * 4 + 1];
#pragma unroll
                for (int a = 0; a < RA; ++a)
                    l[a] = lbuf[buf * NMAX + lg + G * a];
            }
#pragma unroll
            for (int a = 0; a < RA; ++a)
                pos[a] = gbatch_moved(pos[a], lg + G * a, k, ql, pp);
            // The pivot row's chunks c.. of this group, through shared memory.
            T* const u = ub + buf * CW;
            if (lg == pp % G) {
                const int ap = pp / G;
#pragma unroll
                for (int a = 0; a < RA; ++a)
                    if (a == ap) {
#pragma unroll
                        for (int h = c; h < NCH; ++h)
                            lu_st16(u + h * VK, x[a], h * VK);
                    }
            }
            __syncwarp();
            // Rank-1 update of the rows at positions > k, columns > k.
            bool act[RA];
#pragma unroll
            for (int a = 0; a < RA; ++a)
                act[a] = pos[a] > k;
            const bool later = C == 1 ? false : g > gk;     // chunk c: g's columns follow k's
            const bool same = C == 1 ? true : g == gk;
#pragma unroll
            for (int h = c; h < NCH; ++h) {
                T uv[VK];
                lu_ld16(uv, 0, u + h * VK);
#pragma unroll
                for (int q2 = 0; q2 < VK; ++q2) {
                    const bool col = h > c || later || (same && q2 > q);
                    if (col) {
#pragma unroll
                        for (int a = 0; a < RA; ++a)
                            if (act[a])
                                x[a][h * VK + q2] = E::fma(-l[a], uv[q2], x[a][h * VK + q2]);
                    }
                }
            }
        };
        if constexpr (C == 1) {
#pragma unroll
            for (int q = 0; q < VK; ++q)
                step(0, q);
        } else {
#pragma unroll 1
            for (int gk = 0; gk < C; ++gk) {
#pragma unroll
                for (int q = 0; q < VK; ++q)
                    step(gk, q);
            }
        }
    }

    // 4. Rows to their final positions in the staging area (each matrix's own rows: no other
    // group reads them any more), then the pivots, info and the factors to global memory.
#pragma unroll
    for (int a = 0; a < RA; ++a)
        if (pos[a] < m && b < batch) {
            T* dst = stage + (mb * m + pos[a]) * P;
#pragma unroll
            for (int c = 0; c < NCH; ++c)
                lu_st16(dst + (c * C + g) * VK, x[a], c * VK);
        }
    if constexpr (C == 1) {
        if (b < batch) {
#pragma unroll
            for (int a = 0; a < RA; ++a)
                if (lg + G * a < kmax)
                    piv[static_cast<long long>(b) * kmax + lg + G * a] = my_piv[a];
            if (lg == 0)
                info[b] = my_info;
        }
    }
    // The block's summary for the host (flags in host-mapped memory, plain stores of the
    // call's gen: none needs resetting): a singular matrix, an inf or NaN in the input.
    const int singular = __syncthreads_or(b < batch && (C == 1 ? my_info : *sinfo) != 0);
    const int bad = __syncthreads_or(nonfinite);
    if (tid == 0) {
        if (singular)
            flags[0] = gen;
        if (bad)
            flags[1] = gen;
    }
    if constexpr (C > 1) {
        for (int i = tid; i < kmax; i += THREADS)
            piv[static_cast<long long>(b) * kmax + i] = spiv[i];
        if (tid == 0)
            info[b] = *sinfo;
    }
    if (vec) {
#pragma unroll 4
        for (int e = tid * VK; e < total; e += THREADS * VK) {
            const int row = e / n, col = e - row * n;
            *reinterpret_cast<uint4*>(dbase + e) =
                *reinterpret_cast<const uint4*>(stage + row * P + col);
        }
    } else {
#pragma unroll 4
        for (int e = tid; e < total; e += THREADS) {
            const int row = e / n, col = e - row * n;
            dbase[e] = stage[row * P + col];
        }
    }
}
