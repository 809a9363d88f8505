// dst[index[i], :] += weight[i] · src[i, :] for i < count (an expert's rows back into the tokens' sum). The indices
// of one call are distinct (no two invocations add into one value); an index past dst's dst_rows rows is skipped.
// Invocations as add.comp.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer Src { float src[]; };
layout(std430, binding = 2) readonly buffer Index { uint index[]; };
layout(std430, binding = 3) readonly buffer Weight { float weight[]; };
layout(push_constant) uniform Params { uint count; uint cols; uint dst_rows; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.count * p.cols) return;
  const uint row = i / p.cols, r = index[row];
  if (r < p.dst_rows) dst[r * p.cols + i % p.cols] += weight[row] * src[i];
}
