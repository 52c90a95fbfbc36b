"""Same speed, same bits: the default LU and SGEMM of two source trees, alternating.

    mkdir -p .ab_old && git archive da719eb gpulinalg kernels | tar -x -C .ab_old   # here
    python3 tools/compare_trees.py --old .ab_old --new . --out "$OUT"            # on the GPU

(`STAGES=compare bash benchmarks/gpu_check.sh` runs the second line; the device machine gets
no .git, so the old tree is extracted before the call, into a folder .git/info/exclude
ignores, and carried along.)  Each of --rounds rounds runs one subprocess per tree
(tools/compare_worker.py with PYTHONPATH=<tree>: two trees' `gpulinalg` cannot share a
process), the order of the trees swapped every round so that drift in clocks and temperature
hits both alike.  Each subprocess warms up and times every case at the public API's defaults
(LU: `lu_factor` of an n x n CuPy matrix, wall time with the device synchronised; SGEMM:
`matmul` of squares and the rank-k updates C -= A B of 16384 x 16384 x k, CUDA events around
bursts), the median of --repeat; the first round also hashes the LU factors and pivots, and
one SGEMM result, of seeded inputs.  A fresh machine compiles the kernels at their first use
(NVRTC, up to a minute per tree, cached on disk for the later rounds), inside the first
round's warm-up calls.

Prints, last, per case: the old and new ms (medians over the rounds), new/old (the median of
the rounds' ratios, and their range) and, per LU size and SGEMM case, whether the results
are bit-identical.  Writes every subprocess's JSON and the table to OUT/compare.json.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
TOLERANCE = 0.03   # the acceptance: every new/old within 3%


def run_worker(tree, label, round_, args, work):
    """Run compare_worker.py for one tree; returns its JSON (or {"error": ...})."""
    out = work / f"{label}_{round_}.json"
    cmd = [sys.executable, str(HERE / "compare_worker.py"), "--tree", str(tree),
           "--label", label, "--out", str(out), "--sizes", args.sizes,
           "--devices", args.devices,
           "--squares", args.squares, "--rank-k", args.rank_k, "--repeat", str(args.repeat),
           "--calls", str(args.calls)] + (["--hash"] if round_ == 0 else [])
    # the tree first; what PYTHONPATH held already (e.g. packages installed beside) after it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tree)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]))
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=str(tree), capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    seconds = time.perf_counter() - t
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        return {"error": f"exit {proc.returncode}: " + "\n".join(tail)}
    doc = json.loads(out.read_text())
    doc["seconds"] = seconds
    print(f"round {round_} {label}: {seconds:.1f} s", flush=True)
    return doc


def summarize(runs):
    """Table rows from {label: [doc per round]}: per case the medians of the rounds, the
    rounds' new/old ratios, and whether the first round's hashes agree."""
    def case(doc, routine, name):
        return doc.get(routine, {}).get(name, {}) if "error" not in doc else {}

    rows = []
    for routine in ("lu", "sgemm"):
        names = list(dict.fromkeys(name for docs in runs.values() for d in docs
                                   if "error" not in d for name in d[routine]))
        for name in names:
            pairs = [(case(o, routine, name), case(n, routine, name))
                     for o, n in zip(runs["old"], runs["new"])]
            times = [(o["ms"], n["ms"]) for o, n in pairs if "ms" in o and "ms" in n]
            row = {"routine": routine, "case": name}
            if times:
                ratios = [n / o for o, n in times]
                row.update(old_ms=statistics.median(o for o, _ in times),
                           new_ms=statistics.median(n for _, n in times),
                           ratio=statistics.median(ratios), ratio_min=min(ratios),
                           ratio_max=max(ratios), rounds=len(times))
            else:
                errors = [x.get("error") for pair in pairs for x in pair if x.get("error")]
                row["error"] = errors[0] if errors else "no run of both trees"
            hashes = [case(runs[t][0], routine, name).get("sha256") if runs[t] else None
                      for t in ("old", "new")]
            row["identical"] = None if None in hashes else hashes[0] == hashes[1]
            rows.append(row)
    return rows


def print_table(rows, tolerance):
    print(f"\n{'case':>22s} {'old ms':>10s} {'new ms':>10s} {'new/old':>8s} "
          f"{'range':>13s} {'within':>6s}  identical")
    bad = 0
    for r in rows:
        name = f"{'LU' if r['routine'] == 'lu' else 'SGEMM'} {r['case']}"
        ident = {None: "-", True: "yes", False: "NO"}[r["identical"]]
        if "ratio" not in r:
            print(f"{name:>22s}  failed: {r['error'][:200]}   {ident}")
            bad += 1
            continue
        ok = abs(r["ratio"] - 1.0) <= tolerance
        bad += (not ok) + (r["identical"] is False)
        print(f"{name:>22s} {r['old_ms']:10.3f} {r['new_ms']:10.3f} {r['ratio']:8.4f} "
              f"{r['ratio_min']:6.3f}-{r['ratio_max']:6.3f} {'yes' if ok else 'NO':>6s}  {ident}")
    print(f"(new/old: median over the rounds of each round's ratio; within: |new/old - 1| <= "
          f"{tolerance:g}; identical: sha256 of the LU factors and pivots, or of the SGEMM "
          f"result, equal)")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--old", default=".ab_old", help="the tree before (default .ab_old)")
    p.add_argument("--new", default=".", help="the tree after (default: this checkout)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5, help="timed calls (bursts) per case")
    p.add_argument("--calls", type=int, default=3, help="SGEMM calls per burst")
    p.add_argument("--sizes", default="2048,4096,8192,16384,32768", help="LU sizes n")
    p.add_argument("--devices", default="1",
                   help="GPU counts of the LU, e.g. 2,4 (lu_factor(a, devices=P); 1: without)")
    p.add_argument("--squares", default="4096,8192,16384", help="SGEMM squares")
    p.add_argument("--rank-k", default="64,128,256,512",
                   help="k of the rank-k updates C -= A B, 16384 x 16384 x k")
    p.add_argument("--out", default=os.environ.get("OUT", "out"),
                   help="folder for compare.json (default $OUT, else out)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per subprocess")
    p.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = p.parse_args(argv)
    trees = {"old": pathlib.Path(args.old).resolve(), "new": pathlib.Path(args.new).resolve()}
    for label, tree in trees.items():
        if not (tree / "gpulinalg" / "__init__.py").is_file():
            p.error(f"--{label} {tree}: no gpulinalg/__init__.py there")
    runs = {"old": [], "new": []}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compare_trees_") as work:
        for r in range(args.rounds):
            for label in (("old", "new") if r % 2 == 0 else ("new", "old")):
                doc = run_worker(trees[label], label, r, args, pathlib.Path(work))
                if "error" in doc:
                    print(f"round {r} {label}: {doc['error']}", flush=True)
                runs[label].append(doc)
    rows = summarize(runs)
    failed = [f"{label} round {r}: {d['error']}" for label, docs in runs.items()
              for r, d in enumerate(docs) if "error" in d]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(
        {"trees": {k: str(v) for k, v in trees.items()}, "args": vars(args),
         "seconds": time.perf_counter() - t0, "rows": rows, "runs": runs}, indent=1))
    env = next((d["environment"] for d in runs["new"] + runs["old"] if "environment" in d), {})
    print(f"\n{env.get('device', '?')}, CuPy {env.get('cupy', '?')}: old {trees['old']}, "
          f"new {trees['new']}, {args.rounds} rounds, {time.perf_counter() - t0:.0f} s; "
          f"wrote {out / 'compare.json'}")
    bad = print_table(rows, args.tolerance)
    for line in failed:
        print(f"FAILED {line.splitlines()[0][:300]}")
    return 1 if bad or failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
