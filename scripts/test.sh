#!/usr/bin/env bash
# Installs dependencies, builds everything (preset "ci") and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh ci
ctest --preset ci
