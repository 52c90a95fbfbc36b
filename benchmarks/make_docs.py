"""Generate docs/performance.md (and README's summary) from benchmark JSON -- never by hand.

    python3 benchmarks/make_docs.py [RESULTS_DIR]      # default docs/data

RESULTS_DIR holds the files `benchmarks/gpu_check.sh` writes to $OUT: sgemm.json, dgemm.json,
transpose.json, laswp.json, lu.json (with lu_timeline.json), lu64.json, lu_host.json, lu_multi.json,
lu_large.json (any subset; the last two come from `STAGES="lu_multi lu_large"` on a machine of
several GPUs), and the files of earlier runs listed in EXTRA.  performance.md holds the tables
and how they were measured, nothing else: what was tried and when goes to docs/journal/.
Plots go to docs/img/ when matplotlib is installed (`pip install .[plot]`); without it the
images already there are linked.
"""

import json
import pathlib
import re
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the plotting helpers and the tuning table live in the package
GPU_CHECK = "bash benchmarks/gpu_check.sh"
MAX_LINES = 400     # docs/performance.md stays a page of tables, not a journal

# Files of earlier runs kept in docs/data beside the current ones: what each holds.
EXTRA = {
    "lu_multi_h100x4_rerun": "LU at 16384 and 32768 on 1, 2 and 4 H100s, a rerun at defaults",
    "lu_multi_h100x2": "LU on 1 and 2 GPUs of an H100 pair (FP32 updates)",
    "lu_multi_h200x2": "LU on 1 and 2 H200s, an earlier design",
    "lu_multi_h200x2_driver": "LU at defaults on 1 and 2 H200s, the driver before graph replay",
    "lu_multi_3xtf32_h200x2": "LU on 1 and 2 H200s, FP32 and 3xTF32 updates",
    "lu_multi_x2_rerun": "LU at 32768 on 1 and 2 H200s, a rerun",
    "lu_small_rerun": "LU at 2048 and 4096, a rerun of an outlier",
    "sgemm_sweep_h100": "the first SIMT SGEMM tile sweep",
    "transpose_sweep": "transpose at every multiple of 512 and n + 1 (`--sweep`)",
}


def fmt(v, spec):
    if v is None or v == "":
        return "–"
    if isinstance(v, float) and v != v:
        return "–"
    return format(v, spec) if spec else str(v)


def table(rows, cols):
    """Markdown table of rows (dicts) with cols = [(key, header, format spec)]."""
    out = ["| " + " | ".join(h for _, h, _ in cols) + " |",
           "|" + "|".join("---:" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(k), s) for k, _, s in cols) + " |")
    return "\n".join(out)


def env_line(doc):
    e = doc["environment"]
    return (f"{e['device']} (sm_{e['compute_capability']}, {e['sm_count']} SMs), CUDA runtime "
            f"{e['cuda_runtime']} / driver {e['cuda_driver']}, CuPy {e['cupy']}, NumPy "
            f"{e['numpy']}, SciPy {e['scipy']}, CUPY_TF32={e['CUPY_TF32']}, {e['date']}")


def reproduce(stage, command, extra=""):
    """The line that says how a table is remade: the gpu_check.sh stage and what it runs."""
    env = f"{extra} " if extra else ""
    return f"Reproduce: `{env}STAGES={stage} {GPU_CHECK}` (runs `{command}`).\n"


def sizes_arg(rows):
    """The --sizes argument that gives these rows' shapes, in their order."""
    seen = dict.fromkeys(str(r["m"]) if r["m"] == r["n"] else f"{r['m']}x{r['n']}" for r in rows)
    return ",".join(seen)


