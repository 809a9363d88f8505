// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in Q8_0 (pack_q8_0, K a multiple of 32): the product of
// matmul_tile.glsl (GPUs) with the weights weights_q8_0.glsl decodes.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "matmul_tile.glsl"
#include "weights_q8_0.glsl"
