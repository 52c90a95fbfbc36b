// dgemm.cu -- double-precision C = alpha * A * B + beta * C on the FP64 tensor cores
// (mma.sync .f64: IEEE fp64 products and sums, FP64 accumulators).
//
// Storage: as kernels/sgemm.cu, everything is described row-major.  C is row-major (ldc);
// A (M x K) is K-contiguous (A[i*lda + k]) or M-contiguous (A[k*lda + i]); B (K x N) is
// N-contiguous (B[k*ldb + j]) or K-contiguous (B[j*ldb + k]).  A column-major C is handled by
// the caller as C^T = B^T A^T.  64-bit offsets; beta == 0 never reads C (C may hold NaN).
// Each element of C is one fixed sequence of tensor-core operations (no atomics, no split k):
// deterministic for a given instantiation and architecture.
//
// Bound: flop-bound on the FP64 tensor cores (H100/H200: 67 TFLOP/s); arithmetic intensity of
// a block = BM*BN/(4*(BM+BN)) flop/byte of operand traffic (16 for 128 x 128, from L2).  Rank-k
// updates with short k are bound by C's DRAM traffic (16 bytes per element of C).
//
// Instructions: on sm_90 mma.sync.m16n8k16.f64 (MK = 16) or m16n8k8 (MK = 8), one DMMA each;
// elsewhere (sm_80/86/89, and sm_100/120, where ptxas lowers the larger shapes to DMMA.8x8x4
// anyway) m8n8k4.  Fragments (PTX ISA; CUTLASS cute SM90_16x8x16_F64F64F64F64_TN,
// SM80_8x8x4_F64F64F64F64_TN), g = lane/4, t = lane%4, as (row, k), (k, col), (row, col):
//   m16n8k16: A a_i = (g + 8*(i%2), t + 4*(i/2)), i < 8;  B b_i = (t + 4i, g), i < 4
//   m16n8k8:  the same for i < 4 and i < 2;  m8n8k4: a0 = (g, t), b0 = (t, g)
//   C: m16n8 c_i = (g + 8*(i/2), 2t + i%2);  m8n8k4 c0, c1 = (g, 2t), (g, 2t+1)
// So a thread holds rows (columns) g + 8u of its warp tile at four k of each 16-k block.  Each
// fragment is one 8-byte shared-memory read straight into the register the instruction takes
// (a[h + 2j], b[j]; a 16-byte read pairs values the instruction wants apart: moves and
// registers).  Within each 16-k block, logical k = t + 4j is physical k = 4t + (j ^ (t & 1)),
// for A and B alike (the product is unchanged): it alternates the 8-byte half of a 16-byte
// chunk between neighbouring t, which the conflict-free K-major reads need.  An m16n8k8 takes
// j = 0, 1 then 2, 3; an m8n8k4 one j.
//
// Thread/data mapping (dgemm_mma<BM, BN, BK, WM, WN, STAGES, MINB, MK, SB, A_KMAJOR,
// B_NMAJOR, VEC>):
//   * a block computes a BM x BN tile of C with (BM/WM)*(BN/WN) warps; warp w owns the WM x WN
//     sub-tile (w / (BN/WN), w % (BN/WN)) as (WM/16) x (WN/8) m16n8 accumulator tiles
//     (WM*WN/16 registers per thread);
//   * a STAGES-deep ring of BK-slices in dynamic shared memory, filled with cp.async (16 bytes
//     per 2 doubles where VEC, zero-filling at the edges through the source size; else two
//     8-byte copies); each operand in its global orientation, 16-byte chunks swizzled:
//       K-major operand:  [rows][BK],  chunk c of row r at chunk c ^ (r & 3)
//       MN-major operand: [BK][rows],  chunk c of k-row k at chunk c ^ (((k >> 2) & 3) << 1)
//     so that each half warp's fragment reads (K-major: rows r..r+3 at k 4t + (j ^ (t & 1)),
//     t = 0..3; MN-major: k-rows 4t + (j ^ (t & 1)) at 4 consecutive rows) and each quarter
//     warp's cp.async writes are bank-conflict free (tests/test_dgemm.py models both);
//   * pipeline: slice kt + 1 lands while slice kt is multiplied; one barrier per slice, before
//     the warp's last streamed tile of it, after which the buffer of slice kt - 1 takes slice
//     kt + STAGES - 1.  One operand is streamed, the other held: each streamed tile's fragments
//     (A's m16 tiles, or B's n8 tiles where SB) are read during the previous tile's products,
//     the held operand's fragments of a 16-k block right after the previous block's last
//     products (SB holds A: a warp tile wider than tall holds fewer registers that way);
//   * C: the accumulators start at zero; with beta != 0 the epilogue reads C, the loads of
//     8 rows of the warp tile in flight at a time, and writes alpha * acc + beta * C (C rounded once
//     per call, as the LU's accuracy needs); beta == 0 never reads C.  C is accessed with .cs
//     (streaming: evict-first) so that A and B keep L2;
//   * epilogue: each lane writes columns 2t, 2t+1 of rows g, g+8 of each m16n8 tile (16-byte
//     accesses where VEC); out-of-range operand elements are copied as zeros, out-of-range C
//     elements skipped; the 1-D grid is walked in groups of GROUP_M tile rows (L2 reuse).
// Knobs (template parameters; gpulinalg/gemm/dmma.py passes them, static_asserts check them):
//   BM, BN (block tile), BK = 16 or 32, WM, WN (warp tile, multiples of 16),
//   STAGES >= 3, MINB resident blocks per SM (__launch_bounds__; one fewer for 3 or more
//   without VEC, whose 8-byte copies need the registers), MK (sm_90 instruction), SB (B
//   streamed, A held).  Defaults (gpulinalg/tuning.py): 128 x 128 tiles of 8 warps of 64 x 32,
//   BK = 32, 3 stages, m16n8k16; for k <= 512 (rank-k updates) 128 x 64 tiles of 4 warps of
//   32 x 64 (SB), two blocks per SM; 64 x 64 tiles (4 warps of 32 x 32) where the large tile
//   leaves most SMs idle.
//   VEC requires lda, ldb, ldc even and 16-byte aligned base pointers (the caller checks).
//   Dynamic shared memory: 8 * STAGES * BK * (BM + BN) bytes (128 KiB for the default).

