// async_copy.cuh -- device helpers shared by the kernel families (pasted into each family's
// source by gpulinalg/core/kernels.py, so it is part of CuPy's cache key).
//
// cp.async (sm_80+): global -> shared copies that bypass registers; a source size of 0 writes
// zeros (out-of-range elements of edge tiles).  Named barriers among a subset of a block's
// warps.  Relaxed GPU-scope 16-byte loads and stores (the GPU panel's handoffs).  mbarriers
// and cp.async.bulk (sm_90): one thread moves a contiguous run into shared memory, completion
// counted in bytes on a barrier.  ring_advance: one step of a cp.async ring.  grouped_tile:
// the 1-D grid walked in groups of GROUP_M tile rows, so that consecutive blocks share tile
// rows of A and columns of B in L2.  store_c_pair and prefetch_tile_l2: the tensor-core
// GEMMs' epilogue store and L2 prefetch of a C tile.
#pragma once

#ifndef GROUP_M
#define GROUP_M 8
#endif

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

// Named barrier `id` (1-15; 0 is __syncthreads) among `threads` threads (a multiple of 32,
// whole warps): named_sync waits for all of them, named_arrive counts this warp and goes on
// (a producer's half); both order this thread's earlier memory accesses before the barrier.
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}

// 16 bytes as two single-copy-atomic 64-bit words, relaxed at GPU scope (L2; never a stale
// L1 line): the tagged records and rows through which the GPU panel's row leaf synchronises
// (kernels/getrf_*.cu).
__device__ __forceinline__ ulonglong2 ld_relaxed_gpu_v2(const ulonglong2* p) {
    ulonglong2 v;
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed_gpu_v2(ulonglong2* p, unsigned long long a,
                                                  unsigned long long b) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" :: "l"(p), "l"(a), "l"(b)
                 : "memory");
}

// mbarriers and bulk copies (TMA, non-tensor; sm_90), in PTX.
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (the bulk copies' complete_tx).
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// Spin until the barrier's phase with this parity has completed (acquire).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nMBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra MBAR_WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// Bulk copy of `bytes` (multiple of 16) global -> this CTA's shared memory; completes tx on bar.
__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes,
                                         unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// One step of a STAGES-deep cp.async ring at k-slice kt held in buffer buf: wait until slice kt
// has landed (this thread's copies), barrier (everyone's; slice kt-1's buffer is now free),
// then issue(nk, nbuf) the copies of slice nk = kt+STAGES-1 into that buffer, and commit (an
// empty group past the end keeps the group count that cp_async_wait relies on).
template <int STAGES, typename Issue>
__device__ __forceinline__ void ring_advance(int kt, int ktiles, int buf, Issue&& issue) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int nk = kt + STAGES - 1;
    int nbuf = buf + STAGES - 1;
    if (nbuf >= STAGES) nbuf -= STAGES;
    if (nk < ktiles) issue(nk, nbuf);
    cp_async_commit();
}

// Tile (row, column) of C that block `pid` computes, for BM x BN tiles of an M x N product.
__device__ __forceinline__ void grouped_tile(int M, int N, int BM, int BN, int pid,
                                             int& tile_m, int& tile_n) {
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int group_rows = min(tiles_m - first_m, GROUP_M);
    tile_m = first_m + (pid % per_group) % group_rows;
    tile_n = (pid % per_group) / group_rows;
}

// Epilogue of the tensor-core GEMMs: C[gj], C[gj+1] of row `crow` (column count N) := the
// already alpha-scaled v0, v1 + beta * C (C not read when beta == 0).  VEC: one 8-byte access
// when both columns exist (the caller guarantees gj even and an 8-byte aligned row).
template <bool VEC>
__device__ __forceinline__ void store_c_pair(float* crow, long long gj, long long N, float beta,
                                             float v0, float v1) {
    if (VEC && gj + 1 < N) {
        float2* p = reinterpret_cast<float2*>(crow + gj);
        if (beta != 0.0f) {
            const float2 o = *p;
            v0 = fmaf(beta, o.x, v0);
            v1 = fmaf(beta, o.y, v1);
        }
        *p = make_float2(v0, v1);
    } else {
        if (gj < N) crow[gj] = beta != 0.0f ? fmaf(beta, crow[gj], v0) : v0;
        if (gj + 1 < N) crow[gj + 1] = beta != 0.0f ? fmaf(beta, crow[gj + 1], v1) : v1;
    }
}

// A hint, spread over the 32 lanes of a warp: bring the 128-byte lines that hold rows
// row0 .. row0+rows-1 (those below M), columns col0 .. col0+cols-1 (those below N) of the
// row-major C into L2.  Each prefetched address is one of the tile's own elements.
__device__ __forceinline__ void prefetch_tile_l2(const float* C, long long ldc, int M, int N,
                                                 long long row0, int rows, long long col0,
                                                 int cols, int lane) {
    rows = (int)min((long long)rows, M - row0);
    cols = (int)min((long long)cols, N - col0);
    if (rows <= 0 || cols <= 0) return;
    const int lines = (cols * 4 + 127) / 128 + 1;    // a row segment touches at most this many
    for (int i = lane; i < rows * lines; i += 32) {
        const float* p = C + (row0 + i / lines) * ldc + col0;
        const unsigned long long first = reinterpret_cast<unsigned long long>(p);
        const unsigned long long a = (first & ~127ull) + 128ull * (i % lines);
        if (a < first + 4ull * cols)
            asm volatile("prefetch.global.L2 [%0];\n" :: "l"(a < first ? first : a));
    }
}
