// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in f32 [N, K]: the product of
// matmul_tile.glsl (GPUs) with the weights weights_f32.glsl decodes.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "matmul_tile.glsl"
#include "weights_f32.glsl"
