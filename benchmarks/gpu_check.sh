#!/usr/bin/env bash
# The one GPU call: install this checkout, run the whole test suite on the GPU, run the
# benchmarks, print a short summary last.  Logs and JSON go to $OUT (default ./out).
#
#   bash benchmarks/gpu_check.sh                 # everything
#   STAGES="tests sgemm" bash benchmarks/gpu_check.sh
#   TESTS="tests/test_sgemm.py" SGEMM_ARGS="--variants all" bash benchmarks/gpu_check.sh
#   STAGES=tests SHARDS=1 PYTEST_ARGS="--durations=20" bash benchmarks/gpu_check.sh   # one pytest
#   STAGES="ncu_lu" NCU_LU_ARGS="4096 gpu fp32" bash benchmarks/gpu_check.sh
#   STAGES="tests lu_multi" TESTS=tests/test_lu_multi.py bash benchmarks/gpu_check.sh   # 2+ GPUs
#   STAGES="lu_large" LARGE_DEVICES=4 bash benchmarks/gpu_check.sh     # more than one GPU holds
#   STAGES=compare bash benchmarks/gpu_check.sh          # this checkout against OLD_TREE
#   STAGES=first_call bash benchmarks/gpu_check.sh       # a new process's first LU and GEMM
#   STAGES="dgemm lu64 scipy_suite" bash benchmarks/gpu_check.sh   # float64 and SciPy's tests
#
# Stage `compare` (tools/compare_trees.py: the default LU and SGEMM of this checkout and of an
# older commit, alternating in one call, and whether their results are bit-identical) needs
# the old tree on the GPU machine, which gets a copy of the working tree but no .git.  Extract
# it here first, into a folder .git/info/exclude ignores, and carry that folder along:
#   grep -qxF /.ab_old/ .git/info/exclude || echo /.ab_old/ >> .git/info/exclude
#   rm -rf .ab_old && mkdir .ab_old && git archive da719eb gpulinalg kernels | tar -x -C .ab_old
#   then, on the GPU machine (carry: .ab_old):  STAGES=compare bash benchmarks/gpu_check.sh
# (OLD_TREE=DIR names another folder; COMPARE_ARGS passes options, e.g. "--rounds 5".)  The
# compare takes ~4-6 minutes with its defaults on a fresh machine (kernel compilation
# included): on its own, or beside a few other stages, not after the whole test suite.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
unset CUPY_TF32                       # cuBLAS baselines in true FP32
STAGES=${STAGES:-"first_call tests sgemm dgemm transpose laswp lu lu64 solve batched lu_host scipy_suite"}
TESTS=${TESTS:-tests}
LOG="$OUT/bench.log"
: > "$LOG"
status=0

# At most 8 files come back from $OUT: the install log only when the install fails.  The
# install compiles the kernel families (kernels/compiled/, skipped where up to date).
start=$SECONDS
python3 -m pip install -v --no-deps --no-build-isolation -e . > /tmp/gpulinalg-install.log 2>&1 \
    || { cp /tmp/gpulinalg-install.log "$OUT/"; cat /tmp/gpulinalg-install.log; exit 1; }
# The install's time and its kernel lines, then the machine, at the head of the log (a file
# of its own would be a 9th).
{ echo "install: $((SECONDS - start)) s on $(nproc) cores"
  grep -o 'gpulinalg kernels: .*' /tmp/gpulinalg-install.log; } | tee -a "$LOG"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
      --format=csv; python3 -c "import cupy; cupy.show_config()"; } >> "$LOG" 2>&1

has() { [[ " $STAGES " == *" $1 "* ]]; }
# run_stage LINES TITLE COMMAND...: the title and the command's output into the log, its last
# LINES lines shown; a failing command makes the script's status 1.
run_stage() {
    local lines=$1 title=$2
    shift 2
    echo "== $title" | tee -a "$LOG"
    "$@" 2>&1 | tee -a "$LOG" | tail -n "$lines"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
}

# A new user's first calls (benchmarks/first_call.py: fresh processes, empty CuPy cache), on
# the idle GPU before anything else, into first_call.json.
if has first_call; then
    echo "== first_call ${FIRST_CALL_ARGS:-}" | tee -a "$LOG"
    python3 benchmarks/first_call.py --out "$OUT/first_call.json" ${FIRST_CALL_ARGS:-} 2>&1 \
        | tee -a "$LOG"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi

# The GPU suite runs as SHARDS pytest processes sharing the GPU (GPULINALG_SHARD, every
# SHARDS-th test each: tests/conftest.py), each with its share of the host's BLAS threads; in
# one process it took ~620 s on the H100, past one device call.  Their logs follow each
# other in tests.log.
SHARDS=${SHARDS:-3}
if has tests; then
    echo "== pytest $TESTS ($SHARDS shards)"
    threads=$(( $(nproc) / SHARDS > 0 ? $(nproc) / SHARDS : 1 ))
    pids=()
    for ((k = 0; k < SHARDS; k++)); do
        GPULINALG_SHARD=$k/$SHARDS OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads \
            python3 -m pytest -q -rs -p no:cacheprovider $TESTS ${PYTEST_ARGS:-} \
            > "/tmp/tests.$k.log" 2>&1 &
        pids+=($!)
    done
    for ((k = 0; k < SHARDS; k++)); do
        wait "${pids[$k]}" || status=1
    done
    for ((k = 0; k < SHARDS; k++)); do
        echo "---- shard $k/$SHARDS"
        cat "/tmp/tests.$k.log"
    done > "$OUT/tests.log"
    grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -n 30
    for ((k = 0; k < SHARDS; k++)); do
        echo "shard $k/$SHARDS: $(grep -E '(passed|failed|error).* in [0-9.]+s' "/tmp/tests.$k.log" | tail -n 1)"
    done
