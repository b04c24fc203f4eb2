#!/usr/bin/env bash
# Quick start: installs dependencies, builds, and serves the embedded default model over the OpenAI
# and Anthropic APIs on http://127.0.0.1:8080 (Ctrl-C stops it). Extra arguments go to
# `infernix serve` (e.g. --model /path/to/Qwen3-8B --port 9000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release infernix
exec build/release/bin/infernix serve "$@"
