"""gpulinalg-bench solve: lu_solve and the float64 solve against cuSOLVER, one run.

Three tables, each candidate timed by wall clock with a device synchronisation after every
call (what a user's call costs, the host's work included), the candidates taking turns in
shuffled order, medians of --repeat rounds after a warm-up; inputs random (standard normal),
on the GPU (CuPy arrays):

* lu_solve with the factors on the GPU: ours (`gpulinalg.lu_solve` on `gpulinalg.lu_factor`'s
  factors) against `cupyx.scipy.linalg.lu_solve` on `cupyx.scipy.linalg.lu_factor`'s (cuSOLVER
  getrs), n = --n, for each --nrhs and --dtype;
* the float64 solve of one right-hand side: `gpulinalg.solve` at its defaults against
  `cupy.linalg.solve` (cuSOLVER dgetrf + dgetrs), for each of --solve-sizes, with our two
  paths also timed, each on its own after that pair (`precision="fp64"`; the refinement
  forced by a tuning table with solve_refine_min_n = 1: the evidence of that cut-over);
* the same at n = --kappa-n on matrices of condition number kappa (random orthogonal factors,
  log-spaced singular values), for each of --kappa.

Error: the normwise backward error ||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf),
computed in float64 on the GPU, for each answer; `path` and `iters` are what
solve(..., return_info=True) reports (direct, refined or fallback; refinement steps).
"""

import numpy as np

from . import common


def add_arguments(p):
    """The options of `gpulinalg-bench solve`."""
    p.add_argument("--n", type=int, default=8192, help="lu_solve: the matrix order")
    p.add_argument("--nrhs", default="1,16,64,8192", type=common.size_list,
                   help="lu_solve: comma-separated right-hand side counts ('' for none)")
    p.add_argument("--dtype", default="float32,float64",
                   type=common.name_list(("float32", "float64")),
                   help="lu_solve: float32, float64 or both")
    p.add_argument("--solve-sizes", default="4096,8192,16384,32768", type=common.size_list,
                   help="float64 solve: comma-separated n ('' for none)")
    p.add_argument("--kappa", default="1e3,1e6,1e9,1e12",
                   help="float64 solve: condition numbers at --kappa-n ('' for none)")
    p.add_argument("--kappa-n", type=int, default=4096, help="order of the kappa matrices")
    p.add_argument("--repeat", type=int, default=5, help="timed rounds (median reported)")


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    if not (args.nrhs or args.solve_sizes or args.kappa):
        return "nothing to run: --nrhs, --solve-sizes and --kappa are empty"
    return None


def backward_error(cp, a, x, b):
    """max over columns of ||b - a x||_inf / (||a||_inf ||x||_inf + ||b||_inf), in float64."""
    a64, x64, b64 = (v.astype(cp.float64, copy=False) for v in (a, x, b))
    x64, b64 = x64.reshape(len(x64), -1), b64.reshape(len(b64), -1)
    r = cp.abs(b64 - a64 @ x64).max(axis=0)
    den = cp.abs(a64).sum(axis=1).max() * cp.abs(x64).max(axis=0) + cp.abs(b64).max(axis=0)
    return float((r / den).max())


def conditioned(cp, n, kappa, seed):
    """A float64 n x n matrix of 2-norm condition number kappa: U diag(s) V^T with random
    orthogonal U, V (QR of Gaussian matrices) and log-spaced s from 1 to 1/kappa."""
    rng = cp.random.default_rng(seed)
    u, _ = cp.linalg.qr(rng.standard_normal((n, n)))
    v, _ = cp.linalg.qr(rng.standard_normal((n, n)))
    s = cp.logspace(0, -np.log10(kappa), n)
    return (u * s) @ v.T


@common.frees_pool
def measure_lu_solve(n, nrhs, dtype, repeat):
    """lu_solve of nrhs right-hand sides with an n x n LU, ours against cuSOLVER's."""
    import cupy as cp
    import cupyx.scipy.linalg as cxl

    import gpulinalg
    a = common.random_matrix((n, n), 1, cp, dtype=dtype)
    b = common.random_matrix((n, nrhs), 2, cp, dtype=dtype)
    ours_f = gpulinalg.lu_factor(a)
    theirs_f = cxl.lu_factor(a)
    fns = {"ours": lambda: gpulinalg.lu_solve(ours_f, b),
           "cusolver": lambda: cxl.lu_solve(theirs_f, b)}
    ms = common.time_wall(fns, repeat=repeat)
    row = {"case": "lu_solve", "dtype": dtype, "n": n, "nrhs": nrhs,
            "ours_ms": ms["ours"], "vendor_ms": ms["cusolver"],
            "ratio": ms["cusolver"] / ms["ours"],
            "err_ours": backward_error(cp, a, fns["ours"](), b),
            "err_vendor": backward_error(cp, a, fns["cusolver"](), b),
            "vendor": "cupyx.scipy.linalg.lu_solve"}
    return row


