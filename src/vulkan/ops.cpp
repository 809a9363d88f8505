#include "vulkan/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <string>

#include "core/error.h"
#include "vulkan_shaders/add.h"
#include "vulkan_shaders/add_bias.h"
#include "vulkan_shaders/attention.h"
#include "vulkan_shaders/gather_rows.h"
#include "vulkan_shaders/matmul_bf16.h"
#include "vulkan_shaders/matmul_bf16_registers.h"
#include "vulkan_shaders/matmul_f16.h"
#include "vulkan_shaders/matmul_f16_registers.h"
#include "vulkan_shaders/matmul_f32.h"
#include "vulkan_shaders/matmul_f32_registers.h"
#include "vulkan_shaders/matmul_q4_k.h"
#include "vulkan_shaders/matmul_q4_k_registers.h"
#include "vulkan_shaders/matmul_q8_0.h"
#include "vulkan_shaders/matmul_q8_0_registers.h"
#include "vulkan_shaders/rms_norm.h"
#include "vulkan_shaders/rope_neox.h"
#include "vulkan_shaders/scatter_add_weighted.h"
#include "vulkan_shaders/silu_mul.h"
#include "vulkan_shaders/token_stats.h"
#include "vulkan_shaders/zero_rows.h"

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
struct RowsPush {
  uint32_t rows, cols;
};
struct IndexedRowsPush {
  uint32_t count, cols, other_rows;  // other_rows: the rows of the indexed buffer (src or dst)
};
struct RopePush {
  uint32_t rows, heads, head_dim, half_rot;
};
struct AttentionPush {
  uint32_t batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset;
};

template <class Push>
std::unique_ptr<Kernel> kernel(Context& ctx, std::span<const uint32_t> spirv, uint32_t buffers,
                               const char* name) {
  return std::make_unique<Kernel>(ctx, spirv, buffers, static_cast<uint32_t>(sizeof(Push)), name);
}

uint32_t groups(uint32_t n, uint32_t per) {
  return (n + per - 1) / per;
}

// `words` 4-byte values (f32 or uint32) in the buffer `what` ("matmul_f32 x", or op and part apart).
void need(const Buffer& b, uint64_t words, const char* what, const char* part = nullptr) {
  if (b.bytes() < words * 4)
    fail("Vulkan ", what, part ? " " : "", part ? part : "", ": buffer of ", b.bytes(), " bytes, needs ",
         words * 4);
}

// The products' variants: the tile of y a workgroup computes (rows of x, columns of W), as in the shaders.
// matmul_tile.glsl: 16 x 16 invocations of one value; matmul_registers.glsl: 16 invocations of 32 x 8, which
// need subgroups of at least its kChunk = 8.
constexpr uint32_t kTiledRows = 16, kTiledCols = 16;
constexpr uint32_t kRegistersRows = 32, kRegistersCols = 16 * 8, kRegistersSubgroup = 8;

bool registers_run_on(const DeviceInfo& d) {
  return d.subgroup_broadcast && d.subgroup_size >= kRegistersSubgroup;
}

// `variant` where ctx can run it; an error saying what is missing where it cannot.
MatmulVariant runnable(const Context& ctx, MatmulVariant variant) {
  const DeviceInfo& d = ctx.info();
  if (variant == MatmulVariant::kRegisters && !registers_run_on(d))
    fail("Vulkan: the registers matmul needs subgroups of at least ", kRegistersSubgroup,
         " invocations with subgroupBroadcast in compute shaders; ", d.name, " has subgroups of ",
         d.subgroup_size, d.subgroup_broadcast ? "" : " without subgroupBroadcast");
  return variant;
}

}  // namespace

const char* variant_name(MatmulVariant v) {
  return v == MatmulVariant::kRegisters ? "registers" : "tiled";
}

MatmulVariant default_matmul_variant(const DeviceInfo& device) {
  const char* env = std::getenv("DLLM_VULKAN_MATMUL");
  if (env && *env) {
    const std::string v = env;
    if (v == "tiled") return MatmulVariant::kTiled;
    if (v == "registers") return MatmulVariant::kRegisters;
    fail("DLLM_VULKAN_MATMUL=", v, ": expected tiled or registers");
  }
  return device.cpu && registers_run_on(device) ? MatmulVariant::kRegisters : MatmulVariant::kTiled;
}

