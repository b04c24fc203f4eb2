#!/usr/bin/env bash
# A/B comparison on the GPU machine in one call (docs/cuda.md): the baseline commit, carried as
# .deps/base.tar.gz, and the tree under test (the working tree, or .deps/src.tar.gz) are built side by
# side, then device_run.sh's steps run with each, alternating base and test for $AB_ROUNDS rounds
# (default 2), so that both see the same machine, clocks and warm-up: run-to-run differences between
# calls (a few percent) then no longer hide a change's effect. Logs under $OUT/base-N and $OUT/test-N,
# packed into $OUT/logs.tar.gz at the end (pack_logs); the rounds' output in $OUT/rounds.txt, and last a
# table of both sides' numbers (bench/cuda/ab_summary.py).
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
# $AB_BASE_PATCH: the baseline as a patch to the working tree instead of a carried archive (the tree with
# its fixtures and a base archive together pass the 64 MiB a call carries), made into .deps/base.tar.gz here
# by bench/cuda/patch_archive.sh:
#   git diff HEAD main -- src bench > .deps/patches/base.patch
#   AB_BASE_PATCH=.deps/patches/base.patch bash bench/cuda/ab_run.sh runs
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-/tmp/infernix-out}
DEPS=$ROOT/.deps
RUN=$ROOT/bench/cuda/device_run.sh
if (($# == 0)); then
  echo "usage: bench/cuda/ab_run.sh STEP... (device_run.sh's steps)" >&2
  exit 2
fi
if [ -n "${AB_BASE_PATCH:-}" ]; then
  bash "$ROOT/bench/cuda/patch_archive.sh" "$AB_BASE_PATCH" "$DEPS/base.tar.gz" || exit 2
fi
if [ ! -f "$DEPS/base.tar.gz" ]; then
  echo "ab_run.sh: no baseline: git archive --format=tar.gz -o .deps/base.tar.gz REV -- . ':!models'" \
    "':!tests/fixtures', and carry .deps; or AB_BASE_PATCH=PATCH (git diff HEAD REV -- src bench)" >&2
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
# At most 8 files come back from the GPU machine's $OUT, so each side's logs (builds, checks, rounds) go
# into one archive when this script ends, a timeout's end too: $OUT/logs.tar.gz beside rounds.txt and
# summary.txt (AB_KEEP_LOGS=1 leaves them as they are).
pack_logs() {
  [ "${AB_KEEP_LOGS:-0}" = 1 ] && return 0
  local items=() side x
  for side in $sides; do
    for x in "$OUT/$side"-*; do [ -e "$x" ] && items+=("$(basename "$x")"); done
  done
  ((${#items[@]} > 0)) || return 0
  tar czf "$OUT/logs.tar.gz" -C "$OUT" "${items[@]}" && (cd "$OUT" && rm -rf "${items[@]}")
}
trap pack_logs EXIT
jobs=$(( $(nproc) / (2 + ${#more[@]}) ))  # the machine's cores shared by the trees' builds
((jobs < 4)) && jobs=4
# device_run.sh with a side's tree and build folder, its logs under $OUT/NAME: run_side SIDE NAME STEP...
run_side() {
  local side=$1 name=$2
  shift 2
  case $side in
    base) SRC_TAR=$DEPS/base.tar.gz BUILD=/tmp/build-base OUT=$OUT/$name bash "$RUN" "$@" ;;
    test) OUT=$OUT/$name bash "$RUN" "$@" ;;  # the working tree, or .deps/src.tar.gz
    *) SRC_TAR=${more[${side#more} - 1]} BUILD=/tmp/build-$side OUT=$OUT/$name bash "$RUN" "$@" ;;
  esac
}
mkdir -p "$OUT"
echo "== building the baseline and the tree under test"
for side in $sides; do
  extra=()
  [ "$side" = base ] || extra=("${checks[@]}")
  JOBS=$jobs BUILD_ONLY=1 run_side "$side" "$side-build" "$@" "${extra[@]}" > "$OUT/$side-build.txt" 2>&1 &
done
wait
for side in $sides; do
  echo "-- $side"
  grep -E "^build:|error|FAILED" "$OUT/$side-build.txt" | head -20
done
if ((${#checks[@]} > 0)); then
  echo "== checks: ${checks[*]}"
  for side in $sides; do
    [ "$side" = base ] && continue
    echo "-- $side"
    run_side "$side" "$side-checks" "${checks[@]}" 2>&1 | grep -vE "^== (build|configure)|^build:|metric"
  done
fi
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for side in $sides; do
    echo "== round $round: $side"
    run_side "$side" "$side-$round" "$@" 2>&1 | grep -v "^== build\|^build:"
  done
done | tee "$OUT/rounds.txt"
# Base and test side by side (GPU busy and step time per decode step, tok/s, gemv_bench's passes), then each
# of AB_MORE's trees against the base.
echo "== summary"
python3 "$ROOT/bench/cuda/ab_summary.py" "$OUT/rounds.txt" | tee "$OUT/summary.txt"
for side in $sides; do
  case $side in more*) python3 "$ROOT/bench/cuda/ab_summary.py" --test "$side" "$OUT/rounds.txt" | tee -a "$OUT/summary.txt" ;; esac
done
