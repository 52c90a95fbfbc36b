// transpose.cu -- out-of-place single-precision transpose, B = A^T, and a strided 2-D copy.
//
// Storage: unlike BLAS, both matrices are row-major.  A is rows x cols with leading dimension
// lds (A(i,j) = src[i*lds + j]); B is cols x rows with leading dimension ldd
// (B(j,i) = dst[j*ldd + i]).  Leading dimensions and offsets are 64-bit; src and dst may be
// views into larger matrices but must not overlap.  A column-major operand is handled by the
// caller: transposing between a column-major and a row-major view is a plain strided copy
// (copy2d below), and two column-major views are the row-major transpose of their .T views.
//
// Both transposes go through a TILE x TILE shared-memory tile per block, tiles in row-major
// order over A (1-D grid of ceil(rows/TILE) * ceil(cols/TILE) blocks), and handle partial
// edge tiles themselves (a bounds-checked path taken only by edge blocks).  Every load of a
// thread is issued before the first shared store.
//
// transpose_tiled<TILE, BY, PF, EL>: 4-byte accesses.  A block of 32 x BY threads; thread (tx, ty)
//   reads A rows r0+ty+BY*q, columns c0+tx+32*p into tile[row][col] (each warp load: 128
//   contiguous bytes), then after one barrier writes B rows c0+ty+BY*q, columns r0+tx+32*p
//   from the tile read column-wise (each warp store: 128 contiguous bytes).  The tile is padded
//   to [TILE][TILE+1] so the column-wise reads hit 32 banks.  32 x 8 (the seed kernel, kept as
//   the baseline, 4 elements per thread) and 64 x 4 (32 per thread, the fallback of
//   transpose_pair<4> for odd strides).  PF = 256: A is read with a 256-byte L2 fill size;
//   EL: B is written with an L2 evict-last policy (load_a / store_b below): the off-grid
//   choices.
// transpose_pair<BY>: 64 x 64 tile, 8-byte (float2) global accesses: thread (tx, ty) reads A
//   columns c0+2tx, c0+2tx+1 of rows r0+ty+BY*q (each warp load: 256 contiguous bytes) and
//   writes B columns r0+2tx, r0+2tx+1 of rows c0+ty+BY*q; the tile is stored with rows and
//   columns permuted (P(i) = (i & 1) * 32 + i / 2) so both shared phases are conflict-free.
//   Needs even leading dimensions and 8-byte aligned pointers (the caller checks).
//   Knobs (template parameters; gpulinalg/_transpose.py VARIANTS is the source of truth, the
//   static_asserts check them): TILE = 32 or 64, BY = 4 or 8 (threads per block = 32*BY,
//   which is __launch_bounds__).  Static shared memory TILE*(TILE+1)*4 bytes (16.6 KiB at
//   64: 13 blocks of 128 threads per SM).
//   Bound: bandwidth-bound; bytes moved = 2 * rows * cols * 4 (each element read and written
//   once), judged against a device-to-device copy of the same size (~2.9-3.0 TB/s, H100).
//   H100 (burst timing, % of copy): the 64-wide tiles need row pitches that are multiples of
//   256 bytes: 64x4 at 10000^2 ran 86.9% contiguous, 95.7% with both leading dimensions
//   padded to multiples of 64 (same partial tiles), 85.8% on the 64-aligned interior at the
//   original pitch (no partial tiles): the pitch costs, the edge tiles do not.  The 32 x 32
//   tile is insensitive to the pitch (93.1 / 93.2 / 91.9%) but stays near 93.5% at large
//   sizes.  Tried and removed (numbers in gpulinalg/_transpose.py): diagonal block order,
//   streaming (.cs) cache hints, column-major order in bands of 32 tile rows, rectangular
//   32 x 64 / 64 x 32 / 64 x 128 / 128 x 64 tiles, 32 x 32 on 128 threads, 64 x 64 on 256 or
//   512 threads, a persistent 64 x 64 kernel with 16-byte cp.async reads and float4
//   writes (2423 vs 2814 GB/s at 16384^2; commit abad904), column-major order in bands of
//   2-16 tile rows, two 32 x 32 tiles per block, 32 x 32 on 512 threads (~70%), the
//   256-byte L2 fill on the 64-wide float2 tile (slower on the grid), evict-first loads.
//   Off the grid the 256-byte fill and the evict-last stores gain 1-3 points of copy
//   (6000 x 10000: 94.6 -> 96.5%; the table in gpulinalg/_transpose.py).
//
// copy2d: dst[r*ldd + c] = src[r*lds + c] for r < rows, c < cols (both row-major views).
//   Block of 256 threads over 256 consecutive columns, grid.y strides over rows.  Used for the
//   transposes that are strided copies; bandwidth-bound like the above.

