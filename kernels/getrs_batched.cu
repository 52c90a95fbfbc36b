// getrs_batched.cu -- solves with a stack of LU factors, one warp per system and right-hand
// side, in one launch (LAPACK xgetrs for each matrix of a stack, trans = 'N' or 'T'):
//     trans 0:  X_b(:, c) := U_b^{-1} L_b^{-1} P_b B_b(:, c),
//     trans 1:  X_b(:, c) := P_b^T L_b^{-T} U_b^{-T} B_b(:, c)     (A_b^T x = b),
// b < batch, c < nrhs, for the factors of lu_factor of a stack: lu (batch, n, n), L unit
// lower (strict lower triangle), U upper with the diagonal, piv (batch, n) 0-BASED
// interchanges (row k with row piv[k], k ascending, as scipy.linalg.lu_factor's).  One source
// for T = float and double (real: A^T is also A^H), every operation in T.
// Storage: unlike LAPACK, lu is ROW-MAJOR and packed: L(i, k) = lu[(b*n + i)*n + k]; B is
// (batch, n, nrhs) row-major and packed, overwritten by X.  The caller checks n <= NMAX and
// keeps batch * nrhs below 2^31 per launch.
// Checks (getrs_batched and getrs_tiled), reported through two ints of host-mapped memory
// (gpulinalg/core/mapped.py: a store of the call's `gen`, nothing to reset): flags[0] where a
// pivot lies outside [0, n) (that interchange is skipped: no access leaves the arrays),
// flags[1] where B holds an inf or NaN.
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

#include "getrf_pivot.cuh"

#define GETRS_WARPS 4

// flags[0] := gen where one of the n pivots p lies outside [0, n) (the warp reads them all).
__device__ __forceinline__ void getrs_check_pivots(const int* p, int n, int lane, int* flags,
                                                   int gen)
{
    bool bad = false;
    for (int i = lane; i < n; i += 32)
        bad |= p[i] < 0 || p[i] >= n;
    if (bad)
        flags[0] = gen;
}

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
// DIVIDE: the owner of x_k first divides it by A(k, k) (the U passes; RECIP: multiplies
// it by rd, the reciprocals of its rows' diagonal, no division on the way); TRANSPOSED: the
// triangle's (i, k) element is A(k, i) (row k: coalesced), else A(i, k).
template <bool FORWARD, bool DIVIDE, bool TRANSPOSED, bool RECIP, int NA, typename T>
__device__ __forceinline__ void getrs_pass(T (&x)[NA], const T* A, int n, int lane,
                                           const T (&rd)[NA])
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
                x[a0] = RECIP ? x[a0] * rd[a0] : x[a0] / A[static_cast<long long>(k) * n + k];
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

// x := op(A)^{-1} x for A = P L U (trans 0: A, else A^T), x held NA values per lane; U's
// divisions IEEE, or (RECIP) products with rd (see getrs_pass)
template <bool RECIP, int NA, typename T>
__device__ __forceinline__ void getrs_solve(T (&x)[NA], const T* A, const int* p, int n,
                                            int lane, bool trans, const T (&rd)[NA])
{
    if (trans) {
        getrs_pass<true, true, true, RECIP>(x, A, n, lane, rd);     // U^T y = b
        getrs_pass<false, false, true, RECIP>(x, A, n, lane, rd);   // L^T z = y
        for (int k = n - 1; k >= 0; --k) {                  // x = P^T z: in reverse order
            const int q = p[k];
            if (q != k && q >= 0 && q < n)                  // uniform
                getrs_swap(x, k, q, lane);
        }
    } else {
        for (int k = 0; k < n; ++k) {                       // P b: the interchanges in order
            const int q = p[k];
            if (q != k && q >= 0 && q < n)                  // uniform
                getrs_swap(x, k, q, lane);
        }
        getrs_pass<true, false, false, RECIP>(x, A, n, lane, rd);   // L y = P b
        getrs_pass<false, true, false, RECIP>(x, A, n, lane, rd);   // U x = y
    }
}

template <typename T, int NMAX>
__global__ void __launch_bounds__(32 * GETRS_WARPS)
getrs_batched(int batch, int n, int nrhs, const T* __restrict__ lu, const int* __restrict__ piv,
              T* __restrict__ B, int trans, int* flags, int gen)
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
        if (!lu_elem<T>::finite(x[a]))
            flags[1] = gen;
    }
    getrs_check_pivots(p, n, lane, flags, gen);
    getrs_solve<false>(x, A, p, n, lane, trans, x);
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const int i = lane + 32 * a;
        if (i < n)
            X[static_cast<long long>(i) * nrhs] = x[a];
    }
}

