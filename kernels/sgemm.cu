// sgemm.cu -- single-precision matrix multiply on the CUDA cores (SIMT FP32),
// C = alpha * A * B + beta * C.
//
// Storage: unlike BLAS, everything is described row-major.  C is row-major with leading
// dimension ldc (element (i, j) at C[i*ldc + j]).  A (M x K) is either K-contiguous
// (A(i,k) = A[i*lda + k], "row-major") or M-contiguous (A[k*lda + i], i.e. a transposed or
// column-major operand); B (K x N) is N-contiguous (B[k*ldb + j]) or K-contiguous
// (B[j*ldb + k]).  A column-major C is handled by the caller as C^T = B^T A^T.  All offsets
// are 64-bit.  beta == 0 never reads C (C may hold NaN).
//
// Tiling (both kernels): one block computes a BM x BN tile of C with (BM/TM)*(BN/TN) threads;
// thread (tx, ty) keeps a TM x TN register tile of C, split in 4x4 sub-blocks spaced BM/(TM/4)
// rows and BN/(TN/4) columns apart (the first at row ty*4, column tx*4), so that its
// shared-memory reads are conflict-free float4s.  Per k-step both operand slices (BM x BK of A,
// BK x BN of B) go through shared memory, stored k-major ([BK][BM+4], [BK][BN+4]: the pad
// breaks the bank conflicts of the transposing stores); in the inner loop every FFMA takes
// both operands from registers, and the fragments of step k+1 are read while step k is
// multiplied.  Partial edge tiles are handled here: out-of-range loads read 0, out-of-range
// stores are skipped (blocks inside C load the slices inside K without checks:
// SliceOperand).  The grid is 1-D and walked in groups of GROUP_M = 8 tile rows for L2 reuse
// (async_copy.cuh).
//
// sgemm_tiled<BM, BN, BK, TM, TN, MINB, A_KMAJOR, B_NMAJOR, VEC, SPLIT>: the next BK slice is
//   loaded from global memory into registers (float4 when VEC) while the current one is
//   multiplied, then stored to the other shared-memory buffer: one barrier per k-step.
// sgemm_pipelined<BM, BN, BK, TM, TN, STAGES, MINB, A_KMAJOR, B_NMAJOR, VEC, PREFETCH_C>: a
//   STAGES-deep ring of shared-memory buffers filled with cp.async (no register staging);
//   PREFETCH_C fetches the C tile into shared memory first, so that the beta*C read of a
//   rank-k update overlaps the multiply.
// Split K, for products with too few C tiles to fill the device (sgemm_tiled with SPLIT,
//   launched with gridDim.y = S > 1 rows and beta = 0): grid row y multiplies the y-th part of
//   K into its own M x ldc slab of a workspace, and sgemm_splitk_sum adds the S slabs (in
//   order) and beta*C into C.
//
// Knobs (template parameters; gpulinalg/gemm/simt.py VARIANTS passes them, the static_asserts
// check them): BM, BN, BK, TM, TN, STAGES and MINB resident blocks per SM, which with
// threads = (BM/TM)*(BN/TN) is the __launch_bounds__ (the scalar-load fallback of
// sgemm_tiled, !VEC, asks for one block).  The tiles launched (BM x BN x BK, TM x TN,
// threads, MINB): sgemm_tiled 128 x 128 x 8, 8 x 8, 256, 2 ("dbuf128") and 256 x 128 x 8,
// 16 x 8, 256, 1 ("dbuf256x128"); sgemm_pipelined with STAGES = 3: 128 x 128 x 8, 8 x 8, 256, 2
// ("pipe128"), 128 x 64 x 8, 8 x 8, 128, 3 ("pipe128x64") and 64 x 64 x 16, 4 x 4, 256, 4
// ("pipe64").  VEC requires lda, ldb, ldc multiples of 4 and 16-byte aligned base pointers
// (the caller checks).
// Bound: flop-bound; the arithmetic intensity of a block is BM*BN/(2*(BM+BN)) flop per byte
// of operand traffic (32 flop/B for 128 x 128) against ~65 TFLOP/s FFMA peak on an H100.  The
// split-K sum is bandwidth-bound.

#include <cuda_runtime.h>

#include "async_copy.cuh"

