// transpose.cu -- out-of-place transpose of a real matrix, B = A^T, and a strided 2-D copy.
// One source for both element types: T = float or double (every kernel below is a template on
// T; the elements are moved as bits, so the result is exact).
//
// Storage: unlike BLAS, both matrices are row-major.  A is rows x cols with leading dimension
// lds (A(i,j) = src[i*lds + j]); B is cols x rows with leading dimension ldd
// (B(j,i) = dst[j*ldd + i]).  Leading dimensions and offsets are 64-bit, in elements; src and
// dst may be views into larger matrices but must not overlap.  A column-major operand is
// handled by the caller: transposing between a column-major and a row-major view is a plain
// strided copy (copy2d below), and two column-major views are the row-major transpose of their
// .T views.
//
// The transposes go through a shared-memory tile per block, tiles in row-major order over A
// (1-D grid), and handle partial edge tiles themselves (a bounds-checked path taken only by
// edge blocks).  Every load of a thread is issued before the first shared store.  Tile sizes
// are in elements, the same for both T: a double tile holds twice the bytes of a float one.
//
// transpose_tiled<T, TILE, BY, PF, EL>: TILE x TILE tile, one-element accesses.  A block of
//   32 x BY threads; thread (tx, ty) reads A rows r0+ty+BY*q, columns c0+tx+32*p into
//   tile[row][col] (each warp load: 32 contiguous elements, 128 bytes of float, 256 of double),
//   then after one barrier writes B rows c0+ty+BY*q, columns r0+tx+32*p from the tile read
//   column-wise (each warp store: 32 contiguous elements).  The tile is padded to
//   [TILE][TILE+1] so the column-wise reads hit 32 banks (double: each half-warp's 16 8-byte
//   words on 32 distinct banks, the two wavefronts 256 bytes need anyway).  PF = 256: A is
//   read with a 256-byte L2 fill; EL: B is written with an L2 evict-last policy (load_a /
//   store_b below).  Static shared memory TILE * (TILE+1) * sizeof(T): 64 x 64 of double
//   33 KB, 32 x 32 of double 8.4 KB.
// transpose_pair<T, BY>: 64 x 64 tile, two elements per global access (float2: 8 bytes,
//   double2: 16 bytes): thread (tx, ty) reads A columns c0+2tx, c0+2tx+1 of rows r0+ty+BY*q
//   (each warp load: 64 contiguous elements, 256 bytes of float, 512 of double) and writes B
//   columns r0+2tx, r0+2tx+1 of rows c0+ty+BY*q; the tile is stored with rows and columns
//   permuted (P(i) = (i & 1) * 32 + i / 2) so both shared phases are conflict-free.  Needs even
//   leading dimensions and pointers aligned to two elements (the caller checks); otherwise
//   transpose_tiled<T, 64, 4, 0, false> takes the same tiles with one-element accesses.
//   Static shared memory 16.6 KB (float: 13 blocks of 128 threads per SM) or 33.3 KB
//   (double: 6 blocks per SM, each thread with 16 x 16 bytes in flight).
// transpose_skew<T, TR, PF, SA>: TR A rows x 32 A columns per block, for a B whose rows do not
//   start on the 32-byte sector grid (odd sizes); each B row is written in whole SA-element
//   units (details above the kernel).  Static shared memory (TR + SA - 1) * 33 * sizeof(T):
//   21 KB (float) and 42 KB (double) at TR = 128, SA = 32.
// copy2d<T>: dst[r*ldd + c] = src[r*lds + c] for r < rows, c < cols (both row-major views).
//   Block of 256 threads over 256 consecutive columns, grid.y strides over rows.
//
// Knobs (template parameters; gpulinalg/layout/transpose.py VARIANTS is the source of truth,
// the static_asserts check them; the Tuning table of the element type, gpulinalg/tuning.py
// transpose_*, picks among them): TILE = 32 or 64, BY = 4 or 8 (threads per block = 32*BY,
// which is __launch_bounds__), PF, EL, TR, SA.  The tiles launched: transpose_pair<T, 4> where
// both row pitches are multiples of 256 bytes; transpose_tiled<T, 32, 8, ...> for small
// matrices (PF 0, EL false) and for other pitches (PF 256, with EL where B's pitch is not a
// multiple of 128 bytes); transpose_skew<T, 128, 256, 32> where B's rows are off the 32-byte
// sector grid.
// Bound: bandwidth-bound; bytes moved = 2 * rows * cols * sizeof(T) (each element read and
// written once: 8 bytes per element for float, 16 for double), judged against a
// device-to-device copy of the same size (~2.9-3.0 TB/s, H100).

