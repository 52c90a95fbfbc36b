// trsv.cu -- triangular solve with few right-hand sides, in place, in one launch:
//     X := op(T)^{-1} X,   op(T) = T or T^T,   T n x n triangular, X n x nrhs (nrhs <= R).
// T is lu_factor's combined LU matrix: `lower` is the unit lower triangular L (strict lower
// triangle; the diagonal and upper triangle are never used), `upper` the non-unit U (upper
// triangle with the diagonal; the strict lower triangle is never used).  L x = b and
// U^T x = b are forward substitutions, U x = b and L^T x = b backward ones.  One source for
// T = float and double, every operation in T.
// Storage: unlike BLAS (column-major), everything is ROW-MAJOR: T(i, k) = A[i*lda + k],
// X(i, c) = X[i*ldx + c] (lda >= n, ldx >= nrhs, 64-bit, in elements).  Columns c >= nrhs of
// X are neither read nor written.
// Bound: bandwidth and latency.  Bytes: the n^2/2 elements of the triangle are read once
// (n = 8192 float: 134 MB, 28 us at 4.8 TB/s).  Latency: the chain of n/NB dependent blocks,
// each a handoff (fence, flag, acquire poll, X_j load: about three L2 round trips), the last
// tile's FMAs, a reduction and the diagonal solve of NB rows (~12 cycles per row and column
// pair): ~1.5-2 us per block, so n = 8192 float (NB = 128) takes ~100-130 us per triangle,
// latency-bound; the tiles stream under the chain while n <= G NB, and bandwidth becomes
// the bound for much larger n.
//
// trsv_few<T, NB, R>(n, nrhs, A, lda, X, ldx, lower, trans, epoch, ticket, flags): the rows
// form blocks of NB (float 64 or 128, double 32 or 64: gpulinalg/lu/trsv.py takes the largest
// whose shared memory the device grants), solved in order s = 0, 1, ... (block b = s forward,
// nblk-1-s backward; the partial block is the last in row order).  R = 1, 2, 4, 8 or 16.
// Scheduling: a persistent grid of G <= nblk CTAs of TRSV_THREADS = 256 threads; thread 0
// draws solve indices from a ticket counter (atomicAdd), so every block a CTA waits for was
// drawn before by a running CTA: no deadlock, whatever G and residency.  Block s is solved
// when flags[s] == epoch.  Workspace (per stream, see trsv.py): *ticket (64-bit) holds
// (epoch << 32) + draws; a CTA's first draw raises it to epoch << 32 (atomicMax) before its
// atomicAdd, so a call with a larger epoch than all before it on the workspace starts at 0
// without a reset, even after an aborted launch; int32 flags from earlier epochs never match.
// Calls sharing a workspace run one after another (one stream), epochs increasing; the host
// zeroes the workspace when the 32-bit epoch wraps.  Not capturable in a CUDA graph (a replay
// would reuse the epoch).
// Per block (rows r0..r0+nb, nb <= NB):
//   1. cp.async: the diagonal tile to D, then the off-diagonal tiles (op = N: tile (b, j);
//      op = T: tile (j, b); rows of 256-512 contiguous bytes) through a ring of two stages,
//      the next issued once the current one has landed; row pitch P = NB + 16/sizeof(T) (a
//      16-byte-mod-128 stride: 8 lanes reading 16 bytes of 8 consecutive rows hit 32
//      banks); 16-byte copies where A and lda are 16-byte aligned, else one element per copy;
//      zero-fill outside the triangle's blocks.  The solver lanes load X_b (ld.global.cg).
//   2. Per solved block j (solve order t < s): __syncthreads (tile t landed, the other stage
//      free); thread 0 spins with ld.acquire.gpu until flags[t] == epoch; __syncthreads; warp
//      w loads rows w*NB/8 .. +NB/8 of X_j (ld.global.cg: L2, never a stale L1 line) to
//      shared memory and accumulates its k-range of the tile's products: lane l keeps sums for
//      rows l + 32a (op = N: 16-byte reads of T(i, k..)) or l*NB/32 + a (op = T: T(k, i..)),
//      a < NB/32, all R columns.  Iteration 0 also brings D to canonical form (below), off the
//      critical path while the CTA waits for a flag.
//   3. The 8 warps' sums meet in shared memory (over the ring): acc = X_b - sum.
//   4. Diagonal solve in solve order p (row r0 + p forward, r0 + nb-1-p backward).  D holds
//      M, the block's op(T) in solve order, strictly lower: L as is, U^T transposed, U with
//      both indices reversed, L^T both (pairs swapped in place).  For U, M's column q is
//      divided by d_q (IEEE division, in the canonical pass): the block solves the unit
//      system (I + M D^-1) z = acc and then x = z / d, so no division lies on the chain.
//      Warp w solves columns w, w+8 (lane l: rows l + 32a) in sub-blocks of TRSV_SUB = 8
//      rows: 8 shuffles gather the sub-block into every lane, every lane solves the 8 x 8
//      unit triangle redundantly (7 dependent FMAs, M by shared-memory broadcasts), and each
//      lane applies the 8 values to its own later rows.  x = z / d (U), the stores to X, a
//      __threadfence by each writing lane, __syncthreads, and thread 0 sets flags[s] = epoch
//      (st.release.gpu).
// Arithmetic: x(i) = b(i) minus the products with earlier blocks (FMA sums over 8 k-ranges,
// subtracted in order), then the in-block substitution: a plain substitution with FMAs, its
// terms grouped by blocks as in blocked BLAS, no inverse.  U's column scaling rounds
// M(p, q)/d_q once more; the backward error stays trsv's, |dT| <= c n eps |T|.
// Knobs: NB, R (templates), TRSV_THREADS = 256 (8 warps), TRSV_SUB = 8 (#defines mirrored in
// trsv.py).  Dynamic shared memory (elements of T): max(2 NB P, 8 R NB) (the ring, later the
// partial sums) + NB P (D) + NB R (X_j, later z): float NB = 128 up to 206 KB (sm_90 and
// sm_100), NB = 64 55 KB; double NB = 64 up to 107 KB, NB = 32 45 KB.

