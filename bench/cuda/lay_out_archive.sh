#!/usr/bin/env bash
# Lays out a `git archive` of a commit (made without models/ and tests/fixtures/) in DIR as a tree to
# build: the archive, then this tree's models and fixtures. Skipped when DIR already holds the same
# archive (new files' times would make the build start over). A new archive's files take the time of
# their extraction (tar -m), not their commit's: an older commit's sources must not look older than the
# objects built from another archive in the same build folder. Used by device_run.sh.
#   bench/cuda/lay_out_archive.sh ARCHIVE DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
archive=$1 dir=$2
sum=$(md5sum < "$archive")
[ "$(cat "$dir/.archive-sum" 2>/dev/null)" = "$sum" ] && exit 0
rm -rf "$dir" && mkdir -p "$dir/tests" && tar -xzmf "$archive" -C "$dir"
cp -r "$root/models" "$dir/" && cp -r "$root/tests/fixtures" "$dir/tests/"
echo "$sum" > "$dir/.archive-sum"
