// Per row of logits [R, V], what the denoising strategies rank positions by, so that only O(rows) numbers leave
// the device: the argmax (lowest index on ties, as torch.argmax), and of softmax(row) the argmax's probability,
// the margin p_top1 - p_top2, and Σ p·log(p + 1e-10) (the negative entropy, as src/denoise/prediction.h).
// One workgroup a row: a max pass (top two values), a sum pass, an entropy pass, each reduced in shared memory.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) writeonly buffer Argmax { uint argmax[]; };
layout(std430, binding = 2) writeonly buffer Stats { float stats[]; };  // [R, 3]: p_max, margin, neg_entropy
layout(push_constant) uniform Params { uint R; uint V; } p;

shared float s_top[64];
shared uint s_idx[64];
shared float s_second[64];
shared float s_sum[64];

// (top, idx, second) of a and b merged: the larger top wins (the lower index on ties), the rest is the second.
void merge(uint a, uint b) {
  const bool b_wins = s_top[b] > s_top[a] || (s_top[b] == s_top[a] && s_idx[b] < s_idx[a]);
  if (b_wins) {
    s_second[a] = max(s_second[b], s_top[a]);
    s_top[a] = s_top[b];
    s_idx[a] = s_idx[b];
  } else {
    s_second[a] = max(s_second[a], s_top[b]);
  }
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  const uint base = row * p.V;
  float top = -1.0 / 0.0, second = -1.0 / 0.0;
  uint idx = 0xffffffffu;
  for (uint v = t; v < p.V; v += 64) {  // increasing v: a tie keeps the earlier index
    const float x = logits[base + v];
    if (x > top) {
      second = top;
      top = x;
      idx = v;
    } else if (x > second) {
      second = x;
    }
  }
  s_top[t] = top;
  s_idx[t] = idx;
  s_second[t] = second;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) merge(t, t + half_);
    barrier();
  }
  const float m = s_top[0];
  float sum = 0.0;
  for (uint v = t; v < p.V; v += 64) sum += exp(logits[base + v] - m);
  s_sum[t] = sum;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) s_sum[t] += s_sum[t + half_];
    barrier();
  }
  const float total = s_sum[0];
  barrier();
  float ent = 0.0;
  for (uint v = t; v < p.V; v += 64) {
    const float q = exp(logits[base + v] - m) / total;
    ent += q * log(q + 1e-10);
  }
  s_sum[t] = ent;
  barrier();
  for (uint half_ = 32; half_ > 0; half_ >>= 1) {
    if (t < half_) s_sum[t] += s_sum[t + half_];
    barrier();
  }
  if (t == 0) {
    argmax[row] = s_idx[0];
    const float p1 = 1.0 / total;
    stats[row * 3 + 0] = p1;
    stats[row * 3 + 1] = p1 - exp(s_second[0] - m) / total;
    stats[row * 3 + 2] = s_sum[0];
  }
}
