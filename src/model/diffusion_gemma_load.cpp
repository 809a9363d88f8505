// DiffusionGemma's weights from a Hugging Face directory or from a GGUF file that `dllm convert` wrote: one
// build of the weights (build_weights) over a source that answers by the Hugging Face name, so the two paths
// take the same tensors with the same shapes. The vision tower is not run and not loaded.
#include "core/error.h"
#include "model/diffusion_gemma.h"
#include "model/diffusion_gemma_tensors.h"
#include "model/gguf_tensor_taker.h"
#include "model/precision.h"

namespace dllm {

namespace {

// Where the weights come from, by Hugging Face name; shapes in PyTorch order.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::vector<float> vector(const std::string& name, int64_t n) = 0;
  virtual MatMul matrix(const std::string& name, int64_t out, int64_t in, ComputeType ct) = 0;
  // Rows [first, first + count) of a stacked [stack, rows, in] tensor seen as stack * rows rows of `in`.
  virtual MatMul rows(const std::string& name, const std::vector<int64_t>& shape, int64_t first,
                      int64_t count, ComputeType ct) = 0;
  // The embedding table into w (and the tied head).
  virtual void embedding(int64_t vocab, int64_t d, ComputeType ct, DiffusionGemmaWeights& w) = 0;
  // The stored type name of a tensor when present ("F32", "BF16", "Q4_K"), for the precision.
  virtual std::optional<std::string> stored_type(const std::string& name) const = 0;
  virtual int64_t rows_of(const std::string& name, int64_t fallback) const = 0;  // shape[0] when present
  virtual void check_all_used() = 0;
  // A layer's experts once taken (GGUF blocks: set up to be packed on first use, as LoadOptions::experts
  // says).
  virtual void finish_experts(MoeWeights& /*experts*/) {}
  virtual std::map<std::string, std::string> precision_by_type() const = 0;
};

class SafetensorsSource final : public Source {
 public:
  SafetensorsSource(Checkpoint& ckpt, WeightLayout layout) : ckpt_(ckpt), layout_(layout) {}
  std::vector<float> vector(const std::string& name, int64_t n) override {
    const TensorView& t = ckpt_.take(name, {n});
    std::vector<float> out(static_cast<size_t>(n));
    convert_to_f32(t.dtype, t.data, out.data(), out.size());
    return out;
  }
  MatMul matrix(const std::string& name, int64_t out, int64_t in, ComputeType ct) override {
    const TensorView& t = ckpt_.take(name, {out, in});
    return linear(t.data, t.dtype, out, in, ct);
  }
  MatMul rows(const std::string& name, const std::vector<int64_t>& shape, int64_t first, int64_t count,
              ComputeType ct) override {
    const TensorView& t = ckpt_.take(name, shape);
    const int64_t in = shape.back();
    return linear(t.data + static_cast<size_t>(first * in) * dtype_size(t.dtype), t.dtype, count, in, ct);
  }
  void embedding(int64_t vocab, int64_t d, ComputeType ct, DiffusionGemmaWeights& w) override {
    const TensorView& t = ckpt_.take("model.decoder.embed_tokens.weight", {vocab, d});
    w.embedding = t.data;
    w.embedding_dtype = t.dtype;
    w.head = linear(t.data, t.dtype, vocab, d, ct);
  }
  std::optional<std::string> stored_type(const std::string& name) const override {
    const TensorView* t = ckpt_.find(name);
    if (!t) return std::nullopt;
    return std::string(dtype_name(t->dtype));
  }
  int64_t rows_of(const std::string& name, int64_t fallback) const override {
    const TensorView* t = ckpt_.find(name);
    return t && t->shape.size() == 2 ? t->shape[0] : fallback;
  }
  void check_all_used() override {
    // The image side (the vision tower and its projection) is not run: text in, text out.
    ckpt_.skip_prefixed("model.encoder.vision_tower.");
    ckpt_.skip_prefixed("model.encoder.embed_vision.");
    ckpt_.check_all_used();
  }
  std::map<std::string, std::string> precision_by_type() const override { return tally_.result(); }

