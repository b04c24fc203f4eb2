#!/usr/bin/env bash
# Makes an archive of this working tree with a patch applied (`git diff` output, applied with -p1), laid out
# as lay_out_archive.sh takes it (no models/ or tests/fixtures/, which come from the tree it is laid out
# beside): a tree to build and run beside the base, e.g. a parked commit's diff against main made here
# (git diff main BRANCH -- src bench > .deps/patches/x.patch) and applied on the GPU machine, where it
# costs a few KB of the carried 64 MiB instead of a whole archive. Used by ab_run.sh ($AB_PATCHES, and
# $AB_BASE_PATCH for the baseline itself).
#   bench/cuda/patch_archive.sh PATCH ARCHIVE
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
patch_file=$(realpath "$1") archive=$2
dir=$(mktemp -d /tmp/patch-archive.XXXXXX)
trap 'rm -rf "$dir"' EXIT
(cd "$root" && tar cf - --exclude=./models --exclude=./tests/fixtures --exclude=./.deps --exclude=./build \
  --exclude=./.git --exclude=./.cache --exclude=node_modules .) | tar xf - -C "$dir"
if ! (cd "$dir" && patch -p1 -s --dry-run < "$patch_file" > /dev/null); then
  echo "patch_archive.sh: $1 does not apply to this tree" >&2
  exit 1
fi
(cd "$dir" && patch -p1 -s < "$patch_file")
tar czf "$archive" -C "$dir" .
