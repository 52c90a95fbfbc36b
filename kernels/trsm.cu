// trsm.cu -- triangular solve from the left, in place (BLAS strsm / dtrsm with side = 'L',
// trans = 'N', alpha = 1), for a unit lower or a non-unit upper triangular matrix:
//     trsm_left<T, NB, false>:  B := L^{-1} B,   L nb x nb unit lower triangular (uplo 'L',
//                                                 diag 'U'), B nb x ncols;
//     trsm_left<T, NB, true>:   B := U^{-1} B,   U nb x nb upper triangular (uplo 'U',
//                                                 diag 'N').
// The upper solve is the lower one on the reversed matrices: with J the reversal of nb rows,
// U^{-1} B = J (J U J)^{-1} (J B), and J U J is lower triangular.  Its caller passes U and B
// by the address of their LAST row (U's last diagonal element, B's last row of the strip):
// the kernel steps through both with negated row (and, for U, column) strides, so every
// statement below about L(i, k) and row r holds for L = J U J and J B.  The non-unit
// diagonal divides each solved value once (LAPACK's trsm divides too).
// One source for both element types: T = float or double (every operation below is in T).
// Unlike BLAS, both are stored row-wise: L(i, k) = L[i*ldl + k], B(i, c) = B[i*ldb + c] (ldl,
// ldb 64-bit, in elements, any values >= the row lengths), so L can be the diagonal block of a
// row-major LU (the driver's L11 = A[j0:j1, j0:j1]) and B a column strip of the same matrix
// (U12).  Only the strict lower triangle of L is read: its diagonal and upper part (U11 in the
// LU) are never touched, whatever they hold (NaN included).
//
// trsm_left<T, NB, UP>: nb <= NB (NB a multiple of 32 up to 128: template; gpulinalg/lu/trsm.py
// picks the smallest of its NB_SHAPES that fits -- float 32, 64, 128; double 32, 64, 96 -- and
// blocks larger nb as trsm(NBMAX) + GEMM + trsm(NBMAX) + ...).  A block of TRSM_THREADS = 256
// threads (8 warps) owns TRSM_COLS = 32 columns of B (lane = column) and all nb rows:
//   1. the strict lower triangle of L goes to shared memory transposed, sL[k*(NB+4) + i] =
//      L(i, k), and the block's strip of B to Bs[r*32 + c], with one-element cp.async (4 or 8
//      bytes; zero-fill outside the triangle and past the last row or column; a warp copies a
//      4-row x 8-column tile of L per instruction: 4 rows of 32 (float) or 64 (double)
//      contiguous bytes, on 32 distinct banks (double: per half-warp); a row segment of B);
//   2. right-looking blocked forward substitution in chunks of CH = 32 rows: warp 0 solves
//      the chunk against its unit lower 32 x 32 diagonal block (each lane its column in
//      registers, four consecutive entries of L's columns as shared-memory broadcasts: one
//      float4, or two double2); barrier; the 8 warps apply the chunk to the rows below in
//      tasks of 4 rows (acc -= L(r:r+4, c0:c0+32) x, the chunk's 32 solved values of the
//      lane's column in registers); barrier;
//   3. the strip back to B: rows 1..nb-1 (row 0 never changes under a unit diagonal), every
//      row for UP.
// Every element receives the FMAs of a column-oriented forward substitution, k ascending, so
// the result is that of the plain algorithm in T, bit for bit.
// Knobs: NB, TRSM_THREADS = 256, TRSM_COLS = 32, TRSM_CHUNK = 32, checked by the Python
// launcher.  Dynamic shared memory (NB*(NB+4) + NB*32) * sizeof(T) bytes (UP keeps the
// diagonal in the first of each transposed row's 4 padding elements): float 84 KB at
// NB = 128, double 99 KB at NB = 96 (two blocks per SM of 228 KB on sm_90, and within the
// 99 KB a block may opt in to on sm_86/89/120; double at NB = 128 would need 164 KB: one block
// per SM, and more than sm_80's 163 KB).  The launcher opts in beyond 48 KB.
// Bound: latency.  nb^2 ncols flops and (nb^2/2 + 2 nb ncols) * sizeof(T) bytes (4 bytes per
// element for float, 8 for double) are tiny for the LU's shapes; the critical path of a block
// is nb/32 diagonal solves of one warp (31 dependent steps each) and one 4-row task per warp
// between barriers.

