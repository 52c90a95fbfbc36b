"""Shared benchmark machinery: event timing, environment record, the command line's common
options (help layout, --json, --plot, --wide, --quiet, --tuning), the progress display,
tables, JSON and plots."""

import argparse
import ast
import dataclasses
import datetime
import difflib
import functools
import itertools
import json
import os
import pathlib
import platform
import random
import statistics
import sys

import numpy as np


def environment():
    """Device name, compute capability, SM count, CUDA/CuPy/NumPy/SciPy versions, date."""
    import cupy as cp
    import scipy
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    rt = cp.cuda.runtime.runtimeGetVersion()
    drv = cp.cuda.runtime.driverGetVersion()
    return {
        "device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "compute_capability": dev.compute_capability,
        "sm_count": props["multiProcessorCount"],
        "device_count": cp.cuda.runtime.getDeviceCount(),
        "cuda_runtime": f"{rt // 1000}.{rt % 1000 // 10}",
        "cuda_driver": f"{drv // 1000}.{drv % 1000 // 10}",
        "cupy": cp.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
        "python": platform.python_version(), "host_cpus": os.cpu_count(),
        "CUPY_TF32": os.environ.get("CUPY_TF32", "unset"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def time_gpu(fn, warmup=2, repeat=10, setup=None):
    """Median milliseconds of fn() timed with CUDA events on the current stream.

    setup(), if given, runs before each call outside the timed region (e.g. to restore an
    input that fn overwrites).
    """
    import cupy as cp
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def time_graph(fn, warmup=2, repeat=10, calls=10):
    """Median milliseconds of ONE fn() call, replayed from a CUDA graph; returns (ms, how).

    Kernel-only timing: fn (a callable, or a list of callables taken in turn, e.g. to rotate
    among input sets so that they do not sit in L2) is run once eagerly (compilation, module
    load, lazy allocations, caches), then `calls` calls are captured into one graph on a
    private non-blocking stream, and the graph's replays are timed with CUDA events on that
    stream; the median replay time is divided by `calls`.  Python argument handling, memory
    pool allocations and the host-side launch gaps are outside the region; what is left is
    the kernels and the GPU-side gaps between the launches of a graph.  Anything fn
    allocates must be preallocated outside (pass workspaces in): memory taken from the pool
    during the capture would be handed out again while the graph still uses it.

    how is "graph" or, when the capture fails (an old CuPy, a synchronising call in fn),
    "events (graph capture failed: ...)" with the time_gpu() figure of one call instead.
    """
    import cupy as cp
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    for f in fns:
        f()
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            stream.begin_capture()
            try:
                for i in range(calls):
                    fns[i % len(fns)]()
            finally:
                graph = stream.end_capture()
        for _ in range(warmup):
            graph.launch(stream)
        stream.synchronize()
    except Exception as exc:   # noqa: BLE001 -- report the reason and fall back
        cp.cuda.Device().synchronize()
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        turn = iter(range(10**9))
        return (time_gpu(lambda: fns[next(turn) % len(fns)](), warmup, repeat),
                f"events (graph capture failed: {why})")
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        graph.launch(stream)
        stop.record(stream)
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / calls)
    return statistics.median(times), "graph"


_HOLD_SOURCE = r"""
extern "C" __global__ void hold_stream(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""


@functools.lru_cache(maxsize=None)
def _hold_kernel():
    import cupy as cp
    return cp.RawKernel(_HOLD_SOURCE, "hold_stream")


def _hold_stream(ns):
    """Enqueue a one-thread kernel that keeps the current stream busy for ns nanoseconds."""
    _hold_kernel()((1,), (1,), (np.uint64(ns),))


def time_burst(fns, warmup=2, repeat=10, calls=10, queued=False):
    """{name: median milliseconds of ONE call} for a dict of callables, each timed as a burst
    of `calls` back-to-back calls between two CUDA events on the current stream (no host
    synchronisation inside a burst: the steady-state throughput of a loop of calls, launch
    overhead included only where the GPU outruns the host).  The candidates take turns in
    every round, so drift in clocks or in the neighbours' load hits them alike, in an order
    shuffled each round (seeded): a burst pays for what its predecessor left in the L2 (dirty
    lines: 1-5% of a transpose's time at 4000^2), so no candidate always follows the same
    one.

    queued=True times device work only: each burst is enqueued behind a kernel that holds
    the stream (nvbench's "blocking kernel"), so all its launches are queued before the
    first event runs and the host's per-call time drops out.  The hold starts at 1 ms; a
    burst whose enqueue outlasted its hold is timed again, with a hold of twice that
    enqueue's host time from then on."""
    import time

    import cupy as cp
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    cp.cuda.get_current_stream().synchronize()
    times = {name: [] for name in fns}
    names, rng = list(fns), random.Random(0)
    hold_ns = 10**6
    for _ in range(repeat):
        rng.shuffle(names)
        for name in names:
            fn = fns[name]
            while True:
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                if queued:
                    _hold_stream(hold_ns)
                t0 = time.perf_counter_ns()
                start.record()
                for _ in range(calls):
                    fn()
                stop.record()
                host_ns = time.perf_counter_ns() - t0
                stop.synchronize()
                if not queued or host_ns < hold_ns:
                    break
                hold_ns = 2 * host_ns
            times[name].append(cp.cuda.get_elapsed_time(start, stop) / calls)
    return {name: statistics.median(t) for name, t in times.items()}


def free_pool():
    """Return the freed blocks of CuPy's pool to the device (before the next case's
    matrices)."""
    import cupy as cp
    cp.get_default_memory_pool().free_all_blocks()


def frees_pool(measure):
    """A case's measuring function, then free_pool: the arrays it made are garbage once it
    returns, so the next case starts with the device's memory back."""
    @functools.wraps(measure)
    def measured(*args, **kwargs):
        row = measure(*args, **kwargs)
        free_pool()
        return row
    return measured


def time_wall(fns, warmup=1, repeat=5):
    """{name: median milliseconds of one call} for a dict of callables, each call timed by
    the host's clock up to a device synchronisation after it (what a user's call costs, host
    work included).  The candidates take turns in every round, in an order shuffled each
    round (seeded)."""
    import time

    import cupy as cp
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    cp.cuda.Device().synchronize()
    times = {name: [] for name in fns}
    names, rng = list(fns), random.Random(0)
    for _ in range(repeat):
        rng.shuffle(names)
        for name in names:
            t0 = time.perf_counter()
            fns[name]()
            cp.cuda.Device().synchronize()
            times[name].append(1e3 * (time.perf_counter() - t0))
    return {name: statistics.median(t) for name, t in times.items()}


def time_both(fn, warmup=2, repeat=10, calls=10):
    """{'call_ms', 'graph_ms', 'graph_how'}: time_gpu (one Python call between events, fn
    rotating through a list like time_graph) and time_graph of the same fn."""
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    turn = iter(range(10**9))
    call = time_gpu(lambda: fns[next(turn) % len(fns)](), warmup, repeat)
    graph, how = time_graph(fns, warmup, repeat, calls)
    return {"call_ms": call, "graph_ms": graph, "graph_how": how}


def print_table(columns, rows, title=None):
    """Print rows (dicts) as an aligned text table with the given (key, header, fmt) columns."""
    if title:
        print(title)
    cells = [[fmt.format(r[k]) if r.get(k) is not None else "-" for k, _, fmt in columns]
             for r in rows]
    heads = [h for _, h, _ in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(heads)]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths)))


