// dst[i, :] = src[index[i], :] for i < count (an embedding lookup, the rows routed to an expert); an index past
// src's src_rows rows gives zeros instead of reading out of bounds. Invocations as add.comp.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) readonly buffer Index { uint index[]; };
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params { uint count; uint cols; uint src_rows; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.count * p.cols) return;
  const uint r = index[i / p.cols];
  dst[i] = r < p.src_rows ? src[r * p.cols + i % p.cols] : 0.0;
}
