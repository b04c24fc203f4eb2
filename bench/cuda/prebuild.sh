#!/usr/bin/env bash
# Builds the GPU machine's binaries here, so that its calls skip their build (about a minute of the
# session's GPU time each): backend_cuda_test, gpu_model_test, infernix and gemv_bench for sm_90, built
# in /tmp/build as device_run.sh builds them (the path matters: the tests find their fixtures under the
# build folder, which device_run.sh then lays out there), stripped and packed with the tree's checksum
# (bench/cuda/tree_sum.sh) and the kernels' register report into .deps/prebuilt.tar.zst; toml++, which
# the machine lacks, goes to .deps/lib. device_run.sh takes them when the tree it runs on gives the same
# checksum, and builds as before when not. Run it after each change, before the call (ccache keeps the
# rebuild to the files that changed), and carry .deps.
#   bash bench/cuda/prebuild.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=/tmp/build
LOGS=/tmp/prebuild
mkdir -p "$LOGS" .deps/lib
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERNIX_CUDA_ARCHITECTURES=90 \
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
done
bash bench/cuda/tree_sum.sh > "$stage/tree.sum"
grep -E "registers|spill|Compiling entry|Function properties" "$LOGS/build.log" > "$stage/ptxas.log" || true
toml=$(ldconfig -p | awk '/libtomlplusplus\.so\.3 /{print $NF; exit}')
[ -n "$toml" ] && cp -L "$toml" .deps/lib/
tar -C "$stage" -cf - . | zstd -19 -T0 -q -f -o .deps/prebuilt.tar.zst
echo "packed: .deps/prebuilt.tar.zst, $(du -h .deps/prebuilt.tar.zst | cut -f1), tree $(cat "$stage/tree.sum")"
