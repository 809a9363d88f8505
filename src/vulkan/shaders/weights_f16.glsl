// W in IEEE half, two to a uint (element 2i in the low 16 bits, as a little-endian host stores them), each
// row padded to an even K: [N, (K + 1) / 2] uints. unpackHalf2x16 reads them, so no 16-bit storage feature is
// needed. weight(n, k) and weights8(n, k, v) for the matmul_tile.glsl / matmul_registers.glsl products
// (included after them: it reads their push constants p).
layout(std430, binding = 2) readonly buffer W { uint w[]; };

uint pair_at(uint n, uint k) { return w[n * ((p.K + 1) / 2) + k / 2]; }  // W[n, k & ~1] and W[n, k | 1]

float weight(uint n, uint k) {
  const vec2 pair = unpackHalf2x16(pair_at(n, k));
  return (k & 1) == 0 ? pair.x : pair.y;
}

void weights8(uint n, uint k, out float v[8]) {  // k even
  [[unroll]] for (uint i = 0; i < 8; i += 2) {
    const vec2 pair = unpackHalf2x16(pair_at(n, k + i));
    v[i] = pair.x;
    v[i + 1] = pair.y;
  }
}
