"""gpulinalg: fast dense single-precision linear algebra on NVIDIA GPUs, SciPy-compatible.

Public API
----------
sgemm, matmul          -- SGEMM (kernels/sgemm.cu)
transpose, laswp       -- row-major support kernels (kernels/transpose.cu, kernels/laswp.cu)
lu, lu_factor, lu_solve -- blocked LU with partial pivoting (gpulinalg/_decomp_lu.py)

Importing works without CUDA; GPU routines then raise CudaUnavailableError.
"""

from .core.backend import CudaUnavailableError, gpu_available
from .gemm.simt import matmul, sgemm
from .linalg import lu, lu_factor, lu_solve
from .layout.laswp import laswp
from .layout.transpose import transpose

__version__ = "0.1.0"

__all__ = ["CudaUnavailableError", "gpu_available", "matmul", "sgemm", "transpose", "laswp",
           "lu", "lu_factor", "lu_solve"]
