// GGUF models (llama.cpp's layout) mapped onto the shared Transformer: the same TransformerConfig and
// TransformerWeights as the Hugging Face loader builds, from llama.cpp's metadata keys and the GGUF names of
// the family's tensor table (model/family.h; docs/gguf.md lists the mapping). An output tensor that is absent
// means the head is tied to token_embd. Tensors the table stores transformed (LLaDA's q/k rows in llama.cpp's
// adjacent-pair RoPE order) are put back in HF order here. LLaDA2's fused attn_qkv is split into q / k / v
// and its stacked experts (ffn_*_exps, [experts, rows, in]) into one matrix per expert, each a row range of
// the tensor; the mixture-of-experts keys are llama.cpp's (bailingmoe2), the block length is
// diffusion.block_length. Weight matrices (LoadOptions::weights): kAuto repacks Q8_0 / Q4_0 / Q4_K matrices
// into 16-row panels (quant::LinearPacked; the mapped pages are released), multiplies Q6_K, experts and
// shapes that are not whole panels in place (quant::LinearGgml), holds other quantized types in 8 bits
// (quant::LinearQ8) and plain ones as Linear (TensorTaker::blocks says which); kDequantize dequantises
// everything once, here, into the Linear's packed weights; kQ8 puts every matrix in 8 bits. A quantized
// token_embd stays quantized as the embedding table too (one copy when the head is tied to it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "core/huge_pages.h"
#include "io/gguf.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_packed.h"
#include "kernels/quant/quant.h"
#include "model/diffusion_gemma.h"
#include "model/diffusion_gemma_tensors.h"
#include "model/family.h"
#include "model/gguf_tensor_taker.h"
#include "model/precision.h"