#include <cuda_runtime.h>

#include "async_copy.cuh"

namespace {

// The FP64 mma instructions of the header (d += a * b, one warp).  a, b: the fragments in the
// instruction's register order (a_i, b_i of the header).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
#define DGEMM_SM90_MMA 1
__device__ __forceinline__ void dg_mma16816(double (&d)[4], const double* a, const double* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, "
                 "{%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
                   "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
__device__ __forceinline__ void dg_mma1688(double (&d)[4], const double* a, const double* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
#else
__device__ __forceinline__ void dg_mma884(double& d0, double& d1, double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, "
                 "{%0, %1};\n" : "+d"(d0), "+d"(d1) : "d"(a), "d"(b));
}
#endif

// cp.async of `bytes` (0, 8 or 16) global bytes into a 16-byte shared chunk, the rest zeros.
__device__ __forceinline__ void dg_cp16(double* dst, const double* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(bytes));
}
// cp.async of `bytes` (0 or 8) into an 8-byte shared word, zeros where 0.
__device__ __forceinline__ void dg_cp8(double* dst, const double* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(bytes));
}

// Copy the n (0, 1 or 2) in-range doubles of src[0..1] to the 16-byte chunk dst[0..1], zeros
// past them.  A copy of 0 bytes reads nothing: src may then point outside the operand.
template <bool VEC>
__device__ __forceinline__ void dg_copy_chunk(double* dst, const double* src, int n) {
    if (VEC) {
        dg_cp16(dst, src, 8 * n);
    } else {
        dg_cp8(dst, src, n > 0 ? 8 : 0);
        dg_cp8(dst + 1, src + 1, n > 1 ? 8 : 0);
    }
}

// One double from shared memory: an 8-byte read straight into the register the mma takes
// (plain loads of neighbouring doubles may be merged into a 16-byte one and moved apart again);
// the "memory" clobber keeps it between the ring's barriers.
__device__ __forceinline__ double dg_lds(const double* p) {
    double v;
    asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(v) : "r"(smem_u32(p)) : "memory");
    return v;
}

// Swizzles of the 16-byte chunks (a 128-byte span covers the 32 banks).
// K-major [rows][BK]: rows r .. r+3 (read together by a half warp) XOR their chunks by 0..3.
// MN-major [BK][rows]: k-rows 4t + j (t = 0..3, read together) XOR theirs by 0, 2, 4, 6.
__device__ __forceinline__ int dg_kswz(int r) { return r & 3; }
__device__ __forceinline__ int dg_mnswz(int k) { return ((k >> 2) & 3) << 1; }

