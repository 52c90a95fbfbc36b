// laswp.cu -- row interchanges of a single-precision matrix (LAPACK slaswp), one launch for a
// whole block of up to KMAX pivots.
//
// Computes, for i = 0, 1, ..., k-1 in order (inverse: i = k-1 down to 0):
//     swap rows (offset + i) and piv[i] of A,
// on every column of A.  Pivots are 0-based (unlike LAPACK's 1-based ipiv) and are absolute row
// indices of A; offset is the row of the first interchange (LAPACK's k1 - 1).  Unlike LAPACK,
// A is stored row-wise: A(i, j) = A[i*lda + j], lda 64-bit, so a row is contiguous and A may be
// a block of columns of a larger row-major matrix.  The caller guarantees
// 0 <= piv[i] < m and offset + k <= m (the kernel does not see m).
//
// laswp_rows<W, THREADS>: the grid is 1-D over strips of W columns; each block owns its strip
// and applies the net effect of all k interchanges to it (blocks never touch each other's data):
//   * slots: the touched rows are given slots in shared memory.  Row offset+i has slot i;
//     a pivot row outside [offset, offset+k) has slot k+j, j the first index with piv[j] equal
//     to it (found with a small open-addressing hash table in shared memory); a pivot row
//     inside the range uses the slot of that row.  At most 2k slots;
//   * gather: thread t copies columns t % W of slot rows t / W, t / W + THREADS/W, ... of the
//     strip into shared memory with cp.async (a warp covers 32/W rows x W columns, W*4
//     contiguous bytes per row).  Rows offset+i are requested before the pivots are even read,
//     the pivot rows right after; the copies run while the permutation is worked out;
//   * permutation: thread t follows the contents of slots t, t+THREADS, ... (KMAX*2/THREADS
//     of them, in registers) through the k interchanges (a swap moves an item at slot a to b
//     and at b to a), reading the interchanges as shared-memory broadcasts.  The final slot
//     f(s) of each item is exactly what the swaps applied one by one would give, including
//     rows that move several times;
//   * scatter: after the copies land and a barrier, row(f(s)) of the strip is overwritten by the
//     saved contents of slot s, for each slot whose contents moved (f(s) != s), coalesced along
//     the row.  All reads precede all writes, so dependent interchanges are safe.
//   Knobs: W = 32, 16 or 8 columns per strip and THREADS = 256 (template parameters;
//   gpulinalg/_laswp.py picks W so that the dynamic shared memory, 4*(2k*W + 2k + 2H) bytes with
//   H the hash size, the power of two >= 2k, stays within 48 KiB); KMAX = 512 pivots per launch
//   (the Python side splits longer pivot vectors into launches applied in order).
//   Bound: bandwidth-bound; bytes moved = 2 * (number of distinct touched rows) * n * 4, judged
//   against a device-to-device copy (~3.0 TB/s on an H100).

#define LASWP_KMAX 512

namespace {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
                 : "=r"(a) : "l"(p));
    return a;
}

// *dst = *src (4 bytes, global -> shared), asynchronously where the hardware can.
__device__ __forceinline__ void copy_async4(float* dst, const float* src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(smem_addr(dst)), "l"(src)
                 : "memory");
#else
    *dst = *src;
#endif
}

__device__ __forceinline__ void copy_async_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

__device__ __forceinline__ unsigned row_hash(int row, int log2h) {
    return (static_cast<unsigned>(row) * 0x9E3779B1u) >> (32 - log2h);
}

}  // namespace