// An op's command buffer: the open recording, or (none open) one of its own that done() submits, so that an
// op outside a recording runs and waits as it always did and its temporaries go when it ends.
class Ops::Op {
 public:
  explicit Op(Ops& ops) : ops_(ops), own_(!ops.recording()) {
    if (own_) ops_.begin();
  }
  ~Op() {
    if (own_) ops_.abandon();
  }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  void done() {
    if (!own_) return;
    own_ = false;
    ops_.submit();
  }

 private:
  Ops& ops_;
  bool own_;
};

Ops::Ops(Context& ctx) : Ops(ctx, default_matmul_variant(ctx.info())) {}

Ops::Ops(Context& ctx, MatmulVariant matmul)
    : ctx_(&ctx),
      matmul_variant_(runnable(ctx, matmul)),
      token_stats_(kernel<StatsPush>(ctx, kTokenStatsSpv, 3, "token_stats")),
      rms_norm_(kernel<NormPush>(ctx, kRmsNormSpv, 3, "rms_norm")),
      silu_mul_(kernel<uint32_t>(ctx, kSiluMulSpv, 3, "silu_mul")),
      add_(kernel<uint32_t>(ctx, kAddSpv, 2, "add")),
      add_bias_(kernel<RowsPush>(ctx, kAddBiasSpv, 2, "add_bias")),
      zero_rows_(kernel<RowsPush>(ctx, kZeroRowsSpv, 2, "zero_rows")),
      gather_rows_(kernel<IndexedRowsPush>(ctx, kGatherRowsSpv, 3, "gather_rows")),
      scatter_add_weighted_(kernel<IndexedRowsPush>(ctx, kScatterAddWeightedSpv, 4, "scatter_add_weighted")),
      rope_neox_(kernel<RopePush>(ctx, kRopeNeoxSpv, 3, "rope_neox")),
      attention_(kernel<AttentionPush>(ctx, kAttentionSpv, 6, "attention")) {}

Ops::~Ops() {
  abandon();
}

// ---- recording ----

