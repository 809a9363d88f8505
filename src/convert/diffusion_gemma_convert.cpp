// DiffusionGemma's directory -> GGUF. The tensors take llama.cpp-style names
// (model/diffusion_gemma_tensors.h); the metadata holds llama.cpp's usual keys for the sizes (for tools that
// list them) and the directory's own config.json and generation_config.json as JSON text, which the loader
// reads with the directory's parser. 1-D tensors and the router stay F32; the other matrices (the stacked
// experts too, row by row) get the requested type with the usual fallback where rows are not whole blocks.
#include <filesystem>

#include "convert/gguf_convert_parts.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "model/diffusion_gemma.h"
#include "model/diffusion_gemma_tensors.h"

namespace dllm {

namespace {

struct Entry {
  std::string name;           // GGUF name
  const TensorView* source;   // the HF tensor
  std::vector<int64_t> dims;  // ggml order
  GgmlType type;
};

}  // namespace

ConvertResult convert_diffusion_gemma(Checkpoint& ck, const std::string& out_path, GgmlType type,
                                      const std::function<void(const ConvertProgress&)>& progress) {
  // The loader first: convert refuses what the loader refuses (the config, and every tensor's shape).
  LoadOptions check;
  check.layout = WeightLayout::kMapped;
  check.precision = Precision::kF32;
  Model::load(ck.dir(), check).value();
  const DiffusionGemmaConfig c = parse_diffusion_gemma_config(ck);
  const ModelInfo& m = c.info;

  ConvertResult result;
  result.architecture = kDiffusionGemmaArchitecture;
  std::vector<Entry> entries;
  const auto names = diffusion_gemma_gguf_names(m.n_layers);
  // llama.cpp's file order: the whole-model tensors, then layer by layer (the map's order is by HF name).
  auto add = [&](const std::string& hf) {
    const TensorView* t = ck.find(hf);
    if (!t) return;  // v_proj on full layers (K = V)
    ck.take(hf, t->shape);
    const std::string& name = names.at(hf);
    std::vector<int64_t> dims(t->shape.rbegin(), t->shape.rend());
    const bool matrix = t->shape.size() >= 2 && name.find("ffn_gate_inp") == std::string::npos;
    GgmlType written = GgmlType::kF32;
    if (matrix) {
      written = convert_parts::weight_type(type, dims[0]);
      if (written != type) result.fallbacks.push_back({name, type, written, dims[0]});
    }
    entries.push_back({name, t, dims, written});
  };
  for (const auto& [hf, gguf] : names)
    if (gguf.rfind("blk.", 0) != 0 && gguf.rfind("enc.", 0) != 0) add(hf);
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".", enc = "enc." + blk;
    for (const auto& [hf, gguf] : names)
      if (gguf.rfind(blk, 0) == 0 || gguf.rfind(enc, 0) == 0) add(hf);
  }
  ck.skip_prefixed("model.encoder.vision_tower.");
  ck.skip_prefixed("model.encoder.embed_vision.");
  ck.check_all_used();

  GgufWriter w;
  const std::string a = std::string(kDiffusionGemmaArchitecture) + ".";
  w.set_string("general.architecture", kDiffusionGemmaArchitecture);
  w.set_string("general.type", "model");
  w.set_string("general.name", std::filesystem::path(ck.dir()).filename().string());
  w.set_uint32("general.file_type", convert_parts::file_type_of(type));
  w.set_uint32("general.quantization_version", 2);
  w.set_uint32(a + "block_count", static_cast<uint32_t>(m.n_layers));
  w.set_uint32(a + "context_length", static_cast<uint32_t>(m.max_seq_len));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(m.d_model));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(m.ffn_hidden));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(m.n_heads));
  w.set_uint32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  w.set_float32(a + "attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_uint32(a + "expert_count", static_cast<uint32_t>(m.n_experts));
  w.set_uint32(a + "expert_used_count", static_cast<uint32_t>(m.n_experts_used));
  w.set_uint32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.expert_ffn));
  w.set_float32(a + "final_logit_softcapping", c.softcap);
  w.set_uint32(a + "vocab_size", static_cast<uint32_t>(m.vocab_size));
  w.set_uint32("diffusion.canvas_length", static_cast<uint32_t>(c.canvas_length));
  w.set_string(kDiffusionGemmaConfigKey, ck.config().dump());
  if (!ck.generation_config().empty())
    w.set_string(kDiffusionGemmaGenerationKey, ck.generation_config().dump());
  static const Family kVocabulary = [] {  // the vocabulary's conventions: Gemma adds BOS
    Family f;
    f.name = kDiffusionGemmaArchitecture;
    f.add_bos = true;
    return f;
  }();
  convert_parts::HfModel hf;
  hf.family = &kVocabulary;
  hf.config.info = m;
  convert_parts::write_tokenizer(w, ck.dir(), hf);

  std::vector<std::string> tensor_names;
  std::vector<GgmlType> types;
  for (const auto& e : entries) {
    w.add_tensor(e.name, e.dims, e.type);
    tensor_names.push_back(e.name);
    types.push_back(e.type);
  }
  std::vector<float> f32;
  convert_parts::write_tensors(
      w, out_path, tensor_names, types,
      [&](size_t i, uint8_t* out) {
        const Entry& e = entries[i];
        f32.resize(static_cast<size_t>(e.source->numel()));
        convert_to_f32(e.source->dtype, e.source->data, f32.data(), f32.size());
        quant::quantize(e.type, f32.data(), out, e.source->numel());
      },
      progress, result);
  return result;
}

}  // namespace dllm