namespace {

template <bool A_KMAJOR>
__device__ __forceinline__ long long a_offset(long long i, long long k, long long lda) {
    return A_KMAJOR ? i * lda + k : k * lda + i;
}

// Four consecutive floats p[0..3]; zero where the row is out of range (!row_ok) or past the
// end of the contiguous dimension (left = elements remaining from p).  VEC: one 16-byte load
// when all four are in range (p is then 16-byte aligned).
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* p, bool row_ok, long long left) {
    if (VEC && row_ok && left >= 4) return *reinterpret_cast<const float4*>(p);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row_ok) {
        if (left > 0) v.x = p[0];
        if (left > 1) v.y = p[1];
        if (left > 2) v.z = p[2];
        if (left > 3) v.w = p[3];
    }
    return v;
}

// Copy 4 consecutive elements src[0..3] of an operand's contiguous dimension (left = elements
// remaining, ok = the other index is in range) to dst[0], dst[step], dst[2 step], dst[3 step]:
// step 1 is a straight copy (one 16-byte cp.async when VEC and whole), step > 1 transposes.
template <bool VEC, int STEP>
__device__ __forceinline__ void copy4(float* dst, const float* src, const float* safe, bool ok,
                                      long long left) {
    if (STEP == 1 && VEC && ok && left >= 4) {
        cp_async16(dst, src);
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const bool in = ok && left > q;
        cp_async4(dst + q * STEP, in ? src + q : safe, in);
    }
}

// One operand of the product as an R x K matrix X (A: R = M; B: R = N and X = B^T), element
// (i, k) at X[i*ld + k] when KMAJOR, else at X[k*ld + i].  Per k-step a block moves a ROWS x BK
// slice of it (rows row0 .. row0+ROWS-1, columns kt*BK ..); each of THREADS threads moves
// LOADS runs of 4 elements along the contiguous dimension, run l from slice element (r, k) of
// run().  Fast blocks (all ROWS rows exist, 16-byte access possible) load the slices that lie
// inside K without bounds tests: the checked path's index arithmetic and tests (~90 dependent
// integer instructions per slice for the 256 x 128 tile) would stall the main loop.
template <int ROWS, int BK, int THREADS, bool KMAJOR>
struct SliceOperand {
    static constexpr int LOADS = ROWS * BK / (4 * THREADS);
    static_assert(LOADS >= 1 && LOADS * 4 * THREADS == ROWS * BK,
                  "the runs must cover the slice exactly");
    const float* X;
    long long ld, row0;
    int R, K, tid;

    __device__ __forceinline__ static void run(int tid, int l, int& r, int& k) {
        const int e = (tid + l * THREADS) * 4;
        r = KMAJOR ? e / BK : e % ROWS;
        k = KMAJOR ? e % BK : e / ROWS;
    }
    __device__ __forceinline__ SliceOperand(const float* X_, long long ld_, int R_, int K_,
                                            long long row0_, int tid_)
        : X(X_), ld(ld_), row0(row0_), R(R_), K(K_), tid(tid_) {}
    // First element of run l of slice kt.
    __device__ __forceinline__ const float* at(int l, int kt) const {
        int r, k;
        run(tid, l, r, k);
        return X + a_offset<KMAJOR>(row0 + r, (long long)kt * BK + k, ld);
    }
    // Run l of slice kt in any block: its first element p, whether its row exists (ok) and
    // how many elements are left from p along the contiguous dimension (left).
    struct Checked {
        const float* p;
        bool ok;
        long long left;
    };
    __device__ __forceinline__ Checked checked(int l, int kt) const {
        int r, k;
        run(tid, l, r, k);
        const long long gi = row0 + r, gk = (long long)kt * BK + k;
        return {at(l, kt), KMAJOR ? gi < R : gk < K, KMAJOR ? K - gk : R - gi};
    }
    // Register staging (sgemm_tiled): slice kt into v; zeros outside X.
    template <bool VEC>
    __device__ __forceinline__ void load(float4 (&v)[LOADS], int kt, bool fast) const {
        if (fast) {
#pragma unroll
            for (int l = 0; l < LOADS; ++l)
                v[l] = *reinterpret_cast<const float4*>(at(l, kt));
            return;
        }
#pragma unroll
        for (int l = 0; l < LOADS; ++l) {
            const Checked c = checked(l, kt);
            v[l] = load4<VEC>(c.p, c.ok, c.left);
        }
    }
    // Where run l starts in the k-major shared slice s ([BK][LDS]: element (r, k) at
    // s[k*LDS + r]).
    template <int LDS>
    __device__ __forceinline__ float* slot(float* s, int l) const {
        int r, k;
        run(tid, l, r, k);
        return s + k * LDS + r;
    }
    // v into the k-major shared slice s (slot above); a K-major run is stored transposed (4
    // scalar stores), an R-major one as one float4.
    template <int LDS>
    __device__ __forceinline__ void store(const float4 (&v)[LOADS], float* s) const {
#pragma unroll
        for (int l = 0; l < LOADS; ++l) {
            float* d = slot<LDS>(s, l);
            if (KMAJOR) {
                d[0] = v[l].x; d[LDS] = v[l].y; d[2 * LDS] = v[l].z; d[3 * LDS] = v[l].w;
            } else {
                *reinterpret_cast<float4*>(d) = v[l];
            }
        }
    }
    // cp.async of slice kt into the k-major shared slice s (sgemm_pipelined); zeros outside X.
    template <bool VEC, int LDS>
    __device__ __forceinline__ void copy(float* s, int kt, bool fast) const {
        constexpr int STEP = KMAJOR ? LDS : 1;
#pragma unroll
        for (int l = 0; l < LOADS; ++l) {
            float* d = slot<LDS>(s, l);
            if (fast) {
                copy4<VEC, STEP>(d, at(l, kt), X, true, 4);
            } else {
                const Checked c = checked(l, kt);
                copy4<VEC, STEP>(d, c.p, X, c.ok, c.left);
            }
        }
    }
};

