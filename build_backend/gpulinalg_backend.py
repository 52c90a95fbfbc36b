"""gpulinalg's PEP 517 build backend: setuptools' own, plus the CUDA kernels compiled ahead of
time (compile_kernels.py beside this file).

- get_requires_for_build_wheel / _editable add the nvidia-cuda-nvcc package where the machine
  has no nvcc of its own (a pip build without isolation uses what the environment holds);
- BuildPy (setuptools' build_py command, named in pyproject.toml's [tool.setuptools.cmdclass])
  compiles the families into the wheel's gpulinalg/kernels/compiled/, or, for an editable
  install, into the source tree's kernels/compiled/ (git-ignored), where the loader
  (gpulinalg/core/kernels.py) finds them beside the sources.  A build that cannot compile a
  family still succeeds: that family is compiled by NVRTC at run time.
"""

import platform
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 -- the hooks not overridden here
from setuptools.command.build_py import build_py

import compile_kernels

# Platforms with an nvidia-cuda-nvcc wheel.
_NVCC_WHEELS = {("linux", "x86_64"), ("linux", "aarch64"), ("win32", "AMD64")}


def _platform():
    return sys.platform, platform.machine()


def _nvcc_requirement():
    """['nvidia-cuda-nvcc'] where no nvcc is installed and the package has a wheel here."""
    if compile_kernels.find_nvcc() is not None or _platform() not in _NVCC_WHEELS:
        return []
    return ["nvidia-cuda-nvcc"]


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _nvcc_requirement()


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + _nvcc_requirement()


class BuildPy(build_py):
    """build_py, then the kernel families compiled beside the package's CUDA sources."""

    def run(self):
        super().run()
        sources = Path(self.get_package_dir("gpulinalg.kernels")).resolve()
        if self.editable_mode:
            out = sources / "compiled"
        else:
            out = Path(self.build_lib, "gpulinalg", "kernels", "compiled")
        compile_kernels.compile_all(out)
