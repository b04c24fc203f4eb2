#!/usr/bin/env bash
# Builds what the steps need on the GPU machine (the CUDA backend with the test binaries, infernix or
# gemv_bench), then runs the steps (docs/cuda.md):
#   ops       the CPU-vs-CUDA op tests (backend_cuda_test)
#   models    the fixture models on the GPU (gpu_model_test; GTEST_FILTER, meant for the op tests, does not
#             apply to them: $MODELS_FILTER does)
#   bench     infernix bench on dummy Qwen3-8B weights (pp4096, tg128 at batch 1, 2, 4, 8)
#   qbench    the same model with quantized dummy weights ($QUANTS, default q8_0 q4_k), pp512 and tg64
#             at batch 1 and 8 ($QBATCHES)
#   moebench  MoE models with dummy weights ($MOE_RUNS, default Qwen3-30B-A3B q4_k and FP8, and FP8
#             Qwen3-Next-80B-A3B, all layers): pp64, tg32 at batch 1 and 8
#   hybrid    issue 6 / 7 decode set with dummy weights: Qwen3-30B-A3B bf16 (pp2048; tg32 at batch 1 and
#             8, depth 0 and 1024), Qwen3-Next-80B-A3B bf16 with 24 layers (pp8192; batch 1 and 8, depth
#             0, 1024, 131072), FP8 Qwen3-Next-80B-A3B with all 48 layers (batch 1 and 8); ~6 minutes
#   moedecode MoE decode with dummy bf16 weights, depth 0: Qwen3-30B-A3B and Qwen3-Next-80B-A3B with 24
#             layers (pp64, tg32 at the batch sizes $MOE_BATCHES, default 1,8), for the expert kernels' A/B runs
#   fp8decode MoE decode with dummy FP8 weights (f8_e4m3_b128), depth 0: Qwen3-Next-80B-A3B (all 48
#             layers) and Qwen3-30B-A3B, pp64, tg32 at the batch sizes $MOE_BATCHES (default 1,8)
#   attndecode decode with dummy bf16 weights at depths 0 and 8,192, batch 1 and 8: Qwen3-8B and
#             Qwen3-Next-80B-A3B with 24 layers (pp64, tg32), for the attention kernels' A/B runs
#   longctx   decode at long context with dummy bf16 weights: Qwen3-8B at depths 0 and 32,768, and
#             Qwen3-Next-80B-A3B with 24 layers at 0 and 131,072 (tg32, batch 1)
#   runs      infernix bench runs given in $BENCH_RUNS: "config:arguments" entries separated by ";" (the
#             configs of bench/configs; -n 32 and -r 1 where the arguments give no -n / -r of their own), e.g.
#             BENCH_RUNS="qwen3-8b:-p 64 -n 128 -b 1,8 -d 0,512;qwen3-next-80b-a3b:--num-layers 24 -b 1"
#             for an A/B run of one's own decode set (bench/cuda/ab_run.sh runs)
#   ncu       per-kernel time and DRAM traffic of batch-1 decode steps ($NCU_MODEL config, default
#             qwen3-8b; $NCU_ARGS added to the bench command, e.g. "--num-layers 4 --dummy-quant q4_k";
#             $NCU_SKIP / $NCU_COUNT matching launches skipped / profiled, default 400 / 600; $NCU_KERNEL
#             only kernels whose name matches that regex, default the decode path's kernels (not the
#             dummy weights' fill kernels, one per tensor at load); $NCU_TAG names the log)
#   ncudetail ncu's sections (speed of light, memory, occupancy, scheduler, warp stalls) for 2 launches of
#             $NCU_KERNEL (same variables), e.g. NCU_KERNEL=DecodeMma NCU_MODEL=qwen3-next-80b-a3b
#             NCU_ARGS="--num-layers 4 -d 131072"; $NCU_SECTIONS adds ncu arguments, e.g. "--section
#             SourceCounters --section MemoryWorkloadAnalysis_Tables" (stalls by source line: -lineinfo)
#   gemvbench the decode GEMVs alone (bench/cuda/gemv_bench.cpp) for $GEMV_TYPES (default bf16, bf16 with
#             each way of fusing the norms, q8_0, q4_k, f8_e4m3_b128) at 1 and 8 tokens
#   moegemvbench the decode experts alone (bench/cuda/moe_gemv_bench.cpp: Qwen3-Next-80B-A3B's experts, 8
#             layers in one graph) for $MOE_GEMV_TYPES (default bf16, bf16 with the norm epilogue,
#             f8_e4m3_b128) at $MOE_GEMV_TOKENS tokens (default 1,8)
#   streambench register loads against one bulk copy (TMA) per block, for tiles shaped like the decode
#             kernels' (bench/cuda/stream_bench.cu; $STREAM_ARGS, e.g. "--per-sm 3 --tile-kb 32")
#   trace     decode steps at batch 1 as they run, each kernel's start and end from CUPTI
#             (bench/cuda/kernel_trace.cpp, loaded through CUDA_INJECTION64_PATH), and what each kernel
#             costs a step (bench/cuda/trace_summary.py: how much later it ends than the kernels before it);
#             $TRACE_MODEL config (default qwen3-next-80b-a3b), $TRACE_ARGS added to the bench command
#             (default "--num-layers 24"), $TRACE_TAG names the logs; the CSV stays in /tmp. A prefill
#             instead: TRACE_BENCH="-p 8192 -n 1 -b 1 -r 1" TRACE_SUMMARY=--longest (default "-p 1 -n 32
#             -b 1 -r 1" and the decode steps); with a long context (-d in $TRACE_ARGS) the prefill's bursts
#             can outnumber the decode steps: TRACE_SUMMARY=--last takes the count of the last burst
#             (pipelined greedy steps, which leave no idle gap, are cut at their FeedTokens launch)
#   sanitize  compute-sanitizer memcheck over the gpu tests (GTEST_FILTER, when set, applies to the op and
#             the model tests alike here: memcheck over all of them is slow)
#   racecheck compute-sanitizer racecheck (shared-memory hazards) over the op tests; set GTEST_FILTER to the
#             kernels at hand: it is slow
# Logs go to $OUT. Optional, carried in .deps/ (ignored by git): src.tar.gz (a `git archive` of the
# commit under test, built instead of the working tree, whose models/ and tests/fixtures/ it takes;
# $SRC_TAR names another archive), include/ + lib/ (cpp-httplib, PCRE2, utf8proc, toml++), for machines
# that lack them. $BUILD (default /tmp/build) is the build folder; BUILD_ONLY=1 stops after the build
# (bench/cuda/ab_run.sh builds two trees that way). The working tree and what is carried may take 64 MiB
# in all, and the tree alone takes ~59 (its fixtures): binaries built elsewhere do not fit.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-/tmp/infernix-out}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
DEPS=$ROOT/.deps
if [ -d "$DEPS" ]; then
  # lib/ holds each library once, under its soname (the carry limit counts every byte); the linker's
  # names are links made here.
  mkdir -p /tmp/deps/pkgconfig /tmp/deps/lib
  for f in "$DEPS"/lib/*.so.*; do ln -sf "$f" "/tmp/deps/lib/$(basename "${f%%.so.*}").so"; done
  for m in libpcre2-8:pcre2-8 libutf8proc:utf8proc cpp-httplib:cpp-httplib; do
    printf 'prefix=%s\nName: %s\nDescription: carried\nVersion: 99\nLibs: -L/tmp/deps/lib -l%s\nCflags: -I%s/include\n' \
      "$DEPS" "${m%%:*}" "${m##*:}" "$DEPS" > "/tmp/deps/pkgconfig/${m%%:*}.pc"
  done
  export CMAKE_PREFIX_PATH=$DEPS/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=/tmp/deps/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
cupti_root=""  # a carried CUPTI (make_deps.sh WITH_CUPTI=1), for kernel_trace where the toolkit has none
if [ -f "$DEPS/cupti.tar.xz" ]; then
  mkdir -p /tmp/deps && tar -xJf "$DEPS/cupti.tar.xz" -C /tmp/deps && cupti_root=/tmp/deps/cupti
fi
SRC=$ROOT
SRC_TAR=${SRC_TAR:-$DEPS/src.tar.gz}
BUILD=${BUILD:-/tmp/build}
if [ -f "$SRC_TAR" ]; then
  SRC=$BUILD-src
  bash "$ROOT/bench/cuda/lay_out_archive.sh" "$SRC_TAR" "$SRC"
fi
# A machine kept warm between calls still has the last build: start over when it was of another tree.
if [ -f "$BUILD"/CMakeCache.txt ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$SRC" "$BUILD"/CMakeCache.txt; then
  rm -rf "$BUILD"
fi
# What to build: only what the steps run (a cold build is GPU time); every test binary and infernix
# without steps. An unknown step stops here, before the build.
targets=""
for step in "$@"; do
  case $step in
    ops | racecheck) need=backend_cuda_test ;;
    models) need=gpu_model_test ;;
    sanitize) need="backend_cuda_test gpu_model_test" ;;
    gemvbench) need=gemv_bench ;;
    moegemvbench) need=moe_gemv_bench ;;
    trace) need="infernix kernel_trace" ;;
    streambench) need=stream_bench ;;
    bench | qbench | moebench | moedecode | fp8decode | hybrid | attndecode | longctx | runs | ncu | ncudetail)
      need=infernix ;;
    *) echo "device_run.sh: unknown step '$step' (see the list at the top of this script)" >&2; exit 2 ;;
  esac
  for t in $need; do
    case " $targets " in *" $t "*) ;; *) targets="$targets $t" ;; esac
  done
done
targets=${targets:-backend_cuda_test gpu_model_test infernix}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# The benchmarks under bench/ (Google Benchmark) only when a step needs one of them.
bench=OFF
case " $* " in *" gemvbench "* | *" moegemvbench "* | *" trace "* | *" streambench "*) bench=ON ;; esac
echo "== configure"
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERNIX_CUDA_ARCHITECTURES=90 \
  -DINFERNIX_BUILD_BENCH=$bench -DINFERNIX_CUDA_PTXAS_VERBOSE=ON -DINFERNIX_CUPTI_ROOT="$cupti_root" \
  > "$OUT/configure.log" 2>&1 ||
  { tail -40 "$OUT/configure.log"; exit 1; }
echo "== build"
start=$(date +%s)
# shellcheck disable=SC2086  # the targets are meant to split
ninja -C "$BUILD" -j"$JOBS" -k 0 $targets > "$OUT/build.log" 2>&1 ||
  { grep -E -A12 "error|FAILED" "$OUT/build.log" | head -80; }
echo "build: $(( $(date +%s) - start )) s"
grep -E "registers|spill" "$OUT/build.log" | sort | uniq -c | sort -rn | head -5
[ -n "${BUILD_ONLY:-}" ] && exit 0
bin_of() { find "$BUILD" -name "$1" -type f -perm -u+x | head -1; }  # a test binary of the build
run_test() {  # name, timeout
  (cd "$BUILD" && timeout "$2" "$(bin_of "$1")" --gtest_brief=1 > "$OUT/$1.log" 2>&1)
  echo "$1: exit $?"
  grep -E "Failure|FAILED|metric|Skipped|PASSED|SKIPPED|rror|Expected|Which is|Value of" "$OUT/$1.log" | head -${3:-80}
}
# infernix bench on dummy weights (tg32, one repetition) for each "config:arguments" after the first two
# parameters: the log's name under $OUT, and the pattern of the lines to print.
bench_set() {
  local log=$1 pattern=$2 args cfg
  shift 2
  for args in "$@"; do
    cfg=${args%%:*}
    echo "-- $cfg ${args#*:}"
    # -n 32 and -r 1 unless the arguments give their own (the bench takes each option once)
    local given=" ${args#*:} " defaults=""
    [[ $given == *" -n "* || $given == *" --n-gen "* ]] || defaults="-n 32"
    [[ $given == *" -r "* || $given == *" --repetitions "* ]] || defaults="$defaults -r 1"
    # shellcheck disable=SC2086  # the arguments are meant to split
    timeout 290 "$BUILD"/bin/infernix bench --model "$SRC"/bench/configs/$cfg.json --dummy-weights --backend cuda \
      $defaults ${args#*:} 2>&1 | tee -a "$OUT/$log.log" | grep -E "$pattern|rror|Run with --help"
  done
}
# ncu: its binary; the launches to profile (the kernels whose names match NCU_KERNEL, default the decode
# path's; NCU_SKIP / NCU_COUNT of them skipped / profiled, defaults the two arguments); the bench it runs
# (batch-1 decode of $NCU_MODEL with $NCU_ARGS, e.g. "--num-layers 4 -d 131072").
DECODE_KERNELS='Gemv|Moe|Gdn|Gated|Conv|Attention|Decode|Norm|Binary|Prep|Sigmoid|Combine|Routing|Embedding|Gather|Quant|Rope|Kv|Argmax|TopK|LogSumExp|Slice|Silu'

ncu_bin() { command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1; }
ncu_filter() {
  echo "-k regex:${NCU_KERNEL:-$DECODE_KERNELS} --launch-skip ${NCU_SKIP:-$1} --launch-count ${NCU_COUNT:-$2}"
}
ncu_bench() {
  echo "$BUILD/bin/infernix bench --model $SRC/bench/configs/${NCU_MODEL:-qwen3-8b}.json --dummy-weights" \
    "--backend cuda -p 1 -n 32 -b 1 -r 1 ${NCU_ARGS:-}"
}
# A kernel bench (gemv_bench, moe_gemv_bench) once per "type[:extra flags]" of the list, at the batch
# sizes given; the output appended to $OUT/BENCH.log.
kernel_bench() {
  local bench=$1 types=$2 tokens=$3 t flags
  for t in $types; do
    flags=${t#*:}
    [ "$flags" = "$t" ] && flags=""
    # shellcheck disable=SC2086  # the extra flags are meant to split
    timeout 200 "$BUILD/bin/$bench" --type ${t%%:*} --tokens "$tokens" $flags 2>&1 | tee -a "$OUT/$bench.log"
  done
}
for step in "$@"; do
  case $step in
    ops) echo "== op tests"; run_test backend_cuda_test 170 ;;
    models) echo "== model tests"; GTEST_FILTER=${MODELS_FILTER:-*} run_test gpu_model_test 170 ;;
    bench)
      echo "== bench"
      timeout 150 "$BUILD"/bin/infernix bench --model "$SRC"/bench/configs/qwen3-8b.json --dummy-weights --backend cuda \
        -p 4096 -n 128 -b 1,2,4,8 --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" ;;
    qbench)
      echo "== bench, quantized dummy weights"
      for q in ${QUANTS:-q8_0 q4_k}; do
        timeout 150 "$BUILD"/bin/infernix bench --model "$SRC"/bench/configs/qwen3-8b.json --dummy-weights --backend cuda \
          --dummy-quant $q -p 512 -n 64 -b ${QBATCHES:-1,8} -r 1 --json "$OUT/bench_$q.json" 2>&1 | tee "$OUT/bench_$q.log"
      done ;;
    moebench)
      echo "== bench, MoE models"
      for run in ${MOE_RUNS:-qwen3-30b-a3b:q4_k qwen3-30b-a3b:f8_e4m3_b128 qwen3-next-80b-a3b:f8_e4m3_b128}; do
        cfg=${run%%:*} q=${run##*:}
        timeout 280 "$BUILD"/bin/infernix bench --model "$SRC"/bench/configs/$cfg.json --dummy-weights --backend cuda \
          --dummy-quant $q -p 64 -n 32 -b 1,8 -r 1 --json "$OUT/bench_${cfg}_$q.json" 2>&1 | tee "$OUT/bench_${cfg}_$q.log"
      done ;;
    hybrid)
      echo "== bench, hybrid and MoE decode"
      bench_set hybrid "GPU busy|^\| |prefilled|device:" "qwen3-30b-a3b:-p 2048 -b 1,8 -d 0,1024" \
        "qwen3-next-80b-a3b:--num-layers 24 -p 8192 -b 1,8 -d 0,1024,131072" \
        "qwen3-next-80b-a3b:--dummy-quant f8_e4m3_b128 -p 64 -b 1,8" ;;
    ncu)
      echo "== ncu: kernels of decode steps at batch 1 (${NCU_MODEL:-qwen3-8b} ${NCU_ARGS:-})"
      # shellcheck disable=SC2046  # ncu_filter's words are meant to split
      timeout 240 "$(ncu_bin)" --clock-control none --graph-profiling node $(ncu_filter 400 600) \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        --csv --print-units base $(ncu_bench) > "$OUT/ncu${NCU_TAG:-}.csv" 2> "$OUT/ncu${NCU_TAG:-}.err"
      echo "ncu: exit $?"; tail -3 "$OUT/ncu${NCU_TAG:-}.err"
      python3 "$ROOT/bench/cuda/ncu_summary.py" "$OUT/ncu${NCU_TAG:-}.csv" ;;
    ncudetail)
      echo "== ncu sections: ${NCU_KERNEL:-the decode path kernels} in decode steps (${NCU_MODEL:-qwen3-8b} ${NCU_ARGS:-})"
      # shellcheck disable=SC2046  # the same
      timeout 280 "$(ncu_bin)" --clock-control none --graph-profiling node $(ncu_filter 400 2) \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section SchedulerStats --section WarpStateStats ${NCU_SECTIONS:-} $(ncu_bench) > "$OUT/ncudetail${NCU_TAG:-}.txt" 2>&1
      echo "ncu: exit $?"
      grep -vE "^(tg|pp|model|device|\|)|^\s*$|^ *-+ *$" "$OUT/ncudetail${NCU_TAG:-}.txt" | grep -vE "^==PROF==" | head -${NCU_LINES:-150} ;;
    gemvbench)
      echo "== the decode GEMVs alone"
      kernel_bench gemv_bench "${GEMV_TYPES:-bf16 bf16:--norm=staged bf16:--norm=sums q8_0 q4_k f8_e4m3_b128}" 1,8 ;;
    moegemvbench)
      echo "== the decode experts alone"
      kernel_bench moe_gemv_bench "${MOE_GEMV_TYPES:-bf16 bf16:--norm f8_e4m3_b128}" "${MOE_GEMV_TOKENS:-1,8}" ;;
    streambench)
      echo "== streaming tiles: register loads against bulk copies"
      # shellcheck disable=SC2086  # the arguments are meant to split
      timeout 200 "$BUILD"/bin/stream_bench ${STREAM_ARGS:-} 2>&1 | tee "$OUT/stream_bench.log" ;;
    trace)
      echo "== kernel trace: batch-1 decode steps as they run (${TRACE_MODEL:-qwen3-next-80b-a3b} ${TRACE_ARGS---num-layers 24})"
      lib=$(find "$BUILD" -name libkernel_trace.so | head -1)
      if [ -z "$lib" ]; then
        echo "trace: libkernel_trace.so was not built (no CUPTI here: WITH_CUPTI=1 bench/cuda/make_deps.sh carries one)"
      else
        csv=/tmp/trace${TRACE_TAG:-}.csv
        # shellcheck disable=SC2086  # the arguments are meant to split
        CUDA_INJECTION64_PATH=$lib INFX_TRACE_OUT=$csv timeout 240 "$BUILD"/bin/infernix bench \
          --model "$SRC"/bench/configs/${TRACE_MODEL:-qwen3-next-80b-a3b}.json --dummy-weights --backend cuda \
          ${TRACE_BENCH:--p 1 -n 32 -b 1 -r 1} ${TRACE_ARGS---num-layers 24} > "$OUT/trace${TRACE_TAG:-}.log" 2>&1
        echo "trace: exit $?"
        grep -E "^model:|GPU busy|kernel_trace|^\| tg" "$OUT/trace${TRACE_TAG:-}.log"
        # shellcheck disable=SC2086  # the same
        python3 "$ROOT/bench/cuda/trace_summary.py" "$csv" ${TRACE_SUMMARY:-} | tee "$OUT/trace_summary${TRACE_TAG:-}.txt"
        # shellcheck disable=SC2086  # the same
        python3 "$ROOT/bench/cuda/trace_summary.py" "$csv" ${TRACE_SUMMARY:-} --order > "$OUT/trace_order${TRACE_TAG:-}.txt"
      fi ;;
    sanitize)
      echo "== compute-sanitizer memcheck"
      for t in backend_cuda_test:${SANITIZE_OPS_S:-280} gpu_model_test:${SANITIZE_MODELS_S:-150}; do
        name=${t%%:*}
        (cd "$BUILD" && timeout "${t##*:}" compute-sanitizer --tool memcheck --print-limit 20 \
          "$(bin_of "$name")" --gtest_brief=1 > "$OUT/sanitize_$name.log" 2>&1)
        echo "sanitize $name: exit $?"
        grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|out of bounds" "$OUT/sanitize_$name.log" | head -8
      done ;;
    moedecode)
      echo "== bench, MoE decode"
      bench_set moedecode "GPU busy|^\| tg|model:" "qwen3-30b-a3b:-p 64 -b ${MOE_BATCHES:-1,8}" \
        "qwen3-next-80b-a3b:--num-layers 24 -p 64 -b ${MOE_BATCHES:-1,8}" ;;
    fp8decode)
      echo "== bench, FP8 MoE decode"
      bench_set fp8decode "GPU busy|^\| tg|model:" \
        "qwen3-next-80b-a3b:--dummy-quant f8_e4m3_b128 -p 64 -b ${MOE_BATCHES:-1,8}" \
        "qwen3-30b-a3b:--dummy-quant f8_e4m3_b128 -p 64 -b ${MOE_BATCHES:-1,8}" ;;
    attndecode)
      echo "== bench, decode at depths 0 and 8192"
      bench_set attndecode "GPU busy|^\| tg|prefilled|model:" "qwen3-8b:-p 64 -b 1,8 -d 0,8192" \
        "qwen3-next-80b-a3b:--num-layers 24 -p 64 -b 1,8 -d 0,8192" ;;
    runs)
      echo "== bench runs"
      [ -n "${BENCH_RUNS:-}" ] || { echo "runs: set BENCH_RUNS (see the top of this script)" >&2; exit 2; }
      IFS=';' read -r -a bench_runs <<< "$BENCH_RUNS"
      bench_set runs "GPU busy|^\| tg|^\| pp|prefilled|model:" "${bench_runs[@]}" ;;
    longctx)
      echo "== bench, decode at long context"
      bench_set longctx "GPU busy|^\| tg|prefilled|model:" "qwen3-8b:-p 64 -b 1 -d 0,32768" \
        "qwen3-next-80b-a3b:--num-layers 24 -p 64 -b 1 -d 0,131072" ;;
    racecheck)
      echo "== compute-sanitizer racecheck"
      (cd "$BUILD" && timeout "${RACECHECK_S:-280}" compute-sanitizer --tool racecheck --print-limit 20 \
        "$(bin_of backend_cuda_test)" --gtest_brief=1 > "$OUT/racecheck.log" 2>&1)
      echo "racecheck backend_cuda_test: exit $?"
      grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED|hazard" "$OUT/racecheck.log" | head -8 ;;
  esac
done
