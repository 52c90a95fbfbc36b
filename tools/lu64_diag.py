import sys, zlib, warnings, numpy as np, scipy.linalg as sl
sys.path.insert(0, 'tests')
from lu_helpers import backward_error
from test_lu_dtypes import _hard
from gpulinalg.testing import lu as glt
warnings.simplefilter("ignore")
eps = np.finfo(float).eps
nid = "tests/test_lu_dtypes.py::test_gpu_float64_hard_matrices[cond1e6]"
rng = np.random.default_rng(zlib.crc32(nid.encode()))
a = _hard(rng, "cond1e6", n=700)
lu, piv = sl.lu_factor(a)
print("lapack", round(backward_error(a, lu, piv, eps), 5), flush=True)
res = {}
for nb in (700, 352, 256):
    for emu in (False, True):
        for panel in ("cpu", "gpu"):
            r = glt.lu_factor(a, emulate=emu, panel=panel, block_size=nb)
            res[(nb, emu, panel)] = r
            print(f"nb {nb} emu {emu:d} panel {panel}: {backward_error(a, r[0], r[1], eps):.5f}"
                  f"  piv==lapack {np.array_equal(r[1], piv)}", flush=True)
    d = res[(nb, False, "cpu")][0] - res[(nb, True, "cpu")][0]
    print("   max|gpu-emu| (cpu panel)", np.abs(d).max(), "first row/col diff", np.argwhere(np.abs(d) > 0)[:3].tolist())
import cupy as cp
from gpulinalg.lu.trsm import trsm_lower_unit
l = np.tril(lu[:352, :352], -1) + np.eye(352)
b = rng.standard_normal((352, 348))
x_ref = sl.solve_triangular(l, b, lower=True, unit_diagonal=True)
gb = cp.asarray(b)
out = trsm_lower_unit(cp.asarray(lu[:352, :352]), gb)
x = cp.asnumpy(out if out is not None else gb)
print("trsm rel diff vs scipy", np.abs(x - x_ref).max() / np.abs(x_ref).max(),
      "resid ours", np.linalg.norm(l @ x - b) / (np.linalg.norm(l) * np.linalg.norm(x) * eps),
      "resid scipy", np.linalg.norm(l @ x_ref - b) / (np.linalg.norm(l) * np.linalg.norm(x_ref) * eps))
