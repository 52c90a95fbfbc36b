"""gpulinalg-bench sgemm: our SGEMM against cuBLAS (cupy) and the Volkov 2008 baseline.

Square products C = A B and LU-like rank-k updates C = C - A B, all in one run, on random
normal inputs.  "ours" is the public default (precision="auto": 3xTF32 on Hopper for large
products, else the SIMT FP32 kernel), timed in alternating bursts with cuBLAS SGEMM and our
SIMT FP32 pick ("SIMT").  TF/s = 2 m n k / time; error = ||C - C64||_F / ||C64||_F against
float64.
--tc adds the tensor-core modes (3xTF32, plain TF32) through the public path (`precision=`:
the wgmma kernels of gpulinalg/_gemm_wgmma.py on sm_90, their split pre-pass included), the
mma.sync kernels (gpulinalg/_gemm_tc.py, "mma_"), and cuBLAS in TF32 (through torch with
allow_tf32, restored afterwards; skipped without torch).
"""

import argparse
import os

import numpy as np

from .. import common

SQUARE = (1024, 2048, 4096, 8192, 16384)
RANK_K = (64, 128, 256, 512)


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


def measure(m, n, k, update, variants, repeat, seed=0, check=True, a_colmajor=False, tc=False):
    import cupy as cp
    from ..gemm import simt as _blas
    # a_colmajor: A given as the transpose of a row-major k x m buffer (the LU's panel layout)
    a = common.random_matrix((k, m), seed).T if a_colmajor else common.random_matrix((m, k), seed)
    b = common.random_matrix((k, n), seed + 1)
    c0 = common.random_matrix((m, n), seed + 2) if update else None
    alpha, beta = (-1.0, 1.0) if update else (1.0, 0.0)
    c = c0.copy() if update else cp.empty((m, n), dtype=cp.float32)
    flops = 2.0 * m * n * k
    row = {"m": m, "n": n, "k": k, "op": ("C-=AB" if update else "C=AB") + ("'" if a_colmajor else "")}

    def rate(fn):
        ms = common.time_gpu(fn, repeat=repeat)
        return ms, flops / ms / 1e9

    # The headline: what gpulinalg.sgemm runs by default (precision="auto"), cuBLAS SGEMM and
    # our SIMT FP32 pick taking turns in bursts (the board's power limit and the clocks it
    # sets hit all three alike).
    prec = _blas.resolve_precision("auto", m, n, k)
    if prec == "fp32":
        row["variant"] = "fp32 " + _blas.chosen_variant(a, b, beta, c, stage_a=True)
    else:
        from ..gemm import wgmma as _gemm_wgmma
        row["variant"] = f"{prec} {_gemm_wgmma.pick_variant(m, n, k, prec)}"
    duel = common.time_burst(
        {"cublas": lambda: cublas_gemm(cp, a, b, c, alpha, beta),
         "ours": lambda: _blas.product_into(alpha, a, b, beta, c, "auto", stage_a=True),
         "simt": lambda: _blas.gemm_into(alpha, a, b, beta, c, stage_a=True)},
        repeat=repeat, calls=3)
    for key, name in (("cublas", "cublas_"), ("ours", ""), ("simt", "simt_")):
        row[f"{name}ms"], row[f"{name}tflops"] = duel[key], flops / duel[key] / 1e9
    row["ratio"] = duel["cublas"] / duel["ours"]
    row["simt_ratio"] = duel["cublas"] / duel["simt"]
    row["simt_variant"] = _blas.chosen_variant(a, b, beta, c, stage_a=True)
    for v in variants:
        try:
            ms, tf = rate(lambda: _blas.gemm_into(alpha, a, b, beta, c, variant=v))
        except ValueError:  # the baseline's divisibility rules
            ms, tf = None, None
        row[f"{v}_ms"], row[f"{v}_tflops"] = ms, tf
    tc_fns = {}
    if tc:
        from ..gemm import mma as _gemm_tc
        for mode in _gemm_tc.MODES:
            # The public path (wgmma on sm_90, pre-pass included) and the mma.sync kernel.
            tc_fns[mode] = (lambda o, mode=mode:
                            _blas.product_into(alpha, a, b, beta, o, precision=mode))
            tc_fns[f"mma_{mode}"] = (lambda o, mode=mode:
                                     _gemm_tc.gemm_tc_into(alpha, a, b, beta, o, mode=mode))
        torch_tf32 = _torch_tf32_gemm()
        if torch_tf32 is not None:
            import torch  # torch's current stream is the default one; sync CuPy's to it
            cp.cuda.get_current_stream().synchronize()
            tc_fns["cublas_tf32"] = lambda o: torch_tf32(a, b, o, alpha, beta)
        for key, fn in tc_fns.items():
            row[f"{key}_ms"], row[f"{key}_tflops"] = rate(lambda: fn(c))
            if key == "cublas_tf32":
                torch.cuda.synchronize()
    if "3xtf32" in tc_fns:
        # Head to head: cuBLAS SGEMM and our public 3xTF32 call take turns in bursts, so the
        # board's power limit (700 W on the H100; the tensor-core rows above run right after
        # seconds of SIMT kernels) and the clocks it sets hit both alike.  The ratio of these
        # medians is the "x cuBLAS SGEMM in the same run".
        duel = common.time_burst({"cublas": lambda: cublas_gemm(cp, a, b, c, alpha, beta),
                                  "3xtf32": lambda: tc_fns["3xtf32"](c)},
                                 repeat=repeat, calls=3)
        row["duel_cublas_tflops"] = flops / duel["cublas"] / 1e9
        row["duel_3xtf32_tflops"] = flops / duel["3xtf32"] / 1e9
        row["3xtf32_ratio"] = duel["cublas"] / duel["3xtf32"]
    if check:  # accuracy on fresh outputs (the timing loops above changed c)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        if update:
            ref = c0.astype(cp.float64) - ref
        nref = float(cp.linalg.norm(ref))
        checks = [("err", lambda o: _blas.product_into(alpha, a, b, beta, o, "auto",
                                                        stage_a=True)),
                  ("simt_err", lambda o: _blas.gemm_into(alpha, a, b, beta, o, stage_a=True)),
                  ("cublas_err", lambda o: cublas_gemm(cp, a, b, o, alpha, beta))]
        checks += [(f"{key}_err", fn) for key, fn in tc_fns.items()]
        for key, fn in checks:
            out = c0.copy() if update else cp.full((m, n), cp.nan, dtype=cp.float32)
            fn(out)
            if key == "cublas_tf32_err":
                import torch
                torch.cuda.synchronize()
            row[key] = float(cp.linalg.norm(out.astype(cp.float64) - ref)) / nref
            del out
        del ref
    return row


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, op in zip(axes, ("C=AB", "C-=AB")):  # A column-major rows (op "C-=AB'") not plotted
        sel = [r for r in rows if r["op"] == op]
        x = [r["n"] if op == "C=AB" else r["k"] for r in sel]
        ax.plot(x, [r["tflops"] for r in sel], "o-", label="gpulinalg (default)")
        if any(r.get("simt_tflops") for r in sel):
            ax.plot(x, [r.get("simt_tflops") or np.nan for r in sel], "d-",
                    label="gpulinalg SIMT FP32")
        ax.plot(x, [r["cublas_tflops"] for r in sel], "s--", label="cuBLAS")
        if any(r.get("volkov2008_tflops") for r in sel):
            ax.plot(x, [r.get("volkov2008_tflops") or np.nan for r in sel], "^:",
                    label="Volkov 2008")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n (square)" if op == "C=AB" else "k (16384 x k x 16384 update)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(op)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpulinalg-bench sgemm", description=__doc__)
    p.add_argument("--sizes", default=",".join(map(str, SQUARE)), help="square n list")
    p.add_argument("--rank-k", default=",".join(map(str, RANK_K)),
                   help="k list for 16384 x k x 16384 updates ('' for none)")
    p.add_argument("--update-n", type=int, default=16384)
    p.add_argument("--a-colmajor", action="store_true",
                   help="also time the rank-k updates with A column-major (rows marked C-=AB')")
    p.add_argument("--variants", default="volkov2008",
                   help="extra kernel variants to time ('all' for every tile shape)")
    p.add_argument("--tc", action="store_true",
                   help="also time the tensor-core modes (3xtf32, tf32) and cuBLAS TF32 (torch)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--no-check", action="store_true", help="skip the float64 error check")
    p.add_argument("--json", help="write rows + environment here")
    p.add_argument("--plot", help="save a PNG plot here")
    args = p.parse_args(argv)
    from ..gemm import simt as _blas
    if os.environ.get("CUPY_TF32"):
        print("warning: CUPY_TF32 is set: cuBLAS runs in TF32, not FP32")
    variants = (list(_blas.VARIANTS) + [_blas.BASELINE] if args.variants == "all"
                else [v for v in args.variants.split(",") if v])
    env = common.environment()
    print(f"# {env['device']} (sm_{env['compute_capability']}, {env['sm_count']} SMs), "
          f"CUDA {env['cuda_runtime']}, CuPy {env['cupy']}, {env['date']}")
    rows = []
    for n in common.parse_sizes(args.sizes):
        rows.append(measure(n, n, n, False, variants, args.repeat, check=not args.no_check,
                            tc=args.tc))
        progress(rows[-1])
    for k in common.parse_sizes(args.rank_k):
        nn = args.update_n
        for colmajor in ((False, True) if args.a_colmajor else (False,)):
            rows.append(measure(nn, nn, k, True, variants, args.repeat,
                                check=not args.no_check, a_colmajor=colmajor, tc=args.tc))
            progress(rows[-1])
    print()
    print_rows(rows, variants, args.tc)
    common.write_json(args.json, "sgemm", rows, {"variants": variants, "tc": args.tc})
    if args.plot:
        plot(rows, args.plot)
    return 0