// Issue the cp.async copies of the BM x BN tile of C at (row0, col0) into Cs ([BM][BN],
// row-major; zeros outside the matrix), spread over THREADS threads.  The caller commits the
// group and waits for it (plus a barrier) before store_c_tile reads Cs.
template <int BM, int BN, int THREADS, bool VEC>
__device__ __forceinline__ void prefetch_c_tile(float* Cs, const float* C, long long ldc,
                                                long long row0, long long col0, int M, int N,
                                                int tid) {
#pragma unroll 4
    for (int e = tid * 4; e < BM * BN; e += THREADS * 4) {
        const int r = e / BN, c = e % BN;
        const long long gi = row0 + r, gj = col0 + c;
        copy4<VEC, 1>(Cs + e, C + gi * ldc + gj, C, gi < M, N - gj);
    }
}

// Epilogue of the SIMT kernels: C = alpha*acc + beta*C over the thread's TM x TN register
// tile (4x4 sub-blocks STRIDE_M rows / STRIDE_N columns apart, at (ty*4, tx*4) in the first);
// beta*C is read from Cs (the prefetched tile) when it is not null, else from C.  beta == 0
// never reads C.  float4 accesses where the 4-column segment is whole (VEC).
template <int TM, int TN, int BN, int STRIDE_M, int STRIDE_N, bool VEC>
__device__ __forceinline__ void store_c_tile(const float (&acc)[TM][TN], const float* Cs,
                                             float* C, long long ldc, long long row0,
                                             long long col0, int M, int N, int tx, int ty,
                                             float alpha, float beta) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = (i / 4) * STRIDE_M + ty * 4 + (i % 4);
        const long long gi = row0 + r;
        if (gi >= M) continue;
        float* crow = C + gi * ldc;
#pragma unroll
        for (int s = 0; s < TN / 4; ++s) {
            const int c = s * STRIDE_N + tx * 4;
            const long long gj = col0 + c;
            const bool whole = VEC && gj + 3 < N;
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = alpha * acc[i][4 * s + q];
            if (beta != 0.0f) {
                float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (Cs != nullptr) {
                    o = *reinterpret_cast<const float4*>(Cs + r * BN + c);
                } else if (whole) {
                    o = *reinterpret_cast<const float4*>(crow + gj);
                } else {
                    if (gj < N) o.x = crow[gj];
                    if (gj + 1 < N) o.y = crow[gj + 1];
                    if (gj + 2 < N) o.z = crow[gj + 2];
                    if (gj + 3 < N) o.w = crow[gj + 3];
                }
                v[0] = fmaf(beta, o.x, v[0]); v[1] = fmaf(beta, o.y, v[1]);
                v[2] = fmaf(beta, o.z, v[2]); v[3] = fmaf(beta, o.w, v[3]);
            }
            if (whole) {
                *reinterpret_cast<float4*>(crow + gj) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (gj + q < N) crow[gj + q] = v[q];
            }
        }
    }
}

