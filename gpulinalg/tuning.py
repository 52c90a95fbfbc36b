"""Every tuning choice of gpulinalg, in one table per architecture and element type.

`Tuning` is a frozen dataclass: each field is one block size, cut-over, cap or tile pick,
with one line of meaning here; `docs/tuning.md` gives for each what it trades, the command
that reproduces the evidence, the GPU and the date.  As MAGMA's block sizes are looked up per
routine and precision, a table belongs to one architecture and one element type (its
`dtype` field): the library reads the table of the current device and the working dtype
(`current(element=...)`).  An experiment builds a modified table and runs under it,

    with gpulinalg.tuning.override(dataclasses.replace(tuning.current(), row_block_cap=64)):
        lu_factor(a)

(the override applies to the work of its table's dtype only),

never by changing module globals.  Device properties (SM count, compute capability) are not
tuning: they come from the device (gpulinalg/core/device.py).
"""

import contextlib
import contextvars
from dataclasses import dataclass, fields, replace

from .core import device
from .core.element import F32

__all__ = ["Tuning", "SM90", "SM90_F64", "DEFAULT", "DEFAULT_F64", "current",
           "for_capability", "override"]


@dataclass(frozen=True)
class Tuning:
    dtype: str                   # the element type the table tunes ("float32", "float64")

    # ---- LU: block size (panel width nb) when the caller gives none
    # Steps are ((k, nb), ...): nb for min(m, n) > k, the last that applies wins.
    cpu_nb: int                  # host (LAPACK) panel: nb up to cpu_nb_steps' first k
    cpu_nb_steps: tuple          # host panel: wider panels for larger matrices
    gpu_nb: int                  # GPU panel: nb of the smallest matrices (one row-leaf launch)
    gpu_nb_steps_fp32: tuple     # GPU panel, FP32 updates, one GPU
    gpu_nb_steps_tc: tuple       # GPU panel, tensor-core (3xTF32 / TF32) updates, one GPU
    gpu_nb_steps_2gpu: tuple     # GPU panel on two GPUs
    gpu_nb_steps_multi: tuple    # GPU panel on three or more GPUs

    # ---- LU: the GPU panel's row leaf (kernels/getrf_leaf_row.cu)
    row_block_cap: int           # most blocks of a row leaf on one GPU (more rows per thread above)
    row_block_cap_2gpu: int      # the same on each of two GPUs
    row_block_cap_multi: int     # the same on each of three or more GPUs
    row_early_rpt: int           # row leaves with at most this many rows per thread publish early

    # ---- LU: precision="auto" and the update's arithmetic
    lu_tc_min_mn: int            # tensor-core updates from this many matrix elements (m * n)
    lu_tc_min_trailing: int      # ... while the trailing matrix has this many rows or columns
    lu_tc_tail_nb: int           # ... that cut only for panels at most this wide
    lookahead_fp32_cols: int     # look-ahead products at most this wide run in FP32
    l21_colmajor_min_cols: int   # FP32 update reads L21 column-major from this many columns (0: never)

    # ---- LU: CUDA-graph replay (one GPU)
    graph_max_elements: int      # largest m * n replayed
    graph_cache_entries: int     # graphs kept
    graph_cache_bytes: int       # device memory the kept graphs may hold together (newest always kept)

    # ---- LU on several GPUs
    panel_first_columns: int     # panel before the owner's update once this many columns are left (0: never)
    panel_first_min_devices: int # ... on at least this many GPUs
    tail_columns: int            # half-width panels once this many columns are left ...
    tail_min_nb: int             # ... when nb is at least this
    scatter_streams: int         # side streams per GPU of a scatter from a GPU
    scatter_first: int           # scatter chunks per GPU enqueued before the factorization (0: all)
    graph_multi_max_elements: int  # largest m * n replayed from a CUDA graph on several GPUs
    graph_multi_cache_entries: int # several-GPU graphs kept (each holds a copy of its matrix)

    # ---- host <-> GPU staging (core/host_io.py) and the host panel's threads
    staging_bytes_multi: int     # pinned buffer size per GPU, several GPUs
    pack_threads_multi: int      # packing threads per GPU, several GPUs
    staging_bytes_one: int       # pinned buffer size, one GPU
    staging_parts: int           # one GPU: the matrix in at least this many buffers
    pack_threads_one: int        # packing threads, one GPU
    pack_min_bytes: int          # smallest share of a buffer one thread packs
    staged_min_bytes: int        # matrices below this go by the plain copy
    openblas_spare_share: int    # host panel: cores // this kept from OpenBLAS (0: none)
    switch_interval_us: int      # host panel: the interpreter's switch interval meanwhile (0: unchanged)

    # ---- SGEMM (gemm/): precision="auto" and tile picks
    gemm_tc_min_k: int           # auto: 3xTF32 from this k ...
    gemm_tc_min_mn: int          # ... and m * n at least this ...
    gemm_tc_min_mnk: int         # ... or m * n * k at least this
    simt_pipe_max_k_mmajor: int  # rank-k update with A M-contiguous: pipe128 up to this k (0: never)
    simt_long_k_wave: float      # long-k products take the 256x128 tile from this fraction of a wave
    simt_split_variant: str      # tile of the split-K products
    simt_split_min_part: int     # split-K: shortest k per part
    simt_split_block_cost: int   # split-K: a block's fixed cost, in k-steps
    simt_split_max: int          # split-K: most parts
    wgmma_variant: tuple         # (3xtf32, tf32) wgmma tile of large products
    wgmma_small_variant: tuple   # (3xtf32, tf32) wgmma tile where the large one leaves SMs idle
    wgmma_shared_variant: tuple  # (3xtf32, tf32) wgmma tile beside other work (non-persistent)
    mma_variant: tuple           # (3xtf32, tf32) mma.sync tile (tensor cores without wgmma)
    mma_small_variant: str       # mma.sync tile where the 128x128 one leaves most SMs idle

    # ---- DGEMM (gemm/dmma.py, float64 tables): FP64 tensor-core tile picks
    dmma_variant: str            # tile of large products
    dmma_small_variant: str      # tile where the large one leaves most SMs idle
    dmma_update_variant: str     # tile of the LU's rank-k updates (k <= 512)

    # ---- small matrices (lu/batched.py)
    batched_shapes: tuple        # batched kernel's (NMAX, G, C) per order class, NMAX ascending
    batched_blocked_min_order: int  # stacks of this order and above: the blocked batched kernel
    batched_blocked_shapes: tuple   # blocked kernel's (NB, THREADS, RPT) per class of M <= THREADS*RPT
    one_matrix_batched_max: int  # one matrix of order up to this is factored by the batched kernels

    # ---- few-column triangular solve (lu/trsv.py)
    trsv_nb: int                 # rows per block (the largest the device's shared memory takes)
    solve_tc_min_rhs: int        # lu_solve's blocked substitution couples blocks by precision="auto"
                                 # GEMMs (float32: 3xTF32) from this many right-hand sides

    # ---- stacked solve (lu/getrs_batched.py)
    stack_solve_register_max_n: int  # orders up to this keep the solution in registers
                                     # (getrs_batched); larger ones run getrs_tiled

    # ---- solve (gesv.py): float64 systems by a float32 LU and float64 refinement
    solve_refine_min_n: int      # refine from this n (float64 table); below, factor in float64
    solve_refine_max_iter: int   # refinement steps before the float64 factorization answers
    solve_refine_stall: float    # a step must shrink the residual below this share of the last

    # ---- transpose (layout/transpose.py)
    transpose_variant: str       # tile of aligned matrices
    transpose_off_grid: str      # tile where B's rows are off the 128-byte grid
    transpose_off_grid_el: str   # ... and B's row pitch not a multiple of 128 bytes
    transpose_off_sector: str    # tile where B's pitch or start is off the 32-byte sectors
    transpose_small: str         # tile of small matrices
    transpose_small_tiles_per_sm: int  # the small tile below this many 64x64 tiles per SM

    def __hash__(self):
        # A graph cache key holds the table: its hash is computed once.
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", h)
            return h


