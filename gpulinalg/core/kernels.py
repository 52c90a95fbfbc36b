"""The one place where CUDA sources are found and compiled.

Each kernel family is one file kernels/<family>.cu.  A family is compiled with CuPy's RawModule
once per (device, family, template instantiations, options) and cached; kernels are then looked
up by name.  Local headers (#include "x.cuh") are pasted into the text so they are part of
CuPy's on-disk cache key.
"""

import ctypes
import functools
import importlib.resources
import pathlib
import re
import struct
import threading

from .backend import cupy

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.MULTILINE)


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


def arch_option(device_id=None, specific=False):
    """'--gpu-architecture=sm_XY' for the given (default: current) device; 'sm_XYa' with
    specific=True (the architecture-specific features, e.g. Hopper's wgmma and setmaxnreg,
    which exist only for sm_90a; such code runs on that one architecture)."""
    cp = cupy()
    dev = cp.cuda.Device(device_id) if device_id is not None else cp.cuda.Device()
    major, minor = divmod(int(dev.compute_capability), 10)
    return f"--gpu-architecture=sm_{major}{minor}{'a' if specific else ''}"


@functools.lru_cache(maxsize=None)
def _module(device_id, family, name_expressions, options, cooperative, specific):
    cp = cupy()
    with cp.cuda.Device(device_id):
        # CuPy appends its own -arch=sm_XY; NVRTC 13 honours an sm_XYa given beside it
        # (checked: wgmma compiles with both options present, and fails with sm_90 alone).
        opts = ("--std=c++17", arch_option(device_id, specific)) + options
        # cooperative: its kernels launch with cuLaunchCooperativeKernel (co-resident grid).
        mod = cp.RawModule(code=source(family), options=opts,
                           name_expressions=name_expressions or None,
                           enable_cooperative_groups=cooperative)
        mod.compile()
        return mod


@functools.lru_cache(maxsize=None)
def _function(device_id, family, name, options, cooperative, specific):
    names = (name,) if "<" in name else ()
    return _module(device_id, family, names, options, cooperative,
                   specific).get_function(name)


_SMEM_DEFAULT = 48 * 1024


@functools.lru_cache(maxsize=None)
def _function_smem(device_id, family, name, options, cooperative, specific, smem):
    kernel = _function(device_id, family, name, options, cooperative, specific)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem  # opt in beyond the 48 KiB default
    return kernel


def get_kernel(family, name, options=(), cooperative=False, dynamic_smem=0,
               arch_specific=False):
    """Kernel `name` (a C++ template instantiation or extern "C" name) of `family`, compiled
    for the current device (cached: this sits on the launch path).  cooperative=True: every
    launch is a cooperative launch (grid-wide barriers; the grid must fit on the device).
    dynamic_smem: the bytes of dynamic shared memory the launches will ask for; beyond 48 KiB
    the kernel is opted in once.  arch_specific: compile for sm_XYa (see arch_option)."""
    dev = cupy().cuda.runtime.getDevice()
    if dynamic_smem > _SMEM_DEFAULT:
        return _function_smem(dev, family, name, tuple(options), cooperative, arch_specific,
                              dynamic_smem)
    return _function(dev, family, name, tuple(options), cooperative, arch_specific)


class Launcher:
    """A kernel launched through cuLaunchKernel with its arguments packed by `struct`.

    CuPy's launch converts every scalar argument on every call (a NumPy view and a C box per
    scalar), most of the host time of a small call; here one `struct.pack_into` writes the
    whole parameter block, and cuLaunchKernel gets the addresses of its fields (`kernelParams`,
    fixed per launcher and thread).  `fmt` lists the kernel's parameters in order ('i' int,
    'I' unsigned, 'q' long long, 'f' float, 'P' pointer), native alignment being the kernel's
    parameter layout; `shared_mem`: the launch's dynamic shared memory bytes (a kernel asking
    beyond 48 KiB must have been opted in, as get_kernel's dynamic_smem does); `cooperative`:
    launch with cuLaunchCooperativeKernel (a kernel of get_kernel(..., cooperative=True),
    whose blocks must all be co-resident).  Called as
    launcher(grid, block, *args) with 3-tuples grid and block and pointers as integers
    (`array.data.ptr`), on CuPy's current stream.  Where this CuPy exposes no CUfunction
    handle, CuPy's own launch is used."""

    _SCALAR = {"i": "int32", "I": "uint32", "q": "int64", "f": "float32", "P": "uint64"}

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
