// Hugging Face checkpoint directories -> the shared Transformer, driven by the family's description
// (model/family.h): its config parser, then its tensor table. Matrices are used in place from the mapped
// safetensors (packed once by Linear), vectors converted to f32.
#include <omp.h>

#include "core/error.h"
#include "io/gguf.h"
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

Linear load_linear(Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape,
                   ComputeType compute) {
  const TensorView& t = ckpt.take(name, shape);
  return Linear(t.data, t.dtype, shape[0], shape[1], compute);
}

}  // namespace

std::shared_ptr<Model> load_hf(const Family& family, std::unique_ptr<Checkpoint> ckpt,
                               const LoadOptions& options) {
  TransformerConfig c = family.parse_hf_config(*ckpt);
  ModelInfo& m = c.info;

  // The precision from the stored type of every weight matrix the table names (those present).
  std::vector<std::string> stored;
  for (const TensorSpec& spec : family.tensors) {
    if (!is_matrix(spec.role) || spec.role == TensorRole::kEmbedding || !tensor_present(spec, c)) continue;
    // Up to the first missing one: n_layers may be anything before the tensors are checked against it.
    for (int64_t i = 0; i < (is_per_layer(spec.role) ? m.n_layers : 1); ++i) {
      const TensorView* t = ckpt->find(tensor_name(spec.hf, i));
      if (!t) break;
      stored.emplace_back(dtype_name(t->dtype));
    }
  }
  const ResolvedPrecision precision = resolve_precision(options.precision, stored);
  const ComputeType ct = precision.compute;
  m.precision = ct == ComputeType::kF32 ? Precision::kF32 : Precision::kBF16;
  m.precision_reason = precision.reason;

  TransformerWeights w;
  // The embedding, then layer by layer, then the norm and the head: the order in which errors name the first
  // missing tensor.
  w.embedding =
      &ckpt->take(find_spec(family, TensorRole::kEmbedding).hf, tensor_shape(TensorRole::kEmbedding, c));
  for (int64_t i = 0; i < m.n_layers; ++i) {
    LayerWeights& L = w.layers.emplace_back();
    for (const TensorSpec& spec : family.tensors) {
      if (!is_per_layer(spec.role) || !tensor_present(spec, c)) continue;
      const std::string name = tensor_name(spec.hf, i);
      if (MatMul* mat = layer_matrix(L, spec.role))
        *mat = load_linear(*ckpt, name, tensor_shape(spec.role, c), ct);
      else
        *layer_vector(L, spec.role) = load_vector(*ckpt, name, tensor_shape(spec.role, c));
    }
  }
  w.final_norm = load_vector(*ckpt, find_spec(family, TensorRole::kOutputNorm).hf, {m.d_model});
  const std::string& head = find_spec(family, TensorRole::kHead).hf;
  const auto head_shape = tensor_shape(TensorRole::kHead, c);
  if (c.tied_head) {
    if (family.tied_head_may_be_stored && ckpt->has(head)) ckpt->take(head, head_shape);
    w.head = Linear(w.embedding->data, w.embedding->dtype, head_shape[0], head_shape[1], ct);
  } else {
    w.head = load_linear(*ckpt, head, head_shape, ct);
  }
  ckpt->check_all_used();

  m.n_params = count_params(family, c);
  return std::make_shared<Transformer>(std::move(c), std::move(ckpt), std::move(w));
}

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options);  // gguf_loader.cpp

Expected<std::shared_ptr<Model>> Model::load(const std::string& path, const LoadOptions& options) {
  return capture([&]() -> std::shared_ptr<Model> {
    if (options.threads > 0) omp_set_num_threads(options.threads);
    if (is_gguf_file(path)) return load_gguf(path, options);
    if (options.weights == WeightFormat::kQ8)
      fail(path,
           ": 8-bit weights (WeightFormat::kQ8, --weights q8) need a GGUF file; convert the directory first: "
           "dllm convert -m DIR -o model-q8_0.gguf --type q8_0");
    auto checkpoint = std::make_unique<Checkpoint>(path);
    const Family& family = find_family(*checkpoint);
    return load_hf(family, std::move(checkpoint), options);
  });
}

}  // namespace dllm