// Loads of A in transpose_tiled.  PF = 0: plain loads; PF = 256: the L2 fills the 256 aligned
// bytes around each miss (ld's .L2::256B prefetch size), so that the 128-byte row segment
// of a 32-wide tile, half of a 256-byte chunk or straddling two lines, brings in the
// neighbouring tile's part from DRAM in the same access (src is read-only: .nc).
// Global accesses of transpose_tiled.  PF = 0: plain loads; PF = 256: the L2 fills the 256
// aligned bytes around each miss (ld's .L2::256B prefetch size), so that the 128-byte row
// segment of a 32-wide tile, half of a 256-byte chunk or straddling two lines, brings in the
// neighbouring tile's part from DRAM in the same access (src is read-only: .nc).  EL: the
// stores of whole tiles carry an L2 evict-last policy, so the L2 drops the (consumed) lines
// of A before the lines of B that the neighbouring tiles have not finished.
template <int PF> __device__ __forceinline__ float load_a(const float* p)
{
    static_assert(PF == 0 || PF == 256, "L2 fill size: 0 (default) or 256 bytes");
    float v;
    if constexpr (PF == 256)
        asm volatile("ld.global.nc.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    else
        v = *p;
    return v;
}

template <bool EL>
__device__ __forceinline__ void store_b(float* p, float v, unsigned long long pol)
{
    if constexpr (EL)
        asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" :: "l"(p), "f"(v), "l"(pol)
                     : "memory");
    else
        *p = v;
}

template <int TILE, int BY, int PF, bool EL>
__global__ void __launch_bounds__(32 * BY)
transpose_tiled(int rows, int cols, const float* __restrict__ src, long long lds,
                float* __restrict__ dst, long long ldd)
{
    static_assert(TILE % 32 == 0, "tile rows are read and written by whole warps");
    static_assert(TILE % BY == 0, "the BY thread rows must divide the tile");
    static_assert(32 * BY <= 1024, "too many threads per block");
    static_assert(TILE * (TILE + 1) * 4 <= 48 * 1024, "static shared memory limit");
    constexpr int CX = TILE / 32;   // tile columns per thread (read and write)
    constexpr int RY = TILE / BY;   // tile rows per thread (read and write)
    __shared__ float tile[TILE][TILE + 1];

    const unsigned gx = (static_cast<unsigned>(cols) + TILE - 1) / TILE;   // tiles along cols
    const long long r0 = static_cast<long long>(blockIdx.x / gx) * TILE;   // first A row
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * TILE;   // first A column
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + TILE <= rows && c0 + TILE <= cols;

    const float* s = src + r0 * lds + c0;
    float v[RY][CX];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = load_a<PF>(s + (ty + BY * q) * lds + tx + 32 * p);
    } else {
        const long long rl = rows - r0, cl = cols - c0;   // rows / columns left in this tile
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = (ty + BY * q < rl && tx + 32 * p < cl)
                          ? load_a<PF>(s + (ty + BY * q) * lds + tx + 32 * p) : 0.0f;
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
        unsigned long long pol = 0;
        if constexpr (EL)
            asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                store_b<EL>(d + (ty + BY * q) * ldd + tx + 32 * p, tile[tx + 32 * p][ty + BY * q],
                            pol);
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

template <int BY>
__global__ void __launch_bounds__(32 * BY)
transpose_pair(int rows, int cols, const float* __restrict__ src, long long lds,
               float* __restrict__ dst, long long ldd)
{
    constexpr int T = 64, RY = T / BY;   // 64 x 64 tile; A rows (and B rows) per thread
    static_assert(T % BY == 0 && 32 * BY <= 1024, "the BY thread rows must divide the tile");
    // Element (r, c) of the tile lives at tile[P(r)][P(c)], P(i) = (i & 1) * 32 + i / 2: the
    // pair stores (columns 2tx, 2tx+1 -> tx, 32+tx) and the pair reads (rows 2tx, 2tx+1 ->
    // tx, 32+tx) each touch 32 consecutive words or a column of stride T+1: no bank conflict.
    __shared__ float tile[T][T + 1];
    const unsigned gx = (static_cast<unsigned>(cols) + T - 1) / T;
    const long long r0 = static_cast<long long>(blockIdx.x / gx) * T;
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * T;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + T <= rows && c0 + T <= cols;

    const float* s = src + r0 * lds + c0 + 2 * tx;
    float2 v[RY];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
            v[q] = *reinterpret_cast<const float2*>(s + (ty + BY * q) * lds);
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const float* p = s + (ty + BY * q) * lds;
            const bool in = ty + BY * q < rl;
            if (in && 2 * tx + 1 < cl)
                v[q] = *reinterpret_cast<const float2*>(p);
            else
                v[q] = make_float2(in && 2 * tx < cl ? *p : 0.0f, 0.0f);
        }
    }
#pragma unroll
    for (int q = 0; q < RY; ++q) {
        const int r = ty + BY * q, pr = (r & 1) * 32 + r / 2;
        tile[pr][tx] = v[q].x;
        tile[pr][32 + tx] = v[q].y;
    }
    __syncthreads();

    // B row c0+c, columns r0+2tx, r0+2tx+1 = A(r0+2tx, c0+c), A(r0+2tx+1, c0+c).
    float* d = dst + c0 * ldd + r0 + 2 * tx;
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const int c = ty + BY * q, pc = (c & 1) * 32 + c / 2;
            // __stwb: one 8-byte store, default (.wb) policy; a plain float2 assignment
            // was split into two 4-byte stores by nvcc 13.0
            __stwb(reinterpret_cast<float2*>(d + c * ldd),
                   make_float2(tile[tx][pc], tile[32 + tx][pc]));
        }
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const int c = ty + BY * q, pc = (c & 1) * 32 + c / 2;
            float* p = d + c * ldd;
            if (c < cl && 2 * tx + 1 < rl)
                __stwb(reinterpret_cast<float2*>(p), make_float2(tile[tx][pc], tile[32 + tx][pc]));
            else if (c < cl && 2 * tx < rl)
                *p = tile[tx][pc];
        }
    }
}

