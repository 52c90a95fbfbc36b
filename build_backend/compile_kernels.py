"""Ahead-of-time compile of gpulinalg's CUDA kernel families; the package build runs it.

Every family kernels/<family>.cu becomes <out>/<family>.fatbin: SASS for each target
architecture this nvcc has and PTX of the newest, for GPUs after it.  nvcc compiles the text
the run-time NVRTC compile of gpulinalg/core/kernels.py compiles (local includes pasted), with
its options (NVCC_OPTIONS there), and instantiates every template its launcher module lists in
KERNEL_NAMES (a tuple of its FAMILY's names, or a dict family -> names).  Beside it,
<out>/<family>.json records the architectures, the options, nvcc's version, the source's hash,
for every name expression its mangled symbol, by which the loader looks kernels up, and ptxas's
resource report of every kernel per architecture (registers, stack frame, spills), which
tests/test_kernels_compile.py checks instead of compiling the families again.

GPULINALG_CUDA_ARCH_LIST names the SASS architectures to build, as TORCH_CUDA_ARCH_LIST does
(e.g. "9.0" or "8.0;9.0", or "sm_90"; default: every architecture of TARGETS); PTX of the
newest of them goes beside.  The architecture-specific families (sm_90a) are built when 9.0
is named.

The symbols come from a second, unoptimised PTX compile of the same text in which a device
variable per name expression holds that kernel's address: its initialiser names the symbol, so
default template arguments and the compiler's own spelling need no demangling.

    python build_backend/compile_kernels.py [OUT]      (OUT: kernels/compiled by default)
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# SASS targets: the architectures the tuning table is made for.  SASS runs on later minor
# versions of its major one (sm_80 code on sm_86 and sm_89, sm_120 on sm_121).
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
# Families with architecture-specific instructions (wgmma, setmaxnreg), compiled for that
# target alone (gpulinalg/gemm/wgmma.py asks get_kernel for arch_specific code).
SPECIFIC = {"sgemm_wgmma": ("sm_90a",)}
FORMAT = 2                      # the layout of <family>.json
ARCH_LIST = "GPULINALG_CUDA_ARCH_LIST"
_MARKER = "gpulinalg_symbol_"
_MARKED = re.compile(_MARKER + r"(\d+)\s*=\s*(?:generic\()?([A-Za-z_$][\w$]*)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def log(line):
    print(line, flush=True)


def find_nvcc():
    """nvcc from PATH, CUDA_HOME / CUDA_PATH, /usr/local/cuda, or the nvidia-cuda-nvcc package
    (nvidia/cu*/bin on sys.path); None where there is none."""
    exe = "nvcc.exe" if os.name == "nt" else "nvcc"
    found = shutil.which(exe)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [Path(h, "bin", exe) for h in homes if h]
    candidates += [p for entry in sys.path if entry and os.path.isdir(entry)
                   for p in sorted(Path(entry).glob(f"nvidia/cu*/bin/{exe}"))]
    return next((str(p) for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)


def nvcc_version(nvcc):
    """'13.0.88' from nvcc --version."""
    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                          check=True).stdout
    match = re.search(r"release [\d.]+, V([\d.]+)", text)
    return match.group(1) if match else text.strip().splitlines()[-1]


def nvcc_targets(nvcc):
    """The SASS architectures this nvcc compiles for ('sm_80', ...)."""
    text = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True,
                          check=True).stdout
    return set(text.split())


def arch_list(text=None):
    """The SASS targets GPULINALG_CUDA_ARCH_LIST names ("8.0;9.0", "sm_90 sm_100", ...), or
    TARGETS where it is unset or empty.  ValueError for a name that is not an architecture."""
    text = os.environ.get(ARCH_LIST, "") if text is None else text
    names = [t for t in re.split(r"[;,\s]+", text.strip()) if t]
    if not names:
        return TARGETS
    archs = []
    for name in names:
        m = re.fullmatch(r"(?:sm_)?(\d+)\.?(\d)?", name.strip().lower().removesuffix("+ptx"))
        if not m:
            raise ValueError(f"{ARCH_LIST}: {name!r} is not an architecture (e.g. 9.0, sm_90)")
        archs.append("sm_" + m.group(1) + (m.group(2) or ""))
    return tuple(sorted(set(archs), key=lambda a: int(a[3:])))


def targets(family, supported, wanted_archs=None):
    """The family's SASS targets among the architectures nvcc supports and the build asks
    for (arch_list)."""
    archs = arch_list() if wanted_archs is None else wanted_archs
    wanted = [t for t in SPECIFIC.get(family, archs) if t.rstrip("a") in archs]
    return [t for t in wanted if t.rstrip("a") in supported]


def describe(root=ROOT):
    """{"options": [...], "families": {family: {"names": [...], "source": text}}} of the
    source tree at `root`, from a fresh interpreter that imports its gpulinalg (NumPy, which
    that needs, is a build requirement)."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--describe",
                           str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    return json.loads(proc.stdout)


