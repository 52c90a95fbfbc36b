"""The LU panel factored on the GPU: launch wrapper for kernels/getrf_panel.cu, the recursive
panel (LAPACK sgetrf2's scheme with a register-resident leaf), its host emulation, and the
`GpuPanel` object the blocked driver (gpulinalg/_lu.py) plugs in.

Recursive panel, for an mp x w row-major block with k = min(mp, w) pivot columns:

    w <= LW:  the leaf kernel (one cooperative launch, one grid barrier per column)
    else:     w1 = half of k rounded up to whole leaves
              factor A[:, :w1]                        (recursively: pivots piv[:w1])
              A[:, w1:]      <- swaps piv[:w1]         (laswp)
              A12 = A[:w1, w1:] := L11^{-1} A12        (triangular solve, unit lower: trsm.cu)
              A22 = A[w1:, w1:] -= A21 A12            (SGEMM)
              factor A22                              (recursively: pivots relative to row w1)
              A[w1:, :w1]    <- swaps of A22           (laswp), then piv[w1:k] += w1

Four leaves (`leaf_plan`, first that fits; the default plan takes "row", else "tile": the
other two lose to row<128> at every height they serve, see COLS_MAX_ROWS and CLUSTER_MIN_LW,
and stay for explicit `leaf=` requests and the measurements):
- "cols" (getrf_panel_cols<CW, RPT, T>): panels of up to COLS_MAX_ROWS rows and COLS_LW = 256
  columns in ONE launch, distributed by columns (CW per block, all rows in registers): the
  pivot search stays inside a block, one cross-block handoff per CW columns; the unblocked
  algorithm's operations, so bit-identical to row<128> (and to the cluster leaf) on panels
  of up to 128 columns.
- "cluster" (getrf_leaf_cluster<LW, RPT, CS>): ONE thread block cluster of CS = 16 CTAs (8
  where 16 cannot launch), RPT rows per thread in registers, one cluster barrier per column and
  the candidates exchanged through distributed shared memory, no global barrier.  (LW, RPT) =
  (128, 1), (64, 2), (32, 4): the widest whose CS*256*RPT rows hold the panel (CS = 16: 4096,
  8192, 16384 rows); a panel wider than LW recurses down to LW-wide leaves.  The plan takes
  only LW >= CLUSTER_MIN_LW (256 by default: none; see the measurements there).
- "row" (getrf_leaf_row<LW, RPT>): RPT rows per thread, LW columns in registers, (LW, RPT) =
  (128, 1), (64, 2), (32, 4), and per block a ninth warp that does the grid's communication
  while the others update (pipelined): the widest whose grid of ceil(mp / (256 RPT)) blocks is
  co-resident and at most ROW_BLOCK_CAP blocks (else the fewest co-resident blocks: up to
  135,168 rows on an H100).  With (128, 1) a panel of nb <= 128 columns is ONE launch;
  nb = 256 recurses once (two 128-wide leaves, one laswp / trsm / SGEMM between them).
- "tile" (getrf_leaf<LW, RPT>, LW = 32/16/8, the first kernel): taller panels still, 4-16 rows
  per thread, with the recursion above down to 32-wide leaves.

Everything is enqueued on the caller's current stream (the driver's panel stream): no host
synchronisation; the first exactly zero pivot (LAPACK's info) stays in a device int32.
"""

import time

import numpy as np

from ..core.backend import cupy
from ..core.kernels import Launcher, get_kernel
from .driver import PanelResult, mark

FAMILY = "getrf_panel"
THREADS = 256           # GETRF_THREADS: threads per block (__launch_bounds__(256, 1))
GCAP = 128              # GETRF_GCAP: most blocks per leaf (shared memory holds G records)
LWMAX = 32              # GETRF_LWMAX: widest leaf
REC = LWMAX + 2         # GETRF_REC: floats per block record (row | |v| | row index)
# (leaf width LW, rows per thread RPT), widest first: LW*RPT = 128 floats in registers.
LEAF_SHAPES = ((32, 4), (16, 8), (8, 16))
WORKSPACE_FLOATS = 2 * GCAP * REC + 2 * LWMAX   # rec[2][GCAP][REC] | rowj[2][LWMAX]
# getrf_leaf_row<LW, RPT>: ROW_SHAPES (LW, RPT), widest first, LW*RPT = 128 floats in
# registers; ROW_LW: the widest.  ROW_BLOCK_CAP: the most blocks (= SMs: one block per SM) the
# plan gives a row leaf before it takes more rows per thread.  The leaf is latency-bound: the
# SMs it holds mostly wait, while the trailing SGEMM beside it (the panel stream has the
# greater priority, so the leaf's blocks start first) could use them.  Narrower leaves cost
# more per column (H100, us per column at 32768 x 128: 3.3 / 3.4 / 6.0 for RPT 1 / 2 / 4), so
# the cap trades the panel's latency for the SGEMM's SMs; tall panels, where the update is
# largest, take the most rows per thread.  H100 LU, one run (benchmarks/lu_ab.py): caps
# 160 / 64 / 32 gave 111.1 / 111.2 / 108.1 ms at 16384, 662.3 / 647.4 / 643.0 ms at 32768
# (8192: 29.6 ms each: its panels fit 32 blocks anyway).  With the pipelined leaf (twenty-
# second session, the default 3xTF32 updates, `lu_ab.py 16384,32768 --vary
# _panel_gpu.ROW_BLOCK_CAP=32,64,160`): 66.6 / 69.4 / 90.3 ms and 302.3 / 306.0 / 317.9 ms.
GMAX_ROW = 160          # GETRF_GMAX_ROW: most blocks (record slots; 5 polled per lane)
ROW_SHAPES = ((128, 1), (64, 2), (32, 4))
ROW_WIDTHS = tuple(lw for lw, _ in ROW_SHAPES)
ROW_LW = ROW_SHAPES[0][0]
ROW_BLOCK_CAP = 32
# The cap on several GPUs: there the panels are the chain every GPU waits on, so the fastest
# leaf (one row per thread) pays more than the SMs it takes (H200 x4, same run: 32768 on 4
# GPUs 230.0 ms with GMAX_ROW, 249.1 with 32; 2 GPUs 361.8 / 357.2; 49152 on 4 GPUs 613.7 /
# 633.9 ms, on 2 1090.2 / 1088.7).
ROW_BLOCK_CAP_MULTI = GMAX_ROW
# Two GPUs: 64 (two rows per thread at 32768 rows).  H200 x2, benchmarks/lu_multi_ab.py
# 32768 --devices 2 --nb 256,512 --precision fp32 --vary _panel_gpu.ROW_BLOCK_CAP_MULTI=
# 32,64,160 (twenty-seventh session): nb = 512 327.6 / 319.7 / 324.2 ms, nb = 256 327.3 /
# 324.0 / 327.8; 3xTF32 updates (nb = 512) 206.4 / 193.8 / 193.3.
ROW_BLOCK_CAP_2GPU = 64


