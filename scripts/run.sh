#!/usr/bin/env bash
# Quick start: installs dependencies, builds, and runs the main job on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
prompt="151644,872,198,7985,264,6386,38242,911,279,9396,13,151645,198,151644,77091,198,151667,271,151668,271"
echo "+ build/release/bin/infernix generate --tokens $prompt --max-tokens 16"
build/release/bin/infernix generate --tokens "$prompt" --max-tokens 16