// Split K (a grid of gridDim.y > 1 rows, beta == 0): grid row y multiplies k-slices
// [kt0, kt0 + count) of the K dimension's BK-wide slices (count, returned, may be 0 for the
// last rows) and writes its partial product to the y-th of the gridDim.y M x ldc slabs that
// start at C (split_c); sgemm_splitk_sum adds them.  One grid row: every slice, C itself.
template <int BK>
__device__ __forceinline__ int split_k(int K, int& kt0) {
    const int slices = (K + BK - 1) / BK, per = (slices + gridDim.y - 1) / gridDim.y;
    kt0 = min(slices, (int)blockIdx.y * per);
    return min(per, slices - kt0);
}
__device__ __forceinline__ float* split_c(float* C, int M, long long ldc) {
    return C + blockIdx.y * (long long)M * ldc;
}

}  // namespace

template <int BM, int BN, int BK, int TM, int TN, int MINB, bool A_KMAJOR, bool B_NMAJOR,
          bool VEC, bool SPLIT = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), VEC ? MINB : 1)
sgemm_tiled(int M, int N, int K, float alpha, const float* __restrict__ A, long long lda,
            const float* __restrict__ B, long long ldb, float beta, float* __restrict__ C,
            long long ldc)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int TX = BN / TN;              // threads along N
    constexpr int SM_ = TM / 4, SN = TN / 4; // 4x4 sub-blocks per thread
    constexpr int STRIDE_M = BM / SM_, STRIDE_N = BN / SN;
    constexpr int LDA_S = BM + 4, LDB_S = BN + 4;
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4x4 sub-blocks");
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide evenly among threads");
    static_assert(BK % 4 == 0, "BK is loaded in float4 groups");

    __shared__ __align__(16) float As[2][BK][LDA_S];
    __shared__ __align__(16) float Bs[2][BK][LDB_S];

    int tile_m, tile_n;  // grouped rasterisation (L2 reuse)
    grouped_tile(M, N, BM, BN, blockIdx.x, tile_m, tile_n);
    const long long row0 = (long long)tile_m * BM, col0 = (long long)tile_n * BN;

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;

    // Operand slices: global -> registers (the next slice's loads fly during the FFMAs of
    // the current one) -> shared memory.
    const SliceOperand<BM, BK, THREADS, A_KMAJOR> opa(A, lda, M, K, row0, tid);
    const SliceOperand<BN, BK, THREADS, !B_NMAJOR> opb(B, ldb, N, K, col0, tid);
    // This grid row's slices kt0 + t, t < ktiles (SPLIT: split K, a separate instantiation so
    // that the others do not hold its extra register); those below kfast lie inside K.
    int kt0 = 0;
    const int ktiles = SPLIT ? split_k<BK>(K, kt0) : (K + BK - 1) / BK;
    const int kfast = VEC && row0 + BM <= M && col0 + BN <= N ? K / BK - kt0 : 0;
    float4 ra[decltype(opa)::LOADS], rb[decltype(opb)::LOADS];
    auto load = [&](int t) {
        opa.template load<VEC>(ra, kt0 + t, t < kfast);
        opb.template load<VEC>(rb, kt0 + t, t < kfast);
    };
    auto store_smem = [&](int buf) {
        opa.template store<LDA_S>(ra, &As[buf][0][0]);
        opb.template store<LDB_S>(rb, &Bs[buf][0][0]);
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    if (ktiles > 0) {
        load(0);
        store_smem(0);
    }
    __syncthreads();

    // Operand fragments of step k from shared-memory buffer buf: TM values of A, TN of B.
    auto fragments = [&](int buf, int k, float* fa, float* fb) {
#pragma unroll
        for (int s = 0; s < SM_; ++s) {
            const float4 t = *reinterpret_cast<const float4*>(&As[buf][k][s * STRIDE_M + ty * 4]);
            fa[4 * s + 0] = t.x; fa[4 * s + 1] = t.y; fa[4 * s + 2] = t.z; fa[4 * s + 3] = t.w;
        }
#pragma unroll
        for (int s = 0; s < SN; ++s) {
            const float4 t = *reinterpret_cast<const float4*>(&Bs[buf][k][s * STRIDE_N + tx * 4]);
            fb[4 * s + 0] = t.x; fb[4 * s + 1] = t.y; fb[4 * s + 2] = t.z; fb[4 * s + 3] = t.w;
        }
    };
    auto outer_product = [&](const float* fa, const float* fb) {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    };

    // Fragment double buffering (as CUTLASS's SIMT mainloop): step k+1's fragments are read
    // while step k multiplies; the next slice is stored and the barrier taken before the last
    // step's FFMAs, so its first fragments are read while they run.  BK is even, so fragment
    // set 0 always holds step 0 of a slice.
    static_assert(BK % 2 == 0, "fragment parity carries across slices");
    float a[2][TM], b[2][TN];
    if (ktiles > 0) fragments(0, 0, a[0], b[0]);
    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) load(kt + 1);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k < BK - 1) {
                fragments(cur, k + 1, a[(k + 1) & 1], b[(k + 1) & 1]);
            } else {  // every read of buffer cur^1 happened before the previous barrier
                if (more) store_smem(cur ^ 1);
                __syncthreads();
                if (more) fragments(cur ^ 1, 0, a[0], b[0]);
            }
            outer_product(a[k & 1], b[k & 1]);
        }
    }

    float* Cy = SPLIT ? split_c(C, M, ldc) : C;   // this grid row's slab
    store_c_tile<TM, TN, BN, STRIDE_M, STRIDE_N, VEC>(acc, nullptr, Cy, ldc, row0, col0, M, N,
                                                      tx, ty, alpha, beta);
}

