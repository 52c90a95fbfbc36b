// laswp.cu -- row interchanges of a real matrix (LAPACK slaswp / dlaswp), one launch for a
// whole block of up to KMAX pivots.  One source for both element types: T = float or double.
//
// Computes, for i = 0, 1, ..., k-1 in order (inverse: i = k-1 down to 0):
//     swap rows (offset + i) and piv[i] of A,
// on every column of A.  Pivots are 0-based (unlike LAPACK's 1-based ipiv) and are absolute row
// indices of A; offset is the row of the first interchange (LAPACK's k1 - 1).  Unlike LAPACK,
// A is stored row-wise: A(i, j) = A[i*lda + j], lda 64-bit (elements), so a row is contiguous
// and A may be a block of columns of a larger row-major matrix.  The caller guarantees
// 0 <= piv[i] < m and offset + k <= m (the kernel does not see m).  The elements are moved as
// bits (no arithmetic), so the result is exact for any T.
//
// laswp_fused<T, VW, THREADS>: a grid of a few blocks per SM (Python sizes it: 2 of 512
// threads) walks column strips of width wc, block b taking strips b, b + gridDim.x, ...; every
// block works out the net effect of all k interchanges itself and applies it to its strips
// (blocks never touch each other's data):
//   * slots: the touched rows are given slots.  Row offset+i has slot i; a pivot row outside
//     [offset, offset+k) has slot k+j, j the first index with piv[j] equal to it (found with a
//     small open-addressing hash table in shared memory); a pivot row inside the range uses
//     the slot of that row.  At most 2k slots;
//   * first strip: the block requests the strip of rows offset..offset+k-1 with cp.async before
//     anything else, reads the pivots, requests the pivot rows, then works out the slots and
//     the permutation while those copies are in flight: the thread owning slot s follows its
//     contents through the k interchanges (a swap moves an item at slot a to b and at b to a),
//     reading the interchanges as shared-memory broadcasts.  The final slot f(s) of each item
//     is exactly what the swaps applied one by one would give, including rows that move
//     several times;
//   * scatter: after the copies land and a barrier, row(f(s)) of the strip is overwritten by
//     the saved contents of slot s, for each slot whose contents moved (f(s) != s), with
//     16-byte stores where VW > 1.  All reads of a strip precede all its writes, so dependent
//     interchanges and cycles are safe.  Later strips gather only the moved slots' rows.
//   Strip width: the largest multiple of 8 elements for which the 2k x wc strip fits the
//   block's cap elements of shared memory, shrunk so that the strips spread evenly over the
//   grid (every block gets about the same number of columns).  The shared memory is the same
//   in bytes for both T, so a double strip holds half as many columns as a float one.
// Knobs: VW = elements per 16-byte copy (4 floats or 2 doubles; needs A 16-byte aligned and
// lda * sizeof(T) a multiple of 16, the last strip handles the remaining columns with
// sizeof(T)-byte copies) or 1 (sizeof(T)-byte copies: unaligned rows); THREADS = 512 (template
// parameters); KMAX = 512 pivots per launch (the Python side splits longer pivot vectors into
// launches applied in order); dynamic shared memory LASWP_FUSED_META = 6*KMAX*4 bytes of plan,
// then cap elements of strips (~100 KiB; gpulinalg/layout/laswp.py FUSED_SMEM,
// FUSED_BLOCKS_PER_SM).
// Bound: bandwidth-bound; bytes moved = 2 * (touched rows) * n * sizeof(T) (4 bytes per
// element for float, 8 for double), judged against a device-to-device copy (~3.0 TB/s on an
// H100); the plan (~k steps of a few instructions per block) hides behind the first strip's
// reads.

#define LASWP_KMAX 512

namespace {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
                 : "=r"(a) : "l"(p));
    return a;
}

// *dst = *src (one element, sizeof(T) = 4 or 8 bytes, global -> shared), asynchronously
// where the hardware can.
template <typename T>
__device__ __forceinline__ void copy_async_elem(T* dst, const T* src) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async.ca copies 4, 8 or 16 bytes");
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "n"(sizeof(T)) : "memory");
#else
    *dst = *src;
#endif
}

