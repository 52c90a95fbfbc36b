"""Transpose: A/B of a module constant of gpulinalg beside a device copy, in one run.

    python3 benchmarks/transpose_ab.py --vary _transpose.BAND=0,2,4 --sizes 4000,6000x10000

Per shape: B = A^T (both C-ordered) by each tile variant in `--variants` for each value of
the constant, and a device-to-device copy of as many bytes, all timed in bursts that take
turns round by round (gpulinalg.bench.common.time_burst), so that clock drift hits every
candidate alike.  Prints GB/s (bytes read + written) and % of the copy; every result is
checked against a.T.  The constant is restored at the end.
"""

import argparse


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vary", default="_transpose.SMALL_TILES_PER_SM=4",
                   help="MODULE.NAME=v1,v2: constant and its values (default: none varied)")
    p.add_argument("--sizes", default="4000,6000x10000,10000,12288,16384")
    p.add_argument("--variants", default="32x8,64x4-pair")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1, help="repeat the whole sweep")
    args = p.parse_args()
    import cupy as cp

    from gpulinalg import _transpose
    from gpulinalg.bench.common import parse_vary, random_matrix, time_burst
    from gpulinalg.bench.transpose import parse_shapes

    mod, name, values = parse_vary(args.vary)
    original = getattr(mod, name)
    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    print(f"{dev}; varying {mod.__name__}.{name} (default {original})")
    try:
        for rnd in range(args.rounds):
            for m, n in parse_shapes(args.sizes):
                a = random_matrix((m, n), 1, cp)
                out = cp.empty((n, m), dtype=cp.float32)
                buf = cp.empty_like(a)

                def ours(variant, v):
                    def run():
                        setattr(mod, name, v)
                        _transpose.transpose_into(a, out, variant)
                    return run

                fns = {"copy": lambda: cp.copyto(buf, a)}
                for variant in args.variants.split(","):
                    for v in values:
                        fns[f"{variant} {name}={v}"] = ours(variant, v)
                        out.fill(cp.nan)
                        fns[f"{variant} {name}={v}"]()
                        if not bool(cp.array_equal(out, a.T)):
                            raise AssertionError(f"{m}x{n} {variant} {name}={v}: wrong result")
                ms = time_burst(fns, warmup=2, repeat=args.repeat, calls=args.calls)
                print(f"{m} x {n} (round {rnd}):")
                for key, t in ms.items():
                    print(f"  {key:<28} {t:7.3f} ms  {8.0 * m * n / t / 1e6:6.0f} GB/s  "
                          f"{100.0 * ms['copy'] / t:5.1f}% copy", flush=True)
                del a, out, buf
    finally:
        setattr(mod, name, original)


if __name__ == "__main__":
    main()
