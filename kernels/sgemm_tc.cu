// sgemm_tc.cu -- single-precision C = alpha * A * B + beta * C on the TF32 tensor cores, with
// the 3xTF32 error-compensated split (FP32-level accuracy) or plain TF32 (10-bit mantissa).
//
// Storage: as kernels/sgemm.cu, everything is described row-major.  C is row-major (ldc);
// A (M x K) is K-contiguous (A[i*lda + k]) or M-contiguous (A[k*lda + i]); B (K x N) is
// N-contiguous (B[k*ldb + j]) or K-contiguous (B[j*ldb + k]).  A column-major C is handled by
// the caller as C^T = B^T A^T.  64-bit offsets; beta == 0 never reads C (C may hold NaN).
//
// The split (MODE 3): x = big + small with big = rna_tf32(x), small = rna_tf32(x - big), and
//   C += small_a*big_b + big_a*small_b + big_a*big_b   (small products first; small*small,
//   of relative size 2^-22, is dropped), each term one mma.sync m16n8k8 TF32 with FP32
// accumulation.  The split is done in registers right after the fragments are read from shared
// memory, so shared memory holds plain FP32.  MODE 1: C += big_a*big_b only.  Inputs must be
// finite and below ~3.4e38*(1 - 2^-12) in magnitude (Inf becomes NaN through x - big).
// SPLIT_ACC: the tensor cores accumulate with truncation, not round-to-nearest, so each BK
// k-slice is accumulated from zero into temporary registers and added to the running sum with
// an FP32 FADD (RN) -- this keeps the truncation error per slice, as Ootomo & Yokota (2022)
// recommend, at the price of a second accumulator tile in registers.
//
// Thread/data mapping (sgemm_tc<BM, BN, BK, WM, WN, STAGES, MINB, MODE, SPLIT_ACC, A_KMAJOR,
// B_NMAJOR, VEC>):
//   * a block computes a BM x BN tile of C with (BM/WM)*(BN/WN) warps; warp w owns the WM x WN
//     sub-tile (w / (BN/WN), w % (BN/WN)), made of (WM/16) x (WN/8) m16n8 accumulator tiles;
//   * mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 fragments (PTX ISA; CUTLASS cute
//     MMA_Traits<SM80_16x8x8_F32TF32TF32F32_TN>), g = lane/4, t = lane%4:
//       A: a0 = (g, t), a1 = (g+8, t), a2 = (g, t+4), a3 = (g+8, t+4)     (row, k)
//       B: b0 = (t, g), b1 = (t+4, g)                                     (k, col)
//       C: c0 = (g, 2t), c1 = (g, 2t+1), c2 = (g+8, 2t), c3 = (g+8, 2t+1) (row, col)
//   * k permutation: within each 16-k block, thread t reads the physical k = 4t..4t+3 of its
//     rows (one 16-byte LDS for a K-major buffer); mma step s in {0,1} of the block uses
//     logical k = t -> physical 4t+2s and k = t+4 -> 4t+2s+1, for A and B alike, so the
//     product is unchanged while every fragment read is a whole float4 (or 4 words);
//   * a STAGES-deep ring of BK-slices in dynamic shared memory, filled with cp.async (16-byte
//     copies where VEC and whole, 4-byte zero-filling copies at the edges); each operand is
//     stored in its global orientation (no transposing copies):
//       K-major operand:  [rows][BK],  16-byte chunk c of row r at chunk c ^ kswz(r)
//       MN-major operand: [BK][rows],  chunk c of k-row k at chunk c ^ mnswz(k)
//     with the XOR swizzles chosen so that the fragment reads (K-major: float4 per lane, rows
//     g and g+1 per quarter warp; MN-major: one word per lane, 4 k-rows x 8 columns per warp)
//     and the cp.async writes are bank-conflict free (checked in tests/test_gemm_tc.py);
//   * partial edge tiles: out-of-range operand elements are copied as zeros, out-of-range C
//     elements are skipped; the 1-D grid is walked in groups of GROUP_M tile rows for L2 reuse.
// Knobs (template parameters; gpulinalg/gemm/mma.py passes them, static_asserts check them):
//   BM, BN (block tile), BK = 32, WM, WN (warp tile, multiples of 16 and 8), STAGES >= 2,
//   MINB resident blocks per SM for __launch_bounds__, MODE 3 or 1, SPLIT_ACC.  The tiles
//   launched: 128 x 128 with 64 x 32 warp tiles (256 threads), 4 stages, SPLIT_ACC in 3xTF32,
//   and 64 x 128 with 32 x 32 warp tiles (256 threads) for few tiles.  VEC requires
//   lda, ldb, ldc multiples of 4 and 16-byte aligned base pointers (the caller checks).
//   Dynamic shared memory: STAGES * BK * (BM + BN) floats.
// Bound: tensor-core-bound; arithmetic intensity of a block = BM*BN/(2*(BM+BN)) flop/byte of
// operand traffic (32 for 128x128).  3xTF32 issues 3 mma per product: its ceiling is a third of
// the mma.sync TF32 rate (the H100's TF32 tensor cores: ~495 TFLOP/s dense through wgmma,
// less through mma.sync).