// sgemm_pipelined: the same register tiling as sgemm_tiled, fed by a STAGES-deep ring of
// shared-memory buffers filled with cp.async (no register staging, no transposing STS), with
// the operand fragments of step k+1 read from shared memory while step k is multiplied, and
// (PREFETCH_C) the C tile fetched into shared memory at the start so that the beta*C read of
// a rank-k update overlaps the multiply instead of stalling the epilogue.
// Dynamic shared memory: STAGES*BK*(BM+4 + BN+4) floats (+ BM*BN with PREFETCH_C).
template <int BM, int BN, int BK, int TM, int TN, int STAGES, int MINB, bool A_KMAJOR,
          bool B_NMAJOR, bool VEC, bool PREFETCH_C>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
sgemm_pipelined(int M, int N, int K, float alpha, const float* __restrict__ A, long long lda,
                const float* __restrict__ B, long long ldb, float beta, float* __restrict__ C,
                long long ldc)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int TX = BN / TN;
    constexpr int SM_ = TM / 4, SN = TN / 4;
    constexpr int STRIDE_M = BM / SM_, STRIDE_N = BN / SN;
    constexpr int LDA_S = BM + 4, LDB_S = BN + 4;
    constexpr int A_STAGE = BK * LDA_S, B_STAGE = BK * LDB_S;
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4x4 sub-blocks");
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide evenly among threads");
    static_assert(BK % 4 == 0 && STAGES >= 2, "BK in float4 groups, at least double buffering");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;                         // [STAGES][BK][LDA_S]
    float* Bs = smem + STAGES * A_STAGE;      // [STAGES][BK][LDB_S]
    float* Cs = Bs + STAGES * B_STAGE;        // [BM][BN] (PREFETCH_C)

    int tile_m, tile_n;  // grouped rasterisation (L2 reuse)
    grouped_tile(M, N, BM, BN, blockIdx.x, tile_m, tile_n);
    const long long row0 = (long long)tile_m * BM, col0 = (long long)tile_n * BN;
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const bool read_c = PREFETCH_C && beta != 0.0f;

    // Issue the copies of k-slice kt into ring buffer buf.
    const SliceOperand<BM, BK, THREADS, A_KMAJOR> opa(A, lda, M, K, row0, tid);
    const SliceOperand<BN, BK, THREADS, !B_NMAJOR> opb(B, ldb, N, K, col0, tid);
    const int kfast = VEC && row0 + BM <= M && col0 + BN <= N ? K / BK : 0;
    auto issue = [&](int kt, int buf) {
        opa.template copy<VEC, LDA_S>(As + buf * A_STAGE, kt, kt < kfast);
        opb.template copy<VEC, LDB_S>(Bs + buf * B_STAGE, kt, kt < kfast);
    };

    if (read_c)  // the whole C tile, as its own (first) group of copies
        prefetch_c_tile<BM, BN, THREADS, VEC>(Cs, C, ldc, row0, col0, M, N, tid);
    cp_async_commit();

    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) issue(s, s);
        cp_async_commit();
    }

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    int buf = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
        ring_advance<STAGES>(kt, ktiles, buf, issue);
        const float* as = As + buf * A_STAGE;
        const float* bs = Bs + buf * B_STAGE;
        float a[2][TM], b[2][TN];
        auto fragments = [&](int k, float* fa, float* fb) {
#pragma unroll
            for (int s = 0; s < SM_; ++s) {
                const float4 t = *reinterpret_cast<const float4*>(as + k * LDA_S + s * STRIDE_M + ty * 4);
                fa[4 * s + 0] = t.x; fa[4 * s + 1] = t.y; fa[4 * s + 2] = t.z; fa[4 * s + 3] = t.w;
            }
#pragma unroll
            for (int s = 0; s < SN; ++s) {
                const float4 t = *reinterpret_cast<const float4*>(bs + k * LDB_S + s * STRIDE_N + tx * 4);
                fb[4 * s + 0] = t.x; fb[4 * s + 1] = t.y; fb[4 * s + 2] = t.z; fb[4 * s + 3] = t.w;
            }
        };
        fragments(0, a[0], b[0]);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) fragments(k + 1, a[(k + 1) & 1], b[(k + 1) & 1]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[k & 1][i], b[k & 1][j], acc[i][j]);
        }
        if (++buf == STAGES) buf = 0;
    }
    cp_async_wait<0>();
    if (read_c) __syncthreads();  // C tile copied by other threads is visible
    store_c_tile<TM, TN, BN, STRIDE_M, STRIDE_N, VEC>(acc, read_c ? Cs : nullptr, C, ldc, row0,
                                                      col0, M, N, tx, ty, alpha, beta);
}