// 1 / x without a division's slow-path call (whose calling convention keeps live values in
// local memory): the hardware's approximate reciprocal refined by Newton steps r += r (1 - x r)
// (float: one, from 1 ulp; double: two, from ~2^-22), within an ulp of the IEEE quotient.
// Zero gives a signed infinity and infinity zero (no Newton step there); a float64 diagonal
// below 2^-1022 in magnitude reads as zero (ftz), whose IEEE reciprocal overflows or nearly so.
__device__ __forceinline__ float gecon_recip(float x)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
#else
    const float r = 1.0f / x;     // the CPU emulation (tests/kernel_emulation.py)
#endif
    return r - r != 0.0f || r == 0.0f ? r : fmaf(r, fmaf(-x, r, 1.0f), r);   // inf, NaN, 0
}
__device__ __forceinline__ double gecon_recip(double x)
{
#ifdef __CUDA_ARCH__
    double r;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(x));
#else
    double r = 1.0 / x;
#endif
    if (r - r != 0.0 || r == 0.0)                           // inf, NaN, 0
        return r;
    r = fma(r, fma(-x, r, 1.0), r);
    return fma(r, fma(-x, r, 1.0), r);
}

// The sum over the warp of one value per lane (xor butterfly: every lane gets the sum).
template <typename T>
__device__ __forceinline__ T gecon_sum(T v)
{
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

// gecon_batched<T, NMAX>(batch, n, lu, piv, est, inv_n, inv_step): est[b] := xlacn2's estimate of
// ||A_b^{-1}||_1 (Hager's method as refined by Higham) from the factors of a stack (as
// getrs_batched's), one warp per matrix with its vectors in registers: x = (1/n, ...); up to 5
// steps of y = A^{-1} x (stop where sign(y) repeats or sum |y| does not grow; the estimate is
// the last sum), z = A^{-T} sign(y), j = the first index of max |z| (stop where |z_j| is no
// larger than z at the last j), x = e_j; then the larger of that and 2 sum |A^{-1} v| / 3n for
// Higham's alternating vector v_i = (-1)^i (1 + i / (n - 1)).  Real T only; the sums are warp
// reductions in T, U's divisions products with its diagonal's reciprocals; inv_n = 1 / n and
// inv_step = 1 / max(n - 1, 1) come from the host (no division in the kernel).  One launch
// for the whole stack: the condition estimate of a batched solve.
template <typename T, int NMAX>
__global__ void __launch_bounds__(32 * GETRS_WARPS)
gecon_batched(int batch, int n, const T* __restrict__ lu, const int* __restrict__ piv,
              double* __restrict__ est_out, double inv_n, double inv_step)
{
    constexpr int NA = NMAX / 32;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int w = static_cast<int>(blockIdx.x) * GETRS_WARPS
                  + (static_cast<int>(threadIdx.x) >> 5);
    if (w >= batch)
        return;                                         // whole warps: uniform
    const T* A = lu + static_cast<long long>(w) * n * n;
    const int* p = piv + static_cast<long long>(w) * n;

    // One solve per pass of the loop (one inlined copy of the solves): `trans` says which.
    // U's diagonal as reciprocals, formed once here without a division (gecon_recip): the
    // estimate needs no IEEE quotients, and no slow-path call keeps values in local memory.
    T v[NA], xi[NA], rd[NA];
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const int i = lane + 32 * a;
        v[a] = i < n ? T(inv_n) : T(0);
        xi[a] = T(0);
        rd[a] = i < n ? gecon_recip(A[static_cast<long long>(i) * n + i]) : T(0);
    }
    T est = T(0);
    int it = 0, jold = 0;
    bool trans = false, last = false;
    double alt = 0.0;
    for (;;) {
        getrs_solve<true>(v, A, p, n, lane, trans, rd);
        if (last) {                                     // v = A^{-1} (alternating vector)
            T part = T(0);
#pragma unroll
            for (int a = 0; a < NA; ++a)
                part += fabs(v[a]);
            alt = static_cast<double>(gecon_sum(part)) * inv_n * (2.0 / 3.0);
            break;
        }
        bool done;
        if (!trans) {                                   // v = y = A^{-1} x
            T part = T(0);
            bool same = true;
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const T sg = lane + 32 * a < n ? (v[a] >= T(0) ? T(1) : T(-1)) : T(0);
                part += fabs(v[a]);
                same &= sg == xi[a];
                v[a] = sg;
            }
            const T sum = gecon_sum(part);
            same = __all_sync(0xffffffffu, same);
            done = it > 0 && (sum <= est || same);
            est = sum;
#pragma unroll
            for (int a = 0; a < NA; ++a)
                xi[a] = v[a];                           // next: z = A^{-T} sign(y)
        } else {                                        // v = z: the first index of max |z|
            T best = T(-1);
            int arg = 0;
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const int i = lane + 32 * a;
                if (i < n && fabs(v[a]) > best) {
                    best = fabs(v[a]);
                    arg = i;
                }
            }
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1) {
                const T ob = __shfl_xor_sync(0xffffffffu, best, m);
                const int oa = __shfl_xor_sync(0xffffffffu, arg, m);
                if (ob > best || (ob == best && oa < arg)) {
                    best = ob;
                    arg = oa;
                }
            }
            const T zold = __shfl_sync(0xffffffffu, getrs_slot(v, jold >> 5), jold & 31);
            done = (it > 0 && best <= zold) || it == 4;
            jold = arg;
            ++it;
