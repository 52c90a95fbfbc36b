"""The column-cyclic shares of a matrix to and from the GPUs of the distributed LU.

From and to a host matrix (`host_transfers`): device d's columns of each block of rows
go through two pinned buffers of its own (core/host_io.staged_copy: host threads pack one
while the copy engine moves the other), all devices at once; complete on return.

From a GPU matrix (`scatter_from_gpu`): 2-D copies of whole column blocks (the copy
engines, peer to peer) on side streams of each device, chunk by chunk
(`ColumnCyclic.chunks`: 1, 1, 2, 4, ... blocks), so that the factorization starts with the
first chunks; the rest is enqueued only after step 0's panel copies (`pipelined_upload`),
which would otherwise wait behind it.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import tuning
from ..core.host_io import staged_copy
from .distribution import column_views

_DEFAULT = 4   # cudaMemcpyKind: unified addressing finds both devices


def host_transfers(cp, host, dist, device_ids, shares=None, table=None, dtype=np.float32):
    """Between a host matrix and the devices' shares, all devices at once (a thread each):
    shares=None allocates the shares (of `dtype`) and uploads host's columns into them
    (returns the shares); else downloads the shares into host.  `table`: the tuning table
    (`staging_bytes_multi`, `pack_threads_multi`, `pack_min_bytes`), default the one in
    force.  Complete on return."""
    table = tuning.current() if table is None else table
    m = host.shape[0]
    up = shares is None
    if up:
        shares = allocate_shares(cp, m, dist, device_ids, dtype)
    with ThreadPoolExecutor(len(device_ids)) as pool:
        jobs = [pool.submit(_share_copy, cp, host, dist, d, x, up, table)
                for d, x in enumerate(shares)]
        for job in jobs:
            job.result()
    return shares


def _share_copy(cp, host, dist, d, share, up, table):
    """Device d's columns between the host matrix and its share (up: to the device), packed
    by a pool of its own."""
    if share.size == 0:
        return
    threads = table.pack_threads_multi

    def views(rows, buf):
        return column_views(rows, buf, dist, d)

    with ThreadPoolExecutor(threads) as pool:
        staged_copy(cp, host, share, up, views, table.staging_bytes_multi, pool, threads,
                    table.pack_min_bytes)


def pipelined_upload(chunks, event, copy, first):
    """One device's pipelined upload: per chunk i an event ev = event() and copy(i, chunk, ev)
    (the chunk's copies, then ev recorded behind them), at once for the first `first`
    chunks (0: all), by the returned rest() for the others.  Returns (arrivals [(c0, c1, ev)]
    as getrf_multi takes them, rest)."""
    got, later = [], []
    for i, chunk in enumerate(chunks):
        ev = event()
        got.append((chunk[0][0], chunk[-1][1], ev))
        if first and i >= first:
            later.append((i, chunk, ev))
        else:
            copy(i, chunk, ev)

    def rest():
        for job in later:
            copy(*job)
    return got, rest


def allocate_shares(cp, m, dist, device_ids, dtype):
    """Each device's share of an m-row matrix: m x dist.local_width(d) of `dtype` (C-ordered,
    any content), on that device."""
    shares = []
    for d, dev_id in enumerate(device_ids):
        with cp.cuda.Device(dev_id):
            shares.append(cp.empty((m, dist.local_width(d)), dtype))
    return shares


def scatter_from_gpu(cp, src, dist, device_ids, table, shares=None, ready=None):
    """Each device's columns of src (CuPy, on any device), C-contiguous on that device,
    copied chunk by chunk (`pipelined_upload`, the first table.scatter_first chunks at once)
    on table.scatter_streams side streams of the device.  shares: the devices' shares to fill
    (default: allocated here).  ready: None (every column of src may be read once the
    source's current stream reaches this point) or ready(c0, c1), an event of src's device
    after which its columns [c0, c1) may be read (a source still being written, column block
    by column block).  Returns (shares, arrivals, starts, rest): arrivals[d] the (c0, c1,
    event) of each chunk, as getrf_multi takes them; rest() enqueues the deferred chunks
    (getrf_multi's `received`); starts[d] an event before the first copy (timeline)."""
    m = src.shape[0]
    if shares is None:
        shares = allocate_shares(cp, m, dist, device_ids, src.dtype)
    if ready is None:
        with cp.cuda.Device(src.device.id):    # an event of the source device
            at = cp.cuda.get_current_stream().record()
        ready = lambda c0, c1: at   # noqa: E731
    arrivals, starts, rests = [], [], []
    for d, (dev_id, x) in enumerate(zip(device_ids, shares)):
        with cp.cuda.Device(dev_id):
            # consecutive chunks alternate between the side streams: several copy engines pull
            sides = [cp.cuda.Stream(non_blocking=True) for _ in range(table.scatter_streams)]
            chunks = dist.chunks(d)
            if chunks:   # the timeline's start: once the first chunk may be read
                sides[0].wait_event(ready(chunks[0][0][0], chunks[0][-1][1]))
            starts.append(sides[0].record())
            got, rest = pipelined_upload(chunks, cp.cuda.Event,
                                         _chunk_copier(cp, dist, d, dev_id, src, x, sides,
                                                       ready),
                                         table.scatter_first)
            arrivals.append(got)
            rests.append(rest)
    # The deferred chunks go to the last device first: the copies out of the source's device
    # run one after another, and device d updates steps 0 .. d - 2 on all its columns before
    # its first panel (step d), so the last device needs its columns soonest.
    return shares, arrivals, starts, lambda: [rest() for rest in reversed(rests)]


def _chunk_copier(cp, dist, d, dev_id, src, share, sides, ready):
    """copy(i, chunk, ev) for pipelined_upload: device d's chunk i on side stream
    i % len(sides), once src's columns of the chunk are ready."""
    def copy(i, chunk, ev):
        side = sides[i % len(sides)]
        with cp.cuda.Device(dev_id):
            side.wait_event(ready(chunk[0][0], chunk[-1][1]))
            _copy_blocks(cp, dist, d, chunk, src, share, side)
            ev.record(side)
    return copy


def _copy_blocks(cp, dist, d, blocks, matrix, share, stream):
    """Copy the column blocks `blocks` (global ranges, device d's) of the whole row-major
    matrix into d's share, one 2-D copy per block (all rows of the block's width; the copy
    engines, no kernel; both CuPy arrays, on any devices); enqueued on `stream`."""
    m, n, nd, size = matrix.shape[0], dist.n, share.shape[1], matrix.itemsize
    for c0, c1 in blocks:
        src = matrix.data.ptr + size * c0
        dst = share.data.ptr + size * dist.count_before(d, c0)
        cp.cuda.runtime.memcpy2DAsync(dst, size * nd, src, size * n, size * (c1 - c0), m,
                                      _DEFAULT, stream.ptr)
