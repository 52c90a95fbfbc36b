"""gpulinalg-bench: time gpulinalg's routines against the vendor libraries on this GPU.

    gpulinalg-bench ROUTINE [options]      one routine: sgemm, transpose, laswp, lu, solve
                                           or batched
    gpulinalg-bench all [--out DIR]        every routine with its defaults, DIR/<routine>.json

Each routine runs the library's defaults (what a user gets) unless asked otherwise, prints a
short summary table (--wide: every column) and, with --json, writes its rows and the machine's
description; --plot writes the plots as PNG files beside the JSON (matplotlib, the "plot"
extra: without it the command stops before any measurement with one line saying how to install
it, exit status 2).  Progress goes to stderr: a bar on a terminal, else one line per
measurement (--quiet: none).  Without a GPU or without CuPy it prints one line saying why and
exits with status 2.
"""

import argparse
import importlib
import pathlib
import sys

from ..core.backend import CudaUnavailableError, cupy
from . import common

ROUTINES = ("sgemm", "transpose", "laswp", "lu", "solve", "batched")
DEFAULT_OUT = "gpulinalg-bench-results"


def _summary(module):
    return module.__doc__.split("\n")[0].partition(": ")[2]


def build_parser():
    """The command line: one sub-command per routine, and `all`."""
    parser = argparse.ArgumentParser(prog="gpulinalg-bench", description=__doc__,
                                     formatter_class=common.HelpFormatter)
    sub = parser.add_subparsers(dest="routine", metavar="ROUTINE", required=True)
    for name in ROUTINES:
        module = importlib.import_module(f"{__package__}.{name}")
        p = sub.add_parser(name, help=_summary(module), description=module.__doc__,
                           formatter_class=common.HelpFormatter)
        module.add_arguments(p)
        common.add_output_arguments(p, name)
        p.set_defaults(module=module, parser=p)
    p = sub.add_parser("all", help="every routine with its defaults",
                       description=f"Run every routine ({', '.join(ROUTINES)}) with its "
                       "defaults, writing DIR/<routine>.json\n(and DIR/<routine>.png with "
                       "--plot).  The folder is printed first and last.",
                       formatter_class=common.HelpFormatter)
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="folder of the results (created; relative to the current folder)")
    p.add_argument("--plot", action="store_true",
                   help='also write the plots, DIR/<routine>.png; needs matplotlib: '
                        'pip install ".[plot]"')
    common.add_display_arguments(p)
    p.set_defaults(module=None, parser=p)
    return parser


def _run_all(parser, args):
    """Every routine with its defaults into args.out; the largest exit status."""
    out = pathlib.Path(args.out).resolve()
    print(f"gpulinalg-bench all: writing {', '.join(r + '.json' for r in ROUTINES)}"
          + (" and their plots (.png)" if args.plot else "") + f" to {out}", flush=True)
    flags = [f"--{f}" for f in ("plot", "wide", "quiet") if getattr(args, f)]
    status = 0
    for name in ROUTINES:
        print(f"\n== gpulinalg-bench {name}", flush=True)
        routine = parser.parse_args([name, "--json", str(out / f"{name}.json")] + flags)
        status = max(status, routine.module.execute(routine))
    print(f"\ngpulinalg-bench all: results in {out}")
    return status


def main(argv=None):
    """Run the command line; the exit status (2: a usage error, or no GPU or CuPy)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    why = args.module.check(args) if args.module else None
    if why:
        args.parser.error(why)
    if args.plot and common.plot_unavailable():
        print(f"gpulinalg-bench: {common.plot_unavailable()}", file=sys.stderr)
        return 2
    try:
        cupy()   # CuPy and a device, before any work: else the library's one-line reason
        if args.module is None:
            return _run_all(parser, args)
        return args.module.execute(args)
    except CudaUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
