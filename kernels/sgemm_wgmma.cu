// sgemm_wgmma.cu -- single-precision C = alpha * A * B + beta * C on the Hopper (sm_90a) TF32
// tensor cores through wgmma.mma_async, with the 3xTF32 error-compensated split (FP32-level
// accuracy) or plain TF32.  Same problem statement as kernels/sgemm_tc.cu (the mma.sync
// version): C row-major (ldc), A (M x K) and B (K x N) each in either major; two kernels:
//
// wgmma_split<KMAJOR, PARTS>: the pre-pass.  Reads one operand X (R x K, element (r, k) at
// X[r*ld + k] when KMAJOR, at X[k*ld + r] otherwise) and writes it, split and already in the
// main kernel's shared-memory image, into a workspace W:
//   big = cvt.rna.tf32(x), small = cvt.rna.tf32(x - big)   (PARTS = 2; PARTS = 1: big only)
//   W is a sequence of blocks, one per (row tile t of TR rows, k-slice s of 32), t-major:
//     block (t, s) = PARTS parts of TR x 32 floats (big, then small), each part K-major with the
//     128-byte swizzle: element (rr, kk) of the part (rr = r % TR, kk = k % 32, 16-byte chunk
//     c = kk / 4) at float rr*32 + 4*(c ^ (rr % 8)) + kk % 4.
//   Rows past R and k past K are written as zeros (whole tiles: the main loop has no bounds
//   checks).  A is passed as the M x K operand, B as the N x K operand B^T, so both end up
//   K-major, which TF32 wgmma requires of both operands (no transpose for .tf32).  A block of
//   32 x 8 threads moves one 32 x 32 tile through shared memory, reading along X's contiguous
//   dimension and writing whole 128-byte swizzled rows.
//
// sgemm_wgmma_tma<BM, BN, WN, STAGES, PARTS, SPLIT, PERSIST>: the product.  A block computes
// BM x BN tiles of C (grouped rasterisation, async_copy.cuh) with BM/64 consumer warpgroups;
// warpgroup w owns rows 64w..64w+63 and all BN columns, as BN/WN wgmma m64nWNk8 sub-blocks.
// Block (tile, slice) of the workspace is one contiguous run of bytes equal to its
// shared-memory image, so a producer warpgroup fills a STAGES-deep ring with bulk copies
// (cp.async.bulk, the TMA engine) and full/empty mbarriers per stage (details above the
// kernel).  Per k-slice of 32 and sub-block, PARTS = 2 issues 12 wgmma k8 steps, small
// products first: As*Bb (4), Ab*Bs (4), Ab*Bb (4); small*small (relative size 2^-22) is
// dropped.
// SPLIT (the accumulation fix of Ootomo & Yokota 2022): the tensor cores accumulate with
// truncation, so each slice is accumulated from zero (scale-d = 0 on its first wgmma) in a
// temporary m64nWN tile, waited for (wgmma.wait_group 0) and added to the running sum with FP32
// FADDs (round to nearest).  The other warpgroup's wgmmas keep the tensor pipe busy meanwhile.
// Without SPLIT the wgmmas accumulate into the sum directly (plain TF32 only).
// Epilogue: the scaled accumulators go through the free ring to shared memory, then every
// consumer warp reads and writes whole 16-byte runs of C's rows, a batch of loads in flight
// per thread before its stores (in a rank-k update, C -= A*B with k = 64..512, C's read and
// write are most of the time).  One block per tile (!PERSIST): PF_LEAD slices before the end
// of its k loop (so at once in a short one) the producer warp asks L2 for the block's C tile
// (prefetch.global.L2), which DRAM then serves while the tensor cores work.
// PERSIST: one block per SM walks the tiles blockIdx.x, + gridDim.x, ... with the ring's
// stages and phases running on from tile to tile.  The consumers keep the stage of a tile's
// last slice for its epilogue (released after it) and release the others as usual, so the
// producer loads the next tile's first slices while the epilogue runs; each warpgroup writes
// its 64 rows through its part of that one stage, 128 columns at a time (wg_epilogue_rows);
// no C prefetch.  The persistent kernel holds every SM to the end, so products that share the
// device with other streams' kernels (the LU's look-ahead panel) take the one-block-per-tile
// kernel.
// compute-sanitizer racecheck reports potential WAR hazards between the consumers' reads of
// the kept stage and the producer's later bulk copy into it; they are ordered by the
// warpgroup barrier, fence.proxy.async, and the empty mbarrier's arrive (release) / wait
// (acquire), a chain the tool does not follow (the test suite checks the persistent kernel
// bit for bit against the one-block-per-tile kernel on random data).
//
// PTX facts this relies on (checked against the PTX ISA text, sections "Asynchronous
// Warpgroup Level Matrix ..." and "Matrix Descriptor Format", as quoted by public docs):
//   * .tf32 syntax: wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 d, a-desc, b-desc,
//     scale-d, imm-scale-a, imm-scale-b (no imm-trans: transposes exist only for f16/bf16, so
//     A and B are both K-major); scale-d false gives D = A*B.
//   * descriptor: bits 0-13 start address >> 4, 16-29 leading byte offset >> 4 (unused for
//     swizzled K-major; 1), 32-45 stride byte offset >> 4 (1024 B: 8 rows of 128 B), 49-51
//     base offset (0: tiles 1024-byte aligned), 62-63 layout (1 = 128-byte swizzle).  The
//     128-byte swizzle XORs address bits 4-6 with bits 7-9, which is the c ^ (rr % 8) above for a
//     1024-byte aligned tile; the k8 step j of a slice starts at +32*j bytes.
//   * accumulator fragment of m64nNk8 .f32: warp q of the warpgroup holds rows 16q..16q+15;
//     lane l, g = l/4, t = l%4; d[4j+0] = (16q+g, 8j+2t), d[4j+1] = (16q+g, 8j+2t+1),
//     d[4j+2] = (16q+g+8, 8j+2t), d[4j+3] = (16q+g+8, 8j+2t+1).
//   * wgmma.fence before the first wgmma and after registers it uses were touched otherwise;
//     commit_group / wait_group N before reading the results.
//
// Knobs (template parameters; gpulinalg/gemm/wgmma.py passes them from its VARIANTS table and
// the static_asserts check them): BM = 64 * consumer warpgroups, BN, WN (wgmma N: 128 or
// 256), BK = 32 (the 128-byte swizzle row), STAGES, PARTS (2: 3xTF32, 1: TF32), SPLIT,
// PERSIST.  The tiles launched: 3xTF32 128 x 256 with WN 128, 2 stages, persistent or one
// block per tile, and 128 x 128 with 3 stages where 128 x 256 tiles leave SMs idle; TF32
// 128 x 256 with WN 256, 4 stages.  Threads: BM/64 * 128 + 128 (the producer).  Dynamic
// shared memory: STAGES * PARTS * (BM + BN) * 128 bytes + 1024 (alignment slack).
// Inf and NaN inputs: the epilogue recomputes the entries they touch in FP32 (WgExact), so
// non-finite results are those of FP32 arithmetic.
// Bound: tensor-core-bound; 3xTF32 issues three TF32 products, so its ceiling is a third of the
// H100's ~495 TFLOP/s dense TF32.  The pre-split workspace costs 4 * PARTS bytes per operand
// element per tile read: intensity 2*BM*BN/(4*PARTS*(BM+BN)) flop per byte of L2 traffic
// (21.3 for 3xTF32 on 128 x 256).  The split pre-pass is bandwidth-bound (4 bytes in,
// 4 * PARTS out per element).