def sgemm_section(doc, img):
    from math import isqrt

    from gpulinalg.tuning import SM90
    rows = doc["rows"]
    variants = doc.get("variants", [])
    main = table(rows, [("op", "op", ""), ("m", "m", ""), ("n", "n", ""), ("k", "k", ""),
                        ("tflops", "ours TF/s", ".1f"), ("variant", "precision, tile", ""),
                        ("cublas_tflops", "cuBLAS TF/s", ".1f"), ("ratio", "ours/cuBLAS", ".3f"),
                        ("simt_tflops", "SIMT FP32 TF/s", ".1f"),
                        ("simt_ratio", "SIMT/cuBLAS", ".3f"),
                        ("volkov2008_tflops", "Volkov 2008 TF/s", ".1f"),
                        ("err", "rel. error ours", ".1e"), ("simt_err", "SIMT", ".1e"),
                        ("cublas_err", "cuBLAS", ".1e")])
    flags = " ".join(f for f, on in (("--tc", doc.get("tc")), ("--a-colmajor", any(
        r["op"] == "C-=AB'" for r in rows))) if on)
    cmd = f"gpulinalg-bench sgemm {flags} --variants {','.join(variants)}".replace("  ", " ")
    text = [f"## SGEMM\n\n{env_line(doc)}\n",
            "`C=AB`: square products; `C-=AB`: the LU's rank-k update 16384 × k · k × 16384 "
            "(α = −1, β = 1), one fused call on both sides (`cupy.cublas.gemm`); `C-=AB'`: the "
            "same with A column-major (the layout of the LU's transposed panel).  \"ours\" is "
            "what `gpulinalg.sgemm` runs by default (`precision=\"auto\"`: 3xTF32 through "
            f"`wgmma` on Hopper for k ≥ {SM90.gemm_tc_min_k} and m·n ≥ "
            f"{isqrt(SM90.gemm_tc_min_mn)}² or m·n·k ≥ {SM90.gemm_tc_min_mnk / 10**9:g}·10⁹ "
            "(the tuning fields `gemm_tc_min_*`, docs/tuning.md), its split pre-pass "
            "included; else the SIMT FP32 kernel); \"SIMT FP32\" is the Volkov-style SIMT kernel "
            "alone (`precision=\"fp32\"`).  Ours, SIMT and cuBLAS take turns in bursts.  TF/s "
            "= 2mnk/time; error ‖C − C₆₄‖_F/‖C₆₄‖_F against float64.  "
            + reproduce("sgemm", cmd), main]
    others = [v for v in variants if v != "volkov2008"]
    if others:
        text += ["\nEvery kernel variant, same run (TF/s):\n",
                 table(rows, [("op", "op", ""), ("n", "n", ""), ("k", "k", ""),
                              ("cublas_tflops", "cuBLAS", ".1f")] +
                       [(f"{v}_tflops", v, ".1f") for v in others])]
    if any(r.get("3xtf32_tflops") for r in rows):
        text += ["\nTensor cores (`precision=`), same run: 3xTF32 splits each operand into a "
                 "TF32 head and tail and sums three products in FP32 (on the H100 through "
                 "`wgmma`, the split pre-pass included in the time); plain TF32 is one "
                 "product; \"mma.sync\" is the Ampere-style kernel; cuBLAS TF32 is "
                 "`torch.matmul` with `allow_tf32`.  The duel columns time cuBLAS SGEMM and "
                 "3xTF32 in alternating bursts (the H100 runs at its 700 W limit here, and its "
                 "clocks depend on what ran just before); the ratio is theirs.\n",
                 table(rows, [("op", "op", ""), ("n", "n", ""), ("k", "k", ""),
                              ("cublas_tflops", "cuBLAS SGEMM TF/s", ".1f"),
                              ("3xtf32_tflops", "3xTF32 TF/s", ".1f"),
                              ("duel_3xtf32_tflops", "3xTF32 TF/s, duel", ".1f"),
                              ("duel_cublas_tflops", "cuBLAS TF/s, duel", ".1f"),
                              ("3xtf32_ratio", "3xTF32 / cuBLAS (duel)", ".2f"),
                              ("mma_3xtf32_tflops", "mma.sync 3xTF32 TF/s", ".1f"),
                              ("simt_err", "err SIMT", ".1e"), ("3xtf32_err", "err 3xTF32", ".1e"),
                              ("tf32_tflops", "TF32 TF/s", ".1f"), ("tf32_err", "err TF32", ".1e"),
                              ("cublas_tf32_tflops", "cuBLAS TF32 TF/s", ".1f"),
                              ("cublas_tf32_err", "err cuBLAS TF32", ".1e")])]
    if img:
        text.append(f"\n![SGEMM]({img})")
    return "\n".join(text)


def transpose_section(doc, img):
    rows = doc["rows"]
    if "burst_gbs" in rows[0]:
        cols = [("m", "m", ""), ("n", "n", ""), ("variant", "tile", ""),
                ("burst_gbs", "ours GB/s", ".0f"), ("copy_burst_gbs", "copy GB/s", ".0f"),
                ("burst_pct_copy", "% of copy", ".1f"),
                ("api_burst_pct_copy", "% of copy, public API", ".1f"),
                ("burst_speedup", "vs cupy", ".2f")]
        if "queued_speedup" in rows[0]:
            cols += [("queued_pct_copy", "% of copy, device time", ".1f"),
                     ("queued_speedup", "vs cupy, device time", ".2f")]
        cols += [("pct_copy", "% of copy, one call", ".1f"),
                 ("graph_pct_copy", "% of copy, graph", ".1f")]
        how = ("Main columns: bursts of back-to-back calls between CUDA events, ours, the "
               "device-to-device copy (`cudaMemcpyAsync`) and `cupy.ascontiguousarray(a.T)` "
               "taking turns round by round in a shuffled order; \"public API\": the same "
               "burst through `gpulinalg.transpose(a, out=out)`, argument checks included.  "
               "\"Device time\": the same bursts enqueued behind a kernel that holds the stream "
               "until every launch is queued, so the host's time per call drops out (below "
               "~2048² each call's host path outlasts its kernel, ours and CuPy's alike).  Also "
               "shown: one isolated call (launch latency included) and CUDA-graph replay "
               "(kernel-only), each against the copy timed the same way.")
    else:
        cols = [("m", "m", ""), ("n", "n", ""), ("gbs", "ours GB/s", ".0f"),
                ("variant", "tile", ""), ("copy_gbs", "copy GB/s", ".0f"),
                ("pct_copy", "% of copy", ".1f"), ("cupy_gbs", "cupy a.T copy GB/s", ".0f"),
                ("speedup", "vs cupy", ".2f")]
        how = "The baseline is `cupy.ascontiguousarray(a.T)`."
    args = f"--sizes {sizes_arg(rows)}"
    return "\n".join([f"## Transpose\n\n{env_line(doc)}\n",
                      "Bytes read + written over time; the device-to-device copy of the same "
                      f"bytes is measured in the same run.  {how}  "
                      + reproduce("transpose", f"gpulinalg-bench transpose {args}",
                                  f'TRANSPOSE_ARGS="{args}"'), table(rows, cols)])


def laswp_section(doc, img):
    rows = doc["rows"]
    cols = [("m", "m", ""), ("n", "n", ""), ("npiv", "pivots", ""),
            ("touched_rows", "rows moved", ""), ("ms", "ours ms", ".3f"),
            ("gbs", "GB/s (moved rows)", ".0f"), ("pct_copy", "% of copy", ".1f"),
            ("graph_pct_copy", "% of copy, kernel only", ".1f"),
            ("cupy_ms", "CuPy one swap at a time, ms", ".2f"), ("speedup", "speed-up", ".0f"),
            ("gather_scatter_ms", "CuPy gather+scatter ms", ".3f")]
    return "\n".join([f"## Row swaps (laswp)\n\n{env_line(doc)}\n",
                      "LU-like pivots (piv[i] ≥ i), one launch; bandwidth counted over the rows "
                      "actually moved (read + write); one call between events, and CUDA-graph "
                      "replay for the kernel alone.  "
                      + reproduce("laswp", "gpulinalg-bench laswp"), table(rows, cols)])


