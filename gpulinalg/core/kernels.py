"""The one place where CUDA kernels are found, loaded and compiled.

Each kernel family is one file kernels/<family>.cu.  The package build compiles every family
ahead of time with nvcc (build_backend/compile_kernels.py) into compiled/<family>.fatbin
beside the sources -- SASS for sm_80, sm_90 (sm_90a for the wgmma family), sm_100 and sm_120
where the build's nvcc has them, and PTX of the newest for later GPUs -- and writes
compiled/<family>.json, which maps the name expression of every instantiation its launcher
lists (KERNEL_NAMES) to its mangled symbol.  get_kernel loads a family's fatbin once per device
and looks kernels up by that symbol.

Where the fatbin cannot serve the device (a build without nvcc, an architecture it lacks, a
driver too old for the nvcc that built it, sources edited after an editable install), the
kernel is compiled at run time by CuPy's NVRTC with the same options, one module per
instantiation, cached per process and on disk by CuPy; the first such fallback in a process
is announced by one warning.  Local headers (#include "x.cuh") are pasted into the source, so
that they are part of CuPy's on-disk cache key and nvcc compiles the text NVRTC compiles.
"""

import ctypes
import functools
import hashlib
import importlib.resources
import json
import pathlib
import re
import struct
import threading
import warnings

from . import device
from .backend import cupy

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)

# The language option of every compile.  CuPy's NVRTC compile adds -ftz=true itself, so the
# build's nvcc compiles with both: the shipped code is the code the run-time compile makes.
STD = "--std=c++17"
NVCC_OPTIONS = (STD, "-ftz=true")
COMPILED = "compiled"       # the build's fatbins and symbol maps, beside the sources


def kernel_dir():
    """Folder holding the .cu files: inside the installed package, else the repository's."""
    try:
        installed = importlib.resources.files("gpulinalg") / "kernels"
        if installed.is_dir() and any(p.name.endswith(".cu") for p in installed.iterdir()):
            return pathlib.Path(str(installed))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    repo = pathlib.Path(__file__).resolve().parents[2] / "kernels"
    if repo.is_dir():
        return repo
    raise FileNotFoundError("gpulinalg's CUDA sources (kernels/*.cu) were not found")


def compiled_dir():
    """Folder of the build's compiled/<family>.fatbin and .json: the installed package's, or
    for an editable install the repository's kernels/compiled/ (git-ignored)."""
    return kernel_dir() / COMPILED


@functools.lru_cache(maxsize=None)
def source(family):
    """Text of kernels/<family>.cu with its local includes pasted in."""
    folder = kernel_dir()

    def expand(text, seen):
        def one(match):
            name = match.group(1)
            if name in seen:
                return ""
            seen.add(name)
            return expand((folder / name).read_text(), seen)
        return _INCLUDE.sub(one, text)

    return expand((folder / f"{family}.cu").read_text(), set())


def source_hash(family):
    """sha256 of source(family): the build records it, so that a fatbin older than the
    sources it would stand for is not used."""
    return hashlib.sha256(source(family).encode()).hexdigest()


def arch_option(device_id=None, specific=False):
    """'--gpu-architecture=sm_XY' for the given (default: current) device; 'sm_XYa' with
    specific=True (the architecture-specific features, e.g. Hopper's wgmma and setmaxnreg,
    which exist only for sm_90a; such code runs on that one architecture)."""
    major, minor = device.capability(device_id)
    return f"--gpu-architecture=sm_{major}{minor}{'a' if specific else ''}"


@functools.lru_cache(maxsize=None)
def manifest(family):
    """The build's record of compiled/<family>.fatbin: {"sass": ["sm_80", ...], "ptx":
    "compute_120" or None, "symbols": {name expression: mangled symbol}, "source_sha256",
    "options", "nvcc"}; None where the family was not compiled."""
    try:
        return json.loads((compiled_dir() / f"{family}.json").read_text())
    except (OSError, ValueError):
        return None


def _arch_number(arch):
    """90 for 'sm_90', 'sm_90a' or 'compute_90'."""
    return int(re.sub(r"\D", "", arch))


def covers(info, capability, specific=False):
    """Whether a fatbin with `info`'s architectures runs on a device of `capability` (major,
    minor): SASS of the same major version and no greater minor one (sm_80 code runs on
    sm_86), or PTX of an architecture no newer than the device (the driver compiles it when it
    loads the module); architecture-specific code only on its own architecture (sm_90a)."""
    major, minor = capability
    if specific:
        return f"sm_{major}{minor}a" in info["sass"]
    for arch in info["sass"]:
        number = _arch_number(arch)
        if not arch.endswith("a") and number // 10 == major and number % 10 <= minor:
            return True
    return info.get("ptx") is not None and _arch_number(info["ptx"]) <= 10 * major + minor