fi
# Defaults: every SGEMM kernel kind beside cuBLAS (FP32 and TF32), both LU panels with FP32,
# 3xTF32 and the default ("auto") updates, the LU's per-step timelines in lu_timeline.json.
SGEMM_ARGS=${SGEMM_ARGS:-"--tc --a-colmajor --variants dbuf256x128,dbuf128,pipe128 --wide"}
LU_ARGS=${LU_ARGS:-"--panel gpu,cpu --precision fp32,3xtf32,auto --wide --timeline $OUT/lu_timeline.json"}
for routine in sgemm transpose laswp lu solve batched; do
    has "$routine" || continue
    var="$(echo "$routine" | tr a-z A-Z)_ARGS"
    run_stage 25 "gpulinalg-bench $routine ${!var:-}" \
        python3 -m gpulinalg.bench "$routine" --json "$OUT/$routine.json" ${!var:-}
done
# float64: our DGEMM against cuBLAS (squares and the LU's rank-k update shapes), into
# dgemm.json; the float64 LU at lu_factor's defaults against cuSOLVER's dgetrf, into lu64.json.
if has dgemm; then
    run_stage 25 "dgemm_bench ${DGEMM_ARGS:-}" \
        python3 tools/dgemm_bench.py --json "$OUT/dgemm.json" ${DGEMM_ARGS:-}
fi
if has lu64; then
    args=${LU64_ARGS:-"--dtype float64 --sizes 2048,4096,8192,16384,32768 --rect '' --wide"}
    eval "set -- $args"   # the arguments as the shell splits them ('' is one empty argument)
    run_stage 12 "gpulinalg-bench lu $args" \
        python3 -m gpulinalg.bench lu --json "$OUT/lu64.json" "$@"
fi
# SciPy's installed LU tests with its lu, lu_factor, lu_solve replaced by ours, then its
# TestSolve, TestInv, TestDet with solve, inv, det replaced (failures listed in the log; the
# stacked-input tests and the structured assume_a kinds are not ours yet).
if has scipy_suite; then
    for suite in "" --basic; do
        echo "== scipy_lu_suite $suite" | tee -a "$LOG"
        python3 tools/scipy_lu_suite.py $suite 2>&1 | tee -a "$LOG" \
            | grep -E "^(FAILED|ERROR)|passed|failed" | tail -n 5
    done
fi
# lu_factor of NumPy matrices (host in, host out) against CuPy ones and SciPy, into
# lu_host.json.
if has lu_host; then
    args=${LU_HOST_ARGS:-"2048,4096,8192,16384 --scipy 8192"}
    run_stage 8 "lu_host $args" python3 benchmarks/lu_host.py $args --json "$OUT/lu_host.json"
fi
# Optional (STAGES="... lu_multi", a machine of several GPUs): the LU at the library's
# defaults on 1 and DEVICES GPUs, same run, into lu_multi.json.
if has lu_multi; then
    args=${LU_MULTI_ARGS:-"--devices ${DEVICES:-1,2} --sizes 8192,16384,32768,49152 --rect ''"}
    eval "set -- $args"
    run_stage 25 "gpulinalg-bench lu $args" \
        python3 -m gpulinalg.bench lu --json "$OUT/lu_multi.json" "$@"
fi
# Optional (STAGES="... lu_large", several GPUs): a host matrix larger than one GPU's memory
# factored on LARGE_DEVICES GPUs, HPL's residual check, into lu_large.json.
if has lu_large; then
    run_stage 25 "lu_large --devices ${LARGE_DEVICES:-4}" \
        python3 benchmarks/lu_large.py --devices "${LARGE_DEVICES:-4}" --json "$OUT/lu_large.json"
fi
# Optional (STAGES="... ncu_lu"): kernel-by-kernel GPU time of one LU (NCU_LU_ARGS: n panel
# precision), summarised into the log (the CSV stays on the machine: at most 8 files return).
if has ncu_lu; then
    echo "== ncu lu ${NCU_LU_ARGS:-4096}" | tee -a "$LOG"
    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
        --log-file /tmp/ncu_lu.csv python3 tools/ncu_lu.py ${NCU_LU_ARGS:-4096} \
        > /tmp/ncu_lu.out 2>&1 || { tail -n 20 /tmp/ncu_lu.out; status=1; }
    python3 tools/ncu_lu.py --summarize /tmp/ncu_lu.csv 2>&1 | tee -a "$LOG" | head -n 25
fi
# Optional (STAGES="... compare", OLD_TREE extracted beforehand: see the header): the old and
# new trees' default LU and SGEMM alternating, into compare.json; its table comes last.
if has compare; then
    old=${OLD_TREE:-.ab_old}
    echo "== compare_trees --old $old --new . ${COMPARE_ARGS:-}" | tee -a "$LOG"
    if [[ -f "$old/gpulinalg/__init__.py" ]]; then
        python3 tools/compare_trees.py --old "$old" --new . --out "$OUT" ${COMPARE_ARGS:-} \
            2>&1 | tee -a "$LOG"
        [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    else
        echo "no old tree at $old (see the header of benchmarks/gpu_check.sh)" | tee -a "$LOG"
        status=1
    fi
fi
echo "== done (exit $status); logs in $OUT"
exit $status