def lu_section(doc, img):
    rows = doc["rows"]
    cols = [("m", "m", ""), ("n", "n", ""), ("panel", "panel", ""),
            ("precision", "updates", ""), ("nb", "nb", ""),
            ("ms", "ours ms", ".1f"), ("ms_no_graph", "ours ms, no graph", ".1f"),
            ("tflops", "ours TF/s", ".2f"), ("cusolver_tflops", "cuSOLVER TF/s", ".2f"),
            ("ratio", "ours/cuSOLVER", ".2f"), ("err", "err ours", ".1e"),
            ("err_cusolver", "err cuSOLVER", ".1e"), ("err_scipy", "err SciPy", ".1e"),
            ("host_panel_ms", "Σ host panel ms", ".0f"), ("gpu_ms", "Σ GPU ms", ".0f"),
            ("wall_over_max", "wall / max(host, GPU)", ".2f")]
    host_clock = any("wall_over_max_timeline" in r for r in rows)   # uninstrumented walls
    if host_clock:
        cols.append(("wall_over_max_timeline", "same, instrumented call", ".2f"))
    precisions = doc.get("precisions") or ["fp32"]
    cmd = f"gpulinalg-bench lu --precision {','.join(precisions)} --timeline lu_timeline.json"
    text = [f"## LU factorization\n\n{env_line(doc)}\n",
            "TF/s = (mn² − n³/3)/time (m ≥ n; 2/3 n³ square).  cuSOLVER "
            "(`cupyx.scipy.linalg.lu_factor`) is timed first, then ours, per shape in the same "
            "run.  Ours: median of repeats after a warm-up of two calls (where the GPU-panel "
            "LU is replayed from a CUDA graph, a shape's second call captures it and the timed "
            "calls are replays; \"no graph\": the same calls through the ordinary driver, what a "
            "shape's first call costs).  Errors: ‖PAx − L(Ux)‖ / (‖A‖_F ‖x‖ n ε) for a random "
            "x, in float64.  The last columns check the look-ahead: the sums of host panel time "
            "and GPU time (updates + transfers; for the GPU panel the panel's own time is "
            "counted as transfer) against the wall time"
            + ("; the wall and host times are those of uninstrumented calls (the driver's "
               "perf_counter reads), the GPU time that of calls timed with events, whose own "
               "wall / max is the last column" if host_clock else
               ", all from calls timed with events") + ".  " + reproduce("lu", cmd),
            table(rows, cols)]
    steps = cpu_panel_steps(doc)
    if steps:
        text += ["\nThe CPU panel's look-ahead per step, from the instrumented calls' timelines "
                 "(`lu_timeline.json`, same run): the gap is the host's time between the end of "
                 "one panel's LAPACK and the start of the next (waiting for the panel to "
                 "arrive), the chain the GPU's time from the update stream's start of a step to "
                 "the next panel's columns being ready.\n",
                 table(steps, [("m", "m", ""), ("n", "n", ""), ("precision", "updates", ""),
                               ("steps", "steps", ""), ("wall_ms", "wall ms", ".1f"),
                               ("host_panel_ms", "Σ host panel ms", ".1f"),
                               ("gpu_ms", "Σ GPU ms", ".1f"), ("gaps", "Σ gaps ms", ".1f"),
                               ("gap_med", "median gap ms", ".3f"),
                               ("host_med", "median host ms", ".3f"),
                               ("next_med", "median chain ms", ".3f")])]
    if img:
        text.append(f"\n![LU]({img})")
    return "\n".join(text)


def tabled_section(title, doc, cols, prose):
    """A section of one table: its title, the run's environment, the prose, the rows."""
    return "\n".join([f"## {title}\n\n{env_line(doc)}\n", prose, table(doc["rows"], cols)])


def dgemm_section(doc, img=None):
    """Our FP64 tensor-core DGEMM beside cuBLAS's: every tile timed (tools/dgemm_bench.py)."""
    from gpulinalg.tuning import SM90_F64
    cols = [("case", "case", ""), ("variant", "tile", ""), ("ours_ms", "ours ms", ".3f"),
            ("ours_tflops", "ours TF/s", ".1f"), ("cublas_tflops", "cuBLAS TF/s", ".1f"),
            ("ratio", "ours/cuBLAS", ".3f"), ("max_rel_err", "max rel. diff", ".1e")]
    return tabled_section(
        "DGEMM (float64)", doc, cols,
        "C = A B on squares (`dgemm`, `matmul` of float64) and the LU's rank-k update C −= A B "
        "(A 16384 × k and B k × 16384 row-major, C 16384²), ours on the FP64 tensor cores "
        "(`mma.sync` f64) beside cuBLAS DGEMM (`cupy.matmul`; for the update one fused "
        "`cupy.cublas.gemm` with alpha −1, beta 1), timed in alternating bursts, medians.  "
        f"The defaults: `{SM90_F64.dmma_variant}` for products with k > 512, "
        f"`{SM90_F64.dmma_update_variant}` for k ≤ 512, `{SM90_F64.dmma_small_variant}` where "
        "the large tile leaves half the SMs idle (`auto` in this run named the tile of the "
        "table at the time).  The difference is max |ours − cuBLAS| / max |cuBLAS|.  "
        + reproduce("dgemm", "python3 tools/dgemm_bench.py --variants all"))


def lu64_section(doc, img=None):
    """The float64 LU at lu_factor's defaults beside cuSOLVER's dgetrf."""
    cols = [("m", "m", ""), ("n", "n", ""), ("nb", "nb", ""), ("ms", "ours ms", ".1f"),
            ("ms_no_graph", "ours ms, no graph", ".1f"), ("tflops", "ours TF/s", ".2f"),
            ("cusolver_tflops", "cuSOLVER TF/s", ".2f"), ("ratio", "ours/cuSOLVER", ".2f"),
            ("err", "err ours", ".1e"), ("err_cusolver", "err cuSOLVER", ".1e")]
    cmd = "gpulinalg-bench lu --dtype float64 --sizes " + sizes_arg(doc["rows"])
    return tabled_section(
        "LU factorization, float64", doc, cols,
        "As the float32 table: a CuPy float64 matrix at `lu_factor`'s defaults (GPU panel, "
        "FP64 updates on our DGEMM) against cuSOLVER's dgetrf (`cupyx.scipy.linalg.lu_factor`) "
        "in the same run; errors in units of n ε of float64.  " + reproduce("lu64", cmd))


