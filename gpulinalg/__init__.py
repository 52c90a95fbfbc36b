"""gpulinalg: fast dense single-precision linear algebra on NVIDIA GPUs, SciPy-compatible.

Public API
----------
sgemm, matmul          -- SGEMM (kernels/sgemm.cu)
transpose, laswp       -- row-major support kernels (kernels/transpose.cu, kernels/laswp.cu)
lu, lu_factor, lu_solve -- blocked LU with partial pivoting (gpulinalg/_decomp_lu.py)

Importing works without CUDA; GPU routines then raise CudaUnavailableError.
"""

from ._backend import CudaUnavailableError, gpu_available
from ._blas import matmul, sgemm
from ._decomp_lu import lu, lu_factor, lu_solve
from ._laswp import laswp
from ._transpose import transpose

__version__ = "0.1.0"

__all__ = ["CudaUnavailableError", "gpu_available", "matmul", "sgemm", "transpose", "laswp",
           "lu", "lu_factor", "lu_solve"]
