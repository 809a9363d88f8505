// y[M, N] (+)= x[M, K] · W[N, K]ᵀ, W in Q4_K (pack_q4_k, K a multiple of 256): the product of
// matmul_tile.glsl (GPUs) with the weights weights_q4_k.glsl decodes.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "matmul_tile.glsl"
#include "weights_q4_k.glsl"