def solve_section(doc, img=None):
    """lu_solve and the float64 solve beside cuSOLVER (gpulinalg-bench solve)."""
    cols = [("case", "case", ""), ("dtype", "dtype", ""), ("n", "n", ""), ("nrhs", "nrhs", ""),
            ("kappa", "κ", ".0e"), ("ours_ms", "ours ms", ".3f"),
            ("vendor_ms", "cuSOLVER ms", ".3f"), ("ratio", "cuSOLVER/ours", ".2f"),
            ("err_ours", "err ours", ".1e"), ("err_vendor", "err cuSOLVER", ".1e"),
            ("path", "path", ""), ("iterations", "steps", "")]
    return tabled_section(
        "Solves", doc, cols,
        "CuPy inputs, wall time of one call with a device synchronisation, ours and cuSOLVER's "
        "alternating, medians.  `lu_solve`: factors on the GPU (ours from `lu_factor`, "
        "cuSOLVER's from `cupyx.scipy.linalg.lu_factor`), against "
        "`cupyx.scipy.linalg.lu_solve`.  `solve`: float64, one right-hand side, "
        "`gpulinalg.solve` at its defaults against `cupy.linalg.solve` (dgetrf + dgetrs); κ "
        "rows on matrices of that condition number.  Error: ‖b − Ax‖∞ / (‖A‖∞‖x‖∞ + ‖b‖∞); "
        "path and steps as `solve(..., return_info=True)` reports them.  "
        + reproduce("solve", "gpulinalg-bench solve"))


def batched_section(doc, img=None):
    """Stacks of small matrices against torch and one small matrix against cuSOLVER and torch
    (gpulinalg-bench batched)."""
    cols = [("case", "case", ""), ("dtype", "dtype", ""), ("batch", "B", ""), ("n", "n", ""),
            ("ours_ms", "ours ms", ".3f"), ("torch_ms", "torch ms", ".3f"),
            ("vs_torch", "torch/ours", ".2f"), ("cusolver_ms", "cuSOLVER ms", ".3f"),
            ("vs_cusolver", "cuSOLVER/ours", ".2f"), ("err", "err ours", ".1e"),
            ("err_lapack", "err LAPACK", ".1e")]
    return tabled_section(
        "Small matrices and stacks", doc, cols,
        "CuPy inputs on the GPU, wall time of one `lu_factor` call with a device "
        "synchronisation (host work included), candidates alternating, medians.  `stack`: a "
        "(B, n, n) array against `torch.linalg.lu_factor` of the same memory; `one`: one n × n "
        "matrix against `cupyx.scipy.linalg.lu_factor` (cuSOLVER) and torch.  Error: the worst "
        "‖PA − LU‖_F / (‖A‖_F n ε) of the first matrices, ours and LAPACK's on the same ones.  "
        + reproduce("batched", "gpulinalg-bench batched"))


def cpu_panel_steps(doc):
    """Per-step summaries of the CPU-panel timelines that came with the LU rows (the bench
    writes one timeline per one-GPU row, in the rows' order), or [] where there are none."""
    tls = doc.get("timelines") or []
    rows = [r for r in doc["rows"] if r.get("devices", 1) == 1]
    if len(tls) != len(rows) or any((r["m"], r["n"], r["panel"]) != (t["m"], t["n"], t["panel"])
                                    for r, t in zip(rows, tls)):
        return []
    out = []
    for r, t in zip(rows, tls):
        if t["panel"] != "cpu" or not t.get("steps"):
            continue
        st = t["steps"]
        nxt = [x["next_ms"] for x in st if x.get("next_ms") is not None]
        out.append({"m": t["m"], "n": t["n"], "precision": r.get("precision", "fp32"),
                    "steps": len(st), "wall_ms": t["wall_ms"],
                    "host_panel_ms": t["host_panel_ms"], "gpu_ms": t["gpu_ms"],
                    "gaps": sum(x["gap_ms"] for x in st),
                    "gap_med": statistics.median(x["gap_ms"] for x in st),
                    "host_med": statistics.median(x["host_ms"] for x in st),
                    "next_med": statistics.median(nxt) if nxt else None})
    return out


def lu_multi_args(doc):
    """The gpulinalg-bench lu arguments that give a multi-GPU file's rows."""
    rows = doc["rows"]
    devices = doc.get("devices") or sorted({r["devices"] for r in rows})
    precisions = doc.get("precisions") or ["fp32"]
    panels = doc.get("panels") or ["gpu"]
    return (f"--devices {','.join(map(str, devices))} --sizes {sizes_arg(rows)} --rect ''"
            + ("" if panels == ["auto"] else f" --panel {','.join(panels)}")
            + ("" if precisions == ["auto"] else f" --precision {','.join(precisions)}"))


# How the multi-GPU table is measured (said once, before the first such table).
LU_MULTI_HOW = (
    "`lu_factor(a, devices=P)` with `a` a CuPy array on GPU 0 and the result back on GPU 0 (in a "
    "new array: `a` is kept, the upload reads it where it lies): the column scatter to the P "
    "GPUs and the gather are inside the time.  The one-GPU rows are the same call without "
    "`devices`, with the same `precision`, in the same run; `1-GPU time / time` is the scaling "
    "against that call, which is our default one-GPU call where `precision` is auto.  "
    "The phase columns come from one more call: "
    "`scatter` is the upload of the columns (first to last chunk, slowest GPU; the "
    "factorization starts with the first chunk), `factor` the time until every GPU is done "
    "(from the start, so it includes the scatter), `gather` what is left after that (the last "
    "blocks copied home); `host enqueue` is the host time spent issuing the factorization's "
    "work.  ")