#pragma unroll
            for (int a = 0; a < NA; ++a)
                v[a] = lane + 32 * a == arg ? T(1) : T(0);   // next: y = A^{-1} e_j
        }
        trans = !trans;
        if (done) {                                     // uniform: Higham's vector next
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const int i = lane + 32 * a;
                const double alt_i = (i & 1 ? -1.0 : 1.0) * (1.0 + i * inv_step);
                v[a] = i < n ? T(alt_i) : T(0);
            }
            trans = false;
            last = true;
        }
    }
    if (lane == 0)
        est_out[w] = fmax(static_cast<double>(est), alt);
}

// getrs_tiled<T, R>(batch, n, nrhs, lu, piv, B, trans): getrs_batched's solve for orders up to
// GRT_MAXN, where the solution no longer fits a warp's registers.  One warp (the block) per
// system b and group of R right-hand sides c0 .. c0 + R - 1; the group's solution lives in
// shared memory (xs, rows padded to a multiple of 32 with zeros), with the pivots.  Each
// substitution runs over 32-row chunks in solve order: a chunk's rows start as xs, take the
// products with the 32 x 32 tiles of op(T) left of the diagonal (forward; right of it
// backward: a GEMV, the warp's lanes the chunk's rows, the tile's columns in sequence), then
// the diagonal tile is solved in registers (the owner of row j divides by op(T)(j, j) for U,
// IEEE; a shuffle broadcasts x_j; the rows after it, or before it, subtract).  Each tile is
// read from global memory with coalesced rows (lane = column) into registers one tile ahead,
// then stored to a padded shared tile (pitch 33) from which op(T) is read by row or by column:
// trans 0 reads L and U as stored, trans 1 the tiles of U^T and L^T, which are U's and L's
// tiles read by column.  The interchanges: lane r < R swaps column r's rows in xs, k in order
// (trans 0, before the solves) or reversed (trans 1, after them).
// Bound: latency per warp: the n^2 / 512 tiles of the two solves each cost a global load
// (hidden behind the previous tile's products) and 32 dependent steps of R fused multiply-adds;
// a stack of B systems reads B n^2 sizeof(T) bytes per group of R right-hand sides (L2 serves
// the groups of one system).  In-matrix offsets are 32-bit (n <= GRT_MAXN).
#define GRT_MAXN 1024
#define GRT_PITCH 33

template <typename T>
__device__ __forceinline__ void grt_load(T (&v)[32], const T* A, int n, int row0, int col0,
                                         int lane)
{
    const int col = col0 + lane;
#pragma unroll
    for (int a = 0; a < 32; ++a)
        v[a] = row0 + a < n && col < n ? A[(row0 + a) * n + col] : T(0);
}

