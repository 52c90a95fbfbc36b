// sgemm_volkov2008.cu -- the benchmark's SGEMM baseline: Volkov & Demmel's 2008 sgemmNN
// ("Benchmarking GPUs to tune dense linear algebra", SC08), the first register-blocked GPU
// SGEMM.  gpulinalg-bench sgemm times it beside the library's kernels (kernels/sgemm.cu) and
// cuBLAS; the library never launches it.
//
// Computes Cc = alpha * Ac * Bc + beta * Cc, column-major in its own terms: Ac is Mc x Kc
// (leading dimension lda), Bc Kc x Nc (ldb), Cc Mc x Nc (ldc); offsets 64-bit.  The benchmark
// calls it for a row-major C = A B as C^T = B^T A^T (Ac = the row-major B, Bc = the row-major
// A), so every operand is contiguous along rows.  Requires Mc % 64 == 0, Nc % 16 == 0,
// Kc % 16 == 0 (the caller checks); no edge tiles.
//
// Tiling: a block of 64 threads computes a 64 x 16 tile of Cc; thread t owns row t of the tile
// (16 values in registers).  Per 16-wide k-step the block stages a 16 x 16 block of Bc in
// shared memory ([16][17]: the pad breaks bank conflicts), each thread streams its row of Ac
// from global memory (coalesced along the column) and does 16 x 16 FFMAs.  No knobs.
// Bound: flop-bound in principle, with intensity 64*16/(2*(64+16)) = 6.4 flop/byte of operand
// traffic: well below the H100's FFMA-to-bandwidth ratio, so it runs bandwidth- and
// latency-limited; that gap is what the tuned kernels close.

extern "C" __global__ void __launch_bounds__(64)
sgemm_volkov2008(int Mc, int Nc, int Kc, float alpha, const float* __restrict__ Ac, long long lda,
                 const float* __restrict__ Bc, long long ldb, float beta, float* __restrict__ Cc,
                 long long ldc)
{
    __shared__ float bs[16][17];
    const int inx = threadIdx.x & 15, iny = threadIdx.x >> 4;  // 16 x 4 view for the B loads
    const long long ibx = (long long)blockIdx.x * 64, iby = (long long)blockIdx.y * 16;
    const float* a = Ac + ibx + threadIdx.x;
    const float* b = Bc + inx + (iby + iny) * ldb;
    float c[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) c[j] = 0.0f;

    for (int k0 = 0; k0 < Kc; k0 += 16) {
#pragma unroll
        for (int r = 0; r < 16; r += 4) bs[inx][iny + r] = b[(long long)r * ldb];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            const float av = a[(long long)k * lda];
#pragma unroll
            for (int j = 0; j < 16; ++j) c[j] = fmaf(av, bs[k][j], c[j]);
        }
        a += 16 * lda;
        b += 16;
        __syncthreads();
    }
    float* cp = Cc + ibx + threadIdx.x + iby * ldc;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        float v = alpha * c[j];
        if (beta != 0.0f) v = fmaf(beta, cp[(long long)j * ldc], v);
        cp[(long long)j * ldc] = v;
    }
}
