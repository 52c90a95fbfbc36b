"""Markers: `gpu` skips without CuPy + a CUDA device; `multi_gpu(n)` needs n devices.

GPULINALG_SHARD=k/N keeps every N-th collected test from the k-th on (0 <= k < N), so that
N pytest processes share one GPU (benchmarks/gpu_check.sh runs the GPU suite that way).

GPULINALG_TEST_TUNING="FIELD=value[;FIELD=value...]" runs every test under a Tuning table with
those fields replaced (gpulinalg.tuning.override): the suite checks a candidate table before
it becomes the default."""

import os
import zlib

import numpy as np
import pytest

from gpulinalg.core.backend import device_count, gpu_available


def _shard():
    """(k, N) from GPULINALG_SHARD=k/N, or None."""
    spec = os.environ.get("GPULINALG_SHARD", "")
    if not spec:
        return None
    k, _, n = spec.partition("/")
    k, n = int(k), int(n)
    if not 0 <= k < n:
        raise ValueError(f"GPULINALG_SHARD={spec!r}: expected k/N with 0 <= k < N")
    return k, n


def pytest_collection_modifyitems(config, items):
    shard = _shard()
    if shard is not None:
        k, n = shard
        kept = items[k::n]
        config.hook.pytest_deselected(items=[it for i, it in enumerate(items) if i % n != k])
        items[:] = kept
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


@pytest.fixture(autouse=True)
def _tuning_from_environment():
    spec = os.environ.get("GPULINALG_TEST_TUNING", "")
    if not spec:
        yield
        return
    import dataclasses
    from gpulinalg import tuning
    from gpulinalg.bench.common import parse_tuning
    fields = {}
    for item in filter(None, spec.split(";")):
        name, values = parse_tuning(item)
        fields[name] = values[0]
    with tuning.override(dataclasses.replace(tuning.current(), **fields)):
        yield


@pytest.fixture
def rng(request):
    """A seeded generator, different per test but reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def cp():
    """The cupy module (GPU tests only)."""
    import cupy
    return cupy