#include "async_copy.cuh"

#define TRSM_THREADS 256
#define TRSM_COLS 32
#define TRSM_CHUNK 32

// *dst = *src, one element (4 or 8 bytes) global -> shared by cp.async; zeros where !ok.
template <typename T>
__device__ __forceinline__ void cp_async_elem(T* dst, const T* src, bool ok)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    if constexpr (sizeof(T) == 4)
        cp_async4(dst, src, ok);
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n"
                     :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 8 : 0));
}

// Four consecutive elements of shared memory (16-byte aligned), read as broadcasts: one float4,
// or two double2 for double.
template <typename T> struct Four;
template <> struct Four<float> {
    using type = float4;
    static __device__ __forceinline__ float4 load(const float* p)
    {
        return *reinterpret_cast<const float4*>(p);
    }
};
template <> struct Four<double> {
    struct type { double x, y, z, w; };
    static __device__ __forceinline__ type load(const double* p)
    {
        const double2 a = reinterpret_cast<const double2*>(p)[0];
        const double2 b = reinterpret_cast<const double2*>(p)[1];
        return {a.x, a.y, b.x, b.y};
    }
};

// a * b + c rounded once, in T.
__device__ __forceinline__ float fma_t(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fma_t(double a, double b, double c) { return fma(a, b, c); }

// L's strict lower triangle (rows i < nb) -> sL transposed, sL[k*(NB+4) + i] = L(i, k), by
// one-element cp.async from the TH threads of the block (zero-fill below the diagonal past row
// nb; tiles on or above the diagonal are not written).  The caller commits and waits.
template <typename T, int NB, int TH, int S>
__device__ __forceinline__ void load_lower_transposed(T* sL, int nb, const T* L, long long ldl)
{
    constexpr int LDS = NB + 4;
    constexpr int KT = NB / 8;                  // 8-column tiles per 4-row band
    for (int e = threadIdx.x; e < (NB / 4) * KT * 32; e += TH) {
        const int tile = e >> 5, t = e & 31;
        const int i0 = (tile / KT) * 4, k0 = (tile % KT) * 8;
        if (k0 > i0 + 2)
            continue;                           // the tile lies on or above the diagonal
        const int i = i0 + (t & 3), k = k0 + (t >> 2);
        const bool need = k < i && i < nb;
        cp_async_elem(sL + k * LDS + i, need ? L + S * (static_cast<long long>(i) * ldl + k) : L,
                      need);
    }
}

// The 32 x 32 lower diagonal block of rows c0:c0+CH applied to y (one column, in
// registers): y[i] -= L(c0+i, c0+k) y[k] for k < i, k in order, each y[k] first divided by
// L(c0+k, c0+k) where the diagonal is not unit (UP: held in sL's padding column, sD[j] =
// sL[j*LDS + LDS - 4]); L's columns four entries at a time (Four) as broadcasts from the
// transposed sL.
template <typename T, int LDS, int CH, bool UP>
__device__ __forceinline__ void solve_diagonal_block(T (&y)[CH], const T* sL, int c0)
{
    const T* sD = sL + LDS - 4;                 // sD[j * LDS]: the diagonal (UP)
#pragma unroll
    for (int k = 0; k < CH - 1; ++k) {
        if constexpr (UP)
            y[k] = y[k] / sD[(c0 + k) * LDS];
        const T yk = y[k];
        const T* lk = sL + (c0 + k) * LDS + c0;
#pragma unroll
        for (int i4 = (k + 1) / 4; i4 < CH / 4; ++i4) {
            const auto l = Four<T>::load(lk + 4 * i4);
            const int i = 4 * i4;
            if (i > k)
                y[i] = fma_t(-l.x, yk, y[i]);
            if (i + 1 > k)
                y[i + 1] = fma_t(-l.y, yk, y[i + 1]);
            if (i + 2 > k)
                y[i + 2] = fma_t(-l.z, yk, y[i + 2]);
            y[i + 3] = fma_t(-l.w, yk, y[i + 3]);
        }
    }
    if constexpr (UP)
        y[CH - 1] = y[CH - 1] / sD[(c0 + CH - 1) * LDS];
}

template <typename T, int NB, bool UP>
__global__ void __launch_bounds__(TRSM_THREADS)
trsm_left(int nb, int ncols, const T* L, long long ldl, T* B, long long ldb)
{
    constexpr int TH = TRSM_THREADS, CW = TRSM_COLS, CH = TRSM_CHUNK;
    constexpr int LDS = NB + 4, WARPS = TH / 32;
    constexpr int S = UP ? -1 : 1;              // the row (and L's column) stride's sign
    static_assert(CW == 32 && NB % CH == 0 && NB <= 128, "lane = column; NB in {32..128}");
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    extern __shared__ float4 trsm_smem[];
    T* sL = reinterpret_cast<T*>(trsm_smem);
    T* Bs = sL + NB * LDS;                      // Bs[r*CW + c] = B(r, col0 + c)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long col0 = static_cast<long long>(blockIdx.x) * CW;

    load_lower_transposed<T, NB, TH, S>(sL, nb, L, ldl);
    for (int e = threadIdx.x; e < NB * CW; e += TH) {   // a warp copies 32 elements of a row
        const int r = e / CW, c = e % CW;
        const bool in = r < nb && col0 + c < ncols;
        cp_async_elem(Bs + e, in ? B + S * r * ldb + col0 + c : B, in);
    }
    if constexpr (UP) {   // the diagonal into sL's padding column (1 past nb)
        for (int i = threadIdx.x; i < NB; i += TH)
            sL[i * LDS + NB] = i < nb ? L[S * (static_cast<long long>(i) * ldl + i)] : T(1);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    const int rows = (nb + CH - 1) / CH * CH;   // whole chunks (padding rows stay 0)
#pragma unroll 1
    for (int c0 = 0; c0 < rows; c0 += CH) {
        if (warp == 0) {
            T y[CH];
#pragma unroll
            for (int i = 0; i < CH; ++i) y[i] = Bs[(c0 + i) * CW + lane];
            solve_diagonal_block<T, LDS, CH, UP>(y, sL, c0);
#pragma unroll
            for (int i = 0; i < CH; ++i) Bs[(c0 + i) * CW + lane] = y[i];
        }
        __syncthreads();
        if (c0 + CH >= rows)
            break;
        const int tasks = (rows - c0 - CH) / 4;
        if (warp < tasks) {
            T x[CH];
#pragma unroll
            for (int k = 0; k < CH; ++k) x[k] = Bs[(c0 + k) * CW + lane];
#pragma unroll 1
            for (int t = warp; t < tasks; t += WARPS) {
                const int r = c0 + CH + 4 * t;
                T acc[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[q] = Bs[(r + q) * CW + lane];
#pragma unroll
                for (int k = 0; k < CH; ++k) {
                    const auto l = Four<T>::load(sL + (c0 + k) * LDS + r);
                    acc[0] = fma_t(-l.x, x[k], acc[0]);
                    acc[1] = fma_t(-l.y, x[k], acc[1]);
                    acc[2] = fma_t(-l.z, x[k], acc[2]);
                    acc[3] = fma_t(-l.w, x[k], acc[3]);
                }
#pragma unroll
                for (int q = 0; q < 4; ++q) Bs[(r + q) * CW + lane] = acc[q];
            }
        }
        __syncthreads();
    }
    // The strip back (row 0 only where the diagonal is not unit); a warp stores 32 elements
    // of a row.
    for (int e = (UP ? 0 : CW) + threadIdx.x; e < nb * CW; e += TH) {
        const int r = e / CW, c = e % CW;
        if (col0 + c < ncols)
            B[S * r * ldb + col0 + c] = Bs[e];
    }
}
