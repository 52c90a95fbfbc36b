"""SGEMM dispatch: the arithmetic a product runs in, and the kernel family that runs it.

precision "fp32" runs the SIMT kernel (simt.py); "3xtf32" and "tf32" run on the tensor cores,
through Hopper's wgmma where the device has it (wgmma.py), else through mma.sync (mma.py);
"auto" (the public default) names "3xtf32" on Hopper for the products where it is both faster
and more accurate than the SIMT kernel (resolve_precision), "fp32" elsewhere.  The LU's steps
launch by device pointer through the SIMT launchers re-exported here (gemm_ptr,
pick_variant, gemm_into).
"""

from .. import tuning
from ..core import device
from ..core.element import F32, F64
from . import mma, simt, wgmma
from .simt import chosen_variant, gemm_into, gemm_ptr, pick_split, pick_variant

__all__ = ["PRECISIONS", "check_precision", "resolve_precision", "product_into", "gemm_ptr",
           "gemm_into", "pick_variant", "pick_split", "chosen_variant", "gemm_ptr_for"]

PRECISIONS = ("auto", "fp32", "3xtf32", "tf32")          # float32 work
PRECISIONS_FP64 = ("auto", "fp64")                         # float64 work: FP64 throughout


def check_precision(precision, element=F32):
    """`precision` if it names an arithmetic of `element`'s work (float32: PRECISIONS;
    float64: PRECISIONS_FP64; complex: "auto"), else ValueError."""
    name = element.name
    if name == "float32":
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    elif name == "float64":
        if precision not in PRECISIONS_FP64:
            raise ValueError(f"float64 input computes in FP64: precision must be one of "
                             f"{PRECISIONS_FP64}, got {precision!r} (the TF32 kinds and "
                             f"'fp32' are float32 arithmetic)")
    elif precision != "auto":
        raise ValueError(f"{name} input is factored by cuSOLVER: precision must be 'auto', "
                         f"got {precision!r}")
    return precision


def resolve_precision(precision, m, n, k, table=None):
    """The arithmetic `precision` means for an m x n x k product.

    "auto": "3xtf32" where the device has wgmma, k >= gemm_tc_min_k and either
    m * n >= gemm_tc_min_mn or m * n * k >= gemm_tc_min_mnk (the Tuning table, `table` or the
    one in force); "fp32" otherwise.  Below those sizes the tensor-core path's pre-pass and
    three launches outlast the SIMT kernel.  Other precisions pass through.
    """
    if precision != "auto":
        return precision
    t = tuning.current() if table is None else table
    if k >= t.gemm_tc_min_k and (m * n >= t.gemm_tc_min_mn or m * n * k >= t.gemm_tc_min_mnk):
        if device.has_wgmma():
            return "3xtf32"
    return "fp32"


def gemm_ptr_for(element):
    """The by-pointer product launcher of `element`'s arithmetic, with simt.gemm_ptr's
    signature: the SIMT SGEMM for float32, the FP64 tensor-core DGEMM (dmma.py) for float64."""
    if element.name == "float32":
        return gemm_ptr
    if element.name == "float64":
        from . import dmma
        return dmma.gemm_ptr
    raise TypeError(f"no GEMM kernel of ours computes in {element.name}")


def product_into(alpha, a, b, beta, c, precision="fp32", stage_a=False, persistent=True,
                 table=None):
    """c = alpha * a @ b + beta * c in place, in the arithmetic `precision` names (see
    `gpulinalg.sgemm`; float64 arrays: the FP64 DGEMM, dmma.py), on the current device and
    stream; returns c.

    a (m x k), b (k x n), c (m x n) are CuPy arrays of one dtype (float32 or float64); a and b may have any strides, c
    needs one unit stride.  stage_a: as simt.gemm_into's (FP32 only); persistent: as
    wgmma.gemm_wgmma_into's; table: the Tuning table (default: the one in force).
    """
    if c.dtype == F64.dtype:   # float64: the FP64 tensor-core DGEMM whatever the precision
        from . import dmma
        return dmma.gemm_into(alpha, a, b, beta, c, table=table)
    table = tuning.current() if table is None else table   # read once, passed on
    precision = resolve_precision(precision, a.shape[0], b.shape[1], a.shape[1], table)
    if precision == "fp32":
        return simt.gemm_into(alpha, a, b, beta, c, stage_a=stage_a, table=table)
    if device.has_wgmma():
        return wgmma.gemm_wgmma_into(alpha, a, b, beta, c, mode=precision,
                                     persistent=persistent, table=table)
    return mma.gemm_tc_into(alpha, a, b, beta, c, mode=precision, table=table)