#include <cuda_runtime.h>

#include "async_copy.cuh"

namespace {

constexpr int WG_BK = 32;  // k per slice: one 128-byte swizzle row of TF32
constexpr int PF_LEAD = 4;  // TMA pipeline: C's tile is prefetched this many slices before the end

__device__ __forceinline__ float wg_to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

// Shared-memory matrix descriptor of a K-major, 128-byte-swizzled tile at shared address addr.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4)   // start address
           | (1ull << 16)                                 // leading byte offset (unused)
           | ((unsigned long long)(1024 >> 4) << 32)     // stride byte offset: 8 rows
           | (1ull << 62);                                // 128-byte swizzle
}

__device__ __forceinline__ void wg_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// Orders the compiler's accesses to r after the preceding asm (wgmma.wait_group).
__device__ __forceinline__ void wg_touch(float& r) { asm volatile("" : "+f"(r) :: "memory"); }

__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define WG_F8(d, i)                                                                        \
    "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), \
        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define WG_F64(d, i)                                                                 \
    WG_F8(d, (i) + 0), WG_F8(d, (i) + 8), WG_F8(d, (i) + 16), WG_F8(d, (i) + 24),     \
        WG_F8(d, (i) + 32), WG_F8(d, (i) + 40), WG_F8(d, (i) + 48), WG_F8(d, (i) + 56)

