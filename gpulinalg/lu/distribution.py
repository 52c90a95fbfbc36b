"""1-D block column-cyclic distribution of a matrix over several devices (no transport here).

The m x n matrix is cut into column blocks of nb columns (the last one narrower when nb does
not divide n); block b lives on device b % P.  Each device stores the columns it owns
contiguously, in their global order, as an m x n_d row-major matrix, so a row interchange
moves a contiguous row of every local matrix and needs no data from another device (Volkov &
Demmel: "column-cyclic layout ... requires no data exchange between GPUs in pivoting").

Because a device's columns keep their global order, the columns it owns inside any global
range [c0, c1) are one contiguous local range: `local_range(d, c0, c1)`.  That is all the
LU driver needs to address "the columns right of the panel", "the next panel's columns" or
"the columns left of the panel" on each device.  The LU's panels are the column blocks
(panel s = block s), so panel s is factored by `owner(s * nb)`.

This module is pure index arithmetic (NumPy only), shared by the GPU driver
(gpulinalg/lu/multi.py), its transfers (gpulinalg/lu/transfers.py) and the CPU tests'
virtual devices (gpulinalg/testing/multi.py).
"""

import numpy as np

from .driver import panel_blocks


class ColumnCyclic:
    """Block column-cyclic map of n columns, blocks of nb, over `ndev` devices."""

    def __init__(self, n, nb, ndev):
        if nb < 1 or ndev < 1 or n < 0:
            raise ValueError(f"need n >= 0, nb >= 1, ndev >= 1; got {n}, {nb}, {ndev}")
        self.n, self.nb, self.ndev = int(n), int(nb), int(ndev)
        # local_range's answers: the driver asks the same few ranges many times a step
        self._ranges = {}

    def owner(self, c):
        """Device holding global column c."""
        return (c // self.nb) % self.ndev

    def count_before(self, d, c):
        """How many of device d's columns have a global index < c (0 <= c <= n): d's local
        index of the first of its columns at or right of c."""
        q, r = divmod(c, self.nb)
        full = max(0, (q - d + self.ndev - 1) // self.ndev)  # blocks b < q with b % P == d
        return full * self.nb + (r if q % self.ndev == d else 0)

    def local_width(self, d):
        """Columns stored on device d."""
        return self.count_before(d, self.n)

    def local_range(self, d, c0, c1):
        """Device d's local columns [l0, l1) holding its columns of the global range [c0, c1)."""
        key = (d, c0, c1)
        got = self._ranges.get(key)
        if got is None:
            c0, c1 = max(0, min(c0, self.n)), max(0, min(c1, self.n))
            l0 = self.count_before(d, c0)
            got = self._ranges[key] = (l0, self.count_before(d, c1) if c1 > c0 else l0)
        return got

    def global_columns(self, d):
        """Global indices of device d's columns, in local order (int64 vector)."""
        cols = np.arange(self.n, dtype=np.int64)
        return cols[(cols // self.nb) % self.ndev == d]

    def blocks(self, d):
        """Global column ranges [c0, c1) of device d's blocks, left to right."""
        step = self.ndev * self.nb
        return [(c, min(c + self.nb, self.n)) for c in range(d * self.nb, self.n, step)]

    def chunks(self, d, most=8):
        """Device d's blocks grouped for a pipelined upload: 1, 1, 2, 4, ... blocks, at most
        `most` per group, as lists of block ranges.  The first groups are small so that the
        first panels and look-ahead updates can start while the rest is still arriving."""
        blocks, out, size = self.blocks(d), [], 1
        while blocks:
            out.append(blocks[:size])
            blocks = blocks[size:]
            size = min(most, size * 2) if len(out) > 1 else 1
        return out

    def bound(self, d):
        """This map seen from device d: an object with local_range(c0, c1) (what the device
        steps of the LU take to address columns)."""
        return _Bound(self, d)


class _Bound:
    __slots__ = ("dist", "device")

    def __init__(self, dist, device):
        self.dist, self.device = dist, device

    def local_range(self, c0, c1):
        return self.dist.local_range(self.device, c0, c1)


class Identity:
    """The map of one device holding every column (the single-device LU)."""

    def local_range(self, c0, c1):
        return c0, c1


def scatter(a, dist):
    """The local matrices [a[:, global_columns(d)] for each device d]: C-contiguous NumPy
    copies (the virtual devices of the CPU tests; the GPU path copies share by share)."""
    return [np.ascontiguousarray(a[:, dist.global_columns(d)]) for d in range(dist.ndev)]


def column_views(rows, buf, dist, d):
    """(host view, share view) pairs that cover device d's columns of `rows` (a block of rows
    of the whole matrix) and the same rows of its share `buf`: one strided view for all the
    whole groups of P blocks, then the blocks of the last, partial group."""
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


def gather(locals_, dist, out):
    """Inverse of scatter: out[:, global_columns(d)] = locals_[d] for each d; returns out."""
    for d, loc in enumerate(locals_):
        out[:, dist.global_columns(d)] = loc
    return out


def panel_schedule(k, nb, dist, lookahead=1, blocks=None):
    """What each device does at each step of the distributed LU, in enqueue order: the steps
    one at a time (a generator, so that the driver enqueues step 0 before the later steps
    are worked out), each a list of (device, operation, global column range).

    operation is one of "factor" (the owner's panel), "receive" (a copy of the factored panel
    on every other device, the next panel's owner first), "swap_right", "update_next" (the
    next panel's columns, on the next panel's owner, before anything else it updates),
    "update_rest", "update" (no look-ahead, or a device that does not own the next panel),
    "swap_left".  Ranges are global and empty ranges are left out.  The driver
    (gpulinalg/lu/multi.py) follows this list; the CPU tests check its invariants.
    """
    n = dist.n
    blocks = panel_blocks(k, nb) if blocks is None else blocks
    for s, (j0, j1) in enumerate(blocks):
        o = dist.owner(j0)
        ops = [(o, "factor", (j0, j1))]
        # Receivers in the order they own the coming panels: the next panel's owner first.
        ops += [((o + i) % dist.ndev, "receive", (j0, j1)) for i in range(1, dist.ndev)]
        nxt = blocks[s + 1] if s + 1 < len(blocks) else None
        nxt_owner = dist.owner(nxt[0]) if nxt is not None else None
        for d in range(dist.ndev):
            seq = [("swap_right", (j1, n))]
            if lookahead and d == nxt_owner:
                seq += [("update_next", (j1, nxt[1])), ("update_rest", (nxt[1], n))]
            else:
                seq += [("update", (j1, n))]
            seq += [("swap_left", (0, j0))]
            for op, (c0, c1) in seq:
                l0, l1 = dist.local_range(d, c0, c1)
                if l1 > l0:
                    ops.append((d, op, (c0, c1)))
        yield ops
