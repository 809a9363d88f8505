// `dllm convert`: write a Hugging Face LLaDA / Dream directory as a GGUF file that llama.cpp and dllm both load.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "io/gguf_convert.h"

namespace dllm::cli {
namespace {

struct ConvertOptions {
  std::string model, out, type = "f16";
  bool quiet = false;
};

void run_convert(const ConvertOptions& o) {
  const GgmlType type = parse_gguf_type(o.type);
  auto bar = [&](const ConvertProgress& p) {
    if (o.quiet) return;
    constexpr int kWidth = 30;
    const double frac = p.total_bytes ? static_cast<double>(p.bytes) / static_cast<double>(p.total_bytes) : 1.0;
    const int fill = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% %zu/%zu tensors %-28.28s", fill, "==============================",
                 kWidth - fill, "", static_cast<int>(frac * 100), p.tensor, p.tensors, p.name.c_str());
    std::fflush(stderr);
  };
  const ConvertResult r = convert_hf_to_gguf(o.model, o.out, type, bar);
  if (!o.quiet) {
    std::fprintf(stderr, "\n");
    std::fprintf(stderr, "dllm: wrote %s (%s, %zu tensors, %.1f MB, type %s", o.out.c_str(), r.architecture.c_str(),
                 r.tensors, static_cast<double>(r.bytes) / 1e6, o.type.c_str());
    if (r.fallback_tensors)
      std::fprintf(stderr, "; %zu weights in a fallback type: rows not a multiple of the block size",
                   r.fallback_tensors);
    std::fprintf(stderr, ")\n");
  }
}

void setup(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face model directory to GGUF (llama.cpp layout)");
  cmd->add_option("-m,--model", o->model, "Model directory (Hugging Face layout)")->required();
  cmd->add_option("-o,--out", o->out, "Output .gguf file")->required();
  cmd->add_option("--type", o->type,
                  "Type of the 2-D weights: f32 | f16 | bf16 | q8_0 | q4_0 | q4_k | q6_k (norms stay f32; rows that "
                  "are not whole blocks fall back: q4_k -> q4_0 -> f16, q8_0 / q6_k -> f16)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  cmd->callback([o] { run_convert(*o); });
}

RegisterCommand registration("convert", setup);

}  // namespace
}  // namespace dllm::cli
