// The seam between the one transformer forward (model/transformer.cpp) and the devices that run it. The
// forward says what happens (norm, project, rotate, attend, route experts, head) in these ops, once; a
// backend says how on its device: the CPU backend calls the kernels in src/kernels on host memory, the Vulkan
// backend records compute shaders into one command buffer per forward (src/backend/vulkan). Weights stay the
// loaded MatMul objects and vectors; a device backend keeps its own copy of each, made once (hold), found by
// the object's address.
//
// Kept small on purpose, as ggml's and CTranslate2's op sets are: activations are f32 Tensor handles, each op
// a virtual call on whole tensors, and the little state that is fixed for a forward (positions, masks) given
// once in begin() instead of to every layer's ops.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "cache/kv_cache.h"
#include "dllm/dllm.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace dllm {

const char* backend_name(BackendKind kind);  // "cpu", "vulkan"

// Rows of q [batch * q_len, heads * head_dim] attend to k / v [batch * kv_len, kv_heads * head_dim]
// (ref::attention's contract): bidirectional, or block-causal with `block` > 0 and the queries at key index
// q_offset + i.
struct AttentionShape {
  int64_t batch = 1, q_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0, block = 0, q_offset = 0;
};

// One routed expert of a mixture-of-experts layer: the rows of h sent to it and their routing weights.
struct ExpertRun {
  const MatMul *gate = nullptr, *up = nullptr, *down = nullptr;  // (width, d), (width, d), (d, width)
  std::vector<int64_t> rows;                                     // ascending
  std::vector<float> weights;                                    // one per row
};

// What stays fixed through one forward.
struct ForwardSetup {
  std::span<const int64_t> positions;  // RoPE position of each activation row
  const RopeTable* rope = nullptr;     // cos/sin per position (its head_dim values of each head rotate)
  // [batch * kv_len]: 0 hides a key from every query (padding); empty: every key visible.
  std::span<const uint8_t> key_valid;
  // [rows]: 0 marks a padding row, whose attention output zero_invalid_rows clears; empty: none.
  std::span<const uint8_t> query_valid;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual std::string describe() const = 0;  // one line for the load message: the device and what it runs

  // A device backend's own copy of a weight, made once at load (the CPU multiplies the loaded one): the
  // matrices and the norm / bias vectors the forward will name.
  // First the bytes the device copies will take (bytes_to_hold of each matrix, plus the vectors), to fail
  // before anything is copied when they cannot fit (reserve); then the copies.
  virtual size_t bytes_to_hold(const MatMul& /*w*/) const { return 0; }
  virtual void reserve(size_t /*bytes*/) {}
  virtual void hold(const MatMul& /*w*/) {}
  virtual void hold(std::span<const float> /*v*/) {}
  virtual size_t held_bytes() const { return 0; }
  // Host <-> device copies since load, for `dllm bench` (a device backend's; the CPU's are zero).
  struct Traffic {
    double uploaded = 0, downloaded = 0;  // bytes
    int64_t submits = 0;                  // command buffers run
  };
  virtual Traffic traffic() const { return {}; }

  // Activations by role, reused across forwards (grown when a forward needs more).
  enum class Slot {
    kX,
    kH,
    kQ,
    kK,
    kV,
    kAtt,
    kGate,
    kUp,
    kRows,
    kNormed,
    kLogits,
    kRouter,
    kExperts,
    kCount
  };
  virtual Tensor activation(Slot slot, int64_t rows, int64_t cols) = 0;
  // The tensor's host address where it has one (the CPU backend), else null.
  virtual float* host(const Tensor& /*t*/) const { return nullptr; }

  virtual void begin(const ForwardSetup& setup) = 0;
  virtual void finish() = 0;  // the forward's work is done (a device: run and waited for)
  virtual void abandon() {}   // a forward that failed midway: drop what it started
  virtual void write(const Tensor& t, const float* values) = 0;  // all of t from the host
  // rows [first, first + count) of t to the host, after every op before it.
  virtual void read(const Tensor& t, int64_t first, int64_t count, float* out) = 0;
  // LogitStats of rows [0, rows) of the logits t [rows, vocab], after every op before it: reduced where the
  // logits are, so that a device sends back O(rows) numbers instead of the logits.
  virtual void logit_stats(const Tensor& t, int64_t rows, LogitStats* out) = 0;

  // out[r] = w ⊙ x[r] / sqrt(mean(x[r]²) + eps) per row (out may be x).
  virtual void rms_norm(const Tensor& x, std::span<const float> w, float eps, const Tensor& out) = 0;
  // y (+)= x · wᵀ, and ys[i] = x · ws[i]ᵀ for matrices of one input (q, k, v; gate, up).
  virtual void matmul(const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate) = 0;
  virtual void matmul_group(std::span<const MatMul* const> ws, const Tensor& x,
                            std::span<const Tensor> ys) = 0;
  virtual void add_bias(const Tensor& x, std::span<const float> bias) = 0;  // every row += bias
  // NeoX RoPE in place on x [rows, heads * head_dim] at the setup's positions.
  virtual void rope(const Tensor& x, int64_t heads) = 0;
  // Attention with the setup's key mask (when it has one) and the shape's block rule.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                         const Tensor& out) = 0;
  virtual void zero_invalid_rows(const Tensor& x) = 0;  // the setup's query_valid = 0 rows to zeros
  virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;  // silu(gate) ⊙ up
  virtual void add(const Tensor& x, const Tensor& y) = 0;                              // x += y
  virtual void copy_rows(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row,
                         int64_t count) = 0;
  // out [rows of h, d] = Σ over the runs of weight · down(silu(gate(h)) ⊙ up(h)) for each run's rows, added
  // in the runs' order (the reference's order of the sums).
  virtual void experts(std::span<const ExpertRun> runs, const Tensor& h, const Tensor& out) = 0;

  // Keys / values of each layer in a KvCache: [batch][len][kv_dim] rows (batch 1 for the block cache, whose
  // len grows). The cache's seq_len, valid and batch stay host numbers that the forward keeps.
  virtual void kv_reset(KvCache& cache, int64_t layers, int64_t batch, int64_t len, int64_t kv_dim) = 0;
  // Rows of k / v [batch * seq, kv_dim] into the layer's cache at rows b * cache.seq_len + at + i (the block
  // cache, batch 1, grows to at + seq rows).
  virtual void kv_write(KvCache& cache, int64_t layer, const Tensor& k, const Tensor& v, int64_t batch,
                        int64_t seq, int64_t at) = 0;
  virtual Tensor kv_keys(KvCache& cache, int64_t layer, int64_t rows) = 0;
  virtual Tensor kv_values(KvCache& cache, int64_t layer, int64_t rows) = 0;
  virtual void kv_truncate(KvCache& cache, int64_t layer, int64_t rows) = 0;  // the block cache keeps `rows`
};

// The CPU backend, or the Vulkan backend on device `device` (a clear error where the build has no Vulkan or
// the machine no such device).
std::unique_ptr<Backend> make_backend(BackendKind kind, int device = 0);
// Whether this build includes the Vulkan backend.
bool vulkan_built();

}  // namespace dllm
