// Hugging Face checkpoint directories -> the shared Transformer, driven by the family's description
// (model/family.h): its config parser, then its tensor table. Matrices are used in place from the mapped
// safetensors (packed once by Linear), vectors converted to f32.
#include <omp.h>

#include "backend/logit_stats.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/diffusion_gemma.h"
#include "model/family.h"
#include "model/precision.h"

namespace dllm {

namespace {

std::vector<float> load_vector(Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = ckpt.take(name, shape);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, out.data(), out.size());
  return out;
}

// A matrix from the mapped checkpoint: in place unless the layout says to reorder it at load. No owner is
// needed: the Transformer holds the checkpoint and destroys its weights first.
MatMul make_linear(const uint8_t* data, DType dtype, int64_t out, int64_t in, ComputeType compute,
                   WeightLayout layout, PrecisionTally& tally) {
  MatMul m = layout == WeightLayout::kBlockedAtLoad
                 ? Linear(data, dtype, out, in, compute)
                 : Linear::in_place(data, dtype, out, in, compute, nullptr);
  tally.add(std::string(dtype_name(dtype)), m);
  return m;
}

MatMul load_linear(Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape,
                   ComputeType compute, WeightLayout layout, PrecisionTally& tally) {
  const TensorView& t = ckpt.take(name, shape);
  return make_linear(t.data, t.dtype, shape[0], shape[1], compute, layout, tally);
}

}  // namespace

std::shared_ptr<Model> load_hf(const Family& family, std::unique_ptr<Checkpoint> ckpt,
                               const LoadOptions& options) {
  TransformerConfig c = family.parse_hf_config(*ckpt);
  ModelInfo& m = c.info;

  // The precision from the stored type of every weight matrix the table names (those present; the first
  // expert's stands for its layer).
  std::vector<std::string> stored;
  for (const TensorSpec& spec : family.tensors) {
    if (!is_matrix(spec.role) || spec.role == TensorRole::kEmbedding) continue;
    // Up to the first missing one: n_layers may be anything before the tensors are checked against it.
    for (int64_t i = 0; i < (is_per_layer(spec.role) ? m.n_layers : 1); ++i) {
      if (!tensor_present(spec, c, is_per_layer(spec.role) ? i : -1)) continue;
      const TensorView* t = ckpt->find(tensor_name(spec.hf, i, 0));
      if (!t) break;
      stored.emplace_back(dtype_name(t->dtype));
    }
  }
  const ResolvedPrecision precision = resolve_precision(options.precision, stored);
  const ComputeType ct = precision.compute;
  m.precision = precision_of(ct);
  m.precision_reason = precision.reason;

  TransformerWeights w;
  PrecisionTally tally;
  // The embedding, then layer by layer, then the norm and the head: the order in which errors name the first
  // missing tensor.
  w.embedding =
      &ckpt->take(find_spec(family, TensorRole::kEmbedding).hf, tensor_shape(TensorRole::kEmbedding, c));
  for (int64_t i = 0; i < m.n_layers; ++i) {
    LayerWeights& L = w.layers.emplace_back(make_layer(c, i));
    for (const TensorSpec& spec : family.tensors) {
      if (!is_per_layer(spec.role) || !tensor_present(spec, c, i)) continue;
      const std::string name = tensor_name(spec.hf, i);
      const auto shape = tensor_shape(spec.role, c);
      if (spec.role == TensorRole::kQKV) {
        // Fused rows q | k | v: three Linears over row ranges of the one mapped tensor.
        const TensorView& t = ckpt->take(name, shape);
        const size_t row_bytes = static_cast<size_t>(shape[1]) * dtype_size(t.dtype);
        const auto ranges = split_qkv_rows(c);
        MatMul* parts[3] = {&L.q, &L.k, &L.v};
        for (int p = 0; p < 3; ++p)
          *parts[p] = make_linear(t.data + static_cast<size_t>(ranges[p].first) * row_bytes, t.dtype,
                                  ranges[p].count, shape[1], ct, options.layout, tally);
      } else if (std::vector<MatMul>* experts = layer_experts(L, spec.role)) {
        for (int64_t e = 0; e < c.moe.experts; ++e)
          (*experts)[e] = load_linear(*ckpt, tensor_name(spec.hf, i, e), shape, ct, options.layout, tally);
      } else if (MatMul* mat = layer_matrix(L, spec.role)) {
        // The router runs in f32 whatever the precision (LLaDA2MoeGate casts to float32).
        *mat = load_linear(*ckpt, name, shape, spec.role == TensorRole::kRouter ? ComputeType::kF32 : ct,
                           options.layout, tally);
      } else {
        *layer_vector(L, spec.role) = load_vector(*ckpt, name, shape);
      }
    }
  }
  w.final_norm = load_vector(*ckpt, find_spec(family, TensorRole::kOutputNorm).hf, {m.d_model});
  const std::string& head = find_spec(family, TensorRole::kHead).hf;
  const auto head_shape = tensor_shape(TensorRole::kHead, c);
  if (c.tied_head) {
    if (family.tied_head_may_be_stored && ckpt->has(head)) ckpt->take(head, head_shape);
    w.head = make_linear(w.embedding->data, w.embedding->dtype, head_shape[0], head_shape[1], ct,
                         options.layout, tally);
  } else {
    w.head = load_linear(*ckpt, head, head_shape, ct, options.layout, tally);
  }
  ckpt->check_all_used();
  m.precision_by_type = tally.result();

  m.n_params = count_params(family, c);
  auto model = std::make_shared<Transformer>(std::move(c), std::move(ckpt), std::move(w));
  if (options.backend != BackendKind::kCpu) {
    model->set_backend(make_backend(options.backend, options.device));
  } else if (options.layout == WeightLayout::kMappedThenBackground) {
    model->prepare_weights_in_background();
  }
  return model;
}

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options);  // gguf_loader.cpp

Expected<std::vector<LogitStats>> Model::forward_stats(const ForwardInput& input) {
  Expected<std::vector<float>> logits = forward(input);
  if (!logits) return Expected<std::vector<LogitStats>>::failure(logits.error());
  const int64_t vocab = info().vocab_size;
  std::vector<LogitStats> stats(logits->size() / static_cast<size_t>(vocab));
  logit_stats_host(logits->data(), static_cast<int64_t>(stats.size()), vocab, stats.data());
  return stats;
}

Expected<std::shared_ptr<Model>> Model::load(const std::string& path, const LoadOptions& options) {
  return capture([&]() -> std::shared_ptr<Model> {
    if (options.threads > 0) omp_set_num_threads(options.threads);
    if (is_gguf_file(path)) return load_gguf(path, options);
    if (options.weights == WeightFormat::kQ8)
      fail(path,
           ": 8-bit weights (WeightFormat::kQ8, --weights q8) need a GGUF file; convert the directory first: "
           "dllm convert -m DIR -o model-q8_0.gguf --type q8_0");
    auto checkpoint = std::make_unique<Checkpoint>(path);
    // An encoder / decoder pair with its own sampler, not the shared Transformer (model/diffusion_gemma.h).
    if (is_diffusion_gemma(checkpoint->config())) return load_diffusion_gemma(std::move(checkpoint), options);
    const Family& family = find_family(*checkpoint);
    return load_hf(family, std::move(checkpoint), options);
  });
}

}  // namespace dllm