template <int W, int THREADS>
__global__ void __launch_bounds__(THREADS)
laswp_rows(int n, float* A, long long lda, int k, const int* __restrict__ piv, int offset,
           int inverse, int log2h)
{
    static_assert(THREADS % 32 == 0 && THREADS % W == 0, "whole warps, whole strip rows");
    static_assert(32 % W == 0, "a warp covers whole strip rows");
    static_assert((2 * LASWP_KMAX) % THREADS == 0, "slots split evenly over threads");
    constexpr int RSTEP = THREADS / W;                   // slot rows per pass
    constexpr int ITEMS = 2 * LASWP_KMAX / THREADS;      // slots followed per thread
    const int H = 1 << log2h;                            // hash size, >= 2k

    // Dynamic shared memory: s_val[2k][W] | s_piv[k] | s_slot[k] | s_key[H] | s_first[H];
    // s_dst[2k] reuses s_key once the hash table is no longer needed.
    extern __shared__ float smem[];
    float* s_val = smem;
    int* s_piv = reinterpret_cast<int*>(s_val + 2 * k * W);
    int* s_slot = s_piv + k;
    int* s_key = s_slot + k;
    int* s_first = s_key + H;
    int* s_dst = s_key;

    const int tid = threadIdx.x;
    const int c = tid % W, r = tid / W;
    const long long col = static_cast<long long>(blockIdx.x) * W + c;
    const bool col_ok = col < n;
    float* Acol = A + col;

    // Gather, part 1: rows offset+i into slots i (needs no pivot).
    if (col_ok)
        for (int s = r; s < k; s += RSTEP)
            copy_async4(&s_val[s * W + c], Acol + (offset + s) * lda);
    for (int i = tid; i < k; i += THREADS)
        s_piv[i] = piv[i];
    for (int h = tid; h < H; h += THREADS) {
        s_key[h] = -1;
        s_first[h] = 0x7fffffff;
    }
    __syncthreads();

    // Gather, part 2: pivot rows outside [offset, offset+k) into slots k+i.  A row named by
    // several pivots is fetched once per name; only its first slot is used below.
    if (col_ok)
        for (int i = r; i < k; i += RSTEP) {
            const int p = s_piv[i];
            if (p - offset < 0 || p - offset >= k)
                copy_async4(&s_val[(k + i) * W + c], Acol + p * lda);
        }

    // Slots: hash the outside pivot rows, keeping the first index naming each.
    for (int i = tid; i < k; i += THREADS) {
        const int p = s_piv[i];
        if (p - offset >= 0 && p - offset < k) continue;
        unsigned h = row_hash(p, log2h);
        for (;;) {
            const int old = atomicCAS(&s_key[h], -1, p);
            if (old == -1 || old == p) {
                atomicMin(&s_first[h], i);
                break;
            }
            h = (h + 1) & (H - 1);
        }
    }
    __syncthreads();
    for (int i = tid; i < k; i += THREADS) {
        const int p = s_piv[i];
        int slot = p - offset;
        if (slot < 0 || slot >= k) {
            unsigned h = row_hash(p, log2h);
            while (s_key[h] != p)
                h = (h + 1) & (H - 1);
            slot = k + s_first[h];
        }
        s_slot[i] = slot;
    }
    __syncthreads();   // s_slot complete; the hash table (s_key) is free for s_dst

    // Permutation: follow the contents of slots tid + THREADS*q through the interchanges.
    int pos[ITEMS];
#pragma unroll
    for (int q = 0; q < ITEMS; ++q)
        pos[q] = tid + THREADS * q;
    for (int t = 0; t < k; ++t) {
        const int i = inverse ? k - 1 - t : t;
        const int b = s_slot[i];   // interchange i swaps slots i and b
#pragma unroll
        for (int q = 0; q < ITEMS; ++q)
            pos[q] = pos[q] == i ? b : (pos[q] == b ? i : pos[q]);
    }
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {
        const int s = tid + THREADS * q;
        if (s < 2 * k) {
            const int f = pos[q];   // final slot of the contents of slot s
            s_dst[s] = f == s ? -1 : (f < k ? offset + f : s_piv[f - k]);
        }
    }
    copy_async_wait_all();
    __syncthreads();   // s_val and s_dst complete

    // Scatter: the saved contents of slot s go to row s_dst[s] (moved slots only).
    if (col_ok)
        for (int s = r; s < 2 * k; s += RSTEP) {
            const int row = s_dst[s];
            if (row >= 0)
                Acol[row * lda] = s_val[s * W + c];
        }
}
