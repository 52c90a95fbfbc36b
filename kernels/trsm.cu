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
// threads; thread t of block b owns column c = b*T + t of B and keeps its NB values in
// registers (x[NB], __launch_bounds__(T)); consecutive threads take consecutive columns, so
// every load and store of a row of B is coalesced.  Per block:
//   1. the strict lower triangle of L goes to shared memory transposed, sL[k*(NB+4) + i] =
//      L(i, k), with 4-byte cp.async (zero-fill outside the triangle, no register staging,
//      all copies in flight at once); a warp copies a 4-row x 8-column tile per instruction:
//      4 full 32-byte sectors from global memory, 32 distinct banks in shared memory (the
//      row pitch NB+4 keeps every column 16-byte aligned);
//   2. meanwhile the thread loads its column of B;
//   3. right-looking forward substitution: for k = 0..nb-2, for i > k: x[i] -= L(i,k) x[k]
//      (L's column k read as float4 broadcasts; the FMAs of one k are independent: ILP);
//   4. rows 1..nb-1 of the column are stored (row 0 is unchanged: unit diagonal).
// Knobs: NB (32/64/128), T = 128 (TRSM_THREADS, checked by the Python launcher).  Dynamic
// shared memory: NB*(NB+4)*4 bytes (67.6 KB at NB = 128: the launcher opts in beyond 48 KB).
// Bound: neither flops nor bytes -- it is latency-bound.  nb^2 ncols flops and (nb^2/2 +
// 2 nb ncols) * 4 bytes are tiny; a thread runs nb^2/2 dependent-in-k FMAs (8128 at nb = 128),
// ~1 instruction per cycle per warp scheduler: ~6 us for any ncols up to ~17,000 columns
// (132 SMs x 128 threads with one warp per scheduler), plus one L2 round trip for L.

#include "async_copy.cuh"

#define TRSM_THREADS 128


template <int NB, int T>
__global__ void __launch_bounds__(T)
trsm_llnu(int nb, int ncols, const float* L, long long ldl, float* B, long long ldb)
{
    constexpr int LDS = NB + 4;                 // shared row pitch: float4-aligned columns
    static_assert(T == TRSM_THREADS, "the launcher's THREADS");
    static_assert(NB % 32 == 0 && NB <= 128, "NB in {32, 64, 96, 128}");
    extern __shared__ float4 trsm_smem[];
    float* sL = reinterpret_cast<float*>(trsm_smem);

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

    // 2. This thread's column of B.
    const long long col = static_cast<long long>(blockIdx.x) * T + threadIdx.x;
    const bool live = col < ncols;
    float* bc = B + (live ? col : 0);
    float x[NB];
    {
        const float* q = bc;
#pragma unroll
        for (int i = 0; i < NB; ++i, q += ldb)
            x[i] = (live && i < nb) ? *q : 0.f;
    }

    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    // 3. Forward substitution (unit diagonal: x[k] is final once the columns < k are applied).
#pragma unroll
    for (int k = 0; k < NB - 1; ++k) {
        if (k >= nb - 1)
            break;                              // uniform
        const float xk = x[k];
        const float4* lk = reinterpret_cast<const float4*>(sL + k * LDS);
#pragma unroll
        for (int i4 = (k + 1) / 4; i4 < NB / 4; ++i4) {
            const float4 l = lk[i4];
            const int i = 4 * i4;
            if (i > k)
                x[i] = fmaf(-l.x, xk, x[i]);
            if (i + 1 > k)
                x[i + 1] = fmaf(-l.y, xk, x[i + 1]);
            if (i + 2 > k)
                x[i + 2] = fmaf(-l.z, xk, x[i + 2]);
            x[i + 3] = fmaf(-l.w, xk, x[i + 3]);
        }
    }

    // 4. Rows 1..nb-1 back.  (The empty asm hides the pointer's history, so the compiler
    //    walks the rows again instead of keeping NB row addresses alive since step 2.)
    if (live) {
        float* q = bc;
        long long ld = ldb;
        asm volatile("" : "+l"(q), "+l"(ld));
#pragma unroll
        for (int i = 1; i < NB; ++i)
            if (i < nb)
                q[i * ld] = x[i];
    }
}
