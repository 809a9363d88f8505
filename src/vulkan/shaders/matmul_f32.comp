// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in f32 [N, K] (matmul_tile.glsl).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "matmul_tile.glsl"

layout(std430, binding = 2) readonly buffer W { float w[]; };

float weight(uint n, uint k) { return w[n * p.K + k]; }