def progress(r):
    others = " ".join(f"{k[:-7]}={v:.1f}" for k, v in r.items()
                      if k.endswith("_tflops") and k not in ("cublas_tflops",) and v)
    print(f"{r['op']:6} {r['m']}x{r['n']}x{r['k']}: ours {r['tflops']:.1f} TF/s "
          f"({r['variant']}), cuBLAS {r['cublas_tflops']:.1f} | {others}", flush=True)


def print_rows(rows, variants, tc=False):
    cols = [("op", "op", "{}"), ("m", "m", "{}"), ("n", "n", "{}"), ("k", "k", "{}"),
            ("tflops", "ours TF/s", "{:.1f}"), ("cublas_tflops", "cuBLAS TF/s", "{:.1f}"),
            ("ratio", "ratio", "{:.3f}"), ("simt_tflops", "SIMT TF/s", "{:.1f}"),
            ("simt_ratio", "SIMT ratio", "{:.3f}")]
    cols += [(f"{v}_tflops", f"{v} TF/s", "{:.1f}") for v in variants]
    if tc:
        cols += [("3xtf32_tflops", "3xtf32 TF/s", "{:.1f}"),
                 ("duel_3xtf32_tflops", "3xtf32 TF/s (duel)", "{:.1f}"),
                 ("duel_cublas_tflops", "cuBLAS TF/s (duel)", "{:.1f}"),
                 ("3xtf32_ratio", "3xtf32/cuBLAS (duel)", "{:.2f}"), ("tf32_tflops", "tf32 TF/s", "{:.1f}"),
                 ("mma_3xtf32_tflops", "mma.sync 3xtf32", "{:.1f}"),
                 ("cublas_tf32_tflops", "cublas tf32", "{:.1f}")]
    cols += [("err", "rel.err ours", "{:.1e}"), ("simt_err", "SIMT", "{:.1e}"),
             ("cublas_err", "cuBLAS", "{:.1e}")]
    if tc:
        cols += [("3xtf32_err", "3xtf32 err", "{:.1e}"), ("mma_3xtf32_err", "mma 3xtf32 err", "{:.1e}"),
                 ("tf32_err", "tf32 err", "{:.1e}"),
                 ("cublas_tf32_err", "cublas tf32 err", "{:.1e}")]
    cols += [("variant", "tile", "{}")]
    common.print_table(cols, rows)