__device__ __forceinline__ int dg_clamp2(int left) { return left >= 2 ? 2 : (left > 0 ? left : 0); }

// Copies one operand's BK-slices, one slice per issue() call in k order, into its shared-memory
// ring (layouts in the header).  ROWS: the operand's extent in the block tile (BM or BN), KM:
// the operand is K-major.  Each thread copies PASSES 16-byte chunks per slice, one pass apart
// by STEP shared-memory rows; only a running pointer and a k-countdown change between slices.
template <int ROWS, int BK, int THREADS, bool KM, bool VEC>
struct DgLoader {
    static constexpr int CPR = KM ? BK / 2 : ROWS / 2;  // chunks per shared-memory row
    static constexpr int STEP = THREADS / CPR;          // shared-memory rows per pass
    static constexpr int PASSES = ROWS * BK / 2 / THREADS;
    static_assert(THREADS % CPR == 0 && PASSES * THREADS * 2 == ROWS * BK,
                  "passes must cover the slice exactly");
    static_assert(!KM || STEP % 4 == 0, "K-major passes keep the row swizzle (r & 3)");

    const double* ptr;    // global address of this thread's first chunk of the next slice
    long long pass_step;  // global elements between passes
    long long slice_step; // global elements between slices
    int k_left;           // KM: K - k0 - 2c;  MN-major: K - k0 - kk
    int mn_left;          // KM: MN - r0 - r;  MN-major: MN - r0 - 2c
    int soff;             // KM: shared offset of this thread's chunk (pass 0); MN-major: 2c
    int kk;               // MN-major: this thread's k-row in pass 0

    __device__ __forceinline__ DgLoader(const double* X, long long ld, long long r0, int MN,
                                        int K, int tid) {
        const int r = tid / CPR, c = tid % CPR;  // KM: (row, chunk); MN-major: (k-row, chunk)
        pass_step = STEP * ld;
        if (KM) {
            ptr = X + (r0 + r) * ld + 2 * c;
            slice_step = BK;
            k_left = K - 2 * c;
            mn_left = (int)(MN - r0) - r;
            soff = r * BK + ((c ^ dg_kswz(r)) << 1);
            kk = 0;
        } else {
            ptr = X + r * ld + r0 + 2 * c;
            slice_step = BK * ld;
            k_left = K - r;
            mn_left = (int)(MN - r0) - 2 * c;
            soff = c << 1;
            kk = r;
        }
    }

    __device__ __forceinline__ void issue(double* stage) {
#pragma unroll
        for (int l = 0; l < PASSES; ++l) {
            const double* src = ptr + l * pass_step;
            if (KM) {  // chunk = 2 consecutive k of one row; rows past MN are zeros
                const int n = l * STEP < mn_left ? dg_clamp2(k_left) : 0;
                dg_copy_chunk<VEC>(stage + soff + l * STEP * BK, src, n);
            } else {   // chunk = 2 consecutive rows of one k; k-rows past K are zeros
                const int k = kk + l * STEP;
                const int n = l * STEP < k_left ? dg_clamp2(mn_left) : 0;
                dg_copy_chunk<VEC>(stage + k * ROWS + (soff ^ (dg_mnswz(k) << 1)), src, n);
            }
        }
        ptr += slice_step;
        k_left -= BK;
    }
};

// Fragment reads from one operand's stage.  The thread reads rows base + 8u + g (u = 0, 1,
// ...: A's m16 tile i is u = 2i, 2i+1; B's n8 tile n is u = n) at physical k = kb + 4t +
// (j ^ (t & 1)), j = 0..3 (logical k t + 4j of the 16-k block at kb).  Each address is one
// of four per-thread offsets plus a compile-time one:
//   K-major: element (r, k) at r*BK + 2*((k/2) ^ (r & 3)) + (k & 1), here
//     off[j] + 8u*BK + kb,  off[j] = ((base + g)*BK + 2*(2t ^ (g & 3)) + (t & 1)) ^ j;
//   MN-major: element (k, r) at k*ROWS + 4*((r/4) ^ ((k/4) & 3)) + (r & 3) (the chunk swizzle
//     in quads of 4 doubles), here off[2(u & 1) + (j & 1)] + j*ROWS + 16*(u/2) + kb*ROWS,
//     off[2e + p] = (4t + (t & 1)*(1 - 2p))*ROWS + ((base + 4*((g/4) ^ t) + (g & 3)) ^ 8e).
// Half a warp (g = 0..3 or 4..7, t = 0..3) reads 16 distinct 8-byte bank slots either way:
// K-major, rows r..r+3 hold k 4t + (j ^ (t & 1)) in 4 distinct chunks each, at alternating
// halves; MN-major, 4 k-rows hold the same 32 bytes of rows in 4 distinct quads.
template <int ROWS, int BK, bool KM>
struct DgFrag {
    int off[4];