def size_label(m, n, k=None):
    """'4096' for a square, '6000x10000' otherwise ('16384x16384x256' with k)."""
    if k is not None:
        return f"{m}x{n}x{k}"
    return f"{m}" if m == n else f"{m}x{n}"


def varying(rows, key):
    """Whether the rows hold more than one value of `key` (a column worth showing)."""
    return len({repr(r.get(key)) for r in rows}) > 1


def write_json(path, routine, rows, extra=None):
    """Write {'routine', 'environment', 'rows', ...} to path (folders created)."""
    if not path:
        return
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"routine": routine, "environment": environment(), "rows": rows}
    doc.update(extra or {})
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")


# The command line ----------------------------------------------------------------------------

PLOT_HINT = 'the plots need matplotlib: pip install ".[plot]"'


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and each option's default after its help; an option whose
    default is None, False or empty says in its help what it does by default."""

    def _get_help_string(self, action):
        default, text = action.default, action.help or ""
        if (default is None or default is False or default == [] or "(default" in text
                or "default:" in text):
            return action.help
        return super()._get_help_string(action)


def add_output_arguments(parser, routine):
    """--json, --plot, --wide and --quiet: what a routine writes and prints."""
    parser.add_argument("--json", metavar="PATH",
                        help="write the rows and the environment to this JSON file")
    parser.add_argument("--plot", action="store_true",
                        help="also write the plot as a PNG next to the --json file (PATH with "
                             f"the suffix .png; without --json: ./{routine}.png); needs "
                             'matplotlib: pip install ".[plot]"')
    add_display_arguments(parser)


def add_display_arguments(parser):
    """--wide and --quiet."""
    parser.add_argument("--wide", action="store_true",
                        help="print every column (default: a short summary: size, ours, "
                             "the vendor library, their ratio, the error)")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on stderr (by default a progress bar when stderr is "
                             "a terminal, else one line per measurement)")


def _argument_error(kind, text, why):
    return argparse.ArgumentTypeError(f"{text!r} is not {kind}: {why}")


def size_list(text):
    """argparse type: '1024,2048' -> [1024, 2048] (positive integers)."""
    try:
        sizes = parse_sizes(text)
    except ValueError as exc:
        raise _argument_error("a list of sizes", text, exc) from None
    if any(s < 1 for s in sizes):
        raise _argument_error("a list of sizes", text, "sizes are positive")
    return sizes


def shape_list(text):
    """argparse type: '1000,6000x10000' -> [(1000, 1000), (6000, 10000)]."""
    try:
        shapes = parse_shapes(text)
    except ValueError as exc:
        raise _argument_error("a list of shapes N or MxN", text, exc) from None
    if any(min(s) < 1 for s in shapes):
        raise _argument_error("a list of shapes N or MxN", text, "sizes are positive")
    return shapes


def name_list(choices, everything=None):
    """argparse type: comma-separated names among `choices` -> [names]; '' gives [] and
    `everything` (e.g. 'all') every choice."""
    choices = list(choices)

    def parse(text):
        if everything is not None and text == everything:
            return choices
        names = [x.strip() for x in text.split(",") if x.strip()]
        unknown = [x for x in names if x not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(choices)}"
                + (f" or {everything}" if everything else ""))
        return names
    return parse


def tuning_spec(text):
    """argparse type of --tuning: the spec itself, once parse_tuning accepts it."""
    try:
        parse_tuning(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class Progress:
    """Progress over `total` measurements on stderr: a tqdm bar (the latest result beside it)
    when stderr is a terminal and there is more than one measurement, else one line per
    measurement; nothing when quiet.  A context manager."""

    def __init__(self, total, desc, quiet=False):
        self.quiet, self.bar = quiet, None
        if not quiet and total > 1 and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, file=sys.stderr, unit="run", leave=False,
                            dynamic_ncols=True)

    def done(self, line):
        """One measurement finished; `line` says what it measured."""
        if self.bar is not None:
            self.bar.set_postfix_str(line, refresh=False)
            self.bar.update()
        elif not self.quiet:
            print(line, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Plots --------------------------------------------------------------------------------------

def plot_unavailable():
    """None when matplotlib imports, else the line that says how to install it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return PLOT_HINT
    return None


