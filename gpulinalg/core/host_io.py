"""Host matrices to and from the GPU through pinned staging.

A NumPy matrix lives in pageable memory; copied from there as it is (`cupy.asarray`,
`cupy.asnumpy`), the driver stages it page by page at a fraction of PCIe's rate.  Here host
threads pack a block of rows into one of two pinned buffers (NumPy copies release the GIL)
while the copy engine moves the other; unpacking back is the mirror image.  The packing
converts on the way: any layout, and any dtype that NumPy assigns to the device matrix's
(float32, float64 or complex; core/element.py's policy picks it).

`upload` and `download` move a whole matrix to and from one GPU; `staged_copy` is the
pipeline they run, which the LU on several GPUs also runs for each device's columns
(gpulinalg/lu/transfers.py).  Sizes, threads and cut-overs come from the tuning table
(gpulinalg/tuning.py: `staging_bytes_one`, `staging_parts`, `pack_threads_one`,
`pack_min_bytes`, `staged_min_bytes`), read once per transfer.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import tuning

_H2D, _D2H = 1, 2     # cudaMemcpyKind
_PAGE_BYTES = 4096    # a host page
_POOL = None          # (pool, threads) of the one-GPU transfers, made on first use


def whole_rows(rows, buf):
    """The views of a transfer of whole rows: the host rows and their staging rows."""
    return [(rows, buf)]


def _pack(rows, buf, views, up, pool, threads, min_bytes):
    """buf = the host rows `rows` (up), or the reverse, through the views views(rows, buf),
    split by rows over `pool` into at most `threads` parts of at least min_bytes of buf."""
    r = rows.shape[0]
    parts = max(1, min(threads, buf.nbytes // min_bytes))
    step = -(-r // parts)

    def part(i0):
        for h, b in views(rows[i0:i0 + step], buf[i0:i0 + step]):
            if up:
                b[...] = h
            else:
                h[...] = b

    list(pool.map(part, range(0, r, step)))


def staged_copy(cp, host, dev, up, views, buffer_bytes, pool, threads, min_bytes):
    """Between the host matrix `host` and the C-contiguous CuPy matrix `dev` (up: to
    the device), in blocks of rows through two pinned buffers of about `buffer_bytes`: the
    `threads` threads of `pool` pack or unpack one (`_pack`, parts of at least `min_bytes`)
    while the copy engine moves the other, whole contiguous rows of `dev` at full PCIe speed.
    views(rows, buf): (host view, staging view) pairs that cover the staging rows `buf` of
    dev with the same rows `rows` of host (`whole_rows` where host and dev have the same
    columns).  Complete on return."""
    m, nd = dev.shape
    if m == 0 or nd == 0:
        return
    import cupyx
    size = dev.itemsize
    rows = max(1, min(m, buffer_bytes // (size * nd)))
    chunks = [(r0, min(r0 + rows, m)) for r0 in range(0, m, rows)]
    rt = cp.cuda.runtime
    with cp.cuda.Device(dev.device.id):
        # After the caller's current stream: it produced dev (down), or dev's memory may
        # have been another array's, freed there (up).
        stream = cp.cuda.Stream(non_blocking=True)
        stream.wait_event(cp.cuda.get_current_stream().record())
        bufs = [cupyx.empty_pinned((rows, nd), dev.dtype) for _ in range(min(2, len(chunks)))]
        moved = [None] * len(bufs)   # the copy that last used each buffer

        def copy(i):
            (r0, r1), buf = chunks[i], bufs[i % len(bufs)]
            ptr, nbytes = dev.data.ptr + size * r0 * nd, size * (r1 - r0) * nd
            dst, src = (ptr, buf.ctypes.data) if up else (buf.ctypes.data, ptr)
            rt.memcpyAsync(dst, src, nbytes, _H2D if up else _D2H, stream.ptr)
            moved[i % len(bufs)] = stream.record()

        if not up:
            copy(0)
        for i, (r0, r1) in enumerate(chunks):
            slot = i % len(bufs)
            if up:
                if moved[slot] is not None:   # its previous upload has left the buffer
                    moved[slot].synchronize()
                _pack(host[r0:r1], bufs[slot][:r1 - r0], views, True, pool, threads,
                      min_bytes)
                copy(i)
            else:
                if i + 1 < len(chunks):       # the other buffer was unpacked last time
                    copy(i + 1)
                moved[slot].synchronize()
                _pack(host[r0:r1], bufs[slot][:r1 - r0], views, False, pool, threads,
                      min_bytes)
        stream.synchronize()


def _one_gpu(m, n, size, table):
    """(bytes of each staging buffer, thread pool, its threads) for an m x n matrix of
    elements of `size` bytes on one
    GPU: at least one row a buffer, else at most staging_bytes_one and a staging_parts-th
    of the matrix, so that packing and copying overlap on matrices of a few hundred MB too.
    The pool is kept between calls."""
    global _POOL
    threads = table.pack_threads_one
    if _POOL is None or _POOL[1] != threads:
        _POOL = (ThreadPoolExecutor(threads, thread_name_prefix="gpulinalg-host"), threads)
    return (max(size * n, min(table.staging_bytes_one, size * m * n // table.staging_parts)),
            ) + _POOL


def _staged_one_gpu(cp, host, dev, up, table):
    """staged_copy of a whole matrix on one GPU, with the one-GPU staging of `table`."""
    m, n = dev.shape
    buffer_bytes, pool, threads = _one_gpu(m, n, dev.itemsize, table)
    staged_copy(cp, host, dev, up, whole_rows, buffer_bytes, pool, threads,
                table.pack_min_bytes)


def result_array(shape, dtype):
    """(out, ready): a new host array for `download(out=)` and a callable that returns once
    its pages are in memory (`prefault`), while the caller's GPU work runs."""
    out = np.empty(shape, dtype)
    return out, prefault(out)