#include "async_copy.cuh"

#define TRSV_THREADS 256
#define TRSV_SUB 8

// a * b + c rounded once, in T.
__device__ __forceinline__ float trsv_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double trsv_fma(double a, double b, double c) { return fma(a, b, c); }

// One element of global memory through L2 only (ld.global.cg: never a stale L1 line).  The
// "memory" clobber keeps it after the barrier that follows the flag's acquire.
__device__ __forceinline__ float trsv_ldcg(const float* p)
{
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ double trsv_ldcg(const double* p)
{
    double v;
    asm volatile("ld.global.cg.f64 %0, [%1];" : "=d"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned trsv_ld_acquire(const unsigned* p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void trsv_st_release(unsigned* p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// *dst = *src, one element (4 or 8 bytes) global -> shared by cp.async; zero where !ok.
template <typename T>
__device__ __forceinline__ void trsv_cp_elem(T* dst, const T* src, bool ok)
{
    if constexpr (sizeof(T) == 4)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                     :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 4 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n"
                     :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 8 : 0));
}

// v[0..N) = p[0..N) from shared memory with the widest vectors that N * sizeof(T) allows (p
// aligned to min(16, N * sizeof(T)) bytes); sts_vec stores the same way.
template <typename T, int N>
__device__ __forceinline__ void lds_vec(T (&v)[N], const T* p)
{
    constexpr int B = N * static_cast<int>(sizeof(T));
    if constexpr (B % 16 == 0 && sizeof(T) == 4) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            const float4 q = reinterpret_cast<const float4*>(p)[i];
            v[4 * i] = q.x; v[4 * i + 1] = q.y; v[4 * i + 2] = q.z; v[4 * i + 3] = q.w;
        }
    } else if constexpr (B % 16 == 0) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const double2 q = reinterpret_cast<const double2*>(p)[i];
            v[2 * i] = q.x; v[2 * i + 1] = q.y;
        }
    } else if constexpr (B == 8 && sizeof(T) == 4) {
        const float2 q = *reinterpret_cast<const float2*>(p);
        v[0] = q.x; v[1] = q.y;
    } else {
        static_assert(N == 1, "one element");
        v[0] = p[0];
    }
}
template <typename T, int N>
__device__ __forceinline__ void sts_vec(T* p, const T (&v)[N])
{
    constexpr int B = N * static_cast<int>(sizeof(T));
    if constexpr (B % 16 == 0 && sizeof(T) == 4) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i)
            reinterpret_cast<float4*>(p)[i] =
                make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    } else if constexpr (B % 16 == 0) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
            reinterpret_cast<double2*>(p)[i] = make_double2(v[2 * i], v[2 * i + 1]);
    } else if constexpr (B == 8 && sizeof(T) == 4) {
        *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
    } else {
        static_assert(N == 1, "one element");
        p[0] = v[0];
    }
}

