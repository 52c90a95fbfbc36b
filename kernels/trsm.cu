// trsm.cu -- triangular solve with a unit lower triangular matrix, in place (BLAS strsm with
// side = 'L', uplo = 'L', trans = 'N', diag = 'U', alpha = 1):
//     B := L^{-1} B,   L nb x nb unit lower triangular, B nb x ncols.
// Unlike BLAS, both are stored row-wise: L(i, k) = L[i*ldl + k], B(i, c) = B[i*ldb + c] (ldl,
// ldb 64-bit, any values >= the row lengths), so L can be the diagonal block of a row-major LU
// (the driver's L11 = A[j0:j1, j0:j1]) and B a column strip of the same matrix (U12).  Only the
// strict lower triangle of L is read: its diagonal and upper part (U11 in the LU) are never
// touched, whatever they hold (NaN included).
//
// trsm_llnu<NB>: nb <= NB (NB = 32, 64, 128: template; gpulinalg/lu/trsm.py picks the smallest
// that fits and blocks larger nb as trsm(128) + SGEMM + trsm(128) + ...).  A block of
// TRSM_THREADS = 256 threads (8 warps) owns TRSM_COLS = 32 columns of B (lane = column) and all
// nb rows:
//   1. the strict lower triangle of L goes to shared memory transposed, sL[k*(NB+4) + i] =
//      L(i, k), and the block's strip of B to Bs[r*32 + c], with 4-byte cp.async (zero-fill
//      outside the triangle and past the last row or column; a warp copies a 4-row x 8-column
//      tile of L per instruction: 4 full 32-byte sectors, 32 distinct banks; a 128-byte row
//      segment of B);
//   2. right-looking blocked forward substitution in chunks of CH = 32 rows: warp 0 solves
//      the chunk against its unit lower 32 x 32 diagonal block (each lane its column in
//      registers, L's columns as float4 broadcasts); barrier; the 8 warps apply the chunk to
//      the rows below in tasks of 4 rows (acc -= L(r:r+4, c0:c0+32) x, the chunk's 32 solved
//      values of the lane's column in registers); barrier;
//   3. rows 1..nb-1 of the strip back to B (row 0 never changes).
// Every element receives the FMAs of a column-oriented forward substitution, k ascending, so
// the result is that of the plain algorithm, bit for bit.
// Knobs: NB (32/64/128), TRSM_THREADS = 256, TRSM_COLS = 32, TRSM_CHUNK = 32, checked by the
// Python launcher.  Dynamic shared memory (NB*(NB+4) + NB*32)*4 bytes (84 KB at NB = 128: two
// blocks per SM; the launcher opts in beyond 48 KB).
// Bound: latency.  nb^2 ncols flops and (nb^2/2 + 2 nb ncols) * 4 bytes are tiny for the LU's
// shapes; the critical path of a block is nb/32 diagonal solves of one warp (31 dependent
// steps each) and one 4-row task per warp between barriers.

#include "async_copy.cuh"

#define TRSM_THREADS 256
#define TRSM_COLS 32
#define TRSM_CHUNK 32

// L's strict lower triangle (rows i < nb) -> sL transposed, sL[k*(NB+4) + i] = L(i, k), by
// 4-byte cp.async from the T threads of the block (zero-fill below the diagonal past row nb;
// tiles on or above the diagonal are not written).  The caller commits and waits.
template <int NB, int T>
__device__ __forceinline__ void load_lower_transposed(float* sL, int nb, const float* L,
                                                      long long ldl)
{
    constexpr int LDS = NB + 4;
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
}

// The 32 x 32 unit lower diagonal block of rows c0:c0+CH applied to y (one column, in
// registers): y[i] -= L(c0+i, c0+k) y[k] for k < i, k in order; L's columns as float4
// broadcasts from the transposed sL.
template <int LDS, int CH>
__device__ __forceinline__ void solve_diagonal_block(float (&y)[CH], const float* sL, int c0)
{
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
}

template <int NB>
__global__ void __launch_bounds__(TRSM_THREADS)
trsm_llnu(int nb, int ncols, const float* L, long long ldl, float* B, long long ldb)
{
    constexpr int T = TRSM_THREADS, CW = TRSM_COLS, CH = TRSM_CHUNK;
    constexpr int LDS = NB + 4, WARPS = T / 32;
    static_assert(CW == 32 && NB % CH == 0 && NB <= 128, "lane = column; NB in {32..128}");
    extern __shared__ float4 trsm_smem[];
    float* sL = reinterpret_cast<float*>(trsm_smem);
    float* Bs = sL + NB * LDS;                  // Bs[r*CW + c] = B(r, col0 + c)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long col0 = static_cast<long long>(blockIdx.x) * CW;

    load_lower_transposed<NB, T>(sL, nb, L, ldl);
    for (int e = threadIdx.x; e < NB * CW; e += T) {   // a warp copies 128 bytes of a row
        const int r = e / CW, c = e % CW;
        const bool in = r < nb && col0 + c < ncols;
        cp_async4(Bs + e, in ? B + r * ldb + col0 + c : B, in);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    const int rows = (nb + CH - 1) / CH * CH;   // whole chunks (padding rows stay 0)
#pragma unroll 1
    for (int c0 = 0; c0 < rows; c0 += CH) {
        if (warp == 0) {
            float y[CH];
#pragma unroll
            for (int i = 0; i < CH; ++i) y[i] = Bs[(c0 + i) * CW + lane];
            solve_diagonal_block<LDS>(y, sL, c0);
#pragma unroll
            for (int i = 0; i < CH; ++i) Bs[(c0 + i) * CW + lane] = y[i];
        }
        __syncthreads();
        if (c0 + CH >= rows)
            break;
        const int tasks = (rows - c0 - CH) / 4;
        if (warp < tasks) {
            float x[CH];
#pragma unroll
            for (int k = 0; k < CH; ++k) x[k] = Bs[(c0 + k) * CW + lane];
#pragma unroll 1
            for (int t = warp; t < tasks; t += WARPS) {
                const int r = c0 + CH + 4 * t;
                float acc[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[q] = Bs[(r + q) * CW + lane];
#pragma unroll
                for (int k = 0; k < CH; ++k) {
                    const float4 l = *reinterpret_cast<const float4*>(sL + (c0 + k) * LDS + r);
                    acc[0] = fmaf(-l.x, x[k], acc[0]);
                    acc[1] = fmaf(-l.y, x[k], acc[1]);
                    acc[2] = fmaf(-l.z, x[k], acc[2]);
                    acc[3] = fmaf(-l.w, x[k], acc[3]);
                }
#pragma unroll
                for (int q = 0; q < 4; ++q) Bs[(r + q) * CW + lane] = acc[q];
            }
        }
        __syncthreads();
    }
    // Rows 1..nb-1 back (row 0 never changes); a warp stores 128 bytes of a row.
    for (int e = CW + threadIdx.x; e < nb * CW; e += T) {
        const int r = e / CW, c = e % CW;
        if (col0 + c < ncols)
            B[r * ldb + col0 + c] = Bs[e];
    }
}
