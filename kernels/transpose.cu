// transpose.cu -- out-of-place single-precision transpose, B = A^T, and a strided 2-D copy.
//
// Storage: unlike BLAS, both matrices are row-major.  A is rows x cols with leading dimension
// lds (A(i,j) = src[i*lds + j]); B is cols x rows with leading dimension ldd
// (B(j,i) = dst[j*ldd + i]).  Leading dimensions and offsets are 64-bit; src and dst may be
// views into larger matrices but must not overlap.  A column-major operand is handled by the
// caller: transposing between a column-major and a row-major view is a plain strided copy
// (copy2d below), and two column-major views are the row-major transpose of their .T views.
//
// transpose_tiled<TILE, BY, DIAG, TC>:
//   * one block of 32 x BY threads moves one TILE x TC tile of A (TILE rows, TC columns, both
//     multiples of 32; TC = TILE unless named): thread (tx, ty) reads A rows r0+ty+BY*q,
//     columns c0+tx+32*p (q < TILE/BY, p < TC/32) into shared memory, row-wise, so each warp
//     reads 128 contiguous bytes per load (a tile row: TC*4 contiguous bytes);
//   * after one barrier the same thread writes B rows c0+ty+BY*q, columns r0+tx+32*p
//     (q < TC/BY, p < TILE/32), i.e. the tile read column-wise from shared memory: each warp
//     again writes 128 contiguous bytes (a B tile row: TILE*4 contiguous bytes);
//   * the tile is padded to [TILE][TC+1] so the column-wise shared reads hit 32 different
//     banks (row stride TC+1 = 1 mod 32);
//   * every thread moves TILE*TC/(32*BY) elements (4 for 32/8, 16 for 64/8, 32 for 64/4 and
//     the 64 x 128 / 128 x 64 tiles on 8 warps), all loads issued before the first shared
//     store, so that many bytes per thread are in flight;
//   * the grid is 1-D over the ceil(rows/TILE) x ceil(cols/TC) tiles; DIAG walks it in the
//     diagonal order of Ruetsch & Micikevicius ("Optimizing matrix transpose in CUDA", 2009),
//     a bijection for any grid shape, so concurrently running blocks write B rows spread over
//     the memory partitions instead of camping on one (measured: no gain on the H100);
//   * partial edge tiles are handled here (bounds-checked path, taken only by edge blocks).
//   Knobs (template parameters; gpulinalg/_transpose.py VARIANTS is the source of truth, the
//   static_asserts check them): TILE = 32, 64 or 128, TC = TILE, 64 or 128, BY = 4, 8 or 16
//   (threads per block = 32*BY, which is __launch_bounds__), DIAG, and STREAM: loads and
//   stores with the evict-first ("streaming", .cs) cache hint, since every element is read
//   once and written once and neither needs to stay in L2.  Static shared memory
//   TILE*(TC+1)*4 bytes per block (16.6 KiB for 64 x 64: 8 resident blocks of 256 threads
//   per SM; 33 KiB for 64 x 128: 6 blocks, 192 KiB of tile data per SM).
//   Bound: bandwidth-bound; bytes moved = 2 * rows * cols * 4 (each element read and written
//   once), judged against a device-to-device copy of the same size (~3.0 TB/s on an H100).
//   transpose_tiled<32,8,false> is the seed kernel, kept as the baseline variant.
//   (A persistent 64 x 64 kernel with 16-byte cp.async reads, a double buffer and float4
//   writes, transpose_vec, was measured slower at every size on the H100 -- 2423 vs 2814 GB/s
//   at 16384^2, 1891 vs 2209 at 4096^2 -- and removed; it is in the history, commit abad904.)
//
// copy2d: dst[r*ldd + c] = src[r*lds + c] for r < rows, c < cols (both row-major views).
//   Block of 256 threads over 256 consecutive columns, grid.y strides over rows.  Used for the
//   transposes that are strided copies; bandwidth-bound like the above.

// Global load / store, optionally with the streaming (evict-first) cache hint.
template <bool STREAM>
__device__ __forceinline__ float load_elem(const float* p)
{
    return STREAM ? __ldcs(p) : *p;
}

template <bool STREAM>
__device__ __forceinline__ void store_elem(float* p, float v)
{
    if (STREAM)
        __stcs(p, v);
    else
        *p = v;
}

template <int TILE, int BY, bool DIAG, int TC = TILE, bool STREAM = false>
__global__ void __launch_bounds__(32 * BY)
transpose_tiled(int rows, int cols, const float* __restrict__ src, long long lds,
                float* __restrict__ dst, long long ldd)
{
    static_assert(TILE % 32 == 0 && TC % 32 == 0, "tile rows are read and written by whole warps");
    static_assert(TILE % BY == 0 && TC % BY == 0, "the BY thread rows must divide the tile");
    static_assert(32 * BY <= 1024, "too many threads per block");
    static_assert(TILE * (TC + 1) * 4 <= 48 * 1024, "static shared memory limit");
    constexpr int CX = TC / 32;     // A tile columns per thread (read)
    constexpr int RY = TILE / BY;   // A tile rows per thread (read)
    constexpr int WX = TILE / 32;   // B tile columns per thread (write)
    constexpr int WY = TC / BY;     // B tile rows per thread (write)
    __shared__ float tile[TILE][TC + 1];

    const unsigned gx = (static_cast<unsigned>(cols) + TC - 1) / TC;      // tiles along cols
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
    const long long c0 = static_cast<long long>(bx) * TC;     // first A column of the tile
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + TILE <= rows && c0 + TC <= cols;

    const float* s = src + r0 * lds + c0;
    float v[RY][CX];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = load_elem<STREAM>(s + (ty + BY * q) * lds + tx + 32 * p);
    } else {
        const long long rl = rows - r0, cl = cols - c0;   // rows / columns left in this tile
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = (ty + BY * q < rl && tx + 32 * p < cl)
                          ? load_elem<STREAM>(s + (ty + BY * q) * lds + tx + 32 * p) : 0.0f;
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
        for (int q = 0; q < WY; ++q)
#pragma unroll
            for (int p = 0; p < WX; ++p)
                store_elem<STREAM>(d + (ty + BY * q) * ldd + tx + 32 * p,
                                   tile[tx + 32 * p][ty + BY * q]);
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < WY; ++q)
#pragma unroll
            for (int p = 0; p < WX; ++p)
                if (ty + BY * q < cl && tx + 32 * p < rl)
                    store_elem<STREAM>(d + (ty + BY * q) * ldd + tx + 32 * p,
                                       tile[tx + 32 * p][ty + BY * q]);
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
