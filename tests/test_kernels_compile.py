"""CPU tests of the CUDA sources: they ship with the package and compile for sm_90 without
register spills or local memory (ptxas's report: the build's, recorded beside the fatbins,
else a compile here), every instantiation Python launches."""

import importlib
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpulinalg.core import kernels as _kernels

# kernel family (kernels/<family>.cu) -> the module that launches it
# (its KERNEL_NAMES: the instantiations it launches; a dict family -> names where one module
# launches several families)
FAMILIES = {"sgemm": "gpulinalg.gemm.simt", "transpose": "gpulinalg.layout.transpose",
            "laswp": "gpulinalg.layout.laswp", "sgemm_tc": "gpulinalg.gemm.mma",
            "trsm": "gpulinalg.lu.trsm", "sgemm_wgmma": "gpulinalg.gemm.wgmma",
            "graph_io": "gpulinalg.lu.graph", "getrf_leaf_tile": "gpulinalg.lu.panel_gpu",
            "getrf_leaf_row": "gpulinalg.lu.panel_gpu", "finite": "gpulinalg.core.finite",
            "dgemm": "gpulinalg.gemm.dmma", "trsv": "gpulinalg.lu.trsv",
            "getrf_batched": "gpulinalg.lu.batched",
            "getrf_batched_blocked": "gpulinalg.lu.batched_blocked",
            "getrs_batched": "gpulinalg.lu.getrs_batched",
            "permute": "gpulinalg.layout.permute"}
# nvcc architecture per family: wgmma and setmaxnreg exist only for sm_90a.
ARCH = {"sgemm_wgmma": "sm_90a"}
# Known local memory, by name expression, at most (frame, spill stores, spill loads) bytes:
# ptxas's choice moves with its version and flags (-ftz), so these are bounds, not figures.
# The late-publishing 128-wide float row leaf spills 4 bytes under the build's -ftz=true; the
# default table launches the early leaf at that shape, the late one is the reference the tests
# compare it with.
_ESTIMATOR = (32, 32, 32)   # a few hoisted row addresses, loaded once per pass, not per step
KNOWN_SPILLS = {"getrf_leaf_row<float,128,1,0>": (8, 4, 4),
                # one value kept across the IEEE division's slow-path call, once per warp
                "getrs_batched<float,64>": (8, 4, 4),
                # loop counters and offsets of the interchanges and chunks, beside the tile
                # prefetched in registers (64 of them) and 8 right-hand sides' accumulators
                "getrs_tiled<double,8>": (32, 32, 64),
                # one panel row per thread at 128 registers: a few values of the interchanges
                "getrf_batched_blocked<double,16,256,1>": (16, 16, 20),
                "getrf_batched_blocked<double,16,512,1>": (16, 12, 12),
                **{f"gecon_batched<{t},{n}>": _ESTIMATOR
                   for t in ("float", "double") for n in (32, 64, 128)}}
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if shutil.which("/usr/local/cuda/bin/nvcc") else None)
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def test_every_kernel_file_has_a_launcher_and_a_header():
    folder = _kernels.kernel_dir()
    files = sorted(p.stem for p in folder.glob("*.cu"))
    assert "sgemm" in files
    for family in files:
        assert family in FAMILIES, f"kernels/{family}.cu has no launcher module"
        head = (folder / f"{family}.cu").read_text().lstrip()
        assert head.startswith("//") and "bound" in head[:4000].lower(), \
            f"kernels/{family}.cu must open with a header stating what it computes and its bound"


def test_sources_include_only_what_nvrtc_has():
    """CuPy compiles with NVRTC, which has no C++ standard library headers: a kernel file that
    includes <cstdint> compiles with nvcc here and fails on the GPU machine (it did once)."""
    allowed = {"cuda_runtime.h"}
    for path in sorted(_kernels.kernel_dir().glob("*.cu*")):
        for name in re.findall(r'^\s*#include\s*<([^>]+)>', path.read_text(), re.MULTILINE):
            assert name in allowed, f"{path.name} includes <{name}>, which NVRTC lacks"


def test_sources_are_found_and_includes_pasted():
    text = _kernels.source("sgemm")
    assert "sgemm_tiled" in text
    text = _kernels.source("getrf_leaf_row")                    # getrf_common.cuh, and through
    assert "warp_first_max" in text and "named_sync" in text    # it async_copy.cuh, pasted in
    assert text.count("__device__ __forceinline__ unsigned smem_u32(") == 1   # once


