"""LU on several GPUs of one host: the 1-D block column-cyclic layout of Volkov & Demmel.

Column block b (nb columns) lives on device b % P, stored there row-major with the device's
other columns (gpulinalg/_distribution.py): row interchanges stay local, no device sends data
for pivoting.  Step s of the blocked right-looking LU (gpulinalg/_lu.py, one device):

    owner o = s % P   factors panel s on its panel stream (GPU or CPU panel, as `panel=` says)
    every other d     copies the factored panel (rows j0:, pivots, L11^{-1}) from o: receive,
                      a peer copy on d's comm stream (cudaMemcpy2DAsync, unified addressing)
    every d           swaps its columns right of the panel, updates them (U12, A22 -= L21 U12)
                      and swaps its columns left of the panel, on its update stream
    look-ahead        the owner of panel s+1 updates that panel's columns first and factors it
                      on its panel stream while every device updates the rest

All of it is asynchronous: events order the streams, also across devices (a stream may wait
on another device's event); the host waits only where a CPU panel must arrive.  Hazards the
events cover: a receiver's comm stream writes the buffer of parity s % 2 only after its update
stream is done with step s - 2; the owner's update stream swaps rows of a factored panel (the
swaps of later steps, left of their panels) only after every receiver has copied it.

Distribution (`_distribution.panel_schedule`: who does what, in which order) is kept apart
from transport (the ops' `receive`): a one-process-per-GPU version would keep the schedule
and replace `receive` with a send/receive pair.  The CPU tests run this driver on several
NumpyOps ("virtual devices", emulated streams and events) and compare with LAPACK.
"""

import time

import numpy as np

from ._distribution import ColumnCyclic, gather, panel_schedule, scatter
from ._lu import INV_THRESHOLD

F32 = np.float32
_H2D, _D2H, _DEFAULT = 1, 2, 4   # cudaMemcpyKind


# A GPU panel (no host wait) is enqueued as soon as its columns are up to date, and its owner
# updates the rest of its columns only after it (the panel first): a panel that shares the GPU
# with a running SGEMM takes about as long as the SGEMM (its blocks wait for SMs), and the
# other devices wait for it; alone it takes its own time.  (A CPU panel blocks the host, so
# it is factored at the start of its step, after everything before it is enqueued.)
PANEL_FIRST = True


def getrf_multi(devs, panels, dist, nb, lookahead=1, inv_threshold=INV_THRESHOLD,
                panel_first=None, timeline=None):
    """Factor the distributed matrix in place; return (piv, info) as `_lu.getrf`.

    devs[d]: the device steps of device d on its columns (CupyOps or NumpyOps, built with
    cols=dist.bound(d), receive=True); panels[d]: its panel object (CpuPanel or GpuPanel).
    `timeline`, if a list, receives per-device sums (update stream busy, own panels, wall).
    panel_first: None for PANEL_FIRST.
    """
    panel_first = PANEL_FIRST if panel_first is None else panel_first
    m = devs[0].shape[0]
    k = min(m, dist.n)
    blocks = [(j0, min(j0 + nb, k)) for j0 in range(0, k, nb)]
    schedule = panel_schedule(k, nb, dist, lookahead)
    if not blocks:
        devs[0].finish()
        return np.zeros(0, np.int32), 0
    t_start = time.perf_counter()
    origin = [dev.record("update") for dev in devs]
    o = dist.owner(0)
    sent = panels[o].send(devs[o], 0, *blocks[0], after=origin[o])   # panel 0 is final
    unguarded = [[] for _ in devs]   # receivers' copies of d's panels, not yet waited on by d
    early = None                     # the next panel, when already enqueued (panel_first)
    marks = [[] for _ in devs]       # timeline: (step, start, end) events per device
    panel_marks = [[] for _ in devs]
    info = 0
    for s, ops in enumerate(schedule):
        j0, j1 = blocks[s]
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        shipped = nxt is None
        starts = {}
        for d, op, (c0, c1) in ops:
            dev = devs[d]
            if op == "factor":
                res, early = early or panels[d].factor(dev, s, j0, j1, sent, inv_threshold), None
                o, info = d, info or res.info
                panel_marks[d].append((res.recv_start, res.done))
                dev.wait("update", res.done)
            elif op == "receive":
                got = dev.receive(s, j0, j1, devs[o], res.done, res.use_inverse)
                dev.wait("update", got)
                unguarded[o].append(got)
            elif op == "swap_right":
                dev.swap(s, j0, j1, c0, c1, op)
            elif op == "swap_left":
                # These rows of the owner's earlier panels are being copied elsewhere: wait.
                for got in unguarded[d]:
                    dev.wait("update", got)
                unguarded[d].clear()
                dev.swap(s, j0, j1, c0, c1, op)
            else:   # update, update_next, update_rest
                dev.update(s, j0, j1, c0, c1, res.use_inverse, op)
                if not shipped and d == dist.owner(nxt[0]) and op != "update_rest":
                    # The next panel's columns are final: ship / factor it (panel stream).
                    sent = panels[d].send(dev, s + 1, *nxt, after=dev.record("update"))
                    shipped = True
                    if panel_first and not panels[d].host_wait:
                        early = panels[d].factor(dev, s + 1, *nxt, sent, inv_threshold)
                        dev.wait("update", early.done)
            if timeline is not None and d not in starts:
                starts[d] = dev.record("update")
        assert shipped, "the schedule never updated the next panel's columns"
        for d, dev in enumerate(devs):
            end = dev.end_step(s)
            if timeline is not None and d in starts:
                marks[d].append((starts[d], end))
    enqueued = time.perf_counter()
    pivs = [dev.finish() for dev in devs]
    for d, panel in enumerate(panels):   # GPU panels keep LAPACK's info on their device
        final_info = getattr(panel, "final_info", None)
        found = final_info(devs[d]) if final_info is not None else 0
        if found and (not info or found < info):
            info = found
    if timeline is not None:
        timeline.append(_timeline(devs, origin, marks, panel_marks))
        timeline[-1]["enqueue_ms"] = (enqueued - t_start) * 1e3
    # Every device holds every pivot (its own panels' and the received ones): take device 0's.
    piv = pivs[0].astype(np.int64)
    for j0, j1 in blocks:
        piv[j0:j1] += j0
    return piv.astype(np.int32), info


