"""The batched LU kernel under each compiled (NMAX, G, C) shape: its time alone by CUDA events
for stacks of each order class, and whether every shape's factors equal the table's bit for
bit (they compute the same operations in the same order).  The evidence for the tuning
table's `batched_shapes` and, beside them, the blocked kernel's compiled (NB, THREADS, RPT)
shapes: `batched_blocked_shapes` and `batched_blocked_min_order`.

    python3 tools/batched_shapes_sweep.py [--stacks 100000x8,50000x16,20000x32,10000x64,2000x128]
                                          [--dtype float32,float64] [--reps 20]
"""

import argparse

import numpy as np

from small_call_profile import events_ms


def time_route(cp, found, a, flags, reps):
    """(ms per launch by CUDA events, (factors, pivots and info)) of the route `found`
    (lu/batched.py's `route`) on the stack a, src -> a new dst."""
    from gpulinalg.lu import batched
    b, n, _ = a.shape
    dst = cp.empty_like(a)
    pi = cp.empty(b * n + b, np.int32)

    def launch():
        batched.launch(found, b, n, n, a.data.ptr, dst.data.ptr, pi.data.ptr,
                       pi.data.ptr + pi.itemsize * b * n, flags.ptr, flags.next_gen())
    return events_ms(launch, reps), (dst, pi)


def blocked(shape):
    """A blocked kernel shape's name in the table."""
    return "blocked " + "/".join(map(str, shape))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stacks", default="100000x8,50000x16,20000x32,10000x64,2000x128,"
                                       "1000x256,200x512,50x1024")
    p.add_argument("--dtype", default="float32,float64")
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    import cupy as cp

    from gpulinalg.core import mapped
    from gpulinalg.core.element import exact
    from gpulinalg.lu import batched, batched_blocked
    dev = cp.cuda.runtime.getDevice()
    flags = mapped.flags()
    for dtype in args.dtype.split(","):
        element = exact(np.dtype(dtype))
        table = batched.shapes_of(element)
        for case in args.stacks.split(","):
            b, n = (int(x) for x in case.split("x"))
            a = cp.asarray(np.random.default_rng(n).standard_normal((b, n, n)).astype(dtype))
            results, times = {}, {}
            nmax = min((s[0] for s in batched.CANDIDATES[element.ctype] if s[0] >= n),
                       default=None)
            routes = {shape: batched.route(dev, element.ctype, n, n, (shape,))
                      for shape in batched.CANDIDATES[element.ctype] if shape[0] == nmax}
            for shape in batched_blocked.CANDIDATES[element.ctype]:
                if shape[1] * shape[2] >= n:
                    routes[blocked(shape)] = batched_blocked.route(dev, element.ctype, n, n,
                                                                   (shape,))
            for name, found in routes.items():
                if found is not None:
                    times[name], results[name] = time_route(cp, found, a, flags, args.reps)
            picks = [s for s in table if s[0] == nmax]
            pick = picks[0] if picks else blocked(batched_blocked.shape_for(n, element))
            ref = results[pick]
            same = {s: bool((r[0] == ref[0]).all() and (r[1] == ref[1]).all())
                    for s, r in results.items()}
            line = ", ".join(f"{s}: {t:.3f} ms{'' if same[s] else ' DIFFERS'}"
                             + (" (table)" if s == pick else "") for s, t in times.items())
            print(f"{dtype} {b}x{n}: {line}", flush=True)


if __name__ == "__main__":
    main()