def write_results(args, routine, rows, plot, extra=None):
    """The routine's --json file of `rows` (write_json) and, with --plot, its figure beside it
    (plot(rows, path))."""
    write_json(args.json, routine, rows, extra)
    if args.plot:
        path = plot_path(args.json, routine)
        plot(rows, path)
        print(f"wrote {path}")


def plot_path(json_path, routine):
    """Where --plot writes: the --json path with the suffix .png, else ./<routine>.png."""
    return pathlib.Path(json_path).with_suffix(".png") if json_path else pathlib.Path(
        f"{routine}.png")


def figure(ncols=1):
    """(fig, [axes]) of a new figure of `ncols` 5.5 x 4 inch plots on the Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 4), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, path):
    """Write fig to path as a PNG (folders created) and close it."""
    import matplotlib.pyplot as plt
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_rows(path, rows, labels, series, ylabel, title, logy=False):
    """One line per (label, key, style) of `series` over the rows in their order, the x axis
    labelled by `labels`; a missing value is a gap."""
    fig, (ax,) = figure()
    x = list(range(len(rows)))
    for label, key, style in series:
        ys = [r.get(key) for r in rows]
        if any(y is not None for y in ys):
            ax.plot(x, [float("nan") if y is None else y for y in ys], style, label=label)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=45, ha="right")
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)


def random_matrix(shape, seed, xp=None, dtype=np.float32):
    """Standard-normal matrix of `dtype` (float32 or float64; never zeros), generated on the
    device when xp is cupy."""
    if xp is None:
        import cupy as xp
    gen = xp.random.default_rng(seed) if hasattr(xp.random, "default_rng") else None
    if gen is not None:
        return gen.standard_normal(shape, dtype=dtype)
    return xp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=dtype))


def parse_shapes(text):
    """'1000,6000x10000' -> [(1000, 1000), (6000, 10000)]."""
    shapes = []
    for s in text.split(","):
        if s:
            m, _, n = s.partition("x")
            shapes.append((int(m), int(n or m)))
    return shapes


def parse_sizes(text):
    """'1024,2048' -> [1024, 2048]."""
    return [int(s) for s in text.split(",") if s]


def add_tuning_argument(parser):
    """The --tuning FIELD=v1,v2 option (repeatable) of the benchmark CLI and the tools."""
    parser.add_argument(
        "--tuning", action="append", default=[], metavar="FIELD=v1,v2", type=tuning_spec,
        help="a field of gpulinalg.tuning.Tuning and its values; each value runs under the "
             "table in force with that field replaced (repeatable: every combination). "
             "Tuple values are Python literals: gpu_nb_steps_fp32='((8192,256),),()'")


def parse_tuning(spec):
    """'FIELD=v1,v2' -> (FIELD, [values]), each value parsed to the type of the Tuning field
    (int, float, str, bool, or a tuple written as a Python literal).  Commas inside
    parentheses, brackets or quotes belong to one value."""
    from ..tuning import Tuning
    name, sep, text = spec.partition("=")
    name = name.strip()
    fields = {f.name: f for f in dataclasses.fields(Tuning)}
    if name not in fields or not sep:
        near = difflib.get_close_matches(name, fields, n=3)
        raise ValueError(f"--tuning {spec!r}: not FIELD=v1,v2 with FIELD a Tuning field"
                         + (f" (did you mean {', '.join(near)}?)" if near else ""))
    kind = fields[name].type
    kind = kind if isinstance(kind, type) else {"int": int, "float": float, "str": str,
                                                 "bool": bool, "tuple": tuple}[str(kind)]
    values = [_parse_value(v.strip(), kind, name) for v in _split_top_level(text)]
    if not values:
        raise ValueError(f"--tuning {spec!r}: no value")
    return name, values


def _split_top_level(text):
    """'1,(2,3),"a,b"' -> ['1', '(2,3)', '"a,b"']."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _parse_value(text, kind, name):
    try:
        if kind is bool:
            if text.lower() not in ("0", "1", "false", "true", "off", "on"):
                raise ValueError(text)
            return text.lower() in ("1", "true", "on")
        if kind is int:
            return int(text.replace("_", ""), 0)
        if kind is float:
            return float(text)
        if kind is str:
            return ast.literal_eval(text) if text[:1] in "'\"" else text
        value = ast.literal_eval(text)
        if not isinstance(value, tuple):
            raise ValueError(text)
        return value
    except (ValueError, SyntaxError):
        raise ValueError(f"--tuning {name}: {text!r} is not a {kind.__name__}") from None


def tuning_settings(specs):
    """[(label, table)] for the --tuning specs: every combination of their values, each table
    `dataclasses.replace(gpulinalg.tuning.current(), FIELD=value, ...)`, to run under
    `gpulinalg.tuning.override(table)`.  No specs: [("defaults", the table in force)]."""
    from .. import tuning
    knobs = [parse_tuning(spec) for spec in specs]
    base = tuning.current()
    settings = []
    for combo in itertools.product(*(values for _, values in knobs)):
        fields = {name: value for (name, _), value in zip(knobs, combo)}
        label = " ".join(f"{name}={value!r}".replace(" ", "") for name, value in fields.items())
        settings.append((label or "defaults", dataclasses.replace(base, **fields)))
    return settings


def describe_tuning(specs):
    """'FIELD (default v)' for each varied field of the table in force, for a run's header."""
    from .. import tuning
    base = tuning.current()
    return ", ".join(f"{name} (default {getattr(base, name)!r})"
                     for name, _ in (parse_tuning(s) for s in specs)) or "default tuning"
