"""gpulinalg-bench sgemm: our SGEMM against cuBLAS and the baselines it grew from.

Square products C = A B and LU-like rank-k updates C = C - A B, all in one run, on random
normal inputs.  "ours" is the public default (precision="auto": 3xTF32 on Hopper for large
products, else the SIMT FP32 kernel), timed in alternating bursts with cuBLAS SGEMM and our
SIMT FP32 pick ("SIMT").  TF/s = 2 m n k / time; error = ||C - C64||_F / ||C64||_F against
float64.  The summary gives per product our TF/s, cuBLAS's, their ratio (cuBLAS's time over
ours: above 1, ours is faster) and our error; --wide adds every column.

The progression, baseline -> tuned -> cuBLAS: run from a repository checkout, the benchmark
also times the baselines kept in benchmarks/baselines/ (the library never launches them):
Volkov & Demmel's 2008 SGEMM beside the SIMT kernel and, with --tc on Hopper, the first wgmma
kernel (cp.async ring, no producer warpgroup) beside our 3xTF32 kernel.  Without that folder
(an installed wheel) those columns are left out, with one note.
--tc adds the tensor-core modes (3xTF32, plain TF32) through the public path (`precision=`:
the wgmma kernels of gpulinalg/gemm/wgmma.py on sm_90, their split pre-pass included), the
mma.sync kernels (gpulinalg/gemm/mma.py, "mma_"), and cuBLAS in TF32 (through torch with
allow_tf32, restored afterwards; skipped without torch).
With --tuning FIELD=v1,v2 (gpulinalg/tuning.py, e.g. simt_pipe_max_k_mmajor=0,128) every
shape also runs under each value, the table in force with that field replaced.
"""

import contextlib
import functools
import itertools
import os
import pathlib

import numpy as np

from .. import tuning
from . import common

SQUARE = (1024, 2048, 4096, 8192, 16384)
RANK_K = (64, 128, 256, 512)
VOLKOV = "volkov2008"
WGMMA_FIRST = "wgmma_cpasync"


def baselines_dir():
    """<repository>/benchmarks/baselines when gpulinalg runs from a checkout, else None."""
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "baselines"
    return path if path.is_dir() else None


@functools.lru_cache(maxsize=None)
def _baseline_kernel(device_id, file, name, after_family=None, specific=False, smem=0):
    """Kernel `name` of benchmarks/baselines/<file>, compiled for the current device, after
    the text of kernels/<after_family>.cu when given (whose helpers it uses)."""
    import cupy as cp

    from ..core import kernels
    code = (baselines_dir() / file).read_text()
    if after_family:
        code = kernels.source(after_family) + "\n" + code
    module = cp.RawModule(code=code, options=("--std=c++17", kernels.arch_option(
        specific=specific)), name_expressions=(name,) if "<" in name else None)
    kernel = module.get_function(name)
    if smem > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = smem
    return kernel