// Loads of A.  PF = 0: plain loads; PF = 256: the L2 fills the 256 aligned bytes around each
// miss (ld's .L2::256B prefetch size), so that the 128-byte row segment of a 32-wide tile,
// half of a 256-byte chunk or straddling two lines, brings in the neighbouring tile's part
// from DRAM in the same access (src is read-only: .nc).  Stores of B: EL gives the stores of
// whole tiles an L2 evict-last policy, so the L2 drops the (consumed) lines of A before the
// lines of B that the neighbouring tiles have not finished.
template <typename T, int PF> __device__ __forceinline__ T load_a(const T* p)
{
    static_assert(PF == 0 || PF == 256, "L2 fill size: 0 (default) or 256 bytes");
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    T v;
    if constexpr (PF == 256 && sizeof(T) == 4)
        asm volatile("ld.global.nc.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    else if constexpr (PF == 256)
        asm volatile("ld.global.nc.L2::256B.f64 %0, [%1];" : "=d"(v) : "l"(p));
    else
        v = *p;
    return v;
}

template <typename T, bool EL>
__device__ __forceinline__ void store_b(T* p, T v, unsigned long long pol)
{
    if constexpr (EL && sizeof(T) == 4)
        asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" :: "l"(p), "f"(v), "l"(pol)
                     : "memory");
    else if constexpr (EL)
        asm volatile("st.global.L2::cache_hint.f64 [%0], %1, %2;" :: "l"(p), "d"(v), "l"(pol)
                     : "memory");
    else
        *p = v;
}

// Two consecutive elements, one global access: float2 (8 bytes) or double2 (16 bytes).
template <typename T> struct Pair;
template <> struct Pair<float> {
    using type = float2;
    static __device__ __forceinline__ float2 make(float x, float y) { return make_float2(x, y); }
};
template <> struct Pair<double> {
    using type = double2;
    static __device__ __forceinline__ double2 make(double x, double y)
    {
        return make_double2(x, y);
    }
};

