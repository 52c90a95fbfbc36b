"""Markers: `gpu` skips without CuPy + a CUDA device; `multi_gpu(n)` needs n devices."""

import zlib

import numpy as np
import pytest

from gpulinalg._backend import device_count, gpu_available


def pytest_collection_modifyitems(config, items):
    have_gpu = gpu_available()
    ndev = device_count()
    for item in items:
        if "gpu" in item.keywords and not have_gpu:
            item.add_marker(pytest.mark.skip(reason="needs CuPy and a CUDA device"))
        mark = item.get_closest_marker("multi_gpu")
        if mark is not None:
            need = mark.args[0] if mark.args else 2
            if ndev < need:
                item.add_marker(pytest.mark.skip(reason=f"needs {need} CUDA devices"))


@pytest.fixture
def rng(request):
    """A seeded generator, different per test but reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def cp():
    """The cupy module (GPU tests only)."""
    import cupy
    return cupy
