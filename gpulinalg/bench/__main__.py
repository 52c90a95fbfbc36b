"""gpulinalg-bench ROUTINE [options]: run one benchmark (see --help of each routine)."""

import importlib
import sys

ROUTINES = ("sgemm", "transpose", "laswp", "lu")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ROUTINES:
        print(f"usage: gpulinalg-bench {{{','.join(ROUTINES)}}} [options]  "
              "(gpulinalg-bench ROUTINE --help for each)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(f"gpulinalg.bench.{argv[0]}")
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