// d (+)= A(64 x 8) * B(8 x N) with TF32 operands from shared memory; scale_d = 0: d = A*B.
template <int N>
__device__ __forceinline__ void wg_mma(float* d, unsigned long long da, unsigned long long db,
                                       int scale_d);

template <>
__device__ __forceinline__ void wg_mma<128>(float* d, unsigned long long da,
                                            unsigned long long db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1;\n}\n"
        : WG_F64(d, 0)
        : "l"(da), "l"(db), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wg_mma<256>(float* d, unsigned long long da,
                                            unsigned long long db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
        "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "
        "%125, %126, %127"
        "}, %128, %129, p, 1, 1;\n}\n"
        : WG_F64(d, 0), WG_F64(d, 64)
        : "l"(da), "l"(db), "r"(scale_d));
}

#undef WG_F64
#undef WG_F8

// ---- register budgets (sm_90), in PTX (mbarriers and bulk copies: async_copy.cuh).
// Warpgroup register budget (all threads of the warpgroup execute it).
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(R));
}

}  // namespace

// ---------------------------------------------------------------- the split pre-pass

template <bool KMAJOR, int PARTS>
__global__ void __launch_bounds__(256)
wgmma_split(const float* __restrict__ X, long long ld, int R, int K, int TR, int ktiles,
            float* __restrict__ W)
{
    static_assert(PARTS == 1 || PARTS == 2, "PARTS: 2 (big and small) or 1 (big)");
    __shared__ float tile[32][33];
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;   // 32 x 8 threads
    const long long r0 = (long long)blockIdx.x * 32;
    const long long part = (long long)TR * WG_BK;             // floats per part
    for (int ks = blockIdx.y; ks < ktiles; ks += gridDim.y) {
        const long long k0 = (long long)ks * WG_BK;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int a = ty + 8 * i;  // KMAJOR: row a, k tx;  else: k a, row tx
            const long long r = r0 + (KMAJOR ? a : tx), k = k0 + (KMAJOR ? tx : a);
            const float v = (r < R && k < K) ? (KMAJOR ? X[r * ld + k] : X[k * ld + r]) : 0.0f;
            if (KMAJOR) tile[a][tx] = v; else tile[tx][a] = v;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int rl = ty + 8 * i;             // row within this 32-row strip
            const long long r = r0 + rl;
            const int rr = (int)(r % TR);
            const float x = tile[rl][tx];
            const long long off = ((r / TR) * ktiles + ks) * (PARTS * part) + (long long)rr * WG_BK
                                  + (((tx >> 2) ^ (rr & 7)) << 2) + (tx & 3);
            const float big = wg_to_tf32(x);
            W[off] = big;
            if (PARTS == 2) W[off + part] = wg_to_tf32(x - big);
        }
        __syncthreads();
    }
}


// ---------------------------------------------------------------- the product

