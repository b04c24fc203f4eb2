#!/usr/bin/env bash
# Installs dependencies, builds everything (preset "ci"), runs every CTest test (GPU tests skip
# without a GPU), fuzzes the GGUF and safetensors parsers, the JSON-schema compiler, the model-output
# parser and the chat-template engine (scripts/fuzz.sh), then the API tests:
# `infernix serve` driven by the official openai and @anthropic-ai/sdk clients under node's test runner.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh ci
ctest --preset ci
# The GGUF and safetensors parsers, the JSON-schema compiler, the model-output parser and the
# chat-template engine under libFuzzer (clang build in build/fuzz), 60 s each.
bash scripts/fuzz.sh
(cd tests/api && npm ci --no-audit --no-fund --loglevel=error)
(cd tests/api && INFERNIX_BINARY="$PWD/../../build/ci/bin/infernix" node --test --test-concurrency=1)