#include <cuda_runtime.h>

#include "async_copy.cuh"

namespace {

// Copy src[0..3] (consecutive along the operand's contiguous dimension; left = elements
// remaining there, ok = the other index in range) to the 16-byte chunk dst[0..3]; zeros where
// out of range.  `safe` is a valid address never read (the 0-byte copies need one).
template <bool VEC>
__device__ __forceinline__ void tc_copy_chunk(float* dst, const float* src, const float* safe,
                                              bool ok, long long left) {
    if (VEC && ok && left >= 4) {
        cp_async16(dst, src);
        return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const bool in = ok && left > q;
        cp_async4(dst + q, in ? src + q : safe, in);
    }
}

// Swizzles (chunk = 4 floats = 16 bytes; a row of 8 chunks spans the 32 banks).
// K-major [rows][32]: rows 2p and 2p+1 (one quarter warp of float4 reads) use opposite halves.
__device__ __forceinline__ int tc_kswz(int r) { return ((r & 1) << 2) | ((r >> 1) & 3); }
// MN-major [32][rows]: k-rows 4t+j (t = 0..3) shift their chunks by 0, 2, 4, 6.
__device__ __forceinline__ int tc_mnswz(int k) { return ((k >> 2) & 3) << 1; }

__device__ __forceinline__ unsigned tc_to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// d += a * b on the tensor cores (one warp, m16n8k8, TF32 inputs, FP32 accumulators).
__device__ __forceinline__ void tc_mma(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int MODE>
__device__ __forceinline__ void tc_split(float x, unsigned& big, unsigned& small) {
    big = tc_to_tf32(x);
    if (MODE == 3) small = tc_to_tf32(x - __uint_as_float(big));
}

// Copies one operand's BK-slices, one slice per issue() call in k order, into its shared-memory
// ring (layouts in the header).  ROWS: the operand's extent in the block tile (BM or BN), KM:
// the operand is K-major.  Each thread copies PASSES 16-byte chunks per slice, one pass apart
// by STEP smem rows; only a running pointer and a k-countdown change from slice to slice.
template <int ROWS, int BK, int THREADS, bool KM, bool VEC>
struct TcLoader {
    static constexpr int CPR = KM ? BK / 4 : ROWS / 4;  // chunks per shared-memory row
    static constexpr int STEP = THREADS / CPR;          // shared-memory rows per pass
    static constexpr int PASSES = ROWS * BK / 4 / THREADS;
    static_assert(THREADS % CPR == 0 && PASSES * THREADS * 4 == ROWS * BK,
                  "passes must cover the slice exactly");
    static_assert(!KM || STEP % 8 == 0, "K-major passes keep the row swizzle (r mod 8)");

    const float* ptr;     // global address of this thread's first chunk of the next slice
    const float* safe;    // a valid address for the zero-filling copies
    long long pass_step;  // global elements between passes
    long long slice_step; // global elements between slices
    long long k_left;     // KM: K - k0 - 4c;  MN-major: K - k0 - kk
    long long mn_left;    // KM: MN - r0 - r;  MN-major: MN - r0 - 4c
    int soff;             // shared-memory offset of this thread's first chunk (pass 0)
    int kk;               // MN-major: this thread's k-row in pass 0

    __device__ __forceinline__ TcLoader(const float* X, long long ld, long long r0, int MN, int K,
                                        int tid) {
        const int r = tid / CPR, c = tid % CPR;  // KM: (row, chunk); MN-major: (k-row, chunk)
        safe = X;
        pass_step = STEP * ld;
        if (KM) {
            ptr = X + (r0 + r) * ld + 4 * c;
            slice_step = BK;
            k_left = (long long)K - 4 * c;
            mn_left = MN - r0 - r;
            soff = r * BK + ((c ^ tc_kswz(r)) << 2);
            kk = 0;
        } else {
            ptr = X + r * ld + r0 + 4 * c;
            slice_step = BK * ld;
            k_left = (long long)K - r;
            mn_left = MN - r0 - 4 * c;
            soff = c << 2;
            kk = r;
        }
    }

    __device__ __forceinline__ void issue(float* stage) {
#pragma unroll
        for (int l = 0; l < PASSES; ++l) {
            const float* src = ptr + l * pass_step;
            if (KM) {  // chunk = 4 consecutive k of one row; rows past MN are zeros
                tc_copy_chunk<VEC>(stage + soff + l * STEP * BK, src, safe,
                                   l * STEP < mn_left, k_left);
            } else {   // chunk = 4 consecutive rows of one k; k-rows past K are zeros
                const int k = kk + l * STEP;
                tc_copy_chunk<VEC>(stage + k * ROWS + (soff ^ (tc_mnswz(k) << 2)), src, safe,
                                   l * STEP < k_left, mn_left);
            }
        }
        ptr += slice_step;
        k_left -= BK;
    }
};

}  // namespace

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int MINB, int MODE, bool SPLIT_ACC,
          bool A_KMAJOR, bool B_NMAJOR, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
sgemm_tc(int M, int N, int K, float alpha, const float* __restrict__ A, long long lda,
         const float* __restrict__ B, long long ldb, float beta, float* __restrict__ C,
         long long ldc)
{
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int MT = WM / 16, NT = WN / 8;          // mma tiles per warp
    constexpr int A_STAGE = BM * BK, B_STAGE = BN * BK;
    static_assert(MODE == 3 || MODE == 1, "MODE: 3 (3xTF32) or 1 (TF32)");
    static_assert(BK == 32, "the swizzles assume 8 chunks of 4 floats per K-major row");
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0,
                  "warp tiles are made of m16n8 mma tiles and divide the block tile");
    static_assert(BM % 32 == 0 && BN % 32 == 0, "MN-major rows span whole bank windows");
    static_assert(STAGES >= 2, "at least double buffering");

