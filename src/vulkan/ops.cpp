#include "vulkan/ops.h"

#include <cmath>
#include <span>

#include "core/error.h"
#include "vulkan_shaders/attention.h"
#include "vulkan_shaders/matmul_f32.h"
#include "vulkan_shaders/rms_norm.h"
#include "vulkan_shaders/rope_neox.h"
#include "vulkan_shaders/silu_mul.h"
#include "vulkan_shaders/token_stats.h"

namespace dllm::vk {

namespace {

struct MatmulPush {
  uint32_t m, n, k, accumulate;
};
struct StatsPush {
  uint32_t rows, vocab;
};
struct NormPush {
  uint32_t rows, dim;
  float eps;
};
struct RopePush {
  uint32_t rows, heads, head_dim, half_rot;
};
struct AttentionPush {
  uint32_t batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset;
};

template <class Push>
std::unique_ptr<Kernel> kernel(Context& ctx, std::span<const uint32_t> spirv, uint32_t buffers, const char* name) {
  return std::make_unique<Kernel>(ctx, spirv, buffers, static_cast<uint32_t>(sizeof(Push)), name);
}

uint32_t groups(uint32_t n, uint32_t per) { return (n + per - 1) / per; }

void need(const Buffer& b, uint64_t floats, const char* what) {
  if (b.bytes() < floats * 4) fail("Vulkan ", what, ": buffer of ", b.bytes(), " bytes, needs ", floats * 4);
}

}  // namespace

Ops::Ops(Context& ctx)
    : ctx_(&ctx),
      matmul_f32_(kernel<MatmulPush>(ctx, kMatmulF32Spv, 3, "matmul_f32")),
      token_stats_(kernel<StatsPush>(ctx, kTokenStatsSpv, 3, "token_stats")),
      rms_norm_(kernel<NormPush>(ctx, kRmsNormSpv, 3, "rms_norm")),
      silu_mul_(kernel<uint32_t>(ctx, kSiluMulSpv, 3, "silu_mul")),
      rope_neox_(kernel<RopePush>(ctx, kRopeNeoxSpv, 3, "rope_neox")),
      attention_(kernel<AttentionPush>(ctx, kAttentionSpv, 6, "attention")) {}

Ops::~Ops() = default;

void Ops::matmul_f32(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                     bool accumulate) {
  if (m == 0 || n == 0 || k == 0) fail("Vulkan matmul_f32: empty shape ", m, " x ", n, " x ", k);
  need(x, uint64_t{m} * k, "matmul_f32 x");
  need(w, uint64_t{n} * k, "matmul_f32 w");
  need(y, uint64_t{m} * n, "matmul_f32 y");
  const MatmulPush push{m, n, k, accumulate ? 1u : 0u};
  matmul_f32_->run({&x, &w, &y}, &push, groups(n, 16), groups(m, 16));
}

TokenStats Ops::token_stats(const Buffer& logits, uint32_t rows, uint32_t vocab) {
  if (rows == 0 || vocab == 0) fail("Vulkan token_stats: ", rows, " rows of ", vocab, " logits");
  need(logits, uint64_t{rows} * vocab, "token_stats logits");
  Buffer argmax(*ctx_, rows * sizeof(uint32_t)), stats(*ctx_, rows * 3 * sizeof(float));
  const StatsPush push{rows, vocab};
  token_stats_->run({&logits, &argmax, &stats}, &push, rows);
  TokenStats out;
  out.argmax.resize(rows);
  argmax.download(std::span<uint32_t>(out.argmax));
  std::vector<float> s(rows * 3);
  stats.download(std::span<float>(s));
  for (uint32_t r = 0; r < rows; ++r) {
    out.p_max.push_back(s[r * 3]);
    out.margin.push_back(s[r * 3 + 1]);
    out.neg_entropy.push_back(s[r * 3 + 2]);
  }
  return out;
}

void Ops::rms_norm(const Buffer& x, const Buffer& w, Buffer& out, uint32_t rows, uint32_t dim, float eps) {
  if (rows == 0 || dim == 0) fail("Vulkan rms_norm: ", rows, " rows of ", dim);
  need(x, uint64_t{rows} * dim, "rms_norm x");
  need(w, dim, "rms_norm w");
  need(out, uint64_t{rows} * dim, "rms_norm out");
  const NormPush push{rows, dim, eps};
  rms_norm_->run({&x, &w, &out}, &push, rows);
}

void Ops::silu_mul(const Buffer& gate, const Buffer& up, Buffer& out, uint32_t n) {
  if (n == 0) fail("Vulkan silu_mul: 0 values");
  need(gate, n, "silu_mul gate");
  need(up, n, "silu_mul up");
  need(out, n, "silu_mul out");
  silu_mul_->run({&gate, &up, &out}, &n, groups(n, 256));
}

void Ops::rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim,
                    const std::vector<int64_t>& positions, double theta, uint32_t rotary_dim) {
  const uint32_t rot = rotary_dim > 0 ? rotary_dim : head_dim;
  if (rows == 0 || heads == 0 || rot < 2 || rot % 2 != 0 || rot > head_dim)
    fail("Vulkan rope_neox: ", rows, " rows, ", heads, " heads of ", head_dim, ", rotary_dim ", rot);
  if (positions.size() != rows) fail("Vulkan rope_neox: ", positions.size(), " positions for ", rows, " rows");
  need(x, uint64_t{rows} * heads * head_dim, "rope_neox x");
  const uint32_t half = rot / 2;
  std::vector<float> cs(size_t{rows} * half), sn(cs.size());
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(positions[r]) / std::pow(theta, 2.0 * j / rot);
      cs[size_t{r} * half + j] = static_cast<float>(std::cos(angle));
      sn[size_t{r} * half + j] = static_cast<float>(std::sin(angle));
    }
  Buffer bc(*ctx_, cs.size() * sizeof(float)), bs(*ctx_, sn.size() * sizeof(float));
  bc.upload(std::span<const float>(cs));
  bs.upload(std::span<const float>(sn));
  const RopePush push{rows, heads, head_dim, half};
  rope_neox_->run({&x, &bc, &bs}, &push, groups(rows * heads * half, 64));
}

