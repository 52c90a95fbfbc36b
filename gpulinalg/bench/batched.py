"""gpulinalg-bench batched: stacks of small matrices and one small matrix, against torch and
cuSOLVER, one run.

Two tables, each candidate timed by wall clock with a device synchronisation after every
call (what a user's call costs), the candidates taking turns in shuffled order, medians of
--repeat rounds after a warm-up; inputs random (standard normal), CuPy arrays on the GPU:

* stacks: `gpulinalg.lu_factor` of a (B, n, n) stack (the batched LU) against
  `torch.linalg.lu_factor` of the same stack shared through DLPack, for each B x n of
  --stacks and each --dtype;
* one matrix: `gpulinalg.lu_factor` of an n x n matrix against
  `cupyx.scipy.linalg.lu_factor` (cuSOLVER getrf) and torch, for each n of --sizes.

Error: the largest over the first --check matrices of ||P A - L U||_F / (||A||_F n eps),
ours and LAPACK's (SciPy on the host) on the same matrices.  Without torch its column says
so.
"""

import numpy as np

from . import common


# Errors below this many ||A|| n eps pass whatever LAPACK's (a few roundings).
ERROR_FLOOR = 0.25


def add_arguments(p):
    """The options of `gpulinalg-bench batched`."""
    p.add_argument("--stacks", default="100000x8,20000x32,10000x64,2000x128,1000x256,200x512,"
                                       "50x1024", type=common.shape_list,
                   help="comma-separated BxN: B matrices of order N ('' for none)")
    p.add_argument("--sizes", default="32,64,128,256,512,1024,2048", type=common.size_list,
                   help="one matrix: comma-separated orders ('' for none)")
    p.add_argument("--dtype", default="float32,float64",
                   type=common.name_list(("float32", "float64")),
                   help="float32, float64 or both")
    p.add_argument("--check", type=int, default=4, help="matrices whose error is computed")
    p.add_argument("--repeat", type=int, default=25, help="timed rounds (median reported)")


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    if not (args.stacks or args.sizes):
        return "nothing to run: --stacks and --sizes are empty"
    return None


def _torch():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def _time_against_torch(a, fns, repeat):
    """time_wall of the candidates `fns` and, where torch has CUDA, torch.linalg.lu_factor
    of the same CuPy array `a` shared through DLPack ("torch")."""
    torch = _torch()
    if torch is not None:
        ta = torch.from_dlpack(a)
        fns = dict(fns, torch=lambda: torch.linalg.lu_factor(ta))
    return common.time_wall(fns, repeat=repeat)


def backward_errors(a, lu, piv, count):
    """The largest ||P A - L U||_F / (||A||_F n eps) over the first `count` matrices of the
    stack (host arrays), and LAPACK's on the same matrices."""
    import scipy.linalg
    from ..layout.laswp import laswp_reference
    eps = np.finfo(a.dtype).eps

    def error(m, factors, pivots):
        n = m.shape[0]
        f = factors.astype(np.float64)
        lower, upper = np.tril(f, -1) + np.eye(n), np.triu(f)
        return (np.linalg.norm(laswp_reference(m.copy(), pivots) - lower @ upper)
                / (np.linalg.norm(m) * n * eps))

    ours, lapack = 0.0, 0.0
    for i in range(min(count, a.shape[0])):
        m = a[i].astype(np.float64)
        ours = max(ours, error(m, lu[i], piv[i]))
        lapack = max(lapack, error(m, *scipy.linalg.lu_factor(a[i])))
    return ours, lapack


@common.frees_pool
def measure_stack(count, n, dtype, repeat, check_count):
    """One stack: ours against torch."""
    import cupy as cp

    import gpulinalg
    a = common.random_matrix((count, n, n), 1, cp, dtype=dtype)
    ms = _time_against_torch(a, {"ours": lambda: gpulinalg.lu_factor(a)}, repeat)
    lu, piv = gpulinalg.lu_factor(a)
    k = min(check_count, count)
    ours, lapack = backward_errors(cp.asnumpy(a[:k]), cp.asnumpy(lu[:k]), cp.asnumpy(piv[:k]),
                                   k)
    row = {"case": "stack", "dtype": dtype, "batch": count, "n": n, "ours_ms": ms["ours"],
           "torch_ms": ms.get("torch"), "err": ours, "err_lapack": lapack,
           "read_write_gb": 2 * a.nbytes / 1e9}
    row["vs_torch"] = row["torch_ms"] / row["ours_ms"] if row["torch_ms"] else None
    return row


