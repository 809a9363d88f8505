// x[r, :] = 0 where keep[r] == 0, over x[rows, cols] (rows a mask drops). Invocations as add.comp.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Keep { uint keep[]; };
layout(push_constant) uniform Params { uint rows; uint cols; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.rows * p.cols) return;
  if (keep[i / p.cols] == 0) x[i] = 0.0;
}