void Ops::begin() {
  if (recording()) fail("Vulkan: begin() while a recording is open");
  cb_ = ctx_->begin();
  // What earlier submissions wrote (uploads through staging copies, earlier recordings) before this one's
  // reads.
  barrier_after(cb_, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

void Ops::submit() {
  if (!recording()) fail("Vulkan: submit() with no recording open");
  VkCommandBuffer cb = cb_;
  cb_ = VK_NULL_HANDLE;
  try {
    ctx_->submit_and_wait(cb);  // frees cb, also when it throws
  } catch (...) {
    release();
    throw;
  }
  release();
}

void Ops::abandon() {
  if (!recording()) return;
  ctx_->discard(cb_);
  cb_ = VK_NULL_HANDLE;
  release();
}

void Ops::release() {
  for (auto& [kernel, set] : sets_) kernel->free_set(set);
  sets_.clear();
  temporaries_.clear();
}

Buffer& Ops::temporary(size_t bytes) {
  if (!recording()) fail("Vulkan: temporary() with no recording open (its buffers live until the submit)");
  temporaries_.push_back(std::make_unique<Buffer>(*ctx_, bytes));
  return *temporaries_.back();
}

size_t Ops::descriptor_pools() const {
  size_t n = 0;
  for (const Kernel* k :
       {matmul_f32_.get(), matmul_f16_.get(), matmul_bf16_.get(), matmul_q8_0_.get(), matmul_q4_k_.get(),
        token_stats_.get(), rms_norm_.get(), silu_mul_.get(), add_.get(), add_bias_.get(), zero_rows_.get(),
        gather_rows_.get(), scatter_add_weighted_.get(), rope_neox_.get(), attention_.get()})
    n += k ? k->pools() : 0;  // the products' kernels: null until first used
  return n;
}

void Ops::dispatch(Kernel& kernel, std::initializer_list<const Buffer*> buffers, const void* push,
                   uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  sets_.reserve(sets_.size() + 1);  // no throw between the set's allocation and its entry
  sets_.emplace_back(&kernel, kernel.record(cb_, buffers, push, groups_x, groups_y, groups_z));
}

void Ops::dispatch_flat(Kernel& kernel, std::initializer_list<const Buffer*> buffers, const void* push,
                        uint64_t n, const char* what) {
  if (n > UINT32_MAX) fail("Vulkan ", what, ": ", n, " values, at most 2^32 - 1 in one op");
  // At most 65535 workgroups a dimension (the least a device allows): long vectors use y as well.
  const uint64_t total = (n + 255) / 256;
  const uint32_t x = static_cast<uint32_t>(std::min<uint64_t>(total, 65535));
  const uint32_t y = static_cast<uint32_t>((total + x - 1) / x);
  dispatch(kernel, buffers, push, x, y);
}

void Ops::copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) {
  if (bytes == 0 || src_offset > src.bytes() || bytes > src.bytes() - src_offset ||
      dst_offset > dst.bytes() || bytes > dst.bytes() - dst_offset)
    fail("Vulkan copy: ", bytes, " bytes from ", src_offset, " of a buffer of ", src.bytes(), " to ",
         dst_offset, " of one of ", dst.bytes());
  if (src.handle() == dst.handle() && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
    fail("Vulkan copy: overlapping ranges ", src_offset, " and ", dst_offset, " of ", bytes,
         " bytes in one buffer");
  Op op(*this);
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
  // Earlier dispatches' writes are ordered before the copy by their own barriers (Kernel::record).
  barrier_after(cb_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  op.done();
}

// ---- products ----

Kernel& Ops::product(std::unique_ptr<Kernel>& kernel, std::span<const uint32_t> tiled,
                     std::span<const uint32_t> registers, uint32_t buffers, const char* name) {
  if (!kernel) {
    const bool r = matmul_variant_ == MatmulVariant::kRegisters;
    kernel = vk::kernel<MatmulPush>(*ctx_, r ? registers : tiled, buffers, name);
  }
  return *kernel;
}

void Ops::matmul(Kernel& kernel, std::initializer_list<const Buffer*> buffers, uint32_t m, uint32_t n,
                 uint32_t k, bool accumulate) {
  const MatmulPush push{m, n, k, accumulate ? 1u : 0u};
  const bool registers = matmul_variant_ == MatmulVariant::kRegisters;
  Op op(*this);
  dispatch(kernel, buffers, &push, groups(n, registers ? kRegistersCols : kTiledCols),
           groups(m, registers ? kRegistersRows : kTiledRows));
  op.done();
}

namespace {

void check_matmul(const char* name, const Buffer& x, const Buffer& y, uint32_t m, uint32_t n, uint32_t k) {
  if (m == 0 || n == 0 || k == 0) fail("Vulkan ", name, ": empty shape ", m, " x ", n, " x ", k);
  need(x, uint64_t{m} * k, name, "x");
  need(y, uint64_t{m} * n, name, "y");
}

}  // namespace

void Ops::matmul_f32(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                     bool accumulate) {
  check_matmul("matmul_f32", x, y, m, n, k);
  need(w, uint64_t{n} * k, "matmul_f32 w");
  matmul(product(matmul_f32_, kMatmulF32Spv, kMatmulF32RegistersSpv, 3, "matmul_f32"), {&x, &y, &w}, m, n, k,
         accumulate);
}

void Ops::matmul_f16(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                     bool accumulate) {
  check_matmul("matmul_f16", x, y, m, n, k);
  need(w, uint64_t{n} * ((uint64_t{k} + 1) / 2), "matmul_f16 w");
  matmul(product(matmul_f16_, kMatmulF16Spv, kMatmulF16RegistersSpv, 3, "matmul_f16"), {&x, &y, &w}, m, n, k,
         accumulate);
}

void Ops::matmul_bf16(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                      bool accumulate) {
  check_matmul("matmul_bf16", x, y, m, n, k);
  need(w, uint64_t{n} * ((uint64_t{k} + 1) / 2), "matmul_bf16 w");
  matmul(product(matmul_bf16_, kMatmulBf16Spv, kMatmulBf16RegistersSpv, 3, "matmul_bf16"), {&x, &y, &w}, m, n,
         k, accumulate);
}

void Ops::matmul_q8_0(const Buffer& x, const Buffer& scales, const Buffer& quants, Buffer& y, uint32_t m,
                      uint32_t n, uint32_t k, bool accumulate) {
  check_matmul("matmul_q8_0", x, y, m, n, k);
  if (k % 32 != 0) fail("Vulkan matmul_q8_0: k = ", k, " is not a multiple of Q8_0's 32-value blocks");
  need(scales, uint64_t{n} * (k / 32), "matmul_q8_0 scales");
  need(quants, uint64_t{n} * (k / 4), "matmul_q8_0 quants");
  matmul(product(matmul_q8_0_, kMatmulQ80Spv, kMatmulQ80RegistersSpv, 4, "matmul_q8_0"),
         {&x, &y, &scales, &quants}, m, n, k, accumulate);
}

void Ops::matmul_q4_k(const Buffer& x, const Buffer& scale_min, const Buffer& quants, Buffer& y, uint32_t m,
                      uint32_t n, uint32_t k, bool accumulate) {
  check_matmul("matmul_q4_k", x, y, m, n, k);
  if (k % 256 != 0)
    fail("Vulkan matmul_q4_k: k = ", k, " is not a multiple of Q4_K's 256-value super-blocks");
  need(scale_min, uint64_t{n} * (k / 32) * 2, "matmul_q4_k scale_min");
  need(quants, uint64_t{n} * (k / 8), "matmul_q4_k quants");
  matmul(product(matmul_q4_k_, kMatmulQ4KSpv, kMatmulQ4KRegistersSpv, 4, "matmul_q4_k"),
         {&x, &y, &scale_min, &quants}, m, n, k, accumulate);
}

// ---- per-row and elementwise ----

void Ops::token_stats(const Buffer& logits, Buffer& argmax, Buffer& stats, uint32_t rows, uint32_t vocab) {
  if (rows == 0 || vocab == 0) fail("Vulkan token_stats: ", rows, " rows of ", vocab, " logits");
  need(logits, uint64_t{rows} * vocab, "token_stats logits");
  need(argmax, rows, "token_stats argmax");
  need(stats, uint64_t{rows} * 3, "token_stats stats");
  const StatsPush push{rows, vocab};
  Op op(*this);
  dispatch(*token_stats_, {&logits, &argmax, &stats}, &push, rows);
  op.done();
}

TokenStats Ops::token_stats(const Buffer& logits, uint32_t rows, uint32_t vocab) {
  if (recording())
    fail("Vulkan token_stats: returns its result to the host, so it runs at once: submit() first");
  Buffer argmax(*ctx_, std::max<uint32_t>(rows, 1) * sizeof(uint32_t)),
      stats(*ctx_, std::max<uint32_t>(rows, 1) * 3 * sizeof(float));
  token_stats(logits, argmax, stats, rows, vocab);
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
  Op op(*this);
  dispatch(*rms_norm_, {&x, &w, &out}, &push, rows);
  op.done();
}

void Ops::silu_mul(const Buffer& gate, const Buffer& up, Buffer& out, uint32_t n) {
  if (n == 0) fail("Vulkan silu_mul: 0 values");
  need(gate, n, "silu_mul gate");
  need(up, n, "silu_mul up");
  need(out, n, "silu_mul out");
  Op op(*this);
  dispatch_flat(*silu_mul_, {&gate, &up, &out}, &n, n, "silu_mul");
  op.done();
}

void Ops::add(Buffer& x, const Buffer& y, uint32_t n) {
  if (n == 0) fail("Vulkan add: 0 values");
  need(x, n, "add x");
  need(y, n, "add y");
  Op op(*this);
  dispatch_flat(*add_, {&x, &y}, &n, n, "add");
  op.done();
}

void Ops::add_bias(Buffer& x, const Buffer& bias, uint32_t rows, uint32_t cols) {
  if (rows == 0 || cols == 0) fail("Vulkan add_bias: ", rows, " rows of ", cols);
  need(x, uint64_t{rows} * cols, "add_bias x");
  need(bias, cols, "add_bias bias");
  const RowsPush push{rows, cols};
  Op op(*this);
  dispatch_flat(*add_bias_, {&x, &bias}, &push, uint64_t{rows} * cols, "add_bias");
  op.done();
}

void Ops::zero_rows(Buffer& x, const Buffer& keep, uint32_t rows, uint32_t cols) {
  if (rows == 0 || cols == 0) fail("Vulkan zero_rows: ", rows, " rows of ", cols);
  need(x, uint64_t{rows} * cols, "zero_rows x");
  need(keep, rows, "zero_rows keep");
  const RowsPush push{rows, cols};
  Op op(*this);
  dispatch_flat(*zero_rows_, {&x, &keep}, &push, uint64_t{rows} * cols, "zero_rows");
  op.done();
}

void Ops::gather_rows(const Buffer& src, const Buffer& index, Buffer& dst, uint32_t count, uint32_t cols) {
  if (count == 0 || cols == 0) fail("Vulkan gather_rows: ", count, " rows of ", cols);
  need(index, count, "gather_rows index");
  need(dst, uint64_t{count} * cols, "gather_rows dst");
  const uint64_t src_rows = src.bytes() / (uint64_t{cols} * 4);
  if (src_rows == 0) fail("Vulkan gather_rows: src of ", src.bytes(), " bytes holds no row of ", cols);
  const IndexedRowsPush push{count, cols, static_cast<uint32_t>(std::min<uint64_t>(src_rows, UINT32_MAX))};
  Op op(*this);
  dispatch_flat(*gather_rows_, {&src, &index, &dst}, &push, uint64_t{count} * cols, "gather_rows");
  op.done();
}

void Ops::scatter_add_weighted(Buffer& dst, const Buffer& src, const Buffer& index, const Buffer& weight,
                               uint32_t count, uint32_t cols) {
  if (count == 0 || cols == 0) fail("Vulkan scatter_add_weighted: ", count, " rows of ", cols);
  need(src, uint64_t{count} * cols, "scatter_add_weighted src");
  need(index, count, "scatter_add_weighted index");
  need(weight, count, "scatter_add_weighted weight");
  const uint64_t dst_rows = dst.bytes() / (uint64_t{cols} * 4);
  if (dst_rows == 0)
    fail("Vulkan scatter_add_weighted: dst of ", dst.bytes(), " bytes holds no row of ", cols);
  const IndexedRowsPush push{count, cols, static_cast<uint32_t>(std::min<uint64_t>(dst_rows, UINT32_MAX))};
  Op op(*this);
  dispatch_flat(*scatter_add_weighted_, {&dst, &src, &index, &weight}, &push, uint64_t{count} * cols,
                "scatter_add_weighted");
  op.done();
}

// ---- RoPE and attention ----

void rope_tables(const std::vector<int64_t>& positions, double theta, uint32_t rotary_dim,
                 std::vector<float>& cos, std::vector<float>& sin) {
  if (rotary_dim < 2 || rotary_dim % 2 != 0) fail("Vulkan rope_tables: rotary_dim ", rotary_dim);
  const uint32_t half = rotary_dim / 2;
  cos.resize(positions.size() * half);
  sin.resize(cos.size());
  for (size_t r = 0; r < positions.size(); ++r)
    for (uint32_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(positions[r]) / std::pow(theta, 2.0 * j / rotary_dim);
      cos[r * half + j] = static_cast<float>(std::cos(angle));
      sin[r * half + j] = static_cast<float>(std::sin(angle));
    }
}

void Ops::rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim,
                    const std::vector<int64_t>& positions, double theta, uint32_t rotary_dim) {
  const uint32_t rot = rotary_dim > 0 ? rotary_dim : head_dim;
  if (rows == 0 || heads == 0 || rot < 2 || rot % 2 != 0 || rot > head_dim)
    fail("Vulkan rope_neox: ", rows, " rows, ", heads, " heads of ", head_dim, ", rotary_dim ", rot);
  if (positions.size() != rows)
    fail("Vulkan rope_neox: ", positions.size(), " positions for ", rows, " rows");
  std::vector<float> cs, sn;
  rope_tables(positions, theta, rot, cs, sn);
  Op op(*this);
  Buffer& bc = temporary(cs.size() * sizeof(float));
  Buffer& bs = temporary(sn.size() * sizeof(float));
  bc.upload(std::span<const float>(cs));
  bs.upload(std::span<const float>(sn));
  rope_neox(x, rows, heads, head_dim, rot / 2, bc, bs);
  op.done();
}

void Ops::rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim, uint32_t half_rot,
                    const Buffer& cos, const Buffer& sin) {
  if (rows == 0 || heads == 0 || half_rot == 0 || 2 * uint64_t{half_rot} > head_dim)
    fail("Vulkan rope_neox: ", rows, " rows, ", heads, " heads of ", head_dim, ", half_rot ", half_rot);
  need(x, uint64_t{rows} * heads * head_dim, "rope_neox x");
  need(cos, uint64_t{rows} * half_rot, "rope_neox cos");
  need(sin, uint64_t{rows} * half_rot, "rope_neox sin");
  const RopePush push{rows, heads, head_dim, half_rot};
  Op op(*this);
  dispatch(*rope_neox_, {&x, &cos, &sin}, &push, groups(rows * heads * half_rot, 64));
  op.done();
}

void Ops::attention(const Buffer& q, const Buffer& k, const Buffer& v, const std::vector<uint8_t>& key_valid,
                    Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads,
                    uint32_t kv_heads, uint32_t head_dim, uint32_t block, uint32_t q_offset) {
  if (!key_valid.empty() && key_valid.size() != size_t{batch} * kv_len)
    fail("Vulkan attention: key_valid has ", key_valid.size(), " entries for ", batch, " x ", kv_len,
         " keys");
  if (batch == 0 || kv_len == 0 ||
      heads == 0)  // the full check is the overload's: here only what sizes buffers
    fail("Vulkan attention: batch ", batch, ", kv_len ", kv_len, ", heads ", heads);
  std::vector<uint32_t> valid(size_t{batch} * kv_len, 1u);
  for (size_t i = 0; i < key_valid.size(); ++i) valid[i] = key_valid[i] ? 1u : 0u;
  Op op(*this);
  Buffer& bvalid = temporary(valid.size() * sizeof(uint32_t));
  bvalid.upload(std::span<const uint32_t>(valid));
  Buffer& scratch = temporary(std::max<size_t>(attention_scratch_bytes(batch, q_len, kv_len, heads), 4));
  attention(q, k, v, bvalid, scratch, out, batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset);
  op.done();
}

void Ops::attention(const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& valid, Buffer& scratch,
                    Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads,
                    uint32_t kv_heads, uint32_t head_dim, uint32_t block, uint32_t q_offset) {
  if (batch == 0 || q_len == 0 || kv_len == 0 || heads == 0 || kv_heads == 0 || head_dim == 0 ||
      heads % kv_heads != 0)
    fail("Vulkan attention: batch ", batch, ", q_len ", q_len, ", kv_len ", kv_len, ", heads ", heads,
         " over ", kv_heads, " kv heads of ", head_dim);
  need(q, uint64_t{batch} * q_len * heads * head_dim, "attention q");
  need(k, uint64_t{batch} * kv_len * kv_heads * head_dim, "attention k");
  need(v, uint64_t{batch} * kv_len * kv_heads * head_dim, "attention v");
  need(valid, uint64_t{batch} * kv_len, "attention valid");
  need(scratch, uint64_t{batch} * heads * q_len * kv_len, "attention scratch");
  need(out, uint64_t{batch} * q_len * heads * head_dim, "attention out");
  const AttentionPush push{batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset};
  Op op(*this);
  dispatch(*attention_, {&q, &k, &v, &valid, &scratch, &out}, &push, q_len, heads, batch);
  op.done();
}

}  // namespace dllm::vk