# Measured on the H100 (and the H200 for several GPUs): docs/tuning.md.
SM90 = Tuning(
    dtype="float32",
    cpu_nb=128,
    cpu_nb_steps=((8192, 256),),
    gpu_nb=128,
    gpu_nb_steps_fp32=((8192, 256), (16384, 512)),
    gpu_nb_steps_tc=((8192, 512), (24576, 1024)),
    gpu_nb_steps_2gpu=((8192, 256), (16384, 512)),
    gpu_nb_steps_multi=((4096, 256), (8192, 512), (28672, 256), (40960, 512)),
    row_block_cap=32,
    row_block_cap_2gpu=64,
    row_block_cap_multi=160,
    row_early_rpt=2,
    lu_tc_min_mn=8192 * 8192,
    lu_tc_min_trailing=4096,
    lu_tc_tail_nb=256,
    lookahead_fp32_cols=128,
    l21_colmajor_min_cols=2048,
    graph_max_elements=1 << 28,
    graph_cache_entries=4,
    graph_cache_bytes=1 << 30,
    panel_first_columns=16384,
    panel_first_min_devices=3,
    tail_columns=12288,
    tail_min_nb=512,
    scatter_streams=2,
    scatter_first=2,
    graph_multi_max_elements=1 << 30,
    graph_multi_cache_entries=2,
    staging_bytes_multi=1 << 28,
    pack_threads_multi=4,
    staging_bytes_one=1 << 25,
    staging_parts=8,
    pack_threads_one=8,
    pack_min_bytes=1 << 20,
    staged_min_bytes=1 << 22,
    openblas_spare_share=4,
    switch_interval_us=50,
    gemm_tc_min_k=64,
    gemm_tc_min_mn=3072 * 3072,
    gemm_tc_min_mnk=2 * 10**9,
    simt_pipe_max_k_mmajor=128,
    simt_long_k_wave=0.9,
    simt_split_variant="dbuf128",
    simt_split_min_part=256,
    simt_split_block_cost=64,
    simt_split_max=64,
    wgmma_variant=("128x256tp", "128x256tf"),
    wgmma_small_variant=("128x128t", "128x256tf"),
    wgmma_shared_variant=("128x256t", "128x256tf"),
    mma_variant=("128x128s", "128x128"),
    mma_small_variant="64x128s",
    dmma_variant="128x128k32",
    dmma_small_variant="64x64",
    dmma_update_variant="128x64sb",
    batched_shapes=((8, 4, 1), (16, 8, 1), (32, 32, 1), (64, 32, 2), (128, 32, 8)),
    batched_blocked_min_order=129,
    batched_blocked_shapes=((32, 256, 1), (32, 256, 2), (32, 512, 2)),
    one_matrix_batched_max=256,
    trsv_nb=128,
    solve_tc_min_rhs=1024,
    stack_solve_register_max_n=16,
    solve_refine_min_n=4096,
    solve_refine_max_iter=30,
    solve_refine_stall=0.5,
    transpose_variant="64x4-pair",
    transpose_off_grid="32x8-pf256",
    transpose_off_grid_el="32x8-pf256-el",
    transpose_off_sector="128x8-skew32",
    transpose_small="32x8",
    transpose_small_tiles_per_sm=4,
)