// One k-slice of the product for warpgroup wg, from the ring stage at shared address stage:
// per m64nWN sub-block, PARTS = 2 issues 12 wgmma k8 steps, small products first (As*Bb,
// Ab*Bs, then Ab*Bb); SPLIT accumulates the slice from zero in tmp and adds it to acc in FP32
// after wgmma.wait_group 0, else the wgmmas accumulate into acc (waited for at the end).
// Stage layout: A parts (BM x 32 each), then B parts (BN x 32 each), K-major, swizzled.
template <int BM, int BN, int WN, int PARTS, bool SPLIT>
__device__ __forceinline__ void wg_slice(float* acc, float* tmp, unsigned stage, int wg) {
    static_assert(BM % 64 == 0 && BM >= 64 && BM <= 256, "BM: 64 rows per warpgroup");
    static_assert(WN == 128 || WN == 256, "wgmma N: 128 or 256 (wg_mma specialisations)");
    static_assert(BN % WN == 0, "sub-blocks cover BN");
    static_assert(PARTS == 1 || PARTS == 2, "PARTS: 2 (3xTF32) or 1 (TF32)");
    static_assert(SPLIT || PARTS == 1, "3xTF32 needs the split accumulation");
    constexpr int A_PART = BM * WG_BK, B_PART = BN * WG_BK;          // floats
    constexpr int NSUB = BN / WN, SUB = WN / 2, ACC = BN / 2;
    const unsigned a_big = stage + wg * 64 * 128;
    const unsigned b_big0 = stage + 4u * (PARTS * A_PART);
#pragma unroll
    for (int h = 0; h < NSUB; ++h) {
        const unsigned b_big = b_big0 + h * WN * 128;
        float* d = SPLIT ? tmp : acc + h * SUB;
        wg_fence();
        if (PARTS == 2) {  // small products first: As*Bb, then Ab*Bs
            const unsigned a_small = a_big + 4u * A_PART, b_small = b_big + 4u * B_PART;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                wg_mma<WN>(d, wg_desc(a_small + 32 * j), wg_desc(b_big + 32 * j),
                           j > 0 || !SPLIT);
#pragma unroll
            for (int j = 0; j < 4; ++j)
                wg_mma<WN>(d, wg_desc(a_big + 32 * j), wg_desc(b_small + 32 * j), 1);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
            wg_mma<WN>(d, wg_desc(a_big + 32 * j), wg_desc(b_big + 32 * j),
                       PARTS == 2 || j > 0 || !SPLIT);
        wg_commit();
        if (SPLIT) {
            wg_wait<0>();
#pragma unroll
            for (int i = 0; i < SUB; ++i) {
                wg_touch(tmp[i]);
                acc[h * SUB + i] += tmp[i];
            }
        }
    }
    if (!SPLIT) {
        wg_wait<0>();
#pragma unroll
        for (int i = 0; i < ACC; ++i) wg_touch(acc[i]);
    }
}

// Four consecutive elements p[0..3] of C's row; FAST: one 16-byte access, else the `left`
// (elements before the row's end) that exist, 0 for the rest.
template <bool FAST>
__device__ __forceinline__ float4 wg_ld4(const float* p, long long left) {
    if (FAST) return *reinterpret_cast<const float4*>(p);
    return make_float4(left > 0 ? p[0] : 0.0f, left > 1 ? p[1] : 0.0f, left > 2 ? p[2] : 0.0f,
                       left > 3 ? p[3] : 0.0f);
}
template <bool FAST>
__device__ __forceinline__ void wg_st4(float* p, long long left, float4 v) {
    if (FAST) {   // one 16-byte store (in PTX: left to itself, ptxas split some into four)
        asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n"
                     :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
        return;
    }
    if (left > 0) p[0] = v.x;
    if (left > 1) p[1] = v.y;
    if (left > 2) p[2] = v.z;
    if (left > 3) p[3] = v.w;
}

// The original operands, for the entries the split products cannot give faithfully: a sum
// that comes out Inf or NaN (an Inf or NaN among its inputs, where a TF32 tail times an Inf
// head can turn FP32's +-Inf into NaN or flip its sign, or an overflow) is recomputed in FP32,
// alpha * (row i of A . column j of B) + beta * old, summed in order with FMAs: so the
// non-finite results are FP32's.  A(i, k) = A[i*lda + k] when a_kmajor, else A[k*lda + i];
// B(k, j) = B[k*ldb + j] when b_nmajor, else B[j*ldb + k].  O(K) per entry, finite results
// never take it.
struct WgExact {
    const float* A;
    long long lda;
    const float* B;
    long long ldb;
    int K;
    bool a_kmajor, b_nmajor;
    float alpha, beta;

    __device__ __forceinline__ float operator()(long long i, long long j, float old) const {
        const float* a = A + (a_kmajor ? i * lda : i);
        const float* b = B + (b_nmajor ? j : j * ldb);
        const long long sa = a_kmajor ? 1 : lda, sb = b_nmajor ? ldb : 1;
        float s = 0.0f;
        for (int k = 0; k < K; ++k) s = fmaf(a[k * sa], b[k * sb], s);
        return fmaf(beta, old, alpha * s);
    }
};

__device__ __forceinline__ bool wg_finite(float x) { return fabsf(x) <= 3.402823466e38f; }
__device__ __forceinline__ bool wg_finite4(float4 v) {
    return wg_finite(v.x) & wg_finite(v.y) & wg_finite(v.z) & wg_finite(v.w);
}

// Second half of the epilogue: C = T + beta*C for the BM x BN tile T (alpha already applied)
// staged in shared memory (row pitch LDT floats).  Warp w of the WARPS takes rows
// w*BM/WARPS.. in batches of R, lane l columns 4l + 128c (c < BN/128): every batch loads its
// R*BN/128 16-byte runs of C before it stores any, so each thread keeps that many loads in
// flight (C's rows may alias for all the compiler knows: it would not reorder them itself).
// FAST: the tile lies inside N and C's rows are 16-byte aligned.  beta == 0 never reads C.
// A non-finite entry of T is replaced by exact's FP32 value, after the batch.
template <bool FAST, int BM, int BN, int LDT, int WARPS>
__device__ __forceinline__ void wg_tile_to_c(float* C, long long ldc, int M, int N, float beta,
                                             const float* T, long long row0, long long col0,
                                             int warp, int lane, const WgExact& exact) {
    constexpr int CH = BN / 128, RW = BM / WARPS, R = 16 / CH < RW ? 16 / CH : RW;
    static_assert(BN % 128 == 0 && BM % WARPS == 0 && RW % R == 0, "epilogue batches");
#pragma unroll
    for (int rb = 0; rb < RW; rb += R) {
        float4 old[R][CH];
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const long long gi = row0 + warp * RW + rb + i;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const long long gj = col0 + 4 * lane + 128 * c;
                old[i][c] = beta != 0.0f && gi < M ? wg_ld4<FAST>(C + gi * ldc + gj, N - gj)
                                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        // An element whose T is not finite keeps C's old value here (a select: this unrolled
        // loop stays branch-free with 16-byte stores and keeps its loads in flight) and is
        // redone after the batch with exact, one element at a time, reading that old value
        // back (rare; a rolled loop, out of the way).
        bool redo = false;
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int r = warp * RW + rb + i;
            if (row0 + r >= M) continue;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const long long gj = col0 + 4 * lane + 128 * c;
                const float4 v = *reinterpret_cast<const float4*>(T + r * LDT + 4 * lane + 128 * c);
                const float4 o = old[i][c];
                redo |= !wg_finite4(v);
                wg_st4<FAST>(C + (row0 + r) * ldc + gj, N - gj,
                             make_float4(wg_finite(v.x) ? fmaf(beta, o.x, v.x) : o.x,
                                         wg_finite(v.y) ? fmaf(beta, o.y, v.y) : o.y,
                                         wg_finite(v.z) ? fmaf(beta, o.z, v.z) : o.z,
                                         wg_finite(v.w) ? fmaf(beta, o.w, v.w) : o.w));
            }
        }
        if (redo) {
#pragma unroll 1
            for (int e = 0; e < R * CH * 4; ++e) {
                const int r = warp * RW + rb + e / (CH * 4), c = e / 4 % CH;
                const long long gi = row0 + r, gj = col0 + 4 * lane + 128 * c + e % 4;
                const float t = T[r * LDT + 4 * lane + 128 * c + e % 4];
                if (gi >= M || gj >= N || wg_finite(t)) continue;   // written above
                float* p = C + gi * ldc + gj;
                *p = exact(gi, gj, beta != 0.0f ? *p : 0.0f);
            }
        }
    }
}