 private:
  MatMul linear(const uint8_t* data, DType dtype, int64_t out, int64_t in, ComputeType ct) {
    MatMul m = layout_ == WeightLayout::kBlockedAtLoad ? Linear(data, dtype, out, in, ct)
                                                       : Linear::in_place(data, dtype, out, in, ct, nullptr);
    tally_.add(std::string(dtype_name(dtype)), m);
    return m;
  }
  Checkpoint& ckpt_;
  WeightLayout layout_;
  PrecisionTally tally_;
};

class GgufSource final : public Source {
 public:
  GgufSource(std::shared_ptr<GgufFile> file, const LoadOptions& o, int64_t layers)
      : file_(file),
        take_(file, o.weights, o.experts, o.layout, o.backend),
        names_(diffusion_gemma_gguf_names(layers)),
        dequantize_(o.weights == WeightFormat::kDequantize),
        pack_on_first_use_(o.weights == WeightFormat::kAuto && o.experts == ExpertPacking::kOnFirstUse) {
    take_.set_arch(kDiffusionGemmaArchitecture);
  }
  std::vector<float> vector(const std::string& name, int64_t n) override {
    return take_.vector(gguf(name), {n});
  }
  MatMul matrix(const std::string& name, int64_t out, int64_t in, ComputeType ct) override {
    return take_.linear(gguf(name), out, in, ct);
  }
  MatMul rows(const std::string& name, const std::vector<int64_t>& shape, int64_t first, int64_t count,
              ComputeType ct) override {
    const GgufTensor& t = take_.take(gguf(name), shape);
    return take_.rows(t, first, count, shape.back(), ct, /*allow_q8=*/true, /*expert=*/true);
  }
  void embedding(int64_t vocab, int64_t d, ComputeType ct, DiffusionGemmaWeights& w) override {
    const GgufTensor& t = take_.take("token_embd.weight", {vocab, d});
    if (auto dt = plain_dtype(t.type)) {
      w.embedding = t.data;
      w.embedding_dtype = *dt;
      w.head = take_.rows(t, 0, vocab, d, ct, /*allow_q8=*/false);
    } else if (dequantize_) {  // WeightFormat::kDequantize: one f32 copy for the table and the head
      w.embedding_owned = std::make_shared<std::vector<float>>(take_.f32(t));
      w.embedding = reinterpret_cast<const uint8_t*>(w.embedding_owned->data());
      w.embedding_dtype = DType::kF32;
      w.head = Linear(w.embedding_owned->data(), DType::kF32, vocab, d, ct);
    } else {
      w.embedding_blocks = take_.rows(t, 0, vocab, d, ct);  // rows dequantised on lookup
      w.head = w.embedding_blocks->share();
    }
  }
  std::optional<std::string> stored_type(const std::string& name) const override {
    auto it = names_.find(name);
    const GgufTensor* t = it == names_.end() ? nullptr : file_->find_tensor(it->second);
    if (!t) return std::nullopt;
    return std::string(ggml_type_info(static_cast<uint32_t>(t->type))->name);
  }
  int64_t rows_of(const std::string& name, int64_t fallback) const override {
    auto it = names_.find(name);
    const GgufTensor* t = it == names_.end() ? nullptr : file_->find_tensor(it->second);
    return t && t->dims.size() == 2 ? t->dims[1] : fallback;
  }
  void check_all_used() override { take_.check_all_used(); }
  void finish_experts(MoeWeights& experts) override {
    if (pack_on_first_use_)
      pack_experts_on_first_use(experts, [file = file_](const void* p, size_t n) { file->release(p, n); });
  }
  std::map<std::string, std::string> precision_by_type() const override { return take_.precision_by_type(); }

