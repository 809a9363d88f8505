// out[r, :] = w ⊙ x[r, :] / sqrt(mean(x[r, :]²) + eps): one workgroup a row, the sum of squares reduced in shared
// memory (as ref::rms_norm, in f32 here).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { uint rows; uint dim; float eps; } p;

shared float s_sum[64];

void main() {
  const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, base = row * p.dim;
  float ss = 0.0;
  for (uint i = t; i < p.dim; i += 64) ss = fma(x[base + i], x[base + i], ss);
  s_sum[t] = ss;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) s_sum[t] += s_sum[t + half_];
    barrier();
  }
  const float scale = inversesqrt(s_sum[0] / float(p.dim) + p.eps);
  for (uint i = t; i < p.dim; i += 64) o[base + i] = w[i] * (x[base + i] * scale);
}
