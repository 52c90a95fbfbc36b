"""GPULINALG_SHARD (tests/conftest.py): the shards of benchmarks/gpu_check.sh partition the
collected tests, so the GPU suite runs every test exactly once across its pytest processes."""

import os
import pathlib
import subprocess
import sys

TESTS = pathlib.Path(__file__).parent


def collected(shard, files=("test_trsm.py", "test_lu_graph.py")):
    env = dict(os.environ)
    env.pop("GPULINALG_SHARD", None)
    if shard is not None:
        env["GPULINALG_SHARD"] = shard
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *(str(TESTS / f) for f in files)],
                         capture_output=True, text=True, env=env, cwd=TESTS.parent)
    return out.returncode, [line for line in out.stdout.splitlines() if "::" in line]


def test_shards_partition_the_suite():
    rc, whole = collected(None)
    assert rc == 0 and len(whole) > 10
    parts = [collected(f"{k}/3")[1] for k in range(3)]
    assert sorted(sum(parts, [])) == sorted(whole)
    assert all(abs(len(p) - len(whole) / 3) <= 1 for p in parts)


def test_bad_shard_spec_fails():
    rc, _ = collected("3/3")
    assert rc != 0