def unusable(family, capability, specific=False):
    """Why compiled/<family>.fatbin cannot serve a device of `capability` (major, minor), or
    None when it can."""
    info = manifest(family)
    if info is None or not (compiled_dir() / f"{family}.fatbin").is_file():
        return "this installation has no compiled kernels (it was built without nvcc)"
    if info.get("source_sha256") != source_hash(family):
        return (f"kernels/{family}.cu changed after the kernels were compiled "
                f"(an editable install recompiles them with: pip install -e .)")
    if not covers(info, capability, specific):
        major, minor = capability
        return (f"the compiled kernels have no code for sm_{major}{minor}"
                f"{'a' if specific else ''} (they hold {', '.join(info['sass'])})")
    return None


_announced = []


def _announce(reason):
    """Warn, once per process, that kernels are compiled at run time, and why."""
    if not _announced:
        _announced.append(reason)
        warnings.warn(f"gpulinalg: {reason}; compiling kernels with NVRTC at first use "
                      f"(a minute on a new machine, then cached by CuPy)", RuntimeWarning,
                      stacklevel=2)


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _driver_note(family):
    """' (driver: CUDA 12.8, compiled by nvcc 13.0.88)', where the versions are known."""
    try:
        version = cupy().cuda.runtime.driverGetVersion()
    except Exception:  # noqa: BLE001 -- the note only adds detail to a warning
        return ""
    nvcc = (manifest(family) or {}).get("nvcc", "?")
    return f" (driver: CUDA {version // 1000}.{version % 1000 // 10}, compiled by nvcc {nvcc})"


@functools.lru_cache(maxsize=None)
def _shipped_module(device_id, family, cooperative, specific):
    """compiled/<family>.fatbin loaded on the device (one module per device and family), or
    None, announced, where it cannot serve the device."""
    reason = unusable(family, device.capability(device_id), specific)
    if reason is None:
        cp = cupy()
        try:
            with cp.cuda.Device(device_id):
                # cooperative: its kernels launch with cuLaunchCooperativeKernel
                module = cp.RawModule(path=str(compiled_dir() / f"{family}.fatbin"),
                                      enable_cooperative_groups=cooperative)
                module.compile()   # loads the fatbin: the driver picks this device's code
            return module
        except Exception as exc:  # noqa: BLE001 -- any load failure falls back to NVRTC
            reason = (f"the compiled kernels do not load ({_first_line(exc)})"
                      f"{_driver_note(family)}")
    _announce(reason)
    return None


def _shipped_function(device_id, family, name, cooperative, specific):
    """Kernel `name` from the family's fatbin, or None (announced) where it cannot serve."""
    module = _shipped_module(device_id, family, cooperative, specific)
    if module is None:
        return None
    symbol = manifest(family)["symbols"].get(name)
    if symbol is None:
        _announce(f"{name} is not among the compiled kernels of {family}")
        return None
    try:
        with cupy().cuda.Device(device_id):
            return module.get_function(symbol)
    except Exception as exc:  # noqa: BLE001 -- any load failure falls back to NVRTC
        _announce(f"{name} does not load from the compiled kernels ({_first_line(exc)})"
                  f"{_driver_note(family)}")
        return None


@functools.lru_cache(maxsize=None)
def _nvrtc_module(device_id, family, name_expressions, cooperative, specific):
    cp = cupy()
    with cp.cuda.Device(device_id):
        # CuPy appends its own -arch=sm_XY; NVRTC 13 honours an sm_XYa given beside it
        # (checked: wgmma compiles with both options present, and fails with sm_90 alone).
        opts = (STD, arch_option(device_id, specific))
        # cooperative: its kernels launch with cuLaunchCooperativeKernel (co-resident grid).
        mod = cp.RawModule(code=source(family), options=opts,
                           name_expressions=name_expressions or None,
                           enable_cooperative_groups=cooperative)
        mod.compile()
        return mod


def nvrtc_function(device_id, family, name, cooperative=False, specific=False):
    """Kernel `name` of `family` compiled at run time by NVRTC for the device (cached): the
    fallback of get_kernel, and the reference the shipped code is tested against."""
    names = (name,) if "<" in name else ()
    return _nvrtc_module(device_id, family, names, cooperative, specific).get_function(name)


@functools.lru_cache(maxsize=None)
def _function(device_id, family, name, cooperative, specific):
    kernel = _shipped_function(device_id, family, name, cooperative, specific)
    if kernel is None:
        kernel = nvrtc_function(device_id, family, name, cooperative, specific)
    return kernel