namespace dllm {

namespace {

int64_t positive(const GgufFile& f, const std::string& key) {
  const uint64_t v = f.get_uint(key);
  if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    f.fail_key(key, "= " + std::to_string(v) + " must be in [1, 2^31)");
  return static_cast<int64_t>(v);
}

// An optional count: `fallback` when absent, else in [0, 2^31).
int64_t count_or(const GgufFile& f, const std::string& key, int64_t fallback) {
  const auto v = f.find_uint(key);
  if (!v) return fallback;
  if (*v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    f.fail_key(key, "= " + std::to_string(*v) + " must be in [0, 2^31)");
  return static_cast<int64_t>(*v);
}

bool has_role(const Family& fam, TensorRole role) {
  for (const TensorSpec& spec : fam.tensors)
    if (spec.role == role) return true;
  return false;
}

// The mixture-of-experts keys (llama.cpp's, as its converter writes them for bailingmoe2) into config.moe,
// checked as the family's config parser checks config.json; the expert bias is there when its tensor is. Runs
// before any layer is built, so that the expert count is checked against the router tensor before it sizes
// anything.
void read_moe(const GgufFile& f, const std::string& a, const Family& fam, TransformerConfig& c) {
  TransformerConfig::Moe& moe = c.moe;
  const std::string experts_key = a + "expert_count";
  const uint64_t experts = f.find_uint(experts_key).value_or(0);
  if (!has_role(fam, TensorRole::kRouter)) {
    if (experts > 0)
      f.fail_key(experts_key, "= " + std::to_string(experts) + " is not supported (the " + fam.name +
                                  " architecture has no mixture-of-experts layers)");
    return;
  }
  const std::string router = find_spec(fam, TensorRole::kRouter).gguf;
  if (experts == 0) {
    for (int64_t i = 0; i < c.info.n_layers; ++i)
      if (f.find_tensor(tensor_name(router, i)))
        f.fail_key(experts_key, "is missing or 0, but tensor '" + tensor_name(router, i) +
                                    "' is a mixture-of-experts router");
    return;
  }
  moe.experts = positive(f, experts_key);
  moe.used = positive(f, a + "expert_used_count");
  moe.expert_ffn = positive(f, a + "expert_feed_forward_length");
  moe.shared = count_or(f, a + "expert_shared_count", 0);
  moe.first_dense_layers = count_or(f, a + "leading_dense_block_count", 0);
  moe.groups = f.has(a + "expert_group_count") ? positive(f, a + "expert_group_count") : 1;
  moe.groups_used =
      f.has(a + "expert_group_used_count") ? positive(f, a + "expert_group_used_count") : moe.groups;
  const uint64_t family_gating = fam.gguf_moe_gating == TransformerConfig::Moe::Gating::kSoftmax ? 1 : 2;
  switch (f.find_uint(a + "expert_gating_func").value_or(family_gating)) {  // llama_expert_gating_func_type
    case 1:
      moe.gating = TransformerConfig::Moe::Gating::kSoftmax;
      break;
    case 2:
      moe.gating = TransformerConfig::Moe::Gating::kSigmoid;
      break;
    default:
      f.fail_key(a + "expert_gating_func", "= " + std::to_string(f.get_uint(a + "expert_gating_func")) +
                                               " is not supported (1 = softmax, 2 = sigmoid)");
  }
  moe.normalize = f.find_bool(a + "expert_weights_norm").value_or(fam.gguf_moe_normalize);
  const double scale = f.find_float(a + "expert_weights_scale").value_or(1.0);
  if (!(scale > 0) || !(scale <= std::numeric_limits<float>::max()))
    f.fail_key(a + "expert_weights_scale", "must be > 0 and finite, got " + std::to_string(scale));
  moe.routed_scale = static_cast<float>(scale);
  const std::string E = std::to_string(moe.experts);
  if (moe.used > moe.experts)
    f.fail_key(a + "expert_used_count", "= " + std::to_string(moe.used) + " exceeds expert_count = " + E);
  if (moe.experts % moe.groups != 0)
    f.fail_key(a + "expert_group_count",
               "= " + std::to_string(moe.groups) + " must divide expert_count = " + E);
  if (moe.groups_used > moe.groups)
    f.fail_key(a + "expert_group_used_count",
               "= " + std::to_string(moe.groups_used) + " must be in [1, expert_group_count]");
  if (moe.groups > 1 && moe.experts / moe.groups < 2)
    f.fail_key(a + "expert_group_count",
               "leaves fewer than 2 experts per group (a group is scored by its best two)");
  if (moe.used > moe.groups_used * (moe.experts / moe.groups))
    f.fail_key(a + "expert_used_count", "exceeds the experts of the expert_group_used_count chosen groups");
  if (auto shared_ffn = f.find_uint(a + "expert_shared_feed_forward_length");
      shared_ffn && *shared_ffn != static_cast<uint64_t>(moe.shared * moe.expert_ffn))
    f.fail_key(a + "expert_shared_feed_forward_length",
               "= " + std::to_string(*shared_ffn) +
                   " is not expert_shared_count * expert_feed_forward_length = " +
                   std::to_string(moe.shared * moe.expert_ffn) + " (not supported)");
  // The first mixture-of-experts layer's router must have expert_count rows before anything is sized by it.
  if (moe.first_dense_layers < c.info.n_layers) {
    const std::string name = tensor_name(router, moe.first_dense_layers);
    const GgufTensor* t = f.find_tensor(name);
    if (!t) fail(f.path(), ": missing tensor '", name, "' (the router of a mixture-of-experts layer)");
    if (t->dims.size() != 2 || t->dims[1] != moe.experts)
      f.fail_key(experts_key, "= " + E + " but tensor '" + name + "' has ggml shape " + t->dims_string());
    if (has_role(fam, TensorRole::kExpertBias))
      moe.expert_bias = f.find_tensor(tensor_name(find_spec(fam, TensorRole::kExpertBias).gguf,
                                                  moe.first_dense_layers)) != nullptr;
  }
  c.info.n_experts = moe.experts;
  c.info.n_experts_used = moe.used;
}

// The embedding used in place from the mapping when it is a plain float type (the view keeps the file alive),
// else dequantised into an owned f32 copy.
void set_embedding(TransformerWeights& w, const std::shared_ptr<GgufFile>& file, const GgufTensor& t,
                   int64_t vocab, int64_t d) {
  auto view = std::make_shared<TensorView>();
  view->name = t.name;
  view->file = file->path();
  view->shape = {vocab, d};
  const auto dt = plain_dtype(t.type);
  if (dt && reinterpret_cast<uintptr_t>(t.data) % dtype_size(*dt) == 0) {
    view->dtype = *dt;
    view->data = t.data;
    view->nbytes = t.nbytes;
    w.owned_embedding = std::shared_ptr<TensorView>(view.get(), [view, file](TensorView*) {});
  } else {
    w.owned_embedding_data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(vocab * d) * 4);
    quant::dequantize(t.type, t.data, reinterpret_cast<float*>(w.owned_embedding_data->data()), vocab * d);
    view->dtype = DType::kF32;
    view->data = w.owned_embedding_data->data();
    view->nbytes = w.owned_embedding_data->size();
    w.owned_embedding = view;
  }
  w.embedding = w.owned_embedding.get();
}

}  // namespace

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options) {
  auto file = std::make_shared<GgufFile>(path);
  const GgufFile& f = *file;
  const std::string arch = f.get_string("general.architecture");
  // An encoder / decoder pair with its own sampler, not the shared Transformer (model/diffusion_gemma.h).
  if (arch == kDiffusionGemmaArchitecture) return load_diffusion_gemma_gguf(file, options);
  const Family* fam = find_family(arch);
  if (!fam)
    f.fail_key("general.architecture", "= '" + arch + "' is not supported (supported: " + family_names() +
                                           ", " + kDiffusionGemmaArchitecture + ")");
  const std::string a = arch + ".";

  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = path;
  m.architecture = arch;
  m.d_model = positive(f, a + "embedding_length");
  m.n_layers = positive(f, a + "block_count");
  m.n_heads = positive(f, a + "attention.head_count");
  m.n_kv_heads =
      f.has(a + "attention.head_count_kv") ? positive(f, a + "attention.head_count_kv") : m.n_heads;
  if (m.n_heads % m.n_kv_heads != 0)
    f.fail_key(a + "attention.head_count_kv", "= " + std::to_string(m.n_kv_heads) +
                                                  " must divide head_count = " + std::to_string(m.n_heads));
  if (f.has(a + "attention.key_length")) {
    m.head_dim = positive(f, a + "attention.key_length");
    if (f.has(a + "attention.value_length") && positive(f, a + "attention.value_length") != m.head_dim)
      f.fail_key(a + "attention.value_length", "differs from key_length (not supported)");
  } else {
    if (m.d_model % m.n_heads != 0)
      f.fail_key(
          a + "attention.head_count",
          "= " + std::to_string(m.n_heads) + " must divide embedding_length = " + std::to_string(m.d_model));
    m.head_dim = m.d_model / m.n_heads;
  }
  if (m.head_dim % 2 != 0)
    f.fail_key(a + "attention.head_count", "gives an odd head dimension, which RoPE cannot rotate");
  if (auto rot = f.find_uint(a + "rope.dimension_count"); rot && *rot != static_cast<uint64_t>(m.head_dim)) {
    // Partial RoPE (LLaDA2: the first rope.dimension_count values of each head); not with the adjacent-pair
    // row order of LLaDA's q/k, which assumes whole heads.
    bool pair_rows = false;
    for (const TensorSpec& spec : fam->tensors)
      pair_rows |= spec.gguf_transform == GgufTransform::kRopePairRows;
    if (pair_rows)
      f.fail_key(a + "rope.dimension_count", "= " + std::to_string(*rot) + " is not the head dimension " +
                                                 std::to_string(m.head_dim) +
                                                 " (partial RoPE is not supported)");
    if (*rot == 0 || *rot > static_cast<uint64_t>(m.head_dim) || *rot % 2 != 0)
      f.fail_key(a + "rope.dimension_count", "= " + std::to_string(*rot) +
                                                 " must be even and in [2, the head dimension " +
                                                 std::to_string(m.head_dim) + "]");
    c.rotary_dim = static_cast<int64_t>(*rot);
  }
  m.autoregressive = fam->autoregressive;
  if (auto causal = f.find_bool(a + "attention.causal"); causal && *causal != fam->autoregressive)
    f.fail_key(a + "attention.causal",
               fam->autoregressive ? "= false is not supported (" + arch + " models attend causally)"
                                   : "= true is not supported (diffusion models attend bidirectionally)");
  m.ffn_hidden = positive(f, a + "feed_forward_length");
  m.max_seq_len = f.has(a + "context_length") ? positive(f, a + "context_length") : 4096;
  const double theta = f.find_float(a + "rope.freq_base").value_or(10000.0);
  const double eps = f.find_float(a + "attention.layer_norm_rms_epsilon").value_or(fam->gguf_rms_eps);
  if (!(theta > 0) || !(theta <= std::numeric_limits<float>::max()))
    f.fail_key(a + "rope.freq_base", "must be > 0 and finite, got " + std::to_string(theta));
  if (!(eps > 0) || !(eps <= 1))
    f.fail_key(a + "attention.layer_norm_rms_epsilon", "must be in (0, 1], got " + std::to_string(eps));
  c.rope_theta = static_cast<float>(theta);
  c.rms_eps = static_cast<float>(eps);
  for (const TensorSpec& spec : fam->tensors) c.qkv_bias |= spec.role == TensorRole::kQBias;
  // Per-head q/k RMSNorm where the family has it and the file carries it (check_all_used catches a k without
  // q).
  if (has_role(*fam, TensorRole::kQNorm))
    c.qk_norm = f.find_tensor(tensor_name(find_spec(*fam, TensorRole::kQNorm).gguf, 0)) != nullptr;
  read_moe(f, a, *fam, c);
  // Block diffusion: the block length (no llama.cpp key; named beside diffusion.shift_logits).
  if (f.has("diffusion.block_length")) {
    if (fam->gguf_block_size == 0)
      f.fail_key("diffusion.block_length",
                 "is not supported (" + arch + " is not a block-diffusion architecture)");
    m.block_size = positive(f, "diffusion.block_length");
  } else {
    m.block_size = fam->gguf_block_size;
  }

  const std::string emb_name = find_spec(*fam, TensorRole::kEmbedding).gguf;
  const std::string head_name = find_spec(*fam, TensorRole::kHead).gguf;
  const GgufTensor* emb = f.find_tensor(emb_name);
  if (!emb) fail(path, ": missing tensor '", emb_name, "'");
  if (emb->dims.size() != 2 || emb->dims[0] != m.d_model)
    fail(path, ": tensor '", emb_name, "' has ggml shape ", emb->dims_string(), " but embedding_length is ",
         m.d_model);
  m.vocab_size = emb->dims[1];
  if (auto v = f.find_uint(a + "vocab_size"); v && *v > static_cast<uint64_t>(m.vocab_size))
    f.fail_key(a + "vocab_size", "= " + std::to_string(*v) + " is larger than token_embd's " +
                                     std::to_string(m.vocab_size) + " rows");

  // Special ids: tokenizer.ggml.*; the mask id is what a diffusion model cannot run without.
  const auto tok = read_gguf_tokenizer(f);
  auto id = [&](const char* key, int64_t fallback) -> int32_t {
    const std::string k = std::string("tokenizer.ggml.") + key;
    if (!f.has(k)) return static_cast<int32_t>(fallback);
    const uint64_t v = f.get_uint(k);
    if (v >= static_cast<uint64_t>(m.vocab_size))
      f.fail_key(k, "= " + std::to_string(v) + " is outside the vocabulary [0, " +
                        std::to_string(m.vocab_size) + ")");
    return static_cast<int32_t>(v);
  };
  if (!f.has("tokenizer.ggml.mask_token_id") && !fam->default_mask_id && !fam->autoregressive)
    f.fail_key("tokenizer.ggml.mask_token_id", "is missing (a diffusion model needs its [MASK] id)");
  m.mask_id = fam->autoregressive ? -1 : id("mask_token_id", fam->default_mask_id.value_or(-1));
  if (m.mask_id >= m.vocab_size && fam->mask_id_may_be_absent && !f.has("tokenizer.ggml.mask_token_id"))
    m.mask_id = -1;
  if (m.mask_id >= m.vocab_size)
    f.fail_key("tokenizer.ggml.mask_token_id", "is missing and " + arch + "'s default " +
                                                   std::to_string(m.mask_id) + " is outside the vocabulary");
  m.eos_id = id("eos_token_id", -1);
  m.pad_id = id("padding_token_id", m.eos_id);
  m.bos_id = id("bos_token_id", -1);
  m.eot_id = id("eot_token_id", -1);
  if (m.eot_id < 0 && tok)
    for (size_t i = 0; i < tok->tokens.size() && static_cast<int64_t>(i) < m.vocab_size; ++i)
      if (tok->tokens[i] == fam->eot_text) m.eot_id = static_cast<int32_t>(i);
  // End of generation: EOS, EOT and the vocabulary entries llama.cpp also treats as such.
  auto add_eog = [&](int64_t v) {
    if (v >= 0 && v < m.vocab_size && std::find(m.eog_ids.begin(), m.eog_ids.end(), v) == m.eog_ids.end())
      m.eog_ids.push_back(static_cast<int32_t>(v));
  };
  add_eog(m.eos_id);
  add_eog(m.eot_id);
  if (tok)
    for (size_t i = 0; i < tok->tokens.size() && static_cast<int64_t>(i) < m.vocab_size; ++i)
      for (const auto& text : fam->eog_texts)
        if (tok->tokens[i] == text) add_eog(static_cast<int64_t>(i));
  m.shift_logits = f.find_bool("diffusion.shift_logits").value_or(fam->shift_logits);
  c.tied_head = !f.find_tensor(head_name);  // llama.cpp ties the head to token_embd when output is absent

  // The precision from the stored types of the weight matrices that stay plain (quantized ones stay 8-bit).
  std::vector<std::string> stored;
  for (const auto& t : f.tensors())
    if (t.dims.size() >= 2 && t.name != emb_name)
      stored.emplace_back(ggml_type_info(static_cast<uint32_t>(t.type))->name);
  const ResolvedPrecision precision = resolve_precision(options.precision, stored);
  const ComputeType ct = precision.compute;
  m.precision = precision_of(ct);
  m.precision_reason = precision.reason;

  TensorTaker take(file, options.weights, options.experts, options.layout, options.backend);
  take.set_arch(arch);
  TransformerWeights w;
  const int64_t d = m.d_model;
  const GgufTensor& emb_t = take.take(emb_name, {m.vocab_size, d});
  if (options.weights == WeightFormat::kAuto && quant::LinearPacked::can_pack(emb_t.type, m.vocab_size, d))
    w.embedding_blocks = take.rows(emb_t, 0, m.vocab_size, d, ct);  // packed: lookups dequantise a row
  else if (take.want_q8(emb_t.type, d))
    w.embedding_blocks = MatMul(take.q8(emb_t, m.vocab_size, d));
  else
    set_embedding(w, file, emb_t, m.vocab_size, d);
  for (int64_t i = 0; i < m.n_layers; ++i) {
    LayerWeights& L = w.layers.emplace_back(make_layer(c, i));
    for (const TensorSpec& spec : fam->tensors) {
      if (!is_per_layer(spec.role) || !tensor_present(spec, c, i)) continue;
      const std::string name = tensor_name(spec.gguf, i);
      const auto shape = tensor_shape(spec.role, c);
      if (spec.role == TensorRole::kQKV) {
        // Fused rows q | k | v (attn_qkv, stored as is): three matrices over row ranges of the one tensor.
        const GgufTensor& t = take.take(name, shape);
        const auto ranges = split_qkv_rows(c);
        MatMul* parts[3] = {&L.q, &L.k, &L.v};
        for (int p = 0; p < 3; ++p) *parts[p] = take.rows(t, ranges[p].first, ranges[p].count, shape[1], ct);
      } else if (std::vector<MatMul>* experts = layer_experts(L, spec.role)) {
        // One stacked tensor per layer, ggml [in, out, experts]: expert e is rows [e*out, (e+1)*out).
        const GgufTensor& t = take.take(name, {c.moe.experts, shape[0], shape[1]});
        for (int64_t e = 0; e < c.moe.experts; ++e)
          (*experts)[e] = take.rows(t, e * shape[0], shape[0], shape[1], ct, true, /*expert=*/true);
      } else if (spec.role == TensorRole::kRouter) {
        // The router runs in f32 and never in 8 bits (LLaDA2MoeGate casts to float32; the choice is
        // discrete).
        L.moe->router = take.rows(take.take(name, shape), 0, shape[0], shape[1], ComputeType::kF32, false);
      } else if (MatMul* mat = layer_matrix(L, spec.role)) {
        *mat = take.linear(name, shape[0], shape[1], ct, rope_pair_heads(spec, c));
      } else {
        *layer_vector(L, spec.role) = take.vector(name, shape);
      }
    }
  }
  if (options.weights == WeightFormat::kAuto && options.experts == ExpertPacking::kOnFirstUse)
    for (LayerWeights& L : w.layers)
      if (L.moe) pack_experts_on_first_use(*L.moe, [file](const void* p, size_t n) { file->release(p, n); });
  // Llama 3.1's rope_scaling as llama.cpp's converter stores it: pair j's frequency divided by rope_freqs[j].
  if (take.has("rope_freqs.weight")) {
    c.rope_freq_factors =
        take.vector("rope_freqs.weight", {(c.rotary_dim > 0 ? c.rotary_dim : m.head_dim) / 2});
    for (float v : c.rope_freq_factors)
      if (!(v > 0) || !std::isfinite(v))
        fail(path, ": tensor 'rope_freqs.weight' holds ", v, " (frequency factors must be > 0 and finite)");
  }
  w.final_norm = take.vector(find_spec(*fam, TensorRole::kOutputNorm).gguf, {d});
  if (c.tied_head && w.embedding_blocks) {
    w.head = w.embedding_blocks->share();  // one copy for the table and the head
    take.tally(emb_t, w.head);
  } else {
    w.head = take.linear(c.tied_head ? emb_name : head_name, m.vocab_size, d, ct);
  }
  take.check_all_used();
  m.precision_by_type = take.precision_by_type();

  m.n_params = count_params(*fam, c);
  auto model = std::make_shared<Transformer>(std::move(c), nullptr, std::move(w));
  if (options.backend != BackendKind::kCpu) {
    model->set_backend(make_backend(options.backend, options.device));
  } else if (options.layout == WeightLayout::kMappedThenBackground) {
    model->prepare_weights_in_background();
  }
  return model;
}

}  // namespace dllm