def lu_multi_section(doc, img, title="LU on several GPUs", again=False):
    """The multi-GPU table; `again`: a second such table, whose method the first one gave."""
    rows = doc["rows"]
    cols = [("m", "m", ""), ("n", "n", ""), ("devices", "GPUs", ""), ("precision", "updates", ""),
            ("nb", "nb", ""), ("ms", "ms", ".1f"), ("tflops", "TF/s", ".1f"),
            ("scaling", "1-GPU time / time", ".2f"),
            ("cusolver_tflops", "cuSOLVER (1 GPU) TF/s", ".1f"), ("ratio", "× cuSOLVER", ".2f"),
            ("err", "err", ".1e"), ("err_cusolver", "err cuSOLVER", ".1e"),
            ("scatter_ms", "scatter ms", ".1f"), ("factor_ms", "factor ms", ".1f"),
            ("gather_ms", "gather ms", ".1f"), ("enqueue_ms", "host enqueue ms", ".0f")]
    e = doc["environment"]
    args = lu_multi_args(doc)
    how = ("The same call and columns as the table of several GPUs above.  "
           if again else LU_MULTI_HOW)
    text = [f"## {title}\n\n{env_line(doc)}, {e.get('device_count', '?')} GPUs on "
            "the machine\n", how
            + reproduce("lu_multi", f"gpulinalg-bench lu {args}", f'LU_MULTI_ARGS="{args}"'),
            table(rows, cols)]
    if img:
        text.append(f"\n![LU on several GPUs]({img})")
    return "\n".join(text)


def lu_large_section(doc, img):
    cols = [("n", "n", ""), ("devices", "GPUs", ""), ("matrix_gib", "matrix GiB", ".1f"),
            ("one_gpu_gib", "one GPU's memory GiB", ".1f"), ("factor_s", "factor s", ".1f"),
            ("tflops", "TF/s", ".1f"), ("scatter_ms", "scatter ms", ".0f"),
            ("gather_ms", "gather ms", ".0f"), ("hpl_residual", "HPL residual", ".1e"),
            ("passed", "< 16", "")]
    devices = doc["rows"][0]["devices"] if doc["rows"] else 4
    return "\n".join([
        f"## A matrix larger than one GPU\n\n{env_line(doc)}\n",
        "A NumPy matrix whose size alone exceeds one GPU's memory, "
        "`lu_factor(a, overwrite_a=True, check_finite=False, devices=P)` (each GPU receives "
        "only its columns from the host; the factors come back into `a`), checked as HPL "
        "does: x solved on the host with the factors, ‖Ax − b‖∞ / (ε (‖A‖∞ ‖x‖∞ + ‖b‖∞) n) "
        "with A regenerated on the GPU; HPL accepts < 16.  Time from the NumPy input to the "
        "NumPy factors (upload and download included), one call.  "
        + reproduce("lu_large", f"python3 benchmarks/lu_large.py --devices {devices}",
                    f"LARGE_DEVICES={devices}"), table(doc["rows"], cols)])


def lu_host_section(doc, img):
    rows = [dict(r, vs_scipy=r["scipy_ms"] / r["numpy_ms"] if r.get("scipy_ms") else None,
                 up=f"{r['pageable_up_ms']:.1f} / {r['staged_up_ms']:.1f}",
                 down=f"{r['pageable_down_ms']:.1f} / {r['staged_down_ms']:.1f}")
            for r in doc["rows"]]
    cols = [("n", "n", ""), ("cupy_ms", "CuPy in, ms", ".2f"),
            ("numpy_ms", "NumPy in and out, ms", ".2f"),
            ("up", "upload ms: pageable / staged", ""),
            ("down", "download ms: pageable / staged", ""),
            ("scipy_ms", "SciPy ms", ".0f"), ("vs_scipy", "× SciPy", ".1f")]
    return "\n".join([
        f"## LU of NumPy matrices\n\n{env_line(doc)}, {doc.get('cpu_count', '?')} host CPUs\n",
        "Median wall time (host clock, the GPU synchronised) of `lu_factor(a)` for a CuPy `a` "
        "and for the same NumPy `a` (upload, the finite check on the GPU, the factorization, "
        "the download of the factors), and of the transfers alone: `cupy.asarray` / "
        "`cupy.asnumpy` (pageable) against the pinned staging of gpulinalg/core/host_io.py, "
        "which the NumPy calls use.  SciPy: `scipy.linalg.lu_factor` on the host (its "
        "OpenBLAS, every core), once.  "
        + reproduce("lu_host", "python3 benchmarks/lu_host.py 2048,4096,8192,16384 --scipy 8192"),
        table(rows, cols)])


def extra_section(extra):
    """One line per kept file of an earlier run: name, what it holds, device and date."""
    lines = ["## Earlier runs kept in docs/data\n",
             "Files the tables above do not show; their history is in docs/journal/.\n"]
    for name, (what, doc) in extra.items():
        e = doc.get("environment", {})
        count = e.get("device_count")
        gpus = f" × {count}" if count and count > 1 else ""
        lines.append(f"- `{name}.json`: {what}; {e.get('device', '?')}{gpus}, "
                     f"{str(e.get('date', '?'))[:10]}, {len(doc.get('rows', []))} rows.")
    return "\n".join(lines)


