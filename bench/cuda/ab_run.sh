#!/usr/bin/env bash
# A/B comparison on the GPU machine in one call (docs/cuda.md): the baseline commit, carried as
# .deps/base.tar.gz, and the tree under test (the working tree, or .deps/src.tar.gz) are built side by
# side, then device_run.sh's steps run with each, alternating base and test for $AB_ROUNDS rounds
# (default 2), so that both see the same machine, clocks and warm-up: run-to-run differences between
# calls (a few percent) then no longer hide a change's effect. Logs under $OUT/base-N and $OUT/test-N; the
# rounds' output in $OUT/rounds.txt, and last a table of both sides' numbers (bench/cuda/ab_summary.py).
# Make the baseline here first (without the models and fixtures, which come from the working tree: the
# carried folders hold 64 MiB in all), then carry .deps:
#   git archive --format=tar.gz -o .deps/base.tar.gz REV -- . ':!models' ':!tests/fixtures'
#   bash bench/cuda/ab_run.sh gemvbench qbench      (the same environment variables as device_run.sh)
# $AB_MORE: more archives made the same way (say, of parked commits), as more1, more2, ...: each built beside
# the two and run after them in every round, and summarised against the base after the test tree.
# $AB_PATCHES: patches (`git diff` output, carried in .deps/patches) that bench/cuda/patch_archive.sh applies
# to copies of the working tree here, as further trees after AB_MORE's (a few KB each instead of an archive):
#   git diff main parked/BRANCH -- src bench > .deps/patches/x.patch
#   AB_PATCHES=".deps/patches/x.patch" bash bench/cuda/ab_run.sh ops runs
# $AB_CHECKS: device_run.sh steps (e.g. "models ops", with GTEST_FILTER for ops) that run once per tree other
# than the base, after the builds and before the rounds; only those trees build their binaries.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-/tmp/infernix-out}
DEPS=$ROOT/.deps
RUN=$ROOT/bench/cuda/device_run.sh
if [ ! -f "$DEPS/base.tar.gz" ]; then
  echo "ab_run.sh: no baseline: git archive --format=tar.gz -o .deps/base.tar.gz REV -- . ':!models'" \
    "':!tests/fixtures', and carry .deps" >&2
  exit 2
fi
if (($# == 0)); then
  echo "usage: bench/cuda/ab_run.sh STEP... (device_run.sh's steps)" >&2
  exit 2
fi
read -r -a more <<< "${AB_MORE:-}"
read -r -a patches <<< "${AB_PATCHES:-}"
read -r -a checks <<< "${AB_CHECKS:-}"
for p in "${patches[@]}"; do
  archive=/tmp/ab-patch-$(basename "$p" .patch).tar.gz
  bash "$ROOT/bench/cuda/patch_archive.sh" "$p" "$archive" || exit 2
  more+=("$archive")
done
sides="base test"
for i in "${!more[@]}"; do
  [ -f "${more[$i]}" ] || { echo "ab_run.sh: AB_MORE: no archive ${more[$i]}" >&2; exit 2; }
  sides="$sides more$((i + 1))"
done
jobs=$(( $(nproc) / (2 + ${#more[@]}) ))  # the machine's cores shared by the trees' builds
((jobs < 4)) && jobs=4
mkdir -p "$OUT"
echo "== building the baseline and the tree under test"
SRC_TAR=$DEPS/base.tar.gz BUILD=/tmp/build-base OUT=$OUT/base-build JOBS=$jobs \
  BUILD_ONLY=1 bash "$RUN" "$@" > "$OUT/base-build.txt" 2>&1 &
OUT=$OUT/test-build JOBS=$jobs BUILD_ONLY=1 bash "$RUN" "$@" "${checks[@]}" > "$OUT/test-build.txt" 2>&1 &
for i in "${!more[@]}"; do
  SRC_TAR=${more[$i]} BUILD=/tmp/build-more$((i + 1)) OUT=$OUT/more$((i + 1))-build JOBS=$jobs \
    BUILD_ONLY=1 bash "$RUN" "$@" "${checks[@]}" > "$OUT/more$((i + 1))-build.txt" 2>&1 &
done
wait
for side in $sides; do
  echo "-- $side"
  grep -E "^build:|error|FAILED" "$OUT/$side-build.txt" | head -20
done
if ((${#checks[@]} > 0)); then
  echo "== checks: ${checks[*]}"
  echo "-- test"
  OUT=$OUT/test-checks bash "$RUN" "${checks[@]}" 2>&1 | grep -vE "^== (build|configure)|^build:|metric"
  for i in "${!more[@]}"; do
    echo "-- more$((i + 1))"
    SRC_TAR=${more[$i]} BUILD=/tmp/build-more$((i + 1)) OUT=$OUT/more$((i + 1))-checks bash "$RUN" "${checks[@]}" 2>&1 |
      grep -vE "^== (build|configure)|^build:|metric"
  done
fi
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  echo "== round $round: base"
  SRC_TAR=$DEPS/base.tar.gz BUILD=/tmp/build-base OUT=$OUT/base-$round \
    bash "$RUN" "$@" 2>&1 | grep -v "^== build\|^build:"
  echo "== round $round: test"
  OUT=$OUT/test-$round bash "$RUN" "$@" 2>&1 | grep -v "^== build\|^build:"
  for i in "${!more[@]}"; do
    echo "== round $round: more$((i + 1))"
    SRC_TAR=${more[$i]} BUILD=/tmp/build-more$((i + 1)) OUT=$OUT/more$((i + 1))-$round \
      bash "$RUN" "$@" 2>&1 | grep -v "^== build\|^build:"
  done
done | tee "$OUT/rounds.txt"
# Base and test side by side (GPU busy and step time per decode step, tok/s, gemv_bench's passes), then each
# of AB_MORE's trees against the base.
echo "== summary"
python3 "$ROOT/bench/cuda/ab_summary.py" "$OUT/rounds.txt" | tee "$OUT/summary.txt"
for side in $sides; do
  case $side in more*) python3 "$ROOT/bench/cuda/ab_summary.py" --test "$side" "$OUT/rounds.txt" | tee -a "$OUT/summary.txt" ;; esac
done
