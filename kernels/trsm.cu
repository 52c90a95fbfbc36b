// trsm.cu -- triangular solve with a unit lower triangular matrix, in place (BLAS strsm with
// side = 'L', uplo = 'L', trans = 'N', diag = 'U', alpha = 1):
//     B := L^{-1} B,   L nb x nb unit lower triangular, B nb x ncols.
// Unlike BLAS, both are stored row-wise: L(i, k) = L[i*ldl + k], B(i, c) = B[i*ldb + c] (ldl,
// ldb 64-bit, any values >= the row lengths), so L can be the diagonal block of a row-major LU
// (the driver's L11 = A[j0:j1, j0:j1]) and B a column strip of the same matrix (U12).  Only the
// strict lower triangle of L is read: its diagonal and upper part (U11 in the LU) are never
// touched, whatever they hold (NaN included).
//
// trsm_llnu<NB, T>: nb <= NB (NB = 32, 64, 128: template, gpulinalg/_trsm.py picks the smallest
// that fits and blocks larger nb as trsm(128) + SGEMM + trsm(128) + ...).  Blocks of T = 128
// threads; thread t of block b owns column c = b*T + t of B for the whole solve (no data moves
// between threads, one __syncthreads per block); consecutive threads take consecutive columns,
// so every load and store of a row of B is coalesced.  Per block:
//   1. the strict lower triangle of L goes to shared memory transposed, sL[k*(NB+4) + i] =
//      L(i, k), with 4-byte cp.async (zero-fill outside the triangle, no register staging,
//      all copies in flight at once); a warp copies a 4-row x 8-column tile per instruction:
//      4 full 32-byte sectors from global memory, 32 distinct banks in shared memory (the
//      row pitch NB+4 keeps every column 16-byte aligned);
//   2. left-looking blocked forward substitution in chunks of CH = 32 rows: the chunk's rows
//      of the column are loaded into registers (y[32]), reduced by the already solved rows
//      (y -= L(chunk, 0:c0) x(0:c0), the solved values read back from the thread's own
//      column of shared memory xs, L's columns as float4 broadcasts), solved against the
//      32 x 32 diagonal block (unit diagonal), then kept in xs and stored (row 0 of B never
//      changes).  Only the 32-row chunk is register-indexed, so only it is unrolled: the code
//      is ~15 KB whatever NB.  (The first version kept all NB rows in registers with the whole
//      substitution unrolled: 195 KB of SASS at NB = 128, which ran from L2 instead of the
//      instruction cache -- 66-80 us per call on the H100 under Nsight Compute.)
// Knobs: NB (32/64/128), T = 128 (TRSM_THREADS), CH = 32 (TRSM_CHUNK), checked by the Python
// launcher.  Dynamic shared memory: (NB*(NB+4) + NB*T)*4 bytes (133 KB at NB = 128: the
// launcher opts in beyond 48 KB).
// Bound: neither flops nor bytes -- it is latency-bound.  nb^2 ncols flops and (nb^2/2 +
// 2 nb ncols) * 4 bytes are tiny; a thread runs nb^2/2 FMAs (8128 at nb = 128; those of one
// k are independent: ILP) plus ~nb^2/8 shared float4 broadcasts, ~1 instruction per cycle per
// warp scheduler: ~5-10 us for any ncols up to ~17,000 columns (132 SMs x 128 threads).

#include "async_copy.cuh"

#define TRSM_THREADS 128
#define TRSM_CHUNK 32


template <int NB, int T>
__global__ void __launch_bounds__(T)
trsm_llnu(int nb, int ncols, const float* L, long long ldl, float* B, long long ldb)
{
    constexpr int LDS = NB + 4;                 // shared row pitch: float4-aligned columns
    constexpr int CH = TRSM_CHUNK;              // rows per chunk (one register tile)
    static_assert(T == TRSM_THREADS, "the launcher's THREADS");
    static_assert(NB % CH == 0 && NB <= 128, "NB in {32, 64, 96, 128}");
    extern __shared__ float4 trsm_smem[];
    float* sL = reinterpret_cast<float*>(trsm_smem);
    float* xs = sL + NB * LDS;                  // solved rows of every thread's column

    // 1. L's strict lower triangle -> sL (transposed), asynchronously.
    constexpr int KT = NB / 8;                  // 8-column tiles per 4-row band
    for (int e = threadIdx.x; e < (NB / 4) * KT * 32; e += T) {
        const int tile = e >> 5, t = e & 31;
        const int i0 = (tile / KT) * 4, k0 = (tile % KT) * 8;
        if (k0 > i0 + 2)
            continue;                           // the tile lies on or above the diagonal
        const int i = i0 + (t & 3), k = k0 + (t >> 2);
        const bool need = k < i && i < nb;
        cp_async4(sL + k * LDS + i, need ? L + static_cast<long long>(i) * ldl + k : L,
                        need);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");

    const long long col = static_cast<long long>(blockIdx.x) * T + threadIdx.x;
    const bool live = col < ncols;
    float* bc = B + (live ? col : 0);
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    // 2. Left-looking blocked forward substitution over chunks of CH rows; the column never
    //    leaves its thread, so no barrier is needed after the one above.
#pragma unroll 1
    for (int c0 = 0; c0 < nb; c0 += CH) {
        float y[CH];
#pragma unroll
        for (int i = 0; i < CH; ++i)
            y[i] = (live && c0 + i < nb) ? bc[(c0 + i) * ldb] : 0.f;
        // 2a. y -= L(c0:c0+CH, 0:c0) x(0:c0): the solved rows, from shared memory.
#pragma unroll 4
        for (int k = 0; k < c0; ++k) {
            const float xk = xs[k * T + threadIdx.x];
            const float4* lk = reinterpret_cast<const float4*>(sL + k * LDS + c0);
#pragma unroll
            for (int i4 = 0; i4 < CH / 4; ++i4) {
                const float4 l = lk[i4];
                y[4 * i4] = fmaf(-l.x, xk, y[4 * i4]);
                y[4 * i4 + 1] = fmaf(-l.y, xk, y[4 * i4 + 1]);
                y[4 * i4 + 2] = fmaf(-l.z, xk, y[4 * i4 + 2]);
                y[4 * i4 + 3] = fmaf(-l.w, xk, y[4 * i4 + 3]);
            }
        }
        // 2b. The diagonal block (unit diagonal: y[k] is final once columns < k are applied).
#pragma unroll
        for (int k = 0; k < CH - 1; ++k) {
            const float yk = y[k];
            const float4* lk = reinterpret_cast<const float4*>(sL + (c0 + k) * LDS + c0);
#pragma unroll
            for (int i4 = (k + 1) / 4; i4 < CH / 4; ++i4) {
                const float4 l = lk[i4];
                const int i = 4 * i4;
                if (i > k)
                    y[i] = fmaf(-l.x, yk, y[i]);
                if (i + 1 > k)
                    y[i + 1] = fmaf(-l.y, yk, y[i + 1]);
                if (i + 2 > k)
                    y[i + 2] = fmaf(-l.z, yk, y[i + 2]);
                y[i + 3] = fmaf(-l.w, yk, y[i + 3]);
            }
        }
        // 2c. The chunk is solved: keep it for the chunks below, store it (row 0 never changes).
#pragma unroll
        for (int i = 0; i < CH; ++i) {
            xs[(c0 + i) * T + threadIdx.x] = y[i];
            if (live && c0 + i < nb && c0 + i > 0)
                bc[(c0 + i) * ldb] = y[i];
        }
    }
}
