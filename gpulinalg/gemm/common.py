"""What the SGEMM kernels' wrappers share: the problem as a row-major C sees it, and the
alignment test of 16-byte accesses.  simt, mma and wgmma import this module, never each
other."""

from ..core import arrays as _arrays


def aligned16(ptr, ld):
    """16-byte vector access possible: aligned base pointer, leading dimension % 4 == 0."""
    return ptr % 16 == 0 and ld % 4 == 0


def row_major_problem(alpha, a, b, beta, c):
    """Validate c = alpha a b + beta c and state it for a kernel that writes row-major C.

    Returns None when there is nothing to compute (m or n is 0), else
    (m, n, k, alpha, A, lda, a_kmajor, B, ldb, b_nmajor, beta, C, ldc): a column-major c is
    computed as C^T = B^T A^T, whose operands swap roles and majors.  Operands with no unit
    stride are copied once (as_matrix); c needs one unit stride.
    """
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise ValueError(f"shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if max(m, n, k) >= 2**31:
        raise ValueError("dimensions must be below 2**31")
    c_layout = _arrays.matrix_layout(c)
    if c_layout is None:
        raise ValueError("c must have one unit stride (a row- or column-major view)")
    if m == 0 or n == 0:
        return None
    a, (lda, a_row) = _arrays.as_matrix(a, "a")
    b, (ldb, b_row) = _arrays.as_matrix(b, "b")
    ldc, c_row = c_layout
    if c_row:  # row-major C: A row-major is K-major, B row-major is N-major
        return (m, n, k, alpha, a, lda, a_row, b, ldb, b_row, beta, c, ldc)
    return (n, m, k, alpha, b, ldb, not b_row, a, lda, not a_row, beta, c, ldc)