// The epilogues' two steps.  Staging: thread (warp q of warpgroup wg, g, t) holds, per
// sub-block h and 8-column group j, columns 8j+2t, +1 of rows 64wg+16q+g and +8: over the
// tile, pair p = (WN/8)h + j is columns 8p+2t, +1 in accumulators 4p + 2hr, +1 (hr: the row
// +8).  wg_stage writes the alpha-scaled pairs p0 .. p0+NP-1 of rows 16*warp + g (+8) to T as
// float2s at columns 8(p - p0) + 2t (pitch LDT = 8 mod 32: conflict-free).  wg_to_c then runs
// wg_tile_to_c on the BM x BN block of T at C's (row0, col0), on its 16-byte path where the
// block lies inside N and C's rows are 16-byte aligned.
template <int NP, int LDT>
__device__ __forceinline__ void wg_stage(float* T, const float* acc, int p0, float alpha,
                                         int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        float* trow = T + (16 * warp + 8 * hr + g) * LDT + 2 * t;
#pragma unroll
        for (int p = 0; p < NP; ++p)
            *reinterpret_cast<float2*>(trow + 8 * p) =
                make_float2(alpha * acc[4 * (p0 + p) + 2 * hr],
                            alpha * acc[4 * (p0 + p) + 2 * hr + 1]);
    }
}

