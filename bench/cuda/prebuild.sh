#!/usr/bin/env bash
# Builds the GPU machine's binaries here, so that its calls skip their build (about a minute of the
# session's GPU time each): backend_cuda_test, gpu_model_test, infernix and gemv_bench for sm_90, built
# where device_run.sh would build them (/tmp/build; the path matters: the tests find their fixtures under
# the build folder, which device_run.sh then lays out there), stripped and packed into
# .deps/prebuilt.tar.zst with the tree's checksum and the build folder (prebuilt.id), their paths
# (prebuilt.bins) and the kernels' register report; toml++, which the machine lacks, goes to .deps/lib.
# device_run.sh takes them when the tree it builds gives the same checksum, and builds as before when
# not. Run it after each change, before the call (ccache rebuilds only what changed), and carry .deps.
# With --base REV, the baseline of bench/cuda/ab_run.sh instead: REV's archive (.deps/base.tar.gz, the
# models and fixtures left out: they come from this tree) built in /tmp/build-base into
# .deps/prebuilt-base.tar.zst.
#   bash bench/cuda/prebuild.sh [--base REV]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SRC=$ROOT
BUILD=/tmp/build
PACK=.deps/prebuilt.tar.zst
if [ "${1:-}" = --base ]; then
  [ -n "${2:-}" ] || { echo "usage: bench/cuda/prebuild.sh [--base REV]" >&2; exit 2; }
  BUILD=/tmp/build-base
  SRC=$BUILD-src
  PACK=.deps/prebuilt-base.tar.zst
  mkdir -p .deps
  git archive --format=tar.gz -o .deps/base.tar.gz "$2" -- . ':!models' ':!tests/fixtures'
  bash bench/cuda/lay_out_archive.sh .deps/base.tar.gz "$SRC"  # as device_run.sh lays it out there
fi
LOGS=/tmp/prebuild
mkdir -p "$LOGS" .deps/lib
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERNIX_CUDA_ARCHITECTURES=90 \
  -DINFERNIX_BUILD_BENCH=ON -DINFERNIX_CUDA_PTXAS_VERBOSE=ON > "$LOGS/configure.log"
start=$(date +%s)
if ! ninja -C "$BUILD" -j"$(nproc)" backend_cuda_test gpu_model_test infernix gemv_bench > "$LOGS/build.log" 2>&1; then
  grep -E -A12 "error|FAILED" "$LOGS/build.log" | head -60
  exit 1
fi
echo "build: $(( $(date +%s) - start )) s"
stage=$LOGS/stage
rm -rf "$stage" && mkdir -p "$stage"
for t in backend_cuda_test gpu_model_test infernix gemv_bench; do
  path=$(cd "$BUILD" && find . -name "$t" -type f -perm -u+x | head -1)
  mkdir -p "$stage/$(dirname "$path")"
  strip -o "$stage/$path" "$BUILD/$path"
  echo "$path" >> "$stage/prebuilt.bins"
done
sum=$(bash bench/cuda/tree_sum.sh "$SRC")
echo "$sum $BUILD" > "$stage/prebuilt.id"
grep -E "registers|spill|Compiling entry|Function properties" "$LOGS/build.log" > "$stage/ptxas.log" || true
toml=$(ldconfig -p | awk '/libtomlplusplus\.so\.3 /{p = $NF} END {print p}')  # reads all: no SIGPIPE
[ -n "$toml" ] && cp -L "$toml" .deps/lib/
tar -C "$stage" -cf - . | zstd -19 -T0 -q -f -o "$PACK"
echo "packed: $PACK, $(du -h "$PACK" | cut -f1), tree $sum, built in $BUILD"
