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

import numpy as np

from ._distribution import ColumnCyclic, gather, panel_schedule, scatter
from ._lu import INV_THRESHOLD

F32 = np.float32


def getrf_multi(devs, panels, dist, nb, lookahead=1, inv_threshold=INV_THRESHOLD):
    """Factor the distributed matrix in place; return (piv, info) as `_lu.getrf`.

    devs[d]: the device steps of device d on its columns (CupyOps or NumpyOps, built with
    cols=dist.bound(d), receive=True); panels[d]: its panel object (CpuPanel or GpuPanel).
    """
    m = devs[0].shape[0]
    k = min(m, dist.n)
    blocks = [(j0, min(j0 + nb, k)) for j0 in range(0, k, nb)]
    schedule = panel_schedule(k, nb, dist, lookahead)
    if not blocks:
        devs[0].finish()
        return np.zeros(0, np.int32), 0
    origin = [dev.record("update") for dev in devs]
    o = dist.owner(0)
    sent = panels[o].send(devs[o], 0, *blocks[0], after=origin[o])   # panel 0 is final
    unguarded = [[] for _ in devs]   # receivers' copies of d's panels, not yet waited on by d
    info = 0
    for s, ops in enumerate(schedule):
        j0, j1 = blocks[s]
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        shipped = nxt is None
        for d, op, (c0, c1) in ops:
            dev = devs[d]
            if op == "factor":
                o, res = d, panels[d].factor(dev, s, j0, j1, sent, inv_threshold)
                info = info or res.info
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
        assert shipped, "the schedule never updated the next panel's columns"
        for dev in devs:
            dev.end_step(s)
    pivs = [dev.finish() for dev in devs]
    for d, panel in enumerate(panels):   # GPU panels keep LAPACK's info on their device
        final_info = getattr(panel, "final_info", None)
        found = final_info(devs[d]) if final_info is not None else 0
        if found and (not info or found < info):
            info = found
    # Every device holds every pivot (its own panels' and the received ones): take device 0's.
    piv = pivs[0].astype(np.int64)
    for j0, j1 in blocks:
        piv[j0:j1] += j0
    return piv.astype(np.int32), info


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


def check_memory(cp, m, n, nb, dist, device_ids, extra=None):
    """MemoryError with the numbers unless every device has room for its share (plus
    extra[d] bytes of staging)."""
    gib = 2.0 ** 30
    for d, dev_id in enumerate(device_ids):
        need = share_bytes(m, n, nb, dist, d) + (extra[d] if extra else 0)
        with cp.cuda.Device(dev_id):
            free, total = cp.cuda.Device().mem_info
            free += cp.get_default_memory_pool().free_bytes()
        if need > free:
            raise MemoryError(
                f"LU of a {m}x{n} float32 matrix on {len(device_ids)} GPUs needs "
                f"{need / gib:.2f} GiB on GPU {dev_id} (its {dist.local_width(d)} columns and "
                f"workspace) but only {free / gib:.2f} GiB of {total / gib:.2f} GiB are free")


def factor_devices(src, device_ids, nb, make_panel, lookahead, inv_threshold, precision):
    """The distributed LU on the GPUs `device_ids`.

    src: a NumPy float32 matrix (the result comes back into it: the caller passes its own
    copy or an array it may overwrite) or a C-contiguous float32 CuPy matrix (factored in
    place: its columns are scattered to the devices and gathered back).  Returns (piv, info).
    """
    from ._backend import cupy
    from ._lu_ops import CupyOps
    cp = cupy()
    m, n = src.shape
    dist = ColumnCyclic(n, nb, len(device_ids))
    on_host = isinstance(src, np.ndarray)
    home = None if on_host else src.device.id
    # The source device also holds the matrix and, while scattering, one share in transit.
    extra = [0 if on_host or dev_id != home else 4 * m * max(
        dist.local_width(e) for e in range(dist.ndev)) for dev_id in device_ids]
    check_memory(cp, m, n, nb, dist, device_ids, extra)
    _enable_peer_access(cp, device_ids)
    shares = [_scatter_share(cp, src, dist, d, dev_id) for d, dev_id in enumerate(device_ids)]
    devs = []
    for d, (dev_id, x) in enumerate(zip(device_ids, shares)):
        with cp.cuda.Device(dev_id):
            devs.append(CupyOps(x, nb, precision, cols=dist.bound(d), device=dev_id,
                                receive=True, npiv=min(m, n)))
    piv, info = getrf_multi(devs, [make_panel() for _ in devs], dist, nb, lookahead,
                            inv_threshold)
    for d, x in enumerate(shares):
        _gather_share(cp, src, dist, d, x)
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


def _peer_copy(cp, dst, src):
    """dst = src (same shape, C-contiguous, on two devices), ordered after the pending work
    on src's current stream and before later work on dst's current stream."""
    sdev, ddev = src.device.id, dst.device.id
    with cp.cuda.Device(sdev):
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyPeerAsync(dst.data.ptr, ddev, src.data.ptr, sdev, src.nbytes,
                                        stream.ptr)
        done = cp.cuda.Event(disable_timing=True)
        done.record(stream)
    with cp.cuda.Device(ddev):
        cp.cuda.get_current_stream().wait_event(done)


def _scatter_share(cp, src, dist, d, dev_id):
    """Device d's columns of src, C-contiguous on device dev_id."""
    cols = dist.global_columns(d)
    if isinstance(src, np.ndarray):
        with cp.cuda.Device(dev_id):
            return cp.asarray(np.ascontiguousarray(src[:, cols], dtype=F32))
    with cp.cuda.Device(src.device.id):
        part = src[:, cp.asarray(cols)]        # a gather kernel on the source device
    if dev_id == src.device.id:
        return part
    with cp.cuda.Device(dev_id):
        x = cp.empty(part.shape, F32)
    _peer_copy(cp, x, part)
    return x


def _gather_share(cp, dst, dist, d, x):
    """dst[:, columns of device d] = x (device d's factored columns)."""
    cols = dist.global_columns(d)
    if isinstance(dst, np.ndarray):
        with cp.cuda.Device(x.device.id):
            dst[:, cols] = cp.asnumpy(x)
        return
    with cp.cuda.Device(dst.device.id):
        if x.device.id != dst.device.id:
            y = cp.empty(x.shape, F32)
            _peer_copy(cp, y, x)
            x = y
        dst[:, cp.asarray(cols)] = x
