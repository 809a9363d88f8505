// softmax(q·kᵀ / sqrt(head_dim)) · v for one (batch row, head, query) per workgroup, grouped-query heads, with the
// masks ref::attention takes: keys a batch row does not have (key_valid = 0) and, with block > 0, the
// block-causal rule (key j hidden from query i when j / block > (q_offset + i) / block). A row with no visible key
// is zeros. Scores go through a scratch buffer [batch, heads, q_len, kv_len]: any kv_len, plain and portable
// (the fused flash form is the fast path to come).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer Valid { uint valid[]; };  // [batch, kv_len]: 1 visible, 0 not
layout(std430, binding = 4) buffer Scores { float scores[]; };
layout(std430, binding = 5) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint batch; uint q_len; uint kv_len; uint heads; uint kv_heads; uint head_dim; uint block; uint q_offset;
} p;

shared float s_red[64];

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint q_dim = p.heads * p.head_dim, kv_dim = p.kv_heads * p.head_dim;
  const uint kvh = h / (p.heads / p.kv_heads);
  const uint qbase = (b * p.q_len + i) * q_dim + h * p.head_dim;
  const uint sbase = ((b * p.heads + h) * p.q_len + i) * p.kv_len;
  const float scale = inversesqrt(float(p.head_dim));
  const float neg_inf = -1.0 / 0.0;
  float mx = neg_inf;
  for (uint j = t; j < p.kv_len; j += 64) {
    const bool hidden = (p.block > 0 && j / p.block > (p.q_offset + i) / p.block) || valid[b * p.kv_len + j] == 0;
    float s = neg_inf;
    if (!hidden) {
      const uint kbase = (b * p.kv_len + j) * kv_dim + kvh * p.head_dim;
      float d = 0.0;
      for (uint c = 0; c < p.head_dim; ++c) d = fma(q[qbase + c], k[kbase + c], d);
      s = d * scale;
      mx = max(mx, s);
    }
    scores[sbase + j] = s;
  }
  s_red[t] = mx;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) s_red[t] = max(s_red[t], s_red[t + half_]);
    barrier();
  }
  const float m = s_red[0];
  barrier();
  const uint obase = qbase;
  if (isinf(m)) {  // nothing visible
    for (uint c = t; c < p.head_dim; c += 64) o[obase + c] = 0.0;
    return;
  }
  float sum = 0.0;
  for (uint j = t; j < p.kv_len; j += 64) {
    const float e = exp(scores[sbase + j] - m);  // exp(-inf) = 0 for hidden keys
    scores[sbase + j] = e;
    sum += e;
  }
  s_red[t] = sum;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) s_red[t] += s_red[t + half_];
    barrier();
  }
  const float total = s_red[0];
  memoryBarrierBuffer();
  barrier();
  for (uint c = t; c < p.head_dim; c += 64) {
    float acc = 0.0;
    for (uint j = 0; j < p.kv_len; ++j) acc = fma(scores[sbase + j], v[(b * p.kv_len + j) * kv_dim + kvh * p.head_dim + c], acc);
    o[obase + c] = acc / total;
  }
}
