// transpose.cu -- out-of-place single-precision transpose, B = A^T, and a strided 2-D copy.
//
// Storage: unlike BLAS, both matrices are row-major.  A is rows x cols with leading dimension
// lds (A(i,j) = src[i*lds + j]); B is cols x rows with leading dimension ldd
// (B(j,i) = dst[j*ldd + i]).  Leading dimensions and offsets are 64-bit; src and dst may be
// views into larger matrices but must not overlap.  A column-major operand is handled by the
// caller: transposing between a column-major and a row-major view is a plain strided copy
// (copy2d below), and two column-major views are the row-major transpose of their .T views.
//
// transpose_tiled<TILE, BY, DIAG>:
//   * one block of 32 x BY threads moves one TILE x TILE tile (TILE a multiple of 32): thread
//     (tx, ty) reads A rows r0+ty+BY*q, columns c0+tx+32*p (q < TILE/BY, p < TILE/32) into
//     shared memory, row-wise, so each warp reads 128 contiguous bytes per load;
//   * after one barrier the same thread writes B rows c0+ty+BY*q, columns r0+tx+32*p, i.e. the
//     tile read column-wise from shared memory: each warp again writes 128 contiguous bytes;
//   * the tile is padded to [TILE][TILE+1] so the column-wise shared reads hit 32 different
//     banks (row stride TILE+1 = 1 mod 32);
//   * every thread moves TILE*TILE/(32*BY) elements (4 for 32/8, 16 for 64/8), all loads issued
//     before the first shared store;
//   * the grid is 1-D over the ceil(rows/TILE) x ceil(cols/TILE) tiles; DIAG walks it in the
//     diagonal order of Ruetsch & Micikevicius ("Optimizing matrix transpose in CUDA", 2009),
//     a bijection for any grid shape, so concurrently running blocks write B rows spread over
//     the memory partitions instead of camping on one;
//   * partial edge tiles are handled here (bounds-checked path, taken only by edge blocks).
//   Knobs (template parameters; gpulinalg/_transpose.py VARIANTS is the source of truth, the
//   static_asserts check them): TILE = 32 or 64, BY = 8 (threads per block = 32*BY, which is
//   __launch_bounds__), DIAG = true.  Shared memory TILE*(TILE+1)*4 bytes per block.
//   Bound: bandwidth-bound; bytes moved = 2 * rows * cols * 4 (each element read and written
//   once), judged against a device-to-device copy of the same size (~3.0 TB/s on an H100).
//   transpose_tiled<32,8,false> is the seed kernel, kept as the baseline variant.
//
// transpose_vec<THREADS>: 64 x 64 tiles moved with 16-byte accesses by a persistent grid.
//   * the grid is sized by the caller to fill the GPU once (TRANSPOSE_VEC_BLOCKS_PER_SM = 4
//     resident blocks of 256 threads per SM); block b moves tiles b, b + gridDim.x, ...
//     (row-major order over A's tiles: the diagonal order measured slower on the H100);
//   * read: thread t copies float4 columns 4*(t%16).. of A rows t/16 + 16*q (q < 4) straight
//     into shared memory with cp.async (16 bytes each, no registers held): a warp reads 2 rows
//     x 256 contiguous bytes;
//   * double buffer: while tile t is written out of one 16 KiB buffer, the next tile of the
//     block is already in flight into the other (16 KiB per block, 64 KiB per SM in flight
//     during the write phase, 128 KiB at the start of one);
//   * write: the thread with lane l of warp w assembles the float4 of A rows 4*rq..4*rq+3 at
//     column cc + 16*q, rq = l%8 + 8*(w%2), cc = l/8 + 4*(w/2), i.e. 16 bytes of B row
//     c0+cc+16*q, and stores it: a warp writes 4 B rows x 128 contiguous bytes;
//   * shared memory is [64][64] without padding; the 16-byte chunk index of row r is XORed
//     with (r/4)%8, which keeps both the 16-byte cp.async stores and the column-wise 4-byte
//     reads free of bank conflicts (a read instruction hits chunk (w/2 + 4q) ^ (l%8), i.e.
//     bank 4*(that % 8) + l/8, 32 different banks);
//   * 16-byte reads need src 16-byte aligned and lds % 4 == 0, 16-byte writes the same of dst
//     and ldd (runtime checks, uniform per launch); otherwise, and in partial edge tiles, the
//     same mapping runs with bounds-checked 4-byte accesses.
//   Knobs: THREADS = 256 (a multiple of 64), TRANSPOSE_VEC_BLOCKS_PER_SM = 4 (the second
//   __launch_bounds__ argument: 64 registers, the count ptxas needs without spills; Python
//   sizes the grid with the same number).  Shared memory 32 KiB per block.
//   Bound: bandwidth-bound, as above.
//
// copy2d: dst[r*ldd + c] = src[r*lds + c] for r < rows, c < cols (both row-major views).
//   Block of 256 threads over 256 consecutive columns, grid.y strides over rows.  Used for the
//   transposes that are strided copies; bandwidth-bound like the above.