template <int BM, int BN, int LDT, int WARPS>
__device__ __forceinline__ void wg_to_c(float* C, long long ldc, int M, int N, float beta,
                                        const float* T, long long row0, long long col0,
                                        int warp, int lane, const WgExact& exact) {
    const bool fast = col0 + BN <= N &&
                      ((reinterpret_cast<unsigned long long>(C) | (unsigned long long)ldc * 4) & 15) == 0;
    if (fast)
        wg_tile_to_c<true, BM, BN, LDT, WARPS>(C, ldc, M, N, beta, T, row0, col0, warp, lane,
                                                   exact);
    else
        wg_tile_to_c<false, BM, BN, LDT, WARPS>(C, ldc, M, N, beta, T, row0, col0, warp, lane,
                                                   exact);
}

// Epilogue: C = alpha*acc + beta*C for the BM x BN tile (tile_m, tile_n), by the block's
// THREADS consumer threads, through shared memory (the ring, free once every warpgroup's
// wgmmas are done: the first barrier); wg_tile_to_c reads whole 16-byte runs of rows,
// coalesced, against C (the producer has asked L2 for them already).
template <int BM, int BN, int THREADS>
__device__ __forceinline__ void wg_epilogue(float* C, long long ldc, int M, int N, float alpha,
                                            float beta, const float* acc, float* T,
                                            int tile_m, int tile_n, int tid,
                                            const WgExact& exact) {
    constexpr int LDT = BN + 8;
    const int lane = tid & 31, warp = tid >> 5;   // warp = 4wg + q
    named_sync(1, THREADS);                     // all the consumers
    wg_stage<BN / 8, LDT>(T, acc, 0, alpha, warp, lane);
    named_sync(1, THREADS);                     // all the consumers
    wg_to_c<BM, BN, LDT, THREADS / 32>(C, ldc, M, N, beta, T, (long long)tile_m * BM,
                                       (long long)tile_n * BN, warp, lane, exact);
}

// Epilogue of the persistent kernel: warpgroup wg writes its own 64 rows of the tile,
// HB columns at a time, through its part of one ring stage (T: 64 x (HB + 8) floats), so the
// other stages stay free for the next tile's slices: pass h stages pairs HB/8*h .., then its
// 4 warps write the 64 x HB block (16 rows each, 16 loads in flight per thread); warpgroup
// barriers 2 + wg.
template <int BN, int HB>
__device__ __forceinline__ void wg_epilogue_rows(float* C, long long ldc, int M, int N,
                                                 float alpha, float beta, const float* acc,
                                                 float* T, long long row0, long long col0,
                                                 int wg, int tid, const WgExact& exact) {
    constexpr int LDT = HB + 8;
    static_assert(BN % HB == 0 && HB % 128 == 0, "whole 128-column passes");
    const int lane = tid & 31, warp = (tid >> 5) & 3;
#pragma unroll
    for (int h = 0; h < BN / HB; ++h) {
        wg_stage<HB / 8, LDT>(T, acc, HB / 8 * h, alpha, warp, lane);
        named_sync(2 + wg, 128);                // warpgroup wg
        wg_to_c<64, HB, LDT, 4>(C, ldc, M, N, beta, T, row0, col0 + HB * h, warp, lane, exact);
        named_sync(2 + wg, 128);   // T is read: the next pass (or the producer) may overwrite it
    }
}

