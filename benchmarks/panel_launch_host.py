"""Host time of the GPU panel's launches and of the driver's events, two ways each.

    python3 benchmarks/panel_launch_host.py [--rows 2048,8192] [--calls 200] [--rounds 9]

Per case the median over --rounds rounds (order shuffled each round, stream synchronised
between rounds) of the host microseconds one call takes:
- the leaf of a 256-wide panel (column-slab leaf up to 4096 rows, else the 128-wide row
  leaf) launched through gpulinalg.core.kernels.Launcher (what _DeviceSteps does) and through
  CuPy's RawKernel call with NumPy scalars (what it did before the thirty-seventh session);
- an event created and recorded, with timing and without (CupyOps.record, `timed`).
The leaf works on the same panel again and again (its content goes stale: only the launch
is timed, not the factorization).
"""

import argparse

from launch_overhead import per_call_us   # the same interleaved, shuffled rounds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="2048,8192")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    import cupy as cp
    import numpy as np

    from gpulinalg.lu import panel_gpu as _panel_gpu
    from gpulinalg.bench.common import environment, print_table, random_matrix

    env = environment()
    print(f"{env['device']}, CUDA {env['cuda_runtime']}, CuPy {env['cupy']}")
    stream = cp.cuda.Stream(non_blocking=True)
    rows = []
    with stream:
        for mp in (int(x) for x in args.rows.split(",")):
            a = random_matrix((mp, 256), mp, cp)
            piv = cp.zeros(256, dtype=np.int32)
            ws = _panel_gpu.PanelWorkspace(devices=2)   # the multi-GPU plans (column slabs)
            plan = ws.plan(mp)
            steps = ws.steps(plan)
            panel = a if plan[0] == "cols" else a[:, :steps.lw]
            w = panel.shape[1]

            def cupy_call():
                if plan[0] == "cols":
                    lbuf, masks, flag, tag0 = ws.cols_state(2 * min(mp, w))
                    steps.kernel((-(-w // steps.cw),), (steps.threads,),
                                 (np.int32(mp), np.int32(w), panel, np.int64(panel.strides[0] // 4),
                                  piv, ws.info, np.int32(0), lbuf, masks, flag,
                                  np.uint32(tag0)), shared_mem=steps.smem)
                else:
                    g = -(-mp // (_panel_gpu.THREADS * steps.rpt))
                    steps.kernel((g,), (_panel_gpu.row_threads(steps.rpt),),
                                 (np.int32(mp), np.int32(w), panel,
                                  np.int64(panel.strides[0] // 4), piv, ws.info, np.int32(0),
                                  ws.keys, ws.rows, np.uint32(ws.next_tags(min(mp, w)))))

            cases = {"leaf, Launcher": lambda: steps.leaf(panel, piv, 0),
                     "leaf, CuPy call": cupy_call}
            for name, us in per_call_us(cases, args.calls, args.rounds,
                                        stream.synchronize).items():
                rows.append({"what": f"{plan[0]} leaf {mp} x {w}: {name}", "us": us})

        def event(timing):
            ev = cp.cuda.Event(disable_timing=not timing)
            ev.record(stream)
        cases = {"event, timed": lambda: event(True), "event, untimed": lambda: event(False)}
        for name, us in per_call_us(cases, args.calls, args.rounds, stream.synchronize).items():
            rows.append({"what": name, "us": us})
    print_table([("what", "what", "{}"), ("us", "host us/call", "{:.2f}")], rows,
                title="host time per call (median of rounds)")


if __name__ == "__main__":
    main()