template <int TILE, int BY, bool DIAG>
__global__ void __launch_bounds__(32 * BY)
transpose_tiled(int rows, int cols, const float* __restrict__ src, long long lds,
                float* __restrict__ dst, long long ldd)
{
    static_assert(TILE % 32 == 0, "a tile row is read by whole warps");
    static_assert(TILE % BY == 0, "the BY thread rows must divide the tile");
    static_assert(32 * BY <= 1024, "too many threads per block");
    constexpr int CX = TILE / 32;   // tile columns per thread
    constexpr int RY = TILE / BY;   // tile rows per thread
    __shared__ float tile[TILE][TILE + 1];

    const unsigned gx = (static_cast<unsigned>(cols) + TILE - 1) / TILE;  // tiles along cols
    const unsigned gy = (static_cast<unsigned>(rows) + TILE - 1) / TILE;  // tiles along rows
    const unsigned bid = blockIdx.x;
    unsigned bx, by;
    if (DIAG) {            // diagonal order: (bid / gy + bid % gy) % gx, a bijection
        by = bid % gy;
        bx = (bid / gy + by) % gx;
    } else {               // row-major order over the tiles of A
        bx = bid % gx;
        by = bid / gx;
    }
    const long long r0 = static_cast<long long>(by) * TILE;   // first A row of the tile
    const long long c0 = static_cast<long long>(bx) * TILE;   // first A column of the tile
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + TILE <= rows && c0 + TILE <= cols;

    const float* s = src + r0 * lds + c0;
    float v[RY][CX];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = s[(ty + BY * q) * lds + tx + 32 * p];
    } else {
        const long long rl = rows - r0, cl = cols - c0;   // rows / columns left in this tile
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = (ty + BY * q < rl && tx + 32 * p < cl)
                          ? s[(ty + BY * q) * lds + tx + 32 * p] : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < RY; ++q)
#pragma unroll
        for (int p = 0; p < CX; ++p)
            tile[ty + BY * q][tx + 32 * p] = v[q][p];
    __syncthreads();

    // B rows c0.. (A's columns), B columns r0.. (A's rows): tile read column-wise.
    float* d = dst + c0 * ldd + r0;
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                d[(ty + BY * q) * ldd + tx + 32 * p] = tile[tx + 32 * p][ty + BY * q];
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                if (ty + BY * q < cl && tx + 32 * p < rl)
                    d[(ty + BY * q) * ldd + tx + 32 * p] = tile[tx + 32 * p][ty + BY * q];
    }
}

#ifndef TRANSPOSE_VEC_BLOCKS_PER_SM
#define TRANSPOSE_VEC_BLOCKS_PER_SM 4   // resident blocks of transpose_vec (32 KiB smem, 64 regs)
#endif

namespace {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously (both 16-byte aligned).
__device__ __forceinline__ void copy_async16(float* dst, const float* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_u32(dst)), "l"(src)
                 : "memory");
}

// 4 bytes global -> shared, asynchronously.
__device__ __forceinline__ void copy_async4(float* dst, const float* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(smem_u32(dst)), "l"(src)
                 : "memory");
}

__device__ __forceinline__ void copy_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void copy_async_wait_prior() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// Word index of element (r, c) of a 64 x 64 tile stored with XOR-swizzled 16-byte chunks.
__device__ __forceinline__ int swz64(int r, int c) {
    return r * 64 + ((c >> 2) ^ ((r >> 2) & 7)) * 4 + (c & 3);
}

}  // namespace

