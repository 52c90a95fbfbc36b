"""The gpulinalg-bench command line on the CPU: without CuPy or a GPU every routine prints the
library's one-line reason and exits 2; help, defaults and argument errors need no GPU; the
--tuning parsing; the summary tables, the progress display and the plots on made-up rows."""

import dataclasses
import inspect
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest

import gpulinalg
from gpulinalg import tuning
from gpulinalg.bench import batched, common, laswp, lu, sgemm, solve, transpose
from gpulinalg.bench import __main__ as cli

# The folder that holds the gpulinalg these tests import (a checkout or site-packages).
IMPORT_ROOT = pathlib.Path(gpulinalg.__file__).resolve().parent.parent
ALL = cli.ROUTINES + ("all",)
ONE_LINE_START = "gpulinalg needs an NVIDIA GPU and CuPy: "


def bench(*args, block=(), path=(), cwd=None):
    """(exit status, stdout, stderr) of `python3 -m gpulinalg.bench ARGS` in a new process in
    which the modules named in `block` cannot be imported and the folders `path` come first
    on sys.path."""
    code = ("import runpy, sys\n"
            f"for name in {list(block)!r}:\n"
            "    sys.modules[name] = None\n"
            f"sys.argv = ['gpulinalg-bench'] + {list(args)!r}\n"
            "runpy.run_module('gpulinalg.bench', run_name='__main__', alter_sys=True)\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in path] + [str(IMPORT_ROOT)]
                                        + [env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def assert_one_line(rc, out, err, *needles):
    assert rc == 2, (rc, out, err)
    lines = [x for x in (out + err).splitlines() if x.strip()]
    assert len(lines) == 1, out + err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# Without CuPy or a GPU ------------------------------------------------------------------------

@pytest.mark.parametrize("routine", ALL)
def test_routine_without_cupy_prints_one_line_and_exits_2(routine):
    rc, out, err = bench(routine, block=["cupy"])
    line = assert_one_line(rc, out, err, ONE_LINE_START, "CuPy is not installed",
                           'pip install ".[cuda13]"', '".[cuda12]"')
    assert err.strip() == line


@pytest.mark.skipif(gpulinalg.gpu_available(), reason="checks the machine without a GPU")
def test_lu_on_a_machine_without_gpu_prints_one_line():
    proc = subprocess.run([sys.executable, "-m", "gpulinalg.bench", "lu"], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(IMPORT_ROOT)))
    assert_one_line(proc.returncode, proc.stdout, proc.stderr, ONE_LINE_START)


FAKE_CUPY = '''
class CUDARuntimeError(RuntimeError):
    def __init__(self, status, text):
        self.status = status
        super().__init__(text)


class runtime:
    @staticmethod
    def getDeviceCount():
        raise CUDARuntimeError({status}, {text!r})

    @staticmethod
    def driverGetVersion():
        return {driver}

    @staticmethod
    def runtimeGetVersion():
        return 13000


class cuda:
    runtime = runtime
'''
INSUFFICIENT = ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                "runtime version")


@pytest.mark.parametrize("status, text, driver, reason", [
    (35, INSUFFICIENT, 0, "no NVIDIA driver was found"),
    (35, INSUFFICIENT, 12040, "the NVIDIA driver supports CUDA 12.4, older than CuPy's CUDA 13.0"),
    (100, "cudaErrorNoDevice: no CUDA-capable device is detected", 13000,
     "no CUDA device was found"),
])
def test_the_reason_names_the_cause(tmp_path, status, text, driver, reason):
    # A CuPy whose runtime fails as a machine without a driver, with an old driver or without
    # a device makes it fail.
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(
        FAKE_CUPY.format(status=status, text=text, driver=driver))
    rc, out, err = bench("lu", path=[tmp_path])
    line = assert_one_line(rc, out, err, ONE_LINE_START + reason)
    if driver == 0:
        assert "insufficient" not in line


def test_plot_without_matplotlib_says_how_to_install_it():
    rc, out, err = bench("lu", "--plot", block=["cupy", "matplotlib"])
    assert_one_line(rc, out, err, 'pip install ".[plot]"')


# Help, defaults, argument errors --------------------------------------------------------------

@pytest.mark.parametrize("routine", ALL)
def test_help_needs_no_gpu(routine):
    rc, out, err = bench(routine, "--help", block=["cupy"])
    assert rc == 0, err
    assert out.startswith(f"usage: gpulinalg-bench {routine}")


