#!/usr/bin/env bash
# Installs what Infernix needs to build and test on Debian 12 (as root, or with sudo available).
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config zstd git
  nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev libpcre2-dev libutf8proc-dev
  libcpp-httplib-dev libtomlplusplus-dev libxxhash-dev libzstd-dev liburing-dev
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  clang libclang-rt-14-dev  # libFuzzer and the sanitizers for scripts/fuzz.sh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the API tests (tests/api) with the official OpenAI and Anthropic clients.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
