#include "kernels/amx.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dllm {

namespace {

bool cpuid_7_edx_bit(int bit) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> bit) & 1u;
}

constexpr int kAmxBf16 = 22, kAmxTile = 24, kAmxInt8 = 25;

bool tile_data_granted() {
  static const bool granted = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

}  // namespace

bool amx_int8_usable() {
  return cpuid_7_edx_bit(kAmxTile) && cpuid_7_edx_bit(kAmxInt8) && tile_data_granted();
}

bool amx_bf16_usable() {
  return cpuid_7_edx_bit(kAmxTile) && cpuid_7_edx_bit(kAmxBf16) && tile_data_granted();
}

}  // namespace dllm
