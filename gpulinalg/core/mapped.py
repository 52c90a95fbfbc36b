"""Host-mapped summary words: a kernel reports a call's outcome (a singular matrix, an inf or
NaN in its input) by storing the call's generation number into pinned host memory that every
device addresses directly (unified addressing), so that the host reads it after the stream's
synchronisation without a copy.  Stores of one value need no reset between calls and no
atomics over the bus; a reader compares each word with the generation it passed.
"""

import ctypes
import threading

import numpy as np

from .backend import cupy

WORDS = 2                   # words per call: [0] a singular matrix, [1] an inf or NaN in the input
_PORTABLE_MAPPED = 3        # cudaHostAllocPortable | cudaHostAllocMapped
_local = threading.local()  # one buffer per host thread: its calls never share words


class Flags:
    """WORDS int32 of mapped pinned memory and the generation of the next call."""

    def __init__(self):
        self.ptr = cupy().cuda.runtime.hostAlloc(ctypes.sizeof(ctypes.c_int32) * WORDS,
                                                _PORTABLE_MAPPED)
        self.words = np.ctypeslib.as_array((ctypes.c_int32 * WORDS).from_address(self.ptr))
        self.words[:] = 0
        self.gen = 0

    def __del__(self):
        # A thread's buffer goes with the thread; its calls synchronised before returning, so
        # no kernel still writes to it.
        try:
            cupy().cuda.runtime.freeHost(self.ptr)
        except Exception:       # interpreter shutdown: CuPy may be gone already
            pass

    def next_gen(self):
        """The generation number of a new call (1 .. 2**31 - 1, never 0: the words start at 0)."""
        self.gen = self.gen % (2**31 - 1) + 1
        return self.gen

    def read(self, gen):
        """(singular, nonfinite) of call `gen`; its kernel must have finished."""
        return bool(self.words[0] == gen), bool(self.words[1] == gen)

    def wait(self, gen):
        """read(gen) after the current stream's work, call `gen`'s kernels included, is done."""
        cupy().cuda.get_current_stream().synchronize()
        return self.read(gen)


def flags():
    """This host thread's Flags."""
    f = getattr(_local, "flags", None)
    if f is None:
        f = _local.flags = Flags()
    return f
