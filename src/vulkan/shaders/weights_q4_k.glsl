// W from GGUF Q4_K super-blocks (256 values = f16 d, f16 dmin, 6-bit scales and mins of 8 sub-blocks of 32,
// 4-bit quants q; value d·sc·q - dmin·m) as vk::pack_q4_k lays them out: per sub-block of 32 the pair
// (d1, m1) = (d·sc, dmin·m) in f32 [N, K / 32] vec2s, the quants eight to a uint [N, K / 8] (value 8i + j in
// bits 4j .. 4j + 3), value d1·q - m1 (quant::dequantize's bit for bit: d1·q is exact in f32). K is a multiple
// of 256. weight(n, k) and weights8(n, k, v) for the matmul_tile.glsl / matmul_registers.glsl products
// (included after them: it reads their push constants p).
layout(std430, binding = 2) readonly buffer ScaleMin { vec2 scale_min[]; };
layout(std430, binding = 3) readonly buffer Quants { uint quants[]; };

vec2 scale_min_at(uint n, uint k) { return scale_min[n * (p.K / 32) + k / 32]; }
uint octet_at(uint n, uint k) { return quants[n * (p.K / 8) + k / 8]; }  // W[n, k & ~7 .. + 7]
float quant(uint octet, uint i) { return float(bitfieldExtract(octet, int(4 * i), 4)); }  // 0..15

float weight(uint n, uint k) {
  const vec2 s = scale_min_at(n, k);
  return s.x * quant(octet_at(n, k), k & 7) - s.y;
}

void weights8(uint n, uint k, out float v[8]) {  // k a multiple of 8: one sub-block, one word
  const vec2 s = scale_min_at(n, k);
  const uint octet = octet_at(n, k);
  [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = s.x * quant(octet, i) - s.y;
}