    extern __shared__ __align__(16) float smem[];
    float* As = smem;                      // [STAGES][BM*BK]
    float* Bs = smem + STAGES * A_STAGE;   // [STAGES][BN*BK]

    int tile_m, tile_n;  // grouped rasterisation (L2 reuse)
    grouped_tile(M, N, BM, BN, blockIdx.x, tile_m, tile_n);
    const long long row0 = (long long)tile_m * BM, col0 = (long long)tile_n * BN;

    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    // Operand copies into the ring: A is M x K, B^T is N x K (K-major when B is K-contiguous).
    TcLoader<BM, BK, THREADS, A_KMAJOR, VEC> a_load(A, lda, row0, M, K, tid);
    TcLoader<BN, BK, THREADS, !B_NMAJOR, VEC> b_load(B, ldb, col0, N, K, tid);

    // Fragment reads of one 16-k block (kb = 0 or 16 within the slice): fa[i][h][j] =
    // A(wm0 + 16i + 8h + g, kb + 4t + j), fb[n][j] = B(kb + 4t + j, wn0 + 8n + g).  Row
    // r = base + 8q + g of an operand (q = 2i + h for A, n for B) sits at
    //   K-major:  koff[kb/16] + 256q, koff[0] = (base + g)*32 + 4*(t ^ kswz(g)), koff[1] =
    //             koff[0] ^ 16  (r & 7 == g; chunk (kb/4 + t) ^ kswz(g) flips bit 2 with kb)
    //   MN-major: (kb + j)*ROWS + 32*(q/4) + moff[q%4], moff[c] = 4t*ROWS + base + g +
    //             8*(c ^ t)  (k = kb + 4t + j has mnswz(k) = 2t; chunk r/4 ^ 2t works out)
    // so every shared-memory address is a per-thread register plus a compile-time offset.
    auto koffsets = [&](int base, int (&off)[2]) {
        off[0] = (base + g) * BK + ((t ^ tc_kswz(g)) << 2);
        off[1] = off[0] ^ 16;
    };
    auto moffsets = [&](int base, int rows, int (&off)[4]) {
#pragma unroll
        for (int c = 0; c < 4; ++c) off[c] = 4 * t * rows + base + g + 8 * (c ^ t);
    };
    int a_koff[2], b_koff[2], a_moff[4], b_moff[4];
    if (A_KMAJOR) koffsets(wm0, a_koff); else moffsets(wm0, BM, a_moff);
    if (B_NMAJOR) moffsets(wn0, BN, b_moff); else koffsets(wn0, b_koff);

