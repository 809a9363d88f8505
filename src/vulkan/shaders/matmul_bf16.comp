// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in bf16, two to a uint (element 2i in the low 16 bits), each row padded to
// an even K: [N, (K + 1) / 2] uints; a bf16 is the high half of its f32. matmul_tile.glsl does the rest.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "matmul_tile.glsl"

layout(std430, binding = 2) readonly buffer W { uint w[]; };

float weight(uint n, uint k) {
  const uint pair = w[n * ((p.K + 1) / 2) + k / 2];
  return uintBitsToFloat((k & 1) == 0 ? pair << 16 : pair & 0xffff0000u);
}