template <int THREADS>
__global__ void __launch_bounds__(THREADS, TRANSPOSE_VEC_BLOCKS_PER_SM)
transpose_vec(int rows, int cols, const float* __restrict__ src, long long lds,
              float* __restrict__ dst, long long ldd)
{
    constexpr int TILE = 64;
    constexpr int RPP = THREADS / 16;    // tile rows per pass (16 float4 per tile row)
    constexpr int NQ = TILE / RPP;       // passes, float4 per thread
    static_assert(THREADS % 64 == 0 && TILE % RPP == 0 && THREADS <= 1024, "tile mapping");
    __shared__ __align__(16) float tile[2][TILE * TILE];   // double buffer

    const unsigned gx = (static_cast<unsigned>(cols) + TILE - 1) / TILE;
    const unsigned ntiles = gx * ((static_cast<unsigned>(rows) + TILE - 1) / TILE);
    const bool vld = ((reinterpret_cast<unsigned long long>(src) & 15) | (lds & 3)) == 0;
    const bool vst = ((reinterpret_cast<unsigned long long>(dst) & 15) | (ldd & 3)) == 0;
    const int tid = threadIdx.x;
    const int cq = tid % 16, rr = tid / 16;                  // read mapping
    const int lane = tid % 32, w = tid / 32;                 // write mapping
    const int rq = (lane & 7) | ((w & 1) << 3), cc = (lane >> 3) | ((w >> 1) << 2);

    // Tile t of A -> shared buffer buf, asynchronously (no registers held while in flight).
    auto stage = [&](unsigned t, int buf) {
        const long long r0 = static_cast<long long>(t / gx) * TILE;
        const long long c0 = static_cast<long long>(t % gx) * TILE;
        const float* s = src + (r0 + rr) * lds + c0 + 4 * cq;
        float* sh = tile[buf];
        if (vld && r0 + TILE <= rows && c0 + TILE <= cols) {
#pragma unroll
            for (int q = 0; q < NQ; ++q)
                copy_async16(&sh[swz64(rr + RPP * q, 4 * cq)], s + RPP * q * lds);
        } else {   // edge tile or unaligned rows: 4-byte copies of the elements inside A
            const long long rl = rows - r0 - rr, cl = cols - c0 - 4 * cq;   // left from here
#pragma unroll 1
            for (int q = 0; q < NQ && RPP * q < rl; ++q)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (j < cl)
                        copy_async4(&sh[swz64(rr + RPP * q, 4 * cq + j)], s + RPP * q * lds + j);
        }
        copy_async_commit();
    };

    unsigned t = blockIdx.x;
    int buf = 0;
    if (t < ntiles)
        stage(t, buf);
    for (; t < ntiles; t += gridDim.x, buf ^= 1) {
        if (t + gridDim.x < ntiles) {
            stage(t + gridDim.x, buf ^ 1);   // in flight while tile t is written out
            copy_async_wait_prior<1>();
        } else {
            copy_async_wait_prior<0>();
        }
        __syncthreads();   // tile t complete in tile[buf]

        const float* sh = tile[buf];
        const long long r0 = static_cast<long long>(t / gx) * TILE;
        const long long c0 = static_cast<long long>(t % gx) * TILE;
        float* d = dst + (c0 + cc) * ldd + r0 + 4 * rq;       // B(c0+cc, r0+4rq)
        if (vst && r0 + TILE <= rows && c0 + TILE <= cols) {
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const int c = cc + RPP * q;
                float4 o;
                o.x = sh[swz64(4 * rq + 0, c)];
                o.y = sh[swz64(4 * rq + 1, c)];
                o.z = sh[swz64(4 * rq + 2, c)];
                o.w = sh[swz64(4 * rq + 3, c)];
                *reinterpret_cast<float4*>(d + RPP * q * ldd) = o;
            }
        } else {
            const long long bl = cols - c0 - cc, al = rows - r0 - 4 * rq;  // B rows, A rows left
#pragma unroll 1
            for (int q = 0; q < NQ && RPP * q < bl; ++q)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    if (i < al)
                        d[RPP * q * ldd + i] = sh[swz64(4 * rq + i, cc + RPP * q)];
        }
        __syncthreads();   // tile[buf] is free for the stage two iterations on
    }
}

extern "C" __global__ void __launch_bounds__(256)
copy2d(int rows, int cols, const float* __restrict__ src, long long lds,
       float* __restrict__ dst, long long ldd)
{
    const long long c = static_cast<long long>(blockIdx.x) * 256 + threadIdx.x;
    if (c >= cols) return;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y)
        dst[r * ldd + c] = src[r * lds + c];
}
