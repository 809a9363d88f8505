#!/usr/bin/env bash
# The layers hold (CMakeLists.txt, dllm_layer): each layer compiles against build/layers/NAME, which links only the
# folders it may include. A probe that includes a lower layer must compile there; one that includes a higher layer
# (or, for kernels/, the public header) must not. Usage: check.sh CXX BUILD_DIR/layers
set -euo pipefail
cxx=$1
layers=$2
probe=$(mktemp --suffix=.cpp)
trap 'rm -f "$probe"' EXIT
checked=0

# expect ok|fail LAYER HEADER
expect() {
  local want=$1 layer=$2 header=$3
  printf '#include "%s"\nint main() { return 0; }\n' "$header" > "$probe"
  if "$cxx" -std=c++20 -fsyntax-only -I"$layers/$layer" "$probe" 2>/dev/null; then got=ok; else got=fail; fi
  if [ "$got" != "$want" ]; then
    echo "FAIL: layer $layer including $header: expected $want, got $got" >&2
    exit 1
  fi
  checked=$((checked + 1))
}

expect ok io core/error.h
expect ok io io/gguf.h
expect fail io model/family.h
expect fail io kernels/linear.h
expect ok kernels core/ggml_types.h
expect ok kernels kernels/linear.h
expect fail kernels io/gguf.h
expect fail kernels dllm/dllm.h
expect fail core io/gguf.h
expect fail tokenizer model/family.h
expect ok model io/checkpoint.h
expect fail model denoise/denoiser.h
expect fail model convert/gguf_convert.h
expect fail denoise convert/gguf_convert.h
expect ok convert model/family.h
expect ok hub hub/hub.h
expect fail hub io/gguf.h
expect fail hub model/family.h
if [ -d "$layers/vulkan" ]; then  # the Vulkan device layer sees core/ only (built where Vulkan and glslc are)
  expect ok vulkan vulkan/ops.h
  expect fail vulkan kernels/linear.h
  expect fail vulkan model/family.h
fi
echo "layering: $checked probes as expected"
