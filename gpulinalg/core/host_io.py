"""Host matrices to and from the GPU through pinned staging.

A NumPy matrix lives in pageable memory.  Copied from there as it is (`cupy.asarray`,
`cupy.asnumpy`), the driver stages it page by page: on the H100 host 256 MB went up in 28 ms
and came back in 78 ms (9.5 and 3.4 GB/s; the download also faults in the fresh array's
pages), against 18.5 ms for the LU of that 8192^2 matrix (benchmarks/lu_host.py).  Here host
threads pack a block of rows into one of two pinned buffers (NumPy copies release the GIL)
while the copy engine moves the other; unpacking back is the mirror image.  The packing
converts on the way: any layout and any dtype that NumPy assigns to float32.

One GPU (`upload`, `download`: whole contiguous rows), or the 1-D column-cyclic shares of
several GPUs (`host_transfers`: device d's columns of each block of rows, all GPUs at once).
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..lu.distribution import ColumnCyclic

_H2D, _D2H = 1, 2   # cudaMemcpyKind

# Staging buffers of about this size (two per GPU), packed and unpacked by this many host
# threads per GPU (one thread moved ~13-14 GB/s per GPU on the H200 x4 host, a quarter of
# what PCIe takes).
HOST_STAGING_BYTES = 1 << 28
HOST_PACK_THREADS = 4
# One GPU: smaller buffers, so that packing and copying overlap on matrices of a few hundred
# MB too (each buffer at most this, and the matrix in at least STAGING_PARTS of them), and
# more threads, kept between calls; each thread's share of a buffer at least PACK_MIN_BYTES
# (small copies are bound by handing them out).  Below STAGED_MIN_BYTES the plain copy,
# whose fixed cost is lower.  H100 host (16 cores), benchmarks/lu_host.py, lu_factor of a
# NumPy matrix: 4 / 8 / 12 threads a call 58.5 / 51.4 / 52.8 ms at 8192 (the upload and the
# download alone 29.9 + 25.8 / 13.6 + 22.4 / 12.7 + 16.8; these vary between calls by up to
# 2x), 246 / 199 / 208 at 16384, and 11.5 / 16.7 / 20.6 at 2048 with a pool made per call.
STAGING_BYTES_ONE = 1 << 25
STAGING_PARTS = 8
PACK_THREADS_ONE = 8
PACK_MIN_BYTES = 1 << 20
STAGED_MIN_BYTES = 1 << 22
_POOL = None   # (pool, threads) of the one-GPU transfers (made on first use)


def _column_views(rows, buf, dist, d):
    """(host view, staging view) pairs that cover device d's columns of `rows` (a block of
    rows of the whole host matrix) and the same rows of its share in `buf`: one strided view
    for all the whole groups of P blocks, then the blocks of the last, partial group."""
    p, nb, n = dist.ndev, dist.nb, dist.n
    g, r = n // (p * nb), rows.shape[0]
    pairs = []
    if g:   # a view: the row splits into (group, device, column) without a copy
        pairs.append((rows[:, :g * p * nb].reshape(r, g, p, nb)[:, :, d, :],
                      buf[:, :g * nb].reshape(r, g, nb)))
    for c0, c1 in dist.blocks(d):
        if c0 >= g * p * nb:
            l0 = dist.count_before(d, c0)
            pairs.append((rows[:, c0:c1], buf[:, l0:l0 + c1 - c0]))
    return pairs


def _pack(rows, buf, dist, d, up, pool, threads=HOST_PACK_THREADS):
    """buf = device d's columns of `rows` (up), or the reverse, split by rows over `pool`
    into `threads` parts, each at least PACK_MIN_BYTES of buf."""
    r = rows.shape[0]
    parts = max(1, min(threads, buf.nbytes // PACK_MIN_BYTES))
    step = -(-r // parts)

    def part(i0):
        for h, b in _column_views(rows[i0:i0 + step], buf[i0:i0 + step], dist, d):
            if up:
                b[...] = h
            else:
                h[...] = b

    list(pool.map(part, range(0, r, step)))


def host_transfers(cp, host, dist, device_ids, shares=None):
    """Between a host matrix and the devices' shares, all devices at once (a thread each):
    shares=None allocates the shares and uploads host's columns into them (returns the
    shares); else downloads the shares into host.  Complete on return."""
    m = host.shape[0]
    if shares is None:
        shares = []
        for d, dev_id in enumerate(device_ids):
            with cp.cuda.Device(dev_id):
                shares.append(cp.empty((m, dist.local_width(d)), np.float32))
        up = True
    else:
        up = False
    with ThreadPoolExecutor(len(device_ids)) as pool:
        jobs = [pool.submit(_host_copy, cp, host, dist, d, x, up) for d, x in enumerate(shares)]
        for job in jobs:
            job.result()
    return shares


def _host_copy(cp, host, dist, d, share, up, staging_bytes=HOST_STAGING_BYTES, pool=None,
               threads=HOST_PACK_THREADS):
    """Device d's columns between the host matrix and its share (up: to the device), in
    blocks of rows through two pinned staging buffers: host threads (`pool` of `threads`,
    default a pool made for the call) pack or unpack one (`_pack`) while the copy engine
    moves the other, whole contiguous rows of the share at full PCIe speed.  Complete on
    return."""
    m, nd = share.shape
    if m == 0 or nd == 0:
        return
    if pool is None:
        with ThreadPoolExecutor(threads) as own:
            _staged(cp, host, dist, d, share, up, staging_bytes, own, threads)
    else:
        _staged(cp, host, dist, d, share, up, staging_bytes, pool, threads)


def _staged(cp, host, dist, d, share, up, staging_bytes, pool, threads):
    """_host_copy's pipeline (share not empty)."""
    import cupyx
    m, nd = share.shape
    rows = max(1, min(m, staging_bytes // (4 * nd)))
    chunks = [(r0, min(r0 + rows, m)) for r0 in range(0, m, rows)]
    rt = cp.cuda.runtime
    with cp.cuda.Device(share.device.id):
        # After the caller's current stream: it produced the share (down), or its memory
        # may have been another array's, freed there (up).
        stream = cp.cuda.Stream(non_blocking=True)
        stream.wait_event(cp.cuda.get_current_stream().record())
        bufs = [cupyx.empty_pinned((rows, nd), np.float32) for _ in range(min(2, len(chunks)))]
        moved = [None] * len(bufs)   # the copy that last used each buffer

        def copy(i):
            (r0, r1), buf = chunks[i], bufs[i % len(bufs)]
            dev, nbytes = share.data.ptr + 4 * r0 * nd, 4 * (r1 - r0) * nd
            dst, src = (dev, buf.ctypes.data) if up else (buf.ctypes.data, dev)
            rt.memcpyAsync(dst, src, nbytes, _H2D if up else _D2H, stream.ptr)
            moved[i % len(bufs)] = stream.record()

        if not up:
            copy(0)
        for i, (r0, r1) in enumerate(chunks):
            slot = i % len(bufs)
            if up:
                if moved[slot] is not None:   # its previous upload has left the buffer
                    moved[slot].synchronize()
                _pack(host[r0:r1], bufs[slot][:r1 - r0], dist, d, True, pool, threads)
                copy(i)
            else:
                if i + 1 < len(chunks):       # the other buffer was unpacked last time
                    copy(i + 1)
                moved[slot].synchronize()
                _pack(host[r0:r1], bufs[slot][:r1 - r0], dist, d, False, pool, threads)
        stream.synchronize()


def _one_gpu(m, n):
    """(bytes of each staging buffer, thread pool, its threads) for an m x n matrix on one
    GPU."""
    global _POOL
    if _POOL is None or _POOL[1] != PACK_THREADS_ONE:
        _POOL = (ThreadPoolExecutor(PACK_THREADS_ONE, thread_name_prefix="gpulinalg-host"),
                 PACK_THREADS_ONE)
    return (max(4 * n, min(STAGING_BYTES_ONE, 4 * m * n // STAGING_PARTS)),) + _POOL


# A result that comes back to the host goes into an array whose pages were faulted in while
# the GPU worked (`result_array`), not by the unpacking after it: a fresh array's first
# touch costs the kernel a zeroed page each (8192^2 on the H100 host: the download took 22-34
# ms against 12-22 for the upload of the same bytes).
PREFAULT = True
_PAGE_FLOATS = 1024   # one write per 4 KiB page


def result_array(shape):
    """(out, ready): a new float32 host array for `download(out=)` and a callable that returns
    once its pages are in memory (`prefault`), while the caller's GPU work runs."""
    out = np.empty(shape, np.float32)
    return out, prefault(out)


def prefault(out):
    """Touch every page of the C-contiguous host array `out` (one write each, of 0) on the
    one-GPU pool, in the background (PREFAULT; small arrays are left alone); returns a
    callable that waits for it."""
    if not PREFAULT or out.nbytes < STAGED_MIN_BYTES:
        return lambda: None
    _, pool, threads = _one_gpu(*out.shape)
    flat = out.reshape(-1)
    step = -(-flat.size // (threads * _PAGE_FLOATS)) * _PAGE_FLOATS

    def touch(i0):   # NumPy releases the GIL for the strided fill
        flat[i0:i0 + step:_PAGE_FLOATS] = 0.0

    jobs = [pool.submit(touch, i0) for i0 in range(0, flat.size, step)]
    return lambda: [job.result() for job in jobs]


def upload(cp, host, layout=False):
    """A new float32 CuPy matrix on the current device holding the 2-D host array `host`
    (any layout, any dtype NumPy assigns to float32), C-ordered, or with layout=True
    F-ordered where `host` is (as cupy.asarray keeps it); complete on return."""
    m, n = host.shape
    if layout and host.flags.f_contiguous and not host.flags.c_contiguous:
        return upload(cp, host.T).T
    if 4 * m * n < STAGED_MIN_BYTES:
        return (cp.asarray(host, dtype=np.float32) if layout
                else cp.asarray(np.ascontiguousarray(host, dtype=np.float32)))
    x = cp.empty((m, n), np.float32)
    _host_copy(cp, host, ColumnCyclic(n, n, 1), 0, x, True, *_one_gpu(m, n))
    return x


def download(cp, x, out=None):
    """A NumPy copy of the CuPy array x (C-ordered, F-ordered where x is, as cupy.asnumpy
    gives it), once the caller's current stream has produced it; complete on return.  With
    `out` (a writable float32 NumPy array of x's shape, any strides) x is unpacked straight
    into it, and out is returned."""
    if out is not None:
        if out.shape != x.shape or out.dtype != np.float32:
            raise ValueError(f"out must be float32 of shape {x.shape}, got {out.dtype} "
                             f"{out.shape}")
        if x.ndim != 2 or x.dtype != np.float32 or not x.flags.c_contiguous \
                or x.nbytes < STAGED_MIN_BYTES:   # not the staged path: a copy, then out
            np.copyto(out, download(cp, x))
            return out
    elif x.ndim == 2 and x.flags.f_contiguous and not x.flags.c_contiguous:
        return download(cp, x.T).T
    if x.ndim != 2 or x.dtype != np.float32 or not x.flags.c_contiguous \
            or x.nbytes < STAGED_MIN_BYTES:
        return cp.asnumpy(x)
    m, n = x.shape
    out = np.empty((m, n), np.float32) if out is None else out
    _host_copy(cp, out, ColumnCyclic(n, n, 1), 0, x, False, *_one_gpu(m, n))
    return out
