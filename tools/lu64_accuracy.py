"""Where the float64 LU's backward error comes from: the same matrices factored by LAPACK
(SciPy on the host), cuSOLVER, our default LU, our LU with the host panel, and our LU with
its products (the DGEMM) replaced by cuBLAS's, each as ||PA - LU||_F / (||A||_F n eps).

    python3 tools/lu64_accuracy.py [--sizes 2048,4096,8192]

An investigation tool: the cuBLAS swap rebinds gpulinalg.gemm.dispatch.gemm_ptr_for for the
duration of one call (the steps look it up when they are made), which production code never
does.
"""

import argparse
import contextlib

import numpy as np
import scipy.linalg as sl


def backward_error(a, lu, piv):
    n = a.shape[0]
    L = np.tril(lu, -1) + np.eye(n)
    U = np.triu(lu)
    perm = np.arange(n)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return np.linalg.norm(a[perm] - L @ U) / (np.linalg.norm(a) * n * np.finfo(a.dtype).eps)


@contextlib.contextmanager
def cublas_products():
    """gemm_ptr_for(float64) -> a by-pointer product through cupy.matmul (cuBLAS DGEMM)."""
    import cupy as cp
    from gpulinalg.gemm import dispatch

    def view(ptr, rows, cols, ld):
        mem = cp.cuda.UnownedMemory(ptr, (rows - 1) * ld * 8 + cols * 8, None)
        return cp.ndarray((rows, cols), cp.float64, cp.cuda.MemoryPointer(mem, 0),
                          strides=(ld * 8, 8))

    def gemm(m, n, k, alpha, ap, lda, a_kmajor, bp, ldb, b_nmajor, beta, cptr, ldc,
             variant=None, split=None, sms=None, table=None):
        A = view(ap, m, k, lda) if a_kmajor else view(ap, k, m, lda).T
        B = view(bp, k, n, ldb) if b_nmajor else view(bp, n, k, ldb).T
        C = view(cptr, m, n, ldc)
        C[...] = alpha * (A @ B) + (beta * C if beta else 0.0)

    original = dispatch.gemm_ptr_for
    dispatch.gemm_ptr_for = lambda el: gemm if el.name == "float64" else original(el)
    try:
        yield
    finally:
        dispatch.gemm_ptr_for = original


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2048,4096,8192")
    args = p.parse_args()
    import cupy as cp
    import gpulinalg
    from cupyx.scipy.linalg import lu_factor as cusolver
    from gpulinalg.lu import graph

    print(f"{'n':>6} {'LAPACK':>8} {'cuSOLVER':>9} {'ours':>8} {'ours cpu panel':>15} "
          f"{'ours, cuBLAS products':>22}")
    for n in (int(s) for s in args.sizes.split(",")):
        a = np.random.default_rng(n).standard_normal((n, n))
        d = cp.asarray(a)
        row = [backward_error(a, *sl.lu_factor(a))]
        lu, piv = cusolver(d)
        row.append(backward_error(a, cp.asnumpy(lu), cp.asnumpy(piv)))
        with graph.disabled():
            for kw, ctx in (({}, contextlib.nullcontext()),
                            ({"panel": "cpu"}, contextlib.nullcontext()),
                            ({}, cublas_products())):
                with ctx:
                    lu, piv = gpulinalg.lu_factor(d, **kw)
                row.append(backward_error(a, cp.asnumpy(lu), cp.asnumpy(piv)))
        print(f"{n:6d} {row[0]:8.4f} {row[1]:9.4f} {row[2]:8.4f} {row[3]:15.4f} {row[4]:22.4f}",
              flush=True)


if __name__ == "__main__":
    main()
