"""A CPU emulation of the CUDA features the batched LU kernels use (tests of
kernels/getrf_batched.cu, getrf_batched_blocked.cu and permute.cu): the kernel's own source compiled by g++
against PRELUDE, one block at a time, each thread a fiber whose barriers, shuffles and warp
reductions are rendezvous of the fibers named, in a shuffled order each round.  A test adds a
driver (C++ defining extern "C" entry points that call emu::run_blocks) and calls it through
ctypes."""

import ctypes
import re
import shutil
import subprocess

import pytest

from gpulinalg.core import kernels as _kernels

PRELUDE = r"""
// The CUDA features the batched LU kernels use, on the CPU: one block at a time, each thread
// a fiber (ucontext), barriers, shuffles and reductions as rendezvous of the fibers named,
// cp.async as plain copies, dynamic shared memory one array (emu_smem) whatever the kernel
// calls it.
#include <functional>
#include <ucontext.h>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <vector>
#include <map>
#include <random>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __restrict__ __restrict
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct uint4 { unsigned x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline double2 make_double2(double a, double b) { return {a, b}; }
struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
namespace emu {
struct Fiber { ucontext_t ctx; std::vector<char> stack; emu_dim3 tid; bool done, waiting;
               uint64_t key, gen; };
inline std::vector<Fiber>* fibers;
inline Fiber* cur;
inline ucontext_t sched;
inline emu_dim3 block_idx, block_dim;
inline std::map<uint64_t, std::pair<int, uint64_t>> arrivals;
inline unsigned long long slots[1024];
inline void rendezvous(uint64_t key, int count) {
    auto& a = arrivals[key];
    if (++a.first == count) {
        a.first = 0;
        uint64_t gen = a.second++;
        for (auto& f : *fibers) if (f.waiting && f.key == key && f.gen == gen) f.waiting = false;
        return;
    }
    cur->waiting = true; cur->key = key; cur->gen = a.second;
    while (cur->waiting) swapcontext(&cur->ctx, &sched);
}
inline int tid() { return (int)cur->tid.x; }
inline int lane() { return tid() & 31; }
inline uint64_t wkey(int kind, unsigned mask) {
    return (uint64_t(kind) << 48) | (uint64_t(tid() >> 5) << 32) | mask;
}
inline void need(unsigned mask, int l) {
    if (!((mask >> l) & 1u)) { fprintf(stderr, "lane %d not in mask %08x\n", l, mask); abort(); }
}
template <typename T> inline T exch(unsigned mask, T v, int src) {
    need(mask, lane()); need(mask, src);
    unsigned long long bits = 0; memcpy(&bits, &v, sizeof(T));
    slots[tid()] = bits;
    rendezvous(wkey(1, mask), __builtin_popcount(mask));
    unsigned long long got = slots[(tid() & ~31) + src];
    rendezvous(wkey(2, mask), __builtin_popcount(mask));
    T r; memcpy(&r, &got, sizeof(T)); return r;
}
template <typename F> inline unsigned redux(unsigned mask, unsigned v, F op) {
    need(mask, lane());
    slots[tid()] = v;
    rendezvous(wkey(3, mask), __builtin_popcount(mask));
    bool first = true; unsigned r = 0;
    for (int l = 0; l < 32; ++l) if ((mask >> l) & 1u) {
        unsigned x = (unsigned)slots[(tid() & ~31) + l]; r = first ? x : op(r, x); first = false;
    }
    rendezvous(wkey(4, mask), __builtin_popcount(mask));
    return r;
}
}  // namespace emu
#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
inline void __syncthreads() { emu::rendezvous(0xFFFFull << 48, (int)emu::block_dim.x); }
inline int __syncthreads_or(int pred) {
    emu::slots[emu::tid()] = pred != 0;
    __syncthreads();
    int r = 0;
    for (unsigned t = 0; t < emu::block_dim.x; ++t) r |= (int)emu::slots[t];
    __syncthreads();
    return r;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    emu::need(mask, emu::lane()); emu::rendezvous(emu::wkey(5, mask), __builtin_popcount(mask));
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return emu::exch(mask, v, (emu::lane() & ~(width - 1)) + src % width);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) {
    int l = emu::lane(), src = l ^ lm;
    return emu::exch(mask, v, (src & ~(width - 1)) == (l & ~(width - 1)) ? src : l);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
    return emu::redux(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; });
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
    return emu::redux(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; });
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
    return emu::redux(mask, v, [](unsigned a, unsigned b) { return a | b; });
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    return __reduce_or_sync(mask, pred ? 1u << emu::lane() : 0u);
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0u; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
inline unsigned __match_any_sync(unsigned mask, int v) {
    emu::need(mask, emu::lane());
    emu::slots[emu::tid()] = (unsigned)v;
    emu::rendezvous(emu::wkey(6, mask), __builtin_popcount(mask));
    unsigned r = 0;
    for (int l = 0; l < 32; ++l)
        if ((mask >> l) & 1u && (unsigned)emu::slots[(emu::tid() & ~31) + l] == (unsigned)v)
            r |= 1u << l;
    emu::rendezvous(emu::wkey(7, mask), __builtin_popcount(mask));
    return r;
}
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
inline int min(int a, int b) { return a < b ? a : b; }
inline void cp_async4(float* d, const float* s, bool ok) {
    if (ok) memcpy(d, s, 4); else memset(d, 0, 4);
}
inline void cp_async16(float* d, const float* s) { memcpy(d, s, 16); }
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}
alignas(16) float4 emu_smem[(256 * 1024) / 16];
#define gbatch_smem emu_smem
#define gbb_smem emu_smem
#define perm_smem emu_smem
#define grt_smem emu_smem
namespace emu {
inline std::function<void()> body;
// `blocks` blocks of `threads` fibers each running body() for its blockIdx.x, fibers resumed
// in an order shuffled each round (seeded); shared memory poisoned (0xff: NaN bits) before
// each block, and nothing written at or past `smem` bytes.
inline void run_blocks(int blocks, int threads, unsigned seed, long smem,
                       std::function<void()> kernel) {
    body = kernel;
    std::mt19937 rng(seed);
    std::vector<Fiber> all(threads);
    for (auto& f : all) f.stack.assign(1 << 16, 0);
    fibers = &all;
    unsigned char* sm = reinterpret_cast<unsigned char*>(emu_smem);
    for (int bx = 0; bx < blocks; ++bx) {
        memset(sm, 0xff, sizeof(emu_smem));
        block_idx.x = bx; block_dim.x = threads; arrivals.clear();
        for (int t = 0; t < threads; ++t) {
            auto& f = all[t];
            f.tid.x = t; f.done = f.waiting = false;
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size();
            f.ctx.uc_link = &sched;
            makecontext(&f.ctx, (void (*)())+[]() { body(); cur->done = true; }, 0);
        }
        std::vector<int> order(threads);
        for (int t = 0; t < threads; ++t) order[t] = t;
        for (int left = threads; left;) {
            std::shuffle(order.begin(), order.end(), rng);
            bool moved = false;
            for (int t : order) {
                auto& f = all[t];
                if (f.done || f.waiting) continue;
                cur = &f; swapcontext(&sched, &f.ctx); moved = true;
                if (f.done) --left;
            }
            if (!moved) { fprintf(stderr, "deadlock in block %d\n", bx); abort(); }
        }
        for (long i = smem; i < (long)sizeof(emu_smem); ++i)
            if (sm[i] != 0xff) {
                fprintf(stderr, "shared write at %ld >= %ld\n", i, smem);
                abort();
            }
    }
}
}  // namespace emu
"""


