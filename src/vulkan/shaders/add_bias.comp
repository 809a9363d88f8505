// x[r, c] += bias[c] over x[rows, cols] (a projection's bias). Invocations as add.comp.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform Params { uint rows; uint cols; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.rows * p.cols) return;
  x[i] += bias[i % p.cols];
}
