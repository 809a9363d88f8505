// The Vulkan ops, each checked against the CPU's scalar references (tests/vulkan): products of f32
// activations with f32, f16, bf16, Q8_0 and Q4_K weights, RMSNorm, SwiGLU's product, NeoX RoPE, attention
// (grouped-query heads, the padding and block-causal masks), the elementwise and row ops a forward strings
// them with (residual add, bias, row masks, gathers and weighted scatters of rows for the experts), buffer
// copies, and the per-position reductions a denoising step ranks positions by, computed where the logits are
// so that only O(positions) numbers come back to the host. Activations are f32 throughout.
//
// Recording: between begin() and submit() every op records into one command buffer (a whole forward: one
// submit, one wait); outside one, each op records into its own and runs it at once. Every buffer an op is
// given must stay alive until the op has run (the submit). Buffer::upload stays a synchronous host call:
// during a recording it may fill a buffer the recording does not use yet (the recorded ops then read the new
// values); uploading into a buffer that an op already recorded reads or writes would change what that op
// sees. Download after submit().
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/context.h"
#include "vulkan/kernel.h"

namespace dllm::vk {

// What token_stats gives per row of logits: see src/vulkan/shaders/token_stats.comp.
struct TokenStats {
  std::vector<uint32_t> argmax;    // [rows]
  std::vector<float> p_max;        // softmax probability of the argmax
  std::vector<float> margin;       // p_top1 - p_top2
  std::vector<float> neg_entropy;  // Σ p·log(p + 1e-10)
};

// RoPE's [rows, rotary_dim / 2] cos and sin tables at `positions` (one a row), angles in double as
// ref::rope_neox: what rope_neox's caller-provided tables hold. rotary_dim even, > 0.
void rope_tables(const std::vector<int64_t>& positions, double theta, uint32_t rotary_dim,
                 std::vector<float>& cos, std::vector<float>& sin);

// How the matmul_* ops compute, the same products either way (shaders/matmul_tile.glsl,
// shaders/matmul_registers.glsl):
// - kTiled: 16 x 16 tiles of y through shared memory, two barriers every 16 steps of K (GPUs);
// - kRegisters: a 32 x 8 tile of y in each invocation's registers, x and W read straight from the buffers, no
//   shared memory and no barrier (CPU devices: llvmpipe switches between all of a workgroup's subgroups at
//   every barrier, which held kTiled to 0.15 GFLOP/s on lavapipe). Needs subgroups of at least 8 invocations
//   with subgroupBroadcast in compute shaders.
enum class MatmulVariant { kTiled, kRegisters };
const char* variant_name(MatmulVariant v);  // "tiled", "registers"
// What Ops(ctx) runs: DLLM_VULKAN_MATMUL=tiled|registers where set (another value is an error naming the
// variable and the value), else kRegisters on a CPU device that can run it and kTiled otherwise.
MatmulVariant default_matmul_variant(const DeviceInfo& device);

class Ops {
 public:
  explicit Ops(Context& ctx);  // default_matmul_variant(ctx.info())
  // With the products' variant chosen by the caller (the tests run both); kRegisters on a device without what
  // it needs is an error saying what is missing.
  Ops(Context& ctx, MatmulVariant matmul);
  ~Ops();  // abandons an open recording
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;

  // Opens a recording (an error when one is open).
  void begin();
  // Submits the recording, waits for it, then frees its descriptor sets and temporary buffers (also when the
  // submit or wait fails).
  void submit();
  // Discards an open recording unrun (none open: nothing); error paths, and the destructor.
  void abandon();
  bool recording() const { return cb_ != VK_NULL_HANDLE; }
  MatmulVariant matmul_variant() const { return matmul_variant_; }
  // A device buffer that lives until the open recording is submitted or abandoned (an error with none open).
  Buffer& temporary(size_t bytes);
  // Descriptor pools the kernels hold together: they grow with the dispatches one recording holds.
  size_t descriptor_pools() const;

  // dst[dst_offset .. + bytes) = src[src_offset .. + bytes) (vkCmdCopyBuffer; ranges inside the buffers, not
  // overlapping when src is dst), ordered after the ops recorded before it and before those after it.
  void copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes);

  // y[m, n] (+)= x[m, k] · w[n, k]ᵀ, all f32 device buffers.
  void matmul_f32(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                  bool accumulate);
  // The same with w in f16 or bf16 as pack_half_rows lays it out ([n, (k + 1) / 2] uints), f32 accumulation.
  void matmul_f16(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                  bool accumulate);
  void matmul_bf16(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                   bool accumulate);
  // The same with w from Q8_0 blocks as pack_q8_0 lays it out: scales f32 [n, k / 32], quants [n, k / 4]
  // uints; k a multiple of 32.
  void matmul_q8_0(const Buffer& x, const Buffer& scales, const Buffer& quants, Buffer& y, uint32_t m,
                   uint32_t n, uint32_t k, bool accumulate);
  // The same with w from Q4_K blocks as pack_q4_k lays it out: scale_min f32 [n, k / 32, 2] (d1, m1 of each
  // sub-block of 32), quants [n, k / 8] uints; k a multiple of 256.
  void matmul_q4_k(const Buffer& x, const Buffer& scale_min, const Buffer& quants, Buffer& y, uint32_t m,
                   uint32_t n, uint32_t k, bool accumulate);