def launch_format(family, kernel):
    """The Launcher format ('i' int, 'q' long long, 'd' double, 'P' pointer) of the parameters
    of the kernel named `kernel` in kernels/<family>.cu, from its definition."""
    params = re.search(kernel + r"\(([^)]*)\)\s*\{", _kernels.source(family)).group(1)
    return "".join("P" if "*" in p else {"int": "i", "long": "q", "double": "d"}[p.split()[0]]
                   for p in params.split(","))


def kernel_source(family):
    """kernels/<family>.cu with its local includes pasted, async_copy.cuh left out (PRELUDE
    provides cp.async)."""
    folder = _kernels.kernel_dir()
    text = (folder / f"{family}.cu").read_text().replace('#include "async_copy.cuh"', "")
    for name in ("getrf_pivot.cuh",):
        text = text.replace(f'#include "{name}"', (folder / name).read_text())
    return text


def build(tmp_path_factory, family, driver, options=()):
    """The library of PRELUDE + the family's source + `driver`, compiled by g++ (a skip
    without g++, a failure where it does not compile)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    folder = tmp_path_factory.mktemp(f"{family}_emulated")
    (folder / "emulated.cpp").write_text(PRELUDE + kernel_source(family) + driver)
    lib = folder / f"lib{family}_emulated.so"
    proc = subprocess.run([gxx, "-std=c++17", "-O1", *options, "-shared", "-fPIC",
                           "-Wno-unknown-pragmas", "-o", str(lib), str(folder / "emulated.cpp")],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        pytest.fail(f"the emulation does not compile:\n{proc.stderr[-4000:]}")
    return ctypes.CDLL(str(lib))