template <typename T, int TILE, int BY, int PF, bool EL>
__global__ void __launch_bounds__(32 * BY)
transpose_tiled(int rows, int cols, const T* __restrict__ src, long long lds,
                T* __restrict__ dst, long long ldd)
{
    static_assert(TILE % 32 == 0, "tile rows are read and written by whole warps");
    static_assert(TILE % BY == 0, "the BY thread rows must divide the tile");
    static_assert(32 * BY <= 1024, "too many threads per block");
    static_assert(TILE * (TILE + 1) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    constexpr int CX = TILE / 32;   // tile columns per thread (read and write)
    constexpr int RY = TILE / BY;   // tile rows per thread (read and write)
    __shared__ T tile[TILE][TILE + 1];

    const unsigned gx = (static_cast<unsigned>(cols) + TILE - 1) / TILE;   // tiles along cols
    const long long r0 = static_cast<long long>(blockIdx.x / gx) * TILE;   // first A row
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * TILE;   // first A column
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + TILE <= rows && c0 + TILE <= cols;

    const T* s = src + r0 * lds + c0;
    T v[RY][CX];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = load_a<T, PF>(s + (ty + BY * q) * lds + tx + 32 * p);
    } else {
        const long long rl = rows - r0, cl = cols - c0;   // rows / columns left in this tile
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                v[q][p] = (ty + BY * q < rl && tx + 32 * p < cl)
                          ? load_a<T, PF>(s + (ty + BY * q) * lds + tx + 32 * p) : T(0);
    }
#pragma unroll
    for (int q = 0; q < RY; ++q)
#pragma unroll
        for (int p = 0; p < CX; ++p)
            tile[ty + BY * q][tx + 32 * p] = v[q][p];
    __syncthreads();

    // B rows c0.. (A's columns), B columns r0.. (A's rows): tile read column-wise.
    T* d = dst + c0 * ldd + r0;
    if (full) {
        unsigned long long pol = 0;
        if constexpr (EL)
            asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#pragma unroll
        for (int q = 0; q < RY; ++q)
#pragma unroll
            for (int p = 0; p < CX; ++p)
                store_b<T, EL>(d + (ty + BY * q) * ldd + tx + 32 * p,
                               tile[tx + 32 * p][ty + BY * q], pol);
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

template <typename T, int BY>
__global__ void __launch_bounds__(32 * BY)
transpose_pair(int rows, int cols, const T* __restrict__ src, long long lds,
               T* __restrict__ dst, long long ldd)
{
    using T2 = typename Pair<T>::type;
    constexpr int TS = 64, RY = TS / BY;   // 64 x 64 tile; A rows (and B rows) per thread
    static_assert(TS % BY == 0 && 32 * BY <= 1024, "the BY thread rows must divide the tile");
    static_assert(TS * (TS + 1) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    // Element (r, c) of the tile lives at tile[P(r)][P(c)], P(i) = (i & 1) * 32 + i / 2: the
    // pair stores (columns 2tx, 2tx+1 -> tx, 32+tx) and the pair reads (rows 2tx, 2tx+1 ->
    // tx, 32+tx) each touch 32 consecutive elements or a column of stride TS+1: no bank
    // conflict (double: none within a half-warp, whose 16 8-byte words fill the 32 banks).
    __shared__ T tile[TS][TS + 1];
    const unsigned gx = (static_cast<unsigned>(cols) + TS - 1) / TS;
    const long long r0 = static_cast<long long>(blockIdx.x / gx) * TS;
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * TS;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool full = r0 + TS <= rows && c0 + TS <= cols;

    const T* s = src + r0 * lds + c0 + 2 * tx;
    T2 v[RY];   // all loads in flight before the first shared store
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q)
            v[q] = *reinterpret_cast<const T2*>(s + (ty + BY * q) * lds);
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const T* p = s + (ty + BY * q) * lds;
            const bool in = ty + BY * q < rl;
            if (in && 2 * tx + 1 < cl)
                v[q] = *reinterpret_cast<const T2*>(p);
            else
                v[q] = Pair<T>::make(in && 2 * tx < cl ? *p : T(0), T(0));
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
    T* d = dst + c0 * ldd + r0 + 2 * tx;
    if (full) {
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const int c = ty + BY * q, pc = (c & 1) * 32 + c / 2;
            // __stwb: one 8- or 16-byte store, default (.wb) policy (nvcc 13.0 splits a plain
            // float2 assignment here into two 4-byte stores)
            __stwb(reinterpret_cast<T2*>(d + c * ldd),
                   Pair<T>::make(tile[tx][pc], tile[32 + tx][pc]));
        }
    } else {
        const long long rl = rows - r0, cl = cols - c0;
#pragma unroll
        for (int q = 0; q < RY; ++q) {
            const int c = ty + BY * q, pc = (c & 1) * 32 + c / 2;
            T* p = d + c * ldd;
            if (c < cl && 2 * tx + 1 < rl)
                __stwb(reinterpret_cast<T2*>(p), Pair<T>::make(tile[tx][pc], tile[32 + tx][pc]));
            else if (c < cl && 2 * tx < rl)
                *p = tile[tx][pc];
        }
    }
}

// transpose_skew<T, TR, PF, SA>: B's row pitch (or dst) off the 32-byte sector grid (ldd not a
//   multiple of 32 bytes: odd sizes).  A tile whose B rows are written from c0 + r0 on would
//   start mid-sector in almost every row, and the next tile row's block (gx blocks later)
//   writes the rest of that sector: a partially written sector that leaves L2 in between
//   costs DRAM a read-modify-write.  Here each B row's window of A rows is shifted back to an
//   SA-element grid (float: SA = 8: 32-byte sectors, 16: 64 bytes, 32: 128-byte lines;
//   double: twice the bytes, SA = 32 is 256 bytes, two whole lines): B row j of tile row k
//   takes A rows TR*k - t(j) ... TR*k - t(j) + TR - 1, t(j) = (doff + j*ldd) mod SA (doff:
//   dst's offset in elements from a 32-element boundary), so each warp store covers whole
//   SA-element units; t(j) does not depend on k, so the windows of one B row tile it exactly
//   (the first is clipped at row 0, the last runs to `rows`: up to TR + SA - 1 elements).  A
//   block reads A rows TR*k - (SA-1) ... TR*k + TR - 1 by 32 columns into a [TR + SA - 1][33]
//   tile (the SA - 1 rows above are the tile above's, read again from L2).  32 x 8 threads,
//   (TR + SA - 1) / 8 loads each with the 256-byte L2 fill (PF).
template <typename T, int TR, int PF, int SA>
__global__ void __launch_bounds__(256)
transpose_skew(int rows, int cols, const T* __restrict__ src, long long lds,
               T* __restrict__ dst, long long ldd, unsigned doff)
{
    static_assert(TR % 32 == 0, "the windows are written 32 lanes at a time");
    static_assert(SA == 8 || SA == 16 || SA == 32, "window grid: 8, 16 or 32 elements");
    constexpr int TC = 32, BY = 8, UP = SA - 1, H = TR + UP;   // UP rows above the tile's own
    constexpr int NQ = (H + BY - 1) / BY;                      // loads per thread
    static_assert(H * (TC + 1) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    __shared__ T tile[H][TC + 1];
    const unsigned gx = (static_cast<unsigned>(cols) + TC - 1) / TC;
    const unsigned gy = (static_cast<unsigned>(rows) + TR - 1) / TR;
    const unsigned k = blockIdx.x / gx;
    const long long r0 = static_cast<long long>(k) * TR;
    const long long c0 = static_cast<long long>(blockIdx.x % gx) * TC;
    const int tx = threadIdx.x, ty = threadIdx.y;

    // A rows r0 - UP + lr, lr < H, columns c0 + tx
    T v[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        const int lr = ty + BY * q;
        const long long r = r0 - UP + lr;
        v[q] = (lr < H && r >= 0 && r < rows && c0 + tx < cols)
               ? load_a<T, PF>(src + r * lds + c0 + tx) : T(0);
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
        T* d = dst + j * ldd;
#pragma unroll
        for (int w = 0; w <= TR / 32; ++w) {   // w = TR/32: the last window's up to SA-1 more
            const long long i = r0 - t + 32 * w + tx;
            if (i >= 0 && i < end)
                d[i] = tile[32 * w + tx - t + UP][jj];
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(256)
copy2d(int rows, int cols, const T* __restrict__ src, long long lds,
       T* __restrict__ dst, long long ldd)
{
    const long long c = static_cast<long long>(blockIdx.x) * 256 + threadIdx.x;
    if (c >= cols) return;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y)
        dst[r * ldd + c] = src[r * lds + c];
}