def _timeline(devs, origin, marks, panel_marks):
    """Per device: wall (first to last event), the update stream's busy time (sum over steps
    from its first operation to its end; includes time a starved SGEMM waits for SMs), and
    its own panels' time on the panel stream."""
    rows = []
    for d, dev in enumerate(devs):
        el = dev.elapsed_ms
        rows.append({
            "device": d,
            "wall_ms": el(origin[d], marks[d][-1][1]) if marks[d] else 0.0,
            "update_ms": sum(el(a, b) for a, b in marks[d]),
            "panel_ms": sum(el(a, b) for a, b in panel_marks[d]),
            "panels": len(panel_marks[d])})
    return {"devices": rows}


def factor_host(a, nb, ndev, make_panel, lookahead, inv_threshold):
    """The distributed LU on `ndev` virtual devices (NumpyOps): a is factored in place
    (float32, C-order); returns (piv, info).  The CPU tests' model of factor_devices."""
    from ._lu_ops import NumpyOps
    m, n = a.shape
    dist = ColumnCyclic(n, nb, ndev)
    shares = scatter(a, dist)
    devs = [NumpyOps(x, nb, cols=dist.bound(d), receive=True, npiv=min(m, n))
            for d, x in enumerate(shares)]
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold)
    gather(shares, dist, a)
    return piv, info


def share_bytes(m, n, nb, dist, d):
    """Device bytes device d needs: its columns and its workspace (with the receive buffers)."""
    from ._lu_ops import workspace_bytes
    nd = dist.local_width(d)
    return 4 * m * nd + workspace_bytes(m, nd, nb, receive=True)


def check_memory(cp, m, n, nb, dist, device_ids):
    """MemoryError with the numbers unless every device has room for its share."""
    gib = 2.0 ** 30
    for d, dev_id in enumerate(device_ids):
        need = share_bytes(m, n, nb, dist, d)
        with cp.cuda.Device(dev_id):
            free, total = cp.cuda.Device().mem_info
            free += cp.get_default_memory_pool().free_bytes()
        if need > free:
            raise MemoryError(
                f"LU of a {m}x{n} float32 matrix on {len(device_ids)} GPUs needs "
                f"{need / gib:.2f} GiB on GPU {dev_id} (its {dist.local_width(d)} columns and "
                f"workspace) but only {free / gib:.2f} GiB of {total / gib:.2f} GiB are free")


def factor_devices(src, device_ids, nb, make_panel, lookahead, inv_threshold, precision,
                   timeline=None):
    """The distributed LU on the GPUs `device_ids`.

    src: a NumPy float32 matrix (the result comes back into it: the caller passes its own
    copy or an array it may overwrite) or a C-contiguous float32 CuPy matrix (factored in
    place: its columns are scattered to the devices and gathered back).  Returns (piv, info).
    `timeline`, if a list, receives getrf_multi's record plus the scatter, factorization and
    gather times (the devices are synchronised between the phases to measure them).
    """
    from ._backend import cupy
    from ._lu_ops import CupyOps
    cp = cupy()
    m, n = src.shape
    dist = ColumnCyclic(n, nb, len(device_ids))
    check_memory(cp, m, n, nb, dist, device_ids)
    _enable_peer_access(cp, device_ids)

    def phase():   # timeline only: wait for every device, read the clock
        if timeline is not None:
            for dev_id in device_ids:
                cp.cuda.Device(dev_id).synchronize()
        return time.perf_counter()

    t0 = phase()
    shares = _scatter(cp, src, dist, device_ids)
    t1 = phase()
    devs = []
    for d, (dev_id, x) in enumerate(zip(device_ids, shares)):
        with cp.cuda.Device(dev_id):
            devs.append(CupyOps(x, nb, precision, cols=dist.bound(d), device=dev_id,
                                receive=True, npiv=min(m, n)))
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold, timeline=timeline)
    t2 = phase()
    _gather(cp, src, dist, shares)
    t3 = phase()
    if timeline is not None:
        timeline[-1].update(m=m, n=n, nb=nb, ndev=len(device_ids), scatter_ms=(t1 - t0) * 1e3,
                            factor_ms=(t2 - t1) * 1e3, gather_ms=(t3 - t2) * 1e3)
    return piv, info