    auto fragments = [&](const float* as, const float* bs, int kb, float (&fa)[MT][2][4],
                         float (&fb)[NT][4]) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int q = 2 * i + h;
                if (A_KMAJOR) {
                    const float4 v = *reinterpret_cast<const float4*>(
                        as + a_koff[kb / 16] + 256 * q);
                    fa[i][h][0] = v.x; fa[i][h][1] = v.y; fa[i][h][2] = v.z; fa[i][h][3] = v.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        fa[i][h][j] = as[(kb + j) * BM + 32 * (q / 4) + a_moff[q % 4]];
                }
            }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            if (B_NMAJOR) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    fb[n][j] = bs[(kb + j) * BN + 32 * (n / 4) + b_moff[n % 4]];
            } else {
                const float4 v = *reinterpret_cast<const float4*>(bs + b_koff[kb / 16] + 256 * n);
                fb[n][0] = v.x; fb[n][1] = v.y; fb[n][2] = v.z; fb[n][3] = v.w;
            }
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][n][q] = 0.0f;

    // The two mma steps of a 16-k block: split to TF32 in registers, then 3 (or 1) mma per
    // m16n8 tile, small products first.
    auto multiply = [&](const float (&fa)[MT][2][4], const float (&fb)[NT][4],
                        float (&d)[MT][NT][4]) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            unsigned bbig[NT][2], bsmall[NT][2];
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                tc_split<MODE>(fb[n][2 * s], bbig[n][0], bsmall[n][0]);      // k = t
                tc_split<MODE>(fb[n][2 * s + 1], bbig[n][1], bsmall[n][1]);  // k = t + 4
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                unsigned abig[4], asmall[4];
                tc_split<MODE>(fa[i][0][2 * s], abig[0], asmall[0]);          // (g,   t)
                tc_split<MODE>(fa[i][1][2 * s], abig[1], asmall[1]);          // (g+8, t)
                tc_split<MODE>(fa[i][0][2 * s + 1], abig[2], asmall[2]);      // (g,   t+4)
                tc_split<MODE>(fa[i][1][2 * s + 1], abig[3], asmall[3]);      // (g+8, t+4)
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    if (MODE == 3) {
                        tc_mma(d[i][n], asmall, bbig[n]);
                        tc_mma(d[i][n], abig, bsmall[n]);
                    }
                    tc_mma(d[i][n], abig, bbig[n]);
                }
            }
        }
    };

    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) {
            a_load.issue(As + s * A_STAGE);
            b_load.issue(Bs + s * B_STAGE);
        }
        cp_async_commit();
    }

    int buf = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
        ring_advance<STAGES>(kt, ktiles, buf, [&](int, int nbuf) {
            a_load.issue(As + nbuf * A_STAGE);
            b_load.issue(Bs + nbuf * B_STAGE);
        });
        const float* as = As + buf * A_STAGE;
        const float* bs = Bs + buf * B_STAGE;
        if (SPLIT_ACC) {
            float part[MT][NT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int n = 0; n < NT; ++n)
#pragma unroll
                    for (int q = 0; q < 4; ++q) part[i][n][q] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < BK; kb += 16) {
                float fa[MT][2][4], fb[NT][4];
                fragments(as, bs, kb, fa, fb);
                multiply(fa, fb, part);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int n = 0; n < NT; ++n)
#pragma unroll
                    for (int q = 0; q < 4; ++q) acc[i][n][q] += part[i][n][q];
        } else {
#pragma unroll
            for (int kb = 0; kb < BK; kb += 16) {
                float fa[MT][2][4], fb[NT][4];
                fragments(as, bs, kb, fa, fb);
                multiply(fa, fb, acc);
            }
        }
        if (++buf == STAGES) buf = 0;
    }
    cp_async_wait<0>();

    // Epilogue: C = alpha*acc + beta*C; each lane holds column pairs (2t, 2t+1) of rows g, g+8.
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long gi = row0 + wm0 + 16 * i + 8 * h + g;
            if (gi >= M) continue;
            float* crow = C + gi * ldc;
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                const long long gj = col0 + wn0 + 8 * n + 2 * t;
                float v0 = alpha * acc[i][n][2 * h], v1 = alpha * acc[i][n][2 * h + 1];
                // gj even, ldc even/multiple of 4 under VEC: 8-byte aligned pairs
                store_c_pair<VEC>(crow, gj, N, beta, v0, v1);
            }
        }
}