@common.frees_pool
def measure_one(n, dtype, repeat, check_count):
    """One n x n matrix: ours against cuSOLVER and torch."""
    import cupy as cp
    import cupyx.scipy.linalg as cxl

    import gpulinalg
    a = common.random_matrix((n, n), 2, cp, dtype=dtype)
    ms = _time_against_torch(a, {"ours": lambda: gpulinalg.lu_factor(a),
                                 "cusolver": lambda: cxl.lu_factor(a)}, repeat)
    lu, piv = gpulinalg.lu_factor(a)
    ours, lapack = backward_errors(cp.asnumpy(a)[None], cp.asnumpy(lu)[None],
                                   cp.asnumpy(piv)[None], 1)
    row = {"case": "one", "dtype": dtype, "batch": 1, "n": n, "ours_ms": ms["ours"],
           "cusolver_ms": ms["cusolver"], "torch_ms": ms.get("torch"), "err": ours,
           "err_lapack": lapack}
    row["vs_cusolver"] = row["cusolver_ms"] / row["ours_ms"]
    row["vs_torch"] = row["torch_ms"] / row["ours_ms"] if row["torch_ms"] else None
    return row


def execute(args):
    """Run `gpulinalg-bench batched` with the parsed options; the exit status (1 when our
    backward error exceeds twice LAPACK's and ERROR_FLOOR)."""
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}", flush=True)
    configs = ([("stack", (b, n, d)) for d in args.dtype for b, n in args.stacks]
               + [("one", (n, d)) for d in args.dtype for n in args.sizes])
    rows = []
    with common.Progress(len(configs), "batched", args.quiet) as bar:
        for case, params in configs:
            if case == "stack":
                rows.append(measure_stack(*params, args.repeat, args.check))
            else:
                rows.append(measure_one(*params, args.repeat, args.check))
            bar.done(progress(rows[-1]))
    summary(rows)
    common.write_results(args, "batched", rows, plot)
    bad = [r for r in rows if r["err"] > max(2 * r["err_lapack"], ERROR_FLOOR)]
    for r in bad:
        print(f"ERROR ABOVE 2x LAPACK'S: {progress(r)}")
    return 1 if bad else 0


def progress(r):
    """One line on a finished row."""
    what = f"{r['case']} {r['dtype']} {r['batch']}x{r['n']}^2"
    torch = f"torch {r['torch_ms']:.3f} ms" if r.get("torch_ms") else "no torch"
    cus = f", cuSOLVER {r['cusolver_ms']:.3f} ms" if r.get("cusolver_ms") else ""
    return (f"{what}: ours {r['ours_ms']:.3f} ms, {torch}{cus}; error {r['err']:.2e} "
            f"(LAPACK {r['err_lapack']:.2e})")


def summary(rows):
    """One table: the case, our wall time, torch's and cuSOLVER's, the ratios and errors."""
    cols = [("case", "case", "{}"), ("dtype", "dtype", "{}"), ("batch", "B", "{}"),
            ("n", "n", "{}"), ("ours_ms", "ours ms", "{:.3f}"), ("torch_ms", "torch ms", "{:.3f}"),
            ("vs_torch", "torch/ours", "{:.2f}"), ("cusolver_ms", "cuSOLVER ms", "{:.3f}"),
            ("vs_cusolver", "cuSOLVER/ours", "{:.2f}"), ("err", "err ours", "{:.1e}"),
            ("err_lapack", "err LAPACK", "{:.1e}")]
    print()
    common.print_table(cols, rows, title="lu_factor of stacks and of one small matrix, wall "
                                         "time with a sync; ratios: their time / ours; error: "
                                         "||PA - LU|| / (||A|| n eps), worst of the checked")


def plot(rows, path):
    """Wall milliseconds per case: ours, torch, cuSOLVER, on a log scale."""
    labels = [f"{r['dtype'][5:]} {r['batch']}x{r['n']}" for r in rows]
    common.plot_rows(path, rows, labels,
                     [("gpulinalg", "ours_ms", "o-"), ("torch", "torch_ms", "s--"),
                      ("cuSOLVER", "cusolver_ms", "d:")],
                     "ms per call (wall, with a sync)", "lu_factor: stacks and small matrices",
                     logy=True)
