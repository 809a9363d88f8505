// What every AMX kernel needs around its tile instructions: the tile configuration and Linux's leave to use
// the tile data. Shared by the packed int8 kernels (quant/linear_packed.cpp), their kernel-set check
// (quant/linear_ggml.cpp) and the peak measurements (peak.cpp).
#pragma once

#include <cstdint>

namespace dllm {

// The 64-byte operand of ldtilecfg, palette 1: rows and bytes per row of each of the 8 tile registers.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads `config` for the calling thread (the configuration is per thread). Not _tile_loadconfig: GCC 12's
// passes it to ldtilecfg as an 8-byte memory operand, so the stores to the rest of the 64 bytes may be
// dropped as dead (and the next tile instruction then faults). This operand is the whole struct.
inline void amx_load_tile_config(const AmxTileConfig& config) {
  asm volatile("ldtilecfg %0" : : "m"(config));
}

// Whether AMX-TILE and AMX-INT8 (cpuid leaf 7, EDX bits 24 and 25), or AMX-TILE and AMX-BF16 (bit 22), can
// run here: the CPU has them and Linux lets this process use the 8 KiB of tile data. Linux (>= 5.16) must be
// asked once (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) before any thread touches a tile; the leave
// is the whole process's, threads started later included. Asked on the first call; false where the kernel
// refuses (older kernels, a VM that hides AMX).
bool amx_int8_usable();
bool amx_bf16_usable();

}  // namespace dllm
