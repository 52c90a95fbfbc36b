"""Host-mapped summary words (gpulinalg/core/mapped.py): generations never 0 and wrapping
before int32 overflows, a word read as set only for the generation stored in it, one buffer
per host thread.  The CPU stands in for the kernel's stores."""

import ctypes
import threading
import types

from gpulinalg.core import mapped


def fake_cupy(monkeypatch):
    """cupy().cuda.runtime.hostAlloc backed by ctypes buffers (kept alive in `held`)."""
    held = []

    def host_alloc(size, flags):
        assert flags == 3                               # portable | mapped
        buf = ctypes.create_string_buffer(b"\x7f" * size, size)
        held.append(buf)
        return ctypes.addressof(buf)
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(hostAlloc=host_alloc, freeHost=lambda ptr: None)))
    monkeypatch.setattr(mapped, "cupy", lambda: cp)
    monkeypatch.setattr(mapped, "_local", threading.local())
    return held


def test_generations_and_reads(monkeypatch):
    fake_cupy(monkeypatch)
    f = mapped.flags()
    assert f is mapped.flags()                          # one buffer per thread
    assert list(f.words) == [0, 0]                      # zeroed: no generation matches
    g1, g2 = f.next_gen(), f.next_gen()
    assert 0 < g1 < g2
    assert f.read(g2) == (False, False)
    f.words[1] = g2                                     # the kernel's store: non-finite input
    assert f.read(g2) == (False, True) and f.read(g1) == (False, False)
    f.words[0] = g2
    assert f.read(g2) == (True, True)
    f.gen = 2**31 - 1                                   # wraps to 1, never 0 or negative
    assert f.next_gen() == 1


def test_one_buffer_per_thread(monkeypatch):
    held = fake_cupy(monkeypatch)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(mapped.flags())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(f) for f in seen}) == 3 and len(held) == 3
    assert len({f.ptr for f in seen}) == 3
