#!/usr/bin/env bash
# Installs what building and testing dllm.cpp needs on Debian 12 (the one list CI and the README share).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev           # oneDNN: the matmul engine (f32 / bf16 / int8 kernels chosen at run time)
  libopenblas-openmp-dev  # OpenBLAS sgemm on OpenMP: the f32 matmul where oneDNN has no AVX-512 kernels
  nlohmann-json3-dev    # JSON: config.json, safetensors headers, tokenizer.json, the API
  libcli11-dev          # command-line parsing
  libpcre2-dev          # tokenizer pre-tokenizer regexes (JIT)
  libcpp-httplib-dev    # the HTTP server
  libcurl4-openssl-dev libssl-dev  # models from the Hugging Face hub (-m org/name): HTTPS downloads, sha256 checks
  libvulkan-dev glslc mesa-vulkan-drivers  # the Vulkan backend: loader + headers, the shader compiler, lavapipe (CI's device)
  libgtest-dev libgmock-dev
  libbenchmark-dev      # kernel microbenchmarks (bench/micro)
  curl chromium         # server end-to-end tests: curl, headless browser (tests/server)
  patch                 # tests/cli/rewrite.sh applies the diff `dllm rewrite --diff` prints
  nginx-light           # scale-out test: replicas behind nginx (deploy/nginx.conf, tests/server/scaleout.test.mjs)
  clang libclang-rt-14-dev libomp-14-dev  # libFuzzer targets (scripts/fuzz.sh, -DDLLM_FUZZ=ON)
)
# Node.js + npm for the openai client and playwright-core: use the machine's own when present (a NodeSource
# nodejs already bundles npm, and Debian's separate npm package would conflict with it).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${PACKAGES[@]}"