def method_section():
    return "\n".join([
        "## How these figures are taken\n",
        "- Each table comes from one device call of `benchmarks/gpu_check.sh` (the GPU test "
        "suite, then the benchmarks); the device, driver, CUDA, CuPy, NumPy and SciPy "
        "versions and the date head each table, from its JSON in `docs/data/`.",
        "- Ours and the vendor library (cuBLAS, cuSOLVER, a device-to-device copy, CuPy, "
        "SciPy) run in the same process on the same GPU.  SGEMM and transpose candidates take "
        "turns in bursts of back-to-back calls, round by round in a shuffled order, so clock "
        "drift and what one burst leaves in L2 hit every candidate alike; the LU times "
        "cuSOLVER, then ours, per shape.",
        "- GPU time is measured with CUDA events after warm-up calls, and the median of the "
        "repeats is reported; calls from NumPy input are timed by the host clock with the GPU "
        "synchronised.  TF/s use LAPACK's flop counts: 2mnk for GEMM, mn² − n³/3 for the LU.",
        "- Several GPUs are compared with our own one-GPU call in the same run, with the same "
        "`precision`.",
        "- Every table says which stage of `gpu_check.sh` remakes it; copy the JSON from $OUT "
        "to `docs/data/` and run `python3 benchmarks/make_docs.py`.  The tuning values and "
        "their evidence are in [tuning.md](tuning.md), the history in "
        "[journal/](journal/README.md).",
    ])


def _axes():
    """A fresh 6 x 4 inch figure on the Agg backend: (fig, ax)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=(6, 4))


def _save(fig, ax, path, xlabel, ylabel):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_lu_multi(doc, path):
    rows = [r for r in doc["rows"] if r.get("m", r["n"]) == r["n"] and r.get("scaling")]
    fig, ax = _axes()
    for n in sorted({r["n"] for r in rows}):
        sel = sorted((r for r in rows if r["n"] == n), key=lambda r: r["devices"])
        ax.plot([r["devices"] for r in sel], [r["scaling"] for r in sel], "o-", label=f"n={n}")
    top = max((r["devices"] for r in rows), default=1)
    ax.plot([1, top], [1, top], "k:", label="linear")
    _save(fig, ax, path, "GPUs", "speed-up over 1 GPU (same run, same precision)")


def plot_lu(doc, path):
    rows = [r for r in doc["rows"] if r.get("m", r["n"]) == r["n"]]
    fig, ax = _axes()
    for panel, prec in sorted({(r["panel"], r.get("precision", "fp32")) for r in rows}):
        sel = [r for r in rows if r["panel"] == panel and r.get("precision", "fp32") == prec]
        ax.plot([r["n"] for r in sel], [r["tflops"] for r in sel], "o-",
                label=f"gpulinalg, {panel} panel" + ("" if prec == "fp32" else f", {prec}"))
    ns = sorted({r["n"] for r in rows})
    cus = {r["n"]: r["cusolver_tflops"] for r in rows}
    ax.plot(ns, [cus[n] for n in ns], "s--", label="cuSOLVER")
    ax.set_xscale("log", base=2)
    _save(fig, ax, path, "n", "TFLOP/s (2/3 n³ / time)")


FIRST_CALL_STEPS = [
    ("import_lu_1000", "`import gpulinalg` + `lu_factor` of a 1000² NumPy matrix"),
    ("matmul_4096", "then the first `matmul` 4096² (CuPy)"),
    ("lu_large_first", "then `lu_factor` {n}² (CuPy): first call"),
    ("lu_large_second", "its second call"),
    ("lu_large_extra", "first − second")]


def first_call_section(doc, img=None):
    """What a new process waits for: benchmarks/first_call.py's runs against its targets."""
    runs, dev = doc["runs"], doc["runs"][0]["device"]
    head = "| step | " + " | ".join(f"run {i + 1} s" for i in range(len(runs))) + " | target s |"
    lines = [head, "|---|" + "---:|" * (len(runs) + 1)]
    for key, label in FIRST_CALL_STEPS:
        target = doc["targets_s"].get(key)
        lines.append(f"| {label.format(n=doc['n_large'])} | "
                     + " | ".join(f"{r[key]:.3f}" for r in runs)
                     + f" | {'' if target is None else f'≤ {target:.1f}'} |")
    compiled = "; ".join(f"run {i + 1}: {r['nvrtc_modules']} NVRTC modules of ours, "
                         f"{len(r['gpulinalg_kernels_in_cache'])} of our kernels among the "
                         f"{r['cache_files']} files of CuPy's cache" for i, r in enumerate(runs))
    return "\n".join([
        f"## First call\n\n{dev['name']} ({dev['capability']}), CUDA runtime "
        f"{dev['cuda_runtime']} / driver {dev['cuda_driver']}, CuPy {dev['cupy']}, "
        f"{doc['date']}\n",
        "Each run is a new Python process with an empty CuPy kernel cache (`CUPY_CACHE_DIR`), "
        "the steps in this order, each synchronised; the kernels come compiled in the package.  "
        f"Compiled at run time: {compiled}.  Reproduce: "
        "`python3 benchmarks/first_call.py` (`STAGES=first_call bash benchmarks/gpu_check.sh`).\n",
        "\n".join(lines)])


SECTIONS = {"first_call": first_call_section, "sgemm": sgemm_section, "dgemm": dgemm_section,
            "transpose": transpose_section, "laswp": laswp_section, "lu": lu_section,
            "lu64": lu64_section, "solve": solve_section, "batched": batched_section,
            "lu_multi": lu_multi_section,
            "lu_host": lu_host_section,
            "lu_large": lu_large_section}
PLOTS = {"sgemm": "img/sgemm.png", "lu": "img/lu.png", "lu_multi": "img/lu_multi.png"}


def _plot_sgemm(doc, path):
    from gpulinalg.bench.sgemm import plot
    plot(doc["rows"], path)


def make_plots(docs, img_dir):
    """{section: image path relative to docs/}: plots made from `docs` with matplotlib, else
    the images already in img_dir (made from an earlier run of the same pipeline)."""
    makers = {"sgemm": _plot_sgemm, "lu": plot_lu, "lu_multi": plot_lu_multi}
    made = {}
    for name, rel in PLOTS.items():
        if name not in docs:
            continue
        path = img_dir.parent / rel
        try:
            import matplotlib  # noqa: F401
            img_dir.mkdir(parents=True, exist_ok=True)
            makers[name](docs[name], path)
        except ImportError:
            pass            # no matplotlib (or no plotting helper): keep the existing image
        if path.exists():
            made[name] = rel
    return made


