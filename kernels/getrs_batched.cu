// getrs_batched.cu -- solves with a stack of LU factors, one warp per system and right-hand
// side, in one launch (LAPACK xgetrs for each matrix of a stack, trans = 'N' or 'T'):
//     trans 0:  X_b(:, c) := U_b^{-1} L_b^{-1} P_b B_b(:, c),
//     trans 1:  X_b(:, c) := P_b^T L_b^{-T} U_b^{-T} B_b(:, c)     (A_b^T x = b),
// b < batch, c < nrhs, for the factors of lu_factor of a stack: lu (batch, n, n), L unit
// lower (strict lower triangle), U upper with the diagonal, piv (batch, n) 0-BASED
// interchanges (row k with row piv[k], k ascending, as scipy.linalg.lu_factor's).  One source
// for T = float and double (real: A^T is also A^H), every operation in T.
// Storage: unlike LAPACK, lu is ROW-MAJOR and packed: L(i, k) = lu[(b*n + i)*n + k]; B is
// (batch, n, nrhs) row-major and packed, overwritten by X.  The caller checks the pivots'
// range (0 <= piv < n) and n <= NMAX, and keeps batch * nrhs below 2^31 per launch.
// getrs_batched<T, NMAX>: warp w = blockIdx.x * GETRS_WARPS + warp-in-block takes system
// b = w / nrhs, column c = w % nrhs.  Lane l holds x_i for rows i = l + 32a (a < NMAX/32) in
// registers.  Interchanges (trans 0: k = 0 .. n-1 before the solves; trans 1: k = n-1 .. 0
// after them): the two values are read by shuffles from their lanes (the slot chosen among
// NMAX/32 by selects, no local memory) and written back by their owners.  A solve with a
// unit triangle: x_k is final, broadcast by a shuffle from its lane, and every lane subtracts
// T(i, k) x_k from its rows i past k; with U (or U^T) the owner first divides x_k by U(k, k)
// (IEEE division, as LAPACK's trsv).  trans 0: L forward (L(i, k): the lane's own row, each
// row's cache lines serve consecutive k), U backward.  trans 1: U^T forward and L^T backward,
// both reading row k of the factors (T^T(i, k) = T(k, i): consecutive lanes on consecutive
// addresses).  Each update is one fused multiply-add.
// Knobs: NMAX (32, 64, 128: template; gpulinalg/lu/getrs_batched.py takes the smallest
// >= n), GETRS_WARPS = 4 warps per block.
// Bound: latency.  3n dependent steps per warp (interchange, forward, back: a shuffle and a
// few instructions each) with the factors' n^2 elements read once per right-hand side (L1/L2
// serve the nrhs warps of one system); a stack of B systems of order n with one right-hand
// side reads B n^2 sizeof(T) bytes (10000 x 64^2 float: 164 MB, ~40 us at 4 TB/s).

#define GETRS_WARPS 4

template <int NA, typename T>
__device__ __forceinline__ T getrs_slot(const T (&x)[NA], int a)
{
    T r = x[0];
#pragma unroll
    for (int s = 1; s < NA; ++s)
        if (s == a)
            r = x[s];
    return r;
}

template <int NA, typename T>
__device__ __forceinline__ void getrs_set(T (&x)[NA], int a, T v)
{
#pragma unroll
    for (int s = 0; s < NA; ++s)
        if (s == a)
            x[s] = v;
}

// rows k <-> q of the solution held NA values per lane (k != q: uniform over the warp)
template <int NA, typename T>
__device__ __forceinline__ void getrs_swap(T (&x)[NA], int k, int q, int lane)
{
    const T vk = __shfl_sync(0xffffffffu, getrs_slot(x, k >> 5), k & 31);
    const T vq = __shfl_sync(0xffffffffu, getrs_slot(x, q >> 5), q & 31);
    if (lane == (k & 31))
        getrs_set(x, k >> 5, vq);
    if (lane == (q & 31))
        getrs_set(x, q >> 5, vk);
}

// One substitution with the triangle of A (n x n, row-major) held as the solution's NA values
// per lane: FORWARD (k ascending, rows i > k updated) or backward (k descending, rows i < k);
// DIVIDE: the owner of x_k first divides it by A(k, k) (the U passes); TRANSPOSED: the
// triangle's (i, k) element is A(k, i) (row k: coalesced), else A(i, k).
template <bool FORWARD, bool DIVIDE, bool TRANSPOSED, int NA, typename T>
__device__ __forceinline__ void getrs_pass(T (&x)[NA], const T* A, int n, int lane)
{
#pragma unroll
    for (int s0 = 0; s0 < NA; ++s0) {
        const int a0 = FORWARD ? s0 : NA - 1 - s0;
        for (int s = 0; s < 32; ++s) {
            const int j = FORWARD ? s : 31 - s;
            const int k = 32 * a0 + j;
            if (k >= n)
                continue;                                   // uniform
            if (DIVIDE && lane == j)
                x[a0] = x[a0] / A[static_cast<long long>(k) * n + k];
            const T xk = __shfl_sync(0xffffffffu, x[a0], j);
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const int i = lane + 32 * a;
                if ((FORWARD ? a >= a0 && i > k && i < n : a <= a0 && i < k)) {
                    const T t = TRANSPOSED ? A[static_cast<long long>(k) * n + i]
                                           : A[static_cast<long long>(i) * n + k];
                    x[a] = fma(-t, xk, x[a]);
                }
            }
        }
    }
}

template <typename T, int NMAX>
__global__ void __launch_bounds__(32 * GETRS_WARPS)
getrs_batched(int batch, int n, int nrhs, const T* __restrict__ lu, const int* __restrict__ piv,
              T* __restrict__ B, int trans)
{
    constexpr int NA = NMAX / 32;                       // rows per lane
    static_assert(NMAX % 32 == 0 && NMAX <= 128, "NMAX: 32, 64 or 128");
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int w = static_cast<int>(blockIdx.x) * GETRS_WARPS
                  + (static_cast<int>(threadIdx.x) >> 5);
    if (w >= batch * nrhs)
        return;                                         // whole warps: uniform
    const long long b = w / nrhs;                       // 32-bit: batch * nrhs < 2^31
    const int c = w % nrhs;
    const T* A = lu + b * n * n;
    const int* p = piv + b * n;
    T* X = B + b * n * nrhs + c;

    T x[NA];
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const int i = lane + 32 * a;
        x[a] = i < n ? X[static_cast<long long>(i) * nrhs] : T(0);
    }
    if (trans) {
        getrs_pass<true, true, true>(x, A, n, lane);        // U^T y = b
        getrs_pass<false, false, true>(x, A, n, lane);      // L^T z = y
        for (int k = n - 1; k >= 0; --k) {                  // x = P^T z: in reverse order
            const int q = p[k];
            if (q != k)                                     // uniform
                getrs_swap(x, k, q, lane);
        }
    } else {
        for (int k = 0; k < n; ++k) {                       // P b: the interchanges in order
            const int q = p[k];
            if (q != k)                                     // uniform
                getrs_swap(x, k, q, lane);
        }
        getrs_pass<true, false, false>(x, A, n, lane);      // L y = P b
        getrs_pass<false, true, false>(x, A, n, lane);      // U x = y
    }
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const int i = lane + 32 * a;
        if (i < n)
            X[static_cast<long long>(i) * nrhs] = x[a];
    }
}
