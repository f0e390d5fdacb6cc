#!/usr/bin/env bash
# Builds and checks the prefill and many-session decode work on the H200 in one call: builds the
# CUDA tests, cellm and the kernel benchmark (sm_90a), runs `ctest -L cuda`, the kernel benchmark's
# attention and wide-path sections, `cellm bench` on random Llama-3.1-8B-geometry weights (bf16:
# 64/256-session decode and a 512-token prefill; q4_0: 64/256-session decode), memcheck on the
# attention and matmul kernel tests when time is left, and prints a short table last.
# Run from the repository root; logs under $OUT (build.log, tests.log, kbench.log, bench.log,
# memcheck.log, summary.txt). Needs .devdeps (/work/shared/device/prepare-devdeps) and
# .testmodels (scripts/device-check --prepare-models) carried along.
# Environment: OUT (default /tmp/perf-checks), JOBS (16), BUDGET_S (whole run, default 240).
set -u
out=${OUT:-/tmp/perf-checks}
build=build/perf-device
jobs=${JOBS:-16}
budget=${BUDGET_S:-240}
mkdir -p "$out"
start=$(date +%s)
left() { local l=$((budget - ($(date +%s) - start) - $1)); ((l < 5)) && l=5; echo $l; }
summary=()
note() { summary+=("$1"); }
export CELLM_TEST_MODELS=$PWD/.testmodels

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
  timeout "$(left 180)" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCELLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCELLM_WERROR=OFF -DCELLM_BENCH=ON \
    -DCMAKE_PREFIX_PATH="$PWD/.devdeps" -DCELLM_TEST_MODELS="$CELLM_TEST_MODELS"
} >"$out/build.log" 2>&1
targets=$(ctest --test-dir "$build" -N -L cuda 2>/dev/null | awk '/Test +#[0-9]+:/ {print $3}')
t0=$(date +%s)
timeout "$(left 140)" cmake --build "$build" -j"$jobs" --target $targets cellm cuda_kernels_bench \
  -- -k 0 >>"$out/build.log" 2>&1
note "build rc $? in $(($(date +%s) - t0)) s ($(echo $targets | wc -w) test targets)"
grep -E "error|FAILED" "$out/build.log" | head -5 | while IFS= read -r l; do echo "   $l"; done

t0=$(date +%s)
timeout "$(left 95)" ctest --test-dir "$build" -L cuda --output-on-failure --timeout 120 \
  >"$out/tests.log" 2>&1
note "ctest -L cuda rc $? in $(($(date +%s) - t0)) s"
while IFS= read -r l; do summary+=("   $l"); done < <(
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$out/tests.log" | sed 's/^ *//'
  grep -E '\[  FAILED  \]|relative error|Failure' "$out/tests.log" | sort -u | head -12)

bin=$build/src/backends/cuda/cuda_kernels_bench
t0=$(date +%s)
: >"$out/kbench.log"
if [[ -x $bin ]]; then
  timeout "$(left 80)" "$bin" --attention >>"$out/kbench.log" 2>&1
  timeout "$(left 62)" "$bin" --wide >>"$out/kbench.log" 2>&1
fi
note "kernel bench in $(($(date +%s) - t0)) s"

cellm=$build/apps/cellm/cellm
t0=$(date +%s)
: >"$out/bench.log"
if [[ -x $cellm ]]; then
  timeout "$(left 32)" "$cellm" bench --geometry llama-3.1-8b --weights bf16 --sessions 64,256 \
    --ttft 0 --json "$out/bench-bf16.json" >>"$out/bench.log" 2>&1
  echo "rc $?" >>"$out/bench.log"
  timeout "$(left 12)" "$cellm" bench --geometry llama-3.1-8b --weights q4_0 --sessions 64,256 \
    --no-batch1 --no-prefill --ttft 0 --json "$out/bench-q4_0.json" >>"$out/bench.log" 2>&1
  echo "rc $?" >>"$out/bench.log"
fi
note "cellm bench in $(($(date +%s) - t0)) s"

t0=$(date +%s)
: >"$out/memcheck.log"
for t in cuda_kernel_attention_test cuda_kernel_matmul_test; do
  if (($(left 0) > 25)) && [[ -x $build/src/backends/cuda/$t ]]; then
    timeout "$(left 5)" compute-sanitizer --tool memcheck --error-exitcode 97 \
      "$build/src/backends/cuda/$t" >>"$out/memcheck.log" 2>&1
    note "memcheck $t rc $?"
  else
    note "memcheck $t not run"
  fi
done

{
  echo "================ perf checks ($(($(date +%s) - start)) s) ================"
  printf '%s\n' "${summary[@]}"
  echo "---- kernels"
  grep -E "^ceilings|^decode |^prefill |^  split|^attn |^gate|^down |^lm head" "$out/kbench.log"
  echo "---- cellm bench"
  grep -E "GB/s, |decode |prefill |rc " "$out/bench.log"
} | tee "$out/summary.txt"