// One substitution with op(T) over the padded solution xs (np rows of R values): FORWARD
// (chunks ascending, tiles left of the diagonal) or backward; DIVIDE: by op(T)'s diagonal (U);
// TRANS: op(T)(i, k) = T(k, i), so tile (chunk c, column chunk t) is T's tile (t, c).
template <bool FORWARD, bool DIVIDE, bool TRANS, int R, typename T>
__device__ __forceinline__ void grt_pass(T* xs, T* tile, const T* A, int n, int lane)
{
    const int nc = (n + 31) >> 5;
    int c = FORWARD ? 0 : nc - 1, t = c;                // (chunk, column chunk) in order
    T v[32];
    grt_load(v, A, n, 32 * (TRANS ? t : c), 32 * (TRANS ? c : t), lane);
    T acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
        acc[r] = xs[(32 * c + lane) * R + r];
    for (;;) {
#pragma unroll
        for (int a = 0; a < 32; ++a)
            tile[a * GRT_PITCH + lane] = v[a];
        __syncwarp();
        int cn = c, tn;                                 // the next tile, loaded meanwhile
        if (t == c) {
            cn = FORWARD ? c + 1 : c - 1;
            tn = FORWARD ? 0 : nc - 1;
        } else {
            tn = FORWARD ? t + 1 : t - 1;
        }
        const bool more = cn >= 0 && cn < nc;
        if (more)
            grt_load(v, A, n, 32 * (TRANS ? tn : cn), 32 * (TRANS ? cn : tn), lane);
        if (t != c) {                                   // acc -= op(T)(chunk, t) x(t)
            const T* x = xs + 32 * t * R;
#pragma unroll 8
            for (int j = 0; j < 32; ++j) {
                const T e = TRANS ? tile[j * GRT_PITCH + lane] : tile[lane * GRT_PITCH + j];
#pragma unroll
                for (int r = 0; r < R; ++r)
                    acc[r] = fma(-e, x[j * R + r], acc[r]);
            }
        } else {                                        // the diagonal tile
            const int r0 = 32 * c;
            for (int s = 0; s < 32; ++s) {
                const int j = FORWARD ? s : 31 - s;
                if (r0 + j >= n)
                    continue;                           // uniform
                if (DIVIDE && lane == j) {
                    const T d = tile[j * GRT_PITCH + j];
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[r] = acc[r] / d;
                }
                const T e = TRANS ? tile[j * GRT_PITCH + lane] : tile[lane * GRT_PITCH + j];
                const bool after = FORWARD ? lane > j : lane < j;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const T xj = __shfl_sync(0xffffffffu, acc[r], j);
                    if (after)
                        acc[r] = fma(-e, xj, acc[r]);
                }
            }
            if (r0 + lane < n) {
#pragma unroll
                for (int r = 0; r < R; ++r)
                    xs[(r0 + lane) * R + r] = acc[r];
            }
        }
        __syncwarp();
        if (!more)
            break;
        if (cn != c) {
            c = cn;
#pragma unroll
            for (int r = 0; r < R; ++r)
                acc[r] = xs[(32 * c + lane) * R + r];
        }
        t = tn;
    }
}

// Column r < R of xs: rows k <-> piv[k], k ascending (forward) or descending.
template <int R, typename T>
__device__ __forceinline__ void grt_interchange(T* xs, const int* ps, int n, int lane,
                                                bool forward)
{
    if (lane < R) {
        for (int s = 0; s < n; ++s) {
            const int k = forward ? s : n - 1 - s;
            const int q = ps[k];
            if (q != k) {
                const T held = xs[k * R + lane];
                xs[k * R + lane] = xs[q * R + lane];
                xs[q * R + lane] = held;
            }
        }
    }
    __syncwarp();
}

template <typename T, int R>
__global__ void __launch_bounds__(32)
getrs_tiled(int batch, int n, int nrhs, const T* __restrict__ lu, const int* __restrict__ piv,
            T* __restrict__ B, int trans, int* flags, int gen)
{
    extern __shared__ float4 grt_smem[];
    const int lane = static_cast<int>(threadIdx.x);
    const int groups = (nrhs + R - 1) / R;
    const long long b = static_cast<long long>(blockIdx.x) / groups;
    const int c0 = static_cast<int>(blockIdx.x % groups) * R;
    const int np = (n + 31) & ~31;
    T* xs = reinterpret_cast<T*>(grt_smem);                     // np x R
    T* tile = xs + np * R;                                      // 32 x GRT_PITCH
    int* ps = reinterpret_cast<int*>(tile + 32 * GRT_PITCH);     // n
    const T* A = lu + b * n * n;
    const int* p = piv + b * n;
    T* X = B + b * n * nrhs + c0;
    getrs_check_pivots(p, n, lane, flags, gen);
    for (int i = lane; i < n; i += 32)
        ps[i] = p[i] >= 0 && p[i] < n ? p[i] : i;               // out of range: skipped
    for (int e = lane; e < np * R; e += 32) {
        const int i = e / R, r = e % R;
        xs[e] = i < n && c0 + r < nrhs ? X[static_cast<long long>(i) * nrhs + r] : T(0);
        if (!lu_elem<T>::finite(xs[e]))
            flags[1] = gen;
    }
    __syncwarp();
    if (trans) {
        grt_pass<true, true, true, R>(xs, tile, A, n, lane);        // U^T y = b
        grt_pass<false, false, true, R>(xs, tile, A, n, lane);      // L^T z = y
        grt_interchange<R>(xs, ps, n, lane, false);                 // x = P^T z
    } else {
        grt_interchange<R>(xs, ps, n, lane, true);                  // P b
        grt_pass<true, false, false, R>(xs, tile, A, n, lane);      // L y = P b
        grt_pass<false, true, false, R>(xs, tile, A, n, lane);      // U x = y
    }
    for (int e = lane; e < n * R; e += 32) {
        const int i = e / R, r = e % R;
        if (c0 + r < nrhs)
            X[static_cast<long long>(i) * nrhs + r] = xs[e];
    }
}