// dst[r*P + c] = src[(row0 + r)*ld + col0 + c] for r < rows, c < cols, zero elsewhere in the
// NB x NB tile, by cp.async from the whole block (consecutive threads, consecutive 16-byte
// chunks of a row).  vec: src and ld are 16-byte aligned (16-byte copies, a partial last
// chunk zero-filled past cols), else one element per copy.  The caller commits.
template <typename T, int NB, int P>
__device__ __forceinline__ void trsv_load_tile(T* dst, const T* src, long long ld,
                                               long long row0, long long col0, int rows,
                                               int cols, bool vec)
{
    constexpr int VK = 16 / static_cast<int>(sizeof(T));
    constexpr int CPR = NB / VK;                        // 16-byte chunks per tile row
    if (vec) {
#pragma unroll 4
        for (int e = threadIdx.x; e < NB * CPR; e += TRSV_THREADS) {
            const int r = e / CPR, c = (e % CPR) * VK;
            const int left = cols - c;
            const int valid = r < rows ? (left < 0 ? 0 : (left < VK ? left : VK)) : 0;
            const T* g = valid ? src + (row0 + r) * ld + col0 + c : src;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                         :: "r"(smem_u32(dst + r * P + c)), "l"(g),
                            "r"(valid * static_cast<int>(sizeof(T))));
        }
    } else {
#pragma unroll 4
        for (int e = threadIdx.x; e < NB * NB; e += TRSV_THREADS) {
            const int r = e / NB, c = e % NB;
            const bool ok = r < rows && c < cols;
            trsv_cp_elem(dst + r * P + c, ok ? src + (row0 + r) * ld + col0 + c : src, ok);
        }
    }
}

// The raw diagonal tile D (D[r*P + c] = T(r0 + r, r0 + c)) -> M in solve order, strictly
// lower: D[p*P + q] = M(p, q) for q < p < nb, divided by d_q for U.  Raw positions that
// feed M are read before any thread writes them: U's cases read only the raw upper triangle
// and diagonal and write only the lower one; L^T's swaps pairs within the lower triangle, one
// thread per pair.  The diagonal stays raw (x = z / d reads it); the rest is never read.
template <typename T, int NB, int P>
__device__ __forceinline__ void trsv_canonical(T* D, int nb, bool lower, bool trans)
{
    if (lower && !trans)
        return;                                         // L: M is the raw strict lower part
#pragma unroll 1
    for (int e = threadIdx.x; e < NB * NB; e += TRSV_THREADS) {
        const int p = e / NB, q = e % NB;
        if (q >= p || p >= nb)
            continue;
        if (!lower) {
            // U^T (forward): M(p, q) = U(q, p); U (backward): M(p, q) = U(nb-1-p, nb-1-q).
            const int sr = trans ? q : nb - 1 - p, sc = trans ? p : nb - 1 - q;
            const int dq = trans ? q : nb - 1 - q;
            D[p * P + q] = D[sr * P + sc] / D[dq * P + dq];
        } else {
            // L^T (backward): M(p, q) = L(nb-1-q, nb-1-p), the lower position (pr, pc).
            const int pr = nb - 1 - q, pc = nb - 1 - p;
            if (p < pr || (p == pr && q < pc)) {
                const T u = D[p * P + q];
                D[p * P + q] = D[pr * P + pc];
                D[pr * P + pc] = u;
            }
        }
    }
}