def _describe_here(root):
    """describe()'s work, in the interpreter it starts."""
    import importlib
    sys.path.insert(0, str(root))
    from gpulinalg.core import kernels
    names = {}
    for path in sorted((root / "gpulinalg").rglob("*.py")):
        if not re.search(r"^KERNEL_NAMES\s*=", path.read_text(), re.MULTILINE):
            continue
        module_name = ".".join(path.relative_to(root).with_suffix("").parts)
        module = importlib.import_module(module_name)
        listed = module.KERNEL_NAMES
        for family, family_names in (listed.items() if isinstance(listed, dict)
                                     else [(module.FAMILY, listed)]):
            names.setdefault(family, []).extend(family_names)
    families = {path.stem: {"names": list(dict.fromkeys(names.get(path.stem, ()))),
                            "source": kernels.source(path.stem)}
                for path in sorted(kernels.kernel_dir().glob("*.cu"))}
    return {"options": list(kernels.NVCC_OPTIONS), "families": families}


def _gencode(sass, ptx):
    """nvcc's -gencode options: SASS for every target, PTX of `ptx` beside its SASS."""
    flags = []
    for arch in sass:
        virtual = "compute_" + arch[3:]
        code = f"[{arch},{virtual}]" if arch == ptx else arch
        flags.append(f"-gencode=arch={virtual},code={code}")
    return flags


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
        raise RuntimeError((errors or proc.stderr.strip().splitlines() or ["nvcc failed"])[0])
    return proc


def resources(report):
    """{arch: {symbol: [stack frame, spill stores, spill loads, registers]}} from ptxas -v."""
    out, entry = {}, None
    for line in report.splitlines():
        if m := _ENTRY.search(line):
            entry = out.setdefault(m.group(2), {}).setdefault(m.group(1), [0, 0, 0, 0])
        elif entry is not None and (m := _FRAME.search(line)):
            entry[:3] = [int(x) for x in m.groups()]
        elif entry is not None and (m := _REGS.search(line)):
            entry[3] = int(m.group(1))
    return out


def symbols(nvcc, family, job, options, virtual, tmp):
    """{name expression: mangled symbol} from the unoptimised PTX compile with markers."""
    names = job["names"]
    if not names:
        return {}
    marks = "".join(f"__device__ void* {_MARKER}{i} = (void*)&{n};\n"
                    for i, n in enumerate(names))
    src = tmp / f"{family}_symbols.cu"
    src.write_text(job["source"] + "\n" + marks)
    ptx = tmp / f"{family}_symbols.ptx"
    _run([nvcc, *options, "-ptx", f"-arch={virtual}", "-Xcicc", "-O0", "-o", str(ptx),
          str(src)], tmp)
    found = {int(i): symbol for i, symbol in _MARKED.findall(ptx.read_text())}
    missing = [n for i, n in enumerate(names) if i not in found]
    if missing:
        raise RuntimeError(f"no symbol found for {missing[0]}")
    return {n: found[i] for i, n in enumerate(names)}


def fatbin(nvcc, family, job, options, sass, ptx, tmp):
    """Compile the family with every name instantiated; (the path of its fatbin, ptxas's
    resource report: `resources`)."""
    addresses = ",\n    ".join(f"(void*)&{n}" for n in job["names"]) or "nullptr"
    src = tmp / f"{family}.cu"
    src.write_text(job["source"] + "\nstatic void* const gpulinalg_instantiate[] = {\n    "
                   + addresses + "\n};\n")
    out = tmp / f"{family}.fatbin"
    proc = _run([nvcc, *options, "-fatbin", f"--threads={len(sass)}", "-Xptxas", "-v",
                 *_gencode(sass, ptx), "-o", str(out), str(src)], tmp)
    return out, resources(proc.stderr)