// 16 bytes global -> shared, asynchronously (both 16-byte aligned), bypassing L1.
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_addr(dst)), "l"(src)
                 : "memory");
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}

__device__ __forceinline__ void copy_async_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// VW consecutive elements of one row, src[0..VW) (columns col.. of n), to shared memory: one
// 16-byte cp.async when VW elements make 16 bytes and the chunk is whole, else one copy per
// element of the columns < n.
template <typename T, int VW>
__device__ __forceinline__ void copy_strip(T* sv, const T* src, int col, int n) {
    if (VW * sizeof(T) == 16 && col + VW <= n) {
        copy_async16(sv, src);
    } else {
#pragma unroll
        for (int e = 0; e < VW; ++e)
            if (col + e < n)
                copy_async_elem(sv + e, src + e);
    }
}

// The reverse of copy_strip: VW elements from shared memory back to a row of A (one 16-byte
// store, the bits moved as a uint4, when the chunk is whole and 16 bytes, else the columns
// < n one by one).
template <typename T, int VW>
__device__ __forceinline__ void store_strip(T* dst, const T* sv, int col, int n) {
    if (VW * sizeof(T) == 16 && col + VW <= n) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(sv);
    } else {
#pragma unroll
        for (int e = 0; e < VW; ++e)
            if (col + e < n)
                dst[e] = sv[e];
    }
}

__device__ __forceinline__ unsigned row_hash(int row, int log2h) {
    return (static_cast<unsigned>(row) * 0x9E3779B1u) >> (32 - log2h);
}