// transpose_skew<TR, PF, SA>: B's row pitch (or dst) off the 32-byte sector grid (ldd not a
//   multiple of 8 floats: odd sizes).  A tile whose B rows are written from c0 + r0 on would
//   start mid-sector in almost every row, and the next tile row's block (gx blocks later)
//   writes the rest of that sector: a partially written sector that leaves L2 in between
//   costs DRAM a read-modify-write (H100, 16385^2: 57% of copy with the 32 x 32 tile).
//   Here each B row's window of A rows is shifted back to an SA-float grid (SA = 8: 32-byte
//   sectors, 16: 64 bytes, 32: 128-byte lines): B row j of tile row k takes A rows
//   TR*k - t(j) ... TR*k - t(j) + TR - 1, t(j) = (doff + j*ldd) mod SA (doff: dst's offset
//   in floats from a 128-byte boundary), so each warp store covers whole SA-float units;
//   t(j) does not depend on k, so the windows of one B row tile it exactly (the first is
//   clipped at row 0, the last runs to `rows`: up to TR + SA - 1 elements).  A block reads A
//   rows TR*k - (SA-1) ... TR*k + TR - 1 by 32 columns into a [TR + SA - 1][33] tile (the
//   SA - 1 rows above are the tile above's, read again from L2).  32 x 8 threads,
//   (TR + SA - 1) / 8 loads each with the 256-byte L2 fill (PF).  TR = 128, SA = 32 is the
//   launched one (H100, odd sizes 4097-16385: 92.8-101.8% of copy, 0.1-2.2 points above SA
//   = 8 in two runs; SA = 16 equal to 8; TR = 64: 1-2.6 points lower, 11% of its reads are
//   the rows above; TR = 32: 83-88%, 22%).  Its DRAM traffic is the ideal's (Nsight Compute,
//   16385^2, SA = 8: 1.074 GB read, 1.058 written): what is left is in the SM and L2 (2.29
//   GB of L2 reads: the odd pitch's fifth sector per row segment and the rows read again;
//   on 16384^2, same traffic as transpose_pair, it takes 4% longer).
template <int TR, int PF, int SA>
__global__ void __launch_bounds__(256)
transpose_skew(int rows, int cols, const float* __restrict__ src, long long lds,
               float* __restrict__ dst, long long ldd, unsigned doff)
{
    static_assert(TR % 32 == 0, "the windows are written 32 lanes at a time");
    static_assert(SA == 8 || SA == 16 || SA == 32, "window grid: 32, 64 or 128 bytes");
    constexpr int TC = 32, BY = 8, UP = SA - 1, H = TR + UP;   // UP rows above the tile's own
    constexpr int NQ = (H + BY - 1) / BY;                      // loads per thread
    __shared__ float tile[H][TC + 1];
    const unsigned gx = (static_cast<unsigned>(cols) + TC - 1) / TC;
    const unsigned gy = (static_cast<unsigned>(rows) + TR - 1) / TR;
    const unsigned k = blockIdx.x / gx;
    const long long r0 = static_cast<long long>(k) * TR;
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * TC;
    const int tx = threadIdx.x, ty = threadIdx.y;

    // A rows r0 - UP + lr, lr < H, columns c0 + tx
    float v[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        const int lr = ty + BY * q;
        const long long r = r0 - UP + lr;
        v[q] = (lr < H && r >= 0 && r < rows && c0 + tx < cols)
               ? load_a<PF>(src + r * lds + c0 + tx) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < NQ; ++q)
        if (ty + BY * q < H)
            tile[ty + BY * q][tx] = v[q];
    __syncthreads();

    const bool last = k + 1 == gy;
#pragma unroll
    for (int p = 0; p < TC / BY; ++p) {
        const int jj = ty + BY * p;   // B row c0 + jj = A column c0 + jj
        if (c0 + jj >= cols)
            break;
        const long long j = c0 + jj;
        const int t = static_cast<int>((doff + static_cast<unsigned long long>(j) *
                                        static_cast<unsigned long long>(ldd)) & (SA - 1));
        const long long end = last ? rows : r0 + TR - t;   // this window: A rows [r0 - t, end)
        float* d = dst + j * ldd;
#pragma unroll
        for (int w = 0; w <= TR / 32; ++w) {   // w = TR/32: the last window's up to SA-1 more
            const long long i = r0 - t + 32 * w + tx;
            if (i >= 0 && i < end)
                d[i] = tile[32 * w + tx - t + UP][jj];
        }
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
