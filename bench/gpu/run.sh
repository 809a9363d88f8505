#!/usr/bin/env bash
# The prepared GPU run for a session that is lent a device (issue 38; docs/backends.md). Run on the lent
# machine from the repository root, with build/gpu-bundle.tar.xz carried (bench/gpu/bundle.sh made it here):
#
#   bash bench/gpu/run.sh            (the device tool: run(command="bash bench/gpu/run.sh", carry=[...]))
#
# It prints, in order: what Vulkan sees (dllm devices), the Vulkan op tests on the GPU (correctness first),
# dllm bench --backend vulkan at the LLaDA-8B and LLaDA2-mini shapes (GFLOP/s; a fraction of the device's peak
# is GFLOP/s over the card's dense f32 / f16 figure, since the plain path runs f32 arithmetic), the same-shape
# forward in PyTorch bf16 with scaled_dot_product_attention when the machine has torch with CUDA (the anchor
# that the reference code, Fast-dLLM and dInfer run), and generate tokens/s on the shipped demo model with
# --threshold 0.9 --cache dual. Everything also lands in $OUT (the device tool brings it back).
set -uo pipefail
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
tar -C /tmp -xJf build/gpu-bundle.tar.xz || { echo "no build/gpu-bundle.tar.xz: run bench/gpu/bundle.sh and carry it"; exit 1; }
export LD_LIBRARY_PATH=/tmp/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MESA_SHADER_CACHE_DIR=/tmp/gpu-bundle/cache
dllm=/tmp/gpu-bundle/bin/dllm
echo "== nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | head -5
echo "== dllm devices"; "$dllm" devices || { echo "no Vulkan device: is the GPU's Vulkan ICD installed (ls /usr/share/vulkan/icd.d)?"; ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1; exit 1; }
"$dllm" devices --json > "$out/devices.json"
echo "== Vulkan op tests on the GPU"
DLLM_REQUIRE_VULKAN=1 timeout 120 /tmp/gpu-bundle/bin/dllm_vulkan_tests --gtest_brief=1 2>&1 | tail -15
for spec in "llada-8b 4 256" "llada-8b 4 1024" "llada2-mini 4 256"; do
  set -- $spec
  echo "== dllm bench --backend vulkan --shape $1 --layers $2 --tokens $3"
  timeout 150 "$dllm" bench --backend vulkan --shape "$1" --layers "$2" --tokens "$3" --repeat 5 --dtype bf16 \
    --json > "$out/bench_$1_$3.json" && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r[k] for k in r if not isinstance(r[k], (dict, list))})" "$out/bench_$1_$3.json"
done
echo "== PyTorch anchor (bf16, sdpa), same shapes"
timeout 150 python3 bench/gpu/torch_forward.py --shape llada-8b --layers 4 --tokens 256 1024 2>&1 | tee "$out/torch.txt" | tail -5
echo "== generate on the demo model: --threshold 0.9 --cache dual, 256 tokens"
for backend in vulkan cpu; do
  timeout 60 "$dllm" generate -m models/demo -p 'def main():' --gen-length 256 --block-length 32 --threshold 0.9 \
    --cache dual --backend "$backend" --json > "$out/generate_$backend.json" &&
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('$backend', r.get('tokens_per_second'), 'tok/s', r.get('forwards'), 'forwards')" "$out/generate_$backend.json"
done
