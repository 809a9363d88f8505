#include "convert/random_gguf.h"

#include <cstring>

#include "convert/gguf_convert_parts.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf_writer.h"
#include "model/diffusion_gemma.h"
#include "model/diffusion_gemma_tensors.h"

namespace dllm {

namespace {

// A cheap generator: billions of bytes for a 26B-parameter shape.
struct XorShift {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  void fill(uint8_t* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t v = next();
      std::memcpy(out + i, &v, 8);
    }
    for (; i < n; ++i) out[i] = static_cast<uint8_t>(next());
  }
  float uniform(float a) { return (static_cast<float>(next() >> 40) / 16777216.0f * 2 - 1) * a; }
};

// Random blocks of `type` with fixed scales, so that values spread about +-`amplitude`.
void random_blocks(GgmlType type, XorShift& rng, float amplitude, uint8_t* out, size_t bytes) {
  rng.fill(out, bytes);
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  const size_t blocks = bytes / info->block_bytes;
  auto half = [](float v) { return f32_to_f16(v); };
  for (size_t b = 0; b < blocks; ++b) {
    uint8_t* block = out + b * info->block_bytes;
    if (type == GgmlType::kQ8_0) {
      const uint16_t d = half(amplitude / 127);
      std::memcpy(block, &d, 2);
    } else if (type == GgmlType::kQ4_0) {
      const uint16_t d = half(amplitude / 8);
      std::memcpy(block, &d, 2);
    } else if (type == GgmlType::kQ4_K) {  // d, dmin, then 6-bit scales / mins and nibbles (random)
      const uint16_t d = half(amplitude / (15 * 63)), dmin = half(amplitude / (63 * 2));
      std::memcpy(block, &d, 2);
      std::memcpy(block + 2, &dmin, 2);
    }
  }
}

}  // namespace

ConvertResult write_random_diffusion_gemma_gguf(const nlohmann::json& config, GgmlType type,
                                                const std::string& path, uint64_t seed,
                                                const std::function<void(const ConvertProgress&)>& progress) {
  if (type != GgmlType::kF32 && type != GgmlType::kBF16 && type != GgmlType::kQ8_0 && type != GgmlType::kQ4_K)
    fail("a random DiffusionGemma file holds f32, bf16, q8_0 or q4_k matrices, not ",
         convert_parts::type_name(type));
  const Checkpoint described("random", config, nlohmann::json::object());
  const DiffusionGemmaConfig c = parse_diffusion_gemma_config(described);
  const auto names = diffusion_gemma_gguf_names(c.info.n_layers);
  struct Entry {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    bool matrix;
    float fill;  // vectors: the constant value (norms, scales)
  };
  std::vector<Entry> entries;
  ConvertResult result;
  result.architecture = kDiffusionGemmaArchitecture;
  for (const auto& [hf, shape] : diffusion_gemma_tensor_shapes(c)) {
    std::vector<int64_t> dims(shape.rbegin(), shape.rend());
    const std::string& name = names.at(hf);
    const bool matrix = shape.size() >= 2 && name.find("ffn_gate_inp") == std::string::npos;
    GgmlType t = GgmlType::kF32;
    if (matrix) {
      t = convert_parts::weight_type(type, dims[0]);
      if (t != type) result.fallbacks.push_back({name, type, t, dims[0]});
    }
    entries.push_back({name, dims, t, shape.size() >= 2, 1.0f});
  }
  GgufWriter w;
  const std::string a = std::string(kDiffusionGemmaArchitecture) + ".";
  w.set_string("general.architecture", kDiffusionGemmaArchitecture);
  w.set_string("general.type", "model");
  w.set_string("general.name", "random " + std::to_string(c.info.n_layers) + "-layer DiffusionGemma");
  w.set_uint32("general.file_type", convert_parts::file_type_of(type));
  w.set_uint32("general.quantization_version", 2);
  w.set_uint32(a + "block_count", static_cast<uint32_t>(c.info.n_layers));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(c.info.d_model));
  w.set_uint32(a + "expert_count", static_cast<uint32_t>(c.info.n_experts));
  w.set_uint32(a + "expert_used_count", static_cast<uint32_t>(c.info.n_experts_used));
  w.set_string(kDiffusionGemmaConfigKey, config.dump());
  std::vector<std::string> tensor_names;
  std::vector<GgmlType> types;
  for (const auto& e : entries) {
    w.add_tensor(e.name, e.dims, e.type);
    tensor_names.push_back(e.name);
    types.push_back(e.type);
  }
  XorShift rng{seed * 2654435761u + 88172645463325252ull};
  convert_parts::write_tensors(
      w, path, tensor_names, types,
      [&](size_t i, uint8_t* out) {
        const Entry& e = entries[i];
        const size_t bytes = w.tensor_bytes(i);
        // Matrices spread like a trained checkpoint's (about 1/sqrt(fan_in)); vectors constant.
        const float amplitude = e.matrix ? 1.7f / std::sqrt(static_cast<float>(e.dims[0])) : 0;
        if (e.type == GgmlType::kQ8_0 || e.type == GgmlType::kQ4_0 || e.type == GgmlType::kQ4_K) {
          random_blocks(e.type, rng, amplitude, out, bytes);
        } else if (e.type == GgmlType::kBF16) {
          auto* v = reinterpret_cast<uint16_t*>(out);
          for (size_t j = 0; j < bytes / 2; ++j) v[j] = f32_to_bf16(rng.uniform(amplitude));
        } else {
          auto* v = reinterpret_cast<float*>(out);
          for (size_t j = 0; j < bytes / 4; ++j) v[j] = e.matrix ? rng.uniform(amplitude) : e.fill;
        }
      },
      progress, result);
  return result;
}

}  // namespace dllm