def summary(docs):
    """README lines: the headline ratios against the vendor libraries."""
    from gpulinalg.tuning import SM90
    lines = []
    if "first_call" in docs:
        runs = docs["first_call"]["runs"]
        lines.append(f"| first `lu_factor` 1000² of a new process, import included (empty "
                     f"kernel cache) | {max(r['import_lu_1000'] for r in runs):.2f} s | "
                     f"target {docs['first_call']['targets_s']['import_lu_1000']:.1f} s | – |")
    if "sgemm" in docs:
        for r in docs["sgemm"]["rows"]:
            if (r["op"] == "C=AB" and r["n"] in (4096, 16384)
                    or r["op"] == "C-=AB" and r["k"] in (64, 128)):
                lines.append(f"| SGEMM {r['op']} {r['m']}×{r['n']}×{r['k']} "
                             f"({r['variant'].split()[0]}) | "
                             f"{r['tflops']:.1f} TF/s | cuBLAS {r['cublas_tflops']:.1f} | "
                             f"{r['ratio']:.2f}× |")
        for r in docs["sgemm"]["rows"]:
            if r["op"] == "C=AB" and r["n"] in (8192, 16384) and r.get("3xtf32_ratio"):
                lines.append(f"| SGEMM `precision=\"3xtf32\"` {r['n']}³ (error "
                             f"{r['3xtf32_err']:.1e}, SIMT {r.get('simt_err', r['err']):.1e}) | "
                             f"{r.get('duel_3xtf32_tflops', r['3xtf32_tflops']):.1f} TF/s | "
                             f"cuBLAS SGEMM {r.get('duel_cublas_tflops', r['cublas_tflops']):.1f}"
                             f" | {r['3xtf32_ratio']:.2f}× |")
    if "transpose" in docs:   # the largest square size, and the largest odd one if timed
        rows = [r for r in docs["transpose"]["rows"] if r["m"] == r["n"]]
        for odd in (False, True):
            kind = [r for r in rows if r["m"] % 2 == odd]
            if not kind:
                continue
            r = max(kind, key=lambda r: r["m"])
            gbs, copy, pct = ((r["burst_gbs"], r["copy_burst_gbs"], r["burst_pct_copy"])
                              if "burst_gbs" in r else (r["gbs"], r["copy_gbs"], r["pct_copy"]))
            lines.append(f"| transpose {r['m']}²{' (odd size)' if odd else ''} | {gbs:.0f} GB/s"
                         f" | copy {copy:.0f} GB/s | {pct:.0f}% of copy |")
    if "laswp" in docs:
        r = docs["laswp"]["rows"][0]
        lines.append(f"| laswp {r['npiv']} pivots on {r['m']}² | {r['ms']:.3f} ms | CuPy "
                     f"{r['cupy_ms']:.2f} ms | {r['speedup']:.0f}× |")
    if "lu" in docs:
        timed_auto = {r["n"] for r in docs["lu"]["rows"] if r.get("precision") == "auto"}
        for r in docs["lu"]["rows"]:
            if r["panel"] in ("gpu", "auto") and r.get("m", r["n"]) == r["n"]:
                prec = r.get("precision", "fp32")
                # the arithmetic precision="auto" picks there on Hopper (the tuning table),
                # where the run has no "auto" row of its own
                default = ("auto" if r["n"] in timed_auto else
                           "3xtf32" if r["n"] * r["n"] >= SM90.lu_tc_min_mn else "fp32")
                what = (f"LU n={r['n']}, {prec} updates"
                        + (" (the default)" if prec == default else ""))
                lines.append(f"| {what} | {r['tflops']:.1f} TF/s | "
                             f"cuSOLVER {r['cusolver_tflops']:.1f} | {r['ratio']:.2f}× |")
    if "dgemm" in docs:
        from gpulinalg.tuning import SM90_F64
        gpu64 = docs["dgemm"]["environment"]["device"].replace("NVIDIA ", "")
        for r in docs["dgemm"]["rows"]:
            tile = r["variant"].split("=")[-1]
            default = (SM90_F64.dmma_update_variant if r["k"] <= 512
                       else SM90_F64.dmma_variant)
            if tile == default and r["variant"] == tile and (
                    r["k"] in (128, 256) or r["n"] in (4096, 16384) and r["k"] == r["n"]):
                op = "C=AB" if r["beta"] == 0 else "C-=AB"
                lines.append(f"| DGEMM {op} {r['m']}×{r['n']}×{r['k']} ({tile}, {gpu64}) | "
                             f"{r['ours_tflops']:.1f} TF/s | cuBLAS {r['cublas_tflops']:.1f} | "
                             f"{r['ratio']:.2f}× |")
    if "lu64" in docs:
        gpu64 = docs["lu64"]["environment"]["device"].replace("NVIDIA ", "")
        for r in docs["lu64"]["rows"]:
            if r.get("m", r["n"]) == r["n"]:
                lines.append(f"| LU n={r['n']}, float64 ({gpu64}) | {r['tflops']:.1f} TF/s "
                             f"| cuSOLVER dgetrf {r['cusolver_tflops']:.1f} | "
                             f"{r['ratio']:.2f}× |")
    if "solve" in docs:
        gpus = docs["solve"]["environment"]["device"].replace("NVIDIA ", "")
        for r in docs["solve"]["rows"]:
            if r["case"] == "lu_solve" and r["nrhs"] in (1, 16) or (
                    r["case"] == "solve" and not r.get("kappa") and r["n"] >= 16384):
                what = (f"lu_solve n={r['n']}, {r['nrhs']} rhs, {r['dtype']}"
                        if r["case"] == "lu_solve" else
                        f"solve n={r['n']}, float64, 1 rhs ({r['path']})")
                lines.append(f"| {what} ({gpus}) | {r['ours_ms']:.2f} ms | cuSOLVER "
                             f"{r['vendor_ms']:.2f} ms | {r['ratio']:.2f}× |")
    if "batched" in docs:
        gpus = docs["batched"]["environment"]["device"].replace("NVIDIA ", "")
        for r in docs["batched"]["rows"]:
            if r["dtype"] != "float32":
                continue
            if r["case"] == "stack" and r["batch"] * r["n"] in (800000, 640000, 102400):
                lines.append(f"| lu_factor of {r['batch']} × {r['n']}², float32 ({gpus}) | "
                             f"{r['ours_ms']:.2f} ms | torch {r['torch_ms']:.2f} ms | "
                             f"{r['vs_torch']:.2f}× |")
            elif r["case"] == "one" and r["n"] in (64, 128):
                lines.append(f"| lu_factor of one {r['n']}², float32 ({gpus}) | "
                             f"{r['ours_ms']:.3f} ms | cuSOLVER {r['cusolver_ms']:.3f} ms | "
                             f"{r['vs_cusolver']:.2f}× |")
    if "lu_multi" in docs:
        gpu = docs["lu_multi"]["environment"]["device"].replace("NVIDIA ", "").split()[0]
        for r in docs["lu_multi"]["rows"]:
            if r["devices"] > 1 and r.get("m", r["n"]) == r["n"] and r["n"] >= 16384:
                prec = r.get("precision", "fp32")
                what = ("default options" if prec == "auto" and r.get("panel") == "auto"
                        else f"{prec} updates")
                base = ("our default one-GPU call" if what == "default options" else
                        f"our one-GPU call with precision='{prec}'")
                lines.append(f"| LU n={r['n']} on {r['devices']} {gpu}s, {what} | "
                             f"{r['tflops']:.1f} TF/s | {base}, same run: "
                             f"{r['tflops'] / r['scaling']:.1f} | {r['scaling']:.2f}× |")
    if "lu_host" in docs:
        for r in docs["lu_host"]["rows"]:
            if r.get("scipy_ms"):
                lines.append(f"| LU n={r['n']} of a NumPy matrix (host in and out) | "
                             f"{r['numpy_ms']:.1f} ms | SciPy on the host {r['scipy_ms']:.0f} ms"
                             f" | {r['scipy_ms'] / r['numpy_ms']:.1f}× |")
    if "lu_large" in docs:
        for r in docs["lu_large"]["rows"]:
            lines.append(f"| LU n={r['n']} ({r['matrix_gib']:.0f} GiB, one GPU has "
                         f"{r['one_gpu_gib']:.0f}) on {r['devices']} GPUs, host in and out | "
                         f"{r['tflops']:.1f} TF/s | HPL residual {r['hpl_residual']:.1e} | "
                         f"{'passed' if r['passed'] else 'FAILED'} |")
    if not lines:
        return ""
    return "\n".join(["| what | gpulinalg | compared with | ratio |", "|---|---:|---:|---:|"]
                     + lines)