template <typename T, int NB, int R>
__global__ void __launch_bounds__(TRSV_THREADS, 1)
trsv_few(int n, int nrhs, const T* A, long long lda, T* X, long long ldx, int lower,
         int trans, unsigned epoch, unsigned long long* ticket, unsigned* flags)
{
    constexpr int TH = TRSV_THREADS, WARPS = TH / 32, S = TRSV_SUB;
    constexpr int VK = 16 / static_cast<int>(sizeof(T));    // elements per 16 bytes
    constexpr int P = NB + VK;                  // row pitch: stride = 16 bytes mod 128
    constexpr int RA = NB / 32;                 // rows per lane
    constexpr int KW = NB / WARPS;              // k per warp and tile
    constexpr int CW = (R + WARPS - 1) / WARPS; // columns per solving warp
    constexpr int TILE = NB * P;
    constexpr int RED = WARPS * R * NB;
    constexpr int RING = 2 * TILE > RED ? 2 * TILE : RED;
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    static_assert(NB % 32 == 0 && KW % VK == 0 && NB % S == 0 && 32 % S == 0, "NB");
    static_assert(R >= 1 && R <= 16 && (R & (R - 1)) == 0, "R: 1, 2, 4, 8, 16");

    extern __shared__ float4 trsv_smem[];
    T* ring = reinterpret_cast<T*>(trsv_smem);  // two tile stages; then the partial sums
    T* D = ring + RING;                         // diagonal tile, then M
    T* xs = D + TILE;                           // X_j (xs[k*R + c]); then z (xs[c*NB + p])
    __shared__ int s_ticket;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nblk = (n + NB - 1) / NB;
    const bool low = lower != 0, tr = trans != 0;
    const bool fwd = low != tr;                 // L x = b, U^T x = b
    const bool vec = (reinterpret_cast<unsigned long long>(A) % 16 == 0) && (lda % VK == 0);
    const unsigned long long base = static_cast<unsigned long long>(epoch) << 32;
    bool first = true;

#pragma unroll 1
    for (;;) {
        if (threadIdx.x == 0) {
            if (first)
                atomicMax(ticket, base);        // a new epoch starts at ticket 0
            const unsigned long long u = atomicAdd(ticket, 1ull) - base;
            s_ticket = u < static_cast<unsigned long long>(nblk) ? static_cast<int>(u) : nblk;
        }
        first = false;
        __syncthreads();
        const int s = s_ticket;
        if (s >= nblk)
            return;
        const int b = fwd ? s : nblk - 1 - s;
        const int r0 = b * NB, nb = min(NB, n - r0);

        // 1. The diagonal tile, the first off-diagonal tile, the block's right-hand side.
        trsv_load_tile<T, NB, P>(D, A, lda, r0, r0, nb, nb, vec);
        cp_async_commit();
        auto issue = [&](int t, T* dst) {
            const int j = fwd ? t : nblk - 1 - t;
            const int nbj = min(NB, n - j * NB);
            if (!tr)
                trsv_load_tile<T, NB, P>(dst, A, lda, r0, static_cast<long long>(j) * NB, nb,
                                         nbj, vec);
            else
                trsv_load_tile<T, NB, P>(dst, A, lda, static_cast<long long>(j) * NB, r0, nbj,
                                         nb, vec);
            cp_async_commit();
        };
        if (s > 0)
            issue(0, ring);
        T y[RA][CW];                            // solver lanes: rows lane + 32a, columns warp + 8m
#pragma unroll
        for (int a = 0; a < RA; ++a)
#pragma unroll
            for (int m = 0; m < CW; ++m) {
                const int p = lane + 32 * a, c = warp + WARPS * m, i = fwd ? p : nb - 1 - p;
                y[a][m] = (p < nb && c < nrhs)
                    ? trsv_ldcg(X + static_cast<long long>(r0 + i) * ldx + c) : T(0);
            }

        // 2. The solved blocks' products, in solve order.
        T part[RA][R];
#pragma unroll
        for (int a = 0; a < RA; ++a)
#pragma unroll
            for (int c = 0; c < R; ++c) part[a][c] = T(0);
        const int kb = warp * KW;
#pragma unroll 1
        for (int t = 0; t < s; ++t) {
            cp_async_wait<0>();                 // tile t (and at t = 0 the diagonal tile)
            __syncthreads();                    // ... visible; stage (t+1)&1 no longer read
            if (t + 1 < s)
                issue(t + 1, ring + ((t + 1) & 1) * TILE);
            if (t == 0)
                trsv_canonical<T, NB, P>(D, nb, low, tr);
            if (threadIdx.x == 0)
                while (trsv_ld_acquire(flags + t) != epoch) {
                }
            __syncthreads();                    // block t's X is final
            const int j = fwd ? t : nblk - 1 - t;
            const int rj0 = j * NB, nbj = min(NB, n - rj0);
            T* xw = xs + kb * R;                // this warp's rows of X_j
#pragma unroll
            for (int e = lane; e < KW * R; e += 32) {
                const int k = kb + e / R, c = e % R;
                xw[e] = (k < nbj && c < nrhs)
                    ? trsv_ldcg(X + static_cast<long long>(rj0 + k) * ldx + c) : T(0);
            }
            __syncwarp();
            const T* ts = ring + (t & 1) * TILE;
            if (!tr) {                          // tile (b, j): T(r0 + i, rj0 + k) at ts[i*P + k]
#pragma unroll
                for (int k0 = 0; k0 < KW; k0 += VK) {
                    T tv[RA][VK];
#pragma unroll
                    for (int a = 0; a < RA; ++a)
                        lds_vec(tv[a], ts + (lane + 32 * a) * P + kb + k0);
#pragma unroll
                    for (int v = 0; v < VK; ++v) {
                        T xv[R];
                        lds_vec(xv, xs + (kb + k0 + v) * R);
#pragma unroll
                        for (int a = 0; a < RA; ++a)
#pragma unroll
                            for (int c = 0; c < R; ++c)
                                part[a][c] = trsv_fma(tv[a][v], xv[c], part[a][c]);
                    }
                }
            } else {                            // tile (j, b): T(rj0 + k, r0 + i) at ts[k*P + i]
#pragma unroll
                for (int kk = 0; kk < KW; ++kk) {
                    T tv[RA], xv[R];
                    lds_vec(tv, ts + (kb + kk) * P + lane * RA);
                    lds_vec(xv, xs + (kb + kk) * R);
#pragma unroll
                    for (int a = 0; a < RA; ++a)
#pragma unroll
                        for (int c = 0; c < R; ++c)
                            part[a][c] = trsv_fma(tv[a], xv[c], part[a][c]);
                }
            }
        }
        if (s == 0) {
            cp_async_wait<0>();
            __syncthreads();
            trsv_canonical<T, NB, P>(D, nb, low, tr);
        }
        __syncthreads();                        // tiles consumed, M in D

        // 3. Partial sums of the 8 k-ranges: red[(w*R + c)*NB + i] over the ring.
        T* red = ring;
        if (s > 0) {
#pragma unroll
            for (int c = 0; c < R; ++c) {
                if (!tr) {
#pragma unroll
                    for (int a = 0; a < RA; ++a)
                        red[(warp * R + c) * NB + lane + 32 * a] = part[a][c];
                } else {
                    T col[RA];
#pragma unroll
                    for (int a = 0; a < RA; ++a) col[a] = part[a][c];
                    sts_vec(red + (warp * R + c) * NB + lane * RA, col);
                }
            }
        }
        __syncthreads();

        // 4. Diagonal solve: warp w, columns w + 8m.
        if (warp < nrhs) {
            if (s > 0) {
#pragma unroll
                for (int a = 0; a < RA; ++a)
#pragma unroll
                    for (int m = 0; m < CW; ++m) {
                        const int p = lane + 32 * a, c = warp + WARPS * m;
                        const int i = fwd ? p : nb - 1 - p;
                        if (p < nb && c < R) {
#pragma unroll
                            for (int w = 0; w < WARPS; ++w)
                                y[a][m] -= red[(w * R + c) * NB + i];
                        }
                    }
            }
            T* sz = xs;                         // z(p, c) at sz[c*NB + p]
#pragma unroll
            for (int a0 = 0; a0 < RA; ++a0) {
#pragma unroll 1
                for (int l0 = 0; l0 < 32; l0 += S) {
                    const int p0 = 32 * a0 + l0;
                    T z[S][CW];                 // the sub-block's values, in every lane
#pragma unroll
                    for (int q = 0; q < S; ++q)
#pragma unroll
                        for (int m = 0; m < CW; ++m)
                            z[q][m] = __shfl_sync(0xffffffffu, y[a0][m], l0 + q);
#pragma unroll
                    for (int q2 = 1; q2 < S; ++q2) {
                        T mr[S];
                        lds_vec(mr, D + (p0 + q2) * P + p0);
#pragma unroll
                        for (int q = 0; q < q2; ++q)
#pragma unroll
                            for (int m = 0; m < CW; ++m)
                                z[q2][m] = trsv_fma(-mr[q], z[q][m], z[q2][m]);
                    }
                    if (lane == 0) {
#pragma unroll
                        for (int m = 0; m < CW; ++m) {
                            T zc[S];
#pragma unroll
                            for (int q = 0; q < S; ++q) zc[q] = z[q][m];
                            if (warp + WARPS * m < R)
                                sts_vec(sz + (warp + WARPS * m) * NB + p0, zc);
                        }
                    }
                    // Later rows of this lane (rows already solved receive values never used).
#pragma unroll
                    for (int a = a0; a < RA; ++a) {
                        T mr[S];
                        lds_vec(mr, D + (lane + 32 * a) * P + p0);
#pragma unroll
                        for (int q = 0; q < S; ++q)
#pragma unroll
                            for (int m = 0; m < CW; ++m)
                                y[a][m] = trsv_fma(-mr[q], z[q][m], y[a][m]);
                    }
                }
            }
            __syncwarp();
#pragma unroll
            for (int a = 0; a < RA; ++a)
#pragma unroll
                for (int m = 0; m < CW; ++m) {
                    const int p = lane + 32 * a, c = warp + WARPS * m;
                    if (p < nb && c < nrhs) {
                        const int i = fwd ? p : nb - 1 - p;
                        T x = sz[c * NB + p];
                        if (!low)
                            x = x / D[i * P + i];
                        X[static_cast<long long>(r0 + i) * ldx + c] = x;
                    }
                }
            __threadfence();                    // this lane's X stores before the flag
        }
        __syncthreads();
        if (threadIdx.x == 0)
            trsv_st_release(flags + s, epoch);
    }
}
