// x[i] += y[i] over n values (a residual connection). Invocation i = x + y · (groups in x · 256): vk::Ops
// spreads long vectors over a second dimension of workgroups.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.n) return;
  x[i] += y[i];
}
