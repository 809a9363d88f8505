#include "vulkan/ops.h"

#include <span>

#include "core/error.h"
#include "vulkan_shaders/matmul_f32.h"
#include "vulkan_shaders/token_stats.h"

namespace dllm::vk {

namespace {

struct MatmulPush {
  uint32_t m, n, k, accumulate;
};
struct StatsPush {
  uint32_t rows, vocab;
};

uint32_t groups(uint32_t n, uint32_t per) { return (n + per - 1) / per; }

void need(const Buffer& b, uint64_t floats, const char* what) {
  if (b.bytes() < floats * 4) fail("Vulkan ", what, ": buffer of ", b.bytes(), " bytes, needs ", floats * 4);
}

}  // namespace

Ops::Ops(Context& ctx)
    : ctx_(&ctx),
      matmul_f32_(std::make_unique<Kernel>(ctx, std::span<const uint32_t>(kMatmulF32Spv), 3, sizeof(MatmulPush),
                                           "matmul_f32")),
      token_stats_(std::make_unique<Kernel>(ctx, std::span<const uint32_t>(kTokenStatsSpv), 3, sizeof(StatsPush),
                                            "token_stats")) {}

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

}  // namespace dllm::vk