// sgemm_splitk_sum<VEC>: C = W_0 + W_1 + ... + W_{S-1} + beta*C for an M x N C, the S partial
// products of a split-K launch (slabs of M x ldw floats from W, ldw % 4 == 0 and W 16-byte
// aligned).  One thread per 4 consecutive elements of a row, a grid-stride loop; the
// partials are summed in slab order, so the result does not depend on the launch.  VEC:
// 16-byte access to C (ldc % 4 == 0, aligned).  beta == 0 never reads C.  Bound: memory
// bandwidth, (S + 1) x 4 bytes per element (S + 2 with beta).
template <bool VEC>
__global__ void __launch_bounds__(256)
sgemm_splitk_sum(int M, int N, int S, const float* __restrict__ W, long long ldw, float beta,
                 float* __restrict__ C, long long ldc)
{
    const long long quads = (N + 3) / 4, total = M * quads, slab = M * ldw;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total;
         q += (long long)gridDim.x * blockDim.x) {
        const long long i = q / quads;
        const int j = (int)(q - i * quads) * 4;
        const float* w = W + i * ldw + j;
        float4 s = *reinterpret_cast<const float4*>(w);
        for (int t = 1; t < S; ++t) {
            const float4 v = *reinterpret_cast<const float4*>(w + t * slab);
            s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
        }
        float* c = C + i * ldc + j;
        if (VEC && j + 4 <= N) {
            if (beta != 0.0f) {
                const float4 o = *reinterpret_cast<const float4*>(c);
                s.x = fmaf(beta, o.x, s.x); s.y = fmaf(beta, o.y, s.y);
                s.z = fmaf(beta, o.z, s.z); s.w = fmaf(beta, o.w, s.w);
            }
            *reinterpret_cast<float4*>(c) = s;
        } else {
            const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (j + e < N) c[e] = beta != 0.0f ? fmaf(beta, c[e], v[e]) : v[e];
        }
    }
}
