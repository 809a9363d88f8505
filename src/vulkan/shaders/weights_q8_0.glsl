// W from GGUF Q8_0 blocks (32 values = f16 d, int8 q[32], value d·q) as vk::pack_q8_0 lays them out: the
// scales d in f32 [N, K / 32], the quants four to a uint [N, K / 4] (value 4i in the low byte). K is a
// multiple of 32. weight(n, k) and weights8(n, k, v) for the matmul_tile.glsl / matmul_registers.glsl products
// (included after them: it reads their push constants p).
layout(std430, binding = 2) readonly buffer Scales { float scales[]; };
layout(std430, binding = 3) readonly buffer Quants { uint quants[]; };

float scale_at(uint n, uint k) { return scales[n * (p.K / 32) + k / 32]; }
uint quad_at(uint n, uint k) { return quants[n * (p.K / 4) + k / 4]; }  // W[n, k & ~3 .. + 3]
float quant(uint quad, uint i) { return float(bitfieldExtract(int(quad), int(8 * i), 8)); }  // sign-extended

float weight(uint n, uint k) { return scale_at(n, k) * quant(quad_at(n, k), k & 3); }

void weights8(uint n, uint k, out float v[8]) {  // k a multiple of 8: one block, two words
  const float d = scale_at(n, k);
  const uint lo = quad_at(n, k), hi = quad_at(n, k + 4);
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    v[i] = d * quant(lo, i);
    v[i + 4] = d * quant(hi, i);
  }
}
