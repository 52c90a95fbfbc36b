"""The blocked LU factorization with partial pivoting (gpulinalg.linalg's lu_factor, lu).

plan.py decides the route and the block size; driver.py is the look-ahead loop (`getrf`) over
the device steps of steps.py (`CupyOps`) and a panel: panel_gpu.py factors it on the GPU,
panel_cpu.py on the host (with host_threads.py's settings).  graph.py replays the one-GPU loop
from a CUDA graph; multi.py and distribution.py spread the matrix over several GPUs; trsm.py is
the triangular solve of the update.
"""