def _enable_peer_access(cp, device_ids):
    """Let every pair of devices address each other (direct NVLink/PCIe copies); pairs that
    cannot still copy, staged by the driver."""
    rt = cp.cuda.runtime
    for a in device_ids:
        for b in device_ids:
            if a != b and rt.deviceCanAccessPeer(a, b):
                with cp.cuda.Device(a):
                    try:
                        rt.deviceEnablePeerAccess(b)
                    except rt.CUDARuntimeError as e:   # already enabled: fine
                        if "PeerAccessAlreadyEnabled" not in str(e):
                            raise


def _copy_blocks(cp, dist, d, m, matrix, share, to_share, stream):
    """Copy device d's column blocks between the whole row-major matrix and d's share, one
    2-D copy per block (m rows of the block's width; the copy engines, no kernel):
    to_share=True scatters, False gathers.  `matrix` and `share` are CuPy arrays or
    C-contiguous NumPy arrays (then host<->device copies); enqueued on `stream`."""
    rt = cp.cuda.runtime

    def ptr(x):
        return x.ctypes.data if isinstance(x, np.ndarray) else x.data.ptr

    n, nd = dist.n, share.shape[1]
    host = isinstance(matrix, np.ndarray)
    kind = (_H2D if to_share else _D2H) if host else _DEFAULT
    for c in range(d * dist.nb, n, dist.ndev * dist.nb):
        w = min(dist.nb, n - c)
        l = dist.count_before(d, c)
        a, b = ptr(matrix) + 4 * c, ptr(share) + 4 * l
        dst, dpitch, src, spitch = (b, 4 * nd, a, 4 * n) if to_share else (a, 4 * n, b, 4 * nd)
        rt.memcpy2DAsync(dst, dpitch, src, spitch, 4 * w, m, kind, stream.ptr)


def _scatter(cp, src, dist, device_ids):
    """Each device's columns of src (NumPy, or CuPy on one of the devices), C-contiguous on
    that device; ordered before later work on each device's current stream."""
    m = src.shape[0]
    shares = []
    for d, dev_id in enumerate(device_ids):
        with cp.cuda.Device(dev_id):
            x = cp.empty((m, dist.local_width(d)), np.float32)
            stream = cp.cuda.get_current_stream()
            if not isinstance(src, np.ndarray) and src.device.id != dev_id:
                # Pull over the GPU link on a side stream, after the source's pending work.
                with cp.cuda.Device(src.device.id):    # an event of the source device
                    ready = cp.cuda.get_current_stream().record()
                side = cp.cuda.Stream(non_blocking=True)
                side.wait_event(ready)
                _copy_blocks(cp, dist, d, m, src, x, True, side)
                done = cp.cuda.Event(disable_timing=True)
                done.record(side)
                stream.wait_event(done)
            elif x.size:
                _copy_blocks(cp, dist, d, m, src, x, True, stream)
            shares.append(x)
    return shares


def _gather(cp, dst, dist, shares):
    """dst[:, columns of device d] = shares[d] for every d (the inverse of _scatter), ordered
    before later work on dst's device's current stream (host dst: complete on return)."""
    m = dst.shape[0]
    if isinstance(dst, np.ndarray):
        for d, x in enumerate(shares):
            with cp.cuda.Device(x.device.id):
                stream = cp.cuda.get_current_stream()
                _copy_blocks(cp, dist, d, m, dst, x, False, stream)
                stream.synchronize()
        return
    with cp.cuda.Device(dst.device.id):
        stream = cp.cuda.get_current_stream()
        pending = []
        for d, x in enumerate(shares):
            if x.device.id == dst.device.id:
                _copy_blocks(cp, dist, d, m, dst, x, False, stream)
                continue
            side = cp.cuda.Stream(non_blocking=True)   # pull each share concurrently
            side.wait_event(stream.record())
            _copy_blocks(cp, dist, d, m, dst, x, False, side)
            pending.append(side.record())
        for ev in pending:
            stream.wait_event(ev)
