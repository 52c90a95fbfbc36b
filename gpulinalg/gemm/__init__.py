"""SGEMM: the SIMT FP32 kernel (simt), the tensor-core kernels (wgmma on Hopper, mma.sync
elsewhere), their shared helpers (common) and the dispatch that picks the arithmetic and the
family (dispatch)."""