def same_run(a, b, within_s=3600):
    """Whether two benchmark files come from one run: the same environment, written within
    `within_s` of each other (the LU's rows and its timelines are written minutes apart; a
    timeline left from an earlier run must not be shown beside another run's rows)."""
    import datetime
    env = [dict(d.get("environment", {})) for d in (a, b)]
    dates = [e.pop("date", None) for e in env]
    if env[0] != env[1] or None in dates:
        return False
    t = [datetime.datetime.fromisoformat(d) for d in dates]
    return abs((t[0] - t[1]).total_seconds()) <= within_s


def load(src):
    """({section: doc}, {extra name: (what, doc)}) from the JSON files in src."""
    docs = {}
    for name in SECTIONS:
        f = src / f"{name}.json"
        if f.exists():
            docs[name] = json.loads(f.read_text())
    timelines = src / "lu_timeline.json"   # the LU run's per-step timelines, when the same run
    if "lu" in docs and timelines.exists():
        tl = json.loads(timelines.read_text())
        if same_run(tl, docs["lu"]):
            docs["lu"]["timelines"] = tl["timelines"]
    extra = {name: (what, json.loads((src / f"{name}.json").read_text()))
             for name, what in EXTRA.items() if (src / f"{name}.json").exists()}
    return docs, extra


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    src = pathlib.Path(argv[0]) if argv else ROOT / "docs" / "data"
    docs, extra = load(src)
    if not docs:
        print(f"no benchmark JSON in {src}")
        return 1
    imgs = make_plots(docs, ROOT / "docs" / "img")
    parts = ["# Performance",
             "Generated by `benchmarks/make_docs.py` from the JSON in `docs/data/` (do not edit "
             "by hand).  Remake every table of one GPU in one device call with\n\n"
             f"    {GPU_CHECK}      # on the GPU machine; JSON in $OUT, copied to docs/data/\n"
             "    python3 benchmarks/make_docs.py\n",
             method_section()]
    for name, section in SECTIONS.items():
        if name in docs:
            parts.append(section(docs[name], imgs.get(name)))
    if "lu_multi_h100x2" in extra:     # the latest two-GPU run on the reference GPU
        parts.append(lu_multi_section(extra["lu_multi_h100x2"][1], None, "LU on two H100s",
                                      again="lu_multi" in docs))
    listed = {k: v for k, v in extra.items() if k != "lu_multi_h100x2"}
    if listed:
        parts.append(extra_section(listed))
    text = "\n\n".join(parts) + "\n"
    lines = text.count("\n")
    if lines > MAX_LINES:
        print(f"docs/performance.md would have {lines} lines (at most {MAX_LINES}): move prose "
              "to docs/journal/ or drop a table")
        return 1
    (ROOT / "docs" / "performance.md").write_text(text)
    readme = ROOT / "README.md"
    block = f"<!-- perf-summary:start -->\n{summary(docs)}\n<!-- perf-summary:end -->"
    readme.write_text(re.sub(r"<!-- perf-summary:start -->.*?<!-- perf-summary:end -->",
                             lambda _: block, readme.read_text(), flags=re.S))
    print(f"wrote docs/performance.md ({lines} lines) and README.md's summary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