    __device__ __forceinline__ DgFrag(int base, int g, int t) {
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            if (KM) {
                off[x] = ((base + g) * BK + 2 * ((2 * t) ^ (g & 3)) + (t & 1)) ^ x;
            } else {
                const int e = x >> 1, p = x & 1;
                off[x] = (4 * t + (t & 1) * (1 - 2 * p)) * ROWS +
                         ((base + 4 * ((g >> 2) ^ t) + (g & 3)) ^ (8 * e));
            }
        }
    }

    // Element (row base + 8u + g, logical k t + 4j) of the 16-k block at kb.
    __device__ __forceinline__ double load(const double* s, int u, int j, int kb) const {
        if (KM) return dg_lds(s + off[j] + 8 * u * BK + kb);
        return dg_lds(s + off[2 * (u & 1) + (j & 1)] + j * ROWS + 16 * (u >> 1) + kb * ROWS);
    }
};

// C is streamed (.cs: evict-first in L1 and L2): each element is read and written once per
// product, while A and B, which the blocks of a tile row or column share, should stay in L2.
__device__ __forceinline__ double dg_ldc(const double* p) {
    double v;
    asm volatile("ld.global.cs.f64 %0, [%1];\n" : "=d"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ double2 dg_ldc2(const double* p) {
    double2 v;
    asm volatile("ld.global.cs.v2.f64 {%0, %1}, [%2];\n" : "=d"(v.x), "=d"(v.y) : "l"(p));
    return v;
}
__device__ __forceinline__ void dg_stc(double* p, double v) {
    asm volatile("st.global.cs.f64 [%0], %1;\n" :: "l"(p), "d"(v) : "memory");
}
__device__ __forceinline__ void dg_stc2(double* p, double v0, double v1) {
    asm volatile("st.global.cs.v2.f64 [%0], {%1, %2};\n" :: "l"(p), "d"(v0), "d"(v1) : "memory");
}

// v0, v1 := C[gj], C[gj+1] of row `crow` (N columns), zeros past N.  VEC: one 16-byte access
// when both columns exist (gj even, row aligned).
template <bool VEC>
__device__ __forceinline__ void dg_load_pair(const double* crow, long long gj, long long N,
                                             double& v0, double& v1) {
    if (VEC && gj + 1 < N) {
        const double2 v = dg_ldc2(crow + gj);
        v0 = v.x;
        v1 = v.y;
    } else {
        v0 = gj < N ? dg_ldc(crow + gj) : 0.0;
        v1 = gj + 1 < N ? dg_ldc(crow + gj + 1) : 0.0;
    }
}

// C[gj], C[gj+1] of row `crow` := v0, v1, the columns below N.
template <bool VEC>
__device__ __forceinline__ void dg_store_pair(double* crow, long long gj, long long N, double v0,
                                              double v1) {
    if (VEC && gj + 1 < N) {
        dg_stc2(crow + gj, v0, v1);
    } else {
        if (gj < N) dg_stc(crow + gj, v0);
        if (gj + 1 < N) dg_stc(crow + gj + 1, v1);
    }
}

}  // namespace

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int MINB, int MK, bool SB,
          bool A_KMAJOR, bool B_NMAJOR, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, VEC || MINB < 3 ? MINB : MINB - 1)