 private:
  const std::string& gguf(const std::string& hf) const {
    auto it = names_.find(hf);
    if (it == names_.end()) fail(file_->path(), ": no GGUF name for tensor '", hf, "'");
    return it->second;
  }
  std::shared_ptr<GgufFile> file_;
  TensorTaker take_;
  std::map<std::string, std::string> names_;
  bool dequantize_;
  bool pack_on_first_use_;
};

std::shared_ptr<Model> build(DiffusionGemmaConfig c, Source& src, const LoadOptions& options,
                             std::shared_ptr<const void> storage) {
  if (options.backend != BackendKind::kCpu)
    fail(c.info.path, ": diffusion_gemma runs on the CPU backend only so far (--backend cpu)");
  ModelInfo& m = c.info;
  const std::string P = "model.decoder.";
  const int64_t d = m.d_model, heads = m.n_heads, experts = m.n_experts, fe = c.expert_ffn;

  std::vector<std::string> stored;
  for (int64_t i = 0; i < m.n_layers; ++i)
    if (auto t = src.stored_type(P + "layers." + std::to_string(i) + ".self_attn.q_proj.weight"))
      stored.push_back(*t);
  const ResolvedPrecision precision = resolve_precision(options.precision, stored);
  const ComputeType ct = precision.compute;
  m.precision = precision_of(ct);
  m.precision_reason = precision.reason;

  DiffusionGemmaWeights w;
  src.embedding(m.vocab_size, d, ct, w);
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string p = P + "layers." + std::to_string(i) + ".";
    DiffusionGemmaLayer& l = w.layers.emplace_back();
    l.sliding = c.layer_sliding[static_cast<size_t>(i)];
    const DiffusionGemmaConfig::Attention& a = l.sliding ? c.sliding : c.full;
    l.kv_heads = a.kv_heads;
    l.head_dim = a.head_dim;
    l.q = src.matrix(p + "self_attn.q_proj.weight", heads * a.head_dim, d, ct);
    l.k = src.matrix(p + "self_attn.k_proj.weight", a.kv_heads * a.head_dim, d, ct);
    if (l.sliding) l.v = src.matrix(p + "self_attn.v_proj.weight", a.kv_heads * a.head_dim, d, ct);
    l.o = src.matrix(p + "self_attn.o_proj.weight", d, heads * a.head_dim, ct);
    l.q_norm = src.vector(p + "self_attn.q_norm.weight", a.head_dim);
    l.k_norm = src.vector(p + "self_attn.k_norm.weight", a.head_dim);
    l.gate = src.matrix(p + "mlp.gate_proj.weight", m.ffn_hidden, d, ct);
    l.up = src.matrix(p + "mlp.up_proj.weight", m.ffn_hidden, d, ct);
    l.down = src.matrix(p + "mlp.down_proj.weight", d, m.ffn_hidden, ct);
    l.input_norm = src.vector(p + "input_layernorm.weight", d);
    l.post_attn_norm = src.vector(p + "post_attention_layernorm.weight", d);
    l.pre_ffn_norm = src.vector(p + "pre_feedforward_layernorm.weight", d);
    l.post_ffn_norm = src.vector(p + "post_feedforward_layernorm.weight", d);
    l.post_ffn_norm_1 = src.vector(p + "post_feedforward_layernorm_1.weight", d);
    l.post_ffn_norm_2 = src.vector(p + "post_feedforward_layernorm_2.weight", d);
    l.pre_ffn_norm_2 = src.vector(p + "pre_feedforward_layernorm_2.weight", d);
    // The router picks experts (discrete choices): f32 whatever the precision.
    l.router = src.matrix(p + "router.proj.weight", experts, d, ComputeType::kF32);
    l.router_scale = src.vector(p + "router.scale", d);
    l.per_expert_scale = src.vector(p + "router.per_expert_scale", experts);
    // experts.gate_up_proj [E, 2F, d]: expert e's gate rows then its up rows; down_proj [E, d, F].
    for (int64_t e = 0; e < experts; ++e) {
      l.experts.gate.push_back(
          src.rows(p + "experts.gate_up_proj", {experts, 2 * fe, d}, e * 2 * fe, fe, ct));
      l.experts.up.push_back(
          src.rows(p + "experts.gate_up_proj", {experts, 2 * fe, d}, e * 2 * fe + fe, fe, ct));
      l.experts.down.push_back(src.rows(p + "experts.down_proj", {experts, d, fe}, e * d, d, ct));
    }
    src.finish_experts(l.experts);
    l.scalar[1] = src.vector(p + "layer_scalar", 1)[0];
    l.scalar[0] =
        src.vector("model.encoder.language_model.layers." + std::to_string(i) + ".layer_scalar", 1)[0];
  }
  w.final_norm = src.vector(P + "norm.weight", d);
  w.sc_pre_norm = src.vector(P + "self_conditioning.pre_norm.weight", d);
  const int64_t sc_width = src.rows_of(P + "self_conditioning.gate_proj.weight", m.ffn_hidden);
  w.sc_gate = src.matrix(P + "self_conditioning.gate_proj.weight", sc_width, d, ct);
  w.sc_up = src.matrix(P + "self_conditioning.up_proj.weight", sc_width, d, ct);
  w.sc_down = src.matrix(P + "self_conditioning.down_proj.weight", d, sc_width, ct);
  src.check_all_used();
  m.precision_by_type = src.precision_by_type();
  int64_t params = m.vocab_size * d + 2 * sc_width * d + d * sc_width;
  for (const auto& l : w.layers) {
    for (const MatMul* mm : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.router})
      if (mm->out_features() > 0) params += mm->out_features() * mm->in_features();
    params += experts * 3 * fe * d;
  }
  m.n_params = params;
  return std::make_shared<DiffusionGemma>(std::move(c), std::move(storage), std::move(w), ct);
}

}  // namespace

std::shared_ptr<Model> load_diffusion_gemma(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options) {
  if (options.weights == WeightFormat::kQ8)
    fail(ckpt->dir(), ": --weights q8 needs a GGUF file (dllm convert --type q8_0)");
  DiffusionGemmaConfig c = parse_diffusion_gemma_config(*ckpt);
  std::shared_ptr<Checkpoint> storage(std::move(ckpt));
  SafetensorsSource src(*storage, options.layout);
  return build(std::move(c), src, options, storage);
}

std::shared_ptr<Model> load_diffusion_gemma_gguf(std::shared_ptr<GgufFile> file, const LoadOptions& options) {
  // The directory's own config.json and generation_config.json, kept by `dllm convert`: one parser for both.
  auto json_of = [&](const char* key, bool required) {
    const auto text = file->find_string(key);
    if (!text) {
      if (required)
        file->fail_key(key, "is missing (a DiffusionGemma GGUF written by `dllm convert` holds it)");
      return nlohmann::json::object();
    }
    try {
      return nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      file->fail_key(key, std::string("is not valid JSON: ") + e.what());
    }
  };
  const Checkpoint config(file->path(), json_of(kDiffusionGemmaConfigKey, true),
                          json_of(kDiffusionGemmaGenerationKey, false));
  DiffusionGemmaConfig c = parse_diffusion_gemma_config(config);
  c.info.path = file->path();
  GgufSource src(file, options, c.info.n_layers);
  return build(std::move(c), src, options, file);
}

}  // namespace dllm
