#!/usr/bin/env bash
# Builds the CUDA kernel tests and microbenchmark on a GPU machine, runs every test case (each in
# its own process, so a fault in one cannot hide the others), runs the benchmark, runs every case
# again under compute-sanitizer memcheck, and prints a summary table last.
# Run from the repository root. Logs go to $OUT (default /tmp/kernel-checks): build.log,
# tests.log, bench.log, memcheck.log, summary.txt. Builds the kernels alone
# (CELLM_CUDA_KERNELS_STANDALONE=ON) so the state of the rest of the backend cannot break it.
# Usage: run_kernel_checks.sh [build-dir]
# Environment: OUT, JOBS, CMAKE_PREFIX_PATH, PREBUILT (folder of fallback binaries), BUDGET_S (whole-run budget in seconds, default 400:
# each phase gets what is left, so the summary is printed even when a phase runs long).
set -u
out=${OUT:-/tmp/kernel-checks}
build=${1:-build/dev-cuda}
jobs=${JOBS:-16}
mkdir -p "$out"
work=$(mktemp -d)
tests="cuda_kernel_layout_test cuda_kernel_elementwise_test cuda_kernel_embedding_test
       cuda_kernel_rope_kv_test cuda_kernel_attention_test cuda_kernel_matmul_test"
summary="$out/summary.txt"
: >"$summary"
note() { printf '%-46s %s\n' "$1" "$2" | tee -a "$summary" >/dev/null; }
elapsed() { echo "$(( $(date +%s) - start )) s"; }
budget=${BUDGET_S:-400}
# Seconds left before the budget, minus a reserve, at least 10.
left() { local l=$(( budget - ($(date +%s) - start) - $1 )); [ $l -lt 10 ] && l=10; echo $l; }

start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  >"$out/build.log" 2>&1
{
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCELLM_CUDA_KERNELS_STANDALONE=ON -DCELLM_WERROR=OFF \
    ${CMAKE_PREFIX_PATH:+-DCMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH} &&
    ninja -C "$build" -k 0 -j "$jobs" $tests cuda_kernels_bench
} >>"$out/build.log" 2>&1
build_rc=$?
note "build" "$([ $build_rc -eq 0 ] && echo ok || echo "FAILED rc=$build_rc") ($(elapsed))"
bin="$build/src/backends/cuda"
# Binaries that did not build here are taken from $PREBUILT when given (built elsewhere).
if [ -n "${PREBUILT:-}" ]; then
  for t in $tests cuda_kernels_bench; do
    if [ ! -x "$bin/$t" ] && [ -x "$PREBUILT/$t" ]; then
      mkdir -p "$bin" && cp "$PREBUILT/$t" "$bin/$t" && note "using prebuilt" "$t"
    fi
  done
fi

# One line per test case: "<binary> <Suite.Name>".
: >"$work/cases"
for t in $tests; do
  [ -x "$bin/$t" ] || { note "test $t" "NOT BUILT"; continue; }
  "$bin/$t" --gtest_list_tests | awk -v b="$t" '
    /^[^ ]/ { suite = $1 } /^  / { print b, suite $1 }' >>"$work/cases"
done

# run_cases <tag> <parallel> <seconds> <wrapper...>: each case in its own process, all of them
# within <seconds> (a case still running then is killed and reported as not finished).
run_cases() {
  local tag=$1 parallel=$2 limit=$3
  shift 3
  export bin work tag limit
  export wrapper="$*"
  timeout "$limit" xargs -P "$parallel" -L 1 sh -c '
    log="$work/$tag.$0.$1.log"
    timeout "$limit" $wrapper "$bin/$0" --gtest_filter="$1" --gtest_color=no >"$log" 2>&1
    echo "$0 $1 $?" >>"$work/$tag.rc"' <"$work/cases"
}

: >"$work/test.rc"
run_cases test 8 "$(left 200)"
: >"$out/tests.log"
while read -r t c rc; do
  { echo "===== $t $c rc=$rc"; cat "$work/test.$t.$c.log"; } >>"$out/tests.log"
done < <(sort "$work/test.rc")
for t in $tests; do
  total=$(grep -c "^$t " "$work/cases")
  passed=$(grep -c "^$t .* 0$" "$work/test.rc")
  failed=$(grep "^$t " "$work/test.rc" | grep -v ' 0$' | awk '{print $2}' | tr '\n' ' ')
  note "test $t" "$passed/$total passed ${failed:+FAILED: $failed}"
done
note "tests done" "$(elapsed)"

timeout "$(left 120)" "$bin/cuda_kernels_bench" >"$out/bench.log" 2>&1
note "bench" "rc=$? ($(elapsed))"

: >"$work/memcheck.rc"
run_cases memcheck 10 "$(left 15)" compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20
: >"$out/memcheck.log"
while read -r t c rc; do
  { echo "===== $t $c rc=$rc"; grep -v '^\[' "$work/memcheck.$t.$c.log" | head -60; } \
    >>"$out/memcheck.log"
done < <(sort "$work/memcheck.rc")
for t in $tests; do
  total=$(grep -c "^$t " "$work/cases")
  # A case that never calls CUDA (a host-only test) ends before the first instrumented call.
  for c in $(grep "^$t " "$work/memcheck.rc" | grep ' 255$' | awk '{print $2}'); do
    grep -q 'terminated before first instrumented API call' "$work/memcheck.$t.$c.log" &&
      sed -i "s/^$t $c 255$/$t $c 0/" "$work/memcheck.rc"
  done
  clean=$(grep -c "^$t .* 0$" "$work/memcheck.rc")
  bad=$(grep "^$t " "$work/memcheck.rc" | grep -v ' 0$' | awk '{print $2 "(rc=" $3 ")"}' |
    tr '\n' ' ')
  note "memcheck $t" "$clean/$total clean ${bad:+NOT: $bad}"
done
note "total" "$(elapsed)"

echo "=== bench ==="
cat "$out/bench.log"
echo
echo "=== failures (excerpt) ==="
grep -hE 'Failure|error:|FAILED|Expected|Which is|relative error' "$out/tests.log" \
  "$out/build.log" | head -30
echo
echo "=== summary ==="
cat "$summary"