def prefault(out):
    """Touch every page of the C-contiguous host array `out` (one write each, of 0) on the
    one-GPU pool, in the background; returns a callable that waits for it.  A result is then
    unpacked into pages already in memory: a fresh array's first touch costs the kernel a
    zeroed page each, which would slow the download.  Arrays below staged_min_bytes (the
    plain copy's) are left alone."""
    table = tuning.current()
    if out.nbytes < table.staged_min_bytes:
        return lambda: None
    _, pool, threads = _one_gpu(*out.shape, out.itemsize, table)
    flat = out.reshape(-1)
    page = max(1, _PAGE_BYTES // out.itemsize)   # elements of one page
    step = -(-flat.size // (threads * page)) * page

    def touch(i0):   # NumPy releases the GIL for the strided fill
        flat[i0:i0 + step:page] = 0

    jobs = [pool.submit(touch, i0) for i0 in range(0, flat.size, step)]
    return lambda: [job.result() for job in jobs]


def upload(cp, host, layout=False, dtype=np.float32):
    """A new CuPy matrix of `dtype` on the current device holding the 2-D host array `host`
    (any layout, any dtype NumPy assigns to `dtype`), C-ordered, or with layout=True
    F-ordered where `host` is (as cupy.asarray keeps it); complete on return.  Below
    staged_min_bytes the plain copy, whose fixed cost is lower."""
    m, n = host.shape
    if layout and host.flags.f_contiguous and not host.flags.c_contiguous:
        return upload(cp, host.T, dtype=dtype).T
    table = tuning.current()
    if np.dtype(dtype).itemsize * m * n < table.staged_min_bytes:
        return (cp.asarray(host, dtype=dtype) if layout
                else cp.asarray(np.ascontiguousarray(host, dtype=dtype)))
    x = cp.empty((m, n), dtype)
    _staged_one_gpu(cp, host, x, True, table)
    return x


def download(cp, x, out=None):
    """A NumPy copy of the CuPy array x (C-ordered, F-ordered where x is, as cupy.asnumpy
    gives it), once the caller's current stream has produced it; complete on return.  With
    `out` (a writable NumPy array of x's shape and dtype, any strides) x is unpacked straight
    into it, and out is returned."""
    table = tuning.current()
    plain = (x.ndim != 2 or not x.flags.c_contiguous
             or x.nbytes < table.staged_min_bytes)   # not the staged path
    if out is not None:
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError(f"out must be {x.dtype} of shape {x.shape}, got {out.dtype} "
                             f"{out.shape}")
        if plain:   # a copy, then out
            np.copyto(out, download(cp, x))
            return out
    elif x.ndim == 2 and x.flags.f_contiguous and not x.flags.c_contiguous:
        return download(cp, x.T).T
    if plain:
        return cp.asnumpy(x)
    out = np.empty(x.shape, x.dtype) if out is None else out
    _staged_one_gpu(cp, out, x, False, table)
    return out
