"""gpulinalg-bench ROUTINE [options]: run one benchmark (see --help of each routine).

`gpulinalg-bench all [--out DIR]` runs every routine with its defaults, writing DIR/<routine>.json.
"""

import importlib
import sys

ROUTINES = ("sgemm", "transpose", "laswp", "lu")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "all":
        out = argv[argv.index("--out") + 1] if "--out" in argv else "gpulinalg-bench-results"
        return max(main([r, "--json", f"{out}/{r}.json"]) for r in ROUTINES)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ROUTINES:
        print(f"usage: gpulinalg-bench {{{','.join(ROUTINES + ('all',))}}} [options]  "
              "(gpulinalg-bench ROUTINE --help for each)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(f"gpulinalg.bench.{argv[0]}")
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