def volkov2008(alpha, a, b, beta, c):
    """c = alpha a b + beta c by Volkov & Demmel's 2008 kernel, for row-major operands with
    m % 16 == 0, n % 64 == 0, k % 16 == 0 (ValueError otherwise); returns c."""
    import cupy as cp

    from ..gemm.common import row_major_problem
    args = row_major_problem(alpha, a, b, beta, c)
    m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc = args
    if not (a_kmajor and b_nmajor) or m % 16 or n % 64 or k % 16:
        raise ValueError("the volkov2008 baseline needs row-major operands, m % 16 == 0, "
                         "n % 64 == 0, k % 16 == 0")
    kernel = _baseline_kernel(cp.cuda.runtime.getDevice(), "sgemm_volkov2008.cu",
                              "sgemm_volkov2008")
    # Column-major in its own terms: C^T (n x m) = B^T A^T, where the row-major B is the
    # column-major B^T with the same leading dimension, and likewise for A and C.
    kernel((n // 64, m // 16), (64,),
           (np.int32(n), np.int32(m), np.int32(k), np.float32(alpha), b, np.int64(ldb),
            a, np.int64(lda), np.float32(beta), c, np.int64(ldc)))
    return c


TILE_FIRST = "128x256t"   # the library's tile whose shape, workspace and ring it shares


@functools.lru_cache(maxsize=None)
def _wgmma_first_launcher(device_id):
    """Launcher of the first wgmma kernel on the 3xTF32 tile TILE_FIRST."""
    from ..core.kernels import Launcher
    from ..gemm import wgmma
    t = wgmma.VARIANTS[TILE_FIRST]
    smem = wgmma.dynamic_smem(t, "3xtf32")
    kernel = _baseline_kernel(device_id, "sgemm_wgmma_cpasync.cu",
                              f"sgemm_wgmma<{t.BM},{t.BN},{t.WN},{t.STAGES3},2,true>",
                              "sgemm_wgmma", True, smem)
    return Launcher(kernel, wgmma.MAIN_ARGS, smem)


def wgmma_cpasync(alpha, a, b, beta, c):
    """c = alpha a b + beta c in 3xTF32 by the first wgmma kernel (sm_90 only), on the
    workspace of the library's pre-pass for the tile TILE_FIRST; returns c."""
    import cupy as cp

    from ..gemm import wgmma
    from ..gemm.common import row_major_problem
    args = row_major_problem(alpha, a, b, beta, c)
    if args is None:
        return c
    m, n, k, alpha, a, lda, a_kmajor, b, ldb, b_nmajor, beta, c, ldc = args
    t = wgmma.VARIANTS[TILE_FIRST]
    launch = _wgmma_first_launcher(cp.cuda.runtime.getDevice())
    work, wa, wb = wgmma.split_operands(TILE_FIRST, "3xtf32", m, n, k, a, lda, a_kmajor, b,
                                        ldb, b_nmajor)
    tiles = -(-m // t.BM) * -(-n // t.BN)
    launch((tiles, 1, 1), ((t.BM // 64) * 128, 1, 1), m, n, -(-k // t.BK), alpha, wa.data.ptr,
           wb.data.ptr, beta, c.data.ptr, ldc, a.data.ptr, lda, b.data.ptr, ldb, k,
           int(a_kmajor) | 2 * int(b_nmajor))
    return c


def cublas_gemm(cp, a, b, c, alpha, beta):
    """cuBLAS SGEMM through CuPy (TF32 off unless CUPY_TF32 is set)."""
    if beta == 0.0:
        return cp.matmul(a, b, out=c)
    import cupy.cublas  # one fused cuBLAS call with beta, as the LU update needs
    return cupy.cublas.gemm("N", "N", a, b, out=c, alpha=alpha, beta=beta)


def _torch_tf32_gemm():
    """fn(a, b, c, alpha, beta) running cuBLAS with TF32 through torch, or None without torch.

    allow_tf32 is process-global: it is set around each call and restored right after.
    """
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None

    def run(a, b, c, alpha, beta):
        ta, tb, tc = (torch.from_dlpack(x) for x in (a, b, c))
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            if beta == 0.0:
                torch.matmul(ta, tb, out=tc)
            else:
                tc.addmm_(ta, tb, beta=beta, alpha=alpha)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return run


def measure(m, n, k, update, variants, repeat, seed=0, check=True, a_colmajor=False, tc=False,
            baselines=()):
    """One row: the default, cuBLAS and SIMT in bursts, then the named SIMT `variants`, the
    `baselines` (VOLKOV, WGMMA_FIRST), the tensor-core modes with `tc`, and the errors."""
    import cupy as cp
    from ..gemm import dispatch
    # a_colmajor: A given as the transpose of a row-major k x m buffer (the LU's panel layout)
    a = common.random_matrix((k, m), seed).T if a_colmajor else common.random_matrix((m, k), seed)
    b = common.random_matrix((k, n), seed + 1)
    c0 = common.random_matrix((m, n), seed + 2) if update else None
    alpha, beta = (-1.0, 1.0) if update else (1.0, 0.0)
    c = c0.copy() if update else cp.empty((m, n), dtype=cp.float32)
    flops = 2.0 * m * n * k
    row = {"m": m, "n": n, "k": k,
           "op": ("C-=AB" if update else "C=AB") + ("'" if a_colmajor else "")}
    prec = dispatch.resolve_precision("auto", m, n, k)
    if prec == "fp32":
        row["variant"] = "fp32 " + dispatch.chosen_variant(a, b, beta, c, stage_a=True)
    else:
        from ..gemm import wgmma
        row["variant"] = f"{prec} {wgmma.pick_variant(m, n, k, prec)}"
    # The headline: what gpulinalg.sgemm runs by default (precision="auto"), cuBLAS SGEMM and
    # our SIMT FP32 pick taking turns in bursts (the board's power limit and the clocks it
    # sets hit all three alike).
    duel = common.time_burst(
        {"cublas": lambda: cublas_gemm(cp, a, b, c, alpha, beta),
         "ours": lambda: dispatch.product_into(alpha, a, b, beta, c, "auto", stage_a=True),
         "simt": lambda: dispatch.gemm_into(alpha, a, b, beta, c, stage_a=True)},
        repeat=repeat, calls=3)
    for key, name in (("cublas", "cublas_"), ("ours", ""), ("simt", "simt_")):
        row[f"{name}ms"], row[f"{name}tflops"] = duel[key], flops / duel[key] / 1e9
    row["ratio"] = duel["cublas"] / duel["ours"]
    row["simt_ratio"] = duel["cublas"] / duel["simt"]
    row["simt_variant"] = dispatch.chosen_variant(a, b, beta, c, stage_a=True)
    fns = {v: functools.partial(dispatch.gemm_into, alpha, a, b, beta, variant=v)
           for v in variants}
    fns.update({name: functools.partial(fn, alpha, a, b, beta) for name, fn in
                ((VOLKOV, volkov2008), (WGMMA_FIRST, wgmma_cpasync)) if name in baselines})
    for name, fn in fns.items():
        try:
            ms = common.time_gpu(lambda: fn(c), repeat=repeat)
            row[f"{name}_ms"], row[f"{name}_tflops"] = ms, flops / ms / 1e9
        except ValueError:  # the baseline's divisibility rules
            row[f"{name}_ms"], row[f"{name}_tflops"] = None, None
    tc_fns = _tensor_core_rows(row, cp, a, b, c, alpha, beta, flops, repeat) if tc else {}
    if check:
        _errors(row, cp, a, b, c0, alpha, beta, update, tc_fns)
    return row


def _tensor_core_rows(row, cp, a, b, c, alpha, beta, flops, repeat):
    """The tensor-core columns of `row`: each mode through the public path and mma.sync,
    cuBLAS TF32, and our 3xTF32 against cuBLAS SGEMM in bursts.  Returns {key: fn(out)}."""
    from ..gemm import dispatch, mma
    tc_fns = {}
    for mode in mma.MODES:
        # The public path (wgmma on sm_90, pre-pass included) and the mma.sync kernel.
        tc_fns[mode] = functools.partial(dispatch.product_into, alpha, a, b, beta,
                                         precision=mode)
        tc_fns[f"mma_{mode}"] = (lambda o, mode=mode:
                                 mma.gemm_tc_into(alpha, a, b, beta, o, mode=mode))
    torch_tf32 = _torch_tf32_gemm()
    if torch_tf32 is not None:
        import torch  # torch's current stream is the default one; sync CuPy's to it
        cp.cuda.get_current_stream().synchronize()
        tc_fns["cublas_tf32"] = lambda o: torch_tf32(a, b, o, alpha, beta)
    for key, fn in tc_fns.items():
        ms = common.time_gpu(lambda: fn(c), repeat=repeat)
        row[f"{key}_ms"], row[f"{key}_tflops"] = ms, flops / ms / 1e9
        if key == "cublas_tf32":
            torch.cuda.synchronize()
    # Head to head: cuBLAS SGEMM and our public 3xTF32 call take turns in bursts, so the
    # board's power limit and the clocks it sets hit both alike.  The ratio of these medians
    # is "x cuBLAS SGEMM in the same run".
    duel = common.time_burst({"cublas": lambda: cublas_gemm(cp, a, b, c, alpha, beta),
                              "3xtf32": lambda: tc_fns["3xtf32"](c)},
                             repeat=repeat, calls=3)
    row["duel_cublas_tflops"] = flops / duel["cublas"] / 1e9
    row["duel_3xtf32_tflops"] = flops / duel["3xtf32"] / 1e9
    row["3xtf32_ratio"] = duel["cublas"] / duel["3xtf32"]
    return tc_fns


def _errors(row, cp, a, b, c0, alpha, beta, update, tc_fns):
    """Each path's relative error against float64, on fresh outputs (the timing loops
    changed c)."""
    from ..gemm import dispatch
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    if update:
        ref = c0.astype(cp.float64) - ref
    nref = float(cp.linalg.norm(ref))
    checks = [("err", lambda o: dispatch.product_into(alpha, a, b, beta, o, "auto",
                                                       stage_a=True)),
              ("simt_err", lambda o: dispatch.gemm_into(alpha, a, b, beta, o, stage_a=True)),
              ("cublas_err", lambda o: cublas_gemm(cp, a, b, o, alpha, beta))]
    checks += [(f"{key}_err", fn) for key, fn in tc_fns.items()]
    for key, fn in checks:
        out = c0.copy() if update else cp.full(ref.shape, cp.nan, dtype=cp.float32)
        fn(out)
        if key == "cublas_tf32_err":
            import torch
            torch.cuda.synchronize()
        row[key] = float(cp.linalg.norm(out.astype(cp.float64) - ref)) / nref
        del out


def plot(rows, path):
    """TF/s of C = A B against n and of the rank-k updates against k: ours (the default),
    the SIMT kernel, cuBLAS and the baselines timed."""
    fig, axes = common.figure(2)
    for ax, op in zip(axes, ("C=AB", "C-=AB")):  # A column-major rows (op "C-=AB'") not plotted
        sel = [r for r in rows if r["op"] == op]
        x = [r["n"] if op == "C=AB" else r["k"] for r in sel]
        ax.plot(x, [r["tflops"] for r in sel], "o-", label="gpulinalg (default)")
        if any(r.get("simt_tflops") for r in sel):
            ax.plot(x, [r.get("simt_tflops") or np.nan for r in sel], "d-",
                    label="gpulinalg SIMT FP32")
        ax.plot(x, [r["cublas_tflops"] for r in sel], "s--", label="cuBLAS")
        for key, style, label in ((WGMMA_FIRST, "v:", "first wgmma kernel"),
                                  (VOLKOV, "^:", "Volkov 2008")):
            if any(r.get(f"{key}_tflops") for r in sel):
                ax.plot(x, [r.get(f"{key}_tflops") or np.nan for r in sel], style, label=label)
        ax.set_xscale("log", base=2)
        n = sel[0]["n"] if sel else "n"
        ax.set_xlabel("n (square)" if op == "C=AB" else f"k ({n} x k x {n} update)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(op)
        ax.grid(alpha=0.3)
        ax.legend()
    common.save_figure(fig, path)


def _baselines(no_baselines, tc):
    """The baselines this run times: VOLKOV, and WGMMA_FIRST with --tc on a wgmma device;
    none with --no-baselines or without benchmarks/baselines (then with a note)."""
    if no_baselines:
        return ()
    if baselines_dir() is None:
        print("note: benchmarks/baselines not found (not a repository checkout): "
              "the baseline columns are left out")
        return ()
    from ..core import device
    return (VOLKOV,) + ((WGMMA_FIRST,) if tc and device.has_wgmma() else ())


def add_arguments(p):
    """The options of `gpulinalg-bench sgemm`; "ours" is gpulinalg.sgemm's default,
    precision="auto"."""
    from ..gemm import simt
    p.add_argument("--sizes", default=",".join(map(str, SQUARE)), type=common.size_list,
                   help="square sizes n of C = A B, comma-separated ('' for none)")
    p.add_argument("--rank-k", default=",".join(map(str, RANK_K)), type=common.size_list,
                   help="k list for the n x k x n updates C -= A B, n = --update-n "
                        "('' for none)")
    p.add_argument("--update-n", type=int, default=16384, help="m = n of the rank-k updates")
    p.add_argument("--a-colmajor", action="store_true",
                   help="also time the rank-k updates with A column-major (rows marked C-=AB')")
    p.add_argument("--variants", default="", type=common.name_list(simt.VARIANTS, "all"),
                   help="SIMT tile variants to time beside the pick ('all' for every one; "
                        "default: none)")
    p.add_argument("--no-baselines", action="store_true",
                   help="leave out the baselines of benchmarks/baselines")
    p.add_argument("--tc", action="store_true",
                   help="also time the tensor-core modes (3xtf32, tf32) and cuBLAS TF32 (torch)")
    p.add_argument("--repeat", type=int, default=10, help="timing rounds per shape")
    p.add_argument("--no-check", action="store_true", help="skip the float64 error check")
    common.add_tuning_argument(p)


def check(args):
    """What is wrong with the parsed options (a message), or None."""
    if not args.sizes and not args.rank_k:
        return "no shape to run: --sizes and --rank-k are both empty"
    return None


def execute(args):
    """Run `gpulinalg-bench sgemm` with the parsed options; the exit status."""
    if os.environ.get("CUPY_TF32"):
        print("warning: CUPY_TF32 is set: cuBLAS runs in TF32, not FP32")
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}", flush=True)
    baselines = _baselines(args.no_baselines, args.tc)
    kw = dict(check=not args.no_check, tc=args.tc, baselines=baselines)
    shapes = [(n, n, n, False, False) for n in args.sizes]
    shapes += [(args.update_n, args.update_n, k, True, colmajor) for k in args.rank_k
               for colmajor in ((False, True) if args.a_colmajor else (False,))]
    settings = common.tuning_settings(args.tuning) if args.tuning else [("defaults", None)]
    rows = []
    with common.Progress(len(shapes) * len(settings), "sgemm", args.quiet) as bar:
        for (m, n, k, update, colmajor), (label, table) in itertools.product(shapes, settings):
            with tuning.override(table) if table else contextlib.nullcontext():
                rows.append(measure(m, n, k, update, args.variants, args.repeat,
                                    a_colmajor=colmajor, **kw))
            if table:
                rows[-1]["tuning"] = label
            bar.done(progress(rows[-1]))
    print()
    if args.wide:
        print_rows(rows, args.variants, baselines, args.tc)
    else:
        summary(rows)
    common.write_results(args, "sgemm", rows, plot,
                         {"variants": args.variants, "baselines": list(baselines),
                          "tc": args.tc, "tuning": args.tuning})
    return 0


def progress(r):
    """One line on a finished row."""
    others = " ".join(f"{k[:-7]}={v:.1f}" for k, v in r.items()
                      if k.endswith("_tflops") and k not in ("cublas_tflops",) and v)
    return (f"{r['op']:6} {r['m']}x{r['n']}x{r['k']}: ours {r['tflops']:.1f} TF/s "
            f"({r['variant']}), cuBLAS {r['cublas_tflops']:.1f}"
            + (f" | {others}" if others else ""))


def summary(rows):
    """The short table: each product's size, our TF/s (precision="auto"), cuBLAS SGEMM's,
    their ratio and our error."""
    cols = [("op", "op", "{}"), ("size", "m x n x k", "{}"), ("tflops", "ours TF/s", "{:.1f}"),
            ("cublas_tflops", "cuBLAS TF/s", "{:.1f}"), ("ratio", "ratio", "{:.2f}"),
            ("err", "error", "{:.1e}")]
    if common.varying(rows, "tuning"):
        cols.insert(2, ("tuning", "tuning", "{}"))
    common.print_table(cols, [dict(r, size=common.size_label(r["m"], r["n"], r["k"]))
                              for r in rows],
                       title='SGEMM, ours (precision="auto") vs cuBLAS SGEMM (FP32) in the same '
                             "run; ratio: cuBLAS's time / ours; error: ||C - C64|| / ||C64||")


def print_rows(rows, variants, baselines=(), tc=False):
    cols = [("op", "op", "{}"), ("m", "m", "{}"), ("n", "n", "{}"), ("k", "k", "{}")]
    if VOLKOV in baselines:
        cols += [(f"{VOLKOV}_tflops", "Volkov 2008 TF/s", "{:.1f}")]
    cols += [("simt_tflops", "SIMT TF/s", "{:.1f}"), ("simt_ratio", "SIMT ratio", "{:.3f}")]
    if WGMMA_FIRST in baselines:
        cols += [(f"{WGMMA_FIRST}_tflops", "first wgmma TF/s", "{:.1f}")]
    cols += [("tflops", "ours TF/s", "{:.1f}"), ("cublas_tflops", "cuBLAS TF/s", "{:.1f}"),
             ("ratio", "ratio", "{:.3f}")]
    cols += [(f"{v}_tflops", f"{v} TF/s", "{:.1f}") for v in variants]
    if tc:
        cols += [("3xtf32_tflops", "3xtf32 TF/s", "{:.1f}"),
                 ("duel_3xtf32_tflops", "3xtf32 TF/s (duel)", "{:.1f}"),
                 ("duel_cublas_tflops", "cuBLAS TF/s (duel)", "{:.1f}"),
                 ("3xtf32_ratio", "3xtf32/cuBLAS (duel)", "{:.2f}"),
                 ("tf32_tflops", "tf32 TF/s", "{:.1f}"),
                 ("mma_3xtf32_tflops", "mma.sync 3xtf32", "{:.1f}"),
                 ("cublas_tf32_tflops", "cublas tf32", "{:.1f}")]
    cols += [("err", "rel.err ours", "{:.1e}"), ("simt_err", "SIMT", "{:.1e}"),
             ("cublas_err", "cuBLAS", "{:.1e}")]
    if tc:
        cols += [("3xtf32_err", "3xtf32 err", "{:.1e}"),
                 ("mma_3xtf32_err", "mma 3xtf32 err", "{:.1e}"),
                 ("tf32_err", "tf32 err", "{:.1e}"),
                 ("cublas_tf32_err", "cublas tf32 err", "{:.1e}")]
    cols += [("variant", "tile", "{}")]
    if any("tuning" in r for r in rows):
        cols += [("tuning", "tuning", "{}")]
    common.print_table(cols, rows)
