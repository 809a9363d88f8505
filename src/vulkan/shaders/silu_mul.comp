// SwiGLU's product: out[i] = silu(gate[i]) · up[i] (as ref::silu_mul). Invocations as add.comp.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { uint n; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.n) return;
  const float g = gate[i];
  o[i] = g / (1.0 + exp(-g)) * up[i];
}