def test_all_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["all", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--out DIR" in out and f"(default: {cli.DEFAULT_OUT})" in out


@pytest.mark.parametrize("argv, option", [(["all", "--out"], "--out"),
                                          (["lu", "--json"], "--json"),
                                          (["sgemm", "--json"], "--json")])
def test_an_option_without_its_value_is_an_argparse_error(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert f"argument {option}: expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["lu", "--panel", "host"], "unknown 'host'; choose from auto, cpu, gpu"),
    (["lu", "--precision", "fp16"], "unknown 'fp16'"),
    (["lu", "--devices", "0"], "sizes are positive"),
    (["lu", "--sizes", "", "--rect", ""], "no shape to run"),
    (["sgemm", "--variants", "nope"], "unknown 'nope'"),
    (["transpose", "--sizes", "12xy"], "argument --sizes: '12xy' is not a list of shapes"),
    (["lu", "--tuning", "gpu_nbb=3"], "did you mean gpu_nb"),
])
def test_bad_options_are_usage_errors_before_any_gpu_work(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_lu_defaults_are_lu_factors():
    args = cli.build_parser().parse_args(["lu"])
    params = inspect.signature(gpulinalg.lu_factor).parameters
    assert args.precision == [params["precision"].default] == ["auto"]
    assert args.panel == [params["panel"].default] == ["auto"]
    assert args.nb is params["block_size"].default is None
    assert args.devices == [1]


def test_defaults_show_in_help(capsys):
    for routine in cli.ROUTINES:
        with pytest.raises(SystemExit):
            cli.main([routine, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "(default: " in out, routine
        if routine == "lu":
            assert out.count("(default: auto)") == 2     # --panel and --precision
        if routine == "sgemm":
            assert 'precision="auto"' in out
            assert "(default: 1024,2048,4096,8192,16384)" in out


def test_sgemm_ours_is_sgemms_default():
    assert inspect.signature(gpulinalg.sgemm).parameters["precision"].default == "auto"
    assert 'product_into(alpha, a, b, beta, c, "auto"' in inspect.getsource(sgemm.measure)


def test_all_writes_every_json_into_out(monkeypatch, tmp_path, capsys):
    pytest.importorskip("matplotlib")   # --plot needs the plot extra
    seen = []
    for name in cli.ROUTINES:
        module = getattr(sys.modules["gpulinalg.bench"], name)
        monkeypatch.setattr(module, "execute",
                            lambda args, name=name: seen.append((name, args)) or 0)
    monkeypatch.setattr(cli, "cupy", lambda: None)     # as if a GPU were there
    out = tmp_path / "results"
    assert cli.main(["all", "--out", str(out), "--quiet", "--plot"]) == 0
    assert [name for name, _ in seen] == list(cli.ROUTINES)
    for name, args in seen:
        assert pathlib.Path(args.json) == out / f"{name}.json"
        assert args.quiet and args.plot and not args.wide
        assert common.plot_path(args.json, name) == out / f"{name}.png"
    printed = capsys.readouterr().out
    assert f"to {out}" in printed and f"results in {out}" in printed


# --tuning --------------------------------------------------------------------------------------

def test_parse_tuning_int_field():
    assert common.parse_tuning("gpu_nb=64,128") == ("gpu_nb", [64, 128])
    assert common.parse_tuning(" row_block_cap = 0x40, 1_024 ") == ("row_block_cap", [64, 1024])


def test_parse_tuning_tuple_literal():
    name, values = common.parse_tuning("gpu_nb_steps_tc=((8192,256),),()")
    assert name == "gpu_nb_steps_tc" and values == [((8192, 256),), ()]
    name, values = common.parse_tuning("wgmma_variant=('128x128t','128x256tf')")
    assert values == [("128x128t", "128x256tf")]


def test_parse_tuning_str_and_float_fields():
    assert common.parse_tuning('transpose_small=32x8,"64x4-pair"') == (
        "transpose_small", ["32x8", "64x4-pair"])
    assert common.parse_tuning("simt_long_k_wave=0.5") == ("simt_long_k_wave", [0.5])


@pytest.mark.parametrize("spec, message", [
    ("gpu_nbb=3", "did you mean gpu_nb"),
    ("gpu_nb", "not FIELD=v1,v2"),
    ("gpu_nb=", "no value"),
    ("gpu_nb=abc", "'abc' is not a int"),
    ("wgmma_variant=3", "is not a tuple"),
])
def test_parse_tuning_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        common.parse_tuning(spec)


def test_tuning_settings_every_combination():
    base = tuning.current()
    settings = common.tuning_settings(["gpu_nb=64,128", "transpose_small=32x8,64x4-pair"])
    assert [label for label, _ in settings] == [
        "gpu_nb=64 transpose_small='32x8'", "gpu_nb=64 transpose_small='64x4-pair'",
        "gpu_nb=128 transpose_small='32x8'", "gpu_nb=128 transpose_small='64x4-pair'"]
    for (_, table), (nb, small) in zip(settings, [(64, "32x8"), (64, "64x4-pair"),
                                                  (128, "32x8"), (128, "64x4-pair")]):
        assert table == dataclasses.replace(base, gpu_nb=nb, transpose_small=small)
    assert common.tuning_settings([]) == [("defaults", base)]
    assert common.describe_tuning(["gpu_nb=64"]) == f"gpu_nb (default {base.gpu_nb!r})"


# Progress, summaries, plots on made-up rows ---------------------------------------------------

def test_progress_lines_without_a_terminal(capsys):
    with common.Progress(3, "lu") as bar:
        bar.done("2048: 1 TF/s")
    assert capsys.readouterr().err == "2048: 1 TF/s\n"
    with common.Progress(3, "lu", quiet=True) as bar:
        bar.done("2048: 1 TF/s")
    assert capsys.readouterr().err == ""


def test_progress_bar_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with common.Progress(2, "lu") as bar:
        bar.done("2048: 1 TF/s")
        bar.done("4096: 2 TF/s")
        assert bar.bar is not None and bar.bar.n == 2
    assert term.getvalue().startswith("\rlu:")
    assert "2048: 1 TF/s\n" not in term.getvalue()
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with common.Progress(2, "lu", quiet=True) as bar:
        bar.done("2048: 1 TF/s")
    assert term.getvalue() == ""


def lu_rows():
    return [dict(m=n, n=n, devices=1, panel="auto", precision="auto", tuning="defaults",
                 ms=1.0, tflops=10.0 * n / 2048, cusolver_tflops=8.0, ratio=1.25, scaling=1.0,
                 err=0.01, err_cusolver=0.02, err_scipy=None, wall_over_max=1.02)
            for n in (2048, 4096)] + [
        dict(m=16384, n=8192, devices=1, panel="auto", precision="auto", tuning="defaults",
             ms=5.0, tflops=30.0, cusolver_tflops=20.0, ratio=1.5, scaling=1.0, err=None)]


def test_lu_summary_short_and_wide(capsys):
    lu.summary(lu_rows())
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "panel auto" in lines[0] and "updates auto" in lines[0]
    assert lines[1].split() == ["size", "ours", "TF/s", "cuSOLVER", "TF/s", "ratio", "error"]
    assert lines[-1].split() == ["16384x8192", "30.00", "20.00", "1.50", "-"]
    lu.summary(lu_rows(), wide=True)
    assert "wall/max" in capsys.readouterr().out


def test_lu_summary_shows_what_varies(capsys):
    rows = lu_rows()
    rows[1].update(devices=2, scaling=1.6)
    lu.summary(rows)
    head = capsys.readouterr().out.splitlines()[1]
    assert "GPUs" in head and "vs 1 GPU" in head and "panel" not in head


def test_other_summaries(capsys):
    sgemm.summary([dict(op="C=AB", m=4096, n=4096, k=4096, tflops=50.0, cublas_tflops=45.0,
                        ratio=1.11, err=1e-6)])
    transpose.summary([dict(m=4096, n=4096, burst_gbs=3000.0, cupy_burst_gbs=1500.0,
                            burst_speedup=2.0, burst_pct_copy=95.0, ok=True)])
    laswp.summary([dict(m=16384, n=16384, npiv=128, call_ms=0.05, cupy_ms=5.0, speedup=100.0,
                        ok=True, ok_inverse=True)])
    out = capsys.readouterr().out
    assert "4096x4096x4096" in out and "cuBLAS TF/s" in out
    assert "CuPy GB/s" in out and "% of copy" in out
    assert "CuPy ms" in out and "True" in out


def test_plots_write_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    sgemm_rows = [dict(op="C=AB", m=n, n=n, k=n, tflops=40.0, simt_tflops=30.0,
                       cublas_tflops=35.0) for n in (1024, 2048)]
    sgemm_rows += [dict(op="C-=AB", m=16384, n=16384, k=k, tflops=40.0, cublas_tflops=35.0)
                   for k in (64, 128)]
    transpose_rows = [dict(m=n, n=n, burst_gbs=3000.0, cupy_burst_gbs=1500.0,
                           copy_burst_gbs=3100.0) for n in (1000, 4096)]
    laswp_rows = [dict(m=16384, n=16384, npiv=k, call_ms=0.05, graph_ms=0.04, cupy_ms=5.0,
                       gather_scatter_ms=0.5) for k in (128, 256)]
    for module, rows in ((lu, lu_rows()), (sgemm, sgemm_rows), (transpose, transpose_rows),
                         (laswp, laswp_rows)):
        path = common.plot_path(tmp_path / f"{module.__name__}.json", "x")
        module.plot(rows, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_path():
    assert common.plot_path("out/lu.json", "lu") == pathlib.Path("out/lu.png")
    assert common.plot_path(None, "lu") == pathlib.Path("lu.png")


# Each routine's run from parsed options to its files, the measurements made up ----------------

FAKE_ENV = {"device": "a GPU", "compute_capability": "90", "sm_count": 132,
            "cuda_runtime": "13.0", "cupy": "14.0", "date": "today"}


def fake_sgemm(m, n, k, update, variants, repeat, **kw):
    return dict(op="C-=AB" if update else "C=AB", m=m, n=n, k=k, tflops=40.0,
                cublas_tflops=35.0, ratio=1.14, err=1e-6, variant="fp32 dbuf128")


def fake_transpose(m, n, variants, repeat, calls=10):
    return dict(m=m, n=n, burst_gbs=3000.0, cupy_burst_gbs=1500.0, copy_burst_gbs=3100.0,
                burst_speedup=2.0, burst_pct_copy=96.8, call_gbs=2000.0, pct_copy=90.0,
                copy_call_gbs=2200.0, graph_gbs=3000.0, graph_pct_copy=97.0,
                copy_graph_gbs=3090.0, cupy_gbs=1400.0, ok=True, graph_how="graph")


def fake_laswp(m, n, k, repeat, rotate=8, calls=16):
    return dict(m=m, n=n, npiv=k, call_ms=0.05, call_pct_copy=80.0, graph_ms=0.04,
                graph_pct_copy=90.0, cupy_ms=5.0, speedup=100.0, ok=True, ok_inverse=True,
                graph_how="graph", gather_scatter_ms=0.5)


def fake_stack(count, n, dtype, repeat, check):
    return dict(case="stack", dtype=dtype, batch=count, n=n, ours_ms=0.5, torch_ms=3.0,
                vs_torch=6.0, err=1e-3, err_lapack=1e-3)


def fake_one(n, dtype, repeat, check):
    return dict(case="one", dtype=dtype, batch=1, n=n, ours_ms=0.1, cusolver_ms=0.3,
                torch_ms=None, vs_cusolver=3.0, vs_torch=None, err=1e-3, err_lapack=1e-3)


def fake_lu_solve(n, nrhs, dtype, repeat):
    return dict(case="lu_solve", dtype=dtype, n=n, nrhs=nrhs, ours_ms=1.0, vendor_ms=2.0,
                ratio=2.0, err_ours=1e-7, err_vendor=1e-7, vendor="cupyx")


def fake_solve(n, repeat, kappa=None):
    return dict(case="solve", dtype="float64", n=n, nrhs=1, kappa=kappa, ours_ms=100.0,
                vendor_ms=250.0, ratio=2.5, err_ours=1e-17, err_vendor=1e-17,
                path="refined", iterations=2, vendor="cupy.linalg.solve")


@pytest.mark.parametrize("routine, argv", [
    ("lu", []), ("sgemm", ["--sizes", "1024,2048", "--rank-k", "64"]),
    ("transpose", ["--sizes", "1000,4096"]), ("laswp", ["--npiv", "128,256"]),
    ("solve", ["--nrhs", "1,16", "--solve-sizes", "4096", "--kappa", "1e3,1e12"]),
    ("batched", ["--stacks", "1000x8,10x64", "--sizes", "32", "--dtype", "float32"])])
@pytest.mark.parametrize("wide", [False, True])
def test_a_routine_writes_its_json_and_plot(monkeypatch, tmp_path, capsys, routine, argv,
                                            wide):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(common, "environment", lambda: dict(FAKE_ENV))
    monkeypatch.setattr(lu, "environment", lambda: dict(FAKE_ENV))
    monkeypatch.setattr(lu, "run", lambda shapes, *a, **kw: (lu_rows(), []))
    monkeypatch.setattr(sgemm, "measure", fake_sgemm)
    monkeypatch.setattr(transpose, "measure", fake_transpose)
    monkeypatch.setattr(laswp, "measure", fake_laswp)
    monkeypatch.setattr(solve, "measure_lu_solve", fake_lu_solve)
    monkeypatch.setattr(solve, "measure_solve", fake_solve)
    monkeypatch.setattr(batched, "measure_stack", fake_stack)
    monkeypatch.setattr(batched, "measure_one", fake_one)
    path = tmp_path / "res" / f"{routine}.json"
    args = cli.build_parser().parse_args(
        [routine, "--json", str(path), "--plot", "--quiet"] + argv + (["--wide"] if wide else []))
    assert args.module.execute(args) == 0
    doc = json.loads(path.read_text())
    assert doc["routine"] == routine and doc["environment"] == FAKE_ENV and doc["rows"]
    assert path.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr()
    assert f"wrote {path}" in out.out and f"wrote {path.with_suffix('.png')}" in out.out
    assert out.err == ""       # --quiet
