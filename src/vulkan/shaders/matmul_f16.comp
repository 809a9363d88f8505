// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in IEEE half, two to a uint (element 2i in the low 16 bits, as a
// little-endian host stores them), each row padded to an even K: [N, (K + 1) / 2] uints. unpackHalf2x16 reads
// them, so no 16-bit storage feature is needed. matmul_tile.glsl does the rest.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "matmul_tile.glsl"

layout(std430, binding = 2) readonly buffer W { uint w[]; };

float weight(uint n, uint k) {
  const vec2 pair = unpackHalf2x16(w[n * ((p.K + 1) / 2) + k / 2]);
  return (k & 1) == 0 ? pair.x : pair.y;
}
