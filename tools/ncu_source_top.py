"""The SASS instructions of a kernel's Nsight Compute report that hold the most warp-stall
samples: where the kernel waits, instruction by instruction, and its stall reasons.

    ncu --set full --kernel-name regex:getrf_batched_blocked \
        --launch-skip 2 --launch-count 1 -o rep python3 tools/ncu_batched.py 1000 256 float32
    python3 tools/ncu_source_top.py rep.ncu-rep [--top 60] [--csv source.csv]

Prints the scheduler, warp-state and occupancy sections, the stall reasons' shares of the
samples, the share of samples per kind of instruction (opcode), then the `--top`
instructions by samples (share, address, the instruction, executions) with the two before
each.
"""

import argparse
import collections
import csv
import io
import subprocess


def ncu(*args):
    return subprocess.run(["ncu", *args], capture_output=True, text=True, check=True).stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--top", type=int, default=60)
    p.add_argument("--csv", help="also write the source page's CSV here")
    args = p.parse_args()
    details = ncu("-i", args.report, "--page", "details", "--section", "WarpStateStats",
                  "--section", "SchedulerStats", "--section", "Occupancy")
    print(details)
    raw = list(csv.reader(io.StringIO(ncu("-i", args.report, "--page", "raw", "--csv"))))
    stalls = sorted(((float(v.replace(",", "")), k) for k, v in zip(raw[0], raw[-1])
                     if "pcsamp_warps_issue_stalled" in k and not k.endswith("not_issued")
                     and v.replace(",", "").replace(".", "").isdigit()), reverse=True)
    whole = sum(v for v, _ in stalls) or 1.0
    print("stall reasons (share of samples):",
          ", ".join(f"{k.split('stalled_')[-1]} {100 * v / whole:.1f}%" for v, k in stalls[:12]))
    text = ncu("-i", args.report, "--page", "source", "--csv", "--print-source", "sass")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(text)
    rows = list(csv.reader(io.StringIO(text)))
    # the page opens with the kernel's name; the table's header names the source column
    start = next(i for i, r in enumerate(rows) if "Source" in r)
    head = rows[start]
    body = [r for r in rows[start + 1:] if len(r) == len(head)]
    print("columns:", " | ".join(head))
    col = {name: i for i, name in enumerate(head)}
    samples = next(i for name, i in col.items() if name.startswith("Warp Stall Sampling (All"))
    source = col["Source"]
    address = next((i for name, i in col.items() if "Address" in name), 0)
    executed = next((i for name, i in col.items() if name.startswith("Instructions Executed")),
                    None)

    def num(r, i):
        try:
            return float(r[i].replace(",", "")) if i is not None else 0.0
        except ValueError:
            return 0.0

    total = sum(num(r, samples) for r in body) or 1.0
    by_op = collections.Counter()
    for r in body:
        by_op[r[source].split()[0].split(".")[0] if r[source].split() else "?"] += num(r, samples)
    print(f"\nsamples {total:.0f}; by opcode:",
          ", ".join(f"{op} {100 * s / total:.1f}%" for op, s in by_op.most_common(16)))
    order = sorted(range(len(body)), key=lambda i: -num(body[i], samples))[:args.top]
    print(f"\ntop {args.top} instructions (share of samples, executions):")
    for i in sorted(order):
        for j in range(max(0, i - 2), i):
            print(f"        {body[j][address]:>8}  {body[j][source]}")
        print(f"{100 * num(body[i], samples) / total:5.1f}%  {body[i][address]:>8}  "
              f"{body[i][source]}   [{num(body[i], executed):.0f}]")


if __name__ == "__main__":
    main()
