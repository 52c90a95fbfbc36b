"""gpulinalg: fast dense linear algebra on NVIDIA GPUs, SciPy-compatible.

Public API
----------
sgemm, dgemm, matmul    -- GEMM (gpulinalg/blas.py; kernels/sgemm*.cu, kernels/dgemm.cu)
transpose, laswp        -- row-major support kernels (kernels/transpose.cu, kernels/laswp.cu)
lu, lu_factor, lu_solve -- blocked LU with partial pivoting (gpulinalg/linalg.py)
solve, inv, det         -- on that LU; float64 solve by float32 factors and refinement
                           (gpulinalg/gesv.py)

The tuning table is `gpulinalg.tuning`; the test hooks are in `gpulinalg.testing`.
Importing works without CUDA; GPU routines then raise CudaUnavailableError.
"""

from .blas import dgemm, laswp, matmul, sgemm, transpose
from .core.backend import CudaUnavailableError, gpu_available
from .linalg import lu, lu_factor, lu_solve
from .gesv import SolveInfo, det, inv, solve

__version__ = "0.1.0"

__all__ = ["CudaUnavailableError", "gpu_available", "matmul", "sgemm", "dgemm", "transpose",
           "laswp", "lu", "lu_factor", "lu_solve", "solve", "inv", "det", "SolveInfo"]