@common.frees_pool
def measure_solve(n, repeat, kappa=None):
    """The float64 solve of one right-hand side on a random n x n matrix, or on one of
    condition number kappa (`conditioned`)."""
    import dataclasses
    import warnings

    import cupy as cp

    import gpulinalg
    from gpulinalg import tuning
    from gpulinalg.core.element import F64
    a = (common.random_matrix((n, n), 4, cp, dtype="float64") if kappa is None
         else conditioned(cp, n, kappa, 5))
    b = common.random_matrix((n,), 3, cp, dtype="float64")
    # ours at its defaults, our two paths forced (the direct float64 path by precision="fp64",
    # the refinement by a table with solve_refine_min_n = 1), cuSOLVER's
    refine_all = dataclasses.replace(tuning.current(element=F64), solve_refine_min_n=1)

    def refined():
        with tuning.override(refine_all):
            return gpulinalg.solve(a, b)

    fns = {"ours": lambda: gpulinalg.solve(a, b),
           "cupy": lambda: cp.linalg.solve(a, b)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the ill-conditioned matrices warn, as SciPy's
        ms = common.time_wall(fns, repeat=repeat)
        # each forced path on its own: alternating with the default, calls of different
        # tables and dtypes would evict each other's CUDA graphs (lu_factor's replay cache)
        ms["direct"] = common.time_wall(
            {"direct": lambda: gpulinalg.solve(a, b, precision="fp64")}, repeat=repeat)["direct"]
        ms["refined"] = common.time_wall({"refined": refined}, repeat=repeat)["refined"]
        x, info = gpulinalg.solve(a, b, return_info=True)
        with tuning.override(refine_all):
            _, info_refined = gpulinalg.solve(a, b, return_info=True)
    row = {"case": "solve", "dtype": "float64", "n": n, "nrhs": 1, "kappa": kappa,
           "ours_ms": ms["ours"], "vendor_ms": ms["cupy"], "ratio": ms["cupy"] / ms["ours"],
           "err_ours": backward_error(cp, a, x, b),
           "err_vendor": backward_error(cp, a, fns["cupy"](), b),
           "path": info.path, "iterations": info.iterations, "vendor": "cupy.linalg.solve",
           "direct_ms": ms["direct"], "refined_ms": ms["refined"],
           "refined_path": info_refined.path, "refined_iterations": info_refined.iterations}
    return row


def execute(args):
    """Run `gpulinalg-bench solve` with the parsed options; the exit status (1 when our
    backward error exceeds twice the vendor's plus a margin)."""
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}", flush=True)
    kappas = [float(k) for k in args.kappa.split(",") if k.strip()]
    configs = ([("lu_solve", (args.n, nrhs, dtype)) for dtype in args.dtype
                for nrhs in args.nrhs]
               + [("solve", (n,)) for n in args.solve_sizes]
               + [("solve", (args.kappa_n, kappa)) for kappa in kappas])
    rows = []
    with common.Progress(len(configs), "solve", args.quiet) as bar:
        for case, params in configs:
            if case == "lu_solve":
                rows.append(measure_lu_solve(*params, args.repeat))
            else:
                rows.append(measure_solve(params[0], args.repeat, *params[1:]))
            bar.done(progress(rows[-1]))
    summary(rows)
    common.write_results(args, "solve", rows, plot)
    bad = [r for r in rows if r["err_ours"] > 2 * r["err_vendor"] + 1e-15]
    for r in bad:
        print(f"ERROR ABOVE 2x THE VENDOR'S: {progress(r)}")
    return 1 if bad else 0


def progress(r):
    """One line on a finished row."""
    what = (f"{r['case']} {r['dtype']} n={r['n']} nrhs={r['nrhs']}"
            + (f" kappa={r['kappa']:.0e}" if r.get("kappa") else ""))
    extra = f", {r['path']} ({r['iterations']} steps)" if "path" in r else ""
    return (f"{what}: ours {r['ours_ms']:.3f} ms, {r['vendor']} {r['vendor_ms']:.3f} ms, "
            f"x{r['ratio']:.2f}; error {r['err_ours']:.1e} vs {r['err_vendor']:.1e}{extra}")


def summary(rows):
    """One table: the case, ours and the vendor's wall time, their ratio, both errors and
    the path."""
    cols = [("case", "case", "{}"), ("dtype", "dtype", "{}"), ("n", "n", "{}"),
            ("nrhs", "nrhs", "{}"), ("kappa", "kappa", "{:.0e}"),
            ("ours_ms", "ours ms", "{:.3f}"),
            ("vendor_ms", "cuSOLVER ms", "{:.3f}"), ("ratio", "ratio", "{:.2f}"),
            ("err_ours", "err ours", "{:.1e}"), ("err_vendor", "err cuSOLVER", "{:.1e}"),
            ("path", "path", "{}"), ("iterations", "steps", "{}"),
            ("direct_ms", "fp64 path ms", "{:.3f}"), ("refined_ms", "refined ms", "{:.3f}"),
            ("refined_path", "refined path", "{}")]
    print()
    common.print_table(cols, rows,
                       title="solve: ours vs cuSOLVER (lu_solve: cupyx.scipy.linalg.lu_solve; "
                             "solve: cupy.linalg.solve), wall time with a sync; ratio: "
                             "cuSOLVER's time / ours; error: ||b - Ax|| / (||A|| ||x|| + ||b||)")


def _label(r):
    return (f"{r['case']} {r['dtype'][5:]} n={r['n']} "
            + (f"k={r['kappa']:.0e}" if r.get("kappa") else f"rhs={r['nrhs']}"))


def plot(rows, path):
    """Wall milliseconds of ours and cuSOLVER's for each row, on a log scale."""
    common.plot_rows(path, rows, [_label(r) for r in rows],
                     [("gpulinalg", "ours_ms", "o-"), ("cuSOLVER", "vendor_ms", "s--")],
                     "ms per call (wall, with a sync)", "lu_solve and solve", logy=True)
