#!/usr/bin/env bash
# run_decode_checks: the decode path's device run, one call on the H200 that ends inside 320 s —
# builds (sm_90a, release, -j16) the CUDA tests, cellm and cuda_decode_bench; runs every
# `ctest -L cuda` test; the decode kernel benchmark (products per type and shape, tuning
# variants, the step's chain of products with and without programmatic dependent launch); and
# `cellm bench` batch-1 decode on random Llama-3.1-8B weights (bf16, q8_0, q4_0) with the fused
# path (default; attention with PDL, CELLM_CUDA_ATTENTION_PDL=1; one row group per block for the
# products with a prologue, CELLM_CUDA_DECODE_BLOCKS_PER_SM=0; in-product int8 quantization,
# CELLM_CUDA_INT8_FOLD=1), ncu's time of each kernel of one replayed step (bf16, q8_0), without it
# (CELLM_CUDA_FUSED=0 CELLM_CUDA_PDL=0: the previous kernels' sequence), and for q8_0 / q4_0 with
# exact f32 activations (CELLM_CUDA_INT8=0). Logs under $OUT (build.log, tests.log,
# decode_bench.log, bench.log, ncu_*.csv, summary.txt); a short table last.
# Usage (repository root, with .devdeps and .testmodels carried):
#   src/backends/cuda/kernels/run_decode_checks.sh
# DECODE_CHECK_BUILD: the build folder (default build/decode-device); DECODE_CHECK_BUDGET_S:
# seconds for the whole run (default 320).
set -uo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$root"
out=${OUT:-$root/build/decode-check}
mkdir -p "$out"
build=${DECODE_CHECK_BUILD:-$root/build/decode-device}
start=$(date +%s)
export CELLM_TEST_MODELS=${CELLM_TEST_MODELS:-$root/.testmodels}
left() { echo $((start + ${DECODE_CHECK_BUDGET_S:-320} - $(date +%s))); }
budget() {  # seconds a stage may take: $1, or what is left minus a reserve for the table
  local l=$(($(left) - 8))
  ((l < 1)) && l=1
  ((l < $1)) && echo $l || echo $1
}
summary=()
note() { summary+=("$1"); echo "== $1"; }

# ---- build (DECODE_CHECK_SKIP_BUILD=1: use the build folder as it is) -------------------------
[[ ${DECODE_CHECK_SKIP_BUILD:-0} == 1 ]] || {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH="$root/.devdeps" -DCELLM_BENCH=ON \
    -DCELLM_WERROR=OFF -DCELLM_TEST_MODELS="$CELLM_TEST_MODELS"
} >"$out/build.log" 2>&1
targets=$(ctest --test-dir "$build" -N -L cuda 2>/dev/null | awk '/Test +#[0-9]+:/ {print $3}')
t0=$(date +%s)
[[ ${DECODE_CHECK_SKIP_BUILD:-0} == 1 ]] ||
  timeout "$(budget 200)" cmake --build "$build" -j16 --target $targets cellm cuda_decode_bench \
    -- -k 0 >>"$out/build.log" 2>&1
note "build rc $? in $(($(date +%s) - t0)) s ($(echo $targets | wc -w) test targets, cellm, bench)"

# ---- tests ----------------------------------------------------------------------------------
t0=$(date +%s)
timeout "$(budget 150)" ctest --test-dir "$build" -L cuda -j4 --timeout 140 --output-on-failure \
  >"$out/tests.log" 2>&1
note "ctest -L cuda rc $? in $(($(date +%s) - t0)) s"
while IFS= read -r line; do summary+=("   $line"); done < <(
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$out/tests.log" | sed 's/^ *//'
  grep -E '\[  FAILED  \] .*\([0-9]+ ms\)$' "$out/tests.log" | sed 's/, where GetParam.*//' |
    sort -u | head -12)