def row_block_cap(devices):
    """The row leaf's block cap on one of `devices` GPUs factoring one matrix."""
    return (ROW_BLOCK_CAP if devices <= 1 else ROW_BLOCK_CAP_2GPU if devices == 2
            else ROW_BLOCK_CAP_MULTI)
# getrf_leaf_row<LW, RPT, EARLY>: EARLY (the block's candidate row published before the rank-1
# update, a 384-thread block whose communication warp has an SM sub-partition to itself) for
# RPT <= ROW_EARLY_RPT, else 288 threads: 8 compute warps, 1 communication warp (kernels/
# getrf_panel.cu).  H100, panels alone, alternating with the late leaf (twenty-fourth
# session): row<128> 8192 / 16384 / 32768 x 128 2.43 / 2.70 / 2.93 -> 1.92 / 2.10 / 2.26 us
# per column, row<64> 16384 / 32768 2.57 / 2.95 -> 2.27 / 2.59; row<32> within the noise
# (32768 3.41 -> 3.26, 16384 3.37 -> 4.19 with a spread of 0.41-0.69 ms; LU 32768, which takes
# it, 298.2 / 298.8 ms), so it stays late.  LU 16384 64.21 -> 62.61 ms with row<64> EARLY.
ROW_EARLY_RPT = 2


def row_threads(rpt):
    return THREADS + (4 if rpt <= ROW_EARLY_RPT else 1) * 32


def row_kernel_name(lw, rpt):
    return f"getrf_leaf_row<{lw},{rpt},{int(rpt <= ROW_EARLY_RPT)}>"


# getrf_leaf_cluster<LW, RPT, CS>: one cluster of CS CTAs.  CLUSTER_SHAPES: (LW, RPT), widest
# first, LW*RPT = 128 floats in registers.  CLUSTER_SIZES: tried in this order on the device
# (16 needs the non-portable cluster size attribute; 8 is portable); CLUSTER_SIZE: the first,
# what leaf_plan assumes by default (and the host emulation uses).
CLUSTER_SHAPES = ((128, 1), (64, 2), (32, 4))
CLUSTER_SIZES = (16, 8)
CLUSTER_SIZE = CLUSTER_SIZES[0]
# Narrowest cluster leaf the default plan takes.  H100, 128-column panels (median, us):
# 4096 rows: cluster<128,1,16> 321, row<128> 364; 8192 rows: cluster<64,2,16> (two leaves and
# the recursion) 355, cluster<32,4,8> 427, row<128> 374.  The narrow leaves gain little or
# lose, and their recursion sums in another order than row<128> (near-ties may flip); at 128
# the cluster leaf is bit-identical to row<128>.  32 admits every shape.
# Thirty-third session: every earlier A/B that "turned the cluster leaf off" with --set
# _panel_gpu.CLUSTER_MIN_LW=256 still ran it (leaf_plan had bound this default when defined;
# it reads the constant at call time now), so the row leaf was never measured below 4097
# rows inside the LU.  Measured (H100, benchmarks/lu_ab.py 2048,4096,8192,16384 --panel gpu
# --set _panel_gpu.CLUSTER_MIN_LW=256 --vary _panel_gpu.COLS_MAX_ROWS=4096,0,2048, 3
# rounds): the row leaf for every panel 4.37 -> 4.04 ms, 9.85 -> 8.22, 21.20 -> 19.40, 62.20
# -> 61.51 (cuSOLVER 5.52, 13.19, 37.81, 142.99); the kernel trace of the 8192 LU
# (benchmarks/lu_trace.py) put the cluster leaf at 343 us a 4096-row panel, the column-slab
# leaf at 297-313, row<128> at 209-216.  So the default plan takes no cluster leaf: 256 is
# wider than every cluster shape (tests and benchmarks still ask for it by leaf= or min_lw).
CLUSTER_MIN_LW = 256
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14    # cuda.h, CUfunction_attribute
# getrf_panel_cols<CW, RPT, T>: the panel distributed by columns, CW per block of T threads
# holding all rows (RPT per thread), one cross-block handoff per CW columns.  COLS_SHAPES:
# (CW, RPT, T), widest first (RPT*CW = 64 floats in registers): mp <= T*RPT rows.
# COLS_LW: the widest panel one launch factors (the recursion's leaf width; 256 against 128:
# LU 16384 105.2 against 106.3 ms, its last panels one launch each).  COLS_MAX_ROWS:
# the tallest panel the plan gives it (0: never).  H100, 128-column panels alone (median us,
# benchmarks/panel_leaf.py): 2048 rows cols 256 / cluster<128> 316 / row<128> 316; 4096 rows
# 320 / 319 / 339; 8192 rows (CW = 4) 469 / - / 346.  LU, alternating in one call
# (benchmarks/lu_ab.py), COLS_MAX_ROWS 0 -> 4096: 2048 6.76 -> 5.50 ms, 4096 13.26 -> 11.57,
# 8192 29.62 -> 27.75 (its panels of <= 4096 rows); COLS_MAX_ROWS = 8192 made n = 8192
# slower than 0 (32.1 against 29.5 ms).  Twenty-second session, with the pipelined row leaf
# (faster alone now: 4096 x 128 cols 0.315 / row<128> 0.295 ms; 2048 x 256 0.468 / 0.591):
# COLS_MAX_ROWS 4096 / 3072 / 2048 gave LU 4096 9.98 / 10.69 / 10.92 ms, 6144 16.26 / 16.60 /
# 17.07, 8192 24.37 / 24.83 / 25.30 (lu_ab.py --vary, 3 rounds): kept.  Those rows between
# the values took the cluster leaf, not row<128> (see CLUSTER_MIN_LW); against row<128> the
# column-slab leaf loses at every height (thirty-third session, H100: 128-column panels alone
# 0.306 / 0.292 / 0.244 ms at 4096 / 3072 / 2048 rows against 0.221 / 0.218 / 0.212; LU
# 8192 21.20 -> 19.40 ms with COLS_MAX_ROWS 4096 -> 0, 2048 19.57), so the default plan no
# longer takes it (0), and nb is 128 up to GPU_NB_SWITCH (COLS_NB applies to its panels).
COLS_SHAPES = ((16, 4, 512), (8, 8, 512), (4, 16, 512))   # (CW, RPT, threads)
# Handoff groups per slab: the slab's owner publishes its pivots and multipliers every
# CW / COLS_GROUPS columns, and the other blocks apply each group while it factors the next,
# so the next slab's owner waits for the last group's update only, not the whole slab's.
# H100, alternating in one call: panels alone (benchmarks/panel_leaf.py --groups 1,2,4, ms)
# 2048 x 128 0.253 / 0.255 / 0.269, 4096 x 128 0.320 / 0.317 / 0.346, 4096 x 256 0.609 /
# 0.601 / 0.659 (the owner's extra publications cost what the shorter handoff saves); LU
# (benchmarks/lu_ab.py --vary _panel_gpu.COLS_GROUPS=1,2,4) 8192 21.70 / 20.73 / 22.10 ms,
# again 21.19 / 20.91 (1, 2), 4096 9.93 / 9.96 / 10.67, again 9.77 / 9.77, 2048 4.54 / 4.52 /
# 4.62: 2 (a group of 8 / 4 columns for CW = 16 / 8) gains at 8192 only, 1-4%.
COLS_GROUPS = 2