# float64 on the H200: the fields of the float64 LU (its panels, the DGEMM's tiles); the
# float32 kernels' fields (SIMT and TF32 tiles) are not read for float64 work.  nb is at least
# 256 (GPU and host panels): each trailing element is rounded once per update, and with
# 128-wide steps the backward error on kappa = 1e6 matrices is ~2.4x LAPACK's dgetrf
# (docs/tuning.md).
SM90_F64 = replace(
    SM90,
    dtype="float64",
    cpu_nb=256,
    cpu_nb_steps=(),
    gpu_nb=256,
    gpu_nb_steps_tc=((16384, 512),),   # FP64 tensor-core updates
    l21_colmajor_min_cols=0,
    trsv_nb=64,                        # the double kernel's largest block
    batched_shapes=((8, 4, 1), (16, 8, 1), (32, 32, 1), (64, 32, 4), (128, 32, 16)),
    batched_blocked_min_order=65,
    batched_blocked_shapes=((16, 256, 1), (16, 256, 2), (16, 512, 2)),
)

# Other architectures: sm_90's values (not measured elsewhere; the tensor-core fields
# apply only where those kernels run).
DEFAULT = replace(SM90)
DEFAULT_F64 = replace(SM90_F64)

_TABLES = {((9, 0), "float32"): SM90, ((9, 0), "float64"): SM90_F64}
_DEFAULTS = {"float32": DEFAULT, "float64": DEFAULT_F64}
_OVERRIDE = contextvars.ContextVar("gpulinalg_tuning", default=())


def for_capability(major, minor, element=F32):
    """The table of a device of compute capability major.minor for `element`'s work."""
    name = element.real.name   # complex work (cuSOLVER's) reads only the plan's fields
    return _TABLES.get(((major, minor), name), _DEFAULTS[name])


def current(device_id=None, element=F32):
    """The table in force for `element`'s work: the innermost `override` of that dtype, else
    the current (or given) device's, else (no GPU) the DEFAULT of that dtype."""
    name = element.real.name
    for table in reversed(_OVERRIDE.get()):
        if table.dtype == name:
            return table
    cc = device.capability(device_id)
    return _DEFAULTS[name] if cc is None else for_capability(*cc, element)


@contextlib.contextmanager
def override(table):
    """Run the block under `table` (a Tuning) instead of the device's own table of
    table.dtype."""
    if not isinstance(table, Tuning):
        raise TypeError(f"override takes a Tuning, got {type(table).__name__}")
    token = _OVERRIDE.set(_OVERRIDE.get() + (table,))
    try:
        yield table
    finally:
        _OVERRIDE.reset(token)