dgemm_mma(int M, int N, int K, double alpha, const double* __restrict__ A, long long lda,
          const double* __restrict__ B, long long ldb, double beta, double* __restrict__ C,
          long long ldc)
{
    constexpr int WARPS_N = BN / WN;
    constexpr int THREADS = (BM / WM) * WARPS_N * 32;
    constexpr int MT = WM / 16, NT = WN / 8;         // mma tiles per warp
    constexpr int KB = BK / 16;                      // 16-k blocks per slice
    constexpr int A_STAGE = BM * BK, B_STAGE = BN * BK;
    static_assert(BK == 16 || BK == 32, "BK: 16 or 32 (whole 16-k blocks, 128-byte spans)");
    static_assert(MK == 16 || MK == 8, "MK: the sm_90 instruction's k, 16 or 8");
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0,
                  "warp tiles divide the block and start on 16-row swizzle groups");
    static_assert(STAGES >= 3, "slice kt + 1 lands while kt is multiplied and kt - 1 refills");

    extern __shared__ __align__(16) double smem[];
    double* As = smem;                      // [STAGES][BM*BK]
    double* Bs = smem + STAGES * A_STAGE;   // [STAGES][BN*BK]

    int tile_m, tile_n;  // grouped rasterisation (L2 reuse)
    grouped_tile(M, N, BM, BN, blockIdx.x, tile_m, tile_n);
    const long long row0 = (long long)tile_m * BM, col0 = (long long)tile_n * BN;

    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    // Operand copies into the ring: A is M x K, B^T is N x K (K-major when B is K-contiguous).
    DgLoader<BM, BK, THREADS, A_KMAJOR, VEC> a_load(A, lda, row0, M, K, tid);
    DgLoader<BN, BK, THREADS, !B_NMAJOR, VEC> b_load(B, ldb, col0, N, K, tid);
    const DgFrag<BM, BK, A_KMAJOR> a_frag(wm0, g, t);
    const DgFrag<BN, BK, !B_NMAJOR> b_frag(wn0, g, t);

    // The ring's fill: slices 0 .. STAGES-2, one commit group each (empty past the end).
    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) {
            a_load.issue(As + s * A_STAGE);
            b_load.issue(Bs + s * B_STAGE);
        }
        cp_async_commit();
    }

    // Accumulators from zero: the products of this call are summed apart from C, which the
    // epilogue adds once (a trailing update rounds C once per call, as LAPACK's blocked LU
    // does; adding into C at every k-step would round it k/MK times).
    double acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][n][q] = 0.0;

    // Fragments.  One operand's tiles are streamed, the other's held: SB false, the A
    // fragments of m16 tile o + 1 are read while tile o's products run (fs[o & 1]), and the B
    // fragments of all n8 tiles of a 16-k block are held (fh); SB true, the same with the
    // roles swapped (B streamed per n8 tile, A held per 16-k block), which suits warp tiles
    // wider than tall.  The held fragments, and the next block's first streamed ones, are read
    // right after the block's last products are issued.  A fragment: a[h + 2j] = A(g + 8h,
    // t + 4j); B fragment: b[j] = B(t + 4j, g).
    constexpr int OT = SB ? NT : MT;          // streamed tiles per 16-k block
    constexpr int HT = SB ? MT : NT;          // held tiles
    constexpr int SF = SB ? 4 : 8, HF = SB ? 8 : 4;
    double fs[2][SF], fh[HT][HF];
    auto load_a = [&](double* f, const double* as, int i, int kb) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) f[h + 2 * j] = a_frag.load(as, 2 * i + h, j, kb);
    };
    auto load_b = [&](double* f, const double* bs, int n, int kb) {
#pragma unroll
        for (int j = 0; j < 4; ++j) f[j] = b_frag.load(bs, n, j, kb);
    };
    // streamed tile o of the 16-k block at kb into f
    auto load_s = [&](double* f, const double* as, const double* bs, int o, int kb) {
        if constexpr (SB) load_b(f, bs, o, kb);
        else load_a(f, as, o, kb);
    };
    // every held tile of the 16-k block at kb
    auto load_h = [&](const double* as, const double* bs, int kb) {
#pragma unroll
        for (int h = 0; h < HT; ++h) {
            if constexpr (SB) load_a(fh[h], as, h, kb);
            else load_b(fh[h], bs, h, kb);
        }
    };
    auto mma = [&](double (&d)[4], const double* a, const double* b) {
#ifdef DGEMM_SM90_MMA
        if (MK == 16) {
            dg_mma16816(d, a, b);
        } else {
            dg_mma1688(d, a, b);           // logical k t, t + 4
            dg_mma1688(d, a + 4, b + 2);   // logical k t + 8, t + 12
        }
#else
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) dg_mma884(d[2 * h], d[2 * h + 1], a[h + 2 * j], b[j]);
#endif
    };
    // the products of streamed tile o with every held tile
    auto mma_s = [&](int o, const double* f) {
#pragma unroll
        for (int h = 0; h < HT; ++h) {
            if constexpr (SB) mma(acc[h][o], fh[h], f);
            else mma(acc[o][h], f, fh[h]);
        }
    };

    // The ring: slice kt in buffer kt % STAGES.  Before the last m16 tile of slice kt, a
    // barrier: slice kt + 1 has landed and every warp has read slice kt - 1, whose buffer then
    // takes slice kt + STAGES - 1.  The last tile's A fragments are read after the barrier,
    // which keeps its products after it (ptxas would otherwise hoist all of a slice's mma
    // above the barrier); they run while the next slice's first fragments load.
    int rd = 0;   // buffer of the slice being multiplied
    if (ktiles > 0) {
        cp_async_wait<STAGES - 2>();   // slice 0 landed (this thread's copies) ...
        __syncthreads();               // ... and everyone's
        load_h(As, Bs, 0);
        load_s(fs[0], As, Bs, 0, 0);
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const double* as = As + rd * A_STAGE;
        const double* bs = Bs + rd * B_STAGE;
        int nx = rd + 1;   // buffer of slice kt + 1
        if (nx == STAGES) nx = 0;
#pragma unroll
        for (int kb = 0; kb < KB; ++kb) {
#pragma unroll
            for (int o = 0; o < OT; ++o) {
                if (o + 1 == OT && kb + 1 == KB) {
                    cp_async_wait<STAGES - 3>();   // slice kt + 1 landed ...
                    __syncthreads();               // ... everyone's; slice kt - 1 read
                    if (OT > 1) load_s(fs[o & 1], as, bs, o, 16 * kb);
                    if (kt + STAGES - 1 < ktiles) {
                        const int wr = rd == 0 ? STAGES - 1 : rd - 1;
                        a_load.issue(As + wr * A_STAGE);
                        b_load.issue(Bs + wr * B_STAGE);
                    }
                    cp_async_commit();
                }
                // the next streamed tile's fragments (the last one's: after the barrier above)
                if (o + 1 < OT && !(o + 2 == OT && kb + 1 == KB))
                    load_s(fs[(o + 1) & 1], as, bs, o + 1, 16 * kb);
                mma_s(o, fs[o & 1]);
            }
            // the next 16-k block's held fragments and first streamed ones
            if (kb + 1 < KB) {
                load_h(as, bs, 16 * (kb + 1));
                load_s(fs[0], as, bs, 0, 16 * (kb + 1));
            } else if (kt + 1 < ktiles) {
                load_h(As + nx * A_STAGE, Bs + nx * B_STAGE, 0);
                load_s(fs[0], As + nx * A_STAGE, Bs + nx * B_STAGE, 0, 0);
            }
        }
        rd = nx;
    }
    cp_async_wait<0>();

    // Epilogue: each lane holds columns 2t, 2t+1 of rows g, g+8 of each m16n8 tile.
    if (beta == 0.0) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const long long gi = row0 + wm0 + 16 * i + 8 * h + g;
                if (gi >= M) continue;
                double* crow = C + gi * ldc;
#pragma unroll
                for (int n = 0; n < NT; ++n)
                    dg_store_pair<VEC>(crow, col0 + wn0 + 8 * n + 2 * t, N,
                                       alpha * acc[i][n][2 * h], alpha * acc[i][n][2 * h + 1]);
            }
    } else {
        // C = alpha acc + beta C, one row of m16n8 tiles (8 rows of the warp tile) at a time:
        // its C values read together (one round trip per 8 rows, not per element), then
        // combined and stored.
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const long long gi = row0 + wm0 + 16 * i + 8 * h + g;
                if (gi >= M) continue;
                double* crow = C + gi * ldc;
                double c[NT][2];
#pragma unroll
                for (int n = 0; n < NT; ++n)
                    dg_load_pair<VEC>(crow, col0 + wn0 + 8 * n + 2 * t, N, c[n][0], c[n][1]);
#pragma unroll
                for (int n = 0; n < NT; ++n)
                    dg_store_pair<VEC>(crow, col0 + wn0 + 8 * n + 2 * t, N,
                                       fma(beta, c[n][0], alpha * acc[i][n][2 * h]),
                                       fma(beta, c[n][1], alpha * acc[i][n][2 * h + 1]));
            }
    }
}
