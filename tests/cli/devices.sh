#!/usr/bin/env bash
# `dllm devices`: the Vulkan devices as JSON and as lines; with DLLM_REQUIRE_VULKAN=1 (scripts/test.sh) at least one
# (lavapipe), each with a name, memory and subgroup size. A build without the backend says so with an error.
#
#   tests/cli/devices.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
if ! json=$("$bin" devices --json 2>&1); then
  grep -q "built without the Vulkan backend" <<<"$json" || { echo "FAIL: devices failed: $json"; exit 1; }
  echo "devices: ok (no Vulkan backend in this build)"
  exit 0
fi
n=$(python3 -c "
import json, sys
devices = json.loads(sys.argv[1])
for d in devices:
    assert d['name'] and d['device_local_bytes'] > 0 and d['subgroup_size'] > 0, d
print(len(devices))" "$json")
if [ "${DLLM_REQUIRE_VULKAN:-0}" = 1 ] && [ "$n" -lt 1 ]; then
  echo "FAIL: DLLM_REQUIRE_VULKAN=1 and no Vulkan device listed"
  exit 1
fi
lines=$("$bin" devices)
if [ "$n" -ge 1 ]; then
  grep -q '^0: .*device-local, subgroup [0-9]' <<<"$lines" || { echo "FAIL: devices lines: $lines"; exit 1; }
else
  grep -q '^no Vulkan device' <<<"$lines" || { echo "FAIL: devices without a device: $lines"; exit 1; }
fi
echo "devices: ok ($n device(s))"