# ---- benchmarks (most wanted first: each stage is cut short when the budget runs out) -------
bench_bin=$build/src/backends/cuda/cuda_decode_bench
cellm=$build/apps/cellm/cellm
: >"$out/bench.log"
: >"$out/decode_bench.log"
rows=()
run_bench() {  # label, weights, env...
  local label=$1 weights=$2
  shift 2
  [[ -x $cellm ]] || return
  (($(left) < 20)) && return
  local log=/tmp/decode_check_bench.log
  env "$@" timeout "$(budget 30)" "$cellm" bench --geometry llama-3.1-8b --weights "$weights" \
    --no-sessions --no-prefill --ttft 0 --decode-widths 1 --steps 30 >"$log" 2>&1
  local rc=$?
  { echo "---- $label: $* cellm bench --weights $weights: rc $rc"; cat "$log"; } >>"$out/bench.log"
  rows+=("$(printf '%-28s %-5s %-3s %s' "$label" "$weights" "$rc" \
    "$(grep -E '^decode batch 1' "$log" | head -1)")")
}
decode_bench() {  # seconds, one VAR=value, flags...
  local seconds=$1 setting=$2
  shift 2
  [[ -x $bench_bin ]] || return
  (($(left) < 15)) && return
  echo "---- $setting cuda_decode_bench $*" >>"$out/decode_bench.log"
  env "$setting" timeout "$(budget "$seconds")" "$bench_bin" "$@" >>"$out/decode_bench.log" 2>&1
  echo "rc $?" >>"$out/decode_bench.log"
}
t0=$(date +%s)
for w in bf16 q8_0 q4_0; do run_bench "fused (default)" "$w" CELLM_CUDA_FUSED=1; done
for w in bf16 q8_0; do run_bench "attention with PDL" "$w" CELLM_CUDA_ATTENTION_PDL=1; done
run_bench "one row group per block" bf16 CELLM_CUDA_DECODE_BLOCKS_PER_SM=0
for w in q8_0 q4_0; do run_bench "in-product quantization" "$w" CELLM_CUDA_INT8_FOLD=1; done
decode_bench 45 CELLM_CUDA_PDL=1 --quick
# One replayed step's kernels, each timed alone (ncu serializes them: no PDL overlap).
ncu_step() {  # label, weights, launches to skip, launches to time, env...
  local label=$1 weights=$2 skip=$3 count=$4
  shift 4
  local ncu_bin
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [[ -x $cellm && -n $ncu_bin ]] || return
  (($(left) < 60)) && return
  env "$@" timeout "$(budget 60)" "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum \
    --kernel-name regex:'gemv_decode|attention_tc|decode_combine|argmax|quantize_activations' \
    --launch-skip "$skip" --launch-count "$count" --csv --print-units base \
    --log-file "$out/ncu_$label.csv" "$cellm" bench --geometry llama-3.1-8b --weights "$weights" \
    --no-sessions --no-prefill --ttft 0 --decode-widths 1 --steps 3 >"$out/ncu_$label.log" 2>&1
  echo "ncu $label rc $?" >>"$out/ncu_$label.log"
}
ncu_step bf16 bf16 420 200
for w in bf16 q8_0 q4_0; do run_bench "fused (default, again)" "$w" CELLM_CUDA_FUSED=1; done
ncu_step q8_0 q8_0 700 330
for w in q8_0 q4_0; do run_bench "fused, f32 activations" "$w" CELLM_CUDA_INT8=0; done
for w in bf16 q8_0 q4_0; do run_bench "before (unfused, no PDL)" "$w" CELLM_CUDA_FUSED=0 CELLM_CUDA_PDL=0; done
decode_bench 15 CELLM_CUDA_PDL=0 --quick --chain-only
note "benchmarks in $(($(date +%s) - t0)) s"
summary+=("   $(grep -E '^measured' "$out/bench.log" | head -1)")
summary+=("   variant                      type  rc  measurement            value        step ms  of limit")
for r in "${rows[@]}"; do summary+=("   $r"); done
summary+=("   chains (decode_bench.log):")
while IFS= read -r line; do summary+=("   $line"); done < <(
  grep -E '^(bf16|q8_0|q4_0) +(f32|i8) +(pdl|no-pdl) ' "$out/decode_bench.log")
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