def _write(path, data):
    """Replace `path` with `data` (bytes) atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def build_family(nvcc, family, job, options, sass, record, out):
    """Compile one family into out/<family>.fatbin and out/<family>.json; one line of log."""
    start = time.perf_counter()
    ptx = None if family in SPECIFIC else sass[-1]
    with tempfile.TemporaryDirectory(prefix=f"gpulinalg-{family}-") as name:
        tmp = Path(name)
        table = symbols(nvcc, family, job, options, "compute_" + sass[0][3:], tmp)
        path, report = fatbin(nvcc, family, job, options, sass, ptx, tmp)
        binary = path.read_bytes()
    info = dict(record, family=family, sass=sass, symbols=table,
                ptx=None if ptx is None else "compute_" + ptx[3:], resources=report)
    _write(out / f"{family}.fatbin", binary)
    _write(out / f"{family}.json", json.dumps(info, indent=1).encode())
    log(f"gpulinalg kernels: {family:16s} {len(table):3d} kernels  {' '.join(sass)}"
        f"{' + PTX' if ptx else ''}  {len(binary) / 1e6:5.1f} MB  "
        f"{time.perf_counter() - start:4.0f} s")


def _up_to_date(out, family, key):
    try:
        info = json.loads((out / f"{family}.json").read_text())
    except (OSError, ValueError):
        return False
    return info.get("key") == key and (out / f"{family}.fatbin").is_file()


def _remove(out, family):
    for suffix in (".fatbin", ".json"):
        (out / f"{family}{suffix}").unlink(missing_ok=True)


def _jobs(nvcc, described, out):
    """(family, job, sass, record) for every family whose output is missing or stale."""
    version, supported = nvcc_version(nvcc), nvcc_targets(nvcc)
    options = described["options"]
    archs = arch_list()
    for family, job in described["families"].items():
        sass = targets(family, supported, archs)
        source_sha = hashlib.sha256(job["source"].encode()).hexdigest()
        key = hashlib.sha256(json.dumps([FORMAT, source_sha, job["names"], options, sass,
                                         version]).encode()).hexdigest()
        record = {"format": FORMAT, "key": key, "source_sha256": source_sha,
                  "options": options, "nvcc": version}
        if not sass:
            log(f"gpulinalg kernels: {family}: none of "
                f"{', '.join(SPECIFIC.get(family, archs))} is both built ({ARCH_LIST}: "
                f"{' '.join(archs)}) and known to nvcc {version}; NVRTC compiles it at run "
                f"time")
            _remove(out, family)
        elif _up_to_date(out, family, key):
            log(f"gpulinalg kernels: {family:16s} up to date")
        else:
            yield family, job, sass, record


def _run_jobs(nvcc, options, jobs, out):
    """Compile the jobs, the costliest first (about 0.3 GB per nvcc thread); a family that
    fails is left out, with one line that says why."""
    jobs = sorted(jobs, key=lambda j: -len(j[1]["source"]) * max(1, len(j[1]["names"])))
    # Each nvcc compiles its targets in parallel threads; two families at a time keep a
    # small machine busy while one family ends with a single target left.
    workers = max(2, (os.cpu_count() or 1) // len(TARGETS))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(build_family, nvcc, family, job, options, sass, record, out):
                   family for family, job, sass, record in jobs}
        for future in concurrent.futures.as_completed(futures):
            if future.exception() is not None:
                family = futures[future]
                _remove(out, family)
                log(f"gpulinalg kernels: {family}: not compiled ({future.exception()}); "
                    f"NVRTC compiles it at run time")


def compile_all(out, root=ROOT):
    """Compile every family of the source tree at `root` into `out`.  Whatever cannot be
    compiled is left out, one line saying why: the loader compiles it at run time instead."""
    out = Path(out)
    nvcc = find_nvcc()
    if nvcc is None:
        log("gpulinalg kernels: no nvcc found (PATH, CUDA_HOME, /usr/local/cuda, "
            "nvidia-cuda-nvcc); NVRTC compiles the kernels at run time")
        return
    try:
        described = describe(root)
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob("*.json"):
            if stale.stem not in described["families"]:
                _remove(out, stale.stem)
        jobs = list(_jobs(nvcc, described, out))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        log(f"gpulinalg kernels: not compiled ({exc}); NVRTC compiles them at run time")
        return
    _run_jobs(nvcc, described["options"], jobs, out)


def main(argv):
    if argv[:1] == ["--describe"]:
        json.dump(_describe_here(Path(argv[1])), sys.stdout)
        return 0
    compile_all(Path(argv[0]) if argv else ROOT / "kernels" / "compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
