// NeoX-style RoPE in place on x[rows, heads, head_dim]: value j of the first rotary_dim/2 pairs with j + half.
// The angles' cos and sin come from the host ([rows, half], computed in double as ref::rope_neox does), so long
// positions lose nothing to f32 angle arithmetic here.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Cos { float cs[]; };
layout(std430, binding = 2) readonly buffer Sin { float sn[]; };
layout(push_constant) uniform Params { uint rows; uint heads; uint head_dim; uint half_rot; } p;

void main() {
  const uint id = gl_GlobalInvocationID.x;  // (row, head, j)
  const uint total = p.rows * p.heads * p.half_rot;
  if (id >= total) return;
  const uint j = id % p.half_rot, rh = id / p.half_rot, row = rh / p.heads;
  const uint base = rh * p.head_dim;
  const float c = cs[row * p.half_rot + j], s = sn[row * p.half_rot + j];
  const float a = x[base + j], b = x[base + j + p.half_rot];
  x[base + j] = a * c - b * s;
  x[base + j + p.half_rot] = b * c + a * s;
}