// The slot of each pivot: row offset+i -> slot i; a pivot row outside [offset, offset+k) ->
// slot k + (the first index i naming it), found through the shared hash table s_key/s_first
// (2^log2h entries, cleared by the caller to -1 / INT_MAX).  Writes s_slot[0..k); ends with a
// barrier, after which s_key may be reused.  Every thread of the block calls it.
template <int THREADS>
__device__ __forceinline__ void assign_slots(const int* s_piv, int* s_key, int* s_first,
                                             int* s_slot, int k, int offset, int log2h) {
    const int H = 1 << log2h;
    for (int i = threadIdx.x; i < k; i += THREADS) {
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
    for (int i = threadIdx.x; i < k; i += THREADS) {
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
    __syncthreads();
}

}  // namespace

// The item-following of laswp_fused: the contents of slots threadIdx.x + THREADS*q (ITEMS of
// them, in registers) followed through the k interchanges; only the ns slot owners run it.
template <int ITEMS, int THREADS>
__device__ __forceinline__ void follow_slots(int k, int ns, const int* s_slot, int inverse,
                                             int* pos)
{
    if (static_cast<int>(threadIdx.x) >= ns)
        return;   // owns no slot
#pragma unroll 4
    for (int t = 0; t < k; ++t) {
        const int i = inverse ? k - 1 - t : t;
        const int b = s_slot[i];   // interchange i swaps slots i and b
#pragma unroll
        for (int q = 0; q < ITEMS; ++q)
            pos[q] = pos[q] == i ? b : (pos[q] == b ? i : pos[q]);
    }
}

template <typename T, int VW, int THREADS>
__global__ void __launch_bounds__(THREADS)
laswp_fused(int n, T* A, long long lda, int k, const int* __restrict__ piv, int offset,
            int inverse, int log2h, int cap)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    static_assert(VW == 1 || VW * sizeof(T) == 16, "one-element or 16-byte accesses");
    static_assert(THREADS % 32 == 0 && (2 * LASWP_KMAX) % THREADS == 0, "slots over threads");
    // Dynamic shared memory (LASWP_FUSED_META bytes, then the strips):
    // s_piv[KMAX] | s_slot[KMAX] | s_key[2 KMAX] (later s_dst) | s_first[2 KMAX] | s_val[cap].
    extern __shared__ float4 smem4[];
    int* s_piv = reinterpret_cast<int*>(smem4);
    int* s_slot = s_piv + LASWP_KMAX;
    int* s_key = s_slot + LASWP_KMAX;
    int* s_first = s_key + 2 * LASWP_KMAX;
    int* s_dst = s_key;   // reused once the hash table is no longer needed
    T* s_val = reinterpret_cast<T*>(s_first + 2 * LASWP_KMAX);   // 12 KiB in: 16-byte aligned
    const int H = 1 << log2h;   // hash size, >= 2k, <= 2 KMAX
    const int ns = 2 * k;       // slots
    const int tid = threadIdx.x;

    // Strip width for all 2k slots (the moved ones are not known yet).
    const long long wmax = (cap / ns) & ~7;   // >= 8: Python guarantees cap >= 8 * 2 KMAX
    const long long per = gridDim.x;
    const long long rounds = (n + per * wmax - 1) / (per * wmax);
    const int wc = static_cast<int>(((n + per * rounds - 1) / (per * rounds) + 7) & ~7LL);
    const int nstrips = (n + wc - 1) / wc;
    if (static_cast<int>(blockIdx.x) >= nstrips)
        return;   // no columns for this block (uniform: before any barrier)

    // Strip rows [s_lo, s_hi) of slot range into s_val: slot s < k is row offset+s, slot
    // k+j the pivot row piv[j] when it lies outside [offset, offset+k) (unused otherwise).
    // only_moved: skip slots whose contents stay (s_dst known).
    auto gather = [&](int c0, int s_lo, int s_hi, bool only_moved) {
        const int g = (min(wc, n - c0) + VW - 1) / VW;   // groups of VW elements per strip row
        const int total = (s_hi - s_lo) * g;
        for (int idx = tid; idx < total; idx += THREADS) {
            const int s = s_lo + idx / g, j = idx % g;
            if (only_moved && s_dst[s] < 0)
                continue;
            int row = offset + s;
            if (s >= k) {
                row = s_piv[s - k];
                if (row - offset >= 0 && row - offset < k)
                    continue;
            }
            const int col = c0 + j * VW;
            copy_strip<T, VW>(s_val + s * wc + j * VW, A + row * lda + col, col, n);
        }
    };
    auto scatter = [&](int c0) {
        const int g = (min(wc, n - c0) + VW - 1) / VW;
        const int total = ns * g;
        for (int idx = tid; idx < total; idx += THREADS) {
            const int s = idx / g, j = idx % g;
            const int row = s_dst[s];
            if (row < 0)
                continue;
            const int col = c0 + j * VW;
            store_strip<T, VW>(A + row * lda + col, s_val + s * wc + j * VW, col, n);
        }
    };

    // First strip, part 1: rows offset+i need no pivot, so they are requested at once.
    int strip = blockIdx.x;
    gather(strip * wc, 0, k, false);
    for (int i = tid; i < k; i += THREADS)
        s_piv[i] = piv[i];
    for (int h = tid; h < H; h += THREADS) {
        s_key[h] = -1;
        s_first[h] = 0x7fffffff;
    }
    __syncthreads();
    gather(strip * wc, k, ns, false);   // part 2: the pivot rows

    // Slots: an outside pivot row -> k + the first index naming it.
    assign_slots<THREADS>(s_piv, s_key, s_first, s_slot, k, offset, log2h);
    // s_slot complete; s_key is free for s_dst

    constexpr int ITEMS = 2 * LASWP_KMAX / THREADS;
    int pos[ITEMS];
#pragma unroll
    for (int q = 0; q < ITEMS; ++q)
        pos[q] = tid + THREADS * q;   // contents of slot tid + THREADS*q, followed
    if (ns <= THREADS)
        follow_slots<1, THREADS>(k, ns, s_slot, inverse, pos);
    else
        follow_slots<ITEMS, THREADS>(k, ns, s_slot, inverse, pos);
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {
        const int s = tid + THREADS * q;
        if (s < ns) {
            const int f = pos[q];   // final slot of the contents of slot s
            s_dst[s] = f == s ? -1 : (f < k ? offset + f : s_piv[f - k]);
        }
    }
    copy_async_wait_all();
    __syncthreads();   // s_val and s_dst complete
    scatter(strip * wc);

    // Further strips: only the moved slots' rows.
    for (strip += gridDim.x; strip < nstrips; strip += gridDim.x) {
        __syncthreads();   // s_val free
        gather(strip * wc, 0, ns, true);
        copy_async_wait_all();
        __syncthreads();   // the whole strip is read before any of it is written
        scatter(strip * wc);
    }
}
