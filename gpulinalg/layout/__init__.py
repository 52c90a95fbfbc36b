"""Data movement kernels: the out-of-place transpose (transpose) and the row interchanges
(laswp)."""