def _ptxas_report(family, names, tmp_path):
    src = tmp_path / f"{family}_inst.cu"
    addrs = ",\n    ".join(f"(void*)&{n}" for n in names)
    src.write_text(_kernels.source(family) +
                   f"\nstatic void* const instantiate_all[] = {{\n    {addrs}\n}};\n")
    arch = ARCH.get(family, "sm_90")
    proc = subprocess.run([NVCC, "-std=c++17", f"-arch={arch}", "-cubin", "-Xptxas", "-v",
                           "-o", str(tmp_path / f"{family}.cubin"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report, entry = {}, None
    for line in proc.stderr.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
        elif (m := _FRAME.search(line)) and entry:
            report[entry] = tuple(int(x) for x in m.groups())
    return report


def _built_report(family, names):
    """The build's ptxas report (compiled/<family>.json, build_backend/compile_kernels.py) of
    the sm_90 code of `names`, {symbol: (frame, spill stores, spill loads)}, or None where the
    family was not built from these sources for sm_90."""
    info = _kernels.manifest(family)
    arch = ARCH.get(family, "sm_90")
    if (info is None or info.get("source_sha256") != _kernels.source_hash(family)
            or arch not in info.get("resources", {})):
        return None
    built, symbols = info["resources"][arch], info["symbols"]
    missing = [n for n in names if symbols.get(n) not in built]
    assert not missing, f"the build compiled no sm_90 code for {missing}"
    return {symbols[n]: tuple(built[symbols[n]][:3]) for n in names}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_compiles_for_sm90_without_spills(family, tmp_path):
    """Every instantiation launched compiles for sm_90 without a stack frame or spills: the
    build's own ptxas report where the package was built from these sources (CI), else a
    compile here."""
    if not (_kernels.kernel_dir() / f"{family}.cu").exists():
        pytest.skip(f"kernels/{family}.cu not written yet")
    names = importlib.import_module(FAMILIES[family]).KERNEL_NAMES
    if isinstance(names, dict):
        names = names[family]
    report = _built_report(family, names)
    known = set()
    if report is None:
        report = _compile_report(family, names, tmp_path)
        known = {sym for sym, name in _demangled(report).items()
                 if _within(report[sym], KNOWN_SPILLS.get(name))}
    else:   # the build's report: its symbols name the known exceptions
        info = _kernels.manifest(family)
        known = {info["symbols"][n] for n, v in KNOWN_SPILLS.items()
                 if n in info["symbols"] and _within(report.get(info["symbols"][n]), v)}
    assert len(report) >= len(names), f"ptxas reported {len(report)} of {len(names)} kernels"
    bad = {k: v for k, v in report.items() if any(v) and k not in known}
    assert not bad, f"stack frame / spill stores / spill loads in: {bad}"


def _within(found, bound):
    """Whether ptxas's (frame, stores, loads) is within a KNOWN_SPILLS bound (None: none)."""
    return found is not None and bound is not None and all(
        f <= b for f, b in zip(found, bound))


def _demangled(report):
    """{symbol: its kernel name as KERNEL_NAMES spell it ("getrs_batched<float,64>")} for the
    symbols of a ptxas report (c++filt; {} where it is missing)."""
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if tool is None or not report:
        return {}
    symbols = list(report)
    out = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    names = {}
    for sym, text in zip(symbols, out):
        text = text.split("(")[0].removeprefix("void ").replace(" ", "")
        names[sym] = text
    return names


def _compile_report(family, names, tmp_path):
    """ptxas's report of the names compiled here for sm_90 (a source tree without a build)."""
    if NVCC is None:
        pytest.skip("nvcc not installed and no build of these sources")
    # Split the instantiations over the cores: the SGEMM family has dozens.
    chunks = [names[i::2] for i in range(2)] if len(names) > 8 else [names]
    dirs = [tmp_path / str(i) for i in range(len(chunks))]
    for d in dirs:
        d.mkdir()
    with ThreadPoolExecutor(len(chunks)) as pool:
        parts = list(pool.map(lambda c, d: _ptxas_report(family, c, d), chunks, dirs))
    return {k: v for p in parts for k, v in p.items()}
