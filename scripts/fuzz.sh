#!/usr/bin/env bash
# Fuzzes the file-format parsers, the JSON-schema compiler, the model-output parser and the
# chat-template engine with libFuzzer: builds the fuzz targets (src/formats/fuzz, src/grammar/fuzz,
# src/chat/output/fuzz, src/chat/fuzz) with clang, AddressSanitizer and UndefinedBehaviorSanitizer into
# build/fuzz, writes a seed corpus of small valid files for the file formats (the other targets' seeds
# are in the repository, beside them), and runs each target for FUZZ_SECONDS seconds (default 60).
# Exits non-zero on a crash, a sanitizer report, a failed check or an escaped exception, printing the
# reproducer's path; reproduce with `build/fuzz/bin/<target> <file>`. Needs clang and libFuzzer
# (Debian 12: clang, libclang-rt-14-dev; scripts/install-deps.sh installs them).
# Usage: scripts/fuzz.sh [target...]   (targets: gguf_fuzz safetensors_fuzz schema_fuzz output_fuzz
# template_fuzz; default all)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
build=build/fuzz
targets=("$@")
((${#targets[@]})) || targets=(gguf_fuzz safetensors_fuzz schema_fuzz output_fuzz template_fuzz)
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DINFERNIX_CUDA=OFF -DINFERNIX_BUILD_TESTS=OFF -DINFERNIX_BUILD_BENCH=OFF -DINFERNIX_FUZZ=ON \
  -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$PWD/$build/bin" \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_make_seeds "${targets[@]}"
"$build/bin/fuzz_make_seeds" "$build/seeds"

status=0
for t in "${targets[@]}"; do
  kind="${t%_fuzz}"
  corpus="$build/corpus/$kind"
  artifacts="$build/artifacts/$kind"
  seeds="$build/seeds/$kind"
  max_len=4096
  case "$kind" in
    schema) seeds=src/grammar/fuzz/seeds ;;
    output) seeds=src/chat/output/fuzz/seeds ;;
    template) seeds=src/chat/fuzz/seeds max_len=16384 ;;  # real templates run to 4-8 KB
  esac
  mkdir -p "$corpus" "$artifacts"
  echo "== $t: ${seconds}s"
  # The corpus grows across runs in build/fuzz/corpus; the seeds are read, never written.
  if ! UBSAN_OPTIONS=print_stacktrace=1 "$build/bin/$t" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds" \
      >"$build/$t.log" 2>&1; then
    tail -n 60 "$build/$t.log"
    echo "FUZZ FAILURE in $t; full log: $build/$t.log"
    for f in "$artifacts"/*; do [ -e "$f" ] && echo "reproducer: $f  (run: $build/bin/$t $f)"; done
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" "$build/$t.log" | tr '\n' ' '
    echo
  fi
done
exit "$status"