  // Per row of `logits` [rows, vocab]: argmax and the softmax statistics; downloads 16 bytes a row, so it
  // runs at once (an error while a recording is open).
  TokenStats token_stats(const Buffer& logits, uint32_t rows, uint32_t vocab);
  // The same into buffers of the caller's (argmax [rows] uint32, stats [rows, 3]: p_max, margin,
  // neg_entropy), recorded like the other ops.
  void token_stats(const Buffer& logits, Buffer& argmax, Buffer& stats, uint32_t rows, uint32_t vocab);
  // out[r, :] = w ⊙ x[r, :] / sqrt(mean(x[r, :]²) + eps).
  void rms_norm(const Buffer& x, const Buffer& w, Buffer& out, uint32_t rows, uint32_t dim, float eps);
  // out = silu(gate) ⊙ up over n values.
  void silu_mul(const Buffer& gate, const Buffer& up, Buffer& out, uint32_t n);
  // x += y over n values.
  void add(Buffer& x, const Buffer& y, uint32_t n);
  // x[r, c] += bias[c] over x[rows, cols].
  void add_bias(Buffer& x, const Buffer& bias, uint32_t rows, uint32_t cols);
  // x[r, :] = 0 where keep[r] == 0; keep: uint32 [rows].
  void zero_rows(Buffer& x, const Buffer& keep, uint32_t rows, uint32_t cols);
  // dst[i, :] = src[index[i], :] for i < count; index: uint32 [count]; an index past src's rows gives zeros.
  void gather_rows(const Buffer& src, const Buffer& index, Buffer& dst, uint32_t count, uint32_t cols);
  // dst[index[i], :] += weight[i] · src[i, :] for i < count; index uint32, weight f32, both [count]. The
  // indices of one call must be distinct (the rows are added in parallel); one past dst's rows is skipped.
  void scatter_add_weighted(Buffer& dst, const Buffer& src, const Buffer& index, const Buffer& weight,
                            uint32_t count, uint32_t cols);

  // NeoX RoPE in place on x[rows, heads, head_dim] at `positions` (one a row), the first rotary_dim values of
  // each head (0: all); angles in double on the host, as ref::rope_neox.
  void rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim,
                 const std::vector<int64_t>& positions, double theta, uint32_t rotary_dim = 0);
  // The same with the caller's tables (rope_tables): cos, sin f32 [rows, half_rot], half_rot = rotary_dim
  // / 2.
  void rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim, uint32_t half_rot,
                 const Buffer& cos, const Buffer& sin);
  // ref::attention's contract: q [batch, q_len, heads, head_dim], k / v [batch, kv_len, kv_heads, head_dim],
  // key_valid [batch, kv_len] (empty: all visible), block > 0: block-causal with queries at q_offset.
  void attention(const Buffer& q, const Buffer& k, const Buffer& v, const std::vector<uint8_t>& key_valid,
                 Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads,
                 uint32_t kv_heads, uint32_t head_dim, uint32_t block = 0, uint32_t q_offset = 0);
  // The same with the caller's device buffers: valid uint32 [batch, kv_len] (1 visible, 0 not) and the
  // scores' scratch, f32 [batch, heads, q_len, kv_len] (attention_scratch_bytes), which one recording may
  // share between its attentions (each is ordered after the last).
  void attention(const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& valid, Buffer& scratch,
                 Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads,
                 uint32_t kv_heads, uint32_t head_dim, uint32_t block = 0, uint32_t q_offset = 0);
  static size_t attention_scratch_bytes(uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads) {
    return size_t{batch} * heads * q_len * kv_len * sizeof(float);
  }

 private:
  class Op;
  // Records a dispatch into the open recording; the set is freed when it is submitted or abandoned.
  void dispatch(Kernel& kernel, std::initializer_list<const Buffer*> buffers, const void* push,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  // An elementwise kernel over n invocations of 256 (add.comp's indexing).
  void dispatch_flat(Kernel& kernel, std::initializer_list<const Buffer*> buffers, const void* push,
                     uint64_t n, const char* what);
  // A product's kernel, made on first use (lavapipe takes 0.1 s or more over a registers one) from the SPIR-V
  // of the variant this Ops runs.
  Kernel& product(std::unique_ptr<Kernel>& kernel, std::span<const uint32_t> tiled,
                  std::span<const uint32_t> registers, uint32_t buffers, const char* name);
  void matmul(Kernel& kernel, std::initializer_list<const Buffer*> buffers, uint32_t m, uint32_t n,
              uint32_t k, bool accumulate);
  void release();

  Context* ctx_;
  MatmulVariant matmul_variant_;
  // product(): null until used
  std::unique_ptr<Kernel> matmul_f32_, matmul_f16_, matmul_bf16_, matmul_q8_0_, matmul_q4_k_;
  std::unique_ptr<Kernel> token_stats_, rms_norm_, silu_mul_, add_, add_bias_, zero_rows_, gather_rows_,
      scatter_add_weighted_, rope_neox_, attention_;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;  // the open recording
  std::vector<std::pair<Kernel*, Kernel::Set>> sets_;
  std::vector<std::unique_ptr<Buffer>> temporaries_;
};

}  // namespace dllm::vk
