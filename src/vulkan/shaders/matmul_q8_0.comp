// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W from GGUF Q8_0 blocks (32 values = f16 d, int8 q[32], value d·q) as
// vk::pack_q8_0 lays them out: the scales d in f32 [N, K / 32], the quants four to a uint [N, K / 4] (value 4i in
// the low byte). K is a multiple of 32. matmul_tile.glsl does the rest.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "matmul_tile.glsl"

layout(std430, binding = 2) readonly buffer Scales { float scales[]; };
layout(std430, binding = 3) readonly buffer Quants { uint quants[]; };

float weight(uint n, uint k) {
  const int q = bitfieldExtract(int(quants[n * (p.K / 4) + k / 4]), int(8 * (k & 3)), 8);  // sign-extended
  return scales[n * (p.K / 32) + k / 32] * float(q);
}
