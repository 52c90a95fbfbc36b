// sgemm_wgmma_cpasync.cu -- the benchmark's baseline of the Hopper tensor-core SGEMM: the
// first wgmma kernel, before the warp-specialised pipeline of kernels/sgemm_wgmma.cu.
// gpulinalg-bench sgemm --tc times it beside the library's kernel and cuBLAS; the library
// never launches it.  It is compiled after the text of kernels/sgemm_wgmma.cu (the benchmark
// pastes that file first), whose helpers it uses: wg_slice (the k-slice of wgmmas),
// wg_epilogue, WgExact, and the workspace the pre-pass wgmma_split writes.
//
// sgemm_wgmma<BM, BN, WN, STAGES, PARTS, SPLIT>: the same problem, workspace, tiles and wgmma
// sequence as sgemm_wgmma_tma with PERSIST false; what differs is how the ring is filled.  A
// block of BM/64 warpgroups (no producer warpgroup) computes one BM x BN tile of C; every
// thread copies its share of each (tile, slice) workspace block into the STAGES-deep ring with
// 16-byte cp.async, and the block synchronises per slice with cp.async.wait_group +
// fence.proxy.async.shared::cta + __syncthreads (cp.async writes are generic-proxy writes,
// wgmma reads through the async proxy).  No C prefetch.  The benchmark launches
// <128, 256, 128, 2, 2, true> (3xTF32, the library's large tile), 256 threads, with the
// dynamic shared memory STAGES * PARTS * (BM + BN) * 128 + 1024 bytes.
// Bound: tensor-core-bound, as the library's kernel; the copies cost the consumers issue
// slots and every slice a block-wide barrier, which is what the warp-specialised pipeline
// removes.

template <int BM, int BN, int WN, int STAGES, int PARTS, bool SPLIT>
__global__ void __launch_bounds__((BM / 64) * 128, 1)
sgemm_wgmma(int M, int N, int ktiles, float alpha, const float* __restrict__ WA,
            const float* __restrict__ WB, float beta, float* __restrict__ C, long long ldc,
            const float* A, long long lda, const float* B, long long ldb, int K, int layout)
{
    constexpr int THREADS = (BM / 64) * 128;
    constexpr int A_PART = BM * WG_BK, B_PART = BN * WG_BK;          // floats
    constexpr int A_STAGE = PARTS * A_PART, B_STAGE = PARTS * B_PART;
    constexpr int STAGE = A_STAGE + B_STAGE;
    constexpr int SUB = WN / 2;          // accumulator floats per thread per sub-block
    constexpr int ACC = BN / 2;          // running-sum floats per thread
    constexpr int A_CHUNKS = A_STAGE / 4 / THREADS, B_CHUNKS = B_STAGE / 4 / THREADS;
    static_assert(STAGES >= 2, "at least double buffering");
    static_assert(A_CHUNKS * THREADS * 4 == A_STAGE && B_CHUNKS * THREADS * 4 == B_STAGE,
                  "the 16-byte copies cover a stage exactly");
    static_assert((long long)STAGES * STAGE * 4 + 1024 <= 227 * 1024,
                  "the ring fits in 227 KiB of shared memory");
    static_assert(BM * (BN + 8) <= STAGES * STAGE, "the epilogue's tile fits in the ring");

    extern __shared__ __align__(16) unsigned char wg_smem_raw[];
    // Swizzled tiles need 1024-byte aligned bases (descriptor base offset 0).
    const unsigned raw = smem_u32(wg_smem_raw);
    const unsigned pad = ((raw + 1023u) & ~1023u) - raw;
    float* ring = reinterpret_cast<float*>(wg_smem_raw + pad);
    const unsigned ring_addr = raw + pad;

    int tile_m, tile_n;
    grouped_tile(M, N, BM, BN, blockIdx.x, tile_m, tile_n);
    const int tid = threadIdx.x;
    const int wg = tid >> 7;             // warpgroup: rows 64*wg.. of the tile

    // This block's workspace runs: block (tile, slice) = one contiguous stage image.
    const float* ga = WA + (long long)tile_m * ktiles * A_STAGE + 4 * tid;
    const float* gb = WB + (long long)tile_n * ktiles * B_STAGE + 4 * tid;
    auto load = [&](int kt, int buf) {
        float* sa = ring + buf * STAGE + 4 * tid;
        float* sb = sa + A_STAGE;
        const float* pa = ga + (long long)kt * A_STAGE;
        const float* pb = gb + (long long)kt * B_STAGE;
#pragma unroll
        for (int i = 0; i < A_CHUNKS; ++i) cp_async16(sa + 4 * THREADS * i, pa + 4 * THREADS * i);
#pragma unroll
        for (int i = 0; i < B_CHUNKS; ++i) cp_async16(sb + 4 * THREADS * i, pb + 4 * THREADS * i);
    };

    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
    float tmp[SPLIT ? SUB : 1];
#pragma unroll
    for (int i = 0; i < (SPLIT ? SUB : 1); ++i) tmp[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load(s, s);
        cp_async_commit();
    }

    int buf = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
        // Slice kt has landed (own copies), is made visible to the async proxy, and everyone's
        // copies are in (barrier).  Every warpgroup has also finished the wgmmas of slice kt-1
        // (waited for below), so its buffer is free for slice kt + STAGES - 1.
        cp_async_wait<STAGES - 2>();
        fence_proxy_async_smem();
        __syncthreads();
        {
            const int nk = kt + STAGES - 1;
            int nbuf = buf + STAGES - 1;
            if (nbuf >= STAGES) nbuf -= STAGES;
            if (nk < ktiles) load(nk, nbuf);
            cp_async_commit();
        }
        wg_slice<BM, BN, WN, PARTS, SPLIT>(acc, tmp, ring_addr + 4u * (buf * STAGE), wg);
        if (++buf == STAGES) buf = 0;
    }
    cp_async_wait<0>();

    const WgExact exact{A, lda, B, ldb, K, (layout & 1) != 0, (layout & 2) != 0, alpha, beta};
    wg_epilogue<BM, BN, THREADS>(C, ldc, M, N, alpha, beta, acc, ring, tile_m, tile_n, tid, exact);
}
