// W in f32 [N, K]: weight(n, k) and weights8(n, k, v) for the matmul_tile.glsl / matmul_registers.glsl products
// (included after them: it reads their push constants p).
layout(std430, binding = 2) readonly buffer W { float w[]; };

float weight(uint n, uint k) { return w[n * p.K + k]; }

void weights8(uint n, uint k, out float v[8]) {
  [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = w[n * p.K + k + i];
}