def cols_group(cw):
    """Columns per handoff group of getrf_panel_cols<cw, ...> (COLS_GROUPS per slab)."""
    return max(1, cw // COLS_GROUPS)


def cols_kernel_name(cw, rpt, t):
    return f"getrf_panel_cols<{cw},{rpt},{t},{cols_group(cw)}>"


COLS_THREADS = 512      # the threads of the default shapes (tests)
COLS_LW = 256
COLS_MAX_ROWS = 0
# On several GPUs the plan keeps the column-slab leaf up to 4096 rows (and nb = COLS_NB for
# such matrices), as every multi-GPU figure so far was measured with it: the row leaf there
# has not been timed yet.
COLS_MAX_ROWS_MULTI = 4096


def cols_max_rows(devices=1):
    """The tallest panel the plan gives the column-slab leaf on one of `devices` GPUs."""
    return COLS_MAX_ROWS if devices <= 1 else COLS_MAX_ROWS_MULTI


KERNEL_NAMES = (tuple(f"getrf_leaf<{lw},{rpt}>" for lw, rpt in LEAF_SHAPES)
                + tuple(f"getrf_leaf_row<{lw},{rpt},{e}>" for lw, rpt in ROW_SHAPES
                        for e in (0, 1) if e == 0 or rpt <= ROW_EARLY_RPT)
                + tuple(f"getrf_leaf_cluster<{lw},{rpt},{cs}>" for cs in CLUSTER_SIZES
                        for lw, rpt in CLUSTER_SHAPES)
                + tuple(cols_kernel_name(*shape) for shape in COLS_SHAPES))
TAG_LIMIT = 2**32 - 2 * ROW_LW          # column tags are uint32; reset before a wrap

# Block size of lu_factor(panel="gpu") when none is given: 256 where every panel fits the
# column-slab leaf (min(m, n) <= COLS_MAX_ROWS: a 256-wide panel is one launch, and half as
# many steps pay the look-ahead chain), else 128 (one leaf launch per panel) up to
# min(m, n) = GPU_NB_SWITCH, 256 above (one recursion level per panel; the trailing SGEMM at
# k = 256 runs ~41 TF/s against ~36 at k = 128 on the H100, and at large n the update, not
# the panel, is the critical path).  H100, min of 2 rounds x 5 calls in one run (COLS_LW
# 128 / 256, nb 128 / 256): 2048 5.32 / 5.61 / 5.28 / 5.07 ms, 4096 11.31 / 12.08 / 11.34 /
# 10.93 (cuSOLVER 5.31, 13.16).
GPU_NB_SWITCH = 8192
# Wider panels above GPU_NB_SWITCH, as (k, nb): nb for min(m, n) > k, the last row that
# applies wins.  The update's rate grows with its rank, the 3xTF32 wgmma kernel's far more
# than the SIMT kernel's (16384^2 x k, H100: 84 / 110 TF/s at k = 256 / 512 against 41 / 44),
# while the panels' chain grows too.  H100, benchmarks/lu_ab.py, 2 rounds (twenty-first
# session; the widths were module constants then, `lu_ab.py N --nb 256,512` reruns them):
# FP32 updates: 16384 nb 256 / 512 98.4 / 101.2 ms, 24576 276.0 / 267.8, 32768 256 / 512 /
# 768 605.4 / 581.0 / 639.2; 3xTF32 updates: 16384 256 / 512 / 1024 73.4 / 70.8 / 74.3,
# 24576 512 / 768 / 1024 159.1 / 159.4 / 159.0, 32768 256 / 512 / 768 / 1024 / 1536 / 2048
# 367.7 / 320.1 / 310.6 / 305.8 / 318.1 / 329.5.  Two GPUs (H200 x2, benchmarks/
# lu_multi_ab.py 32768 --devices 2 --nb 256,512,1024 --precision P, same call as one GPU):
# 3xTF32 225.3 / 211.5 / 212.2 ms (one GPU 350.4 / 310.6 / 301.0), FP32 nb 256 / 512
# 344.0 / 339.5 (one GPU 600.3 / 578.2): 512 above 16384 whatever the precision.  Four
# GPUs keep 256 up to 32768 (H200 x4, same command with --devices 2,4: 3xTF32 172.1 / 177.0
# ms, FP32 217.0 / 224.7 for nb 256 / 512; there the panels are the chain every GPU waits
# on; thirtieth session, FP32, two calls: 191.6 / 190.8 against 192.5 / 194.2) and take 512
# above 40960 (the step lies between the two sizes measured): at 49152, FP32 542.3 / 541.5
# against 529.7 / 525.9 ms, again 527.7 / 527.7 in the next call; 3xTF32 352.1 against
# 319.7 (benchmarks/lu_multi_ab.py 49152 --devices 4 --nb 256,512 --precision P).
# Below 32768 the host's enqueue (~1 ms of Python and launches a step on four GPUs) bounds the
# factorization, so fewer, wider panels win there (thirty-seventh session, H200 x4,
# `lu_multi_ab.py N --devices 2,4 --nb A,B --precision P`, FP32 unless said, 4 GPUs): 8192
# nb 128 / 256 36.4 / 26.2 ms (host enqueue 34.9 / 22.9), 16384 nb 256 / 512 64.8 / 54.5
# (65.4 / 51.1), 3xTF32 76.1 / 67.3, 24576 130.5 / 103.9 (123.2 / 73.0); two GPUs: 8192
# 23.6 / 23.6, 16384 62.0 / 61.8, 3xTF32 53.4 / 54.4 (no change there).
NB_STEPS = ((GPU_NB_SWITCH, 2 * ROW_LW), (16384, 512))          # FP32 updates, one GPU
NB_STEPS_TC = ((GPU_NB_SWITCH, 512), (24576, 1024))             # TF32 / 3xTF32, one GPU
NB_STEPS_2GPU = ((GPU_NB_SWITCH, 2 * ROW_LW), (16384, 512))     # two GPUs
NB_STEPS_MULTI = ((COLS_MAX_ROWS_MULTI, 2 * ROW_LW), (GPU_NB_SWITCH, 512),   # more GPUs
                  (28672, 2 * ROW_LW), (40960, 512))
# nb where every panel fits the column-slab leaf.  Again with the graph replay (no host
# bound), H100, lu_ab.py --vary _panel_gpu.COLS_NB=256,128, 4 rounds: 2048 4.68 / 4.82 ms,
# 4096 10.52 / 10.63.
COLS_NB = 2 * ROW_LW
_NUM_SMS_GUESS = 132    # host emulation only: the H100's co-resident row-leaf blocks


def default_block_size(m, n, precision="fp32", devices=1):
    """Panel width nb of the GPU panel (see GPU_NB_SWITCH and NB_STEPS) for an m x n LU
    whose updates run in `precision` on `devices` GPUs."""
    k = min(m, n)
    if k <= cols_max_rows(devices):
        return COLS_NB
    steps = (NB_STEPS_MULTI if devices > 2 else NB_STEPS_2GPU if devices == 2
             else NB_STEPS if precision == "fp32" else NB_STEPS_TC)
    return ([ROW_LW] + [nb for above, nb in steps if k > above])[-1]


def leaf_key(plan):
    """The part of a leaf_plan that names the kernel and its launch shape: ("tile", LW, RPT),
    ("row", LW, RPT), ("cluster", LW, RPT, CS) or ("cols", LW, RPT, CW, T, GW), GW the
    handoff group width at the time of the call (COLS_GROUPS)."""
    if plan[0] == "cols":
        return plan[:5] + (cols_group(plan[3]),)
    return plan[:4] if plan[0] == "cluster" else plan[:3]


def leaf_shape(mp, max_blocks=GCAP):
    """(LW, RPT, G) for a panel of mp rows: the widest leaf whose rows fit max_blocks blocks."""
    for lw, rpt in LEAF_SHAPES:
        g = max(1, -(-mp // (THREADS * rpt)))
        if g <= max_blocks:
            return lw, rpt, g
    raise ValueError(f"a panel of {mp} rows exceeds the GPU panel's register capacity "
                     f"({max_blocks * THREADS * LEAF_SHAPES[-1][1]} rows); use panel='cpu'")


def cluster_shape(mp, cluster_size, min_lw=None):
    """(LW, RPT) of the widest cluster leaf (LW >= min_lw, default CLUSTER_MIN_LW as set at the
    time of the call) whose cluster_size*256*RPT rows hold mp rows, or None (taller panels,
    or cluster_size 0: no cluster leaf)."""
    min_lw = CLUSTER_MIN_LW if min_lw is None else min_lw
    for lw, rpt in CLUSTER_SHAPES:
        if cluster_size and lw >= min_lw and mp <= cluster_size * THREADS * rpt:
            return lw, rpt
    return None


def cols_shape(mp, max_rows=None):
    """(CW, RPT, T) of getrf_panel_cols for mp rows (the first of COLS_SHAPES whose T*RPT rows
    hold them), or None above max_rows (default COLS_MAX_ROWS, 0: never)."""
    limit = COLS_MAX_ROWS if max_rows is None else max_rows
    if mp > limit:
        return None
    return next((sh for sh in COLS_SHAPES if mp <= sh[1] * sh[2]), None)


def cols_smem(cw, rpt, t):
    """Dynamic shared memory of getrf_panel_cols<cw, rpt, t>: s_L, [CW][T*RPT] floats."""
    return 4 * cw * rpt * t


def leaf_plan(mp, row_blocks, tile_blocks=GCAP, row_lw=None, cluster_size=CLUSTER_SIZE,
              cluster_min_lw=None, row_cap=None, cols_rows=None):
    """("cols", COLS_LW, RPT, CW, T) when mp <= cols_rows (default COLS_MAX_ROWS), no row_lw
    is given and its COLS_LW / CW blocks (one per SM, like the row leaf's) are co-resident
    (at most row_blocks), else ("cluster", LW, RPT, CS) when mp rows fit one cluster of
    CS = cluster_size CTAs (0: no cluster leaf) with LW >= cluster_min_lw (default
    CLUSTER_MIN_LW), else ("row", LW, RPT, G) when some shape of ROW_SHAPES (only LW = row_lw
    when given) fits: its G blocks at most row_blocks (the co-resident ones) and GMAX_ROW.  Of those, the widest whose G is at
    most row_cap (default ROW_BLOCK_CAP; not applied to a given row_lw), else the one of
    fewest blocks.  Else ("tile", LW, RPT, G) of leaf_shape (the recursion with narrow
    leaves)."""
    shape = cols_shape(mp, cols_rows) if row_lw is None else None
    if shape is not None and -(-COLS_LW // shape[0]) <= row_blocks:
        return ("cols", COLS_LW, shape[1], shape[0], shape[2])
    shape = cluster_shape(mp, cluster_size, cluster_min_lw)
    if shape is not None:
        return ("cluster",) + shape + (cluster_size,)
    cap = ROW_BLOCK_CAP if row_cap is None else row_cap
    fits = [("row", lw, rpt, max(1, -(-mp // (THREADS * rpt)))) for lw, rpt in ROW_SHAPES
            if row_lw is None or lw == row_lw]
    fits = [plan for plan in fits if plan[3] <= min(row_blocks, GMAX_ROW)]
    if fits:
        return next((plan for plan in fits if row_lw is not None or plan[3] <= cap), fits[-1])
    return ("tile",) + leaf_shape(mp, tile_blocks)


def split(k, lw):
    """Left width of a panel with k > lw pivot columns: half of k in whole leaves."""
    leaves = -(-k // lw)
    return lw * (-(-leaves // 2))


def factor_panel(steps, a, piv, lw, col_base):
    """LU with partial pivoting of the mp x w block `a` in place (the recursion above).

    piv: the k = min(mp, w) pivot slots, written 0-based relative to a's first row.
    col_base: absolute column of a's first column (for info).
    """
    mp, w = a.shape
    k = min(mp, w)
    if k == 0:
        return
    if w <= lw:
        steps.leaf(a, piv, col_base)
        return
    w1 = k if k <= lw else split(k, lw)      # w1 <= k <= mp
    factor_panel(steps, a[:, :w1], piv[:w1], lw, col_base)
    steps.laswp(a[:, w1:], piv[:w1])
    steps.trsm(a[:w1, :w1], a[:w1, w1:])
    if mp > w1:
        steps.gemm_sub(a[w1:, :w1], a[:w1, w1:], a[w1:, w1:])
        factor_panel(steps, a[w1:, w1:], piv[w1:k], lw, col_base + w1)
        steps.laswp(a[w1:, :w1], piv[w1:k])   # pivots still relative to row w1
        steps.add(piv[w1:k], w1)                # pivot base: relative to row w1 -> row 0


# ------------------------------------------------------------------------------------ GPU

_MAX_BLOCKS = {}        # (device id, kernel name) -> co-resident blocks (PanelWorkspace)


class PanelWorkspace:
    """Device state of the leaf kernels, one per factorization (and per stream: the counter's
    arrivals and the row leaf's column tags are tracked on the host, in stream order).

    tile leaf: records, barrier counter.  row leaf: `keys` (16-byte records {tag, key, tag,
    pos}) and `rows` (the candidates' rows, tagged words {tag, value}), zeroed once: tags start
    at 1.  Both: info.  Also the laswp workspace of the recursion and the per-shape launch
    parameters (cached).  devices: how many GPUs factor the matrix (row_block_cap).
    """

    def __init__(self, devices=1):
        cp = cupy()
        from ..layout.laswp import WORKSPACE_INTS, _sm_count
        self.devices = devices
        self.rec = cp.empty(WORKSPACE_FLOATS, dtype=np.float32)
        self.counter = cp.zeros(1, dtype=np.uint32)
        self.info = cp.zeros(1, dtype=np.int32)
        self.arrivals = 0                       # counter value after all enqueued launches
        self.keys = cp.zeros(2 * GMAX_ROW * 2, dtype=np.uint64)   # ulonglong2 [2][GMAX_ROW]
        # Tagged words {tag, value} [2][GMAX_ROW][LW]; zeroed like the keys (no tag is 0).
        self.rows = cp.zeros(2 * GMAX_ROW * ROW_LW, dtype=np.uint64)
        self.epoch = 1                          # tag of the next row-leaf column
        self.cols = None                        # getrf_panel_cols: (lbuf, masks, flag), lazily
        self.cols_epoch = 1                     # its flag's next tag base
        self.laswp_ws = cp.empty(WORKSPACE_INTS, dtype=np.int32)
        self.device = cp.cuda.runtime.getDevice()
        self.sms = _sm_count(self.device)      # cached per device
        self._steps = {}
        self._plans = {}

    def max_blocks(self, kernel, cap, threads=THREADS):
        """Co-resident blocks of `kernel` (blocks of `threads`) on this device (what a
        cooperative launch allows); queried once per device and kernel (a factorization
        starts without driver queries)."""
        key = (self.device, kernel.name)
        if key not in _MAX_BLOCKS:
            per_sm = 1
            try:  # RawKernel.kernel is the driver Function (its ptr the CUfunction handle)
                per_sm = max(1, cupy().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    kernel.kernel.ptr, threads, 0))
            except Exception:  # no occupancy query: __launch_bounds__(..., 1) promises one
                pass
            _MAX_BLOCKS[key] = self.sms * per_sm
        return min(cap, _MAX_BLOCKS[key])

    def plan(self, mp, row_lw=None, cluster=True):
        """leaf_plan for mp rows on this device (cached per (mp, row_lw, cluster)); cluster=False
        leaves the cluster leaf out, and so does a device where no cluster size launches."""
        key = (mp, row_lw, cluster)
        plan = self._plans.get(key)
        if plan is None:   # every row leaf is __launch_bounds__(..., 1): one block per SM
            row = get_kernel(FAMILY, row_kernel_name(*ROW_SHAPES[0]), cooperative=True)
            tile = get_kernel(FAMILY, KERNEL_NAMES[0], cooperative=True)
            plan = leaf_plan(mp, self.max_blocks(row, GMAX_ROW, row_threads(ROW_SHAPES[0][1])),
                             self.max_blocks(tile, GCAP), row_lw,
                             cluster_size() if cluster else 0,
                             row_cap=row_block_cap(self.devices),
                             cols_rows=cols_max_rows(self.devices))
            self._plans[key] = plan
        return plan

    def steps(self, plan):
        """The _DeviceSteps for a plan's leaf (cached: kernels looked up once)."""
        key = leaf_key(plan)
        st = self._steps.get(key)
        if st is None:
            st = self._steps[key] = _DeviceSteps(self, key)
        return st

    def cols_state(self, ntags):
        """(lbuf, masks, flag, tag0) of a getrf_panel_cols launch using ntags flag tags: the
        buffers (allocated at the first launch) and its first tag; the flag is zeroed
        (stream-ordered) before the tags would wrap (the kernel compares signed differences)."""
        self._cols_buffers()
        if self.cols_epoch + ntags >= 2**31:
            self.cols[2].fill(0)
            self.cols_epoch = 1
        tag0 = self.cols_epoch
        self.cols_epoch += ntags
        return self.cols + (tag0,)

    def _cols_buffers(self):
        if self.cols is None:
            cp = cupy()
            rows = max(rpt * t for _, rpt, t in COLS_SHAPES)   # any shape (not only the plan's)
            self.cols = (cp.empty(rows * COLS_LW, dtype=np.float32),
                         cp.zeros(COLS_LW // min(cw for cw, _, _ in COLS_SHAPES),
                                  dtype=np.uint32),
                         cp.zeros(1, dtype=np.uint32))

    def reset(self):
        """Back to a fresh workspace's state (every buffer allocated), stream-ordered on the
        current stream: a CUDA graph of a factorization starts with it, so that each replay
        finds the counters, tags and info that its captured launches were issued against."""
        self._cols_buffers()
        for x in (self.counter, self.info, self.keys, self.rows, self.cols[1], self.cols[2]):
            x.fill(0)
        self.arrivals, self.epoch, self.cols_epoch = 0, 1, 1

    def next_tags(self, kk):
        """First tag of a row-leaf launch of kk columns; zeroes keys and rows (stream-ordered)
        before the uint32 tags would wrap."""
        if self.epoch + kk >= TAG_LIMIT:
            self.keys.fill(0)
            self.rows.fill(0)
            self.epoch = 1
        tag = self.epoch
        self.epoch += kk
        return tag


class _DeviceSteps:
    """factor_panel's steps with our kernels, on the current stream."""

    def __init__(self, ws, leaf):
        from ..gemm.simt import gemm_ptr
        from ..layout.laswp import laswp_ptr
        from .trsm import trsm_ptr
        self.ws = ws
        # The recursion's steps by device pointer (its blocks are row-major views of the
        # panel, unit column stride, leading dimension strides[0] / 4): no validation, no
        # conversion of the arguments -- a panel is several launches on the look-ahead chain,
        # and with several GPUs the host's enqueue is what bounds mid-size factorizations.
        self._trsm, self._gemm, self._laswp = trsm_ptr, gemm_ptr, laswp_ptr
        if leaf[0] == "row":
            self.lw, self.rpt = leaf[1], leaf[2]
            self.kernel = get_kernel(FAMILY, row_kernel_name(self.lw, self.rpt),
                                     cooperative=True)
            # (mp, ncols, A, lda, piv, info, col_base, keys, rows, epoch)
            self.launch = Launcher(self.kernel, "iiPqPPiPPI", cooperative=True)
            self.leaf = self._leaf_row
        elif leaf[0] == "cols":
            self.lw, self.rpt, self.cw, self.threads = leaf[1:5]
            self.smem = cols_smem(self.cw, self.rpt, self.threads)
            self.kernel = get_kernel(FAMILY, cols_kernel_name(self.cw, self.rpt, self.threads),
                                     cooperative=True, dynamic_smem=self.smem)
            # (mp, w, A, lda, piv, info, col_base, lbuf, masks, flag, tag0)
            self.launch = Launcher(self.kernel, "iiPqPPiPPPI", self.smem, cooperative=True)
            self.leaf = self._leaf_cols
        elif leaf[0] == "cluster":
            self.lw, self.rpt, self.cs = leaf[1:4]
            self.kernel = cluster_kernel(self.lw, self.rpt, self.cs)
            self.leaf = self._leaf_cluster
        else:
            self.lw, self.rpt = leaf[1], leaf[2]
            self.kernel = get_kernel(FAMILY, f"getrf_leaf<{self.lw},{self.rpt}>",
                                     cooperative=True)
            self.leaf = self._leaf_tile

    def _leaf_row(self, a, piv, col_base):
        mp, w = a.shape
        ws = self.ws
        g = -(-mp // (THREADS * self.rpt))
        # The rows' positions are 0-based relative to a's first row: the pivots' base.
        self.launch((g, 1, 1), (row_threads(self.rpt), 1, 1), mp, w, a.data.ptr,
                    a.strides[0] // 4, piv.data.ptr, ws.info.data.ptr, col_base,
                    ws.keys.data.ptr, ws.rows.data.ptr, ws.next_tags(min(mp, w)))

    def _leaf_cols(self, a, piv, col_base):
        mp, w = a.shape
        if mp > self.rpt * self.threads or w > COLS_LW:   # the workspace holds no more
            raise ValueError(f"getrf_panel_cols<{self.cw},{self.rpt},{self.threads}> takes at "
                             f"most {self.rpt * self.threads} x {COLS_LW}, got {mp} x {w}")
        kk = min(mp, w)
        lbuf, masks, flag, tag0 = self.ws.cols_state(2 * kk)   # two flag tags per group
        # One block per CW columns (all rows), co-resident (cooperative launch).
        self.launch((-(-w // self.cw), 1, 1), (self.threads, 1, 1), mp, w, a.data.ptr,
                    a.strides[0] // 4, piv.data.ptr, self.ws.info.data.ptr, col_base,
                    lbuf.data.ptr, masks.data.ptr, flag.data.ptr, tag0)

    def _leaf_cluster(self, a, piv, col_base):
        mp, w = a.shape
        # One cluster = the whole grid (the kernel's __cluster_dims__(CS)); an ordinary launch.
        # Positions, hence pivots, 0-based relative to a's first row.
        self.kernel((self.cs,), (THREADS,),
                    (np.int32(mp), np.int32(w), a, np.int64(a.strides[0] // 4), piv,
                     self.ws.info, np.int32(col_base)))

    def _leaf_tile(self, a, piv, col_base):
        mp, w = a.shape
        kk = min(mp, w)
        g = -(-mp // (THREADS * self.rpt))
        lda = a.strides[0] // 4
        ws = self.ws
        self.kernel((g,), (THREADS,),
                    (np.int32(mp), np.int32(w), a, np.int64(lda), piv, ws.info,
                     np.int32(col_base), ws.rec, ws.rec[2 * GCAP * REC:], ws.counter,
                     np.uint32(ws.arrivals)))
        ws.arrivals = (ws.arrivals + g * kk) % 2**32

    def laswp(self, a, piv):
        n, k = a.shape[1], piv.shape[0]
        if n and k:   # piv: a contiguous int32 slice of the panel's pivots
            self._laswp(n, a.data.ptr, a.strides[0] // 4, k, piv.data.ptr,
                        wp=self.ws.laswp_ws.data.ptr)

    def trsm(self, l11, b):
        if b.shape[1]:
            self._trsm(b.shape[0], b.shape[1], l11.data.ptr, l11.strides[0] // 4, b.data.ptr,
                       b.strides[0] // 4)

    def gemm_sub(self, a, b, c):
        """c -= a b, all three row-major (as gemm_into picks: split K where it would)."""
        (m, k), n = a.shape, b.shape[1]
        self._gemm(m, n, k, -1.0, a.data.ptr, a.strides[0] // 4, True, b.data.ptr,
                   b.strides[0] // 4, True, 1.0, c.data.ptr, c.strides[0] // 4)

    def add(self, piv, off):
        piv += np.int32(off)


_CLUSTER_ATTR_SET = set()
_CLUSTER_SIZE = {}      # device id -> the cluster size that launches (0: none), probed once


def cluster_kernel(lw, rpt, cs):
    """getrf_leaf_cluster<lw, rpt, cs> for the current device; cs > 8 opts the kernel in to
    non-portable cluster sizes (once)."""
    cp = cupy()
    name = f"getrf_leaf_cluster<{lw},{rpt},{cs}>"
    kernel = get_kernel(FAMILY, name)
    key = (cp.cuda.runtime.getDevice(), name)
    if cs > 8 and key not in _CLUSTER_ATTR_SET:
        cp.cuda.driver.funcSetAttribute(
            kernel.kernel.ptr, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        _CLUSTER_ATTR_SET.add(key)
    return kernel


def cluster_size():
    """The first of CLUSTER_SIZES whose cluster leaves all launch on the current device (0 if
    none).  Probed once per device: each shape factors a 1 x 1 block on the current stream,
    which is then synchronised (planning time only); a failure falls to the next size."""
    cp = cupy()
    dev = cp.cuda.runtime.getDevice()
    if dev not in _CLUSTER_SIZE:
        found = 0
        for cs in CLUSTER_SIZES:
            try:
                for lw, rpt in CLUSTER_SHAPES:
                    a = cp.full((1, 1), 2.0, dtype=np.float32)
                    piv = cp.full(1, -1, dtype=np.int32)
                    info = cp.zeros(1, dtype=np.int32)
                    cluster_kernel(lw, rpt, cs)(
                        (cs,), (THREADS,), (np.int32(1), np.int32(1), a, np.int64(1), piv, info,
                                            np.int32(0)))
                    cp.cuda.get_current_stream().synchronize()
                    if int(piv.get()[0]) != 0 or float(a.get()[0, 0]) != 2.0:
                        raise RuntimeError(f"cluster leaf <{lw},{rpt},{cs}>: wrong probe result")
            except Exception:   # e.g. no 16-CTA cluster fits (non-portable size refused)
                continue
            found = cs
            break
        _CLUSTER_SIZE[dev] = found
    return _CLUSTER_SIZE[dev]


def getrf_panel_device(a, piv=None, ws=None, col_base=0, leaf=None):
    """Factor the row-major CuPy view a (mp x w, unit column stride) in place on the current
    stream; returns (piv, ws): piv int32 (min(mp, w),) 0-based relative to a's first row, and
    the workspace whose ws.info (device int32) holds col_base + the first zero column (1-based)
    or 0.  No host synchronisation (but the first plan on a device probes the cluster size,
    see cluster_size).  `leaf` forces a leaf (tests): ("cols",) (getrf_panel_cols, up to
    8192 rows) or ("cols", CW, RPT, T) of COLS_SHAPES, ("cluster", LW) or ("cluster", LW, CS)
    with LW of CLUSTER_SHAPES (CS: default cluster_size()), ("row", LW) with LW in ROW_WIDTHS,
    or (LW, RPT) of LEAF_SHAPES (the tile leaf)."""
    cp = cupy()
    mp, w = a.shape
    if a.dtype != np.float32 or (w > 1 and a.strides[1] != 4) or a.strides[0] % 4:
        raise ValueError("a must be a float32 row-major view (unit column stride)")
    if piv is None:
        piv = cp.empty(min(mp, w), dtype=np.int32)
    if ws is None:
        ws = PanelWorkspace()
    if min(mp, w) == 0:
        return piv, ws
    if leaf is None:
        plan = ws.plan(mp)
    elif leaf[0] == "cols":
        # ("cols",): the shape for mp rows; ("cols", CW, RPT, T): that shape
        shape = tuple(leaf[1:4]) if len(leaf) > 1 else cols_shape(mp, 1 << 30)
        if shape not in COLS_SHAPES or mp > shape[1] * shape[2]:
            raise ValueError(f"{mp} rows do not fit getrf_panel_cols {shape} (shapes "
                             f"{COLS_SHAPES})")
        plan = ("cols", COLS_LW, shape[1], shape[0], shape[2])
    elif leaf[0] == "cluster":
        rpt = dict(CLUSTER_SHAPES).get(leaf[1])
        cs = leaf[2] if len(leaf) > 2 else cluster_size()   # any LW of CLUSTER_SHAPES
        if rpt is None or cs not in CLUSTER_SIZES:
            raise ValueError(f"cluster leaf {leaf}: LW not in {CLUSTER_SHAPES} or CS not in "
                             f"{CLUSTER_SIZES} (or no cluster launches on this device)")
        if mp > cs * THREADS * rpt:
            raise ValueError(f"{mp} rows do not fit one cluster leaf {leaf} "
                             f"({cs * THREADS * rpt} rows)")
        plan = ("cluster", leaf[1], rpt, cs)
    elif leaf[0] == "row":
        if leaf[1] not in ROW_WIDTHS:
            raise ValueError(f"row leaf width {leaf[1]} is not one of {ROW_WIDTHS}")
        plan = ws.plan(mp, leaf[1], cluster=False)
        if plan[0] != "row":
            raise ValueError(f"{mp} rows do not fit the row leaf's co-resident grid")
    elif tuple(leaf[:2]) not in LEAF_SHAPES or -(-mp // (THREADS * leaf[1])) > GCAP:
        raise ValueError(f"leaf {leaf} is not one of {LEAF_SHAPES} or too small for {mp} rows")
    else:
        plan = ("tile", leaf[0], leaf[1])
    factor_panel(ws.steps(plan), a, piv, plan[1], col_base)
    return piv, ws


# ------------------------------------------------------------------------------------ host

def getf2_host(a, piv, col_base=0):
    """Host model of the leaf kernel (same pivot rule, swaps, scaling); returns info or 0."""
    mp, w = a.shape
    info = 0
    tiny = np.finfo(np.float32).tiny
    for j in range(min(mp, w)):
        col = np.abs(a[j:, j])
        col = np.where(np.isnan(col), -1.0, col)
        p = j + int(np.argmax(col))            # first max, as isamax and the kernel
        piv[j] = p
        if p != j:
            a[[j, p]] = a[[p, j]]
        pv = a[j, j]
        if pv != 0:
            if abs(pv) >= tiny:
                a[j + 1:, j] *= np.float32(1) / pv
            else:
                a[j + 1:, j] /= pv
            a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
        elif info == 0:
            info = col_base + j + 1
    return info


def getf2_rows_host(a, piv, col_base=0):
    """Host model of getrf_leaf_row and getrf_leaf_cluster: rows never move, positions do
    (lazy swaps).

    Row t keeps its values; pos[t] is where it belongs.  Column j: the first max |x| over the
    rows with pos >= j (ties to the smaller position), positions j and p exchange, the rows
    with pos > j are scaled and updated; at the end row t is written to a[pos[t]].  Element
    operations are getf2_host's, so the results agree bit for bit.
    """
    mp, w = a.shape
    x = a.copy()
    pos = np.arange(mp)
    info = 0
    tiny = np.finfo(np.float32).tiny
    for j in range(min(mp, w)):
        v = np.abs(x[:, j])
        ok = (pos >= j) & ~np.isnan(v)
        if ok.any():
            best = v[ok].max()
            t = int(np.flatnonzero(ok & (v == best))[np.argmin(pos[ok & (v == best)])])
            p = int(pos[t])
        else:                                   # all NaN: no pivot, nothing moves
            piv[j] = j
            continue
        piv[j] = p
        tj = int(np.flatnonzero(pos == j)[0])
        pos[tj], pos[t] = p, j
        prow = x[t].copy()
        pv = prow[j]
        if pv != 0:
            below = pos > j
            if abs(pv) >= tiny:
                x[below, j] *= np.float32(1) / pv
            else:
                x[below, j] /= pv
            x[np.ix_(below, np.arange(j + 1, w))] -= np.outer(x[below, j], prow[j + 1:])
        elif info == 0:
            info = col_base + j + 1
    a[pos] = x
    return info


def getrf_cols_host(a, cw, col_base=0, gw=None):
    """Host model of getrf_panel_cols (w <= COLS_LW columns in CW-wide slabs, handed over in
    groups of gw columns, default cols_group(cw)), in place; returns (piv, info).

    Slab s is factored by getf2_host's rules on its own columns; after each group of gw of
    them, every other column block applies the group's interchanges as the kernel does (the
    touched positions followed back through the transpositions), and the blocks right of it
    take U12 = L11^{-1} A12 by forward substitution and A22 -= L21 U12, one pivot column at a
    time and skipping the columns without a pivot.  Element operations and their order are
    getf2_host's, so the results agree bit for bit (the kernel's are getrf_leaf_row's: the
    same with fused multiply-adds).  A column whose candidates are all NaN gets piv[j] = j
    and is left alone (as the kernels).
    """
    mp, w = a.shape
    kk = min(mp, w)
    gw = cols_group(cw) if gw is None else gw
    piv = np.zeros(kk, dtype=np.int32)
    info = 0
    tiny = np.finfo(np.float32).tiny
    blocks = [a[:, c:c + cw].copy() for c in range(0, w, cw)]
    for s in range(-(-kk // cw)):
        x = blocks[s]
        mask = 0
        for k0 in range(0, min(cw, kk - s * cw), gw):   # group: slab columns k0 .. k0 + gs - 1
            j0 = s * cw + k0
            gs = min(gw, kk - j0, cw - k0)
            for jl in range(k0, k0 + gs):
                j = s * cw + jl
                col = np.abs(x[j:, jl])
                if np.isnan(col).all():
                    piv[j] = j
                    continue
                p = j + int(np.nanargmax(col))     # first max
                piv[j] = p
                x[[j, p]] = x[[p, j]]
                pv = x[j, jl]
                if pv != 0:
                    x[j + 1:, jl] = x[j + 1:, jl] * (np.float32(1) / pv) if abs(pv) >= tiny \
                        else x[j + 1:, jl] / pv
                    x[j + 1:, jl + 1:] -= np.outer(x[j + 1:, jl], x[j, jl + 1:])
                    mask |= 1 << jl
                elif info == 0:
                    info = col_base + j + 1
            ps = [int(p) for p in piv[j0:j0 + gs]]
            dests = [j0 + k for k in range(gs)] + [
                p for k, p in enumerate(ps) if p >= j0 + gs and p not in ps[:k]]
            srcs = []
            for d in dests:
                for m in reversed(range(gs)):
                    d = ps[m] if d == j0 + m else (j0 + m if d == ps[m] else d)
                srcs.append(d)
            for b, y in enumerate(blocks):
                if b == s:
                    continue
                y[dests] = y[srcs]
                if b > s:
                    u = y[j0:j0 + gs].copy()
                    for k in range(gs):
                        for m in range(k):
                            if mask >> (k0 + m) & 1:
                                u[k] -= x[j0 + k, k0 + m] * u[m]
                    y[j0:j0 + gs] = u
                    for k in range(gs):
                        if mask >> (k0 + k) & 1:
                            y[j0 + gs:] -= np.outer(x[j0 + gs:, k0 + k], u[k])
    a[...] = np.concatenate(blocks, axis=1) if blocks else a
    return piv, info


class _HostSteps:
    """factor_panel's steps in NumPy (the CPU tests' model of the device recursion)."""

    def __init__(self):
        self.info = 0

    def leaf(self, a, piv, col_base):
        info = getf2_host(a, piv, col_base)
        self.info = self.info or info

    def laswp(self, a, piv):
        from ..layout.laswp import laswp_reference
        laswp_reference(a, piv)

    def trsm(self, l11, b):
        import scipy.linalg
        b[...] = scipy.linalg.solve_triangular(l11, b, lower=True, unit_diagonal=True)

    def gemm_sub(self, a, b, c):
        c -= a @ b

    def add(self, piv, off):
        piv += off


def getrf_panel_host(a, leaf_width=LWMAX, col_base=0):
    """factor_panel with the NumPy steps on a float32 array (in place); returns (piv, info)."""
    piv = np.zeros(min(a.shape), dtype=np.int32)
    steps = _HostSteps()
    factor_panel(steps, a, piv, leaf_width, col_base)
    return piv, steps.info


# ------------------------------------------------------------------------------------ driver

class GpuPanel:
    """Panel factored on the GPU, on the driver's panel stream, with no host wait.

    `factor` returns at once with use_inverse=False (the update uses the triangular solve, so
    no L11^{-1} is needed) and info=0; the first exactly zero pivot is kept on the device and
    read once by `final_info` after the driver's `ops.finish()`.  With NumpyOps the same
    recursion runs on the host (getf2_host leaves), queued on the emulated panel stream.
    `leaf_width` overrides the leaf width (host emulation only: the device uses leaf_plan).
    `devices`: how many GPUs factor the matrix (the row leaf's block cap: row_block_cap).
    """

    name = "gpu"
    host_wait = False   # factor() only enqueues

    def __init__(self, leaf_width=None, devices=1):
        self.leaf_width = leaf_width
        self.devices = devices
        self._ws = None
        self._host = None

    @staticmethod
    def _is_host(ops):
        return not hasattr(ops, "streams")     # NumpyOps emulates streams with queues

    def send(self, ops, step, j0, j1, after):
        """Nothing to ship: the panel stream waits until the panel's columns are updated.
        Returns the timeline's pair of events (None unless ops.timed: `mark`)."""
        ops.wait("panel", after)
        start = mark(ops, "panel")
        return start, mark(ops, "panel")

    def factor(self, ops, step, j0, j1, sent, inv_threshold):
        t = time.perf_counter()
        start = mark(ops, "panel")
        panel, piv = ops.panel_view(j0, j1)
        if self._is_host(ops):
            if self._host is None:
                self._host = _HostSteps()
            lw = self.leaf_width or leaf_plan(panel.shape[0], _NUM_SMS_GUESS)[1]
            steps = self._host
            ops._enqueue("panel", "getrf_gpu", step,
                         lambda: factor_panel(steps, panel, piv, lw, j0))
        else:
            with ops.device, ops.streams["panel"]:
                # Pivots: written on the device, 0-based relative to row j0 (CupyOps.piv).
                getrf_panel_device(panel, piv, self.workspace(), col_base=j0)
        done = ops.record("panel")
        return PanelResult(0, False, done, start, t, t, float("nan"))

    def workspace(self):
        """The leaves' device state (created at the first use, on the current device)."""
        if self._ws is None:
            self._ws = PanelWorkspace(self.devices)
        return self._ws

    def final_info(self, ops):
        """LAPACK's info for the whole factorization (call after ops.finish())."""
        if self._host is not None:
            return int(self._host.info)
        if self._ws is not None:
            with ops.device:
                return int(self._ws.info.get()[0])
        return 0
