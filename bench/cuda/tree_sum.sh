#!/usr/bin/env bash
# Prints one checksum of what the GPU binaries are built from (sources, CMake files, the embedded model,
# the fixtures) of the tree at DIR (default: this one), the same here and on the GPU machine's copy:
# bench/cuda/prebuild.sh stores it with the binaries it builds here, device_run.sh uses them only when
# the tree it builds gives the same. Git-ignored folders that the copy leaves out (node_modules,
# __pycache__) are skipped.
#   bench/cuda/tree_sum.sh [DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
export LC_ALL=C
{
  find src tests bench models cmake \( -name node_modules -o -name __pycache__ \) -prune -o -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cmake' -o -name CMakeLists.txt \
    -o -name '*.zst' -o -name '*.json' -o -name '*.jinja' -o -name '*.S' \) -print
  ls CMakeLists.txt CMakePresets.json
} | sort | xargs md5sum | md5sum | cut -d' ' -f1