void Ops::attention(const Buffer& q, const Buffer& k, const Buffer& v, const std::vector<uint8_t>& key_valid,
                    Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads, uint32_t kv_heads,
                    uint32_t head_dim, uint32_t block, uint32_t q_offset) {
  if (batch == 0 || q_len == 0 || kv_len == 0 || heads == 0 || kv_heads == 0 || head_dim == 0 ||
      heads % kv_heads != 0)
    fail("Vulkan attention: batch ", batch, ", q_len ", q_len, ", kv_len ", kv_len, ", heads ", heads, " over ",
         kv_heads, " kv heads of ", head_dim);
  if (!key_valid.empty() && key_valid.size() != size_t{batch} * kv_len)
    fail("Vulkan attention: key_valid has ", key_valid.size(), " entries for ", batch, " x ", kv_len, " keys");
  need(q, uint64_t{batch} * q_len * heads * head_dim, "attention q");
  need(k, uint64_t{batch} * kv_len * kv_heads * head_dim, "attention k");
  need(v, uint64_t{batch} * kv_len * kv_heads * head_dim, "attention v");
  need(out, uint64_t{batch} * q_len * heads * head_dim, "attention out");
  std::vector<uint32_t> valid(size_t{batch} * kv_len, 1u);
  for (size_t i = 0; i < key_valid.size(); ++i) valid[i] = key_valid[i] ? 1u : 0u;
  Buffer bvalid(*ctx_, valid.size() * sizeof(uint32_t));
  bvalid.upload(std::span<const uint32_t>(valid));
  Buffer scratch(*ctx_, size_t{batch} * heads * q_len * kv_len * sizeof(float));
  const AttentionPush push{batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset};
  attention_->run({&q, &k, &v, &bvalid, &scratch, &out}, &push, q_len, heads, batch);
}

}  // namespace dllm::vk