// sgemm_wgmma_tma: the product, warp-specialised.  The block is BM/64 consumer warpgroups plus
// one producer warpgroup (setmaxnreg: producer 40 registers, consumers the rest).  One
// producer thread moves each (tile, slice) workspace block with bulk copies (cp.async.bulk,
// the TMA engine; the block is one contiguous run, so no tensor map is needed) into a
// STAGES-deep ring with a full and an empty mbarrier per stage: it waits on empty[s], posts
// the byte count on full[s] (expect_tx) and issues the copies, which complete the phase.  The
// consumers wait on full[s], multiply (wg_slice), and release the stage with one arrival per
// warp on empty[s] once their wgmmas have been waited for.  No __syncthreads in the loop: the
// warpgroups run decoupled and the copies cost the consumers no issue slots.
template <int BM, int BN, int WN, int STAGES, int PARTS, bool SPLIT, bool PERSIST>
__global__ void __launch_bounds__((BM / 64) * 128 + 128, 1)
sgemm_wgmma_tma(int M, int N, int ktiles, float alpha, const float* __restrict__ WA,
                const float* __restrict__ WB, float beta, float* __restrict__ C, long long ldc,
                const float* A, long long lda, const float* B, long long ldb, int K, int layout)
{
    constexpr int CONSUMERS = (BM / 64) * 128;     // threads; the producer warpgroup follows
    // Registers per thread: producer 40, consumers the rest of the 64 Ki (multiple of 8, <= 256).
    constexpr int CONSUMER_REGS = (65536 / 128 - 40) / (BM / 64) / 8 * 8 > 256
                                      ? 256 : (65536 / 128 - 40) / (BM / 64) / 8 * 8;
    constexpr int A_PART = BM * WG_BK, B_PART = BN * WG_BK;          // floats
    constexpr int A_STAGE = PARTS * A_PART, B_STAGE = PARTS * B_PART;
    constexpr int STAGE = A_STAGE + B_STAGE;
    constexpr int SUB = WN / 2, ACC = BN / 2;
    constexpr int HB = BN < 128 ? BN : 128;        // PERSIST epilogue: columns per pass
    constexpr unsigned A_BYTES = 4u * A_STAGE, B_BYTES = 4u * B_STAGE;
    constexpr unsigned PIECE = 16384;              // bytes per bulk copy instruction (at most)
    constexpr unsigned A_PIECE = A_BYTES < PIECE ? A_BYTES : PIECE;
    constexpr unsigned B_PIECE = B_BYTES < PIECE ? B_BYTES : PIECE;
    static_assert(STAGES >= 2, "at least double buffering");
    static_assert(A_BYTES % A_PIECE == 0 && B_BYTES % B_PIECE == 0,
                  "whole bulk copies (16-byte multiples)");
    static_assert((long long)STAGES * STAGE * 4 + 1024 <= 227 * 1024 - 256,
                  "the ring (and the barriers) fit in 227 KiB of shared memory");
    static_assert(PERSIST || BM * (BN + 8) <= STAGES * STAGE,
                  "the epilogue's tile fits in the ring");
    static_assert(!PERSIST || BM * (HB + 8) <= STAGE,
                  "the persistent epilogue's passes fit in one stage");

    extern __shared__ __align__(16) unsigned char wg_smem_raw[];
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];   // full[s], then empty[s]
    const unsigned raw = smem_u32(wg_smem_raw);
    const unsigned ring_addr = (raw + 1023u) & ~1023u;   // swizzled tiles: 1024-byte aligned
    float* ring = reinterpret_cast<float*>(wg_smem_raw + (ring_addr - raw));
    const unsigned full0 = smem_u32(bars), empty0 = full0 + 8 * STAGES;
    const int tid = threadIdx.x;
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);                  // the producer's expect_tx arrival
            mbar_init(empty0 + 8 * s, CONSUMERS / 32);    // one arrival per consumer warp
        }
        fence_mbar_init();
    }
    __syncthreads();
    // Tiles tile = blockIdx.x, + gridDim.x, ...: PERSIST kernels run on fewer blocks than tiles
    // (one per SM); the others on one block per tile.  The ring's stage and phase run on
    // across a block's tiles.
    const int ntiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);

    if (tid >= CONSUMERS) {
        setmaxnreg_dec<40>();
        // Producer warp: refill stage s with slice kt once every consumer warp has released
        // it (the slice STAGES earlier, phase parity ^ 1), lane 0 issuing the copies.  One
        // block per tile: PF_LEAD slices before the end of the tile (at its start in a short
        // product) the warp also asks L2 for the tile of C, so that the epilogue reads it from
        // L2 while DRAM serves the next tiles (rank-k updates: C's traffic is most of the
        // time).  PERSIST: no prefetch; there the next tile's loads overlap the epilogue
        // instead.
        if (tid < CONSUMERS + 32) {
            const int lane = tid & 31;
            const int pf_at = !PERSIST && beta != 0.0f ? max(ktiles - PF_LEAD, 0) : -1;
            int s = 0, used = 0;
            unsigned phase = 0;
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                int tile_m, tile_n;
                grouped_tile(M, N, BM, BN, tile, tile_m, tile_n);
                const char* ga = reinterpret_cast<const char*>(WA + (long long)tile_m * ktiles * A_STAGE);
                const char* gb = reinterpret_cast<const char*>(WB + (long long)tile_n * ktiles * B_STAGE);
                for (int kt = 0; kt < ktiles; ++kt) {
                    if (used >= STAGES) mbar_wait(empty0 + 8 * s, phase ^ 1);
                    if (kt == pf_at)
                        prefetch_tile_l2(C, ldc, M, N, (long long)tile_m * BM, BM,
                                         (long long)tile_n * BN, BN, lane);
                    if (lane == 0) {
                        const unsigned full = full0 + 8 * s;
                        const unsigned sa = ring_addr + 4u * s * STAGE, sb = sa + A_BYTES;
                        const char* pa = ga + (long long)kt * A_BYTES;
                        const char* pb = gb + (long long)kt * B_BYTES;
                        mbar_expect_tx(full, A_BYTES + B_BYTES);
#pragma unroll
                        for (unsigned o = 0; o < A_BYTES; o += A_PIECE)
                            bulk_g2s(sa + o, pa + o, A_PIECE, full);
#pragma unroll
                        for (unsigned o = 0; o < B_BYTES; o += B_PIECE)
                            bulk_g2s(sb + o, pb + o, B_PIECE, full);
                    }
                    ++used;
                    if (++s == STAGES) { s = 0; phase ^= 1; }
                }
            }
        }
        return;   // the consumers wait for every copy before they finish
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int wg = tid >> 7;                              // warpgroup: rows 64*wg.. of the tile
    const int lane = tid & 31;
    const WgExact exact{A, lda, B, ldb, K, (layout & 1) != 0, (layout & 2) != 0, alpha, beta};
    float acc[ACC];
    float tmp[SPLIT ? SUB : 1];