_SMEM_DEFAULT = 48 * 1024


@functools.lru_cache(maxsize=None)
def _function_smem(device_id, family, name, cooperative, specific, smem):
    kernel = _function(device_id, family, name, cooperative, specific)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem  # opt in beyond the 48 KiB default
    return kernel


def get_kernel(family, name, cooperative=False, dynamic_smem=0, arch_specific=False):
    """Kernel `name` (a C++ template instantiation or extern "C" name) of `family` for the
    current device: from the package's compiled fatbin, else compiled by NVRTC (cached: this
    sits on the launch path).  cooperative=True: every launch is a cooperative launch
    (grid-wide barriers; the grid must fit on the device).  dynamic_smem: the bytes of dynamic
    shared memory the launches will ask for; beyond 48 KiB the kernel is opted in once.
    arch_specific: code for sm_XYa (see arch_option).  A cupy.RawKernel: its `.kernel.ptr` is
    the CUfunction that Launcher launches."""
    dev = cupy().cuda.runtime.getDevice()
    if dynamic_smem > _SMEM_DEFAULT:
        return _function_smem(dev, family, name, cooperative, arch_specific, dynamic_smem)
    return _function(dev, family, name, cooperative, arch_specific)


class Launcher:
    """A kernel launched through cuLaunchKernel with its arguments packed by `struct`.

    CuPy's launch converts every scalar argument on every call (a NumPy view and a C box per
    scalar), most of the host time of a small call; here one `struct.pack_into` writes the
    whole parameter block, and cuLaunchKernel gets the addresses of its fields (`kernelParams`,
    fixed per launcher and thread).  `fmt` lists the kernel's parameters in order ('i' int,
    'I' unsigned, 'q' long long, 'f' float, 'd' double, 'P' pointer), native alignment being the kernel's
    parameter layout; `shared_mem`: the launch's dynamic shared memory bytes (a kernel asking
    beyond 48 KiB must have been opted in, as get_kernel's dynamic_smem does); `cooperative`:
    launch with cuLaunchCooperativeKernel (a kernel of get_kernel(..., cooperative=True),
    whose blocks must all be co-resident).  Called as
    launcher(grid, block, *args) with 3-tuples grid and block and pointers as integers
    (`array.data.ptr`), on CuPy's current stream.  Where this CuPy exposes no CUfunction
    handle, CuPy's own launch is used."""

    _SCALAR = {"i": "int32", "I": "uint32", "q": "int64", "f": "float32", "d": "float64",
               "P": "uint64"}

    def __init__(self, kernel, fmt, shared_mem=0, cooperative=False):
        self.kernel, self.pack = kernel, struct.Struct("@" + fmt)
        self.types = [self._SCALAR[c] for c in fmt]
        # each parameter's offset in the block: the packed size up to it, less its own size
        self.offsets = [struct.calcsize("@" + fmt[:i + 1]) - struct.calcsize("@" + c)
                        for i, c in enumerate(fmt)]
        self.smem = shared_mem
        self.func = getattr(getattr(kernel, "kernel", None), "ptr", None)   # CUfunction
        self._local = threading.local()
        if self.func is not None:
            cp = cupy()
            self.launch, self.stream = cp.cuda.driver.launchKernel, cp.cuda.get_current_stream
            if cooperative:   # the same arguments but the `extra` list, which it has not
                coop = cp.cuda.driver.launchCooperativeKernel
                self.launch = lambda f, gx, gy, gz, bx, by, bz, smem, st, params, _: coop(
                    f, gx, gy, gz, bx, by, bz, smem, st, params)

    def _blocks(self):
        """(parameter block, address of the pointers to its fields) of this thread.  The
        driver copies the parameters during the call, so one block per thread serves every
        launch."""
        params = ctypes.create_string_buffer(max(self.pack.size, 1))
        base = ctypes.addressof(params)
        fields = (ctypes.c_void_p * max(len(self.offsets), 1))(*(base + o for o in self.offsets))
        self._local.blocks = (params, ctypes.addressof(fields), fields)
        return self._local.blocks

    def __call__(self, grid, block, *args):
        if self.func is None:
            import numpy as np
            self.kernel(grid, block, tuple(getattr(np, t)(x) for t, x in zip(self.types, args)),
                        shared_mem=self.smem)
            return
        try:
            params, fields, _ = self._local.blocks
        except AttributeError:
            params, fields, _ = self._blocks()
        self.pack.pack_into(params, 0, *args)
        self.launch(self.func, *grid, *block, self.smem, self.stream().ptr, fields, 0)