#pragma unroll
    for (int i = 0; i < (SPLIT ? SUB : 1); ++i) tmp[i] = 0.0f;

    int s = 0;
    unsigned phase = 0;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        int tile_m, tile_n;
        grouped_tile(M, N, BM, BN, tile, tile_m, tile_n);
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
        int held = -1;   // PERSIST: the stage of the tile's last slice, kept for the epilogue
        for (int kt = 0; kt < ktiles; ++kt) {
            mbar_wait(full0 + 8 * s, phase);                  // slice kt has landed in stage s
            wg_slice<BM, BN, WN, PARTS, SPLIT>(acc, tmp, ring_addr + 4u * (s * STAGE), wg);
            // This warp's wgmmas on stage s are complete (wait_group 0): release the stage.
            if (PERSIST && kt + 1 == ktiles)
                held = s;
            else if (lane == 0)
                mbar_arrive(empty0 + 8 * s);
            if (++s == STAGES) { s = 0; phase ^= 1; }
        }
        if constexpr (PERSIST) {
            // Every warpgroup's wgmmas are done with the held stage (the barrier) before
            // either overwrites it; the producer meanwhile fills the others.  k = 0: no
            // slice was loaded, stage 0 is free.
            named_sync(1, CONSUMERS);
            float* T = ring + (held < 0 ? 0 : held) * STAGE + wg * 64 * (HB + 8);
            wg_epilogue_rows<BN, HB>(C, ldc, M, N, alpha, beta, acc, T,
                                     (long long)tile_m * BM + 64 * wg, (long long)tile_n * BN,
                                     wg, tid, exact);
            // The held stage goes back to the producer's bulk copies (async proxy) after
            // these generic accesses: proxy fence, then one arrival per warp.
            fence_proxy_async_smem();
            __syncwarp();
            if (held >= 0 && lane == 0) mbar_arrive(empty0 + 8 * held);
        } else {
            wg_epilogue<BM, BN, CONSUMERS>(C, ldc, M, N, alpha, beta, acc, ring, tile_m, tile_n,
                                           tid, exact);
        }
    }
}
